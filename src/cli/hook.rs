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
use super::state_paths::{StoreArgs, audit_for_one_decision, authenticate, set_cache};
use super::{Exit, Format, PolicyArgs, print_json};
use crate::facts::{Root, Transport, shell_quote};
use crate::hook::install::{Installed, install_claude_code};
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
        Ok(event) => decide_event(args, harness, &event)
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

fn read_event() -> Result<PreToolUse, String> {
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_EVENT_BYTES).unwrap_or(u64::MAX) + 1;
    std::io::stdin()
        .lock()
        .take(limit)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("the hook event cannot be read: {err}"))?;
    PreToolUse::parse(&bytes).map_err(|err| err.to_string())
}

fn decide_event(
    args: &HookArgs,
    harness: Harness,
    event: &PreToolUse,
) -> anyhow::Result<HookAnswer> {
    let mcp = mcp_tool(&event.tool_name);
    if mcp
        .as_ref()
        .is_some_and(|id| id.server() == args.mcp_server)
    {
        return Ok(HookAnswer::defer("portcullis serve decides its own tools"));
    }
    let client = authenticate(&args.store).context(
        "PORTCULLIS_TOKEN does not authenticate a client in the token store (see `portcullis token list`)",
    )?;
    let bundle = args.policies.bundle()?;
    let (registry, root) = registry_and_root(args, harness, event, &bundle, mcp.as_ref())?;
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
    let rewrite = match harness {
        // Only a shell command is handed back through `exec`.
        Harness::ClaudeCode if !args.no_confine && event.tool_name == "Bash" => Some(
            command_rewrite(args, &audit_path, &record.name, &root_path)?,
        ),
        _ => None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .context("cannot start the async runtime")?;
    let deadline = Duration::from_secs(args.deadline);
    runtime.block_on(async {
        tokio::time::timeout(deadline, decide(&keeper, harness, event, rewrite.as_ref()))
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "the decision was not recorded within {} s, so nothing may run",
                    deadline.as_secs()
                )
            })
    })
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
    let root = match (&args.root, std::env::var_os("CLAUDE_PROJECT_DIR"), harness) {
        (Some(root), _, _) => root.clone(),
        (None, Some(project), _) if !project.is_empty() => PathBuf::from(project),
        (None, _, Harness::Codex) => event.cwd.clone(),
        (None, _, Harness::ClaudeCode) => anyhow::bail!(
            "no workspace root: give --root or PORTCULLIS_ROOT (Claude Code sets CLAUDE_PROJECT_DIR)"
        ),
    };
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
fn command_rewrite(
    args: &HookArgs,
    audit: &Path,
    client: &str,
    root: &Path,
) -> anyhow::Result<CommandRewrite> {
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
    Ok(CommandRewrite {
        exec,
        approvals: command_approvals(&args.store)?,
        client: client.to_owned(),
        root: root.to_owned(),
    })
}

fn install(args: &InstallArgs, format: Format) -> anyhow::Result<Exit> {
    let settings = match &args.project {
        Some(project) => project.join(".claude").join("settings.json"),
        None => user_settings()?,
    };
    let exe = std::env::current_exe().context("cannot tell where this portcullis binary is")?;
    let command = format!(
        "{}{}{}",
        shell_quote(&[exe.to_string_lossy()]),
        crate::hook::install::CLAUDE_CODE_SUFFIX,
        if args.no_confine {
            crate::hook::install::NO_CONFINE_FLAG
        } else {
            ""
        }
    );
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
