//! The one place where how a call ended becomes what an MCP client sees
//! (design.md, "error taxonomy"): JSON-RPC errors only for requests that
//! cannot be routed or whose arguments do not fit; everything a caller
//! should read is an `isError` result with a stable [`ReasonCode`].

use rmcp::ErrorData;
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, InputRequiredResult, ResultType,
};
use serde_json::{Value, json};

use super::approvals::input_requests;
use crate::approval::Reply;
use crate::keeper::{CallOutcome, ReasonCode, refusal_schema};
use crate::pdp::{Cause, Decision};
use crate::tools::ToolFailure;

/// The text of the unknown-tool error. The same for a tool that does not
/// exist and for one this caller may not discover: a client must not be
/// able to tell them apart, or it could probe for tools it may not see.
pub fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::invalid_params(format!("Unknown tool: {name}"), None)
}

/// Arguments that do not fit a schema: -32602 with the validation message.
pub fn invalid_arguments(message: impl Into<String>) -> ErrorData {
    ErrorData::invalid_params(message.into(), None)
}

/// A resource this client may not read, or that does not exist: the same
/// answer.
/// The URI rides in the error's data, as SEP-2164 asks, so a client can
/// tell which of several reads failed.
pub fn resource_not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(format!("no resource {uri}"), Some(json!({"uri": uri})))
}

/// Something on portcullis's side failed; the text is fixed.
pub fn internal(what: &'static str) -> ErrorData {
    ErrorData::internal_error(what, None)
}

/// A listing that could not be recorded is not given: fail closed.
pub fn listing_unrecorded() -> ErrorData {
    internal("the audit log is unavailable")
}

/// A tool's output schema as clients are told it: the tool's own result, or
/// the refusal every `isError` result carries. The TypeScript SDK checks
/// `structuredContent` against the output schema even on an `isError`
/// result (the Python SDK does not), so a schema naming only the success
/// shape would turn every refusal into a client-side error that hides its
/// reason.
pub fn output_schema(success: &Value) -> Value {
    json!({"type": "object", "anyOf": [success, refusal_schema()]})
}

/// Maps what the approval flow answered to the MCP answer.
pub fn reply(reply: Reply) -> Result<CallToolResponse, ErrorData> {
    match reply {
        Reply::Done(outcome) => to_response(outcome).unwrap_or_else(|| Err(internal("cancelled"))),
        Reply::Declined {
            why,
            policies,
            said,
        } => Ok(approval_declined(why, &policies, said.as_deref())),
        Reply::InputRequired { question, state } => {
            let requests = input_requests(&question)
                .ok_or_else(|| internal("the approval question could not be built"))?;
            Ok(InputRequiredResult::new(Some(requests), Some(state)).into())
        }
    }
}

/// Maps how a call ended to the MCP answer. `None` for a cancelled call:
/// rmcp sends nothing back for it.
pub fn to_response(outcome: CallOutcome) -> Option<Result<CallToolResponse, ErrorData>> {
    let unapproved = |decision: &Decision| {
        format!(
            "this call needs a human approval ({}), and no approver can be reached from this client",
            decision.reason()
        )
    };
    let response = match outcome {
        CallOutcome::UnknownTool(name) => Err(unknown_tool(&name)),
        CallOutcome::InvalidArguments(message) => Err(invalid_arguments(message)),
        CallOutcome::Denied(decision, missing) => Ok(denied(&decision, &missing)),
        CallOutcome::ApprovalUnavailable(decision)
        | CallOutcome::NeedsApproval { decision, .. } => {
            let reason = unapproved(&decision);
            Ok(refused(
                Some(&decision),
                ReasonCode::ApprovalUnavailable,
                reason,
            ))
        }
        CallOutcome::ApprovalRefused(decision) => {
            let reason = format!(
                "the approval was given, and the policies still refuse the call: {}",
                decision.reason()
            );
            Ok(refused(
                Some(&decision),
                ReasonCode::ApprovalDeclined,
                reason,
            ))
        }
        CallOutcome::AuditUnavailable => Ok(audit_unavailable()),
        CallOutcome::Refused(cause, reason) => {
            Ok(refused(None, ReasonCode::of_denial(cause), reason))
        }
        CallOutcome::Completed(output) => Ok(CallToolResult::structured(output).into()),
        CallOutcome::Relayed { result, .. } => Ok(relayed(result)),
        CallOutcome::InvalidResult { why, content } => Ok(invalid_result(why, content)),
        CallOutcome::Failed(failure) => {
            let code = match failure {
                ToolFailure::ServerUnavailable
                | ToolFailure::AgentUnavailable
                | ToolFailure::AgentFailed(_) => ReasonCode::ServerUnavailable,
                _ => ReasonCode::ToolFailed,
            };
            Ok(CallToolResult::structured_error(json!({
                "reason_code": code,
                "failure": failure.code(),
                "reason": failure.to_string(),
            }))
            .into())
        }
        CallOutcome::Cancelled => return None,
    };
    Some(response)
}

/// A downstream server's result, passed on as it came, in the shape of the
/// era the client speaks: a server of the 2025 era sends no `resultType`,
/// which a 2026-07-28 client requires (rmcp takes it off again for a
/// client of the 2025 era). One that does not read back as a result (it
/// did when the server sent it) is a failure.
fn relayed(result: Value) -> CallToolResponse {
    match serde_json::from_value::<CallToolResult>(result) {
        Ok(mut result) => {
            result.result_type = Some(ResultType::COMPLETE);
            result.into()
        }
        Err(err) => {
            tracing::warn!(error = %err, "a relayed result could not be read back");
            CallToolResult::structured_error(json!({
                "reason_code": ReasonCode::ToolFailed,
                "failure": ToolFailure::Internal.code(),
                "reason": ToolFailure::Internal.to_string(),
            }))
            .into()
        }
    }
}

/// A downstream result that does not fit its tool's output schema: a
/// failure the client can read, naming the misfit, with the server's own
/// content blocks after it when the server passes errors on.
fn invalid_result(why: String, content: Option<Value>) -> CallToolResponse {
    let mut result = CallToolResult::structured_error(json!({
        "reason_code": ReasonCode::ToolFailed,
        "failure": ToolFailure::DownstreamInvalidResult.code(),
        "reason": format!("{}: {why}", ToolFailure::DownstreamInvalidResult),
    }));
    let kept: Vec<ContentBlock> = content
        .and_then(|content| serde_json::from_value(content).ok())
        .unwrap_or_default();
    result.content.extend(kept);
    result.into()
}

/// The answer when a decision could not be recorded: nothing ran.
pub fn audit_unavailable() -> CallToolResponse {
    refused(
        None,
        ReasonCode::AuditUnavailable,
        "the decision could not be recorded, so nothing ran".to_owned(),
    )
}

/// The answer to a call whose approval was declined, cancelled, timed out
/// or never given.
/// A call not approved: `answer` names how (`approval_expired` when its
/// question expired in the inbox), `said` is the approver's reason.
pub fn approval_declined(
    answer: &str,
    policies: &[String],
    said: Option<&str>,
) -> CallToolResponse {
    let policies: Vec<Value> = policies.iter().map(|id| json!({"id": id})).collect();
    let code = if answer == "approval_expired" {
        ReasonCode::ApprovalExpired
    } else {
        ReasonCode::ApprovalDeclined
    };
    let reason = match said {
        Some(said) => format!("the call was not approved ({said})"),
        None => format!("the call was not approved ({answer})"),
    };
    CallToolResult::structured_error(json!({
        "decision": "deny",
        "reason_code": code,
        "policies": policies,
        "reason": reason,
    }))
    .into()
}

fn denied(decision: &Decision, missing: &[String]) -> CallToolResponse {
    if decision.cause == Cause::PolicyError {
        let reason = "the policy engine failed to decide this call, so it is denied".to_owned();
        return refused(Some(decision), ReasonCode::PolicyError, reason);
    }
    if !missing.is_empty() {
        let reason = format!(
            "the client's tier lacks the capabilit{} this tool requires: {}",
            if missing.len() == 1 { "y" } else { "ies" },
            missing.join(", ")
        );
        let mut body = refusal(Some(decision), ReasonCode::MissingCapability, reason);
        body["missing_capabilities"] = json!(missing);
        return CallToolResult::structured_error(body).into();
    }
    let code = ReasonCode::of_denial(decision.cause);
    refused(Some(decision), code, decision.reason())
}

fn refused(decision: Option<&Decision>, code: ReasonCode, reason: String) -> CallToolResponse {
    CallToolResult::structured_error(refusal(decision, code, reason)).into()
}

/// The structured body of a refusal: `{decision, reason_code, policies,
/// reason}`.
fn refusal(decision: Option<&Decision>, code: ReasonCode, reason: String) -> Value {
    let policies: Vec<Value> = decision
        .map(|d| {
            d.policies
                .iter()
                .map(|p| json!({"id": p.id, "reason": p.reason}))
                .collect()
        })
        .unwrap_or_default();
    let outcome = decision.map_or(json!("deny"), |d| json!(d.outcome));
    json!({
        "decision": outcome,
        "reason_code": code,
        "policies": policies,
        "reason": reason,
    })
}

#[cfg(test)]
mod tests {
    //! One test per row of design.md's error taxonomy.

    #[test]
    fn a_missing_resource_names_its_uri_in_the_data() {
        let error = super::resource_not_found("portcullis://nope");
        assert_eq!(
            error.data,
            Some(serde_json::json!({"uri": "portcullis://nope"}))
        );
    }

    use rmcp::model::ErrorCode;

    use super::*;
    use crate::approval::Reply;
    use crate::pdp::{DecisionError, Outcome};
    use crate::tools::ToolFailure;

    fn decision(outcome: Outcome, cause: Cause, policies: &[&str]) -> Decision {
        Decision::for_tests(outcome, cause, policies)
    }

    /// The structured body of an `isError` result.
    fn body(outcome: CallOutcome) -> Value {
        match to_response(outcome) {
            Some(Ok(CallToolResponse::Complete(result))) => {
                assert_eq!(result.is_error, Some(true));
                result.structured_content.unwrap()
            }
            other => panic!("not an isError result: {other:?}"),
        }
    }

    fn error(outcome: CallOutcome) -> ErrorData {
        match to_response(outcome) {
            Some(Err(error)) => error,
            other => panic!("not a JSON-RPC error: {other:?}"),
        }
    }

    #[test]
    fn an_unknown_tool_is_invalid_params_with_the_same_text_either_way() {
        let error = error(CallOutcome::UnknownTool("secret_tool".into()));
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(error.message, "Unknown tool: secret_tool");
    }

    #[test]
    fn arguments_that_fail_the_schema_are_invalid_params_with_the_message() {
        let error = error(CallOutcome::InvalidArguments("`path` is required".into()));
        assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(error.message, "`path` is required");
    }

    #[test]
    fn a_policy_denial_names_its_policies_and_reason() {
        let denied = decision(Outcome::Deny, Cause::Forbidden, &["paths.no_secrets"]);
        let body = body(CallOutcome::Denied(denied, Vec::new()));
        assert_eq!(body["decision"], "deny");
        assert_eq!(body["reason_code"], "forbidden");
        assert_eq!(body["policies"][0]["id"], "paths.no_secrets");
        assert_eq!(body["reason"], "because paths.no_secrets");
        let nothing = decision(Outcome::Deny, Cause::NotPermitted, &[]);
        let not_permitted = body_of_denial(nothing);
        assert_eq!(not_permitted["reason_code"], "not_permitted");
    }

    fn body_of_denial(decision: Decision) -> Value {
        body(CallOutcome::Denied(decision, Vec::new()))
    }

    #[test]
    fn a_missing_capability_is_named() {
        let denied = decision(Outcome::Deny, Cause::Forbidden, &["tier.capability_gate"]);
        let body = body(CallOutcome::Denied(denied, vec!["write".into()]));
        assert_eq!(body["reason_code"], "missing_capability");
        assert_eq!(body["missing_capabilities"], json!(["write"]));
        assert!(body["reason"].as_str().unwrap().contains("write"));
    }

    #[test]
    fn an_ask_nobody_can_answer_is_approval_unavailable() {
        let ask = decision(Outcome::Ask, Cause::ApprovalRequired, &["approval.writes"]);
        let body = body(CallOutcome::ApprovalUnavailable(ask));
        assert_eq!(body["reason_code"], "approval_unavailable");
        assert_eq!(body["decision"], "ask");
    }

    #[test]
    fn a_declined_or_refused_approval_is_approval_declined() {
        let reply = reply(Reply::Declined {
            said: None,
            why: "decline",
            policies: vec!["approval.writes".into()],
        });
        let Ok(CallToolResponse::Complete(result)) = reply else {
            panic!("{reply:?}");
        };
        let declined = result.structured_content.unwrap();
        assert_eq!(declined["reason_code"], "approval_declined");
        assert_eq!(declined["policies"], json!([{"id": "approval.writes"}]));
        let refused = decision(Outcome::Deny, Cause::Forbidden, &["x"]);
        let body = body(CallOutcome::ApprovalRefused(refused));
        assert_eq!(body["reason_code"], "approval_declined");
    }

    #[test]
    fn a_failed_tool_gets_fixed_text_and_a_failure_code() {
        let body = body(CallOutcome::Failed(ToolFailure::PathChanged));
        assert_eq!(body["reason_code"], "tool_failed");
        assert_eq!(body["failure"], "path_changed");
        assert_eq!(body["reason"], ToolFailure::PathChanged.to_string());
    }

    #[test]
    fn a_policy_engine_error_is_policy_error() {
        let mut failed = decision(Outcome::Deny, Cause::PolicyError, &[]);
        failed.errors.push(DecisionError {
            policy: Some("p".into()),
            message: "boom".into(),
        });
        let body = body(CallOutcome::Denied(failed, Vec::new()));
        assert_eq!(body["reason_code"], "policy_error");
        assert!(!body.to_string().contains("boom"));
    }

    #[test]
    fn a_cancelled_call_gets_no_result() {
        assert!(to_response(CallOutcome::Cancelled).is_none());
    }

    #[test]
    fn an_unrecorded_decision_is_audit_unavailable() {
        let body = body(CallOutcome::AuditUnavailable);
        assert_eq!(body["reason_code"], "audit_unavailable");
        assert_eq!(body["decision"], "deny");
    }

    #[test]
    fn every_refusal_fits_every_tools_output_schema() {
        let refusals = [
            body(CallOutcome::Denied(
                decision(Outcome::Deny, Cause::Forbidden, &["hard.x"]),
                Vec::new(),
            )),
            body(CallOutcome::Denied(
                decision(Outcome::Deny, Cause::Forbidden, &["tier.capability_gate"]),
                vec!["write".into()],
            )),
            body(CallOutcome::Denied(
                decision(Outcome::Deny, Cause::PolicyError, &[]),
                Vec::new(),
            )),
            body(CallOutcome::ApprovalUnavailable(decision(
                Outcome::Ask,
                Cause::ApprovalRequired,
                &["approval.writes"],
            ))),
            body(CallOutcome::ApprovalRefused(decision(
                Outcome::Deny,
                Cause::Forbidden,
                &["approval.destructive_not_from_client"],
            ))),
            body(CallOutcome::Failed(ToolFailure::Cancelled)),
            body(CallOutcome::AuditUnavailable),
            match approval_declined("decline", &["approval.writes".to_owned()], None) {
                CallToolResponse::Complete(result) => result.structured_content.unwrap(),
                other => panic!("{other:?}"),
            },
        ];
        let registry = crate::tools::Registry::builtin().unwrap();
        let mut successes: Vec<Value> = registry
            .iter()
            .map(|tool| tool.spec.output_schema.clone())
            .collect();
        successes.push(json!({"type": "object", "required": ["never"]}));
        for success in successes {
            let schema = output_schema(&success);
            let validator = jsonschema::validator_for(&schema).unwrap();
            for refusal in &refusals {
                assert!(validator.is_valid(refusal), "{refusal} against {schema}");
            }
            // And the schema is no wider than it says: a body that is
            // neither shape is refused.
            assert!(!validator.is_valid(&json!({"reason_code": "made_up", "reason": ""})));
        }
    }
}
