//! What the proxy adds to a call: the same `tools/call` (an allowed
//! `read_file` of a small file) sent to a downstream MCP server directly,
//! and through portcullis, in one run. The downstream is portcullis itself
//! serving its built-in tools (a real rmcp server, fast enough that the
//! difference is the proxy's): p50 and p99 over sequential calls, with the
//! proxy's audit log on disk and on a tmpfs path. Beside each, the durable
//! write alone: the proxy's own decision record appended to a fresh signed
//! log on the same filesystem, in process, so what the proxy adds beyond
//! the write it must wait for is measured in the same run.

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark with a broken setup should stop"
)]

#[expect(dead_code, reason = "shared setup: this bench needs only the token")]
mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use ed25519_dalek::SigningKey;
use portcullis::audit::{AuditLog, Kind, Signer};
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

const ALLOW: &str = r#"
@id("allow.all_servers")
@reason("the benchmark client may use every tool")
permit (principal, action in Portcullis::Action::"use_tool", resource);
"#;

const SAMPLES: usize = 2000;

struct Setup {
    _dir: tempfile::TempDir,
    base: PathBuf,
    token: String,
}

fn policies(base: &Path, name: &str) -> PathBuf {
    let dir = base.join(name);
    support::team_tree(&dir);
    fs::write(dir.join("policies/20_allowlist.cedar"), ALLOW).unwrap();
    dir
}

fn serve_args(base: &Path, policies: &Path, audit: &Path) -> Vec<String> {
    [
        "serve".as_ref(),
        "--root".as_ref(),
        base.join("ws").as_os_str(),
        "--policies".as_ref(),
        policies.join("policies").as_os_str(),
        "--schema".as_ref(),
        policies.join("schemas").as_os_str(),
        "--store".as_ref(),
        base.join("state/tokens.json").as_os_str(),
        "--audit".as_ref(),
        audit.as_os_str(),
    ]
    .iter()
    .map(|a| a.to_string_lossy().into_owned())
    .collect()
}

/// The downstream's tree (`inner`), and the proxy's (`outer`) whose
/// servers.toml runs the downstream, pinned.
fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_owned();
    fs::create_dir_all(base.join("ws")).unwrap();
    fs::write(base.join("ws/small.txt"), "a small file\nof two lines\n").unwrap();
    fs::create_dir_all(base.join("state")).unwrap();
    let token = support::bench_token(&base.join("state/tokens.json"));
    let inner = policies(&base, "inner");
    let outer = policies(&base, "outer");
    let args: Vec<String> = serve_args(&base, &inner, &base.join("inner-audit/audit.jsonl"))
        .into_iter()
        .map(|a| format!("{a:?}"))
        .collect();
    let servers = format!(
        "[servers.inner]\ncommand = {:?}\nargs = [{}]\nenv_from = {{ PORTCULLIS_TOKEN = \"BENCH_INNER_TOKEN\" }}\n\
         [servers.inner.tools.read_file]\neffects = [\"read\"]\npaths = {{ path = \"read\" }}\n",
        env!("CARGO_BIN_EXE_portcullis"),
        args.join(", ")
    );
    fs::write(outer.join("policies/servers.toml"), servers).unwrap();
    let pinned = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["servers", "pin", "--root"])
        .arg(base.join("ws"))
        .arg("--policies")
        .arg(outer.join("policies"))
        .arg("--schema")
        .arg(outer.join("schemas"))
        .env("BENCH_INNER_TOKEN", &token)
        .output()
        .unwrap();
    assert!(
        pinned.status.success(),
        "{}",
        String::from_utf8_lossy(&pinned.stderr)
    );
    Setup {
        _dir: dir,
        base,
        token,
    }
}

async fn connect(setup: &Setup, tree: &str, audit: &Path) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_portcullis"));
    command
        .args(serve_args(&setup.base, &setup.base.join(tree), audit))
        .env("PORTCULLIS_TOKEN", &setup.token)
        .env("BENCH_INNER_TOKEN", &setup.token);
    let (transport, _) = TokioChildProcess::builder(command).spawn().unwrap();
    ().serve(transport).await.unwrap()
}

fn params(name: &str) -> CallToolRequestParams {
    let mut arguments = JsonObject::new();
    arguments.insert("path".into(), json!("small.txt"));
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// p50 and p99 of `SAMPLES` sequential calls.
async fn measure(client: &RunningService<RoleClient, ()>, name: &str) -> (Duration, Duration) {
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let start = Instant::now();
        let result = client.call_tool(params(name)).await.unwrap();
        samples.push(start.elapsed());
        assert_ne!(result.is_error, Some(true), "{result:?}");
    }
    samples.sort();
    (percentile(&samples, 0.50), percentile(&samples, 0.99))
}

/// The body of the last decision record in `log`: what the proxy wrote
/// for one of the calls just measured.
fn decision_body(log: &Path) -> Value {
    fs::read_to_string(log)
        .unwrap()
        .lines()
        .rev()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|record| record["kind"] == "decision")
        .map(|mut record| record["body"].take())
        .unwrap()
}

/// p50 of `SAMPLES` durable appends of `body`, one at a time as one
/// sequential caller makes them, to a new signed log in `dir`.
async fn durable_write(dir: &Path, body: &Value) -> Duration {
    let log = tokio::task::block_in_place(|| {
        AuditLog::open(
            &dir.join("alone/audit.jsonl"),
            Some(Signer::new(SigningKey::from_bytes(&[7; 32]))),
        )
    })
    .unwrap();
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let start = Instant::now();
        log.append(Kind::Decision, body.clone()).await.unwrap();
        samples.push(start.elapsed());
    }
    samples.sort();
    percentile(&samples, 0.50)
}

fn proxy(c: &mut Criterion) {
    let setup = setup();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let shm = Path::new("/dev/shm");
    let tmpfs = shm.is_dir().then(|| tempfile::tempdir_in(shm).unwrap());
    let (direct, (on_disk, disk_write), on_tmpfs) = runtime.block_on(async {
        let direct_client = connect(
            &setup,
            "inner",
            &setup.base.join("direct-audit/audit.jsonl"),
        )
        .await;
        let direct = measure(&direct_client, "read_file").await;
        let _ = direct_client.cancel().await;
        let outer_log = setup.base.join("outer-audit/audit.jsonl");
        let proxied = connect(&setup, "outer", &outer_log).await;
        let on_disk = measure(&proxied, "inner__read_file").await;
        let _ = proxied.cancel().await;
        let body = decision_body(&outer_log);
        let on_disk = (on_disk, durable_write(&setup.base, &body).await);
        let on_tmpfs = match &tmpfs {
            Some(dir) => {
                let proxied = connect(&setup, "outer", &dir.path().join("audit/audit.jsonl")).await;
                let figures = measure(&proxied, "inner__read_file").await;
                let _ = proxied.cancel().await;
                Some((figures, durable_write(dir.path(), &body).await))
            }
            None => None,
        };
        (direct, on_disk, on_tmpfs)
    });
    let beyond = |p50: Duration, write: Duration| {
        let adds = p50.saturating_sub(direct.0);
        format!(
            "adds {adds:?} at p50; the durable write alone {write:?}, so {:?} beyond it",
            adds.saturating_sub(write)
        )
    };
    println!(
        "read_file to a downstream: direct p50 {:?} p99 {:?}; through portcullis (audit on disk) p50 {:?} p99 {:?}, {}",
        direct.0,
        direct.1,
        on_disk.0,
        on_disk.1,
        beyond(on_disk.0, disk_write)
    );
    match on_tmpfs {
        Some(((p50, p99), write)) => println!(
            "through portcullis (audit on tmpfs) p50 {p50:?} p99 {p99:?}, {}",
            beyond(p50, write)
        ),
        None => println!("no /dev/shm here: the tmpfs figure was not measured"),
    }

    let proxied = runtime.block_on(connect(
        &setup,
        "outer",
        &setup.base.join("outer-audit-criterion/audit.jsonl"),
    ));
    c.bench_function("proxy/read_file_through_portcullis", |b| {
        b.iter(|| {
            runtime
                .block_on(proxied.call_tool(params("inner__read_file")))
                .unwrap()
        })
    });
}

/// The allocator the binary uses, for the in-process durable write.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

criterion_group!(benches, proxy);
criterion_main!(benches);
