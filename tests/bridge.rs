//! The agent bridge through the real binary: an agent shaped like `codex
//! mcp-server` (`tests/interop/servers/fake_codex.py`, on the Python SDK)
//! driven by the rmcp client; what the audit log holds of a conversation;
//! a turn cut off by `kill -9`; and the real `codex mcp-server` from npm,
//! without an API key.

use std::fs;
use std::path::{Path, PathBuf};

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::util::{Served, Session, have, npm_install, portcullis, wait_for_record};

pub const ALLOW_BRIDGE: &str = r#"
@id("allow.bridge")
@reason("test clients may talk to the agent through the bridge")
permit (
  principal,
  action in Portcullis::Action::"use_tool",
  resource in Portcullis::Server::"bridge"
);
"#;

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A served setup with the fake agent declared (`kind = "agent"`, preset
/// codex) and pinned. The agent writes its events to `events`.
pub struct Agent {
    pub served: Served,
    pub events: PathBuf,
}

impl Agent {
    pub fn new(allowlist: &str, tier: &str) -> Self {
        let served = Served::new(allowlist, tier);
        let events = served.tree.dir.path().join("events.txt");
        fs::write(&events, "").unwrap();
        let python = crate::interop_python::venv().join("bin/python");
        served.tree.write_policy(
            "servers.toml",
            &format!(
                r#"
[servers.agent]
command = "{python}"
args = ["{script}"]
env = {{ EVENTS = "{events}" }}
kind = "agent"
preset = "codex"
timeout = "60s"
writable = ["{state}"]
"#,
                state = served.tree.dir.path().display(),
                python = python.display(),
                script = manifest()
                    .join("tests/interop/servers/fake_codex.py")
                    .display(),
                events = events.display(),
            ),
        );
        pin(&served);
        Self { served, events }
    }

    pub fn started(&self) -> usize {
        fs::read_to_string(&self.events)
            .unwrap_or_default()
            .lines()
            .filter(|line| line.starts_with("started"))
            .count()
    }
}

pub fn pin(served: &Served) {
    pin_tree(&served.tree, served.root.path());
}

/// `servers pin` of `tree`'s servers, with `root` as the workspace.
pub fn pin_tree(tree: &crate::util::Tree, root: &Path) {
    let root = root.display().to_string();
    let mut args = vec!["servers", "pin", "--root", root.as_str()];
    let flags = tree.flags();
    args.extend(flags.iter().map(String::as_str));
    let run = portcullis(&args);
    assert_eq!(run.code, 0, "{run:?}");
}

type Client = RunningService<RoleClient, ()>;

async fn connect(served: &Served) -> Client {
    let command = tokio::process::Command::from(served.command());
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    ().serve(transport).await.unwrap()
}

async fn call(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    let arguments: JsonObject = match arguments {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments))
        .await
        .unwrap()
}

async fn tool_names(client: &Client) -> Vec<String> {
    client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

fn structured(result: &CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or(Value::Null)
}

fn sha256(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_conversation_is_decided_recorded_by_hash_and_replays() {
    let agent = Agent::new(ALLOW_BRIDGE, "paired");
    let client = connect(&agent.served).await;
    let names = tool_names(&client).await;
    for tool in [
        "sessions_list",
        "session_get",
        "prompt_send",
        "prompt_cancel",
    ] {
        assert!(names.iter().any(|n| n == tool), "{tool} not in {names:?}");
    }
    // The agent's own tools would reach any conversation by its id.
    assert!(!names.iter().any(|n| n.starts_with("agent__")), "{names:?}");
    let direct = client
        .call_tool(
            CallToolRequestParams::new("agent__codex-reply").with_arguments(
                json!({"prompt": "x", "threadId": "t"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await;
    assert!(format!("{direct:?}").contains("Unknown tool"), "{direct:?}");

    let prompt = "the secret plan, in words";
    let first = call(&client, "prompt_send", json!({"prompt": prompt})).await;
    assert_ne!(first.is_error, Some(true), "{first:?}");
    let session_id = structured(&first)["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let reply = structured(&first)["reply"].as_str().unwrap().to_owned();
    assert!(reply.starts_with("turn 1 of "), "{reply}");
    let bad = client
        .call_tool(
            CallToolRequestParams::new("session_get").with_arguments(
                json!({"session_id": "../../etc/passwd"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await;
    assert!(format!("{bad:?}").contains("-32602"), "{bad:?}");
    client.cancel().await.unwrap();

    // Default store: beside the token store.
    assert!(
        agent
            .served
            .store
            .parent()
            .unwrap()
            .join("sessions.sqlite3")
            .exists()
    );
    let log = agent.served.audit_log();
    let text = fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains(prompt),
        "the prompt's words stay out of the log"
    );
    assert!(!text.contains(&reply), "so do the reply's");
    let records = agent.served.records();
    let decision = records
        .iter()
        .find(|r| {
            r["kind"] == "decision"
                && r["body"]["resource"] == "bridge/prompt_send"
                && r["body"]["action"] == "call_tool"
        })
        .expect("the prompt's decision record");
    assert_eq!(decision["body"]["decision"], "allow", "{decision}");
    assert!(decision["body"]["tool_definition"].is_string());
    let outcome = records
        .iter()
        .find(|r| r["kind"] == "outcome" && r["body"]["bridge"].is_object())
        .expect("the turn's outcome record");
    let bridge = &outcome["body"]["bridge"];
    assert_eq!(bridge["session_id"], session_id.as_str());
    assert_eq!(bridge["turn"], 1);
    assert_eq!(bridge["state"], "completed");
    assert_eq!(bridge["prompt_sha256"], sha256(prompt).as_str());
    assert_eq!(bridge["reply_sha256"], sha256(&reply).as_str());
    assert_eq!(outcome["body"]["status"], "executed");

    let replay = portcullis(&["audit", "replay", log.to_str().unwrap(), "--format", "json"]);
    assert_eq!(replay.code, 0, "{replay:?}");
    let summary = &replay.json()["summary"];
    assert_eq!(summary["redecided"], summary["same"], "{summary}");
    // The unknown tool and the bad arguments were refused before any
    // policy was asked: nothing to decide again.
    let refused_early = records
        .iter()
        .filter(|r| {
            matches!(
                r["body"]["cause"].as_str(),
                Some("unknown_tool" | "invalid_arguments")
            )
        })
        .count();
    assert_eq!(refused_early, 2, "{records:?}");
    assert_eq!(summary["not_redecided"], 2, "{summary}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_bridge_is_hidden_by_the_empty_allowlist_and_prompt_send_needs_the_agent_capability() {
    let hidden = Agent::new("// nothing allowed\n", "paired");
    let client = connect(&hidden.served).await;
    let names = tool_names(&client).await;
    assert_eq!(names, ["tools_list", "tool_call", "gate"]);
    client.cancel().await.unwrap();

    let readonly = Agent::new(ALLOW_BRIDGE, "readonly");
    let client = connect(&readonly.served).await;
    let listed = call(&client, "sessions_list", json!({})).await;
    assert_eq!(structured(&listed), json!({"sessions": []}));
    let refused = call(&client, "prompt_send", json!({"prompt": "hi"})).await;
    assert_eq!(refused.is_error, Some(true));
    assert_eq!(structured(&refused)["reason_code"], "missing_capability");
    assert_eq!(
        structured(&refused)["missing_capabilities"],
        json!(["agent"])
    );
    client.cancel().await.unwrap();
    assert_eq!(readonly.started(), 0);

    // A team that wants a human in the loop adds one policy; this client
    // cannot be asked, so nothing reaches the agent.
    let asking = Agent::new(
        &format!(
            "{ALLOW_BRIDGE}\n@id(\"approval.agent\")\n@reason(\"a human approves every prompt\")\nforbid (principal, action == Portcullis::Action::\"bridge/prompt_send\", resource)\nunless {{ context.approved }};\n"
        ),
        "paired",
    );
    let client = connect(&asking.served).await;
    let asked = call(&client, "prompt_send", json!({"prompt": "hi"})).await;
    assert_eq!(structured(&asked)["reason_code"], "approval_unavailable");
    client.cancel().await.unwrap();
}

#[test]
fn a_turn_in_flight_when_portcullis_is_killed_is_interrupted_at_the_next_start() {
    let agent = Agent::new(ALLOW_BRIDGE, "paired");
    let mut session = Session::start(&agent.served);
    session.initialize();
    session.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "prompt_send", "arguments": {"prompt": "a slow job"}}})
        .to_string(),
    );
    let log = agent.served.audit_log();
    // The turn is in the store before the agent is asked, and the agent
    // has started it.
    let decided = wait_for_record(&log, |r| r["body"]["resource"] == "bridge/prompt_send");
    assert_eq!(decided["body"]["decision"], "allow");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while agent.started() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never started the turn"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    session.child.kill().unwrap();
    session.child.wait().unwrap();
    drop(session);

    let mut session = Session::start(&agent.served);
    session.initialize();
    session.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "sessions_list", "arguments": {}}})
        .to_string(),
    );
    let listed = loop {
        let frame = session.next();
        if frame["id"] == 2 {
            break frame;
        }
    };
    let sessions = &listed["result"]["structuredContent"]["sessions"];
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(sessions[0]["state"], "interrupted", "{listed}");
    session.finish();
    let interrupted = agent
        .served
        .records()
        .into_iter()
        .find(|r| r["body"]["event"] == "turns_interrupted")
        .expect("the interruption is audited");
    assert_eq!(interrupted["body"]["sessions"][0], sessions[0]["id"]);
}

/// The last `@openai/codex` with `codex mcp-server` (0.154.0 removed it),
/// installed into the target folder; `None` (with a message) without node.
fn codex() -> Option<PathBuf> {
    if !have("node") {
        eprintln!("SKIPPED: node is not installed; the real codex test needs it");
        return None;
    }
    let dir = npm_install(
        &manifest().join("tests/interop/agents/package.json"),
        "codex-agent",
    );
    Some(dir.join("node_modules/.bin/codex"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_real_codex_mcp_server_is_pinned_and_a_prompt_without_a_key_fails_cleanly() {
    let Some(codex) = codex() else {
        return;
    };
    let served = Served::new(ALLOW_BRIDGE, "paired");
    // Its own home, with a model provider whose key is not set: no
    // network, and the turn fails at once.
    let home = served.tree.dir.path().join("codex-home");
    fs::create_dir_all(&home).unwrap();
    fs::write(
        home.join("config.toml"),
        "model_provider = \"nokey\"\n[model_providers.nokey]\nname = \"nokey\"\nbase_url = \"http://127.0.0.1:9/v1\"\nenv_key = \"PORTCULLIS_TEST_UNSET_KEY\"\n",
    )
    .unwrap();
    served.tree.write_policy(
        "servers.toml",
        &format!(
            "[servers.codex]\ncommand = \"{}\"\nargs = [\"mcp-server\"]\nenv = {{ CODEX_HOME = \"{}\" }}\nkind = \"agent\"\npreset = \"codex\"\nwritable = [\"{}\"]\nnetwork = true\n",
            codex.display(),
            home.display(),
            home.display()
        ),
    );
    pin(&served);
    let lock: Value = serde_json::from_str(
        &fs::read_to_string(served.tree.policies().join("servers.lock")).unwrap(),
    )
    .unwrap();
    let pinned: Vec<&String> = lock["servers"]["codex"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert!(
        pinned.contains(&&"codex".to_owned()) && pinned.contains(&&"codex-reply".to_owned()),
        "{pinned:?}"
    );

    let client = connect(&served).await;
    let sent = call(&client, "prompt_send", json!({"prompt": "say hi"})).await;
    assert_eq!(sent.is_error, Some(true), "{sent:?}");
    let body = structured(&sent);
    assert_eq!(body["reason_code"], "tool_failed", "{body}");
    assert_eq!(body["failure"], "downstream_error", "{body}");
    assert!(
        !body.to_string().contains("PORTCULLIS_TEST_UNSET_KEY"),
        "the agent's own error text stays behind: {body}"
    );
    let listed = call(&client, "sessions_list", json!({})).await;
    assert_eq!(structured(&listed)["sessions"][0]["state"], "failed");
    client.cancel().await.unwrap();
    let outcome = served
        .records()
        .into_iter()
        .find(|r| r["kind"] == "outcome" && r["body"]["bridge"].is_object())
        .expect("the failed turn is audited");
    assert_eq!(outcome["body"]["status"], "failed");
    assert_eq!(outcome["body"]["failure"], "downstream_error");
}

#[test]
fn a_second_serve_on_the_same_store_leaves_a_live_turn_alone() {
    let agent = Agent::new(ALLOW_BRIDGE, "paired");
    let mut first = Session::start(&agent.served);
    first.initialize();
    first.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "prompt_send", "arguments": {"prompt": "a slow job"}}})
        .to_string(),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while agent.started() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never started the turn"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // A second process starts on the same store while the turn runs.
    let mut second = Session::start(&agent.served);
    second.initialize();
    let answer = |session: &mut Session, id: i64, name: &str, arguments: Value| {
        session.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}})
            .to_string(),
        );
        loop {
            let frame = session.next();
            if frame["id"] == id {
                break frame;
            }
        }
    };
    let listed = answer(&mut second, 2, "sessions_list", json!({}));
    let sessions = &listed["result"]["structuredContent"]["sessions"];
    assert_eq!(sessions[0]["state"], "running", "{listed}");
    let id = sessions[0]["id"].as_str().unwrap().to_owned();
    let busy = answer(
        &mut second,
        3,
        "prompt_send",
        json!({"prompt": "meanwhile", "session_id": id}),
    );
    assert_eq!(
        busy["result"]["structuredContent"]["failure"], "session_busy",
        "{busy}"
    );
    second.finish();
    // The turn is still the first process's: its cancel stops it.
    let cancelled = answer(&mut first, 4, "prompt_cancel", json!({"session_id": id}));
    assert_eq!(
        cancelled["result"]["structuredContent"]["cancelled"], true,
        "{cancelled}"
    );
    first.finish();
    assert!(
        !agent
            .served
            .records()
            .iter()
            .any(|r| r["body"]["event"] == "turns_interrupted"),
        "a live turn was recorded as interrupted"
    );
}
