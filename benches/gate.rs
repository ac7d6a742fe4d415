//! Parse + classify + decide for a typical command and for a 20-part
//! pipeline: p50 and p99 over many runs, and criterion's figures.

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark with a broken setup should stop"
)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use portcullis::facts::{Root, Transport};
use portcullis::gate::judge;
use portcullis::pdp::{ClientRecord, Engine, PolicyBundle};
use portcullis::tools::Registry;

const TYPICAL: &str = "git status --short && cargo test --workspace 2>&1 | tail -n 20";

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
    for (name, command) in [("typical", TYPICAL), ("20-part pipeline", long.as_str())] {
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
    c.bench_function("gate/typical", |b| {
        b.iter(|| judge(&engine, "bench", &root, None, TYPICAL, Transport::Cli).unwrap())
    });
    c.bench_function("gate/pipeline_20", |b| {
        b.iter(|| judge(&engine, "bench", &root, None, &long, Transport::Cli).unwrap())
    });
}

criterion_group!(benches, gate);
criterion_main!(benches);
