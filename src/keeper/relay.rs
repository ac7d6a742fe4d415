//! Requests a downstream server makes of the client it serves: each is
//! decided (action `relay_request`) and recorded before anything reaches
//! the client, like a call.

use super::{AuditUnavailable, Keeper};
use crate::audit::{DecisionRecord, RecordedAction};
use crate::pdp::{NO_APPROVAL, Outcome, Query, server_uid};

impl Keeper {
    /// Whether `server`'s request `method` may reach this client. Only an
    /// allow relays: nobody can be asked while a server waits on its
    /// client, so an ask refuses as a deny does.
    pub async fn relay_allowed(
        &self,
        request_id: &str,
        server: &str,
        method: &str,
    ) -> Result<bool, AuditUnavailable> {
        let this = self.pinned();
        let uid = server_uid(server);
        let decision = this.setting.engine.decide(&Query::request(
            &this.client.name,
            &uid,
            method,
            this.transport,
        ));
        let entities =
            this.setting
                .engine
                .server_entities(&this.client.name, &this.client.tier, server);
        let record = DecisionRecord {
            resource: Some(server.to_owned()),
            ..this.base_record(
                request_id,
                RecordedAction::RelayRequest,
                method,
                &decision,
                entities,
                NO_APPROVAL,
            )
        };
        this.record_decision(record).await?;
        if decision.outcome != Outcome::Allow {
            tracing::info!(server, method, reason = %decision.reason(), "a downstream server's request was refused");
        }
        Ok(decision.outcome == Outcome::Allow)
    }
}
