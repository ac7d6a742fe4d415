//! A call of one of the agent harness's own tools (or of a downstream
//! server's tool the harness reaches directly), through the keeper:
//! validated, judged on its path facts, decided and recorded. Nothing runs
//! here: the harness runs the tool once told, so the answer goes back only
//! after the decision record is durable.

use serde_json::Value;

use super::records::Trail;
use super::{AuditUnavailable, Keeper};
use crate::pdp::{Cause, Decision, ToolAction};
use crate::tools::{Runner, ToolId};

/// What the keeper made of a harness tool call.
#[derive(Debug)]
pub enum HarnessVerdict {
    /// Decided by the policies (and recorded).
    Decided(Decision),
    /// Not a harness tool portcullis knows: denied.
    Unknown,
    /// The input does not fit what portcullis knows of the tool, or a path
    /// in it cannot be judged: denied, with the reason.
    Invalid(String),
}

/// One harness tool call, as the hook adapter hands it over.
pub struct HarnessCall<'a> {
    /// The harness's id of the call (`tool_use_id`).
    pub request_id: &'a str,
    /// The harness's name of the tool (`Read`, `Write`, `mcp__files__read_text_file`, ...).
    pub tool: &'a str,
    /// The tool it is to portcullis: a harness tool, or a pinned tool of
    /// a downstream server the harness reaches directly.
    pub id: ToolId,
    /// The input as the harness sent it: its digest is recorded.
    pub input: &'a Value,
    /// The input with every path absolute, as the harness will resolve
    /// it: the facts are computed from this.
    pub judged: &'a Value,
}

impl Keeper {
    /// Decides and records a harness tool call. An unknown tool or a bad
    /// input is recorded too, and answered as a denial whether or not that
    /// record lands; a decision is answered only once its record is durable.
    pub async fn harness_call(
        &self,
        call: &HarnessCall<'_>,
    ) -> Result<HarnessVerdict, AuditUnavailable> {
        let this = self.pinned();
        let mut trail = Trail::new(call.request_id, call.tool, Some(call.input));
        trail.action = ToolAction::Call;
        let id = call.id.clone();
        let Some(tool) = this.setting.registry.get(&id).filter(|tool| {
            matches!(
                tool.runner,
                Runner::Harness | Runner::Downstream { pinned: Some(_) }
            )
        }) else {
            let message = format!("Unknown tool: {}", call.tool);
            this.record_refusal(&mut trail, Cause::UnknownTool, &message)
                .await;
            return Ok(HarnessVerdict::Unknown);
        };
        trail.resource = Some(id);
        trail.definition = Some(tool.definition.clone());
        if let Err(err) = tool.arguments.check(call.judged) {
            let message = err.to_string();
            this.record_refusal(&mut trail, Cause::InvalidArguments, &message)
                .await;
            return Ok(HarnessVerdict::Invalid(message));
        }
        let facts = match this.setting.engine.call_facts(
            &tool.spec,
            call.judged,
            &this.setting.root,
            this.transport,
        ) {
            Ok(call) => call.facts,
            Err(err) => {
                let message = err.to_string();
                this.record_refusal(&mut trail, Cause::InvalidArguments, &message)
                    .await;
                return Ok(HarnessVerdict::Invalid(message));
            }
        };
        let decision = this.decide(ToolAction::Call, tool, &facts);
        this.record(&mut trail, &facts, &decision).await?;
        Ok(HarnessVerdict::Decided(decision))
    }
}
