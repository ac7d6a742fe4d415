//! An approver's answer to a question of the approval inbox, decided as
//! the `approve` action and recorded before it counts. Through the asking
//! call's keeper, so under the policy set the call was decided by, and with
//! the asking client in the record beside the approver.

use super::{AskedCall, AuditUnavailable, Keeper};
use crate::audit::{ApproverRef, RecordedAction, RecordedAnswer};
use crate::pdp::{ApproveAsked, ApproverRecord, Decision, INBOX_CHANNEL};

impl Keeper {
    /// May `approver` answer the question of this call? Recorded (the
    /// approver, the call's facts, the entities read) before it is
    /// returned: an answer that is not durable is not taken.
    pub async fn decide_approve(
        &self,
        request_id: &str,
        approver: &ApproverRef,
        asked: &AskedCall,
        answer: RecordedAnswer,
    ) -> Result<Decision, AuditUnavailable> {
        let record = ApproverRecord {
            name: approver.name.clone(),
            groups: approver.groups.clone(),
        };
        let (decision, entities) = self.setting.engine.decide_approve(
            &record,
            &asked.tool,
            ApproveAsked {
                facts: &asked.facts,
                client: &self.client.name,
                client_tier: &self.client.tier,
            },
        );
        crate::metrics::decided(
            decision.outcome.as_str(),
            decision.cause.as_str(),
            &asked.tool.to_string(),
            None,
        );
        let mut recorded = self.base_record(
            request_id,
            RecordedAction::Approve,
            &asked.name,
            &decision,
            entities,
            INBOX_CHANNEL,
        );
        recorded.resource = Some(asked.tool.to_string());
        recorded.facts = Some(asked.facts.clone());
        recorded.approver = Some(approver.clone());
        recorded.answer = Some(answer);
        self.record_decision(recorded).await?;
        Ok(decision)
    }
}
