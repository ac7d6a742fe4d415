use std::process::ExitCode;

use clap::Parser;
use portcullis::cli::{self, Cli, Exit};
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    // Logs go to stderr, always: stdout carries command output and, when
    // serving over stdio, nothing but protocol frames.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            EnvFilter::try_from_env("PORTCULLIS_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        )
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
