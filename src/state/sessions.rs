//! The bridge's sessions in the shared database, so that a conversation a
//! client started through one replica goes on through another, and stays
//! invisible to every other client whichever replica they reach. The rows
//! are the SQLite store's; a session's row is locked (`FOR UPDATE`) while a
//! turn is added, so two replicas never start two turns of one session.
//! Each replica holds a runner row it renews (a heartbeat): a running turn
//! whose runner stopped renewing is found interrupted by whoever looks.
//!
//! The bridge calls this off the async runtime, so it blocks on a runtime
//! of its own, as the audit chain does.

use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;

use tokio_postgres::Row;

use super::StateUrl;
use crate::bridge::{
    RUNNER_HEARTBEAT, Refused, SessionBackend, SessionSummary, StoreError, Turn, TurnSlot,
    TurnState, new_session_id, runner_is_alive, this_host, title_of,
};
use crate::clock::Clock;

/// The columns of a session's summary, as `summary` reads them.
const SUMMARY: &str = "SELECT s.id, s.title, s.created_at, s.updated_at,
        (SELECT COUNT(*) FROM portcullis_turns t WHERE t.session_id = s.id),
        (SELECT t.state FROM portcullis_turns t WHERE t.session_id = s.id ORDER BY t.n DESC LIMIT 1)
     FROM portcullis_sessions s";

pub struct SharedSessions {
    url: StateUrl,
    /// Taken only by `drop`, which may run on an async thread, where a
    /// runtime may not be dropped, only shut down in the background.
    runtime: Option<tokio::runtime::Runtime>,
    client: Option<tokio_postgres::Client>,
    clock: Arc<dyn Clock>,
    /// This replica's runner row, named by every turn it runs.
    runner: String,
    stop: Option<mpsc::Sender<()>>,
    beating: Option<JoinHandle<()>>,
}

fn shared(err: impl std::fmt::Display) -> StoreError {
    StoreError::Shared(err.to_string())
}

fn millis(clock: &dyn Clock) -> i64 {
    i64::try_from(clock.now_millis()).unwrap_or(i64::MAX)
}

/// A connection of its own, driven on `runtime`.
fn connect(
    url: &StateUrl,
    runtime: &tokio::runtime::Runtime,
) -> Result<tokio_postgres::Client, StoreError> {
    let (client, connection) = runtime
        .block_on(url.connect())
        .map_err(|err| shared(format!("PostgreSQL at {url} cannot be reached: {err}")))?;
    runtime.spawn(async move {
        if let Err(err) = connection.await {
            tracing::warn!(error = %err, "the session store's connection ended");
        }
    });
    Ok(client)
}

impl SharedSessions {
    /// Connects, takes a runner row and starts renewing it; the sessions
    /// whose running turn lost its runner, now interrupted.
    pub fn open(url: &StateUrl, clock: Arc<dyn Clock>) -> Result<(Self, Vec<String>), StoreError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(shared)?;
        let mut store = Self {
            url: url.clone(),
            runtime: Some(runtime),
            client: None,
            clock: Arc::clone(&clock),
            runner: new_session_id()?,
            stop: None,
            beating: None,
        };
        let (runner, now) = (store.runner.clone(), millis(clock.as_ref()));
        let pid = i64::from(std::process::id());
        let (runtime, client) = store.connected()?;
        runtime
            .block_on(client.execute(
                "INSERT INTO portcullis_runners (id, host, pid, heartbeat_ms) VALUES ($1, $2, $3, $4)",
                &[&runner, &this_host(), &pid, &now],
            ))
            .map_err(shared)?;
        let (stop, stopped) = mpsc::channel();
        let beat_url = url.clone();
        store.beating = std::thread::Builder::new()
            .name("session-runner".into())
            .spawn(move || beat(&beat_url, &runner, clock.as_ref(), &stopped))
            .ok();
        store.stop = Some(stop);
        let interrupted = store.interrupt_orphaned(None)?;
        Ok((store, interrupted))
    }

    /// The runtime and the connection, made again if it was lost.
    fn connected(
        &mut self,
    ) -> Result<(&tokio::runtime::Runtime, &mut tokio_postgres::Client), StoreError> {
        let Self {
            runtime,
            client,
            url,
            ..
        } = self;
        let runtime = runtime
            .as_ref()
            .ok_or_else(|| shared("the store is closed"))?;
        if client
            .as_ref()
            .is_none_or(tokio_postgres::Client::is_closed)
        {
            *client = Some(connect(url, runtime)?);
        }
        let client = client.as_mut().ok_or_else(|| shared("no connection"))?;
        Ok((runtime, client))
    }

    /// A statement failed: the connection is closed, and a transaction it
    /// left open with it, so no row lock outlives the failure; the next use
    /// connects again.
    fn forget(&mut self, err: tokio_postgres::Error) -> StoreError {
        self.client = None;
        shared(err)
    }

    fn now(&self) -> String {
        humantime::format_rfc3339_millis(self.clock.now()).to_string()
    }

    /// Marks interrupted the running turns (of `session`, when given) whose
    /// runner is gone, and returns their sessions.
    fn interrupt_orphaned(&mut self, session: Option<&str>) -> Result<Vec<String>, StoreError> {
        let (now, now_ms) = (self.now(), millis(self.clock.as_ref()));
        let (runtime, client) = self.connected()?;
        runtime.block_on(async {
            let rows = client
                .query(
                    "SELECT t.session_id, t.n, r.host, r.pid, r.heartbeat_ms
                     FROM portcullis_turns t LEFT JOIN portcullis_runners r ON r.id = t.runner
                     WHERE t.state = 'running' AND ($1::text IS NULL OR t.session_id = $1)
                     ORDER BY t.session_id, t.n",
                    &[&session],
                )
                .await
                .map_err(shared)?;
            let mut sessions: Vec<String> = Vec::new();
            for row in rows {
                let runner = match (row.get(2), row.get(3), row.get(4)) {
                    (Some(host), Some(pid), Some(beat)) => Some((host, pid, beat)),
                    _ => None,
                };
                if runner_is_alive(runner, now_ms) {
                    continue;
                }
                let (id, n): (String, i64) = (row.get(0), row.get(1));
                client
                    .execute(
                        "UPDATE portcullis_turns SET state = 'interrupted', ended_at = $3
                         WHERE session_id = $1 AND n = $2 AND state = 'running'",
                        &[&id, &n, &now],
                    )
                    .await
                    .map_err(shared)?;
                if sessions.last() != Some(&id) {
                    sessions.push(id);
                }
            }
            Ok(sessions)
        })
    }
}

impl Drop for SharedSessions {
    /// Stops renewing and gives the runner row up: its turns, if any still
    /// run, are found interrupted at once rather than a lease later.
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(beating) = self.beating.take() {
            let _ = beating.join();
        }
        // Off an async thread only: there, the row simply stops being
        // renewed, and its lease runs out.
        let runner = self.runner.clone();
        if tokio::runtime::Handle::try_current().is_err()
            && let Ok((runtime, client)) = self.connected()
            && let Err(err) = runtime.block_on(
                client.execute("DELETE FROM portcullis_runners WHERE id = $1", &[&runner]),
            )
        {
            tracing::warn!(error = %err, "the session runner could not be given up");
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Renews the runner row until told to stop, on a connection of its own.
fn beat(url: &StateUrl, runner: &str, clock: &dyn Clock, stopped: &mpsc::Receiver<()>) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        tracing::warn!("the session runner cannot be renewed: no runtime");
        return;
    };
    let mut client: Option<tokio_postgres::Client> = None;
    loop {
        match stopped.recv_timeout(RUNNER_HEARTBEAT) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        if client
            .as_ref()
            .is_none_or(tokio_postgres::Client::is_closed)
        {
            client = connect(url, &runtime).ok();
        }
        let Some(connection) = &client else {
            tracing::warn!("the session runner cannot be renewed: no connection");
            continue;
        };
        if let Err(err) = runtime.block_on(connection.execute(
            "UPDATE portcullis_runners SET heartbeat_ms = $2 WHERE id = $1",
            &[&runner, &millis(clock)],
        )) {
            tracing::warn!(error = %err, "the session runner could not be renewed");
        }
    }
}

fn summary(row: &Row) -> SessionSummary {
    SessionSummary {
        id: row.get(0),
        title: row.get(1),
        created_at: row.get(2),
        updated_at: row.get(3),
        turns: u64::try_from(row.get::<_, i64>(4)).unwrap_or(0),
        state: TurnState::parse(&row.get::<_, Option<String>>(5).unwrap_or_default()),
    }
}

/// Adds a running turn to `owner`'s session `id` within `tx`, the
/// session's row locked so no other replica adds one at once.
async fn add_turn(
    tx: &tokio_postgres::Transaction<'_>,
    owner: &str,
    id: &str,
    prompt: &str,
    now: &str,
    runner: &str,
) -> Result<Result<TurnSlot, Refused>, tokio_postgres::Error> {
    let Some(session) = tx
        .query_opt(
            "SELECT conversation FROM portcullis_sessions WHERE id = $1 AND owner = $2 FOR UPDATE",
            &[&id, &owner],
        )
        .await?
    else {
        return Ok(Err(Refused::NotFound));
    };
    let conversation: Option<String> = session.get(0);
    let running: i64 = tx
        .query_one(
            "SELECT COUNT(*) FROM portcullis_turns WHERE session_id = $1 AND state = 'running'",
            &[&id],
        )
        .await?
        .get(0);
    if running > 0 {
        return Ok(Err(Refused::Busy));
    }
    let n: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(n), 0) + 1 FROM portcullis_turns WHERE session_id = $1",
            &[&id],
        )
        .await?
        .get(0);
    tx.execute(
        "INSERT INTO portcullis_turns (session_id, n, prompt, reply, state, started_at, ended_at, runner)
         VALUES ($1, $2, $3, NULL, 'running', $4, NULL, $5)",
        &[&id, &n, &prompt, &now, &runner],
    )
    .await?;
    tx.execute(
        "UPDATE portcullis_sessions SET updated_at = $2 WHERE id = $1",
        &[&id, &now],
    )
    .await?;
    Ok(Ok(TurnSlot {
        session_id: id.to_owned(),
        n: u64::try_from(n).unwrap_or(0),
        conversation,
    }))
}

/// The channel replicas are asked to cancel a turn on.
pub const CANCEL_CHANNEL: &str = "portcullis_cancel";

/// What a cancel notification says.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct CancelAsked {
    pub owner: String,
    pub session: String,
}

impl SessionBackend for SharedSessions {
    fn cancel_elsewhere(&mut self, owner: &str, id: &str) -> Result<bool, StoreError> {
        let asked = serde_json::to_string(&CancelAsked {
            owner: owner.to_owned(),
            session: id.to_owned(),
        })
        .map_err(shared)?;
        let (runtime, client) = self.connected()?;
        let running: bool = runtime
            .block_on(client.query_one(
                "SELECT EXISTS (SELECT 1 FROM portcullis_turns t JOIN portcullis_sessions s ON s.id = t.session_id
                                WHERE s.id = $1 AND s.owner = $2 AND t.state = 'running'),
                        pg_notify($3, $4) IS NULL",
                &[&id, &owner, &CANCEL_CHANNEL, &asked],
            ))
            .map_err(shared)?
            .get(0);
        Ok(running)
    }

    fn start(&mut self, owner: &str, agent: &str, prompt: &str) -> Result<TurnSlot, StoreError> {
        let (id, now, title, runner) = (
            new_session_id()?,
            self.now(),
            title_of(prompt),
            self.runner.clone(),
        );
        let (runtime, client) = self.connected()?;
        runtime
            .block_on(async {
                let tx = client.transaction().await?;
                tx.execute(
                    "INSERT INTO portcullis_sessions (id, owner, agent, conversation, title, created_at, updated_at)
                     VALUES ($1, $2, $3, NULL, $4, $5, $5)",
                    &[&id, &owner, &agent, &title, &now],
                )
                .await?;
                tx.execute(
                    "INSERT INTO portcullis_turns (session_id, n, prompt, reply, state, started_at, ended_at, runner)
                     VALUES ($1, 1, $2, NULL, 'running', $3, NULL, $4)",
                    &[&id, &prompt, &now, &runner],
                )
                .await?;
                tx.commit().await
            })
            .map_err(|err| self.forget(err))?;
        Ok(TurnSlot {
            session_id: id,
            n: 1,
            conversation: None,
        })
    }

    fn continue_session(
        &mut self,
        owner: &str,
        id: &str,
        prompt: &str,
    ) -> Result<Result<TurnSlot, Refused>, StoreError> {
        // A turn whose runner is gone holds the session no longer.
        self.interrupt_orphaned(Some(id))?;
        let (now, runner) = (self.now(), self.runner.clone());
        let (runtime, client) = self.connected()?;
        runtime
            .block_on(async {
                let tx = client.transaction().await?;
                let added = add_turn(&tx, owner, id, prompt, &now, &runner).await?;
                // A refused turn ends its transaction too: one left open would
                // hold the session's row lock until this connection's next use.
                match added {
                    Ok(_) => tx.commit().await?,
                    Err(_) => tx.rollback().await?,
                }
                Ok::<_, tokio_postgres::Error>(added)
            })
            .map_err(|err| self.forget(err))
    }

    fn finish(
        &mut self,
        slot: &TurnSlot,
        state: TurnState,
        reply: Option<&str>,
        conversation: Option<&str>,
    ) -> Result<(), StoreError> {
        let now = self.now();
        let n = i64::try_from(slot.n).unwrap_or(i64::MAX);
        let (runtime, client) = self.connected()?;
        runtime
            .block_on(async {
                let tx = client.transaction().await?;
                tx.execute(
                    "UPDATE portcullis_turns SET state = $3, reply = $4, ended_at = $5 WHERE session_id = $1 AND n = $2",
                    &[&slot.session_id, &n, &state.as_str(), &reply, &now],
                )
                .await?;
                tx.execute(
                    "UPDATE portcullis_sessions SET updated_at = $2, conversation = COALESCE(conversation, $3) WHERE id = $1",
                    &[&slot.session_id, &now, &conversation],
                )
                .await?;
                tx.commit().await
            })
            .map_err(|err| self.forget(err))
    }

    fn list(&mut self, owner: &str) -> Result<Vec<SessionSummary>, StoreError> {
        let (runtime, client) = self.connected()?;
        let rows = runtime
            .block_on(client.query(
                &format!("{SUMMARY} WHERE s.owner = $1 ORDER BY s.updated_at DESC, s.id"),
                &[&owner],
            ))
            .map_err(shared)?;
        Ok(rows.iter().map(summary).collect())
    }

    fn get(
        &mut self,
        owner: &str,
        id: &str,
    ) -> Result<Option<(SessionSummary, Vec<Turn>)>, StoreError> {
        let (runtime, client) = self.connected()?;
        runtime
            .block_on(async {
                let Some(row) = client
                    .query_opt(&format!("{SUMMARY} WHERE s.id = $1 AND s.owner = $2"), &[&id, &owner])
                    .await?
                else {
                    return Ok::<_, tokio_postgres::Error>(None);
                };
                let turns = client
                    .query(
                        "SELECT prompt, reply, state, started_at, ended_at FROM portcullis_turns WHERE session_id = $1 ORDER BY n",
                        &[&id],
                    )
                    .await?
                    .iter()
                    .map(|turn| Turn {
                        prompt: turn.get(0),
                        reply: turn.get(1),
                        state: TurnState::parse(&turn.get::<_, String>(2)),
                        started_at: turn.get(3),
                        ended_at: turn.get(4),
                    })
                    .collect();
                Ok(Some((summary(&row), turns)))
            })
            .map_err(shared)
    }
}

/// Cancels, in `bridge`, the turns other replicas are asked to cancel
/// (`cancel_elsewhere`), until the process ends; listening again whenever
/// the connection breaks.
pub async fn follow_cancels(state: super::SharedState, bridge: Arc<crate::bridge::Bridge>) {
    loop {
        match super::listen::listen(&state, CANCEL_CHANNEL).await {
            Ok(mut listening) => {
                while let Some(payload) = listening.heard.recv().await {
                    match serde_json::from_str::<CancelAsked>(&payload) {
                        Ok(asked) => {
                            let cancelled = bridge.cancel_for(&asked.owner, &asked.session);
                            tracing::debug!(session = %asked.session, cancelled, "a turn's cancel came through another replica");
                        }
                        Err(err) => {
                            tracing::warn!(error = %err, "a cancel notification does not read")
                        }
                    }
                }
            }
            Err(err) => tracing::warn!(error = %err, "cancels from other replicas cannot be heard"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
