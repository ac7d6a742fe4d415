use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;

use super::policy::report_problems;
use super::{Exit, Format, PolicyArgs};
use crate::auth::{AUTH_FAILED, StoredClient, TOKEN_ENV, TokenStore, default_store_path};
use crate::facts::{Root, Transport};
use crate::keeper::{ClientIdentity, Keeper};
use crate::pdp::{ClientRecord, Engine};
use crate::tools::Registry;

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
}

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

/// Checks `PORTCULLIS_TOKEN` against the store. Every failure is the same
/// failure to the outside: which check failed is nobody's business but the
/// operator's, who can run `portcullis token list`.
fn authenticate(store: &StoreArgs) -> Option<StoredClient> {
    let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty())?;
    let store = TokenStore::open(&store.resolve()?).ok()?;
    store.authenticate(&token).cloned()
}

pub fn run(args: &ServeArgs) -> anyhow::Result<Exit> {
    // Before anything reads stdin: an unauthenticated process gets nothing.
    let Some(client) = authenticate(&args.store) else {
        eprintln!("{AUTH_FAILED}");
        return Ok(Exit::Failure);
    };
    let bundle = args.policies.bundle()?;
    let registry = Registry::builtin()?;
    let record = ClientRecord {
        name: client.name.clone(),
        tier: client.tier.clone(),
    };
    let engine = match Engine::load(&bundle, &registry, std::slice::from_ref(&record)) {
        Ok(engine) => engine,
        Err(err) => {
            // Human format: stdout is the protocol channel, even for errors.
            report_problems(&err.problems, Format::Human)?;
            return Ok(Exit::ValidationFailure);
        }
    };
    let root = Root::new(&args.root).with_context(|| format!("--root {}", args.root.display()))?;
    tracing::info!(
        client = %client.name,
        fingerprint = %client.fingerprint(),
        tier = %client.tier,
        policy_set = %engine.identity().hash,
        root = %root.path().display(),
        "serving over stdio"
    );
    let keeper = Arc::new(Keeper::new(
        engine,
        registry,
        root,
        ClientIdentity {
            fingerprint: client.fingerprint(),
            name: client.name,
            tier: client.tier,
        },
        Transport::Stdio,
    ));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(crate::mcp::serve_stdio(keeper, &bundle))?;
    Ok(Exit::Ok)
}
