//! Asking a human: an `ask` becomes an MCP elicitation, by era.
//!
//! - Legacy sessions (`initialize`): a server-to-client `elicitation/create`
//!   request, with a timeout; the answer comes back on the same call.
//! - 2026-07-28 requests: an input-required result holding the question and
//!   a sealed `requestState`; the client retries the call with the answer
//!   and the state, which must open for this client and this very call.
//!
//! Either way, only an explicit "approve" runs the call, and then only
//! through the decision point again, with `approved = true`.

use std::time::Duration;

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputResponses,
};
use serde_json::{Value, json};

use crate::approval::ApprovalSeal;
use crate::keeper::Keeper;

/// The key of the question in an input-required result.
pub const APPROVAL_INPUT: &str = "approval";
/// The form field the user ticks to approve.
const APPROVE_FIELD: &str = "approve";

/// Approval settings and the seal of one server process.
pub struct Approvals {
    pub seal: ApprovalSeal,
    /// How long a legacy elicitation waits for the user.
    pub timeout: Duration,
}

/// What a retried 2026-07-28 call carried.
pub enum Retry {
    /// The state opened for this client and call, and the user approved.
    Granted,
    /// The user declined, cancelled or did not approve.
    Declined(&'static str),
    /// No usable answer (a refused state, a missing response): ask again.
    AskAgain,
}

/// The form put to the user.
pub fn question(message: &str) -> Option<ElicitRequestParams> {
    let schema = ElicitationSchema::builder()
        .required_bool(APPROVE_FIELD)
        .build()
        .ok()?;
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message.to_owned(),
        requested_schema: schema,
    })
}

/// The input requests of an input-required result asking `message`.
pub fn input_requests(message: &str) -> Option<InputRequests> {
    let mut requests = InputRequests::new();
    requests.insert(
        APPROVAL_INPUT.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(question(message)?)),
    );
    Some(requests)
}

/// What a user's answer means: approve, or the name of the refusal.
pub fn judge(answer: &ElicitResult) -> Result<(), &'static str> {
    match answer.action {
        ElicitationAction::Accept => {
            let approved = answer
                .content
                .as_ref()
                .and_then(|c| c.get(APPROVE_FIELD))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if approved {
                Ok(())
            } else {
                Err("not_approved")
            }
        }
        ElicitationAction::Decline => Err("decline"),
        ElicitationAction::Cancel => Err("cancel"),
        // An action this version does not know is not an approval.
        _ => Err("unknown_answer"),
    }
}

impl Approvals {
    /// Checks the state and answer of a retried call. Every refusal is
    /// audited; none runs the call.
    pub async fn check_retry(
        &self,
        keeper: &Keeper,
        request_id: &str,
        name: &str,
        arguments: &Value,
        state: Option<&str>,
        responses: Option<&InputResponses>,
    ) -> Retry {
        let Some(digest) = keeper.action_digest(name, arguments) else {
            return Retry::AskAgain;
        };
        let Some(state) = state else {
            keeper
                .record_approval(
                    request_id,
                    "state_refused",
                    &digest,
                    json!({"why": "missing"}),
                )
                .await;
            return Retry::AskAgain;
        };
        if let Err(refused) = self.seal.open(state, &keeper.client().fingerprint, &digest) {
            keeper
                .record_approval(
                    request_id,
                    "state_refused",
                    &digest,
                    json!({"why": refused.code()}),
                )
                .await;
            return Retry::AskAgain;
        }
        let answer = responses
            .and_then(|r| r.get(APPROVAL_INPUT))
            .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok());
        let Some(answer) = answer else {
            keeper
                .record_approval(request_id, "answer_missing", &digest, json!({}))
                .await;
            return Retry::AskAgain;
        };
        let verdict = judge(&answer);
        keeper
            .record_approval(
                request_id,
                "answered",
                &digest,
                json!({"answer": verdict.err().unwrap_or("approve")}),
            )
            .await;
        match verdict {
            Ok(()) => Retry::Granted,
            Err(why) => Retry::Declined(why),
        }
    }
}
