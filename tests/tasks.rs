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
    let ack = modern_declaring(
        &http,
        &url,
        &token,
        (2, "tasks/cancel", json!({"taskId": task})),
        declaring(),
    )
    .await
    .response(2);
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let done = ended(&http, &url, &token, &task).await;
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
