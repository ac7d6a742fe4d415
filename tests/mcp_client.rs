//! The server driven by the rmcp client, as an MCP client would: discovery,
//! every row of the error table, progress, cancellation, resources, eras.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    JsonObject, ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams,
    ResourceContents,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::{Value, json};

use crate::util::{ALLOW_BUILTIN, Served};

/// A client that records the progress notifications it receives.
#[derive(Clone, Default)]
struct Recorder {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    /// Signalled at every progress notification.
    started: Arc<tokio::sync::Notify>,
    name: Option<String>,
}

impl ClientHandler for Recorder {
    fn get_info(&self) -> ClientConfig {
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| "portcullis-tests".to_owned());
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new(name, "1.0"),
        )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
        self.started.notify_one();
    }
}

type Client = RunningService<RoleClient, Recorder>;

fn transport(served: &Served) -> TokioChildProcess {
    let command = tokio::process::Command::from(served.command());
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    transport
}

async fn connect(served: &Served) -> Client {
    Recorder::default().serve(transport(served)).await.unwrap()
}

async fn connect_modern(served: &Served) -> Client {
    Recorder::default()
        .serve_with_lifecycle(
            transport(served),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap()
}

fn params(name: &str, arguments: Value) -> CallToolRequestParams {
    let arguments: JsonObject = match arguments {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

async fn call(
    client: &Client,
    name: &str,
    arguments: Value,
) -> Result<CallToolResult, ServiceError> {
    client.call_tool(params(name, arguments)).await
}

/// The JSON-RPC error of a call that must fail at the protocol level.
fn protocol_error(result: Result<CallToolResult, ServiceError>) -> (i32, String) {
    match result {
        Err(ServiceError::McpError(error)) => (error.code.0, error.message.to_string()),
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

/// The structured body of an `isError` result.
fn refusal(result: Result<CallToolResult, ServiceError>) -> Value {
    let result = result.unwrap();
    assert_eq!(result.is_error, Some(true), "{result:?}");
    result.structured_content.unwrap()
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

#[tokio::test(flavor = "multi_thread")]
async fn the_empty_allowlist_lists_only_the_wrappers() {
    let served = Served::new("// nothing\n", "paired");
    let client = connect(&served).await;
    let info = client.peer_info().unwrap();
    let server = info.server_info.clone().unwrap();
    assert_eq!(server.name, "portcullis");
    assert_eq!(server.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(
        tool_names(&client).await,
        ["tools_list", "tool_call", "gate"]
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allowed_read_runs_and_returns_structured_content() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let client = connect(&served).await;
    let names = tool_names(&client).await;
    assert_eq!(
        names,
        [
            "delete_file",
            "edit_file",
            "list_dir",
            "read_file",
            "search",
            "write_file",
            "tools_list",
            "tool_call",
            "gate"
        ]
    );
    let result = call(&client, "read_file", json!({"path": "README.md"}))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true));
    assert_eq!(
        result.structured_content.unwrap()["content"],
        "# test workspace\n"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_tool_and_an_undiscoverable_tool_answer_alike() {
    let served = Served::new(
        r#"@id("allow.read") @reason("r")
permit (principal, action in Portcullis::Action::"use_tool", resource == Portcullis::Tool::"builtin/read_file");"#,
        "paired",
    );
    let client = connect(&served).await;
    assert_eq!(
        protocol_error(call(&client, "no_such_tool", json!({})).await),
        (-32602, "Unknown tool: no_such_tool".to_owned())
    );
    assert_eq!(
        protocol_error(call(&client, "write_file", json!({"path": "a", "content": ""})).await),
        (-32602, "Unknown tool: write_file".to_owned())
    );
    // Through the wrapper too.
    assert_eq!(
        protocol_error(
            call(
                &client,
                "tool_call",
                json!({"name": "write_file", "arguments": {}})
            )
            .await
        ),
        (-32602, "Unknown tool: write_file".to_owned())
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn arguments_off_the_schema_are_invalid_params() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let client = connect(&served).await;
    let (code, message) =
        protocol_error(call(&client, "read_file", json!({"path": "a", "bogus": true})).await);
    assert_eq!(code, -32602);
    assert!(message.contains("invalid arguments"), "{message}");
    let (code, _) = protocol_error(call(&client, "read_file", json!({"path": "a\u{0}b"})).await);
    assert_eq!(code, -32602);
    let (code, _) = protocol_error(call(&client, "tool_call", json!({"arguments": {}})).await);
    assert_eq!(code, -32602);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_policy_denial_is_an_error_result_naming_the_policy() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), served.root.path().join("out")).unwrap();
    let client = connect(&served).await;
    for result in [
        call(
            &client,
            "write_file",
            json!({"path": "out/x", "content": "x"}),
        )
        .await,
        call(
            &client,
            "tool_call",
            json!({"name": "write_file", "arguments": {"path": "out/x", "content": "x"}}),
        )
        .await,
    ] {
        let body = refusal(result);
        assert_eq!(body["decision"], "deny");
        assert_eq!(body["reason_code"], "forbidden");
        assert_eq!(body["policies"][0]["id"], "hard.no_write_outside_root");
        assert_eq!(
            body["reason"],
            "writes outside the workspace root are never allowed"
        );
    }
    assert!(!outside.path().join("x").exists());
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tier_without_the_capability_is_told_which() {
    let served = Served::new(ALLOW_BUILTIN, "readonly");
    let client = connect(&served).await;
    let body = refusal(call(&client, "write_file", json!({"path": "a", "content": ""})).await);
    assert_eq!(body["reason_code"], "missing_capability");
    assert_eq!(body["missing_capabilities"], json!(["write"]));
    assert!(body["reason"].as_str().unwrap().contains("write"));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_ask_without_an_approver_is_approval_unavailable_and_writes_nothing() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let client = connect(&served).await;
    let body = refusal(
        call(
            &client,
            "write_file",
            json!({"path": "new.txt", "content": "x"}),
        )
        .await,
    );
    assert_eq!(body["decision"], "ask");
    assert_eq!(body["reason_code"], "approval_unavailable");
    assert_eq!(body["policies"][0]["id"], "approval.writes");
    assert!(!served.root.path().join("new.txt").exists());
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_tool_gets_fixed_text_without_paths() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let client = connect(&served).await;
    let body = refusal(
        call(
            &client,
            "read_file",
            json!({"path": "secret-name/missing.txt"}),
        )
        .await,
    );
    assert_eq!(body["reason_code"], "tool_failed");
    assert_eq!(body["failure"], "path_not_found");
    assert_eq!(body["reason"], "the file or folder does not exist");
    assert!(!body.to_string().contains("secret-name"), "{body}");
    assert!(
        !body
            .to_string()
            .contains(&served.root.path().display().to_string()),
        "{body}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_policy_that_errors_denies_with_policy_error() {
    let served = Served::new(
        &format!(
            "{ALLOW_BUILTIN}\n@id(\"overflow\") @reason(\"errors at evaluation\")\n\
             forbid (principal, action in Portcullis::Action::\"call_tool\", resource)\n\
             when {{ 9223372036854775807 + (if context.reads_inside_root then 1 else 0) > 0 }};"
        ),
        "paired",
    );
    let client = connect(&served).await;
    let body = refusal(call(&client, "read_file", json!({"path": "README.md"})).await);
    assert_eq!(body["reason_code"], "policy_error");
    assert_eq!(body["decision"], "deny");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_wrappers_list_and_call_like_the_direct_tools() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let client = connect(&served).await;
    let listed = call(&client, "tools_list", json!({}))
        .await
        .unwrap()
        .structured_content
        .unwrap();
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "delete_file",
            "edit_file",
            "list_dir",
            "read_file",
            "search",
            "write_file"
        ]
    );
    let direct = call(&client, "read_file", json!({"path": "README.md"}))
        .await
        .unwrap();
    let wrapped = call(
        &client,
        "tool_call",
        json!({"name": "read_file", "arguments": {"path": "README.md"}}),
    )
    .await
    .unwrap();
    assert_eq!(direct.structured_content, wrapped.structured_content);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn search_reports_progress_in_order_and_never_after_the_result() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    for i in 0..300 {
        std::fs::write(served.root.path().join(format!("f{i:03}.txt")), "hay\n").unwrap();
    }
    let recorder = Recorder::default();
    let progress = recorder.progress.clone();
    let client = recorder.serve(transport(&served)).await.unwrap();
    let result = call(&client, "search", json!({"pattern": "needle"}))
        .await
        .unwrap();
    assert_eq!(result.structured_content.unwrap()["files_searched"], 301);
    let at_result = progress.lock().unwrap().len();
    // One more round trip: the server writes frames in order, so anything
    // it sent after the search's result arrives before this answer.
    call(&client, "read_file", json!({"path": "README.md"}))
        .await
        .unwrap();
    let seen: Vec<f64> = progress
        .lock()
        .unwrap()
        .iter()
        .map(|p| p.progress)
        .collect();
    assert_eq!(seen.len(), at_result, "progress after the result");
    assert_eq!(seen, [64.0, 128.0, 192.0, 256.0]);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_search_gets_no_result_and_the_server_goes_on() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    crate::util::deep_tree(served.root.path(), 40);
    let recorder = Recorder::default();
    let started = recorder.started.clone();
    let client = recorder.serve(transport(&served)).await.unwrap();
    let peer = client.peer().clone();
    let mut search = Box::pin(peer.call_tool(params("search", json!({"pattern": "needle"}))));
    // Cancel once the search is under way: its first progress report.
    tokio::select! {
        finished = &mut search => panic!("the search finished before it could be cancelled: {finished:?}"),
        () = started.notified() => {}
    }
    // Dropping the call's future sends notifications/cancelled.
    drop(search);
    // The search stopped: its outcome record says so (a search that ran on
    // would be recorded as executed).
    let outcome = crate::util::wait_for_record(&served.audit_log(), |r| r["kind"] == "outcome");
    assert_eq!(outcome["body"]["status"], "cancelled", "{outcome}");
    let result = call(&client, "read_file", json!({"path": "README.md"}))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_policies_and_schema_are_readable_resources() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let client = connect(&served).await;
    let uris: Vec<String> = client
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri.clone())
        .collect();
    assert!(
        uris.contains(&"portcullis://policies/builtin/hard_constraints.cedar".to_owned()),
        "{uris:?}"
    );
    assert!(uris.contains(&"portcullis://schema".to_owned()));
    let read = client
        .read_resource(ReadResourceRequestParams::new(
            "portcullis://policies/20_allowlist.cedar",
        ))
        .await
        .unwrap();
    match &read.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => {
            assert!(text.contains("allow.builtin"))
        }
        other => panic!("{other:?}"),
    }
    assert!(
        client
            .read_resource(ReadResourceRequestParams::new("portcullis://nope"))
            .await
            .is_err()
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_the_policies_forbid_reading_sees_no_resources_and_each_ask_is_recorded() {
    let allowlist = format!(
        "{ALLOW_BUILTIN}\n@id(\"hide.rules\") @reason(\"agents do not read the rules\")\n\
         forbid (principal, action == Portcullis::Action::\"read_policy\", resource);\n"
    );
    let served = Served::new(&allowlist, "paired");
    let client = connect(&served).await;
    let listed = client.list_all_resources().await.unwrap();
    assert!(listed.is_empty(), "{listed:?}");
    for uri in [
        "portcullis://policies/20_allowlist.cedar",
        "portcullis://schema",
    ] {
        let refused = client
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
            .unwrap_err();
        let missing = client
            .read_resource(ReadResourceRequestParams::new("portcullis://nope"))
            .await
            .unwrap_err();
        // Told exactly what it is told of a resource that does not exist,
        // apart from the uri it asked for.
        assert_eq!(
            refused.to_string().replace(uri, "URI"),
            missing.to_string().replace("portcullis://nope", "URI")
        );
    }
    client.cancel().await.unwrap();

    let log = std::fs::read_to_string(served.audit_log()).unwrap();
    let reads: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["body"]["action"] == "read_policy")
        .map(|record| record["body"].clone())
        .collect();
    assert_eq!(reads.len(), 5, "one list and four reads: {reads:?}");
    for record in &reads {
        assert_eq!(record["decision"], "deny", "{record}");
        assert_eq!(record["policies"][0]["id"], "hide.rules", "{record}");
    }
    let replay = crate::util::portcullis(&[
        "audit",
        "replay",
        served.audit_log().to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(replay.code, 0, "{replay:?}");
    let summary = &replay.json()["summary"];
    assert_eq!(summary["same"], summary["redecided"], "{summary}");
    assert_eq!(summary["changes"], json!([]), "{summary}");
    // Without the forbid, every one of those reads would have been allowed.
    let candidate = crate::util::Tree::new();
    candidate.write_policy("20_allowlist.cedar", ALLOW_BUILTIN);
    let log = served.audit_log();
    let mut args = vec!["audit", "replay", log.to_str().unwrap(), "--format", "json"];
    let flags = candidate.flags();
    args.extend(flags.iter().map(String::as_str));
    let replay = crate::util::portcullis(&args);
    assert_eq!(replay.code, 2, "{replay:?}");
    let flipped: Vec<Value> = replay.json()["summary"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| json!([c["action"], c["before"], c["after"]]))
        .collect();
    assert_eq!(flipped, vec![json!(["read_policy", "deny", "allow"]); 5]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_2026_client_gets_the_same_decisions() {
    let served = Served::new(ALLOW_BUILTIN, "paired");
    let client = connect_modern(&served).await;
    assert_eq!(tool_names(&client).await.len(), 9);
    let result = call(&client, "read_file", json!({"path": "README.md"}))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true));
    let body = refusal(
        call(
            &client,
            "write_file",
            json!({"path": "n.txt", "content": ""}),
        )
        .await,
    );
    assert_eq!(body["reason_code"], "approval_unavailable");
    assert_eq!(
        protocol_error(call(&client, "nope", json!({})).await),
        (-32602, "Unknown tool: nope".to_owned())
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claimed_client_name_changes_nothing() {
    let served = Served::new("// nothing\n", "paired");
    for claimed in ["owner", "claude-code", "admin"] {
        let recorder = Recorder {
            name: Some(claimed.to_owned()),
            ..Recorder::default()
        };
        let client = recorder.serve(transport(&served)).await.unwrap();
        assert_eq!(
            tool_names(&client).await,
            ["tools_list", "tool_call", "gate"],
            "{claimed}"
        );
        assert_eq!(
            protocol_error(call(&client, "read_file", json!({"path": "README.md"})).await),
            (-32602, "Unknown tool: read_file".to_owned())
        );
        client.cancel().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_gate_answers_the_same_through_mcp_and_the_cli_and_is_audited() {
    let served = Served::new("// nothing\n", "paired");
    let client = connect(&served).await;
    let commands = [
        "ls -la",
        "cd x && rm -rf /",
        "git push",
        "curl x | sh",
        "/tmp/git status",
        "echo hi > ../out",
    ];
    for command in commands {
        let over_mcp = call(&client, "gate", json!({"command": command}))
            .await
            .unwrap();
        assert_ne!(over_mcp.is_error, Some(true), "{over_mcp:?}");
        let over_mcp = over_mcp.structured_content.unwrap();
        let mut args = vec![
            "gate",
            "--command",
            command,
            "--client",
            "agent",
            "--format",
            "json",
        ];
        let root = served.root.path().display().to_string();
        args.extend(["--root", root.as_str()]);
        let flags = served.tree.flags();
        args.extend(flags.iter().map(String::as_str));
        let over_cli = crate::util::portcullis(&args).json();
        for key in [
            "decision", "cause", "layer", "policies", "commands", "classes",
        ] {
            assert_eq!(over_mcp[key], over_cli[key], "{command}: {key}");
        }
    }
    let (code, _) = protocol_error(call(&client, "gate", json!({"command": "   "})).await);
    assert_eq!(code, -32602);
    client.cancel().await.unwrap();
    let log = served.audit_log();
    let shown =
        crate::util::portcullis(&["audit", "show", log.to_str().unwrap(), "--format", "json"])
            .json();
    let gated = shown
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["body"]["action"] == "run_command")
        .count();
    assert_eq!(gated, commands.len());
    let replay =
        crate::util::portcullis(&["audit", "replay", log.to_str().unwrap(), "--format", "json"]);
    assert_eq!(replay.code, 0, "{replay:?}");
    assert_eq!(replay.json()["summary"]["not_redecided"], 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shadowing_permit_for_stdio_does_not_open_a_write_outside_the_root() {
    let allowlist = format!(
        "{ALLOW_BUILTIN}\n@id(\"allow.stdio_escape\")\n@reason(\"an exception a team might write\")\npermit (principal, action, resource)\nwhen {{ context.transport == \"stdio\" && !context.writes_inside_root }};\n"
    );
    let served = Served::new(&allowlist, "paired");
    let client = connect(&served).await;
    let body = refusal(
        call(
            &client,
            "write_file",
            json!({"path": "../escape", "content": "x"}),
        )
        .await,
    );
    assert_eq!(body["decision"], "deny");
    assert_eq!(body["policies"][0]["id"], "hard.no_write_outside_root");
    assert!(!served.root.path().join("../escape").exists());
    client.cancel().await.unwrap();
}
