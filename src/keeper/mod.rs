//! The gate keeper: the one path from a tool request to a tool run.
//!
//! authenticate (done before the keeper exists) → discover → validate →
//! facts → decide → approve → record → run → outcome, each a small step of
//! [`Keeper::call`] that either hands on or ends the call with its
//! [`CallOutcome`]. Every adapter that can run a tool goes through
//! `call`; a tool's runner takes an [`Authorized`], which only the record
//! step makes, after an allow's record is durable. Every decision, including
//! the ones a client sees as "unknown tool", is recorded first.
//!
//! What it may not do: speak a protocol (adapters translate its outcomes),
//! or evaluate Cedar other than through `Engine::decide`.
//!
//! Why it imports from `approval`, the floor above it: a call decided with
//! `approved = true` needs a [`crate::approval::Grant`], and only the
//! approval flow may make one (its constructor is private to that module:
//! authorized by type), while the flow in turn runs the call through this
//! keeper. Moving `Grant` down here would open its constructor to the
//! crate; the arrow up is the price of keeping that proof unforgeable.

mod approve;
mod authorized;
mod call;
mod command;
mod harness;
mod origin;
mod policies;
mod question;
mod reason;
mod records;
mod relay;
mod result_fit;
mod sink;

use std::sync::Arc;

use arc_swap::ArcSwap;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use authorized::Authorized;
pub use harness::{HarnessCall, HarnessVerdict};
pub use reason::{ReasonCode, refusal_schema};
pub use sink::{Appending, AuditSink};

use crate::approval::{Grant, action_digest};
use crate::audit::Kind;
use crate::auth::StoredClient;
use crate::bridge::Bridge;
use crate::facts::{Root, ToolFacts, Transport};
use crate::gate::{GATE_APPROVAL_CHANNEL, GateError};
use crate::pdp::{
    Cause, Decision, Engine, INBOX_CHANNEL, INBOX_MAX_APPROVERS, ONE_APPROVER, Outcome, Query,
    ToolAction,
};
use crate::servers::{AgentProtocol, Fleet, ToolStatus};
use crate::tools::{
    BRIDGE_SERVER, BUILTIN_SERVER, BridgeTool, Builtin, RegisteredTool, Registry, Runner,
    ToolFailure, ToolId, ToolSpec,
};

/// The authenticated client a keeper serves.
#[derive(Debug, Clone)]
pub struct ClientIdentity {
    pub name: String,
    pub tier: String,
    pub fingerprint: String,
}

impl From<StoredClient> for ClientIdentity {
    fn from(client: StoredClient) -> Self {
        Self {
            fingerprint: client.fingerprint(),
            name: client.name,
            tier: client.tier,
        }
    }
}

/// The channel a human approval comes through for this keeper's clients.
pub const APPROVAL_CHANNEL: &str = "client_elicitation";

/// Whether a human can be asked about this call, or already said yes.
#[derive(Debug)]
pub enum Approval {
    /// Nobody can be asked (the client declared no elicitation): an ask
    /// ends as `approval_unavailable`.
    Unavailable,
    /// The client can put a question to its user: an ask ends as
    /// `NeedsApproval`, for the approval flow to ask.
    Askable,
    /// The client cannot ask, and the approval inbox can: an ask through
    /// the inbox's channel ends as `NeedsApproval` via the inbox.
    Inbox,
    /// The client can ask and the inbox is there too: the client's channel
    /// first, and the inbox when the policies refuse an approval through
    /// the client's (a team that sends every destructive call to its
    /// security team, whatever the client can do).
    AskableOrInbox,
    /// A human approved a call; only `approval/` makes the grant, and it
    /// counts only for the call whose digest it holds.
    Granted(Grant),
}

/// How a call ended.
#[derive(Debug)]
pub enum CallOutcome {
    /// No such tool, or the caller may not discover it: the same answer
    /// either way, so a client cannot probe for tools it may not see.
    UnknownTool(String),
    /// Refused before any decision, for a reason of the tool's server: not
    /// pinned, changed since it was pinned, or not running.
    Refused(Cause, String),
    /// The arguments do not fit the tool's input schema, or a path in them
    /// cannot be accepted.
    InvalidArguments(String),
    /// Denied: by a policy, a missing capability (named when the tier's
    /// capability policy is among the deciding ones), or a policy error.
    Denied(Decision, Vec<String>),
    /// Allowed only with a human approval, and no human can be asked.
    ApprovalUnavailable(Decision),
    /// Allowed only with a human approval; ask this question, bound to
    /// this action digest.
    NeedsApproval {
        decision: Decision,
        digest: String,
        question: String,
        /// The channel the approval must come through: the client's, or
        /// the inbox (`pdp::INBOX_CHANNEL`).
        via: &'static str,
        /// What the inbox shows and decides `approve` on.
        asked: Box<AskedCall>,
    },
    /// A human approved, and the decision with the approval still denies
    /// (a policy refuses the channel, say).
    ApprovalRefused(Decision),
    /// Its decision record could not be made durable, so the tool did not
    /// run and no question was asked.
    AuditUnavailable,
    /// The tool ran.
    Completed(Value),
    /// The tool ran and failed.
    Failed(ToolFailure),
    /// A downstream server ran the tool: its result, passed on as it came
    /// (an error result only where the server passes errors).
    Relayed { result: Value, is_error: bool },
    /// A downstream server's result that does not fit the output schema
    /// its tool declares: why, and its content blocks when the server
    /// passes errors on.
    InvalidResult { why: String, content: Option<Value> },
    /// The caller cancelled; nothing is sent back.
    Cancelled,
}

/// A call waiting for an approval, as the approval inbox shows it and
/// asks Cedar about it: never an argument policies cannot see. Stored
/// with the question, so that another replica of a fleet decides it too.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct AskedCall {
    pub tool: ToolId,
    /// The tool's name as the client called it.
    pub name: String,
    pub facts: ToolFacts,
    /// Each path argument, resolved, as shown (relative to the root, or
    /// absolute and marked when outside it).
    pub paths: Vec<(String, String)>,
    /// The arguments policies can see (the tool's typed input).
    pub arguments: serde_json::Map<String, Value>,
    /// The arguments policies cannot see, by dotted path: named, never
    /// shown.
    pub hidden: Vec<String>,
}

/// Why the gate gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum GateFailure {
    #[error(transparent)]
    Input(#[from] GateError),
    #[error("the audit log is unavailable")]
    AuditUnavailable,
}

/// The audit log could not be written: nothing that needs a record happens.
#[derive(Debug, thiserror::Error)]
#[error("the audit log is unavailable")]
pub struct AuditUnavailable;

/// How much work one client may make portcullis do.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Calls of this client that run at once; the rest wait (and can be
    /// cancelled while they wait).
    pub max_concurrent: usize,
    /// How long a tool that walks (search, list_dir) may run before it
    /// returns what it has, marked truncated.
    pub walk_budget: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrent: 8,
            walk_budget: Duration::from_secs(30),
        }
    }
}

/// A keeper is cheap to clone: a call works on a clone pinned to the
/// setting in force when it starts (see [`Keeper::pinned`]).
#[derive(Clone)]
pub struct Keeper {
    /// The setting in force, shared by every client's keeper of one
    /// `serve`, replaced whole when the policies are reloaded.
    settings: Arc<ArcSwap<Setting>>,
    /// The setting this keeper decides under: the one in force when it was
    /// pinned, so that every step of a call sees one policy set.
    setting: Arc<Setting>,
    client: ClientIdentity,
    transport: Transport,
    audit: Arc<dyn AuditSink>,
    session: String,
    limits: Limits,
    /// One permit per call that may run at once for this client.
    slots: Arc<tokio::sync::Semaphore>,
    /// Fired once, when the service shuts down: every call stops.
    shutdown: CancellationToken,
    /// Held shared by every call in progress; shutting down takes it
    /// exclusively, so it waits until each call has recorded how it ended.
    in_flight: Arc<tokio::sync::RwLock<()>>,
    /// The downstream servers, when the set declares any.
    fleet: Option<Arc<Fleet>>,
    /// The agent bridge, when the set declares an agent.
    bridge: Option<Arc<Bridge>>,
    /// The connection this keeper's calls come on, when it is not the
    /// keeper's own session (an HTTP client's MCP session): a bridge turn is
    /// cancelled only from the connection that started it.
    connection: Option<Arc<str>>,
}

/// Where a keeper serves: the policies, the tools, the root.
pub struct Setting {
    pub engine: Engine,
    pub registry: Registry,
    pub root: Root,
}

impl Keeper {
    pub fn new(
        setting: Setting,
        client: ClientIdentity,
        transport: Transport,
        audit: Arc<dyn AuditSink>,
        session: String,
    ) -> Self {
        let settings = Arc::new(ArcSwap::from_pointee(setting));
        Self::sharing(settings, client, transport, audit, session)
    }

    /// A keeper for one of several clients served at once: the policies,
    /// tools and root are the others' too (and a reload replaces them for
    /// all), the limits and calls its own.
    pub fn sharing(
        settings: Arc<ArcSwap<Setting>>,
        client: ClientIdentity,
        transport: Transport,
        audit: Arc<dyn AuditSink>,
        session: String,
    ) -> Self {
        Self {
            setting: settings.load_full(),
            settings,
            client,
            transport,
            audit,
            session,
            limits: Limits::default(),
            slots: Arc::new(tokio::sync::Semaphore::new(
                Limits::default().max_concurrent,
            )),
            shutdown: CancellationToken::new(),
            in_flight: Arc::new(tokio::sync::RwLock::new(())),
            fleet: None,
            bridge: None,
            connection: None,
        }
    }

    /// This keeper, pinned to the setting in force now: what a call or a
    /// listing works on from its first step to its record. Limits, the
    /// shutdown and the calls in flight stay shared with the original.
    pub fn pinned(&self) -> Self {
        Self {
            setting: self.settings.load_full(),
            ..self.clone()
        }
    }

    /// The same keeper, forwarding downstream tools' calls to `fleet`.
    pub fn with_fleet(mut self, fleet: Arc<Fleet>) -> Self {
        self.fleet = Some(fleet);
        self
    }

    /// The same keeper, running the bridge's tools with `bridge`.
    pub fn with_bridge(mut self, bridge: Arc<Bridge>) -> Self {
        self.bridge = Some(bridge);
        self
    }

    /// This keeper, for calls that come on `connection` (one of several
    /// the client has open at once).
    pub fn on_connection(&self, connection: &str) -> Self {
        Self {
            connection: Some(Arc::from(connection)),
            ..self.clone()
        }
    }

    /// The connection this keeper's calls come on.
    fn connection(&self) -> &str {
        self.connection.as_deref().unwrap_or(&self.session)
    }

    /// Stops every call in progress (each records its outcome as cancelled)
    /// and refuses new ones; waits at most `grace` for them to finish.
    /// Returns whether they all did.
    pub async fn shut_down(&self, grace: Duration) -> bool {
        self.shutdown.cancel();
        tokio::time::timeout(grace, self.in_flight.write())
            .await
            .is_ok()
    }

    /// The same keeper, held to `limits`.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.slots = Arc::new(tokio::sync::Semaphore::new(limits.max_concurrent.max(1)));
        self.limits = limits;
        self
    }

    pub fn engine(&self) -> &Engine {
        &self.setting.engine
    }

    /// The downstream servers, when the set declares any.
    pub fn fleet(&self) -> Option<&Arc<Fleet>> {
        self.fleet.as_ref()
    }

    pub fn registry(&self) -> &Registry {
        &self.setting.registry
    }

    pub fn client(&self) -> &ClientIdentity {
        &self.client
    }

    pub fn session(&self) -> &str {
        &self.session
    }

    /// The name a client calls a tool by: its bare name for built-in tools,
    /// `server__name` for others.
    pub fn mcp_name(spec: &ToolSpec) -> String {
        // The bridge's tools keep the names the seed gives them
        // (`prompt_send`, ...): one agent per set, so they are unambiguous.
        if spec.id.server() == BUILTIN_SERVER || spec.id.server() == BRIDGE_SERVER {
            spec.id.name().to_owned()
        } else {
            format!("{}__{}", spec.id.server(), spec.id.name())
        }
    }

    /// A tool this keeper serves, by the name clients call it by. Harness
    /// tools are decided for the hook, never served: a client naming one
    /// finds no such tool.
    fn tool_named(&self, name: &str) -> Option<&RegisteredTool> {
        // `server__tool` (a server name never holds `__`), or a built-in or
        // bridge tool's bare name: a lookup or two, however many tools
        // servers add.
        let found = match name.split_once("__") {
            Some((server, tool)) => self.setting.registry.get(&ToolId::new(server, tool)),
            None => self
                .setting
                .registry
                .get(&ToolId::new(BUILTIN_SERVER, name))
                .or_else(|| self.setting.registry.get(&ToolId::new(BRIDGE_SERVER, name))),
        };
        found.filter(|tool| Self::is_served(tool) && Self::mcp_name(&tool.spec) == name)
    }

    /// Whether a tool of this name is one this keeper serves, whoever may
    /// discover it.
    pub fn serves(&self, name: &str) -> bool {
        self.tool_named(name).is_some()
    }

    /// Whether a call of `name` may run as a task for a client that asks
    /// for tasks: the calls that take long (`search`, the bridge's
    /// `prompt_send`) and those of a downstream server that runs its own
    /// calls as tasks.
    pub async fn runs_as_task(&self, name: &str) -> bool {
        let Some(tool) = self.tool_named(name) else {
            return false;
        };
        match &tool.runner {
            Runner::Builtin(Builtin::Search) | Runner::Bridge(BridgeTool::PromptSend) => true,
            Runner::Downstream { .. } => match &self.fleet {
                Some(fleet) => fleet.runs_tasks(tool.spec.id.server()).await,
                None => false,
            },
            _ => false,
        }
    }

    fn is_served(tool: &RegisteredTool) -> bool {
        matches!(
            tool.runner,
            Runner::Builtin(_) | Runner::Downstream { .. } | Runner::Bridge(_)
        )
    }

    fn served(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.setting
            .registry
            .iter()
            .filter(|tool| Self::is_served(tool))
    }

    /// Whether a downstream tool can be called now: its server runs and its
    /// live definition is the pinned one. A built-in tool always can.
    async fn downstream_status(&self, tool: &RegisteredTool) -> ToolStatus {
        match &tool.runner {
            Runner::Downstream { pinned } | Runner::Agent { pinned } => {
                self.status_of(&tool.spec.id, pinned.as_deref()).await
            }
            Runner::Bridge(BridgeTool::PromptSend) => self.agent_status().await,
            Runner::Builtin(_) | Runner::Harness | Runner::Bridge(_) => ToolStatus::Ready,
        }
    }

    async fn status_of(&self, id: &ToolId, pinned: Option<&str>) -> ToolStatus {
        match &self.fleet {
            Some(fleet) => fleet.status(id.server(), id.name(), pinned).await,
            None => ToolStatus::ServerUnavailable,
        }
    }

    /// Whether the agent can take a turn: it runs, and the tools the bridge
    /// calls on it are the ones pinned (a changed agent tool may now do
    /// something nobody reviewed). An app-server agent has no tools to pin
    /// and is started by the bridge when a turn needs it.
    async fn agent_status(&self) -> ToolStatus {
        let Some(bridge) = &self.bridge else {
            return ToolStatus::ServerUnavailable;
        };
        let (server, mapping) = bridge.agent();
        if mapping.protocol == AgentProtocol::CodexAppServer {
            return ToolStatus::Ready;
        }
        for name in [&mapping.start_tool, &mapping.reply_tool] {
            let id = ToolId::new(server, name.as_str());
            let status = match self.setting.registry.get(&id).map(|t| &t.runner) {
                Some(Runner::Agent { pinned }) => self.status_of(&id, pinned.as_deref()).await,
                _ => self.status_of(&id, None).await,
            };
            if status != ToolStatus::Ready {
                return status;
            }
        }
        ToolStatus::Ready
    }

    fn decide(&self, action: ToolAction, tool: &RegisteredTool, facts: &ToolFacts) -> Decision {
        self.decide_via(action, tool, facts, (self.approval_channel(), ONE_APPROVER))
    }

    /// The decision, an approval by `approvers` people coming through
    /// `channel` if one is needed.
    fn decide_via(
        &self,
        action: ToolAction,
        tool: &RegisteredTool,
        facts: &ToolFacts,
        (channel, approvers): (&str, u32),
    ) -> Decision {
        let started = std::time::Instant::now();
        let query = Query::tool(&self.client.name, action, &tool.spec.id, facts, channel);
        let decision = self.setting.engine.decide(&query.by(approvers));
        crate::metrics::decided(
            decision.outcome.as_str(),
            decision.cause.as_str(),
            &tool.spec.id.to_string(),
            Some(started.elapsed()),
        );
        decision
    }

    /// Who a human approval would come through: the harness's own prompt
    /// for hook requests, the MCP client's elicitation otherwise.
    fn approval_channel(&self) -> &'static str {
        match self.transport {
            Transport::Hook => GATE_APPROVAL_CHANNEL,
            Transport::Cli | Transport::Stdio | Transport::Http => APPROVAL_CHANNEL,
        }
    }

    /// The tools this client may see, in a stable order, each as `show`
    /// makes it. Each discovery decision is recorded before the listing is
    /// returned; all are decided under one policy set.
    pub async fn discoverable<T>(
        &self,
        request_id: &str,
        show: impl Fn(&RegisteredTool) -> T,
    ) -> Result<Vec<T>, AuditUnavailable> {
        self.pinned().listing(request_id, show).await
    }

    async fn listing<T>(
        &self,
        request_id: &str,
        show: impl Fn(&RegisteredTool) -> T,
    ) -> Result<Vec<T>, AuditUnavailable> {
        let facts = ToolFacts::without_paths(self.transport);
        let mut visible = Vec::new();
        let mut bodies = Vec::new();
        for tool in self.served() {
            // A tool that cannot be called now (its server down, its
            // definition not the pinned one) is not offered.
            if self.downstream_status(tool).await != ToolStatus::Ready {
                continue;
            }
            let decision = self.decide(ToolAction::Discover, tool, &facts);
            let name = Self::mcp_name(&tool.spec);
            let mut trail = records::Trail::new(request_id, &name, None);
            trail.resource = Some(tool.spec.id.clone());
            trail.definition = Some(tool.definition.clone());
            bodies.push(self.decision_body(&trail, Some((&facts, &decision)), None)?);
            if decision.outcome == Outcome::Allow {
                visible.push(show(tool));
            }
        }
        self.append(bodies).await?;
        Ok(visible)
    }

    fn digest(&self, tool: &ToolId, arguments: &Value) -> String {
        action_digest(
            &tool.to_string(),
            arguments,
            &self.setting.engine.identity().hash,
        )
    }

    /// The action digest of a call by tool name, for checking that an
    /// approval is for this very call; `None` for an unknown tool.
    pub fn action_digest(&self, name: &str, arguments: &Value) -> Option<String> {
        let this = self.pinned();
        let tool = this.tool_named(name)?;
        Some(this.digest(&tool.spec.id, arguments))
    }

    /// How many approvers the inbox needs for this call: the fewest the
    /// policies allow it with (`context.approvers`), of at most
    /// [`INBOX_MAX_APPROVERS`].
    pub fn inbox_quorum(&self, asked: &AskedCall) -> u32 {
        (ONE_APPROVER..=INBOX_MAX_APPROVERS)
            .find(|&approvers| {
                let query = Query::tool(
                    &self.client.name,
                    ToolAction::Call,
                    &asked.tool,
                    &asked.facts,
                    INBOX_CHANNEL,
                );
                let decision = self.setting.engine.decide(&query.approved().by(approvers));
                decision.outcome == Outcome::Allow
            })
            .unwrap_or(INBOX_MAX_APPROVERS)
    }

    /// The channel this keeper's clients answer questions through.
    pub fn client_channel(&self) -> &'static str {
        self.approval_channel()
    }

    /// Records an approval event (a question asked, an answer, a refused
    /// state) of `channel`, linked to its decision by digest and request;
    /// an error when it is not durable.
    pub async fn record_approval_via(
        &self,
        request_id: &str,
        event: &str,
        digest: &str,
        channel: &str,
        detail: Value,
    ) -> Result<(), AuditUnavailable> {
        let body = json!({
            "event": event,
            "session": self.session,
            "request_id": request_id,
            "client": self.client.name,
            "channel": channel,
            "digest": digest,
            "detail": detail,
        });
        crate::metrics::approval(event);
        self.audit
            .append_many(vec![(Kind::Approval, body)])
            .await
            .map(|_| ())
            .map_err(|err| {
                tracing::error!(error = %err, "an approval record could not be written");
                AuditUnavailable
            })
    }

    /// Records an approval event of this keeper's clients' channel. The
    /// question or answer it records is refused by its caller when the
    /// record is not durable; the event itself goes on either way.
    pub async fn record_approval(
        &self,
        request_id: &str,
        event: &str,
        digest: &str,
        detail: Value,
    ) {
        let channel = self.approval_channel();
        let _ = self
            .record_approval_via(request_id, event, digest, channel, detail)
            .await;
    }
}

#[cfg(test)]
mod inbox_tests;
#[cfg(test)]
mod tests;
