//! The keeper's pipeline against an in-memory audit sink.

use std::fs;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::sink::memory::MemorySink;
use super::*;
use crate::approval::Grant;
use crate::pdp::{ClientRecord, PolicyBundle, SourceFile};

pub(super) const ALLOW_BUILTIN: &str = r#"
@id("allow.builtin")
@reason("test clients may use the built-in tools")
permit (
  principal,
  action in Portcullis::Action::"use_tool",
  resource in Portcullis::Server::"builtin"
);
"#;

pub(super) struct Fixture {
    pub keeper: Arc<Keeper>,
    pub sink: Arc<MemorySink>,
    pub dir: tempfile::TempDir,
}

fn fixture(tier: &str) -> Fixture {
    keeper_over(ALLOW_BUILTIN, Registry::builtin().unwrap(), tier)
}

/// A keeper of `registry`'s tools under the default policies and
/// `allowlist`, for one client of `tier`, recording into memory.
pub(super) fn keeper_over(allowlist: &str, registry: Registry, tier: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("ws")).unwrap();
    let mut bundle = PolicyBundle::builtin();
    bundle.policies.push(SourceFile {
        logical: "policies/20_allowlist.cedar".into(),
        display: "policies/20_allowlist.cedar".into(),
        text: allowlist.into(),
    });
    let clients = [ClientRecord {
        name: "agent".into(),
        tier: tier.into(),
    }];
    let engine = Engine::load(&bundle, &registry, &clients).unwrap();
    let sink = Arc::new(MemorySink::default());
    let keeper = Keeper::new(
        Setting {
            engine,
            registry,
            root: Root::new(&dir.path().join("ws")).unwrap(),
        },
        ClientIdentity {
            name: "agent".into(),
            tier: tier.into(),
            fingerprint: "0123456789abcdef".into(),
        },
        Transport::Stdio,
        Arc::clone(&sink) as Arc<dyn AuditSink>,
        "session".into(),
    );
    Fixture {
        keeper: Arc::new(keeper),
        sink,
        dir,
    }
}

pub(super) async fn call(
    keeper: &Arc<Keeper>,
    name: &str,
    arguments: Value,
    approval: Approval,
) -> CallOutcome {
    let (progress, _) = mpsc::unbounded_channel();
    keeper
        .call(
            "1",
            name,
            arguments,
            approval,
            Some(progress),
            CancellationToken::new(),
        )
        .await
}

fn write_args() -> Value {
    json!({"path": "new.txt", "content": "x"})
}

#[tokio::test]
async fn an_allowed_call_runs_after_its_record_and_records_how_it_ended() {
    let f = fixture("paired");
    fs::write(f.dir.path().join("ws/a.txt"), "hello\n").unwrap();
    let outcome = call(
        &f.keeper,
        "read_file",
        json!({"path": "a.txt"}),
        Approval::Unavailable,
    )
    .await;
    assert!(matches!(outcome, CallOutcome::Completed(_)), "{outcome:?}");
    let decisions = f.sink.bodies(Kind::Decision);
    let actions: Vec<&str> = decisions
        .iter()
        .map(|d| d["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["discover_tool", "call_tool"]);
    let outcomes = f.sink.bodies(Kind::Outcome);
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0]["status"], "executed");
    assert_eq!(outcomes[0]["decision_seq"], 2);
}

#[tokio::test]
async fn nothing_runs_and_nothing_is_asked_without_a_durable_record() {
    let f = fixture("paired");
    f.sink.failing.store(true, Ordering::Relaxed);
    let granted = Approval::Granted(Grant::for_tests(
        &f.keeper.action_digest("write_file", &write_args()).unwrap(),
    ));
    for approval in [Approval::Askable, granted] {
        let outcome = call(&f.keeper, "write_file", write_args(), approval).await;
        assert!(
            matches!(outcome, CallOutcome::AuditUnavailable),
            "{outcome:?}"
        );
    }
    assert!(!f.dir.path().join("ws/new.txt").exists());
}

#[tokio::test]
async fn a_grant_counts_only_for_the_call_it_was_given_for() {
    let f = fixture("paired");
    let other = json!({"path": "other.txt", "content": "x"});
    let grant = Grant::for_tests(&f.keeper.action_digest("write_file", &other).unwrap());
    let outcome = call(
        &f.keeper,
        "write_file",
        write_args(),
        Approval::Granted(grant),
    )
    .await;
    assert!(
        matches!(outcome, CallOutcome::ApprovalUnavailable(_)),
        "{outcome:?}"
    );
    assert!(!f.dir.path().join("ws/new.txt").exists());

    let grant = Grant::for_tests(&f.keeper.action_digest("write_file", &write_args()).unwrap());
    let outcome = call(
        &f.keeper,
        "write_file",
        write_args(),
        Approval::Granted(grant),
    )
    .await;
    assert!(matches!(outcome, CallOutcome::Completed(_)), "{outcome:?}");
    let last = f.sink.bodies(Kind::Decision).pop().unwrap();
    assert_eq!(
        (last["approved"].clone(), last["cause"].clone()),
        (json!(true), json!("approved"))
    );
}

#[tokio::test]
async fn an_ask_becomes_a_question_only_when_someone_can_answer() {
    let f = fixture("paired");
    let outcome = call(&f.keeper, "write_file", write_args(), Approval::Askable).await;
    let CallOutcome::NeedsApproval {
        question, digest, ..
    } = outcome
    else {
        panic!("{outcome:?}");
    };
    assert!(question.contains("path `path`: \"new.txt\""), "{question}");
    assert_eq!(
        Some(digest),
        f.keeper.action_digest("write_file", &write_args())
    );
    let outcome = call(&f.keeper, "write_file", write_args(), Approval::Unavailable).await;
    assert!(
        matches!(outcome, CallOutcome::ApprovalUnavailable(_)),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_missing_capability_is_named_only_when_the_capability_policy_decided() {
    let f = fixture("readonly");
    let outcome = call(&f.keeper, "write_file", write_args(), Approval::Unavailable).await;
    let CallOutcome::Denied(_, missing) = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(missing, ["write"]);

    let f = fixture("paired");
    let outside = json!({"path": "../outside.txt", "content": "x"});
    let outcome = call(&f.keeper, "write_file", outside, Approval::Unavailable).await;
    let CallOutcome::Denied(decision, missing) = outcome else {
        panic!("{outcome:?}");
    };
    assert!(missing.is_empty());
    assert!(decision.policies.iter().any(|p| p.id.starts_with("hard.")));
}

#[tokio::test]
async fn refusals_before_cedar_are_recorded_with_their_cause() {
    let f = fixture("paired");
    let outcome = call(&f.keeper, "no_such_tool", json!({}), Approval::Unavailable).await;
    assert!(
        matches!(outcome, CallOutcome::UnknownTool(_)),
        "{outcome:?}"
    );
    let outcome = call(
        &f.keeper,
        "read_file",
        json!({"path": 7}),
        Approval::Unavailable,
    )
    .await;
    assert!(
        matches!(outcome, CallOutcome::InvalidArguments(_)),
        "{outcome:?}"
    );
    let causes: Vec<Value> = f
        .sink
        .bodies(Kind::Decision)
        .iter()
        .map(|d| d["cause"].clone())
        .collect();
    assert_eq!(
        causes,
        [
            json!("unknown_tool"),
            json!("permitted"),
            json!("invalid_arguments")
        ]
    );
}

/// Runs calls straight through the keeper, as an adapter would.
struct Direct<'a> {
    keeper: &'a Arc<Keeper>,
    arguments: Value,
}

impl crate::approval::Asking for Direct<'_> {
    async fn run(&self, approval: Approval) -> CallOutcome {
        call(self.keeper, "write_file", self.arguments.clone(), approval).await
    }

    async fn ask(&self, _question: &str, _timeout: std::time::Duration) -> crate::approval::Answer {
        panic!("a 2026-07-28 call never asks on the same call")
    }

    async fn waiting(&self, _message: &str) {}

    async fn stopped(&self) {
        std::future::pending::<()>().await;
    }
}

#[tokio::test]
async fn an_expired_state_asks_again_runs_nothing_and_is_audited() {
    use std::time::{Duration, UNIX_EPOCH};

    use crate::approval::{Answer, ApprovalSeal, Approvals, Era, Reply, Request};
    use crate::clock::{Clock, ManualClock};

    let f = fixture("paired");
    let clock = Arc::new(ManualClock::new(
        UNIX_EPOCH + Duration::from_secs(1_000_000),
    ));
    let approvals = Approvals {
        seal: ApprovalSeal::new(
            Duration::from_secs(600),
            Arc::clone(&clock) as Arc<dyn Clock>,
        )
        .unwrap(),
        timeout: Duration::from_secs(120),
        shared: None,
        inbox: None,
    };
    let adapter = Direct {
        keeper: &f.keeper,
        arguments: write_args(),
    };
    let request = |retried| Request {
        request_id: "1",
        name: "write_file",
        arguments: &adapter.arguments,
        era: Era::Modern,
        askable: true,
        retried,
    };
    let Reply::InputRequired { state, .. } = approvals
        .call(&f.keeper, &adapter, request(None))
        .await
        .unwrap()
    else {
        panic!("a write asks first")
    };
    clock.advance(Duration::from_secs(600));
    let again = approvals
        .call(
            &f.keeper,
            &adapter,
            request(Some((Some(&state), Some(Answer::Approve)))),
        )
        .await
        .unwrap();
    assert!(matches!(again, Reply::InputRequired { .. }), "{again:?}");
    assert!(!f.dir.path().join("ws/new.txt").exists());
    let events: Vec<(String, String)> = f
        .sink
        .bodies(Kind::Approval)
        .iter()
        .map(|a| {
            (
                a["event"].as_str().unwrap().to_owned(),
                a["detail"]["why"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            ("asked".to_owned(), String::new()),
            ("state_refused".to_owned(), "expired".to_owned()),
            ("asked".to_owned(), String::new()),
        ]
    );
    assert!(f.sink.bodies(Kind::Outcome).is_empty(), "nothing ran");
}

/// A keeper whose registry holds one pinned downstream tool, allowed, and
/// no running servers.
fn downstream_fixture() -> Fixture {
    let spec = crate::tools::ToolSpec {
        id: ToolId::new("files", "read__text"),
        description: "reads".into(),
        effects: vec![crate::tools::Effect::Read],
        required_capabilities: vec!["read".into()],
        path_arguments: Vec::new(),
        input_schema: json!({"type": "object"}),
        output_schema: Value::Null,
        redact: Vec::new(),
    };
    let registry = Registry::from_specs(vec![(
        spec,
        Runner::Downstream {
            pinned: Some("ab".repeat(32)),
        },
    )])
    .unwrap();
    keeper_over(
        r#"@id("allow.all") @reason("test")
permit (principal, action in Portcullis::Action::"use_tool", resource);"#,
        registry,
        "paired",
    )
}

#[tokio::test]
async fn a_downstream_tool_without_its_server_is_refused_as_unavailable_and_not_listed() {
    let f = downstream_fixture();
    // The name splits at the first `__`: the tool's own `__` stays its own.
    let outcome = call(
        &f.keeper,
        "files__read__text",
        json!({}),
        Approval::Unavailable,
    )
    .await;
    assert!(
        matches!(outcome, CallOutcome::Refused(Cause::ServerUnavailable, _)),
        "{outcome:?}"
    );
    assert!(
        f.keeper
            .discoverable("1", |tool| tool.spec.id.clone())
            .await
            .unwrap()
            .is_empty()
    );
    let recorded = f.sink.bodies(Kind::Decision);
    let refusal = recorded
        .iter()
        .find(|b| b["cause"] == "server_unavailable")
        .expect("the refusal is recorded");
    assert_eq!(refusal["tool_definition"], "ab".repeat(32));
    // The bare name and the wrong separator find nothing.
    for name in ["read__text", "files/read__text", "files_read__text"] {
        let outcome = call(&f.keeper, name, json!({}), Approval::Unavailable).await;
        assert!(
            matches!(outcome, CallOutcome::UnknownTool(_)),
            "{name}: {outcome:?}"
        );
    }
}
