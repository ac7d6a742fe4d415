//! One running connection to a downstream server: started, initialized and
//! listed within the server's start timeout, or an error that says why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;

use rmcp::model::{PaginatedRequestParams, ServerNotification, SubscriptionFilter};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientServiceExt, RoleClient};
use serde_json::Value;
use thiserror::Error;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

use super::child::ChildTransport;
use super::client::{DownstreamClient, Routes};
use super::config::{Endpoint, ServerConfig};
use super::guard::GUARD_SUBCOMMAND;
use super::late;
use super::ordered::{self, Arrivals, InOrder};
use super::pins::{definition_hash, pinned_definition};
use super::protocol::Protocol;
use super::stderr_tail::StderrTail;
use super::upstream::RelaySlot;
use crate::confine::Plan;
use crate::facts::{BUILTIN_PATH_CLASSES, PathClasses};

#[derive(Debug, Error)]
pub enum ConnectError {
    #[error("environment variable {0} is not set")]
    MissingEnv(String),
    #[error("cannot start the server: {0}")]
    Spawn(std::io::Error),
    #[error("the server did not start within {0:?}")]
    StartTimeout(std::time::Duration),
    #[error("the MCP session did not start: {0}")]
    Initialize(String),
    #[error("the server did not list its tools: {0}")]
    List(String),
    #[error("the server cannot be confined: {0}")]
    Confine(String),
    #[error("the server is not a stdio server")]
    NotStdio,
}

/// The variables a downstream inherits from portcullis: enough to find
/// programs and a home, and nothing that could hold a secret (the client's
/// own token is in portcullis's environment). Anything else is passed by
/// name in `env_from`.
const INHERITED_ENV: [&str; 12] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
];

/// The running session; its owner waits on it, and cancels it to stop
/// the server.
pub(super) type Session = RunningService<rmcp::RoleClient, DownstreamClient>;

pub(super) struct Connection {
    /// Where calls are sent.
    pub peer: Peer<RoleClient>,
    /// The queue this server's progress is routed through, in order.
    pub arrivals: Arrivals,
    /// Each listed tool's definition (the pinned part), by name.
    pub tools: BTreeMap<String, Value>,
    /// The hash of each listed tool's definition, by name.
    pub hashes: BTreeMap<String, String>,
    /// Whether the server runs calls as tasks (the 2026-07-28 tasks
    /// extension), so that a client's call of its tools may be one.
    pub tasks: bool,
}

impl Connection {
    /// Starts `server` and lists its tools. A stdio server runs in
    /// `folder` (its own root, or the workspace root).
    pub async fn connect(
        server: &ServerConfig,
        folder: &Path,
        routes: Routes,
        relay: RelaySlot,
        list_changed: mpsc::UnboundedSender<()>,
        stderr: &StderrTail,
    ) -> Result<(Self, Session), ConnectError> {
        let (arrivals, routed) = mpsc::unbounded_channel();
        tokio::spawn(ordered::route(routed, routes));
        let (late, made_late) = mpsc::unbounded_channel();
        let client = DownstreamClient {
            server: server.name.clone(),
            relay,
            list_changed: list_changed.clone(),
        };
        let started = match &server.endpoint {
            Endpoint::Stdio { .. } => {
                let child = start_stdio(server, folder, stderr)?;
                let transport = ChildTransport::new(child).map_err(ConnectError::Spawn)?;
                let transport = InOrder::new(transport, arrivals.clone(), late);
                start(client, transport, server).await
            }
            Endpoint::Http { url, bearer_from } => {
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                if let Some(variable) = bearer_from {
                    let token = std::env::var(variable)
                        .map_err(|_| ConnectError::MissingEnv(variable.clone()))?;
                    config = config.auth_header(token);
                }
                // rustls needs its crypto chosen once per process; a second
                // call finds it chosen.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let transport = StreamableHttpClientTransport::from_config(config);
                let transport = InOrder::new(transport, arrivals.clone(), late);
                start(client, transport, server).await
            }
        };
        let (service, listed) = started?;
        tokio::spawn(late::cancel_late_tasks(
            made_late,
            service.peer().clone(),
            server.name.clone(),
            server.timeout,
        ));
        let modern = service
            .peer()
            .peer_info()
            .is_some_and(|info| !info.protocol_version.has_initialize());
        if modern {
            let listening = listen_for_changes(&server.name, service.peer().clone(), list_changed);
            if tokio::time::timeout(server.start_timeout, listening)
                .await
                .is_err()
            {
                tracing::warn!(server = %server.name, "the server did not acknowledge the stream of tool list changes");
            }
        }
        let tasks = service
            .peer()
            .peer_info()
            .is_some_and(|info| info.capabilities.supports_tasks());
        let mut connection = Self {
            peer: service.peer().clone(),
            arrivals,
            tools: BTreeMap::new(),
            hashes: BTreeMap::new(),
            tasks,
        };
        connection.take_listing(&listed);
        Ok((connection, service))
    }

    /// Replaces the known definitions with a fresh listing.
    pub fn take_listing(&mut self, listed: &[rmcp::model::Tool]) {
        self.tools.clear();
        self.hashes.clear();
        for tool in listed {
            let Ok(json) = serde_json::to_value(tool) else {
                continue;
            };
            let definition = pinned_definition(&json);
            let name = tool.name.to_string();
            self.hashes
                .insert(name.clone(), definition_hash(&definition));
            self.tools.insert(name, definition);
        }
    }
}

/// The most tools portcullis serves of one server: each is pinned,
/// typed for the policies and checked at every load, and a listing of
/// tens of thousands would hold the server from starting for long and
/// take hundreds of megabytes.
pub(super) const MAX_TOOLS: usize = 1000;

/// The server's tools, page by page, refused as soon as they pass
/// [`MAX_TOOLS`] (the rest are not asked for).
pub(super) async fn list_bounded(
    peer: &Peer<RoleClient>,
) -> Result<Vec<rmcp::model::Tool>, String> {
    let mut tools = Vec::new();
    let mut cursor = None;
    loop {
        let params =
            cursor.map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor)));
        let page = peer
            .list_tools(params)
            .await
            .map_err(|err| err.to_string())?;
        tools.extend(page.tools);
        if tools.len() > MAX_TOOLS {
            return Err(format!(
                "it lists more than {MAX_TOOLS} tools, the most portcullis serves of one server; split it, or serve fewer of its tools"
            ));
        }
        match page.next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok(tools),
        }
    }
}

/// A 2026-07-28 server tells of a changed tool list only on a stream its
/// client opens (`subscriptions/listen`), where a 2025 one sends it
/// unasked: the stream is opened once the session runs, and each change
/// on it is checked against the pins as a 2025 server's notification is.
/// A server that does not serve the stream is listed again only when it
/// restarts; that is logged.
async fn listen_for_changes(
    server: &str,
    peer: Peer<RoleClient>,
    list_changed: mpsc::UnboundedSender<()>,
) {
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = match peer.listen(filter).await {
        Ok(subscription) => subscription,
        Err(err) => {
            tracing::warn!(server, error = %err, "the server offers no stream of tool list changes; its tools are checked against their pins when it starts");
            return;
        }
    };
    tokio::spawn(async move {
        while let Ok(Some(notification)) = subscription.next().await {
            if matches!(
                notification,
                ServerNotification::ToolListChangedNotification(_)
            ) {
                let _ = list_changed.send(());
            }
        }
    });
}

/// Starts the MCP session over `transport` in the era `server`'s entry
/// names and lists the tools, within its start timeout.
async fn start<T, E, A>(
    client: DownstreamClient,
    transport: T,
    server: &ServerConfig,
) -> Result<(Session, Vec<rmcp::model::Tool>), ConnectError>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let timeout = server.start_timeout;
    tokio::time::timeout(timeout, async {
        let service = client
            .serve_with_lifecycle(transport, server.protocol.lifecycle())
            .await
            .map_err(|err| match server.protocol {
                Protocol::Discover => ConnectError::Initialize(format!(
                    "{err} (its entry says protocol = \"2026-07-28\"; a server of the 2025 era needs \"2025-11-25\" or \"auto\")"
                )),
                _ => ConnectError::Initialize(err.to_string()),
            })?;
        let listed = list_bounded(service.peer())
            .await
            .map_err(ConnectError::List)?;
        Ok((service, listed))
    })
    .await
    .map_err(|_| ConnectError::StartTimeout(timeout))?
}

/// The confinement of a stdio server started in `folder`: writes beneath
/// it and the folders its entry names, secrets covered (the built-in
/// secret class, the floor every team's table keeps), VCS metadata
/// read-only, the network as its entry says.
fn server_plan(server: &ServerConfig, folder: &Path) -> Result<Plan, ConnectError> {
    if crate::confine::landlock_abi() == 0 {
        return Err(ConnectError::Confine(
            crate::confine::ConfineError::NoLandlock.to_string(),
        ));
    }
    static SECRETS: OnceLock<Option<PathClasses>> = OnceLock::new();
    let secrets = SECRETS
        .get_or_init(|| PathClasses::parse("path_classes.toml", BUILTIN_PATH_CLASSES).ok())
        .as_ref()
        .ok_or_else(|| ConnectError::Confine("the built-in path classes do not load".into()))?;
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let writable = server
        .confinement
        .writable
        .iter()
        .map(|folder| match (folder.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => Ok(home.join(rest)),
            (Some(_), None) => Err(ConnectError::Confine(format!(
                "writable `{folder}` names the home folder, and HOME is not set"
            ))),
            (None, _) => Ok(PathBuf::from(folder)),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let root = std::fs::canonicalize(folder)
        .map_err(|err| ConnectError::Confine(format!("its root {}: {err}", folder.display())))?;
    Ok(Plan::for_server(
        &root,
        &writable,
        server.confinement.network,
        secrets,
        home.as_deref(),
    ))
}

/// A stdio server to start: confined by `plan`, in `folder`, with only
/// the environment it is given.
struct Child<'a> {
    name: &'a str,
    folder: &'a Path,
    plan: &'a Plan,
    command: &'a str,
    args: &'a [String],
    env: &'a BTreeMap<String, String>,
    env_from: &'a BTreeMap<String, String>,
}

/// Starts the stdio server `server` confined to `folder` as the fleet
/// starts its servers (the guard, the plan, the environment), for an agent
/// the bridge speaks to in a protocol of its own. Its stdin and stdout are
/// pipes; its stderr goes to the log and its last lines to `stderr`.
pub fn start_stdio(
    server: &ServerConfig,
    folder: &Path,
    stderr: &StderrTail,
) -> Result<tokio::process::Child, ConnectError> {
    let Endpoint::Stdio {
        command,
        args,
        env,
        env_from,
    } = &server.endpoint
    else {
        return Err(ConnectError::NotStdio);
    };
    let plan = server_plan(server, folder)?;
    let child = Child {
        name: &server.name,
        folder,
        plan: &plan,
        command,
        args,
        env,
        env_from,
    };
    spawn_guarded(&child, stderr)
}

/// Starts a stdio server under the guard. Its stderr goes to the log, line
/// by line, and its last lines to `stderr`.
fn spawn_guarded(
    child: &Child<'_>,
    stderr: &StderrTail,
) -> Result<tokio::process::Child, ConnectError> {
    let Child {
        name,
        folder,
        plan,
        command,
        args,
        env,
        env_from,
    } = *child;
    let guard = std::env::current_exe().map_err(ConnectError::Spawn)?;
    let plan = serde_json::to_string(plan).map_err(|err| ConnectError::Confine(err.to_string()))?;
    let mut cmd = tokio::process::Command::new(guard);
    cmd.arg(GUARD_SUBCOMMAND)
        .arg("--parent")
        .arg(std::process::id().to_string())
        .arg("--confine")
        .arg(plan)
        .arg("--")
        .arg(command)
        .args(args)
        .current_dir(folder)
        .env_clear()
        .kill_on_drop(true);
    for name in INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.envs(env);
    for (name, from) in env_from {
        let value = std::env::var_os(from).ok_or_else(|| ConnectError::MissingEnv(from.clone()))?;
        cmd.env(name, value);
    }
    let mut started = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(ConnectError::Spawn)?;
    if let Some(written) = started.stderr.take() {
        let name = name.to_owned();
        let tail = stderr.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(written).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(server = %name, "{line}");
                tail.push(&line);
            }
        });
    }
    Ok(started)
}
