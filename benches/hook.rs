//! What a harness pays for one `portcullis hook claude-code`: a fresh
//! process per event, from spawn to its answer on stdout and its exit, as
//! Claude Code runs a command hook. An allowed `Read` (path facts) and an
//! allowed `Bash` (the command gate), each recorded durably in an audit log
//! that already holds 20,000 records (the hook checks the log's end, not
//! all of it), with the built-in policies and with a team folder of the
//! built-in set and 1,000 more policies. Each set is proven and validated
//! once before measuring, as the first hook or `serve` of a set does. In
//! the same run, the floor under any hook: the same binary started to print
//! its version, which loads no policy and writes no record.
//!
//! The same team folder again with a `serve --hook-socket` beside the
//! hooks, holding the set loaded: each hook asks it over the socket, and it
//! decides and records.
//!
//! p50 and p99 over 60 events of each kind, taking turns, then criterion's
//! figures for the built-in set.

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark with a broken setup should stop"
)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

#[expect(dead_code, reason = "shared setup: this bench runs hooks, not serve")]
mod support;
use serde_json::json;

const LOG_RECORDS: usize = 20_000;
const TEAM_POLICIES: usize = 1_000;
const EVENTS: usize = 60;

struct Setup {
    _dir: tempfile::TempDir,
    base: PathBuf,
    token: String,
}

/// A `serve` answering hooks, with its stdin and stdout held open;
/// stopped when dropped.
struct Serving {
    child: std::process::Child,
    _pipes: (
        std::process::ChildStdin,
        std::io::BufReader<std::process::ChildStdout>,
    ),
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `serve` over stdio with the team folder, answering hooks at the
/// socket; ready once it has answered `initialize` (its accept loop runs
/// by then).
fn serve_hooks(setup: &Setup) -> Serving {
    let base = &setup.base;
    let mut child = support::serve_laid_out(base, &base.join("team"))
        .arg("--hook-socket")
        .arg(socket(setup))
        .env("PORTCULLIS_TOKEN", &setup.token)
        .env("PORTCULLIS_LOG", "error")
        .env_remove("PORTCULLIS_POLICIES")
        .env_remove("PORTCULLIS_SCHEMA")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"bench","version":"1"}}}}}}"#
    )
    .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert!(line.contains("\"result\""), "{line}");
    Serving {
        child,
        _pipes: (stdin, stdout),
    }
}

fn socket(setup: &Setup) -> PathBuf {
    setup.base.join("hook.sock")
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_owned();
    fs::create_dir_all(base.join("ws/src")).unwrap();
    fs::write(base.join("ws/src/a.rs"), "fn main() {}\n").unwrap();
    let token = support::bench_token(&base.join("state/tokens.json"));
    support::grown_log(&base.join("audit/audit.jsonl"), LOG_RECORDS);
    // The team's folder: the built-in set and a permit per client of a
    // thousand, none of them the hook's client.
    let team = base.join("team");
    support::team_tree(&team);
    let grants: String = (0..TEAM_POLICIES)
        .map(|i| {
            format!(
                "@id(\"grant.{i}\")\n@reason(\"grant {i}\")\npermit (principal == Portcullis::Client::\"c{i}\", \
                 action in Portcullis::Action::\"use_tool\", resource == Portcullis::Tool::\"builtin/read_file\");\n"
            )
        })
        .collect();
    fs::write(team.join("policies/30_grants.cedar"), grants).unwrap();
    Setup {
        _dir: dir,
        base,
        token,
    }
}

/// Which policies a hook decides with, and where.
#[derive(Clone, Copy)]
enum Set {
    BuiltIn,
    Team,
    /// The team folder, decided by the `serve` beside the hook.
    Served,
}

fn hook(setup: &Setup, set: Set, event: &[u8]) -> Duration {
    hook_command(setup, set, event, false).0
}

/// Runs one hook; how long it took, and what it logged at `info` if
/// `logged`.
fn hook_command(setup: &Setup, set: Set, event: &[u8], logged: bool) -> (Duration, String) {
    let base: &Path = &setup.base;
    let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
    command
        .args(["hook", "claude-code", "--store"])
        .arg(base.join("state/tokens.json"))
        .arg("--audit")
        .arg(base.join("audit/audit.jsonl"))
        .env("PORTCULLIS_TOKEN", &setup.token)
        .env("CLAUDE_PROJECT_DIR", base.join("ws"))
        .env("PORTCULLIS_LOG", if logged { "info" } else { "error" })
        .env_remove("PORTCULLIS_POLICIES")
        .env_remove("PORTCULLIS_SCHEMA")
        .env_remove("PORTCULLIS_HOOK_SOCKET");
    if let Set::Team | Set::Served = set {
        command
            .arg("--policies")
            .arg(base.join("team/policies"))
            .arg("--schema")
            .arg(base.join("team/schemas"));
    }
    if let Set::Served = set {
        command.arg("--socket").arg(socket(setup));
    }
    let start = Instant::now();
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(if logged {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(event).unwrap();
    let output = child.wait_with_output().unwrap();
    let elapsed = start.elapsed();
    assert!(output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("\"allow\""),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    (
        elapsed,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The binary started and stopped with nothing to decide.
fn version() -> Duration {
    let start = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let elapsed = start.elapsed();
    assert!(output.status.success());
    elapsed
}

fn event(setup: &Setup, tool: &str, input: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "session_id": "bench", "cwd": setup.base.join("ws").display().to_string(),
        "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input,
        "tool_use_id": "toolu_bench"
    }))
    .unwrap()
}

fn bench_hook(c: &mut Criterion) {
    let setup = setup();
    let read = event(&setup, "Read", json!({"file_path": "src/a.rs"}));
    let bash = event(&setup, "Bash", json!({"command": "ls -la src | grep a"}));
    // The first run of each set proves it (when cvc5 is on PATH) and keeps
    // the proof.
    hook(&setup, Set::BuiltIn, &read);
    hook(&setup, Set::Team, &read);
    let _serving = serve_hooks(&setup);
    // The first question warms serve's setting for this client and root;
    // the hook must not have decided itself.
    for event in [&read, &bash] {
        let (_, said) = hook_command(&setup, Set::Served, event, true);
        assert!(!said.contains("decides itself"), "{said}");
    }
    let kinds: [(&str, Set, &[u8]); 6] = [
        ("Read, built-in set", Set::BuiltIn, &read),
        ("Bash, built-in set", Set::BuiltIn, &bash),
        ("Read, team folder of 1,000 more policies", Set::Team, &read),
        ("Bash, team folder of 1,000 more policies", Set::Team, &bash),
        ("Read, team folder, asking serve", Set::Served, &read),
        ("Bash, team folder, asking serve", Set::Served, &bash),
    ];
    let mut samples = vec![Vec::with_capacity(EVENTS); kinds.len() + 1];
    for round in 0..EVENTS {
        // Taking turns, the first turn rotating: a drift of the machine
        // lands on every kind alike.
        for turn in 0..kinds.len() {
            let which = (round + turn) % kinds.len();
            let (_, set, event) = kinds[which];
            samples[which].push(hook(&setup, set, event));
        }
        samples[kinds.len()].push(version());
    }
    for ((name, _, _), samples) in kinds.iter().zip(&samples) {
        let (p50, p99) = support::percentiles(samples.clone());
        println!("hook claude-code, {name}: p50 {p50:?}, p99 {p99:?} (the bound: 8 ms at p50)");
    }
    let (p50, p99) = support::percentiles(samples[kinds.len()].clone());
    println!("portcullis --version, the floor of any hook: p50 {p50:?}, p99 {p99:?}");

    let mut group = c.benchmark_group("hook_claude_code");
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("read_allowed", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| hook(&setup, Set::BuiltIn, &read)).sum())
    });
    group.bench_function("bash_allowed", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| hook(&setup, Set::BuiltIn, &bash)).sum())
    });
    group.finish();
}

criterion_group!(benches, bench_hook);
criterion_main!(benches);
