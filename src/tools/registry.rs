//! The registry: every tool portcullis knows, by name and id, with its
//! compiled input schema and what runs it. Built once at start-up; a tool
//! not in it is unknown to clients and to policies alike.

use std::collections::BTreeMap;

use serde_json::json;
use thiserror::Error;

use crate::canonical::sha256_hex;
use crate::facts::holds_paths;

use super::arguments::{ArgumentValidator, SchemaError};
use super::bridge::{BridgeTool, bridge_specs};
use super::builtin::Builtin;
use super::harness::harness_specs;
use super::spec::{ToolId, ToolSpec};

#[derive(Debug, Error)]
pub enum RegistryError {
    #[error("tool {0} is declared twice")]
    Duplicate(ToolId),
    #[error("tool {tool}: {source}")]
    InvalidSchema { tool: ToolId, source: SchemaError },
    #[error(
        "tool {tool}: path argument `{argument}` is not a property of its input schema that holds a string or a list of strings"
    )]
    PathArgumentNotInSchema { tool: ToolId, argument: String },
}

/// How a registered tool runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runner {
    Builtin(Builtin),
    /// The agent's harness runs it; portcullis only decides it, and never
    /// offers it to MCP clients.
    Harness,
    /// A downstream MCP server runs it, when its live definition still has
    /// the `pinned` hash; `None` for a tool the server lists that nobody
    /// pinned.
    Downstream {
        pinned: Option<String>,
    },
    /// A downstream agent's own tool (`codex`, `codex-reply`): pinned and
    /// checked like any downstream tool, but called only by the bridge,
    /// which keeps each conversation to the client that started it.
    Agent {
        pinned: Option<String>,
    },
    /// One of the bridge's tools, run against the session store and the
    /// agent.
    Bridge(BridgeTool),
}

/// A tool known to portcullis, with its compiled argument validator.
#[derive(Debug)]
pub struct RegisteredTool {
    pub spec: ToolSpec,
    pub arguments: ArgumentValidator,
    pub runner: Runner,
    /// The output schema a result another server sends must fit, for a
    /// tool with one: portcullis advertises it, so it checks it rather
    /// than pass on what a client's SDK would throw on.
    pub output: Option<ArgumentValidator>,
    /// SHA-256 of the definition clients are shown (for a pinned
    /// downstream tool, its pin), named in every decision record.
    pub definition: String,
}

/// Every tool portcullis can gate, by id. Built once at start; the policy
/// decision point turns it into `Portcullis::Server` and `Portcullis::Tool`
/// entities once per policy load.
#[derive(Debug)]
pub struct Registry {
    tools: BTreeMap<ToolId, RegisteredTool>,
}

impl Registry {
    /// The built-in workspace tools.
    pub fn builtin() -> Result<Self, RegistryError> {
        Self::from_specs(Self::builtin_specs())
    }

    /// The specs of the built-in workspace tools, to which downstream
    /// servers add theirs.
    pub fn builtin_specs() -> Vec<(ToolSpec, Runner)> {
        Builtin::ALL
            .iter()
            .map(|b| (b.spec(), Runner::Builtin(*b)))
            .collect()
    }

    /// The bridge's tools, which a set has when it declares an agent.
    pub fn bridge_tools() -> Vec<(ToolSpec, Runner)> {
        BridgeTool::ALL
            .iter()
            .map(|tool| (tool.spec(), Runner::Bridge(*tool)))
            .collect()
    }

    /// Every tool built into this binary (workspace, harness and bridge tools) as
    /// the definitions their Cedar input types are generated from: id,
    /// input schema, redacted arguments. A policy set carries this text,
    /// so its hash and its audit snapshot name the tool types it was
    /// decided with, and replay regenerates exactly them.
    pub fn builtin_definitions() -> String {
        let tools: Vec<serde_json::Value> = Self::builtin_specs()
            .into_iter()
            .map(|(spec, _)| spec)
            .chain(harness_specs())
            .chain(bridge_specs())
            .map(|spec| {
                json!({"id": spec.id.to_string(), "input_schema": spec.input_schema, "redact": spec.redact})
            })
            .collect();
        let mut text = serde_json::to_string_pretty(&json!({ "tools": tools }))
            .unwrap_or_else(|_| String::from("{\"tools\": []}"));
        text.push('\n');
        text
    }

    /// The tools of a coding agent's harness, decided by the hook.
    pub fn harness() -> Result<Self, RegistryError> {
        Self::harness_tools(|_| true)
    }

    /// The harness tools named, and no others: a hook process decides one
    /// event, and each tool costs its schema's compilation and its entity
    /// at every start.
    pub fn harness_named(names: &[&str]) -> Result<Self, RegistryError> {
        Self::harness_tools(|spec| names.contains(&spec.id.name()))
    }

    fn harness_tools(wanted: impl Fn(&ToolSpec) -> bool) -> Result<Self, RegistryError> {
        Self::from_specs(
            harness_specs()
                .into_iter()
                .filter(|spec| wanted(spec))
                .map(|spec| (spec, Runner::Harness))
                .collect(),
        )
    }

    pub fn from_specs(specs: Vec<(ToolSpec, Runner)>) -> Result<Self, RegistryError> {
        let mut tools = BTreeMap::new();
        for (spec, runner) in specs {
            for path in &spec.path_arguments {
                let declared = spec
                    .input_schema
                    .pointer(&format!("/properties/{}", path.name));
                if !declared.is_some_and(holds_paths) {
                    return Err(RegistryError::PathArgumentNotInSchema {
                        tool: spec.id.clone(),
                        argument: path.name.clone(),
                    });
                }
            }
            let arguments = ArgumentValidator::compile(&spec.input_schema).map_err(|source| {
                RegistryError::InvalidSchema {
                    tool: spec.id.clone(),
                    source,
                }
            })?;
            let relayed = matches!(runner, Runner::Downstream { .. } | Runner::Agent { .. });
            let output = if relayed && !spec.output_schema.is_null() {
                let validator =
                    ArgumentValidator::compile(&spec.output_schema).map_err(|source| {
                        RegistryError::InvalidSchema {
                            tool: spec.id.clone(),
                            source,
                        }
                    })?;
                Some(validator)
            } else {
                None
            };
            let id = spec.id.clone();
            let definition = match &runner {
                Runner::Downstream {
                    pinned: Some(pinned),
                }
                | Runner::Agent {
                    pinned: Some(pinned),
                } => pinned.clone(),
                _ => sha256_hex(&json!({
                    "name": spec.id.name(),
                    "description": spec.description,
                    "inputSchema": spec.input_schema,
                    "outputSchema": spec.output_schema,
                })),
            };
            if tools
                .insert(
                    id.clone(),
                    RegisteredTool {
                        spec,
                        arguments,
                        runner,
                        output,
                        definition,
                    },
                )
                .is_some()
            {
                return Err(RegistryError::Duplicate(id));
            }
        }
        Ok(Self { tools })
    }

    pub fn get(&self, id: &ToolId) -> Option<&RegisteredTool> {
        self.tools.get(id)
    }

    /// Finds a tool by its id (`server/name`), or by its bare name when
    /// exactly one server has a tool of that name.
    pub fn lookup(&self, name_or_id: &str) -> Option<&RegisteredTool> {
        if let Some((server, name)) = name_or_id.split_once('/') {
            return self.get(&ToolId::new(server, name));
        }
        let mut found = self
            .tools
            .values()
            .filter(|tool| tool.spec.id.name() == name_or_id);
        match (found.next(), found.next()) {
            (Some(tool), None) => Some(tool),
            _ => None,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.tools.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{Effect, PathArgument, PathRole};

    fn spec(name: &str, schema: serde_json::Value, paths: Vec<PathArgument>) -> (ToolSpec, Runner) {
        (
            ToolSpec {
                id: ToolId::new("test", name),
                description: String::new(),
                effects: vec![Effect::Read],
                required_capabilities: vec![],
                path_arguments: paths,
                input_schema: schema,
                output_schema: json!({"type": "object"}),
                redact: Vec::new(),
            },
            Runner::Builtin(Builtin::ReadFile),
        )
    }

    #[test]
    fn builtin_registry_has_the_six_workspace_tools() {
        let registry = Registry::builtin().unwrap();
        let ids: Vec<String> = registry.iter().map(|t| t.spec.id.to_string()).collect();
        assert_eq!(
            ids,
            [
                "builtin/delete_file",
                "builtin/edit_file",
                "builtin/list_dir",
                "builtin/read_file",
                "builtin/search",
                "builtin/write_file"
            ]
        );
    }

    #[test]
    fn lookup_by_bare_name_only_when_unambiguous() {
        let object = json!({"type": "object"});
        let registry = Registry::from_specs(vec![
            spec("same", object.clone(), vec![]),
            (
                ToolSpec {
                    id: ToolId::new("other", "same"),
                    ..spec("same", object.clone(), vec![]).0
                },
                Runner::Builtin(Builtin::ReadFile),
            ),
            spec("unique", object, vec![]),
        ])
        .unwrap();
        assert!(registry.lookup("same").is_none());
        assert!(registry.lookup("unique").is_some());
        assert!(registry.lookup("other/same").is_some());
        assert!(registry.lookup("nope/unique").is_none());
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let object = json!({"type": "object"});
        let err = Registry::from_specs(vec![
            spec("a", object.clone(), vec![]),
            spec("a", object, vec![]),
        ])
        .unwrap_err();
        assert!(matches!(err, RegistryError::Duplicate(id) if id.to_string() == "test/a"));
    }

    #[test]
    fn a_path_argument_must_be_a_string_property() {
        let err = Registry::from_specs(vec![spec(
            "a",
            json!({"type": "object", "properties": {"path": {"type": "integer"}}}),
            vec![PathArgument {
                name: "path".into(),
                role: PathRole::Read,
                default: None,
            }],
        )])
        .unwrap_err();
        assert!(matches!(err, RegistryError::PathArgumentNotInSchema { .. }));
    }

    #[test]
    fn an_invalid_schema_is_refused() {
        let err = Registry::from_specs(vec![spec("a", json!({"type": "no-such-type"}), vec![])])
            .unwrap_err();
        assert!(matches!(err, RegistryError::InvalidSchema { .. }));
    }
}
