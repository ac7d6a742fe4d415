//! From a call's arguments to the typed input policies see, and from that
//! input to Cedar values. Both directions go through the tool's generated
//! type; a value that does not fit it exactly (an integer out of a Long's
//! range, a number with more decimal places than `decimal` keeps) fails the
//! call closed rather than being rounded into something a policy did not
//! judge.

use std::collections::BTreeMap;

use cedar_policy::RestrictedExpression;
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::mapping::{Field, InputType};
use crate::canonical::sha256_hex;
use crate::facts::ToolInput;

/// An argument whose value the tool's input type cannot carry.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("argument `{path}`: {why}")]
pub struct InputError {
    pub path: String,
    pub why: String,
}

fn error(path: &str, why: impl Into<String>) -> InputError {
    InputError {
        path: path.to_owned(),
        why: why.into(),
    }
}

/// The typed input of a call: the fields of `record` taken from
/// `arguments`, and the hashes of the redacted ones.
pub fn project(
    record: &[Field],
    redact: &[String],
    arguments: &Value,
) -> Result<ToolInput, InputError> {
    let empty = Map::new();
    let object = arguments.as_object().unwrap_or(&empty);
    let values = project_record(record, object, "")?;
    let mut redacted = BTreeMap::new();
    for path in redact {
        if let Some(value) = at_path(arguments, path) {
            let digest = match value {
                Value::String(text) => hex::encode(Sha256::digest(text.as_bytes())),
                other => sha256_hex(other),
            };
            redacted.insert(path.clone(), digest);
        }
    }
    Ok(ToolInput { values, redacted })
}

fn at_path<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(value, |value, name| value.as_object()?.get(name))
}

fn joined(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

fn project_record(
    fields: &[Field],
    object: &Map<String, Value>,
    prefix: &str,
) -> Result<Map<String, Value>, InputError> {
    let mut values = Map::new();
    for field in fields {
        let path = joined(prefix, &field.name);
        match object.get(&field.name) {
            None | Some(Value::Null) if !field.required => {}
            None | Some(Value::Null) => return Err(error(&path, "required, and absent")),
            Some(value) => {
                values.insert(field.name.clone(), project_value(&field.ty, value, &path)?);
            }
        }
    }
    Ok(values)
}

fn project_value(ty: &InputType, value: &Value, path: &str) -> Result<Value, InputError> {
    let mismatch = || error(path, format!("not {}", type_name(ty)));
    Ok(match (ty, value) {
        (InputType::Bool, Value::Bool(_)) | (InputType::String, Value::String(_)) => value.clone(),
        (InputType::Long, Value::Number(n)) => Value::from(long(n, path)?),
        (InputType::Decimal, Value::Number(n)) => {
            decimal(n, path)?;
            value.clone()
        }
        (InputType::IpAddr, Value::String(text)) => {
            text.parse::<std::net::IpAddr>()
                .map_err(|_| error(path, "not an IP address"))?;
            value.clone()
        }
        (InputType::Set(element), Value::Array(items)) => Value::Array(
            items
                .iter()
                .map(|item| project_value(element, item, &format!("{path}[]")))
                .collect::<Result<_, _>>()?,
        ),
        (InputType::Record(fields), Value::Object(object)) => {
            Value::Object(project_record(fields, object, path)?)
        }
        _ => return Err(mismatch()),
    })
}

fn type_name(ty: &InputType) -> &'static str {
    match ty {
        InputType::Bool => "a boolean",
        InputType::Long => "an integer",
        InputType::String => "a string",
        InputType::Decimal => "a number",
        InputType::IpAddr => "an IP address",
        InputType::Set(_) => "an array",
        InputType::Record(_) => "an object",
    }
}

/// An integer as a Cedar `Long`: JSON Schema counts 3.0 as an integer, so
/// it is one here too.
fn long(n: &Number, path: &str) -> Result<i64, InputError> {
    if let Some(i) = n.as_i64() {
        return Ok(i);
    }
    let out_of_range = || error(path, "outside the range of a Cedar Long (64-bit)");
    if n.is_u64() {
        return Err(out_of_range());
    }
    match n.as_f64() {
        // Both bounds are exact in f64; the upper one is excluded.
        Some(f)
            if f.fract() == 0.0
                && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&f) =>
        {
            // In range and whole: the cast is exact.
            Ok(f as i64)
        }
        Some(f) if f.fract() == 0.0 => Err(out_of_range()),
        _ => Err(error(path, "not an integer")),
    }
}

/// The largest whole part a Cedar `decimal` holds (i64::MAX / 10^4).
const DECIMAL_MAX_WHOLE: u64 = 922_337_203_685_477;

/// A number as the text of a Cedar `decimal` literal (`"12.5"`), only when
/// it is exact: at most four decimal places, within range.
fn decimal(n: &Number, path: &str) -> Result<String, InputError> {
    let text = n.to_string();
    let inexact = || {
        error(
            path,
            "a number policies can compare must have at most 4 decimal places and lie within ±922337203685477",
        )
    };
    if text.contains(['e', 'E']) {
        return Err(inexact());
    }
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, "0"));
    if fraction.len() > 4 || fraction.is_empty() {
        return Err(inexact());
    }
    let magnitude: u64 = whole
        .trim_start_matches('-')
        .parse()
        .map_err(|_| inexact())?;
    if magnitude > DECIMAL_MAX_WHOLE {
        return Err(inexact());
    }
    Ok(format!("{whole}.{fraction}"))
}

/// The Cedar record of a typed input, by the tool's type. Values recorded
/// in an audit log come through here too, so a value that does not fit
/// is an error, not a guess.
pub fn record_expression(
    fields: &[Field],
    values: &Map<String, Value>,
) -> Result<RestrictedExpression, InputError> {
    record_of(fields, values, "")
}

fn record_of(
    fields: &[Field],
    values: &Map<String, Value>,
    prefix: &str,
) -> Result<RestrictedExpression, InputError> {
    let mut attributes = Vec::with_capacity(values.len());
    for (name, value) in values {
        let path = joined(prefix, name);
        let field = fields
            .iter()
            .find(|f| f.name == *name)
            .ok_or_else(|| error(&path, "not part of the tool's input type"))?;
        attributes.push((name.clone(), expression(&field.ty, value, &path)?));
    }
    if let Some(missing) = fields
        .iter()
        .find(|f| f.required && !values.contains_key(&f.name))
    {
        return Err(error(
            &joined(prefix, &missing.name),
            "required, and absent",
        ));
    }
    RestrictedExpression::new_record(attributes).map_err(|err| error(prefix, err.to_string()))
}

fn expression(
    ty: &InputType,
    value: &Value,
    path: &str,
) -> Result<RestrictedExpression, InputError> {
    let mismatch = || error(path, format!("not {}", type_name(ty)));
    Ok(match (ty, value) {
        (InputType::Bool, Value::Bool(b)) => RestrictedExpression::new_bool(*b),
        (InputType::String, Value::String(s)) => RestrictedExpression::new_string(s.clone()),
        (InputType::Long, Value::Number(n)) => RestrictedExpression::new_long(long(n, path)?),
        (InputType::Decimal, Value::Number(n)) => {
            RestrictedExpression::new_decimal(decimal(n, path)?)
        }
        (InputType::IpAddr, Value::String(s)) => {
            s.parse::<std::net::IpAddr>()
                .map_err(|_| error(path, "not an IP address"))?;
            RestrictedExpression::new_ip(s)
        }
        (InputType::Set(element), Value::Array(items)) => RestrictedExpression::new_set(
            items
                .iter()
                .map(|item| expression(element, item, &format!("{path}[]")))
                .collect::<Result<Vec<_>, _>>()?,
        ),
        (InputType::Record(fields), Value::Object(object)) => record_of(fields, object, path)?,
        _ => return Err(mismatch()),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::mapping::input_record;
    use super::*;

    fn record(schema: Value) -> Vec<Field> {
        input_record(&schema, &[]).0
    }

    #[test]
    fn arguments_become_the_typed_input_and_redacted_ones_only_a_hash() {
        let schema = json!({"type": "object", "required": ["path"], "properties": {
            "path": {"type": "string"}, "content": {"type": "string"},
            "n": {"type": "integer"}, "free": {"type": "object"}}});
        let redact = ["content".to_owned()];
        let (fields, _) = input_record(&schema, &redact);
        let input = project(
            &fields,
            &redact,
            &json!({"path": "docs/a.md", "content": "secret", "n": 3.0, "free": {"x": 1}}),
        )
        .unwrap();
        assert_eq!(
            Value::Object(input.values.clone()),
            json!({"path": "docs/a.md", "n": 3})
        );
        assert_eq!(
            input.redacted["content"],
            hex::encode(Sha256::digest(b"secret"))
        );
        assert!(record_expression(&fields, &input.values).is_ok());
    }

    #[test]
    fn values_a_cedar_type_cannot_carry_exactly_fail_the_call() {
        let fields = record(json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "x": {"type": "number"}, "ip": {"type": "string", "format": "ipv4"}}}));
        for (arguments, path) in [
            (json!({"n": 18_446_744_073_709_551_615u64}), "n"),
            (json!({"n": 1e30}), "n"),
            (json!({"n": 1.5}), "n"),
            (json!({"x": 0.12345}), "x"),
            (json!({"x": 1e300}), "x"),
            (json!({"x": 1_000_000_000_000_000u64}), "x"),
            (json!({"ip": "not-an-address"}), "ip"),
            (json!({"n": "3"}), "n"),
        ] {
            let err = project(&fields, &[], &arguments).unwrap_err();
            assert_eq!(err.path, path, "{arguments}: {err}");
        }
        let fine = project(&fields, &[], &json!({"n": -7, "x": 2.5, "ip": "10.0.0.1"})).unwrap();
        assert!(record_expression(&fields, &fine.values).is_ok());
    }

    #[test]
    fn a_recorded_input_that_does_not_fit_the_type_is_an_error() {
        let fields = record(
            json!({"type": "object", "required": ["path"], "properties": {
            "path": {"type": "string"}}}),
        );
        let bad = [
            json!({"path": 3}),
            json!({}),
            json!({"path": "a", "other": true}),
        ];
        for values in bad {
            let Value::Object(values) = values else {
                unreachable!()
            };
            assert!(record_expression(&fields, &values).is_err(), "{values:?}");
        }
    }
}
