//! `serve --http`: every client in the token store, each by its own bearer
//! token, on one address.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use serde_json::json;

use super::super::Exit;
use super::super::signals::Signals;
use super::keepers::Admission;
use super::{ServeArgs, World};
use crate::auth::{ClientDirectory, FileDirectory, OWNER_TIER, StoredClient, TokenStore};
use crate::cli::state_paths::with_state;
use crate::facts::Transport;
use crate::mcp::http::{
    Clients, ConnectionLimits, HttpOptions, MCP_PATH, raise_open_files, serve_http,
};
use crate::mcp::{Callers, NoticeRelay, PortcullisServer};
use crate::state::ClientTable;

/// The largest request body accepted unless `--max-body` says otherwise.
const DEFAULT_MAX_BODY: &str = "4MiB";

#[derive(Debug, Args)]
pub struct HttpArgs {
    /// Serve MCP over Streamable HTTP at ADDR:PORT (path /mcp) instead of
    /// stdio, to every client in the token store, each by its bearer token.
    /// Port 0 picks a free port and prints the address on stderr.
    #[arg(long = "http", value_name = "ADDR:PORT")]
    pub address: Option<SocketAddr>,
    /// Allow an address that is not loopback. Tokens then cross the
    /// network: put a TLS terminator in front.
    #[arg(long, requires = "address")]
    pub allow_remote: bool,
    /// A host name clients may reach the server by, besides localhost,
    /// 127.0.0.1 and ::1; any other Host header is refused (403).
    #[arg(long = "allowed-host", value_name = "NAME", requires = "address")]
    pub allowed_hosts: Vec<String>,
    /// A browser origin (scheme://host[:port]) whose pages may call the
    /// server besides this machine's own (http(s)://localhost, 127.0.0.1,
    /// [::1]); a request with any other Origin header is refused (403).
    #[arg(long = "allowed-origin", value_name = "ORIGIN", requires = "address")]
    pub allowed_origins: Vec<String>,
    /// The largest request body, in bytes or with a KiB or MiB suffix; a
    /// larger one is refused (413) before it is read.
    #[arg(long, default_value = DEFAULT_MAX_BODY, value_name = "SIZE", value_parser = parse_size)]
    pub max_body: usize,
    /// Connections open at once; one past it is refused (503). Held under
    /// the open-file limit, less room for the log and the servers.
    #[arg(long, default_value_t = 1024, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Connections open at once from one peer address (503 past it).
    #[arg(long, default_value_t = 256, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_peer: u32,
}

/// A size in bytes: `4096`, `64KiB`, `4MiB`.
fn parse_size(text: &str) -> Result<usize, String> {
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, ""),
    };
    let multiplier: usize = match unit {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        _ => {
            return Err(format!(
                "`{text}` is not a size: use bytes, or a KiB or MiB suffix"
            ));
        }
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("`{text}` is not a size: use bytes, or a KiB or MiB suffix"))
}

/// Every client of the token store (or of the fleet's table), owner
/// excepted. A fleet may start with none: clients created later are served
/// without a restart.
pub(super) fn clients(args: &ServeArgs) -> anyhow::Result<Vec<StoredClient>> {
    let not_owner = |client: &StoredClient| client.tier != OWNER_TIER;
    if let Some(url) = &args.state.url()? {
        let clients = with_state(url, async |state| ClientTable::of(state).list().await)?;
        return Ok(clients.into_iter().filter(not_owner).collect());
    }
    let path = args
        .store
        .resolve()
        .context("no token store: set --store, XDG_STATE_HOME or HOME")?;
    let store = TokenStore::open(&path)
        .with_context(|| format!("cannot read the token store {}", path.display()))?;
    let clients: Vec<StoredClient> = store
        .clients()
        .iter()
        .filter(|c| not_owner(c))
        .cloned()
        .collect();
    if clients.is_empty() {
        anyhow::bail!(
            "the token store {} holds no client: create one with `portcullis token create NAME --tier TIER`",
            path.display()
        );
    }
    Ok(clients)
}

/// Refuses, before anything starts, an address other machines can reach
/// unless the operator said so.
pub(super) fn refuse_remote(address: SocketAddr, args: &ServeArgs) -> anyhow::Result<()> {
    if address.ip().is_loopback() {
        return Ok(());
    }
    if !args.http.allow_remote {
        anyhow::bail!(
            "--http {address} is not a loopback address: add --allow-remote to serve other machines (and put TLS in front)"
        );
    }
    if args.http.allowed_hosts.is_empty() {
        tracing::warn!(
            "serving a non-loopback address without --allowed-host: only requests naming localhost, 127.0.0.1 or ::1 as Host are accepted"
        );
    }
    Ok(())
}

pub(super) fn serve(world: World, args: &ServeArgs, address: SocketAddr) -> anyhow::Result<Exit> {
    let directory: Arc<dyn ClientDirectory> = match &world.directory {
        Some(directory) => Arc::clone(directory) as _,
        None => Arc::new(FileDirectory::new(
            args.store.resolve().context("no token store")?,
        )),
    };
    let maker = world.keeper_maker(Transport::Http);
    let keepers = world.keepers(Transport::Http);
    let clients = Arc::new(Clients::new(directory, keepers));
    let admission = Admission {
        clients: Arc::clone(&clients),
        maker,
        served: world.clients.clone(),
    };
    let handler = PortcullisServer::new(
        Callers::PerRequest,
        &world.set.bundle,
        Arc::clone(&world.approvals),
        world.set.surface,
    )?;
    // A downstream's tool that drifts is news for every client watching.
    if let Some(fleet) = &world.set.fleet {
        fleet.set_relay(Arc::new(NoticeRelay {
            watchers: handler.watchers(),
        }));
    }
    let (listener, signals) = {
        let _entered = world.runtime.enter();
        let listener = std::net::TcpListener::bind(address)
            .and_then(|listener| {
                listener.set_nonblocking(true)?;
                tokio::net::TcpListener::from_std(listener)
            })
            .with_context(|| format!("cannot listen on {address}"))?;
        let signals = Signals::install().context("cannot listen for SIGINT and SIGTERM")?;
        (listener, signals)
    };
    let bound = listener.local_addr().context("the listening address")?;
    // One write: stderr is unbuffered, and `eprintln!` writes the pieces
    // of its format one by one, so a reader watching for this line (a
    // supervisor, a test) could see half of the address.
    let line = format!("portcullis: serving MCP over HTTP at http://{bound}{MCP_PATH}\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    tracing::info!(
        address = %bound,
        clients = world.clients.len(),
        policy_set = %world.settings.load().engine.identity().hash,
        root = %world.settings.load().root.path().display(),
        "serving over Streamable HTTP"
    );
    let open_files = raise_open_files();
    let limits = ConnectionLimits::within(
        open_files,
        args.http.max_connections as usize,
        args.http.max_connections_per_peer as usize,
    );
    tracing::info!(
        open_files,
        connections = limits.total,
        per_peer = limits.per_peer,
        "connection limits"
    );
    let options = HttpOptions {
        allowed_hosts: args.http.allowed_hosts.clone(),
        allowed_origins: args.http.allowed_origins.clone(),
        max_body: args.http.max_body,
        limits,
    };
    let start = json!({"transport": "http", "address": bound.to_string()});
    let serving = serve_http(listener, clients, handler, options, signals.first());
    world.run(
        start.as_object().cloned().unwrap_or_default(),
        Some(admission),
        serving,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_bytes_or_binary_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        for bad in ["", "0", "4MB", "MiB", "-1", "4 MiB", "99999999999999999999"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
