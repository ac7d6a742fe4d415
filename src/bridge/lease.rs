//! Which process runs a turn, and whether it is still there. Several
//! `serve` processes share one session store (one per stdio client, or a
//! second HTTP server): a turn is marked interrupted only when the process
//! that runs it is gone — its lease row deleted at a clean exit, its
//! heartbeat older than the lease, or its pid no longer alive on this
//! machine — never merely because another process started.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, params};

use crate::clock::Clock;

/// How long a process's lease holds without a heartbeat.
pub const LEASE: Duration = Duration::from_secs(15);

/// How often a process renews its lease: a few times per lease, so a busy
/// machine that delays one beat does not lose it.
pub const HEARTBEAT: Duration = Duration::from_secs(4);

pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS runners (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    heartbeat_ms INTEGER NOT NULL
);
";

/// This process's lease on the store, renewed by a thread of its own (with
/// its own connection) until it is dropped.
pub struct Lease {
    pub id: String,
    stop: Option<mpsc::Sender<()>>,
    beating: Option<JoinHandle<()>>,
}

/// A machine's identity for this boot: a pid is only meaningful on the
/// machine, and in the boot, that gave it.
pub fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|id| id.trim().to_owned())
        .unwrap_or_default()
}

impl Lease {
    /// Takes a lease on the store at `path` (its schema already in place)
    /// and starts renewing it.
    pub fn take(
        connection: &Connection,
        path: &Path,
        id: String,
        clock: Arc<dyn Clock>,
    ) -> rusqlite::Result<Self> {
        connection.execute(
            "INSERT INTO runners (id, host, pid, heartbeat_ms) VALUES (?1, ?2, ?3, ?4)",
            params![id, this_host(), std::process::id(), millis(clock.as_ref())],
        )?;
        let (stop, stopped) = mpsc::channel::<()>();
        let beat_id = id.clone();
        let path: PathBuf = path.to_owned();
        let beating = std::thread::Builder::new()
            .name("session-lease".into())
            .spawn(move || beat(&path, &beat_id, clock.as_ref(), &stopped))
            .ok();
        Ok(Self {
            id,
            stop: Some(stop),
            beating,
        })
    }

    /// Gives the lease up: the row goes, so the next process to look finds
    /// this one's turns without a runner.
    pub fn release(&mut self, connection: &Connection) {
        drop(self.stop.take());
        if let Some(beating) = self.beating.take() {
            let _ = beating.join();
        }
        if let Err(err) = connection.execute("DELETE FROM runners WHERE id = ?1", params![self.id])
        {
            tracing::warn!(error = %err, "the session store lease could not be given up");
        }
    }
}

fn millis(clock: &dyn Clock) -> i64 {
    i64::try_from(clock.now_millis()).unwrap_or(i64::MAX)
}

/// Renews the lease every beat until told to stop (or its sender is gone).
fn beat(path: &Path, id: &str, clock: &dyn Clock, stopped: &mpsc::Receiver<()>) {
    let connection = match Connection::open(path) {
        Ok(connection) => connection,
        Err(err) => {
            tracing::warn!(error = %err, "the session store lease cannot be renewed");
            return;
        }
    };
    let _ = connection.busy_timeout(Duration::from_secs(30));
    loop {
        match stopped.recv_timeout(HEARTBEAT) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        if let Err(err) = connection.execute(
            "UPDATE runners SET heartbeat_ms = ?2 WHERE id = ?1",
            params![id, millis(clock)],
        ) {
            tracing::warn!(error = %err, "the session store lease could not be renewed");
        }
    }
}

/// Whether the process that holds lease `runner` (as read from the store,
/// `None` when its row is gone) still runs its turns, at `now_ms`.
pub fn is_alive(runner: Option<(String, i64, i64)>, now_ms: i64) -> bool {
    let Some((host_id, pid, heartbeat_ms)) = runner else {
        return false;
    };
    let fresh =
        now_ms.saturating_sub(heartbeat_ms) <= i64::try_from(LEASE.as_millis()).unwrap_or(i64::MAX);
    let here = !host_id.is_empty() && host_id == this_host();
    fresh && (!here || Path::new("/proc").join(pid.to_string()).exists())
}

/// The turns still marked running whose process is gone (of `session`
/// only, when given), as (session, n).
pub fn orphaned(
    connection: &Connection,
    session: Option<&str>,
    now_ms: i64,
) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut query = connection.prepare(
        "SELECT t.session_id, t.n, r.host, r.pid, r.heartbeat_ms
         FROM turns t LEFT JOIN runners r ON r.id = t.runner
         WHERE t.state = 'running' AND (?1 IS NULL OR t.session_id = ?1)
         ORDER BY t.session_id, t.n",
    )?;
    let rows = query.query_map(params![session], |row| {
        let runner = match (
            row.get::<_, Option<String>>(2)?,
            row.get::<_, Option<i64>>(3)?,
            row.get::<_, Option<i64>>(4)?,
        ) {
            (Some(host), Some(pid), Some(beat)) => Some((host, pid, beat)),
            _ => None,
        };
        Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?, runner))
    })?;
    let mut orphans = Vec::new();
    for row in rows {
        let (session, n, runner) = row?;
        if !is_alive(runner, now_ms) {
            orphans.push((session, n));
        }
    }
    Ok(orphans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runner_lives_while_its_lease_is_fresh_and_its_process_runs() {
        let now = 1_000_000;
        let me = i64::from(std::process::id());
        assert!(is_alive(Some((this_host(), me, now)), now));
        assert!(is_alive(Some((this_host(), me, now - 15_000)), now));
        assert!(
            !is_alive(Some((this_host(), me, now - 15_001)), now),
            "lease ran out"
        );
        assert!(!is_alive(None, now), "released");
        // A pid that no process has on this machine.
        assert!(!is_alive(
            Some((this_host(), i64::from(i32::MAX), now)),
            now
        ));
        // Another machine's pid says nothing here: its lease decides.
        assert!(is_alive(
            Some(("another-boot".into(), i64::from(i32::MAX), now)),
            now
        ));
    }
}
