//! Long calls as tasks (the 2026-07-28 tasks extension), over Streamable
//! HTTP with raw requests: advertised, made only for a client that declares
//! the extension and only once the call is allowed, owned by the client
//! that made it, cancellable, and recorded.

use std::fs;
use std::time::Duration;

use serde_json::{Value, json};

use crate::bridge::{ALLOW_BRIDGE, Agent};
use crate::http::{HttpServer, add_client, client, modern, modern_declaring};
use crate::util::{ALLOW_BUILTIN, Served, wait_for_record};

const TASKS: &str = "io.modelcontextprotocol/tasks";

fn declaring() -> Value {
    json!({"extensions": {TASKS: {}}})
}

/// The task's state once it ended, polled with `tasks/get` as a client
/// does (the protocol's own way to learn it).
async fn ended(http: &reqwest::Client, url: &str, token: &str, task: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let got = modern_declaring(
            http,
            url,
            token,
            (90, "tasks/get", json!({"taskId": task})),
            declaring(),
        )
        .await
        .response(90);
        let status = got["result"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if ["completed", "failed", "cancelled"].contains(&status.as_str()) {
            return got["result"].clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "never ended: {got}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Cancels `task` as its client does (`tasks/cancel` is acknowledged with
/// a complete, empty result), and its state once it ended.
async fn cancel(http: &reqwest::Client, url: &str, token: &str, id: i64, task: &str) -> Value {
    let ack = modern_declaring(
        http,
        url,
        token,
        (id, "tasks/cancel", json!({"taskId": task})),
        declaring(),
    )
    .await
    .response(id);
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    ended(http, url, token, task).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_call_becomes_a_task_only_for_a_client_that_asks_and_only_its_own() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    for i in 0..20 {
        fs::write(served.root.path().join(format!("f{i}.txt")), "hay needle\n").unwrap();
    }
    let other = add_client(&served, "other", "paired");
    let server = HttpServer::start(&served, &[]);
    let (http, url, token) = (client(), server.url(), served.token.clone());

    let discovered = modern(&http, &url, &token, 1, "server/discover", json!({})).await;
    let extensions = &discovered.response(1)["result"]["capabilities"]["extensions"];
    assert!(extensions[TASKS].is_object(), "{extensions}");

    let search = json!({"name": "search", "arguments": {"pattern": "needle"}});
    let plain = modern(&http, &url, &token, 2, "tools/call", search.clone()).await;
    let plain = plain.response(2);
    assert_eq!(plain["result"]["resultType"], "complete", "{plain}");
    assert!(plain["result"].get("taskId").is_none(), "{plain}");

    let created = modern_declaring(&http, &url, &token, (3, "tools/call", search), declaring())
        .await
        .response(3);
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    assert!(
        created["result"]["ttlMs"].as_u64().unwrap() > 0,
        "{created}"
    );

    let done = ended(&http, &url, &token, &task).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["files_searched"],
        plain["result"]["structuredContent"]["files_searched"],
        "the task's result is the call's: {done}"
    );

    // Another client, and an id nobody made, read the same: unknown.
    for (who, id) in [(&other, task.as_str()), (&token, "no-such-task")] {
        for (n, method) in [(4, "tasks/get"), (5, "tasks/cancel")] {
            let got = modern_declaring(
                &http,
                &url,
                who,
                (n, method, json!({"taskId": id})),
                declaring(),
            )
            .await
            .response(n);
            assert_eq!(got["error"]["code"], -32602, "{method} {id}: {got}");
        }
    }
    // Without the extension declared, the task methods are refused.
    let undeclared = modern(&http, &url, &token, 6, "tasks/get", json!({"taskId": task}))
        .await
        .response(6);
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");
    // Cancelling an ended task is acknowledged, and changes nothing.
    let ack = modern_declaring(
        &http,
        &url,
        &token,
        (7, "tasks/cancel", json!({"taskId": task})),
        declaring(),
    )
    .await
    .response(7);
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert!(ack["result"].get("status").is_none(), "{ack}");

    // A call refused before it runs is answered at once: no task.
    let outside = json!({"name": "search", "arguments": {"pattern": "x", "path": "/etc"}});
    let refused = modern_declaring(&http, &url, &token, (8, "tools/call", outside), declaring())
        .await
        .response(8);
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(refused["result"].get("taskId").is_none(), "{refused}");
    server.stop();

    // The task's call was decided before it ran, and its end recorded.
    let decided = wait_for_record(&served.audit_log(), |r| {
        r["kind"] == "decision"
            && r["body"]["request_id"] == "3"
            && r["body"]["action"] == "call_tool"
    });
    let seq = decided["seq"].clone();
    wait_for_record(&served.audit_log(), |r| {
        r["kind"] == "outcome"
            && r["body"]["decision_seq"] == seq
            && r["body"]["status"] == "executed"
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_task_stops_the_agent_and_is_recorded() {
    let agent = Agent::new(ALLOW_BRIDGE, "paired");
    let server = HttpServer::start(&agent.served, &[]);
    let (http, url, token) = (client(), server.url(), agent.served.token.clone());
    let slow = json!({"name": "prompt_send", "arguments": {"prompt": "slow one"}});
    let created = modern_declaring(&http, &url, &token, (1, "tools/call", slow), declaring())
        .await
        .response(1);
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while agent.started() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the agent never started the turn"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let done = cancel(&http, &url, &token, 2, &task).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    server.stop();
    let events = fs::read_to_string(&agent.events).unwrap();
    assert!(
        events.contains("cancelled"),
        "the agent was not told: {events}"
    );
    let decided = wait_for_record(&agent.served.audit_log(), |r| {
        r["kind"] == "decision"
            && r["body"]["request_id"] == "1"
            && r["body"]["action"] == "call_tool"
    });
    let seq = decided["seq"].clone();
    wait_for_record(&agent.served.audit_log(), |r| {
        r["kind"] == "outcome"
            && r["body"]["decision_seq"] == seq
            && r["body"]["status"] == "cancelled"
    });
}

const ALLOW_TOOLS: &str = r#"
@id("allow.tools")
@reason("test clients may use the built-in and downstream tools")
permit (
  principal,
  action in Portcullis::Action::"use_tool",
  resource
);
"#;

/// A served setup fronting `tests/interop/servers/tasked.py`, a 2026-07-28
/// server that runs its long calls as tasks, pinned; and the file its
/// events go to.
fn tasked_downstream() -> (Served, std::path::PathBuf) {
    tasked_downstream_waiting("60s")
}

/// The same, with the longest a call to it may run (its `timeout` too).
fn tasked_downstream_waiting(longest: &str) -> (Served, std::path::PathBuf) {
    let served = Served::new(ALLOW_TOOLS, "paired");
    let python = crate::interop_python::venv().join("bin/python");
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/servers/tasked.py");
    let events = served.tree.dir.path().join("events.txt");
    let servers = format!(
        r#"
[servers.long]
command = "{python}"
args = ["{script}"]
env = {{ EVENTS = "{events}" }}
protocol = "2026-07-28"
timeout = "{longest}"
max_duration = "{longest}"
writable = ["{state}"]

[servers.long.tools."*"]
effects = ["read"]
"#,
        python = python.display(),
        script = script.display(),
        events = events.display(),
        state = served.tree.dir.path().display(),
    );
    served.tree.write_policy("servers.toml", &servers);
    let root = served.root.path().display().to_string();
    let flags = served.tree.flags();
    let mut args = vec!["servers", "pin", "--root", root.as_str()];
    args.extend(flags.iter().map(String::as_str));
    let pinned = crate::util::portcullis(&args);
    assert_eq!(pinned.code, 0, "{pinned:?}");
    (served, events)
}

/// Waits until the downstream notes an event containing `needle`.
async fn noted(events: &std::path::Path, needle: &str, otherwise: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !fs::read_to_string(events)
        .unwrap_or_default()
        .contains(needle)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{otherwise}: {}",
            fs::read_to_string(events).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxied_call_is_a_task_when_its_downstream_runs_tasks() {
    let (served, events) = tasked_downstream();
    let other = add_client(&served, "other", "paired");
    let server = HttpServer::start(&served, &[]);
    let (http, url, token) = (client(), server.url(), served.token.clone());

    // Asked as a task, the call is one of portcullis's own, owned by its
    // client, with the downstream's result once its task ends.
    let job = json!({"name": "long__job", "arguments": {"text": "the report"}});
    let created = modern_declaring(
        &http,
        &url,
        &token,
        (1, "tools/call", job.clone()),
        declaring(),
    )
    .await
    .response(1);
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    assert!(
        !task.starts_with("downstream-"),
        "the downstream's id leaked: {created}"
    );
    let done = ended(&http, &url, &token, &task).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "done: the report",
        "{done}"
    );
    let foreign = modern_declaring(
        &http,
        &url,
        &other,
        (2, "tasks/get", json!({"taskId": task})),
        declaring(),
    )
    .await
    .response(2);
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");

    // Asked plainly, portcullis follows the downstream's task itself and
    // answers with the result.
    let plain = modern(&http, &url, &token, 3, "tools/call", job)
        .await
        .response(3);
    assert_eq!(plain["result"]["resultType"], "complete", "{plain}");
    assert_eq!(
        plain["result"]["_meta"]["portcullis/origin"],
        json!({"source": "downstream", "server": "long", "tool": "job"}),
        "{plain}"
    );
    assert_eq!(
        plain["result"]["content"][0]["text"], "done: the report",
        "{plain}"
    );
    assert_eq!(
        plain["result"]["_meta"]["portcullis/origin"],
        json!({"source": "downstream", "server": "long", "tool": "job"}),
        "{plain}"
    );

    // Built-in tools that are not long stay plain calls for a client that
    // asks for tasks.
    let list = json!({"name": "list_dir", "arguments": {"path": "."}});
    let listed = modern_declaring(&http, &url, &token, (4, "tools/call", list), declaring())
        .await
        .response(4);
    assert_eq!(listed["result"]["resultType"], "complete", "{listed}");

    // Cancelling the task cancels the downstream's, and is recorded.
    let hold = json!({"name": "long__hold", "arguments": {}});
    let held = modern_declaring(&http, &url, &token, (5, "tools/call", hold), declaring())
        .await
        .response(5);
    assert_eq!(held["result"]["resultType"], "task", "{held}");
    let held = held["result"]["taskId"].as_str().unwrap().to_owned();
    noted(&events, "for hold", "the downstream never made its task").await;
    let done = cancel(&http, &url, &token, 6, &held).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    noted(
        &events,
        "cancelled downstream-",
        "the downstream's task was not cancelled",
    )
    .await;
    server.stop();
    let decided = wait_for_record(&served.audit_log(), |r| {
        r["kind"] == "decision"
            && r["body"]["request_id"] == "5"
            && r["body"]["action"] == "call_tool"
    });
    let seq = decided["seq"].clone();
    wait_for_record(&served.audit_log(), |r| {
        r["kind"] == "outcome"
            && r["body"]["decision_seq"] == seq
            && r["body"]["status"] == "cancelled"
    });
}

/// A server whose answer (a task it made) crossed the cancellation of
/// its call on the wire takes the cancellation as too late for it: the
/// task is cancelled when the answer comes, or it would run on unfollowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_made_as_its_call_is_cancelled_is_cancelled_downstream() {
    let (served, events) = tasked_downstream();
    let server = HttpServer::start(&served, &[]);
    let (http, url, token) = (client(), server.url(), served.token.clone());
    let late = json!({"name": "long__late", "arguments": {}});
    let created = modern_declaring(&http, &url, &token, (1, "tools/call", late), declaring())
        .await
        .response(1);
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    noted(&events, "late asked", "the downstream was never asked").await;
    let done = cancel(&http, &url, &token, 2, &task).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    noted(&events, "for late", "the late answer was never written").await;
    noted(
        &events,
        "cancelled downstream-1",
        "the task in the late answer was not cancelled",
    )
    .await;
}

/// The same when portcullis itself gives up on the call: past its
/// server's longest allowed duration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_made_as_its_call_runs_out_of_time_is_cancelled_downstream() {
    let (served, events) = tasked_downstream_waiting("2s");
    let server = HttpServer::start(&served, &[]);
    let (http, url, token) = (client(), server.url(), served.token.clone());
    let late = json!({"name": "long__late", "arguments": {}});
    let answered = modern(&http, &url, &token, 1, "tools/call", late)
        .await
        .response(1);
    assert!(
        answered["result"]["isError"] == true || answered["error"].is_object(),
        "{answered}"
    );
    noted(
        &events,
        "cancelled downstream-1",
        "the task in the late answer was not cancelled",
    )
    .await;
}

/// A server that never answers the cancellation of one late task holds
/// back the cancellation of the next no longer than its request timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_task_whose_cancellation_is_never_acknowledged_holds_back_no_other() {
    let (served, events) = tasked_downstream_waiting("2s");
    let server = HttpServer::start(&served, &[]);
    let (http, url, token) = (client(), server.url(), served.token.clone());
    let mut calls = 0;
    for tool in ["long__stubborn", "long__late"] {
        calls += 1;
        let call = json!({"name": tool, "arguments": {}});
        let answered = modern(&http, &url, &token, calls, "tools/call", call)
            .await
            .response(calls);
        assert!(
            answered["result"]["isError"] == true || answered["error"].is_object(),
            "{answered}"
        );
    }
    noted(
        &events,
        "not answering the cancellation of downstream-1",
        "the stubborn task was never cancelled",
    )
    .await;
    noted(
        &events,
        "cancelled downstream-2",
        "the stubborn server's silence held back the next cancellation",
    )
    .await;
}

#[test]
fn a_2026_downstream_that_asks_for_input_is_answered_through_the_decided_relay() {
    let (served, events) = tasked_downstream();
    let ask = |session: &mut crate::util::Session, id: i64| {
        session.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "long__confirm", "arguments": {}}})
            .to_string(),
        );
    };
    let start = |served: &Served| {
        let mut session = crate::util::Session::start(served);
        session.send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"raw","version":"1"}}}"#);
        assert_eq!(session.next()["id"], 0);
        session.send(crate::util::INITIALIZED);
        session
    };

    // No policy lets the server ask this client: its question is declined
    // for it, and the client never sees it.
    let mut session = start(&served);
    ask(&mut session, 1);
    let answer = loop {
        let frame = session.next();
        assert_ne!(
            frame["method"], "elicitation/create",
            "relayed without a policy: {frame}"
        );
        if frame["id"] == 1 {
            break frame;
        }
    };
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "answered decline",
        "{answer}"
    );
    session.finish();

    // A policy lets it: the question reaches the client, its answer goes
    // back down with the server's state, and the call completes.
    let relay = r#"
@id("allow.long.elicitation")
@reason("the long server may ask this client's user")
permit (
  principal,
  action == Portcullis::Action::"relay_request",
  resource == Portcullis::Server::"long"
)
when { context.method == "elicitation/create" };
"#;
    served
        .tree
        .write_policy("20_allowlist.cedar", &format!("{ALLOW_TOOLS}\n{relay}"));
    let mut session = start(&served);
    ask(&mut session, 2);
    let asked = loop {
        let frame = session.next();
        if frame["method"] == "elicitation/create" {
            break frame;
        }
        assert_ne!(frame["id"], 2, "answered without asking: {frame}");
    };
    assert_eq!(asked["params"]["message"], "Go ahead?", "{asked}");
    session.send(
        &json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"action": "accept", "content": {"ok": true}}})
        .to_string(),
    );
    let answer = loop {
        let frame = session.next();
        if frame["id"] == 2 {
            break frame;
        }
    };
    assert_eq!(
        answer["result"]["content"][0]["text"], "answered accept",
        "{answer}"
    );
    session.finish();
    let noted = fs::read_to_string(&events).unwrap();
    assert!(
        noted.contains("confirm answered accept with state"),
        "{noted}"
    );
    let relayed: Vec<Value> = fs::read_to_string(served.audit_log())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|r| r["body"]["action"] == "relay_request")
        .collect();
    assert_eq!(relayed.len(), 2, "{relayed:?}");
    assert_eq!(relayed[0]["body"]["decision"], "deny");
    assert_eq!(relayed[1]["body"]["decision"], "allow");
    assert_eq!(relayed[1]["body"]["tool"], "elicitation/create");
}

#[test]
fn a_2026_downstream_that_changes_a_tool_is_caught_on_its_stream_of_changes() {
    let (served, _events) = tasked_downstream();
    let mut session = crate::util::Session::start(&served);
    session.initialize();
    let call = |session: &mut crate::util::Session, id: i64, name: &str| {
        session.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": {"text": "x"}}})
            .to_string(),
        );
        loop {
            let frame = session.next();
            if frame["id"] == id {
                break frame;
            }
        }
    };
    let before = call(&mut session, 1, "long__job");
    assert_eq!(
        before["result"]["content"][0]["text"], "done: x",
        "{before}"
    );
    let renamed = call(&mut session, 2, "long__rename");
    assert_eq!(
        renamed["result"]["content"][0]["text"], "renamed",
        "{renamed}"
    );
    // The change arrives on the listen stream; once portcullis has listed
    // the tools again, the changed one is refused.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut id = 3;
    loop {
        let answer = call(&mut session, id, "long__job");
        if answer["result"]["structuredContent"]["reason_code"] == "tool_changed" {
            break;
        }
        assert_eq!(
            answer["result"]["content"][0]["text"], "done: x",
            "{answer}"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the change was never noticed"
        );
        id += 1;
    }
    session.finish();
}
