//! The approval inbox: questions nobody on the asking client can answer
//! (an unattended agent, or a call the policies send to the inbox), held
//! while their calls wait, for approvers to answer from the page, the CLI
//! or a chat notification.
//!
//! A question is bound to its call by the call's digest (tool, arguments,
//! policy set) and closed once: by the first denial Cedar lets through, or
//! by as many distinct approvals as the policies require
//! (`context.approvers`). Each answer is decided as `approve` by the asking
//! call's own keeper, so under the set the call was decided by, and
//! recorded before it counts.
//! A question whose call gives up (cancelled, disconnected, timed out) is
//! closed too, and can no longer be answered.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use crate::audit::ApproverRef;
use crate::clock::Clock;
use crate::keeper::{AskedCall, Keeper};
use crate::pdp::{Decision, Outcome};

/// Answered, expired and withdrawn questions kept for the page and the
/// CLI to show, newest first; older ones are in the audit log.
const CLOSED_KEPT: usize = 200;

/// Where a question stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    Approved,
    Denied,
    Expired,
    Withdrawn,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Approved => "approved",
            Status::Denied => "denied",
            Status::Expired => "expired",
            Status::Withdrawn => "withdrawn",
        }
    }
}

/// What an approver says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Approve,
    Deny,
}

/// One answer, as shown and recorded.
#[derive(Debug, Clone, Serialize)]
pub struct AnswerView {
    pub approver: String,
    pub fingerprint: String,
    pub verdict: Verdict,
    pub reason: String,
    /// RFC 3339, UTC.
    pub at: String,
}

/// A policy that asked for the approval.
#[derive(Debug, Clone, Serialize)]
pub struct AskingPolicy {
    pub id: String,
    pub reason: String,
}

/// A question as approvers see it: never an argument policies cannot see.
#[derive(Debug, Clone, Serialize)]
pub struct QuestionView {
    pub id: String,
    pub status: Status,
    /// RFC 3339, UTC.
    pub asked_at: String,
    pub expires_at: String,
    pub client: String,
    pub client_tier: String,
    pub transport: String,
    pub tool: String,
    /// The tool's name as the client called it.
    pub name: String,
    pub paths: Vec<(String, String)>,
    pub arguments: Map<String, Value>,
    /// Arguments policies cannot see: named, never shown.
    pub hidden: Vec<String>,
    pub policies: Vec<AskingPolicy>,
    pub policy_set: String,
    pub digest: String,
    /// How many distinct approvers must approve (`context.approvers` in
    /// the policies).
    pub required: u32,
    /// The answers taken, in order: approvals until there are enough, or
    /// the one denial that closed it.
    pub answers: Vec<AnswerView>,
}

/// How a question ended, for the waiting call.
#[derive(Debug, Clone)]
pub enum Ended {
    /// Enough approvers approved: who.
    Approved(Vec<AnswerView>),
    Denied(AnswerView),
    Expired,
    Withdrawn,
}

/// Why an answer was not taken.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("no question `{0}` in the inbox")]
    NoSuchQuestion(String),
    #[error("question `{id}` is {} already; an answer counts once", .status.as_str())]
    Closed { id: String, status: Status },
    #[error("the policies do not let `{approver}` answer question `{id}`{}", policies_text(.policies))]
    NotPermitted {
        id: String,
        approver: String,
        policies: Vec<String>,
    },
    #[error("the audit log is unavailable: the answer is not taken")]
    AuditUnavailable,
    #[error("`{approver}` approved question `{id}` already; it needs another approver")]
    AlreadyApproved { id: String, approver: String },
}

fn policies_text(policies: &[String]) -> String {
    if policies.is_empty() {
        " (no policy permits it)".to_owned()
    } else {
        format!(" (refused by {})", policies.join(", "))
    }
}

/// A question as the inbox keeps it.
struct Entry {
    view: QuestionView,
    /// The asking call's keeper, pinned to the set it was decided under:
    /// `approve` is decided and recorded through it.
    keeper: Arc<Keeper>,
    request_id: String,
    asked: AskedCall,
    expires: SystemTime,
    /// Tells the waiting call; taken when the question closes.
    waiter: Option<oneshot::Sender<Ended>>,
}

impl Entry {
    /// Whether `approver` may still answer: the question is open and they
    /// have not approved it already.
    fn answerable_by(&self, id: &str, approver: &ApproverRef) -> Result<(), AnswerError> {
        if self.view.status != Status::Pending {
            return Err(AnswerError::Closed {
                id: id.to_owned(),
                status: self.view.status,
            });
        }
        if self
            .view
            .answers
            .iter()
            .any(|a| a.approver == approver.name)
        {
            return Err(AnswerError::AlreadyApproved {
                id: id.to_owned(),
                approver: approver.name.clone(),
            });
        }
        Ok(())
    }
}

/// Something to tell when a question arrives (the webhook).
pub trait Announce: Send + Sync {
    fn announce(&self, question: &QuestionView);
}

/// A question to post: its id, the asking call's keeper (pinned), and
/// what binds it to the call.
pub struct NewQuestion<'a> {
    pub id: String,
    /// How many distinct approvers must approve.
    pub required: u32,
    pub keeper: Arc<Keeper>,
    pub request_id: &'a str,
    pub digest: &'a str,
    pub decision: &'a Decision,
    pub asked: AskedCall,
}

/// The inbox of one server.
pub struct Inbox {
    clock: Arc<dyn Clock>,
    /// Pending and recently closed questions, by id.
    questions: Mutex<BTreeMap<String, Entry>>,
    /// The ids of closed questions, oldest first, for trimming.
    closed: Mutex<Vec<String>>,
    announce: Option<Arc<dyn Announce>>,
}

/// A question posted for a call, closed (withdrawn) if the call stops
/// waiting before it is answered: when the waiting future is dropped
/// (cancelled, disconnected), `Drop` closes it.
pub struct Posted<'a> {
    inbox: &'a Inbox,
    pub id: String,
    receiver: oneshot::Receiver<Ended>,
    /// Set once the question ended while the call still waited.
    settled: bool,
}

impl Posted<'_> {
    /// Waits for the answer, at most `timeout`; the question expires then.
    pub async fn answered(mut self, timeout: Duration) -> Ended {
        let ended = tokio::select! {
            ended = &mut self.receiver => ended.unwrap_or(Ended::Withdrawn),
            () = tokio::time::sleep(timeout) => self.inbox.close(&self.id, Status::Expired),
        };
        self.settled = true;
        ended
    }
}

impl Drop for Posted<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.inbox.close(&self.id, Status::Withdrawn);
        }
    }
}

impl Inbox {
    pub fn new(clock: Arc<dyn Clock>, announce: Option<Arc<dyn Announce>>) -> Self {
        Self {
            clock,
            questions: Mutex::new(BTreeMap::new()),
            closed: Mutex::new(Vec::new()),
            announce,
        }
    }

    /// Posts the question of a call that waits `timeout` for its answer.
    /// The caller has recorded the question first.
    pub fn post(&self, question: NewQuestion<'_>, timeout: Duration) -> Posted<'_> {
        let NewQuestion {
            id,
            required,
            keeper,
            request_id,
            digest,
            decision,
            asked,
        } = question;
        let now = self.clock.now();
        let expires = now + timeout;
        let client = keeper.client();
        let view = QuestionView {
            id: id.clone(),
            status: Status::Pending,
            asked_at: rfc3339(now),
            expires_at: rfc3339(expires),
            client: client.name.clone(),
            client_tier: client.tier.clone(),
            transport: asked.facts.transport.as_str().to_owned(),
            tool: asked.tool.to_string(),
            name: asked.name.clone(),
            paths: asked.paths.clone(),
            arguments: asked.arguments.clone(),
            hidden: asked.hidden.clone(),
            policies: decision
                .policies
                .iter()
                .map(|p| AskingPolicy {
                    id: p.id.clone(),
                    reason: p.reason.to_string(),
                })
                .collect(),
            policy_set: decision.policy_set.hash.clone(),
            digest: digest.to_owned(),
            required,
            answers: Vec::new(),
        };
        let (sender, receiver) = oneshot::channel();
        let announced = view.clone();
        self.lock().insert(
            id.clone(),
            Entry {
                view,
                keeper,
                request_id: request_id.to_owned(),
                asked,
                expires,
                waiter: Some(sender),
            },
        );
        if let Some(announce) = &self.announce {
            announce.announce(&announced);
        }
        Posted {
            inbox: self,
            id,
            receiver,
            settled: false,
        }
    }

    /// Every question kept: pending ones first (oldest first), then the
    /// closed ones (newest first).
    pub fn list(&self) -> Vec<QuestionView> {
        let questions = self.lock();
        let mut pending: Vec<QuestionView> = questions
            .values()
            .filter(|e| e.view.status == Status::Pending)
            .map(|e| e.view.clone())
            .collect();
        pending.sort_by(|a, b| a.asked_at.cmp(&b.asked_at).then(a.id.cmp(&b.id)));
        let closed = self
            .closed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .rev()
            .filter_map(|id| questions.get(id).map(|e| e.view.clone()))
            .collect::<Vec<_>>();
        pending.extend(closed);
        pending
    }

    pub fn get(&self, id: &str) -> Option<QuestionView> {
        self.lock().get(id).map(|e| e.view.clone())
    }

    /// Takes an approver's answer: Cedar decides `approve` through the
    /// asking call's keeper (recorded before the answer counts). A denial
    /// let through closes the question; approvals close it once as many
    /// distinct approvers as it requires approved. Closing wakes its call.
    pub async fn answer(
        &self,
        id: &str,
        approver: &ApproverRef,
        verdict: Verdict,
        reason: &str,
    ) -> Result<QuestionView, AnswerError> {
        let (keeper, request_id, asked) = {
            let mut questions = self.lock();
            let entry = questions
                .get_mut(id)
                .ok_or_else(|| AnswerError::NoSuchQuestion(id.to_owned()))?;
            if entry.view.status == Status::Pending && self.clock.now() >= entry.expires {
                drop(questions);
                self.close(id, Status::Expired);
                return Err(AnswerError::Closed {
                    id: id.to_owned(),
                    status: Status::Expired,
                });
            }
            entry.answerable_by(id, approver)?;
            (
                Arc::clone(&entry.keeper),
                entry.request_id.clone(),
                entry.asked.clone(),
            )
        };
        let decision = keeper
            .decide_approve(&request_id, approver, &asked)
            .await
            .map_err(|_| AnswerError::AuditUnavailable)?;
        if decision.outcome != Outcome::Allow {
            return Err(AnswerError::NotPermitted {
                id: id.to_owned(),
                approver: approver.name.clone(),
                policies: decision.policies.iter().map(|p| p.id.clone()).collect(),
            });
        }
        let answer = AnswerView {
            approver: approver.name.clone(),
            fingerprint: approver.fingerprint.clone(),
            verdict,
            reason: reason.to_owned(),
            at: rfc3339(self.clock.now()),
        };
        let (view, ended) = {
            let mut questions = self.lock();
            let entry = questions
                .get_mut(id)
                .ok_or_else(|| AnswerError::NoSuchQuestion(id.to_owned()))?;
            // Another answer (or the call giving up) came first.
            entry.answerable_by(id, approver)?;
            entry.view.answers.push(answer.clone());
            let approvals = entry.view.answers.len();
            let ended = match verdict {
                Verdict::Deny => Some((Status::Denied, Ended::Denied(answer))),
                Verdict::Approve if approvals >= entry.view.required as usize => Some((
                    Status::Approved,
                    Ended::Approved(entry.view.answers.clone()),
                )),
                // Not enough yet: the question waits for the next approver.
                Verdict::Approve => None,
            };
            let ended = ended.map(|(status, ended)| {
                entry.view.status = status;
                (entry.waiter.take(), ended)
            });
            (entry.view.clone(), ended)
        };
        if let Some((waiter, ended)) = ended {
            self.closed_now(id);
            if let Some(waiter) = waiter {
                // The call may have stopped waiting this very moment: then
                // the answer is recorded and nothing runs.
                let _ = waiter.send(ended);
            }
        }
        Ok(view)
    }

    /// Closes a pending question as `status` (expired, withdrawn); how it
    /// ended, which is the answer when one came first.
    fn close(&self, id: &str, status: Status) -> Ended {
        let ended = {
            let mut questions = self.lock();
            let Some(entry) = questions.get_mut(id) else {
                return Ended::Withdrawn;
            };
            if entry.view.status != Status::Pending {
                return match (&entry.view.status, entry.view.answers.last()) {
                    (Status::Approved, _) => Ended::Approved(entry.view.answers.clone()),
                    (Status::Denied, Some(answer)) => Ended::Denied(answer.clone()),
                    (Status::Expired, _) => Ended::Expired,
                    _ => Ended::Withdrawn,
                };
            }
            entry.view.status = status;
            entry.waiter = None;
            match status {
                Status::Expired => Ended::Expired,
                _ => Ended::Withdrawn,
            }
        };
        self.closed_now(id);
        ended
    }

    /// Keeps a closed question for showing, trimming the oldest.
    fn closed_now(&self, id: &str) {
        let mut closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        closed.push(id.to_owned());
        if closed.len() > CLOSED_KEPT {
            let excess = closed.len() - CLOSED_KEPT;
            let gone: Vec<String> = closed.drain(..excess).collect();
            drop(closed);
            let mut questions = self.lock();
            for id in gone {
                questions.remove(&id);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.questions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}
