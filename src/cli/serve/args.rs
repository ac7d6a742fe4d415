//! `serve`'s flags, and what follows from them alone.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::http::HttpArgs;
use super::reload::ReloadMode;
use crate::cli::PolicyArgs;
use crate::cli::state_paths::{StateArgs, StoreArgs};
use crate::facts::Transport;
use crate::servers::Surface;
use crate::state::valid_chain_name;

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub policies: PolicyArgs,
    /// The workspace root: tools read and write below it, and paths are
    /// judged against it.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub state: StateArgs,
    /// With --state: the approval sealing key every replica is given (64
    /// bytes, or 128 hex digits, in a file only its owner can read), so a
    /// question asked through one replica is answered through another.
    /// PORTCULLIS_APPROVAL_KEY may hold it as hex instead. It is never
    /// stored in the database.
    #[arg(long, value_name = "FILE")]
    pub approval_key: Option<PathBuf>,
    /// With --state: this replica's audit chain in the shared database, its
    /// own (two replicas appending to one chain are refused) and the same
    /// across its restarts [default: the host name].
    #[arg(long, env = "PORTCULLIS_REPLICA_ID", value_name = "ID")]
    pub replica_id: Option<String>,
    /// How long a legacy session waits for the user to answer an approval
    /// question, in seconds; no answer is a refusal.
    #[arg(long, default_value_t = 120, value_name = "SECS")]
    pub approval_timeout: u64,
    /// How long an approval question asked of a 2026-07-28 client stays
    /// answerable, in seconds.
    #[arg(long, default_value_t = 600, value_name = "SECS")]
    pub approval_ttl: u64,
    /// Calls of this client that run at once; the rest wait, and can be
    /// cancelled while they wait.
    #[arg(long, default_value_t = 8, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_concurrent: u32,
    /// How long search and list_dir may run, in seconds, before they
    /// return what they have, marked truncated.
    #[arg(long, default_value_t = 30, value_name = "SECS")]
    pub walk_budget: u64,
    /// The audit log [default: audit/audit.jsonl in the default token
    /// store's folder]. Policy snapshots go to FILE.policies/, the head to
    /// FILE.head. Checkpoints are signed with the key in the token store's
    /// folder, which may not be the log's folder.
    #[arg(long, env = "PORTCULLIS_AUDIT", value_name = "FILE")]
    pub audit: Option<PathBuf>,
    /// When to reload the policies: `watch` (a file in the policies or
    /// schema folder changes, or SIGHUP), `signal` (SIGHUP only), `never`,
    /// or `tighten-only` (as `watch`, but a set that permits more than the
    /// one in force waits for `portcullis policy apply`).
    #[arg(long, value_enum, default_value = "watch", value_name = "WHEN")]
    pub reload: ReloadMode,
    /// With `--reload tighten-only`: the public key of the operator whose
    /// `policy apply --apply-keys` lets a wider set through (a
    /// `portcullis-ed25519` key file). Without it, a `policy_apply` record
    /// must be covered by a checkpoint signed with the log's own key.
    #[arg(long, value_name = "FILE")]
    pub apply_key: Option<PathBuf>,
    /// The agent bridge's session store (SQLite), used when servers.toml
    /// declares a `kind = "agent"` server [default: sessions.sqlite3 in the
    /// token store's folder].
    #[arg(long, env = "PORTCULLIS_SESSIONS", value_name = "FILE")]
    pub sessions: Option<PathBuf>,
    /// The tools clients are shown: `direct` (every tool the client may
    /// discover, by its name, beside tools_list, tool_call and gate) or
    /// `wrappers` (the seed's six: sessions_list, session_get, prompt_send,
    /// prompt_cancel, tools_list and tool_call; every other tool only
    /// through tool_call) [default: servers.toml's `surface`, else direct].
    #[arg(long, env = "PORTCULLIS_SURFACE", value_enum, value_name = "SURFACE")]
    pub surface: Option<SurfaceArg>,
    #[command(flatten)]
    pub http: HttpArgs,
    /// Serve what this process counts (decisions, approvals, the audit
    /// log's writes, downstream calls, calls in flight) as OpenMetrics text
    /// at http://ADDR:PORT/metrics, for Prometheus. Loopback unless
    /// --allow-remote; port 0 picks one and prints it on stderr.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Keep an approval inbox and serve it to approvers at
    /// http://ADDR:PORT/ (`portcullis approvals`, the page): a call that
    /// needs an approval its client cannot ask for (or that the policies
    /// send to the inbox) waits there, up to --approval-timeout, for an
    /// approver the policies let answer. Loopback unless --allow-remote.
    #[arg(long, value_name = "ADDR:PORT")]
    pub approvals: Option<std::net::SocketAddr>,
    /// The inbox page's address as approvers reach it (behind a TLS
    /// terminator, say), for the links the webhook sends [default: the
    /// address --approvals bound].
    #[arg(long, value_name = "URL", requires = "approvals")]
    pub approvals_url: Option<String>,
    /// POST every new question of the inbox to URL as JSON (a `text` a
    /// Slack-compatible chat shows, the question, a link to the page),
    /// signed with the secret of --approval-webhook-secret.
    #[arg(long, value_name = "URL", requires = "approvals")]
    pub approval_webhook: Option<String>,
    /// The secret the webhook's HMAC-SHA256 signatures are made with, in a
    /// file only its owner can read (at least 16 bytes); or give it in
    /// PORTCULLIS_APPROVAL_WEBHOOK_SECRET.
    #[arg(long, value_name = "FILE", requires = "approval_webhook")]
    pub approval_webhook_secret: Option<PathBuf>,
    /// Answer `portcullis hook` over a Unix socket at PATH (made 0600, for
    /// this user's processes only), with the policies held loaded: a hook
    /// given the same PATH asks here instead of loading the set, when this
    /// `serve` reads the same set, token store and audit log. Not inside
    /// --root (what the agent runs could bind it), not with --state.
    #[arg(long, env = crate::hook::remote::SOCKET_ENV, value_name = "PATH", conflicts_with = "given")]
    pub hook_socket: Option<PathBuf>,
}

/// `--surface`, as the command line spells it.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SurfaceArg {
    Direct,
    Wrappers,
}

impl From<SurfaceArg> for Surface {
    fn from(arg: SurfaceArg) -> Self {
        match arg {
            SurfaceArg::Direct => Surface::Direct,
            SurfaceArg::Wrappers => Surface::Wrappers,
        }
    }
}

/// The transport `serve` serves its clients over.
pub(super) fn transport_of(args: &ServeArgs) -> Transport {
    match args.http.address {
        Some(_) => Transport::Http,
        None => Transport::Stdio,
    }
}

/// The chain this replica appends to: `--replica-id`, or the host name.
pub(super) fn replica_id(args: &ServeArgs) -> anyhow::Result<String> {
    let id = match &args.replica_id {
        Some(id) => id.clone(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .context("no --replica-id, and the host name cannot be read")?
            .trim()
            .to_owned(),
    };
    if !valid_chain_name(&id) {
        anyhow::bail!("--replica-id is 1 to 64 characters of A-Z a-z 0-9 . _ -; `{id}` is not");
    }
    Ok(id)
}
