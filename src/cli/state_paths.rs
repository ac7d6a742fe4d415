//! Where an operator's state lives and how a command reaches it: the
//! token store (and the client it authenticates), the audit log beside it
//! with the checkpoint key kept apart, the proofs and the bridge's
//! sessions. `serve`, `exec`, the hooks, `token` and `policy apply` find
//! them the same way.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

use crate::audit::{AuditLog, PRIVATE_KEY_FILE, Signer, load_or_create_signer};
use crate::auth::{
    OWNER_TIER, StoredClient, TOKEN_ENV, TokenStore, authenticate_among, default_store_path,
};
use crate::clock::SystemClock;
use crate::pdp::{PolicyBundle, SetCache};
use crate::state::{ClientTable, STATE_ENV, SharedState, StateError, StateUrl};

/// Where the token store is.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// The token store [default: $XDG_STATE_HOME/portcullis/tokens.json, or
    /// ~/.local/state/portcullis/tokens.json].
    #[arg(long = "store", env = "PORTCULLIS_TOKEN_STORE", value_name = "FILE")]
    pub path: Option<PathBuf>,
}

impl StoreArgs {
    pub fn resolve(&self) -> Option<PathBuf> {
        self.path.clone().or_else(default_store_path)
    }
}

/// Where a fleet's shared state is, if it has one.
#[derive(Debug, Clone, Args)]
pub struct StateArgs {
    /// The PostgreSQL database a fleet of replicas shares (a
    /// `postgres://` URL or a `key=value` connection string): clients,
    /// approvals' spent nonces. Without it, everything stays in files.
    // Taken as text, and parsed here: clap would repeat a value it refused
    // in its error, password and all.
    #[arg(long = "state", env = STATE_ENV, value_name = "URL", hide_env_values = true)]
    pub given: Option<String>,
}

impl StateArgs {
    /// The shared state's address, if one was given.
    pub fn url(&self) -> Result<Option<StateUrl>, StateError> {
        self.given.as_deref().map(str::parse).transpose()
    }
}

/// Runs `work` against the shared state on a runtime of its own: the
/// commands that touch the state once (`token`, the start of `serve`).
pub(crate) fn with_state<T>(
    url: &StateUrl,
    work: impl AsyncFnOnce(&SharedState) -> Result<T, StateError>,
) -> anyhow::Result<T> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    Ok(runtime.block_on(async {
        let state = SharedState::connect(url).await?;
        work(&state).await
    })?)
}

/// Checks `PORTCULLIS_TOKEN` against the store. Every failure is the same
/// failure to the outside: which check failed is nobody's business but the
/// operator's, who can run `portcullis token list`.
pub(crate) fn authenticate(store: &StoreArgs) -> Option<StoredClient> {
    let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty())?;
    authenticate_token(store, &token)
}

/// Checks `token` against the store, as [`authenticate`] does the
/// environment's.
pub(crate) fn authenticate_token(store: &StoreArgs, token: &str) -> Option<StoredClient> {
    let store = TokenStore::open(&store.resolve()?).ok()?;
    // `token create` never makes an owner; a hand-edited store that does
    // is refused the same way.
    store
        .authenticate(token)
        .filter(|client| client.tier != OWNER_TIER)
        .cloned()
}

/// Checks `PORTCULLIS_TOKEN` against a fleet's clients table, as
/// [`authenticate`] does against the store.
pub(crate) fn authenticate_shared(url: &StateUrl) -> Option<StoredClient> {
    let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty())?;
    let clients = match with_state(url, async |state| ClientTable::of(state).list().await) {
        Ok(clients) => clients,
        Err(err) => {
            tracing::error!(error = %err, "the shared clients cannot be read");
            return None;
        }
    };
    authenticate_among(&clients, &token)
        .filter(|client| client.tier != OWNER_TIER)
        .cloned()
}

/// The audit log: as given, or `audit/audit.jsonl` beside the default
/// token store.
pub(crate) fn audit_path(given: Option<&std::path::Path>) -> anyhow::Result<PathBuf> {
    match given {
        Some(path) => Ok(path.to_owned()),
        None => default_store_path()
            .and_then(|p| p.parent().map(|d| d.join("audit").join("audit.jsonl")))
            .context("no audit log: set --audit, PORTCULLIS_AUDIT, XDG_STATE_HOME or HOME"),
    }
}

/// The bridge's session store: as given, or `sessions.sqlite3` beside the
/// token store.
pub(crate) fn sessions_path(
    given: Option<&std::path::Path>,
    store: &StoreArgs,
) -> anyhow::Result<PathBuf> {
    match given {
        Some(path) => Ok(path.to_owned()),
        None => store
            .resolve()
            .and_then(|p| p.parent().map(|d| d.join("sessions.sqlite3")))
            .context(
                "no session store: set --sessions, PORTCULLIS_SESSIONS, XDG_STATE_HOME or HOME",
            ),
    }
}

/// Where proofs are kept: beside the token store (and the checkpoint key).
pub(crate) fn set_cache(store: &StoreArgs) -> Option<SetCache> {
    store
        .resolve()
        .and_then(|store| store.parent().map(|dir| dir.join("proofs")))
        .map(SetCache::new)
}

/// The audit log of a process that decides once (a hook, `exec`): its
/// path, opened at its end with the checkpoint key, with the policy set's
/// snapshot stored beside it so every record replays.
pub(crate) fn audit_for_one_decision(
    store: &StoreArgs,
    given: Option<&std::path::Path>,
    bundle: &PolicyBundle,
) -> anyhow::Result<(PathBuf, Arc<AuditLog>)> {
    let path = audit_path(given)?;
    let signer = signer_for(store, &path)?;
    let log = Arc::new(AuditLog::open_at_end(
        &path,
        Some(signer),
        Arc::new(SystemClock),
    )?);
    crate::audit::store_snapshot(&crate::audit::snapshots_dir(&path), bundle)
        .context("the policy snapshot cannot be stored beside the audit log")?;
    Ok((path, log))
}

/// The checkpoint key, kept with the token store and never in the log's
/// folder: whoever can write the log must not be able to read it.
pub(crate) fn signer_for(store: &StoreArgs, audit: &std::path::Path) -> anyhow::Result<Signer> {
    let store = store.resolve().context("no token store")?;
    let keys = store
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let log_dir = audit
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let same = |a: &std::path::Path, b: &std::path::Path| match (a.canonicalize(), b.canonicalize())
    {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    if same(keys, log_dir) {
        anyhow::bail!(
            "the audit log {} is in the folder of the checkpoint signing key ({}); put the log in a folder of its own (the default is audit/audit.jsonl beside the token store)",
            audit.display(),
            keys.join(PRIVATE_KEY_FILE).display()
        );
    }
    Ok(load_or_create_signer(keys)?)
}
