//! `portcullis exec` and the hook that hands it allowed commands, on the
//! real kernel with real bash: commands the gate cannot see through,
//! allowed by a team policy that permits every command, still cannot
//! change anything outside the root or in VCS metadata, nor reach the
//! network; legitimate work (a cargo build, an npm test, an approved git
//! commit) runs confined; a kernel without Landlock makes `exec` refuse
//! unless told to run unconfined, and every run is recorded.
//!
//! The workspaces live under the build's temporary folder, not `/tmp`:
//! a confined command gets a private `/tmp`, where a write outside the
//! root would vanish rather than be refused.

use std::collections::BTreeMap;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::util::{Run, Served, have, run_with_stdin};

/// Every command may run: the gate's judgement is out of the way, so the
/// kernel's confinement is what is tested.
const EVERY_COMMAND: &str = r#"
@id("test.every_command")
@reason("this team lets every command run")
permit (principal, action in Portcullis::Action::"run_command", resource);
"#;

struct Workspace {
    served: Served,
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

impl Workspace {
    fn new(permissive: bool) -> Self {
        let served = Served::new("", "paired");
        if permissive {
            served
                .tree
                .write_policy("70_every_command.cedar", EVERY_COMMAND);
        }
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let base = fs::canonicalize(dir.path()).unwrap();
        let root = base.join("ws");
        let outside = base.join("outside");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("plain.txt"), "outside\n").unwrap();
        fs::write(root.join("a.txt"), "a\n").unwrap();
        let git = |args: &[&str]| {
            let status = Command::new("git")
                .args(args)
                .current_dir(&root)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        git(&["config", "user.email", "agent@example.com"]);
        git(&["config", "user.name", "agent"]);
        Self {
            served,
            _dir: dir,
            root,
            outside,
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
        command
            .arg("exec")
            .arg("--root")
            .arg(&self.root)
            .arg("--store")
            .arg(&self.served.store)
            .arg("--audit")
            .arg(self.served.audit_log())
            .args(self.served.tree.flags())
            .args(args)
            .current_dir(&self.root)
            .env("PORTCULLIS_TOKEN", &self.served.token)
            .env_remove("PORTCULLIS_POLICIES")
            .env_remove("PORTCULLIS_SCHEMA")
            .env_remove("PORTCULLIS_LANDLOCK_ABI")
            .env("PORTCULLIS_LOG", "warn");
        command
    }

    fn exec(&self, args: &[&str]) -> Run {
        run_with_stdin(self.command(args), b"")
    }

    /// Every file beneath `folder` with its content and mode.
    fn snapshot(folder: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
        use std::os::unix::fs::PermissionsExt;
        let mut out = BTreeMap::new();
        let mut pending = vec![folder.to_owned()];
        while let Some(dir) = pending.pop() {
            for entry in fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let meta = fs::symlink_metadata(&path).unwrap();
                if meta.is_dir() {
                    pending.push(path.clone());
                }
                let content = if meta.is_file() {
                    fs::read(&path).unwrap()
                } else {
                    Vec::new()
                };
                out.insert(path, (content, meta.permissions().mode()));
            }
        }
        out
    }

    fn outcomes(&self) -> Vec<Value> {
        self.served
            .records()
            .into_iter()
            .filter(|r| r["kind"] == "outcome")
            .map(|r| r["body"].clone())
            .collect()
    }
}

#[test]
fn commands_the_gate_cannot_see_through_still_cannot_escape_the_root() {
    let ws = Workspace::new(true);
    let before_outside = Workspace::snapshot(&ws.outside);
    let before_git = Workspace::snapshot(&ws.root.join(".git"));
    let escapes: [&[&str]; 9] = [
        &[
            "--",
            "python3",
            "-c",
            "open('../outside/x', 'w').write('pwn')",
        ],
        &["--command", "sh -c \"$(printf 'echo x > ../outside/y')\""],
        &["--command", "x='a[$(touch ../outside/pwn)]'; echo $((x))"],
        &["--", "perl", "-e", "unlink '.git/config' or die"],
        &[
            "--",
            "python3",
            "-c",
            "import subprocess; subprocess.run(['sh', '-c', 'echo evil > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit'])",
        ],
        &[
            "--command",
            "python3 -c \"import os; os.symlink('../outside', 'link')\"; python3 -c \"open('link/z', 'w').write('pwn')\"",
        ],
        &[
            "--",
            "python3",
            "-c",
            "import shutil; shutil.move('a.txt', '../outside/a.txt')",
        ],
        &[
            "--",
            "python3",
            "-c",
            "import os; os.chmod('../outside/plain.txt', 0o777)",
        ],
        &[
            "--",
            "python3",
            "-c",
            "import os; os.rename('.git/HEAD', 'HEAD.moved')",
        ],
    ];
    for escape in escapes {
        let run = ws.exec(escape);
        assert!(
            !run.stderr.contains("portcullis:"),
            "the command was meant to run: {escape:?}\n{run:?}"
        );
    }
    assert_eq!(
        Workspace::snapshot(&ws.outside),
        before_outside,
        "nothing outside the root changes"
    );
    assert_eq!(
        Workspace::snapshot(&ws.root.join(".git")),
        before_git,
        "VCS metadata is unchanged"
    );
    assert_eq!(fs::read_to_string(ws.root.join("a.txt")).unwrap(), "a\n");
    // Writes inside the root still work, and each run was recorded.
    let run = ws.exec(&["--", "python3", "-c", "open('made.txt', 'w').write('ok')"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(fs::read_to_string(ws.root.join("made.txt")).unwrap(), "ok");
    // Every one of them ran (an outcome each), confined.
    let outcomes = ws.outcomes();
    assert_eq!(outcomes.len(), escapes.len() + 1, "{outcomes:?}");
    assert!(
        outcomes.iter().all(|o| o["confined"] == true),
        "{outcomes:?}"
    );
}

#[test]
fn without_network_in_its_classes_a_command_cannot_reach_a_loopback_listener() {
    let ws = Workspace::new(true);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect =
        format!("import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)");
    let run = ws.exec(&["--", "python3", "-c", &connect]);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("unreachable"), "{run:?}");
    assert!(listener.accept().is_err(), "no connection arrived");
    assert_eq!(ws.outcomes()[0]["network"], false);
}

#[test]
fn legitimate_work_runs_confined() {
    let ws = Workspace::new(true);
    let krate = ws.root.join("tiny");
    fs::create_dir_all(krate.join("src")).unwrap();
    fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    fs::write(
        krate.join("src/main.rs"),
        "fn main() { println!(\"hi\"); }\n",
    )
    .unwrap();
    let mut build = ws.command(&["--", "cargo", "build", "--offline", "-q"]);
    build.current_dir(&krate).env_remove("CARGO_TARGET_DIR");
    let run = run_with_stdin(build, b"");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(krate.join("target/debug/tiny").is_file());
    if have("npm") {
        let package = ws.root.join("pkg");
        fs::create_dir_all(&package).unwrap();
        fs::write(
            package.join("package.json"),
            json!({"name": "pkg", "version": "1.0.0", "scripts": {
                "test": "node -e \"require('fs').writeFileSync('tested.txt', 'ok')\""
            }})
            .to_string(),
        )
        .unwrap();
        let mut test = ws.command(&["--", "npm", "test"]);
        test.current_dir(&package);
        let run = run_with_stdin(test, b"");
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(
            fs::read_to_string(package.join("tested.txt")).unwrap(),
            "ok"
        );
    } else {
        eprintln!("skipped the npm part: npm is not installed");
    }
}

#[test]
fn deny_ask_and_bad_approvals_have_their_own_exit_codes() {
    let ws = Workspace::new(false);
    let run = ws.exec(&["--command", "echo x > ../outside/x"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("denied"), "{run:?}");
    let run = ws.exec(&["--", "touch", "b.txt"]);
    assert_eq!(run.code, 4, "{run:?}");
    assert!(run.stderr.contains("approval"), "{run:?}");
    assert!(!ws.root.join("b.txt").exists());
    let run = ws.exec(&["--approved", "forged.token", "--", "touch", "b.txt"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("tampered"), "{run:?}");
    let run = ws.exec(&[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("give the command"), "{run:?}");
    // A read-only command is allowed and runs; its exit code is its own.
    let run = ws.exec(&["--", "ls", "missing-file"]);
    assert_eq!(run.code, 2, "ls's own code: {run:?}");
    let run = ws.exec(&["--", "cat", "a.txt"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, "a\n"), "{run:?}");
    let decisions: Vec<Value> = ws
        .served
        .records()
        .into_iter()
        .filter(|r| r["kind"] == "decision")
        .map(|r| r["body"]["decision"].clone())
        .collect();
    assert_eq!(decisions, ["deny", "ask", "allow", "allow"]);
}

#[test]
fn without_landlock_exec_refuses_unless_told_to_run_unconfined() {
    let ws = Workspace::new(true);
    let mut refused = ws.command(&["--", "touch", "made.txt"]);
    refused.env("PORTCULLIS_LANDLOCK_ABI", "0");
    let run = run_with_stdin(refused, b"");
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.stderr.contains("Landlock"), "{run:?}");
    assert!(!ws.root.join("made.txt").exists());
    let mut unconfined = ws.command(&["--unconfined-ok", "--", "touch", "made.txt"]);
    unconfined.env("PORTCULLIS_LANDLOCK_ABI", "0");
    let run = run_with_stdin(unconfined, b"");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(ws.root.join("made.txt").exists());
    let outcomes = ws.outcomes();
    assert_eq!(outcomes[0]["status"], "not_run", "{outcomes:?}");
    assert_eq!(outcomes[1]["confined"], false, "{outcomes:?}");
    assert!(
        outcomes[1]["unconfined_because"]
            .as_str()
            .unwrap()
            .contains("Landlock")
    );
}

/// Claude Code's PreToolUse event for its Bash tool.
fn bash_event(root: &Path, command: &str) -> Vec<u8> {
    json!({
        "session_id": "s1", "transcript_path": "/dev/null", "cwd": root,
        "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "t1",
        "tool_input": {"command": command, "description": "a command"}
    })
    .to_string()
    .into_bytes()
}

impl Workspace {
    fn hook(&self, extra: &[&str], event: &[u8]) -> Value {
        let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
        command
            .args(["hook", "claude-code", "--root"])
            .arg(&self.root)
            .arg("--store")
            .arg(&self.served.store)
            .arg("--audit")
            .arg(self.served.audit_log())
            .args(self.served.tree.flags())
            .args(extra)
            .current_dir(&self.root)
            .env("PORTCULLIS_TOKEN", &self.served.token)
            .env_remove("PORTCULLIS_NO_CONFINE");
        let run = run_with_stdin(command, event);
        assert_eq!(run.code, 0, "{run:?}");
        run.json()["hookSpecificOutput"].clone()
    }

    /// Runs a hook's rewritten command as Claude Code does: `bash -c`.
    fn run_as_claude_code(&self, command: &str) -> Run {
        let mut bash = Command::new("bash");
        bash.args(["-c", command])
            .current_dir(&self.root)
            .env("PORTCULLIS_TOKEN", &self.served.token);
        run_with_stdin(bash, b"")
    }
}

#[test]
fn the_hook_hands_claude_code_a_confined_command_and_an_approved_commit_runs_once() {
    let ws = Workspace::new(false);
    // An allowed read: allow, run through exec.
    let output = ws.hook(&[], &bash_event(&ws.root, "cat a.txt"));
    assert_eq!(output["permissionDecision"], "allow");
    let rewritten = output["updatedInput"]["command"].as_str().unwrap();
    assert!(
        rewritten.contains(" exec ") && !rewritten.contains("--approved"),
        "{rewritten}"
    );
    assert_eq!(output["updatedInput"]["description"], "a command");
    let run = ws.run_as_claude_code(rewritten);
    assert_eq!((run.code, run.stdout.as_str()), (0, "a\n"), "{run:?}");
    // A commit asks; the human's yes comes with the rewritten input.
    let add = Command::new("git")
        .args(["add", "a.txt"])
        .current_dir(&ws.root)
        .status()
        .unwrap();
    assert!(add.success());
    let output = ws.hook(&[], &bash_event(&ws.root, "git commit -qm first"));
    assert_eq!(output["permissionDecision"], "ask");
    let rewritten = output["updatedInput"]["command"].as_str().unwrap();
    assert!(rewritten.contains("--approved"), "{rewritten}");
    let run = ws.run_as_claude_code(rewritten);
    assert_eq!(run.code, 0, "{run:?}");
    let log = Command::new("git")
        .args(["log", "--oneline"])
        .current_dir(&ws.root)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&log.stdout).contains("first"));
    // The approval is spent.
    let run = ws.run_as_claude_code(rewritten);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("already used"), "{run:?}");
    // Each hook decision says the command runs confined; exec's own
    // decision and its outcome follow.
    let records = ws.served.records();
    let hook_decisions: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "decision" && r["body"]["transport"] == "hook")
        .collect();
    assert_eq!(hook_decisions.len(), 2);
    assert!(hook_decisions.iter().all(|r| r["body"]["confined"] == true));
    let approved_run = records
        .iter()
        .find(|r| r["kind"] == "decision" && r["body"]["approved"] == true)
        .expect("exec recorded the approved decision");
    assert_eq!(approved_run["body"]["decision"], "ask");
    let outcomes = ws.outcomes();
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert_eq!(outcomes[1]["approved"], true);
    assert_eq!(
        outcomes[1]["vcs_read_only"], false,
        "an approved commit writes .git"
    );
}

#[test]
fn a_command_the_hook_lets_through_cannot_escape_when_claude_code_runs_it() {
    let ws = Workspace::new(true);
    let output = ws.hook(
        &[],
        &bash_event(
            &ws.root,
            "python3 -c \"open('../outside/x', 'w')\"; echo ran",
        ),
    );
    assert_eq!(output["permissionDecision"], "allow");
    let run = ws.run_as_claude_code(output["updatedInput"]["command"].as_str().unwrap());
    assert!(run.stdout.contains("ran"), "{run:?}");
    // Refused, or (a checkout under `/tmp`) written into the command's
    // private `/tmp`, gone with it: either way nothing outside changed.
    assert!(!ws.outside.join("x").exists(), "{run:?}");
    // Turned off for the project: no rewrite, and the decision says so.
    let output = ws.hook(&["--no-confine"], &bash_event(&ws.root, "ls"));
    assert_eq!(output["permissionDecision"], "allow");
    assert!(output.get("updatedInput").is_none(), "{output}");
    let last = ws
        .served
        .records()
        .into_iter()
        .rfind(|r| r["kind"] == "decision")
        .unwrap();
    assert_eq!(last["body"]["confined"], false);
}

#[test]
fn credentials_outside_the_root_cannot_be_read_by_a_command_judged_to_read_none() {
    let ws = Workspace::new(true);
    let home = ws.outside.join("home");
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::create_dir_all(home.join(".aws")).unwrap();
    fs::write(home.join(".ssh/id_ed25519"), "SECRET-KEY").unwrap();
    fs::write(home.join(".aws/credentials"), "SECRET-AWS").unwrap();
    fs::write(home.join(".netrc"), "SECRET-NETRC").unwrap();
    fs::write(home.join(".profile"), "PLAIN-PROFILE").unwrap();
    // The script is a file the gate does not read: it sees `python3
    // read.py`, a program run on a file in the root.
    fs::write(
        ws.root.join("read.py"),
        "import os, pathlib\n\
         for name in ['.ssh/id_ed25519', '.aws/credentials', '.netrc', '.profile']:\n\
         \x20   try: print(pathlib.Path(os.environ['HOME'], name).read_text())\n\
         \x20   except OSError as err: print('refused', err.errno)\n",
    )
    .unwrap();
    let mut command = ws.command(&["--", "python3", "read.py"]);
    command.env("HOME", &home);
    let run = run_with_stdin(command, b"");
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stdout.contains("SECRET"), "{run:?}");
    // A home under `/tmp` is behind the command's private `/tmp`.
    if !home.starts_with("/tmp") {
        assert!(
            run.stdout.contains("PLAIN-PROFILE"),
            "the rest is readable: {run:?}"
        );
    }
}
