//! What portcullis knows of a tool before any call: effects, required
//! capabilities, path arguments, schemas. The declaration policies are
//! written against; it runs nothing.

use std::fmt;

use serde::{Deserialize, Serialize};

pub use crate::facts::{PathArgument, PathRole};

/// What a tool can do to the world. A closed vocabulary: policies match on
/// these names, so an unknown effect would be a fact no policy can see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    Read,
    Write,
    Process,
    Worktree,
    Network,
    Destructive,
    /// It makes an agent act (the bridge's `prompt_send`): what the agent
    /// then does is its own harness's to gate.
    Agent,
}

impl Effect {
    pub const ALL: [Effect; 7] = [
        Effect::Read,
        Effect::Write,
        Effect::Process,
        Effect::Worktree,
        Effect::Network,
        Effect::Destructive,
        Effect::Agent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
            Effect::Process => "process",
            Effect::Worktree => "worktree",
            Effect::Network => "network",
            Effect::Destructive => "destructive",
            Effect::Agent => "agent",
        }
    }
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool's id, `server/name`: the Cedar entity id of `Portcullis::Tool`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct ToolId {
    server: String,
    name: String,
}

impl ToolId {
    pub fn new(server: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            server: server.into(),
            name: name.into(),
        }
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for ToolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.server, self.name)
    }
}

impl From<ToolId> for String {
    fn from(id: ToolId) -> Self {
        id.to_string()
    }
}

/// A `server/name` id has no server of its own without its slash.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is no tool id: a tool id is `server/name`")]
pub struct NotAToolId(String);

impl TryFrom<String> for ToolId {
    type Error = NotAToolId;

    /// Split at the first slash, as every id is read: a server's name has
    /// none.
    fn try_from(text: String) -> Result<Self, Self::Error> {
        match text.split_once('/') {
            Some((server, name)) => Ok(Self::new(server, name)),
            None => Err(NotAToolId(text)),
        }
    }
}

/// Everything portcullis knows about a tool before any call.
#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec {
    pub id: ToolId,
    /// What an agent reads to pick the tool: when to use it, and when not.
    pub description: String,
    pub effects: Vec<Effect>,
    pub required_capabilities: Vec<String>,
    pub path_arguments: Vec<PathArgument>,
    pub input_schema: serde_json::Value,
    /// The shape of the tool's `structuredContent`.
    pub output_schema: serde_json::Value,
    /// Arguments (dotted paths) recorded only as their SHA-256 and never
    /// shown to policies: file contents, secrets.
    pub redact: Vec<String>,
}

impl ToolSpec {
    /// A tool is read-only when nothing it declares can change the world.
    pub fn read_only(&self) -> bool {
        self.effects.iter().all(|effect| *effect == Effect::Read)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use super::*;

    #[test]
    fn a_tool_id_reads_back_what_it_writes_and_refuses_one_without_a_server() {
        let id = ToolId::new("github", "issues/create");
        let written = serde_json::to_value(&id).unwrap();
        assert_eq!(written, "github/issues/create");
        let read: ToolId = serde_json::from_value(written).unwrap();
        assert_eq!(read, id);
        let err = serde_json::from_value::<ToolId>("write_file".into()).unwrap_err();
        assert!(err.to_string().contains("is no tool id"), "{err}");
    }
}
