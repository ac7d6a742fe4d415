//! The approval inbox (`serve --approvals`): a call from a client that
//! cannot be asked waits for an approver; approvers are Cedar principals,
//! answer through `portcullis approvals`, once, and every answer is
//! recorded and replayed.

use std::fs;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::http::{HttpServer, client, modern};
use crate::page::{csrf_of, page_client, page_text, post_form, session_cookie};
use crate::util::{ALLOW_BUILTIN, Served, portcullis};

/// Approvers of `security` may answer for writes asked by paired clients.
pub(crate) const SECURITY_APPROVES_WRITES: &str = r#"
@id("approve.security.writes")
@reason("the security team approves writes")
permit (
  principal in Portcullis::ApproverGroup::"security",
  action == Portcullis::Action::"approve",
  resource
)
when { resource.effects.contains("write") && context.client_tier == "paired" };
"#;

struct Inbox {
    served: Served,
    server: HttpServer,
    /// `http://127.0.0.1:PORT/`
    url: String,
    alice: tempfile::NamedTempFile,
    bob: tempfile::NamedTempFile,
}

/// An approver's token, in a file only its owner reads.
fn approver(served: &Served, name: &str, group: &str) -> tempfile::NamedTempFile {
    let store = served.store.display().to_string();
    let flags = served.tree.flags();
    let mut args = vec![
        "token",
        "create",
        name,
        "--approver",
        group,
        "--store",
        &store,
        "--format",
        "json",
    ];
    args.extend(flags.iter().map(String::as_str));
    let run = portcullis(&args);
    assert_eq!(run.code, 0, "{run:?}");
    let created = run.json();
    assert_eq!(created["approver_groups"], json!([group]));
    let file = tempfile::NamedTempFile::new().unwrap();
    fs::write(file.path(), created["token"].as_str().unwrap()).unwrap();
    file
}

impl Inbox {
    fn start() -> Self {
        Self::start_with(&[], &[])
    }

    /// With more `serve` flags and environment.
    fn start_with(extra: &[&str], env: &[(&str, &str)]) -> Self {
        let served = Served::new(ALLOW_BUILTIN, "paired");
        served
            .tree
            .write_policy("45_approvers.cedar", SECURITY_APPROVES_WRITES);
        let tiers = served.tree.policies().join("tiers.json");
        let mut entities: Vec<Value> =
            serde_json::from_str(&fs::read_to_string(&tiers).unwrap()).unwrap();
        entities.push(json!({"uid": {"type": "Portcullis::ApproverGroup", "id": "ops"}, "attrs": {}, "parents": []}));
        fs::write(&tiers, serde_json::to_string_pretty(&entities).unwrap()).unwrap();
        let alice = approver(&served, "alice", "security");
        let bob = approver(&served, "bob", "ops");
        let mut command = served.command();
        command
            .env_remove("PORTCULLIS_TOKEN")
            .args(["--approvals", "127.0.0.1:0"])
            .args(extra)
            .envs(env.iter().copied());
        let server =
            HttpServer::spawn_reading(command, "portcullis: serving the approval inbox at ");
        let url = server.noted.clone().expect("the inbox's address");
        Self {
            served,
            server,
            url,
            alice,
            bob,
        }
    }

    /// `portcullis approvals ARGS` as the approver whose token is in `who`.
    fn approvals(&self, who: &tempfile::NamedTempFile, args: &[&str]) -> crate::util::Run {
        let token = who.path().display().to_string();
        let mut all = vec!["approvals"];
        all.extend_from_slice(args);
        all.extend(["--url", &self.url, "--token-file", &token]);
        portcullis(&all)
    }

    /// Waits until a question is pending, and returns its id.
    fn pending(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let run = self.approvals(&self.alice, &["list", "--format", "json"]);
            assert_eq!(run.code, 0, "{run:?}");
            let listed = run.json();
            if let Some(question) = listed["questions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|q| q["status"] == "pending")
            {
                return question["id"].as_str().unwrap().to_owned();
            }
            assert!(Instant::now() < deadline, "no question came: {listed}");
            std::thread::yield_now();
        }
    }
}

/// A write from a 2026-07-28 client that declares no elicitation: nobody
/// on it can be asked.
pub(crate) async fn unattended_write(url: String, token: String, id: i64, path: &str) -> Value {
    let http = client();
    let params = json!({"name": "write_file", "arguments": {"path": path, "content": "x"}});
    let answer = modern(&http, &url, &token, id, "tools/call", params).await;
    answer.response(id)["result"].clone()
}

/// The call's result is a refusal as `approval_declined`, saying `said`.
pub(crate) fn assert_declined(result: &Value, said: &str) {
    assert_eq!(result["isError"], true, "{result}");
    let refusal = &result["structuredContent"];
    assert_eq!(refusal["reason_code"], "approval_declined", "{result}");
    assert!(
        refusal["reason"].as_str().unwrap().contains(said),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unattended_call_waits_for_an_approver_the_policies_let_answer() {
    let inbox = Inbox::start();
    let call = tokio::spawn(unattended_write(
        inbox.server.url(),
        inbox.served.token.clone(),
        1,
        "approved.txt",
    ));
    let id = tokio::task::block_in_place(|| inbox.pending());
    let shown = tokio::task::block_in_place(|| inbox.approvals(&inbox.alice, &["show", &id]));
    assert_eq!(shown.code, 0, "{shown:?}");
    assert!(
        shown
            .stdout
            .contains("`agent` (paired, over http) asks to run `write_file`"),
        "{}",
        shown.stdout
    );
    assert!(
        shown.stdout.contains("path `path`: approved.txt"),
        "{}",
        shown.stdout
    );
    assert!(shown.stdout.contains("approval.writes"), "{}", shown.stdout);

    // An approver of another group sees the question and cannot answer it.
    let refused = tokio::task::block_in_place(|| inbox.approvals(&inbox.bob, &["approve", &id]));
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("do not let `bob` answer"),
        "{}",
        refused.stderr
    );
    assert!(!inbox.served.root.path().join("approved.txt").exists());

    // A client's token is no approver's.
    let agent = tempfile::NamedTempFile::new().unwrap();
    fs::write(agent.path(), &inbox.served.token).unwrap();
    let not_approver = tokio::task::block_in_place(|| inbox.approvals(&agent, &["list"]));
    assert_eq!(not_approver.code, 1);
    assert!(
        not_approver.stderr.contains("refused the token"),
        "{}",
        not_approver.stderr
    );

    let approved = tokio::task::block_in_place(|| {
        inbox.approvals(&inbox.alice, &["approve", &id, "--reason", "ticket 42"])
    });
    assert_eq!(approved.code, 0, "{approved:?}");
    let result = call.await.unwrap();
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        fs::read_to_string(inbox.served.root.path().join("approved.txt")).unwrap(),
        "x"
    );

    // Answered once: a second answer is refused.
    let again = tokio::task::block_in_place(|| inbox.approvals(&inbox.alice, &["deny", &id]));
    assert_eq!(again.code, 1);
    assert!(
        again.stderr.contains("approved already"),
        "{}",
        again.stderr
    );

    // Denied with a reason: the client is told who and why.
    let call = tokio::spawn(unattended_write(
        inbox.server.url(),
        inbox.served.token.clone(),
        2,
        "denied.txt",
    ));
    let id = tokio::task::block_in_place(|| inbox.pending());
    let denied = tokio::task::block_in_place(|| {
        inbox.approvals(
            &inbox.alice,
            &["deny", &id, "--reason", "not during the freeze"],
        )
    });
    assert_eq!(denied.code, 0, "{denied:?}");
    assert_declined(
        &call.await.unwrap(),
        "denied by alice: not during the freeze",
    );
    assert!(!inbox.served.root.path().join("denied.txt").exists());

    // The log: the questions, bob's refused and alice's allowed `approve`
    // decisions with who answered, and the call decided with the approval
    // through the inbox.
    let records = inbox.served.records();
    let approves: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "decision" && r["body"]["action"] == "approve")
        .collect();
    let who: Vec<(&str, &str)> = approves
        .iter()
        .map(|r| {
            (
                r["body"]["approver"]["name"].as_str().unwrap(),
                r["body"]["decision"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        who,
        [("bob", "deny"), ("alice", "allow"), ("alice", "allow")]
    );
    assert_eq!(approves[1]["body"]["client"]["name"], "agent");
    // Each tried answer is in its decision's record, taken or not.
    let tried = |n: usize| approves[n]["body"]["answer"].clone();
    assert_eq!(tried(0)["verdict"], "approve", "{:?}", approves[0]);
    assert_eq!(tried(1)["reason"], "ticket 42");
    assert_eq!(tried(1)["question"], tried(0)["question"]);
    assert_eq!(tried(2)["verdict"], "deny");
    assert_eq!(tried(2)["reason"], "not during the freeze");
    let answered: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "approval" && r["body"]["event"] == "answered")
        .collect();
    assert_eq!(answered.len(), 2, "{answered:?}");
    assert_eq!(
        answered[0]["body"]["detail"]["approvers"][0]["approver"],
        "alice"
    );
    assert_eq!(
        answered[0]["body"]["detail"]["approvers"][0]["reason"],
        "ticket 42"
    );
    assert_eq!(answered[0]["body"]["channel"], "inbox");
    assert!(records.iter().any(|r| r["kind"] == "decision"
        && r["body"]["approved"] == true
        && r["body"]["approval_channel"] == "inbox"
        && r["body"]["decision"] == "allow"));
    inbox.server.stop();

    // Replayed offline: every decision, the approvers' included, again.
    let log = inbox.served.audit_log().display().to_string();
    let replay = portcullis(&["audit", "replay", &log, "--format", "json"]);
    assert_eq!(replay.code, 0, "{replay:?}");
}

/// A loopback receiver of webhook deliveries: each one's headers and body.
async fn receiver() -> (
    String,
    tokio::sync::mpsc::UnboundedReceiver<(axum::http::HeaderMap, String)>,
) {
    let (sender, deliveries) = tokio::sync::mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
            let sender = sender.clone();
            async move {
                let _ = sender.send((headers, body));
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, deliveries)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_question_is_posted_to_the_webhook_signed_and_without_hidden_arguments() {
    let (hook, mut deliveries) = receiver().await;
    let secret = "a shared secret of the chat relay";
    let inbox = tokio::task::block_in_place(|| {
        Inbox::start_with(
            &["--approval-webhook", &hook],
            &[("PORTCULLIS_APPROVAL_WEBHOOK_SECRET", secret)],
        )
    });
    let call = tokio::spawn(unattended_write(
        inbox.server.url(),
        inbox.served.token.clone(),
        1,
        "hooked.txt",
    ));
    let (headers, body) = tokio::time::timeout(Duration::from_secs(120), deliveries.recv())
        .await
        .expect("a delivery")
        .unwrap();
    let timestamp: u64 = headers["x-portcullis-timestamp"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let signed = headers["x-portcullis-signature"].to_str().unwrap();
    assert_eq!(
        signed,
        portcullis::approval_http::signature(secret.as_bytes(), timestamp, &body)
    );
    assert_ne!(
        signed,
        portcullis::approval_http::signature(b"another secret entirely", timestamp, &body)
    );
    let delivered: Value = serde_json::from_str(&body).unwrap();
    let id = delivered["question"]["id"].as_str().unwrap().to_owned();
    let text = delivered["text"].as_str().unwrap();
    assert!(
        text.contains("`agent` (tier paired) waits for an approval to run `write_file`"),
        "{text}"
    );
    assert!(text.contains("path = hooked.txt"), "{text}");
    assert_eq!(delivered["url"], format!("{}#q-{id}", inbox.url));
    assert_eq!(delivered["question"]["arguments"]["path"], "hooked.txt");

    let approved = tokio::task::block_in_place(|| inbox.approvals(&inbox.alice, &["approve", &id]));
    assert_eq!(approved.code, 0, "{approved:?}");
    assert_eq!(call.await.unwrap()["isError"], false);
    inbox.server.stop();
}

#[test]
fn a_webhook_without_a_secret_or_an_inbox_is_refused_before_serving() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut args = served.serve_args();
    args.extend([
        "--approvals".into(),
        "127.0.0.1:0".into(),
        "--approval-webhook".into(),
        "http://127.0.0.1:9/hook".into(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = portcullis(&args);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("needs a secret to sign with"),
        "{}",
        run.stderr
    );

    let mut args = served.serve_args();
    args.extend([
        "--approval-webhook".into(),
        "http://127.0.0.1:9/hook".into(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = portcullis(&args);
    assert_eq!(run.code, 64, "{run:?}");
}

/// A browser's view of the page, by hand: the cookie it keeps and the
/// forms it posts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_logs_an_approver_in_and_refuses_forms_without_the_csrf_token() {
    let inbox = tokio::task::block_in_place(Inbox::start);
    let http = page_client();
    let page = inbox.url.trim_end_matches('/').to_owned();
    let login_url = format!("{page}/login");
    // A client's token opens no session.
    let refused = post_form(
        &http,
        &login_url,
        &page,
        None,
        &[("token", &inbox.served.token)],
    )
    .await;
    assert_eq!(refused.status(), 401);
    let alice = fs::read_to_string(inbox.alice.path()).unwrap();
    let opened = post_form(&http, &login_url, &page, None, &[("token", &alice)]).await;
    assert_eq!(opened.status(), 303);
    let (cookie, set) = session_cookie(&opened);
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );

    let call = tokio::spawn(unattended_write(
        inbox.server.url(),
        inbox.served.token.clone(),
        1,
        "<b>page</b>.txt",
    ));
    let id = tokio::task::block_in_place(|| inbox.pending());
    let shown = http
        .get(format!("{page}/"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(shown.status(), 200);
    assert!(
        shown.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'none'")
    );
    let html = shown.text().await.unwrap();
    assert!(html.contains(&format!("id=\"q-{id}\"")), "{html}");
    assert!(
        html.contains("&lt;b&gt;page&lt;/b&gt;.txt") && !html.contains("<b>page</b>"),
        "{html}"
    );
    let csrf = csrf_of(&html);

    // Without the CSRF token, or with another, or from another site, or
    // from a sandboxed frame's or a file's `Origin: null` (no page of this
    // machine): refused.
    let answer_url = format!("{page}/questions/{id}/answer");
    let wrong = "0".repeat(64);
    let forged: [(&[(&str, &str)], &str); 4] = [
        (&[("verdict", "approve")], &page),
        (&[("verdict", "approve"), ("csrf", &wrong)], &page),
        (
            &[("verdict", "approve"), ("csrf", &csrf)],
            "https://evil.example",
        ),
        (&[("verdict", "approve"), ("csrf", &csrf)], "null"),
    ];
    for (fields, origin) in forged {
        let refused = post_form(&http, &answer_url, origin, Some(&cookie), fields).await;
        assert_eq!(refused.status(), 403, "{fields:?} from {origin}");
    }
    assert!(!inbox.served.root.path().join("<b>page</b>.txt").exists());

    // Another site cannot log the browser in as its own approver (login
    // CSRF), with any origin but this machine's.
    let bob = fs::read_to_string(inbox.bob.path()).unwrap();
    for origin in ["https://evil.example", "null"] {
        let planted = post_form(&http, &login_url, origin, None, &[("token", &bob)]).await;
        assert_eq!(planted.status(), 403, "{origin}");
        assert!(planted.headers().get("set-cookie").is_none());
    }
    // Two session cookies (one planted beside the real one): neither is
    // trusted.
    let doubled = page_text(&http, &page, &format!("{cookie}; {cookie}")).await;
    assert!(doubled.contains("name=\"token\""), "{doubled}");

    let fields = [
        ("verdict", "approve"),
        ("csrf", csrf.as_str()),
        ("reason", "looks fine"),
    ];
    let taken = post_form(&http, &answer_url, &page, Some(&cookie), &fields).await;
    assert_eq!(taken.status(), 303);
    assert_eq!(call.await.unwrap()["isError"], false);
    let after = page_text(&http, &page, &cookie).await;
    assert!(after.contains("approved by <b>alice</b>"), "{after}");

    // Logged out: the cookie opens nothing any more.
    let logout_url = format!("{page}/logout");
    let out = post_form(&http, &logout_url, &page, Some(&cookie), &[("csrf", &csrf)]).await;
    assert_eq!(out.status(), 303);
    let login_again = page_text(&http, &page, &cookie).await;
    assert!(login_again.contains("name=\"token\""), "{login_again}");
    inbox.server.stop();
}

/// The page in Debian's Chromium, driven by Selenium from the Python SDK's
/// test environment (tests/interop/test_inbox_page.py). CI installs
/// Chromium and chromedriver and requires them; elsewhere a machine
/// without them says so and checks the rest.
#[test]
fn an_approver_answers_from_a_real_browser() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let driver = std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
    let present =
        std::path::Path::new(&chromium).exists() && std::path::Path::new(&driver).exists();
    if !present {
        assert!(
            std::env::var_os("PORTCULLIS_REQUIRE_CHROMIUM").is_none(),
            "PORTCULLIS_REQUIRE_CHROMIUM is set and {chromium} or {driver} is missing"
        );
        eprintln!(
            "SKIPPED: no Chromium at {chromium} or chromedriver at {driver} (.ci/install-chromium installs Debian's)"
        );
        return;
    }
    let screenshot = std::env::var_os("PORTCULLIS_SCREENSHOT").unwrap_or_default();
    let (tests, stdout) = crate::interop_python::pytest(
        &["-k", "inbox_page"],
        &[("PORTCULLIS_SCREENSHOT", screenshot.as_os_str())],
    );
    assert_eq!(tests, 1, "{stdout}");
}
