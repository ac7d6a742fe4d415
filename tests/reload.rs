//! Hot reload while serving: a good edit decides the next call, a broken
//! one leaves the set in force, both recorded; `--reload never` holds the
//! start-up set; and under load every record names a set whose snapshot
//! is stored, so replay reproduces every decision.

use std::fs;
use std::process::Command;

use serde_json::{Value, json};

use crate::http::{HttpServer, client, modern};
use crate::util::{ALLOW_BUILTIN, Served, portcullis};

/// No tool allowed: the default allowlist.
const NOTHING: &str = "// nothing allowed\n";

fn read() -> Value {
    json!({"name": "read_file", "arguments": {"path": "README.md"}})
}

/// Whether a read_file call of `token` was allowed.
pub(crate) async fn reads(http: &reqwest::Client, url: &str, token: &str) -> bool {
    let answer = modern(http, url, token, 1, "tools/call", read()).await;
    let response = answer.response(1);
    response["result"]["isError"] == false
}

/// Whether read_file calls come to be allowed (or refused) as `allowed`
/// says. The reload record is durable before the new set is swapped in,
/// so a call made the moment the record appears may still meet the old
/// set: this calls again until the answer is the expected one, for at most
/// a generous minute, and says whether it came.
pub(crate) async fn comes_to(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    allowed: bool,
) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if reads(http, url, token).await == allowed {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    false
}

fn hangup(server: &HttpServer) {
    let status = Command::new("kill")
        .args(["-s", "HUP", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// The reload events recorded so far.
fn reload_events(served: &Served) -> Vec<Value> {
    served
        .records()
        .into_iter()
        .filter(|r| {
            r["body"]["event"]
                .as_str()
                .is_some_and(|e| e.starts_with("policy_reload"))
        })
        .collect()
}

fn wait_for_reloads(served: &Served, count: usize) -> Vec<Value> {
    wait_for_reloads_in(&served.audit_log(), count);
    reload_events(served)
}

/// Waits until the log holds `count` reload events, reading it again
/// whenever it grows; fails after a generous two minutes.
fn wait_for_reloads_in(log: &std::path::Path, count: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut seen = 0;
    loop {
        let size = fs::metadata(log).map(|m| m.len()).unwrap_or(0);
        if size != seen {
            seen = size;
            // Counted in the text, not parsed: the log grows by thousands of
            // records a round under load.
            let text = fs::read_to_string(log).unwrap_or_default();
            if text.matches("\"event\":\"policy_reload").count() >= count {
                return;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "fewer than {count} reloads recorded"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Every decision names a set whose snapshot is beside the log, and replay
/// under the recorded sets changes nothing.
fn every_decision_replays(served: &Served) {
    let snapshots = served.tree.dir.path().join("audit/audit.jsonl.policies");
    for record in served.records().iter().filter(|r| r["kind"] == "decision") {
        let hash = record["body"]["policy_set"]["hash"].as_str().unwrap();
        assert!(
            snapshots.join(format!("{hash}.json")).exists(),
            "no snapshot of {hash}"
        );
    }
    let run = portcullis(&[
        "audit",
        "replay",
        served.audit_log().to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let summary = &run.json()["summary"];
    assert_eq!(summary["changes"], json!([]), "{summary}");
    assert_eq!(summary["same"], summary["redecided"], "{summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_edit_decides_the_next_call_and_a_broken_one_keeps_the_set_in_force() {
    let served = Served::new(NOTHING, "paired");
    let server = HttpServer::start(&served, &[]);
    let (http, url) = (client(), server.url());
    assert!(
        !reads(&http, &url, &served.token).await,
        "nothing is allowed yet"
    );

    replace_policy(&served, "20_allowlist.cedar", ALLOW_BUILTIN);
    let events = wait_for_reloads(&served, 1);
    let reloaded = &events[0]["body"];
    assert_eq!(reloaded["event"], "policy_reload", "{reloaded}");
    assert_eq!(reloaded["trigger"], "change");
    assert_ne!(reloaded["old"], reloaded["new"]);
    assert!(
        comes_to(&http, &url, &served.token, true).await,
        "the edit took effect"
    );

    replace_policy(&served, "25_broken.cedar", "permit (\n  principal,\n");
    let events = wait_for_reloads(&served, 2);
    let failed = &events[1]["body"];
    assert_eq!(failed["event"], "policy_reload_failed", "{failed}");
    assert_eq!(
        failed["policy_set"], reloaded["new"],
        "the set in force is named"
    );
    let problem = &failed["problems"][0];
    assert!(
        problem["file"]
            .as_str()
            .unwrap()
            .ends_with("25_broken.cedar"),
        "{problem}"
    );
    assert!(problem["line"].as_u64().is_some(), "{problem}");
    assert!(
        reads(&http, &url, &served.token).await,
        "the last good set is still in force"
    );

    // Fixed, and asked for by SIGHUP: the same set as before the broken
    // file, so nothing changes and nothing is recorded; a new rule is.
    fs::remove_file(served.tree.policies().join("25_broken.cedar")).unwrap();
    replace_policy(
        &served,
        "26_no_readme.cedar",
        "@id(\"no.readme\")\n@reason(\"the readme is private\")\nforbid (principal, action, resource) when { context has input && context.input has path && context.input.path == \"README.md\" };\n",
    );
    hangup(&server);
    let events = wait_for_reloads(&served, 3);
    assert_eq!(
        events[2]["body"]["event"], "policy_reload",
        "{:?}",
        events[2]
    );
    assert!(
        comes_to(&http, &url, &served.token, false).await,
        "the forbid took effect"
    );
    server.stop();
    every_decision_replays(&served);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_never_keeps_the_start_up_set_through_edits_and_sighup() {
    let served = Served::new(NOTHING, "paired");
    let server = HttpServer::start(&served, &["--reload", "never"]);
    let (http, url) = (client(), server.url());
    replace_policy(&served, "20_allowlist.cedar", ALLOW_BUILTIN);
    hangup(&server);
    // The process is still there, answering, under the set it started with.
    assert!(!reads(&http, &url, &served.token).await);
    server.stop();
    assert!(reload_events(&served).is_empty());
}

/// Writes a policy file as editors save one: whole, by rename, so that no
/// look at the folder finds it half-written.
fn replace_policy(served: &Served, name: &str, text: &str) {
    let staged = served.tree.dir.path().join(format!("{name}.staged"));
    fs::write(&staged, text).unwrap();
    fs::rename(&staged, served.tree.policies().join(name)).unwrap();
}

/// Two allowlists that allow the same calls but are different sets.
fn variant(n: usize) -> String {
    ALLOW_BUILTIN.replace(
        "test clients may use",
        &format!("(variant {}) test clients may use", n % 2),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "load test: run by .ci/run in its own step"]
async fn sixty_four_callers_while_the_set_is_reloaded_100_times() {
    const RELOADS: usize = 100;
    /// Calls each caller makes while one reload is under way.
    const CALLS_PER_RELOAD: usize = 2;
    let served = Served::new(&variant(1), "readonly");
    let mut store = portcullis::auth::TokenStore::open(&served.store).unwrap();
    let tokens: Vec<String> = (0..64)
        .map(|i| {
            store
                .create(&format!("c{i}"), "readonly")
                .unwrap()
                .as_str()
                .to_owned()
        })
        .collect();
    // SIGHUP alone triggers each reload: no look at the folder races it.
    let server = HttpServer::start(&served, &["--reload", "signal"]);
    let (http, url) = (client(), server.url());
    let (mut calls, mut errors) = (0, 0);
    for n in 0..RELOADS {
        // Each round: the edit and its SIGHUP, and all 64 callers calling
        // while the new set is loaded and swapped in.
        replace_policy(&served, "20_allowlist.cedar", &variant(n));
        hangup(&server);
        let mut callers = tokio::task::JoinSet::new();
        for token in &tokens {
            let (http, url, token) = (http.clone(), url.clone(), token.clone());
            callers.spawn(async move {
                let mut failed = 0;
                for _ in 0..CALLS_PER_RELOAD {
                    failed += usize::from(!reads(&http, &url, &token).await);
                }
                failed
            });
        }
        let log = served.audit_log();
        tokio::task::spawn_blocking(move || wait_for_reloads_in(&log, n + 1))
            .await
            .unwrap();
        while let Some(finished) = callers.join_next().await {
            errors += finished.unwrap();
            calls += CALLS_PER_RELOAD;
        }
    }
    server.stop();
    eprintln!("{calls} calls during {RELOADS} reloads");
    assert_eq!(errors, 0, "{errors} of {calls} calls failed");
    let events = reload_events(&served);
    assert!(
        events.iter().all(|e| e["body"]["event"] == "policy_reload"),
        "{events:?}"
    );
    assert_eq!(events.len(), RELOADS);
    let sets: std::collections::BTreeSet<String> = served
        .records()
        .iter()
        .filter(|r| r["kind"] == "decision")
        .filter_map(|r| r["body"]["policy_set"]["hash"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(sets.len(), 2, "calls were decided under both sets");
    every_decision_replays(&served);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tighten_only_takes_a_tightening_and_holds_a_widening_until_it_is_applied() {
    if !crate::util::solver_or_skip() {
        return;
    }
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let server = HttpServer::start(&served, &["--reload", "tighten-only"]);
    let (http, url) = (client(), server.url());
    assert!(reads(&http, &url, &served.token).await, "allowed at start");

    // Tighter: taken.
    replace_policy(
        &served,
        "26_no_readme.cedar",
        "@id(\"no.readme\")\n@reason(\"the readme is private\")\nforbid (principal, action, resource) when { context has input && context.input has path && context.input.path == \"README.md\" };\n",
    );
    let events = wait_for_reloads(&served, 1);
    assert_eq!(
        events[0]["body"]["event"], "policy_reload",
        "{:?}",
        events[0]
    );
    assert!(comes_to(&http, &url, &served.token, false).await);

    // Wider again: refused, with what it would open, and nothing changes.
    fs::remove_file(served.tree.policies().join("26_no_readme.cedar")).unwrap();
    let events = wait_for_reloads(&served, 2);
    let refused = &events[1]["body"];
    assert_eq!(refused["event"], "policy_reload_refused", "{refused}");
    assert_eq!(refused["policy_set"], events[0]["body"]["new"], "{refused}");
    let widenings = refused["widenings"].as_array().unwrap();
    assert!(
        widenings.iter().any(
            |w| w["action"] == "Portcullis::Action::\"builtin/read_file\""
                && w["counterexample"]["arguments"]["path"] == "README.md"
        ),
        "{refused}"
    );
    assert!(!reads(&http, &url, &served.token).await, "still refused");

    // A list of applied sets written by hand lets nothing through.
    let log = served.audit_log();
    let nudge = format!("{}.applied", log.display());
    fs::write(
        &nudge,
        format!(
            "{{\"applied\":[{{\"policy_set\":\"{}\",\"at\":\"2026-12-04T00:00:00Z\"}}]}}\n",
            refused["refused"].as_str().unwrap()
        ),
    )
    .unwrap();
    let events = wait_for_reloads(&served, 3);
    assert_eq!(
        events[2]["body"]["event"], "policy_reload_refused",
        "a hand-written list is ignored: {:?}",
        events[2]
    );
    assert!(!reads(&http, &url, &served.token).await, "still refused");

    // An operator applies exactly this set, with the log's key beside the
    // token store: it is loaded at the next look.
    let run = apply(&served, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.starts_with("applied: policy set "), "{run:?}");
    let events = wait_for_reloads(&served, 4);
    let applied = &events[3]["body"];
    assert_eq!(applied["event"], "policy_reload", "{applied}");
    assert_eq!(applied["applied"], true, "{applied}");
    assert_eq!(applied["new"], refused["refused"], "{applied}");
    assert!(comes_to(&http, &url, &served.token, true).await);
    server.stop();
    every_decision_replays(&served);
}

#[test]
fn apply_refuses_a_set_that_does_not_load_and_records_nothing() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    served
        .tree
        .write_policy("25_broken.cedar", "permit (principal,");
    let log = served.audit_log();
    let mut args = vec!["policy", "apply", "--audit", log.to_str().unwrap()];
    let flags = served.tree.flags();
    args.extend(flags.iter().map(String::as_str));
    let run = portcullis(&args);
    assert_eq!(run.code, 3, "{run:?}");
    let applied = format!("{}.applied", log.display());
    assert!(!std::path::Path::new(&applied).exists());
}

/// `policy apply` of the served tree's set to its log, with the log's key
/// beside its token store, and `extra` flags.
fn apply(served: &Served, extra: &[&str]) -> crate::util::Run {
    let log = served.audit_log();
    let store = served.store.display().to_string();
    let mut args = vec![
        "policy",
        "apply",
        "--audit",
        log.to_str().unwrap(),
        "--store",
        store.as_str(),
    ];
    args.extend_from_slice(extra);
    let flags = served.tree.flags();
    args.extend(flags.iter().map(String::as_str));
    portcullis(&args)
}

/// Replaces any file of the served tree atomically, as an editor would.
fn replace_file(served: &Served, path: &std::path::Path, text: &str) {
    let staged = served.tree.dir.path().join("staged.tmp");
    fs::write(&staged, text).unwrap();
    fs::rename(&staged, path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tighten_only_refuses_every_weakening_of_a_data_file() {
    if !crate::util::solver_or_skip() {
        return;
    }
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let policies = served.tree.policies();
    let definition = |description: &str| {
        json!({"name": "write_text", "description": description, "inputSchema": {"type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}})
    };
    let lock_of = |description: &str| {
        let mut lock = portcullis::servers::ServersLock::new();
        lock.servers.entry("srv".into()).or_default().insert(
            "write_text".into(),
            portcullis::servers::Pin::of(portcullis::servers::pinned_definition(&definition(
                description,
            ))),
        );
        lock.to_text()
    };
    let servers = "[servers.srv]\ncommand = \"sleep\"\nargs = [\"1000\"]\nstart_timeout = \"1s\"\n\
                   [servers.srv.tools.write_text]\neffects = [\"write\"]\npaths = { path = \"write\" }\n";
    fs::write(policies.join("servers.toml"), servers).unwrap();
    fs::write(policies.join("servers.lock"), lock_of("writes")).unwrap();
    let server = HttpServer::start(&served, &["--reload", "tighten-only"]);

    // Each edit, the file it is made in, and how the reload must end.
    let schema = served.tree.schemas().join("portcullis.cedarschema");
    let classes = policies.join("path_classes.toml");
    let commands = policies.join("commands.toml");
    let read = |path: &std::path::Path| fs::read_to_string(path).unwrap();
    let edits = [
        (
            classes.clone(),
            read(&classes).replacen("  \"**/.env\",\n", "", 1),
            "policy_reload_failed",
            "the built-in glob `**/.env` is missing",
        ),
        (
            schema.clone(),
            read(&schema).replacen("action call_tool in [\"use_tool\"]", "action call_tool", 1),
            "policy_reload_failed",
            "action `call_tool`",
        ),
        (
            commands.clone(),
            read(&commands).replacen("\"LD_*\", ", "", 1),
            "policy_reload_failed",
            "loading drops `LD_*`",
        ),
        (
            commands.clone(),
            format!(
                "{}\n[[program]]\nprogram = \"frob\"\nclass = \"read_only\"\n",
                read(&commands)
            ),
            "policy_reload_refused",
            "program `frob` (class `read_only`)",
        ),
        (
            policies.join("servers.toml"),
            servers.replace(
                "paths = { path = \"write\" }",
                "paths = { path = \"read\" }",
            ),
            "policy_reload_refused",
            "the argument `path` is judged as read, was write",
        ),
        (
            policies.join("servers.toml"),
            servers.replace("effects = [\"write\"]", "effects = [\"read\"]"),
            "policy_reload_refused",
            "no longer declared to write",
        ),
        (
            policies.join("servers.lock"),
            lock_of("writes anything, anywhere"),
            "policy_reload_refused",
            "pinned anew",
        ),
    ];
    for (count, (path, text, event, named)) in edits.into_iter().enumerate() {
        let before = read(&path);
        replace_file(&served, &path, &text);
        let events = wait_for_reloads(&served, count + 1);
        let record = &events[count]["body"];
        assert_eq!(record["event"], event, "{}: {record}", path.display());
        assert!(record.to_string().contains(named), "{named}: {record}");
        // Put back as it was: the set in force again, so nothing is
        // recorded for it.
        replace_file(&served, &path, &before);
    }
    assert!(
        reads(&client(), &server.url(), &served.token).await,
        "the set in force still serves"
    );
    server.stop();
    assert_eq!(
        reload_events(&served).len(),
        7,
        "a file put back records nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_operator_key_only_its_signature_lets_a_wider_set_through() {
    if !crate::util::solver_or_skip() {
        return;
    }
    let served = Served::new(NOTHING, "paired");
    let keys = served.tree.dir.path().join("operator");
    fs::create_dir_all(&keys).unwrap();
    portcullis::audit::load_or_create_signer(&keys).unwrap();
    let public = keys.join(portcullis::audit::PUBLIC_KEY_FILE);
    let server = HttpServer::start(
        &served,
        &[
            "--reload",
            "tighten-only",
            "--apply-key",
            public.to_str().unwrap(),
        ],
    );
    let (http, url) = (client(), server.url());
    assert!(
        !reads(&http, &url, &served.token).await,
        "nothing allowed at start"
    );
    replace_policy(&served, "20_allowlist.cedar", ALLOW_BUILTIN);
    let events = wait_for_reloads(&served, 1);
    assert_eq!(events[0]["body"]["event"], "policy_reload_refused");

    let apply = |extra: &[&str]| apply(&served, extra);
    // The log's own key is not the operator's: refused again.
    let run = apply(&[]);
    assert_eq!(run.code, 0, "{run:?}");
    let events = wait_for_reloads(&served, 2);
    assert_eq!(
        events[1]["body"]["event"], "policy_reload_refused",
        "{:?}",
        events[1]
    );
    // Signed with the operator key: loaded.
    let run = apply(&["--apply-keys", keys.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("signed with the operator key"),
        "{run:?}"
    );
    let events = wait_for_reloads(&served, 3);
    assert_eq!(
        events[2]["body"]["event"], "policy_reload",
        "{:?}",
        events[2]
    );
    assert_eq!(events[2]["body"]["applied"], true);
    assert!(comes_to(&http, &url, &served.token, true).await);
    server.stop();
}

#[test]
fn an_apply_key_that_does_not_read_stops_serve() {
    let served = Served::new(NOTHING, "paired");
    let bad = served.tree.dir.path().join("not-a-key.pub");
    fs::write(&bad, "hello\n").unwrap();
    let mut command = served.command();
    command.args([
        "--reload",
        "tighten-only",
        "--apply-key",
        bad.to_str().unwrap(),
    ]);
    let output = command.stdin(std::process::Stdio::null()).output().unwrap();
    assert_ne!(output.status.code(), Some(0));
    assert!(output.stdout.is_empty(), "stdout is the protocol");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--apply-key") && stderr.contains("not a portcullis key"),
        "{stderr}"
    );
}
