//! The approvals endpoint (`serve --approvals ADDR`): the approval inbox
//! over HTTP for approvers, never for MCP clients. Every request passes the
//! checks `/mcp` makes (Host, Origin) and carries an approver's token;
//! a client's token is refused here as any unknown token is.
//!
//! - `GET /api/questions`: the questions, pending first.
//! - `GET /api/questions/{id}`: one.
//! - `POST /api/questions/{id}/answer` with `{"verdict": "approve" | "deny",
//!   "reason": "…"}`: Cedar decides `approve` for this approver (recorded),
//!   and the first answer let through closes the question.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::approval::{AnswerError, Inbox, Verdict};
use crate::audit::ApproverRef;
use crate::auth::{AUTH_FAILED, FileDirectory, authenticate_approver};
use crate::http_checks::{LOOPBACK_HOSTS, bearer, host_ambiguous, host_name, is_loopback_origin};

/// The longest answer body taken: a verdict and a reason.
const MAX_BODY: usize = 16 * 1024;
/// The longest reason kept, in characters.
const MAX_REASON: usize = 2_000;

/// What the endpoint serves and whom it lets in.
pub struct ApprovalsEndpoint {
    pub inbox: Arc<Inbox>,
    pub approvers: Arc<FileDirectory>,
    /// Host names accepted besides the loopback ones, lower case.
    pub allowed_hosts: Vec<String>,
}

/// Serves the endpoint on `listener` until `stop` fires.
pub async fn serve_approvals(
    listener: tokio::net::TcpListener,
    endpoint: ApprovalsEndpoint,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let endpoint = Arc::new(endpoint);
    let app = Router::new()
        .route("/api/questions", get(list))
        .route("/api/questions/{id}", get(show))
        .route("/api/questions/{id}/answer", post(answer))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .route_layer(from_fn_with_state(Arc::clone(&endpoint), guard))
        .with_state(endpoint);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await
}

fn refuse(status: StatusCode, body: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"))],
        body,
    )
        .into_response()
}

/// Host and Origin as `/mcp` checks them, then the approver's token.
async fn guard(
    State(endpoint): State<Arc<ApprovalsEndpoint>>,
    mut request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let host_ok = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .and_then(host_name)
        .is_some_and(|host| {
            LOOPBACK_HOSTS.contains(&host.as_str()) || endpoint.allowed_hosts.contains(&host)
        });
    if !host_ok || host_ambiguous(&request) {
        return refuse(
            StatusCode::FORBIDDEN,
            "portcullis: this host name is not served",
        );
    }
    let mut origins = headers.get_all(header::ORIGIN).iter();
    let origin_ok = match (origins.next(), origins.next()) {
        (None, _) => true,
        (Some(origin), None) => origin
            .to_str()
            .is_ok_and(|o| is_loopback_origin(&o.trim_end_matches('/').to_ascii_lowercase())),
        _ => false,
    };
    if !origin_ok {
        return refuse(
            StatusCode::FORBIDDEN,
            "portcullis: this origin is not served",
        );
    }
    let approver = endpoint.approvers.approvers().and_then(|approvers| {
        let token = bearer(headers)?;
        authenticate_approver(&approvers, token).map(|a| ApproverRef {
            name: a.name.clone(),
            fingerprint: a.fingerprint(),
            groups: a.groups.clone(),
        })
    });
    let Some(approver) = approver else {
        let mut response = refuse(StatusCode::UNAUTHORIZED, AUTH_FAILED);
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

async fn list(State(endpoint): State<Arc<ApprovalsEndpoint>>) -> Response {
    json_response(StatusCode::OK, &json!({"questions": endpoint.inbox.list()}))
}

async fn show(State(endpoint): State<Arc<ApprovalsEndpoint>>, Path(id): Path<String>) -> Response {
    match endpoint.inbox.get(&id) {
        Some(question) => json_response(StatusCode::OK, &json!(question)),
        None => json_response(
            StatusCode::NOT_FOUND,
            &json!({"error": AnswerError::NoSuchQuestion(id).to_string()}),
        ),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    verdict: Verdict,
    #[serde(default)]
    reason: String,
}

async fn answer(
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
        Err(err) => {
            let status = match &err {
                AnswerError::NoSuchQuestion(_) => StatusCode::NOT_FOUND,
                AnswerError::Closed { .. } => StatusCode::CONFLICT,
                AnswerError::NotPermitted { .. } => StatusCode::FORBIDDEN,
                AnswerError::AuditUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            };
            json_response(status, &json!({"error": err.to_string()}))
        }
    }
}
