//! How long `policy diff` takes to prove the default set against itself
//! and against a set with one more permit (every action, both passes, one
//! cvc5 query each; the widening adds its counterexample queries), in
//! process, without the binary's start-up. Needs cvc5 on PATH (`PATH=
//! $(.ci/install-cvc5):$PATH`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark with a broken setup should stop"
)]

use criterion::{Criterion, criterion_group, criterion_main};
use portcullis::pdp::{Engine, PolicyBundle, SourceFile, diff};
use portcullis::tools::Registry;

fn engine(extra: Option<&str>) -> Engine {
    let mut bundle = PolicyBundle::builtin();
    if let Some(text) = extra {
        bundle.policies.push(SourceFile {
            logical: "policies/90_extra.cedar".into(),
            display: "90_extra.cedar".into(),
            text: text.into(),
        });
    }
    Engine::load(&bundle, &Registry::builtin().unwrap(), &[]).unwrap()
}

fn policy_diff(c: &mut Criterion) {
    let old = engine(None);
    let wider = engine(Some(
        "@id(\"allow.read\")\n@reason(\"reading\")\npermit (principal, action in Portcullis::Action::\"use_tool\", resource == Portcullis::Tool::\"builtin/read_file\");\n",
    ));
    let mut group = c.benchmark_group("policy_diff");
    group.sample_size(10);
    group.bench_function("default_vs_itself", |b| {
        b.iter(|| assert!(!diff(&old, &old).unwrap().wider()))
    });
    group.bench_function("default_vs_one_more_permit", |b| {
        b.iter(|| assert!(diff(&old, &wider).unwrap().wider()))
    });
    group.finish();
}

criterion_group!(benches, policy_diff);
criterion_main!(benches);
