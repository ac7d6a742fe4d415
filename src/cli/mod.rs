//! The command-line adapter. Each command translates flags into calls on the
//! library and the result into text or JSON; none of them decides anything.
//! Names, file formats and exit codes follow the `cedar` CLI where it has an
//! equivalent.

mod approvals;
mod audit;
mod audit_shared;
mod check;
mod demo;
mod doctor;
mod exec;
pub use exec::confined_main;
mod exit;
mod gate;
mod harness_setting;
mod hook;
mod init;
mod logging;
mod policy;
mod policy_set;
mod schema;
mod serve;
mod servers;
mod signals;
mod simulated_call;
mod state_paths;
mod token;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use exit::{EXIT_CODES, Exit, end_quietly_on_closed_stdout, is_closed_pipe};

pub use logging::{LogFormat, init as init_logging};

use crate::pdp::{BundleError, ClientRecord, PolicyBundle};

#[derive(Debug, Parser)]
#[command(
    name = "portcullis",
    version,
    about = "An approval service between AI agents and the tools they call",
    after_help = EXIT_CODES
)]
pub struct Cli {
    /// Output for people (human) or for machines (json, on stdout).
    #[arg(long, global = true, value_enum, default_value_t = Format::Human)]
    pub format: Format,

    /// How log lines on stderr are written: text, or one JSON object per
    /// line. What is logged: PORTCULLIS_LOG, else RUST_LOG (EnvFilter
    /// syntax), else warnings.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "PORTCULLIS_LOG_FORMAT")]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

impl Command {
    /// Whether the command only prints, so that a closed stdout may end it:
    /// not `serve`, `exec`, `hook` or a server's guard, which record how
    /// they end.
    pub fn only_prints(&self) -> bool {
        !matches!(
            self,
            Command::Serve(_) | Command::Exec(_) | Command::Hook(_) | Command::Guard(_)
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate, test and format policy files.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Decide one tool call, as the server would, and explain the decision.
    Check(check::CheckArgs),
    /// Judge a shell command (allow, ask or deny) without running it.
    Gate(gate::GateArgs),
    /// Decide a command with the gate and run what is allowed (or
    /// approved) confined by the kernel: writes only beneath the root, VCS
    /// metadata read-only, no network unless allowed.
    Exec(exec::ExecArgs),

    /// Write the default policies and schema into a folder, for a team to edit.
    Init(init::InitArgs),
    /// Serve MCP: over stdio to the client whose token is in PORTCULLIS_TOKEN,
    /// or with --http over Streamable HTTP to every client in the token store.
    Serve(Box<serve::ServeArgs>),
    /// Create, list and revoke client tokens.
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// Answer the approval inbox of a running `serve --approvals`, as an
    /// approver: list, show, approve, deny.
    #[command(subcommand)]
    Approvals(approvals::ApprovalsCommand),
    /// Show the whole loop on the built-in defaults in a temporary folder.
    Demo(demo::DemoArgs),
    /// Check what the features need on this machine (cvc5, Landlock, user
    /// namespaces, the modes of the token store and the audit folder, Node
    /// and Chromium for the tests), and say how to install what is missing.
    Doctor(doctor::DoctorArgs),
    /// Verify, replay and show audit logs, offline.
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Decide a coding agent's own tools before its harness runs them
    /// (Claude Code, Codex hooks), and install the hook.
    #[command(subcommand)]
    Hook(hook::HookCommand),
    /// Show the Cedar schema policies are validated against, with each
    /// tool's generated action and `context.input` type.
    #[command(subcommand)]
    Schema(schema::SchemaCommand),
    /// List, pin and diff the tools of the downstream MCP servers in
    /// servers.toml.
    #[command(subcommand)]
    Servers(servers::ServersCommand),
    /// Runs one stdio downstream server in its own process group, and
    /// stops the group when portcullis dies (started by `serve`).
    #[command(name = "__downstream-guard", hide = true)]
    Guard(servers::GuardArgs),
}

/// Where the policy set comes from: folders, or the built-in defaults.
#[derive(Debug, Clone, Args)]
pub struct PolicyArgs {
    /// Folder of `*.cedar` policies, `tiers.json`, `path_classes.toml` and
    /// `tests/` [default: the built-in policies].
    #[arg(long, env = "PORTCULLIS_POLICIES", value_name = "DIR")]
    pub policies: Option<PathBuf>,
    /// Folder of `*.cedarschema` files [default: the built-in schema].
    #[arg(long, env = "PORTCULLIS_SCHEMA", value_name = "DIR")]
    pub schema: Option<PathBuf>,
}

/// The client a simulated request comes from (`check`, `gate`).
#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// The client making the request.
    #[arg(long = "client", default_value = "cli")]
    pub name: String,
    /// The client's tier (declared in tiers.json).
    #[arg(long, default_value = "paired")]
    pub tier: String,
}

impl ClientArgs {
    pub fn record(&self) -> ClientRecord {
        ClientRecord {
            name: self.name.clone(),
            tier: self.tier.clone(),
        }
    }
}

impl PolicyArgs {
    pub fn bundle(&self) -> Result<PolicyBundle, BundleError> {
        PolicyBundle::load(self.policies.as_deref(), self.schema.as_deref())
    }
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<Exit> {
    match cli.command {
        Command::Policy(command) => policy::run(command, cli.format),
        Command::Check(args) => check::run(&args, cli.format),
        Command::Gate(args) => gate::run(&args, cli.format),
        Command::Exec(args) => exec::run(&args),

        Command::Init(args) => init::run(&args, cli.format),
        Command::Serve(args) => serve::run(&args),
        Command::Token(command) => token::run(command, cli.format),
        Command::Approvals(command) => approvals::run(command, cli.format),
        Command::Demo(args) => demo::run(&args, cli.format),
        Command::Doctor(args) => doctor::run(&args, cli.format),
        Command::Audit(command) => audit::run(command, cli.format),
        Command::Hook(command) => hook::run(command, cli.format),
        Command::Servers(command) => servers::run(command, cli.format),
        Command::Schema(command) => schema::run(command, cli.format),
        Command::Guard(args) => Ok(servers::guard(&args)),
    }
}

/// Prints a JSON document on stdout.
fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Text from a log or a client, safe to print on a terminal: names come
/// from whoever called (a tool name is what a client asked for), and a
/// control character could rewrite what the reader sees.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(printable("read_file"), "read_file");
        assert_eq!(printable("x\u{1b}[2Jy\n"), "x\u{fffd}[2Jy\u{fffd}");
    }
}
