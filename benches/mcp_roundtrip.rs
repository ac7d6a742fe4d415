//! Round trip of an allowed `read_file` of a small file over stdio and over
//! Streamable HTTP, with the rmcp client against the real binary:
//! criterion's figure for one call, then p50 / p99 over 2000 sequential
//! calls, calls per second with 32 in flight (stdio) and from 64 clients
//! at once, each with its own token (HTTP), and the share of the round trip
//! the decision takes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark with a broken setup should stop"
)]

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
#[expect(dead_code, reason = "shared setup: this bench makes its own tokens")]
mod support;
use portcullis::auth::TokenStore;
use portcullis::facts::{PathClasses, Root, Transport, tool_call_facts};
use portcullis::pdp::{ClientRecord, Engine, PolicyBundle, Query, ToolAction};
use portcullis::tools::Registry;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

const ALLOW: &str = r#"
@id("allow.builtin")
@reason("the benchmark client may use the built-in tools")
permit (principal, action in Portcullis::Action::"use_tool", resource in Portcullis::Server::"builtin");
"#;

/// Clients of the HTTP figure, each with its own token.
const HTTP_CLIENTS: usize = 64;

struct Setup {
    _dir: tempfile::TempDir,
    base: std::path::PathBuf,
    token: String,
    others: Vec<String>,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_owned();
    support::team_tree(&base);
    fs::write(base.join("policies/20_allowlist.cedar"), ALLOW).unwrap();
    fs::create_dir_all(base.join("ws")).unwrap();
    fs::write(base.join("ws/small.txt"), "a small file\nof two lines\n").unwrap();
    let mut store = TokenStore::open_or_new(&base.join("tokens.json")).unwrap();
    let token = store.create("bench", "paired").unwrap().as_str().to_owned();
    let others = (0..HTTP_CLIENTS)
        .map(|i| {
            store
                .create(&format!("bench{i}"), "paired")
                .unwrap()
                .as_str()
                .to_owned()
        })
        .collect();
    Setup {
        _dir: dir,
        base,
        token,
        others,
    }
}

fn serve_command(setup: &Setup) -> tokio::process::Command {
    support::serve_command(&setup.base)
}

/// `serve --http` on a free port; the child and the MCP URL.
async fn serve_http(setup: &Setup) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = serve_command(setup)
        .args(["--http", "127.0.0.1:0"])
        .env("PORTCULLIS_LOG", "warn")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("an address on stderr");
        if let Some(url) = line.strip_prefix("portcullis: serving MCP over HTTP at ") {
            break url.to_owned();
        }
    };
    // Keep draining stderr so the server never blocks on it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

async fn connect_http(url: &str, token: &str) -> RunningService<RoleClient, ()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap()
}

/// p50 and p99 of 2000 sequential calls.
async fn sequential(client: &RunningService<RoleClient, ()>) -> (Duration, Duration) {
    let mut samples = Vec::with_capacity(2000);
    for _ in 0..2000 {
        let start = Instant::now();
        let result = client.call_tool(read_params()).await.unwrap();
        samples.push(start.elapsed());
        assert_ne!(result.is_error, Some(true));
    }
    samples.sort();
    (percentile(&samples, 0.50), percentile(&samples, 0.99))
}

/// Calls per second when every client makes `per_client` calls at once.
async fn concurrent(clients: &[Arc<RunningService<RoleClient, ()>>], per_client: u32) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .iter()
        .map(|client| {
            let client = Arc::clone(client);
            tokio::spawn(async move {
                for _ in 0..per_client {
                    let result = client.call_tool(read_params()).await.unwrap();
                    assert_ne!(result.is_error, Some(true));
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let calls = f64::from(per_client) * clients.len() as f64;
    calls / start.elapsed().as_secs_f64()
}

async fn connect(setup: &Setup) -> RunningService<RoleClient, ()> {
    let mut command = serve_command(setup);
    command.env("PORTCULLIS_TOKEN", &setup.token);
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

    let (p50, p99, per_second) = runtime.block_on(async {
        let (p50, p99) = sequential(&client).await;
        let in_flight: Vec<_> = (0..32).map(|_| Arc::clone(&client)).collect();
        (p50, p99, concurrent(&in_flight, 200).await)
    });
    let decide = decide_cost(&setup.base);
    println!(
        "read_file round trip over stdio: p50 {p50:?}, p99 {p99:?}; {per_second:.0} calls/s with 32 in flight; \
         discover + schema check + facts + decide {decide:?} = {:.1}% of the p50",
        100.0 * decide.as_secs_f64() / p50.as_secs_f64()
    );

    let (_server, url) = runtime.block_on(serve_http(&setup));
    let http = Arc::new(runtime.block_on(connect_http(&url, &setup.token)));
    let (http_p50, http_p99, http_per_second) = runtime.block_on(async {
        let (p50, p99) = sequential(&http).await;
        let mut clients = Vec::with_capacity(HTTP_CLIENTS);
        for token in &setup.others {
            clients.push(Arc::new(connect_http(&url, token).await));
        }
        (p50, p99, concurrent(&clients, 100).await)
    });
    println!(
        "read_file round trip over HTTP: p50 {http_p50:?}, p99 {http_p99:?} (stdio in this run: p50 {p50:?}, p99 {p99:?}); \
         {http_per_second:.0} calls/s from {HTTP_CLIENTS} clients at once"
    );

    c.bench_function("mcp/read_file_roundtrip", |b| {
        b.iter(|| runtime.block_on(client.call_tool(read_params())).unwrap())
    });
    c.bench_function("mcp/read_file_roundtrip_http", |b| {
        b.iter(|| runtime.block_on(http.call_tool(read_params())).unwrap())
    });
}

criterion_group!(benches, roundtrip);
criterion_main!(benches);
