//! A table file's entries compiled into what the table judges with: each
//! rule's patterns, each program's description, the globals and the
//! environment, every mistake named with its file and entry.

use globset::{Glob, GlobSetBuilder};

use super::super::description::{Description, OutputOperands, Script, Uses, Walk};
use super::super::pattern::Pattern;
use super::super::table_file::{
    EnvironmentEntry, GlobalsEntry, OneOrMany, ProgramEntry, RuleEntry, Uses as UsesEntry,
};
use super::{CommandClassError, Environment, Globals, PROVEN_CLASSES, Rule, set, valid_class};

/// What a table's parse checks besides its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Checks {
    /// Every pattern's syntax, and a team table against the floor.
    All,
    /// Nothing the same text passed before.
    PassedBefore,
}

pub(super) fn regex(
    file: &str,
    (entry, index): (&'static str, usize),
    class: &str,
    field: &'static str,
    pattern: &str,
    checks: Checks,
) -> Result<Pattern, CommandClassError> {
    if checks == Checks::PassedBefore {
        return Ok(Pattern::checked_before(pattern));
    }
    Pattern::new(pattern).map_err(|message| CommandClassError::BadRegex {
        file: file.to_owned(),
        entry,
        index,
        class: class.to_owned(),
        field,
        message,
    })
}

/// One `[[rule]]` entry, its patterns compiled; a proven class is
/// refused from a strict (team) table, where only descriptions may make a
/// command read-only.
pub(super) fn rule(
    file: &str,
    index: usize,
    entry: RuleEntry,
    strict: bool,
    checks: Checks,
) -> Result<Rule, CommandClassError> {
    if !valid_class(&entry.class) {
        return Err(CommandClassError::BadName {
            file: file.to_owned(),
            entry: "rule",
            index,
            class: entry.class,
        });
    }
    if strict && PROVEN_CLASSES.contains(&entry.class.as_str()) {
        return Err(CommandClassError::UnprovenAllow {
            file: file.to_owned(),
            index,
            class: entry.class,
        });
    }
    let compile = |field: &'static str, pattern: &str| {
        regex(file, ("rule", index), &entry.class, field, pattern, checks)
    };
    let program = compile("program", &format!("^(?:{})$", entry.program))?;
    let args = entry
        .args
        .as_deref()
        .map(|p| compile("args", p))
        .transpose()?;
    let unless_args = entry
        .unless_args
        .as_deref()
        .map(|p| compile("unless_args", p))
        .transpose()?;
    Ok(Rule {
        class: entry.class,
        program,
        args,
        unless_args,
    })
}

impl From<GlobalsEntry> for Globals {
    fn from(g: GlobalsEntry) -> Self {
        Self {
            options: set(g.options),
            safe: set(g.safe),
            inside_root: set(g.inside_root),
            works_in: set(g.works_in),
        }
    }
}

pub(super) fn description(
    file: &str,
    index: usize,
    mut entry: ProgramEntry,
    checks: Checks,
) -> Result<Description, CommandClassError> {
    if !valid_class(&entry.class) {
        return Err(CommandClassError::BadName {
            file: file.to_owned(),
            entry: "program",
            index,
            class: entry.class,
        });
    }
    let bad = |message: String| CommandClassError::BadProgram {
        file: file.to_owned(),
        index,
        message,
    };
    let names = std::mem::replace(&mut entry.program, OneOrMany::Many(Vec::new())).into_vec();
    if names.is_empty() || names.iter().any(|n| n.is_empty() || n.contains('/')) {
        return Err(bad(
            "`program` must name one or more programs by their basename".to_owned(),
        ));
    }
    let output_operands = output_operands(entry.output_operands.as_deref()).map_err(bad)?;
    let class = entry.class.clone();
    let anchored = |field: &'static str, pattern: Option<&str>| {
        pattern
            .map(|p| {
                let anchored = format!("^(?:{p})$");
                regex(file, ("program", index), &class, field, &anchored, checks)
            })
            .transpose()
    };
    let script = script_of(&mut entry, |field, pattern| {
        regex(file, ("program", index), &class, field, pattern, checks)
    })?;
    let subcommands = entry
        .subcommand
        .iter()
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .collect();
    let RepositoryReads {
        tracked,
        history,
        notes,
        revisions,
    } = repository_reads_of(&mut entry).map_err(bad)?;
    Ok(Description {
        names,
        class: class.clone(),
        subcommands,
        flag_pattern: anchored("flag_pattern", entry.flag_pattern.as_deref())?,
        operand_pattern: anchored("operand_pattern", entry.operand_pattern.as_deref())?,
        walk: walk_of(&mut entry),
        tracked,
        history,
        notes,
        revisions,
        names_only_flags: set(std::mem::take(&mut entry.names_only_flags)),
        no_notes_flags: set(std::mem::take(&mut entry.no_notes_flags)),
        flags: set(entry.flags),
        options: set(entry.options),
        pair_options: set(entry.pair_options),
        whole_words: entry.whole_words,
        free_words: entry.free_words,
        max_operands: entry.max_operands,
        script,
        output_options: set(entry.output_options),
        output_flags: set(entry.output_flags),
        output_operands,
        output_assignments: entry.output_assignments,
    })
}

pub(super) fn output_operands(value: Option<&str>) -> Result<OutputOperands, String> {
    match value {
        None | Some("none") => Ok(OutputOperands::None),
        Some("all") => Ok(OutputOperands::All),
        Some("last") => Ok(OutputOperands::Last),
        Some(other) => Err(format!(
            "output_operands `{other}`: expected \"none\", \"all\" or \"last\""
        )),
    }
}

/// The scripts a program runs, when its entry says it runs any.
pub(super) fn script_of(
    entry: &mut ProgramEntry,
    compile: impl Fn(&'static str, &str) -> Result<Pattern, CommandClassError>,
) -> Result<Option<Script>, CommandClassError> {
    let has_script = entry.script.is_some()
        || entry.script_unless.is_some()
        || entry.script_operand
        || !entry.script_options.is_empty();
    if !has_script {
        return Ok(None);
    }
    Ok(Some(Script {
        options: set(std::mem::take(&mut entry.script_options)),
        operand: entry.script_operand,
        pattern: entry
            .script
            .as_deref()
            .map(|p| compile("script", &format!("^(?:{p})$")))
            .transpose()?,
        unless: entry
            .script_unless
            .as_deref()
            .map(|p| compile("script_unless", p))
            .transpose()?,
    }))
}

/// What the entry says a program prints of a repository.
struct RepositoryReads {
    tracked: Uses,
    history: Uses,
    notes: Uses,
    revisions: Uses,
}

fn repository_reads_of(entry: &mut ProgramEntry) -> Result<RepositoryReads, String> {
    let tracked_flags = std::mem::take(&mut entry.tracked_read_flags);
    let history_flags = std::mem::take(&mut entry.history_read_flags);
    let notes_flags = std::mem::take(&mut entry.notes_read_flags);
    Ok(RepositoryReads {
        tracked: uses_of(entry, "tracked_reads", &entry.tracked_reads, tracked_flags)?,
        history: uses_of(entry, "history_reads", &entry.history_reads, history_flags)?,
        notes: uses_of(entry, "notes_reads", &entry.notes_reads, notes_flags)?,
        revisions: uses_of(
            entry,
            "revision_operands",
            &entry.revision_operands,
            Vec::new(),
        )?,
    })
}

/// Which uses of a program do what the entry's field `field` says (print
/// what a repository tracks, print from its history, take revisions); a
/// subcommand named there must be one of the entry's own.
fn uses_of(
    entry: &ProgramEntry,
    field: &str,
    uses: &UsesEntry,
    flags: Vec<String>,
) -> Result<Uses, String> {
    let (always, subcommands) = match uses {
        UsesEntry::Every(every) => (*every, &[][..]),
        UsesEntry::Subcommands(subcommands) => (false, &subcommands[..]),
    };
    if let Some(stray) = subcommands
        .iter()
        .find(|sub| !entry.subcommand.contains(sub))
    {
        return Err(format!(
            "{field} names `{stray}`, which is not one of the entry's subcommands"
        ));
    }
    Ok(Uses {
        always,
        subcommands: subcommands
            .iter()
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .collect(),
        flags: set(flags),
    })
}

/// How a program walks a tree, as its entry says.
pub(super) fn walk_of(entry: &mut ProgramEntry) -> Walk {
    Walk {
        always: entry.walks,
        flags: set(std::mem::take(&mut entry.walk_flags)),
        visible_only: entry.walk_visible_only,
        everything_flags: set(std::mem::take(&mut entry.walk_everything_flags)),
        only_options: set(std::mem::take(&mut entry.walk_only_options)),
        skip_options: set(std::mem::take(&mut entry.walk_skip_options)),
        glob_options: set(std::mem::take(&mut entry.walk_glob_options)),
        lists: entry.lists,
        list_flags: set(std::mem::take(&mut entry.list_flags)),
    }
}

pub(super) fn environment(
    file: &str,
    entry: EnvironmentEntry,
) -> Result<Environment, CommandClassError> {
    let build = |patterns: &[String]| {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            let glob = Glob::new(pattern).map_err(|err| CommandClassError::BadVariable {
                file: file.to_owned(),
                pattern: pattern.clone(),
                message: err.kind().to_string(),
            })?;
            builder.add(glob);
        }
        builder
            .build()
            .map_err(|err| CommandClassError::BadVariable {
                file: file.to_owned(),
                pattern: patterns.join(", "),
                message: err.to_string(),
            })
    };
    Ok(Environment {
        harmless: build(&entry.harmless)?,
        loading: build(&entry.loading)?,
        readable: build(&entry.readable)?,
        lowercase_harmless: entry.lowercase_harmless,
    })
}
