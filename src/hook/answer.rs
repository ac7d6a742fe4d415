//! The answer to a harness, in its hook output format. Claude Code reads
//! `hookSpecificOutput.permissionDecision` (allow, ask, deny) from stdout
//! when the hook exits 0; any other exit but 2 means "no opinion", and the
//! tool runs, so every answer, a failure included, is one of these, but
//! one: a call of portcullis's own MCP server, which `serve` decides, gets
//! no opinion (no output), and the harness's own permissions apply.

use serde::Serialize;
use serde_json::{Value, json};

use crate::pdp::Outcome;

/// What the harness is told to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
}

impl HookAnswer {
    pub fn deny(reason: impl Into<String>) -> Self {
        Self {
            permission: Permission::Deny,
            reason: reason.into(),
        }
    }

    /// No opinion, because `serve` decides the call.
    pub fn defer(reason: impl Into<String>) -> Self {
        Self {
            permission: Permission::Defer,
            reason: reason.into(),
        }
    }

    /// Claude Code's hook output; none for no opinion.
    pub fn claude_code(&self) -> Option<Value> {
        (self.permission != Permission::Defer).then(|| {
            json!({
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": self.permission,
                    "permissionDecisionReason": self.reason,
                }
            })
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
        };
        assert_eq!(
            ask.codex().unwrap()["hookSpecificOutput"]["permissionDecision"],
            "deny"
        );
        let allow = HookAnswer {
            permission: Permission::Allow,
            reason: "fine".into(),
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
