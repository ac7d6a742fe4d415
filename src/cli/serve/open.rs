//! What `serve` opens before it serves: the runtime, the downstream
//! servers, the agent bridge, the audit log, the shared state and the
//! approval seal. Each step reports its own failure; none decides.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::approval::{
    APPROVAL_KEY_ENV, ApprovalSeal, Approvals, Inbox, NonceLedger, shared_key_from_file,
    shared_key_from_hex,
};
use crate::audit::{ApplyTrust, AuditLog, read_public_key, snapshots_dir, store_snapshot};
use crate::auth::{ApproverDirectory, FileDirectory};
use crate::bridge::Bridge;
use crate::cli::state_paths::{sessions_path, signer_for};
use crate::clock::SystemClock;

use crate::pdp::PolicyBundle;
use crate::servers::{Fleet, Servers};
use crate::state::{SharedChain, SharedDirectory, SharedNonces, SharedSessions, SharedState};

use super::LogChecked;
use super::ServeArgs;
use super::args::replica_id;

/// One client over stdio sends a message, waits for the answer, sends
/// the next: one thread drives it without waking another for every
/// message (on two cores the wake-ups were a quarter of a proxied call's
/// CPU). HTTP serves many clients at once, on every core.
pub(super) fn runtime_for(args: &ServeArgs) -> anyhow::Result<tokio::runtime::Runtime> {
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
pub(super) fn start_fleet(
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
pub(super) fn open_bridge(
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
pub(super) fn open_audit(
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
pub(super) fn connect_shared(
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
pub(super) fn approvers_of(
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
/// The approval key a fleet's replicas share, from `--approval-key` or
/// the environment; `None` for a single server, whose key is its own.
/// Checked before anything starts.
pub(super) fn fleet_key(args: &ServeArgs) -> anyhow::Result<Option<[u8; 64]>> {
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
pub(super) fn approvals(
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

/// A random id for this serve process, named in every record it writes.
pub(super) fn new_session_id() -> anyhow::Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|err| anyhow::anyhow!("no randomness: {err}"))?;
    Ok(hex::encode(bytes))
}
