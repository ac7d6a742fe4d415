//! `portcullis hook`: a coding agent's harness runs `hook claude-code` (or
//! `hook codex`) before each of its own tools, with one `PreToolUse` event
//! on stdin; the answer goes to stdout in the harness's format. `hook
//! install claude-code` writes the hook into Claude Code's settings.
//!
//! A harness runs the tool when its hook exits with any code but 0 or 2,
//! so this command always answers: every failure (a malformed event, a
//! token that does not authenticate, a policy set that does not load, an
//! audit log that cannot be written, even a panic) is a deny with its
//! reason, on stdout with exit 0, or on stderr with exit 2 when stdout
//! cannot take it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::json;

use super::harness_setting::{command_approvals, load_failed};
use super::state_paths::{StoreArgs, audit_for_one_decision, audit_path, authenticate, set_cache};
use super::{Exit, Format, PolicyArgs, print_json};
use crate::auth::TOKEN_ENV;
use crate::facts::{Root, Transport, shell_quote};
use crate::hook::install::{Installed, install_claude_code};
use crate::hook::remote::{self, HookAsk, SOCKET_ENV};
use crate::hook::{
    CommandRewrite, Harness, HookAnswer, MAX_EVENT_BYTES, PreToolUse, decide, mcp_tool,
    tools_needed,
};
use crate::keeper::{AuditSink, ClientIdentity, Keeper, Setting};
use crate::pdp::{Audience, ClientRecord, Engine};
use crate::servers::Servers;
use crate::tools::Registry;

/// The exit code a harness reads as "blocked", with the reason on stderr.
const BLOCKED: i32 = 2;

#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Decide one Claude Code PreToolUse event (stdin) and answer on stdout.
    ClaudeCode(HookArgs),
    /// Decide one Codex PreToolUse event (stdin) and answer on stdout.
    Codex(HookArgs),
    /// Write the hook into a harness's settings.
    #[command(subcommand)]
    Install(InstallCommand),
}

#[derive(Debug, Subcommand)]
pub enum InstallCommand {
    /// Add `portcullis hook claude-code` as a PreToolUse hook for every tool
    /// to Claude Code's settings (the user's, or a project's).
    ClaudeCode(InstallArgs),
}

#[derive(Debug, Args)]
pub struct InstallArgs {
    /// Install into DIR/.claude/settings.json (shared with the project)
    /// instead of the user's ~/.claude/settings.json.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Let Claude Code run allowed shell commands as they are, not through
    /// `portcullis exec` (unconfined; each decision records it).
    #[arg(long)]
    pub no_confine: bool,
    /// Have the hook ask the `serve` listening here (`serve --hook-socket
    /// PATH`) first; written into the hook's command as an absolute path.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct HookArgs {
    #[command(flatten)]
    pub policies: PolicyArgs,
    #[command(flatten)]
    pub store: StoreArgs,
    /// The workspace root paths are judged against [default: PORTCULLIS_ROOT,
    /// else CLAUDE_PROJECT_DIR, which Claude Code sets for its hooks; for
    /// Codex, else the session's folder].
    #[arg(long, env = "PORTCULLIS_ROOT", value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// The audit log, shared with `serve` [default: audit/audit.jsonl
    /// beside the token store].
    #[arg(long, env = "PORTCULLIS_AUDIT", value_name = "FILE")]
    pub audit: Option<PathBuf>,
    /// Longest time to decide and record, in seconds; past it the answer
    /// is deny (the harness's own timeout would let the tool run).
    #[arg(long, default_value_t = 10, value_name = "SECS")]
    pub deadline: u64,
    /// The name portcullis's own MCP server has in the harness: its tools
    /// (`mcp__NAME__...`) are decided by `serve`, so the hook leaves them
    /// to the harness. Any other MCP server's tool is decided here, as the
    /// pinned tool of that server in servers.toml, or denied.
    #[arg(
        long,
        env = "PORTCULLIS_MCP_SERVER",
        default_value = "portcullis",
        value_name = "NAME"
    )]
    pub mcp_server: String,
    /// Answer an allowed or approved shell command as it is, not as a
    /// `portcullis exec` of it (Claude Code only: Codex cannot rewrite a
    /// command). Each decision records whether the command runs confined.
    #[arg(long, env = "PORTCULLIS_NO_CONFINE")]
    pub no_confine: bool,
    /// Ask the `serve` listening here (`serve --hook-socket`), which holds
    /// the set loaded, to decide and record; when nothing answers there, or
    /// it holds another set, token store or log, the hook decides itself.
    #[arg(long, env = SOCKET_ENV, value_name = "PATH")]
    pub socket: Option<PathBuf>,
}

pub fn run(command: HookCommand, format: Format) -> anyhow::Result<Exit> {
    match command {
        HookCommand::ClaudeCode(args) => answer(&args, Harness::ClaudeCode),
        HookCommand::Codex(args) => answer(&args, Harness::Codex),
        HookCommand::Install(InstallCommand::ClaudeCode(args)) => install(&args, format),
    }
}

/// Decides the event on stdin, writes the answer and exits; never fails.
fn answer(args: &HookArgs, harness: Harness) -> ! {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("portcullis: denied: the hook failed ({info})");
        std::process::exit(BLOCKED);
    }));
    let answer = match read_event() {
        Ok((bytes, event)) => decide_event(args, harness, &bytes, &event)
            .unwrap_or_else(|err| HookAnswer::deny(format!("portcullis: {err:#}"))),
        Err(reason) => HookAnswer::deny(format!("portcullis: {reason}")),
    };
    let output = match harness {
        Harness::ClaudeCode => answer.claude_code(),
        Harness::Codex => answer.codex(),
    };
    let written = match output {
        Some(output) => {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{output}").and_then(|()| stdout.flush())
        }
        None => Ok(()),
    };
    if written.is_err() {
        eprintln!("{}", answer.reason);
        std::process::exit(BLOCKED);
    }
    // The record is durable and the answer written: nothing is left to
    // tear down that the harness would wait for.
    std::process::exit(0);
}

/// The event's bytes as the harness wrote them, and the event they hold.
fn read_event() -> Result<(Vec<u8>, PreToolUse), String> {
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_EVENT_BYTES).unwrap_or(u64::MAX) + 1;
    std::io::stdin()
        .lock()
        .take(limit)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("the hook event cannot be read: {err}"))?;
    let event = PreToolUse::parse(&bytes).map_err(|err| err.to_string())?;
    Ok((bytes, event))
}

/// Asks `serve` when a socket is given and it answers for the same set,
/// store and log, else decides here; either within the deadline.
fn decide_event(
    args: &HookArgs,
    harness: Harness,
    bytes: &[u8],
    event: &PreToolUse,
) -> anyhow::Result<HookAnswer> {
    let mcp = mcp_tool(&event.tool_name);
    if mcp
        .as_ref()
        .is_some_and(|id| id.server() == args.mcp_server)
    {
        return Ok(HookAnswer::defer("portcullis serve decides its own tools"));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .enable_io()
        .build()
        .context("cannot start the async runtime")?;
    let deadline = Duration::from_secs(args.deadline);
    let within = tokio::time::Instant::now() + deadline;
    let late = || {
        anyhow::anyhow!(
            "the decision was not recorded within {} s, so nothing may run",
            deadline.as_secs()
        )
    };
    if let (None, Some(socket)) = (&mcp, &args.socket) {
        let asked = runtime.block_on(async {
            tokio::time::timeout_at(within, ask_serve(args, harness, (bytes, event), socket)).await
        });
        match asked.map_err(|_| late())? {
            Ok(answer) => return Ok(answer),
            Err(why) => tracing::info!(why = format!("{why:#}"), "the hook decides itself"),
        }
    }
    let (keeper, rewrite) = setting_here(args, harness, event, mcp.as_ref())?;
    runtime
        .block_on(async {
            tokio::time::timeout_at(within, decide(&keeper, harness, event, rewrite.as_ref())).await
        })
        .map_err(|_| late())
}

/// The question for the `serve` at `socket`, with what it must hold the
/// same; any failure to get its answer is the caller's to decide itself.
async fn ask_serve(
    args: &HookArgs,
    harness: Harness,
    (bytes, event): (&[u8], &PreToolUse),
    socket: &Path,
) -> anyhow::Result<HookAnswer> {
    let canonical = |path: &Path| {
        std::fs::canonicalize(path)
            .with_context(|| format!("{} cannot be resolved", path.display()))
    };
    let root = canonical(&hook_root(args, harness, event)?)?;
    let socket = std::fs::canonicalize(socket)
        .with_context(|| format!("nothing answers at {}", socket.display()))?;
    // A process confined to the root can bind a socket there, and would
    // then answer for portcullis.
    if socket.starts_with(&root) {
        anyhow::bail!(
            "the hook socket {} is inside the workspace root, where what the agent runs could answer in portcullis's place",
            socket.display()
        );
    }
    let token = std::env::var(TOKEN_ENV)
        .ok()
        .filter(|token| !token.is_empty())
        .context("PORTCULLIS_TOKEN is not set")?;
    let store = canonical(&args.store.resolve().context("no token store")?)?;
    let audit = canonical(&audit_path(args.audit.as_deref())?)?;
    let exec = rewrites(args, harness, event)
        .then(|| exec_line(args, &audit, &root))
        .transpose()?;
    let question = HookAsk {
        harness,
        token,
        root,
        policy_set: args.policies.bundle()?.hash(),
        store,
        audit,
        exec,
        home: std::env::var_os("HOME")
            .filter(|home| !home.is_empty())
            .map(PathBuf::from),
        binary: remote::this_binary().context("this binary cannot be named")?,
    };
    let reply = remote::ask(&socket, &question, bytes).await?;
    reply
        .into_answer()
        .map_err(|reason| anyhow::anyhow!("serve declined: {reason}"))
}

/// Whether an allowed shell command is handed back through `exec`: only
/// Claude Code can run a changed command.
fn rewrites(args: &HookArgs, harness: Harness, event: &PreToolUse) -> bool {
    harness == Harness::ClaudeCode && !args.no_confine && event.tool_name == "Bash"
}

/// Loads the set in this process: the keeper that decides and records,
/// and how an allowed command is handed back.
fn setting_here(
    args: &HookArgs,
    harness: Harness,
    event: &PreToolUse,
    mcp: Option<&crate::tools::ToolId>,
) -> anyhow::Result<(Keeper, Option<CommandRewrite>)> {
    let client = authenticate(&args.store).context(
        "PORTCULLIS_TOKEN does not authenticate a client in the token store (see `portcullis token list`)",
    )?;
    let bundle = args.policies.bundle()?;
    let (registry, root) = registry_and_root(args, harness, event, &bundle, mcp)?;
    let root = Root::new(&root).with_context(|| format!("workspace root {}", root.display()))?;
    let root_path = root.path().to_owned();
    let record = ClientRecord::from(&client);
    let cache = set_cache(&args.store);
    let (engine, _) = Engine::load_proven(
        &bundle,
        &registry,
        std::slice::from_ref(&record),
        cache.as_ref(),
        Audience::LoadedClientsOnly,
    )
    .map_err(load_failed)?;
    let (audit_path, audit) = audit_for_one_decision(&args.store, args.audit.as_deref(), &bundle)?;
    let keeper = Keeper::new(
        Setting {
            engine,
            registry,
            root,
        },
        ClientIdentity::from(client),
        Transport::Hook,
        audit as Arc<dyn AuditSink>,
        event.session_id.clone(),
    );
    let rewrite = rewrites(args, harness, event)
        .then(|| -> anyhow::Result<CommandRewrite> {
            Ok(CommandRewrite {
                exec: exec_line(args, &audit_path, &root_path)?,
                approvals: command_approvals(&args.store)?,
                client: record.name.clone(),
                root: root_path.clone(),
            })
        })
        .transpose()?;
    Ok((keeper, rewrite))
}

/// The workspace root: as given, else the project Claude Code names, else
/// (for Codex) the session's folder.
fn hook_root(args: &HookArgs, harness: Harness, event: &PreToolUse) -> anyhow::Result<PathBuf> {
    Ok(
        match (&args.root, std::env::var_os("CLAUDE_PROJECT_DIR"), harness) {
            (Some(root), _, _) => root.clone(),
            (None, Some(project), _) if !project.is_empty() => PathBuf::from(project),
            (None, _, Harness::Codex) => event.cwd.clone(),
            (None, _, Harness::ClaudeCode) => anyhow::bail!(
                "no workspace root: give --root or PORTCULLIS_ROOT (Claude Code sets CLAUDE_PROJECT_DIR)"
            ),
        },
    )
}

/// The tools the event needs decided, and the root their paths are judged
/// against: a downstream tool the harness calls directly is the pinned
/// tool of its server, judged against the server's own root if it has one.
fn registry_and_root(
    args: &HookArgs,
    harness: Harness,
    event: &PreToolUse,
    bundle: &crate::pdp::PolicyBundle,
    mcp: Option<&crate::tools::ToolId>,
) -> anyhow::Result<(Registry, PathBuf)> {
    let root = hook_root(args, harness, event)?;
    let Some(id) = mcp else {
        return Ok((
            Registry::harness_named(&tools_needed(harness, event))?,
            root,
        ));
    };
    let servers = Servers::of(bundle).map_err(load_failed)?;
    let root = match servers.config.server(id.server()) {
        Some(server) => server
            .judged_root(&root)
            .map_err(|err| anyhow::anyhow!("server `{}`: {err}", server.name))?,
        None => root,
    };
    Ok((
        servers.tool_registry(bundle, id).map_err(load_failed)?,
        root,
    ))
}

/// How an allowed shell command is handed back: `portcullis exec` with
/// this hook's root, policies, token store and audit log, all absolute
/// (the harness's shell may start elsewhere).
fn exec_line(args: &HookArgs, audit: &Path, root: &Path) -> anyhow::Result<Vec<String>> {
    let absolute = |path: &Path| -> anyhow::Result<String> {
        let path = std::path::absolute(path)
            .with_context(|| format!("{} cannot be made absolute", path.display()))?;
        Ok(path.to_string_lossy().into_owned())
    };
    let exe = std::env::current_exe().context("cannot tell where this portcullis binary is")?;
    let store = args.store.resolve().context("no token store")?;
    let mut exec = vec![
        exe.to_string_lossy().into_owned(),
        "exec".to_owned(),
        "--root".to_owned(),
        absolute(root)?,
        "--store".to_owned(),
        absolute(&store)?,
        "--audit".to_owned(),
        absolute(audit)?,
    ];
    for (flag, folder) in [
        ("--policies", &args.policies.policies),
        ("--schema", &args.policies.schema),
    ] {
        if let Some(folder) = folder {
            exec.push(flag.to_owned());
            exec.push(absolute(folder)?);
        }
    }
    Ok(exec)
}

fn install(args: &InstallArgs, format: Format) -> anyhow::Result<Exit> {
    let settings = match &args.project {
        Some(project) => project.join(".claude").join("settings.json"),
        None => user_settings()?,
    };
    let exe = std::env::current_exe().context("cannot tell where this portcullis binary is")?;
    let mut command = format!(
        "{}{}",
        shell_quote(&[exe.to_string_lossy()]),
        crate::hook::install::CLAUDE_CODE_SUFFIX,
    );
    if args.no_confine {
        command.push_str(crate::hook::install::NO_CONFINE_FLAG);
    }
    if let Some(socket) = &args.socket {
        command.push_str(" --socket ");
        command.push_str(&shell_quote(&[install_socket(
            socket,
            args.project.as_deref(),
        )?]));
    }
    let installed = install_claude_code(&settings, &command)?;
    let token_set = std::env::var_os("PORTCULLIS_TOKEN").is_some_and(|t| !t.is_empty());
    match format {
        Format::Json => print_json(&json!({
            "settings": settings,
            "command": command,
            "installed": match installed {
                Installed::Added => "added",
                Installed::Updated => "updated",
                Installed::AlreadyThere => "already_there",
            },
        }))?,
        Format::Human => {
            let what = match installed {
                Installed::Added => "added the PreToolUse hook (every tool) to",
                Installed::Updated => "updated the portcullis PreToolUse hook in",
                Installed::AlreadyThere => "the portcullis PreToolUse hook is already in",
            };
            println!("{what} {}", settings.display());
            println!("  runs: {command}");
            println!(
                "Claude Code passes its own environment to the hook: start it with PORTCULLIS_TOKEN set to a client token (`portcullis token create NAME`, kept in the token store the hook reads: PORTCULLIS_TOKEN_STORE, else $XDG_STATE_HOME/portcullis/tokens.json), and PORTCULLIS_POLICIES / PORTCULLIS_SCHEMA / PORTCULLIS_AUDIT / PORTCULLIS_ROOT if you use others than the defaults."
            );
            if !token_set {
                println!(
                    "  note: PORTCULLIS_TOKEN is not set here; without it every tool call is denied."
                );
            }
        }
    }
    Ok(Exit::Ok)
}

/// The socket `hook install --socket` writes: absolute, since Claude Code
/// runs the hook from the session's folder; and never inside the project
/// it is installed for, where the hook would refuse to ask it. Inside is
/// judged where the path leads (through `..` and links, as far as its
/// folders exist), as the hook judges it at each event: a path that only
/// reads as outside is refused here, not found out by the first hook.
fn install_socket(socket: &Path, project: Option<&Path>) -> anyhow::Result<String> {
    let socket = std::path::absolute(socket)
        .with_context(|| format!("cannot make {} absolute", socket.display()))?;
    if let Some(project) = project {
        let project = std::path::absolute(project)
            .with_context(|| format!("cannot make {} absolute", project.display()))?;
        let real_project = std::fs::canonicalize(&project).unwrap_or_else(|_| project.clone());
        let real_socket = leads_to(&socket);
        let inside = [&socket, &real_socket]
            .iter()
            .any(|path| path.starts_with(&project) || path.starts_with(&real_project));
        if inside {
            anyhow::bail!(
                "the hook socket {} is inside the project {}, where what the agent runs could answer in portcullis's place: put it outside (for example under $XDG_RUNTIME_DIR)",
                socket.display(),
                project.display()
            );
        }
    }
    let text = socket.to_str().with_context(|| {
        format!(
            "the hook socket {} is not UTF-8, which a settings file cannot hold",
            socket.display()
        )
    })?;
    Ok(text.to_owned())
}

/// Where the absolute `path` leads: its deepest part that exists,
/// resolved (links and `..`), with the rest joined on. A `..` past a
/// folder that is not there leads nowhere the system can reach: that
/// path is given back as written.
fn leads_to(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut existing = path;
    let real = loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            break real;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            // Only `/` and paths ending in `..` have no name; `..` that
            // cannot be resolved leaves the path as written.
            _ => return path.to_owned(),
        }
    };
    rest.iter().rev().fold(real, |mut at, name| {
        at.push(name);
        at
    })
}

/// Claude Code's user settings: `$CLAUDE_CONFIG_DIR/settings.json`, or
/// `~/.claude/settings.json`.
fn user_settings() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Ok(Path::new(&dir).join("settings.json"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .context("HOME is not set: give --project DIR")?;
    Ok(Path::new(&home).join(".claude").join("settings.json"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use super::*;

    /// A folder (resolved) holding `project`, `beside`, and links to the
    /// project from both: `link` and `beside/into`.
    fn places() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(real.join("project")).unwrap();
        std::fs::create_dir(real.join("beside")).unwrap();
        std::os::unix::fs::symlink(real.join("project"), real.join("link")).unwrap();
        std::os::unix::fs::symlink(real.join("project"), real.join("beside/into")).unwrap();
        (dir, real)
    }

    #[test]
    fn a_path_leads_through_its_links_and_dots_as_far_as_it_exists() {
        let (_dir, real) = places();
        let project = real.join("project");
        for (written, expected) in [
            ("link/h.sock", project.join("h.sock")),
            ("link/missing/h.sock", project.join("missing/h.sock")),
            ("beside/../project/h.sock", project.join("h.sock")),
            ("link/../beside/h.sock", real.join("beside/h.sock")),
            ("beside/h.sock", real.join("beside/h.sock")),
        ] {
            assert_eq!(leads_to(&real.join(written)), expected, "{written}");
        }
        let unreachable = real.join("missing/../project/h.sock");
        assert_eq!(leads_to(&unreachable), unreachable, "left as written");
    }

    #[test]
    fn a_socket_that_leads_into_the_project_is_refused() {
        let (_dir, real) = places();
        let project = real.join("project");
        for inside in [
            "project/h.sock",
            "beside/into/h.sock",
            "beside/../project/h.sock",
        ] {
            let refused = install_socket(&real.join(inside), Some(&project)).unwrap_err();
            assert!(
                refused.to_string().contains("inside the project"),
                "{inside}"
            );
        }
        let outside = real.join("beside/h.sock");
        assert_eq!(
            install_socket(&outside, Some(&project)).unwrap(),
            outside.to_str().unwrap()
        );
    }
}
