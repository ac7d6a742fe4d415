//! The approvals endpoint (`serve --approvals ADDR`): the approval inbox
//! over HTTP for approvers, never for MCP clients. Every request passes the
//! checks `/mcp` makes (Host; Origin a page of this machine or of the
//! endpoint itself), then:
//!
//! - the page (`page.rs`): `/`, a login form taking an approver's token
//!   once, then a session cookie, and a CSRF token in every form;
//! - the JSON API (`api.rs`), an approver's bearer token on each request:
//!   `GET /api/questions`, `GET /api/questions/{id}`,
//!   `POST /api/questions/{id}/answer` with `{"verdict": "approve" |
//!   "deny", "reason": "…"}`.
//!
//! Either way Cedar decides `approve` for this approver (recorded), and the
//! first answer let through closes the question. A client's token is
//! refused here as any unknown token is.

mod api;
mod page;
mod sessions;
mod webhook;

pub use webhook::{
    SIGNATURE_HEADER, TIMESTAMP_HEADER, WEBHOOK_SECRET_ENV, Webhook, WebhookError, payload,
    signature, webhook_secret_from_env, webhook_secret_from_file,
};

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio_util::sync::CancellationToken;

use crate::approval::Inbox;
use crate::audit::ApproverRef;
use crate::auth::{ApproverDirectory, authenticate_approver};
use crate::http_checks::{LOOPBACK_HOSTS, host_ambiguous, host_name, is_loopback_origin};
use sessions::PageSessions;
pub use sessions::{
    MemorySessions, PageSession, SESSION_LIFE, SessionStore, SessionsPending, SessionsUnavailable,
};

/// The longest body taken: a verdict, a reason and a CSRF token.
const MAX_BODY: usize = 16 * 1024;
/// The longest reason kept, in characters.
const MAX_REASON: usize = 2_000;

/// What the endpoint serves and whom it lets in.
pub struct ApprovalsEndpoint {
    pub inbox: Arc<Inbox>,
    pub approvers: Arc<dyn ApproverDirectory>,
    /// Host names accepted besides the loopback ones, lower case.
    pub allowed_hosts: Vec<String>,
    sessions: PageSessions,
}

impl ApprovalsEndpoint {
    /// `sessions` keeps the page's sessions: this process's memory, or
    /// a fleet's shared state.
    pub fn new(
        inbox: Arc<Inbox>,
        approvers: Arc<dyn ApproverDirectory>,
        allowed_hosts: Vec<String>,
        sessions: Arc<dyn SessionStore>,
    ) -> Self {
        Self {
            inbox,
            approvers,
            allowed_hosts,
            sessions: PageSessions::in_store(sessions),
        }
    }

    /// The approver whose token this is, as the store holds it now.
    fn approver_of(&self, token: &str) -> Option<ApproverRef> {
        let approvers = self.approvers.approvers()?;
        authenticate_approver(&approvers, token).map(|a| ApproverRef {
            name: a.name.clone(),
            fingerprint: a.fingerprint(),
            groups: a.groups.clone(),
        })
    }

    /// Whether the approver a session was opened for is still in the
    /// store with the same token (not revoked, not re-issued).
    fn still_approver(&self, approver: &ApproverRef) -> bool {
        self.approvers.approvers().is_some_and(|approvers| {
            approvers
                .iter()
                .any(|a| a.name == approver.name && a.fingerprint() == approver.fingerprint)
        })
    }
}

/// Serves the endpoint on `listener` until `stop` fires.
pub async fn serve_approvals(
    listener: tokio::net::TcpListener,
    endpoint: ApprovalsEndpoint,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let endpoint = Arc::new(endpoint);
    let api = Router::new()
        .route("/api/questions", get(api::list))
        .route("/api/questions/{id}", get(api::show))
        .route("/api/questions/{id}/answer", post(api::answer))
        .route_layer(from_fn_with_state(
            Arc::clone(&endpoint),
            api::bearer_approver,
        ));
    let app = Router::new()
        .route("/", get(page::inbox))
        .route("/login", post(page::login))
        .route("/logout", post(page::logout))
        .route("/questions/{id}/answer", post(page::answer))
        .merge(api)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(from_fn_with_state(Arc::clone(&endpoint), same_site))
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

/// Host as `/mcp` checks it; an Origin, when a browser sends one, of a
/// page of this machine or of this very endpoint (its own forms).
async fn same_site(
    State(endpoint): State<Arc<ApprovalsEndpoint>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let host_ok = host.and_then(host_name).is_some_and(|name| {
        LOOPBACK_HOSTS.contains(&name.as_str()) || endpoint.allowed_hosts.contains(&name)
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
        (Some(origin), None) => origin.to_str().is_ok_and(|origin| {
            let origin = origin.trim_end_matches('/').to_ascii_lowercase();
            is_loopback_origin(&origin) || host.is_some_and(|host| own_origin(&origin, host))
        }),
        _ => false,
    };
    if !origin_ok {
        return refuse(
            StatusCode::FORBIDDEN,
            "portcullis: this origin is not served",
        );
    }
    next.run(request).await
}

/// `origin` is `http(s)://` exactly the host this request was sent to.
fn own_origin(origin: &str, host: &str) -> bool {
    let host = host.trim().to_ascii_lowercase();
    origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
        .is_some_and(|authority| authority == host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_is_its_own_only_for_the_very_host() {
        assert!(own_origin(
            "https://approvals.example:8443",
            "Approvals.Example:8443"
        ));
        assert!(own_origin("http://approvals.example", "approvals.example"));
        assert!(!own_origin(
            "https://approvals.example.evil",
            "approvals.example"
        ));
        assert!(!own_origin(
            "https://evil/approvals.example",
            "approvals.example"
        ));
        assert!(!own_origin("ftp://approvals.example", "approvals.example"));
    }
}
