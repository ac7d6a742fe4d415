//! `portcullis serve`: wires the pieces (policies, tokens, root, audit log,
//! approvals) and hands a transport to the MCP adapter: stdio for the one
//! client whose token is in the environment, or Streamable HTTP for every
//! client in the token store. It translates flags; it does not decide.

mod admission;
mod http;
mod inbox;
mod keepers;
mod metrics;
mod reload;
mod stdio;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::policy_set::report_problems;
use super::state_paths::{
    StateArgs, StoreArgs, audit_path, authenticate, authenticate_shared, sessions_path, set_cache,
    signer_for,
};
use super::{Exit, Format, PolicyArgs};
use crate::approval::{
    APPROVAL_KEY_ENV, ApprovalSeal, Approvals, Inbox, NonceLedger, shared_key_from_file,
    shared_key_from_hex,
};
use crate::audit::{
    ApplyTrust, AuditError, AuditLog, Kind, applied_path, read_public_key, snapshots_dir,
    store_snapshot,
};
use crate::auth::{AUTH_FAILED, ApproverDirectory, FileDirectory, StoredClient};
use crate::bridge::Bridge;
use crate::clock::SystemClock;
use crate::facts::{Root, Transport};
use arc_swap::ArcSwap;

use crate::keeper::{Keeper, Limits, Setting};
use crate::mcp::{Ended, ServeError};
use crate::pdp::{ClientRecord, PolicyBundle, SetCache};
use crate::servers::{Fleet, Servers, ServersLock, Surface, drift};
use crate::state::{
    SharedChain, SharedDirectory, SharedNonces, SharedSessions, SharedState, follow_answers,
    follow_cancels, valid_chain_name,
};
use http::HttpArgs;
use keepers::{Admission, KeeperMaker};
use reload::{ReloadMode, Reloader, Watched};

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

pub fn run(args: &ServeArgs) -> anyhow::Result<Exit> {
    let key = fleet_key(args)?;
    let metrics = args
        .metrics
        .map(|address| metrics::bind(address, args.http.allow_remote))
        .transpose()?;
    let inbox = args
        .approvals
        .map(|address| inbox::bind(address, args.http.allow_remote))
        .transpose()?
        .map(|(listener, bound)| -> anyhow::Result<_> {
            let page = args.approvals_url.clone().unwrap_or(bound);
            Ok((listener, inbox::announcer(args, &page)?))
        })
        .transpose()?;
    let clients = match &args.http.address {
        // Before anything reads stdin: an unauthenticated process gets nothing.
        None => match match &args.state.url()? {
            Some(url) => authenticate_shared(url),
            None => authenticate(&args.store),
        } {
            Some(client) => vec![client],
            None => {
                eprintln!("{AUTH_FAILED}");
                return Ok(Exit::Failure);
            }
        },
        Some(address) => {
            http::refuse_remote(*address, args)?;
            http::clients(args)?
        }
    };
    let Some(world) = World::prepare(args, clients, key, (metrics, inbox))? else {
        return Ok(Exit::ValidationFailure);
    };
    match &args.http.address {
        None => stdio::serve(world, args),
        Some(address) => http::serve(world, args, *address),
    }
}

/// Everything a transport serves with: the policies and tools, the
/// downstream servers, the audit log, the approval seal. One per process.
struct World {
    runtime: tokio::runtime::Runtime,
    bundle: PolicyBundle,
    lock: ServersLock,
    live: BTreeMap<String, Vec<serde_json::Value>>,
    fleet: Option<Arc<Fleet>>,
    /// The agent bridge, with the sessions whose turn was cut off when
    /// portcullis last stopped (recorded at start).
    bridge: Option<(Arc<Bridge>, Vec<String>)>,
    /// The setting in force; a reload replaces it for every keeper.
    settings: Arc<ArcSwap<Setting>>,
    clients: Vec<StoredClient>,
    /// The fleet's shared state, with `--state`.
    shared: Option<SharedState>,
    /// The fleet's clients and approvers, followed, with `--state`.
    directory: Option<Arc<SharedDirectory>>,
    audit: Arc<AuditLog>,
    /// Resolves if the log fails its check at start.
    checked: LogChecked,
    session: String,
    approvals: Arc<Approvals>,
    limits: Limits,
    /// What a reload loads again, and how.
    policies: PolicyArgs,
    records: Vec<ClientRecord>,
    proofs: Option<SetCache>,
    snapshots: PathBuf,
    /// The nudge file `policy apply` writes for `--reload tighten-only`.
    applied: PathBuf,
    /// Whose signed `policy_apply` lets a wider set through.
    apply_trust: ApplyTrust,
    watched: Watched,
    reload: ReloadMode,
    /// The tools clients are shown, fixed at start.
    surface: Surface,
    /// `--metrics`, bound.
    metrics: Option<std::net::TcpListener>,
    /// `--approvals`, bound.
    inbox: Option<std::net::TcpListener>,
    /// Who may answer the inbox's questions.
    approvers: Option<Arc<dyn ApproverDirectory>>,
    /// Host names the endpoints accept besides the loopback ones.
    allowed_hosts: Vec<String>,
}

/// Whether the log verified, told once its writer has checked it.
type LogChecked = tokio::sync::oneshot::Receiver<Result<(), AuditError>>;

/// One client over stdio sends a message, waits for the answer, sends
/// the next: one thread drives it without waking another for every
/// message (on two cores the wake-ups were a quarter of a proxied call's
/// CPU). HTTP serves many clients at once, on every core.
fn runtime_for(args: &ServeArgs) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut runtime = if args.http.address.is_none() {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    runtime
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// The downstream servers, started in parallel, and the tools they list.
fn start_fleet(
    runtime: &tokio::runtime::Runtime,
    servers: &Servers,
    workspace: &Path,
) -> (Option<Arc<Fleet>>, BTreeMap<String, Vec<serde_json::Value>>) {
    if servers.config.servers.is_empty() {
        return (None, BTreeMap::new());
    }
    let fleet = runtime.block_on(Fleet::start(&servers.config, workspace));
    let live = runtime.block_on(fleet.live_tools());
    (Some(fleet), live)
}

/// The bridge to the team's agent, when `servers.toml` names one, with
/// the sessions its last run left interrupted; in a fleet, its sessions in
/// the shared state.
fn open_bridge(
    args: &ServeArgs,
    servers: &Servers,
    workspace: &Path,
    shared: Option<&SharedState>,
) -> anyhow::Result<Option<(Arc<Bridge>, Vec<String>)>> {
    let Some((server, mapping)) = servers.config.agent() else {
        return Ok(None);
    };
    if let Some(state) = shared {
        let (sessions, interrupted) = SharedSessions::open(state.url(), Arc::new(SystemClock))?;
        let bridge = Bridge::with_backend(Box::new(sessions), server, mapping.clone(), workspace);
        return Ok(Some((Arc::new(bridge), interrupted)));
    }
    let path = sessions_path(args.sessions.as_deref(), &args.store)?;
    let (bridge, interrupted) = Bridge::open(
        &path,
        server,
        mapping.clone(),
        workspace,
        Arc::new(SystemClock),
    )?;
    Ok(Some((Arc::new(bridge), interrupted)))
}

/// The audit log, opened with the checkpoint key and checked on its
/// writer's thread while the session starts (no record is written before
/// it has verified, and none ever if it does not); the policy snapshot
/// stored beside it; and whose signature lets a set through `policy
/// apply`.
fn open_audit(
    args: &ServeArgs,
    audit_path: &std::path::Path,
    bundle: &PolicyBundle,
    shared: Option<&SharedState>,
) -> anyhow::Result<(AuditLog, LogChecked, ApplyTrust)> {
    let signer = signer_for(&args.store, audit_path)?;
    let apply_trust = match &args.apply_key {
        Some(file) => ApplyTrust::Operator(
            read_public_key(&file.to_string_lossy())
                .with_context(|| format!("--apply-key {}", file.display()))?,
        ),
        None => ApplyTrust::Log(signer.verifying_key()),
    };
    let (audit, checked) = match shared {
        None => AuditLog::open_in_background(audit_path, Some(signer), Arc::new(SystemClock))?,
        Some(state) => {
            let chain = SharedChain::new(state.url(), &replica_id(args)?)
                .context("cannot start the audit chain's runtime")?;
            AuditLog::open_store_in_background(
                Box::new(chain),
                Some(signer),
                Arc::new(SystemClock),
            )?
        }
    };
    store_snapshot(&snapshots_dir(audit_path), bundle).with_context(|| {
        format!(
            "cannot store the policy snapshot beside {}",
            audit_path.display()
        )
    })?;
    Ok((audit, checked, apply_trust))
}

/// With `--state`: the shared state, and its clients and approvers
/// followed when something asks them at every request (HTTP clients, or
/// approvers; a stdio client was authenticated once, at start).
fn connect_shared(
    args: &ServeArgs,
    runtime: &tokio::runtime::Runtime,
    with_inbox: bool,
) -> anyhow::Result<(Option<SharedState>, Option<Arc<SharedDirectory>>)> {
    let Some(url) = args.state.url()? else {
        return Ok((None, None));
    };
    let state = runtime.block_on(SharedState::connect(&url))?;
    let directory = if args.http.address.is_some() || with_inbox {
        Some(runtime.block_on(SharedDirectory::follow(state.clone()))?)
    } else {
        None
    };
    Ok((Some(state), directory))
}

/// Where the inbox finds its approvers: the fleet's tables, or the token
/// store's file.
fn approvers_of(
    args: &ServeArgs,
    directory: Option<&Arc<SharedDirectory>>,
) -> anyhow::Result<Arc<dyn ApproverDirectory>> {
    if let Some(directory) = directory {
        return Ok(Arc::clone(directory) as _);
    }
    let path = args.store.resolve().context(
        "--approvals: no token store to find approvers in: set --store, PORTCULLIS_TOKEN_STORE, XDG_STATE_HOME or HOME",
    )?;
    Ok(Arc::new(FileDirectory::new(path)))
}

/// The transport `serve` serves its clients over.
fn transport_of(args: &ServeArgs) -> Transport {
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

/// The approval key a fleet's replicas share, from `--approval-key` or
/// the environment; `None` for a single server, whose key is its own.
/// Checked before anything starts.
fn fleet_key(args: &ServeArgs) -> anyhow::Result<Option<[u8; 64]>> {
    let given = std::env::var(APPROVAL_KEY_ENV)
        .ok()
        .filter(|key| !key.is_empty());
    if args.state.url()?.is_none() {
        if args.approval_key.is_some() || given.is_some() {
            // Spent nonces live in memory: a restarted server with the same
            // key would open every state it sealed before once more.
            anyhow::bail!(
                "--approval-key and {APPROVAL_KEY_ENV} are for a fleet: give --state too, where the replicas spend approvals"
            );
        }
        return Ok(None);
    }
    Ok(Some(match (&args.approval_key, given) {
        (Some(file), _) => shared_key_from_file(file)?,
        (None, Some(hex)) => shared_key_from_hex(&hex)?,
        (None, None) => anyhow::bail!(
            "with --state, every replica needs the same approval key: give --approval-key FILE or {APPROVAL_KEY_ENV} (make one with `head -c 64 /dev/urandom > FILE; chmod 600 FILE`)"
        ),
    }))
}

/// The approval seal: a key of this process's own, its nonces spent in
/// memory; or, in a fleet, the key every replica is given and the nonces
/// spent in the shared state.
fn approvals(
    args: &ServeArgs,
    fleet: Option<([u8; 64], &SharedState)>,
    inbox: Option<Arc<Inbox>>,
) -> anyhow::Result<Arc<Approvals>> {
    let ttl = Duration::from_secs(args.approval_ttl);
    let clock = Arc::new(SystemClock);
    let (seal, shared) = match fleet {
        None => {
            let seal = ApprovalSeal::new(ttl, clock)
                .map_err(|err| anyhow::anyhow!("no randomness for the approval key: {err}"))?;
            (seal, None)
        }
        Some((key, state)) => {
            let nonces = SharedNonces::new(state.clone(), clock.clone());
            (
                ApprovalSeal::with_key(key, ttl, clock),
                Some(Arc::new(nonces) as Arc<dyn NonceLedger>),
            )
        }
    };
    Ok(Arc::new(Approvals {
        seal,
        timeout: Duration::from_secs(args.approval_timeout),
        shared,
        inbox,
    }))
}

impl World {
    /// Loads and proves the policies for `clients`, starts the downstream
    /// servers and opens the log. `None` when the policies do not load (the
    /// problems are reported on stderr).
    fn prepare(
        args: &ServeArgs,
        clients: Vec<StoredClient>,
        key: Option<[u8; 64]>,
        (metrics, inbox): (Option<std::net::TcpListener>, Option<inbox::Bound>),
    ) -> anyhow::Result<Option<Self>> {
        let (inbox, announce) = inbox.unzip();
        let audit_path = audit_path(args.audit.as_deref())?;
        let applied = applied_path(&audit_path);
        let watched = Watched::now(&args.policies, &applied, args.reload);
        let bundle = args.policies.bundle()?;
        let servers = match Servers::of(&bundle) {
            Ok(servers) => servers,
            Err(err) => {
                report_problems(&err.problems, Format::Human)?;
                return Ok(None);
            }
        };
        let surface = args
            .surface
            .map(Surface::from)
            .or(servers.config.surface)
            .unwrap_or(Surface::Direct);
        let root =
            Root::new(&args.root).with_context(|| format!("--root {}", args.root.display()))?;
        let runtime = runtime_for(args)?;
        let (shared, directory) = connect_shared(args, &runtime, inbox.is_some())?;
        let approvers = inbox
            .as_ref()
            .map(|_| approvers_of(args, directory.as_ref()))
            .transpose()?;
        // The downstream servers start first, in parallel: the tools they list
        // that nobody pinned become entities too, so that a call to one is
        // decided and refused as not pinned.
        let workspace = root.path().to_owned();
        let (fleet, live) = start_fleet(&runtime, &servers, &workspace);
        let records: Vec<ClientRecord> = clients.iter().map(ClientRecord::from).collect();
        let proofs = set_cache(&args.store);
        let stop_fleet = || {
            if let Some(fleet) = &fleet {
                runtime.block_on(fleet.shut_down());
            }
        };
        let setting =
            match reload::setting(&bundle, &servers, &live, &records, proofs.as_ref(), root) {
                Ok(setting) => setting,
                Err(problems) => {
                    stop_fleet();
                    // Human format: stdout is the protocol channel, even for errors.
                    report_problems(&problems, Format::Human)?;
                    return Ok(None);
                }
            };
        let bridge = open_bridge(args, &servers, &workspace, shared.as_ref())
            .inspect_err(|_| stop_fleet())?;
        let (audit, checked, apply_trust) =
            open_audit(args, &audit_path, &bundle, shared.as_ref())?;
        if let Some(state) = &shared {
            runtime
                .block_on(state.keep_snapshot(&snapshots_dir(&audit_path), &bundle.hash()))
                .context("cannot keep the policy snapshot in the shared state")?;
        }
        let settings = Arc::new(ArcSwap::from_pointee(setting));
        let audit = Arc::new(audit);
        let session = new_session_id()?;
        let limits = Limits {
            max_concurrent: usize::try_from(args.max_concurrent).unwrap_or(1),
            walk_budget: Duration::from_secs(args.walk_budget),
        };
        let kept = announce.map(|announce| {
            let maker = KeeperMaker {
                settings: Arc::clone(&settings),
                audit: Arc::clone(&audit),
                session: session.clone(),
                limits,
                fleet: fleet.clone(),
                bridge: bridge.as_ref().map(|(bridge, _)| Arc::clone(bridge)),
                transport: transport_of(args),
            };
            inbox::kept(announce, shared.as_ref(), maker, args)
        });
        let approvals = approvals(args, key.zip(shared.as_ref()), kept.transpose()?)?;
        Ok(Some(Self {
            runtime,
            bundle,
            lock: servers.lock,
            live,
            fleet,
            bridge,
            settings,
            clients,
            shared,
            directory,
            audit,
            checked,
            session,
            approvals,
            limits,
            policies: args.policies.clone(),
            records,
            proofs,
            snapshots: snapshots_dir(&audit_path),
            applied,
            apply_trust,
            watched,
            reload: args.reload,
            surface,
            metrics,
            inbox,
            approvers,
            allowed_hosts: args.http.allowed_hosts.clone(),
        }))
    }

    /// What makes a keeper of a client, sharing the policies, tools and log.
    fn keeper_maker(&self, transport: Transport) -> KeeperMaker {
        KeeperMaker {
            settings: Arc::clone(&self.settings),
            audit: Arc::clone(&self.audit),
            session: self.session.clone(),
            limits: self.limits,
            fleet: self.fleet.clone(),
            bridge: self.bridge.as_ref().map(|(bridge, _)| Arc::clone(bridge)),
            transport,
        }
    }

    /// The keeper of each client, sharing the policies, tools and log.
    fn keepers(&self, transport: Transport) -> Vec<Arc<Keeper>> {
        let maker = self.keeper_maker(transport);
        self.clients
            .iter()
            .map(|client| maker.keeper(client.clone()))
            .collect()
    }

    /// Records the start, runs `serving` until it ends or the log fails its
    /// check, stops the downstream servers and records the shutdown last.
    fn run(
        self,
        start: serde_json::Map<String, serde_json::Value>,
        admission: Option<Admission>,
        serving: impl Future<Output = Result<Ended, ServeError>>,
    ) -> anyhow::Result<Exit> {
        let World {
            runtime,
            lock,
            live,
            fleet,
            bridge,
            settings,
            clients,
            shared,
            audit,
            checked,
            session,
            policies,
            records,
            proofs,
            snapshots,
            applied,
            apply_trust,
            watched,
            reload,
            metrics,
            inbox,
            approvers,
            approvals,
            allowed_hosts,
            ..
        } = self;
        let reloader = Reloader {
            policies,
            settings: Arc::clone(&settings),
            clients: records,
            proofs,
            fleet: fleet.clone(),
            audit: Arc::clone(&audit),
            snapshots,
            applied,
            apply_trust,
            watched,
            session: session.clone(),
            shared: shared.clone(),
            admission,
        };
        let served = runtime.block_on(async {
            Starting {
                session: &session,
                clients: &clients,
                settings: &settings,
                bridge: bridge.as_ref(),
                lock: &lock,
                live: &live,
            }
            .record(&audit, start)?;
            let stop_inbox = Beside {
                metrics,
                inbox: inbox.zip(approvers).zip(approvals.inbox.clone()),
                shared: shared.as_ref(),
                bridge: bridge.as_ref().map(|(bridge, _)| bridge),
                allowed_hosts,
            }
            .spawn();
            let hangups = Reloader::hangups().context("cannot listen for SIGHUP")?;
            let reloading = tokio::spawn(reloader.run(reload, hangups));
            tokio::pin!(serving);
            let broken = log_broken(checked);
            let served = tokio::select! {
                served = &mut serving => served,
                // Nothing was written to it, and nothing will be: stop here.
                err = broken => {
                    reloading.abort();
                    stop_agents_and_servers(fleet.as_deref(), bridge.as_ref()).await;
                    return Err(anyhow::Error::from(err));
                }
            };
            // The calls are over: no reload and no downstream server outlives
            // them, and both go before the last record.
            stop_inbox.cancel();
            reloading.abort();
            stop_agents_and_servers(fleet.as_deref(), bridge.as_ref()).await;
            record_shutdown(&audit, &session, &served).await;
            served.map(drop).map_err(anyhow::Error::from)
        });
        // Everything is recorded by now. The thread reading stdin may still be
        // blocked (a signal ended the session while the client kept stdin open):
        // leave it, rather than wait for input that may never come.
        runtime.shutdown_background();
        served?;
        Ok(Exit::Ok)
    }
}

/// The inbox's endpoint: its listener, who may answer, the inbox.
type ServedInbox = (
    (std::net::TcpListener, Arc<dyn ApproverDirectory>),
    Arc<Inbox>,
);

/// What runs beside the calls: the metrics endpoint, the approval inbox's
/// endpoint, and in a fleet what follows the other replicas (answers to
/// this replica's questions, cancels of its agent turns).
struct Beside<'a> {
    metrics: Option<std::net::TcpListener>,
    inbox: Option<ServedInbox>,
    shared: Option<&'a SharedState>,
    bridge: Option<&'a Arc<Bridge>>,
    allowed_hosts: Vec<String>,
}

impl Beside<'_> {
    /// Spawns each on the current runtime; what stops the inbox's endpoint.
    fn spawn(self) -> CancellationToken {
        let Beside {
            metrics: counted,
            inbox: kept,
            shared,
            bridge,
            allowed_hosts,
        } = self;
        if let Some(listener) = counted {
            tokio::spawn(metrics::serve(listener));
        }
        let stop_inbox = CancellationToken::new();
        if let Some(((listener, approvers), kept)) = kept {
            if let Some(state) = shared {
                tokio::spawn(follow_answers(state.clone(), Arc::clone(&kept)));
            }
            tokio::spawn(inbox::serve(
                listener,
                kept,
                approvers,
                shared.cloned(),
                allowed_hosts,
                stop_inbox.clone(),
            ));
        }
        if let (Some(state), Some(bridge)) = (shared, bridge) {
            tokio::spawn(follow_cancels(state.clone(), Arc::clone(bridge)));
        }
        stop_inbox
    }
}

/// What the records that open a session say.
struct Starting<'a> {
    session: &'a str,
    clients: &'a [StoredClient],
    settings: &'a ArcSwap<Setting>,
    bridge: Option<&'a (Arc<Bridge>, Vec<String>)>,
    lock: &'a ServersLock,
    live: &'a BTreeMap<String, Vec<serde_json::Value>>,
}

impl Starting<'_> {
    /// The `start` record (with `start`'s fields), then one for the agent
    /// turns the last run left interrupted and one per drifted tool.
    fn record(
        &self,
        audit: &AuditLog,
        start: serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), AuditError> {
        let session = self.session;
        let mut record = json!({
            "event": "start",
            "session": session,
            "clients": self.clients.iter().map(|client| json!({
                "name": client.name, "fingerprint": client.fingerprint(), "tier": client.tier,
            })).collect::<Vec<_>>(),
            "policy_set": self.settings.load().engine.identity(),
            "pid": std::process::id(),
        });
        if let Some(fields) = record.as_object_mut() {
            fields.extend(start);
        }
        audit.submit(Kind::System, record)?;
        if let Some((bridge, interrupted)) = self.bridge
            && !interrupted.is_empty()
        {
            tracing::warn!(
                sessions = interrupted.len(),
                "agent turns in flight when portcullis last stopped are marked interrupted"
            );
            audit.submit(
                Kind::System,
                json!({
                    "event": "turns_interrupted", "session": session,
                    "agent": bridge.agent().0, "sessions": interrupted,
                }),
            )?;
        }
        for found in drift(self.lock, self.live) {
            tracing::warn!(server = %found.server, tool = %found.tool, drift = found.kind.as_str(),
                "a downstream tool is not as pinned: it cannot be called until it is pinned again");
            audit.submit(
                Kind::System,
                json!({
                    "event": "tool_drift", "session": session, "server": found.server,
                    "tool": found.tool, "drift": found.kind, "pinned": found.pinned,
                    "live": found.live, "fields": found.fields,
                }),
            )?;
        }
        Ok(())
    }
}

/// Resolves only if the log's check at start fails: then nothing was
/// written to it, and nothing will be.
async fn log_broken(checked: LogChecked) -> AuditError {
    match checked.await {
        Ok(Ok(())) => std::future::pending().await,
        Ok(Err(err)) => err,
        Err(_) => AuditError::Stopped,
    }
}

/// The session's last record: how it ended.
async fn record_shutdown(audit: &AuditLog, session: &str, served: &Result<Ended, ServeError>) {
    let signal = match served {
        Ok(Ended::Signal(name)) => Some(*name),
        _ => None,
    };
    let shutdown = json!({
        "event": "shutdown", "session": session, "signal": signal,
        "error": served.as_ref().err().map(ToString::to_string),
    });
    if let Err(err) = audit.close(Kind::System, shutdown).await {
        tracing::error!(error = %err, "the shutdown record could not be written");
    }
}

/// Stops the downstream servers and the agent the bridge started.
async fn stop_agents_and_servers(
    fleet: Option<&Fleet>,
    bridge: Option<&(Arc<Bridge>, Vec<String>)>,
) {
    if let Some(fleet) = fleet {
        fleet.shut_down().await;
    }
    if let Some((bridge, _)) = bridge {
        bridge.shut_down().await;
    }
}

/// A random id for this serve process, named in every record it writes.
fn new_session_id() -> anyhow::Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|err| anyhow::anyhow!("no randomness: {err}"))?;
    Ok(hex::encode(bytes))
}
