//! The `approve` action: may this approver approve this question of the
//! approval inbox? Approvers are not the engine's own entities (they come
//! and go while a server runs, like clients, but only the inbox asks about
//! them), so each decision is made over the few entities it reads: the
//! approver, its groups, the tool and its server. The same entities go into
//! the record, and replay decides over them again.

use cedar_policy::Entities;
use serde_json::{Value, json};

use super::decision::{Cause, Decision, DecisionError, Outcome};
use super::engine::Engine;
use super::entities::{self, APPROVER_GROUP_TYPE, APPROVER_TYPE, approver_uid};
use super::query::{ApproveAsked, Query};
use crate::tools::ToolId;

/// An approver portcullis knows: its name and the groups its token was
/// issued for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApproverRecord {
    pub name: String,
    pub groups: Vec<String>,
}

/// The entity of an approver, a child of each of its groups.
pub fn approver_entity(approver: &ApproverRecord) -> Value {
    let parents: Vec<Value> = approver
        .groups
        .iter()
        .map(|group| json!({"type": APPROVER_GROUP_TYPE, "id": group}))
        .collect();
    json!({
        "uid": {"type": APPROVER_TYPE, "id": approver.name},
        "attrs": {"name": approver.name},
        "parents": parents,
    })
}

impl Engine {
    /// The approver groups `tiers.json` declares.
    pub fn approver_groups(&self) -> Vec<String> {
        self.entities_json()
            .iter()
            .filter(|e| e.pointer("/uid/type").and_then(Value::as_str) == Some(APPROVER_GROUP_TYPE))
            .filter_map(|e| e.pointer("/uid/id").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    }

    /// The entities an `approve` decision reads: the approver, the groups
    /// of its that the set declares, the tool and its server.
    pub fn approve_entities(&self, approver: &ApproverRecord, tool: &ToolId) -> Vec<Value> {
        let groups = self.approver_groups();
        let mut found = vec![approver_entity(approver)];
        found.extend(
            self.entities_json()
                .iter()
                .filter(|e| {
                    let kind = e.pointer("/uid/type").and_then(Value::as_str);
                    let id = e.pointer("/uid/id").and_then(Value::as_str).unwrap_or("");
                    match kind {
                        Some(APPROVER_GROUP_TYPE) => {
                            approver.groups.iter().any(|g| g == id)
                                && groups.iter().any(|g| g == id)
                        }
                        Some(entities::TOOL_TYPE) => id == tool.to_string(),
                        Some(entities::SERVER_TYPE) => id == tool.server(),
                        _ => false,
                    }
                })
                .cloned(),
        );
        found
    }

    /// May `approver` approve this call of `tool`? With the entities it
    /// read, for the record. Entities that do not fit the schema deny.
    pub fn decide_approve(
        &self,
        approver: &ApproverRecord,
        tool: &ToolId,
        asked: ApproveAsked<'_>,
    ) -> (Decision, Vec<Value>) {
        let json = self.approve_entities(approver, tool);
        let built = Entities::from_json_value(Value::Array(json.clone()), Some(self.schema()));
        let entities = match built {
            Ok(entities) => entities,
            Err(err) => {
                let error = DecisionError {
                    policy: None,
                    message: format!("the approver's entities do not fit the schema: {err}"),
                };
                let decision = Decision {
                    outcome: Outcome::Deny,
                    cause: Cause::PolicyError,
                    policies: Vec::new(),
                    errors: vec![error],
                    policy_set: self.identity().clone(),
                    shadow: None,
                };
                return (decision, json);
            }
        };
        let principal = approver_uid(&approver.name);
        let resource = entities::tool_uid(&tool.to_string());
        let decision = self.decide(&Query::approve(&entities, &principal, &resource, asked));
        (decision, json)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use super::*;
    use crate::facts::{ToolFacts, Transport};
    use crate::pdp::{PolicyBundle, SourceFile};
    use crate::tools::Registry;

    const SECURITY_APPROVES_WRITES: &str = r#"
@id("approve.security.writes")
@reason("the security team approves writes")
permit (
  principal in Portcullis::ApproverGroup::"security",
  action == Portcullis::Action::"approve",
  resource
)
when { resource.effects.contains("write") && context.client_tier == "paired" };
"#;

    fn engine(extra: Option<&str>) -> Engine {
        let mut bundle = PolicyBundle::builtin();
        bundle.tiers.text = bundle.tiers.text.replace(
            "\"id\": \"security\" },",
            "\"id\": \"security\" },\n    \"attrs\": {}, \"parents\": [] },\n  { \"uid\": { \"type\": \"Portcullis::ApproverGroup\", \"id\": \"ops\" },",
        );
        if let Some(text) = extra {
            bundle.policies.push(SourceFile {
                logical: "policies/90_approvers.cedar".into(),
                display: "policies/90_approvers.cedar".into(),
                text: text.to_owned(),
            });
        }
        Engine::load(&bundle, &Registry::builtin().unwrap(), &[]).unwrap()
    }

    fn approver(name: &str, group: &str) -> ApproverRecord {
        ApproverRecord {
            name: name.into(),
            groups: vec![group.into()],
        }
    }

    fn ask(engine: &Engine, who: &ApproverRecord, tool: &str) -> (Decision, Vec<Value>) {
        let facts = ToolFacts::without_paths(Transport::Http);
        let (server, name) = tool.split_once('/').unwrap();
        engine.decide_approve(
            who,
            &ToolId::new(server, name),
            ApproveAsked {
                facts: &facts,
                client: "ci-bot",
                client_tier: "paired",
            },
        )
    }

    #[test]
    fn the_tiers_file_declares_groups_beside_tiers() {
        let engine = engine(None);
        assert_eq!(engine.approver_groups(), ["security", "ops"]);
    }

    #[test]
    fn nobody_may_approve_until_a_policy_says_who() {
        let engine = engine(None);
        let (decision, _) = ask(
            &engine,
            &approver("alice", "security"),
            "builtin/write_file",
        );
        assert_eq!(decision.outcome, Outcome::Deny);
        assert_eq!(decision.cause, Cause::NotPermitted);
    }

    #[test]
    fn a_group_permit_lets_its_members_approve_and_no_one_else() {
        let engine = engine(Some(SECURITY_APPROVES_WRITES));
        let (allowed, read) = ask(
            &engine,
            &approver("alice", "security"),
            "builtin/write_file",
        );
        assert_eq!(allowed.outcome, Outcome::Allow, "{allowed:?}");
        assert_eq!(allowed.policies[0].id, "approve.security.writes");
        let kinds: std::collections::BTreeSet<&str> = read
            .iter()
            .filter_map(|e| e.pointer("/uid/type").and_then(Value::as_str))
            .collect();
        let expected = [
            APPROVER_TYPE,
            APPROVER_GROUP_TYPE,
            "Portcullis::Tool",
            "Portcullis::Server",
        ];
        assert_eq!(kinds, expected.into_iter().collect());
        let (other, _) = ask(&engine, &approver("bob", "ops"), "builtin/write_file");
        assert_eq!(other.outcome, Outcome::Deny);
        let (read_only, _) = ask(&engine, &approver("alice", "security"), "builtin/read_file");
        assert_eq!(read_only.outcome, Outcome::Deny);
    }
}
