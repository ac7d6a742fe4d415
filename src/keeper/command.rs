//! The command gate through the keeper: judged and recorded. `gate` only
//! answers; `exec` runs what was allowed or approved, and records how it
//! ended.

use serde_json::{Value, json};

use super::{AuditUnavailable, GateFailure, Keeper};
use crate::audit::{DecisionRecord, Kind, RecordedAction};
use crate::canonical::sha256_hex;
use crate::gate::{GATE_APPROVAL_CHANNEL, GateAnswer, judge};

impl Keeper {
    /// Judges a shell command for the command gate and records the
    /// decision. Nothing runs: the answer goes back to the harness, and
    /// only once its record is durable.
    /// `confined` says, for a hook, whether the harness runs the command
    /// through `exec`.
    pub async fn gate(
        &self,
        request_id: &str,
        command: &str,
        cwd: Option<&str>,
        confined: Option<bool>,
    ) -> Result<GateAnswer, GateFailure> {
        self.gate_recorded(request_id, command, cwd, false, confined)
            .await
            .map(|(answer, _)| answer)
    }

    /// Judges a command that is about to run and records the decision,
    /// with `approved` when a human's approval of this exact command came
    /// with it. The decision's seq, for the outcome record.
    pub async fn gate_for_run(
        &self,
        request_id: &str,
        command: &str,
        cwd: Option<&str>,
        approved: bool,
    ) -> Result<(GateAnswer, u64), GateFailure> {
        self.gate_recorded(request_id, command, cwd, approved, None)
            .await
    }

    async fn gate_recorded(
        &self,
        request_id: &str,
        command: &str,
        cwd: Option<&str>,
        approved: bool,
        confined: Option<bool>,
    ) -> Result<(GateAnswer, u64), GateFailure> {
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
            command: Some(answer.facts.for_the_record()),
            approved,
            confined,
            ..this.base_record(
                request_id,
                RecordedAction::RunCommand,
                "gate",
                &answer.decision,
                entities,
                GATE_APPROVAL_CHANNEL,
            )
        };
        let seq = this
            .record_decision(record)
            .await
            .map_err(|_| GateFailure::AuditUnavailable)?;
        Ok((answer, seq))
    }

    /// Records how a command `exec` ran ended (`detail`: its status, its
    /// duration, whether it was confined), durably: `exec` exits next.
    pub async fn record_run(
        &self,
        request_id: &str,
        decision_seq: u64,
        status: &str,
        detail: Value,
    ) -> Result<(), AuditUnavailable> {
        let this = self.pinned();
        let mut body = json!({
            "decision_seq": decision_seq, "session": this.session,
            "request_id": request_id, "status": status});
        if let (Some(body), Value::Object(detail)) = (body.as_object_mut(), detail) {
            body.extend(detail);
        }
        this.audit
            .append_many(vec![(Kind::Outcome, body)])
            .await
            .map(|_| ())
            .map_err(|err| {
                tracing::error!(error = %err, "an outcome record could not be written");
                AuditUnavailable
            })
    }
}
