//! The approvals endpoint's JSON API, for `portcullis approvals` and
//! scripts: an approver's bearer token on every request.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::{ApprovalsEndpoint, MAX_REASON};
use crate::approval::{AnswerError, Verdict};
use crate::audit::ApproverRef;
use crate::auth::AUTH_FAILED;
use crate::http_checks::bearer;

/// The approver whose bearer token this request carries, or 401.
pub(super) async fn bearer_approver(
    State(endpoint): State<Arc<ApprovalsEndpoint>>,
    mut request: Request,
    next: Next,
) -> Response {
    let approver = bearer(request.headers()).and_then(|token| endpoint.approver_of(token));
    let Some(approver) = approver else {
        let mut response = (
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"))],
            AUTH_FAILED,
        )
            .into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"portcullis-approvals\""),
        );
        return response;
    };
    request.extensions_mut().insert(approver);
    next.run(request).await
}

fn json_response(status: StatusCode, body: &serde_json::Value) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body.to_string(),
    )
        .into_response()
}

pub(super) async fn list(State(endpoint): State<Arc<ApprovalsEndpoint>>) -> Response {
    match endpoint.inbox.list().await {
        Ok(questions) => json_response(StatusCode::OK, &json!({"questions": questions})),
        Err(err) => json_response(refusal_status(&err), &json!({"error": err.to_string()})),
    }
}

pub(super) async fn show(
    State(endpoint): State<Arc<ApprovalsEndpoint>>,
    Path(id): Path<String>,
) -> Response {
    match endpoint.inbox.get(&id).await {
        Ok(Some(question)) => json_response(StatusCode::OK, &json!(question)),
        Ok(None) => json_response(
            StatusCode::NOT_FOUND,
            &json!({"error": AnswerError::NoSuchQuestion(id).to_string()}),
        ),
        Err(err) => json_response(refusal_status(&err), &json!({"error": err.to_string()})),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    verdict: Verdict,
    #[serde(default)]
    reason: String,
}

pub(super) async fn answer(
    State(endpoint): State<Arc<ApprovalsEndpoint>>,
    Path(id): Path<String>,
    axum::Extension(approver): axum::Extension<ApproverRef>,
    body: Bytes,
) -> Response {
    let body: AnswerBody = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(err) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                &json!({"error": format!("the answer must be {{\"verdict\": \"approve\" | \"deny\", \"reason\": \"…\"}}: {err}")}),
            );
        }
    };
    if body.reason.chars().count() > MAX_REASON {
        return json_response(
            StatusCode::BAD_REQUEST,
            &json!({"error": format!("the reason is longer than {MAX_REASON} characters")}),
        );
    }
    match endpoint
        .inbox
        .answer(&id, &approver, body.verdict, &body.reason)
        .await
    {
        Ok(question) => json_response(StatusCode::OK, &json!(question)),
        Err(err) => json_response(refusal_status(&err), &json!({"error": err.to_string()})),
    }
}

/// The status an answer's refusal is told with.
pub(super) fn refusal_status(err: &AnswerError) -> StatusCode {
    match err {
        AnswerError::NoSuchQuestion(_) => StatusCode::NOT_FOUND,
        AnswerError::Closed { .. } | AnswerError::AlreadyApproved { .. } => StatusCode::CONFLICT,
        AnswerError::NotPermitted { .. } => StatusCode::FORBIDDEN,
        // Another replica can answer it; this one cannot, now.
        AnswerError::OtherPolicySet { .. } => StatusCode::MISDIRECTED_REQUEST,
        AnswerError::AuditUnavailable | AnswerError::Unavailable(_) => {
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}
