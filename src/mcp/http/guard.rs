//! The checks every request to `/mcp` passes before rmcp reads a byte of
//! its body: Host (DNS rebinding), Origin (a browser page of another site),
//! the bearer token (which client), the declared body size, and that a
//! session id belongs to that client. A refusal says only what class of
//! thing was wrong, never which token or session exists.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::clients::{Clients, Refusal};
use super::owners::SessionOwners;
use crate::auth::AUTH_FAILED;
use crate::http_checks::{LOOPBACK_HOSTS, bearer, host_ambiguous, host_name, is_loopback_origin};
use crate::mcp::Caller;

/// The session header of the legacy era.
pub const SESSION_HEADER: &str = "mcp-session-id";

pub struct Guard {
    pub clients: Arc<Clients>,
    pub owners: Arc<SessionOwners>,
    /// Host names accepted besides the loopback ones, lower case.
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted (`scheme://host[:port]`), lower case.
    pub allowed_origins: Vec<String>,
    pub max_body: usize,
}

fn refuse(status: StatusCode, body: &'static str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"))],
        body,
    )
        .into_response()
}

/// 401 with the same body whatever was wrong with the token.
fn unauthorized() -> Response {
    let mut response = refuse(StatusCode::UNAUTHORIZED, AUTH_FAILED);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"portcullis\""),
    );
    response
}

/// The headers a browser page of an allowed origin may send, and the
/// session header it may read.
const CORS_ALLOW_HEADERS: &str =
    "authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id";
const CORS_ALLOW_METHODS: &str = "GET, POST, DELETE";

/// The answer to a browser's CORS preflight from an allowed origin: what
/// it may send, and nothing else (no session, no token needed to ask).
fn preflight(origin: &HeaderValue) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(CORS_ALLOW_METHODS),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(CORS_ALLOW_HEADERS),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    headers.insert(header::VARY, HeaderValue::from_static("origin"));
    response
}

/// Whether a body holds an `initialize` request (alone or in a batch).
fn is_initialize(body: &[u8]) -> bool {
    let named = |message: &serde_json::Value| message["method"] == "initialize";
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Array(messages)) => messages.iter().any(named),
        Ok(message) => named(&message),
        Err(_) => false,
    }
}

impl Guard {
    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .and_then(host_name)
        else {
            return false;
        };
        LOOPBACK_HOSTS.contains(&host.as_str()) || self.allowed_hosts.contains(&host)
    }

    /// A request without `Origin` is not from a browser page and passes;
    /// one with an Origin must be a page of this machine (which DNS
    /// rebinding cannot fake: the Origin stays the attacker's) or one the
    /// operator listed, exactly.
    fn origin_allowed(&self, headers: &HeaderMap) -> bool {
        let mut origins = headers.get_all(header::ORIGIN).iter();
        match (origins.next(), origins.next()) {
            (None, _) => true,
            (Some(origin), None) => origin.to_str().is_ok_and(|origin| {
                let origin = origin.trim_end_matches('/').to_ascii_lowercase();
                is_loopback_origin(&origin) || self.allowed_origins.contains(&origin)
            }),
            (Some(_), Some(_)) => false,
        }
    }

    fn declared_too_long(&self, headers: &HeaderMap) -> bool {
        headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|len| len > self.max_body as u64)
    }
}

/// The JSON-RPC refusal of a second `initialize`, as stdio answers it.
fn already_initialized() -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32600, "message": "Invalid Request: the session is already initialized"},
    });
    let mut response = (StatusCode::BAD_REQUEST, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

pub async fn guard(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let origin = match screen(&guard, &request) {
        Ok(origin) => origin,
        Err(refused) => return *refused,
    };
    let headers = request.headers();
    let keeper = match bearer(headers).map(|token| guard.clients.authenticate(token)) {
        Some(Ok(keeper)) => keeper,
        refused => {
            let why = refused.and_then(Result::err).unwrap_or(Refusal::Unknown);
            tracing::warn!(?why, "refused a request without a valid bearer token (401)");
            return unauthorized();
        }
    };
    if guard.declared_too_long(headers) {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, "Payload Too Large");
    }
    let fingerprint = keeper.client().fingerprint.clone();
    let session = match headers.get(SESSION_HEADER) {
        Some(value) => match value.to_str() {
            Ok(session) if guard.owners.owned_by(session, &fingerprint) => Some(session.to_owned()),
            _ => {
                tracing::warn!(client = %keeper.client().name, "refused a session id this client did not open (404)");
                return refuse(StatusCode::NOT_FOUND, "Not Found: no such session");
            }
        },
        None => None,
    };
    let deleting = request.method() == Method::DELETE;
    let mut request = if session.is_some() && request.method() == Method::POST {
        match no_second_initialize(&guard, request).await {
            Ok(request) => request,
            Err(refused) => return *refused,
        }
    } else {
        request
    };
    request.extensions_mut().insert(Caller(keeper));
    let mut response = next.run(request).await;
    answered(&mut response, origin, deleting);
    match session {
        None => {
            if let Some(opened) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
            {
                guard.owners.open(opened, &fingerprint);
            }
        }
        Some(session) if deleting && response.status().is_success() => guard.owners.close(&session),
        Some(_) => {}
    }
    response
}

/// Host and Origin, before anything else: the origin to answer, or the
/// refusal (or a CORS preflight's answer).
fn screen(guard: &Guard, request: &Request) -> Result<Option<HeaderValue>, Box<Response>> {
    if host_ambiguous(request) {
        tracing::warn!("refused a request that names its host twice (400)");
        return Err(Box::new(refuse(
            StatusCode::BAD_REQUEST,
            "Bad Request: the request names its host more than once",
        )));
    }
    let headers = request.headers();
    if !guard.host_allowed(headers) {
        tracing::warn!(host = ?headers.get(header::HOST), "refused a request for a host that is not allowed (403)");
        return Err(Box::new(refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: Host header is not allowed",
        )));
    }
    if !guard.origin_allowed(headers) {
        tracing::warn!(origin = ?headers.get(header::ORIGIN), "refused a request from an origin that is not allowed (403)");
        return Err(Box::new(refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: Origin is not allowed",
        )));
    }
    let origin = headers.get(header::ORIGIN).cloned();
    if request.method() == Method::OPTIONS
        && let Some(origin) = &origin
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    {
        return Err(Box::new(preflight(origin)));
    }
    Ok(origin)
}

/// An open session is initialized once: a second `initialize` would
/// renegotiate what it was granted (refused over stdio the same way).
async fn no_second_initialize(guard: &Guard, request: Request) -> Result<Request, Box<Response>> {
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, guard.max_body).await else {
        return Err(Box::new(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Payload Too Large",
        )));
    };
    if is_initialize(&bytes) {
        tracing::warn!("refused a second initialize on an open session (400)");
        return Err(Box::new(already_initialized()));
    }
    Ok(Request::from_parts(parts, axum::body::Body::from(bytes)))
}

/// What the guard adds to the service's answer: the CORS headers for the
/// origin it let in, and 204 for a closed session.
fn answered(response: &mut Response, origin: Option<HeaderValue>, deleting: bool) {
    if let Some(origin) = origin {
        // The guard let this origin in: its page may read the answer and
        // the session it opened.
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("mcp-session-id"),
        );
        headers.append(header::VARY, HeaderValue::from_static("origin"));
    }
    // rmcp answers a closed session 202; the SDKs take a closing as done
    // only on 200 or 204 (the Python SDK prints "Session termination
    // failed: 202"), and it is done: nothing is left to accept.
    if deleting && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_lose_their_port_and_case() {
        assert_eq!(host_name("LocalHost:8765").as_deref(), Some("localhost"));
        assert_eq!(host_name("127.0.0.1").as_deref(), Some("127.0.0.1"));
        assert_eq!(host_name("[::1]:80").as_deref(), Some("::1"));
        assert_eq!(host_name("[::1]").as_deref(), Some("::1"));
    }

    #[test]
    fn malformed_hosts_are_no_host() {
        for bad in [
            "",
            "[::1",
            "[::1]x",
            "localhost:port",
            "evil.com:1:2",
            ":80",
            "a:123456",
        ] {
            assert_eq!(host_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn pages_of_this_machine_are_loopback_origins_and_nothing_else_is() {
        for good in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:8080",
            "http://localhost",
        ] {
            assert!(is_loopback_origin(good), "{good}");
        }
        for bad in [
            "null",
            "http://evil.example",
            "http://localhost.evil.example",
            "file://localhost",
            "http://localhost:3000/path",
            "http://user@localhost",
            "localhost",
            "http://127.0.0.2",
        ] {
            assert!(!is_loopback_origin(bad), "{bad}");
        }
    }

    #[test]
    fn only_one_bearer_token_is_read() {
        let mut headers = HeaderMap::new();
        assert_eq!(bearer(&headers), None);
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer abc"),
        );
        assert_eq!(bearer(&headers), Some("abc"));
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer  abc "),
        );
        assert_eq!(bearer(&headers), Some("abc"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&headers), None);
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer "));
        assert_eq!(bearer(&headers), None);
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer abc"),
        );
        headers.append(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer def"),
        );
        assert_eq!(bearer(&headers), None, "two tokens are none");
    }
}
