//! Streamable HTTP: rmcp's `StreamableHttpService` (both eras: stateless
//! 2026-07-28 requests and legacy sessions) behind a guard that lets in
//! only an allowed Host and Origin and a known bearer token, and binds each
//! session to the client that opened it. `/healthz` needs no token and
//! says only that the process answers.

mod admission;
mod clients;
mod guard;
mod owners;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::get;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use admission::AdmittingListener;
pub use admission::{ConnectionLimits, raise_open_files};
pub use clients::Clients;
use guard::Guard;
pub(crate) use guard::SESSION_HEADER;
use owners::SessionOwners;

use super::{Ended, PortcullisServer, SHUTDOWN_GRACE, ServeError};

/// The path MCP is served on.
pub const MCP_PATH: &str = "/mcp";
/// The path of the liveness check.
pub const HEALTH_PATH: &str = "/healthz";

/// How long a legacy session may stay silent before rmcp ends it. rmcp's
/// own default (5 minutes) ends the session of an IDE left open over
/// lunch, and some clients never recover from the 404.
const SESSION_IDLE: Duration = Duration::from_secs(60 * 60);
/// How long connections may stay open once every call has been recorded.
const CONNECTION_GRACE: Duration = Duration::from_secs(5);
/// How often the owners of sessions rmcp has ended are forgotten.
const OWNER_SWEEP: Duration = Duration::from_secs(60);

/// What the operator allows besides loopback clients.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Host names accepted in `Host` besides localhost, 127.0.0.1 and ::1.
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted in `Origin`; a request without one passes.
    pub allowed_origins: Vec<String>,
    /// The largest request body, in bytes.
    pub max_body: usize,
    /// The connections kept open, and for how long.
    pub limits: ConnectionLimits,
}

/// Serves `clients` on `listener` through `handler` (made for
/// [`super::Callers::PerRequest`]) until `stop` resolves. Then every call in
/// progress is cancelled and has recorded how it ended, every session is
/// closed, and the server stops accepting, before this returns.
pub async fn serve_http(
    listener: TcpListener,
    clients: Arc<Clients>,
    handler: PortcullisServer,
    options: HttpOptions,
    stop: impl Future<Output = &'static str> + Send + 'static,
) -> Result<Ended, ServeError> {
    let services = CancellationToken::new();
    let (app, owners, sessions) = router(&clients, handler, &options, &services);
    let sweeper = tokio::spawn(sweep_owners(Arc::clone(&owners), Arc::clone(&sessions)));
    let signal: Arc<Mutex<Option<&'static str>>> = Arc::default();
    let (closing, closed_calls) = tokio::sync::oneshot::channel::<()>();
    let shutdown = {
        let signal = Arc::clone(&signal);
        let clients = Arc::clone(&clients);
        async move {
            let name = stop.await;
            tracing::info!(signal = name, "stopping: cancelling the calls in progress");
            *signal
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(name);
            // Calls are stopped (and record how they ended) before the
            // sessions go: closing a session first would drop its calls
            // unrecorded.
            stop_calls(&clients).await;
            services.cancel();
            let _ = closing.send(());
        }
    };
    let serving = axum::serve(AdmittingListener::new(listener, options.limits), app)
        .with_graceful_shutdown(shutdown)
        .into_future();
    // Once the calls are recorded, a client that keeps its connection open
    // (a response it reads slowly, say) does not hold the process: after
    // a grace period its connection is dropped.
    let lingering = async {
        match closed_calls.await {
            Ok(()) => tokio::time::sleep(CONNECTION_GRACE).await,
            Err(_) => std::future::pending().await,
        }
    };
    let served = tokio::select! {
        served = serving => served,
        () = lingering => {
            tracing::warn!("connections were still open after the grace period: closing them");
            Ok(())
        }
    };
    sweeper.abort();
    served.map_err(|err| ServeError::Run(err.to_string()))?;
    let name = *signal
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Ok(name.map_or(Ended::Closed, Ended::Signal))
}

/// The MCP endpoint behind the guard (Host, Origin, the bearer token, the
/// session's owner), and the health check; with the session table the
/// guard and the sweeper share.
fn router(
    clients: &Arc<Clients>,
    handler: PortcullisServer,
    options: &HttpOptions,
    services: &CancellationToken,
) -> (Router, Arc<SessionOwners>, Arc<LocalSessionManager>) {
    let lower = |names: &[String]| -> Vec<String> {
        names
            .iter()
            .map(|name| name.trim_end_matches('/').to_ascii_lowercase())
            .collect()
    };
    let allowed_hosts = lower(&options.allowed_hosts);
    let allowed_origins = lower(&options.allowed_origins);
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    let sessions = Arc::new(sessions);
    // The guard has checked Host and Origin already. rmcp checks Host again
    // with the same names; Origin is the guard's alone, because rmcp's
    // patterns cannot say "any loopback page" as the guard does.
    let mut rmcp_hosts: Vec<String> = crate::http_checks::LOOPBACK_HOSTS
        .map(str::to_owned)
        .to_vec();
    rmcp_hosts.extend(allowed_hosts.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(rmcp_hosts)
        .with_max_request_body_bytes(options.max_body)
        .with_cancellation_token(services.child_token());
    let service =
        StreamableHttpService::new(move || Ok(handler.clone()), Arc::clone(&sessions), config);
    let owners = Arc::new(SessionOwners::default());
    let guard = Arc::new(Guard {
        clients: Arc::clone(clients),
        owners: Arc::clone(&owners),
        allowed_hosts,
        allowed_origins,
        max_body: options.max_body,
    });
    let app = Router::new()
        .route_service(MCP_PATH, service)
        .route_layer(from_fn_with_state(guard, guard::guard))
        .route(HEALTH_PATH, get(|| async { "ok\n" }));
    (app, owners, sessions)
}

/// Stops every client's calls, each recording how it ended, within the
/// grace period.
async fn stop_calls(clients: &Clients) {
    let mut stopping = tokio::task::JoinSet::new();
    for keeper in clients.keepers() {
        stopping.spawn(async move { keeper.shut_down(SHUTDOWN_GRACE).await });
    }
    let mut all = true;
    while let Some(stopped) = stopping.join_next().await {
        all &= stopped.unwrap_or(false);
    }
    if !all {
        tracing::warn!("calls were still running after the grace period");
    }
}

async fn sweep_owners(owners: Arc<SessionOwners>, sessions: Arc<LocalSessionManager>) {
    let mut every = tokio::time::interval(OWNER_SWEEP);
    loop {
        every.tick().await;
        let alive = sessions.sessions.read().await;
        owners.retain(|session| alive.contains_key(session));
        tracing::debug!(sessions = owners.len(), "legacy sessions open");
    }
}
