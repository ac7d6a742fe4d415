//! The audit log: appends per second with fsync at 1, 8 and 64 concurrent
//! callers (group commit), with signed checkpoints on and off; 8 processes
//! of 8 callers on one log beside one process of 64; and replay throughput
//! against bare Cedar evaluation of the same requests, in the same run.
//!
//! PORTCULLIS_BENCH_REPLAY_RECORDS sets the size of the replayed log
//! (default 50,000); with 1,000,000 it also shows replay's memory stays flat.

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark with a broken setup should stop"
)]

use std::collections::BTreeSet;
use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cedar_policy::{Authorizer, Context, Request, RestrictedExpression as R};
use criterion::{Criterion, criterion_group};
use ed25519_dalek::SigningKey;
use portcullis::audit::{
    AuditLog, ClientRef, DecisionRecord, GENESIS, Head, Kind, Record, RecordedPolicy, Replay,
    Signer, head_path, snapshots_dir, store_snapshot,
};
use portcullis::facts::{ToolFacts, Transport};
use portcullis::pdp::{
    ClientRecord, Engine, PolicyBundle, Query, SourceFile, ToolAction, entity_uid,
};
use portcullis::tools::{Registry, ToolId};
use serde_json::json;

const ALLOW: &str = r#"
@id("allow.builtin")
@reason("the benchmark client may use the built-in tools")
permit (principal, action in Portcullis::Action::"use_tool", resource in Portcullis::Server::"builtin");
"#;

fn bundle() -> PolicyBundle {
    let mut bundle = PolicyBundle::builtin();
    bundle.policies.push(SourceFile {
        logical: "policies/20_bench.cedar".into(),
        display: "policies/20_bench.cedar".into(),
        text: ALLOW.into(),
    });
    bundle
}

/// A decision record body of realistic size (about 1.6 KB).
fn sample_body(engine: &Engine, tool: &ToolId, facts: &ToolFacts, i: u64) -> serde_json::Value {
    let decision = engine.decide(&Query::tool(
        "bench",
        ToolAction::Call,
        tool,
        facts,
        "client_elicitation",
    ));
    let record = DecisionRecord {
        session: "0123456789abcdef".into(),
        request_id: i.to_string(),
        transport: portcullis::facts::Transport::Stdio,
        client: ClientRef {
            name: "bench".into(),
            fingerprint: "0123456789abcdef".into(),
            tier: "paired".into(),
        },
        action: portcullis::audit::RecordedAction::CallTool,
        tool: tool.name().into(),
        resource: Some(tool.to_string()),
        arguments_sha256: Some(format!("{i:064x}")),
        tool_definition: Some(format!("{:064x}", 7)),
        facts: Some(facts.clone()),
        approved: false,
        command: None,
        approval_channel: "client_elicitation".into(),
        entities: engine.entities_for("bench", "paired", tool),
        policy_set: (**engine.identity()).clone(),
        decision: decision.outcome,
        cause: decision.cause,
        policies: decision
            .policies
            .iter()
            .map(|p| RecordedPolicy {
                id: p.id.clone(),
                reason: p.reason.to_string(),
            })
            .collect(),
        errors: decision.errors.clone(),
        message: None,
        shadow: None,
        confined: None,
        approver: None,
        answer: None,
        approvers: None,
    };
    serde_json::to_value(record).unwrap()
}

fn engine() -> Engine {
    let clients = [ClientRecord {
        name: "bench".into(),
        tier: "paired".into(),
    }];
    Engine::load(&bundle(), &Registry::builtin().unwrap(), &clients).unwrap()
}

/// The requests of the generated log: an allowed read, an asked write, a
/// write denied by a hard constraint (one, two and two Cedar passes).
fn requests() -> Vec<(ToolId, ToolFacts)> {
    let clean = ToolFacts::without_paths(Transport::Stdio);
    vec![
        (ToolId::new("builtin", "read_file"), clean.clone()),
        (ToolId::new("builtin", "write_file"), clean.clone()),
        (
            ToolId::new("builtin", "write_file"),
            ToolFacts {
                writes_inside_root: false,
                ..clean
            },
        ),
    ]
}

fn signer() -> Signer {
    Signer::new(SigningKey::from_bytes(&[9; 32]))
}

/// Appends per second with `callers` concurrent callers, each appending
/// until `total` records are written.
fn appends_per_second(callers: usize, total: usize, signed: bool) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let start = Instant::now();
    append_from_one_process(&path, callers, total / callers, signed);
    (total / callers * callers) as f64 / start.elapsed().as_secs_f64()
}

/// What one writer process does: `callers` tasks appending `per_caller`
/// records each to `path`.
fn append_from_one_process(path: &Path, callers: usize, per_caller: usize, signed: bool) {
    let log = Arc::new(AuditLog::open(path, signed.then(signer)).unwrap());
    let engine = engine();
    let (tool, facts) = &requests()[0];
    let body = sample_body(&engine, tool, facts, 1);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let tasks: Vec<_> = (0..callers)
            .map(|_| {
                let log = Arc::clone(&log);
                let body = body.clone();
                tokio::spawn(async move {
                    for _ in 0..per_caller {
                        log.append(Kind::Decision, body.clone()).await.unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
}

/// The environment variable that turns this benchmark binary into one
/// writer process of the multi-process measurement.
const WRITER_ENV: &str = "PORTCULLIS_BENCH_WRITER";

/// Appends per second by `processes` processes of `callers` callers each,
/// all on one log.
fn appends_per_second_from_processes(processes: usize, callers: usize, total: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let per_caller = total / processes / callers;
    let start = Instant::now();
    let children: Vec<_> = (0..processes)
        .map(|_| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .env(
                    WRITER_ENV,
                    format!("{}:{callers}:{per_caller}", path.display()),
                )
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let elapsed = start.elapsed();
    let verified = portcullis::audit::verify(&path).unwrap();
    assert!(verified.is_ok(), "{verified:?}");
    (per_caller * callers * processes) as f64 / elapsed.as_secs_f64()
}

/// Writes a verified log of `count` decision records without fsync (this
/// measures replay, not writing), with its head and policy snapshot.
fn generate_log(path: &Path, count: u64) {
    let engine = engine();
    let bodies: Vec<serde_json::Value> = requests()
        .iter()
        .enumerate()
        .map(|(i, (tool, facts))| sample_body(&engine, tool, facts, i as u64))
        .collect();
    store_snapshot(&snapshots_dir(path), &bundle()).unwrap();
    let mut out = BufWriter::new(fs::File::create(path).unwrap());
    let (mut seq, mut prev) = (0, GENESIS.to_owned());
    for i in 0..count {
        let record = Record::chained(
            seq,
            &prev,
            "2026-12-02T12:00:00.000Z".into(),
            Kind::Decision,
            bodies[(i % 3) as usize].clone(),
        );
        out.write_all(&record.to_line()).unwrap();
        seq = record.seq;
        prev = record.hash;
    }
    out.flush().unwrap();
    let head = Head {
        committed: Some(portcullis::audit::Mark { seq, hash: prev }),
        pending: None,
    };
    fs::write(head_path(path), serde_json::to_string(&head).unwrap()).unwrap();
}

/// The Cedar evaluations the same decisions need (1 pass for an allow, 2
/// otherwise), prebuilt, timed bare.
fn bare_cedar_per_record(engine: &Engine) -> Duration {
    let authorizer = Authorizer::new();
    let uid = |k: &str, id: &str| entity_uid(k, id).unwrap();
    let mut prebuilt = Vec::new();
    for (tool, facts) in requests() {
        let passes = if tool.name() == "read_file" {
            vec![false]
        } else {
            vec![false, true]
        };
        let mut requests = Vec::new();
        for approved in passes {
            let classes: BTreeSet<String> = facts.path_classes.clone();
            let context = Context::from_pairs([
                ("approved".to_owned(), R::new_bool(approved)),
                (
                    "approval_channel".to_owned(),
                    R::new_string(
                        if approved {
                            "client_elicitation"
                        } else {
                            "none"
                        }
                        .into(),
                    ),
                ),
                ("transport".to_owned(), R::new_string("stdio".into())),
                (
                    "reads_inside_root".to_owned(),
                    R::new_bool(facts.reads_inside_root),
                ),
                (
                    "writes_inside_root".to_owned(),
                    R::new_bool(facts.writes_inside_root),
                ),
                (
                    "touches_vcs_metadata".to_owned(),
                    R::new_bool(facts.touches_vcs_metadata),
                ),
                (
                    "writes_vcs_metadata".to_owned(),
                    R::new_bool(facts.writes_vcs_metadata),
                ),
                (
                    "path_classes".to_owned(),
                    R::new_set(classes.into_iter().map(R::new_string)),
                ),
            ])
            .unwrap();
            requests.push(
                Request::new(
                    uid("Portcullis::Client", "bench"),
                    uid("Portcullis::Action", "call_tool"),
                    uid("Portcullis::Tool", &tool.to_string()),
                    context,
                    Some(engine.schema()),
                )
                .unwrap(),
            );
        }
        prebuilt.push(requests);
    }
    let rounds = 20_000u32;
    let start = Instant::now();
    for _ in 0..rounds {
        for requests in &prebuilt {
            for request in requests {
                std::hint::black_box(authorizer.is_authorized(
                    request,
                    engine.policies(),
                    engine.entities(),
                ));
            }
        }
    }
    start.elapsed() / (rounds * prebuilt.len() as u32)
}

fn peak_rss_kib() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_owned)
        })
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

fn audit(c: &mut Criterion) {
    for signed in [false, true] {
        // About a second each: one fsync's time varies a lot on a shared
        // disk, and a short run makes the ratio a coin toss.
        let one = appends_per_second(1, 2_000, signed);
        let eight = appends_per_second(8, 8_000, signed);
        let sixty_four = appends_per_second(64, 40_000, signed);
        println!(
            "audit appends with fsync, checkpoints {}: 1 caller {one:.0}/s, 8 callers {eight:.0}/s, 64 callers {sixty_four:.0}/s ({:.1}x one caller)",
            if signed { "on" } else { "off" },
            sixty_four / one
        );
    }
    let single = appends_per_second(64, 8_000, true);
    let multi = appends_per_second_from_processes(8, 8, 8_000);
    println!(
        "one log, 64 callers, checkpoints on: 1 process {single:.0}/s, 8 processes x 8 callers {multi:.0}/s ({:.2}x)",
        multi / single
    );

    let count: u64 = std::env::var("PORTCULLIS_BENCH_REPLAY_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    generate_log(&log, count);
    let before = peak_rss_kib();
    let start = Instant::now();
    let mut replay = Replay::new(&log, None).unwrap();
    let summary = replay.run(&log, |_| {}).unwrap();
    let replay_time = start.elapsed();
    assert_eq!(summary.redecided, count);
    assert!(summary.changes.is_empty() && summary.reasons_changed.is_empty());
    let replay_rate = count as f64 / replay_time.as_secs_f64();
    let bare = bare_cedar_per_record(&engine());
    let bare_rate = 1.0 / bare.as_secs_f64();
    println!(
        "replay of {count} records (verify + re-decide): {replay_rate:.0} records/s; bare Cedar on the same requests: \
         {bare_rate:.0} records/s; ratio {:.2}; peak RSS {} KiB before, {} KiB after",
        replay_rate / bare_rate,
        before,
        peak_rss_kib()
    );

    let start = Instant::now();
    let parallel = Replay::new(&log, None)
        .unwrap()
        .run_with_jobs(&log, 2, |_| {})
        .unwrap();
    let parallel_time = start.elapsed();
    assert_eq!(parallel.redecided, count);
    // The ceiling on this machine: bare Cedar on two threads at once.
    let shared = engine();
    let two: Vec<Duration> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| bare_cedar_per_record(&shared)))
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let bare_two_rate: f64 = two.iter().map(|d| 1.0 / d.as_secs_f64()).sum();
    println!(
        "replay with --jobs 2: {:.0} records/s, {:.2}x one job; peak RSS {} KiB; bare Cedar on 2 threads at once: {:.2}x one",
        count as f64 / parallel_time.as_secs_f64(),
        replay_time.as_secs_f64() / parallel_time.as_secs_f64(),
        peak_rss_kib(),
        bare_two_rate / bare_rate
    );

    let small = dir.path().join("small.jsonl");
    generate_log(&small, 2_000);
    c.bench_function("audit/replay_2000_records", |b| {
        b.iter(|| {
            Replay::new(&small, None)
                .unwrap()
                .run(&small, |_| {})
                .unwrap()
        })
    });
    let append_dir = tempfile::tempdir().unwrap();
    for (name, signed) in [
        ("audit/append_fsync_one_caller", false),
        ("audit/append_fsync_one_caller_signed", true),
    ] {
        let append_log = AuditLog::open(
            &append_dir.path().join(format!("{signed}.jsonl")),
            signed.then(signer),
        )
        .unwrap();
        c.bench_function(name, |b| {
            b.iter(|| {
                append_log
                    .append_blocking(Kind::System, json!({"event": "bench"}))
                    .unwrap()
            })
        });
    }
}

criterion_group!(benches, audit);

fn main() {
    if let Ok(job) = std::env::var(WRITER_ENV) {
        let mut parts = job.rsplitn(3, ':');
        let per_caller = parts.next().unwrap().parse().unwrap();
        let callers = parts.next().unwrap().parse().unwrap();
        let path = parts.next().unwrap();
        append_from_one_process(Path::new(path), callers, per_caller, true);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
