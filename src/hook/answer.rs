//! The answer to a harness, in its hook output format. Claude Code reads
//! `hookSpecificOutput.permissionDecision` (allow, ask, deny) from stdout
//! when the hook exits 0; any other exit but 2 means "no opinion", and the
//! tool runs, so every answer, a failure included, is one of these, but
//! one: a call of portcullis's own MCP server, which `serve` decides, gets
//! no opinion (no output), and the harness's own permissions apply.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::pdp::Outcome;

/// What the harness is told to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    Allow,
    Ask,
    Deny,
    /// No opinion: the call is decided elsewhere (by `serve`).
    Defer,
}

impl From<Outcome> for Permission {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Allow => Permission::Allow,
            Outcome::Ask => Permission::Ask,
            Outcome::Deny => Permission::Deny,
        }
    }
}

/// A hook's answer: the permission and why, for the user (ask) or the
/// agent (deny) to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookAnswer {
    pub permission: Permission,
    pub reason: String,
    /// The tool input the harness runs instead (a shell command through
    /// `portcullis exec`, confined).
    pub updated_input: Option<Value>,
}

impl HookAnswer {
    pub fn deny(reason: impl Into<String>) -> Self {
        Self {
            permission: Permission::Deny,
            reason: reason.into(),
            updated_input: None,
        }
    }

    /// No opinion, because `serve` decides the call.
    pub fn defer(reason: impl Into<String>) -> Self {
        Self {
            permission: Permission::Defer,
            reason: reason.into(),
            updated_input: None,
        }
    }

    /// Claude Code's hook output; none for no opinion. With an allow or
    /// an ask, `updatedInput` replaces the tool's input (for an ask, the
    /// user sees and approves the input that will run).
    pub fn claude_code(&self) -> Option<Value> {
        (self.permission != Permission::Defer).then(|| {
            let mut output = json!({
                "hookEventName": "PreToolUse",
                "permissionDecision": self.permission,
                "permissionDecisionReason": self.reason,
            });
            if let Some(input) = &self.updated_input
                && matches!(self.permission, Permission::Allow | Permission::Ask)
            {
                output["updatedInput"] = input.clone();
            }
            json!({ "hookSpecificOutput": output })
        })
    }

    /// Codex's hook output. Codex acts on `deny` only: it treats `ask`
    /// (and an `allow` without a rewritten input) as a failed hook and runs
    /// the tool. So an ask is a deny here, saying a human must run it, and
    /// an allow is no output at all, leaving Codex's own approval policy
    /// and sandbox in force.
    pub fn codex(&self) -> Option<Value> {
        let reason = match self.permission {
            Permission::Allow | Permission::Defer => return None,
            Permission::Ask => format!(
                "{} (needs a human's approval, which a Codex hook cannot ask for: run it yourself if you agree)",
                self.reason
            ),
            Permission::Deny => self.reason.clone(),
        };
        Some(json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_never_gets_an_ask_or_an_allow() {
        let ask = HookAnswer {
            permission: Permission::Ask,
            reason: "writes need approval".into(),
            updated_input: None,
        };
        assert_eq!(
            ask.codex().unwrap()["hookSpecificOutput"]["permissionDecision"],
            "deny"
        );
        let allow = HookAnswer {
            permission: Permission::Allow,
            reason: "fine".into(),
            updated_input: None,
        };
        assert_eq!(allow.codex(), None);
        assert_eq!(
            allow.claude_code().unwrap()["hookSpecificOutput"]["permissionDecision"],
            "allow"
        );
        let defer = HookAnswer::defer("serve decides");
        assert_eq!((defer.claude_code(), defer.codex()), (None, None));
    }
}
