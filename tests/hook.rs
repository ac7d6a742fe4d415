//! `portcullis hook claude-code` and `hook codex` through the real binary:
//! every mapped tool allowed, asked and denied, malformed events and every
//! failure answered as a deny of the documented shape, every decision in
//! the audit log and replayable; the gate corpus decided identically
//! through the hook; and Claude Code itself accepting the installed hook.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use portcullis::audit::AuditLog;
use portcullis::facts::{Root, Transport};
use portcullis::gate::judge;
use portcullis::hook::{Harness, Permission, PreToolUse, decide};
use portcullis::keeper::{AuditSink, ClientIdentity, Keeper, Setting};
use portcullis::pdp::{ClientRecord, Engine, Outcome, PolicyBundle};
use portcullis::tools::Registry;
use serde_json::{Value, json};

use crate::util::{INITIALIZE, Run, Served, Session, npm_install, portcullis, run_with_stdin};

/// Claude Code's documented PreToolUse hook output, and nothing else.
fn claude_code_output_schema() -> Value {
    json!({
        "type": "object",
        "required": ["hookSpecificOutput"],
        "additionalProperties": false,
        "properties": {
            "hookSpecificOutput": {
                "type": "object",
                "required": ["hookEventName", "permissionDecision", "permissionDecisionReason"],
                "additionalProperties": false,
                "properties": {
                    "hookEventName": {"const": "PreToolUse"},
                    "permissionDecision": {"enum": ["allow", "ask", "deny"]},
                    "permissionDecisionReason": {"type": "string", "minLength": 1},
                    "updatedInput": {"type": "object"}
                }
            }
        }
    })
}

/// Lets tests reach ask on reads (files under `review/`) and allow on
/// writes (files under `scratch/`).
const TEST_POLICIES: &str = r#"
@id("test.review")
@reason("files under review/ need a human's look")
forbid (
  principal,
  action in Portcullis::Action::"call_tool",
  resource in Portcullis::Server::"harness"
)
when { context.path_classes.contains("review") }
unless { context.approved };
"#;

struct Hooked {
    served: Served,
    reader_token: String,
    /// A `serve --hook-socket` the hooks ask first.
    socket: Option<PathBuf>,
}

impl Hooked {
    fn new() -> Self {
        let served = Served::new("", "paired");
        let policies = served.tree.policies();
        fs::write(policies.join("70_test.cedar"), TEST_POLICIES).unwrap();
        let classes = policies.join("path_classes.toml");
        let mut text = fs::read_to_string(&classes).unwrap();
        text.push_str("\n[review]\nglobs = [\"**/review\", \"**/review/**\"]\n\n[scratch]\nglobs = [\"**/scratch/**\"]\n");
        fs::write(&classes, text).unwrap();
        let approvals = policies.join("40_approvals.cedar");
        let text = fs::read_to_string(&approvals).unwrap();
        let relaxed = text.replace(
            "when { resource.effects.containsAny([\"write\", \"destructive\"]) }",
            "when { resource.effects.containsAny([\"write\", \"destructive\"]) && !context.path_classes.contains(\"scratch\") }",
        );
        assert_ne!(text, relaxed);
        fs::write(&approvals, relaxed).unwrap();
        let root = served.root.path();
        for dir in ["src", "review", "scratch", ".git"] {
            fs::create_dir_all(root.join(dir)).unwrap();
        }
        fs::write(root.join("src/a.rs"), "fn main() {}\n").unwrap();
        fs::write(root.join("review/plan.md"), "plan\n").unwrap();
        fs::write(root.join(".env"), "KEY=1\n").unwrap();
        fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("src/host")).unwrap();
        let mut args = vec![
            "token".to_owned(),
            "create".to_owned(),
            "reader".to_owned(),
            "--tier".to_owned(),
            "readonly".to_owned(),
            "--store".to_owned(),
            served.store.display().to_string(),
            "--format".to_owned(),
            "json".to_owned(),
        ];
        args.extend(served.tree.flags());
        let run = portcullis(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(run.code, 0, "{run:?}");
        let reader_token = run.json()["token"].as_str().unwrap().to_owned();
        Self {
            served,
            reader_token,
            socket: None,
        }
    }

    /// `serve` answering hooks at `socket`, ready: its accept loop runs
    /// before it answers `initialize`.
    fn serve_hooks(&self, socket: &Path) -> Session {
        let mut command = self.served.command();
        command
            .arg("--hook-socket")
            .arg(socket)
            .stderr(Stdio::null());
        let mut session = Session::start_command(command);
        session.send(INITIALIZE);
        assert!(session.next()["result"].is_object());
        session
    }

    fn root(&self) -> &Path {
        self.served.root.path()
    }

    fn event(&self, tool: &str, input: Value) -> Value {
        json!({
            "session_id": "session-7", "transcript_path": "/tmp/t.jsonl",
            "cwd": self.root().display().to_string(), "permission_mode": "default",
            "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input,
            "tool_use_id": format!("toolu_{tool}")
        })
    }

    fn command(&self, harness: &str, token: &str) -> Command {
        self.command_logging_to(harness, token, &self.served.audit_log())
    }

    fn command_logging_to(&self, harness: &str, token: &str, audit: &Path) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
        command
            .args(["hook", harness, "--store"])
            .arg(&self.served.store)
            .arg("--audit")
            .arg(audit)
            .args(self.served.tree.flags())
            .env("PORTCULLIS_TOKEN", token)
            .env("CLAUDE_PROJECT_DIR", self.root())
            .env_remove("PORTCULLIS_ROOT")
            .env_remove("PORTCULLIS_POLICIES")
            .env_remove("PORTCULLIS_SCHEMA")
            .env_remove("PORTCULLIS_HOOK_SOCKET")
            .env("PORTCULLIS_LOG", "error");
        if let Some(socket) = &self.socket {
            command
                .arg("--socket")
                .arg(socket)
                .env("PORTCULLIS_LOG", "info");
        }
        command
    }

    fn hook_with(&self, command: Command, stdin: &[u8]) -> Run {
        run_with_stdin(command, stdin)
    }

    /// Runs the Claude Code hook; checks the answer's shape and exit code,
    /// and, given a socket, that `serve` answered.
    fn claude(&self, token: &str, stdin: &[u8]) -> (Permission, String) {
        let run = self.hook_with(self.command("claude-code", token), stdin);
        assert_eq!(run.code, 0, "{run:?}");
        if self.socket.is_some() {
            assert!(!run.stderr.contains(DECIDED_HERE), "{run:?}");
        }
        let answer = run.json();
        let validator = jsonschema::validator_for(&claude_code_output_schema()).unwrap();
        assert!(validator.is_valid(&answer), "{answer}");
        let out = &answer["hookSpecificOutput"];
        let permission = match out["permissionDecision"].as_str().unwrap() {
            "allow" => Permission::Allow,
            "ask" => Permission::Ask,
            _ => Permission::Deny,
        };
        (
            permission,
            out["permissionDecisionReason"].as_str().unwrap().to_owned(),
        )
    }

    fn decide(&self, tool: &str, input: Value) -> (Permission, String) {
        let event = serde_json::to_vec(&self.event(tool, input)).unwrap();
        self.claude(&self.served.token, &event)
    }

    fn records(&self) -> Vec<Value> {
        self.served.records()
    }
}

/// What the hook says on stderr (at `info`) when it decides itself.
const DECIDED_HERE: &str = "the hook decides itself";

/// Every mapped tool with an input the test policies allow, ask or deny.
fn mapped_cases(root: &str) -> Vec<(&'static str, Value, Permission)> {
    use Permission::{Allow, Ask, Deny};
    vec![
        (
            "Read",
            json!({"file_path": format!("{root}/src/a.rs")}),
            Allow,
        ),
        ("Read", json!({"file_path": "src/a.rs", "offset": 1}), Allow),
        ("Read", json!({"file_path": "review/plan.md"}), Ask),
        ("Read", json!({"file_path": ".env"}), Deny),
        ("Read", json!({"file_path": "/etc/hostname"}), Deny),
        ("Glob", json!({"pattern": "**/*.rs"}), Allow),
        ("Glob", json!({"pattern": "*.md", "path": "review"}), Ask),
        ("Glob", json!({"pattern": "*/../../../../etc/*"}), Deny),
        ("Glob", json!({"pattern": "{..,src}/*"}), Deny),
        ("Read", json!({"file_path": "src/host"}), Deny),
        (
            "Write",
            json!({"file_path": ".GIT/config", "content": "x"}),
            Deny,
        ),
        ("Grep", json!({"pattern": "main", "path": "src"}), Allow),
        ("Grep", json!({"pattern": "plan", "path": "review"}), Ask),
        ("Grep", json!({"pattern": "KEY", "glob": ".env"}), Deny),
        ("LS", json!({"path": "src"}), Allow),
        ("LS", json!({"path": "review"}), Ask),
        ("LS", json!({"path": "/"}), Deny),
        (
            "Write",
            json!({"file_path": "scratch/out.txt", "content": "x"}),
            Allow,
        ),
        (
            "Write",
            json!({"file_path": "src/b.rs", "content": "x"}),
            Ask,
        ),
        (
            "Write",
            json!({"file_path": "/tmp/outside.txt", "content": "x"}),
            Deny,
        ),
        (
            "Edit",
            json!({"file_path": "scratch/o.txt", "old_string": "a", "new_string": "b"}),
            Allow,
        ),
        (
            "Edit",
            json!({"file_path": "src/a.rs", "old_string": "a", "new_string": "b"}),
            Ask,
        ),
        (
            "Edit",
            json!({"file_path": ".git/config", "old_string": "a", "new_string": "b"}),
            Deny,
        ),
        (
            "MultiEdit",
            json!({"file_path": "scratch/o.txt", "edits": []}),
            Allow,
        ),
        (
            "MultiEdit",
            json!({"file_path": "src/a.rs", "edits": []}),
            Ask,
        ),
        ("MultiEdit", json!({"file_path": ".env", "edits": []}), Deny),
        (
            "NotebookEdit",
            json!({"notebook_path": "scratch/n.ipynb", "new_source": ""}),
            Allow,
        ),
        (
            "NotebookEdit",
            json!({"notebook_path": "src/n.ipynb", "new_source": ""}),
            Ask,
        ),
        (
            "NotebookEdit",
            json!({"notebook_path": "../n.ipynb", "new_source": ""}),
            Deny,
        ),
        (
            "WebFetch",
            json!({"url": "https://example.com", "prompt": "p"}),
            Ask,
        ),
        ("WebSearch", json!({"query": "cedar"}), Ask),
        ("Bash", json!({"command": "ls -la src"}), Allow),
        ("Bash", json!({"command": "git push origin main"}), Ask),
        ("Bash", json!({"command": "cd src && rm -rf /"}), Deny),
        (
            "Bash",
            json!({"command": "echo x > .git/hooks/pre-commit"}),
            Deny,
        ),
        ("TodoWrite", json!({"todos": []}), Allow),
        ("REPL", json!({"code": "1"}), Deny),
        ("EnterWorktree", json!({"name": "w"}), Deny),
    ]
}

#[test]
fn every_mapped_tool_is_allowed_asked_and_denied_by_the_policies() {
    let hooked = Hooked::new();
    let decisions = every_mapped_tool_decided(&hooked);
    verifies_and_replays(&hooked, decisions);
}

/// A `Grep` reads every file below its folder as ripgrep walks it, so the
/// hook looks through what it would read: a secret there (or one a link
/// leads to) is a secret read, a file with another name is judged as its
/// other name may be, and what ripgrep leaves out (hidden files, what a
/// `glob` excludes) is left out here too.
#[test]
fn a_grep_is_judged_by_the_files_it_would_read_below_its_folder() {
    use Permission::{Allow, Deny};
    let hooked = Hooked::new();
    let root = hooked.root();
    let elsewhere = tempfile::tempdir().unwrap();
    fs::write(elsewhere.path().join("notes"), "KEY=2\n").unwrap();
    for dir in ["vault/keys", "linked", "shared", "hidden"] {
        fs::create_dir_all(root.join(dir)).unwrap();
    }
    fs::write(root.join("vault/readme.md"), "vault\n").unwrap();
    fs::write(root.join("vault/keys/id_rsa"), "-----BEGIN\n").unwrap();
    std::os::unix::fs::symlink("../.env", root.join("linked/settings")).unwrap();
    fs::hard_link(
        elsewhere.path().join("notes"),
        root.join("shared/notes.txt"),
    )
    .unwrap();
    fs::write(root.join("hidden/.env"), "KEY=3\n").unwrap();
    fs::write(root.join("hidden/a.md"), "a\n").unwrap();
    for (input, expected) in [
        (json!({"pattern": "BEGIN", "path": "vault"}), Deny),
        (json!({"pattern": "BEGIN", "path": "vault/keys"}), Deny),
        (json!({"pattern": "BEGIN"}), Deny),
        (json!({"pattern": "KEY", "path": "linked"}), Deny),
        (json!({"pattern": "KEY", "path": "shared"}), Deny),
        (
            json!({"pattern": "vault", "path": "vault", "glob": "*.md"}),
            Allow,
        ),
        (json!({"pattern": "a", "path": "hidden"}), Allow),
        (json!({"pattern": "main", "path": "src"}), Allow),
    ] {
        let (permission, reason) = hooked.decide("Grep", input.clone());
        assert_eq!(permission, expected, "{input}: {reason}");
    }
}

/// With a `serve` answering at the socket, every hook is answered there,
/// as the hook would have answered, recorded in the same log.
#[test]
fn a_serve_holding_the_set_answers_the_hook_as_the_hook_would() {
    let mut hooked = Hooked::new();
    let sockets = tempfile::tempdir().unwrap();
    let socket = sockets.path().join("hook.sock");
    let session = hooked.serve_hooks(&socket);
    hooked.socket = Some(socket.clone());
    let decisions = every_mapped_tool_decided(&hooked);
    let run = hooked.hook_with(
        hooked.command("claude-code", &hooked.served.token),
        &serde_json::to_vec(&hooked.event("Bash", json!({"command": "ls src"}))).unwrap(),
    );
    let input = &run.json()["hookSpecificOutput"]["updatedInput"];
    assert!(
        input["command"].as_str().unwrap().contains(" exec --root "),
        "an allowed command is handed back through exec: {run:?}"
    );
    // `~` is the hook's: its HOME inside the root makes ~/new.txt a write
    // inside it, which asks (serve's own HOME is outside the root, where
    // a write is denied).
    let home = hooked.root().join("home");
    fs::create_dir_all(&home).unwrap();
    let touch =
        serde_json::to_vec(&hooked.event("Bash", json!({"command": "touch ~/new.txt"}))).unwrap();
    let mut command = hooked.command("claude-code", &hooked.served.token);
    command.env("HOME", &home);
    let run = hooked.hook_with(command, &touch);
    assert!(run.stdout.contains("\"ask\""), "{run:?}");
    assert!(!run.stderr.contains(DECIDED_HERE), "{run:?}");
    // What the store says of the client now, not when serve first
    // decided for it: a tier changed by hand, a token revoked.
    let write = serde_json::to_vec(&hooked.event(
        "Write",
        json!({"file_path": "scratch/out.txt", "content": "x"}),
    ))
    .unwrap();
    assert_eq!(
        hooked.claude(&hooked.served.token, &write).0,
        Permission::Allow
    );
    let mut store: Value =
        serde_json::from_str(&fs::read_to_string(&hooked.served.store).unwrap()).unwrap();
    for client in store["clients"].as_array_mut().unwrap() {
        if client["name"] == "agent" {
            client["tier"] = json!("readonly");
        }
    }
    fs::write(&hooked.served.store, store.to_string()).unwrap();
    let (got, reason) = hooked.claude(&hooked.served.token, &write);
    assert_eq!(got, Permission::Deny, "{reason}");
    assert!(reason.contains("capability"), "{reason}");
    // The root removed and made again: its paths are judged in the new
    // folder, where src/b.rs leads out of the root.
    let root = hooked.root().to_owned();
    let old = root.with_extension("old");
    fs::rename(&root, &old).unwrap();
    fs::create_dir_all(root.join("src")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", root.join("src/b.rs")).unwrap();
    let (got, reason) = hooked.decide("Read", json!({"file_path": "src/b.rs"}));
    fs::remove_dir_all(&old).unwrap();
    assert_eq!(got, Permission::Deny, "{reason}");
    session.finish();
    assert!(!socket.exists(), "serve removes its socket when it stops");
    verifies_and_replays(&hooked, decisions + 5);
}

/// Decides every mapped case; the decisions recorded.
fn every_mapped_tool_decided(hooked: &Hooked) -> usize {
    let root = hooked.root().display().to_string();
    let cases = mapped_cases(&root);
    let mut wrong = Vec::new();
    for (tool, input, expected) in &cases {
        let (got, reason) = hooked.decide(tool, input.clone());
        if got != *expected {
            wrong.push(format!(
                "{tool} {input}: expected {expected:?}, got {got:?} ({reason})"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // A readonly client has no network and no write capability.
    for (tool, input) in [
        (
            "WebFetch",
            json!({"url": "https://example.com", "prompt": "p"}),
        ),
        ("Write", json!({"file_path": "scratch/x", "content": ""})),
    ] {
        let event = serde_json::to_vec(&hooked.event(tool, input)).unwrap();
        let (got, reason) = hooked.claude(&hooked.reader_token, &event);
        assert_eq!(got, Permission::Deny, "{tool}: {reason}");
        assert!(reason.contains("capability"), "{reason}");
    }

    // Every decision is recorded, as the hook's, with the harness session.
    let records = hooked.records();
    let decisions: Vec<&Value> = records.iter().filter(|r| r["kind"] == "decision").collect();
    assert_eq!(decisions.len(), cases.len() + 2);
    for record in &decisions {
        assert_eq!(record["body"]["transport"], "hook", "{record}");
        assert_eq!(record["body"]["session"], "session-7", "{record}");
        assert_eq!(record["body"]["approval_channel"], "harness", "{record}");
    }
    decisions.len()
}

/// The log verifies and replays to the same `decisions`.
fn verifies_and_replays(hooked: &Hooked, decisions: usize) {
    let log = hooked.served.audit_log();
    let run = portcullis(&["audit", "verify", log.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    let run = portcullis(&["audit", "replay", log.to_str().unwrap(), "--format", "json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let summary = &run.json()["summary"];
    assert_eq!(summary["changes"], json!([]), "{summary}");
    assert_eq!(summary["same"], decisions, "{summary}");
}

#[test]
fn unknown_tools_and_malformed_events_are_denied_with_the_reason() {
    let hooked = Hooked::new();
    for (tool, needle) in [
        ("Frobnicate", "not one portcullis knows"),
        (
            "mcp__github__create_issue",
            "not a pinned tool of a server in servers.toml",
        ),
    ] {
        let (got, reason) = hooked.decide(tool, json!({}));
        assert_eq!(got, Permission::Deny);
        assert!(reason.contains(needle), "{reason}");
    }
    let unknown = hooked.records();
    assert_eq!(
        unknown
            .iter()
            .filter(|r| r["body"]["cause"] == "unknown_tool")
            .count(),
        2
    );

    let event = |patch: Value| {
        let mut event = hooked.event("Read", json!({"file_path": "src/a.rs"}));
        for (key, value) in patch.as_object().unwrap() {
            event[key] = value.clone();
        }
        serde_json::to_vec(&event).unwrap()
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"".to_vec(), "not JSON"),
        (b"{\"tool_name\": ".to_vec(), "not JSON"),
        (
            event(json!({"hook_event_name": "PostToolUse"})),
            "not PreToolUse",
        ),
        (event(json!({"tool_input": "src/a.rs"})), "not an object"),
        (event(json!({"cwd": "relative"})), "absolute"),
        (
            event(json!({"tool_input": {"file_path": 7}})),
            "cannot be judged",
        ),
        (event(json!({"tool_input": {}})), "cannot be judged"),
        (
            event(json!({"tool_input": {"file_path": "a\u{0}b"}})),
            "cannot be judged",
        ),
        (
            serde_json::to_vec(&hooked.event("Bash", json!({"command": ""}))).unwrap(),
            "cannot be judged",
        ),
        (
            serde_json::to_vec(&hooked.event("Bash", json!({"cmd": "ls"}))).unwrap(),
            "command is missing",
        ),
    ];
    for (bytes, needle) in cases {
        let (got, reason) = hooked.claude(&hooked.served.token, &bytes);
        assert_eq!(got, Permission::Deny, "{}", String::from_utf8_lossy(&bytes));
        assert!(reason.contains(needle), "{reason} (wanted {needle})");
    }
}

#[test]
fn every_failure_of_the_setting_is_a_deny_never_no_opinion() {
    let hooked = Hooked::new();
    let event =
        serde_json::to_vec(&hooked.event("Read", json!({"file_path": "src/a.rs"}))).unwrap();

    let (got, reason) = hooked.claude("not-a-token", &event);
    assert_eq!(got, Permission::Deny);
    assert!(reason.contains("PORTCULLIS_TOKEN"), "{reason}");

    let mut command = hooked.command("claude-code", &hooked.served.token);
    command.env_remove("CLAUDE_PROJECT_DIR");
    let run = hooked.hook_with(command, &event);
    assert!(
        run.stdout.contains("\"deny\"") && run.stdout.contains("no workspace root"),
        "{run:?}"
    );

    // A policy set that does not load.
    let broken = hooked.served.tree.policies().join("80_broken.cedar");
    fs::write(
        &broken,
        "permit (principal, action, resource) when { context.nope };",
    )
    .unwrap();
    let (got, reason) = hooked.claude(&hooked.served.token, &event);
    assert_eq!(got, Permission::Deny);
    assert!(reason.contains("policy set does not load"), "{reason}");
    fs::remove_file(&broken).unwrap();

    // An audit log that cannot be written: nothing runs.
    let dir = tempfile::tempdir().unwrap();
    let blocked = dir.path().join("log-is-a-folder");
    fs::create_dir_all(&blocked).unwrap();
    let command = hooked.command_logging_to("claude-code", &hooked.served.token, &blocked);
    let run = hooked.hook_with(command, &event);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("\"deny\""), "{run:?}");

    // A log whose tail was cut is refused, not appended to.
    let (got, _) = hooked.claude(&hooked.served.token, &event);
    assert_eq!(got, Permission::Allow);
    let log = hooked.served.audit_log();
    let text = fs::read_to_string(&log).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.pop();
    fs::write(&log, lines.join("\n") + "\n").unwrap();
    let (got, reason) = hooked.claude(&hooked.served.token, &event);
    assert_eq!(got, Permission::Deny, "{reason}");
    assert!(reason.contains("does not verify"), "{reason}");
}

/// Whatever keeps `serve` from answering for the hook (nothing at the
/// socket, another set, log or token store, a token it does not know), the
/// hook decides itself, and says why.
#[test]
fn a_serve_that_cannot_answer_for_the_hook_leaves_it_to_decide_itself() {
    let hooked = Hooked::new();
    let sockets = tempfile::tempdir().unwrap();
    let socket = sockets.path().join("hook.sock");
    let read = serde_json::to_vec(&hooked.event("Read", json!({"file_path": "src/a.rs"}))).unwrap();
    let asking = |mut command: Command| {
        command
            .arg("--socket")
            .arg(&socket)
            .env("PORTCULLIS_LOG", "info");
        let run = hooked.hook_with(command, &read);
        assert_eq!(run.code, 0, "{run:?}");
        assert!(run.stderr.contains(DECIDED_HERE), "{run:?}");
        run
    };
    let token = &hooked.served.token;
    let run = asking(hooked.command("claude-code", token));
    assert!(run.stderr.contains("nothing answers at"), "{run:?}");
    assert!(run.stdout.contains("\"allow\""), "{run:?}");

    let session = hooked.serve_hooks(&socket);
    // Another log.
    let elsewhere = tempfile::tempdir().unwrap();
    let other_log = elsewhere.path().join("audit.jsonl");
    fs::write(&other_log, "").unwrap();
    let run = asking(hooked.command_logging_to("claude-code", token, &other_log));
    assert!(run.stderr.contains("serve records in"), "{run:?}");
    assert!(run.stdout.contains("\"allow\""), "{run:?}");
    assert!(
        fs::read_to_string(&other_log)
            .unwrap()
            .contains("\"decision\"")
    );
    // Another build of portcullis (a copy of the binary, as an upgrade
    // leaves a running serve).
    let copy = elsewhere.path().join("portcullis");
    fs::copy(env!("CARGO_BIN_EXE_portcullis"), &copy).unwrap();
    let original = hooked.command("claude-code", token);
    let mut other = Command::new(&copy);
    other.args(original.get_args());
    for (key, value) in original.get_envs() {
        match value {
            Some(value) => other.env(key, value),
            None => other.env_remove(key),
        };
    }
    let run = asking(other);
    assert!(run.stderr.contains("another build"), "{run:?}");
    assert!(run.stdout.contains("\"allow\""), "{run:?}");
    // A token serve's store does not hold.
    let run = asking(hooked.command("claude-code", "pcl_unknown"));
    assert!(run.stderr.contains("does not authenticate"), "{run:?}");
    assert!(run.stdout.contains("\"deny\""), "{run:?}");
    session.finish();
    // Another set: serve reads a copy with a policy that forbids reading.
    let copy = elsewhere.path().join("policies");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(hooked.served.tree.policies())
        .arg(&copy)
        .status()
        .unwrap();
    assert!(copied.success());
    fs::write(
        copy.join("75_deny_read.cedar"),
        "@id(\"test.deny_read\")\n@reason(\"no reading today\")\nforbid (principal, action, resource == Portcullis::Tool::\"harness/Read\");\n",
    )
    .unwrap();
    let mut args = hooked.served.serve_args();
    let at = args.iter().position(|arg| arg == "--policies").unwrap();
    args[at + 1] = copy.display().to_string();
    let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
    command
        .args(args)
        .arg("--hook-socket")
        .arg(&socket)
        .env("PORTCULLIS_TOKEN", token)
        .env("PORTCULLIS_LOG", "warn")
        .stderr(Stdio::null());
    let mut session = Session::start_command(command);
    session.send(INITIALIZE);
    assert!(session.next()["result"].is_object());
    let run = asking(hooked.command("claude-code", token));
    assert!(run.stderr.contains("another policy set"), "{run:?}");
    assert!(run.stdout.contains("\"allow\""), "{run:?}");
    session.finish();
    assert!(!socket.exists());
}

/// A `serve` that takes the question and never answers may have recorded
/// a decision or not: past the deadline the answer is deny, not a second
/// decision here.
#[test]
fn a_serve_that_never_answers_is_a_deny_at_the_deadline() {
    let hooked = Hooked::new();
    let sockets = tempfile::tempdir().unwrap();
    let socket = sockets.path().join("hook.sock");
    let silent = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let read = serde_json::to_vec(&hooked.event("Read", json!({"file_path": "src/a.rs"}))).unwrap();
    // The log exists (a hook names it to serve by its resolved path).
    assert_eq!(
        hooked.claude(&hooked.served.token, &read).0,
        Permission::Allow
    );
    let decided = hooked.records().len();
    let mut command = hooked.command("claude-code", &hooked.served.token);
    command
        .arg("--socket")
        .arg(&socket)
        .args(["--deadline", "1"]);
    let run = hooked.hook_with(command, &read);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("\"deny\""), "{run:?}");
    assert!(run.stdout.contains("not recorded within 1 s"), "{run:?}");
    let (mut asked, _) = silent.accept().unwrap();
    let mut question = Vec::new();
    std::io::Read::read_to_end(&mut asked, &mut question).unwrap();
    assert!(String::from_utf8_lossy(&question).contains("PreToolUse"));
    assert_eq!(
        hooked.records().len(),
        decided,
        "the hook recorded nothing of its own"
    );
}

/// `hook install --socket` writes a hook that asks that `serve`: the
/// installed command line, run as Claude Code runs it (by a shell, with
/// only the environment), is answered there. A relative socket is written
/// absolute; one inside the project, as written or where it leads (a link,
/// `..`), is refused and nothing is written.
#[test]
fn the_installed_hook_asks_the_serve_at_its_socket() {
    let hooked = Hooked::new();
    let sockets = tempfile::tempdir().unwrap();
    let session = hooked.serve_hooks(&sockets.path().join("hook.sock"));
    let install = |socket: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
        command
            .args(["hook", "install", "claude-code", "--project"])
            .arg(hooked.root())
            .args(["--socket", socket, "--format", "json"])
            .current_dir(sockets.path());
        run_with_stdin(command, b"")
    };
    let settings = hooked.root().join(".claude/settings.json");

    // Inside as written, through a link, and back up through `..`.
    let inside = hooked.root().join("hook.sock");
    std::os::unix::fs::symlink(hooked.root(), sockets.path().join("into")).unwrap();
    fs::create_dir(sockets.path().join("beside")).unwrap();
    let name = hooked.root().file_name().unwrap().to_str().unwrap();
    let up = format!("beside/../into/../{name}/hook.sock");
    for socket in [
        inside.to_str().unwrap(),
        "into/hook.sock",
        "into/not-yet/hook.sock",
        up.as_str(),
    ] {
        let refused = install(socket);
        assert_ne!(refused.code, 0, "{socket}: {refused:?}");
        assert!(
            refused.stderr.contains("inside the project"),
            "{socket}: {refused:?}"
        );
        assert!(!settings.exists(), "{socket}: written anyway: {refused:?}");
    }

    let run = install("hook.sock");
    assert_eq!(run.code, 0, "{run:?}");
    let written: Value = serde_json::from_str(&fs::read_to_string(&settings).unwrap()).unwrap();
    let installed = written["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_owned();
    let absolute = sockets.path().join("hook.sock");
    assert!(
        installed.ends_with(&format!(
            " hook claude-code --socket {}",
            absolute.display()
        )),
        "{installed}"
    );
    assert_eq!(install("hook.sock").json()["installed"], "already_there");

    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(&installed)
        .current_dir(hooked.root())
        .env("PORTCULLIS_TOKEN", &hooked.served.token)
        .env("PORTCULLIS_TOKEN_STORE", &hooked.served.store)
        .env("PORTCULLIS_AUDIT", hooked.served.audit_log())
        .env("PORTCULLIS_POLICIES", hooked.served.tree.policies())
        .env("PORTCULLIS_SCHEMA", hooked.served.tree.schemas())
        .env("CLAUDE_PROJECT_DIR", hooked.root())
        .env_remove("PORTCULLIS_ROOT")
        .env_remove("PORTCULLIS_HOOK_SOCKET")
        .env("PORTCULLIS_LOG", "info");
    let read = serde_json::to_vec(&hooked.event("Read", json!({"file_path": "src/a.rs"}))).unwrap();
    let asked = hooked.hook_with(command, &read);
    assert_eq!(asked.code, 0, "{asked:?}");
    assert!(asked.stdout.contains("\"allow\""), "{asked:?}");
    assert!(!asked.stderr.contains(DECIDED_HERE), "{asked:?}");
    session.finish();
}

/// `serve` will not bind where a hook would not ask (inside its root), nor
/// beside a fleet's shared state, whose log is not a file a hook names.
#[test]
fn serve_refuses_a_hook_socket_inside_its_root_or_with_shared_state() {
    let hooked = Hooked::new();
    let inside = hooked.root().join("hook.sock");
    let mut command = hooked.served.command();
    command.arg("--hook-socket").arg(&inside);
    let run = run_with_stdin(command, b"");
    assert_ne!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("is inside --root"), "{run:?}");
    assert!(!inside.exists(), "{run:?}");
    let sockets = tempfile::tempdir().unwrap();
    let mut command = hooked.served.command();
    command
        .arg("--hook-socket")
        .arg(sockets.path().join("hook.sock"))
        .arg("--state")
        .arg("postgres://127.0.0.1:1/portcullis");
    let run = run_with_stdin(command, b"");
    assert_eq!(run.code, 64, "a usage error: {run:?}");
    assert!(run.stderr.contains("cannot be used with"), "{run:?}");
}

/// A process in the workspace root (what the agent runs is confined to
/// it) could bind a socket there and answer "allow" to everything: the
/// hook does not ask it.
#[test]
fn a_socket_inside_the_workspace_root_is_never_asked() {
    let hooked = Hooked::new();
    let socket = hooked.root().join("hook.sock");
    let impostor = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let secret = serde_json::to_vec(&hooked.event("Read", json!({"file_path": ".env"}))).unwrap();
    let mut command = hooked.command("claude-code", &hooked.served.token);
    command
        .arg("--socket")
        .arg(&socket)
        .env("PORTCULLIS_LOG", "info");
    let run = hooked.hook_with(command, &secret);
    assert!(run.stdout.contains("\"deny\""), "{run:?}");
    assert!(run.stderr.contains("inside the workspace root"), "{run:?}");
    impostor.set_nonblocking(true).unwrap();
    assert!(impostor.accept().is_err(), "the impostor was asked");
}

#[test]
fn codex_gets_deny_for_ask_and_silence_for_allow() {
    let mut hooked = Hooked::new();
    codex_answers(&hooked);
    // The same answers from a `serve` holding the set.
    let sockets = tempfile::tempdir().unwrap();
    let socket = sockets.path().join("hook.sock");
    let session = hooked.serve_hooks(&socket);
    hooked.socket = Some(socket);
    codex_answers(&hooked);
    session.finish();
}

fn codex_answers(hooked: &Hooked) {
    let run = |tool: &str, input: Value| {
        let event = serde_json::to_vec(&hooked.event(tool, input)).unwrap();
        let run = hooked.hook_with(hooked.command("codex", &hooked.served.token), &event);
        if hooked.socket.is_some() {
            assert!(!run.stderr.contains(DECIDED_HERE), "{run:?}");
        }
        run
    };
    let allowed = run("Bash", json!({"command": ["bash", "-lc", "ls src"]}));
    assert_eq!(
        (allowed.code, allowed.stdout.as_str()),
        (0, ""),
        "{allowed:?}"
    );
    let asked = run("Bash", json!({"command": "git push"}));
    assert_eq!(asked.code, 0);
    assert_eq!(
        asked.json()["hookSpecificOutput"]["permissionDecision"],
        "deny"
    );
    assert!(asked.stdout.contains("approval"), "{asked:?}");
    let patch = "*** Begin Patch\n*** Add File: scratch/new.txt\n+hi\n*** Update File: src/a.rs\n@@\n-a\n+b\n*** End Patch\n";
    let patched = run("apply_patch", json!({"command": patch}));
    assert_eq!(
        patched.json()["hookSpecificOutput"]["permissionDecision"],
        "deny",
        "{patched:?}"
    );
    let scratch_only = run(
        "apply_patch",
        json!({"command": "*** Begin Patch\n*** Add File: scratch/n.txt\n+hi\n*** End Patch\n"}),
    );
    assert_eq!(
        (scratch_only.code, scratch_only.stdout.as_str()),
        (0, ""),
        "{scratch_only:?}"
    );
    let outside = run(
        "apply_patch",
        json!({"command": "*** Begin Patch\n*** Delete File: ../x\n*** End Patch\n"}),
    );
    assert!(outside.stdout.contains("\"deny\""), "{outside:?}");
    let empty = run(
        "apply_patch",
        json!({"command": "*** Begin Patch\n*** End Patch\n"}),
    );
    assert!(empty.stdout.contains("names no file"), "{empty:?}");
}

/// The command-gate corpus through the hook adapter: each command gets the
/// decision `portcullis gate` gives it.
#[test]
fn the_gate_corpus_decides_the_same_through_the_hook() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir_all(ws.join("sub")).unwrap();
    let root = Root::new(&ws).unwrap();
    let bundle = PolicyBundle::builtin();
    let client = ClientRecord {
        name: "agent".into(),
        tier: "paired".into(),
    };
    let gate_engine = Engine::load(
        &bundle,
        &Registry::builtin().unwrap(),
        std::slice::from_ref(&client),
    )
    .unwrap();
    let registry = Registry::harness().unwrap();
    let engine = Engine::load(&bundle, &registry, std::slice::from_ref(&client)).unwrap();
    let log = Arc::new(AuditLog::open(&dir.path().join("audit.jsonl"), None).unwrap());
    let keeper = Keeper::new(
        Setting {
            engine,
            registry,
            root: root.clone(),
        },
        ClientIdentity {
            name: "agent".into(),
            tier: "paired".into(),
            fingerprint: "0123456789abcdef".into(),
        },
        Transport::Hook,
        log as Arc<dyn AuditSink>,
        "corpus".into(),
    );
    let corpus = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/gate/corpus.txt"
    ))
    .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut compared = 0;
    let mut wrong = Vec::new();
    for line in corpus
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (_, command) = line.split_once('\t').unwrap();
        let command = command.replace("\\n", "\n");
        let gate = judge(&gate_engine, "agent", &root, None, &command, Transport::Cli).unwrap();
        let event = json!({
            "session_id": "corpus", "cwd": ws.display().to_string(), "hook_event_name": "PreToolUse",
            "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": "t"
        });
        let event = PreToolUse::parse(&serde_json::to_vec(&event).unwrap()).unwrap();
        let answer = runtime.block_on(decide(&keeper, Harness::ClaudeCode, &event, None));
        let expected = match gate.decision.outcome {
            Outcome::Allow => Permission::Allow,
            Outcome::Ask => Permission::Ask,
            Outcome::Deny => Permission::Deny,
        };
        if answer.permission != expected {
            wrong.push(format!(
                "{command:?}: gate {expected:?}, hook {:?}",
                answer.permission
            ));
        }
        compared += 1;
    }
    assert!(compared >= 300, "{compared}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Claude Code itself loads the settings `hook install` writes: with them
/// it registers a hook; with a hook entry of the wrong shape it registers
/// none (so the check can fail). Claude Code is started headless against
/// an unreachable API and stopped once it has loaded its hooks.
#[test]
fn claude_code_accepts_the_installed_hook() {
    if !crate::util::have("node") {
        eprintln!("skipped: node is not installed, so Claude Code cannot be");
        return;
    }
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/clients/package.json");
    let claude = npm_install(&package, "interop-clients")
        .join("node_modules/@anthropic-ai/claude-code/bin/claude.exe");
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    let run = portcullis(&[
        "hook",
        "install",
        "claude-code",
        "--project",
        project.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(run.json()["installed"], "added");
    assert!(registers_a_hook(&claude, dir.path(), &project));

    let broken = dir.path().join("broken");
    fs::create_dir_all(broken.join(".claude")).unwrap();
    fs::write(
        broken.join(".claude/settings.json"),
        r#"{"hooks":{"PreToolUse":[{"matcher":"*","hooks":[{"type":"commandz","command":5}]}]}}"#,
    )
    .unwrap();
    assert!(!registers_a_hook(&claude, dir.path(), &broken));
}

/// Starts Claude Code in `project` and reads its debug log until it has
/// looked its hooks up; whether it registered one by then.
fn registers_a_hook(claude: &Path, scratch: &Path, project: &Path) -> bool {
    let home = scratch.join("home");
    fs::create_dir_all(&home).unwrap();
    let debug: PathBuf = project.join("debug.log");
    let mut child = Command::new(claude)
        .args(["-p", "hello", "--max-turns", "1", "--settings"])
        .arg(project.join(".claude/settings.json"))
        .arg("--debug-file")
        .arg(&debug)
        .current_dir(project)
        .env("HOME", &home)
        .env("ANTHROPIC_API_KEY", "sk-test-not-a-key")
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .env_remove("CLAUDE_CONFIG_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let found = loop {
        let text = fs::read_to_string(&debug).unwrap_or_default();
        if text.contains("Hooks: Found") {
            break text.contains("hook_registered");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Claude Code never looked its hooks up:\n{text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    found
}

#[test]
fn mcp_tools_the_harness_calls_directly_are_decided_as_the_pinned_tools_of_their_server() {
    use Permission::{Allow, Ask, Deny};
    let hooked = Hooked::new();
    let policies = hooked.served.tree.policies();
    fs::write(
        policies.join("servers.toml"),
        "[servers.files]\ncommand = \"unused-by-the-hook\"\n\
         [servers.files.tools.read_text_file]\neffects = [\"read\"]\npaths = { path = \"read\" }\n\
         [servers.files.tools.write_file]\neffects = [\"write\"]\npaths = { path = \"write\" }\n",
    )
    .unwrap();
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path"]});
    let mut lock = portcullis::servers::ServersLock::new();
    for tool in ["read_text_file", "write_file", "move_file"] {
        lock.servers.entry("files".into()).or_default().insert(
            tool.into(),
            portcullis::servers::Pin::of(json!({"name": tool, "inputSchema": schema})),
        );
    }
    fs::write(policies.join("servers.lock"), lock.to_text()).unwrap();
    fs::write(
        policies.join("20_allowlist.cedar"),
        r#"@id("allow.files") @reason("the harness may use the files server")
permit (principal, action in Portcullis::Action::"use_tool", resource in Portcullis::Server::"files");"#,
    )
    .unwrap();
    let cases = [
        (
            "mcp__files__read_text_file",
            json!({"path": "src/a.rs"}),
            Allow,
        ),
        (
            "mcp__files__read_text_file",
            json!({"path": "/etc/hostname"}),
            Deny,
        ),
        ("mcp__files__read_text_file", json!({"path": ".env"}), Deny),
        (
            "mcp__files__write_file",
            json!({"path": "src/new.rs", "content": "x"}),
            Ask,
        ),
        (
            "mcp__files__write_file",
            json!({"path": ".git/config", "content": "x"}),
            Deny,
        ),
        // Pinned but undeclared: written, networked, destructive, so a
        // paired client cannot.
        ("mcp__files__move_file", json!({"path": "src/a.rs"}), Deny),
        // Declared server, tool never pinned.
        (
            "mcp__files__delete_everything",
            json!({"path": "src"}),
            Deny,
        ),
        ("mcp__files__read_text_file", json!({"path": 7}), Deny),
    ];
    for (tool, input, expected) in cases {
        let (got, reason) = hooked.decide(tool, input.clone());
        assert_eq!(got, expected, "{tool} {input}: {reason}");
    }
    let records = hooked.records();
    let read = records
        .iter()
        .find(|r| {
            r["body"]["resource"] == "files/read_text_file" && r["body"]["decision"] == "allow"
        })
        .expect("the read's record");
    assert_eq!(read["body"]["transport"], "hook");
    assert_eq!(read["body"]["tool"], "mcp__files__read_text_file");
    assert_eq!(
        read["body"]["tool_definition"],
        lock.servers["files"]["read_text_file"].sha256
    );

    // portcullis's own MCP server: `serve` decides its calls, so the hook
    // says nothing and records nothing.
    let before = hooked.records().len();
    for (name, flag) in [
        ("mcp__portcullis__files__read_text_file", None),
        ("mcp__gate-keeper__read_file", Some("gate-keeper")),
    ] {
        let event = serde_json::to_vec(&hooked.event(name, json!({"path": "x"}))).unwrap();
        let mut command = hooked.command("claude-code", &hooked.served.token);
        if let Some(flag) = flag {
            command.args(["--mcp-server", flag]);
        }
        let run = hooked.hook_with(command, &event);
        assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{run:?}");
    }
    assert_eq!(hooked.records().len(), before);
}

#[test]
fn a_harness_tool_is_restricted_by_argument_value_on_a_fresh_and_a_cached_load() {
    let hooked = Hooked::new();
    hooked.served.tree.write_policy(
        "75_arguments.cedar",
        r#"
@id("args.no_password_greps")
@reason("agents may not grep for passwords")
forbid (
  principal,
  action == Portcullis::Action::"harness/Grep",
  resource
)
when { context.input.pattern like "*password*" };
"#,
    );
    // The first event loads the set whole (and remembers it validated);
    // the next ones load it from that memory with only Grep's action.
    for _ in 0..2 {
        let (refused, reason) =
            hooked.decide("Grep", json!({"pattern": "password=", "path": "src"}));
        assert_eq!(refused, Permission::Deny, "{reason}");
        assert!(
            reason.contains("agents may not grep for passwords"),
            "{reason}"
        );
        let (allowed, reason) = hooked.decide("Grep", json!({"pattern": "fn main", "path": "src"}));
        assert_eq!(allowed, Permission::Allow, "{reason}");
    }
    let log = fs::read_to_string(hooked.served.audit_log()).unwrap();
    let inputs: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "decision" && r["body"]["tool"] == "Grep")
        .map(|r| r["body"]["facts"]["input"]["values"]["pattern"].clone())
        .collect();
    assert_eq!(
        inputs,
        [
            json!("password="),
            json!("fn main"),
            json!("password="),
            json!("fn main")
        ]
    );
}

#[test]
fn policies_scoped_to_a_client_hold_for_it_however_many_other_clients_have_theirs() {
    let hooked = Hooked::new();
    // Policies scoped to each client, and a thousand grants to clients the
    // hook never serves: a cached load leaves those out, never the ones
    // that name its own client.
    let mut text = String::from(
        r#"
@id("agent.no_reads_of_src")
@reason("the agent may not read src")
forbid (principal == Portcullis::Client::"agent", action, resource == Portcullis::Tool::"harness/Read");
@id("reader.no_reads")
@reason("the reader may not read at all")
forbid (principal == Portcullis::Client::"reader", action, resource == Portcullis::Tool::"harness/Read");
"#,
    );
    for i in 0..1000 {
        text.push_str(&format!(
            "@id(\"grant.{i}\") @reason(\"grant {i}\")\npermit (principal == Portcullis::Client::\"c{i}\", action, resource);\n"
        ));
    }
    hooked.served.tree.write_policy("75_scoped.cedar", &text);
    let read = serde_json::to_vec(&hooked.event("Read", json!({"file_path": "src/a.rs"}))).unwrap();
    let grep =
        serde_json::to_vec(&hooked.event("Grep", json!({"pattern": "fn", "path": "src"}))).unwrap();
    for round in 0..2 {
        let (agent, reason) = hooked.claude(&hooked.served.token, &read);
        assert_eq!(agent, Permission::Deny, "round {round}: {reason}");
        assert!(reason.contains("the agent may not read src"), "{reason}");
        let (reader, reason) = hooked.claude(&hooked.reader_token, &read);
        assert_eq!(reader, Permission::Deny, "round {round}: {reason}");
        assert!(
            reason.contains("the reader may not read at all"),
            "{reason}"
        );
        let (grep, reason) = hooked.claude(&hooked.served.token, &grep);
        assert_eq!(grep, Permission::Allow, "round {round}: {reason}");
    }
    // Every decision names the whole set, however much of it was parsed.
    let hashes: BTreeSet<String> = hooked
        .records()
        .iter()
        .filter(|r| r["kind"] == "decision")
        .map(|r| r["body"]["policy_set"]["hash"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(hashes.len(), 1, "{hashes:?}");
}

#[test]
fn a_credential_in_a_command_is_recorded_only_as_its_hash_and_replays_the_same() {
    let hooked = Hooked::new();
    let bearer = "sk-live-4f1c9e0d8b7a6c5e3a1b";
    let key = "wJalrXUtnFEMI-K7MDENG-bPxRfiCY";
    let password = "hunter2-correct-horse";
    for command in [
        format!("curl -H 'Authorization: Bearer {bearer}' https://api.example.com/v1"),
        format!("export AWS_SECRET_ACCESS_KEY={key}"),
        format!("mysql --password {password} -e 'select 1'"),
    ] {
        hooked.decide("Bash", json!({ "command": command }));
    }
    let log = fs::read_to_string(hooked.served.audit_log()).unwrap();
    for secret in [bearer, key, password] {
        assert!(!log.contains(secret), "{secret} is in the log");
        let hash = format!(
            "sha256:{}",
            hex::encode(<sha2::Sha256 as sha2::Digest>::digest(secret))
        );
        assert!(log.contains(&hash), "{secret} is not recorded as its hash");
    }
    assert!(
        log.contains("AWS_SECRET_ACCESS_KEY=sha256:"),
        "the name is kept"
    );
    let path = hooked.served.audit_log();
    let run = portcullis(&[
        "audit",
        "replay",
        path.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    let summary = &run.json()["summary"];
    assert_eq!(summary["changes"], json!([]), "{summary}");
    assert_eq!(summary["same"], 3, "{summary}");
}
