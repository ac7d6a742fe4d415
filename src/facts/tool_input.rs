//! The typed arguments of a call that policies see as `context.input`:
//! computed by the decision point from arguments that already passed the
//! tool's input schema, and recorded with the decision so that replay
//! rebuilds the very request.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolInput {
    /// The arguments the tool's generated record type exposes, as JSON.
    pub values: Map<String, Value>,
    /// Arguments marked `redact`, by dotted path: the SHA-256 of the value
    /// (of its UTF-8 text for a string, of its canonical JSON
    /// otherwise), never the value. Policies cannot
    /// read them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub redacted: BTreeMap<String, String>,
}
