//! Exit codes of every command, in one place, so scripts can rely on them.

use std::process::{ExitCode, Termination};

/// How a command ended, as the process exit code. The numbers follow the
/// `cedar` CLI; `Ask` takes cedar's 4 ("not determined"), since an ask is
/// decided only once a human answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done; for `check`, allowed.
    Ok,
    /// 1: the command failed (bad input, unreadable file, failed tests).
    Failure,
    /// 2: `check` denied the call.
    Deny,
    /// 3: the policy set does not load (parse, `@id`, schema or validation
    /// problems, warnings included).
    ValidationFailure,
    /// 4: `check` would ask a human.
    Ask,
    /// 4: `policy diff`: NEW permits something OLD does not.
    Wider,
    /// 2: `policy diff` could not compare the sets.
    Unproven,
    /// 3: `exec` did not run the command: the kernel lacks what its
    /// confinement needs.
    NotConfined,
    /// The code of the command `exec` ran.
    Code(u8),
    /// 64: the command line itself is wrong (an unknown flag, a missing
    /// argument, a value that does not parse), as `sysexits` says: never
    /// to be read as a deny.
    Usage,
}

impl Exit {
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failure => 1,
            Exit::Deny => 2,
            Exit::ValidationFailure => 3,
            Exit::Ask | Exit::Wider => 4,
            Exit::Unproven => 2,
            Exit::NotConfined => 3,
            Exit::Code(code) => code,
            Exit::Usage => 64,
        }
    }
}

/// The table of exit codes, shown at the end of `--help`.
pub const EXIT_CODES: &str = "\
Exit codes:
  0   ok; check, gate: allow
  1   error: unreadable files, failed fixture tests, an audit log that cannot be written
  2   check, gate, exec: deny; policy diff: the sets could not be compared
  3   the policy set does not load; exec: not confined (the kernel lacks what a rule needs)
  4   check, gate, exec: ask (needs a human); policy diff: NEW permits more than OLD
  64  usage: an unknown flag, a missing argument, a value that does not parse
  exec exits with the code of the command it ran (128 + the signal that ended it).
  A command that prints ends quietly with 0 when its stdout closes (| head).";

impl Termination for Exit {
    fn report(self) -> ExitCode {
        ExitCode::from(self.code())
    }
}

/// Lets a closed stdout end the process quietly, as it ends `cat` or
/// `grep`: Rust ignores SIGPIPE, so a print to a pipe whose reader is gone
/// (`portcullis gate … | head -1`) panics with a backtrace. That one panic
/// ends the process with 0 and says nothing; any other panic is reported
/// as before. Only for commands that merely print: `serve`, `exec` and
/// `hook` must record how they end, and see the closed pipe as an error.
pub fn end_quietly_on_closed_stdout() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if is_closed_stdout(message) {
            std::process::exit(0);
        }
        report(info);
    }));
}

/// Whether a panic is std's print to a stdout whose reader is gone.
fn is_closed_stdout(message: &str) -> bool {
    message.starts_with("failed printing to stdout") && message.contains("Broken pipe")
}

/// Whether an error a command returned is only its stdout closing under
/// it, which ends it quietly too.
pub fn is_closed_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_closed_stdout_is_quiet() {
        assert!(is_closed_stdout(
            "failed printing to stdout: Broken pipe (os error 32)"
        ));
        assert!(!is_closed_stdout(
            "failed printing to stdout: No space left on device (os error 28)"
        ));
        assert!(!is_closed_stdout("index out of bounds"));
        let closed = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("writing the report");
        assert!(is_closed_pipe(&closed));
        assert!(!is_closed_pipe(&anyhow::anyhow!(
            "the policy set does not load"
        )));
    }

    #[test]
    fn usage_errors_have_a_code_of_their_own() {
        let codes = [
            Exit::Ok,
            Exit::Failure,
            Exit::Deny,
            Exit::ValidationFailure,
            Exit::Ask,
        ]
        .map(Exit::code);
        assert!(!codes.contains(&Exit::Usage.code()));
        assert_eq!(Exit::Usage.code(), 64);
    }
}
