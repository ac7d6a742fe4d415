//! The gate keeper: the one path from a tool request to a tool run.
//!
//! authenticate (done before the keeper exists) → look up → facts → decide →
//! run → outcome. Every adapter that can run a tool (the MCP server's direct
//! tools and its `tool_call` wrapper) goes through [`Keeper::call`]; nothing
//! else calls a tool's runner.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::facts::{ResolvedPath, Root, ToolFacts, Transport, is_vcs_metadata, tool_call_facts};
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
    /// The tool ran.
    Completed(Value),
    /// The tool ran and failed.
    Failed(ToolFailure),
    /// The caller cancelled; nothing is sent back.
    Cancelled,
}

pub struct Keeper {
    engine: Engine,
    registry: Registry,
    root: Root,
    client: ClientIdentity,
    transport: Transport,
}

impl Keeper {
    pub fn new(
        engine: Engine,
        registry: Registry,
        root: Root,
        client: ClientIdentity,
        transport: Transport,
    ) -> Self {
        Self {
            engine,
            registry,
            root,
            client,
            transport,
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn client(&self) -> &ClientIdentity {
        &self.client
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

    /// The tools this client may see, in a stable order.
    pub fn discoverable(&self) -> Vec<&RegisteredTool> {
        let facts = ToolFacts::without_paths(self.transport);
        self.registry
            .iter()
            .filter(|tool| {
                self.decide(ToolAction::Discover, tool, &facts).outcome == Outcome::Allow
            })
            .collect()
    }

    /// The tool called `name`, if this client may discover it.
    fn discoverable_by_name(&self, name: &str) -> Option<&RegisteredTool> {
        let tool = self
            .registry
            .iter()
            .find(|tool| Self::mcp_name(&tool.spec) == name)?;
        let facts = ToolFacts::without_paths(self.transport);
        (self.decide(ToolAction::Discover, tool, &facts).outcome == Outcome::Allow).then_some(tool)
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

    /// Decides a call and, if allowed, runs it. Progress reports go to
    /// `progress` while the tool runs; the sender is dropped before this
    /// returns, so a forwarder draining it finishes before the result is sent.
    pub async fn call(
        self: &Arc<Self>,
        name: &str,
        arguments: Value,
        progress: mpsc::UnboundedSender<Progress>,
        cancelled: CancellationToken,
    ) -> CallOutcome {
        let Some(tool) = self.discoverable_by_name(name) else {
            return CallOutcome::UnknownTool(name.to_owned());
        };
        if let Err(err) = tool.arguments.check(&arguments) {
            return CallOutcome::InvalidArguments(err.to_string());
        }
        let call = match tool_call_facts(
            &tool.spec,
            &arguments,
            &self.root,
            self.engine.path_classes(),
            self.transport,
        ) {
            Ok(call) => call,
            Err(err) => return CallOutcome::InvalidArguments(format!("invalid arguments: {err}")),
        };
        let decision = self.decide(ToolAction::Call, tool, &call.facts);
        match decision.outcome {
            Outcome::Deny => {
                let missing = self.missing_capabilities(&tool.spec);
                return CallOutcome::Denied(decision, missing);
            }
            Outcome::Ask => return CallOutcome::ApprovalUnavailable(decision),
            Outcome::Allow => {}
        }

        let cancel = CancelFlag::default();
        let keeper = Arc::clone(self);
        let tool_id = tool.spec.id.clone();
        let mut task = tokio::task::spawn_blocking({
            let cancel = cancel.clone();
            move || keeper.run_blocking(&tool_id, &arguments, &call.paths, &cancel, progress)
        });
        tokio::select! {
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
        }
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
        let may_read = |path: &Path| self.may_read(tool, path);
        let mut invocation = Invocation {
            root: &self.root,
            arguments,
            paths,
            cancel,
            progress: &mut report,
            may_read: &may_read,
        };
        match tool.runner {
            Runner::Builtin(builtin) => builtin.run(&mut invocation),
        }
    }

    /// Decides a read of one file a tool found by itself (search walks a
    /// tree without following symlinks, so the file is where it says).
    fn may_read(&self, tool: &RegisteredTool, path: &Path) -> bool {
        let mut facts = ToolFacts::without_paths(self.transport);
        facts.reads_inside_root = path.starts_with(self.root.path());
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
