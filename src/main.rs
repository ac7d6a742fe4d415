//! The `portcullis` binary: parses the command line and dispatches; every
//! command lives in the library's `cli` module.

use std::process::ExitCode;

use clap::Parser;
use portcullis::cli::{self, Cli, Exit};

/// mimalloc, not the system allocator: a decision, a proxied message and a
/// replayed record each make hundreds of small allocations, freed on
/// other threads as often as not, where glibc's arenas cost the most.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
