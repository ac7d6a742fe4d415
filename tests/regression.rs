//! One test per bug fixed, named for what broke, so it cannot come back.
//! Each says what went wrong before the fix.

use std::fs;

use serde_json::{Value, json};

use crate::util::{ALLOW_BUILTIN, Served, Session, portcullis};

/// A served log, copied with its head to a folder of its own.
fn served_log() -> (Served, tempfile::TempDir, std::path::PathBuf, Vec<Value>) {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut session = Session::start(&served);
    session.initialize();
    for id in 1..=3 {
        session.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "read_file", "arguments": {"path": "README.md"}}})
            .to_string(),
        );
        session.next();
    }
    session.finish();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    fs::copy(served.audit_log(), &log).unwrap();
    let records: Vec<Value> = fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    (served, dir, log, records)
}

/// Before: `audit verify` called a log whose last batch a crash had cut
/// short after whole records "extended after the fact", while the writer
/// accepted the same log (cutting the batch back). The two checks of a
/// log's end against its head were written twice and disagreed.
#[test]
fn a_batch_cut_short_after_whole_records_verifies_as_an_unacknowledged_tail() {
    let (_served, dir, log, records) = served_log();
    assert!(records.len() > 4);
    // The head as a crash leaves it: committed some records back, pending
    // past the end (the rest of the batch never landed).
    let committed = &records[records.len() - 3];
    let last = records.last().unwrap();
    let head = json!({
        "committed": {"seq": committed["seq"], "hash": committed["hash"]},
        "pending": {"seq": last["seq"].as_u64().unwrap() + 5, "hash": "0".repeat(64)},
    });
    fs::write(dir.path().join("audit.jsonl.head"), head.to_string()).unwrap();
    let run = portcullis(&["audit", "verify", log.to_str().unwrap(), "--format", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["unacknowledged_tail"], true, "{run:?}");
    // A pending mark the log has not reached is still no licence to extend
    // the log past it.
    let head = json!({
        "committed": {"seq": committed["seq"], "hash": committed["hash"]},
        "pending": {"seq": last["seq"].as_u64().unwrap() - 1, "hash": "0".repeat(64)},
    });
    fs::write(dir.path().join("audit.jsonl.head"), head.to_string()).unwrap();
    let run = portcullis(&["audit", "verify", log.to_str().unwrap(), "--format", "json"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.json()["break"]["kind"], "extended", "{run:?}");
}

/// `audit show` printed the tool name a client asked for as it was: a
/// name holding terminal escapes (`\x1b[2J` clears the screen) rewrote
/// what an auditor saw.
#[test]
fn a_tool_name_with_terminal_escapes_is_shown_inert() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut session = Session::start(&served);
    session.initialize();
    session.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "evil\u{1b}[2J\u{1b}[Hall is well", "arguments": {}}})
        .to_string(),
    );
    session.next();
    session.finish();
    let run = portcullis(&["audit", "show", served.audit_log().to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stdout.contains('\u{1b}'), "{run:?}");
    assert!(run.stdout.contains("evil\u{fffd}[2J"), "{run:?}");
}

/// `portcullis gate` printed the command it judged, and each part of it,
/// as given: an agent's command holding terminal escapes rewrote the
/// screen of whoever ran the gate by hand.
#[test]
fn a_command_with_terminal_escapes_is_judged_and_shown_inert() {
    let run = portcullis(&["gate", "--command", "echo 'a\u{1b}[2Jb' | cat\u{7}"]);
    assert!(!run.stdout.contains('\u{1b}'), "{run:?}");
    assert!(!run.stdout.contains('\u{7}'), "{run:?}");
    assert!(run.stdout.contains("a\u{fffd}[2Jb"), "{run:?}");
}

/// Before: `serve --http` printed its address with `eprintln!`, which on
/// unbuffered stderr writes the pieces of the line one by one (`portcullis:
/// serving ... at http://`, the address, `/mcp`, the newline); the Python
/// suite, reading the log file as it grew, once took half an address
/// (`http://127.0.0.1` without its port) and failed in CI. Under strace,
/// the line must be one `write`.
#[test]
fn the_http_address_line_is_written_whole() {
    if !crate::util::have("strace") {
        eprintln!("SKIPPED: strace is not installed (.ci/install-strace installs it)");
        return;
    }
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let trace = served.tree.dir.path().join("writes.strace");
    // Killing strace would only detach the server it traces, which would
    // then outlive the test: a shell notes its pid, then becomes the server.
    let pid_file = served.tree.dir.path().join("serve.pid");
    let mut command = std::process::Command::new("strace");
    command
        .args(["-f", "-s", "256", "-e", "trace=write", "-o"])
        .arg(&trace)
        .args(["sh", "-c", "echo $$ > \"$0\"; exec \"$@\""])
        .arg(&pid_file)
        .arg(env!("CARGO_BIN_EXE_portcullis"))
        .args(served.serve_args())
        .args(["--http", "127.0.0.1:0"])
        .env("PORTCULLIS_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let printed = std::io::BufRead::lines(std::io::BufReader::new(stderr))
        .map_while(Result::ok)
        .find(|line| line.starts_with("portcullis: serving MCP over HTTP at "));
    let server = fs::read_to_string(&pid_file).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-s", "KILL", server.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    child.wait().unwrap();
    assert!(printed.is_some(), "serve printed no address");
    let writes = fs::read_to_string(&trace).unwrap();
    let line = writes
        .lines()
        .find(|line| line.contains("portcullis: serving"))
        .unwrap_or_else(|| panic!("no write of the address: {writes}"));
    assert!(
        line.contains("/mcp\\n\""),
        "the address line is one write, newline included: {line}"
    );
}
