//! `serve --approvals ADDR`: the approval inbox, and the endpoint its
//! approvers answer through ([`crate::approval_http`]), on a port of its
//! own. Loopback unless `--allow-remote`: the questions show what agents
//! are asking to do.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::approval::Inbox;
use crate::approval_http::{ApprovalsEndpoint, serve_approvals};
use crate::auth::FileDirectory;

/// Binds the approvals address now, so a bad one stops `serve` before
/// anything starts, and says where it is (port 0 picks one).
pub(super) fn bind(
    address: SocketAddr,
    allow_remote: bool,
) -> anyhow::Result<std::net::TcpListener> {
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
    let line = format!("portcullis: serving the approval inbox at http://{bound}/\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    Ok(listener)
}

/// Serves the inbox to approvers until `stop` fires.
pub(super) async fn serve(
    listener: std::net::TcpListener,
    inbox: Arc<Inbox>,
    approvers: Arc<FileDirectory>,
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
    let endpoint = ApprovalsEndpoint {
        inbox,
        approvers,
        allowed_hosts: allowed_hosts
            .iter()
            .map(|name| name.to_ascii_lowercase())
            .collect(),
    };
    if let Err(err) = serve_approvals(listener, endpoint, stop).await {
        tracing::error!(error = %err, "the approvals listener stopped");
    }
}
