//! The MCP adapter: an rmcp server that translates MCP requests into calls
//! on the gate keeper and its answers back into MCP. It decides nothing.
//!
//! Dual-era: legacy clients (`initialize`, up to 2025-11-25) and 2026-07-28
//! clients (`server/discover`, per-request `_meta`) are both served; rmcp
//! selects the era per request.

mod approvals;
mod call;
mod errors;
pub mod http;
mod pre_init;
mod relay;
mod resources;
mod server;
mod stdio;
mod tasks;
mod watchers;

use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use thiserror::Error;

pub use relay::NoticeRelay;
pub use server::{Caller, Callers, PortcullisServer};

use crate::keeper::Keeper;

#[derive(Debug, Error)]
pub enum ServeError {
    #[error("the MCP session did not start: {0}")]
    Start(String),
    #[error("the MCP session ended with an error: {0}")]
    Run(String),
    #[error("a wrapper tool's schema does not compile: {0}")]
    Wrappers(#[from] crate::tools::SchemaError),
}

/// Why a session ended cleanly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The client closed stdin.
    Closed,
    /// A signal (named) asked the process to stop.
    Signal(&'static str),
}

/// How long calls in progress get to stop and record how they ended.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serves one client over stdin and stdout until stdin closes or `stop`
/// resolves. Either way every call still in progress is cancelled and has
/// recorded its outcome before this returns, so the caller's shutdown
/// record is the last word.
pub async fn serve_stdio(
    keeper: Arc<Keeper>,
    server: PortcullisServer,
    stop: impl Future<Output = &'static str>,
) -> Result<Ended, ServeError> {
    // Pipes (as every MCP client starts a server) are read and written on
    // the IO reactor: tokio's stdin and stdout hand each read and write to
    // a blocking thread, two thread hops per message, and a read of them
    // cannot be cancelled. Anything else (a file, a terminal) falls back to
    // those handles.
    let (reader, writer) = rmcp::transport::stdio_pipes();
    let transport =
        pre_init::DropEarlyNotifications::new(stdio::LineTransport::new(reader, writer));
    let watchers = server.watchers();
    let running = server
        .serve(transport)
        .await
        .map_err(|err| ServeError::Start(err.to_string()))?;
    // A downstream server's requests of its client go to this session's
    // client, each decided first.
    if let Some(fleet) = keeper.fleet() {
        fleet.set_relay(Arc::new(relay::SessionRelay {
            keeper: Arc::downgrade(&keeper),
            peer: running.peer().clone(),
            watchers: watchers.clone(),
        }));
    }
    let service = running.cancellation_token();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    // Calls are stopped (and record how they ended) before the service
    // goes: cancelling the service first would drop them unrecorded.
    let stop_calls = || async {
        if !keeper.shut_down(SHUTDOWN_GRACE).await {
            tracing::warn!("calls were still running after the grace period");
        }
    };
    let (ended, quit) = tokio::select! {
        quit = &mut waiting => {
            stop_calls().await;
            (Ended::Closed, quit)
        }
        signal = stop => {
            tracing::info!(signal, "stopping: cancelling the calls in progress");
            stop_calls().await;
            service.cancel();
            (Ended::Signal(signal), waiting.await)
        }
    };
    quit.map(|_| ended)
        .map_err(|err| ServeError::Run(err.to_string()))
}
