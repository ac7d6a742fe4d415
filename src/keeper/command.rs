//! The command gate through the keeper: judged, recorded, never run.

use serde_json::json;

use super::{GateFailure, Keeper};
use crate::audit::{DecisionRecord, Kind, RecordedAction, sha256_hex};
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
            transport: self.transport,
            client: self.client_ref(),
            action: RecordedAction::RunCommand,
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
            cause: decision.cause,
            policies: super::records::recorded_policies(decision),
            errors: decision.errors.clone(),
            message: None,
        };
        let body = serde_json::to_value(record).map_err(|_| GateFailure::AuditUnavailable)?;
        self.audit
            .append_many(vec![(Kind::Decision, body)])
            .await
            .map_err(|_| GateFailure::AuditUnavailable)?;
        Ok(answer)
    }
}
