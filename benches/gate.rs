//! Parse + classify + decide for a typical command and for a 20-part
//! pipeline: p50 and p99 over many runs, and criterion's figures. In the
//! same run, the two parts nothing can take away, the tree-sitter parse
//! alone and the decision alone (on facts made beforehand): their sum is
//! the gate's limit, and the typical command is reported as a ratio of it.

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark with a broken setup should stop"
)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};

#[expect(
    dead_code,
    reason = "shared setup: this bench needs only the percentiles"
)]
mod support;
use portcullis::facts::{Root, Transport, command_facts};
use portcullis::gate::{GATE_APPROVAL_CHANNEL, judge};
use portcullis::pdp::{ClientRecord, Engine, PolicyBundle, Query};
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

/// The p50 of `work` over 5,000 runs.
fn p50_of(mut work: impl FnMut()) -> Duration {
    let samples: Vec<Duration> = (0..5000)
        .map(|_| {
            let start = Instant::now();
            work();
            start.elapsed()
        })
        .collect();
    support::percentiles(samples).0
}

/// The typical command against its limit, in one run: the tree-sitter parse
/// alone, the decision alone on the command's facts, and the whole
/// judgement (parse, classify, facts, decide), taking turns so that a drift
/// of the machine lands on all three alike. Returns the whole's p50.
fn limit_and_ratio(engine: &Engine, root: &Root) -> Duration {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .unwrap();
    let table = engine.command_classes().unwrap();
    let facts = command_facts(TYPICAL, root.path(), root, table).unwrap();
    let query = Query::command("bench", &facts, Transport::Cli, GATE_APPROVAL_CHANNEL);
    let (mut parse, mut decide, mut whole) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        parse.push(p50_of(|| {
            black_box(parser.parse(black_box(TYPICAL), None).unwrap());
        }));
        decide.push(p50_of(|| {
            black_box(engine.decide(black_box(&query)));
        }));
        whole.push(p50_of(|| {
            black_box(judge(engine, "bench", root, None, TYPICAL, Transport::Cli).unwrap());
        }));
    }
    let median = |mut runs: Vec<Duration>| {
        runs.sort();
        runs[runs.len() / 2]
    };
    let (parse, decide, whole) = (median(parse), median(decide), median(whole));
    let limit = parse + decide;
    println!(
        "gate, typical, one run: tree-sitter parse alone p50 {parse:?}, decision alone p50 {decide:?}, \
         limit {limit:?}; the whole judgement p50 {whole:?} = {:.2}x the limit",
        whole.as_secs_f64() / limit.as_secs_f64()
    );
    whole
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
    let typical_p50 = limit_and_ratio(&engine, &root);
    println!("gate, typical (measured again below): p50 {typical_p50:?}");
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
        let (p50, p99) = support::percentiles(samples);
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
    let (p50, p99) = support::percentiles(samples);
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
