//! Where logs go and what they hold: stderr only (stdout is the protocol
//! channel), no colour unless stderr is a terminal, text or JSON lines, and
//! never a protocol frame, whatever the filter asks for.

use std::io::IsTerminal;

use clap::ValueEnum;
use tracing::Level;
use tracing_subscriber::filter::{EnvFilter, FilterFn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// What is logged when neither `PORTCULLIS_LOG` nor `RUST_LOG` says: warnings
/// and errors, but not rmcp's warning for every JSON-RPC error it answers
/// (an unknown tool, bad arguments): those are ordinary refusals, and the
/// audit log records them.
const DEFAULT_FILTER: &str = "warn,rmcp::service=error";

/// The filter: `PORTCULLIS_LOG`, else `RUST_LOG`, else the default.
fn env_filter() -> EnvFilter {
    ["PORTCULLIS_LOG", "RUST_LOG"]
        .iter()
        .find_map(|name| {
            std::env::var(name)
                .ok()
                .filter(|value| !value.trim().is_empty())
        })
        .and_then(|value| EnvFilter::try_new(value).ok())
        .unwrap_or_else(|| EnvFilter::new(DEFAULT_FILTER))
}

/// rmcp writes whole requests and results (arguments, file contents) at
/// debug and below; the audit log keeps only their hashes, and the logs
/// must not undo that. A cap that no filter directive can lift.
fn frame_safe(meta: &tracing::Metadata<'_>) -> bool {
    !(meta.target().starts_with("rmcp") && *meta.level() > Level::INFO)
}

/// Installs the process's logger.
pub fn init(format: LogFormat) {
    let ansi = std::io::stderr().is_terminal();
    let layer = match format {
        LogFormat::Text => fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .boxed(),
        LogFormat::Json => fmt::layer().json().with_writer(std::io::stderr).boxed(),
    };
    let filtered = layer
        .with_filter(FilterFn::new(frame_safe))
        .with_filter(env_filter());
    // A second logger cannot be installed; the first stays.
    let _ = tracing_subscriber::registry().with(filtered).try_init();
}
