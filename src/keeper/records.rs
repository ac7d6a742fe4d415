//! The keeper's decision records: what each one says, and writing them.

use serde_json::Value;

use super::{AuditUnavailable, Keeper};
use crate::audit::{ClientRef, DecisionRecord, Kind, RecordedAction, RecordedPolicy, ShadowRecord};
use crate::canonical::sha256_hex;
use crate::facts::ToolFacts;
use crate::pdp::{Cause, Decision, DeterminingPolicy, Outcome, ToolAction};
use crate::tools::ToolId;

/// What a call's decision records say beyond the decision itself, filled
/// in as the call goes through the pipeline; the records not yet written
/// go out with the next one, in one batch.
pub(super) struct Trail<'a> {
    pub request_id: &'a str,
    pub action: ToolAction,
    pub tool: &'a str,
    pub resource: Option<ToolId>,
    /// The hash of the tool's definition, once the tool is known.
    pub definition: Option<String>,
    pub arguments: Option<&'a Value>,
    pub approved: bool,
    /// The channel an approval of this call would come (or came) through.
    pub channel: &'static str,
    /// How many approve in the approved pass.
    pub approvers: u32,
    pub pending: Vec<Value>,
}

impl<'a> Trail<'a> {
    pub fn new(request_id: &'a str, tool: &'a str, arguments: Option<&'a Value>) -> Self {
        Self {
            request_id,
            action: ToolAction::Discover,
            tool,
            resource: None,
            definition: None,
            arguments,
            approved: false,
            channel: "",
            approvers: crate::pdp::ONE_APPROVER,
            pending: Vec::new(),
        }
    }
}

impl Keeper {
    pub(super) fn client_ref(&self) -> ClientRef {
        ClientRef {
            name: self.client.name.clone(),
            fingerprint: self.client.fingerprint.clone(),
            tier: self.client.tier.clone(),
        }
    }

    /// Appends decision records as one durable batch; their seqs.
    pub(super) async fn append(&self, bodies: Vec<Value>) -> Result<Vec<u64>, AuditUnavailable> {
        let records = bodies.into_iter().map(|b| (Kind::Decision, b)).collect();
        self.audit.append_many(records).await.map_err(|err| {
            tracing::error!(error = %err, "a decision record could not be written");
            AuditUnavailable
        })
    }

    /// Writes the trail's pending records and this decision's, in one
    /// batch; this one's seq when all are durable.
    pub(super) async fn record(
        &self,
        trail: &mut Trail<'_>,
        facts: &ToolFacts,
        decision: &Decision,
    ) -> Result<u64, AuditUnavailable> {
        let body = self.decision_body(trail, Some((facts, decision)), None)?;
        self.flush(trail, body).await
    }

    /// Records a refusal made before Cedar was asked (unknown tool, bad
    /// arguments). The client is refused whether or not this lands.
    pub(super) async fn record_refusal(&self, trail: &mut Trail<'_>, cause: Cause, message: &str) {
        let tool = trail
            .resource
            .as_ref()
            .map_or_else(|| "unknown".to_owned(), ToString::to_string);
        crate::metrics::decided("deny", cause.as_str(), &tool, None);
        if let Ok(body) = self.decision_body(trail, None, Some((cause, message))) {
            let _ = self.flush(trail, body).await;
        }
    }

    async fn flush(&self, trail: &mut Trail<'_>, body: Value) -> Result<u64, AuditUnavailable> {
        let mut bodies: Vec<Value> = trail.pending.drain(..).collect();
        bodies.push(body);
        let seqs = self.append(bodies).await?;
        seqs.last().copied().ok_or(AuditUnavailable)
    }

    /// The body of a decision record. A record that cannot be encoded is
    /// an audit failure: nothing it would allow may run.
    pub(super) fn decision_body(
        &self,
        trail: &Trail<'_>,
        decided: Option<(&ToolFacts, &Decision)>,
        refusal: Option<(Cause, &str)>,
    ) -> Result<Value, AuditUnavailable> {
        let shadow = decided.and_then(|(_, d)| shadow_record(d));
        let (outcome, cause, policies, errors) = match decided {
            Some((_, d)) => (d.outcome, d.cause, recorded_policies(d), d.errors.clone()),
            None => (
                Outcome::Deny,
                refusal.map_or(Cause::InvalidArguments, |r| r.0),
                Vec::new(),
                Vec::new(),
            ),
        };
        let entities = trail
            .resource
            .as_ref()
            .map(|id| {
                self.setting
                    .engine
                    .entities_for(&self.client.name, &self.client.tier, id)
            })
            .unwrap_or_default();
        let record = DecisionRecord {
            session: self.session.clone(),
            request_id: trail.request_id.to_owned(),
            transport: self.transport,
            client: self.client_ref(),
            action: match trail.action {
                ToolAction::Discover => RecordedAction::DiscoverTool,
                ToolAction::Call => RecordedAction::CallTool,
            },
            tool: trail.tool.to_owned(),
            resource: trail.resource.as_ref().map(ToString::to_string),
            arguments_sha256: trail.arguments.map(sha256_hex),
            tool_definition: trail.definition.clone(),
            facts: decided.map(|(facts, _)| facts.clone()),
            approved: trail.approved,
            command: None,
            approval_channel: if trail.channel.is_empty() {
                self.approval_channel()
            } else {
                trail.channel
            }
            .to_owned(),
            entities,
            policy_set: (**self.setting.engine.identity()).clone(),
            decision: outcome,
            cause,
            policies,
            errors,
            message: refusal.map(|r| r.1.to_owned()),
            shadow,
            confined: None,
            approver: None,
            answer: None,
            approvers: (trail.approvers != crate::pdp::ONE_APPROVER).then_some(trail.approvers),
        };
        serde_json::to_value(record).map_err(|err| {
            tracing::error!(error = %err, "a decision record could not be encoded");
            AuditUnavailable
        })
    }

    /// A decision record with what every action's record holds: who asked,
    /// over which transport, under which policy set, what was decided and
    /// the entities it read. Each action fills in the rest.
    pub(super) fn base_record(
        &self,
        request_id: &str,
        action: RecordedAction,
        tool: &str,
        decision: &Decision,
        entities: Vec<Value>,
        approval_channel: &str,
    ) -> DecisionRecord {
        DecisionRecord {
            session: self.session.clone(),
            request_id: request_id.to_owned(),
            transport: self.transport,
            client: self.client_ref(),
            action,
            tool: tool.to_owned(),
            resource: None,
            arguments_sha256: None,
            tool_definition: None,
            facts: None,
            approved: false,
            command: None,
            approval_channel: approval_channel.to_owned(),
            entities,
            policy_set: (**self.setting.engine.identity()).clone(),
            decision: decision.outcome,
            cause: decision.cause,
            policies: recorded_policies(decision),
            errors: decision.errors.clone(),
            message: None,
            shadow: shadow_record(decision),
            confined: None,
            approver: None,
            answer: None,
            approvers: None,
        }
    }

    /// Writes one decision record and waits until it is durable.
    pub(super) async fn record_decision(
        &self,
        record: DecisionRecord,
    ) -> Result<u64, AuditUnavailable> {
        let body = serde_json::to_value(record).map_err(|err| {
            tracing::error!(error = %err, "a decision record could not be encoded");
            AuditUnavailable
        })?;
        let seqs = self.append(vec![body]).await?;
        seqs.last().copied().ok_or(AuditUnavailable)
    }

    /// Records how an allowed call ended. The effect has happened, so the
    /// answer does not wait for this record; the writer keeps order, so it
    /// lands before any later one.
    pub(super) fn record_outcome(&self, body: Value) {
        if let Err(err) = self.audit.submit(Kind::Outcome, body) {
            tracing::error!(error = %err, "an outcome record could not be written");
        }
    }
}

/// The determining policies of a decision, as a record keeps them.
pub(super) fn recorded_policies(decision: &Decision) -> Vec<RecordedPolicy> {
    as_recorded(&decision.policies)
}

fn as_recorded(policies: &[DeterminingPolicy]) -> Vec<RecordedPolicy> {
    policies
        .iter()
        .map(|p| RecordedPolicy {
            id: p.id.clone(),
            reason: p.reason.to_string(),
        })
        .collect()
}

/// The shadow set's decision, as a record keeps it.
fn shadow_record(decision: &Decision) -> Option<ShadowRecord> {
    decision.shadow.as_ref().map(|shadow| ShadowRecord {
        decision: shadow.outcome,
        cause: shadow.cause,
        policies: as_recorded(&shadow.policies),
    })
}
