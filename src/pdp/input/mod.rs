//! Typed tool arguments for policies: each tool's input JSON Schema turned
//! into a Cedar record type at load, its own action (`Action::"builtin/
//! write_file"`, a child of `call_tool`) whose context is `ToolFacts` plus
//! `input`, and each call's arguments turned into that record.
//!
//! The types come from the set itself, never from a live server: the
//! built-in tools' definitions the set carries (`PolicyBundle::tools`) and
//! the pinned definitions in `servers.lock`. So validation, every decision
//! and replay see one and the same type for a tool.
//!
//! Why it imports from `servers`, a floor above: `servers.toml` and
//! `servers.lock` are files of the policy set, and the typed input of a
//! downstream tool is part of the schema every load validates against; the
//! parser of those files lives with the servers that run them (which use
//! this module's bundle and problems). Reading the pins through that one
//! parser keeps one reading of the file, rather than a second here.

mod fragment;
mod mapping;
mod reads;
mod values;

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

pub use fragment::fragment;
pub use mapping::{Field, Hidden, InputType};
pub use reads::{check_reads, compares_call_tool};
pub use values::{InputError, project, record_expression};

use super::bundle::PolicyBundle;
use super::problem::{Problem, ProblemKind};
use crate::facts::ToolInput;
use crate::tools::ToolId;

/// One tool's generated input type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolType {
    pub id: ToolId,
    pub fields: Vec<Field>,
    /// What the type leaves out, and why.
    pub hidden: Vec<Hidden>,
    pub redact: Vec<String>,
}

impl ToolType {
    pub fn new(id: ToolId, input_schema: &Value, redact: Vec<String>) -> Self {
        let (fields, hidden) = mapping::input_record(input_schema, &redact);
        Self {
            id,
            fields,
            hidden,
            redact,
        }
    }

    /// The typed input of a call whose arguments passed the tool's schema.
    pub fn input(&self, arguments: &Value) -> Result<ToolInput, InputError> {
        project(&self.fields, &self.redact, arguments)
    }
}

/// The input types of every tool a set can decide a call of.
#[derive(Debug, Clone, Default)]
pub struct ToolTypes {
    tools: BTreeMap<ToolId, ToolType>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Definitions {
    tools: Vec<Definition>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Definition {
    id: String,
    input_schema: Value,
    #[serde(default)]
    redact: Vec<String>,
}

impl ToolTypes {
    /// The types of a set: none for a recorded set from before per-tool
    /// actions (no built-in definitions), else the built-in tools' and the
    /// pinned downstream tools'.
    pub fn of(bundle: &PolicyBundle) -> Result<Self, Vec<Problem>> {
        let Some(file) = &bundle.tools else {
            return Ok(Self::default());
        };
        let problem =
            |message: String| vec![Problem::new(ProblemKind::Schema, &file.display, message)];
        let definitions: Definitions = serde_json::from_str(&file.text)
            .map_err(|err| problem(format!("the built-in tool definitions do not read: {err}")))?;
        let mut tools = BTreeMap::new();
        for definition in definitions.tools {
            let Some((server, name)) = definition.id.split_once('/') else {
                return Err(problem(format!("`{}` is not a tool id", definition.id)));
            };
            let id = ToolId::new(server, name);
            let ty = ToolType::new(id.clone(), &definition.input_schema, definition.redact);
            tools.insert(id, ty);
        }
        let servers = crate::servers::Servers::of(bundle).map_err(|err| err.problems)?;
        for server in &servers.config.servers {
            for (name, pin) in servers.lock.servers.get(&server.name).into_iter().flatten() {
                if !crate::servers::exposable(&server.name, name) {
                    continue;
                }
                let schema = pin.input_schema();
                let redact = server.hashed_arguments(name, &schema);
                let id = ToolId::new(&server.name, name);
                tools.insert(id.clone(), ToolType::new(id, &schema, redact));
            }
        }
        Ok(Self { tools })
    }

    /// Keeps only the tools `keep` names.
    pub fn retain(&mut self, mut keep: impl FnMut(&ToolId) -> bool) {
        self.tools.retain(|id, _| keep(id));
    }

    pub fn iter(&self) -> impl Iterator<Item = &ToolType> {
        self.tools.values()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// The Cedar schema text (`.cedarschema`) of the per-tool actions of
/// `tools`, over the base schema `base` (its fragments in JSON form):
/// with `whole`, the base schema and the actions as one schema a Cedar
/// tool can read; otherwise the actions alone.
pub fn schema_text<'a>(
    tools: impl Iterator<Item = &'a ToolType>,
    base: &[Value],
    whole: bool,
) -> Result<String, String> {
    let generated = fragment(tools, base).map_err(|err| err.0)?;
    let json = if whole {
        let mut merged = serde_json::Map::new();
        for part in base.iter().chain([&generated]) {
            let Some(namespaces) = part.as_object() else {
                continue;
            };
            for (name, declarations) in namespaces {
                let into = merged
                    .entry(name.clone())
                    .or_insert_with(|| serde_json::json!({}));
                for (section, items) in declarations.as_object().into_iter().flatten() {
                    let target = into.as_object_mut().map(|ns| {
                        ns.entry(section.clone())
                            .or_insert_with(|| serde_json::json!({}))
                    });
                    match (target.and_then(Value::as_object_mut), items.as_object()) {
                        (Some(target), Some(items)) => {
                            target.extend(items.iter().map(|(k, v)| (k.clone(), v.clone())));
                        }
                        _ => {
                            if let Some(ns) = into.as_object_mut() {
                                ns.insert(section.clone(), items.clone());
                            }
                        }
                    }
                }
            }
        }
        Value::Object(merged)
    } else {
        generated
    };
    cedar_policy::SchemaFragment::from_json_value(json)
        .map_err(|err| err.to_string())?
        .to_cedarschema()
        .map_err(|err| err.to_string())
}
