//! Downstream tools as portcullis declares them: the pinned definition
//! (or, for a tool not pinned, the one the server listed) for what the
//! client sees, and the team's `tools` entry for what policies decide on.
//! A downstream's own annotations are recorded in the pin and never
//! trusted: a tool no entry matches gets the conservative default.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::config::{MAX_TOOL_NAME, ServerConfig, ServersConfig, UNDECLARED_EFFECTS};
use super::pins::{Pin, ServersLock, definition_hash, pinned_definition};
use super::visible::hashed_arguments;
use crate::facts::holds_paths;
use crate::tools::{PathArgument, PathRole, Runner, ToolId, ToolSpec};

/// Whether `name` can be offered to clients as `server__name`: the
/// protocol's tool-name rule (1 to 128 of `A-Za-z0-9_-.`).
pub fn exposable(server: &str, name: &str) -> bool {
    !name.is_empty()
        && server.len() + 2 + name.len() <= MAX_TOOL_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// The tool specs of every downstream tool: the pinned ones, and those a
/// running server lists that are not pinned (so that a call to one is
/// decided, then refused as not pinned, rather than unknown).
/// `capabilities` is every capability any tier has: an undeclared tool
/// requires them all.
pub fn downstream_specs(
    config: &ServersConfig,
    lock: &ServersLock,
    live: &BTreeMap<String, Vec<Value>>,
    capabilities: &BTreeSet<String>,
) -> Vec<(ToolSpec, Runner)> {
    let mut specs = Vec::new();
    for server in &config.servers {
        let mut definitions: BTreeMap<String, (Value, Option<String>)> = BTreeMap::new();
        for (name, pin) in lock.servers.get(&server.name).into_iter().flatten() {
            definitions.insert(
                name.clone(),
                (pin.definition.clone(), Some(pin.sha256.clone())),
            );
        }
        for tool in live.get(&server.name).into_iter().flatten() {
            let definition = pinned_definition(tool);
            if let Some(name) = definition.get("name").and_then(Value::as_str) {
                definitions
                    .entry(name.to_owned())
                    .or_insert_with(|| (definition.clone(), None));
            }
        }
        for (name, (definition, pinned)) in definitions {
            if !exposable(&server.name, &name) {
                tracing::warn!(server = %server.name, tool = %name, "a tool name clients could not call is left out");
                continue;
            }
            let spec = spec_for(server, &name, &definition, capabilities);
            // An agent's own tools would let a caller into any conversation:
            // only the bridge calls them.
            let runner = match server.agent {
                Some(_) => Runner::Agent { pinned },
                None => Runner::Downstream { pinned },
            };
            specs.push((spec, runner));
        }
    }
    specs
}

fn spec_for(
    server: &ServerConfig,
    name: &str,
    definition: &Value,
    capabilities: &BTreeSet<String>,
) -> ToolSpec {
    let pin = Pin {
        sha256: definition_hash(definition),
        definition: definition.clone(),
    };
    let (effects, required_capabilities, path_arguments) = match server.rule_for(name) {
        Some(rule) => (
            rule.effects.clone(),
            rule.required_capabilities.clone(),
            rule.paths.clone(),
        ),
        // Whatever it does, it does it where its arguments say: each one
        // named like a place is judged as read and written.
        None => (
            UNDECLARED_EFFECTS.to_vec(),
            capabilities.iter().cloned().collect(),
            place_arguments(&pin.input_schema())
                .into_iter()
                .map(|name| PathArgument {
                    name,
                    role: PathRole::ReadWrite,
                    default: None,
                })
                .collect(),
        ),
    };
    let redact = server.hashed_arguments(name, &pin.input_schema());
    ToolSpec {
        id: ToolId::new(&server.name, name),
        description: pin.description().to_owned(),
        effects,
        required_capabilities,
        path_arguments,
        input_schema: pin.input_schema(),
        output_schema: definition
            .get("outputSchema")
            .cloned()
            .unwrap_or(Value::Null),
        redact,
    }
}

/// Words that, in an argument's name, say it names a file or a place.
const PLACE_WORDS: [&str; 27] = [
    "path",
    "paths",
    "pathname",
    "file",
    "files",
    "filename",
    "filenames",
    "filepath",
    "dir",
    "dirs",
    "directory",
    "directories",
    "folder",
    "folders",
    "source",
    "destination",
    "target",
    "uri",
    "uris",
    "url",
    "urls",
    "src",
    "dest",
    "dst",
    "cwd",
    "location",
    "root",
];

/// The top-level arguments of an input schema that may name a file or a
/// place: strings (or lists of them, or of no declared type) named with
/// one of `PLACE_WORDS` (`path`, `sourceFile`, `output_dir`), or declared
/// with a URI format.
pub fn place_arguments(schema: &Value) -> Vec<String> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .filter(|(name, property)| {
            let uri = |p: &Value| {
                p.get("format")
                    .and_then(Value::as_str)
                    .is_some_and(|f| matches!(f, "uri" | "uri-reference" | "iri" | "iri-reference"))
            };
            holds_paths(property)
                && (uri(property)
                    || property.get("items").is_some_and(uri)
                    || named_like_a_place(name))
        })
        .map(|(name, _)| name.clone())
        .collect()
}

fn named_like_a_place(name: &str) -> bool {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            words.push(std::mem::take(&mut word));
            previous_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && previous_lower {
            words.push(std::mem::take(&mut word));
        }
        previous_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        word.push(c.to_ascii_lowercase());
    }
    words.push(word);
    let whole = name.to_ascii_lowercase();
    PLACE_WORDS.contains(&whole.as_str()) || words.iter().any(|w| PLACE_WORDS.contains(&w.as_str()))
}

/// Two downstream tools clients would call by one name (`ev` with `_t`
/// and `ev_` with `t` are both `ev___t`): one would hide the other, so the
/// set does not load. Each message names both.
pub fn name_collisions(specs: &[(ToolSpec, Runner)]) -> Vec<String> {
    let mut seen: BTreeMap<String, &ToolId> = BTreeMap::new();
    let mut problems = Vec::new();
    for (spec, _) in specs {
        let name = format!("{}__{}", spec.id.server(), spec.id.name());
        if let Some(first) = seen.insert(name.clone(), &spec.id) {
            problems.push(format!(
                "tool `{}` of server `{}` and tool `{}` of server `{}` are both called `{name}` by clients: rename one of the servers",
                first.name(),
                first.server(),
                spec.id.name(),
                spec.id.server()
            ));
        }
    }
    problems
}

/// The pinned tools of `config`'s tool servers whose matching entry leaves
/// an argument named like a place unaccounted for: each must be under
/// `paths` (so the hard constraints judge it) or under `not_paths` with a
/// reason. Refused at load: a writing tool declared without its paths
/// would write wherever it is told.
pub fn undeclared_places(config: &ServersConfig, lock: &ServersLock) -> Vec<String> {
    let mut problems = Vec::new();
    for server in config
        .servers
        .iter()
        .filter(|server| server.agent.is_none())
    {
        for (name, pin) in lock.servers.get(&server.name).into_iter().flatten() {
            let Some(rule) = server.rule_for(name) else {
                continue;
            };
            for argument in place_arguments(&pin.input_schema()) {
                let declared = rule.paths.iter().any(|p| p.name == argument)
                    || rule.not_paths.contains_key(&argument);
                if !declared {
                    problems.push(format!(
                        "server `{}`, tools.\"{}\" (tool `{name}`): the argument `{argument}` may \
                         name a file or a place; list it under `paths` (read, write or read_write) \
                         or under `not_paths` with a word of why",
                        server.name, rule.pattern
                    ));
                }
            }
        }
    }
    problems
}

/// The capabilities of every tier in `tiers.json` entities.
pub fn all_capabilities(tiers: &[Value]) -> BTreeSet<String> {
    tiers
        .iter()
        .filter_map(|tier| {
            tier.pointer("/attrs/capabilities")
                .and_then(Value::as_array)
        })
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

impl ServerConfig {
    /// The arguments of `tool` (dotted paths into `input_schema`) recorded
    /// only as their SHA-256 and never shown to policies: every one its
    /// entry, or else its server's default, does not make visible, except
    /// its path arguments (judged, and recorded, as paths), and every one
    /// it redacts.
    pub fn hashed_arguments(&self, tool: &str, input_schema: &Value) -> Vec<String> {
        let rule = self.rule_for(tool);
        let visible = rule
            .and_then(|rule| rule.visible.as_ref())
            .or(self.visible.as_ref());
        let (shown, redact) = match rule {
            Some(rule) => (
                rule.paths.iter().map(|p| p.name.clone()).collect(),
                rule.redact.as_slice(),
            ),
            None => (place_arguments(input_schema), &[][..]),
        };
        hashed_arguments(input_schema, visible, shown, redact)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Effect;
    use serde_json::json;

    fn config() -> ServersConfig {
        super::super::config::parsed(
            "[servers.files]\ncommand = \"x\"\n[servers.files.tools.\"read_*\"]\neffects = [\"read\"]\npaths = { path = \"read\" }\n",
        )
    }

    #[test]
    fn pinned_and_live_tools_are_declared_by_the_first_matching_entry_or_the_default() {
        let mut lock = ServersLock::new();
        let read = json!({"name": "read_file", "description": "reads",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "annotations": {"readOnlyHint": true}});
        lock.servers
            .entry("files".into())
            .or_default()
            .insert("read_file".into(), Pin::of(pinned_definition(&read)));
        let live = BTreeMap::from([(
            "files".to_owned(),
            vec![
                json!({"name": "read_file", "description": "changed"}),
                json!({"name": "move_file", "annotations": {"readOnlyHint": true, "destructiveHint": false}}),
                json!({"name": "bad name!"}),
            ],
        )]);
        let capabilities = BTreeSet::from(["read".to_owned(), "admin".to_owned()]);
        let specs = downstream_specs(&config(), &lock, &live, &capabilities);
        let names: Vec<String> = specs.iter().map(|(s, _)| s.id.to_string()).collect();
        assert_eq!(names, ["files/move_file", "files/read_file"]);
        let (moved, runner) = &specs[0];
        assert_eq!(
            moved.effects, UNDECLARED_EFFECTS,
            "annotations are not trusted"
        );
        assert_eq!(moved.required_capabilities, ["admin", "read"]);
        assert!(matches!(runner, Runner::Downstream { pinned: None }));
        let (read_spec, runner) = &specs[1];
        assert_eq!(
            read_spec.description, "reads",
            "the pinned definition is what is served"
        );
        assert_eq!(read_spec.effects, [Effect::Read]);
        assert_eq!(read_spec.path_arguments[0].name, "path");
        assert!(
            matches!(runner, Runner::Downstream { pinned: Some(hash) } if *hash == lock.servers["files"]["read_file"].sha256)
        );
    }

    #[test]
    fn two_tools_clients_would_call_by_one_name_are_both_named() {
        let config = super::super::config::parsed(
            "[servers.ev]\ncommand = \"x\"\n[servers.ev_]\ncommand = \"y\"\n[servers.other]\ncommand = \"z\"\n",
        );
        let mut lock = ServersLock::new();
        for (server, tool) in [("ev", "_t"), ("ev_", "t"), ("other", "t")] {
            let definition = json!({"name": tool, "inputSchema": {"type": "object"}});
            lock.servers
                .entry(server.into())
                .or_default()
                .insert(tool.into(), Pin::of(pinned_definition(&definition)));
        }
        let specs = downstream_specs(&config, &lock, &BTreeMap::new(), &BTreeSet::new());
        let found = name_collisions(&specs);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("`_t` of server `ev`")
                && found[0].contains("`t` of server `ev_`")
                && found[0].contains("`ev___t`"),
            "{found:?}"
        );
        let apart: Vec<_> = specs
            .into_iter()
            .filter(|(spec, _)| spec.id.server() != "ev_")
            .collect();
        assert!(name_collisions(&apart).is_empty());
    }

    #[test]
    fn tool_names_follow_the_protocol_rule() {
        assert!(exposable("files", "read_file.v2-x"));
        assert!(!exposable("files", ""));
        assert!(!exposable("files", "read file"));
        assert!(!exposable("files", "a/b"));
        assert!(!exposable("files", &"x".repeat(122)));
        assert!(exposable("files", &"x".repeat(121)));
    }

    #[test]
    fn arguments_named_like_places_are_found_by_name_and_format() {
        let schema = json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "sourceFile": {"type": "string"},
            "output_dir": {"type": ["string", "null"]},
            "paths": {"type": "array", "items": {"type": "string"}},
            "link": {"type": "string", "format": "uri"},
            "anything": {},
            "target_count": {"type": "integer"},
            "content": {"type": "string"},
            "filepath": {"type": "string"},
        }});
        let mut found = place_arguments(&schema);
        found.sort();
        assert_eq!(
            found,
            [
                "filepath",
                "link",
                "output_dir",
                "path",
                "paths",
                "sourceFile"
            ]
        );
        assert!(place_arguments(&json!({"type": "object"})).is_empty());
    }

    fn write_tool_lock() -> ServersLock {
        let mut lock = ServersLock::new();
        let write = json!({"name": "write_text", "inputSchema": {"type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}, "url": {"type": "string"}}}});
        lock.servers
            .entry("files".into())
            .or_default()
            .insert("write_text".into(), Pin::of(pinned_definition(&write)));
        lock
    }

    #[test]
    fn a_matched_tool_must_account_for_every_argument_named_like_a_place() {
        let lock = write_tool_lock();
        let bare = super::super::config::parsed(
            "[servers.files]\ncommand = \"x\"\n[servers.files.tools.\"write_*\"]\neffects = [\"write\"]\n",
        );
        let problems = undeclared_places(&bare, &lock);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("`path`") && problems[1].contains("`url`"),
            "{problems:?}"
        );
        assert!(
            problems[0].contains("tools.\"write_*\" (tool `write_text`)"),
            "{problems:?}"
        );
        let declared = super::super::config::parsed(
            "[servers.files]\ncommand = \"x\"\n[servers.files.tools.\"write_*\"]\neffects = [\"write\"]\npaths = { path = \"write\" }\nnot_paths = { url = \"where the text is announced\" }\n",
        );
        assert!(undeclared_places(&declared, &lock).is_empty());
    }

    #[test]
    fn a_tool_no_entry_declares_has_its_places_judged_as_read_and_written() {
        let lock = write_tool_lock();
        let none = super::super::config::parsed("[servers.files]\ncommand = \"x\"\n");
        assert!(
            undeclared_places(&none, &lock).is_empty(),
            "the default holds"
        );
        let specs = downstream_specs(&none, &lock, &BTreeMap::new(), &BTreeSet::new());
        let mut names: Vec<(&str, PathRole)> = specs[0]
            .0
            .path_arguments
            .iter()
            .map(|p| (p.name.as_str(), p.role))
            .collect();
        names.sort_by_key(|(name, _)| *name);
        assert_eq!(
            names,
            [("path", PathRole::ReadWrite), ("url", PathRole::ReadWrite)]
        );
    }
}

#[cfg(test)]
mod visibility_tests {
    use serde_json::json;

    use crate::pdp::SourceFile;
    use crate::servers::ServersConfig;

    fn config(text: &str) -> ServersConfig {
        ServersConfig::parse(&SourceFile {
            logical: "policies/servers.toml".into(),
            display: "servers.toml".into(),
            text: text.to_owned(),
        })
        .unwrap()
    }

    fn schema() -> serde_json::Value {
        json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "content": {"type": "string"},
            "mode": {"type": "string"},
            "auth": {"type": "object", "properties": {
                "user": {"type": "string"}, "token": {"type": "string"}}}
        }})
    }

    #[test]
    fn only_path_arguments_are_visible_unless_named() {
        let servers = config(
            "[servers.files]\ncommand = \"x\"\n[servers.files.tools.write]\neffects = [\"write\"]\npaths = { path = \"write\" }\n",
        );
        let hashed = servers.servers[0].hashed_arguments("write", &schema());
        assert_eq!(hashed, ["auth", "content", "mode"]);
    }

    #[test]
    fn an_undeclared_tool_shows_its_place_arguments_only() {
        let servers = config("[servers.files]\ncommand = \"x\"\n");
        let hashed = servers.servers[0].hashed_arguments("anything", &schema());
        assert_eq!(hashed, ["auth", "content", "mode"]);
    }

    #[test]
    fn a_tool_list_names_nested_arguments_and_wins_over_the_server_default() {
        let servers = config(
            "[servers.files]\ncommand = \"x\"\nvisible = \"all\"\n[servers.files.tools.write]\neffects = [\"write\"]\nvisible = [\"mode\", \"auth.user\"]\n",
        );
        let hashed = servers.servers[0].hashed_arguments("write", &schema());
        assert_eq!(hashed, ["auth.token", "content", "path"]);
    }

    #[test]
    fn a_server_default_of_all_shows_everything_but_what_is_redacted() {
        let servers = config(
            "[servers.files]\ncommand = \"x\"\nvisible = \"all\"\n[servers.files.tools.write]\neffects = [\"write\"]\nredact = [\"content\"]\n",
        );
        let hashed = servers.servers[0].hashed_arguments("write", &schema());
        assert_eq!(hashed, ["content"]);
        let other = servers.servers[0].hashed_arguments("other", &schema());
        assert!(other.is_empty(), "{other:?}");
    }

    #[test]
    fn a_wrong_visible_value_is_refused_with_its_place() {
        for (text, expected) in [
            (
                "[servers.a]\ncommand = \"x\"\nvisible = \"some\"\n",
                "give a list",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.t]\neffects = [\"none\"]\nvisible = [\"a..b\"]\n",
                "not an argument name",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.t]\neffects = [\"none\"]\nvisible = [\"k\"]\nredact = [\"k\"]\n",
                "both",
            ),
        ] {
            let problems = ServersConfig::parse(&SourceFile {
                logical: "policies/servers.toml".into(),
                display: "servers.toml".into(),
                text: text.to_owned(),
            })
            .unwrap_err();
            let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
            let said = said.join("\n");
            assert!(said.contains(expected), "{text}: {said}");
        }
    }
}
