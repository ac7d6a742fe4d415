//! The `portcullis` binary: parses the command line and dispatches; every
//! command lives in the library's `cli` module.

use std::process::ExitCode;

use clap::Parser;
use portcullis::cli::{self, Cli, Exit};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Logs go to stderr, always: stdout carries command output and, when
    // serving over stdio, nothing but protocol frames.
    cli::init_logging(cli.log_format);
    match cli::run(cli) {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(Exit::Failure.code())
        }
    }
}
