//! Approvals over hand-made 2026-07-28 frames: the sealed requestState is
//! bound to the client, the exact call and a short life, and works once.
//! Every refusal asks again and is audited; none runs the call.

use std::fs;

use portcullis::audit::Record;
use serde_json::{Value, json};

use crate::util::{ALLOW_BUILTIN, Served, Session};

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}
    })
}

fn call(id: u64, arguments: Value, state: Option<&str>, answer: Option<Value>) -> String {
    let mut params = json!({"name": "write_file", "arguments": arguments, "_meta": meta()});
    if let Some(state) = state {
        params["requestState"] = json!(state);
    }
    if let Some(answer) = answer {
        params["inputResponses"] = json!({"approval": answer});
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
}

fn approve() -> Value {
    json!({"action": "accept", "content": {"approve": true}})
}

struct Modern {
    served: Served,
    session: Session,
    next_id: u64,
}

impl Modern {
    fn start(extra: &[&str]) -> Self {
        let served = Served::new(ALLOW_BUILTIN, "paired");
        let mut command = served.command();
        command.args(extra).stderr(std::process::Stdio::null());
        let session = Session::start_command(command);
        Self {
            served,
            session,
            next_id: 1,
        }
    }

    fn send(&mut self, arguments: Value, state: Option<&str>, answer: Option<Value>) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.session.send(&call(id, arguments, state, answer));
        let response = self.session.next();
        assert_eq!(response["id"], id, "{response}");
        response["result"].clone()
    }

    /// Asks, and returns the sealed state of the question.
    fn ask(&mut self, arguments: Value) -> String {
        let result = self.send(arguments, None, None);
        assert_eq!(result["resultType"], "input_required", "{result}");
        let question = &result["inputRequests"]["approval"];
        assert_eq!(question["method"], "elicitation/create", "{result}");
        assert!(
            question["params"]["message"]
                .as_str()
                .unwrap()
                .contains("write_file"),
            "{result}"
        );
        assert!(
            question["params"]["message"]
                .as_str()
                .unwrap()
                .contains("approval.writes"),
            "{result}"
        );
        result["requestState"].as_str().unwrap().to_owned()
    }

    fn refusals(&self) -> Vec<String> {
        fs::read_to_string(self.served.audit_log())
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<Record>(l).ok())
            .filter(|r| r.body["event"] == "state_refused")
            .map(|r| r.body["detail"]["why"].as_str().unwrap_or("").to_owned())
            .collect()
    }
}

fn args(content: &str) -> Value {
    json!({"path": "approved.txt", "content": content})
}

#[test]
fn an_approved_state_runs_the_call_once() {
    let mut modern = Modern::start(&[]);
    let state = modern.ask(args("x"));
    let result = modern.send(args("x"), Some(&state), Some(approve()));
    assert_ne!(result["isError"], true, "{result}");
    assert_eq!(result["structuredContent"]["bytes"], 1, "{result}");
    let written = modern.served.root.path().join("approved.txt");
    assert_eq!(fs::read_to_string(&written).unwrap(), "x");

    // Replayed: the same state again asks again and runs nothing.
    fs::remove_file(&written).unwrap();
    let result = modern.send(args("x"), Some(&state), Some(approve()));
    assert_eq!(result["resultType"], "input_required", "{result}");
    assert!(!written.exists());
    assert_eq!(modern.refusals(), ["replayed"]);

    // Replay reproduces the approved decision (decided with approved = true).
    let log = modern.served.audit_log();
    let run =
        crate::util::portcullis(&["audit", "replay", log.to_str().unwrap(), "--format", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["summary"]["changes"], json!([]));
    let approved = fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Record>(l).ok())
        .filter(|r| r.body["approved"] == true)
        .count();
    assert_eq!(approved, 1);
}

#[test]
fn a_tampered_state_asks_again_and_runs_nothing() {
    let mut modern = Modern::start(&[]);
    let state = modern.ask(args("x"));
    let mut tampered = state.into_bytes();
    let last = tampered.len() - 2;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let result = modern.send(args("x"), Some(&tampered), Some(approve()));
    assert_eq!(result["resultType"], "input_required", "{result}");
    assert!(!modern.served.root.path().join("approved.txt").exists());
    let result = modern.send(args("x"), Some("not-a-state"), Some(approve()));
    assert_eq!(result["resultType"], "input_required", "{result}");
    assert_eq!(modern.refusals(), ["tampered", "tampered"]);
}

#[test]
fn a_state_for_other_arguments_asks_again_and_runs_nothing() {
    let mut modern = Modern::start(&[]);
    let state = modern.ask(args("harmless"));
    let result = modern.send(args("something else"), Some(&state), Some(approve()));
    assert_eq!(result["resultType"], "input_required", "{result}");
    assert!(!modern.served.root.path().join("approved.txt").exists());
    assert_eq!(modern.refusals(), ["other_call"]);
    // The refusal did not spend the state: the call it was issued for still works.
    let result = modern.send(args("harmless"), Some(&state), Some(approve()));
    assert_ne!(result["isError"], true, "{result}");
}

#[test]
fn a_state_from_another_server_is_refused() {
    let mut first = Modern::start(&[]);
    let state = first.ask(args("x"));
    let mut second = Modern::start(&[]);
    let result = second.send(args("x"), Some(&state), Some(approve()));
    assert_eq!(result["resultType"], "input_required", "{result}");
    assert!(!second.served.root.path().join("approved.txt").exists());
    assert_eq!(second.refusals(), ["tampered"]);
}

#[test]
fn a_declined_answer_is_approval_declined_and_audited() {
    let mut modern = Modern::start(&[]);
    for (answer, why) in [
        (json!({"action": "decline"}), "decline"),
        (json!({"action": "cancel"}), "cancel"),
        (
            json!({"action": "accept", "content": {"approve": false}}),
            "not_approved",
        ),
    ] {
        let state = modern.ask(args("x"));
        let result = modern.send(args("x"), Some(&state), Some(answer));
        assert_eq!(result["isError"], true, "{result}");
        assert_eq!(
            result["structuredContent"]["reason_code"], "approval_declined",
            "{result}"
        );
        assert!(
            result["structuredContent"]["reason"]
                .as_str()
                .unwrap()
                .contains(why),
            "{result}"
        );
    }
    assert!(!modern.served.root.path().join("approved.txt").exists());
    let answers: Vec<String> = fs::read_to_string(modern.served.audit_log())
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Record>(l).ok())
        .filter(|r| r.body["event"] == "answered")
        .map(|r| r.body["detail"]["answer"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(answers, ["decline", "cancel", "not_approved"]);
}

#[test]
fn a_client_without_elicitation_gets_approval_unavailable() {
    let mut modern = Modern::start(&[]);
    let frame = json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {
        "name": "write_file", "arguments": args("x"),
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    }});
    modern.session.send(&frame.to_string());
    let response = modern.session.next();
    assert_eq!(
        response["result"]["structuredContent"]["reason_code"], "approval_unavailable",
        "{response}"
    );
}

#[test]
fn the_question_shows_the_path_first_and_the_content_as_content() {
    let mut modern = Modern::start(&[]);
    // Long content that pretends to carry another path, before the path
    // in canonical order.
    let content = format!(
        "{}\",\"path\":\"README.md\"}}\n\u{1b}[2K",
        "x".repeat(5_000)
    );
    let result = modern.send(
        json!({"path": "sub/../notes.txt", "content": content}),
        None,
        None,
    );
    let message = result["inputRequests"]["approval"]["params"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    let lines: Vec<&str> = message.lines().collect();
    assert!(lines[0].contains("`write_file`"), "{message}");
    assert_eq!(lines[1], "  path `path`: \"notes.txt\"", "{message}");
    assert!(
        lines[2].starts_with(&format!(
            "  content `content`: {} bytes, begins [content] ",
            content.len()
        )),
        "{message}"
    );
    assert!(lines[2].ends_with("[end of content]"), "{message}");
    // Escaped: no raw newline or escape character from the content, and
    // the fake path never appears as a path line.
    assert!(!message.contains('\u{1b}'), "{message}");
    assert_eq!(message.matches("path `").count(), 1, "{message}");
    assert!(
        lines.last().unwrap().contains("approval.writes"),
        "{message}"
    );
}
