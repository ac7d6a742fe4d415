//! Resident memory of an idle `serve`: the release binary over stdio with
//! the built-in policies (written out as a team's tree with one allowlist
//! permit), after `initialize`, and again after 200 allowed `read_file`
//! calls and two seconds without work. Twice: the first start of the set,
//! which proves it (or checks it structurally without cvc5) and keeps what
//! that freed in the allocator's pages, and a start of a set proven before,
//! as every later start of the same set is. mimalloc returns freed pages to
//! the system a second after the next allocation that finds them, so an
//! idle process keeps what its last work freed. Resident is split into anonymous memory
//! (the heap, stacks) and file-mapped pages (the binary's code and data the
//! process has touched, which the kernel maps 64 KiB around each touch).
//! Plain figures, not timings: no criterion. First, how much of the
//! binary's code the linker laid out as hot (`link/hot-symbols.txt`, see
//! `build.rs`): the functions the list names that the binary has.

#![allow(
    clippy::unwrap_used,
    reason = "a benchmark with a broken setup should stop"
)]

use std::fs;
use std::time::Duration;

#[expect(dead_code, reason = "shared setup: this bench needs no grown log")]
mod support;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::transport::TokioChildProcess;
use serde_json::json;

const ALLOW: &str = r#"
@id("allow.builtin")
@reason("the benchmark client may use the built-in tools")
permit (principal, action in Portcullis::Action::"use_tool", resource in Portcullis::Server::"builtin");
"#;

/// The issue's bound for an idle `serve`, in KiB.
const TARGET_KIB: u64 = 24 * 1024;

/// `VmRSS`, `RssAnon` and `RssFile` of `pid`, in KiB.
fn resident(pid: u32) -> [u64; 3] {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    };
    [field("VmRSS:"), field("RssAnon:"), field("RssFile:")]
}

fn report(start: &str, when: &str, [total, anon, file]: [u64; 3]) {
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "serve over stdio, {start}, {when}: resident {:.1} MiB (anonymous {:.1}, file-mapped {:.1}); the bound {:.0} MiB: {}",
        mib(total),
        mib(anon),
        mib(file),
        mib(TARGET_KIB),
        if total <= TARGET_KIB {
            "within"
        } else {
            "OVER"
        }
    );
}

/// How many of the functions `link/hot-symbols.txt` names the binary
/// has, by its symbol table (`nm`): a list older than the code names
/// functions since renamed or gone, and their code is laid out cold.
fn hot_list_coverage() {
    let list = concat!(env!("CARGO_MANIFEST_DIR"), "/link/hot-symbols.txt");
    let listed: std::collections::HashSet<String> = fs::read_to_string(list)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let Ok(symbols) = std::process::Command::new("nm")
        .arg(env!("CARGO_BIN_EXE_portcullis"))
        .output()
    else {
        println!("the hot list: nm is not installed, its coverage is not counted");
        return;
    };
    let present = String::from_utf8_lossy(&symbols.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .filter(|name| listed.contains(*name))
        .collect::<std::collections::HashSet<_>>()
        .len();
    println!(
        "the hot list names {} functions; the binary has {present} of them",
        listed.len()
    );
}

fn main() {
    hot_list_coverage();
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    support::team_tree(base);
    fs::write(base.join("policies/20_allowlist.cedar"), ALLOW).unwrap();
    fs::create_dir_all(base.join("ws")).unwrap();
    fs::write(base.join("ws/small.txt"), "a small file\nof two lines\n").unwrap();
    let token = support::bench_token(&base.join("tokens.json"));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for start in ["the set's first start", "a set proven before"] {
        runtime.block_on(measure(base, &token, start));
    }
}

/// Starts `serve`, measures it after `initialize` and idle after 200
/// calls, and stops it.
async fn measure(base: &std::path::Path, token: &str, start: &str) {
    let mut command = support::serve_command(base);
    command
        .env("PORTCULLIS_TOKEN", token)
        .env("PORTCULLIS_LOG", "warn");
    let (transport, _) = TokioChildProcess::builder(command).spawn().unwrap();
    let pid = transport.id().unwrap();
    let client = ().serve(transport).await.unwrap();
    client.list_all_tools().await.unwrap();
    report(start, "after initialize", resident(pid));
    let mut arguments = JsonObject::new();
    arguments.insert("path".into(), json!("small.txt"));
    for _ in 0..200 {
        let result = client
            .call_tool(CallToolRequestParams::new("read_file").with_arguments(arguments.clone()))
            .await
            .unwrap();
        assert_ne!(result.is_error, Some(true), "{result:?}");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    report(start, "idle after 200 calls", resident(pid));
    let _ = client.cancel().await;
}
