//! Downstream tools as portcullis declares them: the pinned definition
//! (or, for a tool not pinned, the one the server listed) for what the
//! client sees, and the team's `tools` entry for what policies decide on.
//! A downstream's own annotations are recorded in the pin and never
//! trusted: a tool no entry matches gets the conservative default.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::config::{MAX_TOOL_NAME, ServerConfig, ServersConfig, UNDECLARED_EFFECTS};
use super::pins::{Pin, ServersLock, definition_hash, pinned_definition};
use crate::tools::{Runner, ToolId, ToolSpec};

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
    let (effects, required_capabilities, path_arguments, redact) = match server.rule_for(name) {
        Some(rule) => (
            rule.effects.clone(),
            rule.required_capabilities.clone(),
            rule.paths.clone(),
            rule.redact.clone(),
        ),
        None => (
            UNDECLARED_EFFECTS.to_vec(),
            capabilities.iter().cloned().collect(),
            Vec::new(),
            Vec::new(),
        ),
    };
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
    fn tool_names_follow_the_protocol_rule() {
        assert!(exposable("files", "read_file.v2-x"));
        assert!(!exposable("files", ""));
        assert!(!exposable("files", "read file"));
        assert!(!exposable("files", "a/b"));
        assert!(!exposable("files", &"x".repeat(122)));
        assert!(exposable("files", &"x".repeat(121)));
    }
}
