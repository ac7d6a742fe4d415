//! Audit integrity: signed checkpoints against an attacker who can write the
//! log folder but cannot read the key, a head that says what no writer
//! writes, and many processes on one log.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use portcullis::audit::{Head, Kind, Mark, Record, head_path};
use serde_json::{Value, json};

use crate::util::{ALLOW_BUILTIN, Served, Session, portcullis};

fn call_frame(id: u64, tool: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
        .to_string()
}

/// A log of two serve sessions, several batches each.
fn signed_session() -> Served {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    for round in 0..2 {
        let mut session = Session::start(&served);
        session.initialize();
        for i in 0..4 {
            session.send(&call_frame(
                round * 10 + i,
                "write_file",
                json!({"path": "../escape.txt", "content": "x"}),
            ));
            session.next();
            session.send(&call_frame(
                round * 10 + i + 100,
                "read_file",
                json!({"path": "README.md"}),
            ));
            session.next();
        }
        session.finish();
    }
    served
}

fn public_key(served: &Served) -> PathBuf {
    served.store.parent().unwrap().join("audit-signing.pub")
}

fn records(log: &Path) -> Vec<Record> {
    fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn write_records(log: &Path, records: &[Record]) {
    let mut bytes = Vec::new();
    for record in records {
        bytes.extend_from_slice(&record.to_line());
    }
    fs::write(log, bytes).unwrap();
    let last = records.last().map(|r| Mark {
        seq: r.seq,
        hash: r.hash.clone(),
    });
    let head = Head {
        committed: last,
        pending: None,
    };
    fs::write(head_path(log), serde_json::to_string(&head).unwrap()).unwrap();
}

/// Re-chains records as an attacker would: every seq, prev and hash
/// recomputed, checkpoints kept (their bodies pointed at the new hashes)
/// or dropped.
fn rechain(records: Vec<Record>, keep_checkpoints: bool) -> Vec<Record> {
    let mut out: Vec<Record> = Vec::new();
    for record in records {
        if record.kind == Kind::Checkpoint && !keep_checkpoints {
            continue;
        }
        let (seq, prev) = out
            .last()
            .map_or((0, portcullis::audit::GENESIS.to_owned()), |r| {
                (r.seq, r.hash.clone())
            });
        let mut body = record.body.clone();
        if record.kind == Kind::Checkpoint {
            body["seq"] = json!(seq);
            body["hash"] = json!(prev);
        }
        out.push(Record::chained(seq, &prev, record.time, record.kind, body));
    }
    out
}

fn copy(served: &Served) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    fs::copy(served.audit_log(), &log).unwrap();
    fs::copy(head_path(&served.audit_log()), head_path(&log)).unwrap();
    (dir, log)
}

fn verify(log: &Path, extra: &[&str]) -> crate::util::Run {
    let mut args = vec!["audit", "verify", log.to_str().unwrap(), "--format", "json"];
    args.extend_from_slice(extra);
    portcullis(&args)
}

fn assert_caught(log: &Path, key: &Path, kind: &str) {
    let run = verify(log, &["--key", key.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.json()["break"]["kind"], kind, "{run:?}");
}

#[test]
fn a_signed_log_verifies_with_its_key_and_says_how_far_it_vouches_without() {
    let served = signed_session();
    let key = public_key(&served);
    let run = verify(&served.audit_log(), &["--key", key.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let json = run.json();
    assert_eq!(json["key_checked"], true);
    assert!(json["checkpoints"].as_u64().unwrap() >= 4, "{json}");
    let run = verify(&served.audit_log(), &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.json()["vouch"]
            .as_str()
            .unwrap()
            .contains("not vouched for"),
        "{run:?}"
    );
    // Another key's log is not this one.
    let other = tempfile::tempdir().unwrap();
    portcullis::audit::load_or_create_signer(other.path()).unwrap();
    assert_caught(
        &served.audit_log(),
        &other.path().join("audit-signing.pub"),
        "bad_signature",
    );
}

#[test]
fn every_tamper_shape_is_caught_with_the_key() {
    let served = signed_session();
    let key = public_key(&served);
    let original = records(&served.audit_log());
    let flip = |records: &mut Vec<Record>| {
        let at = records
            .iter()
            .position(|r| r.kind == Kind::Decision && r.body["decision"] == "deny")
            .unwrap();
        records[at].body["decision"] = json!("allow");
    };

    // Rewrite a deny to allow, recompute every later hash and the head.
    for (keep, kind) in [(true, "bad_signature"), (false, "nothing_signed")] {
        let (_dir, log) = copy(&served);
        let mut forged = original.clone();
        flip(&mut forged);
        write_records(&log, &rechain(forged, keep));
        assert_eq!(verify(&log, &[]).code, 0, "without the key it passes");
        assert_caught(&log, &key, kind);
    }

    // Delete the tail short of a batch boundary (here the final
    // checkpoint) and write a new head.
    let (_dir, log) = copy(&served);
    write_records(&log, &original[..original.len() - 1]);
    assert_eq!(verify(&log, &[]).code, 0);
    assert_caught(&log, &key, "unsigned_tail");

    // Delete log and head together, or empty them.
    let (dir, log) = copy(&served);
    fs::write(&log, "").unwrap();
    fs::remove_file(head_path(&log)).unwrap();
    assert_eq!(
        verify(&log, &[]).code,
        0,
        "empty, no head: nothing to say without a key"
    );
    assert_caught(&log, &key, "nothing_signed");
    fs::remove_file(&log).unwrap();
    let run = verify(&log, &["--key", key.to_str().unwrap()]);
    assert_ne!(run.code, 0, "{run:?}");
    drop(dir);

    // A forged pending mark: refused as tampered, key or not.
    let (_dir, log) = copy(&served);
    let last = original.last().unwrap();
    let head = json!({
        "committed": {"seq": last.seq, "hash": last.hash},
        "pending": {"seq": last.seq - 1, "hash": last.prev},
    });
    fs::write(head_path(&log), head.to_string()).unwrap();
    let run = verify(&log, &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(run.json()["break"]["kind"], "head_tampered", "{run:?}");
}

#[test]
fn an_exported_checkpoint_catches_a_cut_back_to_an_earlier_batch() {
    let served = signed_session();
    let key = public_key(&served);
    let log = served.audit_log();
    let run = portcullis(&[
        "audit",
        "checkpoint",
        "--export",
        log.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let exported = run.stdout.trim().to_owned();
    let checkpoint: Value = serde_json::from_str(&exported).unwrap();
    assert!(checkpoint["signature"].is_string());
    // The untouched log holds it.
    let run = verify(
        &log,
        &["--key", key.to_str().unwrap(), "--expect", &exported],
    );
    assert_eq!(run.code, 0, "{run:?}");
    // Cut back to an earlier batch boundary (a rollback the key alone
    // cannot see: the log ends on a valid checkpoint).
    let (_dir, copied) = copy(&served);
    let all = records(&copied);
    let earlier = all[..all.len() - 1]
        .iter()
        .rposition(|r| r.kind == Kind::Checkpoint)
        .unwrap();
    write_records(&copied, &all[..=earlier]);
    assert_eq!(
        verify(&copied, &["--key", key.to_str().unwrap()]).code,
        0,
        "a rollback to a signed end passes the key check"
    );
    let run = verify(&copied, &["--expect", &exported]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        run.json()["break"]["kind"],
        "expectation_missing",
        "{run:?}"
    );
    // A forged expectation is refused before reading the log.
    let mut forged: Value = serde_json::from_str(&exported).unwrap();
    forged["seq"] = json!(1);
    let run = verify(
        &log,
        &[
            "--key",
            key.to_str().unwrap(),
            "--expect",
            &forged.to_string(),
        ],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("not signed"), "{run:?}");
}

#[test]
fn a_log_in_the_keys_folder_is_refused() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"));
    let mut args = served.serve_args();
    let at = args.iter().position(|a| a == "--audit").unwrap();
    args[at + 1] = served
        .store
        .parent()
        .unwrap()
        .join("audit.jsonl")
        .display()
        .to_string();
    let output = command
        .args(args)
        .env("PORTCULLIS_TOKEN", &served.token)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("signing key"), "{stderr}");
}

#[test]
fn eight_serve_processes_share_one_log_and_a_ninth_starts() {
    const PROCESSES: u64 = 8;
    const CALLS: u64 = 200;
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let workers: Vec<_> = (0..PROCESSES)
        .map(|_| {
            let mut session = Session::start(&served);
            session.initialize();
            // Pipelined: every call sent, then every answer read.
            for id in 0..CALLS {
                session.send(&call_frame(id, "read_file", json!({"path": "README.md"})));
            }
            session
        })
        .collect();
    for session in workers {
        for _ in 0..CALLS {
            let answer = session.next();
            assert!(answer["result"]["isError"] != true, "{answer}");
        }
        session.finish();
    }
    let key = public_key(&served);
    let run = verify(&served.audit_log(), &["--key", key.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let all = records(&served.audit_log());
    let decisions = all
        .iter()
        .filter(|r| {
            r.kind == Kind::Decision
                && r.body["action"] == "call_tool"
                && r.body["tool"]
                    .as_str()
                    .is_some_and(|t| t.ends_with("read_file"))
        })
        .count() as u64;
    assert_eq!(decisions, PROCESSES * CALLS);
    let sessions: std::collections::BTreeSet<&str> = all
        .iter()
        .filter(|r| r.kind == Kind::System && r.body["event"] == "start")
        .filter_map(|r| r.body["session"].as_str())
        .collect();
    assert_eq!(sessions.len() as u64, PROCESSES);
    // A ninth starts on the shared log.
    let mut ninth = Session::start(&served);
    ninth.initialize();
    ninth.finish();
    assert_eq!(verify(&served.audit_log(), &[]).code, 0);
}

#[test]
fn a_writer_killed_mid_burst_loses_nothing_the_others_need() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut doomed = Session::start(&served);
    doomed.initialize();
    let mut steady = Session::start(&served);
    steady.initialize();
    for id in 0..300 {
        doomed.send(&call_frame(id, "read_file", json!({"path": "README.md"})));
    }
    for id in 0..100 {
        steady.send(&call_frame(id, "read_file", json!({"path": "README.md"})));
    }
    // Some of the doomed writer's batches are on disk; kill it mid-burst.
    for _ in 0..30 {
        doomed.next();
    }
    std::process::Command::new("kill")
        .args(["-9", &doomed.child.id().to_string()])
        .status()
        .unwrap();
    let _ = doomed.child.wait();
    for _ in 0..100 {
        let answer = steady.next();
        assert!(answer["result"]["isError"] != true, "{answer}");
    }
    steady.finish();
    let mut later = Session::start(&served);
    later.initialize();
    later.finish();
    let key = public_key(&served);
    let run = verify(&served.audit_log(), &["--key", key.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
}

/// Makes a file immutable for as long as it lives (`chattr +i`), and
/// mutable again when dropped, however the test ends.
struct Immutable(PathBuf);

impl Immutable {
    fn set(path: &Path) -> Option<Self> {
        let done = std::process::Command::new("chattr")
            .arg("+i")
            .arg(path)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        done.then(|| Self(path.to_owned()))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn the_writer_comes_back_by_itself_when_the_log_is_writable_again() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    fs::write(served.root.path().join("a.txt"), "hello\n").unwrap();
    let mut session = Session::start(&served);
    session.initialize();
    let answer = |session: &mut Session, id: u64| {
        session.send(&call_frame(id, "read_file", json!({"path": "a.txt"})));
        loop {
            let frame = session.next();
            if frame["id"] == id {
                break frame;
            }
        }
    };
    let first = answer(&mut session, 1);
    assert_ne!(first["result"]["isError"], true, "{first}");
    let log = served.audit_log();
    let Some(frozen) = Immutable::set(&log) else {
        eprintln!(
            "SKIPPED: chattr +i is not available here (not root, or the file system has no attributes)"
        );
        session.finish();
        return;
    };
    // The log cannot be written: the call fails closed, and so does the
    // next one.
    for id in [2, 3] {
        let refused = answer(&mut session, id);
        assert_eq!(refused["result"]["isError"], true, "{refused}");
        assert_eq!(
            refused["result"]["structuredContent"]["reason_code"], "audit_unavailable",
            "{refused}"
        );
    }
    drop(frozen);
    // Writable again: the next call is recorded and runs, with no restart.
    let again = answer(&mut session, 4);
    assert_ne!(again["result"]["isError"], true, "{again}");
    assert!(again.to_string().contains("hello"), "{again}");
    session.finish();
    let run = verify(&log, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let kinds: Vec<String> = records(&log)
        .iter()
        .map(|r| {
            serde_json::to_value(r.kind)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let all: Vec<Value> = records(&log)
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    let last = all
        .iter()
        .rev()
        .find(|r| r["kind"] != "checkpoint")
        .unwrap();
    assert_eq!(last["body"]["event"], "shutdown", "{kinds:?}");
    // The first call's outcome, which nobody waited for, was held while
    // the log could not be written: nothing that happened is lost.
    for id in ["1", "4"] {
        assert!(
            all.iter().any(|r| r["kind"] == "outcome"
                && r["body"]["request_id"] == id
                && r["body"]["status"] == "executed"),
            "the outcome of call {id} is missing: {kinds:?}"
        );
    }
}
