//! Re-deciding recorded decisions, under the policy set each was decided
//! under (from the snapshot store) or under a candidate set, to show what a
//! policy change would do to real traffic before it ships.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cedar_policy::Entities;
use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

use super::decision_record::{DecisionRecord, RecordedAction, RecordedPolicy};
use super::record::Kind;
use super::snapshot;
use super::verify::{Break, Chain, Line, Records, check_end};
use crate::pdp::{
    ApproveAsked, Asked, Asker, Cause, Engine, LoadError, ONE_APPROVER, Outcome, PolicyBundle,
    Query, ToolAction, ToolRef, approver_uid, client_uid,
};
use crate::tools::Registry;

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
    #[error("replay stopped: {0}")]
    Worker(String),
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

/// What a record would get now: outcome, cause, determining policy ids,
/// and, under the recorded sets, whether its shadow decision reproduced.
type Redecided = (Outcome, Cause, Vec<String>, Option<bool>);

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
    /// Under the recorded sets: records whose shadow decision (or its
    /// absence) the shadow policies do not reproduce.
    pub shadows_not_reproduced: Vec<u64>,
}

/// Bound on the entity cache: replay of a long log stays in bounded memory.
const ENTITY_CACHE_LIMIT: usize = 4096;

/// Decision records handed to a worker at once.
const CHUNK: usize = 64;

/// Chunks waiting for a worker, per worker: how far reading may run ahead
/// of re-deciding (and so what a parallel replay holds in memory).
const QUEUED_CHUNKS_PER_JOB: usize = 16;

pub struct Replay {
    redecider: Redecider,
}

/// What re-decides records: the policy sets, shared by every worker, and
/// the entities, each worker its own.
struct Redecider {
    snapshots: PathBuf,
    candidate: Option<Arc<Engine>>,
    engines: Arc<Mutex<HashMap<String, Arc<Engine>>>>,
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

fn empty_registry() -> Result<Registry, ReplayError> {
    Registry::from_specs(Vec::new()).map_err(|err| ReplayError::PolicySet {
        hash: String::new(),
        message: err.to_string(),
    })
}

/// One decision record as read from the log, for a worker.
struct Pending {
    seq: u64,
    time: String,
    body: Box<serde_json::value::RawValue>,
}

/// A decision record re-decided (or not), for the summary.
type Done = (
    u64,
    String,
    Result<(DecisionRecord, Option<Redecided>), RecordProblem>,
);

impl Replay {
    /// A replay of `log`, under its recorded policy sets, or under
    /// `candidate` when given.
    pub fn new(log: &Path, candidate: Option<&PolicyBundle>) -> Result<Self, ReplayError> {
        let registry = empty_registry()?;
        let candidate = match candidate {
            Some(bundle) => Some(Arc::new(
                Engine::load(bundle, &registry, &[])
                    .map_err(|err| does_not_load(&bundle.hash(), &err))?,
            )),
            None => None,
        };
        Ok(Self {
            redecider: Redecider {
                snapshots: snapshot::snapshots_dir(log),
                candidate,
                engines: Arc::new(Mutex::new(HashMap::new())),
                entities: HashMap::new(),
                registry,
            },
        })
    }

    /// Verifies the log, then re-decides every decision record in it.
    /// `progress` is called with the number of records read so far.
    pub fn run(
        &mut self,
        log: &Path,
        progress: impl FnMut(u64),
    ) -> Result<ReplaySummary, ReplayError> {
        self.run_with_jobs(log, 1, progress)
    }

    /// As `run`, re-deciding on `jobs` threads: the chain is verified in
    /// one pass on this thread, decision records are re-decided by the
    /// pool, and the summary is made in log order, as with one.
    pub fn run_with_jobs(
        &mut self,
        log: &Path,
        jobs: usize,
        mut progress: impl FnMut(u64),
    ) -> Result<ReplaySummary, ReplayError> {
        if jobs <= 1 {
            let redecider = &mut self.redecider;
            let mut summary = Summary::default();
            let read = read_log(log, &mut progress, |pending| {
                if summary.failure.is_none() {
                    let done = redecider.redecide_body(pending.body.get());
                    summary.fold((pending.seq, pending.time, done));
                }
            })?;
            return summary.finish(read);
        }
        let (work, queue) =
            std::sync::mpsc::sync_channel::<(u64, Vec<Pending>)>(jobs * QUEUED_CHUNKS_PER_JOB);
        let queue = Arc::new(Mutex::new(queue));
        let (results, collected) = std::sync::mpsc::channel::<(u64, Vec<Done>)>();
        let workers: Vec<Redecider> = (0..jobs)
            .map(|_| self.redecider.worker())
            .collect::<Result<_, _>>()?;
        std::thread::scope(|scope| {
            for mut redecider in workers {
                let queue = Arc::clone(&queue);
                let results = results.clone();
                scope.spawn(move || work_through(&mut redecider, &queue, &results));
            }
            drop(results);
            // Chunks come back in any order; each is folded once every
            // earlier one has been, so the summary is in log order.
            let collector = scope.spawn(move || in_log_order(collected));
            let mut chunk = Vec::with_capacity(CHUNK);
            let mut place = 0u64;
            let mut handed = true;
            let read = read_log(log, &mut progress, |pending| {
                chunk.push(pending);
                if chunk.len() == CHUNK {
                    let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
                    handed &= work.send((place, full)).is_ok();
                    place += 1;
                }
            });
            if !chunk.is_empty() {
                handed &= work.send((place, chunk)).is_ok();
            }
            drop(work);
            let summary = collector
                .join()
                .map_err(|_| ReplayError::Worker("the summary thread panicked".to_owned()))?;
            if !handed {
                return Err(ReplayError::Worker(
                    "a re-deciding thread stopped".to_owned(),
                ));
            }
            summary.finish(read?)
        })
    }
}

/// A worker: re-decides the chunks it takes from `queue` until the queue
/// closes or nobody collects the results.
fn work_through(
    redecider: &mut Redecider,
    queue: &Mutex<std::sync::mpsc::Receiver<(u64, Vec<Pending>)>>,
    results: &std::sync::mpsc::Sender<(u64, Vec<Done>)>,
) {
    loop {
        // The lock is held only to take the next chunk.
        let next = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        let Ok((place, chunk)) = next else { return };
        let done = chunk
            .into_iter()
            .map(|pending| {
                let result = redecider.redecide_body(pending.body.get());
                (pending.seq, pending.time, result)
            })
            .collect();
        if results.send((place, done)).is_err() {
            return;
        }
    }
}

/// The summary of chunks that arrive in any order, folded in log order.
fn in_log_order(collected: std::sync::mpsc::Receiver<(u64, Vec<Done>)>) -> Summary {
    let mut summary = Summary::default();
    let mut waiting: BTreeMap<u64, Vec<Done>> = BTreeMap::new();
    let mut next = 0u64;
    for (place, chunk) in collected {
        waiting.insert(place, chunk);
        while let Some(ready) = waiting.remove(&next) {
            for done in ready {
                summary.fold(done);
            }
            next += 1;
        }
    }
    summary
}

/// Whether the shadow set decides again as the record says it did: the
/// same outcome by the same policies (or no shadow either time).
fn shadow_reproduced(now: &crate::pdp::Decision, recorded: &DecisionRecord) -> bool {
    let ids =
        |policies: &[RecordedPolicy]| policies.iter().map(|p| p.id.clone()).collect::<Vec<_>>();
    let now = now.shadow.as_ref().map(|shadow| {
        (
            shadow.outcome,
            shadow
                .policies
                .iter()
                .map(|p| p.id.clone())
                .collect::<Vec<_>>(),
        )
    });
    let then = recorded
        .shadow
        .as_ref()
        .map(|shadow| (shadow.decision, ids(&shadow.policies)));
    now == then
}

/// What reading the log found besides its decision records.
struct Read {
    records: u64,
}

/// Reads the log, checking the chain as it goes and its end against the
/// head at the end, and hands every decision record to `decision`. A break
/// anywhere voids the replay.
fn read_log(
    log: &Path,
    progress: &mut impl FnMut(u64),
    mut decision: impl FnMut(Pending),
) -> Result<Read, ReplayError> {
    let read_error = |err: std::io::Error| ReplayError::Read {
        path: log.to_owned(),
        message: err.to_string(),
    };
    let mut chain = Chain::default();
    let mut records = 0u64;
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
        records += 1;
        if records.is_multiple_of(4096) {
            progress(records);
        }
        if record.kind == Kind::Decision {
            decision(Pending {
                seq: record.seq,
                time: record.time,
                body: record.body,
            });
        }
    }
    progress(records);
    check_end(log, chain.into_scan()).map_err(ReplayError::Broken)?;
    Ok(Read { records })
}

/// The summary as it is made, in log order.
#[derive(Default)]
struct Summary {
    summary: ReplaySummary,
    /// The first record that could not be re-decided: the replay fails,
    /// but the chain is still followed to its end (a break later in the
    /// log is the more important news).
    failure: Option<ReplayError>,
}

impl Summary {
    fn fold(&mut self, (seq, time, done): Done) {
        if self.failure.is_some() {
            return;
        }
        let summary = &mut self.summary;
        summary.decisions += 1;
        let (recorded, after) = match done {
            Ok(pair) => pair,
            Err(problem) => {
                self.failure = Some(ReplayError::Record { seq, problem });
                return;
            }
        };
        let Some(after) = after else {
            summary.not_redecided += 1;
            return;
        };
        summary.redecided += 1;
        if after.3 == Some(false) {
            summary.shadows_not_reproduced.push(seq);
        }
        let before_policies: Vec<String> = recorded.policies.iter().map(|p| p.id.clone()).collect();
        if after.0 == recorded.decision && after.1 == recorded.cause && after.2 == before_policies {
            summary.same += 1;
            return;
        }
        let outcome_changed = after.0 != recorded.decision;
        if outcome_changed {
            *summary
                .transitions
                .entry(format!("{}->{}", recorded.decision, after.0))
                .or_insert(0) += 1;
        }
        let change = Change {
            seq,
            time,
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

    fn finish(self, read: Read) -> Result<ReplaySummary, ReplayError> {
        match self.failure {
            Some(failure) => Err(failure),
            None => Ok(ReplaySummary {
                records: read.records,
                ..self.summary
            }),
        }
    }
}

impl Redecider {
    /// A redecider for another thread: the same policy sets, its own
    /// entities.
    fn worker(&self) -> Result<Self, ReplayError> {
        Ok(Self {
            snapshots: self.snapshots.clone(),
            candidate: self.candidate.clone(),
            engines: Arc::clone(&self.engines),
            entities: HashMap::new(),
            registry: empty_registry()?,
        })
    }

    fn redecide_body(
        &mut self,
        body: &str,
    ) -> Result<(DecisionRecord, Option<Redecided>), RecordProblem> {
        let recorded =
            serde_json::from_str::<DecisionRecord>(body).map_err(RecordProblem::NotADecision)?;
        let after = self.redecide(&recorded)?;
        Ok((recorded, after))
    }

    /// The decision a record would get now: outcome, cause, determining ids.
    /// `None` for a record that had no Cedar decision.
    fn redecide(&mut self, recorded: &DecisionRecord) -> Result<Option<Redecided>, RecordProblem> {
        let transport = recorded.transport;
        let tool_uid;
        let server_uid;
        let mut principal = client_uid(&recorded.client.name);
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
            (RecordedAction::Approve, Some(facts), Some(tool_id), _) => {
                let Some(approver) = &recorded.approver else {
                    return Ok(None);
                };
                principal = approver_uid(&approver.name);
                tool_uid = crate::pdp::tool_uid(tool_id);
                let asked = Asked::Approve {
                    tool: ToolRef::Entity(&tool_uid),
                    asked: ApproveAsked {
                        facts,
                        client: &recorded.client.name,
                        client_tier: &recorded.client.tier,
                    },
                };
                (tool_id.as_str(), asked, false)
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
        self.decide_as_recorded(recorded, &principal, resource, asked, approved)
            .map(Some)
    }

    /// Decides `asked` by `principal` as the record's policy set (or the
    /// candidate) decides it now, with the record's entities.
    fn decide_as_recorded(
        &mut self,
        recorded: &DecisionRecord,
        principal: &cedar_policy::EntityUid,
        resource: &str,
        asked: Asked<'_>,
        approved: bool,
    ) -> Result<Redecided, RecordProblem> {
        let engine = self
            .engine_for(&recorded.policy_set.hash)
            .map_err(|err| RecordProblem::PolicySet(Box::new(err)))?;
        let entities = self.entities_for(&engine, recorded, resource)?;
        let decision = engine.decide(&Query {
            asker: Asker::Recorded {
                entities,
                principal,
            },
            asked,
            approved,
            approval_channel: &recorded.approval_channel,
            approvers: recorded.approvers.unwrap_or(ONE_APPROVER),
        });
        // A candidate's shadows are its own; the recorded set's must say
        // again what the record says they said.
        let shadow_reproduced = self
            .candidate
            .is_none()
            .then(|| shadow_reproduced(&decision, recorded));
        Ok((
            decision.outcome,
            decision.cause,
            decision.policies.into_iter().map(|p| p.id).collect(),
            shadow_reproduced,
        ))
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
        let approver = recorded.approver.as_ref().map_or(String::new(), |a| {
            format!("{}\n{}", a.name, a.groups.join(","))
        });
        let key = format!(
            "{}\n{}\n{}\n{}\n{resource}\n{approver}",
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
        // Held while a set loads: the other workers wait for it rather
        // than load it again.
        let mut engines = self.engines.lock().map_err(|_| {
            ReplayError::Worker("a thread panicked loading a policy set".to_owned())
        })?;
        if let Some(engine) = engines.get(hash) {
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
        engines.insert(hash.to_owned(), Arc::clone(&engine));
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
    use crate::audit::ClientRef;
    use crate::facts::Transport;
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
            shadow: None,
            confined: None,
            approver: None,
            answer: None,
            approvers: None,
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

    #[test]
    fn a_parallel_replay_summarises_in_log_order_as_one_thread_does() {
        let record = serde_json::to_value(read_policy_record()).unwrap();
        let mut bodies = vec![record; 700];
        // One record that cannot be re-decided, late in the log: both
        // name it, and nothing after it counts.
        bodies.insert(650, json!({"event": "not a decision"}));
        let (_dir, path) = log_of(bodies);
        // A candidate that no longer lets clients read the policies: every
        // record changes, so the order of the changes shows.
        let mut candidate = PolicyBundle::builtin();
        for file in &mut candidate.policies {
            file.text = file.text.replace(
                "permit (\n  principal,\n  action == Portcullis::Action::\"read_policy\"",
                "forbid (\n  principal,\n  action == Portcullis::Action::\"read_policy\"",
            );
        }
        let run = |jobs: usize, candidate: Option<&PolicyBundle>| {
            Replay::new(&path, candidate)
                .unwrap()
                .run_with_jobs(&path, jobs, |_| {})
        };
        for candidate in [None, Some(&candidate)] {
            let one = run(1, candidate);
            let three = run(3, candidate);
            match (&one, &three) {
                (
                    Err(ReplayError::Record { seq: a, .. }),
                    Err(ReplayError::Record { seq: b, .. }),
                ) => {
                    assert_eq!(a, b);
                    assert_eq!(*a, 651);
                }
                other => panic!("{other:?}"),
            }
        }
        let (_dir, path) = log_of(vec![
            serde_json::to_value(read_policy_record()).unwrap();
            700
        ]);
        let run = |jobs: usize, candidate: Option<&PolicyBundle>| {
            Replay::new(&path, candidate)
                .unwrap()
                .run_with_jobs(&path, jobs, |_| {})
                .unwrap()
        };
        for candidate in [None, Some(&candidate)] {
            let (one, three) = (run(1, candidate), run(3, candidate));
            assert_eq!(
                serde_json::to_value(&one).unwrap(),
                serde_json::to_value(&three).unwrap()
            );
        }
        let changed = run(2, Some(&candidate));
        assert_eq!(changed.changes.len(), 700);
        assert!(changed.changes.windows(2).all(|w| w[0].seq < w[1].seq));
        let three = run(3, None);
        assert_eq!(
            (three.records, three.redecided, three.same),
            (700, 700, 700)
        );
    }
}
