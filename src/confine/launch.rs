//! Starting a command confined (through a fresh `portcullis confined`
//! process that confines itself and becomes the command) or, when the
//! operator said so, unconfined; waiting for it and telling how it ended.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use thiserror::Error;

use super::Plan;

/// How a command is started.
pub enum Launch<'a> {
    /// Through the helper `exe` (`portcullis-confine`), which applies the
    /// plan and becomes the command.
    Confined { exe: &'a Path, plan: &'a Plan },
    /// As it is, in `cwd`.
    Unconfined { cwd: &'a Path },
}

/// How a started command ended.
#[derive(Debug)]
pub struct Launched {
    pub status: ExitStatus,
    pub duration: Duration,
}

impl Launched {
    /// The exit code a shell would give: the command's own, or 128 plus
    /// the signal that ended it.
    pub fn shell_code(&self) -> i32 {
        self.status
            .code()
            .or_else(|| self.status.signal().map(|s| 128 + s))
            .unwrap_or(1)
    }
}

#[derive(Debug, Error)]
pub enum LaunchError {
    /// The confinement could not be applied; the command did not run.
    #[error("{0}")]
    NotConfined(String),
    #[error("cannot start {program}: {err}")]
    Spawn {
        program: String,
        err: std::io::Error,
    },
    #[error("cannot keep the confinement's report: {0}")]
    Report(std::io::Error),
}

/// Starts `argv` as `how` says and waits for it.
pub fn launch(how: &Launch<'_>, argv: &[String]) -> Result<Launched, LaunchError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(LaunchError::Spawn {
            program: String::new(),
            err: std::io::Error::other("no command was given"),
        });
    };
    let started = Instant::now();
    let (mut command, report) = match how {
        Launch::Unconfined { cwd } => {
            let mut command = Command::new(program);
            command.args(args).current_dir(cwd);
            (command, None)
        }
        Launch::Confined { exe, plan } => {
            let report = tempfile::NamedTempFile::new().map_err(LaunchError::Report)?;
            let plan = serde_json::to_string(plan)
                .map_err(|err| LaunchError::Report(std::io::Error::other(err)))?;
            let mut command = Command::new(exe);
            command
                .arg("--plan")
                .arg(plan)
                .arg("--report")
                .arg(report.path())
                .arg("--")
                .args(argv);
            (command, Some(report))
        }
    };
    let status = command.status().map_err(|err| LaunchError::Spawn {
        program: program.clone(),
        err,
    })?;
    let duration = started.elapsed();
    if let Some(report) = report {
        let mut why = String::new();
        std::fs::File::open(report.path())
            .and_then(|mut f| f.read_to_string(&mut why))
            .map_err(LaunchError::Report)?;
        if !why.is_empty() {
            return Err(LaunchError::NotConfined(why));
        }
    }
    Ok(Launched { status, duration })
}
