//! The MCP adapter: an rmcp server that translates MCP requests into calls
//! on the gate keeper and its answers back into MCP. It decides nothing.
//!
//! Dual-era: legacy clients (`initialize`, up to 2025-11-25) and 2026-07-28
//! clients (`server/discover`, per-request `_meta`) are both served; rmcp
//! selects the era per request.

mod approvals;
mod errors;
mod pre_init;
mod resources;
mod server;
mod stdio;

use std::sync::Arc;

use rmcp::ServiceExt;
use thiserror::Error;

pub use server::PortcullisServer;

use crate::approval::Approvals;
use crate::keeper::Keeper;
use crate::pdp::PolicyBundle;

#[derive(Debug, Error)]
pub enum ServeError {
    #[error("the MCP session did not start: {0}")]
    Start(String),
    #[error("the MCP session ended with an error: {0}")]
    Run(String),
    #[error("a wrapper tool's schema does not compile: {0}")]
    Wrappers(#[from] crate::tools::SchemaError),
}

/// Serves one client over stdin and stdout until stdin closes.
pub async fn serve_stdio(
    keeper: Arc<Keeper>,
    bundle: &PolicyBundle,
    approvals: Approvals,
) -> Result<(), ServeError> {
    let server = PortcullisServer::new(keeper, bundle, approvals).map_err(ServeError::Wrappers)?;
    let transport = pre_init::DropEarlyNotifications::new(stdio::LineTransport::new(
        tokio::io::stdin(),
        tokio::io::stdout(),
    ));
    let running = server
        .serve(transport)
        .await
        .map_err(|err| ServeError::Start(err.to_string()))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|err| ServeError::Run(err.to_string()))
}
