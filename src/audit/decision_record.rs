//! What a decision record holds: who asked, about what, what was decided
//! and by which policies, the facts the policies saw, and an approver's
//! answer. Written by the keeper, read back by replay and `audit show`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::facts::{CommandFacts, ToolFacts, Transport};
use crate::pdp::{Cause, DecisionError, Outcome, PolicySetIdentity};

/// Who made a recorded request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRef {
    pub name: String,
    pub fingerprint: String,
    pub tier: String,
}

/// The approver of an `approve` decision, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApproverRef {
    pub name: String,
    pub fingerprint: String,
    pub groups: Vec<String>,
}

/// An approver's answer to a question of the inbox, as recorded with the
/// `approve` decision about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedAnswer {
    pub question: String,
    /// `approve` or `deny`.
    pub verdict: String,
    pub reason: String,
}

/// A determining policy as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedPolicy {
    pub id: String,
    pub reason: String,
}

/// How the shadow set (`policies/shadow/`) decided a request, recorded
/// when its outcome or determining policies differ from the enforced set's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowRecord {
    pub decision: Outcome,
    pub cause: Cause,
    pub policies: Vec<RecordedPolicy>,
}

/// The body of a decision record: everything needed to decide it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRecord {
    pub session: String,
    pub request_id: String,
    pub transport: Transport,
    pub client: ClientRef,
    pub action: RecordedAction,
    /// The name the client asked for.
    pub tool: String,
    /// The tool's id, when the name is a known tool.
    pub resource: Option<String>,
    /// SHA-256 of the canonical arguments: which call this was, without
    /// keeping file contents or secrets in the log.
    pub arguments_sha256: Option<String>,
    /// SHA-256 of the tool's definition as served (for a downstream tool,
    /// its pin): which version of the tool was decided about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_definition: Option<String>,
    /// The computed facts (the context, less the approval fields); `None`
    /// when no Cedar decision was made (unknown tool, invalid arguments).
    pub facts: Option<ToolFacts>,
    /// Decided with `approved = true`, after a human approved the call.
    #[serde(default)]
    pub approved: bool,
    /// For the command gate (`run_command`): the facts of the command.
    #[serde(default)]
    pub command: Option<CommandFacts>,
    pub approval_channel: String,
    /// The entities the decision read: the client, its tier, the tool and
    /// its server.
    pub entities: Vec<Value>,
    pub policy_set: PolicySetIdentity,
    pub decision: Outcome,
    pub cause: Cause,
    pub policies: Vec<RecordedPolicy>,
    pub errors: Vec<DecisionError>,
    /// What the client was told when no Cedar decision was made.
    pub message: Option<String>,
    /// The shadow set's decision, when it differs; never enforced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowRecord>,
    /// For a shell command a hook let through: whether the harness was
    /// told to run it through `portcullis exec`, confined (`false`: the
    /// project turned that off, or the harness cannot rewrite a command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confined: Option<bool>,
    /// For `approve`: who answered the question (the record's `client`
    /// is the client that asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<ApproverRef>,
    /// For `approve`: the answer the approver gave, whether or not the
    /// decision let it count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<RecordedAnswer>,
    /// How many distinct people the approved pass counted
    /// (`context.approvers`) when not one: an inbox question's
    /// hypothetical pass, or a call approved by a quorum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvers: Option<u32>,
}

/// What a decision record decided about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordedAction {
    /// May the client see the tool in its listing?
    DiscoverTool,
    /// May the client run this call?
    CallTool,
    /// May this shell command run (the command gate)?
    RunCommand,
    /// May the client read the policies in force?
    ReadPolicy,
    /// May a downstream server's request (the record's `tool` names the
    /// method, its `resource` the server) reach the client?
    RelayRequest,
    /// May the record's approver approve the client's call of the tool (a
    /// question of the approval inbox)?
    Approve,
}

impl std::fmt::Display for RecordedAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RecordedAction {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordedAction::DiscoverTool => "discover_tool",
            RecordedAction::CallTool => "call_tool",
            RecordedAction::RunCommand => "run_command",
            RecordedAction::ReadPolicy => "read_policy",
            RecordedAction::RelayRequest => "relay_request",
            RecordedAction::Approve => "approve",
        }
    }
}
