//! Discovery decisions, remembered for the engine's life. `discover_tool`
//! is asked before any argument exists, so its answer depends only on the
//! client, the tool, the transport and the approval channel; an engine's
//! policies, schema and entities never change (a reload or a new client
//! builds a new engine), and Cedar's evaluation is pure. A listing asks it
//! for every tool and every call asks it again before its own decision:
//! the second time, the answer is the one Cedar gave the first.

use super::bounded_memo::BoundedMemo;
use super::decision::Decision;
use super::query::{Asked, Asker, Query, ToolAction, ToolRef};
use crate::facts::{ToolFacts, Transport};
use crate::tools::ToolId;

/// The most answers kept (`BoundedMemo`): one per client, tool, transport
/// and channel that met.
const CAPACITY: usize = 65_536;

#[derive(Debug, PartialEq, Eq, Hash)]
struct Key {
    client: String,
    tool: ToolId,
    transport: Transport,
    approval_channel: String,
    approvers: u32,
}

impl Key {
    /// The key of a live client's unapproved discovery with the facts of a
    /// call that has no arguments; `None` for anything else (calls, replay,
    /// approved passes, other facts), which is always decided afresh.
    fn of(query: &Query<'_>) -> Option<Self> {
        let Query {
            asker: Asker::Client(client),
            asked:
                Asked::Tool {
                    action: ToolAction::Discover,
                    tool: ToolRef::Id(tool),
                    facts,
                },
            approved: false,
            approval_channel,
            approvers,
        } = *query
        else {
            return None;
        };
        if *facts != ToolFacts::without_paths(facts.transport) {
            return None;
        }
        Some(Self {
            client: client.to_owned(),
            tool: tool.clone(),
            transport: facts.transport,
            approval_channel: approval_channel.to_owned(),
            approvers,
        })
    }
}

#[derive(Debug)]
pub(super) struct DiscoveryMemo {
    answers: BoundedMemo<Key, Decision>,
}

impl Default for DiscoveryMemo {
    fn default() -> Self {
        Self {
            answers: BoundedMemo::new(CAPACITY),
        }
    }
}

impl DiscoveryMemo {
    /// The remembered answer to `query`, or `decide`'s, remembered when the
    /// query is one whose answer cannot change.
    pub fn answer(&self, query: &Query<'_>, decide: impl FnOnce() -> Decision) -> Decision {
        let Some(key) = Key::of(query) else {
            return decide();
        };
        if let Some(known) = self.answers.get(&key) {
            return known;
        }
        let decision = decide();
        self.answers.insert(key, decision.clone());
        decision
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.answers.len()
    }
}

#[cfg(test)]
mod tests {
    use cedar_policy::{Entities, EntityUid};
    use std::cell::Cell;

    use super::*;
    use crate::pdp::{Cause, Outcome};

    fn decision(outcome: Outcome) -> Decision {
        Decision::for_tests(outcome, Cause::Permitted, &[])
    }

    fn discovery<'a>(client: &'a str, tool: &'a ToolId, facts: &'a ToolFacts) -> Query<'a> {
        Query::tool(
            client,
            ToolAction::Discover,
            tool,
            facts,
            "client_elicitation",
        )
    }

    /// Asks `memo` and counts how often Cedar would have been asked.
    fn ask(
        memo: &DiscoveryMemo,
        query: &Query<'_>,
        asked: &Cell<u32>,
        outcome: Outcome,
    ) -> Outcome {
        memo.answer(query, || {
            asked.set(asked.get() + 1);
            decision(outcome)
        })
        .outcome
    }

    #[test]
    fn a_discovery_is_decided_once_and_answered_alike_after() {
        let memo = DiscoveryMemo::default();
        let tool = ToolId::new("files", "read_file");
        let facts = ToolFacts::without_paths(Transport::Stdio);
        let asked = Cell::new(0);
        let query = discovery("alice", &tool, &facts);
        assert_eq!(ask(&memo, &query, &asked, Outcome::Allow), Outcome::Allow);
        // The closure would now say deny: the remembered answer stands.
        assert_eq!(ask(&memo, &query, &asked, Outcome::Deny), Outcome::Allow);
        assert_eq!(asked.get(), 1);
    }

    #[test]
    fn each_client_tool_transport_and_channel_has_its_own_answer() {
        let memo = DiscoveryMemo::default();
        let read = ToolId::new("files", "read_file");
        let write = ToolId::new("files", "write_file");
        let stdio = ToolFacts::without_paths(Transport::Stdio);
        let http = ToolFacts::without_paths(Transport::Http);
        let asked = Cell::new(0);
        ask(
            &memo,
            &discovery("alice", &read, &stdio),
            &asked,
            Outcome::Allow,
        );
        assert_eq!(
            ask(
                &memo,
                &discovery("rita", &read, &stdio),
                &asked,
                Outcome::Deny
            ),
            Outcome::Deny
        );
        ask(
            &memo,
            &discovery("alice", &write, &stdio),
            &asked,
            Outcome::Ask,
        );
        ask(
            &memo,
            &discovery("alice", &read, &http),
            &asked,
            Outcome::Deny,
        );
        let other_channel = Query {
            approval_channel: "harness_prompt",
            ..discovery("alice", &read, &stdio)
        };
        ask(&memo, &other_channel, &asked, Outcome::Deny);
        assert_eq!(asked.get(), 5);
        assert_eq!(memo.len(), 5);
        assert_eq!(
            ask(
                &memo,
                &discovery("alice", &read, &stdio),
                &asked,
                Outcome::Deny
            ),
            Outcome::Allow
        );
    }

    #[test]
    fn calls_approvals_replays_and_facts_with_paths_are_decided_afresh() {
        let memo = DiscoveryMemo::default();
        let tool = ToolId::new("files", "read_file");
        let clean = ToolFacts::without_paths(Transport::Stdio);
        let mut with_paths = clean.clone();
        with_paths.path_classes.insert("secrets".into());
        with_paths.reads_inside_root = false;
        let entities = Entities::empty();
        let principal: EntityUid = r#"Portcullis::Client::"alice""#.parse().unwrap();
        let resource: EntityUid = r#"Portcullis::Tool::"files/read_file""#.parse().unwrap();
        let queries = [
            Query::tool(
                "alice",
                ToolAction::Call,
                &tool,
                &clean,
                "client_elicitation",
            ),
            discovery("alice", &tool, &clean).approved(),
            discovery("alice", &tool, &with_paths),
            Query {
                asker: Asker::Recorded {
                    entities: &entities,
                    principal: &principal,
                },
                asked: Asked::Tool {
                    action: ToolAction::Discover,
                    tool: ToolRef::Entity(&resource),
                    facts: &clean,
                },
                approved: false,
                approval_channel: "client_elicitation",
                approvers: crate::pdp::ONE_APPROVER,
            },
        ];
        let asked = Cell::new(0);
        for query in &queries {
            ask(&memo, query, &asked, Outcome::Allow);
            ask(&memo, query, &asked, Outcome::Allow);
        }
        assert_eq!(asked.get(), 8);
        assert_eq!(memo.len(), 0);
    }
}
