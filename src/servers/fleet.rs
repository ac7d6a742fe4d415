//! Every downstream server of a `serve` process: started in parallel when
//! it starts, each watched and restarted with backoff when it dies, each
//! call forwarded once the keeper has decided and recorded it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CancelledNotificationParam,
    ClientRequest, JsonObject, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RequestHandle, RoleClient};
use serde_json::Value;
use tokio::sync::{Mutex, RwLock, mpsc};
use tokio_util::sync::CancellationToken;

use super::client::{ProgressRoute, RouteTable, Routes};
use super::config::{ServerConfig, ServersConfig};
use super::connection::{Connection, Session, list_bounded};
use super::follow::{FollowUp, Followed};
use super::ordered;
use super::stderr_tail::StderrTail;
use super::upstream::{RelaySlot, UpstreamRelay};
use crate::facts::Root;
use crate::tools::Progress;

/// Whether a server can take calls now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    Starting,
    Ready,
    /// Down, with why; restarted with backoff.
    Unavailable(String),
    Stopped,
}

impl ServerState {
    pub fn as_str(&self) -> &'static str {
        match self {
            ServerState::Starting => "starting",
            ServerState::Ready => "ready",
            ServerState::Unavailable(_) => "unavailable",
            ServerState::Stopped => "stopped",
        }
    }
}

/// Whether a downstream tool may be called now, before any decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolStatus {
    Ready,
    /// Nobody pinned the tool.
    NotPinned,
    /// The live definition differs from the pin (or the tool is gone).
    Changed,
    /// The server is not running.
    ServerUnavailable,
}

/// How a forwarded call ended.
#[derive(Debug)]
pub enum Forwarded {
    /// The server's result, as JSON (`content`, `structuredContent`,
    /// `isError`).
    Result { result: Value, is_error: bool },
    /// The server is not running, or went away during the call.
    Unavailable,
    /// No answer within the server's timeout (reset by progress).
    TimedOut,
    /// The server answered with a protocol error, or a result portcullis
    /// cannot pass on; the details are logged, not shown.
    Failed,
    /// The caller or the service stopped the call; the downstream was told.
    Cancelled,
    /// An agent wrote an error on stderr while its turn ran: the turn
    /// would never be answered, so it was stopped (the downstream was
    /// told).
    AgentFailed,
}

/// Why a forwarded call ended without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unanswered {
    /// The caller or the service stopped it.
    Cancelled,
    /// The agent wrote an error and then nothing.
    AgentFailed,
    /// It ran past its server's `max_duration`.
    Overdue,
}

impl Unanswered {
    /// What the downstream is told when the call is cancelled.
    fn why(self) -> &'static str {
        match self {
            Self::Cancelled => "cancelled by the caller",
            Self::AgentFailed => "the agent reported an error",
            Self::Overdue => "the call ran past its longest allowed duration",
        }
    }

    fn forwarded(self) -> Forwarded {
        match self {
            Self::Cancelled => Forwarded::Cancelled,
            Self::AgentFailed => Forwarded::AgentFailed,
            Self::Overdue => Forwarded::TimedOut,
        }
    }
}

/// How long an agent's answer may follow an error line it wrote before the
/// turn is ended as one the agent will not answer.
const AGENT_ERROR_GRACE: Duration = Duration::from_secs(2);

/// First and longest wait before a dead server is started again.
const BACKOFF_START: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// How long a stopping server gets to close (its stdin closed, 3 s, its
/// guard's SIGTERM, 3 s, SIGKILL).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(10);

struct Supervised {
    config: ServerConfig,
    /// The folder the server's path arguments are judged against, when it
    /// declares one (the workspace root otherwise), or why the one it
    /// declares cannot be used.
    root: Result<Option<Root>, String>,
    state: RwLock<ServerState>,
    connection: RwLock<Option<Arc<RwLock<Connection>>>>,
    routes: Routes,
    /// What a stdio server last wrote on stderr, across restarts.
    stderr: StderrTail,
}

pub struct Fleet {
    servers: BTreeMap<String, Arc<Supervised>>,
    relay: RelaySlot,
    stop: CancellationToken,
    workspace: PathBuf,
    supervisors: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Fleet {
    /// Starts every server in parallel and waits for each first attempt
    /// (bounded by its start timeout); a server that does not start is
    /// retried in the background while the rest serve. An agent that speaks
    /// the app-server protocol is the bridge's to start, not an MCP server.
    pub async fn start(config: &ServersConfig, workspace: &Path) -> Arc<Self> {
        let fleet = Arc::new(Self {
            servers: config
                .servers
                .iter()
                .filter(|server| !server.speaks_app_server())
                .map(|server| {
                    let root = server
                        .root
                        .is_some()
                        .then(|| {
                            server.judged_root(workspace).and_then(|folder| {
                                Root::new(&folder).map_err(|err| err.to_string())
                            })
                        })
                        .transpose();
                    (
                        server.name.clone(),
                        Arc::new(Supervised {
                            config: server.clone(),
                            root,
                            state: RwLock::new(ServerState::Starting),
                            connection: RwLock::new(None),
                            routes: Arc::new(Mutex::new(RouteTable::default())),
                            stderr: StderrTail::default(),
                        }),
                    )
                })
                .collect(),
            relay: Arc::new(OnceLock::new()),
            stop: CancellationToken::new(),
            workspace: workspace.to_owned(),
            supervisors: Mutex::new(Vec::new()),
        });
        let mut first = Vec::new();
        for server in fleet.servers.values() {
            // A server whose root is not a folder never starts: its tools
            // could not be judged.
            if let Err(why) = &server.root {
                tracing::warn!(server = %server.config.name, error = %why, "the server's root is not usable");
                server
                    .set_state(ServerState::Unavailable(format!("root: {why}")))
                    .await;
                continue;
            }
            let (started, ready) = tokio::sync::oneshot::channel();
            let supervisor =
                tokio::spawn(Arc::clone(&fleet).supervise(Arc::clone(server), started));
            fleet.supervisors.lock().await.push(supervisor);
            first.push(ready);
        }
        for ready in first {
            // A supervisor that ended without a word counts as done.
            let _ = ready.await;
        }
        fleet
    }

    /// Where allowed downstream requests go: set once, when the upstream
    /// session runs.
    pub fn set_relay(&self, relay: Arc<dyn UpstreamRelay>) {
        let _ = self.relay.set(relay);
    }

    /// Keeps one server running: starts it, waits for it to end, starts
    /// it again after a growing pause, until the fleet stops.
    async fn supervise(
        self: Arc<Self>,
        server: Arc<Supervised>,
        started: tokio::sync::oneshot::Sender<()>,
    ) {
        let mut started = Some(started);
        let mut backoff = BACKOFF_START;
        while !self.stop.is_cancelled() {
            let (list_changed, mut relist) = mpsc::unbounded_channel();
            let folder = match &server.root {
                Ok(Some(root)) => root.path(),
                _ => self.workspace.as_path(),
            };
            let connected = Connection::connect(
                &server.config,
                folder,
                Arc::clone(&server.routes),
                Arc::clone(&self.relay),
                list_changed,
                &server.stderr,
            )
            .await;
            let (connection, session) = match connected {
                Ok((connection, session)) => {
                    backoff = BACKOFF_START;
                    (Arc::new(RwLock::new(connection)), session)
                }
                Err(err) => {
                    tracing::warn!(server = %server.config.name, error = %err, "the downstream server is unavailable");
                    server
                        .set_state(ServerState::Unavailable(err.to_string()))
                        .await;
                    if let Some(started) = started.take() {
                        let _ = started.send(());
                    }
                    if self.pause(&mut backoff).await {
                        continue;
                    }
                    break;
                }
            };
            let tools = connection.read().await.tools.len();
            tracing::info!(server = %server.config.name, tools, "downstream server ready");
            *server.connection.write().await = Some(Arc::clone(&connection));
            server.set_state(ServerState::Ready).await;
            if let Some(started) = started.take() {
                let _ = started.send(());
            }
            self.serve_session(&server, &connection, session, &mut relist)
                .await;
            *server.connection.write().await = None;
            if self.stop.is_cancelled() {
                break;
            }
            tracing::warn!(server = %server.config.name, "the downstream server exited; restarting it");
            server
                .set_state(ServerState::Unavailable("the server exited".to_owned()))
                .await;
            if !self.pause(&mut backoff).await {
                break;
            }
        }
        server.set_state(ServerState::Stopped).await;
    }

    /// Keeps one connected session until it ends or the fleet stops (then
    /// the session is closed, which closes the server's stdin and asks its
    /// guard to stop the whole group), listing the tools again whenever the
    /// server says they changed.
    async fn serve_session(
        &self,
        server: &Supervised,
        connection: &Arc<RwLock<Connection>>,
        session: Session,
        relist: &mut mpsc::UnboundedReceiver<()>,
    ) {
        let mut canceller = Some(session.cancellation_token());
        let ended = session.waiting();
        tokio::pin!(ended);
        loop {
            tokio::select! {
                _ = &mut ended => break,
                () = self.stop.cancelled() => {
                    if let Some(canceller) = canceller.take() {
                        canceller.cancel();
                    }
                    let _ = tokio::time::timeout(SHUTDOWN_WAIT, &mut ended).await;
                    break;
                }
                Some(()) = relist.recv() => {
                    if server.relist(connection).await
                        && let Some(relay) = self.relay.get()
                    {
                        relay.tools_changed().await;
                    }
                }
            }
        }
    }

    /// Waits `backoff` before the next start and doubles it (up to its
    /// cap); `false` when the fleet stopped meanwhile.
    async fn pause(&self, backoff: &mut Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(*backoff) => {
                *backoff = (*backoff * 2).min(BACKOFF_MAX);
                true
            }
            () = self.stop.cancelled() => false,
        }
    }

    /// Stops every server and waits until each has stopped: each session
    /// is closed (the server's stdin, then its guard's SIGTERM to the whole
    /// group).
    pub async fn shut_down(&self) {
        self.stop.cancel();
        let supervisors: Vec<_> = self.supervisors.lock().await.drain(..).collect();
        for supervisor in supervisors {
            let _ = supervisor.await;
        }
    }

    /// What each running server lists, as definitions (for the registry).
    pub async fn live_tools(&self) -> BTreeMap<String, Vec<Value>> {
        let mut live = BTreeMap::new();
        for (name, server) in &self.servers {
            if let Some(connection) = server.connection.read().await.as_ref() {
                live.insert(
                    name.clone(),
                    connection.read().await.tools.values().cloned().collect(),
                );
            }
        }
        live
    }

    /// Each server's state, by name.
    pub async fn states(&self) -> BTreeMap<String, ServerState> {
        let mut states = BTreeMap::new();
        for (name, server) in &self.servers {
            states.insert(name.clone(), server.state.read().await.clone());
        }
        states
    }

    /// Whether a call to `server`'s `tool`, pinned at `pinned`, may go ahead.
    pub async fn status(&self, server: &str, tool: &str, pinned: Option<&str>) -> ToolStatus {
        let Some(supervised) = self.servers.get(server) else {
            return ToolStatus::ServerUnavailable;
        };
        let Some(connection) = supervised.connection.read().await.clone() else {
            return ToolStatus::ServerUnavailable;
        };
        let Some(pinned) = pinned else {
            return ToolStatus::NotPinned;
        };
        match connection.read().await.hashes.get(tool) {
            Some(live) if live == pinned => ToolStatus::Ready,
            Some(_) | None => ToolStatus::Changed,
        }
    }

    /// The root `server`'s path arguments are judged against, when it
    /// declares its own.
    pub fn root_of(&self, server: &str) -> Option<&Root> {
        self.servers.get(server)?.root.as_ref().ok()?.as_ref()
    }

    /// The last lines `server` wrote on stderr, oldest first, sanitized.
    pub fn stderr_lines(&self, server: &str) -> Vec<String> {
        self.servers
            .get(server)
            .map(|s| s.stderr.lines())
            .unwrap_or_default()
    }

    /// Whether `server` runs calls as tasks (it speaks 2026-07-28 and
    /// declared the tasks extension), as it is connected now.
    pub async fn runs_tasks(&self, server: &str) -> bool {
        let Some(supervised) = self.servers.get(server) else {
            return false;
        };
        let Some(connection) = supervised.connection.read().await.clone() else {
            return false;
        };
        connection.read().await.tasks
    }

    /// Whether `server` lets its error results through to the client.
    pub fn passes_errors(&self, server: &str) -> bool {
        self.servers
            .get(server)
            .is_some_and(|s| s.config.pass_errors)
    }

    /// Forwards one decided call. Progress goes to `progress` (only when the
    /// caller asked for it); `stop` ends the call, and the downstream is
    /// told with `notifications/cancelled`; its late answer is dropped.
    pub async fn forward(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        stop: impl Future<Output = ()>,
    ) -> Forwarded {
        let forwarded = self
            .forward_uncounted(server, tool, arguments, progress, stop)
            .await;
        let failed = matches!(
            forwarded,
            Forwarded::Unavailable | Forwarded::TimedOut | Forwarded::Failed
        );
        crate::metrics::downstream_call(server, failed);
        forwarded
    }

    async fn forward_uncounted(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        stop: impl Future<Output = ()>,
    ) -> Forwarded {
        let Some(supervised) = self.servers.get(server) else {
            return Forwarded::Unavailable;
        };
        let Some(connection) = supervised.connection.read().await.clone() else {
            return Forwarded::Unavailable;
        };
        let (peer, arrivals) = {
            let connection = connection.read().await;
            (connection.peer.clone(), connection.arrivals.clone())
        };
        let arguments: JsonObject = match arguments {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let Some((handle, request)) = supervised
            .send_routed(&peer, server, params.clone(), progress)
            .await
        else {
            return Forwarded::Unavailable;
        };
        let id = handle.id.clone();
        let token = handle.progress_token.clone();
        tokio::pin!(stop);
        // Progress resets the wait for an answer, never this: a server that
        // reports steps forever is stopped all the same.
        let deadline = tokio::time::Instant::now() + supervised.config.max_duration;
        let answered = supervised
            .answer_of(handle.await_response(), stop.as_mut(), deadline)
            .await;
        // Every step the server sent before its answer is relayed, and none
        // from here on: the route and its sender go before the result is
        // returned.
        if let Some(request) = request {
            if answered.is_ok() {
                ordered::settle(&arrivals).await;
            }
            let mut routes = supervised.routes.lock().await;
            routes.by_token.remove(&token);
            routes.by_request.remove(&request);
        }
        let answer = match answered {
            Ok(answer) => answer,
            Err(ended) => return supervised.cancel(&peer, id, ended, server, tool).await,
        };
        let answer = match call_response(answer) {
            Ok(answer) => answer,
            Err((forwarded, why)) => {
                if let Some(why) = why {
                    tracing::warn!(server, tool, why, "the call failed downstream");
                }
                return forwarded;
            }
        };
        let follow = FollowUp {
            server,
            peer: &peer,
            relay: &self.relay,
            timeout: supervised.config.timeout,
            deadline,
        };
        forwarded(follow.follow(answer, params, stop).await, server, tool)
    }
}

/// What a call's answer is, or how it failed (and, for a failure worth a
/// warning, why).
fn call_response(
    answer: Result<ServerResult, rmcp::ServiceError>,
) -> Result<CallToolResponse, (Forwarded, Option<String>)> {
    match answer {
        Ok(ServerResult::CallToolResult(result)) => Ok(CallToolResponse::Complete(result)),
        Ok(ServerResult::InputRequiredResult(asked)) => Ok(CallToolResponse::InputRequired(asked)),
        Ok(ServerResult::CreateTaskResult(task)) => Ok(CallToolResponse::Task(task)),
        Ok(other) => Err((
            Forwarded::Failed,
            Some(format!(
                "the server answered a call with something else: {other:?}"
            )),
        )),
        Err(rmcp::ServiceError::Timeout { .. }) => Err((Forwarded::TimedOut, None)),
        Err(rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_)) => {
            Err((Forwarded::Unavailable, None))
        }
        Err(err) => Err((Forwarded::Failed, Some(err.to_string()))),
    }
}

/// A followed call as the keeper gets it.
fn forwarded(followed: Followed, server: &str, tool: &str) -> Forwarded {
    match followed {
        Followed::Result(result) => {
            let is_error = result.is_error == Some(true);
            match serde_json::to_value(&result) {
                Ok(result) => Forwarded::Result { result, is_error },
                Err(err) => {
                    tracing::warn!(server, error = %err, "the result could not be encoded");
                    Forwarded::Failed
                }
            }
        }
        Followed::Unavailable => Forwarded::Unavailable,
        Followed::TimedOut => Forwarded::TimedOut,
        Followed::Cancelled => Forwarded::Cancelled,
        Followed::Failed(why) => {
            tracing::warn!(server, tool, why, "the call failed downstream");
            Forwarded::Failed
        }
    }
}

impl Supervised {
    /// Sends a call; with a caller that wants progress, routes the
    /// server's steps to it. The routes stay locked from before the send
    /// until its route is in, so no notification can look for it too
    /// early; without a caller for progress they are not touched. The
    /// handle, and the route's request key when routed; `None` when the
    /// call could not be sent.
    async fn send_routed(
        &self,
        peer: &Peer<RoleClient>,
        server: &str,
        params: CallToolRequestParams,
        progress: Option<mpsc::UnboundedSender<Progress>>,
    ) -> Option<(RequestHandle<RoleClient>, Option<String>)> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let options =
            PeerRequestOptions::with_timeout(self.config.timeout).reset_timeout_on_progress();
        let routes = match &progress {
            Some(_) => Some(self.routes.lock().await),
            None => None,
        };
        let handle = match peer.send_request_with_option(request, options).await {
            Ok(handle) => handle,
            Err(err) => {
                tracing::warn!(server, error = %err, "the call could not be sent");
                return None;
            }
        };
        let (Some(mut routes), Some(sender)) = (routes, progress) else {
            return Some((handle, None));
        };
        let request = serde_json::to_string(&handle.id).unwrap_or_default();
        routes
            .by_token
            .insert(handle.progress_token.clone(), ProgressRoute::new(sender));
        routes
            .by_request
            .insert(request.clone(), handle.progress_token.clone());
        Some((handle, Some(request)))
    }

    /// Waits for the answer to a sent call, or why none came: the caller
    /// stopped it, it ran past `deadline`, or (an agent) it wrote an error
    /// and then said nothing. An agent that writes an error while its turn
    /// runs and then says nothing will not answer it: the turn ends then
    /// rather than at the timeout. A tool that fails logs its error just
    /// before its error result, so the answer gets a moment to follow the
    /// line.
    async fn answer_of(
        &self,
        response: impl Future<Output = Result<ServerResult, rmcp::ServiceError>>,
        stop: std::pin::Pin<&mut impl Future<Output = ()>>,
        deadline: tokio::time::Instant,
    ) -> Result<Result<ServerResult, rmcp::ServiceError>, Unanswered> {
        let agent = self.config.agent.is_some();
        let mut errors = self.stderr.errors();
        errors.mark_unchanged();
        let troubled = async move {
            if !agent || errors.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::pin!(response);
        tokio::select! {
            answer = &mut response => Ok(answer),
            () = stop => Err(Unanswered::Cancelled),
            () = tokio::time::sleep_until(deadline) => Err(Unanswered::Overdue),
            () = troubled => tokio::time::timeout(AGENT_ERROR_GRACE, &mut response)
                .await
                .map_err(|_| Unanswered::AgentFailed),
        }
    }

    /// Tells the server a call it did not answer is cancelled, and why.
    async fn cancel(
        &self,
        peer: &Peer<RoleClient>,
        id: RequestId,
        ended: Unanswered,
        server: &str,
        tool: &str,
    ) -> Forwarded {
        if ended == Unanswered::Overdue {
            tracing::warn!(server, tool, max_duration = ?self.config.max_duration, "the call ran past its server's max_duration");
        }
        let note = CancelledNotificationParam::new(Some(id), Some(ended.why().to_owned()));
        if let Err(err) = peer.notify_cancelled(note).await {
            tracing::debug!(server, error = %err, "the cancellation could not be sent");
        }
        ended.forwarded()
    }

    async fn set_state(&self, state: ServerState) {
        *self.state.write().await = state;
    }

    /// Lists the tools again after the server said they changed: a
    /// definition that drifted from its pin is refused from the next call.
    /// Whether any definition changed (the client's list may have too).
    async fn relist(&self, connection: &Arc<RwLock<Connection>>) -> bool {
        let peer = connection.read().await.peer.clone();
        match list_bounded(&peer).await {
            Ok(listed) => {
                let mut connection = connection.write().await;
                let before = connection.hashes.clone();
                connection.take_listing(&listed);
                tracing::info!(server = %self.config.name, "the server's tools changed; listed again");
                connection.hashes != before
            }
            Err(err) => {
                tracing::warn!(server = %self.config.name, error = %err, "the changed tools could not be listed");
                false
            }
        }
    }
}
