//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! the 0.1.x line and the 0.2.0 alpha that scores 2026-07-28) against
//! `serve --http`. Every scenario must pass except those in the committed
//! baselines (`tests/conformance/*.yml`), each a fixture portcullis does not
//! have; the suite itself fails the run on a scenario that newly fails or
//! newly passes. The suite needs Node 22, installed from npm beside it; its
//! client sends no token, so a proxy adds the bearer header and changes
//! nothing else (Host and Origin reach portcullis as the suite sent them).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::http::HttpServer;
use crate::util::{ALLOW_BUILTIN, Served, have, npm_install};

fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

/// Node 22 and both suites, installed once into the target folder.
fn installed() -> PathBuf {
    npm_install(&source().join("package.json"), "conformance")
}

struct Proxy(Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The bearer proxy in front of `server`; its port.
fn proxy(node: &Path, server: &HttpServer, token: &str) -> (Proxy, u16) {
    let mut child = Command::new(node)
        .arg(source().join("bearer-proxy.mjs"))
        .args([&server.base, token])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("listening ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the proxy did not start: {line:?}"));
    (Proxy(child), port)
}

fn run_suite(dir: &Path, package: &str, url: &str, baseline: &str, extra: &[&str]) {
    let node = dir.join("node_modules/.bin/node");
    let results = tempfile::tempdir().unwrap();
    let output = Command::new(&node)
        .arg(dir.join(format!("node_modules/{package}/dist/index.js")))
        .args(["server", "--url", url, "--suite", "all"])
        .args(extra)
        .arg("--expected-failures")
        .arg(source().join(baseline))
        .arg("-o")
        .arg(results.path())
        .current_dir(dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{package}: scenarios outside the baseline failed, or baseline entries now pass:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("all failures are expected"),
        "{package}:\n{stdout}"
    );
}

#[test]
fn the_conformance_suites_pass_but_for_their_fixture_scenarios() {
    if !have("node") || !have("npm") {
        eprintln!("SKIPPED: node and npm are needed for the MCP conformance suite");
        return;
    }
    for (baseline, must_pass) in [
        (
            "baseline-0.1.yml",
            &[
                "dns-rebinding-protection",
                "server-initialize",
                "tools-list",
            ][..],
        ),
        (
            "baseline-2026-07-28.yml",
            &[
                "http-header-validation",
                "dns-rebinding-protection",
                "sep-2164-resource-not-found",
            ][..],
        ),
    ] {
        let text = std::fs::read_to_string(source().join(baseline)).unwrap();
        for scenario in must_pass {
            assert!(
                !text.contains(&format!("- {scenario}")),
                "{scenario} must pass, not be excused in {baseline}"
            );
        }
    }
    let dir = installed();
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let server = HttpServer::start(&served, &[]);
    let (_proxy, port) = proxy(&dir.join("node_modules/.bin/node"), &server, &served.token);
    // The suite connects to localhost, as a local client does.
    let url = format!("http://localhost:{port}/mcp");
    run_suite(&dir, "conformance-stable", &url, "baseline-0.1.yml", &[]);
    run_suite(
        &dir,
        "conformance-next",
        &url,
        "baseline-2026-07-28.yml",
        &["--spec-version", "2026-07-28"],
    );
    tasks_checks(&dir, &url);
    server.stop();
}

/// The tasks extension's scenarios are run one by one (they are not in
/// `--suite all`). Each needs fixture tools (`greet`, `slow_compute`, ...)
/// for most of its checks; the checks that need none must pass: the
/// extension is advertised, and the task methods are refused to a client
/// that did not declare it.
fn tasks_checks(dir: &Path, url: &str) {
    let node = dir.join("node_modules/.bin/node");
    let results = tempfile::tempdir().unwrap();
    let output = Command::new(&node)
        .arg(dir.join("node_modules/conformance-next/dist/index.js"))
        .args([
            "server",
            "--url",
            url,
            "--scenario",
            "tasks-capability-negotiation",
        ])
        .args(["--spec-version", "2026-07-28", "--force", "-o"])
        .arg(results.path())
        .current_dir(dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut checks = Vec::new();
    for entry in walk(results.path()) {
        if entry.file_name().is_some_and(|n| n == "checks.json") {
            let text = std::fs::read_to_string(&entry).unwrap();
            let parsed: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
            checks.extend(parsed);
        }
    }
    for id in [
        "tasks-extension-advertised",
        "sep-2663-tasks-methods-non-declaring",
    ] {
        let check = checks
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no check {id}: {stdout}"));
        assert_eq!(check["status"], "SUCCESS", "{id}: {check}");
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}
