//! The server driven with hand-written JSON-RPC frames: authentication
//! before any message is read, stdout purity under load, and early
//! notifications.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{ALLOW_BUILTIN, INITIALIZE, Served, Session, run_with_stdin};

/// Runs `serve` with a valid request on stdin and returns (exit code, stdout, stderr).
fn refused(command: Command) -> (i32, String, String) {
    let run = run_with_stdin(command, format!("{INITIALIZE}\n").as_bytes());
    (run.code, run.stdout, run.stderr)
}

fn assert_refused(command: Command) {
    let (code, stdout, stderr) = refused(command);
    assert_ne!(code, 0);
    assert_eq!(stdout, "", "stdout must stay empty");
    assert_eq!(stderr, "portcullis: authentication failed\n");
}

#[test]
fn no_token_is_refused_before_any_message() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut command = served.command();
    command.env_remove("PORTCULLIS_TOKEN");
    assert_refused(command);
}

#[test]
fn a_wrong_token_is_refused() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut command = served.command();
    command.env("PORTCULLIS_TOKEN", format!("{}x", served.token));
    assert_refused(command);
    let mut command = served.command();
    command.env("PORTCULLIS_TOKEN", "");
    assert_refused(command);
}

#[test]
fn a_missing_store_is_refused() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    std::fs::remove_file(&served.store).unwrap();
    assert_refused(served.command());
}

#[test]
fn a_store_others_can_read_is_refused() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    std::fs::set_permissions(&served.store, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert_refused(served.command());
}

#[test]
fn a_revoked_token_is_refused() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let run = crate::util::portcullis(&[
        "token",
        "revoke",
        "agent",
        "--store",
        served.store.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_refused(served.command());
}

#[test]
fn a_notification_before_initialize_does_not_kill_the_server() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut session = Session::start(&served);
    session
        .send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#);
    session.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    session.initialize();
    session.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#);
    let listed = session.next();
    assert_eq!(listed["id"], 1);
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 9);
}

#[test]
fn stdout_holds_only_json_rpc_frames_under_40_concurrent_calls_with_progress() {
    only_frames_under_concurrent_calls(40);
}

/// Sends `calls` searches at once, each with a progress token, and checks
/// that every line on stdout is a JSON-RPC frame, every call is answered
/// once, and progress comes in order and never after its result. The 500
/// call version is a load test (`tests/load.rs`).
pub fn only_frames_under_concurrent_calls(calls: usize) {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    for i in 0..130 {
        std::fs::write(served.root.path().join(format!("f{i}.txt")), "hay\n").unwrap();
    }
    let mut session = Session::start(&served);
    session.initialize();
    for id in 1..=calls {
        let frame = json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "search", "arguments": {"pattern": "needle"},
                       "_meta": {"progressToken": format!("p{id}")}}
        });
        session.send(&frame.to_string());
    }
    let mut answered = std::collections::BTreeSet::new();
    let mut progress = 0;
    let mut last_progress: std::collections::HashMap<String, f64> = Default::default();
    let deadline = Instant::now() + Duration::from_secs(300);
    while answered.len() < calls {
        assert!(Instant::now() < deadline, "only {} answers", answered.len());
        let frame = session.next();
        assert_eq!(frame["jsonrpc"], "2.0", "{frame}");
        if let Some(id) = frame.get("id") {
            assert!(frame["result"]["structuredContent"].is_object(), "{frame}");
            assert!(
                answered.insert(usize::try_from(id.as_u64().unwrap()).unwrap()),
                "answered twice: {frame}"
            );
        } else {
            assert_eq!(frame["method"], "notifications/progress", "{frame}");
            let token = frame["params"]["progressToken"]
                .as_str()
                .unwrap()
                .to_owned();
            let id: usize = token[1..].parse().unwrap();
            assert!(
                !answered.contains(&id),
                "progress after the result: {frame}"
            );
            let value = frame["params"]["progress"].as_f64().unwrap();
            let previous = last_progress.insert(token, value).unwrap_or(0.0);
            assert!(value > previous, "progress out of order: {frame}");
            progress += 1;
        }
    }
    assert!(progress >= calls * 2, "{progress} progress notifications");
}

#[test]
fn every_malformed_frame_gets_an_answer_and_the_session_goes_on() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut session = Session::start(&served);
    session.initialize();
    for (frame, code, id) in [
        ("this is not json", -32700, json!(null)),
        (
            r#"{"jsonrpc":"2.0","id":5,"method":"tools/call""#,
            -32700,
            json!(null),
        ),
        (r#"{"jsonrpc":"2.0","id":7,"method":42}"#, -32600, json!(7)),
        (
            r#"{"jsonrpc":"2.0","id":"x","params":{}}"#,
            -32600,
            json!("x"),
        ),
        ("[]", -32600, json!(null)),
        ("42", -32600, json!(null)),
    ] {
        session.send(frame);
        let answer = session.next();
        assert_eq!(answer["error"]["code"], code, "{frame}: {answer}");
        assert_eq!(answer["id"], id, "{frame}: {answer}");
    }
    // An unknown notification gets nothing; the next request is answered.
    session.send(r#"{"jsonrpc":"2.0","method":"notifications/nothing_like_it","params":{}}"#);
    session.send(r#"{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}"#);
    assert_eq!(session.next()["id"], 9);
    session.finish();
}

#[test]
fn a_second_initialize_is_refused() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut session = Session::start(&served);
    session.initialize();
    let again = r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"2"}}}"#;
    session.send(again);
    let answer = session.next();
    assert_eq!(answer["id"], 3, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    session.send(r#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{}}"#);
    assert_eq!(session.next()["id"], 4);
    session.finish();
}

#[test]
fn a_refusal_carries_the_id_as_sent_and_a_frame_with_two_readings_is_not_taken() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut session = Session::start(&served);
    session.initialize();
    // A second initialize with a string id: the refusal names that id.
    session.send(r#"{"jsonrpc":"2.0","id":"again","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"2"}}}"#);
    let answer = session.next();
    assert_eq!(answer["id"], "again", "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    // A key given twice could be read either way: refused, not guessed.
    for frame in [
        r#"{"jsonrpc":"2.0","id":11,"id":12,"method":"tools/list","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":13,"method":"tools/list","method":"tools/call","params":{}}"#,
    ] {
        session.send(frame);
        let answer = session.next();
        assert_eq!(answer["error"]["code"], -32600, "{frame}: {answer}");
    }
    // A call naming two tools runs neither.
    session.send(r#"{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"read_file","name":"write_file","arguments":{"path":"a.txt","content":"x"}}}"#);
    let answer = session.next();
    assert_eq!(answer["id"], 15, "{answer}");
    assert!(answer["error"].is_object(), "{answer}");
    assert!(!served.root.path().join("a.txt").exists());
    session.send(r#"{"jsonrpc":"2.0","id":14,"method":"tools/list","params":{}}"#);
    assert_eq!(session.next()["id"], 14);
    session.finish();
}

#[test]
fn debug_logs_never_hold_a_frame_body() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    std::fs::write(
        served.root.path().join("secret.txt"),
        "CONTENT-MARKER-7f3a\n",
    )
    .unwrap();
    for level in [
        "debug",
        "trace",
        "rmcp=trace,portcullis=trace",
        "rmcp::service=trace,rmcp::handler::server=trace",
    ] {
        let mut command = served.command();
        command.env("PORTCULLIS_LOG", level);
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{INITIALIZE}").unwrap();
        writeln!(stdin, "{}", crate::util::INITIALIZED).unwrap();
        writeln!(stdin, "not json ARGUMENT-MARKER-91c2").unwrap();
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "read_file", "arguments": {"path": "secret.txt", "limit": 5}}})
        )
        .unwrap();
        drop(stdin);
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stdout.contains("CONTENT-MARKER-7f3a"),
            "{level}: the call ran: {stdout}"
        );
        assert!(!stderr.is_empty(), "{level}: something was logged");
        for marker in ["CONTENT-MARKER-7f3a", "ARGUMENT-MARKER-91c2", "secret.txt"] {
            assert!(
                !stderr.contains(marker),
                "{level}: {marker} in the log:\n{stderr}"
            );
        }
    }
}

#[test]
fn a_hand_edited_owner_entry_is_refused_like_token_create_refuses_it() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let text = std::fs::read_to_string(&served.store).unwrap();
    assert!(text.contains("\"paired\""), "{text}");
    std::fs::write(&served.store, text.replace("\"paired\"", "\"owner\"")).unwrap();
    std::fs::set_permissions(&served.store, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_refused(served.command());
}

fn search_frame(id: u64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "search", "arguments": {"pattern": "needle"}}})
    .to_string()
}

#[test]
fn a_spent_walk_budget_returns_what_it_has_marked_truncated_and_audited() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    std::fs::write(served.root.path().join("a.txt"), "needle\n").unwrap();
    let mut command = served.command();
    command.args(["--walk-budget", "0"]).stderr(Stdio::null());
    let mut session = Session::start_command(command);
    session.initialize();
    session.send(&search_frame(1));
    let answer = session.next();
    let result = &answer["result"]["structuredContent"];
    assert_eq!(result["truncated"], true, "{answer}");
    assert_eq!(result["files_searched"], 0, "{answer}");
    session.finish();
    let log = std::fs::read_to_string(served.audit_log()).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("\"kind\":\"outcome\"") && l.contains("\"truncated\":true")),
        "{log}"
    );
}

#[test]
fn calls_beyond_the_concurrency_limit_wait_their_turn() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    for i in 0..50 {
        std::fs::write(served.root.path().join(format!("f{i}.txt")), "needle\n").unwrap();
    }
    // A hardlink is judged as outside the root: search does not read it.
    std::fs::write(served.root.path().join("linked.txt"), "needle in a link\n").unwrap();
    std::fs::hard_link(
        served.root.path().join("linked.txt"),
        served.root.path().join("other-name.txt"),
    )
    .unwrap();
    let mut command = served.command();
    command
        .args(["--max-concurrent", "1"])
        .stderr(Stdio::null());
    let mut session = Session::start_command(command);
    session.initialize();
    for id in 1..=20 {
        session.send(&search_frame(id));
    }
    let mut answered = std::collections::BTreeSet::new();
    while answered.len() < 20 {
        let frame = session.next();
        if let Some(id) = frame.get("id").and_then(serde_json::Value::as_u64) {
            let text = frame["result"]["structuredContent"].to_string();
            assert!(
                !text.contains("in a link"),
                "a hardlinked file was read: {text}"
            );
            answered.insert(id);
        }
    }
    session.finish();
    let log = std::fs::read_to_string(served.audit_log()).unwrap();
    let outcomes = log
        .lines()
        .filter(|l| l.contains("\"kind\":\"outcome\"") && l.contains("\"waited_ms\""))
        .count();
    assert_eq!(outcomes, 20, "{log}");
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(served.serve_args())
        .args(["--max-concurrent", "0"])
        .env("PORTCULLIS_TOKEN", &served.token)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(refused.stdout.is_empty());
}

/// The frames of a session with one of each ordinary refusal: an unknown
/// tool, bad arguments, a denial, an ask nobody can answer, a failed call.
fn refusals_session(command: &mut Command) -> (String, String) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{INITIALIZE}").unwrap();
    writeln!(stdin, "{}", crate::util::INITIALIZED).unwrap();
    let calls = [
        ("no_such_tool", json!({})),
        ("read_file", json!({"bogus": 1})),
        ("write_file", json!({"path": "../out.txt", "content": "x"})),
        ("write_file", json!({"path": "new.txt", "content": "x"})),
        ("read_file", json!({"path": "missing.txt"})),
    ];
    for (id, (name, arguments)) in calls.into_iter().enumerate() {
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id + 1, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}})
        )
        .unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn ordinary_refusals_log_nothing_and_logs_have_no_colour_off_a_terminal() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut command = served.command();
    command.env_remove("PORTCULLIS_LOG").env_remove("RUST_LOG");
    let (stdout, stderr) = refusals_session(&mut command);
    assert_eq!(stdout.lines().count(), 6, "{stdout}");
    // The one warning a machine without cvc5 gets is about the proof, not
    // about any call.
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("WARN") && !line.contains("checked structurally"))
        .collect();
    assert!(warnings.is_empty(), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    // RUST_LOG is honoured when PORTCULLIS_LOG is not set.
    let mut command = served.command();
    command.env_remove("PORTCULLIS_LOG").env("RUST_LOG", "info");
    let (_, stderr) = refusals_session(&mut command);
    assert!(stderr.contains("INFO"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
}

#[test]
fn json_logs_are_one_object_per_line() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut command = served.command();
    command
        .env("PORTCULLIS_LOG", "info")
        .env("PORTCULLIS_LOG_FORMAT", "json");
    let (_, stderr) = refusals_session(&mut command);
    assert!(stderr.lines().count() > 1, "{stderr}");
    for line in stderr.lines() {
        let value: Value =
            serde_json::from_str(line).unwrap_or_else(|err| panic!("not JSON ({err}): {line}"));
        assert!(value["level"].is_string(), "{line}");
    }
}

#[test]
fn a_proven_set_is_remembered_beside_the_token_store_and_not_proven_again() {
    let solver = Command::new(std::env::var("CVC5").unwrap_or_else(|_| "cvc5".into()))
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !solver {
        eprintln!("SKIPPED: cvc5 is not on PATH, so nothing is proven to remember");
        return;
    }
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let proofs = served.store.parent().unwrap().join("proofs");
    let started = |served: &Served| {
        let mut session = Session::start(served);
        session.initialize();
        session.finish();
    };
    // Proof markers; beside each, the set's validation marker.
    let markers_in = |proofs: &std::path::Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(proofs)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| !path.to_string_lossy().ends_with(".validated.json"))
            .collect()
    };
    started(&served);
    let markers = markers_in(&proofs);
    assert_eq!(markers.len(), 1, "{markers:?}");
    assert_eq!(std::fs::read_dir(&proofs).unwrap().count(), 2);
    let marker: Value =
        serde_json::from_str(&std::fs::read_to_string(&markers[0]).unwrap()).unwrap();
    let hash = marker["hash"].as_str().unwrap().to_owned();
    let name = markers[0].file_name().unwrap().to_str().unwrap().to_owned();
    assert!(name.starts_with(&hash), "{name}");
    assert_eq!(
        std::fs::metadata(&markers[0]).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The set in the log is the set that was proven.
    let log = std::fs::read_to_string(served.audit_log()).unwrap();
    assert!(log.contains(&hash));
    // A second start, with the solver gone, still knows the set is proven:
    // it does not fall back to the structural check's warning.
    let errors = served.tree.dir.path().join("second-start.log");
    let mut command = served.command();
    command
        .env("CVC5", "/nonexistent/cvc5")
        .env("PORTCULLIS_LOG", "warn")
        .stderr(std::fs::File::create(&errors).unwrap());
    let mut session = Session::start_command(command);
    session.initialize();
    session.finish();
    let stderr = std::fs::read_to_string(&errors).unwrap();
    assert!(!stderr.contains("checked structurally"), "{stderr}");
    // A change to the set is proven afresh.
    served.tree.write_policy(
        "30_extra.cedar",
        r#"@id("allow.read_file") @reason("reads are fine")
permit (principal, action in Portcullis::Action::"use_tool", resource == Portcullis::Tool::"builtin/read_file");"#,
    );
    started(&served);
    assert_eq!(markers_in(&proofs).len(), 2);
}
