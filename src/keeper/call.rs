//! The steps of one call, in order. Each hands on what the next needs, or
//! ends the call with its outcome (recorded where a decision was made).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::origin;
use super::records::Trail;
use super::result_fit::misfit;
use super::{Approval, Authorized, CallOutcome, Keeper};
use crate::bridge::{Caller, Ended};
use crate::facts::{ToolCallFacts, ToolFacts, ToolInput, forwarded_arguments, is_vcs_metadata};
use crate::pdp::{
    Cause, Decision, INBOX_CHANNEL, INBOX_MAX_APPROVERS, ONE_APPROVER, Outcome, Query, ToolAction,
};
use crate::servers::{Forwarded, ToolStatus};
use crate::tools::{
    BridgeTool, CancelFlag, Invocation, Progress, RegisteredTool, Runner, ToolFailure, ToolId,
    ToolSpec,
};

/// The id of the default policy that refuses a tool whose required
/// capabilities the client's tier lacks. When it is among the policies that
/// decided a denial, the refusal names the missing capabilities; when
/// another policy decided (a hard constraint, say), it does not.
const CAPABILITY_POLICY: &str = "tier.capability_gate";

type Step<T> = Result<T, CallOutcome>;

/// What stops a call early: its caller cancelling it, or the service
/// shutting down.
struct Stop<'a> {
    caller: CancellationToken,
    shutdown: &'a CancellationToken,
}

impl Stop<'_> {
    async fn requested(&self) {
        tokio::select! {
            () = self.caller.cancelled() => {}
            () = self.shutdown.cancelled() => {}
        }
    }

    /// Why the call was stopped, as recorded; `None` while it was not.
    fn why(&self) -> Option<&'static str> {
        if self.shutdown.is_cancelled() {
            Some("the service shut down")
        } else if self.caller.is_cancelled() {
            Some("cancelled by the caller")
        } else {
            None
        }
    }
}

impl Keeper {
    /// Decides a call and, if allowed and recorded, runs it. Progress goes
    /// to `progress` (when the caller asked for it) while the tool runs; the
    /// sender is dropped before this returns, so a forwarder draining it
    /// finishes before the result is sent.
    pub async fn call(
        self: &Arc<Self>,
        request_id: &str,
        name: &str,
        arguments: Value,
        approval: Approval,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        cancelled: CancellationToken,
    ) -> CallOutcome {
        self.call_telling(
            request_id, name, arguments, approval, progress, cancelled, None,
        )
        .await
    }

    /// [`Self::call`], telling `decided` once the call is allowed and its
    /// decision recorded, before the tool runs: a caller that runs long
    /// calls as tasks makes the task only then (a call that ends before
    /// it runs is answered at once).
    #[expect(
        clippy::too_many_arguments,
        reason = "the call's own parts, plus the one signal only the task path asks for"
    )]
    pub async fn call_telling(
        self: &Arc<Self>,
        request_id: &str,
        name: &str,
        arguments: Value,
        approval: Approval,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        cancelled: CancellationToken,
        decided: Option<oneshot::Sender<()>>,
    ) -> CallOutcome {
        let this = Arc::new(self.pinned());
        let _in_flight = Arc::clone(&this.in_flight).read_owned().await;
        let _counted = crate::metrics::call_started();
        if this.shutdown.is_cancelled() {
            // The service is going away: nothing new is decided or run.
            return CallOutcome::Cancelled;
        }
        let stop = Stop {
            caller: cancelled,
            shutdown: &this.shutdown,
        };
        let (tool, call, authorized) = {
            let mut trail = Trail::new(request_id, name, Some(&arguments));
            match this
                .decide_and_record(&mut trail, &arguments, &approval)
                .await
            {
                Ok(allowed) => allowed,
                Err(outcome) => return outcome,
            }
        };
        if let Some(decided) = decided {
            // The receiver may be gone (its request ended): the call runs
            // all the same, as decided.
            let _ = decided.send(());
        }
        let seq = authorized.decision_seq();
        let (slot, waited_ms) = match this.slot(request_id, seq, &stop).await {
            Ok(slot) => slot,
            Err(outcome) => return outcome,
        };
        let (outcome, detail) = this
            .run(&tool, arguments, call, authorized, progress, &stop)
            .await;
        drop(slot);
        this.record_end(request_id, seq, waited_ms, &outcome, stop.why(), detail);
        outcome
    }

    /// discover → validate → facts → decide → approve → record.
    async fn decide_and_record(
        &self,
        trail: &mut Trail<'_>,
        arguments: &Value,
        approval: &Approval,
    ) -> Step<(ToolId, ToolCallFacts, Authorized)> {
        let tool = self.discover(trail).await?;
        trail.action = ToolAction::Call;
        self.callable(tool, trail).await?;
        self.validate(tool, arguments, trail).await?;
        let call = self.facts(tool, arguments, trail).await?;
        let decision = self.decide_call(tool, arguments, &call.facts, approval, trail);
        let authorized = self
            .authorize(tool, arguments, &call, decision, approval, trail)
            .await?;
        Ok((tool.spec.id.clone(), call, authorized))
    }

    /// May the client see the tool at all? If not, it does not exist for
    /// this client. The discovery record goes out with the call's own, in
    /// one batch: one durable write before the call, not two.
    async fn discover(&self, trail: &mut Trail<'_>) -> Step<&RegisteredTool> {
        let unknown = || CallOutcome::UnknownTool(trail.tool.to_owned());
        let Some(tool) = self.tool_named(trail.tool) else {
            let message = format!("Unknown tool: {}", trail.tool);
            let outcome = unknown();
            self.record_refusal(trail, Cause::UnknownTool, &message)
                .await;
            return Err(outcome);
        };
        trail.resource = Some(tool.spec.id.clone());
        trail.definition = Some(tool.definition.clone());
        let no_paths = ToolFacts::without_paths(self.transport);
        let discovery = self.decide(ToolAction::Discover, tool, &no_paths);
        let body = self
            .decision_body(trail, Some((&no_paths, &discovery)), None)
            .map_err(|_| CallOutcome::AuditUnavailable)?;
        if discovery.outcome != Outcome::Allow {
            let outcome = unknown();
            let _ = self.append(vec![body]).await;
            return Err(outcome);
        }
        trail.pending.push(body);
        Ok(tool)
    }

    /// A downstream tool is called only while its server runs and its
    /// definition is the one pinned: a changed tool may now do something
    /// nobody reviewed.
    async fn callable(&self, tool: &RegisteredTool, trail: &mut Trail<'_>) -> Step<()> {
        let cause = match self.downstream_status(tool).await {
            ToolStatus::Ready => return Ok(()),
            ToolStatus::NotPinned => Cause::ToolNotPinned,
            ToolStatus::Changed => {
                tracing::warn!(tool = %tool.spec.id, "a downstream tool's definition differs from its pin");
                Cause::ToolChanged
            }
            ToolStatus::ServerUnavailable => Cause::ServerUnavailable,
        };
        let message = Decision::refusal_reason(cause);
        self.record_refusal(trail, cause, &message).await;
        Err(CallOutcome::Refused(cause, message))
    }

    async fn validate(
        &self,
        tool: &RegisteredTool,
        arguments: &Value,
        trail: &mut Trail<'_>,
    ) -> Step<()> {
        if let Err(err) = tool.arguments.check(arguments) {
            let message = err.to_string();
            self.record_refusal(trail, Cause::InvalidArguments, &message)
                .await;
            return Err(CallOutcome::InvalidArguments(message));
        }
        Ok(())
    }

    async fn facts(
        &self,
        tool: &RegisteredTool,
        arguments: &Value,
        trail: &mut Trail<'_>,
    ) -> Step<ToolCallFacts> {
        // A downstream server that works on a root of its own has its
        // paths judged against that root.
        let root = match (&tool.runner, &self.fleet) {
            (Runner::Downstream { .. }, Some(fleet)) => fleet
                .root_of(tool.spec.id.server())
                .unwrap_or(&self.setting.root),
            _ => &self.setting.root,
        };
        match self
            .setting
            .engine
            .call_facts(&tool.spec, arguments, root, self.transport)
        {
            Ok(call) => Ok(call),
            Err(err) => {
                let message = format!("invalid arguments: {err}");
                self.record_refusal(trail, Cause::InvalidArguments, &message)
                    .await;
                Err(CallOutcome::InvalidArguments(message))
            }
        }
    }

    /// The decision, and with a human's grant for this very call, the
    /// decision with the approval.
    fn decide_call(
        &self,
        tool: &RegisteredTool,
        arguments: &Value,
        facts: &ToolFacts,
        approval: &Approval,
        trail: &mut Trail<'_>,
    ) -> Decision {
        let first = match approval {
            Approval::Inbox => (INBOX_CHANNEL, INBOX_MAX_APPROVERS),
            _ => (self.approval_channel(), ONE_APPROVER),
        };
        let decision = self.decide_via(ToolAction::Call, tool, facts, first);
        (trail.channel, trail.approvers) = first;
        if let Approval::AskableOrInbox = approval
            && decision.outcome == Outcome::Deny
        {
            // The client's channel is refused: would the inbox's do?
            let query = Query::tool(
                &self.client.name,
                ToolAction::Call,
                &tool.spec.id,
                facts,
                INBOX_CHANNEL,
            );
            let via_inbox = self.setting.engine.decide(&query.by(INBOX_MAX_APPROVERS));
            if via_inbox.outcome == Outcome::Ask {
                (trail.channel, trail.approvers) = (INBOX_CHANNEL, INBOX_MAX_APPROVERS);
                return via_inbox;
            }
        }
        let Approval::Granted(grant) = approval else {
            return decision;
        };
        if grant.digest() != self.digest(&tool.spec.id, arguments) {
            return decision;
        }
        // Asked through one channel, approved through another: the
        // decision without the approval is asked again through the one the
        // approval came by.
        let granted = (grant.channel(), grant.approvers());
        let unapproved = if granted == first {
            decision
        } else {
            self.decide_via(ToolAction::Call, tool, facts, granted)
        };
        if unapproved.outcome != Outcome::Ask {
            return unapproved;
        }
        trail.approved = true;
        (trail.channel, trail.approvers) = granted;
        let query = Query::tool(
            &self.client.name,
            ToolAction::Call,
            &tool.spec.id,
            facts,
            grant.channel(),
        );
        self.setting
            .engine
            .decide(&query.approved().by(grant.approvers()))
    }

    /// Records the decision and turns it into a proof to run, or the
    /// outcome that ends the call. Audit before effect: without a durable
    /// record nothing runs and no question is asked.
    async fn authorize(
        &self,
        tool: &RegisteredTool,
        arguments: &Value,
        call: &ToolCallFacts,
        decision: Decision,
        approval: &Approval,
        trail: &mut Trail<'_>,
    ) -> Step<Authorized> {
        let seq = self.record(trail, &call.facts, &decision).await;
        match (decision.outcome, seq) {
            (Outcome::Deny, _) if trail.approved => Err(CallOutcome::ApprovalRefused(decision)),
            (Outcome::Deny, _) => {
                let missing = self.missing_capabilities(&tool.spec, &decision);
                Err(CallOutcome::Denied(decision, missing))
            }
            (_, Err(_)) => Err(CallOutcome::AuditUnavailable),
            (Outcome::Ask, Ok(_))
                if trail.channel == INBOX_CHANNEL
                    || matches!(approval, Approval::Askable | Approval::AskableOrInbox) =>
            {
                let digest = self.digest(&tool.spec.id, arguments);
                let question = self.question(tool, arguments, &call.paths, &decision);
                let asked = Box::new(self.asked_call(tool, call));
                Err(CallOutcome::NeedsApproval {
                    decision,
                    digest,
                    question,
                    via: trail.channel,
                    asked,
                })
            }
            (Outcome::Ask, Ok(_)) => Err(CallOutcome::ApprovalUnavailable(decision)),
            (Outcome::Allow, Ok(seq)) => Ok(Authorized::recorded(seq)),
        }
    }

    /// Waits for one of the client's slots; a call cancelled while it
    /// waits never runs.
    async fn slot(
        &self,
        request_id: &str,
        decision_seq: u64,
        stop: &Stop<'_>,
    ) -> Step<(OwnedSemaphorePermit, u64)> {
        let waiting = Instant::now();
        let slot = tokio::select! {
            slot = Arc::clone(&self.slots).acquire_owned() => slot.ok(),
            () = stop.requested() => None,
        };
        let waited_ms = u64::try_from(waiting.elapsed().as_millis()).unwrap_or(u64::MAX);
        match slot {
            Some(slot) => Ok((slot, waited_ms)),
            None => {
                self.record_outcome(json!({
                    "decision_seq": decision_seq, "session": self.session,
                    "request_id": request_id, "status": "cancelled",
                    "reason": format!("{} while waiting for a slot", stop.why().unwrap_or("cancelled")),
                    "waited_ms": waited_ms}));
                Err(CallOutcome::Cancelled)
            }
        }
    }

    /// Runs the tool: a built-in off the async runtime, a downstream one
    /// through its server, a bridge tool through the bridge. A cancel stops
    /// it and waits for it to stop, so no side effect and no progress
    /// outlives the call. Beside the outcome: what its record adds.
    async fn run(
        self: &Arc<Self>,
        tool: &ToolId,
        arguments: Value,
        call: ToolCallFacts,
        authorized: Authorized,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        stop: &Stop<'_>,
    ) -> (CallOutcome, Option<Value>) {
        match self.setting.registry.get(tool).map(|t| &t.runner) {
            Some(Runner::Downstream { .. }) => {
                let arguments = forwarded_arguments(arguments, &call.paths);
                let outcome = self
                    .forward(tool, arguments, progress, authorized, stop)
                    .await;
                return (outcome, None);
            }
            Some(Runner::Bridge(bridge_tool)) => {
                return self
                    .run_bridge(*bridge_tool, &arguments, progress, authorized, stop)
                    .await;
            }
            _ => {}
        }
        let cancel = CancelFlag::default();
        let keeper = Arc::clone(self);
        let tool = tool.clone();
        let mut task = tokio::task::spawn_blocking({
            let cancel = cancel.clone();
            move || keeper.run_blocking(&tool, &arguments, &call, &cancel, progress, &authorized)
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
            () = stop.requested() => {
                cancel.cancel();
                let _ = task.await;
                CallOutcome::Cancelled
            }
        };
        (outcome, None)
    }

    /// Runs a bridge tool for this client on this connection. The proof is
    /// spent here, as for a forwarded call.
    async fn run_bridge(
        &self,
        tool: BridgeTool,
        arguments: &Value,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        authorized: Authorized,
        stop: &Stop<'_>,
    ) -> (CallOutcome, Option<Value>) {
        let Some(bridge) = &self.bridge else {
            return (CallOutcome::Failed(ToolFailure::ServerUnavailable), None);
        };
        let _spent = authorized;
        let caller = Caller {
            owner: &self.client.fingerprint,
            connection: self.connection(),
            stateless: self.connection.is_none(),
        };
        let ran = bridge
            .run(
                tool,
                &caller,
                arguments,
                self.fleet.as_deref(),
                progress,
                stop.requested(),
            )
            .await;
        let outcome = match ran.result {
            Ok(value) => CallOutcome::Completed(value),
            Err(Ended::Failed(failure)) => CallOutcome::Failed(failure),
            Err(Ended::AgentError(result)) => {
                // The agent's own error, relayed through the bridge tool.
                let (agent, _) = bridge.agent();
                CallOutcome::Relayed {
                    result: origin::from_downstream(result, agent, tool.name()),
                    is_error: true,
                }
            }
            Err(Ended::Cancelled) => CallOutcome::Cancelled,
        };
        (outcome, ran.detail)
    }

    /// Forwards a decided call to the tool's server. The proof is spent
    /// here: only a recorded allow reaches a downstream.
    async fn forward(
        &self,
        tool: &ToolId,
        arguments: Value,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        authorized: Authorized,
        stop: &Stop<'_>,
    ) -> CallOutcome {
        let Some(fleet) = &self.fleet else {
            return CallOutcome::Failed(ToolFailure::ServerUnavailable);
        };
        let _spent = authorized;
        let forwarded = fleet
            .forward(
                tool.server(),
                tool.name(),
                arguments,
                progress,
                stop.requested(),
            )
            .await;
        match forwarded {
            Forwarded::Result { result, is_error }
                if !is_error || fleet.passes_errors(tool.server()) =>
            {
                let output = self
                    .setting
                    .registry
                    .get(tool)
                    .and_then(|t| t.output.as_ref());
                match output.and_then(|output| misfit(&result, output)) {
                    Some(why) => CallOutcome::InvalidResult {
                        why,
                        content: fleet
                            .passes_errors(tool.server())
                            .then(|| result.get("content").cloned())
                            .flatten(),
                    },
                    None => CallOutcome::Relayed {
                        result: origin::from_downstream(result, tool.server(), tool.name()),
                        is_error,
                    },
                }
            }
            Forwarded::Result { .. } => CallOutcome::Failed(ToolFailure::Downstream),
            Forwarded::Unavailable | Forwarded::AgentFailed => {
                CallOutcome::Failed(ToolFailure::ServerUnavailable)
            }
            Forwarded::TimedOut => CallOutcome::Failed(ToolFailure::TimedOut),
            Forwarded::Failed => CallOutcome::Failed(ToolFailure::Internal),
            Forwarded::Cancelled => CallOutcome::Cancelled,
        }
    }

    fn record_end(
        &self,
        request_id: &str,
        decision_seq: u64,
        waited_ms: u64,
        outcome: &CallOutcome,
        stopped: Option<&'static str>,
        detail: Option<Value>,
    ) {
        let (status, reason, failure) = match outcome {
            CallOutcome::Completed(_)
            | CallOutcome::Relayed {
                is_error: false, ..
            } => ("executed", None, None),
            CallOutcome::Relayed { is_error: true, .. } => (
                "failed",
                Some(ToolFailure::Downstream.to_string()),
                Some(ToolFailure::Downstream.code()),
            ),
            CallOutcome::Failed(failure) => {
                ("failed", Some(failure.to_string()), Some(failure.code()))
            }
            CallOutcome::InvalidResult { why, .. } => (
                "failed",
                Some(why.clone()),
                Some(ToolFailure::DownstreamInvalidResult.code()),
            ),
            _ => ("cancelled", stopped.map(str::to_owned), None),
        };
        let truncated = match outcome {
            CallOutcome::Completed(output) => output.get("truncated").cloned(),
            _ => None,
        };
        let mut body = json!({
            "decision_seq": decision_seq, "session": self.session,
            "request_id": request_id, "status": status, "reason": reason, "failure": failure,
            "waited_ms": waited_ms, "truncated": truncated});
        if let Some(detail) = detail {
            body["bridge"] = detail;
        }
        self.record_outcome(body);
    }

    fn run_blocking(
        &self,
        tool_id: &ToolId,
        arguments: &Value,
        call: &ToolCallFacts,
        cancel: &CancelFlag,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        authorized: &Authorized,
    ) -> Result<Value, ToolFailure> {
        let tool = self
            .setting
            .registry
            .get(tool_id)
            .ok_or(ToolFailure::Internal)?;
        let mut report = |p: Progress| {
            // The receiver is gone only when the call is over; nothing to tell.
            if let Some(progress) = &progress {
                let _ = progress.send(p);
            }
        };
        // Each file's read is the same call, so it carries the input the
        // call was decided on.
        let input = call.facts.input.as_ref();
        let may_read = |path: &Path, hardlinked: bool| self.may_read(tool, input, path, hardlinked);
        let mut invocation = Invocation {
            root: &self.setting.root,
            arguments,
            paths: &call.paths,
            cancel,
            progress: &mut report,
            may_read: &may_read,
            deadline: Some(Instant::now() + self.limits.walk_budget),
        };
        // Only built-in tools get this far: `run` forwards the others.
        let Runner::Builtin(builtin) = tool.runner else {
            return Err(ToolFailure::Internal);
        };
        builtin.run(&mut invocation, authorized)
    }

    /// Decides a read of one file a tool found by itself (search walks a
    /// tree by handles, never through a symlink, so the file is where it
    /// says). `hardlinked` comes from the opened file's link count: a file
    /// with another name may be that name's secret, or lie outside the
    /// root, so it is judged as outside, as `resolve` judges it. These
    /// per-file decisions gate what the already recorded call reads; they
    /// are not recorded one by one.
    fn may_read(
        &self,
        tool: &RegisteredTool,
        input: Option<&ToolInput>,
        path: &Path,
        hardlinked: bool,
    ) -> bool {
        let mut facts = ToolFacts::without_paths(self.transport);
        facts.input = input.cloned();
        facts.reads_inside_root = path.starts_with(self.setting.root.path()) && !hardlinked;
        if hardlinked {
            facts
                .path_classes
                .insert(crate::facts::HARDLINKED.to_owned());
        }
        facts.touches_vcs_metadata = is_vcs_metadata(path);
        let classes = self.setting.engine.path_classes();
        classes.classify_into(path, &mut facts.path_classes);
        if let Ok(relative) = path.strip_prefix(self.setting.root.path()) {
            classes.classify_into(relative, &mut facts.path_classes);
        }
        self.decide(ToolAction::Call, tool, &facts).outcome == Outcome::Allow
    }

    /// The capabilities the tool requires that the client's tier lacks,
    /// named only when the tier's capability policy took part in the
    /// denial.
    fn missing_capabilities(&self, spec: &ToolSpec, decision: &Decision) -> Vec<String> {
        if !decision.policies.iter().any(|p| p.id == CAPABILITY_POLICY) {
            return Vec::new();
        }
        let has: BTreeSet<&str> = self
            .setting
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
