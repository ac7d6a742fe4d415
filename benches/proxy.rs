//! What the proxy adds to a call: the same `tools/call` (an allowed
//! `read_file` of a small file) sent to a downstream MCP server directly,
//! and through portcullis, in one run. The downstream is portcullis itself
//! serving its built-in tools (a real rmcp server, fast enough that the
//! difference is the proxy's). Three clients are connected at once, direct,
//! through a proxy whose audit log is on disk and through one whose log is
//! on a tmpfs path, and their calls take turns, so a drift in the machine
//! (a busier disk, a neighbour's burst) lands on all three alike: p50 and
//! p99 over sequential calls. Each client has a downstream of its own, whose
//! log is on tmpfs when there is one: its fsyncs would add the disk's noise
//! to both sides of the difference. Beside each proxy, the durable write
//! alone: the proxy's own decision record appended to a fresh signed log on
//! the same filesystem, in process, so what the proxy adds beyond the write
//! it must wait for is measured in the same run. Last, the proxy's CPU time
//! per call, its calls back to back and spaced 20 ms apart as an agent
//! spaces them: waking idle threads must not cost more than the work.

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

/// Calls of each back-to-back CPU figure, and of the spaced one with the
/// time between two calls: enough that CPU time, counted in 10 ms ticks,
/// is read to about 2%.
const BACK_TO_BACK_CALLS: u32 = 2000;
const SPACED_CALLS: u32 = 400;
const SPACING: Duration = Duration::from_millis(20);

struct Setup {
    _dir: tempfile::TempDir,
    _tmpfs: Option<tempfile::TempDir>,
    base: PathBuf,
    /// A tmpfs folder, when the machine has one: the downstreams' logs
    /// and the tmpfs proxy's go there.
    tmpfs: Option<PathBuf>,
    token: String,
}

impl Setup {
    /// Where the downstreams log.
    fn downstream_logs(&self) -> &Path {
        self.tmpfs.as_deref().unwrap_or(&self.base)
    }
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

/// The workspace, the token, and the downstream's policy tree (`inner`).
fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_owned();
    fs::create_dir_all(base.join("ws")).unwrap();
    fs::write(base.join("ws/small.txt"), "a small file\nof two lines\n").unwrap();
    fs::create_dir_all(base.join("state")).unwrap();
    let token = support::bench_token(&base.join("state/tokens.json"));
    policies(&base, "inner");
    let shm = Path::new("/dev/shm");
    let tmpfs = shm.is_dir().then(|| tempfile::tempdir_in(shm).unwrap());
    Setup {
        base,
        tmpfs: tmpfs.as_ref().map(|t| t.path().to_owned()),
        _tmpfs: tmpfs,
        _dir: dir,
        token,
    }
}

/// A proxy's policy tree, `name`, whose servers.toml runs a downstream of
/// its own (logging to `downstream_log`), pinned.
fn proxy_tree(setup: &Setup, name: &str, downstream_log: &Path) -> PathBuf {
    let base = &setup.base;
    let outer = policies(base, name);
    let args: Vec<String> = serve_args(base, &base.join("inner"), downstream_log)
        .into_iter()
        .map(|a| format!("{a:?}"))
        .collect();
    // Confined, the downstream writes only beneath its root and the folders
    // named here: its log's and the token store's (its signing key, its
    // proofs).
    let log_folder = downstream_log.parent().unwrap();
    fs::create_dir_all(log_folder).unwrap();
    let servers = format!(
        "[servers.inner]\ncommand = {:?}\nargs = [{}]\nenv_from = {{ PORTCULLIS_TOKEN = \"BENCH_INNER_TOKEN\" }}\n\
         writable = [{:?}, {:?}]\n\
         [servers.inner.tools.read_file]\neffects = [\"read\"]\npaths = {{ path = \"read\" }}\n",
        env!("CARGO_BIN_EXE_portcullis"),
        args.join(", "),
        log_folder.display().to_string(),
        base.join("state").display().to_string(),
    );
    fs::write(outer.join("policies/servers.toml"), servers).unwrap();
    let pinned = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["servers", "pin", "--root"])
        .arg(base.join("ws"))
        .arg("--policies")
        .arg(outer.join("policies"))
        .arg("--schema")
        .arg(outer.join("schemas"))
        .env("BENCH_INNER_TOKEN", &setup.token)
        .output()
        .unwrap();
    assert!(
        pinned.status.success(),
        "{}",
        String::from_utf8_lossy(&pinned.stderr)
    );
    outer
}

async fn connect(setup: &Setup, tree: &Path, audit: &Path) -> RunningService<RoleClient, ()> {
    connect_with_pid(setup, tree, audit).await.0
}

/// A client of a new `serve`, and the process id of that `serve`.
async fn connect_with_pid(
    setup: &Setup,
    tree: &Path,
    audit: &Path,
) -> (RunningService<RoleClient, ()>, u32) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_portcullis"));
    command
        .args(serve_args(&setup.base, tree, audit))
        .env("PORTCULLIS_TOKEN", &setup.token)
        .env("BENCH_INNER_TOKEN", &setup.token);
    let (transport, _) = TokioChildProcess::builder(command).spawn().unwrap();
    let pid = transport.id().unwrap();
    (().serve(transport).await.unwrap(), pid)
}

fn params(name: &str) -> CallToolRequestParams {
    let mut arguments = JsonObject::new();
    arguments.insert("path".into(), json!("small.txt"));
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// One client and the name it calls the tool by.
type Caller<'a> = (&'a RunningService<RoleClient, ()>, &'a str);

/// p50 and p99 of `SAMPLES` sequential calls by each caller, the callers
/// taking turns (and the first turn rotating, so none is always first).
async fn measure(callers: &[Caller<'_>]) -> Vec<(Duration, Duration)> {
    let mut samples = vec![Vec::with_capacity(SAMPLES); callers.len()];
    for round in 0..SAMPLES {
        for turn in 0..callers.len() {
            let which = (round + turn) % callers.len();
            let (client, name) = callers[which];
            let start = Instant::now();
            let result = client.call_tool(params(name)).await.unwrap();
            samples[which].push(start.elapsed());
            assert_ne!(result.is_error, Some(true), "{result:?}");
        }
    }
    samples
        .into_iter()
        .map(|mut s| {
            s.sort();
            (percentile(&s, 0.50), percentile(&s, 0.99))
        })
        .collect()
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

/// The CPU time, user and system, that process `pid` has used so far, in
/// all its threads (those that ended too).
fn cpu_time(pid: u32) -> Duration {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command name, in parentheses and free to hold spaces, the
    // fields from the third on; utime and stime are the 14th and 15th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // Linux reports these in USER_HZ, 100 a second on every architecture it
    // exports them to user space from.
    Duration::from_millis(ticks * 10)
}

/// The proxy's CPU time per call, its calls made back to back and spaced
/// as an agent spaces them (a model's turn between two calls), in one run
/// on one proxy: back to back, spaced, back to back again, and the mean of
/// the two back-to-back figures beside the spaced one.
async fn cpu_per_call(client: &RunningService<RoleClient, ()>, pid: u32) -> (Duration, Duration) {
    async fn per_call(
        client: &RunningService<RoleClient, ()>,
        pid: u32,
        calls: u32,
        gap: Duration,
    ) -> Duration {
        let before = cpu_time(pid);
        for _ in 0..calls {
            let result = client.call_tool(params("inner__read_file")).await.unwrap();
            assert_ne!(result.is_error, Some(true), "{result:?}");
            if !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
        }
        (cpu_time(pid) - before) / calls
    }
    let first = per_call(client, pid, BACK_TO_BACK_CALLS, Duration::ZERO).await;
    let spaced = per_call(client, pid, SPACED_CALLS, SPACING).await;
    let second = per_call(client, pid, BACK_TO_BACK_CALLS, Duration::ZERO).await;
    ((first + second) / 2, spaced)
}

fn proxy(c: &mut Criterion) {
    let setup = setup();
    let logs = setup.downstream_logs().to_owned();
    let disk_tree = proxy_tree(&setup, "outer-disk", &logs.join("inner-disk/audit.jsonl"));
    let tmpfs_tree = setup
        .tmpfs
        .as_ref()
        .map(|_| proxy_tree(&setup, "outer-tmpfs", &logs.join("inner-tmpfs/audit.jsonl")));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let disk_log = setup.base.join("outer-disk-audit/audit.jsonl");
    let (figures, disk_write, tmpfs_write) = runtime.block_on(async {
        let direct = connect(
            &setup,
            &setup.base.join("inner"),
            &logs.join("direct/audit.jsonl"),
        )
        .await;
        let on_disk = connect(&setup, &disk_tree, &disk_log).await;
        let on_tmpfs = match (&tmpfs_tree, &setup.tmpfs) {
            (Some(tree), Some(dir)) => {
                Some(connect(&setup, tree, &dir.join("outer-audit/audit.jsonl")).await)
            }
            _ => None,
        };
        let mut callers = vec![(&direct, "read_file"), (&on_disk, "inner__read_file")];
        if let Some(proxied) = &on_tmpfs {
            callers.push((proxied, "inner__read_file"));
        }
        let figures = measure(&callers).await;
        for client in [Some(direct), Some(on_disk), on_tmpfs]
            .into_iter()
            .flatten()
        {
            let _ = client.cancel().await;
        }
        let body = decision_body(&disk_log);
        let disk_write = durable_write(&setup.base, &body).await;
        let tmpfs_write = match &setup.tmpfs {
            Some(dir) => Some(durable_write(dir, &body).await),
            None => None,
        };
        (figures, disk_write, tmpfs_write)
    });
    let direct = figures[0];
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
        figures[1].0,
        figures[1].1,
        beyond(figures[1].0, disk_write)
    );
    match (figures.get(2), tmpfs_write) {
        (Some((p50, p99)), Some(write)) => println!(
            "through portcullis (audit on tmpfs) p50 {p50:?} p99 {p99:?}, {}",
            beyond(*p50, write)
        ),
        _ => println!("no /dev/shm here: the tmpfs figure was not measured"),
    }

    let (proxied, pid) = runtime.block_on(connect_with_pid(
        &setup,
        &disk_tree,
        &setup.base.join("outer-audit-criterion/audit.jsonl"),
    ));
    let (back_to_back, spaced) = runtime.block_on(cpu_per_call(&proxied, pid));
    println!(
        "the proxy's CPU per call (audit on disk): back to back {back_to_back:?}, spaced {} ms apart {spaced:?} = {:.2}x",
        SPACING.as_millis(),
        spaced.as_secs_f64() / back_to_back.as_secs_f64()
    );
    c.bench_function("proxy/read_file_through_portcullis", |b| {
        b.iter(|| {
            runtime
                .block_on(proxied.call_tool(params("inner__read_file")))
                .unwrap()
        })
    });
    // Ended before the folders go: a proxy still running would find its
    // log gone from under it.
    let _ = runtime.block_on(proxied.cancel());
}

criterion_group!(benches, proxy);
criterion_main!(benches);
