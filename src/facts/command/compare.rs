//! What a change to a command table newly permits, entry by entry: the
//! solver proves the Cedar text, but a command's classes and the files it
//! writes come from this table, so every loosening of it is a widening
//! `policy diff` names and `serve --reload tighten-only` refuses.

use std::collections::BTreeSet;

use super::floor::quoted;
use super::table::PROVEN_CLASSES;
use super::table_file::{ProgramEntry, TableFile};

/// One loosening: the entry, and what it newly permits.
pub type Loosening = (String, String);

/// Every loosening from `old` to `new`; a table that does not read is one
/// loosening, since nothing about it can be compared.
pub fn loosenings(old: &str, new: &str) -> Vec<Loosening> {
    let read = |text: &str| toml::from_str::<TableFile>(text);
    let (old, new) = match (read(old), read(new)) {
        (Ok(old), Ok(new)) => (old, new),
        _ => {
            return vec![(
                "the table".to_owned(),
                "does not read on one side, so nothing of it can be compared".to_owned(),
            )];
        }
    };
    let mut found = Vec::new();
    rules(&old, &new, &mut found);
    programs(&old, &new, &mut found);
    environment(&old, &new, &mut found);
    globals(&old, &new, &mut found);
    found
}

fn rules(old: &TableFile, new: &TableFile, found: &mut Vec<Loosening>) {
    for (index, rule) in old.rule.iter().enumerate() {
        if !new.rule.iter().any(|theirs| theirs == rule) {
            found.push((
                format!(
                    "rule {} (class `{}`, program `{}`)",
                    index + 1,
                    rule.class,
                    rule.program
                ),
                format!(
                    "removed or changed: commands it gave `{}` may no longer have it",
                    rule.class
                ),
            ));
        }
    }
}

fn entry_name(entry: &ProgramEntry) -> String {
    let mut name = entry.program.names().join(", ");
    if !entry.subcommand.is_empty() {
        name = format!("{name} {}", entry.subcommand.join("|"));
    }
    format!("program `{name}` (class `{}`)", entry.class)
}

fn programs(old: &TableFile, new: &TableFile, found: &mut Vec<Loosening>) {
    for entry in &new.program {
        let proven = PROVEN_CLASSES.contains(&entry.class.as_str());
        if proven && !old.program.iter().any(|theirs| theirs == entry) {
            found.push((
                entry_name(entry),
                format!(
                    "a harmless use is added or widened: more commands may be `{}`",
                    entry.class
                ),
            ));
        }
    }
    for entry in &old.program {
        for name in entry.program.names() {
            let kept = new
                .program
                .iter()
                .any(|theirs| theirs.program.names().contains(&name) && theirs.keeps(entry));
            if entry.knows_effects() && !kept {
                found.push((
                    entry_name(entry),
                    format!(
                        "what `{name}` writes or reads whole is dropped ({})",
                        entry.effects_text()
                    ),
                ));
            }
        }
    }
}

fn added<'a>(old: &'a [String], new: &'a [String]) -> Vec<&'a String> {
    let old: BTreeSet<&String> = old.iter().collect();
    new.iter().filter(|item| !old.contains(item)).collect()
}

fn environment(old: &TableFile, new: &TableFile, found: &mut Vec<Loosening>) {
    fn lists(table: &TableFile) -> (&[String], &[String], &[String], bool) {
        table
            .environment
            .as_ref()
            .map_or((&[], &[], &[], false), |e| {
                (&e.harmless, &e.readable, &e.loading, e.lowercase_harmless)
            })
    }
    let (old_harmless, old_readable, old_loading, old_lowercase) = lists(old);
    let (new_harmless, new_readable, new_loading, new_lowercase) = lists(new);
    for (what, items, meaning) in [
        (
            "harmless",
            added(old_harmless, new_harmless),
            "assigning them is no longer an env_change",
        ),
        (
            "readable",
            added(old_readable, new_readable),
            "their values may be shown and used",
        ),
        (
            "loading",
            added(new_loading, old_loading),
            "assigning them no longer makes a command opaque",
        ),
    ] {
        if !items.is_empty() {
            let verb = if what == "loading" { "drops" } else { "adds" };
            found.push((
                format!("[environment] {what}"),
                format!("{verb} {}: {meaning}", quoted(&items)),
            ));
        }
    }
    if new_lowercase && !old_lowercase {
        found.push((
            "[environment] lowercase_harmless".to_owned(),
            "turned on: assigning any lower-case variable is harmless".to_owned(),
        ));
    }
}

type Lists<'a> = (&'a [String], &'a [String], &'a [String], &'a [String]);

fn globals(old: &TableFile, new: &TableFile, found: &mut Vec<Loosening>) {
    let programs: BTreeSet<&String> = old.globals.keys().chain(new.globals.keys()).collect();
    for program in programs {
        fn side<'a>(table: &'a TableFile, program: &str) -> Lists<'a> {
            table
                .globals
                .get(program)
                .map_or((&[], &[], &[], &[]), |g| {
                    (&g.options, &g.safe, &g.inside_root, &g.works_in)
                })
        }
        let (old_options, old_safe, old_inside, old_works) = side(old, program);
        let (new_options, new_safe, new_inside, new_works) = side(new, program);
        let entry = format!("[globals.{program}]");
        let safe = added(old_safe, new_safe);
        if !safe.is_empty() {
            found.push((
                entry.clone(),
                format!(
                    "safe adds {}: they keep a read-only subcommand read-only",
                    quoted(&safe)
                ),
            ));
        }
        let inside = added(old_inside, new_inside);
        if !inside.is_empty() {
            found.push((
                entry.clone(),
                format!("inside_root adds {}", quoted(&inside)),
            ));
        }
        let works = added(new_works, old_works);
        if !works.is_empty() {
            found.push((
                entry.clone(),
                format!(
                    "works_in drops {}: where a subcommand writes is no longer seen",
                    quoted(&works)
                ),
            ));
        }
        let options: BTreeSet<&String> = old_options.iter().collect();
        let now: BTreeSet<&String> = new_options.iter().collect();
        if options != now {
            found.push((
                entry,
                "options change: which word is the subcommand may change".to_owned(),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::floor::BUILTIN_TABLE;
    use super::*;

    fn entries(found: &[Loosening]) -> Vec<String> {
        found
            .iter()
            .map(|(entry, change)| format!("{entry}: {change}"))
            .collect()
    }

    #[test]
    fn the_same_table_and_a_stricter_one_loosen_nothing() {
        assert!(loosenings(BUILTIN_TABLE, BUILTIN_TABLE).is_empty());
        let stricter = format!(
            "{BUILTIN_TABLE}\n[[rule]]\nclass = \"destructive\"\nprogram = \"frobnicate\"\n"
        );
        assert!(loosenings(BUILTIN_TABLE, &stricter).is_empty());
        let fewer_flags = BUILTIN_TABLE.replacen(
            "\"-L\", \"-P\"]\nmax_operands = 0",
            "\"-L\"]\nmax_operands = 0",
            1,
        );
        assert_ne!(fewer_flags, BUILTIN_TABLE);
        let found = loosenings(BUILTIN_TABLE, &fewer_flags);
        assert_eq!(found.len(), 1, "a changed proven entry is named: {found:?}");
    }

    #[test]
    fn each_loosening_is_named_with_its_entry() {
        let team_rule = "\n[[rule]]\nclass = \"network\"\nprogram = \"frob\"\n";
        let team_writer = "\n[[program]]\nprogram = \"frob\"\nclass = \"writes_files\"\noutput_operands = \"all\"\n";
        let old = format!("{BUILTIN_TABLE}{team_rule}{team_writer}");
        let cases = [
            (
                old.replace(team_rule, ""),
                "class `network`, program `frob`",
            ),
            (old.replace(team_writer, ""), "what `frob` writes"),
            (
                format!("{old}\n[[program]]\nprogram = \"frob\"\nclass = \"read_only\"\n"),
                "a harmless use",
            ),
            (
                old.replacen(
                    "harmless = [\"LANG\"",
                    "harmless = [\"SECRET\", \"LANG\"",
                    1,
                ),
                "adds `SECRET`",
            ),
            (
                old.replacen("readable = [\"HOME\"", "readable = [\"TOKEN\", \"HOME\"", 1),
                "readable",
            ),
            (old.replacen("\"LD_*\", ", "", 1), "drops `LD_*`"),
            (
                old.replacen(
                    "safe = [\"--no-pager\"",
                    "safe = [\"-c\", \"--no-pager\"",
                    1,
                ),
                "safe adds `-c`",
            ),
            (
                old.replacen("works_in = [\"-C\", ", "works_in = [", 1),
                "works_in drops `-C`",
            ),
        ];
        for (new, named) in cases {
            assert_ne!(new, old, "{named}");
            let found = entries(&loosenings(&old, &new));
            assert!(
                found.iter().any(|f| f.contains(named)),
                "{named}: {found:?}"
            );
        }
    }

    #[test]
    fn a_table_that_does_not_read_cannot_be_compared() {
        assert_eq!(loosenings(BUILTIN_TABLE, "[[rule").len(), 1);
    }
}
