//! The gate keeper: the one path from a tool request to a tool run.
//!
//! authenticate (done before the keeper exists) → look up → facts → decide →
//! audit (durable) → run → outcome record. Every adapter that can run a tool
//! (the MCP server's direct tools and its `tool_call` wrapper) goes through
//! [`Keeper::call`]; nothing else calls a tool's runner. Every decision,
//! including the ones a client sees as "unknown tool", is written to the
//! audit log first.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::approval::action_digest;
use crate::audit::{AuditLog, ClientRef, DecisionRecord, Kind, RecordedPolicy, sha256_hex};
use crate::facts::{ResolvedPath, Root, ToolFacts, Transport, is_vcs_metadata, tool_call_facts};
use crate::gate::{GATE_APPROVAL_CHANNEL, GateAnswer, GateError, judge};
use crate::pdp::{Decision, Engine, Outcome, ToolAction, ToolQuery};
use crate::tools::{
    BUILTIN_SERVER, CancelFlag, Invocation, Progress, RegisteredTool, Registry, Runner,
    ToolFailure, ToolId, ToolSpec,
};

/// The authenticated client a keeper serves.
#[derive(Debug, Clone)]
pub struct ClientIdentity {
    pub name: String,
    pub tier: String,
    pub fingerprint: String,
}

/// The channel a human approval would come through for this keeper's
/// clients. Until approvals are wired to MCP elicitation nobody can answer,
/// so an ask ends as `approval_unavailable`.
pub const APPROVAL_CHANNEL: &str = "client_elicitation";

/// Whether a human can be asked about this call, or already said yes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Nobody can be asked (the client declared no elicitation): an ask
    /// ends as `approval_unavailable`.
    Unavailable,
    /// The client can put a question to its user: an ask ends as
    /// `NeedsApproval`, for the adapter to ask.
    Askable,
    /// A human approved exactly this call through `APPROVAL_CHANNEL` (the
    /// adapter checked the binding): decide again with `approved = true`.
    Granted,
}

/// Longest beginning of a content argument shown in an approval
/// question, in characters (escaped); its full size is always shown.
const QUESTION_CONTENT_CHARS: usize = 200;

/// How a call ended.
#[derive(Debug)]
pub enum CallOutcome {
    /// No such tool, or the caller may not discover it: the same answer
    /// either way, so a client cannot probe for tools it may not see.
    UnknownTool(String),
    /// The arguments do not fit the tool's input schema, or a path in them
    /// cannot be resolved.
    InvalidArguments(String),
    /// Denied (a policy, a missing capability, or a policy error).
    Denied(Decision, Vec<String>),
    /// Allowed only with a human approval, and no human can be asked.
    ApprovalUnavailable(Decision),
    /// Allowed only with a human approval; ask this question, bound to
    /// this action digest.
    NeedsApproval {
        decision: Decision,
        digest: String,
        question: String,
    },
    /// A human approved, and the decision with the approval still denies
    /// (a policy refuses the channel, say).
    ApprovalRefused(Decision),
    /// Allowed, but its decision record could not be made durable, so the
    /// tool did not run.
    AuditUnavailable,
    /// The tool ran.
    Completed(Value),
    /// The tool ran and failed.
    Failed(ToolFailure),
    /// The caller cancelled; nothing is sent back.
    Cancelled,
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

pub struct Keeper {
    engine: Engine,
    registry: Registry,
    root: Root,
    client: ClientIdentity,
    transport: Transport,
    audit: Arc<AuditLog>,
    session: String,
    limits: Limits,
    /// One permit per call that may run at once for this client.
    slots: Arc<tokio::sync::Semaphore>,
}

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

/// What a decision record says beyond the decision itself.
struct Recorded<'a> {
    request_id: &'a str,
    action: ToolAction,
    tool: &'a str,
    resource: Option<&'a ToolId>,
    arguments: Option<&'a Value>,
    facts: Option<&'a ToolFacts>,
    approved: bool,
}

impl Keeper {
    pub fn new(
        engine: Engine,
        registry: Registry,
        root: Root,
        client: ClientIdentity,
        transport: Transport,
        audit: Arc<AuditLog>,
        session: String,
    ) -> Self {
        Self {
            engine,
            registry,
            root,
            client,
            transport,
            audit,
            session,
            limits: Limits::default(),
            slots: Arc::new(tokio::sync::Semaphore::new(
                Limits::default().max_concurrent,
            )),
        }
    }

    /// The same keeper, held to `limits`.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.slots = Arc::new(tokio::sync::Semaphore::new(limits.max_concurrent.max(1)));
        self.limits = limits;
        self
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn client(&self) -> &ClientIdentity {
        &self.client
    }

    pub fn session(&self) -> &str {
        &self.session
    }

    pub fn audit(&self) -> &Arc<AuditLog> {
        &self.audit
    }

    /// The name a client calls a tool by: its bare name for built-in tools,
    /// `server__name` for others.
    pub fn mcp_name(spec: &ToolSpec) -> String {
        if spec.id.server() == BUILTIN_SERVER {
            spec.id.name().to_owned()
        } else {
            format!("{}__{}", spec.id.server(), spec.id.name())
        }
    }

    /// The tools this client may see, in a stable order. Each discovery
    /// decision is audited before the listing is returned.
    pub async fn discoverable(
        &self,
        request_id: &str,
    ) -> Result<Vec<&RegisteredTool>, AuditUnavailable> {
        let facts = ToolFacts::without_paths(self.transport);
        let mut visible = Vec::new();
        let mut records = Vec::new();
        for tool in self.registry.iter() {
            let decision = self.decide(ToolAction::Discover, tool, &facts);
            let name = Self::mcp_name(&tool.spec);
            records.push((
                Kind::Decision,
                self.decision_body(
                    &Recorded {
                        request_id,
                        action: ToolAction::Discover,
                        tool: &name,
                        resource: Some(&tool.spec.id),
                        arguments: None,
                        facts: Some(&facts),
                        approved: false,
                    },
                    Some(&decision),
                    None,
                ),
            ));
            if decision.outcome == Outcome::Allow {
                visible.push(tool);
            }
        }
        self.audit
            .append_many(records)
            .await
            .map_err(|_| AuditUnavailable)?;
        Ok(visible)
    }

    fn decide(&self, action: ToolAction, tool: &RegisteredTool, facts: &ToolFacts) -> Decision {
        self.engine.decide(&ToolQuery {
            client: &self.client.name,
            action,
            tool: &tool.spec.id,
            facts,
            approval_channel: APPROVAL_CHANNEL,
        })
    }

    /// Decides a call and, if allowed and recorded, runs it. Progress goes
    /// to `progress` while the tool runs; the sender is dropped before this
    /// returns, so a forwarder draining it finishes before the result is sent.
    pub async fn call(
        self: &Arc<Self>,
        request_id: &str,
        name: &str,
        arguments: Value,
        approval: Approval,
        progress: mpsc::UnboundedSender<Progress>,
        cancelled: CancellationToken,
    ) -> CallOutcome {
        let mut recorded = Recorded {
            request_id,
            action: ToolAction::Discover,
            tool: name,
            resource: None,
            arguments: Some(&arguments),
            facts: None,
            approved: false,
        };
        let Some(tool) = self
            .registry
            .iter()
            .find(|tool| Self::mcp_name(&tool.spec) == name)
        else {
            let message = json!(format!("Unknown tool: {name}"));
            self.record_refusal(&mut Vec::new(), &recorded, "unknown_tool", message)
                .await;
            return CallOutcome::UnknownTool(name.to_owned());
        };
        recorded.resource = Some(&tool.spec.id);
        let no_paths = ToolFacts::without_paths(self.transport);
        let discovery = self.decide(ToolAction::Discover, tool, &no_paths);
        recorded.facts = Some(&no_paths);
        if discovery.outcome != Outcome::Allow {
            self.record(&mut Vec::new(), &recorded, Some(&discovery), None)
                .await
                .ok();
            return CallOutcome::UnknownTool(name.to_owned());
        }
        // The discovery record goes out with the call's own record, in one
        // batch: one durable write before the call, not two.
        let mut pending = vec![self.decision_body(&recorded, Some(&discovery), None)];

        recorded.action = ToolAction::Call;
        recorded.facts = None;
        if let Err(err) = tool.arguments.check(&arguments) {
            let message = err.to_string();
            self.record_refusal(&mut pending, &recorded, "invalid_arguments", json!(message))
                .await;
            return CallOutcome::InvalidArguments(message);
        }
        let call = match tool_call_facts(
            &tool.spec,
            &arguments,
            &self.root,
            self.engine.path_classes(),
            self.transport,
        ) {
            Ok(call) => call,
            Err(err) => {
                let message = format!("invalid arguments: {err}");
                self.record_refusal(&mut pending, &recorded, "invalid_arguments", json!(message))
                    .await;
                return CallOutcome::InvalidArguments(message);
            }
        };
        let mut decision = self.decide(ToolAction::Call, tool, &call.facts);
        if decision.outcome == Outcome::Ask && approval == Approval::Granted {
            decision = self.engine.decide_approved(&ToolQuery {
                client: &self.client.name,
                action: ToolAction::Call,
                tool: &tool.spec.id,
                facts: &call.facts,
                approval_channel: APPROVAL_CHANNEL,
            });
            recorded.approved = true;
        }
        recorded.facts = Some(&call.facts);
        let seq = self
            .record(&mut pending, &recorded, Some(&decision), None)
            .await;
        match decision.outcome {
            Outcome::Deny if recorded.approved => return CallOutcome::ApprovalRefused(decision),
            Outcome::Deny => {
                let missing = self.missing_capabilities(&tool.spec);
                return CallOutcome::Denied(decision, missing);
            }
            Outcome::Ask if approval == Approval::Askable && seq.is_ok() => {
                let digest = self.digest(&tool.spec.id, &arguments);
                let question = self.question(tool, &arguments, &call.paths, &decision);
                return CallOutcome::NeedsApproval {
                    decision,
                    digest,
                    question,
                };
            }
            Outcome::Ask => return CallOutcome::ApprovalUnavailable(decision),
            Outcome::Allow => {}
        }
        // Audit before effect: no durable record, no run.
        let Ok(seq) = seq else {
            return CallOutcome::AuditUnavailable;
        };

        // Wait for a slot; a call cancelled while it waits never runs.
        let waiting = Instant::now();
        let slot = tokio::select! {
            slot = Arc::clone(&self.slots).acquire_owned() => slot.ok(),
            () = cancelled.cancelled() => None,
        };
        let waited_ms = u64::try_from(waiting.elapsed().as_millis()).unwrap_or(u64::MAX);
        let Some(_slot) = slot else {
            let body = json!({"decision_seq": seq, "session": self.session, "request_id": request_id,
                              "status": "cancelled", "reason": "cancelled while waiting for a slot",
                              "waited_ms": waited_ms});
            if let Err(err) = self.audit.submit(Kind::Outcome, body) {
                tracing::error!(error = %err, seq, "the outcome record could not be written");
            }
            return CallOutcome::Cancelled;
        };
        let cancel = CancelFlag::default();
        let keeper = Arc::clone(self);
        let tool_id = tool.spec.id.clone();
        let mut task = tokio::task::spawn_blocking({
            let cancel = cancel.clone();
            move || keeper.run_blocking(&tool_id, &arguments, &call.paths, &cancel, progress)
        });
        let outcome = tokio::select! {
            joined = &mut task => match joined {
                Ok(Ok(output)) => CallOutcome::Completed(output),
                Ok(Err(ToolFailure::Cancelled)) => CallOutcome::Cancelled,
                Ok(Err(failure)) => CallOutcome::Failed(failure),
                Err(err) => {
                    tracing::error!(error = %err, "tool task failed");
                    CallOutcome::Failed(ToolFailure::Internal)
                }
            },
            () = cancelled.cancelled() => {
                cancel.cancel();
                // Wait for the tool to stop, so that no side effect and no
                // progress report outlives the cancelled call.
                let _ = task.await;
                CallOutcome::Cancelled
            }
        };
        let (status, reason, failure) = match &outcome {
            CallOutcome::Completed(_) => ("executed", None, None),
            CallOutcome::Failed(failure) => {
                ("failed", Some(failure.to_string()), Some(failure.code()))
            }
            _ => ("cancelled", None, None),
        };
        let truncated = match &outcome {
            CallOutcome::Completed(output) => output.get("truncated").cloned(),
            _ => None,
        };
        let body = json!({"decision_seq": seq, "session": self.session, "request_id": request_id,
                          "status": status, "reason": reason, "failure": failure,
                          "waited_ms": waited_ms, "truncated": truncated});
        // The effect has happened; the answer need not wait for this
        // record. The writer keeps order, so it lands before any later one.
        if let Err(err) = self.audit.submit(Kind::Outcome, body) {
            tracing::error!(error = %err, seq, "the outcome record could not be written");
        }
        outcome
    }

    fn digest(&self, tool: &ToolId, arguments: &Value) -> String {
        action_digest(&tool.to_string(), arguments, &self.engine.identity().hash)
    }

    /// The action digest of a call by tool name, for checking that an
    /// approval is for this very call; `None` for an unknown tool.
    pub fn action_digest(&self, name: &str, arguments: &Value) -> Option<String> {
        let tool = self
            .registry
            .iter()
            .find(|tool| Self::mcp_name(&tool.spec) == name)?;
        Some(self.digest(&tool.spec.id, arguments))
    }

    /// The question put to the user. What decides the answer comes first
    /// and whole: the tool, every path as resolved (relative to the root,
    /// or absolute when outside it), and the size of every other argument
    /// with its beginning escaped and marked as content, so that no long
    /// or crafted content can push a path out of view or pose as one.
    fn question(
        &self,
        tool: &RegisteredTool,
        arguments: &Value,
        paths: &[(String, ResolvedPath)],
        decision: &Decision,
    ) -> String {
        let mut lines = vec![format!(
            "portcullis: `{}` asks to run `{}`.",
            self.client.name,
            Self::mcp_name(&tool.spec)
        )];
        for (name, resolved) in paths {
            let shown = match resolved.relative(&self.root) {
                Some(relative) if relative.as_os_str().is_empty() => ".".to_owned(),
                Some(relative) => relative.display().to_string(),
                None => format!("{} (outside the root)", resolved.canonical.display()),
            };
            lines.push(format!("  path `{name}`: {shown:?}"));
        }
        if let Value::Object(map) = arguments {
            for (name, value) in map {
                if paths.iter().any(|(path, _)| path == name) {
                    continue;
                }
                let text = match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                let escaped = format!("{text:?}");
                let mut beginning: String = escaped.chars().take(QUESTION_CONTENT_CHARS).collect();
                if escaped.chars().count() > QUESTION_CONTENT_CHARS {
                    beginning.push_str(" …");
                }
                lines.push(format!(
                    "  content `{name}`: {} bytes, begins [content] {beginning} [end of content]",
                    text.len()
                ));
            }
        }
        let reasons: Vec<String> = decision
            .policies
            .iter()
            .map(|p| format!("{} ({})", p.reason, p.id))
            .collect();
        lines.push(format!(
            "It needs your approval because: {}. Approve this one call?",
            reasons.join("; ")
        ));
        lines.join("\n")
    }

    /// Records an approval event (a question asked, an answer, a refused
    /// state), linked to its decision by digest and request.
    pub async fn record_approval(
        &self,
        request_id: &str,
        event: &str,
        digest: &str,
        detail: Value,
    ) {
        let body = json!({
            "event": event,
            "session": self.session,
            "request_id": request_id,
            "client": self.client.name,
            "channel": APPROVAL_CHANNEL,
            "digest": digest,
            "detail": detail,
        });
        if let Err(err) = self.audit.append(Kind::Approval, body).await {
            tracing::error!(error = %err, "an approval record could not be written");
        }
    }

    /// Judges a shell command for the command gate and records the
    /// decision. Nothing runs: the answer goes back to the harness.
    pub async fn gate(
        &self,
        request_id: &str,
        command: &str,
        cwd: Option<&str>,
    ) -> Result<GateAnswer, GateFailure> {
        let answer = judge(
            &self.engine,
            &self.client.name,
            &self.root,
            cwd,
            command,
            self.transport,
        )?;
        let decision = &answer.decision;
        let record = DecisionRecord {
            session: self.session.clone(),
            request_id: request_id.to_owned(),
            transport: self.transport.as_str().to_owned(),
            client: self.client_ref(),
            action: "run_command".to_owned(),
            tool: "gate".to_owned(),
            resource: None,
            arguments_sha256: Some(sha256_hex(&json!({"command": command, "cwd": cwd}))),
            facts: None,
            approved: false,
            command: Some(answer.facts.clone()),
            approval_channel: GATE_APPROVAL_CHANNEL.to_owned(),
            entities: self
                .engine
                .command_entities(&self.client.name, &self.client.tier),
            policy_set: (**self.engine.identity()).clone(),
            decision: decision.outcome,
            cause: decision.cause.as_str().to_owned(),
            policies: recorded_policies(decision),
            errors: decision.errors.clone(),
            message: None,
        };
        let body = serde_json::to_value(record).unwrap_or(Value::Null);
        self.audit
            .append(Kind::Decision, body)
            .await
            .map_err(|_| GateFailure::AuditUnavailable)?;
        Ok(answer)
    }

    fn client_ref(&self) -> ClientRef {
        ClientRef {
            name: self.client.name.clone(),
            fingerprint: self.client.fingerprint.clone(),
            tier: self.client.tier.clone(),
        }
    }

    /// Writes the pending decision records and this one, in one batch; the
    /// seq of this one when all are durable.
    async fn record(
        &self,
        pending: &mut Vec<Value>,
        recorded: &Recorded<'_>,
        decision: Option<&Decision>,
        refusal: Option<(&str, Value)>,
    ) -> Result<u64, AuditUnavailable> {
        let mut bodies: Vec<(Kind, Value)> =
            pending.drain(..).map(|b| (Kind::Decision, b)).collect();
        bodies.push((
            Kind::Decision,
            self.decision_body(recorded, decision, refusal),
        ));
        let seqs = self.audit.append_many(bodies).await.map_err(|err| {
            tracing::error!(error = %err, "a decision record could not be written");
            AuditUnavailable
        })?;
        seqs.last().copied().ok_or(AuditUnavailable)
    }

    /// Records a refusal made before Cedar was asked (unknown tool, bad
    /// arguments). The client is refused whether or not this lands.
    async fn record_refusal(
        &self,
        pending: &mut Vec<Value>,
        recorded: &Recorded<'_>,
        cause: &str,
        message: Value,
    ) {
        let _ = self
            .record(pending, recorded, None, Some((cause, message)))
            .await;
    }

    fn decision_body(
        &self,
        recorded: &Recorded<'_>,
        decision: Option<&Decision>,
        refusal: Option<(&str, Value)>,
    ) -> Value {
        let identity = self.engine.identity();
        let (outcome, cause, policies, errors) = match decision {
            Some(d) => (
                d.outcome,
                d.cause.as_str().to_owned(),
                recorded_policies(d),
                d.errors.clone(),
            ),
            None => (
                Outcome::Deny,
                refusal.as_ref().map_or("refused", |r| r.0).to_owned(),
                Vec::new(),
                Vec::new(),
            ),
        };
        let entities = recorded
            .resource
            .map(|id| {
                self.engine
                    .entities_for(&self.client.name, &self.client.tier, id)
            })
            .unwrap_or_default();
        let record = DecisionRecord {
            session: self.session.clone(),
            request_id: recorded.request_id.to_owned(),
            transport: self.transport.as_str().to_owned(),
            client: self.client_ref(),
            action: match recorded.action {
                ToolAction::Discover => "discover_tool",
                ToolAction::Call => "call_tool",
            }
            .to_owned(),
            tool: recorded.tool.to_owned(),
            resource: recorded.resource.map(ToString::to_string),
            arguments_sha256: recorded.arguments.map(sha256_hex),
            facts: decision.and(recorded.facts.cloned()),
            approved: recorded.approved,
            command: None,
            approval_channel: APPROVAL_CHANNEL.to_owned(),
            entities,
            policy_set: (**identity).clone(),
            decision: outcome,
            cause,
            policies,
            errors,
            message: refusal.and_then(|r| r.1.as_str().map(str::to_owned)),
        };
        serde_json::to_value(record).unwrap_or(Value::Null)
    }

    fn run_blocking(
        &self,
        tool_id: &ToolId,
        arguments: &Value,
        paths: &[(String, ResolvedPath)],
        cancel: &CancelFlag,
        progress: mpsc::UnboundedSender<Progress>,
    ) -> Result<Value, ToolFailure> {
        let tool = self.registry.get(tool_id).ok_or(ToolFailure::Internal)?;
        let mut report = |p: Progress| {
            // The receiver is gone only when the call is over; nothing to tell.
            let _ = progress.send(p);
        };
        let may_read = |path: &Path, hardlinked: bool| self.may_read(tool, path, hardlinked);
        let mut invocation = Invocation {
            root: &self.root,
            arguments,
            paths,
            cancel,
            progress: &mut report,
            may_read: &may_read,
            deadline: Some(Instant::now() + self.limits.walk_budget),
        };
        match tool.runner {
            Runner::Builtin(builtin) => builtin.run(&mut invocation),
        }
    }

    /// Decides a read of one file a tool found by itself (search walks a
    /// tree by handles, never through a symlink, so the file is where it
    /// says). `hardlinked` comes from the opened file's link count: a file
    /// with another name may be that name's secret, or lie outside the
    /// root, so it is judged as outside, as `resolve` judges it. These
    /// per-file decisions gate what the already audited call reads; they
    /// are not recorded one by one.
    fn may_read(&self, tool: &RegisteredTool, path: &Path, hardlinked: bool) -> bool {
        let mut facts = ToolFacts::without_paths(self.transport);
        facts.reads_inside_root = path.starts_with(self.root.path()) && !hardlinked;
        if hardlinked {
            facts
                .path_classes
                .insert(crate::facts::HARDLINKED.to_owned());
        }
        facts.touches_vcs_metadata = is_vcs_metadata(path);
        let classes = self.engine.path_classes();
        classes.classify_into(path, &mut facts.path_classes);
        if let Ok(relative) = path.strip_prefix(self.root.path()) {
            classes.classify_into(relative, &mut facts.path_classes);
        }
        self.decide(ToolAction::Call, tool, &facts).outcome == Outcome::Allow
    }

    /// The capabilities the tool requires that the client's tier lacks.
    fn missing_capabilities(&self, spec: &ToolSpec) -> Vec<String> {
        let has: BTreeSet<&str> = self
            .engine
            .tier_capabilities(&self.client.tier)
            .iter()
            .map(String::as_str)
            .collect();
        spec.required_capabilities
            .iter()
            .filter(|c| !has.contains(c.as_str()))
            .cloned()
            .collect()
    }
}

/// The determining policies of a decision, as a record keeps them.
fn recorded_policies(decision: &Decision) -> Vec<RecordedPolicy> {
    decision
        .policies
        .iter()
        .map(|p| RecordedPolicy {
            id: p.id.clone(),
            reason: p.reason.to_string(),
        })
        .collect()
}
