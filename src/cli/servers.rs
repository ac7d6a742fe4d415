//! `portcullis servers {list,pin,diff}`: start the downstream servers of a
//! policy set, as `serve` would, and show or pin what they list. Pinning
//! writes `servers.lock` beside the policies, to be reviewed like a policy.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::policy_set::report_problems;
use super::{Exit, Format, PolicyArgs, print_json};
use crate::atomic_file::{self, Mode};
use crate::confine::Plan;
use crate::facts::Root;
use crate::pdp::SERVERS_LOCK_FILE;
use crate::servers::{
    Drift, DriftKind, Fleet, NOT_CONFINED, Pin, ServerState, Servers, ServersLock, drift, run_guard,
};

#[derive(Debug, Subcommand)]
pub enum ServersCommand {
    /// Start each server and show its state and its tools, with their pins.
    List(ServersArgs),
    /// Start each server and pin the definitions of the tools it lists in
    /// servers.lock (only the servers named with --server, if any).
    Pin(PinArgs),
    /// Start each server and show how its tools differ from their pins;
    /// exit 0 when none does, 4 when one does, 1 when a server is down.
    Diff(ServersArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ServersArgs {
    #[command(flatten)]
    pub policies: PolicyArgs,
    /// The workspace root the servers run in, as `serve --root`.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
}

#[derive(Debug, Args)]
pub struct PinArgs {
    #[command(flatten)]
    pub servers: ServersArgs,
    /// Pin only this server (repeatable); the others keep their pins.
    #[arg(long = "server", value_name = "NAME")]
    pub only: Vec<String>,
}

/// The hidden subcommand a stdio downstream runs under.
#[derive(Debug, Args)]
pub struct GuardArgs {
    /// The portcullis process whose death stops the server.
    #[arg(long)]
    pub parent: u32,
    /// The server's confinement (JSON), applied before it starts.
    #[arg(long)]
    pub confine: Option<String>,
    /// The server's command line.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

pub fn guard(args: &GuardArgs) -> Exit {
    let plan = match args.confine.as_deref().map(serde_json::from_str::<Plan>) {
        None => None,
        Some(Ok(plan)) => Some(plan),
        Some(Err(err)) => {
            eprintln!("portcullis guard: the confinement cannot be read: {err}");
            return Exit::NotConfined;
        }
    };
    match run_guard(args.parent, plan.as_ref(), &args.command) {
        0 => Exit::Ok,
        NOT_CONFINED => Exit::NotConfined,
        _ => Exit::Failure,
    }
}

pub fn run(command: ServersCommand, format: Format) -> anyhow::Result<Exit> {
    match command {
        ServersCommand::List(args) => list(&args, format),
        ServersCommand::Pin(args) => pin(&args, format),
        ServersCommand::Diff(args) => diff(&args, format),
    }
}

/// What a run of the servers found.
struct Running {
    servers: Servers,
    states: BTreeMap<String, ServerState>,
    live: BTreeMap<String, Vec<Value>>,
}

/// Starts every server of the set, lists their tools, stops them.
fn start(args: &ServersArgs, format: Format) -> anyhow::Result<Result<Running, Exit>> {
    let bundle = args.policies.bundle()?;
    let servers = match Servers::of(&bundle) {
        Ok(servers) => servers,
        Err(err) => {
            report_problems(&err.problems, format)?;
            return Ok(Err(Exit::ValidationFailure));
        }
    };
    let root = Root::new(&args.root).with_context(|| format!("--root {}", args.root.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let (states, live) = runtime.block_on(async {
        let fleet = Fleet::start(&servers.config, root.path()).await;
        let found = (fleet.states().await, fleet.live_tools().await);
        fleet.shut_down().await;
        found
    });
    Ok(Ok(Running {
        servers,
        states,
        live,
    }))
}

fn state_json(state: &ServerState) -> Value {
    match state {
        ServerState::Unavailable(why) => json!({"state": state.as_str(), "error": why}),
        _ => json!({"state": state.as_str()}),
    }
}

fn list(args: &ServersArgs, format: Format) -> anyhow::Result<Exit> {
    let running = match start(args, format)? {
        Ok(running) => running,
        Err(exit) => return Ok(exit),
    };
    let drifted = drift(&running.servers.lock, &running.live);
    let mut report = Vec::new();
    for (name, state) in &running.states {
        let mut tools: BTreeMap<String, &str> = running
            .servers
            .lock
            .servers
            .get(name)
            .into_iter()
            .flatten()
            .map(|(tool, _)| (tool.clone(), "pinned"))
            .collect();
        for found in drifted.iter().filter(|d| &d.server == name) {
            tools.insert(found.tool.clone(), found.kind.as_str());
        }
        let mut entry = state_json(state);
        entry["server"] = json!(name);
        entry["tools"] = json!(
            tools
                .iter()
                .map(|(tool, pin)| json!({"name": tool, "pin": pin}))
                .collect::<Vec<_>>()
        );
        report.push(entry);
    }
    match format {
        Format::Json => print_json(&json!({"servers": report}))?,
        Format::Human => {
            let mut out = std::io::stdout().lock();
            for entry in &report {
                let error = entry["error"]
                    .as_str()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "{} {}{error}",
                    entry["server"].as_str().unwrap_or_default(),
                    entry["state"].as_str().unwrap_or_default()
                )?;
                for tool in entry["tools"].as_array().into_iter().flatten() {
                    writeln!(
                        out,
                        "  {:<40} {}",
                        tool["name"].as_str().unwrap_or_default(),
                        tool["pin"].as_str().unwrap_or_default()
                    )?;
                }
            }
        }
    }
    Ok(Exit::Ok)
}

/// Servers that did not start: named on stderr, and the command fails.
fn report_down(states: &BTreeMap<String, ServerState>, wanted: impl Fn(&str) -> bool) -> bool {
    let mut any = false;
    for (name, state) in states.iter().filter(|(name, _)| wanted(name)) {
        if let ServerState::Unavailable(why) = state {
            eprintln!("error: server `{name}` did not start: {why}");
            any = true;
        }
    }
    any
}

fn pin(args: &PinArgs, format: Format) -> anyhow::Result<Exit> {
    let dir = args
        .servers
        .policies
        .policies
        .clone()
        .context("--policies: pinning writes servers.lock into the policies folder")?;
    let running = match start(&args.servers, format)? {
        Ok(running) => running,
        Err(exit) => return Ok(exit),
    };
    for name in &args.only {
        anyhow::ensure!(
            running.servers.config.server(name).is_some(),
            "--server {name}: servers.toml declares no such server"
        );
    }
    let wanted = |name: &str| args.only.is_empty() || args.only.iter().any(|n| n == name);
    if report_down(&running.states, wanted) {
        return Ok(Exit::Failure);
    }
    let changes = drift(&running.servers.lock, &running.live);
    let mut lock = ServersLock {
        servers: running.servers.lock.servers.clone(),
        ..ServersLock::new()
    };
    // Servers no longer declared lose their pins.
    lock.servers
        .retain(|name, _| running.servers.config.server(name).is_some());
    for (name, tools) in running.live.iter().filter(|(name, _)| wanted(name)) {
        let pins = tools
            .iter()
            .filter_map(|definition| {
                let tool = definition.get("name")?.as_str()?.to_owned();
                Some((tool, Pin::of(definition.clone())))
            })
            .collect();
        lock.servers.insert(name.clone(), pins);
    }
    let path = dir.join(SERVERS_LOCK_FILE);
    atomic_file::replace(&path, lock.to_text().as_bytes(), Mode::AsBefore)
        .with_context(|| format!("cannot write {}", path.display()))?;
    let pinned: Vec<&Drift> = changes.iter().filter(|d| wanted(&d.server)).collect();
    match format {
        Format::Json => print_json(&json!({"lock": path, "changes": pinned}))?,
        Format::Human => {
            for change in &pinned {
                let what = match change.kind {
                    DriftKind::NotPinned => "pinned".to_owned(),
                    DriftKind::Changed => {
                        format!("re-pinned ({} changed)", change.fields.join(", "))
                    }
                    DriftKind::Missing => "unpinned (the server no longer lists it)".to_owned(),
                };
                println!("{}/{}: {what}", change.server, change.tool);
            }
            println!(
                "wrote {} ({} change{})",
                path.display(),
                pinned.len(),
                if pinned.len() == 1 { "" } else { "s" }
            );
        }
    }
    Ok(Exit::Ok)
}

fn diff(args: &ServersArgs, format: Format) -> anyhow::Result<Exit> {
    let running = match start(args, format)? {
        Ok(running) => running,
        Err(exit) => return Ok(exit),
    };
    let down = report_down(&running.states, |_| true);
    let found = drift(&running.servers.lock, &running.live);
    match format {
        Format::Json => print_json(&json!({"drift": found}))?,
        Format::Human => {
            for d in &found {
                let detail = match d.kind {
                    DriftKind::Changed => format!(" ({} changed)", d.fields.join(", ")),
                    _ => String::new(),
                };
                println!("{}/{}: {}{detail}", d.server, d.tool, d.kind.as_str());
            }
            if found.is_empty() && !down {
                println!("every tool is as pinned");
            }
        }
    }
    Ok(if down {
        Exit::Failure
    } else if found.is_empty() {
        Exit::Ok
    } else {
        Exit::Ask
    })
}
