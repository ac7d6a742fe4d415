//! Which arguments of a tool name paths, and how the tool uses them: the
//! part of a tool's declaration that facts are computed from. It lives with
//! the facts so that facts never depend on the tool registry.

use serde::{Deserialize, Serialize};

/// How a tool uses a path argument. Reads and writes are judged separately:
/// the root and VCS-metadata rules for writes are hard constraints, for reads
/// they are defaults a team may widen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathRole {
    Read,
    Write,
    ReadWrite,
}

impl PathRole {
    pub fn reads(self) -> bool {
        matches!(self, PathRole::Read | PathRole::ReadWrite)
    }

    pub fn writes(self) -> bool {
        matches!(self, PathRole::Write | PathRole::ReadWrite)
    }
}

/// An argument of a tool that names a file or folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathArgument {
    /// The property of the arguments object that holds the path.
    pub name: String,
    pub role: PathRole,
    /// Used when the argument is absent (e.g. `search` defaults to the root).
    pub default: Option<String>,
}

/// Whether a property of an input schema can carry what a path argument
/// reads: a string, a list of strings, or a value of no declared type.
pub fn holds_paths(property: &serde_json::Value) -> bool {
    use serde_json::Value;
    let textual = |p: &Value| match p.get("type") {
        None => true,
        Some(Value::String(kind)) => kind == "string",
        Some(Value::Array(kinds)) => kinds.iter().any(|k| k == "string"),
        _ => false,
    };
    let list = match property.get("type") {
        Some(Value::String(kind)) => kind == "array",
        Some(Value::Array(kinds)) => kinds.iter().any(|k| k == "array"),
        _ => false,
    };
    textual(property) || (list && property.get("items").is_none_or(textual))
}

/// The paths an argument's value names: a string, or each string of a
/// list. Anything else names none.
pub fn path_values(value: &serde_json::Value) -> Vec<&str> {
    match value {
        serde_json::Value::String(path) => vec![path.as_str()],
        serde_json::Value::Array(items) => items.iter().filter_map(|i| i.as_str()).collect(),
        _ => Vec::new(),
    }
}
