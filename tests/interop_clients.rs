//! Real MCP hosts from npm, configured exactly as the README says: Claude
//! Code's `claude mcp add` / `claude mcp list` health check, and the MCP
//! Inspector's CLI calling an asked and a denied tool. Both are installed
//! into cargo's target folder once; without `node` and `npm` the tests say
//! so and pass.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::http::HttpServer;
use crate::util::{ALLOW_BUILTIN, have, npm_install, portcullis};

/// The folder of `node_modules/.bin`, installed from the pinned versions,
/// once for all the tests in this file.
fn installed() -> Option<PathBuf> {
    static INSTALLED: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    INSTALLED.get_or_init(install).clone()
}

fn install() -> Option<PathBuf> {
    if !have("node") || !have("npm") {
        eprintln!("SKIPPED: node and npm are needed for the MCP host interop tests");
        return None;
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/clients/package.json");
    Some(npm_install(&source, "interop-clients").join("node_modules/.bin"))
}

/// A user's machine as the README sets it up: `portcullis` on PATH, a
/// policy tree from `init` with an allowlist, a token, a project.
struct Machine {
    home: tempfile::TempDir,
    bin: tempfile::TempDir,
    project: PathBuf,
}

impl Machine {
    fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        let bin = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(
            env!("CARGO_BIN_EXE_portcullis"),
            bin.path().join("portcullis"),
        )
        .unwrap();
        let project = home.path().join("project");
        fs::create_dir(&project).unwrap();
        fs::write(project.join("README.md"), "# a project\n").unwrap();
        let machine = Self { home, bin, project };
        let run = portcullis(&["init", machine.tree().to_str().unwrap()]);
        assert_eq!(run.code, 0, "{run:?}");
        fs::write(machine.policies().join("20_allowlist.cedar"), ALLOW_BUILTIN).unwrap();
        machine
    }

    fn tree(&self) -> PathBuf {
        self.home.path().join(".config/portcullis")
    }

    fn policies(&self) -> PathBuf {
        self.tree().join("policies")
    }

    fn schemas(&self) -> PathBuf {
        self.tree().join("schemas")
    }

    /// A command as a user's shell would run it.
    fn command(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        let path = format!(
            "{}:{}",
            self.bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        command
            .current_dir(&self.project)
            .env("HOME", self.home.path())
            .env("PATH", path)
            .env("DISABLE_TELEMETRY", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env_remove("PORTCULLIS_TOKEN_STORE")
            .env_remove("XDG_STATE_HOME");
        command
    }

    /// The `-e NAME=value` flags both hosts take: the token and where the
    /// policies are, as the README's snippets give them.
    fn env_flags(&self, token: &str) -> Vec<String> {
        [
            format!("PORTCULLIS_TOKEN={token}"),
            format!("PORTCULLIS_POLICIES={}", self.policies().display()),
            format!("PORTCULLIS_SCHEMA={}", self.schemas().display()),
        ]
        .into_iter()
        .flat_map(|pair| ["-e".to_owned(), pair])
        .collect()
    }

    /// `portcullis token create NAME`, with the default store in HOME.
    fn token(&self, name: &str) -> String {
        let output = self
            .command(&self.bin.path().join("portcullis"))
            .args([
                "token", "create", name, "--tier", "paired", "--format", "json",
            ])
            .env("PORTCULLIS_POLICIES", self.policies())
            .env("PORTCULLIS_SCHEMA", self.schemas())
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        let created: Value = serde_json::from_slice(&output.stdout).unwrap();
        created["token"].as_str().unwrap().to_owned()
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// `claude mcp list` runs its health check and reports portcullis connected.
fn assert_listed_connected(machine: &Machine, claude: &Path) {
    assert_listed_connected_with(machine, claude, &[]);
}

/// As `assert_listed_connected`, with `env` set for the client.
fn assert_listed_connected_with(machine: &Machine, claude: &Path, env: &[(&str, &str)]) {
    let listed = machine
        .command(claude)
        .args(["mcp", "list"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let said = text(&listed);
    assert!(listed.status.success(), "{said}");
    let line = said
        .lines()
        .find(|line| line.starts_with("portcullis:"))
        .unwrap_or_else(|| panic!("no portcullis line: {said}"));
    assert!(line.contains("Connected"), "{said}");
}

#[test]
fn claude_code_reports_the_server_connected_as_the_readme_configures_it() {
    let Some(bin) = installed() else { return };
    let machine = Machine::new();
    let token = machine.token("claude-code");
    let claude = bin.join("claude");
    let added = machine
        .command(&claude)
        .args(["mcp", "add", "portcullis"])
        .args(machine.env_flags(&token))
        .args(["--", "portcullis", "serve", "--root"])
        .arg(&machine.project)
        .output()
        .unwrap();
    assert!(added.status.success(), "{}", text(&added));
    assert_listed_connected(&machine, &claude);
}

#[test]
fn claude_code_reports_the_http_server_connected_as_the_readme_configures_it() {
    let Some(bin) = installed() else { return };
    let machine = Machine::new();
    let token = machine.token("claude-code");
    let mut serve = machine.command(&machine.bin.path().join("portcullis"));
    serve
        .args(["serve", "--root"])
        .arg(&machine.project)
        .env("PORTCULLIS_POLICIES", machine.policies())
        .env("PORTCULLIS_SCHEMA", machine.schemas());
    let server = HttpServer::spawn(serve);
    let claude = bin.join("claude");
    let added = machine
        .command(&claude)
        .args([
            "mcp",
            "add",
            "--transport",
            "http",
            "portcullis",
            &server.url(),
        ])
        // The token stays in the environment: Claude Code expands the
        // variable when it connects, and its config never holds the token.
        .args(["--header", "Authorization: Bearer ${PORTCULLIS_TOKEN}"])
        .output()
        .unwrap();
    assert!(added.status.success(), "{}", text(&added));
    let config = std::fs::read_to_string(machine.home.path().join(".claude.json")).unwrap();
    assert!(config.contains("${PORTCULLIS_TOKEN}"), "{config}");
    assert!(
        !config.contains(&token),
        "the token is in the client's config"
    );
    assert_listed_connected_with(&machine, &claude, &[("PORTCULLIS_TOKEN", &token)]);
    server.stop();
}

/// The current Inspector CLI, on the Node 22 installed beside it (it needs
/// 22.19 or later): one `tools/call` in `era`, with its exit code (5 for an
/// `isError` result) and the result it printed.
fn inspect(
    machine: &Machine,
    bin: &Path,
    token: &str,
    era: &str,
    tool_args: &[&str],
) -> (i32, Value) {
    let path = format!(
        "{}:{}:{}",
        bin.display(),
        machine.bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = machine.command(&bin.join("mcp-inspector"));
    command
        .env("PATH", path)
        .arg("--cli")
        .args(machine.env_flags(token))
        .args(["--protocol-era", era])
        .args(["--method", "tools/call"])
        .args(tool_args)
        .args([
            "--format",
            "json",
            "-q",
            "portcullis",
            "--",
            "serve",
            "--root",
        ])
        .arg(&machine.project);
    let output = command.output().unwrap();
    let printed: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|err| panic!("{era}: {err}: {}", text(&output)));
    (output.status.code().unwrap_or(-1), printed)
}

#[test]
fn the_current_inspector_cli_shows_a_read_an_ask_and_a_denial_in_both_eras() {
    let Some(bin) = installed() else { return };
    let machine = Machine::new();
    let token = machine.token("inspector");
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), machine.project.join("outside")).unwrap();
    for era in ["legacy", "modern"] {
        let (code, read) = inspect(
            &machine,
            &bin,
            &token,
            era,
            &["--tool-name", "read_file", "--tool-arg", "path=README.md"],
        );
        assert_eq!(code, 0, "{era}: {read}");
        assert_eq!(
            read["result"]["structuredContent"]["content"], "# a project\n",
            "{era}: {read}"
        );
        let (code, denied) = inspect(
            &machine,
            &bin,
            &token,
            era,
            &[
                "--tool-name",
                "write_file",
                "--tool-arg",
                "path=outside/escape.txt",
                "--tool-arg",
                "content=x",
            ],
        );
        // 5: the CLI's code for an isError result.
        assert_eq!(code, 5, "{era}: {denied}");
        assert_eq!(
            denied["result"]["structuredContent"]["reason_code"], "forbidden",
            "{era}: {denied}"
        );
    }
    // A legacy session of the CLI declares no elicitation: nobody can be
    // asked, and the write does not run.
    let (code, asked) = inspect(
        &machine,
        &bin,
        &token,
        "legacy",
        &[
            "--tool-name",
            "write_file",
            "--tool-arg",
            "path=new.txt",
            "--tool-arg",
            "content=x",
        ],
    );
    assert_eq!(code, 5, "{asked}");
    assert_eq!(
        asked["result"]["structuredContent"]["reason_code"], "approval_unavailable",
        "{asked}"
    );
    assert!(!machine.project.join("new.txt").exists());
    assert!(fs::read_dir(outside.path()).unwrap().next().is_none());
}
