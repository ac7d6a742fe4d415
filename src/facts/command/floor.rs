//! The floor under a team's command table: what the built-in table knows
//! about a program writing, running code, reading secrets or reaching the
//! network. The hard constraints on commands read the files a command
//! writes, and those come from the table; a team that described `tee` as
//! read-only with no outputs would have let `tee ../x` through.
//!
//! Two lines hold the floor. At load, a team entry that drops a built-in
//! rule, output, walk, tracked read, folder a subcommand works in, or
//! loading variable is refused, naming the file and the entry (`check`).
//! When judging, the
//! built-in table judges every command beside the team's (`table.rs`), so
//! what it knows about writes and strict classes holds whatever the team's
//! table adds (a global option that swallows an operand, say).

use std::collections::HashSet;

use super::table_file::{ProgramEntry, TableFile};

/// The built-in command table, as shipped in `policies/commands.toml`.
pub const BUILTIN_TABLE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/policies/commands.toml"
));

/// Refuses a team table that takes from the built-in one: the entry, and
/// what it takes.
pub(super) fn check(team: &TableFile, builtin: &TableFile) -> Result<(), (String, String)> {
    keeps_rules(team, builtin)?;
    keeps_programs(team, builtin)?;
    keeps_globals(team, builtin)?;
    keeps_environment(team, builtin)
}

/// Every built-in rule is in the team's table, unchanged.
fn keeps_rules(team: &TableFile, builtin: &TableFile) -> Result<(), (String, String)> {
    let refuse = |entry: String, message: String| (entry, message);
    for (index, rule) in builtin.rule.iter().enumerate() {
        let kept = team.rule.iter().any(|theirs| {
            theirs.class == rule.class
                && theirs.program == rule.program
                && theirs.args == rule.args
                && theirs.unless_args == rule.unless_args
        });
        if !kept {
            return Err(refuse(
                format!(
                    "built-in rule {} (class `{}`, program `{}`)",
                    index + 1,
                    rule.class,
                    rule.program
                ),
                "is missing or changed; a team's table may add rules, never drop or change a \
                 built-in one"
                    .to_owned(),
            ));
        }
    }
    Ok(())
}

/// Every built-in description that knows a program's effects is kept by
/// one of the team's entries for that program.
fn keeps_programs(team: &TableFile, builtin: &TableFile) -> Result<(), (String, String)> {
    let refuse = |entry: String, message: String| (entry, message);
    for (index, entry) in builtin.program.iter().enumerate() {
        if !entry.knows_effects() {
            continue;
        }
        for name in entry.program.names() {
            let kept = team
                .program
                .iter()
                .any(|theirs| theirs.program.names().contains(&name) && theirs.keeps(entry));
            if !kept {
                return Err(refuse(
                    format!(
                        "built-in program {} (`{name}`{}, class `{}`)",
                        index + 1,
                        subcommand_text(entry),
                        entry.class
                    ),
                    format!(
                        "no entry of this table keeps what it knows ({}); a team's table may \
                         describe more harmless uses and add outputs, never drop the files a \
                         program writes, the folders and tracked files it reads whole or what \
                         it prints from history",
                        entry.effects_text()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The folders a subcommand works in stay where the built-in table says.
fn keeps_globals(team: &TableFile, builtin: &TableFile) -> Result<(), (String, String)> {
    let refuse = |entry: String, message: String| (entry, message);
    for (program, globals) in &builtin.globals {
        let theirs = team.globals.get(program);
        let missing: Vec<&String> = globals
            .works_in
            .iter()
            .filter(|option| !theirs.is_some_and(|t| t.works_in.contains(option)))
            .collect();
        if !missing.is_empty() {
            return Err(refuse(
                format!("[globals.{program}]"),
                format!(
                    "works_in drops {}: the folder a subcommand works in is where it writes",
                    quoted(&missing)
                ),
            ));
        }
    }
    Ok(())
}

/// The environment variables that change what runs or loads stay listed.
fn keeps_environment(team: &TableFile, builtin: &TableFile) -> Result<(), (String, String)> {
    let refuse = |entry: String, message: String| (entry, message);
    if let Some(environment) = &builtin.environment {
        let theirs: HashSet<&String> = team
            .environment
            .iter()
            .flat_map(|e| e.loading.iter())
            .collect();
        let missing: Vec<&String> = environment
            .loading
            .iter()
            .filter(|pattern| !theirs.contains(pattern))
            .collect();
        if !missing.is_empty() {
            return Err(refuse(
                "[environment]".to_owned(),
                format!(
                    "loading drops {}: these change what runs or loads",
                    quoted(&missing)
                ),
            ));
        }
    }
    Ok(())
}

/// Items as `a`, `b`, for messages.
pub(super) fn quoted(items: &[&String]) -> String {
    items
        .iter()
        .map(|item| format!("`{item}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn subcommand_text(entry: &ProgramEntry) -> String {
    if entry.subcommand.is_empty() {
        String::new()
    } else {
        format!(" {}", entry.subcommand.join("|"))
    }
}

fn superset(theirs: &[String], ours: &[String]) -> bool {
    ours.iter().all(|item| theirs.contains(item))
}

/// How many operands an `output_operands` value names: none < last < all.
pub(super) fn operands_rank(value: Option<&str>) -> u8 {
    match value {
        None | Some("none") => 0,
        Some("last") => 1,
        Some(_) => 2,
    }
}

impl ProgramEntry {
    /// Whether the entry knows files the program writes or folders it
    /// reads whole: what the floor keeps.
    pub(super) fn knows_effects(&self) -> bool {
        !self.output_options.is_empty()
            || !self.output_flags.is_empty()
            || operands_rank(self.output_operands.as_deref()) > 0
            || !self.output_assignments.is_empty()
            || self.walks
            || !self.walk_flags.is_empty()
            || self.lists
            || !self.list_flags.is_empty()
            || !self.tracked_reads.is_none()
            || !self.tracked_read_flags.is_empty()
            || !self.history_reads.is_none()
            || !self.history_read_flags.is_empty()
            || !self.notes_reads.is_none()
            || !self.notes_read_flags.is_empty()
            || !self.revision_operands.is_none()
    }

    /// Whether this entry, about the same program and subcommands, knows
    /// at least what `ours` knows.
    pub(super) fn keeps(&self, ours: &ProgramEntry) -> bool {
        let subcommands: HashSet<&String> = self.subcommand.iter().collect();
        subcommands == ours.subcommand.iter().collect()
            && superset(&self.output_options, &ours.output_options)
            && superset(&self.output_flags, &ours.output_flags)
            && superset(&self.output_assignments, &ours.output_assignments)
            && operands_rank(self.output_operands.as_deref())
                >= operands_rank(ours.output_operands.as_deref())
            && (self.walks || !ours.walks)
            && superset(&self.walk_flags, &ours.walk_flags)
            && superset(&self.walk_everything_flags, &ours.walk_everything_flags)
            && (!self.walk_visible_only || ours.walk_visible_only)
            && (self.lists || !ours.lists)
            && superset(&self.list_flags, &ours.list_flags)
            && superset(
                &self.tracked_reads.resolved(&self.subcommand),
                &ours.tracked_reads.resolved(&ours.subcommand),
            )
            && superset(&self.tracked_read_flags, &ours.tracked_read_flags)
            && superset(
                &self.history_reads.resolved(&self.subcommand),
                &ours.history_reads.resolved(&ours.subcommand),
            )
            && superset(&self.history_read_flags, &ours.history_read_flags)
            && superset(
                &self.notes_reads.resolved(&self.subcommand),
                &ours.notes_reads.resolved(&ours.subcommand),
            )
            && superset(&self.notes_read_flags, &ours.notes_read_flags)
            && superset(
                &self.revision_operands.resolved(&self.subcommand),
                &ours.revision_operands.resolved(&ours.subcommand),
            )
    }

    pub(super) fn effects_text(&self) -> String {
        let mut parts = Vec::new();
        let list = |name: &str, items: &[String]| {
            (!items.is_empty()).then(|| format!("{name} {}", items.join(" ")))
        };
        parts.extend(list("output_options", &self.output_options));
        parts.extend(list("output_flags", &self.output_flags));
        parts.extend(list("output_assignments", &self.output_assignments));
        if let Some(operands) = &self.output_operands {
            parts.push(format!("output_operands {operands}"));
        }
        if self.walks {
            parts.push("walks".to_owned());
        }
        parts.extend(list("walk_flags", &self.walk_flags));
        if self.lists {
            parts.push("lists".to_owned());
        }
        parts.extend(list("list_flags", &self.list_flags));
        parts.extend(self.tracked_reads.text("tracked_reads"));
        parts.extend(list("tracked_read_flags", &self.tracked_read_flags));
        parts.extend(self.history_reads.text("history_reads"));
        parts.extend(list("history_read_flags", &self.history_read_flags));
        parts.extend(self.notes_reads.text("notes_reads"));
        parts.extend(list("notes_read_flags", &self.notes_read_flags));
        parts.extend(self.revision_operands.text("revision_operands"));
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::super::table::CommandClasses;
    use super::*;

    fn judged(table: &CommandClasses, program: &str, args: &[&str]) -> (Vec<String>, Vec<String>) {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let classified = table.classify(program, &args, &|dir| !dir.starts_with(".."));
        (classified.classes.into_iter().collect(), classified.writes)
    }

    fn refusal(text: &str) -> String {
        CommandClasses::parse("team/commands.toml", text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn the_builtin_table_is_its_own_floor() {
        CommandClasses::parse("commands.toml", BUILTIN_TABLE).unwrap();
    }

    #[test]
    fn a_team_table_that_drops_an_output_is_refused_naming_the_entry() {
        let tee = "program = [\"tee\"]\nclass = \"writes_files\"\nflags = [\"-a\", \"-i\", \"-p\", \"--append\", \"--ignore-interrupts\", \"--output-error\"]\noutput_operands = \"all\"";
        assert!(BUILTIN_TABLE.contains(tee));
        let text = BUILTIN_TABLE.replace(
            tee,
            "program = [\"tee\"]\nclass = \"read_only\"\nflags = [\"-a\"]",
        );
        let err = refusal(&text);
        assert!(
            err.starts_with("team/commands.toml: built-in program"),
            "{err}"
        );
        assert!(
            err.contains("`tee`") && err.contains("output_operands all"),
            "{err}"
        );
    }

    #[test]
    fn a_team_table_that_drops_or_changes_a_rule_is_refused() {
        let rule = "program = 'rm|rmdir|shred|dd|mkfs(\\..*)?|wipefs|truncate|fdisk|parted|mkswap|srm|unlink'";
        assert!(BUILTIN_TABLE.contains(rule));
        let err = refusal(&BUILTIN_TABLE.replace(rule, "program = 'rmdir'"));
        assert!(
            err.contains("class `destructive`") && err.contains("is missing or changed"),
            "{err}"
        );
    }

    #[test]
    fn dropping_a_loading_variable_or_a_works_in_option_is_refused() {
        let err = refusal(&BUILTIN_TABLE.replacen("\"LD_*\", ", "", 1));
        assert!(
            err.contains("[environment]") && err.contains("`LD_*`"),
            "{err}"
        );
        let err = refusal(&BUILTIN_TABLE.replace(
            "works_in = [\"-C\", \"--git-dir\", \"--work-tree\"]",
            "works_in = [\"-C\"]",
        ));
        assert!(
            err.contains("[globals.git]") && err.contains("`--git-dir`"),
            "{err}"
        );
    }

    #[test]
    fn a_team_table_that_drops_a_tracked_read_is_refused() {
        let subcommands = "tracked_reads = [\"show\", \"stash show\", \"range-diff\"]";
        assert!(BUILTIN_TABLE.contains(subcommands));
        let err = refusal(&BUILTIN_TABLE.replace(
            subcommands,
            "tracked_reads = [\"stash show\", \"range-diff\"]",
        ));
        assert!(
            err.contains("`git` log|show") && err.contains("tracked_reads show stash"),
            "{err}"
        );
        let err = refusal(&BUILTIN_TABLE.replace("\"--check\", \"-S\", \"-G\"]", "\"--check\"]"));
        assert!(err.contains("tracked_read_flags -p -u"), "{err}");
        let grep = "subcommand = [\"grep\"]\ntracked_reads = true";
        let err = refusal(&BUILTIN_TABLE.replacen(grep, "subcommand = [\"grep\"]", 1));
        assert!(
            err.contains("`git` grep") && err.contains("tracked_reads"),
            "{err}"
        );
        // Every use covers a list of the same subcommands, and the reverse.
        for kept in [
            BUILTIN_TABLE.replace(subcommands, "tracked_reads = true"),
            BUILTIN_TABLE.replacen(
                grep,
                "subcommand = [\"grep\"]\ntracked_reads = [\"grep\"]",
                1,
            ),
        ] {
            CommandClasses::parse("team/commands.toml", &kept).unwrap();
        }
    }

    /// What prints from history is kept as what prints tracked files is:
    /// a team entry that drops a history read, its flags or its revision
    /// operands is refused, naming what it dropped.
    #[test]
    fn a_team_table_that_drops_a_history_read_is_refused() {
        let history = "history_reads = [\"show\", \"stash show\", \"range-diff\"]";
        assert!(BUILTIN_TABLE.contains(history));
        let err = refusal(&BUILTIN_TABLE.replace(history, "history_reads = [\"range-diff\"]"));
        assert!(
            err.contains("`git` log|show") && err.contains("history_reads show stash show"),
            "{err}"
        );
        let cached = "history_read_flags = [\"--cached\", \"--staged\", \"--merge-base\"]";
        assert!(BUILTIN_TABLE.contains(cached));
        let err = refusal(&BUILTIN_TABLE.replace(cached, "history_read_flags = [\"--cached\"]"));
        assert!(
            err.contains("`git` diff") && err.contains("history_read_flags --cached --staged"),
            "{err}"
        );
        let notes = "notes_reads = [\"log\", \"whatchanged\", \"reflog\", \"reflog show\"]";
        assert!(BUILTIN_TABLE.contains(notes));
        let err = refusal(&BUILTIN_TABLE.replace(notes, "notes_reads = [\"reflog\"]"));
        assert!(
            err.contains("`git` log|show") && err.contains("notes_reads log whatchanged"),
            "{err}"
        );
        let grep = "tracked_reads = true\n# `git grep TOKEN v1.0` searches the files a commit holds.\nrevision_operands = true";
        assert!(BUILTIN_TABLE.contains(grep));
        let err = refusal(&BUILTIN_TABLE.replace(grep, "tracked_reads = true"));
        assert!(
            err.contains("`git` grep") && err.contains("revision_operands"),
            "{err}"
        );
        let err = refusal(&BUILTIN_TABLE.replace(
            history,
            "history_reads = [\"show\", \"stash show\", \"range-diff\", \"log -p\"]",
        ));
        assert!(
            err.contains(
                "history_reads names `log -p`, which is not one of the entry's subcommands"
            ),
            "{err}"
        );
    }

    /// Names-only flags relax a read: a team's table that adds one does
    /// load, but the built-in table's judgement beside it still sees the
    /// read of history.
    #[test]
    fn a_team_table_cannot_make_a_content_read_names_only() {
        let names = "names_only_flags = [\"--stat\"";
        assert!(BUILTIN_TABLE.contains(names));
        let wider = BUILTIN_TABLE.replacen(names, "names_only_flags = [\"--color\", \"--stat\"", 1);
        let table = CommandClasses::parse("team/commands.toml", &wider).unwrap();
        let args: Vec<String> = ["diff", "--color", "HEAD~1"].map(str::to_owned).to_vec();
        let classified = table.classify("git", &args, &|_| true);
        assert_eq!(classified.revision_operands, ["HEAD~1"]);
        assert!(classified.reads_tracked);
    }

    /// Flags that turn notes off relax a read as names-only flags do: a
    /// team's table that adds one loads, and the built-in judgement beside
    /// it still sees the notes read.
    #[test]
    fn a_team_table_cannot_turn_notes_off_with_a_flag_of_its_own() {
        let classify = |table: &CommandClasses, args: &[&str]| {
            let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
            table.classify("git", &args, &|_| true).reads_notes
        };
        let builtin = CommandClasses::parse("commands.toml", BUILTIN_TABLE).unwrap();
        assert!(classify(&builtin, &["log"]));
        assert!(!classify(&builtin, &["log", "--no-notes"]));
        assert!(!classify(&builtin, &["log", "--notes", "--no-notes"]));
        assert!(classify(&builtin, &["log", "--no-notes", "--notes=review"]));
        assert!(classify(&builtin, &["log", "--no-notes", "--show-notes"]));
        let off = "no_notes_flags = [\"--no-notes\"]";
        assert!(BUILTIN_TABLE.contains(off));
        let wider =
            BUILTIN_TABLE.replacen(off, "no_notes_flags = [\"--no-notes\", \"--oneline\"]", 1);
        let team = CommandClasses::parse("team/commands.toml", &wider).unwrap();
        assert!(classify(&team, &["log", "--oneline"]));
        let on = "notes_read_flags = [\"--notes\", \"--show-notes\", \"--standard-notes\"]";
        assert!(BUILTIN_TABLE.contains(on));
        let err = refusal(&BUILTIN_TABLE.replacen(on, "notes_read_flags = [\"--notes\"]", 1));
        assert!(
            err.contains("notes_read_flags --notes --show-notes"),
            "{err}"
        );
    }

    #[test]
    fn what_the_builtin_table_knows_is_written_stays_written_beside_a_team_entry() {
        // Allowed at load: the built-in entries are kept, a team adds a
        // read-only `tee` and a global option that swallows its operand.
        let text = format!(
            "{BUILTIN_TABLE}\n[[program]]\nprogram = \"tee\"\nclass = \"read_only\"\nfree_words = true\n\n[globals.tee]\noptions = [\"-a\"]\n"
        );
        let table = CommandClasses::parse("team/commands.toml", &text).unwrap();
        let (classes, writes) = judged(&table, "tee", &["-a", "../x"]);
        assert_eq!(writes, ["../x"], "{classes:?}");
        assert!(classes.contains(&"writes_files".to_owned()), "{classes:?}");
        let (classes, writes) = judged(&table, "rm", &["-rf", "../outside"]);
        assert_eq!(writes, ["../outside"]);
        assert!(classes.contains(&"destructive".to_owned()), "{classes:?}");
        assert!(
            !table.takes_free_words("tee"),
            "the built-in word on tee holds"
        );
    }

    #[test]
    fn a_team_may_describe_more_harmless_uses() {
        let text = format!(
            "{BUILTIN_TABLE}\n[[program]]\nprogram = \"ls\"\nclass = \"read_only\"\nflags = [\"--team-flag\"]\n"
        );
        let table = CommandClasses::parse("team/commands.toml", &text).unwrap();
        assert_eq!(judged(&table, "ls", &["--team-flag"]).0, ["read_only"]);
        let builtin = CommandClasses::parse("commands.toml", BUILTIN_TABLE).unwrap();
        assert_eq!(judged(&builtin, "ls", &["--team-flag"]).0, ["unknown"]);
    }

    #[test]
    fn the_builtin_table_names_what_removing_and_cutting_programs_write() {
        let table = CommandClasses::parse("commands.toml", BUILTIN_TABLE).unwrap();
        for (program, args, written) in [
            ("rm", &["-rf", ".git"][..], ".git"),
            ("rmdir", &["../x"][..], "../x"),
            ("shred", &["-u", "../k"][..], "../k"),
            ("truncate", &["-s", "0", ".git/config"][..], ".git/config"),
            (
                "dd",
                &["if=/dev/zero", "of=../disk", "bs=1M"][..],
                "../disk",
            ),
            ("find", &["../x", "-name", "y", "-delete"][..], "../x"),
        ] {
            let (_, writes) = judged(&table, program, args);
            assert!(
                writes.iter().any(|w| w == written),
                "{program} {args:?}: {writes:?}"
            );
        }
    }
}
