//! Load tests: ignored by `cargo test`, run by `.ci/run` in their own step
//! (`cargo test --test integration -- --ignored`).

use std::fs;

use serde_json::json;

use crate::util::{ALLOW_BUILTIN, Served, Session};

/// Searches one client starts at once.
const SEARCHES: u64 = 64;
/// Files in the searched tree.
const FILES: usize = 2000;

#[test]
#[ignore = "load test: run by .ci/run in its own step"]
fn another_client_is_answered_while_one_runs_64_searches() {
    let served = Served::new(ALLOW_BUILTIN, "readonly");
    let ws = served.root.path();
    for folder in 0..40 {
        fs::create_dir(ws.join(format!("f{folder}"))).unwrap();
    }
    let line = "a line of text that the pattern does not match\n".repeat(40);
    for file in 0..FILES {
        fs::write(ws.join(format!("f{}/{file}.txt", file % 40)), &line).unwrap();
    }
    let mut other = Session::start(&served);
    other.initialize();
    let mut busy = Session::start(&served);
    busy.initialize();
    for id in 1..=SEARCHES {
        let frame = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                           "params": {"name": "search", "arguments": {"pattern": "needle [0-9]+"}}});
        busy.send(&frame.to_string());
    }
    other.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "list_dir", "arguments": {}}})
        .to_string(),
    );
    let answer = other.next();
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    // Not a stopwatch: the other client's answer must come while the busy
    // one is still being served, whatever the machine's speed.
    let mut answers = busy.ready();
    assert!(
        answers.len() < SEARCHES as usize,
        "the other client was answered only after all {SEARCHES} searches"
    );
    eprintln!("answered after {} of {SEARCHES} searches", answers.len());
    other.finish();
    while answers.len() < SEARCHES as usize {
        answers.push(busy.next());
    }
    for response in answers {
        assert_eq!(response["result"]["isError"], false, "{response}");
    }
    busy.finish();
}

#[test]
#[ignore = "load test: run by .ci/run in its own step"]
fn stdout_holds_only_json_rpc_frames_under_500_concurrent_calls_with_progress() {
    crate::mcp_raw::only_frames_under_concurrent_calls(500);
}

/// Calls over HTTP, and the clients making them at once.
const HTTP_CALLS: usize = 10_000;
const HTTP_CLIENTS: usize = 64;

/// The resident set of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "load test: run by .ci/run in its own step"]
async fn ten_thousand_http_calls_from_64_clients_are_each_decided_recorded_and_answered() {
    use crate::http::{HttpServer, client, modern};
    let served = Served::new(ALLOW_BUILTIN, "readonly");
    let mut store = portcullis::auth::TokenStore::open(&served.store).unwrap();
    let tokens: Vec<String> = (0..HTTP_CLIENTS)
        .map(|i| {
            store
                .create(&format!("load{i}"), "readonly")
                .unwrap()
                .as_str()
                .to_owned()
        })
        .collect();
    let server = HttpServer::start(&served, &[]);
    let pid = server.child.id();
    let url = server.url();
    let http = client();
    // Warm up: every client once, so that the start figure has the
    // connections and keepers the run will use.
    let read = json!({"name": "read_file", "arguments": {"path": "README.md"}});
    for token in &tokens {
        let answer = modern(&http, &url, token, 0, "tools/call", read.clone()).await;
        assert_eq!(
            answer.response(0)["result"]["isError"],
            false,
            "{}",
            answer.body
        );
    }
    let start_rss = rss_kib(pid);
    let started = std::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, token) in tokens.iter().enumerate() {
        let calls = HTTP_CALLS / HTTP_CLIENTS + usize::from(i < HTTP_CALLS % HTTP_CLIENTS);
        let (http, url, token, read) = (http.clone(), url.clone(), token.clone(), read.clone());
        tasks.spawn(async move {
            let mut errors = 0;
            for id in 1..=calls {
                let id = i64::try_from(id).unwrap();
                let answer = modern(&http, &url, &token, id, "tools/call", read.clone()).await;
                let ok = answer.status == 200
                    && answer.response(id)["result"]["structuredContent"]["content"]
                        == "# test workspace\n";
                errors += usize::from(!ok);
            }
            (calls, errors)
        });
    }
    let (mut calls, mut errors) = (0, 0);
    while let Some(done) = tasks.join_next().await {
        let (made, failed) = done.unwrap();
        calls += made;
        errors += failed;
    }
    let elapsed = started.elapsed();
    let end_rss = rss_kib(pid);
    eprintln!(
        "{calls} calls from {HTTP_CLIENTS} clients in {elapsed:?} ({:.0} calls/s); serve RSS {start_rss} KiB at the start, {end_rss} KiB at the end",
        calls as f64 / elapsed.as_secs_f64()
    );
    assert_eq!((calls, errors), (HTTP_CALLS, 0));
    server.stop();
    let log = fs::read_to_string(served.audit_log()).unwrap();
    let records: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let decided = records
        .iter()
        .filter(|r| r["kind"] == "decision" && r["body"]["action"] == "call_tool")
        .count();
    let completed = records
        .iter()
        .filter(|r| r["kind"] == "outcome" && r["body"]["status"] == "executed")
        .count();
    // The warm-up calls too.
    assert_eq!(decided, HTTP_CALLS + HTTP_CLIENTS);
    assert_eq!(completed, HTTP_CALLS + HTTP_CLIENTS);
    let verified =
        crate::util::portcullis(&["audit", "verify", served.audit_log().to_str().unwrap()]);
    assert_eq!(verified.code, 0, "{verified:?}");
    // Flat: the run may not grow the process by more than a few buffers.
    assert!(
        end_rss < start_rss + 64 * 1024,
        "RSS grew from {start_rss} KiB to {end_rss} KiB"
    );
}
