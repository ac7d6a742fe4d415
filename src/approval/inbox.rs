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
//!
//! The questions live in a [`QuestionStore`]: this process's memory, or in
//! a fleet the shared state, where a replica other than the asking one
//! takes an answer (deciding `approve` for the asking client under the
//! same policy set) and the asking replica hears of it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use serde_json::json;
use tokio::sync::oneshot;

use super::questions::{
    AnswerError, AnswerView, AskingClient, AskingPolicy, MemoryQuestions, QuestionCall,
    QuestionStore, QuestionView, Status, StoredQuestion, Verdict, check_answer, shown_at,
};
use crate::audit::{ApproverRef, RecordedAnswer};
use crate::clock::Clock;
use crate::keeper::{AskedCall, Keeper};
use crate::pdp::{Decision, INBOX_CHANNEL, Outcome};

/// How a question ended, for the waiting call.
#[derive(Debug, Clone)]
pub enum Ended {
    /// Enough approvers approved: who.
    Approved(Vec<AnswerView>),
    Denied(AnswerView),
    Expired,
    Withdrawn,
}

/// A call of this process waiting for its question's answer.
struct Waiting {
    /// The asking call's keeper, pinned to the set it was decided under:
    /// `approve` is decided and recorded through it.
    keeper: Arc<Keeper>,
    /// Tells the waiting call; taken when the question closes.
    waiter: oneshot::Sender<Ended>,
}

/// Something to tell when a question arrives (the webhook).
pub trait Announce: Send + Sync {
    fn announce(&self, question: &QuestionView);
}

/// Makes the keeper through which a replica answers a question another
/// replica asked: the asking client's, on this replica's policies.
pub trait KeeperFor: Send + Sync {
    fn keeper_for(&self, client: &AskingClient) -> Arc<Keeper>;
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

impl NewQuestion<'_> {
    /// The question as it is stored, asked at `now`.
    fn stored(&self, now: SystemTime, expires: SystemTime) -> StoredQuestion {
        let client = self.keeper.client();
        let asked = &self.asked;
        let view = QuestionView {
            id: self.id.clone(),
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
            policies: self
                .decision
                .policies
                .iter()
                .map(|p| AskingPolicy {
                    id: p.id.clone(),
                    reason: p.reason.to_string(),
                })
                .collect(),
            policy_set: self.decision.policy_set.hash.clone(),
            digest: self.digest.to_owned(),
            required: self.required,
            answers: Vec::new(),
        };
        let call = QuestionCall {
            request_id: self.request_id.to_owned(),
            client: AskingClient {
                name: client.name.clone(),
                tier: client.tier.clone(),
                fingerprint: client.fingerprint.clone(),
            },
            asked: asked.clone(),
        };
        StoredQuestion {
            view,
            call,
            expires,
        }
    }
}

/// The inbox of one server, or one replica's door to the fleet's.
pub struct Inbox {
    clock: Arc<dyn Clock>,
    store: Arc<dyn QuestionStore>,
    /// The calls of this process waiting on their questions, by id.
    waiting: Mutex<HashMap<String, Waiting>>,
    announce: Option<Arc<dyn Announce>>,
    /// In a fleet: the keeper for a question another replica asked.
    others: Option<Arc<dyn KeeperFor>>,
}

/// A question posted for a call, closed (withdrawn, and recorded so) if
/// the call stops waiting before it is answered: when the waiting future
/// is dropped (the client disconnected), `Drop` closes it.
pub struct Posted {
    inbox: Arc<Inbox>,
    pub id: String,
    keeper: Arc<Keeper>,
    request_id: String,
    digest: String,
    receiver: oneshot::Receiver<Ended>,
    /// Set once the question ended while the call still waited.
    settled: bool,
}

impl Posted {
    /// Waits for the answer, at most `timeout`; the question expires then.
    pub async fn answered(&mut self, timeout: Duration) -> Ended {
        let ended = tokio::select! {
            ended = &mut self.receiver => ended.unwrap_or(Ended::Withdrawn),
            () = tokio::time::sleep(timeout) => self.inbox.close(&self.id, Status::Expired).await,
        };
        self.settled = true;
        ended
    }

    /// Withdraws the question: its caller stopped waiting.
    pub async fn withdraw(mut self) {
        self.settled = true;
        self.inbox.close(&self.id, Status::Withdrawn).await;
    }
}

impl Drop for Posted {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        // The waiting future was dropped: its client is gone. The question
        // is closed and the end recorded on the runtime it was waiting on.
        self.inbox.forget(&self.id);
        let inbox = Arc::clone(&self.inbox);
        let keeper = Arc::clone(&self.keeper);
        let (id, request_id, digest) = (
            std::mem::take(&mut self.id),
            std::mem::take(&mut self.request_id),
            std::mem::take(&mut self.digest),
        );
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(question = %id, "a question outlived its runtime: it expires unanswered");
            return;
        };
        runtime.spawn(async move {
            inbox.close(&id, Status::Withdrawn).await;
            let detail = json!({"question": id, "disconnected": true});
            let _ = keeper
                .record_approval_via(&request_id, "withdrawn", &digest, INBOX_CHANNEL, detail)
                .await;
        });
    }
}

impl Inbox {
    /// An inbox in this process's memory.
    pub fn new(clock: Arc<dyn Clock>, announce: Option<Arc<dyn Announce>>) -> Self {
        Self::over(clock, announce, Arc::new(MemoryQuestions::default()), None)
    }

    /// An inbox whose questions are in `store`; `others` makes the keeper
    /// for questions other replicas asked.
    pub fn over(
        clock: Arc<dyn Clock>,
        announce: Option<Arc<dyn Announce>>,
        store: Arc<dyn QuestionStore>,
        others: Option<Arc<dyn KeeperFor>>,
    ) -> Self {
        Self {
            clock,
            store,
            waiting: Mutex::new(HashMap::new()),
            announce,
            others,
        }
    }

    /// Posts the question of a call that waits `timeout` for its answer.
    /// The caller has recorded the question first.
    pub async fn post(
        self: &Arc<Self>,
        question: NewQuestion<'_>,
        timeout: Duration,
    ) -> Result<Posted, AnswerError> {
        let now = self.clock.now();
        let expires = now + timeout;
        let stored = question.stored(now, expires);
        let NewQuestion {
            id,
            keeper,
            request_id,
            digest,
            ..
        } = question;
        let (waiter, receiver) = oneshot::channel();
        // Waiting before it is stored: an answer that comes at once finds
        // the keeper to decide it through.
        self.lock().insert(
            id.clone(),
            Waiting {
                keeper: Arc::clone(&keeper),
                waiter,
            },
        );
        let announced = stored.view.clone();
        if let Err(err) = self.store.insert(stored).await {
            self.forget(&id);
            return Err(err);
        }
        if let Some(announce) = &self.announce {
            announce.announce(&announced);
        }
        Ok(Posted {
            inbox: Arc::clone(self),
            id,
            keeper,
            request_id: request_id.to_owned(),
            digest: digest.to_owned(),
            receiver,
            settled: false,
        })
    }

    /// Every question kept: pending ones first (oldest first), then the
    /// closed ones (newest first).
    pub async fn list(&self) -> Result<Vec<QuestionView>, AnswerError> {
        self.store.list(self.clock.now()).await
    }

    pub async fn get(&self, id: &str) -> Result<Option<QuestionView>, AnswerError> {
        let now = self.clock.now();
        Ok(self.store.get(id).await?.map(|q| shown_at(&q, now)))
    }

    /// Takes an approver's answer: Cedar decides `approve` for the asking
    /// call (recorded before the answer counts). A denial let through
    /// closes the question; approvals close it once as many distinct
    /// approvers as it requires approved. Closing wakes its call.
    pub async fn answer(
        &self,
        id: &str,
        approver: &ApproverRef,
        verdict: Verdict,
        reason: &str,
    ) -> Result<QuestionView, AnswerError> {
        let question = self
            .store
            .get(id)
            .await?
            .ok_or_else(|| AnswerError::NoSuchQuestion(id.to_owned()))?;
        let answer = |at: SystemTime| AnswerView {
            approver: approver.name.clone(),
            fingerprint: approver.fingerprint.clone(),
            verdict,
            reason: reason.to_owned(),
            at: rfc3339(at),
        };
        let now = self.clock.now();
        if let Err(err) = check_answer(&question.view, question.expires, &answer(now), now) {
            if question.view.status == Status::Pending
                && matches!(
                    err,
                    AnswerError::Closed {
                        status: Status::Expired,
                        ..
                    }
                )
            {
                // Past its expiry, and its call has not noticed yet.
                self.close(id, Status::Expired).await;
            }
            return Err(err);
        }
        let keeper = self.keeper_of(&question)?;
        let tried = RecordedAnswer {
            question: id.to_owned(),
            verdict: verdict.as_str().to_owned(),
            reason: reason.to_owned(),
        };
        let decision = keeper
            .decide_approve(
                &question.call.request_id,
                approver,
                &question.call.asked,
                tried,
            )
            .await
            .map_err(|_| AnswerError::AuditUnavailable)?;
        if decision.outcome != Outcome::Allow {
            return Err(AnswerError::NotPermitted {
                id: id.to_owned(),
                approver: approver.name.clone(),
                policies: decision.policies.iter().map(|p| p.id.clone()).collect(),
            });
        }
        let now = self.clock.now();
        // Another answer (or the call giving up) may have come first: the
        // store checks again as it takes it.
        let view = self.store.take(id, answer(now), now).await?;
        if let Some(ended) = ended_of(&view) {
            self.wake(id, ended);
        }
        Ok(view)
    }

    /// The question `id` changed elsewhere (another replica took an
    /// answer): wakes its call here if it closed.
    pub async fn heard(&self, id: &str) {
        if !self.lock().contains_key(id) {
            return;
        }
        match self.store.get(id).await {
            Ok(Some(question)) => {
                if let Some(ended) = ended_of(&question.view) {
                    self.wake(id, ended);
                }
            }
            Ok(None) => {}
            Err(err) => {
                tracing::warn!(question = %id, error = %err, "a question's answer cannot be read: its call waits on");
            }
        }
    }

    /// The questions this process's calls wait on.
    pub fn waited_on(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// The keeper to decide an answer to `question` through: its call's,
    /// when it waits here; in a fleet, the asking client's on this
    /// replica, if this replica serves the set it was asked under.
    fn keeper_of(&self, question: &StoredQuestion) -> Result<Arc<Keeper>, AnswerError> {
        let id = &question.view.id;
        if let Some(waiting) = self.lock().get(id) {
            return Ok(Arc::clone(&waiting.keeper));
        }
        let Some(others) = &self.others else {
            // Pending, yet no call of this process waits on it: it is
            // being withdrawn this very moment.
            return Err(AnswerError::Closed {
                id: id.clone(),
                status: Status::Withdrawn,
            });
        };
        let keeper = others.keeper_for(&question.call.client);
        let serving = &keeper.engine().identity().hash;
        if *serving != question.view.policy_set {
            return Err(AnswerError::OtherPolicySet {
                id: id.clone(),
                asked: question.view.policy_set.clone(),
                serving: serving.clone(),
            });
        }
        Ok(keeper)
    }

    /// Closes a pending question as `status` (expired, withdrawn); how it
    /// ended, which is the answer when one came first. When the store
    /// cannot say, the call ends as `status` says, and nothing runs.
    async fn close(&self, id: &str, status: Status) -> Ended {
        self.forget(id);
        let unanswered = match status {
            Status::Expired => Ended::Expired,
            _ => Ended::Withdrawn,
        };
        match self.store.close(id, status).await {
            Ok(Some(view)) => ended_of(&view).unwrap_or(unanswered),
            Ok(None) => unanswered,
            Err(err) => {
                tracing::warn!(question = %id, error = %err, "a question cannot be closed in the inbox: it expires there unanswered");
                unanswered
            }
        }
    }

    /// Tells the call waiting on `id` how it ended.
    fn wake(&self, id: &str, ended: Ended) {
        if let Some(waiting) = self.lock().remove(id) {
            // The call may have stopped waiting this very moment: then the
            // answer is recorded and nothing runs.
            let _ = waiting.waiter.send(ended);
        }
    }

    /// No call here waits on `id` any more.
    fn forget(&self, id: &str) {
        self.lock().remove(id);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How a closed question ended; `None` while it is pending.
fn ended_of(view: &QuestionView) -> Option<Ended> {
    match view.status {
        Status::Pending => None,
        Status::Approved => Some(Ended::Approved(view.answers.clone())),
        Status::Denied => Some(match view.answers.last() {
            Some(answer) => Ended::Denied(answer.clone()),
            None => Ended::Withdrawn,
        }),
        Status::Expired => Some(Ended::Expired),
        Status::Withdrawn => Some(Ended::Withdrawn),
    }
}

fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_seconds(time).to_string()
}
