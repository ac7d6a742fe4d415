//! Re-deciding recorded decisions, under the policy set each was decided
//! under (from the snapshot store) or under a candidate set, to show what a
//! policy change would do to real traffic before it ships.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cedar_policy::Entities;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use super::record::Kind;
use super::snapshot;
use super::verify::{Break, Chain, Line, Records, check_end};
use crate::facts::{CommandFacts, ToolFacts, Transport};
use crate::pdp::{
    Asked, Asker, Cause, DecisionError, Engine, LoadError, Outcome, PolicyBundle,
    PolicySetIdentity, Query, ToolAction, ToolRef, client_uid,
};
use crate::tools::Registry;

/// Who made a recorded request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRef {
    pub name: String,
    pub fingerprint: String,
    pub tier: String,
}

/// A determining policy as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedPolicy {
    pub id: String,
    pub reason: String,
}

/// The body of a decision record: everything needed to decide it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRecord {
    pub session: String,
    pub request_id: String,
    pub transport: Transport,
    pub client: ClientRef,
    pub action: RecordedAction,
    /// The name the client asked for.
    pub tool: String,
    /// The tool's id, when the name is a known tool.
    pub resource: Option<String>,
    /// SHA-256 of the canonical arguments: which call this was, without
    /// keeping file contents or secrets in the log.
    pub arguments_sha256: Option<String>,
    /// SHA-256 of the tool's definition as served (for a downstream tool,
    /// its pin): which version of the tool was decided about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_definition: Option<String>,
    /// The computed facts (the context, less the approval fields); `None`
    /// when no Cedar decision was made (unknown tool, invalid arguments).
    pub facts: Option<ToolFacts>,
    /// Decided with `approved = true`, after a human approved the call.
    #[serde(default)]
    pub approved: bool,
    /// For the command gate (`run_command`): the facts of the command.
    #[serde(default)]
    pub command: Option<CommandFacts>,
    pub approval_channel: String,
    /// The entities the decision read: the client, its tier, the tool and
    /// its server.
    pub entities: Vec<Value>,
    pub policy_set: PolicySetIdentity,
    pub decision: Outcome,
    pub cause: Cause,
    pub policies: Vec<RecordedPolicy>,
    pub errors: Vec<DecisionError>,
    /// What the client was told when no Cedar decision was made.
    pub message: Option<String>,
}

/// What a decision record decided about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordedAction {
    /// May the client see the tool in its listing?
    DiscoverTool,
    /// May the client run this call?
    CallTool,
    /// May this shell command run (the command gate)?
    RunCommand,
    /// May the client read the policies in force?
    ReadPolicy,
    /// May a downstream server's request (the record's `tool` names the
    /// method, its `resource` the server) reach the client?
    RelayRequest,
}

impl std::fmt::Display for RecordedAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl RecordedAction {
    pub fn as_str(self) -> &'static str {
        match self {
            RecordedAction::DiscoverTool => "discover_tool",
            RecordedAction::CallTool => "call_tool",
            RecordedAction::RunCommand => "run_command",
            RecordedAction::ReadPolicy => "read_policy",
            RecordedAction::RelayRequest => "relay_request",
        }
    }
}

#[derive(Debug, Error)]
pub enum ReplayError {
    #[error("cannot read {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("the log does not verify: {0}")]
    Broken(Break),
    #[error("seq {seq}: {problem}")]
    Record { seq: u64, problem: RecordProblem },
    #[error("the policy set {hash} cannot be rebuilt: {message}")]
    PolicySet { hash: String, message: String },
}

/// Why one decision record cannot be decided again.
#[derive(Debug, Error)]
pub enum RecordProblem {
    #[error("not a decision record: {0}")]
    NotADecision(serde_json::Error),
    #[error("the recorded entities do not fit the schema: {0}")]
    Entities(Box<cedar_policy::entities_errors::EntitiesError>),
    /// The policy set the record names cannot be rebuilt.
    #[error(transparent)]
    PolicySet(Box<ReplayError>),
}

/// What a record would get now: outcome, cause, determining policy ids.
type Redecided = (Outcome, Cause, Vec<String>);

/// A record whose decision would change.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub seq: u64,
    pub time: String,
    pub client: String,
    pub tool: String,
    pub action: RecordedAction,
    pub before: Outcome,
    pub after: Outcome,
    pub before_cause: Cause,
    pub after_cause: Cause,
    pub before_policies: Vec<String>,
    pub after_policies: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ReplaySummary {
    pub records: u64,
    pub decisions: u64,
    /// Decision records with a Cedar decision, decided again.
    pub redecided: u64,
    /// Decision records without one (unknown tool, invalid arguments).
    pub not_redecided: u64,
    pub same: u64,
    /// Counts of outcome changes by transition, `allow->deny`.
    pub transitions: BTreeMap<String, u64>,
    /// Records whose outcome would change.
    pub changes: Vec<Change>,
    /// Records whose outcome stays but whose cause or determining policies
    /// would change (a permit renamed, a forbid added on top of another).
    pub reasons_changed: Vec<Change>,
}

/// Bound on the entity cache: replay of a long log stays in bounded memory.
const ENTITY_CACHE_LIMIT: usize = 4096;

pub struct Replay {
    snapshots: PathBuf,
    candidate: Option<Arc<Engine>>,
    engines: HashMap<String, Arc<Engine>>,
    entities: HashMap<String, Entities>,
    registry: Registry,
}

/// A policy set that replay cannot rebuild, with every problem.
fn does_not_load(hash: &str, err: &LoadError) -> ReplayError {
    ReplayError::PolicySet {
        hash: hash.to_owned(),
        message: err
            .problems
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
    }
}

impl Replay {
    /// A replay of `log`, under its recorded policy sets, or under
    /// `candidate` when given.
    pub fn new(log: &Path, candidate: Option<&PolicyBundle>) -> Result<Self, ReplayError> {
        let registry = Registry::from_specs(Vec::new()).map_err(|err| ReplayError::PolicySet {
            hash: String::new(),
            message: err.to_string(),
        })?;
        let candidate = match candidate {
            Some(bundle) => Some(Arc::new(
                Engine::load(bundle, &registry, &[])
                    .map_err(|err| does_not_load(&bundle.hash(), &err))?,
            )),
            None => None,
        };
        Ok(Self {
            snapshots: snapshot::snapshots_dir(log),
            candidate,
            engines: HashMap::new(),
            entities: HashMap::new(),
            registry,
        })
    }

    /// Verifies the log, then re-decides every decision record in it.
    /// `progress` is called with the number of records read so far.
    pub fn run(
        &mut self,
        log: &Path,
        mut progress: impl FnMut(u64),
    ) -> Result<ReplaySummary, ReplayError> {
        let read_error = |err: std::io::Error| ReplayError::Read {
            path: log.to_owned(),
            message: err.to_string(),
        };
        // One pass: the chain is checked as records are re-decided, and the
        // end against the head at the end; a break anywhere voids the result.
        let mut chain = Chain::default();
        let mut summary = ReplaySummary::default();
        let mut failure = None;
        for (index, line) in Records::open(log).map_err(read_error)?.enumerate() {
            let (record, bytes) = match line.map_err(read_error)? {
                Line::Record { record, bytes } => (record, bytes),
                Line::Partial => {
                    chain.partial_tail();
                    break;
                }
                Line::Unreadable { line, message } => {
                    return Err(ReplayError::Broken(Break::Unreadable { line, message }));
                }
            };
            chain
                .check(index as u64 + 1, &record, bytes)
                .map_err(ReplayError::Broken)?;
            summary.records += 1;
            if summary.records.is_multiple_of(4096) {
                progress(summary.records);
            }
            if record.kind != Kind::Decision {
                continue;
            }
            if failure.is_some() {
                continue;
            }
            summary.decisions += 1;
            let redecided = serde_json::from_str::<DecisionRecord>(record.body.get())
                .map_err(RecordProblem::NotADecision)
                .and_then(|recorded| self.redecide(&recorded).map(|after| (recorded, after)));
            let (recorded, after) = match redecided {
                Ok(pair) => pair,
                Err(problem) => {
                    // Keep following the chain: a break later in the log
                    // is the more important news.
                    failure = Some(ReplayError::Record {
                        seq: record.seq,
                        problem,
                    });
                    continue;
                }
            };
            let Some(after) = after else {
                summary.not_redecided += 1;
                continue;
            };
            summary.redecided += 1;
            let before_policies: Vec<String> =
                recorded.policies.iter().map(|p| p.id.clone()).collect();
            if after.0 == recorded.decision
                && after.1 == recorded.cause
                && after.2 == before_policies
            {
                summary.same += 1;
                continue;
            }
            let outcome_changed = after.0 != recorded.decision;
            if outcome_changed {
                *summary
                    .transitions
                    .entry(format!("{}->{}", recorded.decision, after.0))
                    .or_insert(0) += 1;
            }
            let change = Change {
                seq: record.seq,
                time: record.time,
                client: recorded.client.name,
                tool: recorded.resource.unwrap_or(recorded.tool),
                action: recorded.action,
                before: recorded.decision,
                after: after.0,
                before_cause: recorded.cause,
                after_cause: after.1,
                before_policies,
                after_policies: after.2,
            };
            if outcome_changed {
                summary.changes.push(change);
            } else {
                summary.reasons_changed.push(change);
            }
        }
        progress(summary.records);
        check_end(log, chain.into_scan()).map_err(ReplayError::Broken)?;
        match failure {
            Some(failure) => Err(failure),
            None => Ok(summary),
        }
    }

    /// The decision a record would get now: outcome, cause, determining ids.
    /// `None` for a record that had no Cedar decision.
    fn redecide(&mut self, recorded: &DecisionRecord) -> Result<Option<Redecided>, RecordProblem> {
        let transport = recorded.transport;
        let tool_uid;
        let server_uid;
        // The resource also names the entities cached for the record.
        let (resource, asked, approved) = match (
            recorded.action,
            &recorded.facts,
            &recorded.resource,
            &recorded.command,
        ) {
            (RecordedAction::RunCommand, _, _, Some(facts)) => {
                ("shell", Asked::Command { facts, transport }, false)
            }
            (RecordedAction::ReadPolicy, ..) => ("policies", Asked::Policies { transport }, false),
            (RecordedAction::RelayRequest, _, Some(server), _) => {
                server_uid = crate::pdp::server_uid(server);
                let asked = Asked::Request {
                    server: &server_uid,
                    method: &recorded.tool,
                    transport,
                };
                (server.as_str(), asked, false)
            }
            (
                action @ (RecordedAction::DiscoverTool | RecordedAction::CallTool),
                Some(facts),
                Some(tool_id),
                _,
            ) => {
                tool_uid = crate::pdp::tool_uid(tool_id);
                let action = if action == RecordedAction::DiscoverTool {
                    ToolAction::Discover
                } else {
                    ToolAction::Call
                };
                let tool = ToolRef::Entity(&tool_uid);
                let asked = Asked::Tool {
                    action,
                    tool,
                    facts,
                };
                (tool_id.as_str(), asked, recorded.approved)
            }
            _ => return Ok(None),
        };
        let engine = self
            .engine_for(&recorded.policy_set.hash)
            .map_err(|err| RecordProblem::PolicySet(Box::new(err)))?;
        let principal = client_uid(&recorded.client.name);
        let entities = self.entities_for(&engine, recorded, resource)?;
        let decision = engine.decide(&Query {
            asker: Asker::Recorded {
                entities,
                principal: &principal,
            },
            asked,
            approved,
            approval_channel: &recorded.approval_channel,
        });
        Ok(Some((
            decision.outcome,
            decision.cause,
            decision.policies.into_iter().map(|p| p.id).collect(),
        )))
    }

    /// The entities of a record, built once per policy set, session,
    /// client and resource: within one session the registry and the client
    /// are fixed, so the same client and resource name the same entities.
    fn entities_for(
        &mut self,
        engine: &Engine,
        recorded: &DecisionRecord,
        resource: &str,
    ) -> Result<&Entities, RecordProblem> {
        let key = format!(
            "{}\n{}\n{}\n{}\n{resource}",
            engine.identity().hash,
            recorded.session,
            recorded.client.name,
            recorded.client.tier
        );
        if self.entities.len() >= ENTITY_CACHE_LIMIT && !self.entities.contains_key(&key) {
            self.entities.clear();
        }
        Ok(match self.entities.entry(key) {
            Entry::Occupied(cached) => cached.into_mut(),
            Entry::Vacant(slot) => slot.insert(record_entities(engine, &recorded.entities)?),
        })
    }

    fn engine_for(&mut self, hash: &str) -> Result<Arc<Engine>, ReplayError> {
        if let Some(candidate) = &self.candidate {
            return Ok(Arc::clone(candidate));
        }
        if let Some(engine) = self.engines.get(hash) {
            return Ok(Arc::clone(engine));
        }
        let bundle =
            snapshot::load(&self.snapshots, hash).map_err(|err| ReplayError::PolicySet {
                hash: hash.to_owned(),
                message: err.to_string(),
            })?;
        let engine = Arc::new(
            Engine::load_recorded(&bundle, &self.registry, &[])
                .map_err(|err| does_not_load(hash, &err))?,
        );
        self.engines.insert(hash.to_owned(), Arc::clone(&engine));
        Ok(engine)
    }
}

/// The entities of a recorded decision, with the tiers of the policy set
/// being replayed (a candidate may change what a tier can do).
fn record_entities(engine: &Engine, recorded: &[Value]) -> Result<Entities, RecordProblem> {
    let is_tier =
        |e: &Value| e.pointer("/uid/type").and_then(Value::as_str) == Some("Portcullis::Tier");
    let mut all: Vec<Value> = engine
        .entities_json()
        .iter()
        .filter(|e| is_tier(e))
        .cloned()
        .collect();
    all.extend(recorded.iter().filter(|e| !is_tier(e)).cloned());
    Entities::from_json_value(Value::Array(all), Some(engine.schema()))
        .map_err(|err| RecordProblem::Entities(Box::new(err)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::audit::AuditLog;
    use crate::pdp::ClientRecord;

    const CLIENT: &str = "agent";

    /// A log holding the given decision bodies, with the builtin set's
    /// snapshot beside it.
    fn log_of(bodies: Vec<Value>) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        snapshot::store(&snapshot::snapshots_dir(&path), &PolicyBundle::builtin()).unwrap();
        let log = AuditLog::open(&path, None).unwrap();
        for body in bodies {
            log.append_blocking(Kind::Decision, body).unwrap();
        }
        (dir, path)
    }

    /// A `read_policy` decision record as the keeper writes one.
    fn read_policy_record() -> DecisionRecord {
        let bundle = PolicyBundle::builtin();
        let registry = Registry::builtin().unwrap();
        let clients = [ClientRecord {
            name: CLIENT.into(),
            tier: "paired".into(),
        }];
        let engine = Engine::load(&bundle, &registry, &clients).unwrap();
        let decision = engine.decide(&Query::policies(CLIENT, Transport::Stdio));
        DecisionRecord {
            session: "s".into(),
            request_id: "1".into(),
            transport: Transport::Stdio,
            client: ClientRef {
                name: CLIENT.into(),
                fingerprint: "0123456789abcdef".into(),
                tier: "paired".into(),
            },
            action: RecordedAction::ReadPolicy,
            tool: "policies".into(),
            tool_definition: None,
            resource: None,
            arguments_sha256: None,
            facts: None,
            approved: false,
            command: None,
            approval_channel: "none".into(),
            entities: engine.policy_entities(CLIENT, "paired"),
            policy_set: (**engine.identity()).clone(),
            decision: decision.outcome,
            cause: decision.cause,
            policies: decision
                .policies
                .iter()
                .map(|p| RecordedPolicy {
                    id: p.id.clone(),
                    reason: p.reason.to_string(),
                })
                .collect(),
            errors: Vec::new(),
            message: None,
        }
    }

    fn replay(path: &Path) -> Result<ReplaySummary, ReplayError> {
        Replay::new(path, None).unwrap().run(path, |_| {})
    }

    fn problem(result: Result<ReplaySummary, ReplayError>) -> RecordProblem {
        match result {
            Err(ReplayError::Record { seq: 1, problem }) => problem,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_recorded_decision_replays_the_same_under_its_own_set() {
        let record = read_policy_record();
        assert_eq!(record.decision, Outcome::Allow);
        let (_dir, path) = log_of(vec![serde_json::to_value(&record).unwrap()]);
        let summary = replay(&path).unwrap();
        assert_eq!((summary.redecided, summary.same), (1, 1), "{summary:?}");
    }

    #[test]
    fn a_body_that_is_no_decision_record_is_named_by_seq() {
        let (_dir, path) = log_of(vec![json!({"event": "not a decision"})]);
        assert!(matches!(
            problem(replay(&path)),
            RecordProblem::NotADecision(_)
        ));
    }

    #[test]
    fn a_set_with_no_snapshot_is_named() {
        let mut record = read_policy_record();
        record.policy_set.hash = "f".repeat(64);
        let (_dir, path) = log_of(vec![serde_json::to_value(&record).unwrap()]);
        let found = problem(replay(&path));
        assert!(matches!(found, RecordProblem::PolicySet(_)), "{found}");
        assert!(found.to_string().contains(&"f".repeat(64)), "{found}");
    }

    #[test]
    fn recorded_entities_off_the_schema_are_a_problem_not_a_decision() {
        let mut record = read_policy_record();
        record.entities = vec![json!({
            "uid": {"type": "Portcullis::Client", "id": CLIENT},
            "attrs": {"name": 7},
            "parents": []
        })];
        let (_dir, path) = log_of(vec![serde_json::to_value(&record).unwrap()]);
        assert!(matches!(problem(replay(&path)), RecordProblem::Entities(_)));
    }
}
