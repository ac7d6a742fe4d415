//! JSON Schema → Cedar type: what of a tool's input schema policies can see
//! as `context.input`. The rules follow cedar-for-agents' MCP schema
//! generator: objects with declared properties are records (required
//! properties required), strings, integers, numbers and booleans are
//! `String`, `Long`, `decimal` and `Bool`, IP-address strings are
//! `ipaddr`, enums take their values' type, arrays of an expressible type
//! are sets. Whatever has no faithful Cedar type (free-form objects,
//! `oneOf`, `$ref`, tuples, `null`) is left out and listed as hidden, with
//! the reason, so `portcullis schema show` can say what policies cannot see.

use serde_json::{Map, Value};

/// A Cedar type that a JSON value of the input can be given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputType {
    Bool,
    Long,
    String,
    /// Cedar's `decimal`: JSON numbers with at most four decimal places.
    Decimal,
    /// Cedar's `ipaddr`: strings of format `ipv4` or `ipv6`.
    IpAddr,
    Set(Box<InputType>),
    Record(Vec<Field>),
}

/// One attribute of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub ty: InputType,
    pub required: bool,
}

/// A part of the input policies cannot see, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hidden {
    /// Dotted path from the input's top (`options.extra`).
    pub path: String,
    pub why: String,
}

/// Records nested deeper than this are hidden: a schema is the downstream
/// server's to write, and a deep one would cost every call.
pub const MAX_DEPTH: usize = 16;

/// The record type of a tool's input, the parts left out, and the parts
/// redacted (recorded as a SHA-256 only, never shown to policies).
pub fn input_record(schema: &Value, redact: &[String]) -> (Vec<Field>, Vec<Hidden>) {
    let mut hidden = Vec::new();
    let fields = match schema.get("properties").and_then(Value::as_object) {
        Some(properties) => record_fields(schema, properties, "", redact, 1, &mut hidden),
        None => Vec::new(),
    };
    (fields, hidden)
}

fn record_fields(
    schema: &Value,
    properties: &Map<String, Value>,
    prefix: &str,
    redact: &[String],
    depth: usize,
    hidden: &mut Vec<Hidden>,
) -> Vec<Field> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut fields = Vec::new();
    for (name, property) in properties {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        if redact.contains(&path) {
            continue;
        }
        match property_type(property, &path, redact, depth, hidden) {
            Ok((ty, nullable)) => fields.push(Field {
                name: name.clone(),
                ty,
                required: required.contains(&name.as_str()) && !nullable,
            }),
            Err(why) => hidden.push(Hidden { path, why }),
        }
    }
    fields
}

/// The type of one property, and whether `null` is also allowed (then the
/// attribute is optional: a null is an absent attribute).
fn property_type(
    schema: &Value,
    path: &str,
    redact: &[String],
    depth: usize,
    hidden: &mut Vec<Hidden>,
) -> Result<(InputType, bool), String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    let Some(object) = schema.as_object() else {
        return Err("its schema is not an object".to_owned());
    };
    for keyword in [
        "$ref",
        "oneOf",
        "anyOf",
        "allOf",
        "not",
        "if",
        "$dynamicRef",
    ] {
        if object.contains_key(keyword) {
            return Err(format!("`{keyword}` has no Cedar type"));
        }
    }
    let (kind, nullable) = match object.get("type") {
        Some(Value::String(kind)) => (kind.clone(), false),
        Some(Value::Array(kinds)) => {
            let kinds: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
            let nullable = kinds.contains(&"null");
            let rest: Vec<&str> = kinds.into_iter().filter(|k| *k != "null").collect();
            match rest.as_slice() {
                [one] => ((*one).to_owned(), nullable),
                _ => return Err("a value of several types has no Cedar type".to_owned()),
            }
        }
        Some(_) => return Err("its `type` is not a type name".to_owned()),
        None => (implied_type(object)?, false),
    };
    let ty = match kind.as_str() {
        "boolean" => InputType::Bool,
        "integer" => InputType::Long,
        "number" => InputType::Decimal,
        "string" => match object.get("format").and_then(Value::as_str) {
            Some("ipv4" | "ipv6") => InputType::IpAddr,
            _ => InputType::String,
        },
        "array" => {
            if object.contains_key("prefixItems") {
                return Err("a tuple has no Cedar type".to_owned());
            }
            match object.get("items") {
                Some(items @ Value::Object(_)) => {
                    let inner = format!("{path}[]");
                    let (element, _) = property_type(items, &inner, redact, depth + 1, hidden)
                        .map_err(|why| format!("its items: {why}"))?;
                    InputType::Set(Box::new(element))
                }
                _ => return Err("an array without one item schema has no Cedar type".to_owned()),
            }
        }
        "object" => match object.get("properties").and_then(Value::as_object) {
            Some(properties) if !properties.is_empty() => InputType::Record(record_fields(
                schema,
                properties,
                path,
                redact,
                depth + 1,
                hidden,
            )),
            _ => return Err("a free-form object has no Cedar type".to_owned()),
        },
        "null" => return Err("`null` has no Cedar type".to_owned()),
        other => return Err(format!("unknown type `{other}`")),
    };
    Ok((ty, nullable))
}

/// The type a schema without `type` implies: by its `enum` or `const`
/// values, or by `properties`.
fn implied_type(object: &Map<String, Value>) -> Result<String, String> {
    let values: Vec<&Value> = match (object.get("enum"), object.get("const")) {
        (Some(Value::Array(values)), _) => values.iter().collect(),
        (_, Some(value)) => vec![value],
        _ if object.contains_key("properties") => return Ok("object".to_owned()),
        _ => return Err("a schema without a type has no Cedar type".to_owned()),
    };
    let kind = |value: &Value| match value {
        Value::String(_) => Some("string"),
        Value::Bool(_) => Some("boolean"),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some("integer"),
        Value::Number(_) => Some("number"),
        _ => None,
    };
    let mut kinds: Vec<Option<&str>> = values.iter().map(|v| kind(v)).collect();
    kinds.dedup();
    match kinds.as_slice() {
        [Some(one)] => Ok((*one).to_owned()),
        _ => Err("an enum of mixed or structured values has no Cedar type".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn field(name: &str, ty: InputType, required: bool) -> Field {
        Field {
            name: name.into(),
            ty,
            required,
        }
    }

    #[test]
    fn scalars_enums_and_sets_map_to_their_cedar_types() {
        let (fields, hidden) = input_record(
            &json!({"type": "object", "required": ["path", "n"], "properties": {
                "path": {"type": "string"},
                "n": {"type": "integer"},
                "ratio": {"type": "number"},
                "on": {"type": "boolean"},
                "mode": {"enum": ["fast", "slow"]},
                "level": {"enum": [1, 2, 3]},
                "host": {"type": "string", "format": "ipv4"},
                "when": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "maybe": {"type": ["string", "null"]}
            }}),
            &[],
        );
        assert!(hidden.is_empty(), "{hidden:?}");
        assert_eq!(
            fields,
            vec![
                field("path", InputType::String, true),
                field("n", InputType::Long, true),
                field("ratio", InputType::Decimal, false),
                field("on", InputType::Bool, false),
                field("mode", InputType::String, false),
                field("level", InputType::Long, false),
                field("host", InputType::IpAddr, false),
                field("when", InputType::String, false),
                field("tags", InputType::Set(Box::new(InputType::String)), false),
                field("maybe", InputType::String, false),
            ]
        );
    }

    #[test]
    fn what_cedar_cannot_express_is_hidden_with_the_reason() {
        let (fields, hidden) = input_record(
            &json!({"type": "object", "properties": {
                "free": {"type": "object"},
                "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                "pair": {"type": "array", "prefixItems": [{"type": "string"}]},
                "any": {},
                "mixed": {"enum": ["a", 1]},
                "nested": {"type": "object", "properties": {
                    "ok": {"type": "string"},
                    "blob": {"type": "object", "additionalProperties": true}
                }}
            }}),
            &[],
        );
        let paths: Vec<&str> = hidden.iter().map(|h| h.path.as_str()).collect();
        assert_eq!(
            paths,
            ["free", "either", "pair", "any", "mixed", "nested.blob"]
        );
        assert!(hidden[1].why.contains("oneOf"), "{:?}", hidden[1]);
        assert_eq!(
            fields,
            vec![field(
                "nested",
                InputType::Record(vec![field("ok", InputType::String, false)]),
                false
            )]
        );
    }

    #[test]
    fn redacted_fields_leave_the_type_but_are_not_listed_as_hidden() {
        let (fields, hidden) = input_record(
            &json!({"type": "object", "required": ["path", "content"], "properties": {
                "path": {"type": "string"}, "content": {"type": "string"},
                "auth": {"type": "object", "properties": {"user": {"type": "string"}, "token": {"type": "string"}}}
            }}),
            &["content".to_owned(), "auth.token".to_owned()],
        );
        assert!(hidden.is_empty());
        assert_eq!(
            fields,
            vec![
                field("path", InputType::String, true),
                field(
                    "auth",
                    InputType::Record(vec![field("user", InputType::String, false)]),
                    false
                ),
            ]
        );
    }

    #[test]
    fn a_schema_nested_past_the_limit_is_hidden_not_followed() {
        let mut schema = json!({"type": "string"});
        for _ in 0..40 {
            schema = json!({"type": "object", "properties": {"deeper": schema}});
        }
        let (_, hidden) =
            input_record(&json!({"type": "object", "properties": {"x": schema}}), &[]);
        assert_eq!(hidden.len(), 1);
        assert!(hidden[0].why.contains("nested deeper"), "{hidden:?}");
    }
}
