//! The guard between portcullis and a stdio downstream: portcullis's own
//! binary, run as `portcullis __downstream-guard --parent PID -- CMD...`.
//!
//! A downstream is often a launcher (`npx`) whose server is a grandchild;
//! killing the launcher leaves the server running. The guard starts the
//! server in a process group of its own and kills that whole group when
//! the server exits, when it is told to stop, and when portcullis dies by
//! any means, `kill -9` included: the kernel signals the guard when its
//! parent goes (Linux's parent-death signal), which no cleanup code in
//! portcullis itself could do after a `SIGKILL`.

use std::time::Duration;

use rustix::process::{Pid, Signal, getppid, kill_process_group};

use crate::confine::Plan;

/// The hidden subcommand that runs the guard.
pub const GUARD_SUBCOMMAND: &str = "__downstream-guard";

/// How long the server's group gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(3);

/// The exit code of a guard whose server could not be confined.
pub const NOT_CONFINED: u8 = 3;

/// Runs `command` under the guard until it exits or the guard is stopped;
/// returns the server's exit code (1 if it could not start or was killed,
/// [`NOT_CONFINED`] if `plan` could not be applied). The guard confines
/// itself first, single-threaded, so the server and everything it starts
/// inherit the confinement.
pub fn run_guard(parent: u32, plan: Option<&Plan>, command: &[String]) -> u8 {
    let Some((program, args)) = command.split_first() else {
        eprintln!("portcullis guard: no command");
        return 1;
    };
    if let Some(plan) = plan
        && let Err(err) = crate::confine::apply(plan, crate::confine::landlock_abi())
    {
        eprintln!("portcullis guard: the server cannot be confined: {err}");
        return NOT_CONFINED;
    }
    if let Err(err) = rustix::process::set_parent_process_death_signal(Some(Signal::TERM)) {
        eprintln!("portcullis guard: cannot follow the parent's death: {err}");
        return 1;
    }
    // The parent may have died before the signal was armed.
    if getppid().map(Pid::as_raw_nonzero).map(|p| p.get()) != i32::try_from(parent).ok() {
        return 1;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("portcullis guard: {err}");
            return 1;
        }
    };
    runtime.block_on(guard(program, args))
}

async fn guard(program: &str, args: &[String]) -> u8 {
    use tokio::signal::unix::{SignalKind, signal};
    let mut child = match tokio::process::Command::new(program)
        .args(args)
        .process_group(0)
        .spawn()
    {
        Ok(child) => child,
        Err(err) => {
            eprintln!("portcullis guard: cannot start {program}: {err}");
            return 1;
        }
    };
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw);
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        stop_group(group, Signal::KILL);
        return 1;
    };
    let status = tokio::select! {
        status = child.wait() => status.ok(),
        _ = term.recv() => None,
        _ = int.recv() => None,
        _ = hup.recv() => None,
    };
    let code = match status {
        Some(status) => {
            // The server is gone; anything it left in its group goes too.
            stop_group(group, Signal::KILL);
            status.code()
        }
        None => {
            stop_group(group, Signal::TERM);
            if tokio::time::timeout(GRACE, child.wait()).await.is_err() {
                stop_group(group, Signal::KILL);
                let _ = child.wait().await;
            }
            stop_group(group, Signal::KILL);
            None
        }
    };
    code.and_then(|c| u8::try_from(c).ok()).unwrap_or(1)
}

fn stop_group(group: Option<Pid>, signal: Signal) {
    if let Some(group) = group {
        // ESRCH: the group is already empty.
        let _ = kill_process_group(group, signal);
    }
}
