//! The agent bridge to an agent that speaks Codex's app-server protocol
//! (`preset = "codex-app-server"`), through the real binary: a stand-in
//! agent on the wire protocol (`tests/interop/agents/app_server.py`) for
//! the turns a model would run, and the current `codex app-server` from npm
//! for what it does without a key.

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};

use crate::bridge::ALLOW_BRIDGE;
use crate::util::{Served, Session, have, npm_install, portcullis};

/// A served setup whose agent is the stand-in; it writes what it was asked
/// to `events`.
struct AppAgent {
    served: Served,
    events: PathBuf,
}

impl AppAgent {
    fn new() -> Self {
        let served = Served::new(ALLOW_BRIDGE, "paired");
        let events = served.tree.dir.path().join("events.txt");
        fs::write(&events, "").unwrap();
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/agents/app_server.py");
        served.tree.write_policy(
            "servers.toml",
            &format!(
                r#"
[servers.codex]
command = "python3"
args = ["{script}"]
env = {{ EVENTS = "{events}" }}
kind = "agent"
preset = "codex-app-server"
start_arguments = {{ sandbox = "read-only", approvalPolicy = "never" }}
timeout = "60s"
writable = ["{state}"]
"#,
                script = script.display(),
                events = events.display(),
                state = served.tree.dir.path().display(),
            ),
        );
        Self { served, events }
    }

    fn events(&self) -> String {
        fs::read_to_string(&self.events).unwrap()
    }

    /// A client with a token of its own for `name`, on the same store.
    fn other_client(&self, name: &str) -> String {
        let store = self.served.store.display().to_string();
        let mut args = vec![
            "token", "create", name, "--tier", "paired", "--store", &store, "--format", "json",
        ];
        let flags = self.served.tree.flags();
        args.extend(flags.iter().map(String::as_str));
        let run = portcullis(&args);
        assert_eq!(run.code, 0, "{run:?}");
        run.json()["token"].as_str().unwrap().to_owned()
    }

    fn session(&self, token: &str) -> Session {
        let mut command = self.served.command();
        command.env("PORTCULLIS_TOKEN", token).stderr(Stdio::null());
        let mut session = Session::start_command(command);
        session.initialize();
        session
    }
}

/// Sends a `tools/call` and returns its response and the progress
/// messages that came before it.
fn call(session: &mut Session, id: u64, name: &str, arguments: Value) -> (Value, Vec<String>) {
    send_call(session, id, name, arguments);
    answer(session, id)
}

fn send_call(session: &mut Session, id: u64, name: &str, arguments: Value) {
    session.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": {"progressToken": id}}})
        .to_string(),
    );
}

fn answer(session: &Session, id: u64) -> (Value, Vec<String>) {
    let mut progress = Vec::new();
    loop {
        let frame = session.next();
        if frame["id"] == id {
            return (frame["result"].clone(), progress);
        }
        if frame["method"] == "notifications/progress" && frame["params"]["progressToken"] == id {
            progress.push(frame["params"]["message"].as_str().unwrap_or("").to_owned());
        }
    }
}

/// Waits for a progress message of call `id` that contains `wanted`.
fn wait_for_progress(session: &Session, id: u64, wanted: &str) {
    loop {
        let frame = session.next();
        assert_ne!(frame["id"], id, "the call ended first: {frame}");
        if frame["method"] == "notifications/progress"
            && frame["params"]["progressToken"] == id
            && frame["params"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(wanted))
        {
            return;
        }
    }
}

fn body(result: &Value) -> &Value {
    &result["structuredContent"]
}

#[test]
fn an_app_server_agent_holds_a_conversation_declines_its_approvals_and_cancels_a_turn() {
    let agent = AppAgent::new();
    let mut session = agent.session(&agent.served.token);

    let (first, _) = call(&mut session, 1, "prompt_send", json!({"prompt": "hello"}));
    assert_ne!(first["isError"], true, "{first}");
    let session_id = body(&first)["session_id"].as_str().unwrap().to_owned();
    let reply = body(&first)["reply"].as_str().unwrap().to_owned();
    let thread = reply
        .strip_prefix("echo: hello (turn 1 of ")
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{reply}"))
        .to_owned();
    let (second, _) = call(
        &mut session,
        2,
        "prompt_send",
        json!({"prompt": "again", "session_id": session_id}),
    );
    assert_eq!(
        body(&second)["reply"],
        format!("echo: again (turn 2 of {thread})"),
        "{second}"
    );

    // The agent asks to run a command: portcullis declines for it, and
    // says so to the caller.
    let (approve, progress) = call(
        &mut session,
        3,
        "prompt_send",
        json!({"prompt": "approve", "session_id": session_id}),
    );
    assert_eq!(
        body(&approve)["reply"],
        r#"approval: {"decision": "decline"}"#,
        "{approve}"
    );
    assert!(
        progress.iter().any(|m| m.contains(
            "portcullis declined the agent's request: item/commandExecution/requestApproval"
        )),
        "{progress:?}"
    );
    let (other, _) = call(
        &mut session,
        4,
        "prompt_send",
        json!({"prompt": "call a tool", "session_id": session_id}),
    );
    assert!(
        body(&other)["reply"].as_str().unwrap().contains("-32601"),
        "{other}"
    );

    // A turn in flight is interrupted by prompt_cancel from its caller.
    send_call(
        &mut session,
        5,
        "prompt_send",
        json!({"prompt": "hang", "session_id": session_id}),
    );
    wait_for_progress(&session, 5, "the agent runs `sleep 1000`");
    let (cancelled, _) = call(
        &mut session,
        6,
        "prompt_cancel",
        json!({"session_id": session_id}),
    );
    assert_eq!(body(&cancelled)["cancelled"], true, "{cancelled}");
    let (hung, _) = answer(&session, 5);
    assert_eq!(hung["isError"], true, "{hung}");
    assert_eq!(body(&hung)["failure"], "cancelled", "{hung}");

    // A turn the model fails: the caller gets the fixed failure, not the
    // agent's words (pass_errors is off).
    let (failed, _) = call(
        &mut session,
        7,
        "prompt_send",
        json!({"prompt": "fail", "session_id": session_id}),
    );
    assert_eq!(failed["isError"], true, "{failed}");
    assert_eq!(body(&failed)["failure"], "downstream_error", "{failed}");
    assert!(!failed.to_string().contains("quota"), "{failed}");

    let (got, _) = call(
        &mut session,
        8,
        "session_get",
        json!({"session_id": session_id}),
    );
    let states: Vec<&str> = body(&got)["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|turn| turn["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        [
            "completed",
            "completed",
            "completed",
            "completed",
            "cancelled",
            "failed"
        ],
        "{got}"
    );
    session.finish();

    let events = agent.events();
    let root = fs::canonicalize(agent.served.root.path()).unwrap();
    assert!(
        events.contains(&format!(
            "thread/start cwd={} sandbox=read-only",
            root.display()
        )),
        "{events}"
    );
    assert_eq!(events.matches("thread/start cwd").count(), 1, "{events}");
    assert!(events.contains("turn/interrupt"), "{events}");
    assert!(events.contains("interrupted "), "{events}");
    let outcomes: Vec<Value> = agent
        .served
        .records()
        .into_iter()
        .filter(|r| r["kind"] == "outcome" && r["body"]["bridge"].is_object())
        .collect();
    assert_eq!(outcomes.len(), 6, "{outcomes:?}");
    assert_eq!(outcomes[4]["body"]["bridge"]["state"], "cancelled");
}

#[test]
fn an_app_server_agent_that_dies_is_started_again_and_resumes_its_thread_for_its_owner_only() {
    let agent = AppAgent::new();
    let mut session = agent.session(&agent.served.token);
    let (first, _) = call(&mut session, 1, "prompt_send", json!({"prompt": "hello"}));
    let session_id = body(&first)["session_id"].as_str().unwrap().to_owned();
    let thread = body(&first)["reply"]
        .as_str()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .trim_end_matches(')')
        .to_owned();

    let (crashed, _) = call(
        &mut session,
        2,
        "prompt_send",
        json!({"prompt": "crash", "session_id": session_id}),
    );
    assert_eq!(crashed["isError"], true, "{crashed}");
    assert_eq!(body(&crashed)["failure"], "agent_unavailable", "{crashed}");
    assert!(
        crashed
            .to_string()
            .contains("fatal: the agent lost its model"),
        "the agent's last words reach its caller: {crashed}"
    );

    let (after, _) = call(
        &mut session,
        3,
        "prompt_send",
        json!({"prompt": "after", "session_id": session_id}),
    );
    assert_eq!(
        body(&after)["reply"],
        format!("echo: after (turn 1 of {thread})"),
        "{after}"
    );
    session.finish();
    let events = agent.events();
    assert_eq!(events.matches("started\n").count(), 2, "{events}");
    assert!(events.contains("thread/resume"), "{events}");

    // Another client sees nothing of it, and cannot continue it.
    let token = agent.other_client("other");
    let mut other = agent.session(&token);
    let (listed, _) = call(&mut other, 1, "sessions_list", json!({}));
    assert_eq!(body(&listed)["sessions"], json!([]), "{listed}");
    let (foreign, _) = call(
        &mut other,
        2,
        "prompt_send",
        json!({"prompt": "mine now", "session_id": session_id}),
    );
    assert_eq!(body(&foreign)["failure"], "session_not_found", "{foreign}");
    other.finish();
    assert!(!agent.events().contains("mine now"));
}

#[test]
fn an_app_server_agent_is_a_stdio_server_without_tool_mapping_keys() {
    let agent = AppAgent::new();
    for (servers, wanted) in [
        (
            "[servers.codex]\nurl = \"http://127.0.0.1:9/mcp\"\nkind = \"agent\"\npreset = \"codex-app-server\"\n",
            "an app-server agent speaks over its stdio",
        ),
        (
            "[servers.codex]\ncommand = \"codex\"\nargs = [\"app-server\"]\nkind = \"agent\"\npreset = \"codex-app-server\"\nreply_tool = \"codex-reply\"\n",
            "`reply_tool` maps MCP tools, and the app-server protocol has none",
        ),
        (
            "[servers.codex]\ncommand = \"codex\"\nargs = [\"app-server\"]\nkind = \"agent\"\npreset = \"codex-app-server\"\nstart_arguments = { cwd = \"/\" }\n",
            "`start_arguments` may not set `cwd`",
        ),
    ] {
        agent.served.tree.write_policy("servers.toml", servers);
        let run = agent.served.tree.run(&["policy", "validate"]);
        // 3: the set does not validate.
        assert_eq!(run.code, 3, "{run:?}");
        assert!(run.stderr.contains(wanted), "{run:?}");
    }
}

/// The current `@openai/codex`, installed into the target folder; `None`
/// (with a message) without node.
fn codex() -> Option<PathBuf> {
    if !have("node") {
        eprintln!("SKIPPED: node is not installed; the real codex app-server test needs it");
        return None;
    }
    let dir = npm_install(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/agents/app-server/package.json"),
        "codex-app-server",
    );
    Some(dir.join("node_modules/.bin/codex"))
}

/// Declares the real Codex as the agent, with its own home holding a model
/// provider at `base_url` whose key is read from `key_variable`.
fn real_codex(served: &Served, codex: &Path, base_url: &str, key: Option<&str>) {
    let home = served.tree.dir.path().join("codex-home");
    fs::create_dir_all(&home).unwrap();
    fs::write(
        home.join("config.toml"),
        format!(
            "model_provider = \"local\"\n[model_providers.local]\nname = \"local\"\nbase_url = \"{base_url}\"\nenv_key = \"PORTCULLIS_TEST_MODEL_KEY\"\nstream_max_retries = 0\nrequest_max_retries = 0\n"
        ),
    )
    .unwrap();
    let key = key
        .map(|key| format!(", PORTCULLIS_TEST_MODEL_KEY = \"{key}\""))
        .unwrap_or_default();
    served.tree.write_policy(
        "servers.toml",
        &format!(
            "[servers.codex]\ncommand = \"{}\"\nargs = [\"app-server\"]\nenv = {{ CODEX_HOME = \"{home}\"{key} }}\nkind = \"agent\"\npreset = \"codex-app-server\"\nstart_arguments = {{ sandbox = \"read-only\", approvalPolicy = \"never\" }}\nwritable = [\"{home}\"]\nnetwork = true\n",
            codex.display(),
            home = home.display(),
        ),
    );
}

#[test]
fn the_current_codex_app_server_starts_threads_fails_a_turn_without_a_key_and_interrupts_one() {
    let Some(codex) = codex() else {
        return;
    };
    // Without the provider's key the turn fails at once.
    let served = Served::new(ALLOW_BRIDGE, "paired");
    real_codex(&served, &codex, "http://127.0.0.1:9/v1", None);
    let mut command = served.command();
    command.stderr(Stdio::null());
    let mut session = Session::start_command(command);
    session.initialize();
    let (failed, _) = call(&mut session, 1, "prompt_send", json!({"prompt": "say hi"}));
    assert_eq!(failed["isError"], true, "{failed}");
    assert_eq!(body(&failed)["failure"], "downstream_error", "{failed}");
    assert!(
        !failed.to_string().contains("PORTCULLIS_TEST_MODEL_KEY"),
        "the agent's own error text stays behind: {failed}"
    );
    let (listed, _) = call(&mut session, 2, "sessions_list", json!({}));
    assert_eq!(body(&listed)["sessions"][0]["state"], "failed", "{listed}");
    session.finish();

    // With a key and a model endpoint that never answers, the turn waits:
    // prompt_cancel interrupts it through the protocol.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", silent.local_addr().unwrap());
    let served = Served::new(ALLOW_BRIDGE, "paired");
    real_codex(&served, &codex, &url, Some("not-a-real-key"));
    let mut command = served.command();
    command.stderr(Stdio::null());
    let mut session = Session::start_command(command);
    session.initialize();
    send_call(&mut session, 1, "prompt_send", json!({"prompt": "say hi"}));
    // The heartbeat says the turn is under way with the agent.
    wait_for_progress(&session, 1, "waiting for the agent's reply");
    let (listed, _) = call(&mut session, 2, "sessions_list", json!({}));
    let session_id = body(&listed)["sessions"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (cancelled, _) = call(
        &mut session,
        3,
        "prompt_cancel",
        json!({"session_id": session_id}),
    );
    assert_eq!(body(&cancelled)["cancelled"], true, "{cancelled}");
    let (ended, _) = answer(&session, 1);
    assert_eq!(body(&ended)["failure"], "cancelled", "{ended}");
    session.finish();
    drop(silent);
}
