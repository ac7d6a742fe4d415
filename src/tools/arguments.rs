//! Validating a call's arguments against its tool's input schema before
//! anything else looks at them. Messages never echo a rejected value.

use std::fmt;

use thiserror::Error;

/// The arguments of a call do not match the tool's input schema.
///
/// Messages never echo the offending value: a rejected argument may be a
/// megabyte of file content or a secret the agent should not have sent.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("invalid arguments: {}", .problems.join("; "))]
pub struct ArgumentError {
    pub problems: Vec<String>,
}

/// An input or output schema that is not a valid JSON Schema.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("the schema does not compile: {message}")]
pub struct SchemaError {
    message: String,
}

/// A tool's input schema, compiled once when the registry is built.
pub struct ArgumentValidator {
    validator: jsonschema::Validator,
}

impl fmt::Debug for ArgumentValidator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ArgumentValidator").finish_non_exhaustive()
    }
}

/// At most this many problems are reported for one call.
const MAX_PROBLEMS: usize = 8;

impl ArgumentValidator {
    pub fn compile(schema: &serde_json::Value) -> Result<Self, SchemaError> {
        jsonschema::validator_for(schema)
            .map(|validator| Self { validator })
            .map_err(|err| SchemaError {
                message: err.to_string(),
            })
    }

    pub fn check(&self, arguments: &serde_json::Value) -> Result<(), ArgumentError> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(arguments)
            .take(MAX_PROBLEMS)
            .map(|err| {
                let location = err.instance_path().as_str();
                let location = if location.is_empty() { "/" } else { location };
                format!("{location}: {}", err.masked())
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ArgumentError { problems })
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn validator() -> ArgumentValidator {
        ArgumentValidator::compile(&json!({
            "type": "object",
            "properties": {"path": {"type": "string", "maxLength": 5}},
            "required": ["path"],
            "additionalProperties": false
        }))
        .unwrap()
    }

    #[test]
    fn accepts_matching_arguments() {
        assert_eq!(validator().check(&json!({"path": "a"})), Ok(()));
    }

    #[test]
    fn reports_where_and_why_without_echoing_the_value() {
        let err = validator()
            .check(&json!({"path": "supersecret"}))
            .unwrap_err();
        assert_eq!(err.problems.len(), 1);
        assert!(err.problems[0].starts_with("/path: "), "{err}");
        assert!(!err.to_string().contains("supersecret"), "{err}");
    }

    #[test]
    fn reports_missing_and_unknown_properties() {
        let err = validator().check(&json!({"other": 1})).unwrap_err();
        assert_eq!(err.problems.len(), 2, "{err}");
    }

    #[test]
    fn rejects_a_non_object() {
        assert!(validator().check(&json!("path")).is_err());
    }
}
