//! The command gate through the keeper: judged, recorded, never run.

use serde_json::json;

use super::{GateFailure, Keeper};
use crate::audit::{DecisionRecord, RecordedAction, sha256_hex};
use crate::gate::{GATE_APPROVAL_CHANNEL, GateAnswer, judge};

impl Keeper {
    /// Judges a shell command for the command gate and records the
    /// decision. Nothing runs: the answer goes back to the harness, and
    /// only once its record is durable.
    pub async fn gate(
        &self,
        request_id: &str,
        command: &str,
        cwd: Option<&str>,
    ) -> Result<GateAnswer, GateFailure> {
        let this = self.pinned();
        let answer = judge(
            &this.setting.engine,
            &this.client.name,
            &this.setting.root,
            cwd,
            command,
            this.transport,
        )?;
        let entities = this
            .setting
            .engine
            .command_entities(&this.client.name, &this.client.tier);
        let record = DecisionRecord {
            arguments_sha256: Some(sha256_hex(&json!({"command": command, "cwd": cwd}))),
            command: Some(answer.facts.clone()),
            ..this.base_record(
                request_id,
                RecordedAction::RunCommand,
                "gate",
                &answer.decision,
                entities,
                GATE_APPROVAL_CHANNEL,
            )
        };
        this.record_decision(record)
            .await
            .map_err(|_| GateFailure::AuditUnavailable)?;
        Ok(answer)
    }
}
