//! `decide` for an allow, an ask and a deny, against bare Cedar
//! `Authorizer::is_authorized` on a prebuilt request with the same policy
//! set and entities, in the same run. The allow case should stay within
//! 1.5x of bare Cedar: everything but the per-request context is built once
//! per load.

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark with a broken setup should stop"
)]

use std::hint::black_box;

use cedar_policy::{Authorizer, Context, EntityUid, Request, RestrictedExpression as R};
use criterion::{Criterion, criterion_group, criterion_main};
use portcullis::facts::{ToolFacts, Transport};
use portcullis::pdp::{ClientRecord, Engine, Outcome, PolicyBundle, Query, SourceFile, ToolAction};
use portcullis::tools::{Registry, ToolId};

const ALLOWLIST: &str = r#"
@id("allow.paired.builtin")
@reason("paired clients may use the built-in workspace tools")
permit (
  principal in Portcullis::Tier::"paired",
  action in Portcullis::Action::"use_tool",
  resource in Portcullis::Server::"builtin"
);
"#;

fn engine() -> Engine {
    let mut bundle = PolicyBundle::builtin();
    bundle.policies.push(SourceFile {
        logical: "policies/20_bench_allow.cedar".into(),
        display: "policies/20_bench_allow.cedar".into(),
        text: ALLOWLIST.into(),
    });
    let clients = [ClientRecord {
        name: "alice".into(),
        tier: "paired".into(),
    }];
    Engine::load(&bundle, &Registry::builtin().unwrap(), &clients).unwrap()
}

fn bare_request(engine: &Engine) -> Request {
    let context = Context::from_pairs([
        ("approved".to_owned(), R::new_bool(false)),
        ("approval_channel".to_owned(), R::new_string("none".into())),
        ("transport".to_owned(), R::new_string("stdio".into())),
        ("reads_inside_root".to_owned(), R::new_bool(true)),
        ("writes_inside_root".to_owned(), R::new_bool(true)),
        ("touches_vcs_metadata".to_owned(), R::new_bool(false)),
        ("writes_vcs_metadata".to_owned(), R::new_bool(false)),
        ("path_classes".to_owned(), R::new_set([])),
    ])
    .unwrap();
    let uid = |s: &str| s.parse::<EntityUid>().unwrap();
    Request::new(
        uid(r#"Portcullis::Client::"alice""#),
        uid(r#"Portcullis::Action::"call_tool""#),
        uid(r#"Portcullis::Tool::"builtin/read_file""#),
        context,
        Some(engine.schema()),
    )
    .unwrap()
}

fn decide(c: &mut Criterion) {
    let engine = engine();
    let read = ToolId::new("builtin", "read_file");
    let write = ToolId::new("builtin", "write_file");
    let clean = ToolFacts::without_paths(Transport::Stdio);
    let escaping = ToolFacts {
        writes_inside_root: false,
        ..clean.clone()
    };
    let query =
        |tool, facts| Query::tool("alice", ToolAction::Call, tool, facts, "client_elicitation");
    let allow = query(&read, &clean);
    let ask = query(&write, &clean);
    let deny = query(&write, &escaping);
    assert_eq!(engine.decide(&allow).outcome, Outcome::Allow);
    assert_eq!(engine.decide(&ask).outcome, Outcome::Ask);
    assert_eq!(engine.decide(&deny).outcome, Outcome::Deny);

    let request = bare_request(&engine);
    let authorizer = Authorizer::new();
    assert_eq!(
        authorizer
            .is_authorized(&request, engine.policies(), engine.entities())
            .decision(),
        cedar_policy::Decision::Allow
    );

    let mut group = c.benchmark_group("decide");
    group.bench_function("bare_cedar_allow", |b| {
        b.iter(|| {
            authorizer.is_authorized(black_box(&request), engine.policies(), engine.entities())
        })
    });
    group.bench_function("allow", |b| b.iter(|| engine.decide(black_box(&allow))));
    group.bench_function("ask", |b| b.iter(|| engine.decide(black_box(&ask))));
    group.bench_function("deny", |b| b.iter(|| engine.decide(black_box(&deny))));
    group.finish();
}

criterion_group!(benches, decide);
criterion_main!(benches);
