//! Setup shared by the benchmarks that spawn the binary: a team's policy
//! tree, a client token in a fresh store, an audit log grown to a given
//! size, `serve` over that tree, and the percentiles the benches report.

use std::path::Path;
use std::time::Duration;

use portcullis::audit::{AuditLog, Kind};
use portcullis::auth::TokenStore;
use serde_json::json;

/// The built-in policies and schema written out under `dir` as a team's
/// tree (`dir/policies`, `dir/schemas`), as `portcullis init` would.
pub fn team_tree(dir: &Path) {
    for file in portcullis::pdp::PolicyBundle::builtin().team_files() {
        let path = dir.join(&file.logical);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, &file.text).unwrap();
    }
}

/// A token for a paired client `bench`, in a new store at `store`.
pub fn bench_token(store: &Path) -> String {
    TokenStore::open_or_new(store)
        .unwrap()
        .create("bench", "paired")
        .unwrap()
        .as_str()
        .to_owned()
}

/// A log at `path` holding `records` filler records.
pub fn grown_log(path: &Path, records: usize) {
    let log = AuditLog::open(path, None).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for chunk in 0..records.div_ceil(1000) {
        let batch = (0..1000.min(records - chunk * 1000))
            .map(|i| {
                (
                    Kind::System,
                    json!({"event": "filler", "n": chunk * 1000 + i}),
                )
            })
            .collect();
        runtime.block_on(log.append_many(batch)).unwrap();
    }
}

/// `serve` over stdio with everything under `base`: the workspace `ws`,
/// the team tree `policies` and `schemas`, the store `tokens.json` and the
/// log `audit/audit.jsonl`.
pub fn serve_command(base: &Path) -> tokio::process::Command {
    tokio::process::Command::from(serve_std_command(base))
}

/// As [`serve_command`], for a process the bench waits on itself.
pub fn serve_std_command(base: &Path) -> std::process::Command {
    serve_with(base, base, &base.join("tokens.json"))
}

/// `serve` as the hook and reload benches lay it out: the store is
/// `state/tokens.json` under `base`, the policy tree at `tree`; the caller
/// adds the transport.
pub fn serve_laid_out(base: &Path, tree: &Path) -> std::process::Command {
    serve_with(base, tree, &base.join("state/tokens.json"))
}

/// `serve` with the workspace `ws` and the log `audit/audit.jsonl` under
/// `base`, the policy tree at `tree` (`policies`, `schemas`) and `store`.
fn serve_with(base: &Path, tree: &Path, store: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_portcullis"));
    command
        .arg("serve")
        .arg("--root")
        .arg(base.join("ws"))
        .arg("--policies")
        .arg(tree.join("policies"))
        .arg("--schema")
        .arg(tree.join("schemas"))
        .arg("--store")
        .arg(store)
        .arg("--audit")
        .arg(base.join("audit/audit.jsonl"));
    command
}

/// p50 and p99 of `samples`.
pub fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    (at(0.50), at(0.99))
}
