//! The approvals page: a login form that takes an approver's token once
//! and sets a session cookie (HttpOnly, SameSite=Strict), then the inbox:
//! each pending question whole (the tool, its paths as resolved, the
//! arguments policies see, why it asks, who asked, when it expires) with an
//! approve/deny form, and the questions answered lately with who answered.
//! Every form carries the session's CSRF token; one without it is refused.
//! Everything shown is escaped: names and arguments come from agents.

use std::fmt::Write;
use std::sync::Arc;

use axum::Form;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::api::refusal_status;
use super::sessions::PageSession;
use super::{ApprovalsEndpoint, MAX_REASON};
use crate::approval::{QuestionView, Status, Verdict};
use crate::html_text::escape;

/// The session cookie's name.
const COOKIE: &str = "portcullis_approver";

const STYLE: &str = "body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:64em;color:#1c2833;padding:0 1em}\
h1{font-size:1.5em}h2{font-size:1.15em;margin:0 0 .4em}\
section{border:1px solid #d5d8dc;border-radius:6px;padding:1em;margin:1em 0}\
section.pending{border-left:6px solid #b9770e}section.approved{border-left:6px solid #1e8449}\
section.denied,section.expired,section.withdrawn{border-left:6px solid #922b21;opacity:.85}\
code,pre{font-size:.9em;background:#f4f6f6;padding:.1em .3em}pre{padding:.5em;white-space:pre-wrap;word-break:break-all}\
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em}dt{color:#5d6d7e}dd{margin:0}\
textarea{width:100%;min-height:3em}button{font-size:1em;margin:.4em .6em 0 0;padding:.3em 1em}\
.error{background:#fdedec;border:1px solid #922b21;padding:.6em}.who{color:#5d6d7e}";

/// A page, with the headers that keep it from being framed, cached,
/// sniffed or made to load anything.
fn html(status: StatusCode, title: &str, body: &str) -> Response {
    let page = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\"><title>{}</title>\
         <style>{STYLE}</style></head><body>{body}</body></html>",
        escape(title)
    );
    let mut response = (status, page).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

fn see_other(location: &'static str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    response
        .headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static(location));
    response
}

/// The session cookie's value, if the request carries exactly one.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    let mut found = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='));
    let value = found.next()?;
    found.next().is_none().then_some(value)
}

/// The session of this request, while its approver is still one.
async fn session(
    endpoint: &ApprovalsEndpoint,
    headers: &HeaderMap,
) -> Option<(String, PageSession)> {
    let id = cookie(headers)?;
    let session = endpoint.sessions.get(id).await?;
    if !endpoint.still_approver(&session.approver) {
        endpoint.sessions.close(id).await;
        return None;
    }
    Some((id.to_owned(), session))
}

fn login_page(status: StatusCode, message: Option<&str>) -> Response {
    let mut body = String::from("<h1>portcullis approvals</h1>");
    if let Some(message) = message {
        let _ = write!(
            body,
            "<p class=\"error\" id=\"message\">{}</p>",
            escape(message)
        );
    }
    body.push_str(
        "<form method=\"post\" action=\"/login\"><p><label for=\"token\">Your approver token \
         (<code>portcullis token create NAME --approver GROUP</code>)</label></p>\
         <p><input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" size=\"60\"></p>\
         <button id=\"login\" type=\"submit\">Log in</button></form>",
    );
    html(status, "portcullis approvals: log in", &body)
}

/// `GET /`: the inbox for a session, the login form otherwise.
pub(super) async fn inbox(
    State(endpoint): State<Arc<ApprovalsEndpoint>>,
    headers: HeaderMap,
) -> Response {
    match session(&endpoint, &headers).await {
        Some((_, session)) => inbox_page(&endpoint, &session, StatusCode::OK, None).await,
        None => login_page(StatusCode::OK, None),
    }
}

#[derive(Deserialize)]
pub(super) struct Login {
    #[serde(default)]
    token: String,
}

/// `POST /login`: a session for an approver's token.
pub(super) async fn login(
    State(endpoint): State<Arc<ApprovalsEndpoint>>,
    Form(login): Form<Login>,
) -> Response {
    let Some(approver) = endpoint.approver_of(login.token.trim()) else {
        return login_page(
            StatusCode::UNAUTHORIZED,
            Some("that token is not an approver's (a client's token answers no question)"),
        );
    };
    let id = match endpoint.sessions.open(approver).await {
        Ok(id) => id,
        Err(err) => return login_page(StatusCode::SERVICE_UNAVAILABLE, Some(&err.to_string())),
    };
    let mut response = see_other("/");
    if let Ok(value) =
        HeaderValue::from_str(&format!("{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict"))
    {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

#[derive(Deserialize)]
pub(super) struct Logout {
    #[serde(default)]
    csrf: String,
}

/// `POST /logout`: ends the session (with its CSRF token, so another site
/// cannot log an approver out).
pub(super) async fn logout(
    State(endpoint): State<Arc<ApprovalsEndpoint>>,
    headers: HeaderMap,
    Form(form): Form<Logout>,
) -> Response {
    if let Some((id, session)) = session(&endpoint, &headers).await {
        if !session.csrf_matches(&form.csrf) {
            return csrf_refused();
        }
        endpoint.sessions.close(&id).await;
    }
    let mut response = see_other("/");
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "portcullis_approver=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        ),
    );
    response
}

fn csrf_refused() -> Response {
    html(
        StatusCode::FORBIDDEN,
        "portcullis approvals: refused",
        "<h1>Refused</h1><p class=\"error\" id=\"message\">This form did not carry this session's \
         CSRF token, so it is refused. <a href=\"/\">Back to the inbox</a>.</p>",
    )
}

#[derive(Deserialize)]
pub(super) struct PageAnswer {
    #[serde(default)]
    csrf: String,
    verdict: Option<Verdict>,
    #[serde(default)]
    reason: String,
}

/// `POST /questions/{id}/answer`: the form's answer, taken as the API
/// takes one, after its CSRF token.
pub(super) async fn answer(
    State(endpoint): State<Arc<ApprovalsEndpoint>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(form): Form<PageAnswer>,
) -> Response {
    let Some((_, session)) = session(&endpoint, &headers).await else {
        return login_page(
            StatusCode::UNAUTHORIZED,
            Some("log in to answer: the session ended or never began"),
        );
    };
    if !session.csrf_matches(&form.csrf) {
        return csrf_refused();
    }
    let Some(verdict) = form.verdict else {
        let message = "choose approve or deny";
        return inbox_page(&endpoint, &session, StatusCode::BAD_REQUEST, Some(message)).await;
    };
    if form.reason.chars().count() > MAX_REASON {
        let message = format!("the reason is longer than {MAX_REASON} characters");
        return inbox_page(&endpoint, &session, StatusCode::BAD_REQUEST, Some(&message)).await;
    }
    match endpoint
        .inbox
        .answer(&id, &session.approver, verdict, form.reason.trim())
        .await
    {
        Ok(_) => see_other("/"),
        Err(err) => {
            inbox_page(
                &endpoint,
                &session,
                refusal_status(&err),
                Some(&err.to_string()),
            )
            .await
        }
    }
}

async fn inbox_page(
    endpoint: &ApprovalsEndpoint,
    session: &PageSession,
    status: StatusCode,
    message: Option<&str>,
) -> Response {
    let (questions, status, unlisted) = match endpoint.inbox.list().await {
        Ok(questions) => (questions, status, None),
        Err(err) => (Vec::new(), refusal_status(&err), Some(err.to_string())),
    };
    let message = message.or(unlisted.as_deref());
    let csrf = escape(&session.csrf);
    let mut body = format!(
        "<h1>portcullis approvals</h1><p class=\"who\">Logged in as <b id=\"approver\">{}</b> \
         ({}). <a href=\"/\">Refresh</a></p>\
         <form method=\"post\" action=\"/logout\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
         <button type=\"submit\">Log out</button></form>",
        escape(&session.approver.name),
        escape(&session.approver.groups.join(", ")),
    );
    if let Some(message) = message {
        let _ = write!(
            body,
            "<p class=\"error\" id=\"message\">{}</p>",
            escape(message)
        );
    }
    let pending = questions
        .iter()
        .filter(|q| q.status == Status::Pending)
        .count();
    let _ = write!(body, "<h2>{pending} waiting</h2>");
    for question in &questions {
        question_html(&mut body, question, &csrf);
    }
    html(status, "portcullis approvals", &body)
}

fn question_html(out: &mut String, q: &QuestionView, csrf: &str) {
    let id = escape(&q.id);
    let _ = write!(
        out,
        "<section id=\"q-{id}\" class=\"question {}\"><h2><code>{}</code> wants <code>{}</code> \
         <span class=\"who\">({})</span></h2><dl>\
         <dt>question</dt><dd>{id}</dd><dt>status</dt><dd class=\"status\">{}</dd>\
         <dt>client</dt><dd>{} (tier {}, over {})</dd><dt>tool</dt><dd><code>{}</code></dd>\
         <dt>asked</dt><dd>{}</dd><dt>expires</dt><dd>{}</dd>",
        q.status.as_str(),
        escape(&q.client),
        escape(&q.name),
        escape(&q.tool),
        q.status.as_str(),
        escape(&q.client),
        escape(&q.client_tier),
        escape(&q.transport),
        escape(&q.tool),
        escape(&q.asked_at),
        escape(&q.expires_at),
    );
    facts_html(out, q);
    out.push_str("</dl>");
    answers_html(out, q);
    if q.status == Status::Pending {
        if q.required > 1 {
            let _ = write!(
                out,
                "<p class=\"quorum\">needs {} distinct approvers; {} so far</p>",
                q.required,
                q.answers.len()
            );
        }
        let _ = write!(
            out,
            "<form method=\"post\" action=\"/questions/{id}/answer\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <label>Reason (recorded; told to the client on a denial)<textarea name=\"reason\"></textarea></label>\
             <button type=\"submit\" name=\"verdict\" value=\"approve\">Approve</button>\
             <button type=\"submit\" name=\"verdict\" value=\"deny\">Deny</button></form>"
        );
    }
    out.push_str("</section>");
}

/// The call's paths, the arguments policies see (and those they do not,
/// named), and the policies that asked.
fn facts_html(out: &mut String, q: &QuestionView) {
    for (name, shown) in &q.paths {
        let _ = write!(
            out,
            "<dt>path <code>{}</code></dt><dd><code>{}</code></dd>",
            escape(name),
            escape(shown)
        );
    }
    for (name, value) in &q.arguments {
        let shown = serde_json::to_string_pretty(value).unwrap_or_default();
        let _ = write!(
            out,
            "<dt>argument <code>{}</code></dt><dd><pre>{}</pre></dd>",
            escape(name),
            escape(&shown)
        );
    }
    for name in &q.hidden {
        let _ = write!(
            out,
            "<dt>argument <code>{}</code></dt><dd>hidden from policies: not shown</dd>",
            escape(name)
        );
    }
    for policy in &q.policies {
        let _ = write!(
            out,
            "<dt>asks because</dt><dd>{} (<code>{}</code>)</dd>",
            escape(&policy.reason),
            escape(&policy.id)
        );
    }
}

/// The answers taken so far, each with who gave it, when and why.
fn answers_html(out: &mut String, q: &QuestionView) {
    for answer in &q.answers {
        let verdict = match answer.verdict {
            Verdict::Approve => "approved",
            Verdict::Deny => "denied",
        };
        let _ = write!(
            out,
            "<p class=\"answer\">{verdict} by <b>{}</b> <span class=\"who\">({})</span> at {}{}</p>",
            escape(&answer.approver),
            escape(&answer.fingerprint),
            escape(&answer.at),
            if answer.reason.is_empty() {
                String::new()
            } else {
                format!(": {}", escape(&answer.reason))
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_session_cookie_among_others_is_read_and_two_are_none() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; portcullis_approver=abc; b=2"),
        );
        assert_eq!(cookie(&headers), Some("abc"));
        headers.append(
            header::COOKIE,
            HeaderValue::from_static("portcullis_approver=def"),
        );
        assert_eq!(cookie(&headers), None);
        let mut other = HeaderMap::new();
        other.insert(
            header::COOKIE,
            HeaderValue::from_static("portcullis_approverx=abc"),
        );
        assert_eq!(cookie(&other), None);
    }
}
