//! The stable codes a refused or failed call carries, to the client (MCP
//! `reason_code`) and into the audit log.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::pdp::Cause;

/// Why a call did not (fully) run. One enum for every way in: each adapter
/// maps it to its protocol in one place (`mcp::errors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    /// No such tool, or the caller may not discover it.
    UnknownTool,
    /// The arguments fail the tool's input schema, or a path in them is
    /// refused before any decision.
    InvalidArguments,
    /// Forbids hold whoever approves.
    Forbidden,
    /// No policy permits the call.
    NotPermitted,
    /// The client is not one portcullis knows.
    UnknownClient,
    /// The client's tier lacks a capability the tool requires.
    MissingCapability,
    /// A human must approve, and none can be asked from this client.
    ApprovalUnavailable,
    /// The approval was declined, cancelled, timed out or never given, or
    /// given and still refused by a policy.
    ApprovalDeclined,
    /// The question waited in the approval inbox until it expired.
    ApprovalExpired,
    /// The tool ran and failed.
    ToolFailed,
    /// The policy engine failed: denied (fail closed).
    PolicyError,
    /// The decision could not be recorded, so nothing ran.
    AuditUnavailable,
    /// A downstream tool nobody pinned.
    ToolNotPinned,
    /// A downstream tool whose definition changed since it was pinned.
    ToolChanged,
    /// The downstream server is not running.
    ServerUnavailable,
}

impl ReasonCode {
    /// Every code, for the schemas that name them.
    pub const ALL: [ReasonCode; 15] = [
        ReasonCode::UnknownTool,
        ReasonCode::InvalidArguments,
        ReasonCode::Forbidden,
        ReasonCode::NotPermitted,
        ReasonCode::UnknownClient,
        ReasonCode::MissingCapability,
        ReasonCode::ApprovalUnavailable,
        ReasonCode::ApprovalDeclined,
        ReasonCode::ApprovalExpired,
        ReasonCode::ToolFailed,
        ReasonCode::PolicyError,
        ReasonCode::AuditUnavailable,
        ReasonCode::ToolNotPinned,
        ReasonCode::ToolChanged,
        ReasonCode::ServerUnavailable,
    ];

    /// The code of a denial with this cause.
    pub fn of_denial(cause: Cause) -> Self {
        match cause {
            Cause::NotPermitted => ReasonCode::NotPermitted,
            Cause::UnknownClient => ReasonCode::UnknownClient,
            Cause::UnknownTool => ReasonCode::UnknownTool,
            Cause::InvalidArguments => ReasonCode::InvalidArguments,
            Cause::PolicyError => ReasonCode::PolicyError,
            Cause::ToolNotPinned => ReasonCode::ToolNotPinned,
            Cause::ToolChanged => ReasonCode::ToolChanged,
            Cause::ServerUnavailable => ReasonCode::ServerUnavailable,
            // A denial names its forbids; the other causes belong to
            // allows and asks and never reach here.
            Cause::Forbidden | Cause::Permitted | Cause::Approved | Cause::ApprovalRequired => {
                ReasonCode::Forbidden
            }
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ReasonCode::UnknownTool => "unknown_tool",
            ReasonCode::InvalidArguments => "invalid_arguments",
            ReasonCode::Forbidden => "forbidden",
            ReasonCode::NotPermitted => "not_permitted",
            ReasonCode::UnknownClient => "unknown_client",
            ReasonCode::MissingCapability => "missing_capability",
            ReasonCode::ApprovalUnavailable => "approval_unavailable",
            ReasonCode::ApprovalDeclined => "approval_declined",
            ReasonCode::ApprovalExpired => "approval_expired",
            ReasonCode::ToolFailed => "tool_failed",
            ReasonCode::PolicyError => "policy_error",
            ReasonCode::AuditUnavailable => "audit_unavailable",
            ReasonCode::ToolNotPinned => "tool_not_pinned",
            ReasonCode::ToolChanged => "tool_changed",
            ReasonCode::ServerUnavailable => "server_unavailable",
        }
    }
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The shape of every refusal and failure body a client is sent
/// (`mcp::errors` builds them), which every advertised output schema
/// admits beside the tool's own result.
pub fn refusal_schema() -> Value {
    let codes: Vec<&str> = ReasonCode::ALL.iter().map(|code| code.as_str()).collect();
    json!({
        "type": "object",
        "properties": {
            "decision": {"enum": ["allow", "ask", "deny"]},
            "reason_code": {"enum": codes},
            "reason": {"type": "string"},
            "policies": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}, "reason": {"type": "string"}},
                    "required": ["id"]
                }
            },
            "missing_capabilities": {"type": "array", "items": {"type": "string"}},
            "failure": {"type": "string"}
        },
        "required": ["reason_code", "reason"]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_serialize_as_their_text_and_back() {
        for code in ReasonCode::ALL {
            let text = serde_json::to_value(code).unwrap();
            assert_eq!(text, code.as_str());
            assert_eq!(serde_json::from_value::<ReasonCode>(text).unwrap(), code);
        }
    }

    #[test]
    fn a_denial_keeps_the_cause_it_was_decided_with() {
        assert_eq!(
            ReasonCode::of_denial(Cause::PolicyError),
            ReasonCode::PolicyError
        );
        assert_eq!(
            ReasonCode::of_denial(Cause::NotPermitted),
            ReasonCode::NotPermitted
        );
        assert_eq!(
            ReasonCode::of_denial(Cause::Forbidden),
            ReasonCode::Forbidden
        );
    }
}
