//! `decide` for an allow, an ask and a deny, against bare Cedar
//! `Authorizer::is_authorized` on a prebuilt request with the same policy
//! set and entities, in the same run. The allow case should stay within
//! 1.5x of bare Cedar: everything but the per-request context is built once
//! per load.
//!
//! `decide_typed_input`: a call of a downstream tool with a 5-field typed
//! `context.input` and an argument policy, against bare Cedar on the same
//! prebuilt request (issue target: within 1.3x).

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark with a broken setup should stop"
)]

use std::hint::black_box;

use cedar_policy::{Authorizer, Context, EntityUid, Request, RestrictedExpression as R};
use criterion::{Criterion, criterion_group};
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

/// A prebuilt request of `action` on `tool` with the facts of a clean call
/// and `input`, checked against the schema once, outside the timing.
fn bare_request(engine: &Engine, tool: &str, input: R) -> Request {
    let context = Context::from_pairs([
        ("approved".to_owned(), R::new_bool(false)),
        ("approval_channel".to_owned(), R::new_string("none".into())),
        ("transport".to_owned(), R::new_string("stdio".into())),
        ("reads_inside_root".to_owned(), R::new_bool(true)),
        ("writes_inside_root".to_owned(), R::new_bool(true)),
        ("touches_vcs_metadata".to_owned(), R::new_bool(false)),
        ("writes_vcs_metadata".to_owned(), R::new_bool(false)),
        ("path_classes".to_owned(), R::new_set([])),
        ("input".to_owned(), input),
    ])
    .unwrap();
    let uid = |s: &str| s.parse::<EntityUid>().unwrap();
    Request::new(
        uid(r#"Portcullis::Client::"alice""#),
        uid(&format!(r#"Portcullis::Action::"{tool}""#)),
        uid(&format!(r#"Portcullis::Tool::"{tool}""#)),
        context,
        Some(engine.schema()),
    )
    .unwrap()
}

/// Bare Cedar on `request` (which it must allow), then each query through
/// `decide`, in one group.
fn compare(
    c: &mut Criterion,
    group: &str,
    engine: &Engine,
    request: &Request,
    cases: &[(&str, &Query<'_>)],
) {
    let authorizer = Authorizer::new();
    assert_eq!(
        authorizer
            .is_authorized(request, engine.policies(), engine.entities())
            .decision(),
        cedar_policy::Decision::Allow
    );
    let mut group = c.benchmark_group(group);
    group.bench_function("bare_cedar_allow", |b| {
        b.iter(|| {
            authorizer.is_authorized(black_box(request), engine.policies(), engine.entities())
        })
    });
    for (name, query) in cases {
        group.bench_function(*name, |b| b.iter(|| engine.decide(black_box(query))));
    }
    group.finish();
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
    let typed = |tool: &ToolId, facts: &ToolFacts| {
        let arguments = serde_json::json!({"path": "a.txt", "content": "x"});
        let mut facts = facts.clone();
        facts.input = engine.tool_input(tool, &arguments).unwrap().ok();
        facts
    };
    let (read_facts, write_facts, escaping) = (
        typed(&read, &clean),
        typed(&write, &clean),
        typed(&write, &escaping),
    );
    let query =
        |tool, facts| Query::tool("alice", ToolAction::Call, tool, facts, "client_elicitation");
    let allow = query(&read, &read_facts);
    let ask = query(&write, &write_facts);
    let deny = query(&write, &escaping);
    assert_eq!(engine.decide(&allow).outcome, Outcome::Allow);
    assert_eq!(engine.decide(&ask).outcome, Outcome::Ask);
    assert_eq!(engine.decide(&deny).outcome, Outcome::Deny);
    // Asked for every tool of every listing and again before every call:
    // after the first time, the engine's remembered answer.
    let discover = Query::tool(
        "alice",
        ToolAction::Discover,
        &read,
        &clean,
        "client_elicitation",
    );
    assert_eq!(engine.decide(&discover).outcome, Outcome::Allow);

    let path = R::new_record([("path".to_owned(), R::new_string("a.txt".into()))]).unwrap();
    let request = bare_request(&engine, "builtin/read_file", path);
    compare(
        c,
        "decide",
        &engine,
        &request,
        &[
            ("allow", &allow),
            ("ask", &ask),
            ("deny", &deny),
            ("discover_remembered", &discover),
        ],
    );
}

/// A pinned downstream tool with five typed arguments, and a policy on two.
fn typed_engine() -> Engine {
    let mut bundle = PolicyBundle::builtin();
    let file = |logical: &str, text: String| SourceFile {
        logical: logical.into(),
        display: logical.into(),
        text,
    };
    bundle.policies.push(file(
        "policies/20_bench_tickets.cedar",
        r#"
@id("allow.tickets")
@reason("paired clients may file tickets")
permit (
  principal in Portcullis::Tier::"paired",
  action in Portcullis::Action::"use_tool",
  resource in Portcullis::Server::"tickets"
);

@id("args.only_acme_web")
@reason("tickets only in acme/web, and never urgent")
forbid (principal, action == Portcullis::Action::"tickets/create_ticket", resource)
unless { context.input.repo == "acme/web" && context.input.priority != "urgent" };
"#
        .into(),
    ));
    bundle.servers = Some(file(
        "policies/servers.toml",
        "[servers.tickets]\ncommand = \"tickets\"\n[servers.tickets.tools.\"*\"]\neffects = [\"read\"]\nvisible = [\"repo\", \"priority\"]\n".into(),
    ));
    let mut lock = portcullis::servers::ServersLock::new();
    lock.servers.entry("tickets".into()).or_default().insert(
        "create_ticket".into(),
        portcullis::servers::Pin::of(serde_json::json!({
            "name": "create_ticket",
            "inputSchema": {"type": "object", "required": ["repo", "title", "priority"], "properties": {
                "repo": {"type": "string"}, "title": {"type": "string"},
                "priority": {"enum": ["low", "high", "urgent"]},
                "estimate": {"type": "integer"},
                "labels": {"type": "array", "items": {"type": "string"}}}}
        })),
    );
    bundle.servers_lock = Some(file(
        "policies/servers.lock",
        serde_json::to_string(&lock).unwrap(),
    ));
    let clients = [ClientRecord {
        name: "alice".into(),
        tier: "paired".into(),
    }];
    let registry = portcullis::servers::registry_for(&bundle).unwrap();
    Engine::load(&bundle, &registry, &clients).unwrap()
}

fn decide_typed_input(c: &mut Criterion) {
    let engine = typed_engine();
    let tool = ToolId::new("tickets", "create_ticket");
    let arguments = serde_json::json!({"repo": "acme/web", "title": "Fix the login page",
        "priority": "low", "estimate": 3, "labels": ["bug", "web"]});
    let mut facts = ToolFacts::without_paths(Transport::Stdio);
    facts.input = engine.tool_input(&tool, &arguments).unwrap().ok();
    let query = Query::tool(
        "alice",
        ToolAction::Call,
        &tool,
        &facts,
        "client_elicitation",
    );
    assert_eq!(engine.decide(&query).outcome, Outcome::Allow);

    // The arguments policies may see (`visible`); the rest is recorded
    // only as its SHA-256.
    let input = R::new_record([
        ("repo".to_owned(), R::new_string("acme/web".into())),
        ("priority".to_owned(), R::new_string("low".into())),
    ])
    .unwrap();
    let request = bare_request(&engine, "tickets/create_ticket", input);
    compare(
        c,
        "decide_typed_input",
        &engine,
        &request,
        &[("allow", &query)],
    );
}

/// The built-in set with one permit per client, for `clients` clients:
/// what a team that grants tools per client reaches.
fn per_client_engine(clients: usize) -> Engine {
    let mut bundle = PolicyBundle::builtin();
    let mut text = String::new();
    for c in 0..clients {
        text.push_str(&format!(
            "@id(\"allow.c{c}\")\n@reason(\"c{c} may use the built-in tools\")\n\
             permit (principal == Portcullis::Client::\"c{c}\", action in Portcullis::Action::\"use_tool\", \
             resource in Portcullis::Server::\"builtin\");\n"
        ));
    }
    bundle.policies.push(SourceFile {
        logical: "policies/20_per_client.cedar".into(),
        display: "policies/20_per_client.cedar".into(),
        text,
    });
    let records: Vec<ClientRecord> = (0..clients)
        .map(|c| ClientRecord {
            name: format!("c{c}"),
            tier: "paired".into(),
        })
        .collect();
    Engine::load(&bundle, &Registry::builtin().unwrap(), &records).unwrap()
}

/// The client in the middle of `clients`, and the facts of its read of
/// `a.txt`: what the per-client measurements decide.
fn middle_client_read(engine: &Engine, read: &ToolId, clients: usize) -> (String, ToolFacts) {
    let mut facts = ToolFacts::without_paths(Transport::Stdio);
    facts.input = engine
        .tool_input(read, &serde_json::json!({"path": "a.txt"}))
        .unwrap()
        .ok();
    (format!("c{}", clients / 2), facts)
}

/// `decide` of an allowed read with the built-in set plus 1, 1,000 and
/// 10,000 per-client permits, bare Cedar on the whole set beside it.
fn decide_policies(c: &mut Criterion) {
    let read = ToolId::new("builtin", "read_file");
    let mut group = c.benchmark_group("decide_policies");
    for clients in [1usize, 1_000, 10_000] {
        let engine = per_client_engine(clients);
        let policies = engine.policy_count();
        let (client, facts) = middle_client_read(&engine, &read, clients);
        let query = Query::tool(
            &client,
            ToolAction::Call,
            &read,
            &facts,
            "client_elicitation",
        );
        assert_eq!(engine.decide(&query).outcome, Outcome::Allow);
        let path = R::new_record([("path".to_owned(), R::new_string("a.txt".into()))]).unwrap();
        let mut request = bare_request(&engine, "builtin/read_file", path);
        request = Request::new(
            format!(r#"Portcullis::Client::"{client}""#)
                .parse()
                .unwrap(),
            request.action().unwrap().clone(),
            request.resource().unwrap().clone(),
            request.context().unwrap().clone(),
            None,
        )
        .unwrap();
        let authorizer = Authorizer::new();
        group.bench_function(format!("bare_cedar/{policies}"), |b| {
            b.iter(|| {
                authorizer.is_authorized(black_box(&request), engine.policies(), engine.entities())
            })
        });
        group.bench_function(format!("decide/{policies}"), |b| {
            b.iter(|| engine.decide(black_box(&query)))
        });
    }
    group.finish();
}

/// `decide` with and without a shadow set of the same size (every team
/// file shadowed, the allowlist's shadow with one more forbid, on
/// `search`): an allow and an ask the forbid cannot meet (the shadow is
/// only looked up), and a search it can (decided twice). Issue target:
/// within 2x.
fn decide_shadow(c: &mut Criterion) {
    let plain = engine();
    let mut bundle = PolicyBundle::builtin();
    bundle.policies.push(SourceFile {
        logical: "policies/20_bench_allow.cedar".into(),
        display: "policies/20_bench_allow.cedar".into(),
        text: ALLOWLIST.into(),
    });
    bundle.shadow = bundle
        .policies
        .iter()
        .map(|file| {
            let name = file.logical.rsplit('/').next().unwrap();
            let mut text = file.text.clone();
            if name == "20_bench_allow.cedar" {
                text.push_str(
                    "@id(\"shadow.no_search\")\n@reason(\"trying out\")\n\
                     forbid (principal, action, resource == Portcullis::Tool::\"builtin/search\");\n",
                );
            }
            SourceFile {
                logical: format!("policies/shadow/{name}"),
                display: format!("policies/shadow/{name}"),
                text,
            }
        })
        .collect();
    let clients = [ClientRecord {
        name: "alice".into(),
        tier: "paired".into(),
    }];
    let shadowed = Engine::load(&bundle, &Registry::builtin().unwrap(), &clients).unwrap();
    let read = ToolId::new("builtin", "read_file");
    let write = ToolId::new("builtin", "write_file");
    let typed = |engine: &Engine, tool: &ToolId| {
        let mut facts = ToolFacts::without_paths(Transport::Stdio);
        facts.input = engine
            .tool_input(tool, &serde_json::json!({"path": "a.txt", "content": "x"}))
            .unwrap()
            .ok();
        facts
    };
    let search = ToolId::new("builtin", "search");
    let mut group = c.benchmark_group("decide_shadow");
    for (name, engine) in [("enforced_only", &plain), ("with_shadow", &shadowed)] {
        let (read_facts, write_facts) = (typed(engine, &read), typed(engine, &write));
        let allow = Query::tool(
            "alice",
            ToolAction::Call,
            &read,
            &read_facts,
            "client_elicitation",
        );
        let ask = Query::tool(
            "alice",
            ToolAction::Call,
            &write,
            &write_facts,
            "client_elicitation",
        );
        let mut search_facts = ToolFacts::without_paths(Transport::Stdio);
        search_facts.input = engine
            .tool_input(&search, &serde_json::json!({"pattern": "x"}))
            .unwrap()
            .ok();
        // The shadow's forbid is in this request's scope: decided twice.
        let met = Query::tool(
            "alice",
            ToolAction::Call,
            &search,
            &search_facts,
            "client_elicitation",
        );
        assert_eq!(engine.decide(&allow).outcome, Outcome::Allow);
        assert_eq!(engine.decide(&ask).outcome, Outcome::Ask);
        assert_eq!(engine.decide(&met).outcome, Outcome::Allow);
        assert_eq!(engine.decide(&met).shadow.is_some(), name == "with_shadow");
        group.bench_function(format!("shadow_in_scope/{name}"), |b| {
            b.iter(|| engine.decide(black_box(&met)))
        });
        group.bench_function(format!("allow/{name}"), |b| {
            b.iter(|| engine.decide(black_box(&allow)))
        });
        group.bench_function(format!("ask/{name}"), |b| {
            b.iter(|| engine.decide(black_box(&ask)))
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    decide,
    decide_typed_input,
    decide_policies,
    decide_shadow
);

/// Decides `query` `times` times: the one function callgrind counts
/// (`--toggle-collect`), so its instructions divided by `times` are one
/// decision's, whatever the machine's load.
#[inline(never)]
fn counted_decides(engine: &Engine, query: &Query<'_>, times: u32) {
    for _ in 0..times {
        black_box(engine.decide(black_box(query)));
    }
}

/// With `PORTCULLIS_BENCH_COUNT=CLIENTS` (1, 1000 or 10000), no timing:
/// 1,000 decisions of the `decide_policies` query for that set, to be
/// counted under `valgrind --tool=callgrind --collect-atstart=no
/// --toggle-collect='*counted_decides*'`.
fn count(clients: usize) {
    let engine = per_client_engine(clients);
    let read = ToolId::new("builtin", "read_file");
    let (client, facts) = middle_client_read(&engine, &read, clients);
    let query = Query::tool(
        &client,
        ToolAction::Call,
        &read,
        &facts,
        "client_elicitation",
    );
    assert_eq!(engine.decide(&query).outcome, Outcome::Allow);
    counted_decides(&engine, &query, 1_000);
    println!("{} policies: 1000 decisions counted", engine.policy_count());
}

fn main() {
    if let Some(clients) = std::env::var("PORTCULLIS_BENCH_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        count(clients);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
