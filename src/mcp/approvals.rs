//! Approval questions and answers in MCP's terms: the elicitation form, the
//! input request of a 2026-07-28 result, and what a user's answer means.
//! The flow itself (when to ask, sealing, retries, recording) is
//! `approval::Approvals`.

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputResponses,
};
use serde_json::Value;

use crate::approval::Answer;

/// The key of the question in an input-required result.
pub const APPROVAL_INPUT: &str = "approval";
/// The form field the user ticks to approve.
const APPROVE_FIELD: &str = "approve";

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

/// What a user's answer means: only a ticked "approve" approves.
pub fn judge(answer: &ElicitResult) -> Answer {
    match answer.action {
        ElicitationAction::Accept => {
            let approved = answer
                .content
                .as_ref()
                .and_then(|c| c.get(APPROVE_FIELD))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if approved {
                Answer::Approve
            } else {
                Answer::Refuse("not_approved")
            }
        }
        ElicitationAction::Decline => Answer::Refuse("decline"),
        ElicitationAction::Cancel => Answer::Refuse("cancel"),
        // An action this version does not know is not an approval.
        _ => Answer::Refuse("unknown_answer"),
    }
}

/// The answer a retried call carried, if it carried a readable one.
pub fn retried_answer(responses: Option<&InputResponses>) -> Option<Answer> {
    responses
        .and_then(|r| r.get(APPROVAL_INPUT))
        .and_then(|v| serde_json::from_value::<ElicitResult>(v.clone()).ok())
        .map(|answer| judge(&answer))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn answer(value: Value) -> ElicitResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn only_a_ticked_approve_approves() {
        let yes = answer(json!({"action": "accept", "content": {"approve": true}}));
        assert_eq!(judge(&yes), Answer::Approve);
        let unticked = answer(json!({"action": "accept", "content": {"approve": false}}));
        assert_eq!(judge(&unticked), Answer::Refuse("not_approved"));
        let empty = answer(json!({"action": "accept"}));
        assert_eq!(judge(&empty), Answer::Refuse("not_approved"));
        assert_eq!(
            judge(&answer(json!({"action": "decline"}))),
            Answer::Refuse("decline")
        );
        assert_eq!(
            judge(&answer(json!({"action": "cancel"}))),
            Answer::Refuse("cancel")
        );
    }

    #[test]
    fn a_retry_without_a_readable_answer_carries_none() {
        assert_eq!(retried_answer(None), None);
        let mut responses = InputResponses::new();
        responses.insert("other".into(), json!({"action": "accept"}));
        assert_eq!(retried_answer(Some(&responses)), None);
    }
}
