//! The agent bridge: conversations of external callers with one downstream
//! agent (`kind = "agent"`), each owned by the client that started it.
//!
//! The keeper decides and records every bridge call like any tool call;
//! only an allowed, recorded call reaches [`Bridge::run`]. Here a prompt
//! becomes a turn: written to the session store before the agent is asked,
//! forwarded to the agent's start or reply tool, ended with its reply (or
//! how it failed). A turn in flight can be cancelled by the caller that
//! started it, on the connection it started it on.
//!
//! What it may not do: decide, or show one client another's session (a
//! foreign session is answered exactly as one that does not exist).

mod app_server;
mod backend;
mod lease;
mod session;
mod store;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use backend::SessionBackend;
pub use lease::{HEARTBEAT as RUNNER_HEARTBEAT, is_alive as runner_is_alive, this_host};
pub use session::{
    Refused, SessionSummary, StoreError, Turn, TurnSlot, TurnState, new_session_id, title_of,
};
pub use store::SessionStore;

use crate::clock::Clock;
use crate::servers::{AgentMapping, AgentProtocol, Fleet, Forwarded, ServerConfig};
use crate::tools::{BridgeTool, Progress, ToolFailure};
use app_server::AppServerAgent;
use sha2::{Digest, Sha256};

/// Who is calling a bridge tool, as the bridge tells callers apart.
#[derive(Debug, Clone)]
pub struct Caller<'a> {
    /// The client's fingerprint: sessions are owned by it.
    pub owner: &'a str,
    /// The connection the call came on: a turn is cancelled only from the
    /// one it started on.
    pub connection: &'a str,
    /// The call came as a request of its own (2026-07-28), on no session:
    /// a turn such a call started may be cancelled by its owner through
    /// any replica of a fleet, as there is no connection to come back on.
    pub stateless: bool,
}

/// How a bridge call ended, and what its outcome record adds: the session
/// and turn, and the SHA-256 of the prompt and the reply (the words stay
/// in the store).
#[derive(Debug)]
pub struct Ran {
    pub result: Result<Value, Ended>,
    pub detail: Option<Value>,
}

/// How a bridge call that produced no result ended.
#[derive(Debug)]
pub enum Ended {
    Failed(ToolFailure),
    /// The agent's own error result, for a server that passes errors on.
    AgentError(Value),
    /// The caller's request was cancelled (or the service stopped): no
    /// answer is sent.
    Cancelled,
}

/// A turn in flight, by session id.
struct InFlight {
    owner: String,
    connection: String,
    stateless: bool,
    cancel: CancellationToken,
}

pub struct Bridge {
    store: Arc<Mutex<Box<dyn SessionBackend>>>,
    server: String,
    mapping: AgentMapping,
    /// The agent, when the bridge speaks to it itself (the app-server
    /// protocol); otherwise its turns go through the fleet.
    own_agent: Option<AppServerAgent>,
    in_flight: Mutex<HashMap<String, InFlight>>,
}

impl Bridge {
    /// Opens the store for the agent `server`, whose root lies in
    /// `workspace`. Returns the sessions whose turn was in flight when
    /// portcullis last stopped, now interrupted.
    pub fn open(
        path: &Path,
        server: &ServerConfig,
        mapping: AgentMapping,
        workspace: &Path,
        clock: Arc<dyn Clock>,
    ) -> Result<(Self, Vec<String>), StoreError> {
        let (store, interrupted) = SessionStore::open(path, clock)?;
        Ok((
            Self::with_backend(Box::new(store), server, mapping, workspace),
            interrupted,
        ))
    }

    /// A bridge keeping its sessions in `store` (a fleet's tables, say).
    pub fn with_backend(
        store: Box<dyn SessionBackend>,
        server: &ServerConfig,
        mapping: AgentMapping,
        workspace: &Path,
    ) -> Self {
        let own_agent = (mapping.protocol == AgentProtocol::CodexAppServer)
            .then(|| AppServerAgent::new(server.clone(), server.judged_root(workspace)));
        Self {
            store: Arc::new(Mutex::new(store)),
            server: server.name.clone(),
            mapping,
            own_agent,
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// Stops the agent the bridge started itself, if any (the fleet stops
    /// the others).
    pub async fn shut_down(&self) {
        if let Some(agent) = &self.own_agent {
            agent.shut_down().await;
        }
    }

    /// The agent's server and the tools the bridge calls on it.
    pub fn agent(&self) -> (&str, &AgentMapping) {
        (&self.server, &self.mapping)
    }

    /// Runs one decided bridge call.
    pub async fn run(
        &self,
        tool: BridgeTool,
        caller: &Caller<'_>,
        arguments: &Value,
        fleet: Option<&Fleet>,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        stop: impl Future<Output = ()>,
    ) -> Ran {
        let session_id = arguments
            .get("session_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match tool {
            BridgeTool::SessionsList => {
                let owner = caller.owner.to_owned();
                let listed = self.with_store(move |store| store.list(&owner)).await;
                Ran::plain(listed.map(|sessions| json!({ "sessions": sessions })))
            }
            BridgeTool::SessionGet => {
                let owner = caller.owner.to_owned();
                let id = session_id.unwrap_or_default();
                let found = self.with_store(move |store| store.get(&owner, &id)).await;
                Ran::plain(match found {
                    Ok(Some((session, turns))) => Ok(json!({"session": session, "turns": turns})),
                    Ok(None) => Err(Ended::Failed(ToolFailure::SessionNotFound)),
                    Err(failed) => Err(failed),
                })
            }
            BridgeTool::PromptCancel => {
                let session_id = session_id.unwrap_or_default();
                let mut cancelled = self.cancel(caller, &session_id);
                if !cancelled && caller.stateless {
                    // The turn may run on another replica of a fleet.
                    let owner = caller.owner.to_owned();
                    cancelled = self
                        .with_store(move |store| store.cancel_elsewhere(&owner, &session_id))
                        .await
                        .unwrap_or(false);
                }
                Ran::plain(Ok(json!({ "cancelled": cancelled })))
            }
            BridgeTool::PromptSend => {
                let prompt = arguments
                    .get("prompt")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                self.send(caller, prompt, session_id, fleet, progress, stop)
                    .await
            }
        }
    }

    /// Cancels the caller's own turn in flight in `session_id`, started on
    /// this connection. Anything else is simply not cancelled.
    fn cancel(&self, caller: &Caller<'_>, session_id: &str) -> bool {
        let in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match in_flight.get(session_id) {
            Some(turn)
                if turn.owner == caller.owner
                    && turn.connection == caller.connection
                    && !turn.cancel.is_cancelled() =>
            {
                turn.cancel.cancel();
                true
            }
            _ => false,
        }
    }

    /// Cancels `owner`'s turn in flight here in `session_id` that a
    /// stateless call started, as another replica was asked to (see
    /// [`SessionBackend::cancel_elsewhere`]).
    pub fn cancel_for(&self, owner: &str, session_id: &str) -> bool {
        let in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match in_flight.get(session_id) {
            Some(turn) if turn.owner == owner && turn.stateless && !turn.cancel.is_cancelled() => {
                turn.cancel.cancel();
                true
            }
            _ => false,
        }
    }

    /// One turn: recorded in the store, sent to the agent, ended with its
    /// reply or how it failed.
    async fn send(
        &self,
        caller: &Caller<'_>,
        prompt: String,
        session_id: Option<String>,
        fleet: Option<&Fleet>,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        stop: impl Future<Output = ()>,
    ) -> Ran {
        let slot = match self.open_turn(caller, &prompt, session_id).await {
            Ok(slot) => slot,
            Err(failed) => return Ran::plain(Err(failed)),
        };
        let cancel = CancellationToken::new();
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                slot.session_id.clone(),
                InFlight {
                    owner: caller.owner.to_owned(),
                    connection: caller.connection.to_owned(),
                    stateless: caller.stateless,
                    cancel: cancel.clone(),
                },
            );
        let turn_stop = async {
            tokio::select! {
                () = stop => {}
                () = cancel.cancelled() => {}
            }
        };
        let heartbeat = progress.clone();
        let forwarding = self.forward(
            slot.conversation.as_deref(),
            &prompt,
            fleet,
            progress,
            turn_stop,
        );
        // The heartbeat's sender goes with it when the turn ends, so no
        // progress follows the reply.
        let forwarded = tokio::select! {
            forwarded = forwarding => forwarded,
            never = waiting(heartbeat) => match never {},
        };
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&slot.session_id);
        let ended = self.ended(forwarded, &cancel, fleet);
        self.close_turn(slot, &prompt, ended).await
    }

    /// The turn's row in the store, written before the agent is asked: in a
    /// new session, or in the caller's own session `session_id`.
    async fn open_turn(
        &self,
        caller: &Caller<'_>,
        prompt: &str,
        session_id: Option<String>,
    ) -> Result<TurnSlot, Ended> {
        let owner = caller.owner.to_owned();
        let agent = self.server.clone();
        let text = prompt.to_owned();
        let opened = self
            .with_store(move |store| match session_id {
                None => store.start(&owner, &agent, &text).map(Ok),
                Some(id) => store.continue_session(&owner, &id, &text),
            })
            .await?;
        opened.map_err(|refused| {
            Ended::Failed(match refused {
                Refused::NotFound => ToolFailure::SessionNotFound,
                Refused::Busy => ToolFailure::SessionBusy,
            })
        })
    }

    /// Stores how the turn ended and says what its outcome record adds.
    async fn close_turn(
        &self,
        slot: TurnSlot,
        prompt: &str,
        (state, reply, conversation, result): (
            TurnState,
            Option<String>,
            Option<String>,
            Result<String, Ended>,
        ),
    ) -> Ran {
        let mut detail = json!({
            "session_id": slot.session_id,
            "turn": slot.n,
            "state": state,
            "prompt_sha256": text_sha256(prompt),
        });
        if let Some(reply) = &reply {
            detail["reply_sha256"] = json!(text_sha256(reply));
        }
        let ended_slot = slot.clone();
        let stored = self
            .with_store(move |store| {
                store.finish(
                    &ended_slot,
                    state,
                    reply.as_deref(),
                    conversation.as_deref(),
                )
            })
            .await;
        let result = match (result, stored) {
            (Ok(reply), Ok(())) => Ok(json!({"session_id": slot.session_id, "reply": reply})),
            (Ok(_), Err(failed)) => Err(failed),
            (Err(ended), _) => Err(ended),
        };
        Ran {
            result,
            detail: Some(detail),
        }
    }

    /// Sends one turn to the agent: through the fleet as a call of its
    /// start or reply tool, or in the app-server protocol.
    async fn forward(
        &self,
        conversation: Option<&str>,
        prompt: &str,
        fleet: Option<&Fleet>,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        stop: impl Future<Output = ()>,
    ) -> Forwarded {
        if let Some(agent) = &self.own_agent {
            return agent.turn(conversation, prompt, progress, stop).await;
        }
        let Some(fleet) = fleet else {
            return Forwarded::Unavailable;
        };
        let (tool, arguments) = self.mapping.request(conversation, prompt);
        fleet
            .forward(&self.server, &tool, arguments, progress, stop)
            .await
    }

    /// What the agent last wrote on stderr.
    fn agent_stderr(&self, fleet: Option<&Fleet>) -> Vec<String> {
        match (&self.own_agent, fleet) {
            (Some(agent), _) => agent.stderr_lines(),
            (None, Some(fleet)) => fleet.stderr_lines(&self.server),
            (None, None) => Vec::new(),
        }
    }

    /// How a forwarded turn ended: its state, reply and conversation id for
    /// the store, and what the caller gets.
    fn ended(
        &self,
        forwarded: Forwarded,
        cancel: &CancellationToken,
        fleet: Option<&Fleet>,
    ) -> (
        TurnState,
        Option<String>,
        Option<String>,
        Result<String, Ended>,
    ) {
        let failed = |failure| (TurnState::Failed, None, None, Err(Ended::Failed(failure)));
        match forwarded {
            Forwarded::Result {
                result,
                is_error: false,
            } => {
                let reply = self.mapping.reply_in(&result);
                let conversation = self.mapping.session_in(&result);
                (
                    TurnState::Completed,
                    Some(reply.clone()),
                    conversation,
                    Ok(reply),
                )
            }
            Forwarded::Result { result, .. } => {
                let conversation = self.mapping.session_in(&result);
                let passes = match &self.own_agent {
                    Some(agent) => agent.passes_errors(),
                    None => fleet.is_some_and(|f| f.passes_errors(&self.server)),
                };
                let reply = self.mapping.reply_in(&result);
                let told = if passes {
                    Ended::AgentError(result)
                } else {
                    Ended::Failed(ToolFailure::Downstream)
                };
                (TurnState::Failed, Some(reply), conversation, Err(told))
            }
            // A cancel by prompt_cancel answers the prompt_send with a
            // failure; a protocol cancel of the request answers nothing.
            Forwarded::Cancelled if cancel.is_cancelled() => (
                TurnState::Cancelled,
                None,
                None,
                Err(Ended::Failed(ToolFailure::Cancelled)),
            ),
            Forwarded::Cancelled => (TurnState::Cancelled, None, None, Err(Ended::Cancelled)),
            Forwarded::Unavailable | Forwarded::AgentFailed => {
                let said = self.agent_stderr(fleet);
                failed(ToolFailure::AgentFailed(last_words(&said)))
            }
            Forwarded::TimedOut => failed(ToolFailure::TimedOut),
            Forwarded::Failed => failed(ToolFailure::Internal),
        }
    }

    /// Runs `work` on the store off the async runtime (SQLite waits for the
    /// disk). A store error is logged and becomes a fixed failure.
    async fn with_store<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut dyn SessionBackend) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, Ended> {
        let store = Arc::clone(&self.store);
        let done = tokio::task::spawn_blocking(move || {
            let mut store = store.lock().unwrap_or_else(PoisonError::into_inner);
            work(store.as_mut())
        })
        .await;
        match done {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => {
                tracing::error!(error = %err, "the session store failed");
                Err(Ended::Failed(ToolFailure::Internal))
            }
            Err(err) => {
                tracing::error!(error = %err, "the session store task failed");
                Err(Ended::Failed(ToolFailure::Internal))
            }
        }
    }
}

/// How often a turn in flight tells a caller that asked for progress that
/// it is still waiting for the agent.
const HEARTBEAT: Duration = Duration::from_secs(2);

/// Sends "still waiting" progress every [`HEARTBEAT`] while a turn runs,
/// when the caller asked for progress; never returns.
async fn waiting(progress: Option<mpsc::UnboundedSender<Progress>>) -> std::convert::Infallible {
    let Some(progress) = progress else {
        return std::future::pending().await;
    };
    let started = tokio::time::Instant::now();
    let mut ticks = tokio::time::interval_at(started + HEARTBEAT, HEARTBEAT);
    loop {
        ticks.tick().await;
        let waited = started.elapsed().as_secs();
        let note = Progress {
            done: waited as f64,
            total: None,
            message: format!("waiting for the agent's reply ({waited} s)"),
        };
        if progress.send(note).is_err() {
            return std::future::pending().await;
        }
    }
}

/// What a failed agent last said, for the caller: its last stderr lines.
fn last_words(said: &[String]) -> String {
    if said.is_empty() {
        "it exited or failed and wrote nothing on stderr".to_owned()
    } else {
        format!(
            "it exited or failed; the last lines it wrote on stderr:\n{}",
            said.join("\n")
        )
    }
}

/// SHA-256 of a text's UTF-8 bytes, lower-case hex: what an auditor holding
/// the words (from the store, or the caller) can check them against.
fn text_sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

impl Ran {
    fn plain(result: Result<Value, Ended>) -> Self {
        Self {
            result,
            detail: None,
        }
    }
}
