//! A question of the approval inbox as approvers see it, its answers and
//! why one is refused; and where the inbox keeps them: in this
//! process (one machine), or where every replica of a fleet sees them
//! (`state::SharedQuestions`), so that a question asked through one
//! replica is answered through another's page.
//!
//! The store is the arbiter of an answer: [`QuestionStore::take`] checks
//! that the question is still open and the approver new to it, adds the
//! answer and closes the question when it is enough, in one step, so two
//! answers at once (on one replica or two) count once.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::keeper::AskedCall;

/// Answered, expired and withdrawn questions kept for the page and the
/// CLI to show, newest first; older ones are in the audit log.
pub const CLOSED_KEPT: usize = 200;

/// Where a question stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Approve,
    Deny,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Approve => "approve",
            Verdict::Deny => "deny",
        }
    }
}

/// One answer, as shown and recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerView {
    pub approver: String,
    pub fingerprint: String,
    pub verdict: Verdict,
    pub reason: String,
    /// RFC 3339, UTC.
    pub at: String,
}

/// A policy that asked for the approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskingPolicy {
    pub id: String,
    pub reason: String,
}

/// A question as approvers see it: never an argument policies cannot see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    #[error(
        "question `{id}` was asked under policy set {asked}, and this replica serves {serving}: answer it where that set is served"
    )]
    OtherPolicySet {
        id: String,
        asked: String,
        serving: String,
    },
    #[error("the shared inbox cannot be reached: {0}")]
    Unavailable(String),
}

fn policies_text(policies: &[String]) -> String {
    if policies.is_empty() {
        " (no policy permits it)".to_owned()
    } else {
        format!(" (refused by {})", policies.join(", "))
    }
}

pub type Stored<'a, T> = Pin<Box<dyn Future<Output = Result<T, AnswerError>> + Send + 'a>>;

/// The asking client, as the question binds it: the `approve` decision
/// names it, and a replica other than the asking one decides for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskingClient {
    pub name: String,
    pub tier: String,
    pub fingerprint: String,
}

/// What a question holds besides what approvers see: the call Cedar
/// decides `approve` about, and the request its records name.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QuestionCall {
    pub request_id: String,
    pub client: AskingClient,
    pub asked: AskedCall,
}

/// A question as stored.
#[derive(Debug, Clone)]
pub struct StoredQuestion {
    pub view: QuestionView,
    pub call: QuestionCall,
    pub expires: SystemTime,
}

/// Keeps questions; each method is one step, whole or not at all.
pub trait QuestionStore: Send + Sync {
    /// Adds a pending question (its id is new).
    fn insert(&self, question: StoredQuestion) -> Stored<'_, ()>;

    /// The pending questions (oldest first), then up to [`CLOSED_KEPT`]
    /// closed ones (newest first). A pending one past its expiry shows as
    /// expired: the call that waited for it is gone.
    fn list(&self, now: SystemTime) -> Stored<'_, Vec<QuestionView>>;

    fn get(&self, id: &str) -> Stored<'_, Option<StoredQuestion>>;

    /// Adds `answer` if the question is open at `now` and its approver has
    /// not answered it; closes it on a denial or once `required` distinct
    /// approvers approved. The question as it stands after.
    fn take(&self, id: &str, answer: AnswerView, now: SystemTime) -> Stored<'_, QuestionView>;

    /// Closes a pending question as `status` (expired, withdrawn). The
    /// question as it stands after: closed now, or as it closed before.
    fn close(&self, id: &str, status: Status) -> Stored<'_, Option<QuestionView>>;
}

/// Whether `answer` may be added to `view` at `now` (expiring at
/// `expires`): the checks every store makes under its lock.
pub fn check_answer(
    view: &QuestionView,
    expires: SystemTime,
    answer: &AnswerView,
    now: SystemTime,
) -> Result<(), AnswerError> {
    let status = match view.status {
        Status::Pending if now >= expires => Status::Expired,
        status => status,
    };
    if status != Status::Pending {
        return Err(AnswerError::Closed {
            id: view.id.clone(),
            status,
        });
    }
    if view.answers.iter().any(|a| a.approver == answer.approver) {
        return Err(AnswerError::AlreadyApproved {
            id: view.id.clone(),
            approver: answer.approver.clone(),
        });
    }
    Ok(())
}

/// The status `view` closes with once `answer` is added to it, if any.
pub fn closes_with(view: &QuestionView, answer: &AnswerView) -> Option<Status> {
    match answer.verdict {
        Verdict::Deny => Some(Status::Denied),
        Verdict::Approve if view.answers.len() + 1 >= view.required as usize => {
            Some(Status::Approved)
        }
        // Not enough yet: the question waits for the next approver.
        Verdict::Approve => None,
    }
}

/// The questions of one process.
#[derive(Default)]
pub struct MemoryQuestions {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    questions: BTreeMap<String, StoredQuestion>,
    /// The ids of closed questions, oldest first, for trimming.
    closed: Vec<String>,
}

impl Kept {
    fn closed_now(&mut self, id: &str) {
        self.closed.push(id.to_owned());
        if self.closed.len() > CLOSED_KEPT {
            let excess = self.closed.len() - CLOSED_KEPT;
            for gone in self.closed.drain(..excess) {
                self.questions.remove(&gone);
            }
        }
    }
}

impl MemoryQuestions {
    fn lock(&self) -> MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn list_now(&self, now: SystemTime) -> Vec<QuestionView> {
        let kept = self.lock();
        let mut pending: Vec<QuestionView> = kept
            .questions
            .values()
            .filter(|q| q.view.status == Status::Pending)
            .map(|q| shown_at(q, now))
            .collect();
        pending.sort_by(|a, b| a.asked_at.cmp(&b.asked_at).then(a.id.cmp(&b.id)));
        let closed = kept
            .closed
            .iter()
            .rev()
            .filter_map(|id| kept.questions.get(id).map(|q| q.view.clone()));
        pending.extend(closed);
        pending
    }

    fn take_now(
        &self,
        id: &str,
        answer: AnswerView,
        now: SystemTime,
    ) -> Result<QuestionView, AnswerError> {
        let mut kept = self.lock();
        let question = kept
            .questions
            .get_mut(id)
            .ok_or_else(|| AnswerError::NoSuchQuestion(id.to_owned()))?;
        check_answer(&question.view, question.expires, &answer, now)?;
        let closes = closes_with(&question.view, &answer);
        question.view.answers.push(answer);
        if let Some(status) = closes {
            question.view.status = status;
        }
        let view = question.view.clone();
        if closes.is_some() {
            kept.closed_now(id);
        }
        Ok(view)
    }

    fn close_now(&self, id: &str, status: Status) -> Option<QuestionView> {
        let mut kept = self.lock();
        let question = kept.questions.get_mut(id)?;
        if question.view.status != Status::Pending {
            return Some(question.view.clone());
        }
        question.view.status = status;
        let view = question.view.clone();
        kept.closed_now(id);
        Some(view)
    }
}

/// A pending question as shown at `now`.
pub fn shown_at(question: &StoredQuestion, now: SystemTime) -> QuestionView {
    let mut view = question.view.clone();
    if view.status == Status::Pending && now >= question.expires {
        view.status = Status::Expired;
    }
    view
}

impl QuestionStore for MemoryQuestions {
    fn insert(&self, question: StoredQuestion) -> Stored<'_, ()> {
        self.lock()
            .questions
            .insert(question.view.id.clone(), question);
        Box::pin(std::future::ready(Ok(())))
    }

    fn list(&self, now: SystemTime) -> Stored<'_, Vec<QuestionView>> {
        Box::pin(std::future::ready(Ok(self.list_now(now))))
    }

    fn get(&self, id: &str) -> Stored<'_, Option<StoredQuestion>> {
        Box::pin(std::future::ready(Ok(self
            .lock()
            .questions
            .get(id)
            .cloned())))
    }

    fn take(&self, id: &str, answer: AnswerView, now: SystemTime) -> Stored<'_, QuestionView> {
        Box::pin(std::future::ready(self.take_now(id, answer, now)))
    }

    fn close(&self, id: &str, status: Status) -> Stored<'_, Option<QuestionView>> {
        Box::pin(std::future::ready(Ok(self.close_now(id, status))))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::facts::{ToolFacts, Transport};
    use crate::tools::ToolId;

    const T0: Duration = Duration::from_secs(1_800_000_000);

    fn at(seconds: u64) -> SystemTime {
        UNIX_EPOCH + T0 + Duration::from_secs(seconds)
    }

    /// A pending question `id`, asked at `asked`, expiring 60 s later,
    /// needing `required` approvers.
    fn question(id: &str, asked: u64, required: u32) -> StoredQuestion {
        StoredQuestion {
            view: QuestionView {
                id: id.to_owned(),
                status: Status::Pending,
                asked_at: format!("{asked:04}"),
                expires_at: String::new(),
                client: "ci-bot".into(),
                client_tier: "paired".into(),
                transport: "http".into(),
                tool: "builtin/write_file".into(),
                name: "write_file".into(),
                paths: Vec::new(),
                arguments: serde_json::Map::new(),
                hidden: Vec::new(),
                policies: Vec::new(),
                policy_set: "set".into(),
                digest: "digest".into(),
                required,
                answers: Vec::new(),
            },
            call: QuestionCall {
                request_id: "1".into(),
                client: AskingClient {
                    name: "ci-bot".into(),
                    tier: "paired".into(),
                    fingerprint: "0123456789abcdef".into(),
                },
                asked: AskedCall {
                    tool: ToolId::new("builtin", "write_file"),
                    name: "write_file".into(),
                    facts: ToolFacts::without_paths(Transport::Http),
                    paths: Vec::new(),
                    arguments: serde_json::Map::new(),
                    hidden: Vec::new(),
                },
            },
            expires: at(asked + 60),
        }
    }

    fn answer(approver: &str, verdict: Verdict) -> AnswerView {
        AnswerView {
            approver: approver.to_owned(),
            fingerprint: format!("{approver}-fp"),
            verdict,
            reason: String::new(),
            at: String::new(),
        }
    }

    async fn store_with(questions: &[StoredQuestion]) -> MemoryQuestions {
        let store = MemoryQuestions::default();
        for q in questions {
            store.insert(q.clone()).await.unwrap();
        }
        store
    }

    #[tokio::test]
    async fn approvals_close_a_question_once_enough_distinct_approvers_gave_them() {
        let store = store_with(&[question("q", 0, 2)]).await;
        let one = store
            .take("q", answer("alice", Verdict::Approve), at(1))
            .await
            .unwrap();
        assert_eq!(one.status, Status::Pending);
        let again = store
            .take("q", answer("alice", Verdict::Approve), at(2))
            .await;
        assert!(matches!(again, Err(AnswerError::AlreadyApproved { .. })));
        let two = store
            .take("q", answer("carol", Verdict::Approve), at(3))
            .await
            .unwrap();
        assert_eq!(two.status, Status::Approved);
        assert_eq!(two.answers.len(), 2);
        let late = store.take("q", answer("dave", Verdict::Deny), at(4)).await;
        assert!(matches!(
            late,
            Err(AnswerError::Closed {
                status: Status::Approved,
                ..
            })
        ));
    }

    #[tokio::test]
    async fn a_denial_closes_at_once_and_an_answer_past_expiry_is_refused() {
        let store = store_with(&[question("d", 0, 2), question("e", 0, 1)]).await;
        let denied = store
            .take("d", answer("alice", Verdict::Deny), at(1))
            .await
            .unwrap();
        assert_eq!(denied.status, Status::Denied);
        let expired = store
            .take("e", answer("alice", Verdict::Approve), at(60))
            .await;
        assert!(matches!(
            expired,
            Err(AnswerError::Closed {
                status: Status::Expired,
                ..
            })
        ));
        assert!(matches!(
            store.take("nope", answer("a", Verdict::Deny), at(1)).await,
            Err(AnswerError::NoSuchQuestion(_))
        ));
    }

    #[tokio::test]
    async fn closing_keeps_the_answer_that_came_first() {
        let store = store_with(&[question("q", 0, 1), question("w", 0, 1)]).await;
        store
            .take("q", answer("alice", Verdict::Approve), at(1))
            .await
            .unwrap();
        let closed = store.close("q", Status::Expired).await.unwrap().unwrap();
        assert_eq!(closed.status, Status::Approved);
        let withdrawn = store.close("w", Status::Withdrawn).await.unwrap().unwrap();
        assert_eq!(withdrawn.status, Status::Withdrawn);
        assert!(
            store
                .close("nope", Status::Expired)
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn the_list_shows_pending_oldest_first_then_closed_newest_first_and_trims_the_closed() {
        let store = store_with(&[
            question("b", 2, 1),
            question("a", 1, 1),
            question("c", 3, 1),
            question("d", 4, 1),
        ])
        .await;
        store.close("c", Status::Withdrawn).await.unwrap();
        store.close("d", Status::Withdrawn).await.unwrap();
        let listed: Vec<(String, Status)> = store
            .list(at(10))
            .await
            .unwrap()
            .into_iter()
            .map(|v| (v.id, v.status))
            .collect();
        assert_eq!(
            listed,
            [
                ("a".to_owned(), Status::Pending),
                ("b".to_owned(), Status::Pending),
                ("d".to_owned(), Status::Withdrawn),
                ("c".to_owned(), Status::Withdrawn),
            ]
        );
        // Past its expiry a pending question shows as expired.
        let later = store.list(at(62)).await.unwrap();
        assert_eq!(later[0].status, Status::Expired);

        for n in 0..CLOSED_KEPT {
            let id = format!("x{n}");
            store.insert(question(&id, 5, 1)).await.unwrap();
            store.close(&id, Status::Withdrawn).await.unwrap();
        }
        let listed = store.list(at(10)).await.unwrap();
        assert_eq!(listed.len(), 2 + CLOSED_KEPT);
        assert!(store.get("c").await.unwrap().is_none(), "the oldest went");
    }
}
