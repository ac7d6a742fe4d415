//! How long one `portcullis hook claude-code` takes, from spawn to its
//! answer on stdout, with the built-in policies: a `Read` (path facts) and
//! a `Bash` (the command gate), each recorded durably in an audit log that
//! already holds 20,000 records (the hook checks the log's end, not all of
//! it). The proof of the set is made once, before measuring, as it would
//! be by the first hook or `serve` of a set.

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

#[expect(
    dead_code,
    reason = "shared setup: this bench uses the default policies"
)]
mod support;
use serde_json::json;

const LOG_RECORDS: usize = 20_000;

struct Setup {
    _dir: tempfile::TempDir,
    base: PathBuf,
    token: String,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_owned();
    fs::create_dir_all(base.join("ws/src")).unwrap();
    fs::write(base.join("ws/src/a.rs"), "fn main() {}\n").unwrap();
    let token = support::bench_token(&base.join("state/tokens.json"));
    support::grown_log(&base.join("audit/audit.jsonl"), LOG_RECORDS);
    Setup {
        _dir: dir,
        base,
        token,
    }
}

fn hook(setup: &Setup, event: &[u8]) -> Duration {
    let base: &Path = &setup.base;
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["hook", "claude-code", "--store"])
        .arg(base.join("state/tokens.json"))
        .arg("--audit")
        .arg(base.join("audit/audit.jsonl"))
        .env("PORTCULLIS_TOKEN", &setup.token)
        .env("CLAUDE_PROJECT_DIR", base.join("ws"))
        .env("PORTCULLIS_LOG", "error")
        .env_remove("PORTCULLIS_POLICIES")
        .env_remove("PORTCULLIS_SCHEMA")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
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
    // The first run proves the set (when cvc5 is on PATH) and keeps the proof.
    hook(&setup, &read);
    let mut group = c.benchmark_group("hook_claude_code");
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("read_allowed", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| hook(&setup, &read)).sum())
    });
    group.bench_function("bash_allowed", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| hook(&setup, &bash)).sum())
    });
    group.finish();
}

criterion_group!(benches, bench_hook);
criterion_main!(benches);
