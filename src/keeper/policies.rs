//! Reading the policies in force: decided and recorded like any call.

use super::{AuditUnavailable, Keeper};
use crate::audit::{DecisionRecord, RecordedAction};
use crate::pdp::{NO_APPROVAL, Outcome, Query};

impl Keeper {
    /// Whether this client may list and read the policy resources. The
    /// decision is recorded first; an unrecorded one is a refusal.
    pub async fn policies_readable(&self, request_id: &str) -> Result<bool, AuditUnavailable> {
        let decision = self
            .engine
            .decide(&Query::policies(&self.client.name, self.transport));
        let record = DecisionRecord {
            session: self.session.clone(),
            request_id: request_id.to_owned(),
            transport: self.transport,
            client: self.client_ref(),
            action: RecordedAction::ReadPolicy,
            tool: "policies".to_owned(),
            resource: None,
            arguments_sha256: None,
            facts: None,
            approved: false,
            command: None,
            approval_channel: NO_APPROVAL.to_owned(),
            entities: self
                .engine
                .policy_entities(&self.client.name, &self.client.tier),
            policy_set: (**self.engine.identity()).clone(),
            decision: decision.outcome,
            cause: decision.cause,
            policies: super::records::recorded_policies(&decision),
            errors: decision.errors.clone(),
            message: None,
        };
        let body = serde_json::to_value(record).map_err(|_| AuditUnavailable)?;
        self.append(vec![body]).await?;
        Ok(decision.outcome == Outcome::Allow)
    }
}
