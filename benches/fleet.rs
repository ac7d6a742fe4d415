//! A fleet's figures, in one run on this machine: audit appends per second
//! from 8 writer processes (8 callers each, timed from when all are open)
//! on one file log, and on PostgreSQL (a chain each), with each append's
//! durable-write latency p50/p99; and tool calls per second from 64 HTTP clients to one replica
//! on files, one on PostgreSQL, and three on PostgreSQL behind HAProxy
//! (round-robin). PostgreSQL is a cluster of the bench's own
//! (`tests/postgres.rs`) that syncs its WAL, with synchronous commit on, as
//! a team's server does. Without PostgreSQL or HAProxy the parts that need them say so.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark with a broken setup should stop"
)]

#[path = "../tests/haproxy.rs"]
mod haproxy;
#[path = "../tests/ports.rs"]
mod ports;
#[path = "../tests/postgres.rs"]
#[expect(
    dead_code,
    reason = "shared with the tests: the bench starts and stops"
)]
mod postgres;
#[expect(
    dead_code,
    reason = "shared setup: this bench needs the tree and the token"
)]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use ed25519_dalek::SigningKey;
use portcullis::audit::{AuditLog, Kind, Signer};
use portcullis::clock::SystemClock;
use portcullis::state::{SharedChain, SharedState, StateUrl};
use serde_json::json;

use postgres::Postgres;
use support::percentiles;

/// The environment variable that makes this binary one writer process:
/// `file:PATH` or `chain:URL:ID`, then `:CALLERS:PER_CALLER:OUT`.
const WRITER_ENV: &str = "PORTCULLIS_BENCH_FLEET_WRITER";

const PROCESSES: usize = 8;
const CALLERS: usize = 8;

fn signer() -> Signer {
    Signer::new(SigningKey::from_bytes(&[7u8; 32]))
}

/// A decision-sized record body (about 2 KiB, as the keeper writes).
fn body() -> serde_json::Value {
    json!({"action": "call_tool", "tool": "read_file", "decision": "allow", "padding": "x".repeat(1800)})
}

/// One writer process: `callers` tasks appending `per_caller` records each
/// to `log`, every append's latency written to `out`, one per line, in µs.
fn write(log: AuditLog, callers: usize, per_caller: usize, out: &Path) {
    let log = Arc::new(log);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let latencies = runtime.block_on(async {
        let tasks: Vec<_> = (0..callers)
            .map(|_| {
                let log = Arc::clone(&log);
                tokio::spawn(async move {
                    let mut took = Vec::with_capacity(per_caller);
                    for _ in 0..per_caller {
                        let start = Instant::now();
                        log.append(Kind::Decision, body()).await.unwrap();
                        took.push(start.elapsed());
                    }
                    took
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        all
    });
    let lines: String = latencies
        .iter()
        .map(|d| format!("{}\n", d.as_micros()))
        .collect();
    std::fs::write(out, lines).unwrap();
}

fn writer_process(job: &str) {
    let mut parts: Vec<&str> = job.rsplitn(4, ':').collect();
    parts.reverse();
    let (target, callers, per_caller, out) = (parts[0], parts[1], parts[2], parts[3]);
    let (callers, per_caller) = (callers.parse().unwrap(), per_caller.parse().unwrap());
    let log = if let Some(path) = target.strip_prefix("file=") {
        AuditLog::open(Path::new(path), Some(signer())).unwrap()
    } else {
        let (url, chain) = target
            .strip_prefix("chain=")
            .unwrap()
            .rsplit_once('#')
            .unwrap();
        let url: StateUrl = url.parse().unwrap();
        let store = SharedChain::new(&url, chain).unwrap();
        let (log, checked) = AuditLog::open_store_in_background(
            Box::new(store),
            Some(signer()),
            Arc::new(SystemClock),
        )
        .unwrap();
        checked.blocking_recv().unwrap().unwrap();
        log
    };
    // Opened (a connection made, a chain checked): say so, and wait for the
    // word to start, so the figure counts appends and not process starts.
    println!("ready");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    write(log, callers, per_caller, Path::new(out));
}

/// Appends per second by 8 processes of 8 callers, each process writing
/// to `target(i)`, and the appends' p50 and p99.
fn appends(target: impl Fn(usize) -> String, total: usize) -> (f64, Duration, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let per_caller = total / PROCESSES / CALLERS;
    let mut children: Vec<Child> = (0..PROCESSES)
        .map(|i| {
            let out = dir.path().join(format!("latencies-{i}"));
            Command::new(std::env::current_exe().unwrap())
                .env(
                    WRITER_ENV,
                    format!("{}:{CALLERS}:{per_caller}:{}", target(i), out.display()),
                )
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in &mut children {
        let mut ready = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready.trim(), "ready");
    }
    let start = Instant::now();
    for child in &mut children {
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    }
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let elapsed = start.elapsed();
    let mut samples = Vec::new();
    for i in 0..PROCESSES {
        let text = std::fs::read_to_string(dir.path().join(format!("latencies-{i}"))).unwrap();
        samples.extend(
            text.lines()
                .map(|l| Duration::from_micros(l.parse().unwrap())),
        );
    }
    let (p50, p99) = percentiles(samples);
    (
        (per_caller * CALLERS * PROCESSES) as f64 / elapsed.as_secs_f64(),
        p50,
        p99,
    )
}

/// A policy tree whose clients may call the built-in tools, a workspace
/// with a small file, and a token in a file store.
struct Setup {
    dir: tempfile::TempDir,
}

const ALLOW: &str = r#"
@id("allow.builtin")
@reason("the bench's clients may use the built-in tools")
permit (principal, action in Portcullis::Action::"use_tool", resource in Portcullis::Server::"builtin");
"#;

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        support::team_tree(dir.path());
        std::fs::write(dir.path().join("policies/20_allowlist.cedar"), ALLOW).unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        std::fs::write(dir.path().join("ws/README.md"), "# bench\n").unwrap();
        let key = dir.path().join("approval.key");
        std::fs::write(&key, [9u8; 64]).unwrap();
        std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        Self { dir }
    }

    /// `serve --http` replica `n`, on `state` when given; its address.
    fn replica(&self, n: usize, state: Option<&str>) -> (Child, String) {
        let base = self.dir.path();
        // The replicas share the file log's folder only for the policy
        // snapshots: with --state, each writes its own chain.
        let mut command = support::serve_std_command(base);
        command
            .args(["--http", "127.0.0.1:0", "--max-concurrent", "64"])
            .env("PORTCULLIS_LOG", "warn")
            .env_remove("PORTCULLIS_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(state) = state {
            command
                .args(["--state", state, "--replica-id", &format!("replica-{n}")])
                .arg("--approval-key")
                .arg(base.join("approval.key"));
        }
        let mut child = command.spawn().unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let address = loop {
            let line = lines.next().expect("serve printed its address").unwrap();
            if let Some(url) = line.strip_prefix("portcullis: serving MCP over HTTP at ") {
                break url.to_owned();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        (child, address)
    }
}

/// Tool calls per second from 64 clients, each sending `per_client`
/// `read_file` calls one after another to `url`.
fn calls_per_second(url: &str, token: &str, per_client: usize) -> f64 {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .build()
            .unwrap();
        let start = Instant::now();
        let tasks: Vec<_> = (0..64)
            .map(|client| {
                let (http, url, token) = (http.clone(), url.to_owned(), token.to_owned());
                tokio::spawn(async move {
                    for call in 0..per_client {
                        let id = client * 100_000 + call;
                        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                            "name": "read_file", "arguments": {"path": "README.md"},
                            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                      "io.modelcontextprotocol/clientCapabilities": {}}}});
                        let answer = http
                            .post(&url)
                            .header("authorization", format!("Bearer {token}"))
                            .header("accept", "application/json, text/event-stream")
                            .header("content-type", "application/json")
                            .header("mcp-protocol-version", "2026-07-28")
                            .header("mcp-method", "tools/call")
                            .header("mcp-name", "read_file")
                            .body(body.to_string())
                            .send()
                            .await
                            .unwrap();
                        assert_eq!(answer.status(), 200);
                        let text = answer.text().await.unwrap();
                        assert!(text.contains("# bench"), "{text}");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        (64 * per_client) as f64 / start.elapsed().as_secs_f64()
    })
}

fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-s", "TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

fn fleet(_c: &mut Criterion) {
    let Some(pg) = Postgres::start_durable_or_skip() else {
        return;
    };
    let url = pg.url();
    // The tables, made once before the writers race to make them.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(SharedState::connect(&url.parse().unwrap()))
        .unwrap();
    let files = tempfile::tempdir().unwrap();
    let file_log = files.path().join("audit.jsonl");
    // Several seconds a phase on PostgreSQL, so one slow flush moves little.
    let total = 65_536;
    let (file_rate, file_p50, file_p99) =
        appends(|_| format!("file={}", file_log.display()), total);
    let (pg_rate, pg_p50, pg_p99) = appends(|i| format!("chain={url}#writer-{i}"), total);
    println!(
        "audit appends, 8 processes x 8 callers, checkpoints on: one file log {file_rate:.0}/s (p50 {file_p50:?}, p99 {file_p99:?}); PostgreSQL, a chain each {pg_rate:.0}/s (p50 {pg_p50:?}, p99 {pg_p99:?}); {:.1}x",
        pg_rate / file_rate
    );

    let setup = Setup::new();
    let token = support::bench_token(&setup.dir.path().join("tokens.json"));
    // Phases of several seconds each: at 60 calls a client (under a second)
    // the ratios moved by 10-15% between runs on this machine.
    let per_client = 400;
    let (one, address) = setup.replica(0, None);
    calls_per_second(&address, &token, 5);
    let on_files = calls_per_second(&address, &token, per_client);
    stop(one);

    // The same client, in the shared state.
    let created = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args([
            "token", "create", "bench", "--tier", "paired", "--state", &url, "--format", "json",
        ])
        .arg("--policies")
        .arg(setup.dir.path().join("policies"))
        .arg("--schema")
        .arg(setup.dir.path().join("schemas"))
        .output()
        .unwrap();
    assert!(created.status.success(), "{created:?}");
    let shared: serde_json::Value = serde_json::from_slice(&created.stdout).unwrap();
    let shared_token = shared["token"].as_str().unwrap().to_owned();
    let (one, address) = setup.replica(1, Some(&url));
    calls_per_second(&address, &shared_token, 5);
    let on_pg = calls_per_second(&address, &shared_token, per_client);
    // The same replica behind the balancer: what the balancer's own work
    // costs on these two cores, apart from the replicas behind it.
    let one_balanced = haproxy::installed().then(|| {
        let balancer = haproxy::Balancer::start(&[address.as_str()]);
        calls_per_second(&balancer.url, &shared_token, 5);
        calls_per_second(&balancer.url, &shared_token, per_client)
    });
    stop(one);

    let three = if haproxy::installed() {
        let replicas: Vec<(Child, String)> = (2..5).map(|n| setup.replica(n, Some(&url))).collect();
        let backends: Vec<&str> = replicas.iter().map(|(_, a)| a.as_str()).collect();
        let balancer = haproxy::Balancer::start(&backends);
        calls_per_second(&balancer.url, &shared_token, 5);
        let rate = calls_per_second(&balancer.url, &shared_token, per_client);
        drop(balancer);
        for (child, _) in replicas {
            stop(child);
        }
        Some(rate)
    } else {
        println!("HAProxy is not installed: three replicas behind a balancer not measured");
        None
    };
    println!(
        "tool calls from 64 HTTP clients: one replica on files {on_files:.0}/s; one on PostgreSQL {on_pg:.0}/s ({:.2}x); the same one behind HAProxy {}; three on PostgreSQL behind HAProxy {}",
        on_pg / on_files,
        one_balanced.map_or_else(
            || "not measured".to_owned(),
            |r| format!("{r:.0}/s ({:.2}x one)", r / on_pg)
        ),
        three.map_or_else(
            || "not measured".to_owned(),
            |r| match one_balanced {
                Some(balanced) => format!(
                    "{r:.0}/s ({:.2}x one, {:.2}x one behind HAProxy)",
                    r / on_pg,
                    r / balanced
                ),
                None => format!("{r:.0}/s ({:.2}x one)", r / on_pg),
            }
        )
    );
}

fn main() {
    if let Ok(job) = std::env::var(WRITER_ENV) {
        writer_process(&job);
        return;
    }
    let mut criterion = Criterion::default().configure_from_args();
    fleet(&mut criterion);
    criterion.final_summary();
}
