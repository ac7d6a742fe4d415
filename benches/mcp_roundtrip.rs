//! Round trip of an allowed `read_file` of a small file over stdio, with the
//! rmcp client against the real binary: criterion's figure for one call,
//! then p50 / p99 over 2000 sequential calls, calls per second with 32 in
//! flight, and the share of the round trip the decision takes.

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark with a broken setup should stop"
)]

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use portcullis::auth::TokenStore;
use portcullis::facts::{PathClasses, Root, Transport, tool_call_facts};
use portcullis::pdp::{ClientRecord, Engine, PolicyBundle, Query, ToolAction};
use portcullis::tools::Registry;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

const ALLOW: &str = r#"
@id("allow.builtin")
@reason("the benchmark client may use the built-in tools")
permit (principal, action in Portcullis::Action::"use_tool", resource in Portcullis::Server::"builtin");
"#;

struct Setup {
    _dir: tempfile::TempDir,
    base: std::path::PathBuf,
    token: String,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_owned();
    for file in PolicyBundle::builtin().team_files() {
        let path = base.join(&file.logical);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, &file.text).unwrap();
    }
    fs::write(base.join("policies/20_allowlist.cedar"), ALLOW).unwrap();
    fs::create_dir_all(base.join("ws")).unwrap();
    fs::write(base.join("ws/small.txt"), "a small file\nof two lines\n").unwrap();
    let token = TokenStore::open_or_new(&base.join("tokens.json"))
        .unwrap()
        .create("bench", "paired")
        .unwrap()
        .as_str()
        .to_owned();
    Setup {
        _dir: dir,
        base,
        token,
    }
}

async fn connect(setup: &Setup) -> RunningService<RoleClient, ()> {
    let base = &setup.base;
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_portcullis"));
    command
        .arg("serve")
        .arg("--root")
        .arg(base.join("ws"))
        .arg("--policies")
        .arg(base.join("policies"))
        .arg("--schema")
        .arg(base.join("schemas"))
        .arg("--store")
        .arg(base.join("tokens.json"))
        .arg("--audit")
        .arg(base.join("audit/audit.jsonl"))
        .env("PORTCULLIS_TOKEN", &setup.token);
    let (transport, _) = TokioChildProcess::builder(command).spawn().unwrap();
    ().serve(transport).await.unwrap()
}

fn read_params() -> CallToolRequestParams {
    let mut arguments = JsonObject::new();
    arguments.insert("path".into(), json!("small.txt"));
    CallToolRequestParams::new("read_file").with_arguments(arguments)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// The in-process cost of deciding the same call, for the share figure.
fn decide_cost(base: &Path) -> Duration {
    let bundle =
        PolicyBundle::load(Some(&base.join("policies")), Some(&base.join("schemas"))).unwrap();
    let registry = Registry::builtin().unwrap();
    let engine = Engine::load(
        &bundle,
        &registry,
        &[ClientRecord {
            name: "bench".into(),
            tier: "paired".into(),
        }],
    )
    .unwrap();
    let root = Root::new(&base.join("ws")).unwrap();
    let tool = registry.lookup("read_file").unwrap();
    let classes: &PathClasses = engine.path_classes();
    let arguments = json!({"path": "small.txt"});
    let n = 5000u32;
    let start = Instant::now();
    let no_paths = portcullis::facts::ToolFacts::without_paths(Transport::Stdio);
    for _ in 0..n {
        // What the keeper does per call: may the client see it, then may it call it.
        std::hint::black_box(engine.decide(&Query::tool(
            "bench",
            ToolAction::Discover,
            &tool.spec.id,
            &no_paths,
            "client_elicitation",
        )));
        tool.arguments.check(&arguments).unwrap();
        let call = tool_call_facts(
            &tool.spec.path_arguments,
            &arguments,
            &root,
            classes,
            Transport::Stdio,
        )
        .unwrap();
        let decision = engine.decide(&Query::tool(
            "bench",
            ToolAction::Call,
            &tool.spec.id,
            &call.facts,
            "client_elicitation",
        ));
        std::hint::black_box(decision);
    }
    start.elapsed() / n
}

fn roundtrip(c: &mut Criterion) {
    let setup = setup();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = Arc::new(runtime.block_on(connect(&setup)));

    let (sorted, per_second) = runtime.block_on(async {
        let mut samples = Vec::with_capacity(2000);
        for _ in 0..2000 {
            let start = Instant::now();
            let result = client.call_tool(read_params()).await.unwrap();
            samples.push(start.elapsed());
            assert_ne!(result.is_error, Some(true));
        }
        samples.sort();
        let in_flight = 32;
        let per_task = 200;
        let start = Instant::now();
        let tasks: Vec<_> = (0..in_flight)
            .map(|_| {
                let client = Arc::clone(&client);
                tokio::spawn(async move {
                    for _ in 0..per_task {
                        client.call_tool(read_params()).await.unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let per_second = f64::from(in_flight * per_task) / start.elapsed().as_secs_f64();
        (samples, per_second)
    });
    let p50 = percentile(&sorted, 0.50);
    let p99 = percentile(&sorted, 0.99);
    let decide = decide_cost(&setup.base);
    println!(
        "read_file round trip over stdio: p50 {p50:?}, p99 {p99:?}; {per_second:.0} calls/s with 32 in flight; \
         discover + schema check + facts + decide {decide:?} = {:.1}% of the p50",
        100.0 * decide.as_secs_f64() / p50.as_secs_f64()
    );

    c.bench_function("mcp/read_file_roundtrip", |b| {
        b.iter(|| runtime.block_on(client.call_tool(read_params())).unwrap())
    });
}

criterion_group!(benches, roundtrip);
criterion_main!(benches);
