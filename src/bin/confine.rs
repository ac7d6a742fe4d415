//! `portcullis-confine`: confines itself as `portcullis exec` planned and
//! becomes the command. It only dispatches; the work is the library's.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(portcullis::cli::confined_main().code())
}
