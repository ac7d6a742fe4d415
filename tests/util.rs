use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

/// A finished run of the binary.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|err| panic!("stdout is not JSON ({err}): {}", self.stdout))
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Spawns `command`, whose program a test may just have written (a copy
/// of the binary, a script): while another test's fork still holds the
/// file open for writing, between its fork and its exec, the kernel
/// refuses to run it ("Text file busy"). That child execs (closing the
/// file) at once, so the spawn is tried again until it has.
pub fn spawn_once_written(command: &mut Command) -> std::process::Child {
    let start = std::time::Instant::now();
    loop {
        match command.spawn() {
            Err(err)
                if err.kind() == std::io::ErrorKind::ExecutableFileBusy
                    && start.elapsed() < std::time::Duration::from_secs(60) =>
            {
                std::thread::yield_now();
            }
            spawned => return spawned.unwrap(),
        }
    }
}

/// Runs `command` with `stdin` written to it; the process may exit before
/// reading it all (a refusal), so a broken pipe is not an error.
pub fn run_with_stdin(mut command: Command, stdin: &[u8]) -> Run {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = spawn_once_written(&mut command);
    let _ = child.stdin.take().unwrap().write_all(stdin);
    let output = child.wait_with_output().unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

pub fn portcullis(args: &[&str]) -> Run {
    portcullis_in(Path::new("."), args)
}

pub fn portcullis_in(dir: &Path, args: &[&str]) -> Run {
    let output: Output = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(args)
        .current_dir(dir)
        .env_remove("PORTCULLIS_POLICIES")
        .env_remove("PORTCULLIS_SCHEMA")
        .output()
        .expect("the binary runs");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// A temporary folder with the default policies written out by `init`.
pub struct Tree {
    pub dir: tempfile::TempDir,
}

impl Tree {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let run = portcullis(&["init", dir.path().to_str().unwrap()]);
        assert_eq!(run.code, 0, "{run:?}");
        Self { dir }
    }

    pub fn policies(&self) -> PathBuf {
        self.dir.path().join("policies")
    }

    pub fn schemas(&self) -> PathBuf {
        self.dir.path().join("schemas")
    }

    pub fn write_policy(&self, name: &str, text: &str) {
        fs::write(self.policies().join(name), text).unwrap();
    }

    /// `--policies DIR --schema DIR` for this tree.
    pub fn flags(&self) -> Vec<String> {
        vec![
            "--policies".into(),
            self.policies().display().to_string(),
            "--schema".into(),
            self.schemas().display().to_string(),
        ]
    }

    pub fn run(&self, command: &[&str]) -> Run {
        let flags = self.flags();
        let mut args: Vec<&str> = command.to_vec();
        args.extend(flags.iter().map(String::as_str));
        portcullis(&args)
    }
}

/// Everything `serve` needs: policies (defaults plus an allowlist), a
/// workspace root, and a token store holding one client.
pub struct Served {
    pub tree: Tree,
    pub root: tempfile::TempDir,
    pub store: PathBuf,
    pub token: String,
}

/// Lets paired and readonly clients see and call every built-in tool.
pub const ALLOW_BUILTIN: &str = r#"
@id("allow.builtin")
@reason("test clients may use the built-in tools")
permit (
  principal,
  action in Portcullis::Action::"use_tool",
  resource in Portcullis::Server::"builtin"
);
"#;

impl Served {
    pub fn new(allowlist: &str, tier: &str) -> Self {
        let tree = Tree::new();
        tree.write_policy("20_allowlist.cedar", allowlist);
        let root = tempfile::tempdir().unwrap();
        fs::write(root.path().join("README.md"), "# test workspace\n").unwrap();
        let store = tree.dir.path().join("state/tokens.json");
        let flags = tree.flags();
        let mut args = vec![
            "token",
            "create",
            "agent",
            "--tier",
            tier,
            "--store",
            store.to_str().unwrap(),
            "--format",
            "json",
        ];
        args.extend(flags.iter().map(String::as_str));
        let run = portcullis(&args);
        assert_eq!(run.code, 0, "{run:?}");
        let token = run.json()["token"].as_str().unwrap().to_owned();
        Self {
            tree,
            root,
            store,
            token,
        }
    }

    pub fn serve_args(&self) -> Vec<String> {
        let mut args = vec![
            "serve".to_owned(),
            "--root".to_owned(),
            self.root.path().display().to_string(),
            "--store".to_owned(),
            self.store.display().to_string(),
            "--audit".to_owned(),
            self.audit_log().display().to_string(),
        ];
        args.extend(self.tree.flags());
        args
    }

    /// The audit log `serve` writes for this setup.
    pub fn audit_log(&self) -> PathBuf {
        self.tree.dir.path().join("audit/audit.jsonl")
    }

    /// The records of the audit log so far (none before it exists). A
    /// line the writer is still appending (no newline yet) is not one.
    pub fn records(&self) -> Vec<serde_json::Value> {
        let text = fs::read_to_string(self.audit_log()).unwrap_or_default();
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        whole
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// `portcullis serve` for this setup, with the token in its environment.
    pub fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_portcullis"));
        command
            .args(self.serve_args())
            .env("PORTCULLIS_TOKEN", &self.token)
            .env_remove("PORTCULLIS_POLICIES")
            .env_remove("PORTCULLIS_SCHEMA")
            .env("PORTCULLIS_LOG", "warn");
        command
    }
}

pub const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
pub const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// A running server with line access to its stdout.
pub struct Session {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Session {
    pub fn start(served: &Served) -> Self {
        let mut command = served.command();
        command.stderr(Stdio::null());
        Self::start_command(command)
    }

    /// Starts a prepared command; stdin and stdout are taken over here.
    pub fn start_command(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin: Some(stdin),
            lines,
        }
    }

    pub fn send(&mut self, frame: &str) {
        writeln!(self.stdin.as_mut().unwrap(), "{frame}").unwrap();
    }

    /// Closes stdin, as a client that is done does, and waits for a clean exit.
    pub fn finish(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        assert!(status.success(), "serve exited with {status}");
    }

    pub fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a frame in time");
        serde_json::from_str(&line).unwrap_or_else(|err| panic!("not JSON ({err}): {line}"))
    }

    /// The frames already answered, without waiting for more.
    pub fn ready(&self) -> Vec<Value> {
        self.lines
            .try_iter()
            .map(|line| serde_json::from_str(&line).unwrap())
            .collect()
    }

    pub fn initialize(&mut self) {
        self.send(INITIALIZE);
        let response = self.next();
        assert_eq!(response["id"], 0, "{response}");
        assert_eq!(response["result"]["serverInfo"]["name"], "portcullis");
        self.send(INITIALIZED);
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The default policies with one paired client, `agent`, and a workspace
/// root `ws/` holding the given folders: what the gate tests judge with.
pub struct GateBench {
    pub engine: portcullis::pdp::Engine,
    pub root: portcullis::facts::Root,
    _dir: tempfile::TempDir,
}

impl GateBench {
    pub fn new(folders: &[&str]) -> Self {
        let clients = [portcullis::pdp::ClientRecord {
            name: "agent".into(),
            tier: "paired".into(),
        }];
        let engine = portcullis::pdp::Engine::load(
            &portcullis::pdp::PolicyBundle::builtin(),
            &portcullis::tools::Registry::builtin().unwrap(),
            &clients,
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        for folder in folders {
            fs::create_dir_all(dir.path().join("ws").join(folder)).unwrap();
        }
        // An empty home: a pattern that can name a secret there is judged
        // by that secret although none exists when it is judged.
        let home = dir.path().join("home");
        fs::create_dir_all(&home).unwrap();
        let root = portcullis::facts::Root::new(&dir.path().join("ws"))
            .unwrap()
            .with_home(Some(home));
        Self {
            engine,
            root,
            _dir: dir,
        }
    }
}

/// Waits until the audit log holds a record matching `wanted`, reading it
/// again whenever it grows; fails after a generous minute.
pub fn wait_for_record(
    log: &Path,
    wanted: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = 0;
    loop {
        let text = fs::read_to_string(log).unwrap_or_default();
        if text.len() != seen {
            seen = text.len();
            let found = text
                .lines()
                .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
                .find(|record| wanted(record));
            if let Some(record) = found {
                return record;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no such record in {}",
            log.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `folders` folders `deep/d<n>` of 500 small files each under `root`:
/// a tree a search takes long enough over to be cancelled mid-way.
pub fn deep_tree(root: &Path, folders: usize) {
    for d in 0..folders {
        let folder = root.join(format!("deep/d{d}"));
        fs::create_dir_all(&folder).unwrap();
        for f in 0..500 {
            fs::write(folder.join(format!("f{f}.txt")), "hay hay hay\n").unwrap();
        }
    }
}

/// Whether cvc5 (`CVC5`, else on `PATH`) runs; a test that needs it says
/// it skips when it does not (CI installs it, `.ci/install-cvc5`).
pub fn solver_or_skip() -> bool {
    let present = have(&std::env::var("CVC5").unwrap_or_else(|_| "cvc5".into()));
    if !present {
        eprintln!("SKIPPED: cvc5 is not on PATH; this test proves with it");
    }
    present
}

/// Whether `program --version` runs.
pub fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
}

/// Installs the npm packages of `package_json` into the target folder
/// `name`, once per version of that file; returns the folder.
pub fn npm_install(package_json: &Path, name: &str) -> PathBuf {
    // Tests run in parallel: one install at a time, and the others then
    // find it done.
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    fs::create_dir_all(&dir).unwrap();
    let wanted = fs::read_to_string(package_json).unwrap();
    let marker = dir.join("node_modules/.portcullis-package.json");
    if fs::read_to_string(&marker).ok().as_deref() != Some(wanted.as_str()) {
        fs::write(dir.join("package.json"), &wanted).unwrap();
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent"])
            .current_dir(&dir)
            .status()
            .unwrap();
        assert!(status.success(), "npm install in {} failed", dir.display());
        fs::write(&marker, &wanted).unwrap();
    }
    dir
}
