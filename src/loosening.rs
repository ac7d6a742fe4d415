//! What a change to a policy set's data files newly permits. The solver
//! proves the Cedar policies against each other (`pdp::diff`), but the
//! facts the policies read come from data files: the schema, the command
//! table, the path classes, the servers and their pins, the tiers. Each is
//! compared here entry by entry, and every loosening (a program's outputs
//! dropped, a harmless use added, a secret glob removed, a tool's effects
//! or paths reduced, a server's root changed, a tier given a capability or
//! a parent, a schema declaration changed) is named with its file and
//! entry. `policy diff` counts each as a widening, and `serve --reload
//! tighten-only` refuses the set until a signed `policy apply` lets it
//! through.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use crate::facts::{command_loosenings, path_class_loosenings};
use crate::pdp::{PolicyBundle, SourceFile, schema_loosenings, tier_entities};
use crate::servers::server_loosenings;

/// One loosening of a data file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Loosening {
    /// The file, by its place in a portcullis tree (`policies/commands.toml`).
    pub file: String,
    /// The entry in it (`program \`tee\``, `class \`secrets\``).
    pub entry: String,
    /// What it newly permits.
    pub change: String,
}

impl std::fmt::Display for Loosening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.file, self.entry, self.change)
    }
}

/// Compares two texts of one table: (entry, what it newly permits).
type TableCompare = fn(&str, &str) -> Vec<(String, String)>;

/// Every loosening of the data files from `old` to `new`, in file order.
pub fn loosenings(old: &PolicyBundle, new: &PolicyBundle) -> Vec<Loosening> {
    let mut found = Vec::new();
    let mut add = |file: &str, entry: String, change: String| {
        found.push(Loosening {
            file: file.to_owned(),
            entry,
            change,
        });
    };
    for (file, entry, change) in schema_loosenings(&old.schemas, &new.schemas) {
        add(&file, entry, change);
    }
    let pairs: [(&SourceFile, &SourceFile, TableCompare); 2] = [
        (&old.commands, &new.commands, command_loosenings),
        (&old.path_classes, &new.path_classes, path_class_loosenings),
    ];
    for (before, after, compare) in pairs {
        if before.text != after.text {
            for (entry, change) in compare(&before.text, &after.text) {
                add(&after.logical, entry, change);
            }
        }
    }
    for (entry, change) in tier_loosenings(&old.tiers, &new.tiers) {
        add(&new.tiers.logical, entry, change);
    }
    for (file, entry, change) in server_loosenings(old, new) {
        add(&format!("policies/{file}"), entry, change);
    }
    found
}

/// A tier that is new, or gains a capability or a parent.
fn tier_loosenings(old: &SourceFile, new: &SourceFile) -> Vec<(String, String)> {
    if old.text == new.text {
        return Vec::new();
    }
    let (Ok((old, _)), Ok((new, _))) = (tier_entities(old), tier_entities(new)) else {
        return vec![(
            "the tiers".to_owned(),
            "do not read on one side, so nothing of them can be compared".to_owned(),
        )];
    };
    let by_id = |tiers: &[Value]| -> BTreeMap<String, Value> {
        tiers
            .iter()
            .filter_map(|tier| Some((tier.pointer("/uid/id")?.as_str()?.to_owned(), tier.clone())))
            .collect()
    };
    let strings = |tier: &Value, pointer: &str| -> BTreeSet<String> {
        tier.pointer(pointer)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|item| match item {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .collect()
    };
    let (old, new) = (by_id(&old), by_id(&new));
    let mut found = Vec::new();
    for (id, tier) in &new {
        let entry = format!("tier `{id}`");
        let Some(was) = old.get(id) else {
            found.push((
                entry,
                "added: its clients get what its capabilities allow".to_owned(),
            ));
            continue;
        };
        for (pointer, what) in [
            ("/attrs/capabilities", "capability"),
            ("/parents", "parent"),
        ] {
            let gained: Vec<String> = strings(tier, pointer)
                .difference(&strings(was, pointer))
                .cloned()
                .collect();
            if !gained.is_empty() {
                found.push((
                    entry.clone(),
                    format!("gains the {what} {}", gained.join(", ")),
                ));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_set_loosens_nothing() {
        let builtin = PolicyBundle::builtin();
        assert!(loosenings(&builtin, &builtin).is_empty());
    }

    #[test]
    fn each_data_file_is_compared_and_named() {
        let old = PolicyBundle::builtin();
        let mut new = old.clone();
        new.path_classes.text = format!(
            "{}\n[drafts]\nglobs = [\"drafts/**\"]\n",
            new.path_classes.text
        );
        assert!(loosenings(&old, &new).is_empty(), "an added class narrows");
        let widened = new.clone();
        let found = loosenings(&widened, &old);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].file, "policies/path_classes.toml");
        assert_eq!(found[0].entry, "class `drafts`");

        let mut new = old.clone();
        new.tiers.text =
            new.tiers
                .text
                .replacen("\"capabilities\": [", "\"capabilities\": [\"admin\", ", 1);
        assert_ne!(new.tiers.text, old.tiers.text);
        let found = loosenings(&old, &new);
        assert!(
            found.iter().any(|l| l.file == "policies/tiers.json"
                && l.change.contains("gains the capability admin")),
            "{found:?}"
        );

        let mut new = old.clone();
        new.commands.text = format!(
            "{}\n[[program]]\nprogram = \"frob\"\nclass = \"read_only\"\n",
            new.commands.text
        );
        let found = loosenings(&old, &new);
        assert_eq!(found[0].file, "policies/commands.toml");
        assert!(found[0].to_string().contains("program `frob`"), "{found:?}");
    }
}
