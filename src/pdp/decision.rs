//! What a decision is: outcome, cause, determining policies, errors and the
//! policy set that made it, as recorded in the audit log and shown to
//! clients. Plain data; nothing here evaluates Cedar.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// The answer to "may this run?". Ordered by strictness, so combining the
/// answers for several parts of one request is `max()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A policy permits it and no forbid holds: it runs.
    Allow,
    /// Allowed only if a human approves it first; without an approval it
    /// does not run.
    Ask,
    /// It does not run, whoever approves.
    Deny,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allow => "allow",
            Outcome::Ask => "ask",
            Outcome::Deny => "deny",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the outcome is what it is, as a stable code for machines (MCP
/// `reason_code`, audit filters, replay reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Allowed by the permits listed.
    Permitted,
    /// Allowed because a human approved it through the channel recorded.
    Approved,
    /// The forbids listed hold unless a human approves.
    ApprovalRequired,
    /// The forbids listed hold whoever approves.
    Forbidden,
    /// No policy permits it (the allowlist is empty by default).
    NotPermitted,
    /// The client is not one portcullis knows.
    UnknownClient,
    /// The tool is not one portcullis knows (or this client may not see
    /// it: the same cause, so a refusal cannot tell the two apart).
    UnknownTool,
    /// The arguments failed the tool's input schema, or a path in them is
    /// not one portcullis accepts: refused before Cedar was asked.
    InvalidArguments,
    /// A policy failed to evaluate, or the request did not build against the
    /// schema: denied, because Cedar skips an erroring policy even when it
    /// is a forbid.
    PolicyError,
    /// A downstream tool nobody pinned in `servers.lock`: refused before
    /// Cedar was asked.
    ToolNotPinned,
    /// A downstream tool whose live definition differs from its pin.
    ToolChanged,
    /// The tool's downstream server is not running.
    ServerUnavailable,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Permitted => "permitted",
            Cause::Approved => "approved",
            Cause::ApprovalRequired => "approval_required",
            Cause::Forbidden => "forbidden",
            Cause::NotPermitted => "not_permitted",
            Cause::UnknownClient => "unknown_client",
            Cause::UnknownTool => "unknown_tool",
            Cause::InvalidArguments => "invalid_arguments",
            Cause::PolicyError => "policy_error",
            Cause::ToolNotPinned => "tool_not_pinned",
            Cause::ToolChanged => "tool_changed",
            Cause::ServerUnavailable => "server_unavailable",
        }
    }
}

/// A policy that determined the outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeterminingPolicy {
    pub id: String,
    pub reason: Arc<str>,
    pub file: Arc<str>,
}

/// Something that went wrong while deciding; any of these makes the outcome
/// a deny.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionError {
    /// The policy that failed, when one did.
    pub policy: Option<String>,
    pub message: String,
}

/// What decided: the exact policy set and the engines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicySetIdentity {
    pub hash: String,
    pub portcullis_version: String,
    pub cedar_sdk_version: String,
    pub cedar_lang_version: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Decision {
    pub outcome: Outcome,
    pub cause: Cause,
    /// Sorted by id.
    pub policies: Vec<DeterminingPolicy>,
    pub errors: Vec<DecisionError>,
    pub policy_set: Arc<PolicySetIdentity>,
    /// How the shadow set decided the same request, when its outcome or
    /// its determining policies differ. Never enforced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<Box<ShadowDecision>>,
}

#[cfg(test)]
impl Decision {
    /// A decision as a test needs one: these determining policies, each
    /// with a reason that names it, under a stand-in policy set.
    pub(crate) fn for_tests(outcome: Outcome, cause: Cause, policies: &[&str]) -> Self {
        Self {
            outcome,
            cause,
            policies: policies
                .iter()
                .map(|id| DeterminingPolicy {
                    id: (*id).to_owned(),
                    reason: format!("because {id}").into(),
                    file: "policies/x.cedar".into(),
                })
                .collect(),
            errors: Vec::new(),
            policy_set: Arc::new(PolicySetIdentity {
                hash: "h".into(),
                portcullis_version: "v".into(),
                cedar_sdk_version: "s".into(),
                cedar_lang_version: "l".into(),
            }),
            shadow: None,
        }
    }
}

/// A decision of the shadow set (`policies/shadow/`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShadowDecision {
    pub outcome: Outcome,
    pub cause: Cause,
    pub policies: Vec<DeterminingPolicy>,
}

impl Decision {
    /// The text a denied caller reads: the reasons of the determining
    /// policies, or what stands in for them.
    pub fn reason(&self) -> String {
        if !self.policies.is_empty() {
            let reasons: Vec<&str> = self.policies.iter().map(|p| &*p.reason).collect();
            return reasons.join("; ");
        }
        Self::refusal_reason(self.cause)
    }

    /// What stands in for the reasons of policies when none decided.
    pub fn refusal_reason(cause: Cause) -> String {
        match cause {
            Cause::NotPermitted => {
                "no policy permits this call: the allowlist does not include it".to_owned()
            }
            Cause::UnknownClient => "the client is not known".to_owned(),
            Cause::UnknownTool => "the tool is not known".to_owned(),
            Cause::InvalidArguments => "the arguments are not valid for this tool".to_owned(),
            Cause::PolicyError => "the policy engine failed, so the call is denied".to_owned(),
            Cause::ToolNotPinned => {
                "the tool is not pinned in servers.lock; run `portcullis servers pin` and review the change".to_owned()
            }
            Cause::ToolChanged => {
                "the tool's definition changed since it was pinned; see `portcullis servers diff`".to_owned()
            }
            Cause::ServerUnavailable => "the tool's server is not running; try again later".to_owned(),
            Cause::Permitted | Cause::Approved | Cause::ApprovalRequired | Cause::Forbidden => {
                String::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_ordered_by_strictness() {
        assert!(Outcome::Allow < Outcome::Ask && Outcome::Ask < Outcome::Deny);
        assert_eq!(
            [Outcome::Ask, Outcome::Deny, Outcome::Allow]
                .into_iter()
                .max(),
            Some(Outcome::Deny)
        );
    }
}
