//! `serve --metrics`: what a running portcullis counts, read as text and
//! scraped by a real Prometheus (Debian's package), whose HTTP API then
//! answers with the decision counter.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::http::{HttpServer, client, modern};
use crate::util::{ALLOW_BUILTIN, Served, have};

/// `serve --http` with `--metrics 127.0.0.1:0`, and the metrics URL.
fn serve_with_metrics(served: &Served) -> (HttpServer, String) {
    let mut command = served.command();
    command
        .env_remove("PORTCULLIS_TOKEN")
        .args(["--metrics", "127.0.0.1:0"]);
    let server = HttpServer::spawn_reading(command, "portcullis: serving metrics at ");
    let metrics = server.noted.clone().expect("the metrics address");
    (server, metrics)
}

async fn text(http: &reqwest::Client, url: &str) -> (String, String) {
    let response = http.get(url).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let kind = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    (kind, response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_figures_count_decisions_by_outcome_cause_and_known_tool_and_the_audit_writes() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let (server, metrics) = serve_with_metrics(&served);
    let http = client();
    let read = json!({"name": "read_file", "arguments": {"path": "README.md"}});
    for id in 1..=3 {
        let answer = modern(
            &http,
            &server.url(),
            &served.token,
            id,
            "tools/call",
            read.clone(),
        )
        .await;
        assert_eq!(
            answer.response(id)["result"]["isError"],
            false,
            "{}",
            answer.body
        );
    }
    let outside = json!({"name": "read_file", "arguments": {"path": "/etc/passwd"}});
    modern(
        &http,
        &server.url(),
        &served.token,
        4,
        "tools/call",
        outside,
    )
    .await;
    let unknown = json!({"name": "no_such_tool", "arguments": {}});
    modern(
        &http,
        &server.url(),
        &served.token,
        5,
        "tools/call",
        unknown,
    )
    .await;

    let (kind, text) = text(&http, &metrics).await;
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    let calls =
        r#"portcullis_decisions_total{outcome="allow",cause="permitted",tool="builtin/read_file"}"#;
    let line = text
        .lines()
        .find(|l| l.starts_with(calls))
        .unwrap_or_else(|| panic!("{text}"));
    // Each call is two decisions (may it see the tool, may it call it) and
    // the fourth saw it too.
    let count: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 7.0, "{line}");
    assert!(text.contains(r#"outcome="deny""#), "{text}");
    assert!(
        text.contains(
            r#"portcullis_decisions_total{outcome="deny",cause="unknown_tool",tool="unknown"}"#
        ),
        "a made-up tool name is not a label: {text}"
    );
    assert!(!text.contains("no_such_tool"), "{text}");
    assert!(
        text.contains("portcullis_decision_duration_seconds_count"),
        "{text}"
    );
    assert!(
        text.contains("portcullis_audit_batch_records_count"),
        "{text}"
    );
    assert!(
        text.contains("portcullis_audit_write_duration_seconds_bucket"),
        "{text}"
    );
    assert!(text.contains("portcullis_calls_in_flight 0"), "{text}");
    // The figures are not behind the MCP port, and no token opens them there.
    let mcp_metrics = format!("{}/metrics", server.base);
    let refused = http
        .get(&mcp_metrics)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16();
    assert_ne!(refused, 200);
    server.stop();
}

#[test]
fn an_address_other_machines_reach_needs_allow_remote() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut command = served.command();
    command.env_remove("PORTCULLIS_TOKEN").args([
        "--http",
        "127.0.0.1:0",
        "--metrics",
        "0.0.0.0:0",
    ]);
    let run = crate::util::run_with_stdin(command, b"");
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("--allow-remote"), "{run:?}");
}

/// A Prometheus of the test's own, scraping `target` every second.
struct Prometheus {
    child: Child,
    api: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let host = target
            .trim_start_matches("http://")
            .trim_end_matches("/metrics");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: portcullis\n    static_configs:\n      - targets: ['{host}']\n"
            ),
        )
        .unwrap();
        let port = crate::ports::unused_port();
        let mut child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Drained, so Prometheus never blocks on a full pipe.
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || for _ in BufReader::new(stderr).lines() {});
        Self {
            child,
            api: format!("http://127.0.0.1:{port}/api/v1"),
            _dir: dir,
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_figures_and_answers_with_the_decision_counter() {
    if !have("prometheus") {
        assert!(
            std::env::var_os("PORTCULLIS_REQUIRE_PROMETHEUS").is_none(),
            "Prometheus is required (PORTCULLIS_REQUIRE_PROMETHEUS) but not installed"
        );
        eprintln!("SKIPPED: prometheus is not installed (apt-get install prometheus)");
        return;
    }
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let (server, metrics) = serve_with_metrics(&served);
    let http = client();
    let read = json!({"name": "read_file", "arguments": {"path": "README.md"}});
    let answer = modern(&http, &server.url(), &served.token, 1, "tools/call", read).await;
    assert_eq!(
        answer.response(1)["result"]["isError"],
        false,
        "{}",
        answer.body
    );
    let prometheus = Prometheus::start(&metrics);
    // portcullis_decisions_total{tool="builtin/read_file"}, URL-encoded.
    let query = format!(
        "{}/query?query=portcullis_decisions_total%7Btool%3D%22builtin%2Fread_file%22%7D",
        prometheus.api
    );
    let start = Instant::now();
    let found: Value = loop {
        if let Ok(response) = http.get(&query).send().await
            && let Ok(body) = response.json::<Value>().await
            && body["data"]["result"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
        {
            break body;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "Prometheus never answered with the counter"
        );
        tokio::task::yield_now().await;
    };
    let series = &found["data"]["result"][0];
    assert_eq!(
        series["metric"]["__name__"], "portcullis_decisions_total",
        "{found}"
    );
    assert_eq!(series["metric"]["outcome"], "allow", "{found}");
    let value: f64 = series["value"][1].as_str().unwrap().parse().unwrap();
    assert!(value >= 2.0, "{found}");
    server.stop();
}
