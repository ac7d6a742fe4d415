//! Parse + classify + decide for a typical command and for a 20-part
//! pipeline: p50 and p99 over many runs, and criterion's figures.

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark with a broken setup should stop"
)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use portcullis::facts::{Root, Transport};
use portcullis::gate::judge;
use portcullis::pdp::{ClientRecord, Engine, PolicyBundle};
use portcullis::tools::Registry;

const TYPICAL: &str = "git status --short && cargo test --workspace 2>&1 | tail -n 20";
const WALK: &str = "grep -rn TODO .";

fn pipeline() -> String {
    let parts = [
        "cat log.txt",
        "grep -v debug",
        "sort",
        "uniq -c",
        "sort -rn",
    ];
    (0..20)
        .map(|i| parts[i % parts.len()])
        .collect::<Vec<_>>()
        .join(" | ")
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    (at(0.50), at(0.99))
}

fn gate(c: &mut Criterion) {
    let clients = [ClientRecord {
        name: "bench".into(),
        tier: "paired".into(),
    }];
    let engine = Engine::load(
        &PolicyBundle::builtin(),
        &Registry::builtin().unwrap(),
        &clients,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path()).unwrap();
    let long = pipeline();
    // A tree of 1,000 files that `grep -r` and `rg` read whole: the gate
    // looks it through for secrets.
    for folder in 0..50 {
        let folder = dir.path().join(format!("mod{folder}"));
        std::fs::create_dir(&folder).unwrap();
        for file in 0..20 {
            std::fs::write(folder.join(format!("f{file}.rs")), "fn f() {}").unwrap();
        }
    }
    for (name, command) in [
        ("typical", TYPICAL),
        ("20-part pipeline", long.as_str()),
        ("grep -r over 1,000 files", WALK),
    ] {
        let samples: Vec<Duration> = (0..5000)
            .map(|_| {
                let start = Instant::now();
                black_box(judge(&engine, "bench", &root, None, command, Transport::Cli).unwrap());
                start.elapsed()
            })
            .collect();
        let (p50, p99) = percentiles(samples);
        println!("gate, {name}: p50 {p50:?}, p99 {p99:?}");
    }
    // A team table that differs from the built-in one: the built-in table
    // judges every program beside it (the floor), so this is the cost of
    // the floor.
    let mut team = PolicyBundle::builtin();
    team.commands
        .text
        .push_str("\n[[program]]\nprogram = \"frob\"\nclass = \"read_only\"\nflags = [\"-q\"]\n");
    let floored = Engine::load(&team, &Registry::builtin().unwrap(), &clients).unwrap();
    let samples: Vec<Duration> = (0..5000)
        .map(|_| {
            let start = Instant::now();
            black_box(judge(&floored, "bench", &root, None, TYPICAL, Transport::Cli).unwrap());
            start.elapsed()
        })
        .collect();
    let (p50, p99) = percentiles(samples);
    println!("gate, typical, a team's table beside the built-in floor: p50 {p50:?}, p99 {p99:?}");
    c.bench_function("gate/typical_team_table", |b| {
        b.iter(|| judge(&floored, "bench", &root, None, TYPICAL, Transport::Cli).unwrap())
    });
    c.bench_function("gate/typical", |b| {
        b.iter(|| judge(&engine, "bench", &root, None, TYPICAL, Transport::Cli).unwrap())
    });
    c.bench_function("gate/pipeline_20", |b| {
        b.iter(|| judge(&engine, "bench", &root, None, &long, Transport::Cli).unwrap())
    });
    c.bench_function("gate/walk_1000", |b| {
        b.iter(|| judge(&engine, "bench", &root, None, WALK, Transport::Cli).unwrap())
    });
}

/// The judgements counted under callgrind (kept out of line so that
/// callgrind can find it by name).
#[inline(never)]
fn counted_judges(engine: &Engine, root: &Root, command: &str, times: u32) {
    for _ in 0..times {
        black_box(
            judge(
                engine,
                "bench",
                root,
                None,
                black_box(command),
                Transport::Cli,
            )
            .unwrap(),
        );
    }
}

/// With `PORTCULLIS_BENCH_COUNT=N`, no timing: N judgements of the typical
/// command, to be counted under `valgrind --tool=callgrind
/// --collect-atstart=no --toggle-collect='*counted_judges*'` (instruction
/// counts do not vary with the load of a shared machine).
fn count(times: u32) {
    let engine = Engine::load(
        &PolicyBundle::builtin(),
        &Registry::builtin().unwrap(),
        &[ClientRecord {
            name: "bench".into(),
            tier: "paired".into(),
        }],
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path()).unwrap();
    // Once outside the count: the parser and the compiled patterns are made
    // on first use.
    judge(&engine, "bench", &root, None, TYPICAL, Transport::Cli).unwrap();
    counted_judges(&engine, &root, TYPICAL, times);
    println!("{times} judgements of the typical command counted");
}

criterion_group!(benches, gate);

fn main() {
    if let Some(times) = std::env::var("PORTCULLIS_BENCH_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        count(times);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
