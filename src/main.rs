//! The `portcullis` binary: parses the command line and dispatches; every
//! command lives in the library's `cli` module.

use std::process::ExitCode;

use clap::Parser;
use portcullis::cli::{self, Cli, Exit};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // `--help` and `--version` are answers (0, on stdout); anything
            // else is a usage error, with its own code so that a script
            // never reads it as a deny.
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() {
                Exit::Usage.code()
            } else {
                Exit::Ok.code()
            });
        }
    };
    let quiet_pipe = cli.command.only_prints();
    if quiet_pipe {
        cli::end_quietly_on_closed_stdout();
    }
    // Logs go to stderr, always: stdout carries command output and, when
    // serving over stdio, nothing but protocol frames.
    cli::init_logging(cli.log_format);
    match cli::run(cli) {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(err) if quiet_pipe && cli::is_closed_pipe(&err) => ExitCode::from(Exit::Ok.code()),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(Exit::Failure.code())
        }
    }
}
