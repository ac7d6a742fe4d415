//! The fleet's approval inbox: a question a row, its answers rows of
//! their own, so that a question asked through one replica is listed and
//! answered through any other's page. An answer is taken in one
//! transaction that locks its question's row, checks it is still open and
//! the approver new to it, and closes it when it is enough; the commit
//! notifies every replica, and the one whose call waits wakes it.
//!
//! A replica that dies leaves its pending questions behind: they show as
//! expired once their time is up, and no answer is taken past it.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio_postgres::GenericClient;
use tokio_postgres::error::SqlState;

use super::listen::listen;
use super::{SharedState, StateError, millis};
use crate::approval::{
    AnswerError, AnswerView, CLOSED_KEPT, Inbox, QuestionCall, QuestionStore, QuestionView, Status,
    Stored, StoredQuestion, Verdict, check_answer, closes_with, shown_at,
};

/// The channel a taken answer or a closed question is told on; the
/// payload is the question's id.
const CHANNEL: &str = "portcullis_questions";

/// How long a closed question stays in the table: its records are in the
/// audit log for good.
const CLOSED_KEPT_FOR: Duration = Duration::from_secs(7 * 24 * 3600);

/// How often a replica whose notifications stopped reads its questions
/// again, and tries to listen.
const RETRY: Duration = Duration::from_millis(250);

/// The questions of one shared state, posted by replica `replica`.
pub struct SharedQuestions {
    state: SharedState,
    replica: String,
}

impl SharedQuestions {
    pub fn new(state: SharedState, replica: &str) -> Self {
        Self {
            state,
            replica: replica.to_owned(),
        }
    }

    async fn insert_now(&self, question: StoredQuestion) -> Result<(), StateError> {
        let view = serde_json::to_string(&question.view).map_err(not_json)?;
        let call = serde_json::to_string(&question.call).map_err(not_json)?;
        let asked = millis(SystemTime::now());
        let client = self.state.client().await?;
        client
            .execute(
                "INSERT INTO portcullis_questions (id, replica, asked_ms, expires_ms, status, required, view, call) \
                 VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7)",
                &[
                    &question.view.id,
                    &self.replica,
                    &asked,
                    &millis(question.expires),
                    &i32::try_from(question.view.required).unwrap_or(i32::MAX),
                    &view,
                    &call,
                ],
            )
            .await?;
        let stale = millis(SystemTime::now() - CLOSED_KEPT_FOR);
        client
            .execute(
                "DELETE FROM portcullis_questions WHERE expires_ms < $1",
                &[&stale],
            )
            .await?;
        Ok(())
    }

    async fn list_now(&self, now: SystemTime) -> Result<Vec<QuestionView>, StateError> {
        let client = self.state.client().await?;
        let closed_kept = i64::try_from(CLOSED_KEPT).unwrap_or(i64::MAX);
        let pending = client
            .query(
                "SELECT id, status, view, call, expires_ms FROM portcullis_questions \
                 WHERE status = 'pending' ORDER BY asked_ms, id",
                &[],
            )
            .await?;
        let closed = client
            .query(
                "SELECT id, status, view, call, expires_ms FROM portcullis_questions \
                 WHERE status <> 'pending' ORDER BY closed_ms DESC, id LIMIT $1",
                &[&closed_kept],
            )
            .await?;
        let mut questions = Vec::with_capacity(pending.len() + closed.len());
        for row in pending.iter().chain(&closed) {
            questions.push(question_of(row)?);
        }
        with_answers(&**client, &mut questions).await?;
        Ok(questions.iter().map(|q| shown_at(q, now)).collect())
    }
}

/// The question `id`, its row locked for the transaction when `lock`.
async fn get_now(
    client: &impl GenericClient,
    id: &str,
    lock: bool,
) -> Result<Option<StoredQuestion>, StateError> {
    let statement = if lock {
        "SELECT id, status, view, call, expires_ms FROM portcullis_questions WHERE id = $1 FOR UPDATE"
    } else {
        "SELECT id, status, view, call, expires_ms FROM portcullis_questions WHERE id = $1"
    };
    let Some(row) = client.query_opt(statement, &[&id]).await? else {
        return Ok(None);
    };
    let mut questions = vec![question_of(&row)?];
    with_answers(client, &mut questions).await?;
    Ok(questions.pop())
}

/// Fills each question's answers, in the order they were taken.
async fn with_answers(
    client: &impl GenericClient,
    questions: &mut [StoredQuestion],
) -> Result<(), StateError> {
    let ids: Vec<&str> = questions.iter().map(|q| q.view.id.as_str()).collect();
    if ids.is_empty() {
        return Ok(());
    }
    let rows = client
            .query(
                "SELECT question_id, approver, fingerprint, verdict, reason, at FROM portcullis_answers \
                 WHERE question_id = ANY($1) ORDER BY question_id, n",
                &[&ids],
            )
            .await?;
    for row in rows {
        let id: &str = row.get(0);
        let verdict = match row.get::<_, &str>(3) {
            "deny" => Verdict::Deny,
            _ => Verdict::Approve,
        };
        if let Some(question) = questions.iter_mut().find(|q| q.view.id == id) {
            question.view.answers.push(AnswerView {
                approver: row.get(1),
                fingerprint: row.get(2),
                verdict,
                reason: row.get(4),
                at: row.get(5),
            });
        }
    }
    Ok(())
}

impl SharedQuestions {
    async fn take_now(
        &self,
        id: &str,
        answer: AnswerView,
        now: SystemTime,
    ) -> Result<QuestionView, AnswerError> {
        let mut client = self.state.client().await.map_err(unavailable)?;
        let transaction = client
            .transaction()
            .await
            .map_err(|err| unavailable(err.into()))?;
        let mut question = get_now(&*transaction, id, true)
            .await
            .map_err(unavailable)?
            .ok_or_else(|| AnswerError::NoSuchQuestion(id.to_owned()))?;
        check_answer(&question.view, question.expires, &answer, now)?;
        let closes = closes_with(&question.view, &answer);
        let n = i32::try_from(question.view.answers.len()).unwrap_or(i32::MAX);
        let verdict = answer.verdict.as_str();
        let inserted = transaction
            .execute(
                "INSERT INTO portcullis_answers (question_id, n, approver, fingerprint, verdict, reason, at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &id,
                    &n,
                    &answer.approver,
                    &answer.fingerprint,
                    &verdict,
                    &answer.reason,
                    &answer.at,
                ],
            )
            .await;
        if let Err(err) = inserted {
            // The row lock makes this unreachable but for a second
            // transaction of the same approver: the answer counts once.
            if err.code() == Some(&SqlState::UNIQUE_VIOLATION) {
                return Err(AnswerError::AlreadyApproved {
                    id: id.to_owned(),
                    approver: answer.approver,
                });
            }
            return Err(unavailable(err.into()));
        }
        question.view.answers.push(answer);
        if let Some(status) = closes {
            transaction
                .execute(
                    "UPDATE portcullis_questions SET status = $2, closed_ms = $3 WHERE id = $1",
                    &[&id, &status.as_str(), &millis(now)],
                )
                .await
                .map_err(|err| unavailable(err.into()))?;
            question.view.status = status;
        }
        transaction
            .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &id])
            .await
            .map_err(|err| unavailable(err.into()))?;
        transaction
            .commit()
            .await
            .map_err(|err| unavailable(err.into()))?;
        Ok(question.view)
    }

    async fn close_now(
        &self,
        id: &str,
        status: Status,
    ) -> Result<Option<QuestionView>, StateError> {
        let client = self.state.client().await?;
        client
            .execute(
                "UPDATE portcullis_questions SET status = $2, closed_ms = $3 WHERE id = $1 AND status = 'pending'",
                &[&id, &status.as_str(), &millis(SystemTime::now())],
            )
            .await?;
        Ok(get_now(&**client, id, false).await?.map(|q| q.view))
    }
}

impl QuestionStore for SharedQuestions {
    fn insert(&self, question: StoredQuestion) -> Stored<'_, ()> {
        Box::pin(async move { self.insert_now(question).await.map_err(unavailable) })
    }

    fn list(&self, now: SystemTime) -> Stored<'_, Vec<QuestionView>> {
        Box::pin(async move { self.list_now(now).await.map_err(unavailable) })
    }

    fn get(&self, id: &str) -> Stored<'_, Option<StoredQuestion>> {
        let id = id.to_owned();
        Box::pin(async move {
            let client = self.state.client().await.map_err(unavailable)?;
            get_now(&**client, &id, false).await.map_err(unavailable)
        })
    }

    fn take(&self, id: &str, answer: AnswerView, now: SystemTime) -> Stored<'_, QuestionView> {
        let id = id.to_owned();
        Box::pin(async move { self.take_now(&id, answer, now).await })
    }

    fn close(&self, id: &str, status: Status) -> Stored<'_, Option<QuestionView>> {
        let id = id.to_owned();
        Box::pin(async move { self.close_now(&id, status).await.map_err(unavailable) })
    }
}

/// A row of `id, status, view, call, expires_ms`, its answers not yet read.
fn question_of(row: &tokio_postgres::Row) -> Result<StoredQuestion, StateError> {
    let mut view: QuestionView = serde_json::from_str(row.get(2)).map_err(not_json)?;
    let call: QuestionCall = serde_json::from_str(row.get(3)).map_err(not_json)?;
    view.status = match row.get::<_, &str>(1) {
        "approved" => Status::Approved,
        "denied" => Status::Denied,
        "expired" => Status::Expired,
        "withdrawn" => Status::Withdrawn,
        _ => Status::Pending,
    };
    view.answers.clear();
    let expires =
        UNIX_EPOCH + Duration::from_millis(u64::try_from(row.get::<_, i64>(4)).unwrap_or(0));
    Ok(StoredQuestion {
        view,
        call,
        expires,
    })
}

fn not_json(err: serde_json::Error) -> StateError {
    StateError::Corrupt(format!("a question of the shared inbox: {err}"))
}

fn unavailable(err: StateError) -> AnswerError {
    AnswerError::Unavailable(err.to_string())
}

/// Wakes the calls of this replica whose questions another replica
/// answered, until the process ends: `LISTEN`, and whenever the
/// notifications could not be heard, every question waited on is read
/// again (an answer taken meanwhile is not missed).
pub async fn follow_answers(state: SharedState, inbox: Arc<Inbox>) {
    loop {
        match listen(&state, CHANNEL).await {
            Ok(mut listening) => {
                recheck(&inbox).await;
                while let Some(id) = listening.heard.recv().await {
                    inbox.heard(&id).await;
                }
                tracing::warn!("the inbox's notifications stopped: reconnecting");
            }
            Err(err) => {
                tracing::warn!(error = %err, "the inbox's notifications cannot be heard: its questions are read again until they can");
            }
        }
        tokio::time::sleep(RETRY).await;
        recheck(&inbox).await;
    }
}

async fn recheck(inbox: &Inbox) {
    for id in inbox.waited_on() {
        inbox.heard(&id).await;
    }
}
