//! The approval inbox of a fleet (`serve --approvals --state …`): the
//! approvers live in the shared state, a question asked through one
//! replica is listed by every replica's inbox and answered through any
//! other's, once, and the call resumes on the replica where it waits.

use std::fs;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fleet::Fleet;
use crate::http::HttpServer;
use crate::inbox::{SECURITY_APPROVES_WRITES, assert_declined, unattended_write};
use crate::page::{csrf_of, page_client, page_text, post_form, session_cookie};
use crate::util::{ALLOW_BUILTIN, Run, Tree, portcullis};

/// What a replica prints before the inbox's address.
const INBOX_LINE: &str = "portcullis: serving the approval inbox at ";

/// A replica with an inbox on a port of its own: the replica, and the
/// inbox's address.
fn with_inbox(mut command: std::process::Command) -> (HttpServer, String) {
    command.args(["--approvals", "127.0.0.1:0"]);
    let server = HttpServer::spawn_reading(command, INBOX_LINE);
    let inbox = server.noted.clone().expect("the inbox's address");
    (server, inbox)
}

/// An approver of `group` in the shared state, its token in a file.
fn approver(fleet: &Fleet, name: &str, group: &str) -> tempfile::NamedTempFile {
    let run = fleet.token(&["create", name, "--approver", group]);
    assert_eq!(run.code, 0, "{run:?}");
    let file = tempfile::NamedTempFile::new().unwrap();
    fs::write(file.path(), run.json()["token"].as_str().unwrap()).unwrap();
    file
}

/// What both tests start from: the security group approves writes, alice
/// asks, carol approves, and two replicas each serve an inbox.
struct Asking {
    alice: String,
    carol: tempfile::NamedTempFile,
    one: HttpServer,
    inbox_one: String,
    two: HttpServer,
    inbox_two: String,
}

impl Asking {
    fn start(fleet: &Fleet) -> Self {
        fleet
            .tree
            .write_policy("45_approvers.cedar", SECURITY_APPROVES_WRITES);
        let alice = fleet.with_readme_and_alice();
        let carol = approver(fleet, "carol", "security");
        let (one, inbox_one) = with_inbox(fleet.replica_command(1));
        let (two, inbox_two) = with_inbox(fleet.replica_command(2));
        Self {
            alice,
            carol,
            one,
            inbox_one,
            two,
            inbox_two,
        }
    }
}

/// `portcullis approvals ARGS` through the inbox at `inbox`.
fn approvals(inbox: &str, who: &tempfile::NamedTempFile, args: &[&str]) -> Run {
    let token = who.path().display().to_string();
    let mut all = vec!["approvals"];
    all.extend_from_slice(args);
    all.extend(["--url", inbox, "--token-file", &token]);
    portcullis(&all)
}

/// Waits until the inbox at `inbox` lists a pending question; its id.
fn pending(inbox: &str, who: &tempfile::NamedTempFile) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let run = approvals(inbox, who, &["list", "--format", "json"]);
        assert_eq!(run.code, 0, "{run:?}");
        let listed = run.json();
        let found = listed["questions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["status"] == "pending")
            .map(|q| q["id"].as_str().unwrap().to_owned());
        if let Some(id) = found {
            return id;
        }
        assert!(Instant::now() < deadline, "no question came: {listed}");
        std::thread::yield_now();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_asked_through_one_replica_is_answered_through_another_once() {
    let Some(fleet) = Fleet::start_or_skip() else {
        return;
    };
    let Asking {
        alice,
        carol,
        one,
        inbox_one,
        two,
        inbox_two,
    } = Asking::start(&fleet);
    let dave = approver(&fleet, "dave", "security");
    // One name space for clients and approvers, in the table as in a file.
    let taken = fleet.token(&["create", "carol", "--tier", "paired"]);
    assert_eq!(taken.code, 1, "{taken:?}");
    assert!(taken.stderr.contains("names an approver"), "{taken:?}");
    let listed = fleet.token(&["list"]).json();
    assert_eq!(listed["approvers"][0]["name"], "carol", "{listed}");
    assert_eq!(listed["approvers"][0]["approver_groups"][0], "security");

    // Asked through replica 1, approved through replica 2's inbox.
    let call = tokio::spawn(unattended_write(
        one.url(),
        alice.clone(),
        1,
        "approved.txt",
    ));
    let id = tokio::task::block_in_place(|| pending(&inbox_two, &carol));
    let shown = tokio::task::block_in_place(|| approvals(&inbox_one, &dave, &["show", &id]));
    assert_eq!(shown.code, 0, "{shown:?}");
    assert!(
        shown.stdout.contains("path `path`: approved.txt"),
        "{shown:?}"
    );
    let approved = tokio::task::block_in_place(|| {
        approvals(
            &inbox_two,
            &carol,
            &["approve", &id, "--reason", "ticket 7"],
        )
    });
    assert_eq!(approved.code, 0, "{approved:?}");
    let result = call.await.unwrap();
    assert_eq!(result["isError"], false, "{result}");
    let written = fleet.root.path().join("approved.txt");
    assert_eq!(fs::read_to_string(&written).unwrap(), "x");

    // Once: a second answer is refused through either replica.
    for inbox in [&inbox_one, &inbox_two] {
        let again = tokio::task::block_in_place(|| approvals(inbox, &dave, &["deny", &id]));
        assert_eq!(again.code, 1, "{again:?}");
        assert!(again.stderr.contains("approved already"), "{again:?}");
    }

    // Asked through replica 2, denied through replica 1's: the reason
    // reaches the client.
    let call = tokio::spawn(unattended_write(two.url(), alice.clone(), 2, "denied.txt"));
    let id = tokio::task::block_in_place(|| pending(&inbox_one, &dave));
    // A replica serving another policy set cannot decide the answer under
    // the set the question was asked under: it says where to answer.
    let other = Tree::new();
    other.write_policy("20_allowlist.cedar", ALLOW_BUILTIN);
    other.write_policy("45_approvers.cedar", SECURITY_APPROVES_WRITES);
    other.write_policy(
        "50_more.cedar",
        "@id(\"more\")\n@reason(\"a later deploy\")\npermit (principal == Portcullis::Client::\"nobody\", action == Portcullis::Action::\"read_policy\", resource);\n",
    );
    let (three, inbox_three) = with_inbox(fleet.replica_command_of(3, &other));
    let elsewhere = tokio::task::block_in_place(|| approvals(&inbox_three, &dave, &["deny", &id]));
    assert_eq!(elsewhere.code, 1, "{elsewhere:?}");
    assert!(
        elsewhere
            .stderr
            .contains("answer it where that set is served"),
        "{elsewhere:?}"
    );
    let denied = tokio::task::block_in_place(|| {
        approvals(&inbox_one, &dave, &["deny", &id, "--reason", "not now"])
    });
    assert_eq!(denied.code, 0, "{denied:?}");
    assert_declined(&call.await.unwrap(), "denied by dave: not now");
    assert!(!fleet.root.path().join("denied.txt").exists());

    // A revoked approver is refused by every replica's inbox.
    let revoked = fleet.token(&["revoke", "carol"]);
    assert_eq!(revoked.code, 0, "{revoked:?}");
    assert_eq!(revoked.json()["kind"], "approver");
    for inbox in [&inbox_one, &inbox_two] {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let run = tokio::task::block_in_place(|| approvals(inbox, &carol, &["list"]));
            if run.code == 1 && run.stderr.contains("refused the token") {
                break;
            }
            assert!(Instant::now() < deadline, "{run:?}");
            std::thread::yield_now();
        }
    }
    three.stop();
    one.stop();
    two.stop();

    // Each replica recorded what it decided: replica 2 carol's `approve`,
    // replica 1 its question and how it was answered, replica 3 nothing
    // about the question it could not decide.
    let approves = |n: usize| -> Vec<(String, String)> {
        fleet
            .records(n)
            .iter()
            .filter(|r| r["kind"] == "decision" && r["body"]["action"] == "approve")
            .map(|r| {
                (
                    r["body"]["approver"]["name"].as_str().unwrap().to_owned(),
                    r["body"]["decision"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(approves(2), [("carol".to_owned(), "allow".to_owned())]);
    let carols = fleet
        .records(2)
        .into_iter()
        .find(|r| r["body"]["action"] == "approve")
        .unwrap();
    assert_eq!(carols["body"]["answer"]["reason"], "ticket 7", "{carols}");
    assert_eq!(approves(1), [("dave".to_owned(), "allow".to_owned())]);
    assert!(approves(3).is_empty());
    let answered = fleet.events(1, "answered");
    assert_eq!(answered.len(), 1, "{answered:?}");
    let first: &Value = &answered[0]["body"]["detail"]["approvers"][0];
    assert_eq!(first["approver"], "carol");
    assert_eq!(first["reason"], "ticket 7");
    assert_eq!(fleet.events(2, "answered").len(), 1);

    let verified = fleet.audit(&["verify"]);
    assert_eq!(verified.code, 0, "{verified:?}");
    let replayed = fleet.audit(&["replay"]);
    assert_eq!(replayed.code, 0, "{replayed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approvers_page_session_goes_on_through_another_replica_until_logged_out() {
    let Some(fleet) = Fleet::start_or_skip() else {
        return;
    };
    let Asking {
        alice,
        carol,
        one,
        inbox_one,
        two,
        inbox_two,
    } = Asking::start(&fleet);
    let (page_one, page_two) = (
        inbox_one.trim_end_matches('/').to_owned(),
        inbox_two.trim_end_matches('/').to_owned(),
    );
    let http = page_client();
    let token = fs::read_to_string(carol.path()).unwrap();
    let login = format!("{page_one}/login");
    let opened = post_form(&http, &login, &page_one, None, &[("token", &token)]).await;
    assert_eq!(opened.status(), 303);
    let (cookie, _) = session_cookie(&opened);
    let value = cookie.split_once('=').unwrap().1.to_owned();
    // The table holds the cookie's hash, never the cookie.
    let kept = fleet
        .pg
        .sql("SELECT id_sha256 || ' ' || approver FROM portcullis_page_sessions");
    assert!(kept.contains(" carol"), "{kept}");
    assert!(!kept.contains(&value), "{kept}");

    // Asked through replica 1; the page of replica 2 knows carol's session
    // and takes her answer.
    let call = tokio::spawn(unattended_write(one.url(), alice, 1, "paged.txt"));
    let id = tokio::task::block_in_place(|| pending(&inbox_two, &carol));
    let shown = page_text(&http, &page_two, &cookie).await;
    assert!(shown.contains("id=\"approver\">carol<"), "{shown}");
    assert!(shown.contains(&format!("id=\"q-{id}\"")), "{shown}");
    let csrf = csrf_of(&shown);
    let fields = [
        ("csrf", csrf.as_str()),
        ("verdict", "approve"),
        ("reason", "paged"),
    ];
    let answer = format!("{page_two}/questions/{id}/answer");
    let answered = post_form(&http, &answer, &page_two, Some(&cookie), &fields).await;
    assert_eq!(answered.status(), 303);
    let result = call.await.unwrap();
    assert_eq!(result["isError"], false, "{result}");
    assert!(fleet.root.path().join("paged.txt").exists());

    // Logged out through replica 2: replica 1 asks for the token again.
    let csrf = csrf_of(&page_text(&http, &page_two, &cookie).await);
    let logout = format!("{page_two}/logout");
    let out = post_form(&http, &logout, &page_two, Some(&cookie), &[("csrf", &csrf)]).await;
    assert_eq!(out.status(), 303);
    let after = page_text(&http, &page_one, &cookie).await;
    assert!(after.contains("id=\"login\""), "{after}");
    assert!(!after.contains("carol"), "{after}");
    one.stop();
    two.stop();
}
