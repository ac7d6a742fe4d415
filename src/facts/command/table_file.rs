//! The command table file as written (`policies/commands.toml`), before
//! it is compiled: what the table compiles, what the floor compares with
//! the built-in one, and what `policy diff` compares entry by entry.

use std::collections::HashMap;

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TableFile {
    #[serde(default)]
    pub(super) rule: Vec<RuleEntry>,
    #[serde(default)]
    pub(super) program: Vec<ProgramEntry>,
    #[serde(default)]
    pub(super) globals: HashMap<String, GlobalsEntry>,
    #[serde(default)]
    pub(super) environment: Option<EnvironmentEntry>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RuleEntry {
    pub(super) class: String,
    /// Regex over the program's basename, anchored at both ends.
    pub(super) program: String,
    /// Regex over the arguments joined by single spaces; the rule applies
    /// only when it matches somewhere.
    #[serde(default)]
    pub(super) args: Option<String>,
    /// The rule does not apply when this matches the arguments.
    #[serde(default)]
    pub(super) unless_args: Option<String>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub(super) enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub(super) fn names(&self) -> Vec<String> {
        match self {
            Self::One(one) => vec![one.clone()],
            Self::Many(many) => many.clone(),
        }
    }

    pub(super) fn into_vec(self) -> Vec<String> {
        match self {
            Self::One(one) => vec![one],
            Self::Many(many) => many,
        }
    }
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProgramEntry {
    /// Exact basenames, not patterns: a description is closed.
    pub(super) program: OneOrMany,
    pub(super) class: String,
    #[serde(default)]
    pub(super) subcommand: Vec<String>,
    #[serde(default)]
    pub(super) flags: Vec<String>,
    #[serde(default)]
    pub(super) options: Vec<String>,
    #[serde(default)]
    pub(super) pair_options: Vec<String>,
    #[serde(default)]
    pub(super) flag_pattern: Option<String>,
    #[serde(default)]
    pub(super) whole_words: bool,
    #[serde(default)]
    pub(super) free_words: bool,
    #[serde(default)]
    pub(super) max_operands: Option<usize>,
    #[serde(default)]
    pub(super) operand_pattern: Option<String>,
    #[serde(default)]
    pub(super) script_options: Vec<String>,
    #[serde(default)]
    pub(super) script_operand: bool,
    #[serde(default)]
    pub(super) script: Option<String>,
    #[serde(default)]
    pub(super) script_unless: Option<String>,
    #[serde(default)]
    pub(super) output_options: Vec<String>,
    #[serde(default)]
    pub(super) output_flags: Vec<String>,
    #[serde(default)]
    pub(super) output_operands: Option<String>,
    /// Operands of the form `KEY=FILE` that name a file written (`dd
    /// of=FILE`).
    #[serde(default)]
    pub(super) output_assignments: Vec<String>,
    #[serde(default)]
    pub(super) walks: bool,
    #[serde(default)]
    pub(super) walk_flags: Vec<String>,
    #[serde(default)]
    pub(super) walk_visible_only: bool,
    #[serde(default)]
    pub(super) walk_everything_flags: Vec<String>,
    #[serde(default)]
    pub(super) walk_only_options: Vec<String>,
    #[serde(default)]
    pub(super) walk_skip_options: Vec<String>,
    #[serde(default)]
    pub(super) walk_glob_options: Vec<String>,
    /// It lists every folder under the folders it is given (`du`, `find`,
    /// `tree`): their names, not their files' contents.
    #[serde(default)]
    pub(super) lists: bool,
    /// Flags that make it do so (`ls -R`).
    #[serde(default)]
    pub(super) list_flags: Vec<String>,
    /// It prints what the repository tracks (`git grep`): every tracked
    /// file is read, whether or not the command names it.
    #[serde(default)]
    pub(super) tracked_reads: Uses,
    /// Flags and options that make it do so (`git grep` has none).
    #[serde(default)]
    pub(super) tracked_read_flags: Vec<String>,
    /// It prints from the repository's history (`git show`): any file ever
    /// committed, which the gate does not read, so it is not proven.
    #[serde(default)]
    pub(super) history_reads: Uses,
    /// Flags and options that make it do so (`git log -p`).
    #[serde(default)]
    pub(super) history_read_flags: Vec<String>,
    /// It prints the notes of the commits it shows (`git log`): a note is
    /// any blob (`git notes add -C HEAD~1:.env`), so in a repository that
    /// may have notes it is a history read.
    #[serde(default)]
    pub(super) notes_reads: Uses,
    /// Flags and options that make it print notes (`--notes`,
    /// `--show-notes=REF`).
    #[serde(default)]
    pub(super) notes_read_flags: Vec<String>,
    /// Flags that stop it printing notes when none of `notes_read_flags`
    /// comes after them (`git log --no-notes`). A team's table cannot widen
    /// them: the built-in table's judgement stands beside it.
    #[serde(default)]
    pub(super) no_notes_flags: Vec<String>,
    /// Its operands (before `--`) may name revisions, whose content it
    /// then prints (`git diff HEAD~3`): one that may is a history read.
    #[serde(default)]
    pub(super) revision_operands: Uses,
    /// Flags that make it print names or counts instead of content (`git
    /// diff --stat`), unless one of `tracked_read_flags` asks for content. A team's table
    /// cannot widen them: the built-in table's judgement stands beside it.
    #[serde(default)]
    pub(super) names_only_flags: Vec<String>,
}

/// Which uses of an entry do something: `true` for every one, or a list of
/// the entry's subcommands (`["show", "diff"]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(
    untagged,
    expecting = "`true`, `false` or a list of the entry's subcommands"
)]
pub(super) enum Uses {
    Every(bool),
    Subcommands(Vec<String>),
}

impl Default for Uses {
    fn default() -> Self {
        Self::Every(false)
    }
}

impl Uses {
    pub(super) fn is_none(&self) -> bool {
        match self {
            Self::Every(every) => !every,
            Self::Subcommands(subcommands) => subcommands.is_empty(),
        }
    }

    /// The subcommands of an entry (with `subcommands`) it names; an entry
    /// without subcommands has the one empty name.
    pub(super) fn resolved(&self, subcommands: &[String]) -> Vec<String> {
        match self {
            Self::Every(false) => Vec::new(),
            Self::Every(true) if subcommands.is_empty() => vec![String::new()],
            Self::Every(true) => subcommands.to_vec(),
            Self::Subcommands(listed) => listed.clone(),
        }
    }

    /// How the entry's field `field` says it, for a message.
    pub(super) fn text(&self, field: &str) -> Option<String> {
        match self {
            Self::Every(true) => Some(field.to_owned()),
            Self::Subcommands(subcommands) if !subcommands.is_empty() => {
                Some(format!("{field} {}", subcommands.join(" ")))
            }
            _ => None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GlobalsEntry {
    /// Global options that take a value (so the subcommand can be found).
    #[serde(default)]
    pub(super) options: Vec<String>,
    /// Global flags and options that keep a command read-only.
    #[serde(default)]
    pub(super) safe: Vec<String>,
    /// Global options whose value is a folder that keeps a command
    /// read-only while it resolves inside the root (`git -C DIR`).
    #[serde(default)]
    pub(super) inside_root: Vec<String>,
    /// Global options whose value is a folder the subcommand works in: a
    /// subcommand that is not proven read-only writes there (`git -C ..
    /// commit`).
    #[serde(default)]
    pub(super) works_in: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EnvironmentEntry {
    #[serde(default)]
    pub(super) harmless: Vec<String>,
    #[serde(default)]
    pub(super) loading: Vec<String>,
    #[serde(default)]
    pub(super) readable: Vec<String>,
    #[serde(default)]
    pub(super) lowercase_harmless: bool,
}
