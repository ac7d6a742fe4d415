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
        }
    }
}

impl Termination for Exit {
    fn report(self) -> ExitCode {
        ExitCode::from(self.code())
    }
}
