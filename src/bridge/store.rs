//! The session store: every conversation the bridge holds, its owner, and
//! each turn's prompt and reply, in SQLite (one file, durable before a
//! turn starts). The audit log records only their hashes; this is where the
//! words are, so it is the caller's data and is shown only to its owner.

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, params};

use super::backend::SessionBackend;
use super::lease::{self, Lease};
use super::session::{
    Refused, SessionSummary, StoreError, Turn, TurnSlot, TurnState, new_session_id, title_of,
};
use crate::clock::Clock;

/// The schema version this build writes.
const VERSION: i64 = 2;

/// How long a write waits for another process's to finish.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    agent TEXT NOT NULL,
    conversation TEXT,
    title TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_owner ON sessions (owner, updated_at);
CREATE TABLE IF NOT EXISTS turns (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    n INTEGER NOT NULL,
    prompt TEXT NOT NULL,
    reply TEXT,
    state TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    runner TEXT,
    PRIMARY KEY (session_id, n)
);
";

/// Creates the store's folder (0700) and the store itself (0600) when they
/// are missing: SQLite gives its WAL and shared-memory files the mode of
/// the database, so prompts and replies are never readable by others.
fn private_file(path: &Path) -> std::io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}

/// `path` with `suffix` after its file name, as SQLite names its WAL and
/// shared-memory files.
fn sidecar(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

pub struct SessionStore {
    connection: Connection,
    clock: Arc<dyn Clock>,
    /// This process's claim on the turns it runs.
    lease: Lease,
}

impl Drop for SessionStore {
    fn drop(&mut self) {
        self.lease.release(&self.connection);
    }
}

impl SessionStore {
    /// Opens (or creates) the store at `path`. A turn still marked running
    /// was in flight when portcullis stopped: it is marked interrupted, and
    /// the sessions it belonged to are returned.
    pub fn open(path: &Path, clock: Arc<dyn Clock>) -> Result<(Self, Vec<String>), StoreError> {
        let shown = path.display().to_string();
        let opened = |source| StoreError::Open {
            path: shown.clone(),
            source,
        };
        private_file(path).map_err(|err| StoreError::Open {
            path: shown.clone(),
            source: rusqlite::Error::ToSqlConversionFailure(Box::new(err)),
        })?;
        for file in [
            path.to_owned(),
            sidecar(path, "-wal"),
            sidecar(path, "-shm"),
        ] {
            if let Ok(meta) = std::fs::metadata(&file) {
                let mode = meta.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    return Err(StoreError::LoosePermissions {
                        path: file.display().to_string(),
                        mode,
                    });
                }
            }
        }
        let connection = Connection::open(path).map_err(opened)?;
        // Several stdio `serve` processes (one per client) share one store:
        // a writer waits for another rather than failing.
        connection.busy_timeout(BUSY_WAIT).map_err(opened)?;
        // Each commit is on disk before it returns: a turn's row is durable
        // before the agent is asked.
        connection
            .execute_batch(
                "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
            )
            .map_err(opened)?;
        let found: i64 = connection
            .query_row("PRAGMA user_version", [], |row| row.get(0))
            .map_err(opened)?;
        if found > VERSION {
            return Err(StoreError::Newer { path: shown, found });
        }
        connection.execute_batch(SCHEMA).map_err(opened)?;
        connection.execute_batch(lease::SCHEMA).map_err(opened)?;
        if found == 1 {
            // Version 1 knew no runners: its running turns have none, and
            // are found orphaned below.
            connection
                .execute_batch("ALTER TABLE turns ADD COLUMN runner TEXT")
                .map_err(opened)?;
        }
        connection
            .execute_batch(&format!("PRAGMA user_version = {VERSION}"))
            .map_err(opened)?;
        let lease = Lease::take(&connection, path, new_session_id()?, Arc::clone(&clock))
            .map_err(opened)?;
        let mut store = Self {
            connection,
            clock,
            lease,
        };
        let interrupted = store.interrupt_orphaned(None)?;
        Ok((store, interrupted))
    }

    fn now(&self) -> String {
        humantime::format_rfc3339_millis(self.clock.now()).to_string()
    }

    /// Marks interrupted the running turns (of `session`, when given)
    /// whose process is gone, and returns their sessions.
    fn interrupt_orphaned(&mut self, session: Option<&str>) -> Result<Vec<String>, StoreError> {
        let now = self.now();
        let now_ms = i64::try_from(self.clock.now_millis()).unwrap_or(i64::MAX);
        let tx = self.connection.transaction()?;
        let orphans = lease::orphaned(&tx, session, now_ms)?;
        for (session, n) in &orphans {
            tx.execute(
                "UPDATE turns SET state = 'interrupted', ended_at = ?3
                 WHERE session_id = ?1 AND n = ?2 AND state = 'running'",
                params![session, n, now],
            )?;
        }
        tx.commit()?;
        let mut sessions: Vec<String> = orphans.into_iter().map(|(session, _)| session).collect();
        sessions.dedup();
        Ok(sessions)
    }
}

impl SessionBackend for SessionStore {
    /// Makes a new session owned by `owner` and its first turn, running;
    /// both are on disk when this returns.
    fn start(&mut self, owner: &str, agent: &str, prompt: &str) -> Result<TurnSlot, StoreError> {
        let id = new_session_id()?;
        let now = self.now();
        let title = title_of(prompt);
        let tx = self.connection.transaction()?;
        tx.execute(
            "INSERT INTO sessions (id, owner, agent, conversation, title, created_at, updated_at)
             VALUES (?1, ?2, ?3, NULL, ?4, ?5, ?5)",
            params![id, owner, agent, title, now],
        )?;
        tx.execute(
            "INSERT INTO turns (session_id, n, prompt, reply, state, started_at, ended_at, runner)
             VALUES (?1, 1, ?2, NULL, 'running', ?3, NULL, ?4)",
            params![id, prompt, now, self.lease.id],
        )?;
        tx.commit()?;
        Ok(TurnSlot {
            session_id: id,
            n: 1,
            conversation: None,
        })
    }

    /// Adds a running turn to `owner`'s session `id`, unless it is not
    /// theirs or a turn of it is still running.
    fn continue_session(
        &mut self,
        owner: &str,
        id: &str,
        prompt: &str,
    ) -> Result<Result<TurnSlot, Refused>, StoreError> {
        // A turn whose process is gone holds the session no longer.
        self.interrupt_orphaned(Some(id))?;
        let now = self.now();
        let tx = self.connection.transaction()?;
        let found: Option<Option<String>> = tx
            .query_row(
                "SELECT conversation FROM sessions WHERE id = ?1 AND owner = ?2",
                params![id, owner],
                |row| row.get(0),
            )
            .optional()?;
        let Some(conversation) = found else {
            return Ok(Err(Refused::NotFound));
        };
        let running: i64 = tx.query_row(
            "SELECT COUNT(*) FROM turns WHERE session_id = ?1 AND state = 'running'",
            params![id],
            |row| row.get(0),
        )?;
        if running > 0 {
            return Ok(Err(Refused::Busy));
        }
        let n: i64 = tx.query_row(
            "SELECT COALESCE(MAX(n), 0) + 1 FROM turns WHERE session_id = ?1",
            params![id],
            |row| row.get(0),
        )?;
        tx.execute(
            "INSERT INTO turns (session_id, n, prompt, reply, state, started_at, ended_at, runner)
             VALUES (?1, ?2, ?3, NULL, 'running', ?4, NULL, ?5)",
            params![id, n, prompt, now, self.lease.id],
        )?;
        tx.execute(
            "UPDATE sessions SET updated_at = ?2 WHERE id = ?1",
            params![id, now],
        )?;
        tx.commit()?;
        Ok(Ok(TurnSlot {
            session_id: id.to_owned(),
            n: u64::try_from(n).unwrap_or(0),
            conversation,
        }))
    }

    /// Ends a turn, keeping the agent's reply and its conversation id
    /// (when the turn gave one and the session had none).
    fn finish(
        &mut self,
        slot: &TurnSlot,
        state: TurnState,
        reply: Option<&str>,
        conversation: Option<&str>,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let n = i64::try_from(slot.n).unwrap_or(i64::MAX);
        let tx = self.connection.transaction()?;
        tx.execute(
            "UPDATE turns SET state = ?3, reply = ?4, ended_at = ?5 WHERE session_id = ?1 AND n = ?2",
            params![slot.session_id, n, state.as_str(), reply, now],
        )?;
        tx.execute(
            "UPDATE sessions SET updated_at = ?2, conversation = COALESCE(conversation, ?3) WHERE id = ?1",
            params![slot.session_id, now, conversation],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// `owner`'s sessions, most recently updated first.
    fn list(&mut self, owner: &str) -> Result<Vec<SessionSummary>, StoreError> {
        let mut query = self.connection.prepare(
            "SELECT s.id, s.title, s.created_at, s.updated_at,
                    (SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id),
                    (SELECT t.state FROM turns t WHERE t.session_id = s.id ORDER BY t.n DESC LIMIT 1)
             FROM sessions s WHERE s.owner = ?1 ORDER BY s.updated_at DESC, s.id",
        )?;
        let rows = query.query_map(params![owner], summary)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// `owner`'s session `id` with its turns; `None` when there is no such
    /// session or it is someone else's.
    fn get(
        &mut self,
        owner: &str,
        id: &str,
    ) -> Result<Option<(SessionSummary, Vec<Turn>)>, StoreError> {
        let found = self
            .connection
            .query_row(
                "SELECT s.id, s.title, s.created_at, s.updated_at,
                        (SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id),
                        (SELECT t.state FROM turns t WHERE t.session_id = s.id ORDER BY t.n DESC LIMIT 1)
                 FROM sessions s WHERE s.id = ?1 AND s.owner = ?2",
                params![id, owner],
                summary,
            )
            .optional()?;
        let Some(session) = found else {
            return Ok(None);
        };
        let mut query = self.connection.prepare(
            "SELECT prompt, reply, state, started_at, ended_at FROM turns WHERE session_id = ?1 ORDER BY n",
        )?;
        let turns = query
            .query_map(params![id], |row| {
                Ok(Turn {
                    prompt: row.get(0)?,
                    reply: row.get(1)?,
                    state: TurnState::parse(&row.get::<_, String>(2)?),
                    started_at: row.get(3)?,
                    ended_at: row.get(4)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(Some((session, turns)))
    }
}

fn summary(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionSummary> {
    Ok(SessionSummary {
        id: row.get(0)?,
        title: row.get(1)?,
        created_at: row.get(2)?,
        updated_at: row.get(3)?,
        turns: u64::try_from(row.get::<_, i64>(4)?).unwrap_or(0),
        state: TurnState::parse(&row.get::<_, Option<String>>(5)?.unwrap_or_default()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use std::time::{Duration, SystemTime};

    fn open_in(dir: &Path) -> (SessionStore, Vec<String>, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        ));
        let (store, interrupted) =
            SessionStore::open(&dir.join("state/sessions.sqlite3"), clock.clone()).unwrap();
        (store, interrupted, clock)
    }

    #[test]
    fn the_store_and_its_journal_are_only_the_owners_and_a_shared_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _, _) = open_in(dir.path());
        store.start("alice", "codex", "a private prompt").unwrap();
        let state = dir.path().join("state");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&state), 0o700);
        let db = state.join("sessions.sqlite3");
        for file in [db.clone(), sidecar(&db, "-wal"), sidecar(&db, "-shm")] {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
        drop(store);
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
        let clock = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
        let Err(refused) = SessionStore::open(&db, clock.clone()) else {
            panic!("a store others can read was opened");
        };
        let message = refused.to_string();
        assert!(
            message.contains("mode 644") && message.contains("chmod 600"),
            "{message}"
        );
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (mut store, _) = SessionStore::open(&db, clock).unwrap();
        assert_eq!(store.list("alice").unwrap().len(), 1, "nothing was lost");
    }

    #[test]
    fn another_process_opening_the_store_leaves_a_live_turn_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (mut first, _, _) = open_in(dir.path());
        let running = first.start("alice", "codex", "a long one").unwrap();
        // A second process starts on the same store while the turn runs.
        let (mut second, interrupted, clock) = open_in(dir.path());
        assert!(
            interrupted.is_empty(),
            "a live turn was interrupted: {interrupted:?}"
        );
        let (session, _) = second.get("alice", &running.session_id).unwrap().unwrap();
        assert_eq!(session.state, TurnState::Running);
        assert_eq!(
            second
                .continue_session("alice", &running.session_id, "again")
                .unwrap()
                .unwrap_err(),
            Refused::Busy,
            "a second prompt into a running session"
        );
        // The first process's heartbeat stops (it hangs, or is gone without
        // a word): once its lease runs out, its turn no longer holds the
        // session.
        clock.advance(lease::LEASE + Duration::from_secs(1));
        let next = second
            .continue_session("alice", &running.session_id, "again")
            .unwrap()
            .unwrap();
        assert_eq!(next.n, 2);
        let (_, turns) = second.get("alice", &running.session_id).unwrap().unwrap();
        assert_eq!(turns[0].state, TurnState::Interrupted);
        drop(first);
    }

    #[test]
    fn sessions_belong_to_their_owner() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _, clock) = open_in(dir.path());
        let first = store
            .start("alice", "codex", "  fix   the\nbuild  ")
            .unwrap();
        assert_eq!(first.n, 1);
        assert_eq!(first.session_id.len(), 32);
        store
            .finish(&first, TurnState::Completed, Some("done"), Some("thread-1"))
            .unwrap();
        clock.advance(Duration::from_secs(5));
        let second = store.start("alice", "codex", "other").unwrap();
        store.start("bob", "codex", "bob's").unwrap();

        let listed = store.list("alice").unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].id, second.session_id, "newest first");
        assert_eq!(listed[1].title, "fix the build");
        assert_eq!(listed[1].state, TurnState::Completed);
        assert_eq!(listed[0].state, TurnState::Running);

        assert!(store.get("bob", &first.session_id).unwrap().is_none());
        assert!(
            store
                .get("alice", "0".repeat(32).as_str())
                .unwrap()
                .is_none()
        );
        assert_eq!(
            store
                .continue_session("bob", &first.session_id, "x")
                .unwrap(),
            Err(Refused::NotFound)
        );
        assert_eq!(
            store
                .continue_session("alice", &second.session_id, "x")
                .unwrap(),
            Err(Refused::Busy)
        );
        let next = store
            .continue_session("alice", &first.session_id, "and again")
            .unwrap()
            .unwrap();
        assert_eq!(next.n, 2);
        assert_eq!(next.conversation.as_deref(), Some("thread-1"));
        store
            .finish(&next, TurnState::Failed, None, Some("thread-2"))
            .unwrap();
        let (session, turns) = store.get("alice", &first.session_id).unwrap().unwrap();
        assert_eq!(session.turns, 2);
        assert_eq!(session.state, TurnState::Failed);
        assert_eq!(turns[0].reply.as_deref(), Some("done"));
        assert_eq!(turns[1].prompt, "and again");
        let again = store
            .continue_session("alice", &first.session_id, "third")
            .unwrap()
            .unwrap();
        assert_eq!(
            again.conversation.as_deref(),
            Some("thread-1"),
            "the first id the agent gave stays"
        );
    }

    #[test]
    fn a_turn_running_when_portcullis_stopped_is_interrupted_at_the_next_open() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, none, _) = open_in(dir.path());
        assert!(none.is_empty());
        let slot = store.start("alice", "codex", "long job").unwrap();
        drop(store);
        let (mut store, interrupted, _) = open_in(dir.path());
        assert_eq!(interrupted, std::slice::from_ref(&slot.session_id));
        let (session, turns) = store.get("alice", &slot.session_id).unwrap().unwrap();
        assert_eq!(session.state, TurnState::Interrupted);
        assert!(turns[0].ended_at.is_some());
        drop(store);
        let (_, again, _) = open_in(dir.path());
        assert!(again.is_empty(), "interrupted once, not at every start");
    }

    #[test]
    fn a_store_from_a_newer_portcullis_or_not_sqlite_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sqlite3");
        Connection::open(&path)
            .unwrap()
            .execute_batch("PRAGMA user_version = 99")
            .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let clock = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
        let err = SessionStore::open(&path, clock.clone()).err().unwrap();
        assert!(matches!(err, StoreError::Newer { found: 99, .. }), "{err}");
        let junk = dir.path().join("junk");
        std::fs::write(
            &junk,
            "this is not a database, it is a text file of some length",
        )
        .unwrap();
        std::fs::set_permissions(&junk, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = SessionStore::open(&junk, clock).err().unwrap();
        assert!(err.to_string().contains("junk"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&junk).unwrap(),
            "this is not a database, it is a text file of some length",
            "nothing is lost"
        );
    }
}
