//! `serve --approvals ADDR`: the approval inbox, and the endpoint its
//! approvers answer through ([`crate::approval_http`]), on a port of its
//! own. Loopback unless `--allow-remote`: the questions show what agents
//! are asking to do.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::ServeArgs;
use super::keepers::KeeperMaker;
use crate::approval::{Announce, Inbox};
use crate::approval_http::{
    ApprovalsEndpoint, MemorySessions, SessionStore, WEBHOOK_SECRET_ENV, Webhook, serve_approvals,
    webhook_secret_from_env, webhook_secret_from_file,
};
use crate::auth::ApproverDirectory;
use crate::clock::SystemClock;
use crate::state::{SharedPageSessions, SharedQuestions, SharedState};

/// The inbox's listener, bound, and what tells of each new question.
pub(super) type Bound = (std::net::TcpListener, Option<Arc<dyn Announce>>);

/// The webhook `--approval-webhook` names, with its secret, linking to
/// the page at `page`.
pub(super) fn announcer(args: &ServeArgs, page: &str) -> anyhow::Result<Option<Arc<dyn Announce>>> {
    let Some(url) = &args.approval_webhook else {
        return Ok(None);
    };
    let secret = match (
        &args.approval_webhook_secret,
        std::env::var(WEBHOOK_SECRET_ENV),
    ) {
        (Some(path), _) => webhook_secret_from_file(path)?,
        (None, Ok(text)) => webhook_secret_from_env(&text)?,
        (None, Err(_)) => anyhow::bail!(
            "--approval-webhook needs a secret to sign with: give --approval-webhook-secret FILE or {WEBHOOK_SECRET_ENV} (make one with `head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE`)"
        ),
    };
    Ok(Some(Arc::new(Webhook::new(url, secret, page)?)))
}

/// The inbox: in this process's memory, or with `--state` in the shared
/// state, where any replica's page answers a question asked through any
/// other (each answer decided by a keeper of the asking client, made by
/// `maker`).
pub(super) fn kept(
    announce: Option<Arc<dyn Announce>>,
    shared: Option<&SharedState>,
    maker: KeeperMaker,
    args: &ServeArgs,
) -> anyhow::Result<Arc<Inbox>> {
    let clock = Arc::new(SystemClock);
    Ok(Arc::new(match shared {
        None => Inbox::new(clock, announce),
        Some(state) => {
            let questions = SharedQuestions::new(state.clone(), &super::args::replica_id(args)?);
            Inbox::over(clock, announce, Arc::new(questions), Some(Arc::new(maker)))
        }
    }))
}

/// Binds the approvals address now, so a bad one stops `serve` before
/// anything starts, and says where it is (port 0 picks one): the listener
/// and the page's address.
pub(super) fn bind(
    address: SocketAddr,
    allow_remote: bool,
) -> anyhow::Result<(std::net::TcpListener, String)> {
    if !address.ip().is_loopback() && !allow_remote {
        anyhow::bail!(
            "--approvals {address} is not a loopback address: add --allow-remote to let approvers on other machines in (put a TLS terminator in front)"
        );
    }
    let listener = std::net::TcpListener::bind(address)
        .with_context(|| format!("cannot listen on {address} for approvals"))?;
    listener
        .set_nonblocking(true)
        .context("the approvals listener")?;
    let bound = listener.local_addr().context("the approvals address")?;
    // One write, as for the MCP address: a reader may wait for the line.
    let page = format!("http://{bound}/");
    let line = format!("portcullis: serving the approval inbox at {page}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    Ok((listener, page))
}

/// Serves the inbox to approvers until `stop` fires.
pub(super) async fn serve(
    listener: std::net::TcpListener,
    inbox: Arc<Inbox>,
    approvers: Arc<dyn ApproverDirectory>,
    shared: Option<SharedState>,
    allowed_hosts: Vec<String>,
    stop: CancellationToken,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(err) => {
            tracing::error!(error = %err, "the approvals listener cannot be served");
            return;
        }
    };
    let allowed_hosts = allowed_hosts
        .iter()
        .map(|name| name.to_ascii_lowercase())
        .collect();
    let sessions: Arc<dyn SessionStore> = match shared {
        Some(state) => Arc::new(SharedPageSessions::new(state)),
        None => Arc::new(MemorySessions::default()),
    };
    let endpoint = ApprovalsEndpoint::new(inbox, approvers, allowed_hosts, sessions);
    if let Err(err) = serve_approvals(listener, endpoint, stop).await {
        tracing::error!(error = %err, "the approvals listener stopped");
    }
}
