//! The `portcullis` binary: parses the command line and dispatches; every
//! command lives in the library's `cli` module.

use std::process::ExitCode;

use clap::Parser;
use portcullis::cli::{self, Cli, Exit};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    // Logs go to stderr, always: stdout carries command output and, when
    // serving over stdio, nothing but protocol frames.
    // rmcp logs whole frames (arguments, file contents, results) at debug;
    // the audit log keeps only their hashes, and the logs must not undo
    // that, whatever PORTCULLIS_LOG asks for.
    let filter = EnvFilter::try_from_env("PORTCULLIS_LOG")
        .unwrap_or_else(|_| EnvFilter::new("warn"))
        .add_directive(cli::FRAME_SAFE_DIRECTIVE.parse().unwrap_or_default());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .init();
    let cli = Cli::parse();
    match cli::run(cli) {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(Exit::Failure.code())
        }
    }
}
