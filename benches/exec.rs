//! What `portcullis exec -- true` costs against `bash -c true`, and what
//! the kernel confinement adds over the decision: the same `exec` run
//! confined, and run unconfined (Landlock reported absent, with
//! `--unconfined-ok`), p50 and p99 of each in one run. Each `exec` decides,
//! records the decision and the outcome durably in an audit log.

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark with a broken setup should stop"
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

#[expect(
    dead_code,
    reason = "shared setup: this bench uses the default policies"
)]
mod support;

const SAMPLES: usize = 200;

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
    let status = Command::new("git")
        .args(["init", "-q"])
        .current_dir(base.join("ws"))
        .status()
        .unwrap();
    assert!(status.success());
    let token = support::bench_token(&base.join("state/tokens.json"));
    Setup {
        _dir: dir,
        base,
        token,
    }
}

fn exec(setup: &Setup, confined: bool) -> Duration {
    let base: &Path = &setup.base;
    let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
    command
        .args(["exec", "--root"])
        .arg(base.join("ws"))
        .arg("--store")
        .arg(base.join("state/tokens.json"))
        .arg("--audit")
        .arg(base.join("audit/audit.jsonl"))
        .current_dir(base.join("ws"))
        .env("PORTCULLIS_TOKEN", &setup.token)
        .env("PORTCULLIS_LOG", "error")
        .env_remove("PORTCULLIS_POLICIES")
        .env_remove("PORTCULLIS_SCHEMA")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if confined {
        command.env_remove("PORTCULLIS_LANDLOCK_ABI");
    } else {
        command
            .env("PORTCULLIS_LANDLOCK_ABI", "0")
            .arg("--unconfined-ok");
    }
    command.args(["--", "true"]);
    let start = Instant::now();
    let status = command.status().unwrap();
    let elapsed = start.elapsed();
    assert!(status.success(), "exec -- true failed");
    elapsed
}

fn bash() -> Duration {
    let start = Instant::now();
    let status = Command::new("bash").args(["-c", "true"]).status().unwrap();
    let elapsed = start.elapsed();
    assert!(status.success());
    elapsed
}

fn bench_exec(c: &mut Criterion) {
    let setup = setup();
    // The first run proves the set (when cvc5 is on PATH) and keeps it.
    exec(&setup, true);
    let mut bash_samples = Vec::new();
    let mut unconfined = Vec::new();
    let mut confined = Vec::new();
    for _ in 0..SAMPLES {
        bash_samples.push(bash());
        unconfined.push(exec(&setup, false));
        confined.push(exec(&setup, true));
    }
    let (bash_p50, bash_p99) = support::percentiles(bash_samples);
    let (open_p50, open_p99) = support::percentiles(unconfined);
    let (conf_p50, conf_p99) = support::percentiles(confined);
    println!("bash -c true:                 p50 {bash_p50:?}  p99 {bash_p99:?}");
    println!("exec -- true, unconfined:     p50 {open_p50:?}  p99 {open_p99:?}");
    println!("exec -- true, confined:       p50 {conf_p50:?}  p99 {conf_p99:?}");
    println!(
        "the confinement's own cost:   p50 {:?}",
        conf_p50.saturating_sub(open_p50)
    );
    let mut group = c.benchmark_group("exec");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("bash_true", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| bash()).sum())
    });
    group.bench_function("exec_true_confined", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| exec(&setup, true)).sum())
    });
    group.finish();
}

criterion_group!(benches, bench_exec);
criterion_main!(benches);
