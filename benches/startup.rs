//! How long `serve` takes from spawn to answering `initialize`: with the
//! built-in policies, with a team folder, and with a team folder and an
//! audit log of 20,000 records, each with and without cvc5 on PATH (with
//! it, every load proves the hard constraints, unless the proof of that
//! very set is already known).

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark with a broken setup should stop"
)]

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

#[expect(
    dead_code,
    reason = "shared setup: this bench starts serve its own ways"
)]
mod support;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
/// Records in the grown log.
const LOG_RECORDS: usize = 20_000;

struct Setup {
    _dir: tempfile::TempDir,
    base: PathBuf,
    token: String,
    /// A folder holding nothing: PATH without cvc5.
    empty: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_owned();
    support::team_tree(&base);
    fs::create_dir_all(base.join("ws")).unwrap();
    fs::create_dir_all(base.join("empty")).unwrap();
    let token = support::bench_token(&base.join("state/tokens.json"));
    support::grown_log(&base.join("grown/audit.jsonl"), LOG_RECORDS);
    Setup {
        _dir: dir,
        empty: base.join("empty"),
        base,
        token,
    }
}

/// Spawns `serve`, sends `initialize`, and times the answer.
fn ready(setup: &Setup, team: bool, log: &Path, path: &str) -> Duration {
    let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
    command
        .arg("serve")
        .arg("--root")
        .arg(setup.base.join("ws"))
        .arg("--store")
        .arg(setup.base.join("state/tokens.json"))
        .arg("--audit")
        .arg(log)
        .env("PORTCULLIS_TOKEN", &setup.token)
        .env("PATH", path)
        .env_remove("CVC5")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if team {
        command
            .arg("--policies")
            .arg(setup.base.join("policies"))
            .arg("--schema")
            .arg(setup.base.join("schemas"));
    }
    let start = Instant::now();
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{INITIALIZE}").unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let elapsed = start.elapsed();
    assert!(line.contains("\"serverInfo\""), "{line}");
    drop(stdin);
    child.wait().unwrap();
    elapsed
}

fn startup(c: &mut Criterion) {
    let setup = setup();
    let with_cvc5 = std::env::var("PATH").unwrap_or_default();
    let without_cvc5 = setup.empty.display().to_string();
    let fresh = |name: &str| setup.base.join(name).join("audit.jsonl");
    let grown = setup.base.join("grown/audit.jsonl");
    let cases: [(&str, bool, PathBuf); 3] = [
        ("builtin", false, fresh("builtin")),
        ("team", true, fresh("team")),
        ("team+20k-record log", true, grown),
    ];
    let mut group = c.benchmark_group("serve/ready");
    group.sample_size(20);
    for (name, team, log) in &cases {
        for (solver, path) in [("no cvc5", &without_cvc5), ("cvc5", &with_cvc5)] {
            let mut samples: Vec<Duration> =
                (0..20).map(|_| ready(&setup, *team, log, path)).collect();
            samples.sort();
            println!(
                "serve ready, {name}, {solver}: p50 {:?}, min {:?}",
                samples[samples.len() / 2],
                samples[0]
            );
            // The time to the answer only: the process's exit (which waits
            // for the log check and the shutdown record) is not counted.
            group.bench_function(format!("{name}/{solver}"), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| ready(&setup, *team, log, path)).sum())
            });
        }
    }
    group.finish();
}

criterion_group!(benches, startup);
criterion_main!(benches);
