//! `portcullis serve`: wires the pieces (policies, tokens, root, audit log,
//! approvals) and hands a transport to the MCP adapter: stdio for the one
//! client whose token is in the environment, or Streamable HTTP for every
//! client in the token store. It translates flags; it does not decide.

mod admission;
mod args;
mod hook_desk;
mod http;
mod inbox;
mod keepers;
mod metrics;
mod open;
mod reload;
mod stdio;
mod warm;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::policy_set::report_problems;
use super::state_paths::{audit_path, authenticate, authenticate_shared, set_cache};
use super::{Exit, Format, PolicyArgs};
use crate::approval::{Approvals, Inbox};
use crate::audit::{ApplyTrust, AuditError, AuditLog, Kind, applied_path, snapshots_dir};
use crate::auth::{AUTH_FAILED, ApproverDirectory, StoredClient};
use crate::bridge::Bridge;
use crate::facts::{Root, Transport};
use arc_swap::ArcSwap;

use crate::keeper::{Keeper, Limits, Setting};
use crate::mcp::{Ended, ServeError};
use crate::pdp::{ClientRecord, PolicyBundle, SetCache};
use crate::servers::{Fleet, Servers, ServersLock, Surface, drift};
use crate::state::{SharedDirectory, SharedState, follow_answers, follow_cancels};
use hook_desk::HookDesk;
use keepers::{Admission, KeeperMaker};
use reload::{ReloadMode, Reloader, Watched};

pub use args::ServeArgs;
use args::transport_of;
use open::{
    approvals, approvers_of, connect_shared, fleet_key, new_session_id, open_audit, open_bridge,
    runtime_for, start_fleet,
};

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
    set: ServedSet,
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
    reloading: ReloadFiles,
    reload: ReloadMode,
    /// `--metrics`, bound.
    metrics: Option<std::net::TcpListener>,
    /// `--approvals`, bound.
    inbox: Option<std::net::TcpListener>,
    /// Who may answer the inbox's questions.
    approvers: Option<Arc<dyn ApproverDirectory>>,
    /// Host names the endpoints accept besides the loopback ones.
    allowed_hosts: Vec<String>,
    /// `--hook-socket`, bound.
    hooks: Option<HookDesk>,
}

/// Whether the log verified, told once its writer has checked it.
type LogChecked = tokio::sync::oneshot::Receiver<Result<(), AuditError>>;

/// The policy set as read at start, the downstream servers it names
/// (started) and the agent bridge it opens.
struct ServedSet {
    bundle: PolicyBundle,
    lock: ServersLock,
    /// The tools each downstream server listed at start.
    live: BTreeMap<String, Vec<serde_json::Value>>,
    fleet: Option<Arc<Fleet>>,
    /// The agent bridge, with the sessions whose turn was cut off when
    /// portcullis last stopped (recorded at start).
    bridge: Option<(Arc<Bridge>, Vec<String>)>,
    /// The tools clients are shown, fixed at start.
    surface: Surface,
}

impl ServedSet {
    /// What makes a keeper of a client over `transport`, sharing this
    /// set's servers and bridge, the policies and the log.
    fn keeper_maker(
        &self,
        settings: &Arc<ArcSwap<Setting>>,
        audit: &Arc<AuditLog>,
        session: &str,
        limits: Limits,
        transport: Transport,
    ) -> KeeperMaker {
        KeeperMaker {
            settings: Arc::clone(settings),
            audit: Arc::clone(audit),
            session: session.to_owned(),
            limits,
            fleet: self.fleet.clone(),
            bridge: self.bridge.as_ref().map(|(bridge, _)| Arc::clone(bridge)),
            transport,
        }
    }

    /// Reads the set, starts its downstream servers (in parallel: the tools
    /// they list that nobody pinned become entities too, so that a call to
    /// one is decided and refused as not pinned), builds the first setting
    /// and opens the bridge. `None` once the set's problems are reported,
    /// with the servers stopped again.
    fn open(
        args: &ServeArgs,
        runtime: &tokio::runtime::Runtime,
        shared: Option<&SharedState>,
        (records, proofs): (&[ClientRecord], Option<&SetCache>),
        root: Root,
    ) -> anyhow::Result<Option<(Self, Setting)>> {
        let bundle = args.policies.bundle()?;
        let servers = match Servers::of(&bundle) {
            Ok(servers) => servers,
            Err(err) => {
                report_problems(&err.problems, Format::Human)?;
                return Ok(None);
            }
        };
        let workspace = root.path().to_owned();
        let (fleet, live) = start_fleet(runtime, &servers, &workspace);
        let stop_fleet = || {
            if let Some(fleet) = &fleet {
                runtime.block_on(fleet.shut_down());
            }
        };
        let setting = match reload::setting(&bundle, &servers, &live, records, proofs, root) {
            Ok(setting) => setting,
            Err(problems) => {
                stop_fleet();
                // Human format: stdout is the protocol channel, even for errors.
                report_problems(&problems, Format::Human)?;
                return Ok(None);
            }
        };
        let bridge =
            open_bridge(args, &servers, &workspace, shared).inspect_err(|_| stop_fleet())?;
        let surface = args
            .surface
            .map(Surface::from)
            .or(servers.config.surface)
            .unwrap_or(Surface::Direct);
        let set = Self {
            bundle,
            lock: servers.lock,
            live,
            fleet,
            bridge,
            surface,
        };
        Ok(Some((set, setting)))
    }
}

/// What only a reload reads: the policies' flags, the clients' records,
/// the proofs kept, and the files `policy apply` and the watcher use.
struct ReloadFiles {
    policies: PolicyArgs,
    records: Vec<ClientRecord>,
    proofs: Option<SetCache>,
    snapshots: PathBuf,
    /// The nudge file `policy apply` writes for `--reload tighten-only`.
    applied: PathBuf,
    /// Whose signed `policy_apply` lets a wider set through.
    apply_trust: ApplyTrust,
    watched: Watched,
}

impl World {
    /// Everything `serve` opens, in order; `None` once the policy set's
    /// problems are reported.
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
        let root =
            Root::new(&args.root).with_context(|| format!("--root {}", args.root.display()))?;
        let runtime = runtime_for(args)?;
        let (shared, directory) = connect_shared(args, &runtime, inbox.is_some())?;
        let approvers = inbox
            .as_ref()
            .map(|_| approvers_of(args, directory.as_ref()))
            .transpose()?;
        let root_path = root.path().to_owned();
        let records: Vec<ClientRecord> = clients.iter().map(ClientRecord::from).collect();
        let proofs = set_cache(&args.store);
        let given = (records.as_slice(), proofs.as_ref());
        let Some((set, setting)) = ServedSet::open(args, &runtime, shared.as_ref(), given, root)?
        else {
            return Ok(None);
        };
        let (audit, checked, apply_trust) =
            open_audit(args, &audit_path, &set.bundle, shared.as_ref())?;
        let audit = Arc::new(audit);
        let hooks = HookDesk::open_if_given(args, &root_path, (&audit_path, &audit))?;
        if let Some(state) = &shared {
            runtime
                .block_on(state.keep_snapshot(&snapshots_dir(&audit_path), &set.bundle.hash()))
                .context("cannot keep the policy snapshot in the shared state")?;
        }
        let settings = Arc::new(ArcSwap::from_pointee(setting));
        let session = new_session_id()?;
        let limits = Limits {
            max_concurrent: usize::try_from(args.max_concurrent).unwrap_or(1),
            walk_budget: Duration::from_secs(args.walk_budget),
        };
        let maker = set.keeper_maker(&settings, &audit, &session, limits, transport_of(args));
        let kept = announce.map(|announce| inbox::kept(announce, shared.as_ref(), maker, args));
        let approvals = approvals(args, key.zip(shared.as_ref()), kept.transpose()?)?;
        let reloading = ReloadFiles {
            policies: args.policies.clone(),
            records,
            proofs,
            snapshots: snapshots_dir(&audit_path),
            applied,
            apply_trust,
            watched,
        };
        Ok(Some(Self {
            runtime,
            set,
            settings,
            clients,
            shared,
            directory,
            audit,
            checked,
            session,
            approvals,
            limits,
            reloading,
            reload: args.reload,
            metrics,
            inbox,
            approvers,
            allowed_hosts: args.http.allowed_hosts.clone(),
            hooks,
        }))
    }

    /// What makes a keeper of a client, sharing the policies, tools and log.
    fn keeper_maker(&self, transport: Transport) -> KeeperMaker {
        self.set.keeper_maker(
            &self.settings,
            &self.audit,
            &self.session,
            self.limits,
            transport,
        )
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
        let reloader = self.reloading.reloader(
            (&self.settings, &self.audit, &self.session),
            &self.set,
            self.shared.as_ref(),
            admission,
        );
        let beside = Beside {
            metrics: self.metrics,
            inbox: (self.inbox.zip(self.approvers)).zip(self.approvals.inbox.clone()),
            shared: self.shared.as_ref(),
            bridge: self.set.bridge.as_ref().map(|(bridge, _)| bridge),
            allowed_hosts: self.allowed_hosts,
            hooks: self.hooks,
        };
        let (set, audit, session) = (&self.set, &self.audit, &self.session);
        let served = self.runtime.block_on(async {
            let starting = Starting {
                session,
                clients: &self.clients,
                settings: &self.settings,
                set,
            };
            starting.record(audit, start)?;
            let stop_beside = beside.spawn();
            let hangups = Reloader::hangups().context("cannot listen for SIGHUP")?;
            let reloading = tokio::spawn(reloader.run(self.reload, hangups));
            tokio::pin!(serving);
            let served = tokio::select! {
                served = &mut serving => served,
                // Nothing was written to it, and nothing will be: stop here.
                err = log_broken(self.checked) => {
                    stop_beside.stop().await;
                    reloading.abort();
                    stop_agents_and_servers(set.fleet.as_deref(), set.bridge.as_ref()).await;
                    return Err(anyhow::Error::from(err));
                }
            };
            // The calls are over: no reload and no downstream server outlives
            // them, and both go before the last record.
            stop_beside.stop().await;
            reloading.abort();
            stop_agents_and_servers(set.fleet.as_deref(), set.bridge.as_ref()).await;
            record_shutdown(audit, session, &served).await;
            served.map(drop).map_err(anyhow::Error::from)
        });
        // Everything is recorded by now. The thread reading stdin may still be
        // blocked (a signal ended the session while the client kept stdin open):
        // leave it, rather than wait for input that may never come.
        self.runtime.shutdown_background();
        served?;
        Ok(Exit::Ok)
    }
}

impl ReloadFiles {
    /// What reloads the set for the keepers sharing `settings`, `audit` and
    /// `session`, with the transport's admission of clients.
    fn reloader(
        self,
        (settings, audit, session): (&Arc<ArcSwap<Setting>>, &Arc<AuditLog>, &str),
        set: &ServedSet,
        shared: Option<&SharedState>,
        admission: Option<Admission>,
    ) -> Reloader {
        Reloader {
            policies: self.policies,
            settings: Arc::clone(settings),
            clients: self.records,
            proofs: self.proofs,
            fleet: set.fleet.clone(),
            audit: Arc::clone(audit),
            snapshots: self.snapshots,
            applied: self.applied,
            apply_trust: self.apply_trust,
            watched: self.watched,
            session: session.to_owned(),
            shared: shared.cloned(),
            admission,
        }
    }
}

/// The inbox's endpoint: its listener, who may answer, the inbox.
type ServedInbox = (
    (std::net::TcpListener, Arc<dyn ApproverDirectory>),
    Arc<Inbox>,
);

/// What runs beside the calls: the metrics endpoint, the approval inbox's
/// endpoint, the hook socket, and in a fleet what follows the other
/// replicas (answers to this replica's questions, cancels of its agent
/// turns).
struct Beside<'a> {
    metrics: Option<std::net::TcpListener>,
    inbox: Option<ServedInbox>,
    shared: Option<&'a SharedState>,
    bridge: Option<&'a Arc<Bridge>>,
    allowed_hosts: Vec<String>,
    hooks: Option<HookDesk>,
}

/// What stops the inbox's endpoint and the hook socket, which decide and
/// so must be done before the last record.
struct Stopping {
    token: CancellationToken,
    hooks: Option<tokio::task::JoinHandle<()>>,
}

impl Stopping {
    async fn stop(self) {
        self.token.cancel();
        if let Some(hooks) = self.hooks
            && let Err(err) = hooks.await
        {
            tracing::error!(error = %err, "the hook socket did not stop cleanly");
        }
    }
}

impl Beside<'_> {
    /// Spawns each on the current runtime.
    fn spawn(self) -> Stopping {
        let Beside {
            metrics: counted,
            inbox: kept,
            shared,
            bridge,
            allowed_hosts,
            hooks,
        } = self;
        if let Some(listener) = counted {
            tokio::spawn(metrics::serve(listener));
        }
        let stop_inbox = CancellationToken::new();
        let hooks = hooks.map(|desk| tokio::spawn(desk.serve(stop_inbox.clone())));
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
        Stopping {
            token: stop_inbox,
            hooks,
        }
    }
}

/// What the records that open a session say.
struct Starting<'a> {
    session: &'a str,
    clients: &'a [StoredClient],
    settings: &'a ArcSwap<Setting>,
    set: &'a ServedSet,
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
        if let Some((bridge, interrupted)) = &self.set.bridge
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
        for found in drift(&self.set.lock, &self.set.live) {
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
