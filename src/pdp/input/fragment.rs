//! The generated schema fragment: one action per tool, a child of
//! `call_tool`, whose context is the set's own `ToolFacts` plus `input`,
//! the tool's record type. Built from the base schema's JSON form so a
//! team's `ToolFacts` and `call_tool` (its principal and resource types)
//! carry over unchanged.

use serde_json::{Map, Value, json};

use super::ToolType;
use super::mapping::{Field, InputType};

/// The namespace portcullis's entity and action types live in.
const NAMESPACE: &str = "Portcullis";

/// Why the base schema cannot be extended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotExtensible(pub String);

/// The fragment, in Cedar's JSON schema format, for `tools` over the base
/// schema `base` (its fragments in JSON form).
pub fn fragment<'a>(
    tools: impl Iterator<Item = &'a ToolType>,
    base: &[Value],
) -> Result<Value, NotExtensible> {
    let namespace = |value: &Value| value.get(NAMESPACE).cloned();
    let facts = base
        .iter()
        .filter_map(namespace)
        .find_map(|ns| ns.pointer("/commonTypes/ToolFacts/attributes").cloned())
        .and_then(|facts| facts.as_object().cloned())
        .ok_or_else(|| {
            NotExtensible("the schema declares no record type `Portcullis::ToolFacts`".to_owned())
        })?;
    if facts.contains_key("input") {
        return Err(NotExtensible(
            "`ToolFacts` already has an attribute `input`, which portcullis generates per tool"
                .to_owned(),
        ));
    }
    let applies = base
        .iter()
        .filter_map(namespace)
        .find_map(|ns| ns.pointer("/actions/call_tool/appliesTo").cloned())
        .ok_or_else(|| {
            NotExtensible(
                "the schema declares no action `call_tool` that applies to tools".to_owned(),
            )
        })?;
    let mut actions = Map::new();
    for tool in tools {
        let mut context = facts.clone();
        context.insert("input".to_owned(), record_type(&tool.fields));
        actions.insert(
            tool.id.to_string(),
            json!({
                "memberOf": [{"id": "call_tool"}],
                "appliesTo": {
                    "principalTypes": applies.get("principalTypes").cloned().unwrap_or(json!([])),
                    "resourceTypes": applies.get("resourceTypes").cloned().unwrap_or(json!([])),
                    "context": {"type": "Record", "attributes": context},
                }
            }),
        );
    }
    Ok(json!({NAMESPACE: {"commonTypes": {}, "entityTypes": {}, "actions": actions}}))
}

fn record_type(fields: &[Field]) -> Value {
    let attributes: Map<String, Value> = fields
        .iter()
        .map(|field| {
            let mut ty = cedar_type(&field.ty);
            if let Value::Object(object) = &mut ty {
                object.insert("required".to_owned(), Value::Bool(field.required));
            }
            (field.name.clone(), ty)
        })
        .collect();
    json!({"type": "Record", "attributes": attributes})
}

fn cedar_type(ty: &InputType) -> Value {
    match ty {
        InputType::Bool => json!({"type": "Boolean"}),
        InputType::Long => json!({"type": "Long"}),
        InputType::String => json!({"type": "String"}),
        InputType::Decimal => json!({"type": "Extension", "name": "decimal"}),
        InputType::IpAddr => json!({"type": "Extension", "name": "ipaddr"}),
        InputType::Set(element) => json!({"type": "Set", "element": cedar_type(element)}),
        InputType::Record(fields) => record_type(fields),
    }
}
