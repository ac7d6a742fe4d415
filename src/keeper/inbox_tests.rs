//! The approval inbox end to end below the adapters: a call from a client
//! that cannot ask waits in the inbox, approvers answer it through Cedar,
//! once, and every end (approved, denied, expired, withdrawn) is recorded.
//! Time is tokio's paused clock and a manual wall clock: nothing sleeps.

use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::tests::{ALLOW_BUILTIN, Fixture, call, keeper_over};
use super::*;
use crate::approval::{
    Answer, AnswerError, ApprovalSeal, Approvals, Era, Inbox, Reply, Request, Status, Verdict,
};
use crate::audit::{ApproverRef, Kind};
use crate::clock::{Clock, ManualClock};

const SECURITY_APPROVES_WRITES: &str = r#"
@id("approve.security.writes")
@reason("the security team approves writes")
permit (
  principal in Portcullis::ApproverGroup::"security",
  action == Portcullis::Action::"approve",
  resource
)
when { resource.effects.contains("write") };
"#;

/// A client that declares no elicitation, cancelled through `cancel`.
struct Unattended {
    keeper: Arc<Keeper>,
    cancel: CancellationToken,
    told: Mutex<Vec<String>>,
}

impl crate::approval::Asking for Unattended {
    async fn run(&self, approval: Approval) -> CallOutcome {
        let arguments = json!({"path": "inbox.txt", "content": "x"});
        call(&self.keeper, "write_file", arguments, approval).await
    }

    async fn ask(&self, _question: &str, _timeout: Duration) -> Answer {
        panic!("an unattended client is never asked on the call")
    }

    async fn waiting(&self, message: &str) {
        self.told.lock().unwrap().push(message.to_owned());
    }

    async fn stopped(&self) {
        self.cancel.cancelled().await;
    }
}

/// `answer` was refused: its question is closed as `status`.
fn assert_closed(answer: &Result<crate::approval::QuestionView, AnswerError>, status: Status) {
    assert!(
        matches!(answer, Err(AnswerError::Closed { status: closed, .. }) if *closed == status),
        "{answer:?}"
    );
}

struct World {
    fixture: Fixture,
    approvals: Arc<Approvals>,
    inbox: Arc<Inbox>,
    adapter: Arc<Unattended>,
}

fn world() -> World {
    world_of(&format!("{ALLOW_BUILTIN}\n{SECURITY_APPROVES_WRITES}"))
}

fn world_of(policies: &str) -> World {
    let fixture = keeper_over(policies, Registry::builtin().unwrap(), "paired");
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(
        UNIX_EPOCH + Duration::from_secs(1_000_000),
    ));
    let inbox = Arc::new(Inbox::new(Arc::clone(&clock), None));
    let approvals = Arc::new(Approvals {
        seal: ApprovalSeal::new(Duration::from_secs(600), clock).unwrap(),
        timeout: Duration::from_secs(60),
        shared: None,
        inbox: Some(Arc::clone(&inbox)),
    });
    let adapter = Arc::new(Unattended {
        keeper: Arc::clone(&fixture.keeper),
        cancel: CancellationToken::new(),
        told: Mutex::new(Vec::new()),
    });
    World {
        fixture,
        approvals,
        inbox,
        adapter,
    }
}

impl World {
    /// The call, run to its end in a task of its own.
    fn start(&self) -> tokio::task::JoinHandle<Reply> {
        let (approvals, adapter) = (Arc::clone(&self.approvals), Arc::clone(&self.adapter));
        let keeper = Arc::clone(&self.fixture.keeper);
        tokio::spawn(async move {
            let arguments = json!({"path": "inbox.txt", "content": "x"});
            let request = Request {
                request_id: "7",
                name: "write_file",
                arguments: &arguments,
                era: Era::Legacy,
                askable: false,
                retried: None,
            };
            approvals.call(&keeper, &*adapter, request).await.unwrap()
        })
    }

    /// The question, once it is in the inbox.
    async fn pending(&self) -> String {
        loop {
            if let Some(question) = self
                .inbox
                .list()
                .await
                .unwrap()
                .into_iter()
                .find(|q| q.status == Status::Pending)
            {
                return question.id;
            }
            tokio::task::yield_now().await;
        }
    }

    /// An answer of alice's to a question closed as `status`: refused.
    async fn answered_late(&self, id: &str, verdict: Verdict, status: Status) {
        let late = self
            .inbox
            .answer(id, &approver("alice", "security"), verdict, "")
            .await;
        assert_closed(&late, status);
    }

    fn events(&self) -> Vec<String> {
        self.fixture
            .sink
            .bodies(Kind::Approval)
            .iter()
            .map(|b| b["event"].as_str().unwrap().to_owned())
            .collect()
    }

    fn approves(&self) -> Vec<(String, String)> {
        self.fixture
            .sink
            .bodies(Kind::Decision)
            .iter()
            .filter(|b| b["action"] == "approve")
            .map(|b| {
                (
                    b["approver"]["name"].as_str().unwrap().to_owned(),
                    b["decision"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }
}

fn approver(name: &str, group: &str) -> ApproverRef {
    ApproverRef {
        name: name.into(),
        fingerprint: format!("{name:0>16}"),
        groups: vec![group.into()],
    }
}

#[tokio::test]
async fn a_call_nobody_on_the_client_can_approve_waits_and_runs_once_approved() {
    let w = world();
    let call = w.start();
    let id = w.pending().await;
    let shown = w.inbox.get(&id).await.unwrap().unwrap();
    assert_eq!(
        (shown.client.as_str(), shown.tool.as_str()),
        ("agent", "builtin/write_file")
    );
    assert_eq!(shown.paths, [("path".to_owned(), "inbox.txt".to_owned())]);
    assert!(shown.arguments.contains_key("path"));
    assert!(
        !shown.arguments.contains_key("content"),
        "redacted arguments are never shown"
    );
    assert_eq!(shown.hidden, ["content"]);

    // Another group: Cedar says no, recorded, and the question waits on.
    let refused = w
        .inbox
        .answer(&id, &approver("bob", "ops"), Verdict::Approve, "")
        .await;
    assert!(
        matches!(refused, Err(AnswerError::NotPermitted { .. })),
        "{refused:?}"
    );
    assert_eq!(
        w.inbox.get(&id).await.unwrap().unwrap().status,
        Status::Pending
    );

    let taken = w
        .inbox
        .answer(&id, &approver("alice", "security"), Verdict::Approve, "ok")
        .await
        .unwrap();
    assert_eq!(taken.status, Status::Approved);
    let Reply::Done(CallOutcome::Completed(_)) = call.await.unwrap() else {
        panic!("the approved call did not run")
    };
    assert!(w.fixture.dir.path().join("ws/inbox.txt").exists());
    assert_eq!(
        w.adapter.told.lock().unwrap().as_slice(),
        [format!("waiting for approval `{id}` in the inbox")]
    );
    assert_eq!(w.events(), ["asked", "answered"]);
    assert_eq!(
        w.approves(),
        [
            ("bob".to_owned(), "deny".to_owned()),
            ("alice".to_owned(), "allow".to_owned())
        ]
    );
    let decisions = w.fixture.sink.bodies(Kind::Decision);
    let last = decisions
        .iter()
        .rfind(|b| b["action"] == "call_tool")
        .unwrap();
    assert_eq!(
        (
            last["approved"].clone(),
            last["approval_channel"].clone(),
            last["decision"].clone()
        ),
        (json!(true), json!("inbox"), json!("allow"))
    );

    // Answered once.
    w.answered_late(&id, Verdict::Deny, Status::Approved).await;
}

#[tokio::test]
async fn a_denial_tells_the_client_who_and_why_and_runs_nothing() {
    let w = world();
    let call = w.start();
    let id = w.pending().await;
    w.inbox
        .answer(&id, &approver("alice", "security"), Verdict::Deny, "freeze")
        .await
        .unwrap();
    let Reply::Declined {
        why,
        said,
        policies,
    } = call.await.unwrap()
    else {
        panic!("a denied call ran")
    };
    assert_eq!(why, "approval_declined");
    assert_eq!(said.as_deref(), Some("denied by alice: freeze"));
    assert_eq!(policies, ["approval.writes"]);
    assert!(!w.fixture.dir.path().join("ws/inbox.txt").exists());
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_question_expires_and_cannot_be_answered_after() {
    let w = world();
    let call = w.start();
    let id = w.pending().await;
    // Paused: tokio moves its clock to the timeout once everything waits.
    let Reply::Declined { why, .. } = call.await.unwrap() else {
        panic!("an expired question ran its call")
    };
    assert_eq!(why, "approval_expired");
    w.answered_late(&id, Verdict::Approve, Status::Expired)
        .await;
    assert_eq!(w.events(), ["asked", "expired"]);
    assert!(
        w.approves().is_empty(),
        "a closed question asks Cedar nothing"
    );
}

#[tokio::test]
async fn a_cancelled_call_withdraws_its_question() {
    let w = world();
    let call = w.start();
    let id = w.pending().await;
    w.adapter.cancel.cancel();
    let Reply::Done(CallOutcome::Cancelled) = call.await.unwrap() else {
        panic!("a cancelled call did not end as cancelled")
    };
    assert_eq!(
        w.inbox.get(&id).await.unwrap().unwrap().status,
        Status::Withdrawn
    );
    w.answered_late(&id, Verdict::Approve, Status::Withdrawn)
        .await;
    assert_eq!(w.events(), ["asked", "withdrawn"]);
    assert!(!w.fixture.dir.path().join("ws/inbox.txt").exists());
}

#[tokio::test]
async fn a_call_whose_client_went_away_withdraws_its_question_and_says_so() {
    let w = world();
    let call = w.start();
    let id = w.pending().await;
    // The connection closed: the waiting future is dropped, not cancelled.
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    for _ in 0..10_000 {
        if w.events() == ["asked", "withdrawn"] {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(w.events(), ["asked", "withdrawn"]);
    assert_eq!(
        w.inbox.get(&id).await.unwrap().unwrap().status,
        Status::Withdrawn
    );
    let withdrawn = w
        .fixture
        .sink
        .bodies(Kind::Approval)
        .into_iter()
        .find(|b| b["event"] == "withdrawn")
        .unwrap();
    assert_eq!(withdrawn["detail"]["question"], id.as_str());
    assert_eq!(withdrawn["detail"]["disconnected"], true);
    assert_eq!(withdrawn["channel"], "inbox");
    w.answered_late(&id, Verdict::Approve, Status::Withdrawn)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_approvals_at_once_count_once() {
    let w = world();
    let call = w.start();
    let id = w.pending().await;
    let (alice, carol) = (approver("alice", "security"), approver("carol", "security"));
    let (first, second) = tokio::join!(
        w.inbox.answer(&id, &alice, Verdict::Approve, ""),
        w.inbox.answer(&id, &carol, Verdict::Approve, ""),
    );
    let taken = [first.is_ok(), second.is_ok()];
    assert_eq!(
        taken.iter().filter(|t| **t).count(),
        1,
        "{first:?} {second:?}"
    );
    let late = if first.is_ok() { second } else { first };
    assert_closed(&late, Status::Approved);
    assert!(matches!(
        call.await.unwrap(),
        Reply::Done(CallOutcome::Completed(_))
    ));
    let answered: Vec<Value> = w
        .fixture
        .sink
        .bodies(Kind::Approval)
        .into_iter()
        .filter(|b| b["event"] == "answered")
        .collect();
    assert_eq!(answered.len(), 1);
}

const TWO_FOR_WRITES: &str = r#"
@id("approval.two_for_writes")
@reason("writes approved through the inbox need two approvers")
forbid (
  principal,
  action in Portcullis::Action::"call_tool",
  resource
)
when { resource.effects.contains("write") && context.approval_channel == "inbox" }
unless { context.approvers >= 2 };
"#;

#[tokio::test]
async fn a_policy_that_asks_for_two_approvers_gets_two_distinct_ones() {
    let w = world_of(&format!(
        "{ALLOW_BUILTIN}\n{SECURITY_APPROVES_WRITES}\n{TWO_FOR_WRITES}"
    ));
    let call = w.start();
    let id = w.pending().await;
    assert_eq!(w.inbox.get(&id).await.unwrap().unwrap().required, 2);
    let alice = approver("alice", "security");
    let first = w
        .inbox
        .answer(&id, &alice, Verdict::Approve, "")
        .await
        .unwrap();
    assert_eq!((first.status, first.answers.len()), (Status::Pending, 1));
    let again = w.inbox.answer(&id, &alice, Verdict::Approve, "").await;
    assert!(
        matches!(again, Err(AnswerError::AlreadyApproved { .. })),
        "{again:?}"
    );
    assert!(!w.fixture.dir.path().join("ws/inbox.txt").exists());
    let second = w
        .inbox
        .answer(&id, &approver("carol", "security"), Verdict::Approve, "")
        .await
        .unwrap();
    assert_eq!(second.status, Status::Approved);
    assert!(matches!(
        call.await.unwrap(),
        Reply::Done(CallOutcome::Completed(_))
    ));
    let decisions = w.fixture.sink.bodies(Kind::Decision);
    let ran = decisions
        .iter()
        .rfind(|b| b["action"] == "call_tool")
        .unwrap();
    assert_eq!(
        (
            ran["approved"].clone(),
            ran["approvers"].clone(),
            ran["decision"].clone()
        ),
        (json!(true), json!(2), json!("allow"))
    );
    let asked = decisions
        .iter()
        .find(|b| b["action"] == "call_tool")
        .unwrap();
    assert_eq!(
        (asked["decision"].clone(), asked["approvers"].clone()),
        (json!("ask"), json!(3))
    );
}
