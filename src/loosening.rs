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
    // Approver groups grant nothing themselves: a policy that names one
    // does, and policies are compared on their own.
    let by_id = |tiers: &[Value]| -> BTreeMap<String, Value> {
        tiers
            .iter()
            .filter(|tier| {
                tier.pointer("/uid/type").and_then(Value::as_str) == Some("Portcullis::Tier")
            })
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

    use std::path::Path;

    use serde_json::json;

    use crate::facts::{Root, Transport};
    use crate::gate;
    use crate::pdp::{
        ClientRecord, Engine, Outcome, Query, SERVERS_FILE, SERVERS_LOCK_FILE, ToolAction,
    };
    use crate::servers::{Pin, ServersLock, pinned_definition, registry_for};

    /// A downstream server beside the defaults: a tool that spawns and one
    /// that writes where its `path` says.
    const SERVERS: &str = "[servers.srv]\ncommand = \"srv-mcp\"\n\n\
        [servers.srv.tools.spawn]\neffects = [\"process\"]\npaths = { path = \"read\" }\n\n\
        [servers.srv.tools.writer]\neffects = [\"write\"]\npaths = { path = \"write\" }\n\n\
        [servers.srv.tools.\"*\"]\neffects = [\"read\"]\npaths = { path = \"read\" }\n";

    fn baseline() -> PolicyBundle {
        let mut lock = ServersLock::new();
        for name in ["spawn", "writer", "reader"] {
            let tool = json!({"name": name, "inputSchema": {"type": "object",
                "properties": {"path": {"type": "string"}}}});
            lock.servers
                .entry("srv".into())
                .or_default()
                .insert(name.into(), Pin::of(pinned_definition(&tool)));
        }
        let file = |name: &str, text: String| SourceFile {
            logical: format!("policies/{name}"),
            display: name.to_owned(),
            text,
        };
        let mut bundle = PolicyBundle::builtin();
        bundle.policies.push(file(
            "21_allow_all.cedar",
            "@id(\"allow.everything\")\n@reason(\"a team that allows what it can\")\npermit (principal, action, resource);\n".to_owned(),
        ));
        bundle.servers = Some(file(SERVERS_FILE, SERVERS.to_owned()));
        bundle.servers_lock = Some(file(SERVERS_LOCK_FILE, lock.to_text()));
        bundle
    }

    /// Every hard-constraint probe: a write outside the root or into
    /// `.git`, a read of `.env`, a process tool, by tool call and by
    /// command; its outcome under `bundle`, or `None` when it does not load.
    fn probes(bundle: &PolicyBundle, root: &Path) -> Option<Vec<(String, Outcome)>> {
        let registry = registry_for(bundle).ok()?;
        let client = ClientRecord {
            name: "agent".into(),
            tier: "owner".into(),
        };
        let engine = Engine::load(bundle, &registry, std::slice::from_ref(&client)).ok()?;
        let root = Root::new(root).ok()?;
        let mut outcomes = Vec::new();
        for (tool, path) in [
            ("builtin/write_file", "../x"),
            ("builtin/write_file", ".git/config"),
            ("builtin/read_file", ".env"),
            ("srv/writer", "/etc/passwd"),
            ("srv/writer", ".git/hooks/pre-commit"),
            ("srv/spawn", "x"),
            ("srv/reader", "../outside"),
        ] {
            let arguments = if tool == "builtin/write_file" {
                json!({"path": path, "content": "x"})
            } else {
                json!({"path": path})
            };
            let outcome = match registry.lookup(tool) {
                None => Outcome::Deny,
                Some(found) => {
                    match engine.call_facts(&found.spec, &arguments, &root, Transport::Cli) {
                        Err(_) => Outcome::Deny,
                        Ok(facts) => {
                            engine
                                .decide(&Query::tool(
                                    "agent",
                                    ToolAction::Call,
                                    &found.spec.id,
                                    &facts.facts,
                                    "client_elicitation",
                                ))
                                .outcome
                        }
                    }
                }
            };
            outcomes.push((format!("{tool} {path}"), outcome));
        }
        for command in [
            "tee ../x",
            "rm -rf .git",
            "cat .env",
            "mv .git/config x",
            "cp README.md ../x",
            "sort -o ../x README.md",
        ] {
            let outcome = gate::judge(&engine, "agent", &root, None, command, Transport::Cli)
                .map_or(Outcome::Deny, |answer| answer.decision.outcome);
            outcomes.push((command.to_owned(), outcome));
        }
        Some(outcomes)
    }

    /// A small deterministic generator: the same edits on every run.
    struct Edits(u64);

    impl Edits {
        fn next(&mut self, below: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            usize::try_from(self.0 % below as u64).unwrap()
        }

        /// One edit of `text`: a line deleted, a list element dropped, or
        /// a value changed.
        fn edit(&mut self, text: &str) -> String {
            let lines: Vec<&str> = text.lines().collect();
            let at = self.next(lines.len());
            let mut edited: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
            match self.next(3) {
                0 => {
                    edited.remove(at);
                }
                1 => {
                    // Drop one quoted element of a list on the line, if any.
                    let line = &edited[at];
                    let quotes: Vec<usize> = line.match_indices('"').map(|(i, _)| i).collect();
                    if quotes.len() >= 2 {
                        let pair = self.next(quotes.len() / 2) * 2;
                        let (start, end) = (quotes[pair], quotes[pair + 1] + 1);
                        let mut without = format!("{}{}", &line[..start], &line[end..]);
                        without = without
                            .replacen(", ,", ",", 1)
                            .replacen("[, ", "[", 1)
                            .replacen(", ]", "]", 1);
                        edited[at] = without;
                    }
                }
                _ => {
                    let swaps = [
                        ("\"write\"", "\"read\""),
                        ("\"process\"", "\"read\""),
                        ("true", "false"),
                        ("\"all\"", "\"last\""),
                        ("writes_files", "read_only"),
                        ("\"read_write\"", "\"read\""),
                        ("use_tool", "probe"),
                    ];
                    let (from, to) = swaps[self.next(swaps.len())];
                    edited[at] = edited[at].replacen(from, to, 1);
                }
            }
            let mut out = edited.join("\n");
            out.push('\n');
            out
        }
    }

    fn edits_hold_the_floor(per_file: usize) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("README.md"), "readme\n").unwrap();
        std::fs::create_dir_all(dir.path().join(".git/hooks")).unwrap();
        std::fs::write(dir.path().join(".git/config"), "[core]\n").unwrap();
        std::fs::write(dir.path().join(".env"), "TOKEN=x\n").unwrap();
        let base = baseline();
        let expected = probes(&base, dir.path()).expect("the baseline loads");
        assert!(
            expected
                .iter()
                .all(|(_, outcome)| *outcome == Outcome::Deny),
            "every probe is a deny at the start: {expected:?}"
        );
        let mut edits = Edits(0x9e37_79b9_7f4a_7c15);
        let (mut refused, mut named, mut same) = (0, 0, 0);
        type Slot = fn(&mut PolicyBundle) -> &mut String;
        let slots: [(&str, Slot); 6] = [
            ("schema", |b| &mut b.schemas[0].text),
            ("commands.toml", |b| &mut b.commands.text),
            ("path_classes.toml", |b| &mut b.path_classes.text),
            ("tiers.json", |b| &mut b.tiers.text),
            ("servers.toml", |b| &mut b.servers.as_mut().unwrap().text),
            ("servers.lock", |b| {
                &mut b.servers_lock.as_mut().unwrap().text
            }),
        ];
        for (file, slot) in slots {
            for _ in 0..per_file {
                let mut edited = base.clone();
                let text = slot(&mut edited);
                *text = edits.edit(text);
                let Some(outcomes) = probes(&edited, dir.path()) else {
                    refused += 1;
                    continue;
                };
                if !loosenings(&base, &edited).is_empty() {
                    named += 1;
                    continue;
                }
                same += 1;
                assert_eq!(
                    outcomes,
                    expected,
                    "an edit of {file} that loads and is named nowhere changed a probe:\n{}",
                    slot(&mut edited.clone())
                );
            }
        }
        eprintln!(
            "{refused} edits refused at load, {named} named as loosenings, {same} decided as before"
        );
    }

    #[test]
    fn random_edits_of_each_data_file_are_refused_named_or_change_no_probe() {
        edits_hold_the_floor(12);
    }

    #[test]
    #[ignore = "long: 100 edits of each data file; .ci/run runs it in its own step"]
    fn many_random_edits_of_each_data_file_are_refused_named_or_change_no_probe() {
        edits_hold_the_floor(100);
    }
}
