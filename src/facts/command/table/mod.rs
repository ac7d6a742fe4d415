//! The command table (`policies/commands.toml`): which classes a program
//! with its arguments falls in. The security team edits it; a new class or
//! a new read-only program needs no Rust.
//!
//! Two kinds of entry, because allow and deny need different evidence:
//! - `[[program]]` is a closed description of a program's harmless uses.
//!   Its class (e.g. `read_only`) is given only when every word fits; that
//!   is the proof the allow policies rest on. It also names the options and
//!   operands that are files the program writes.
//! - `[[rule]]` adds a class when a regex matches (destructive, network,
//!   ...). Rules can only make a command stricter, so they may not give
//!   the proven classes.
//!
//! `[globals.PROGRAM]` lists the options a program takes before its
//! subcommand (`git -C DIR log`), and `[environment]` says which variable
//! assignments are harmless and which change what runs or loads.

mod entries;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use super::pattern::{Pattern, PatternSet};
use globset::GlobSet;
use thiserror::Error;

use super::description::{Description, WalkScope};
use super::floor::{self, BUILTIN_TABLE};
use super::table_file::TableFile;
use entries::{Checks, description, environment, rule};

/// The class of a command no rule or description gives a class.
pub const UNKNOWN: &str = "unknown";
/// The class of a command that writes a file it names.
pub const WRITES_FILES: &str = "writes_files";
/// The class of an assignment to a variable the table does not call
/// harmless.
pub const ENV_CHANGE: &str = "env_change";
/// Classes that allow: only a closed description may give them.
pub const PROVEN_CLASSES: [&str; 2] = ["read_only", "vcs_read"];

#[derive(Debug, Error)]
pub enum CommandClassError {
    #[error("{file}: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: {entry} {index} (class `{class}`): {field}: {message}")]
    BadRegex {
        file: String,
        entry: &'static str,
        index: usize,
        class: String,
        field: &'static str,
        message: String,
    },
    #[error(
        "{file}: {entry} {index}: the class name `{class}` must be a lower-case identifier (a-z, 0-9, _)"
    )]
    BadName {
        file: String,
        entry: &'static str,
        index: usize,
        class: String,
    },
    #[error(
        "{file}: rule {index}: a [[rule]] may not give `{class}`; allow classes come only from a \
         [[program]] description that lists every harmless option (see docs/command-gate.md)"
    )]
    UnprovenAllow {
        file: String,
        index: usize,
        class: String,
    },
    #[error("{file}: program {index}: {message}")]
    BadProgram {
        file: String,
        index: usize,
        message: String,
    },
    /// A team's table takes from what the built-in one knows.
    #[error("{file}: {entry} {message}")]
    Floor {
        file: String,
        entry: String,
        message: String,
    },
    #[error("{file}: environment: pattern `{pattern}`: {message}")]
    BadVariable {
        file: String,
        pattern: String,
        message: String,
    },
}

#[derive(Debug, Clone)]
struct Rule {
    class: String,
    program: Pattern,
    args: Option<Pattern>,
    unless_args: Option<Pattern>,
}

#[derive(Debug, Clone, Default)]
struct Globals {
    options: HashSet<String>,
    safe: HashSet<String>,
    inside_root: HashSet<String>,
    works_in: HashSet<String>,
}

#[derive(Debug, Clone)]
struct Environment {
    harmless: GlobSet,
    loading: GlobSet,
    /// Variables whose value may be shown and used (`HOME`, `PWD`), though
    /// assigning them may not be harmless.
    readable: GlobSet,
    lowercase_harmless: bool,
}

impl Default for Environment {
    fn default() -> Self {
        Self {
            harmless: GlobSet::empty(),
            loading: GlobSet::empty(),
            readable: GlobSet::empty(),
            lowercase_harmless: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct CommandClasses {
    rules: Vec<Rule>,
    /// Every rule's program pattern, matched in one pass.
    programs_of_rules: PatternSet,
    /// The rules that name no program in particular (their pattern takes
    /// the empty name too): they judge words wherever they stand.
    word_rules: Vec<usize>,
    programs: HashMap<String, Vec<Description>>,
    globals: HashMap<String, Globals>,
    environment: Environment,
    names: BTreeSet<String>,
    /// The built-in table, judging beside a team's that differs from it
    /// (`floor.rs`); `None` for the built-in table itself and for a table
    /// recorded in an audit snapshot.
    floor: Option<Arc<CommandClasses>>,
}

/// What the table makes of one program with its arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Classified {
    pub classes: BTreeSet<String>,
    /// Files its options and operands say it writes.
    pub writes: Vec<String>,
    /// The folders it reads every file under.
    pub walks: Vec<WalkScope>,
    /// It prints what the repository it runs in tracks.
    pub reads_tracked: bool,
    /// It prints from the repository's history, whatever its operands.
    pub reads_history: bool,
    /// It prints the notes of the commits it shows, which may be any blob
    /// of the history: a history read where notes may be.
    pub reads_notes: bool,
    /// Operands that make it print from the history if they name a
    /// revision (`git diff HEAD~3`); which do, the repository says.
    pub revision_operands: Vec<String>,
}

/// What an assignment to a variable means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignment {
    Harmless,
    /// A variable the table does not know: `env_change`.
    Change,
    /// A variable that changes what runs or loads (`LD_PRELOAD`, `PATH`):
    /// nothing after it can be judged.
    Loading,
}

fn valid_class(class: &str) -> bool {
    class.starts_with(|c: char| c.is_ascii_lowercase())
        && class
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn set(items: Vec<String>) -> HashSet<String> {
    items.into_iter().collect()
}

impl CommandClasses {
    /// Parses a team's table: a `[[rule]]` may not give a proven class,
    /// and the table may not take from the built-in one, which judges
    /// every command beside it (`floor.rs`).
    pub fn parse(file: &str, text: &str) -> Result<Self, CommandClassError> {
        Self::parse_team(file, text, Checks::All)
    }

    /// Parses a team's table that loaded whole before, unchanged (its
    /// set's hash says so): its patterns' syntax and the floor are not
    /// checked again, a tenth of a hook's shell command. A pattern that
    /// would not compile still counts as its stricter side (`pattern.rs`).
    pub fn parse_checked_before(file: &str, text: &str) -> Result<Self, CommandClassError> {
        Self::parse_team(file, text, Checks::PassedBefore)
    }

    fn parse_team(file: &str, text: &str, checks: Checks) -> Result<Self, CommandClassError> {
        if text == BUILTIN_TABLE {
            return Self::parse_with(file, text, true, None, checks);
        }
        let floor = builtin_floor().map_err(|message| CommandClassError::Syntax {
            file: "<builtin>/policies/commands.toml".to_owned(),
            message,
        })?;
        Self::parse_with(file, text, true, Some(floor), checks)
    }

    /// Parses a table recorded in an audit snapshot, as it was accepted
    /// when it was recorded (replay decides from the recorded facts, so the
    /// table only has to load).
    pub fn parse_recorded(file: &str, text: &str) -> Result<Self, CommandClassError> {
        Self::parse_with(file, text, false, None, Checks::All)
    }

    fn parse_with(
        file: &str,
        text: &str,
        strict: bool,
        floor: Option<&'static Floor>,
        checks: Checks,
    ) -> Result<Self, CommandClassError> {
        let table: TableFile = toml::from_str(text).map_err(|err| CommandClassError::Syntax {
            file: file.to_owned(),
            message: err.to_string().trim_end().to_owned(),
        })?;
        if let (Some(floor), Checks::All) = (floor, checks) {
            floor::check(&table, &floor.file).map_err(|(entry, message)| {
                CommandClassError::Floor {
                    file: file.to_owned(),
                    entry,
                    message,
                }
            })?;
        }
        let mut names = BTreeSet::new();
        let mut rules = Vec::new();
        for (i, entry) in table.rule.into_iter().enumerate() {
            let rule = rule(file, i + 1, entry, strict, checks)?;
            names.insert(rule.class.clone());
            rules.push(rule);
        }
        let mut programs: HashMap<String, Vec<Description>> = HashMap::new();
        for (i, entry) in table.program.into_iter().enumerate() {
            let description = description(file, i + 1, entry, checks)?;
            names.insert(description.class.clone());
            for name in &description.names {
                programs
                    .entry(name.clone())
                    .or_default()
                    .push(description.clone());
            }
        }
        let globals = table
            .globals
            .into_iter()
            .map(|(program, g)| (program, Globals::from(g)))
            .collect();
        let environment = match table.environment {
            Some(entry) => environment(file, entry)?,
            None => Environment::default(),
        };
        let programs_of_rules =
            PatternSet::new(&rules.iter().map(|r| &r.program).collect::<Vec<_>>());
        let word_rules = (0..rules.len())
            .filter(|&index| rules[index].program.matches_whole_or("", true))
            .collect();
        Ok(Self {
            rules,
            programs_of_rules,
            word_rules,
            programs,
            globals,
            environment,
            names,
            floor: floor.map(|floor| Arc::clone(&floor.table)),
        })
    }

    /// The class names the table defines.
    pub fn names(&self) -> &BTreeSet<String> {
        &self.names
    }

    /// The classes of a program (its basename) with its arguments, and
    /// the files it writes; `unknown` when nothing gives it a class.
    /// `inside_root` says whether a folder named by a global option
    /// resolves inside the root. Beside a team's table the built-in one
    /// judges too: the files it says are written, the folders it says are
    /// read whole and the classes it gives (but the proven ones, which only
    /// the team's descriptions give) are kept.
    ///
    /// A path written otherwise (`/etc//shadow`, `/etc/./shadow`) is read
    /// by the rules as written and as it resolves, so a secret's name
    /// matches however it is spelt.
    pub fn classify(
        &self,
        program: &str,
        args: &[String],
        inside_root: &dyn Fn(&str) -> bool,
    ) -> Classified {
        let mut classified = self.classify_beside_floor(program, args, inside_root);
        // Most commands name no path otherwise: nothing is copied for them.
        let normals: Vec<Option<String>> = args.iter().map(|arg| spelt_otherwise(arg)).collect();
        if normals.iter().any(Option::is_some) {
            let normal: Vec<String> = normals
                .into_iter()
                .zip(args)
                .map(|(normal, arg)| normal.unwrap_or_else(|| arg.clone()))
                .collect();
            // What the other spelling proves is not proof of the words
            // bash passes: only what it adds to the judgement counts.
            let again = self.classify_beside_floor(program, &normal, inside_root);
            classified.classes.extend(
                again
                    .classes
                    .into_iter()
                    .filter(|class| !PROVEN_CLASSES.contains(&class.as_str())),
            );
            if classified.classes.len() > 1 {
                classified.classes.remove(UNKNOWN);
            }
        }
        classified
    }

    fn classify_beside_floor(
        &self,
        program: &str,
        args: &[String],
        inside_root: &dyn Fn(&str) -> bool,
    ) -> Classified {
        let mut classified = self.classify_own(program, args, inside_root);
        let Some(floor) = &self.floor else {
            return classified;
        };
        let known = floor.classify_own(program, args, inside_root);
        classified.classes.extend(
            known
                .classes
                .into_iter()
                .filter(|class| class != UNKNOWN && !PROVEN_CLASSES.contains(&class.as_str())),
        );
        for write in known.writes {
            if !classified.writes.contains(&write) {
                classified.writes.push(write);
            }
        }
        for walk in known.walks {
            if !classified.walks.contains(&walk) {
                classified.walks.push(walk);
            }
        }
        classified.reads_tracked |= known.reads_tracked;
        classified.reads_history |= known.reads_history;
        classified.reads_notes |= known.reads_notes;
        for operand in known.revision_operands {
            if !classified.revision_operands.contains(&operand) {
                classified.revision_operands.push(operand);
            }
        }
        if !classified.writes.is_empty() {
            classified.classes.insert(WRITES_FILES.to_owned());
        }
        if classified.classes.len() > 1 {
            classified.classes.remove(UNKNOWN);
        }
        classified
    }

    /// `classify` by this table alone.
    fn classify_own(
        &self,
        program: &str,
        args: &[String],
        inside_root: &dyn Fn(&str) -> bool,
    ) -> Classified {
        let (globals_safe, rest, folders) = match self.globals.get(program) {
            Some(globals) => globals.split(args, inside_root),
            None => (true, args, Vec::new()),
        };
        let joined = rest.join(" ");
        let mut classified = Classified::default();
        classified.classes.extend(
            self.programs_of_rules
                .matches_or_all(program)
                .into_iter()
                .map(|index| &self.rules[index])
                // A pattern that will not compile counts on the strict side:
                // the rule applies (to every program, if the set is what
                // fails), its exception does not.
                .filter(|rule| {
                    rule.args
                        .as_ref()
                        .is_none_or(|r| r.is_match_or(&joined, true))
                })
                .filter(|rule| {
                    rule.unless_args
                        .as_ref()
                        .is_none_or(|r| !r.is_match_or(&joined, false))
                })
                .map(|rule| rule.class.clone()),
        );
        let mut proven_fit = false;
        for description in self.programs.get(program).into_iter().flatten() {
            let Some(after) = description.applies(rest) else {
                continue;
            };
            let scan = description.scan(after);
            proven_fit |= scan.fits && PROVEN_CLASSES.contains(&description.class.as_str());
            classified.walks.extend(scan.walk);
            let prints = !scan.names_only;
            classified.reads_tracked |=
                scan.reads_tracked || (prints && description.tracked.by_subcommand(rest));
            classified.reads_history |=
                scan.reads_history || (prints && description.history.by_subcommand(rest));
            // Notes show under a commit whatever the format of its diff,
            // unless the last word about them turns them off.
            classified.reads_notes |= scan
                .shows_notes
                .unwrap_or_else(|| description.notes.by_subcommand(rest));
            if prints && description.revisions.by_subcommand(rest) {
                classified.revision_operands.extend(scan.leading_operands);
            }
            for write in scan.writes {
                if !classified.writes.contains(&write) {
                    classified.writes.push(write);
                }
            }
            if scan.fits && globals_safe {
                classified.classes.insert(description.class.clone());
            }
        }
        if !proven_fit {
            for folder in folders {
                if !classified.writes.iter().any(|w| w == folder) {
                    classified.writes.push(folder.to_owned());
                }
            }
        }
        if !classified.writes.is_empty() {
            classified.classes.insert(WRITES_FILES.to_owned());
        }
        if classified.classes.is_empty() {
            classified.classes.insert(UNKNOWN.to_owned());
        }
        classified
    }

    /// The classes of a word named outside a command's arguments (a
    /// redirect's source, an assigned value, a `for` list) by the rules
    /// that apply whatever the program: `cat < .env` reads a secret too.
    pub fn classify_word(&self, word: &str) -> BTreeSet<String> {
        let normal = spelt_otherwise(word);
        let mut classes = BTreeSet::new();
        for word in std::iter::once(word).chain(normal.as_deref()) {
            classes.extend(self.classify_word_own(word));
            if let Some(floor) = &self.floor {
                classes.extend(floor.classify_word_own(word));
            }
        }
        classes
    }

    fn classify_word_own(&self, word: &str) -> BTreeSet<String> {
        self.word_rules
            .iter()
            .map(|&index| &self.rules[index])
            .filter(|rule| rule.args.as_ref().is_none_or(|r| r.is_match_or(word, true)))
            .filter(|rule| {
                rule.unless_args
                    .as_ref()
                    .is_none_or(|r| !r.is_match_or(word, false))
            })
            .map(|rule| rule.class.clone())
            .collect()
    }

    /// Whether a program's description takes every word as an operand it
    /// only prints or compares (`echo`, `test`): data in its words is
    /// harmless, where as a file name it would be unknown.
    pub fn takes_free_words(&self, program: &str) -> bool {
        let free = |table: &Self| {
            table
                .programs
                .get(program)
                .is_some_and(|descriptions| descriptions.iter().any(|d| d.free_words))
        };
        // A program the built-in table describes keeps its word on it.
        free(self)
            && self
                .floor
                .as_ref()
                .is_none_or(|floor| !floor.programs.contains_key(program) || free(floor))
    }

    /// Whether the value of an environment variable may be used and shown:
    /// only those the `[environment]` table lists as harmless or readable
    /// (not every lower-case name, which is harmless to assign but may hold
    /// anything).
    pub fn readable(&self, name: &str) -> bool {
        self.environment.harmless.is_match(name) || self.environment.readable.is_match(name)
    }

    /// What assigning to `name` means, by the `[environment]` table.
    pub fn assignment(&self, name: &str) -> Assignment {
        let env = &self.environment;
        let floor_loading = self
            .floor
            .as_ref()
            .is_some_and(|floor| floor.environment.loading.is_match(name));
        if env.loading.is_match(name) || floor_loading {
            Assignment::Loading
        } else if env.harmless.is_match(name)
            || (env.lowercase_harmless && !name.chars().any(|c| c.is_ascii_uppercase()))
        {
            Assignment::Harmless
        } else {
            Assignment::Change
        }
    }
}

impl Globals {
    /// Splits the global options off; says whether all of them keep the
    /// command read-only, and names the folders the subcommand works in.
    fn split<'a>(
        &self,
        args: &'a [String],
        inside_root: &dyn Fn(&str) -> bool,
    ) -> (bool, &'a [String], Vec<&'a str>) {
        let mut safe = true;
        let mut folders = Vec::new();
        let mut index = 0;
        while index < args.len() {
            let word = args[index].as_str();
            if !(word.len() > 1 && word.starts_with('-')) {
                break;
            }
            index += 1;
            if let Some((name, folder)) = word.split_once('=')
                && self.works_in.contains(name)
            {
                folders.push(folder);
            } else if self.works_in.contains(word)
                && let Some(folder) = args.get(index)
            {
                folders.push(folder.as_str());
            }
            if self.inside_root.contains(word) {
                let folder = args.get(index).map(String::as_str);
                index += 1;
                safe &= folder.is_some_and(inside_root);
            } else if self.options.contains(word) {
                index += 1;
                safe = false;
            } else if !self.safe.contains(word) {
                safe = false;
            }
        }
        (safe, &args[index.min(args.len())..], folders)
    }
}

/// A word naming a path, its empty and `.` components dropped and `..`
/// applied to the one before (lexically, as the rules read names: a
/// symlink is the path facts' business); `None` when that changes nothing.
/// The word as a file system or a server may read it, where that differs:
/// lexically normal (`/etc//shadow`), and compatibility-normalized and
/// case-folded where it is not ASCII (`.\u{ff45}nv` is `.env`).
fn spelt_otherwise(word: &str) -> Option<String> {
    let normal = lexically_normal(word);
    let base = normal.as_deref().unwrap_or(word);
    if base.is_ascii() {
        return normal;
    }
    let folded = crate::facts::path_classes::folded(base);
    if folded == word { normal } else { Some(folded) }
}

fn lexically_normal(word: &str) -> Option<String> {
    if !word.contains('/') {
        return None;
    }
    let absolute = word.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in word.split('/') {
        match part {
            "" | "." => {}
            ".." if parts
                .last()
                .is_some_and(|last| *last != ".." && *last != "~") =>
            {
                parts.pop();
            }
            ".." if absolute && parts.is_empty() => {}
            other => parts.push(other),
        }
    }
    let mut normal = parts.join("/");
    if absolute {
        normal.insert(0, '/');
    }
    if word.ends_with('/') && !normal.ends_with('/') && !normal.is_empty() {
        normal.push('/');
    }
    (normal != word && !normal.is_empty()).then_some(normal)
}

/// The built-in table, parsed once: as a table that judges, and as the
/// entries a team's table is compared with.
struct Floor {
    table: Arc<CommandClasses>,
    file: TableFile,
}

fn builtin_floor() -> Result<&'static Floor, String> {
    static FLOOR: OnceLock<Result<Floor, String>> = OnceLock::new();
    FLOOR
        .get_or_init(|| {
            let file: TableFile = toml::from_str(BUILTIN_TABLE).map_err(|err| err.to_string())?;
            // Built in, and checked whole by the tests.
            let table = CommandClasses::parse_with(
                "<builtin>",
                BUILTIN_TABLE,
                true,
                None,
                Checks::PassedBefore,
            )
            .map_err(|err| err.to_string())?;
            Ok(Floor {
                table: Arc::new(table),
                file,
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table judged alone, without the built-in floor: these tests are
    /// about the table's own rules.
    fn table(text: &str) -> Result<CommandClasses, CommandClassError> {
        CommandClasses::parse_with("commands.toml", text, true, None, Checks::All)
    }

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    fn classes(t: &CommandClasses, program: &str, a: &[&str]) -> Vec<String> {
        t.classify(program, &args(a), &|dir| !dir.starts_with('/'))
            .classes
            .into_iter()
            .collect()
    }

    const GIT: &str = r#"
[[program]]
program = "git"
class = "vcs_read"
subcommand = ["status", "log"]
flags = ["--short", "--oneline"]
output_options = ["--output"]

[globals.git]
options = ["-c", "--git-dir"]
safe = ["--no-pager"]
inside_root = ["-C"]

[[rule]]
class = "network"
program = "git"
args = "^push"

[[program]]
program = ["cat", "head"]
class = "read_only"
flags = ["-n"]

[environment]
harmless = ["LANG", "LC_*"]
loading = ["LD_*", "PATH", "GIT_*", "*_proxy"]
lowercase_harmless = true
"#;

    #[test]
    fn a_table_read_without_the_checks_it_passed_before_classifies_the_same() {
        let team = format!(
            "{BUILTIN_TABLE}\n{}",
            r#"
[[rule]]
class = "network"
program = "(curl|wget)"
args = "https?://"

[[program]]
program = "mytool"
class = "read_only"
flags = ["-q"]
"#
        );
        let commands: [(&str, &[&str]); 8] = [
            ("git", &["status"]),
            ("git", &["push", "origin"]),
            ("ls", &["-la", "src"]),
            ("sort", &["-o", "out.txt", "in.txt"]),
            ("curl", &["https://example.com"]),
            ("mytool", &["-q"]),
            ("mytool", &["--write", "x"]),
            ("rm", &["-rf", "/"]),
        ];
        for text in [BUILTIN_TABLE, team.as_str()] {
            let checked = CommandClasses::parse("commands.toml", text).unwrap();
            let before = CommandClasses::parse_checked_before("commands.toml", text).unwrap();
            for (program, a) in commands {
                let judge = |t: &CommandClasses| {
                    let c = t.classify(program, &args(a), &|dir| !dir.starts_with('/'));
                    (c.classes, c.writes)
                };
                assert_eq!(judge(&checked), judge(&before), "{program} {a:?}");
            }
        }
        // A pattern that never passed a check still counts as its stricter
        // side: a rule that adds a class applies.
        let broken = format!("{GIT}\n[[rule]]\nclass = \"network\"\nprogram = \"(\"\n");
        assert!(table(&broken).is_err());
        let unchecked =
            CommandClasses::parse_with("commands.toml", &broken, true, None, Checks::PassedBefore)
                .unwrap();
        assert!(classes(&unchecked, "git", &["status"]).contains(&"network".to_owned()));
    }

    #[test]
    fn descriptions_rules_and_globals_work_together() {
        let t = table(GIT).unwrap();
        assert_eq!(classes(&t, "git", &["status"]), ["vcs_read"]);
        assert_eq!(
            classes(&t, "git", &["--no-pager", "log", "--oneline"]),
            ["vcs_read"]
        );
        assert_eq!(classes(&t, "git", &["-C", "sub", "status"]), ["vcs_read"]);
        assert_eq!(
            classes(&t, "git", &["-C", "/elsewhere", "status"]),
            [UNKNOWN]
        );
        assert_eq!(
            classes(&t, "git", &["-c", "core.pager=sh", "log"]),
            [UNKNOWN]
        );
        assert_eq!(classes(&t, "git", &["--git-dir=/x", "log"]), [UNKNOWN]);
        assert_eq!(classes(&t, "git", &["-c", "x=y", "push"]), ["network"]);
        assert_eq!(classes(&t, "git", &["log", "--stat"]), [UNKNOWN]);
        let out = t.classify("git", &args(&["log", "--output=.git/x"]), &|_| true);
        assert_eq!(out.writes, ["x".replace('x', ".git/x")]);
        assert!(out.classes.contains(WRITES_FILES) && !out.classes.contains("vcs_read"));
        assert_eq!(classes(&t, "head", &["-n", "f"]), ["read_only"]);
        assert_eq!(classes(&t, "cat", &["-v", "f"]), [UNKNOWN]);
    }

    #[test]
    fn a_subcommand_not_proven_read_only_writes_the_folder_it_works_in() {
        let t = table(&GIT.replace(
            "inside_root = [\"-C\"]",
            "inside_root = [\"-C\"]\nworks_in = [\"-C\", \"--git-dir\"]",
        ))
        .unwrap();
        let writes = |a: &[&str]| t.classify("git", &args(a), &|_| false).writes;
        assert_eq!(writes(&["-C", "..", "commit"]), [".."]);
        assert_eq!(writes(&["--git-dir=../x", "push"]), ["../x"]);
        // A proven read writes nothing, wherever it reads.
        assert!(writes(&["-C", "..", "log"]).is_empty());
        assert!(writes(&["commit"]).is_empty());
    }

    #[test]
    fn assignments_are_judged_by_the_environment_table() {
        let t = table(GIT).unwrap();
        assert_eq!(t.assignment("LANG"), Assignment::Harmless);
        assert_eq!(t.assignment("LC_ALL"), Assignment::Harmless);
        assert_eq!(t.assignment("line"), Assignment::Harmless);
        assert_eq!(t.assignment("http_proxy"), Assignment::Loading);
        assert_eq!(t.assignment("LD_PRELOAD"), Assignment::Loading);
        assert_eq!(t.assignment("GIT_PAGER"), Assignment::Loading);
        assert_eq!(t.assignment("FOO"), Assignment::Change);
    }

    #[test]
    fn only_variables_the_table_calls_harmless_may_be_read() {
        let t = table(GIT).unwrap();
        assert!(t.readable("LANG") && t.readable("LC_ALL"));
        // Harmless to assign, but its value may be anything.
        assert!(!t.readable("line"));
        assert!(!t.readable("GITHUB_TOKEN") && !t.readable("HOME"));
    }

    #[test]
    fn words_outside_arguments_are_judged_by_the_rules_for_every_program() {
        let t = table(
            "[[rule]]\nclass = \"secrets\"\nprogram = \".*\"\nargs = '(^|/)\\.env$'\n\
             [[rule]]\nclass = \"destructive\"\nprogram = \"rm\"\n\
             [[rule]]\nclass = \"network\"\nprogram = \".*\"\nargs = 'http'\nunless_args = 'localhost'\n\
             [[program]]\nprogram = \"echo\"\nclass = \"read_only\"\nfree_words = true\n",
        )
        .unwrap();
        assert_eq!(
            t.classify_word("sub/.env"),
            BTreeSet::from(["secrets".into()])
        );
        assert_eq!(
            t.classify_word("http://x"),
            BTreeSet::from(["network".into()])
        );
        assert!(t.classify_word("http://localhost").is_empty());
        // A rule for one program does not judge a bare word.
        assert!(t.classify_word("rm").is_empty());
        assert!(t.takes_free_words("echo") && !t.takes_free_words("cat"));
    }

    #[test]
    fn rules_match_program_and_arguments() {
        let t = table(
            "[[rule]]\nclass = \"network\"\nprogram = \"git\"\nargs = \"^push\"\n\
             [[rule]]\nclass = \"secrets\"\nprogram = \"ls|cat\"\nunless_args = \"plain\"\n",
        )
        .unwrap();
        assert_eq!(classes(&t, "git", &["push"]), ["network"]);
        assert_eq!(classes(&t, "git", &["pull"]), [UNKNOWN]);
        assert_eq!(classes(&t, "cat", &["a"]), ["secrets"]);
        assert_eq!(classes(&t, "cat", &["plain"]), [UNKNOWN]);
        // The program pattern is anchored: `catalog` is not `cat`.
        assert_eq!(classes(&t, "catalog", &[]), [UNKNOWN]);
    }

    /// Which git reads print tracked content, by the built-in table: the
    /// options are read as the description reads them (a cluster, a value
    /// attached or apart), not by their spelling.
    #[test]
    fn the_table_says_which_git_reads_print_tracked_content() {
        let t = table(BUILTIN_TABLE).unwrap();
        let reads = |a: &str| {
            let a: Vec<String> = a.split_whitespace().map(str::to_owned).collect();
            t.classify("git", &a, &|dir| !dir.starts_with('/'))
                .reads_tracked
        };
        for prints in [
            "show",
            "show HEAD:src/main.rs",
            "diff --cached",
            "stash show",
            "grep TOKEN",
            "blame src/main.rs",
            "cat-file -p HEAD:x",
            "diff-tree HEAD",
            "log -p",
            "log -wp",
            "log -U3",
            "log --unified=5",
            "log --word-diff=color",
            "log -S TOKEN --oneline",
            "log -GTOKEN",
            "log -L1,2:src/main.rs",
            "log --check",
            "log --binary",
            "reflog -p",
            "stash list -p",
            "config --list --blob HEAD:x",
            "archive HEAD",
            "-C src --no-pager log -p",
            "-c color.ui=never show",
        ] {
            assert!(reads(prints), "git {prints}");
        }
        for names_only in [
            "status",
            "log --oneline",
            "log -n3",
            "log -np",
            "log --grep -p",
            "log --stat",
            "ls-files",
            "ls-tree -r HEAD",
            "stash list",
            "config --list",
            "rev-parse HEAD",
        ] {
            assert!(!reads(names_only), "git {names_only}");
        }
    }

    /// Which git reads print from history, by the built-in table: always
    /// (`git show`), by a flag (`git log -p`, `git diff --cached`), or
    /// by an operand that may name a revision, which the repository judges
    /// (`git diff HEAD~3`): the operands before `--` are handed on.
    #[test]
    fn the_table_says_which_git_reads_print_from_history() {
        let t = table(BUILTIN_TABLE).unwrap();
        let classify = |a: &str| {
            let a: Vec<String> = a.split_whitespace().map(str::to_owned).collect();
            t.classify("git", &a, &|dir| !dir.starts_with('/'))
        };
        for prints in [
            "show",
            "show --stat HEAD",
            "stash show -p",
            "range-diff A...B",
            "cat-file -p HEAD:x",
            "diff-tree -p HEAD",
            "diff-index HEAD",
            "log -p",
            "log -wp",
            "log --unified=5",
            "whatchanged -p",
            "reflog show -p",
            "stash list --patch",
            "diff --cached",
            "diff --staged src",
            "diff --merge-base main",
            "config --list --blob HEAD:x",
            "archive HEAD",
            "format-patch -1",
        ] {
            assert!(classify(prints).reads_history, "git {prints}");
        }
        for current in [
            "status",
            "diff",
            "diff -U5 --word-diff",
            "diff --stat",
            "grep TOKEN",
            "log --oneline",
            "log --stat",
            "stash list",
            "blame src/main.rs",
            "diff-files -p",
            "ls-tree -r HEAD",
        ] {
            assert!(!classify(current).reads_history, "git {current}");
        }
        // Names and counts print no content, unless a flag asks for it.
        for names in [
            "diff --stat HEAD~1",
            "diff --name-only main...HEAD",
            "diff --cached --name-status",
            "diff --stat=80 main",
            "diff -s --cached",
        ] {
            let classified = classify(names);
            assert!(!classified.reads_history, "git {names}");
            assert!(!classified.reads_tracked, "git {names}");
            assert!(classified.revision_operands.is_empty(), "git {names}");
        }
        assert_eq!(
            classify("diff --stat -p HEAD~1").revision_operands,
            ["HEAD~1"]
        );
        assert!(classify("diff --name-only --cached -U3").reads_history);
        assert!(classify("diff --stat --word-diff").reads_tracked);
        let operands = |a: &str| classify(a).revision_operands;
        assert_eq!(operands("diff HEAD~3 -- src"), ["HEAD~3"]);
        assert_eq!(operands("diff -U1 main feature"), ["main", "feature"]);
        assert_eq!(operands("grep -n TOKEN v1.0 -- src"), ["TOKEN", "v1.0"]);
        assert!(operands("diff -- HEAD~3").is_empty(), "a path past `--`");
        assert!(operands("log main").is_empty(), "messages only");
        assert!(operands("ls-files main").is_empty());
    }

    #[test]
    fn tracked_reads_name_the_entry_s_own_subcommands() {
        let err = table(
            "[[program]]\nprogram = \"git\"\nclass = \"vcs_read\"\nsubcommand = [\"log\"]\n\
             tracked_reads = [\"show\"]",
        )
        .unwrap_err();
        assert!(matches!(
            err,
            CommandClassError::BadProgram { index: 1, .. }
        ));
        assert!(err.to_string().contains("`show`"), "{err}");
        let err =
            table("[[program]]\nprogram = \"git\"\nclass = \"vcs_read\"\ntracked_reads = \"yes\"")
                .unwrap_err();
        assert!(
            err.to_string()
                .contains("a list of the entry's subcommands"),
            "{err}"
        );
    }

    #[test]
    fn bad_tables_are_refused_with_the_file_and_entry() {
        assert!(matches!(
            table("[[rule]]\nclass = 1"),
            Err(CommandClassError::Syntax { .. })
        ));
        assert!(matches!(
            table("[[rule]]\nclass = \"Bad\"\nprogram = \"x\""),
            Err(CommandClassError::BadName { index: 1, .. })
        ));
        assert!(matches!(
            table("[[rule]]\nclass = \"x\"\nprogram = \"(\""),
            Err(CommandClassError::BadRegex {
                field: "program",
                ..
            })
        ));
        assert!(matches!(
            table("[[rule]]\nclass = \"x\"\nprogram = \"x\"\nargs = \"[\""),
            Err(CommandClassError::BadRegex { field: "args", .. })
        ));
        assert!(matches!(
            table("[[rule]]\nclass = \"x\"\nprogram = \"x\"\nextra = 1"),
            Err(CommandClassError::Syntax { .. })
        ));
        let err = table("[[rule]]\nclass = \"read_only\"\nprogram = \"ls\"").unwrap_err();
        assert!(matches!(
            err,
            CommandClassError::UnprovenAllow { index: 1, .. }
        ));
        assert!(err.to_string().contains("[[program]]"), "{err}");
        assert!(matches!(
            table("[[program]]\nprogram = \"/bin/ls\"\nclass = \"read_only\""),
            Err(CommandClassError::BadProgram { index: 1, .. })
        ));
        assert!(matches!(
            table(
                "[[program]]\nprogram = \"ls\"\nclass = \"read_only\"\noutput_operands = \"some\""
            ),
            Err(CommandClassError::BadProgram { .. })
        ));
        assert!(matches!(
            table("[[program]]\nprogram = \"sed\"\nclass = \"read_only\"\nscript = \"(\""),
            Err(CommandClassError::BadRegex {
                field: "script",
                entry: "program",
                ..
            })
        ));
        assert!(matches!(
            table("[environment]\nharmless = [\"a[\"]"),
            Err(CommandClassError::BadVariable { .. })
        ));
        // A recorded table from before descriptions still loads for replay.
        assert!(
            CommandClasses::parse_recorded(
                "commands.toml",
                "[[rule]]\nclass = \"read_only\"\nprogram = \"ls\""
            )
            .is_ok()
        );
    }
}
