//! The audit log as an auditor meets it: written by a real `serve`, then
//! verified, tampered with, replayed and shown offline.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use portcullis::audit::{Kind, Record};
use portcullis::canonical::sha256_hex;
use serde_json::{Value, json};

use crate::util::{ALLOW_BUILTIN, INITIALIZED, Served, Session, Tree, portcullis};

fn call_frame(id: u64, tool: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
        .to_string()
}

/// A served setup and a log with a little of everything: listing, allowed
/// reads, a denial, an ask, an unknown tool, bad arguments.
fn recorded_session() -> Served {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut session = Session::start(&served);
    session.initialize();
    session.send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#);
    session.next();
    let calls = [
        ("read_file", json!({"path": "README.md"})),
        ("read_file", json!({"path": "README.md", "limit": 1})),
        (
            "write_file",
            json!({"path": "../escape.txt", "content": "x"}),
        ),
        ("write_file", json!({"path": "new.txt", "content": "x"})),
        ("no_such_tool", json!({})),
        ("read_file", json!({"bogus": 1})),
    ];
    for (i, (tool, arguments)) in calls.into_iter().enumerate() {
        session.send(&call_frame(10 + i as u64, tool, arguments));
        session.next();
    }
    session.finish();
    served
}

fn lines(log: &Path) -> Vec<String> {
    fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(log: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    fs::write(log, text).unwrap();
}

/// A copy of the log (with its head and snapshots) to tamper with.
fn copy_of(served: &Served) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let original = served.audit_log();
    fs::copy(&original, &log).unwrap();
    fs::copy(
        original.with_extension("jsonl.head"),
        dir.path().join("audit.jsonl.head"),
    )
    .unwrap();
    (dir, log)
}

fn verify(log: &Path) -> crate::util::Run {
    portcullis(&["audit", "verify", log.to_str().unwrap(), "--format", "json"])
}

fn assert_break(log: &Path, kind: &str) {
    let run = verify(log);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.json()["break"]["kind"], kind, "{run:?}");
}

#[test]
fn a_served_session_verifies() {
    let served = recorded_session();
    let run = portcullis(&["audit", "verify", served.audit_log().to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.starts_with("ok: "), "{run:?}");
    let records = lines(&served.audit_log());
    assert!(
        run.stdout
            .contains(&format!("ok: {} records", records.len())),
        "{run:?}"
    );
    // The first and last records are the session's start and shutdown,
    // and every batch ends with a signed checkpoint.
    let parsed: Vec<Record> = records
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let told: Vec<&Record> = parsed
        .iter()
        .filter(|r| r.kind != Kind::Checkpoint)
        .collect();
    let first = &told[0];
    let last = told.last().unwrap();
    assert_eq!(
        (first.kind, first.body["event"].as_str()),
        (Kind::System, Some("start"))
    );
    assert_eq!(
        (last.kind, last.body["event"].as_str()),
        (Kind::System, Some("shutdown"))
    );
    assert_eq!(parsed.last().unwrap().kind, Kind::Checkpoint);
    // No token in the log.
    assert!(
        !fs::read_to_string(served.audit_log())
            .unwrap()
            .contains(&served.token[4..])
    );
}

#[test]
fn every_decision_is_recorded_before_its_outcome_with_what_replay_needs() {
    let served = recorded_session();
    let records: Vec<Record> = lines(&served.audit_log())
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let decisions: Vec<&Record> = records
        .iter()
        .filter(|r| r.kind == Kind::Decision)
        .collect();
    let calls: Vec<(&str, &str, &str)> = decisions
        .iter()
        .filter(|r| r.body["action"] == "call_tool" || r.body["cause"] == "unknown_tool")
        .map(|r| {
            (
                r.body["tool"].as_str().unwrap(),
                r.body["decision"].as_str().unwrap(),
                r.body["cause"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("read_file", "allow", "permitted"),
            ("read_file", "allow", "permitted"),
            ("write_file", "deny", "forbidden"),
            ("write_file", "ask", "approval_required"),
            ("no_such_tool", "deny", "unknown_tool"),
            ("read_file", "deny", "invalid_arguments"),
        ]
    );
    let allowed = decisions
        .iter()
        .find(|r| r.body["decision"] == "allow" && r.body["action"] == "call_tool")
        .unwrap();
    let body = &allowed.body;
    assert_eq!(body["client"]["name"], "agent");
    assert_eq!(body["client"]["fingerprint"].as_str().unwrap().len(), 16);
    assert_eq!(body["transport"], "stdio");
    assert_eq!(body["policy_set"]["cedar_sdk_version"], "4.14.1");
    assert_eq!(body["facts"]["reads_inside_root"], true);
    assert_eq!(body["policies"][0]["id"], "allow.builtin");
    assert_eq!(
        body["arguments_sha256"],
        sha256_hex(&json!({"path": "README.md"}))
    );
    assert_eq!(body["entities"].as_array().unwrap().len(), 4);
    // The outcome follows its decision and points at it.
    let outcome = records.iter().find(|r| r.kind == Kind::Outcome).unwrap();
    assert_eq!(outcome.body["decision_seq"], allowed.seq);
    assert_eq!(outcome.body["status"], "executed");
    assert!(outcome.seq > allowed.seq);
    // The policy set is kept beside the log.
    let hash = body["policy_set"]["hash"].as_str().unwrap();
    let mut snapshots = served.audit_log().into_os_string();
    snapshots.push(".policies");
    assert!(Path::new(&snapshots).join(format!("{hash}.json")).is_file());
}

#[test]
fn a_changed_byte_is_detected() {
    let served = recorded_session();
    let (_dir, log) = copy_of(&served);
    let mut all = lines(&log);
    let at = all
        .iter()
        .position(|l| l.contains("\"decision\":\"deny\""))
        .unwrap();
    let edited = all[at].replacen("\"decision\":\"deny\"", "\"decision\":\"DENY\"", 1);
    assert_ne!(edited, all[at]);
    all[at] = edited;
    write_lines(&log, &all);
    assert_break(&log, "edited");
}

/// `--chain` picks a chain of a fleet's shared state; a log file is one
/// chain, so naming one there is a mistake said as such, not ignored.
#[test]
fn a_chain_named_for_a_log_file_is_refused() {
    let served = recorded_session();
    let (_dir, log) = copy_of(&served);
    let log = log.to_str().unwrap();
    for command in ["verify", "replay", "show", "checkpoint"] {
        let run = portcullis(&["audit", command, log, "--chain", "replica-1"]);
        assert_ne!(run.code, 0, "{command}: {run:?}");
        assert!(
            run.stderr
                .contains("--chain picks one chain of a fleet's shared state"),
            "{command}: {run:?}"
        );
    }
}

#[test]
fn a_deleted_record_is_detected() {
    let served = recorded_session();
    let (_dir, log) = copy_of(&served);
    let mut all = lines(&log);
    all.remove(4);
    write_lines(&log, &all);
    assert_break(&log, "out_of_sequence");
}

#[test]
fn two_swapped_records_are_detected() {
    let served = recorded_session();
    let (_dir, log) = copy_of(&served);
    let mut all = lines(&log);
    all.swap(4, 5);
    write_lines(&log, &all);
    assert_break(&log, "out_of_sequence");
}

#[test]
fn an_inserted_record_is_detected() {
    let served = recorded_session();
    let (_dir, log) = copy_of(&served);
    let mut all = lines(&log);
    let copy = all[3].clone();
    all.insert(4, copy);
    write_lines(&log, &all);
    assert_break(&log, "out_of_sequence");
}

#[test]
fn a_truncated_tail_is_detected() {
    let served = recorded_session();
    let (_dir, log) = copy_of(&served);
    let mut all = lines(&log);
    all.truncate(all.len() - 2);
    write_lines(&log, &all);
    assert_break(&log, "truncated");
}

#[test]
fn forged_records_with_recomputed_hashes_do_not_match_the_head() {
    let served = recorded_session();
    // Replace the last record with a forged one, hashes recomputed.
    let (_dir, log) = copy_of(&served);
    let mut all = lines(&log);
    let last: Record = serde_json::from_str(all.last().unwrap()).unwrap();
    let prev: Record = serde_json::from_str(&all[all.len() - 2]).unwrap();
    let forged = Record::chained(
        prev.seq,
        &prev.hash,
        last.time.clone(),
        Kind::System,
        json!({"event": "shutdown", "forged": true}),
    );
    *all.last_mut().unwrap() = String::from_utf8(forged.to_line())
        .unwrap()
        .trim_end()
        .to_owned();
    write_lines(&log, &all);
    assert_break(&log, "head_mismatch");

    // Append a forged record after the real end.
    let (_dir2, log) = copy_of(&served);
    let mut all = lines(&log);
    let forged = Record::chained(
        last.seq,
        &last.hash,
        last.time,
        Kind::Decision,
        json!({"forged": true}),
    );
    all.push(
        String::from_utf8(forged.to_line())
            .unwrap()
            .trim_end()
            .to_owned(),
    );
    write_lines(&log, &all);
    assert_break(&log, "extended");
}

#[test]
fn a_missing_head_is_detected() {
    let served = recorded_session();
    let (dir, log) = copy_of(&served);
    fs::remove_file(dir.path().join("audit.jsonl.head")).unwrap();
    assert_break(&log, "head_missing");
}

#[test]
fn a_log_that_does_not_verify_is_not_appended_to() {
    let served = recorded_session();
    let mut all = lines(&served.audit_log());
    all.remove(2);
    write_lines(&served.audit_log(), &all);
    let mut session = Session::start(&served);
    session.send(crate::util::INITIALIZE);
    let exit = session.child.wait().unwrap();
    assert!(!exit.success());
    assert_eq!(lines(&served.audit_log()), all, "nothing was appended");
}

#[test]
fn replay_under_the_recorded_policies_reproduces_every_decision() {
    let served = recorded_session();
    let run = portcullis(&[
        "audit",
        "replay",
        served.audit_log().to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let summary = &run.json()["summary"];
    assert_eq!(summary["changes"], json!([]));
    assert_eq!(summary["reasons_changed"], json!([]));
    assert_eq!(summary["same"], summary["redecided"]);
    assert_eq!(
        summary["not_redecided"], 2,
        "unknown tool and invalid arguments"
    );
    assert!(summary["redecided"].as_u64().unwrap() >= 12, "{summary}");
}

#[test]
fn replay_under_a_candidate_reports_exactly_the_flipped_records() {
    let served = recorded_session();
    // The candidate lets paired clients use read_file only.
    let candidate = Tree::new();
    candidate.write_policy(
        "20_allowlist.cedar",
        r#"@id("allow.read_only") @reason("only reads")
permit (principal, action in Portcullis::Action::"use_tool", resource == Portcullis::Tool::"builtin/read_file");"#,
    );
    let log = served.audit_log();
    let mut args = vec!["audit", "replay", log.to_str().unwrap(), "--format", "json"];
    let flags = candidate.flags();
    args.extend(flags.iter().map(String::as_str));
    let run = portcullis(&args);
    assert_eq!(run.code, 2, "{run:?}");
    let summary = &run.json()["summary"];
    let changes = summary["changes"].as_array().unwrap();
    // Listing: edit_file, list_dir, search and write_file are no longer
    // listed; each write_file call's discovery is refused; the ask becomes a
    // deny. The escaping write stays denied by the same hard constraint.
    let described: Vec<String> = changes
        .iter()
        .map(|c| {
            format!(
                "{} {} {}->{}",
                c["action"].as_str().unwrap(),
                c["tool"].as_str().unwrap(),
                c["before"].as_str().unwrap(),
                c["after"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        described,
        [
            "discover_tool builtin/delete_file allow->deny",
            "discover_tool builtin/edit_file allow->deny",
            "discover_tool builtin/list_dir allow->deny",
            "discover_tool builtin/search allow->deny",
            "discover_tool builtin/write_file allow->deny",
            "discover_tool builtin/write_file allow->deny",
            "discover_tool builtin/write_file allow->deny",
            "call_tool builtin/write_file ask->deny",
        ],
        "{summary}"
    );
    assert_eq!(
        summary["transitions"],
        json!({"allow->deny": 7, "ask->deny": 1})
    );
    // Reads keep their outcome; only the permit that allows them changed.
    let reasons: Vec<&str> = summary["reasons_changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["tool"].as_str().unwrap())
        .collect();
    assert!(
        !reasons.is_empty() && reasons.iter().all(|t| *t == "builtin/read_file"),
        "{summary}"
    );
    let read = changes.iter().find(|c| c["tool"] == "builtin/read_file");
    assert!(
        read.is_none(),
        "reads keep their decision under the candidate"
    );
    let text = portcullis(&{
        let mut a = vec!["audit", "replay", log.to_str().unwrap()];
        a.extend(flags.iter().map(String::as_str));
        a
    });
    assert!(
        text.stdout.contains("ask -> deny [approval.writes] -> []"),
        "{text:?}"
    );
}

#[test]
fn replay_refuses_a_log_that_does_not_verify() {
    let served = recorded_session();
    let (_dir, log) = copy_of(&served);
    let mut all = lines(&log);
    all.remove(3);
    write_lines(&log, &all);
    let run = portcullis(&["audit", "replay", log.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("does not verify"), "{run:?}");
}

#[test]
fn show_filters_by_decision_client_and_time() {
    let served = recorded_session();
    let log = served.audit_log();
    let denied = portcullis(&[
        "audit",
        "show",
        log.to_str().unwrap(),
        "--decision",
        "deny",
        "--format",
        "json",
    ]);
    assert_eq!(denied.code, 0, "{denied:?}");
    let denied = denied.json();
    assert!(
        denied
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["body"]["decision"] == "deny")
    );
    assert_eq!(denied.as_array().unwrap().len(), 3);
    let nobody = portcullis(&[
        "audit",
        "show",
        log.to_str().unwrap(),
        "--client",
        "nobody",
        "--format",
        "json",
    ]);
    assert_eq!(nobody.json(), json!([]));
    let future = portcullis(&[
        "audit",
        "show",
        log.to_str().unwrap(),
        "--since",
        "2999-01-01T00:00:00Z",
        "--format",
        "json",
    ]);
    assert_eq!(future.json(), json!([]));
    let table = portcullis(&["audit", "show", log.to_str().unwrap()]);
    assert!(
        table.stdout.contains("hard.no_write_outside_root"),
        "{table:?}"
    );
    let bad = portcullis(&[
        "audit",
        "show",
        log.to_str().unwrap(),
        "--since",
        "yesterday",
    ]);
    assert_eq!(bad.code, 1, "{bad:?}");
}

#[test]
fn a_kill_9_during_a_burst_leaves_a_log_that_verifies_and_records_every_effect() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    // Writes run without approval here, so each call leaves a file.
    fs::remove_file(served.tree.policies().join("40_approvals.cedar")).unwrap();
    let mut session = Session::start(&served);
    session.initialize();
    session.send(INITIALIZED);
    let calls = 300u64;
    for id in 1..=calls {
        session.send(&call_frame(
            id,
            "write_file",
            json!({"path": format!("f{id}.txt"), "content": "x"}),
        ));
    }
    let started = Instant::now();
    let mut answered = 0;
    while answered < 40 && started.elapsed() < Duration::from_secs(30) {
        if session.next().get("id").is_some() {
            answered += 1;
        }
    }
    Command::new("kill")
        .args(["-9", &session.child.id().to_string()])
        .status()
        .unwrap();
    let _ = session.child.wait();

    let run = verify(&served.audit_log());
    assert_eq!(run.code, 0, "{run:?}");
    let allowed: std::collections::HashSet<String> = lines(&served.audit_log())
        .iter()
        .filter_map(|l| serde_json::from_str::<Record>(l).ok())
        .filter(|r| {
            r.kind == Kind::Decision
                && r.body["decision"] == "allow"
                && r.body["action"] == "call_tool"
        })
        .filter_map(|r| r.body["arguments_sha256"].as_str().map(str::to_owned))
        .collect();
    let mut effects = 0;
    for id in 1..=calls {
        if served.root.path().join(format!("f{id}.txt")).exists() {
            effects += 1;
            let digest = sha256_hex(&json!({"path": format!("f{id}.txt"), "content": "x"}));
            assert!(
                allowed.contains(&digest),
                "f{id}.txt was written without a decision record on disk"
            );
        }
    }
    assert!(effects >= 40, "{effects} effects");
}

#[test]
fn a_log_that_cannot_be_written_denies_the_call() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    // A file-size limit that lets the start record and the policy snapshot
    // in and not many calls after: the writes fail with EFBIG (SIGXFSZ
    // ignored so they fail instead of killing the process).
    let mut inner = Vec::new();
    for arg in served.serve_args() {
        inner.push(format!("'{arg}'"));
    }
    let script = format!(
        "trap '' XFSZ; ulimit -f 128; exec '{}' {}",
        env!("CARGO_BIN_EXE_portcullis"),
        inner.join(" ")
    );
    let stderr_path = served.tree.dir.path().join("serve.stderr");
    let mut command = Command::new("bash");
    command
        .args(["-c", &script])
        .env("PORTCULLIS_TOKEN", &served.token)
        .stderr(Stdio::from(fs::File::create(&stderr_path).unwrap()));
    let mut session = Session::start_command(command);
    session.initialize();
    session.send(INITIALIZED);
    // Each call appends about 3 KiB; within some forty calls the limit is hit.
    let mut codes = Vec::new();
    for id in 1..=80 {
        session.send(&call_frame(id, "read_file", json!({"path": "README.md"})));
        let response = session.next();
        let code = response["result"]["structuredContent"]["reason_code"]
            .as_str()
            .unwrap_or("ran")
            .to_owned();
        if code != "ran" {
            assert_eq!(response["result"]["isError"], true, "{response}");
        }
        codes.push(code);
    }
    let first_failure = codes
        .iter()
        .position(|c| c == "audit_unavailable")
        .expect("the limit was hit");
    assert!(first_failure > 0, "{codes:?}");
    assert!(
        codes[first_failure..]
            .iter()
            .all(|c| c == "audit_unavailable"),
        "{codes:?}"
    );
    drop(session);
    let stderr = fs::read_to_string(&stderr_path).unwrap();
    assert!(stderr.contains("cannot write the audit log"), "{stderr}");
    // What is on disk still verifies: the failed write was cut off.
    let run = verify(&served.audit_log());
    assert_eq!(run.code, 0, "{run:?}");
}

#[test]
fn replay_without_the_policy_snapshot_says_which_set_is_missing() {
    let served = recorded_session();
    let (_dir, log) = copy_of(&served);
    let run = portcullis(&["audit", "replay", log.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("cannot be rebuilt"), "{run:?}");
    // Verify needs no snapshot.
    assert_eq!(verify(&log).code, 0);
}

#[test]
fn a_log_recorded_before_the_gate_judged_vcs_metadata_replays_in_full() {
    // Written by the release before `[[program]]` descriptions and the
    // command facts `writes_vcs_metadata` / `touches_vcs_metadata`: its
    // snapshot holds the old schema and the old deny-list command table.
    let (_dir, log) = fixture_copy("audit-before-command-vcs");
    assert_eq!(verify(&log).code, 0);
    let run = portcullis(&["audit", "replay", log.to_str().unwrap(), "--format", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let summary = &run.json()["summary"];
    assert_eq!(summary["redecided"], 10, "{summary}");
    assert_eq!(summary["same"], 10, "{summary}");
    assert_eq!(summary["changes"], json!([]), "{summary}");
    // The current policies, as a candidate, read the old records too: the
    // redirect into a file that was allowed then is a write now.
    let run = portcullis(&[
        "audit",
        "replay",
        log.to_str().unwrap(),
        "--policies",
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("policies")
            .to_str()
            .unwrap(),
    ]);
    assert_eq!(run.code, 0, "facts are replayed as recorded: {run:?}");
}

/// A copy of a log kept in `tests/fixtures/NAME` (log, head, snapshots).
fn fixture_copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    fs::copy(fixture.join("audit.jsonl"), &log).unwrap();
    fs::copy(
        fixture.join("audit.jsonl.head"),
        dir.path().join("audit.jsonl.head"),
    )
    .unwrap();
    let snapshots = dir.path().join("audit.jsonl.policies");
    fs::create_dir(&snapshots).unwrap();
    for entry in fs::read_dir(fixture.join("audit.jsonl.policies")).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), snapshots.join(entry.file_name())).unwrap();
    }
    (dir, log)
}

#[test]
fn a_log_written_before_the_structure_change_verifies_signed_and_replays_in_full() {
    // Written by the release before one `decide`, the keeper pipeline and
    // the new digest stack (sha2 0.10, ed25519-dalek 2), with a team tree
    // whose schema has no `read_policy`; then appended to by this release
    // (a call and a `resources/list`, denied for want of the action).
    let (_dir, log) = fixture_copy("audit-before-structure");
    let key = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/audit-before-structure/audit-signing.pub");
    let run = portcullis(&[
        "audit",
        "verify",
        log.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("signed by the key to its end"),
        "{run:?}"
    );
    let run = portcullis(&["audit", "replay", log.to_str().unwrap(), "--format", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let summary = &run.json()["summary"];
    assert_eq!(summary["redecided"], 31, "{summary}");
    assert_eq!(summary["same"], 31, "{summary}");
    assert_eq!(summary["not_redecided"], 2, "{summary}");
    assert_eq!(summary["changes"], json!([]), "{summary}");
    assert_eq!(summary["reasons_changed"], json!([]), "{summary}");
}
