//! The agent bridge's four tools, as the registry declares them: an
//! external caller lists and reads its own conversations with a downstream
//! agent, sends a prompt (starting or continuing one) and cancels its own
//! turn. They are tools of the server `bridge`, decided like any other;
//! `crate::bridge` runs them.

use serde_json::{Value, json};

use super::spec::{Effect, ToolId, ToolSpec};

/// The server id of the bridge's tools.
pub const BRIDGE_SERVER: &str = "bridge";

/// The longest prompt the bridge passes on, in characters.
pub const MAX_PROMPT: u64 = 100_000;

/// A session id as the bridge makes them: 32 lowercase hex digits.
const SESSION_ID_PATTERN: &str = "^[0-9a-f]{32}$";

/// One of the bridge's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BridgeTool {
    SessionsList,
    SessionGet,
    PromptSend,
    PromptCancel,
}

impl BridgeTool {
    pub const ALL: [BridgeTool; 4] = [
        BridgeTool::SessionsList,
        BridgeTool::SessionGet,
        BridgeTool::PromptSend,
        BridgeTool::PromptCancel,
    ];

    /// The bridge tool of this name, if one is.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tool| tool.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            BridgeTool::SessionsList => "sessions_list",
            BridgeTool::SessionGet => "session_get",
            BridgeTool::PromptSend => "prompt_send",
            BridgeTool::PromptCancel => "prompt_cancel",
        }
    }

    pub fn spec(self) -> ToolSpec {
        let (description, effects, capabilities, input, output, redact): (
            &str,
            &[Effect],
            &[&str],
            Value,
            Value,
            &[&str],
        ) = match self {
            BridgeTool::SessionsList => (
                "List your own conversations with the agent, newest first: id, title (the start of \
                 the first prompt), created and updated times, turn count and state. Only sessions \
                 this client started are listed.",
                &[Effect::Read],
                &["read"],
                closed(json!({})),
                closed(json!({"sessions": {"type": "array", "items": session_summary()}})),
                &[],
            ),
            BridgeTool::SessionGet => (
                "Read one of your conversations with the agent: every turn's prompt, reply and \
                 state. A session that is not yours is answered as one that does not exist.",
                &[Effect::Read],
                &["read"],
                closed(json!({"session_id": session_id()})),
                closed(json!({
                    "session": session_summary(),
                    "turns": {"type": "array", "items": turn()}
                })),
                &[],
            ),
            BridgeTool::PromptSend => (
                "Send a prompt to the agent and wait for its reply: without session_id it starts a \
                 new conversation, with one of your session ids it continues that one. Returns the \
                 agent's final reply and the session id. Progress is reported while the agent \
                 works when you give a progress token.",
                &[Effect::Agent],
                &["agent"],
                json!({
                    "type": "object",
                    "properties": {
                        "prompt": {"type": "string", "minLength": 1, "maxLength": MAX_PROMPT,
                                   "description": "What to ask the agent."},
                        "session_id": session_id()
                    },
                    "required": ["prompt"],
                    "additionalProperties": false
                }),
                closed(json!({"session_id": {"type": "string"}, "reply": {"type": "string"}})),
                // A prompt is recorded as its SHA-256, never shown to
                // policies, and kept only in the session store.
                &["prompt"],
            ),
            BridgeTool::PromptCancel => (
                "Cancel the turn in flight in one of your sessions, one you started on this \
                 connection. Answers cancelled: false for a turn that is finished, unknown, not \
                 yours or started on another connection.",
                &[],
                &[],
                closed(json!({"session_id": session_id()})),
                closed(json!({"cancelled": {"type": "boolean"}})),
                &[],
            ),
        };
        ToolSpec {
            id: ToolId::new(BRIDGE_SERVER, self.name()),
            description: description.to_owned(),
            effects: effects.to_vec(),
            required_capabilities: capabilities.iter().map(|c| (*c).to_owned()).collect(),
            path_arguments: Vec::new(),
            input_schema: input,
            output_schema: output,
            redact: redact.iter().map(|r| (*r).to_owned()).collect(),
        }
    }

    pub fn by_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tool| tool.name() == name)
    }
}

/// The specs of the bridge's tools.
pub fn bridge_specs() -> Vec<ToolSpec> {
    BridgeTool::ALL.iter().map(|tool| tool.spec()).collect()
}

/// An object schema with exactly these properties, all required.
fn closed(properties: Value) -> Value {
    let required: Vec<String> = properties
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

fn session_id() -> Value {
    json!({"type": "string", "pattern": SESSION_ID_PATTERN,
           "description": "A session id from prompt_send or sessions_list."})
}

fn session_summary() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "title": {"type": "string"},
            "created_at": {"type": "string"},
            "updated_at": {"type": "string"},
            "turns": {"type": "integer"},
            "state": {"type": "string", "enum": ["running", "completed", "failed", "cancelled", "interrupted"]}
        },
        "required": ["id", "title", "created_at", "updated_at", "turns", "state"]
    })
}

fn turn() -> Value {
    json!({
        "type": "object",
        "properties": {
            "prompt": {"type": "string"},
            "reply": {"type": ["string", "null"]},
            "state": {"type": "string"},
            "started_at": {"type": "string"},
            "ended_at": {"type": ["string", "null"]}
        },
        "required": ["prompt", "reply", "state", "started_at", "ended_at"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ArgumentValidator;

    #[test]
    fn every_schema_compiles_and_is_tight() {
        for tool in BridgeTool::ALL {
            let spec = tool.spec();
            let input = ArgumentValidator::compile(&spec.input_schema).unwrap();
            ArgumentValidator::compile(&spec.output_schema).unwrap();
            assert!(
                input.check(&json!({"surprise": 1})).is_err(),
                "{} takes unknown arguments",
                spec.id
            );
        }
        let send = BridgeTool::PromptSend.spec();
        let input = ArgumentValidator::compile(&send.input_schema).unwrap();
        assert!(input.check(&json!({"prompt": "hi"})).is_ok());
        assert!(input.check(&json!({"prompt": ""})).is_err());
        assert!(
            input
                .check(&json!({"prompt": "hi", "session_id": "../etc"}))
                .is_err()
        );
        assert_eq!(send.effects, [Effect::Agent]);
        assert_eq!(send.required_capabilities, ["agent"]);
        assert!(BridgeTool::PromptCancel.spec().effects.is_empty());
        assert_eq!(
            BridgeTool::by_name("session_get"),
            Some(BridgeTool::SessionGet)
        );
    }
}
