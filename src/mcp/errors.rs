//! The one place where the outcome of a call becomes what the client sees
//! (design.md, "error taxonomy"). Protocol errors only for requests that
//! cannot be routed; everything a caller should read is an `isError` result
//! with a stable `reason_code`.

use rmcp::ErrorData;
use rmcp::model::{CallToolResponse, CallToolResult};
use serde_json::{Value, json};

use crate::keeper::CallOutcome;
use crate::pdp::{Cause, Decision};

/// The text of the unknown-tool error. The same for a tool that does not
/// exist and for one this caller may not discover: a client must not be
/// able to tell them apart, or it could probe for tools it may not see.
pub fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("Unknown tool: {name}"), None)
}

/// Maps how a call ended to the MCP answer. `None` for a cancelled call:
/// rmcp sends nothing back for it.
pub fn to_response(outcome: CallOutcome) -> Option<Result<CallToolResponse, ErrorData>> {
    let response = match outcome {
        CallOutcome::UnknownTool(name) => Err(unknown_tool(&name)),
        CallOutcome::InvalidArguments(message) => Err(ErrorData::invalid_params(message, None)),
        CallOutcome::Denied(decision, missing) => Ok(denied(&decision, &missing)),
        CallOutcome::ApprovalUnavailable(decision) => Ok(refused(
            &decision,
            "approval_unavailable",
            format!(
                "this call needs a human approval ({}), and no approver can be reached from this client",
                decision.reason()
            ),
            None,
        )),
        CallOutcome::ApprovalRefused(decision) => Ok(refused(
            &decision,
            "approval_declined",
            format!(
                "the approval was given, and the policies still refuse the call: {}",
                decision.reason()
            ),
            None,
        )),
        CallOutcome::NeedsApproval { decision, .. } => Ok(refused(
            &decision,
            "approval_unavailable",
            format!(
                "this call needs a human approval ({}), and no approver can be reached from this client",
                decision.reason()
            ),
            None,
        )),
        CallOutcome::AuditUnavailable => Ok(audit_unavailable()),
        CallOutcome::Completed(output) => Ok(CallToolResult::structured(output).into()),
        CallOutcome::Failed(failure) => Ok(CallToolResult::structured_error(json!({
            "reason_code": "tool_failed",
            "failure": failure.code(),
            "reason": failure.to_string(),
        }))
        .into()),
        CallOutcome::Cancelled => return None,
    };
    Some(response)
}

/// The answer when a decision could not be recorded: nothing ran.
pub fn audit_unavailable() -> CallToolResponse {
    CallToolResult::structured_error(json!({
        "decision": "deny",
        "reason_code": "audit_unavailable",
        "policies": [],
        "reason": "the decision could not be recorded, so nothing ran",
    }))
    .into()
}

/// The answer to a call whose approval was declined, cancelled, timed out
/// or never given.
pub fn approval_declined(answer: &str, policies: &[String]) -> CallToolResponse {
    let policies: Vec<Value> = policies.iter().map(|id| json!({"id": id})).collect();
    CallToolResult::structured_error(json!({
        "decision": "deny",
        "reason_code": "approval_declined",
        "policies": policies,
        "reason": format!("the call was not approved ({answer})"),
    }))
    .into()
}

fn denied(decision: &Decision, missing: &[String]) -> CallToolResponse {
    if decision.cause == Cause::PolicyError {
        return refused(
            decision,
            "policy_error",
            "the policy engine failed to decide this call, so it is denied".to_owned(),
            None,
        );
    }
    if !missing.is_empty() {
        return refused(
            decision,
            "missing_capability",
            format!(
                "the client's tier lacks the capabilit{} this tool requires: {}",
                if missing.len() == 1 { "y" } else { "ies" },
                missing.join(", ")
            ),
            Some(json!(missing)),
        );
    }
    refused(decision, decision.cause.as_str(), decision.reason(), None)
}

fn refused(
    decision: &Decision,
    reason_code: &str,
    reason: String,
    missing: Option<Value>,
) -> CallToolResponse {
    let policies: Vec<Value> = decision
        .policies
        .iter()
        .map(|p| json!({"id": p.id, "reason": p.reason}))
        .collect();
    let mut body = json!({
        "decision": decision.outcome,
        "reason_code": reason_code,
        "policies": policies,
        "reason": reason,
    });
    if let (Some(missing), Some(object)) = (missing, body.as_object_mut()) {
        object.insert("missing_capabilities".to_owned(), missing);
    }
    CallToolResult::structured_error(body).into()
}
