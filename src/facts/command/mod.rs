//! Facts about a shell command, for the command gate: every program it
//! would run (wrappers seen through), their classes, whether every write
//! stays inside the root, and whether anything could not be seen. Nothing
//! here runs anything.

mod arithmetic;
mod compare;
mod continuation;
mod description;
mod floor;
mod git_config;
mod git_index;
mod git_reads;
mod git_revisions;
mod globs;
mod kind;
mod node;
mod parse;
mod pattern;
mod places;
mod quote;
mod secret_words;
mod table;
mod table_file;
mod tree;
mod unwrap;
pub use continuation::join as join_continuations;
mod values;
mod walk;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use compare::{Loosening, loosenings as command_loosenings};
pub use floor::BUILTIN_TABLE as BUILTIN_COMMAND_TABLE;
pub use globs::braces as brace_alternatives;
pub use parse::{KNOWN_NODE_KINDS, MAX_COMMAND_BYTES};
pub use quote::shell_quote;
pub use table::{Assignment, CommandClassError, CommandClasses, ENV_CHANGE, WRITES_FILES};
use unwrap::OPAQUE;
pub use walk::{MAX_WALK_ENTRIES, Reach, reach as walk_reach};

use super::paths::Root;
use super::tool_call::HARDLINKED;
use git_reads::global_options;
use places::{Leads, Paths};
use unwrap::{Run, Unwrapped, unwrap_source};
use values::Expanded;

/// Redirection targets that are not files.
const DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/stdin",
    "/dev/tty",
];
/// Redirections to these are network connections made by the shell itself.
const SOCKETS: [&str; 2] = ["/dev/tcp/", "/dev/udp/"];
/// The class of a network connection.
const NETWORK: &str = "network";
/// The class of a program whose words expand to something the gate cannot
/// see: a variable from the environment, or data used as a name.
pub const UNKNOWN_VALUE: &str = "unknown_value";

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CommandError {
    #[error("the command is empty")]
    Empty,
    #[error("the command is longer than {MAX_COMMAND_BYTES} bytes")]
    TooLong,
    #[error("the command contains a NUL byte")]
    Nul,
}

/// One program the command would run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandPart {
    pub argv: Vec<String>,
    pub program: String,
    pub classes: BTreeSet<String>,
}

/// The facts of a command (schema type `Portcullis::CommandFacts`, less
/// the approval fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandFacts {
    pub classes: BTreeSet<String>,
    pub programs: BTreeSet<String>,
    pub writes_inside_root: bool,
    /// Some file the command writes (a redirect, an output option) lies in
    /// version-control metadata.
    #[serde(default)]
    pub writes_vcs_metadata: bool,
    /// Some file the command reads or writes by a redirect or an output
    /// option lies in version-control metadata.
    #[serde(default)]
    pub touches_vcs_metadata: bool,
    pub opaque: bool,
    pub parts: Vec<CommandPart>,
}

/// Judges `source` as run in `cwd` (inside or outside `root`).
pub fn command_facts(
    source: &str,
    cwd: &Path,
    root: &Root,
    table: &CommandClasses,
) -> Result<CommandFacts, CommandError> {
    refuse_input(source)?;
    let unwrapped = unwrap_whole(source);
    let mut facts = CommandFacts {
        classes: BTreeSet::new(),
        programs: BTreeSet::new(),
        writes_inside_root: true,
        writes_vcs_metadata: false,
        touches_vcs_metadata: false,
        opaque: unwrapped.opaque,
        parts: Vec::new(),
    };
    let paths = Paths::new(
        cwd,
        root,
        unwrapped.changes_directory,
        &unwrapped.directories,
    );
    let mut writes: Vec<Option<String>> = unwrapped.writes.clone();
    let home = root.home().map(Path::to_path_buf);
    let glob_cwd = (!unwrapped.changes_directory).then_some(cwd);
    let mut walks = Vec::new();
    for run in &unwrapped.runs {
        let judged = judge_run(run, &unwrapped, table, &paths, glob_cwd, home.as_deref());
        walks.extend(judged.walks);
        writes.extend(judged.writes);
        facts.opaque |= judged.opaque;
        facts.classes.extend(judged.classes.iter().cloned());
        facts.programs.insert(run.program.clone());
        let mut argv = vec![run.program.clone()];
        argv.extend(run.args.iter().cloned());
        facts.parts.push(CommandPart {
            argv,
            program: run.program.clone(),
            classes: judged.classes,
        });
    }
    if !facts.parts.is_empty() {
        facts.programs.extend(unwrapped.wrappers.iter().cloned());
    }
    judge_named_words(
        &unwrapped,
        table,
        &paths,
        glob_cwd,
        home.as_deref(),
        &mut facts,
    );
    judge_walks(&walks, &paths, table, &mut facts);
    judge_assignments(&unwrapped, table, &mut facts);
    // A pattern in a write's target is expanded by the shell too
    // (`echo x > .gi?/config` writes `.git/config`).
    let writes = expand_targets(&writes, glob_cwd, home.as_deref());
    let reads = expand_targets(&unwrapped.reads, glob_cwd, home.as_deref());
    judge_files(&writes, &reads, &paths, &mut facts);
    if facts.parts.is_empty() && !facts.opaque {
        // Only assignments, comments or empty groups: nothing to run,
        // but nothing seen either.
        facts.opaque = true;
    }
    if facts.opaque {
        facts.classes.insert(OPAQUE.to_owned());
    }
    Ok(facts)
}

/// A command the gate does not take as input at all.
fn refuse_input(source: &str) -> Result<(), CommandError> {
    if source.trim().is_empty() {
        return Err(CommandError::Empty);
    }
    if source.len() > MAX_COMMAND_BYTES {
        return Err(CommandError::TooLong);
    }
    if source.contains('\0') {
        return Err(CommandError::Nul);
    }
    Ok(())
}

/// The command as bash reads it, wrappers seen through: its lines joined
/// where they continue, and opaque where that or its arithmetic cannot be
/// read as bash reads it.
fn unwrap_whole(source: &str) -> Unwrapped {
    let joined = continuation::join(source);
    let mut unwrapped = Unwrapped::default();
    unwrap_source(joined.as_deref().unwrap_or(source), 0, &mut unwrapped);
    // A continuation the gate cannot join as bash does: nothing it reads
    // of the command can be trusted to be what bash runs.
    unwrapped.opaque |= joined.is_none();
    unwrapped.opaque |= arithmetic::may_run_commands(joined.as_deref().unwrap_or(source));
    unwrapped
}

/// What one program run is judged to do.
struct JudgedRun {
    classes: BTreeSet<String>,
    walks: Vec<description::WalkScope>,
    writes: Vec<Option<String>>,
    opaque: bool,
}

/// Judges one run: its words by the table as written and with each
/// pattern as the shell expands it, each operand that is a link by what it
/// points at, values it cannot see, and a name the text defines.
fn judge_run(
    run: &Run,
    unwrapped: &Unwrapped,
    table: &CommandClasses,
    paths: &Paths<'_>,
    glob_cwd: Option<&Path>,
    home: Option<&Path>,
) -> JudgedRun {
    let mut judged = JudgedRun {
        classes: run.extra.iter().cloned().collect(),
        walks: Vec::new(),
        writes: Vec::new(),
        opaque: false,
    };
    let expansions = expand_patterns(run, table, paths, glob_cwd, home, &mut judged);
    let mut looks = HashMap::new();
    for args in std::iter::once(&run.args).chain(&expansions) {
        judge_words(&run.name, args, (table, paths), &mut looks, &mut judged);
    }
    // A function or alias of that name: not the program.
    if unwrapped.defined.contains(&run.name) || unwrapped.defined.contains(&run.program) {
        judged.classes.insert(OPAQUE.to_owned());
        judged.opaque = true;
    }
    // An operand that is a link, or lies under one, is judged by what
    // it points at too: `cat docs/envlink` reads `.env`. A word that looks
    // like an option may be an operand all the same (after `--`, or with
    // `POSIXLY_CORRECT` set): `cat -- -x` reads the file `-x`.
    for arg in &run.args {
        judged.classes.extend(linked_classes(arg, paths, table));
        if let Some((_, value)) = arg.split_once('=').filter(|_| arg.starts_with('-')) {
            judged.classes.extend(linked_classes(value, paths, table));
        }
    }
    let unseen = run.expanded.iter().any(|value| match value {
        Expanded::Environment(name) => !table.readable(name),
        Expanded::Data => !table.takes_free_words(&run.name),
        Expanded::Unknown => true,
    });
    if unseen {
        judged.classes.insert(UNKNOWN_VALUE.to_owned());
    }
    judged
}

/// One reading of a run's words: by the table, and a git read by the
/// configuration it reads and the tracked files it prints. Readings with
/// the same global options read the same repositories, and they are looked
/// for once (`looks`): a pattern may become a thousand words.
fn judge_words<'a>(
    name: &str,
    args: &'a [String],
    (table, paths): (&CommandClasses, &Paths<'_>),
    looks: &mut HashMap<&'a [String], git_reads::Look>,
    judged: &mut JudgedRun,
) {
    let inside_root = |folder: &str| paths.inside_root(folder);
    let classified = table.classify(name, args, &inside_root);
    let git_read = name == "git" && classified.classes.contains("vcs_read");
    let may_read_history = classified.reads_history
        || classified.reads_notes
        || !classified.revision_operands.is_empty();
    if git_read || classified.reads_tracked || may_read_history {
        let look = looks
            .entry(global_options(args))
            .or_insert_with(|| git_reads::look(args, paths));
        // What a read prints from history (`git show`, `git diff HEAD~3`)
        // may be any file ever committed: the gate reads no objects, so it
        // is not proven.
        let mut unproven = (classified.reads_history && look.finds_a_repository())
            || (classified.reads_notes && look.may_show_notes())
            || classified
                .revision_operands
                .iter()
                .any(|word| look.may_name_a_revision(word));
        // A git read runs what a repository's configuration names (a
        // pager, a driver, an fsmonitor): proven only when none does. It
        // reads the files they name, as a command that names them would.
        if git_read {
            unproven |= look.runs_a_program();
            for file in look.files() {
                judged
                    .classes
                    .extend(table.classify_word(&file.to_string_lossy()));
            }
        }
        if classified.reads_tracked {
            let tracked = look.tracked(table);
            judged.classes.extend(tracked.classes);
            unproven |= tracked.unproven;
        }
        if unproven {
            judged.classes.insert(OPAQUE.to_owned());
            judged.opaque = true;
        }
    }
    judged.classes.extend(classified.classes);
    judged.walks.extend(classified.walks);
    judged
        .writes
        .extend(classified.writes.into_iter().map(Some));
}

/// The run's words with each pattern as the shell turns it into words:
/// one list for each word a pattern becomes. A pattern the gate cannot
/// expand, or one that reaches outside the root, leaves the run opaque.
fn expand_patterns(
    run: &Run,
    table: &CommandClasses,
    paths: &Paths<'_>,
    glob_cwd: Option<&Path>,
    home: Option<&Path>,
    judged: &mut JudgedRun,
) -> Vec<Vec<String>> {
    let mut expansions = Vec::new();
    for (index, arg) in run.args.iter().enumerate() {
        match globs::expand(arg, glob_cwd, home) {
            globs::Expansion::Plain => {}
            globs::Expansion::Unknown => {
                judged.classes.insert(OPAQUE.to_owned());
                judged.opaque = true;
            }
            globs::Expansion::Words(words) => {
                for word in words.iter().filter(|w| *w != arg) {
                    judged.classes.extend(linked_classes(word, paths, table));
                    let mut args = run.args.clone();
                    args[index].clone_from(word);
                    expansions.push(args);
                    if !paths.resolve(word).is_some_and(|r| r.inside_root) {
                        // A pattern that reaches outside the root.
                        judged.classes.insert(OPAQUE.to_owned());
                        judged.opaque = true;
                    }
                }
            }
        }
    }
    expansions
}

/// Words named outside the commands' arguments (redirect sources, assigned
/// values, `for` lists), and the words their patterns expand to, judged by
/// the rules that apply whatever the program.
fn judge_named_words(
    unwrapped: &Unwrapped,
    table: &CommandClasses,
    paths: &Paths<'_>,
    glob_cwd: Option<&Path>,
    home: Option<&Path>,
    facts: &mut CommandFacts,
) {
    let named = unwrapped
        .named_words
        .iter()
        .chain(unwrapped.reads.iter().flatten());
    for word in named {
        facts.classes.extend(table.classify_word(word));
        facts.classes.extend(linked_classes(word, paths, table));
        match globs::expand(word, glob_cwd, home) {
            globs::Expansion::Plain => {}
            globs::Expansion::Unknown => facts.opaque = true,
            globs::Expansion::Words(words) => {
                for expanded in words.iter().filter(|w| *w != word) {
                    facts.classes.extend(table.classify_word(expanded));
                    facts.classes.extend(linked_classes(expanded, paths, table));
                }
            }
        }
    }
}

/// The classes of the file `word` leads to through a link, if it names
/// one: `cat < envlink`, `cat e*` and `cat -- -x` read `.env` as surely as
/// `cat .env` does, however the shell came to the word. A file with
/// another name is `hardlinked`: that name may be a secret's, as the
/// built-in tools judge it.
fn linked_classes(word: &str, paths: &Paths<'_>, table: &CommandClasses) -> BTreeSet<String> {
    if word.is_empty() {
        return BTreeSet::new();
    }
    match paths.leads(word) {
        Leads::To {
            targets,
            hardlinked,
        } => {
            let mut classes: BTreeSet<String> = targets
                .iter()
                .flat_map(|target| table.classify_word(target))
                .collect();
            if hardlinked {
                classes.insert(HARDLINKED.to_owned());
            }
            classes
        }
        Leads::Unknown => BTreeSet::from([OPAQUE.to_owned()]),
    }
}

/// Targets as the shell may turn them into files: a pattern is each word
/// it expands to (itself when nothing matches); one that cannot be
/// expanded here is unknown.
fn expand_targets(
    targets: &[Option<String>],
    cwd: Option<&Path>,
    home: Option<&Path>,
) -> Vec<Option<String>> {
    let mut out = Vec::with_capacity(targets.len());
    for target in targets {
        let Some(word) = target else {
            out.push(None);
            continue;
        };
        match globs::expand(word, cwd, home) {
            globs::Expansion::Plain => out.push(Some(word.clone())),
            globs::Expansion::Unknown => out.push(None),
            globs::Expansion::Words(words) => out.extend(words.into_iter().map(Some)),
        }
    }
    out
}

/// The trees a command reads every file of (`grep -r`, `rg`, `find
/// -exec`): each entry's path is judged by the rules that apply whatever
/// the program, so a secret in the tree is read as surely as one named. A
/// folder that cannot be placed (after a `cd`) or a tree too large to look
/// through is opaque.
fn judge_walks(
    walks: &[description::WalkScope],
    paths: &Paths<'_>,
    table: &CommandClasses,
    facts: &mut CommandFacts,
) {
    let mut budget = walk::MAX_WALK_ENTRIES;
    for scope in walks {
        let mut folders = Vec::new();
        for operand in &scope.operands {
            if operand == parse::UNQUOTED_EXPANSION || parse::is_quoted_expansion(operand) {
                // A folder named by a value the gate cannot read.
                facts.opaque = true;
                continue;
            }
            match paths.resolve(operand) {
                Some(resolved) if resolved.canonical.is_dir() => folders.push(resolved.canonical),
                Some(_) => {}
                None => facts.opaque = true,
            }
        }
        // `grep -r PATTERN` and `rg PATTERN` read the current folder; with
        // one operand, it may be the pattern (`grep -rn src` reads `.`,
        // even where a folder `src` exists) or, after `-e`, a folder: both
        // are read. A listing's operands are all folders (`du` alone lists
        // the current one).
        let current = if scope.names_only {
            scope.operands.is_empty()
        } else {
            scope.operands.len() <= 1
        };
        if current {
            match paths.resolve(".") {
                Some(resolved) => folders.push(resolved.canonical),
                None => facts.opaque = true,
            }
        }
        let mut found = BTreeSet::new();
        let reached = walk::reach(
            &folders,
            scope.everything,
            scope.names_only,
            &scope.globs,
            &mut |path| found.extend(table.classify_word(path)),
            &mut budget,
        );
        facts.classes.extend(found);
        if reached.hardlinked.is_some() {
            facts.classes.insert(HARDLINKED.to_owned());
        }
        if !reached.whole {
            facts.opaque = true;
        }
    }
}

/// Variable assignments in any form: harmless ones pass, the rest change
/// what the command means (`env_change`), and those that change what runs
/// or loads make it opaque.
fn judge_assignments(unwrapped: &Unwrapped, table: &CommandClasses, facts: &mut CommandFacts) {
    for name in &unwrapped.assignments {
        match table.assignment(name) {
            Assignment::Harmless => {}
            Assignment::Change => {
                facts.classes.insert(ENV_CHANGE.to_owned());
            }
            Assignment::Loading => {
                facts.classes.insert(ENV_CHANGE.to_owned());
                facts.opaque = true;
            }
        }
    }
}

/// Files the command writes (redirects, output options) and reads by
/// redirect: writes are judged by the same path facts as `write_file`.
fn judge_files(
    writes: &[Option<String>],
    reads: &[Option<String>],
    paths: &Paths<'_>,
    facts: &mut CommandFacts,
) {
    let mut network = false;
    for (target, written) in writes
        .iter()
        .map(|w| (w, true))
        .chain(reads.iter().map(|r| (r, false)))
    {
        let Some(target) = target else {
            facts.opaque = true;
            continue;
        };
        if DEVICES.contains(&target.as_str()) {
            continue;
        }
        if SOCKETS.iter().any(|s| target.starts_with(s)) {
            network = true;
            continue;
        }
        if written {
            facts.classes.insert(WRITES_FILES.to_owned());
        }
        match paths.resolve(target) {
            Some(resolved) => {
                facts.touches_vcs_metadata |= resolved.in_vcs_metadata;
                if written {
                    facts.writes_inside_root &= resolved.inside_root;
                    facts.writes_vcs_metadata |= resolved.in_vcs_metadata;
                }
            }
            None => {
                facts.opaque = true;
                if written {
                    facts.writes_vcs_metadata |= paths.moved_into_vcs;
                    facts.touches_vcs_metadata |= paths.moved_into_vcs;
                    facts.writes_inside_root &= !paths.moved_outside;
                }
            }
        }
    }
    if network {
        facts.classes.insert(NETWORK.to_owned());
    }
}
