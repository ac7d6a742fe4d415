//! `serve --http`: one server, several clients each by its bearer token,
//! and every request that should not get in refused before anything is
//! decided or run.

use std::fs;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use serde_json::{Value, json};

use crate::util::{ALLOW_BUILTIN, Served, portcullis};

pub const MODERN: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";

/// A `serve --http 127.0.0.1:0` of a setup, with its address read from
/// stderr (the rest of stderr keeps being drained, so the server never
/// blocks on it).
pub struct HttpServer {
    pub child: Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    /// What followed the other line asked for on stderr, if one was.
    pub noted: Option<String>,
    _stderr: Receiver<String>,
}

impl HttpServer {
    pub fn start(served: &Served, extra: &[&str]) -> Self {
        let mut command = served.command();
        command.env_remove("PORTCULLIS_TOKEN").args(extra);
        Self::spawn(command)
    }

    /// Runs a prepared `portcullis serve` on a free loopback port.
    pub fn spawn(command: Command) -> Self {
        Self::spawn_reading(command, "portcullis: serving MCP over HTTP at ")
    }

    /// As [`HttpServer::spawn`], also noting what follows `also` on the
    /// stderr line that starts with it (printed before the address).
    pub fn spawn_reading(mut command: Command, also: &str) -> Self {
        command
            .args(["--http", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    // Nobody listens any more: keep draining.
                    continue;
                }
            }
        });
        let mut noted = None;
        let base = loop {
            let line = lines
                .recv_timeout(Duration::from_secs(120))
                .expect("serve --http printed its address");
            if let Some(url) = line.strip_prefix("portcullis: serving MCP over HTTP at ") {
                break url.trim_end_matches("/mcp").to_owned();
            }
            if let Some(rest) = line.strip_prefix(also) {
                noted = Some(rest.trim().to_owned());
            }
        };
        Self {
            child,
            base,
            noted,
            _stderr: lines,
        }
    }

    pub fn url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// SIGTERM, and a clean exit.
    pub fn stop(mut self) {
        let status = Command::new("kill")
            .args(["-s", "TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "serve --http exited with {status}");
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A second client in the setup's store; returns its token.
pub fn add_client(served: &Served, name: &str, tier: &str) -> String {
    let store = served.store.display().to_string();
    let flags = served.tree.flags();
    let mut args = vec![
        "token", "create", name, "--tier", tier, "--store", &store, "--format", "json",
    ];
    args.extend(flags.iter().map(String::as_str));
    let run = portcullis(&args);
    assert_eq!(run.code, 0, "{run:?}");
    run.json()["token"].as_str().unwrap().to_owned()
}

pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Answer {
    /// The JSON-RPC messages of the body, whether it came as JSON or SSE.
    pub fn messages(&self) -> Vec<Value> {
        if let Ok(value) = serde_json::from_str::<Value>(&self.body) {
            return vec![value];
        }
        self.body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    }

    /// The response to request `id`.
    pub fn response(&self, id: i64) -> Value {
        self.messages()
            .into_iter()
            .find(|m| m["id"] == id)
            .unwrap_or_else(|| panic!("no response {id} in {} {}", self.status, self.body))
    }
}

pub async fn send(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
) -> Answer {
    let mut request = http
        .request(method, url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.body(body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.text().await.unwrap_or_default();
    Answer {
        status,
        headers,
        body,
    }
}

/// A 2026-07-28 request: no session, the era in every request's `_meta`
/// and headers.
pub async fn modern(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    id: i64,
    method: &str,
    params: Value,
) -> Answer {
    modern_declaring(http, url, token, (id, method, params), json!({})).await
}

/// A 2026-07-28 request `(id, method, params)` from a client that declares
/// `capabilities`.
pub async fn modern_declaring(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    (id, method, mut params): (i64, &str, Value),
    capabilities: Value,
) -> Answer {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    // Mcp-Name: the tool's name, or the task's id for the task methods.
    let name = params["name"]
        .as_str()
        .or_else(|| params["taskId"].as_str())
        .map(str::to_owned);
    let bearer = format!("Bearer {token}");
    let mut headers = vec![
        ("authorization", bearer.as_str()),
        ("mcp-protocol-version", MODERN),
        ("mcp-method", method),
    ];
    if let Some(name) = &name {
        headers.push(("mcp-name", name.as_str()));
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    send(
        http,
        reqwest::Method::POST,
        url,
        &headers,
        Some(body.to_string()),
    )
    .await
}

/// A legacy session: initialize, initialized; returns the session id.
pub async fn open_session(http: &reqwest::Client, url: &str, token: &str) -> String {
    let bearer = format!("Bearer {token}");
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    let answer = send(
        http,
        reqwest::Method::POST,
        url,
        &[("authorization", &bearer)],
        Some(init.to_string()),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let session = answer.headers["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let answer = in_session(http, url, token, &session, done).await;
    assert_eq!(answer.status, 202, "{}", answer.body);
    session
}

pub async fn in_session(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    session: &str,
    body: Value,
) -> Answer {
    let bearer = format!("Bearer {token}");
    send(
        http,
        reqwest::Method::POST,
        url,
        &[
            ("authorization", &bearer),
            ("mcp-session-id", session),
            ("mcp-protocol-version", LEGACY),
        ],
        Some(body.to_string()),
    )
    .await
}

/// Request headers, by name.
type Headers<'a> = Vec<(&'a str, &'a str)>;

fn decisions(served: &Served) -> usize {
    served
        .records()
        .iter()
        .filter(|r| r["kind"] == "decision")
        .count()
}

fn tool_names(answer: &Answer, id: i64) -> Vec<String> {
    answer.response(id)["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {}", answer.body))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_of_different_tiers_share_one_server_and_each_is_itself() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let reader = add_client(&served, "reader", "readonly");
    let server = HttpServer::start(&served, &[]);
    let (http, url) = (client(), server.url());

    for token in [&served.token, &reader] {
        let tools = tool_names(
            &modern(&http, &url, token, 1, "tools/list", json!({})).await,
            1,
        );
        assert!(tools.contains(&"read_file".to_owned()), "{tools:?}");
    }

    // Both at once, one in a legacy session, one stateless.
    let session = open_session(&http, &url, &served.token).await;
    let call = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "read_file", "arguments": {"path": "README.md"}}})
    };
    let (legacy, stateless) = tokio::join!(
        in_session(&http, &url, &served.token, &session, call(2)),
        modern(
            &http,
            &url,
            &reader,
            2,
            "tools/call",
            json!({"name": "read_file", "arguments": {"path": "README.md"}})
        ),
    );
    for answer in [&legacy, &stateless] {
        let result = &answer.response(2)["result"];
        assert_eq!(result["isError"], false, "{}", answer.body);
        assert_eq!(result["structuredContent"]["content"], "# test workspace\n");
    }
    // A write is decided by each caller's own tier: the reader's lacks
    // the capability, the paired client's needs a human it cannot ask here.
    let write = json!({"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}});
    let refused = modern(&http, &url, &reader, 3, "tools/call", write.clone()).await;
    let refused = &refused.response(3)["result"]["structuredContent"];
    assert_eq!(refused["reason_code"], "missing_capability", "{refused}");
    let asked = modern(&http, &url, &served.token, 3, "tools/call", write).await;
    let asked = &asked.response(3)["result"]["structuredContent"];
    assert_eq!(asked["reason_code"], "approval_unavailable", "{asked}");
    assert!(!served.root.path().join("x.txt").exists());
    server.stop();

    let reads: Vec<Value> = served
        .records()
        .into_iter()
        .filter(|r| r["kind"] == "decision" && r["body"]["action"] == "call_tool")
        .collect();
    let callers: std::collections::BTreeSet<&str> = reads
        .iter()
        .filter_map(|r| r["body"]["client"]["name"].as_str())
        .collect();
    assert_eq!(
        callers,
        ["agent", "reader"].into_iter().collect(),
        "{reads:?}"
    );
    for record in &reads {
        assert_eq!(record["body"]["facts"]["transport"], "http", "{record}");
    }
    let start = served
        .records()
        .into_iter()
        .find(|r| r["body"]["event"] == "start")
        .unwrap();
    assert_eq!(start["body"]["transport"], "http");
    assert_eq!(
        start["body"]["clients"].as_array().unwrap().len(),
        2,
        "{start}"
    );
    let verified = portcullis(&["audit", "verify", served.audit_log().to_str().unwrap()]);
    assert_eq!(verified.code, 0, "{verified:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_that_should_not_get_in_is_refused_before_anything_is_decided() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let other = add_client(&served, "other", "paired");
    let revoked = add_client(&served, "leaver", "paired");
    let server = HttpServer::start(&served, &["--max-body", "64KiB"]);
    let (http, url) = (client(), server.url());
    let session = open_session(&http, &url, &served.token).await;
    let revoke = portcullis(&[
        "token",
        "revoke",
        "leaver",
        "--store",
        served.store.to_str().unwrap(),
    ]);
    assert_eq!(revoke.code, 0, "{revoke:?}");
    let before = decisions(&served);

    let write = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {"path": "pwned.txt", "content": "x"},
                   "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                             "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}}})
        .to_string()
    };
    let good = format!("Bearer {}", served.token);
    let wrong = "Bearer pcl_wrongwrongwrong".to_owned();
    let gone = format!("Bearer {revoked}");
    let others = format!("Bearer {other}");
    fn modern_headers(bearer: &str) -> Headers<'_> {
        vec![
            ("authorization", bearer),
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/call"),
            ("mcp-name", "write_file"),
        ]
    }
    let (good, wrong, gone, others) = (
        good.as_str(),
        wrong.as_str(),
        gone.as_str(),
        others.as_str(),
    );
    let session = session.as_str();
    let big = "x".repeat(100 * 1024);
    let cases: Vec<(&str, Headers<'_>, String, u16)> = vec![
        (
            "no token",
            modern_headers(good)
                .into_iter()
                .filter(|(n, _)| *n != "authorization")
                .collect(),
            write(1),
            401,
        ),
        ("a wrong token", modern_headers(wrong), write(2), 401),
        ("a revoked token", modern_headers(gone), write(3), 401),
        (
            "a basic credential",
            [
                vec![("authorization", "Basic YWdlbnQ6eA==")],
                modern_headers(good)[1..].to_vec(),
            ]
            .concat(),
            write(4),
            401,
        ),
        (
            "another client's session",
            vec![
                ("authorization", others),
                ("mcp-session-id", session),
                ("mcp-protocol-version", LEGACY),
            ],
            write(5),
            404,
        ),
        (
            "an unknown session",
            vec![
                ("authorization", good),
                ("mcp-session-id", "not-a-session"),
                ("mcp-protocol-version", LEGACY),
            ],
            write(6),
            404,
        ),
        (
            "a foreign origin",
            [
                modern_headers(good),
                vec![("origin", "https://evil.example")],
            ]
            .concat(),
            write(7),
            403,
        ),
        (
            "a null origin",
            [modern_headers(good), vec![("origin", "null")]].concat(),
            write(8),
            403,
        ),
        (
            "a foreign host",
            [modern_headers(good), vec![("host", "evil.example")]].concat(),
            write(9),
            403,
        ),
        (
            "a rebound host with the right port",
            [
                modern_headers(good),
                vec![("host", "attacker.localhost.evil:1")],
            ]
            .concat(),
            write(10),
            403,
        ),
        (
            "no protocol version header",
            modern_headers(good)
                .into_iter()
                .filter(|(n, _)| *n != "mcp-protocol-version")
                .collect(),
            write(11),
            400,
        ),
        (
            "a method header that is not the body's",
            [
                modern_headers(good)[..2].to_vec(),
                vec![("mcp-method", "tools/list"), ("mcp-name", "write_file")],
            ]
            .concat(),
            write(12),
            400,
        ),
        (
            "a name header that is not the body's",
            [
                modern_headers(good)[..3].to_vec(),
                vec![("mcp-name", "read_file")],
            ]
            .concat(),
            write(13),
            400,
        ),
        (
            "no name header",
            modern_headers(good)[..3].to_vec(),
            write(14),
            400,
        ),
        (
            "an oversized body",
            modern_headers(good),
            json!({"jsonrpc": "2.0", "id": 15, "method": "tools/call",
            "params": {"name": "write_file", "arguments": {"path": "pwned.txt", "content": big}}})
            .to_string(),
            413,
        ),
    ];
    for (what, headers, body, status) in cases {
        let answer = send(&http, reqwest::Method::POST, &url, &headers, Some(body)).await;
        assert_eq!(answer.status, status, "{what}: {}", answer.body);
        if status == 401 {
            assert_eq!(answer.body, "portcullis: authentication failed", "{what}");
        }
        if status == 400 {
            assert!(
                answer.body.contains("-32020") || answer.body.contains("Bad Request"),
                "{what}: {}",
                answer.body
            );
        }
    }
    // The same oversized body, sent in chunks with no length declared, is
    // cut off at the limit too.
    let content = "y".repeat(100 * 1024);
    let body = write(16).replace("\"content\":\"x\"", &format!("\"content\":\"{content}\""));
    let status = chunked_post(&server.base, &modern_headers(good), &body);
    assert_eq!(status, 413);

    assert_eq!(decisions(&served), before, "a refused request was decided");
    assert!(!served.root.path().join("pwned.txt").exists());
    // The rightful owner still has the session, from a page of this
    // machine too.
    let list = json!({"jsonrpc": "2.0", "id": 20, "method": "tools/list"});
    let answer = send(
        &http,
        reqwest::Method::POST,
        &url,
        &[
            ("authorization", good),
            ("mcp-session-id", session),
            ("mcp-protocol-version", LEGACY),
            ("origin", "http://localhost:5173"),
        ],
        Some(list.to_string()),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    server.stop();
}

/// A POST whose body goes in 8 KiB chunks with no length declared; the
/// status of the answer. The server may answer before the body is all
/// sent, and close: write errors after that are expected.
fn chunked_post(base: &str, headers: &[(&str, &str)], body: &str) -> u16 {
    use std::io::{Read, Write};
    let address = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ntransfer-encoding: chunked\r\n"
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    for chunk in body.as_bytes().chunks(8 * 1024) {
        let mut frame = format!("{:x}\r\n", chunk.len()).into_bytes();
        frame.extend_from_slice(chunk);
        frame.extend_from_slice(b"\r\n");
        if stream.write_all(&frame).is_err() {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n");
    let mut answer = [0u8; 64];
    let read = stream.read(&mut answer).unwrap();
    let line = String::from_utf8_lossy(&answer[..read]).to_string();
    line.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {line:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_needs_no_token_and_says_nothing_about_policies() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let server = HttpServer::start(&served, &[]);
    let answer = send(
        &client(),
        reqwest::Method::GET,
        &format!("{}/healthz", server.base),
        &[],
        None,
    )
    .await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "ok\n"));
    let elsewhere = send(
        &client(),
        reqwest::Method::GET,
        &format!("{}/other", server.base),
        &[],
        None,
    )
    .await;
    assert_eq!(elsewhere.status, 404);
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_session_is_gone_and_only_its_owner_may_delete_it() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let other = add_client(&served, "other", "paired");
    let server = HttpServer::start(&served, &[]);
    let (http, url) = (client(), server.url());
    let session = open_session(&http, &url, &served.token).await;
    let delete = |token: String| {
        let (http, url, session) = (http.clone(), url.clone(), session.clone());
        async move {
            let bearer = format!("Bearer {token}");
            send(
                &http,
                reqwest::Method::DELETE,
                &url,
                &[
                    ("authorization", &bearer),
                    ("mcp-session-id", &session),
                    ("mcp-protocol-version", LEGACY),
                ],
                None,
            )
            .await
        }
    };
    assert_eq!(delete(other).await.status, 404);
    // 204, as the SDKs expect of a closed session (not rmcp's 202).
    assert_eq!(delete(served.token.clone()).await.status, 204);
    let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"});
    let after = in_session(&http, &url, &served.token, &session, list).await;
    assert_eq!(after.status, 404, "{}", after.body);
    server.stop();
}

#[test]
fn an_address_off_this_machine_needs_allow_remote() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let mut args = served.serve_args();
    args.extend(["--http".to_owned(), "0.0.0.0:0".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = portcullis(&args);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("--allow-remote"), "{run:?}");
    assert!(
        !served.audit_log().exists(),
        "nothing was served, nothing recorded"
    );
}

#[test]
fn an_empty_token_store_serves_nobody() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let revoke = portcullis(&[
        "token",
        "revoke",
        "agent",
        "--store",
        served.store.to_str().unwrap(),
    ]);
    assert_eq!(revoke.code, 0, "{revoke:?}");
    let mut args = served.serve_args();
    args.extend(["--http".to_owned(), "127.0.0.1:0".to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = portcullis(&args);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("token create"), "{run:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_cancels_the_calls_in_flight_records_them_and_ends_the_log() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    crate::util::deep_tree(served.root.path(), 40);
    let server = HttpServer::start(&served, &[]);
    let (http, url, token) = (client(), server.url(), served.token.clone());
    let searching = tokio::spawn(async move {
        modern(
            &http,
            &url,
            &token,
            1,
            "tools/call",
            json!({"name": "search", "arguments": {"pattern": "needle"}}),
        )
        .await
    });
    // The search is under way once its decision is on record.
    let log = served.audit_log();
    tokio::task::spawn_blocking(move || {
        crate::util::wait_for_record(&log, |r| {
            r["kind"] == "decision"
                && r["body"]["resource"] == "builtin/search"
                && r["body"]["action"] == "call_tool"
        })
    })
    .await
    .unwrap();
    server.stop();
    let _ = searching.await;
    let all = served.records();
    let outcome = all
        .iter()
        .find(|r| r["kind"] == "outcome")
        .expect("the search's outcome is recorded");
    assert_eq!(outcome["body"]["status"], "cancelled", "{outcome}");
    let last = all
        .iter()
        .rev()
        .find(|r| r["kind"] != "checkpoint")
        .unwrap();
    assert_eq!(last["body"]["event"], "shutdown", "{last}");
    assert_eq!(last["body"]["signal"], "SIGTERM", "{last}");
    let verified = portcullis(&["audit", "verify", served.audit_log().to_str().unwrap()]);
    assert_eq!(verified.code, 0, "{verified:?}");
}

/// A write_file call of the 2026-07-28 era that can be asked about, with
/// an approval question's state and answer when it is a retry.
pub async fn asking_write(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    id: i64,
    retry: Option<&str>,
) -> Value {
    let mut params = json!({"name": "write_file", "arguments": {"path": "approved.txt", "content": "x"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}});
    if let Some(state) = retry {
        params["requestState"] = json!(state);
        params["inputResponses"] =
            json!({"approval": {"action": "accept", "content": {"approve": true}}});
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let bearer = format!("Bearer {token}");
    let headers = [
        ("authorization", bearer.as_str()),
        ("mcp-protocol-version", MODERN),
        ("mcp-method", "tools/call"),
        ("mcp-name", "write_file"),
    ];
    let answer = send(
        http,
        reqwest::Method::POST,
        url,
        &headers,
        Some(body.to_string()),
    )
    .await;
    answer.response(id)["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_asked_of_one_client_cannot_be_spent_by_another() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let other = add_client(&served, "other", "paired");
    let server = HttpServer::start(&served, &[]);
    let (http, url) = (client(), server.url());
    let asked = asking_write(&http, &url, &served.token, 1, None).await;
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let state = asked["requestState"].as_str().unwrap().to_owned();

    // The other client, with the same state and a yes: asked again, and
    // nothing written.
    let stolen = asking_write(&http, &url, &other, 2, Some(&state)).await;
    assert_eq!(stolen["resultType"], "input_required", "{stolen}");
    assert!(!served.root.path().join("approved.txt").exists());
    let refused: Vec<Value> = served
        .records()
        .into_iter()
        .filter(|r| r["body"]["event"] == "state_refused")
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["body"]["detail"]["why"], "foreign");
    assert_eq!(refused[0]["body"]["client"], "other");

    // The client it was asked of still can.
    let approved = asking_write(&http, &url, &served.token, 3, Some(&state)).await;
    assert_eq!(approved["isError"], false, "{approved}");
    assert_eq!(
        fs::read_to_string(served.root.path().join("approved.txt")).unwrap(),
        "x"
    );
    server.stop();
}

/// Sends `head` (a whole request head, CRLFs included, and its body) on a
/// raw socket and returns the status and the whole answer (the request
/// says `connection: close`, so the answer ends with the connection).
fn raw_request(base: &str, head: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let address = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(read) = stream.read(&mut chunk) {
        if read == 0 {
            break;
        }
        answer.extend_from_slice(&chunk[..read]);
    }
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    (status, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_names_its_host_twice_is_refused_and_a_preflight_needs_only_an_allowed_origin()
 {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let server = HttpServer::start(&served, &[]);
    let url = server.url();
    let address = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let token = served.token.clone();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#;
    let post = |target: &str, hosts: &[&str]| {
        let mut head = format!("POST {target} HTTP/1.1\r\n");
        for host in hosts {
            head.push_str(&format!("host: {host}\r\n"));
        }
        head.push_str(&format!(
            "authorization: Bearer {token}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ));
        head
    };
    let base = format!("http://{address}");
    // Two Host headers, the second naming another site.
    let (status, _) = raw_request(&base, &post("/mcp", &[&address, "evil.example"]));
    assert_eq!(status, 400);
    // An absolute-form target naming another host than Host.
    let (status, _) = raw_request(&base, &post("http://evil.example/mcp", &[&address]));
    assert_eq!(status, 400);
    // The same request in absolute form naming its own host is served.
    // (served: rmcp's own answer to the request, not the guard's refusal).
    let (_, answer) = raw_request(&base, &post(&format!("http://{address}/mcp"), &[&address]));
    assert!(!answer.contains("names its host"), "{answer}");
    let (_, refused) = raw_request(&base, &post("http://evil.example/mcp", &[&address]));
    assert!(refused.contains("names its host"), "{refused}");

    // A browser's preflight from an allowed origin needs no token.
    let preflight = |origin: &str| {
        format!(
            "OPTIONS /mcp HTTP/1.1\r\nhost: {address}\r\norigin: {origin}\r\naccess-control-request-method: POST\r\naccess-control-request-headers: authorization, content-type\r\nconnection: close\r\n\r\n"
        )
    };
    let (status, answer) = raw_request(&base, &preflight("http://localhost:5173"));
    assert_eq!(status, 204, "{answer}");
    let lower = answer.to_ascii_lowercase();
    assert!(
        lower.contains("access-control-allow-origin: http://localhost:5173")
            && lower.contains("access-control-allow-headers:")
            && lower.contains("authorization"),
        "{answer}"
    );
    assert!(!lower.contains("mcp-session-id:"), "{answer}");
    // From another site it is refused, and without an origin it is no
    // preflight: a token is needed as for anything else.
    let (status, _) = raw_request(&base, &preflight("https://evil.example"));
    assert_eq!(status, 403);
    let bare = format!("OPTIONS /mcp HTTP/1.1\r\nhost: {address}\r\nconnection: close\r\n\r\n");
    assert_eq!(raw_request(&base, &bare).0, 401);
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_initialize_on_an_open_legacy_session_is_refused() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let server = HttpServer::start(&served, &[]);
    let (http, url, token) = (client(), server.url(), served.token.clone());
    let session = open_session(&http, &url, &token).await;
    let again = json!({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "raw", "version": "2"}}});
    let answer = in_session(&http, &url, &token, &session, again).await;
    assert_eq!(answer.status, 400, "{}", answer.body);
    assert!(answer.body.contains("-32600"), "{}", answer.body);
    // The session is as it was: it still serves.
    let list = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {}});
    let answer = in_session(&http, &url, &token, &session, list).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.contains("read_file"), "{}", answer.body);
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_silent_connections_is_capped_cut_off_and_starves_no_client() {
    use std::io::Read;
    if !crate::util::have("prlimit") {
        eprintln!("SKIPPED: prlimit is not installed");
        return;
    }
    let served = Served::new(ALLOW_BUILTIN, "paired");
    fs::write(served.root.path().join("a.txt"), "hello\n").unwrap();
    // 200 open files for the whole process: 72 of them for connections.
    let inner = served.command();
    let mut command = Command::new("prlimit");
    command
        .arg("--nofile=200:200")
        .arg(inner.get_program())
        .args(inner.get_args());
    for (name, value) in inner.get_envs() {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    command.env_remove("PORTCULLIS_TOKEN");
    let server = HttpServer::spawn(command);
    let address = server.base.trim_start_matches("http://").to_owned();
    // 150 sockets that send nothing: those past the cap are told 503 at
    // once, the others are cut off when their first head is overdue.
    let flood: Vec<std::net::TcpStream> = (0..150)
        .map(|_| {
            let stream = std::net::TcpStream::connect(&address).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(90)))
                .unwrap();
            stream
        })
        .collect();
    let (http, url, token) = (client(), server.url(), served.token.clone());
    let mut busy = 0;
    let mut refused = 0;
    let mut cut = 0;
    for mut stream in flood {
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        if answer.starts_with(b"HTTP/1.1 503") {
            busy += 1;
        } else if answer.is_empty() {
            cut += 1;
        } else {
            refused += 1;
        }
    }
    assert!(busy >= 150 - 72, "{busy} told 503");
    assert!(cut > 0, "{cut} cut off");
    assert_eq!(refused, 0, "every flood socket was told 503 or cut off");
    // Once the flood is gone, a client is served and its call recorded.
    let read = json!({"name": "read_file", "arguments": {"path": "a.txt"}});
    let answer = modern(&http, &url, &token, 1, "tools/call", read).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.contains("hello"), "{}", answer.body);
    server.stop();
    assert!(
        served
            .records()
            .iter()
            .any(|r| r["body"]["tool"] == "read_file" && r["body"]["decision"] == "allow"),
        "the call was not recorded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_created_while_the_server_runs_is_served_without_a_restart() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let server = HttpServer::start(&served, &[]);
    let (http, url) = (client(), server.url());
    let late = add_client(&served, "late", "readonly");
    let start = std::time::Instant::now();
    loop {
        let answer = modern(&http, &url, &late, 1, "tools/list", json!({})).await;
        if answer.status == 200 {
            break;
        }
        assert_eq!(answer.status, 401, "{}", answer.body);
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the new client was never served"
        );
        tokio::task::yield_now().await;
    }
    // Decided as what it is: a reader, whose tier lacks the capability to write.
    let write = json!({"name": "write_file", "arguments": {"path": "x.txt", "content": "x"}});
    let refused = modern(&http, &url, &late, 2, "tools/call", write).await;
    let refused = &refused.response(2)["result"]["structuredContent"];
    assert_eq!(refused["reason_code"], "missing_capability", "{refused}");
    let changed: Vec<Value> = served
        .records()
        .into_iter()
        .filter(|r| r["body"]["event"] == "clients_changed")
        .collect();
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(changed[0]["body"]["added"][0]["name"], "late");
    assert_eq!(changed[0]["body"]["added"][0]["tier"], "readonly");
    assert_eq!(changed[0]["body"]["removed"], json!([]));
    server.stop();
    let verified = portcullis(&["audit", "verify", served.audit_log().to_str().unwrap()]);
    assert_eq!(verified.code, 0, "{verified:?}");
}
