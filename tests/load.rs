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
