//! The event a harness sends a `PreToolUse` hook: one JSON object on
//! stdin. Claude Code and Codex send the same shape (`session_id`, `cwd`,
//! `hook_event_name`, `tool_name`, `tool_input`, `tool_use_id`, and fields
//! portcullis does not read, which are let through).

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;
use thiserror::Error;

/// Most bytes of an event: a `Write` carries the whole file it writes.
pub const MAX_EVENT_BYTES: usize = 64 * 1024 * 1024;

/// Longest session or tool-use id kept in a record.
const MAX_ID_BYTES: usize = 256;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum EventError {
    #[error("the hook event is not JSON of the PreToolUse shape: {0}")]
    Shape(String),
    #[error("the hook event is larger than {MAX_EVENT_BYTES} bytes")]
    TooLarge,
    #[error("the hook event is `{0}`, not PreToolUse: install the hook for PreToolUse only")]
    WrongEvent(String),
    #[error("the hook event's tool_input is not an object")]
    InputNotObject,
    #[error("the hook event's cwd is not an absolute path")]
    CwdNotAbsolute,
    #[error("the hook event's {0} is empty, too long or holds control characters")]
    BadId(&'static str),
    #[error("the hook event names no tool")]
    NoTool,
}

#[derive(Debug, Deserialize)]
struct Wire {
    session_id: String,
    cwd: String,
    hook_event_name: String,
    tool_name: String,
    tool_input: Value,
    #[serde(default)]
    tool_use_id: Option<String>,
}

/// A checked `PreToolUse` event.
#[derive(Debug, Clone, PartialEq)]
pub struct PreToolUse {
    pub session_id: String,
    /// The folder the harness's shell is in (it follows `cd`): where a
    /// relative path in the input points from.
    pub cwd: PathBuf,
    pub tool_name: String,
    /// Always a JSON object.
    pub tool_input: Value,
    pub tool_use_id: Option<String>,
}

impl PreToolUse {
    pub fn parse(bytes: &[u8]) -> Result<Self, EventError> {
        if bytes.len() > MAX_EVENT_BYTES {
            return Err(EventError::TooLarge);
        }
        let wire: Wire =
            serde_json::from_slice(bytes).map_err(|err| EventError::Shape(err.to_string()))?;
        if wire.hook_event_name != "PreToolUse" {
            return Err(EventError::WrongEvent(clip(&wire.hook_event_name)));
        }
        if !wire.tool_input.is_object() {
            return Err(EventError::InputNotObject);
        }
        if wire.tool_name.is_empty() {
            return Err(EventError::NoTool);
        }
        let cwd = PathBuf::from(&wire.cwd);
        if !cwd.is_absolute() || wire.cwd.contains('\0') {
            return Err(EventError::CwdNotAbsolute);
        }
        check_id(&wire.session_id, "session_id")?;
        if let Some(id) = &wire.tool_use_id {
            check_id(id, "tool_use_id")?;
        }
        check_id(&wire.tool_name, "tool_name")?;
        Ok(Self {
            session_id: wire.session_id,
            cwd,
            tool_name: wire.tool_name,
            tool_input: wire.tool_input,
            tool_use_id: wire.tool_use_id,
        })
    }
}

/// Ids go into records and answers: short, printable, one line.
fn check_id(id: &str, what: &'static str) -> Result<(), EventError> {
    if id.is_empty() || id.len() > MAX_ID_BYTES || id.chars().any(char::is_control) {
        return Err(EventError::BadId(what));
    }
    Ok(())
}

/// A value quoted back in an error, cut to a readable length.
fn clip(text: &str) -> String {
    let mut clipped: String = text.chars().filter(|c| !c.is_control()).take(64).collect();
    if clipped.len() < text.len() {
        clipped.push('…');
    }
    clipped
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(overrides: Value) -> Vec<u8> {
        let mut base = json!({
            "session_id": "s-1", "transcript_path": "/t.jsonl", "cwd": "/ws",
            "permission_mode": "default", "hook_event_name": "PreToolUse",
            "tool_name": "Read", "tool_input": {"file_path": "/ws/a"}, "tool_use_id": "toolu_1"
        });
        for (key, value) in overrides.as_object().unwrap() {
            if value.is_null() {
                base.as_object_mut().unwrap().remove(key);
            } else {
                base[key] = value.clone();
            }
        }
        serde_json::to_vec(&base).unwrap()
    }

    #[test]
    fn a_documented_event_parses_and_unread_fields_pass() {
        let parsed = PreToolUse::parse(&event(json!({"model": "x"}))).unwrap();
        assert_eq!(parsed.tool_name, "Read");
        assert_eq!(parsed.cwd, PathBuf::from("/ws"));
        assert_eq!(parsed.tool_use_id.as_deref(), Some("toolu_1"));
        assert!(PreToolUse::parse(&event(json!({"tool_use_id": null}))).is_ok());
    }

    #[test]
    fn malformed_events_are_errors() {
        let cases = [
            (b"not json".to_vec(), "Shape"),
            (event(json!({"tool_name": null})), "Shape"),
            (event(json!({"cwd": null})), "Shape"),
            (
                event(json!({"hook_event_name": "PostToolUse"})),
                "WrongEvent",
            ),
            (event(json!({"tool_input": "rm -rf /"})), "InputNotObject"),
            (event(json!({"tool_input": null})), "Shape"),
            (event(json!({"cwd": "relative/dir"})), "CwdNotAbsolute"),
            (event(json!({"session_id": ""})), "BadId"),
            (event(json!({"session_id": "a\nb"})), "BadId"),
            (event(json!({"tool_use_id": "x".repeat(300)})), "BadId"),
            (event(json!({"tool_name": ""})), "NoTool"),
            (b"[]".to_vec(), "Shape"),
        ];
        for (bytes, kind) in cases {
            let err = PreToolUse::parse(&bytes).unwrap_err();
            assert!(
                format!("{err:?}").starts_with(kind),
                "{err:?} for {}",
                String::from_utf8_lossy(&bytes)
            );
        }
    }
}
