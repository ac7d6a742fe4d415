//! How long a policy reload takes in a running `serve`, from SIGHUP to its
//! `policy_reload` record (the new set loaded, validated, proven with cvc5
//! when it is on PATH, its snapshot stored, the record durable): with the
//! default set and with 1,000 more policies. Each reload loads a set never
//! seen before, so no proof is remembered. A reload cannot be repeated
//! inside one criterion sample cheaply, so this prints its own figures.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark with a broken setup should stop"
)]

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[expect(dead_code, reason = "shared setup: this bench needs no grown log")]
mod support;

/// Reloads timed per set.
const RELOADS: usize = 10;

struct Served {
    _dir: tempfile::TempDir,
    base: PathBuf,
    child: Child,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn extra_policies(count: usize, generation: usize) -> String {
    (0..count)
        .map(|i| {
            format!(
                "@id(\"grant.{i}\")\n@reason(\"grant {i}, generation {generation}\")\npermit (principal == Portcullis::Client::\"c{i}\", action in Portcullis::Action::\"use_tool\", resource == Portcullis::Tool::\"builtin/read_file\");\n"
            )
        })
        .collect()
}

fn serve(extra: usize) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_owned();
    support::team_tree(&base);
    fs::write(
        base.join("policies/70_grants.cedar"),
        extra_policies(extra, 0),
    )
    .unwrap();
    fs::create_dir_all(base.join("ws")).unwrap();
    support::bench_token(&base.join("state/tokens.json"));
    let mut child = support::serve_laid_out(&base, &base)
        .args(["--http", "127.0.0.1:0", "--reload", "signal"])
        .env("PORTCULLIS_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("serve printed its address").unwrap();
        if line.starts_with("portcullis: serving MCP over HTTP at ") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    Served {
        _dir: dir,
        base,
        child,
    }
}

fn reloads_recorded(log: &Path) -> usize {
    fs::read_to_string(log)
        .unwrap_or_default()
        .matches("\"event\":\"policy_reload\"")
        .count()
}

fn main() {
    // `cargo bench` passes criterion's flags; this bench has none to read.
    for extra in [0, 1000] {
        let served = serve(extra);
        let log = served.base.join("audit/audit.jsonl");
        let mut times = Vec::with_capacity(RELOADS);
        for generation in 1..=RELOADS {
            fs::write(
                served.base.join("policies/70_grants.cedar"),
                extra_policies(extra.max(1), generation),
            )
            .unwrap();
            let start = Instant::now();
            Command::new("kill")
                .args(["-s", "HUP", &served.child.id().to_string()])
                .status()
                .unwrap();
            while reloads_recorded(&log) < generation {
                std::thread::sleep(Duration::from_millis(1));
            }
            times.push(start.elapsed());
        }
        times.sort();
        println!(
            "reload of the default set plus {} policies: median {:?}, min {:?}, max {:?} over {RELOADS}",
            extra.max(1),
            times[RELOADS / 2],
            times[0],
            times[RELOADS - 1]
        );
    }
}
