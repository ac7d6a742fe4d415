//! Asking a human, whatever the protocol era: the orchestration an adapter
//! calls, so that the adapter only translates.
//!
//! - Legacy sessions: the question goes to the user on the same call
//!   ([`Asking::ask`], an elicitation with a timeout) and the answer comes
//!   back there.
//! - 2026-07-28 requests: the call ends with the question and a sealed state
//!   ([`Reply::InputRequired`]); the client retries with the answer and the
//!   state, which must open for this client and this very call.
//!
//! Either way only an explicit approval makes a [`Grant`], and the call runs
//! only through the keeper again, decided with `approved = true`. Every
//! question, answer and refused state is audited.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::grant::Grant;
use super::inbox::{Ended, Inbox, NewQuestion};
use super::ledger::{NonceLedger, Spent};
use super::seal::{ApprovalSeal, SealError};
use crate::keeper::{Approval, AskedCall, CallOutcome, Keeper};
use crate::pdp::{Decision, INBOX_CHANNEL};

/// A fresh question id: 12 hex digits, unguessable enough that an id seen
/// on one page says nothing about the next, short enough to type.
fn question_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 6];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// What the user answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Approve,
    /// Declined, cancelled, not ticked, timed out, no answer: the name of
    /// the refusal, as recorded.
    Refuse(&'static str),
}

impl Answer {
    fn recorded(self) -> &'static str {
        match self {
            Answer::Approve => "approve",
            Answer::Refuse(why) => why,
        }
    }
}

/// What the flow needs of the adapter.
pub trait Asking {
    /// Runs the call through the keeper with this approval state.
    fn run(&self, approval: Approval) -> impl Future<Output = CallOutcome> + Send;
    /// Puts the question to the user on this same call and waits at most
    /// `timeout` for the answer.
    fn ask(&self, question: &str, timeout: Duration) -> impl Future<Output = Answer> + Send;
    /// Tells the client (as progress, when it asked for progress) that the
    /// call waits in the approval inbox.
    fn waiting(&self, message: &str) -> impl Future<Output = ()> + Send;
    /// Resolves when the caller cancels the call.
    fn stopped(&self) -> impl Future<Output = ()> + Send;
}

/// How the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// `initialize` sessions: questions go out as server-to-client requests.
    Legacy,
    /// 2026-07-28 requests: questions go back in the result.
    Modern,
}

/// A call as the adapter received it.
pub struct Request<'a> {
    pub request_id: &'a str,
    pub name: &'a str,
    pub arguments: &'a Value,
    pub era: Era,
    /// The client declared it can put a question to its user.
    pub askable: bool,
    /// A retried 2026-07-28 call: the state it carried, and the answer
    /// (`None` when it carried none).
    pub retried: Option<(Option<&'a str>, Option<Answer>)>,
}

/// What the adapter answers.
#[derive(Debug)]
pub enum Reply {
    /// The call ended (ran, failed, was refused or cancelled).
    Done(CallOutcome),
    /// The user did not approve; the policies that asked.
    Declined {
        why: &'static str,
        policies: Vec<String>,
        /// Who refused in the inbox, and why, in their words.
        said: Option<String>,
    },
    /// Ask this question in the result; the client retries with the
    /// answer and this sealed state.
    InputRequired { question: String, state: String },
}

/// The approval state could not be sealed (no randomness).
#[derive(Debug, thiserror::Error)]
#[error("the approval state could not be sealed")]
pub struct SealUnavailable;

/// Approval settings and the seal of one server process.
pub struct Approvals {
    pub seal: ApprovalSeal,
    /// How long a legacy question waits for the user, and a question in
    /// the inbox for an approver.
    pub timeout: Duration,
    /// Where a fleet spends nonces; `None` spends them in the seal, for
    /// this process alone.
    pub shared: Option<Arc<dyn NonceLedger>>,
    /// The approval inbox, when this server has one: questions no client
    /// can answer wait there for approvers.
    pub inbox: Option<Arc<Inbox>>,
}

/// What a retried call carried.
enum Retry {
    Granted(Grant),
    Declined(&'static str),
    /// No usable answer (a refused state, a missing response): ask again.
    AskAgain,
}

impl Approvals {
    /// Runs one call to its end, asking a human when the decision is ask
    /// and the client can put the question.
    pub async fn call(
        &self,
        keeper: &Keeper,
        adapter: &impl Asking,
        request: Request<'_>,
    ) -> Result<Reply, SealUnavailable> {
        let mut approval = match (request.askable, self.inbox.is_some()) {
            (true, true) => Approval::AskableOrInbox,
            (true, false) => Approval::Askable,
            (false, true) => Approval::Inbox,
            (false, false) => Approval::Unavailable,
        };
        if let (Era::Modern, Some((state, answer))) = (request.era, request.retried) {
            match self.check_retry(keeper, &request, state, answer).await {
                Retry::Granted(grant) => approval = Approval::Granted(grant),
                Retry::Declined(why) => {
                    return Ok(Reply::Declined {
                        why,
                        policies: Vec::new(),
                        said: None,
                    });
                }
                Retry::AskAgain => {}
            }
        }
        let outcome = adapter.run(approval).await;
        let CallOutcome::NeedsApproval {
            decision,
            digest,
            question,
            via,
            asked,
        } = outcome
        else {
            return Ok(Reply::Done(outcome));
        };
        if let (INBOX_CHANNEL, Some(inbox)) = (via, &self.inbox) {
            let waiting = InboxCall {
                keeper,
                inbox,
                request_id: request.request_id,
                decision: &decision,
                digest,
                asked: *asked,
            };
            return Ok(self.through_inbox(waiting, adapter).await);
        }
        self.through_client(keeper, adapter, &request, &decision, (digest, question))
            .await
    }

    /// Asks the client itself: a sealed state for a 2026-07-28 client to
    /// retry with, or, on a legacy session, the question now (elicitation
    /// or the harness's prompt). Recorded asked and answered.
    async fn through_client(
        &self,
        keeper: &Keeper,
        adapter: &impl Asking,
        request: &Request<'_>,
        decision: &Decision,
        (digest, question): (String, String),
    ) -> Result<Reply, SealUnavailable> {
        let asking: Vec<String> = decision.policies.iter().map(|p| p.id.clone()).collect();
        let id = request.request_id;
        if request.era == Era::Modern {
            let state = self
                .seal
                .seal(&keeper.client().fingerprint, &digest)
                .map_err(|_| SealUnavailable)?;
            let detail = json!({"policies": asking, "era": "2026-07-28"});
            keeper.record_approval(id, "asked", &digest, detail).await;
            return Ok(Reply::InputRequired { question, state });
        }
        let detail = json!({"policies": asking, "era": "legacy"});
        keeper.record_approval(id, "asked", &digest, detail).await;
        let answer = adapter.ask(&question, self.timeout).await;
        let detail = json!({"answer": answer.recorded()});
        keeper
            .record_approval(id, "answered", &digest, detail)
            .await;
        match answer {
            Answer::Refuse(why) => Ok(Reply::Declined {
                why,
                policies: asking,
                said: None,
            }),
            Answer::Approve => Ok(Reply::Done(
                adapter
                    .run(Approval::Granted(Grant::checked(
                        digest,
                        keeper.client_channel(),
                    )))
                    .await,
            )),
        }
    }

    /// Checks the state and answer of a retried call. Every refusal is
    /// audited; none runs the call.
    async fn check_retry(
        &self,
        keeper: &Keeper,
        request: &Request<'_>,
        state: Option<&str>,
        answer: Option<Answer>,
    ) -> Retry {
        let id = request.request_id;
        let Some(digest) = keeper.action_digest(request.name, request.arguments) else {
            return Retry::AskAgain;
        };
        let Some(state) = state else {
            let detail = json!({"why": "missing"});
            keeper
                .record_approval(id, "state_refused", &digest, detail)
                .await;
            return Retry::AskAgain;
        };
        if let Err(refused) = self
            .open(state, &keeper.client().fingerprint, &digest)
            .await
        {
            let detail = json!({"why": refused});
            keeper
                .record_approval(id, "state_refused", &digest, detail)
                .await;
            return Retry::AskAgain;
        }
        let Some(answer) = answer else {
            keeper
                .record_approval(id, "answer_missing", &digest, json!({}))
                .await;
            return Retry::AskAgain;
        };
        let detail = json!({"answer": answer.recorded()});
        keeper
            .record_approval(id, "answered", &digest, detail)
            .await;
        match answer {
            Answer::Approve => Retry::Granted(Grant::checked(digest, keeper.client_channel())),
            Answer::Refuse(why) => Retry::Declined(why),
        }
    }
}

/// A call whose question goes to the inbox.
struct InboxCall<'a> {
    keeper: &'a Keeper,
    inbox: &'a Arc<Inbox>,
    request_id: &'a str,
    decision: &'a Decision,
    digest: String,
    asked: AskedCall,
}

impl Approvals {
    /// Posts the question in the inbox (recorded first) and waits for the
    /// answer, the timeout or the caller's cancel; each end is recorded,
    /// and only an approval that Cedar let through runs the call, decided
    /// again with the approval through the inbox's channel.
    async fn through_inbox(&self, call: InboxCall<'_>, adapter: &impl Asking) -> Reply {
        let asking: Vec<String> = call
            .decision
            .policies
            .iter()
            .map(|p| p.id.clone())
            .collect();
        let declined = |why| Reply::Declined {
            why,
            policies: asking.clone(),
            said: None,
        };
        let Ok(id) = question_id() else {
            return declined("approval_unavailable");
        };
        let (keeper, request_id, digest) = (call.keeper, call.request_id, call.digest.clone());
        let detail =
            json!({"question": id, "policies": asking, "tool": call.asked.tool.to_string()});
        let recorded = keeper
            .record_approval_via(request_id, "asked", &digest, INBOX_CHANNEL, detail)
            .await;
        if recorded.is_err() {
            return Reply::Done(CallOutcome::AuditUnavailable);
        }
        let Some(ended) = self.wait_in_inbox(&id, call, adapter).await else {
            return declined("approval_unavailable");
        };
        let (event, detail) = match &ended {
            Ended::Approved(answers) => (
                "answered",
                json!({"question": id, "answer": "approve", "approvers": answers}),
            ),
            Ended::Denied(answer) => (
                "answered",
                json!({"question": id, "answer": "deny", "approvers": [answer]}),
            ),
            Ended::Expired => ("expired", json!({"question": id})),
            Ended::Withdrawn => ("withdrawn", json!({"question": id})),
        };
        let _ = keeper
            .record_approval_via(request_id, event, &digest, INBOX_CHANNEL, detail)
            .await;
        match ended {
            Ended::Approved(answers) => {
                let approvers = u32::try_from(answers.len()).unwrap_or(u32::MAX);
                let grant = Grant::by_quorum(digest, INBOX_CHANNEL, approvers);
                Reply::Done(adapter.run(Approval::Granted(grant)).await)
            }
            Ended::Denied(answer) => Reply::Declined {
                why: "approval_declined",
                policies: asking,
                said: Some(if answer.reason.is_empty() {
                    format!("denied by {}", answer.approver)
                } else {
                    format!("denied by {}: {}", answer.approver, answer.reason)
                }),
            },
            Ended::Expired => declined("approval_expired"),
            Ended::Withdrawn => Reply::Done(CallOutcome::Cancelled),
        }
    }

    /// Posts question `id` and waits for how it ends: answered, expired,
    /// or withdrawn when the caller stops. `None` when it cannot be posted
    /// (recorded as withdrawn).
    async fn wait_in_inbox(
        &self,
        id: &str,
        call: InboxCall<'_>,
        adapter: &impl Asking,
    ) -> Option<Ended> {
        let InboxCall {
            keeper,
            inbox,
            request_id,
            decision,
            digest,
            asked,
        } = call;
        let question = NewQuestion {
            id: id.to_owned(),
            required: keeper.inbox_quorum(&asked),
            keeper: Arc::new(keeper.pinned()),
            request_id,
            digest: &digest,
            decision,
            asked,
        };
        let mut posted = match inbox.post(question, self.timeout).await {
            Ok(posted) => posted,
            Err(err) => {
                tracing::error!(question = %id, error = %err, "a question cannot be posted in the inbox");
                let detail = json!({"question": id, "unposted": err.to_string()});
                let _ = keeper
                    .record_approval_via(request_id, "withdrawn", &digest, INBOX_CHANNEL, detail)
                    .await;
                return None;
            }
        };
        adapter
            .waiting(&format!("waiting for approval `{id}` in the inbox"))
            .await;
        let ended = tokio::select! {
            ended = posted.answered(self.timeout) => Some(ended),
            () = adapter.stopped() => None,
        };
        Some(match ended {
            Some(ended) => ended,
            None => {
                posted.withdraw().await;
                Ended::Withdrawn
            }
        })
    }

    /// Opens a state and spends its nonce where the states of this
    /// process (or fleet) are spent; the refusal's code when it does not
    /// open.
    async fn open(&self, state: &str, fingerprint: &str, digest: &str) -> Result<(), &'static str> {
        let Some(shared) = &self.shared else {
            return self
                .seal
                .open(state, fingerprint, digest)
                .map_err(SealError::code);
        };
        let unspent = self
            .seal
            .verify(state, fingerprint, digest)
            .map_err(SealError::code)?;
        match shared.spend(unspent).await {
            Ok(Spent::Now) => Ok(()),
            Ok(Spent::Before) => Err(SealError::Replayed.code()),
            Err(err) => {
                tracing::error!(error = %err, "an approval state cannot be spent: it is refused");
                Err("ledger_unavailable")
            }
        }
    }
}
