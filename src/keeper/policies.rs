//! Reading the policies in force: decided and recorded like any call.

use super::{AuditUnavailable, Keeper};
use crate::audit::RecordedAction;
use crate::pdp::{NO_APPROVAL, Outcome, Query};

impl Keeper {
    /// Whether this client may list and read the policy resources. The
    /// decision is recorded first; an unrecorded one is a refusal.
    pub async fn policies_readable(&self, request_id: &str) -> Result<bool, AuditUnavailable> {
        let this = self.pinned();
        let decision = this
            .setting
            .engine
            .decide(&Query::policies(&this.client.name, this.transport));
        let entities = this
            .setting
            .engine
            .policy_entities(&this.client.name, &this.client.tier);
        this.record_decision(this.base_record(
            request_id,
            RecordedAction::ReadPolicy,
            "policies",
            &decision,
            entities,
            NO_APPROVAL,
        ))
        .await?;
        Ok(decision.outcome == Outcome::Allow)
    }
}
