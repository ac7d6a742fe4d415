//! `serve --metrics ADDR`: what the process counts ([`crate::metrics`]),
//! as OpenMetrics text at `GET /metrics` on a port of its own, for a
//! monitoring system that holds no client token. Loopback unless
//! `--allow-remote`: the figures say who calls which tool how often.

use std::net::SocketAddr;

use anyhow::Context;
use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::routing::get;

/// The path the figures are served at.
pub const METRICS_PATH: &str = "/metrics";

/// Binds the metrics address now, so a bad one stops `serve` before
/// anything starts; the address bound, for the operator (port 0 picks one).
pub(super) fn bind(
    address: SocketAddr,
    allow_remote: bool,
) -> anyhow::Result<std::net::TcpListener> {
    if !address.ip().is_loopback() && !allow_remote {
        anyhow::bail!(
            "--metrics {address} is not a loopback address: add --allow-remote to let other machines read the figures"
        );
    }
    let listener = std::net::TcpListener::bind(address)
        .with_context(|| format!("cannot listen on {address} for metrics"))?;
    listener
        .set_nonblocking(true)
        .context("the metrics listener")?;
    let bound = listener.local_addr().context("the metrics address")?;
    // One write, as for the MCP address: a reader may wait for the line.
    let line = format!("portcullis: serving metrics at http://{bound}{METRICS_PATH}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    Ok(listener)
}

/// Serves the figures until the process ends.
pub(super) async fn serve(listener: std::net::TcpListener) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(err) => {
            tracing::error!(error = %err, "the metrics listener cannot be served");
            return;
        }
    };
    let app = Router::new().route(
        METRICS_PATH,
        get(|| async {
            (
                [(CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
                crate::metrics::encode(),
            )
        }),
    );
    if let Err(err) = axum::serve(listener, app).await {
        tracing::error!(error = %err, "the metrics listener stopped");
    }
}
