//! The state a fleet of replicas shares, in PostgreSQL (`--state
//! postgres://…`): the clients and approvers, the spent nonces of
//! approvals, the approval inbox's questions, answers and page sessions,
//! the replicas' audit chains, the operators' signed `policy apply`
//! records, the bridge's sessions, and the tables' shape.
//! One machine needs none of it: without `--state` the token store, the
//! log and the session store stay files.
//!
//! PostgreSQL is the arbiter of everything shared: a unique key spends a
//! nonce once whichever replica tries, a trigger tells every listening
//! replica that the clients changed. Nothing here is replicated by hand.

mod applies;
mod audit_chain;
mod clients;
mod directory;
mod export;
mod listen;
mod nonces;
mod page_sessions;
mod questions;
mod schema;
mod sessions;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use thiserror::Error;
use tokio_postgres::NoTls;

pub use audit_chain::{SharedChain, valid_chain_name};
pub use clients::ClientTable;
pub use directory::SharedDirectory;
pub use export::Exported;
pub use listen::Listening;
pub use nonces::SharedNonces;
pub use page_sessions::SharedPageSessions;
pub use questions::{SharedQuestions, follow_answers};
pub use sessions::{SharedSessions, follow_cancels};

/// The environment variable `--state` is read from.
pub const STATE_ENV: &str = "PORTCULLIS_STATE";

/// Connections one process holds open at most; a replica's work is small
/// statements, and PostgreSQL's own limit (100 by default) is shared by
/// every replica.
const POOL_SIZE: usize = 8;

/// How long a connection may take to be made and answer its start-up,
/// unless the URL's `connect_timeout` says otherwise: a database whose
/// packets vanish, or a port that accepts and never speaks, must fail a
/// replica's connection (closed, and tried again), not hold it forever.
const CONNECT_WITHIN: Duration = Duration::from_secs(10);

/// How long sent bytes may go unacknowledged before the connection is
/// dropped (TCP's own give-up is about a quarter of an hour), unless the
/// URL's `tcp_user_timeout` says otherwise. A slow answer is not cut: the
/// server's kernel acknowledges what it received.
const UNACKNOWLEDGED_WITHIN: Duration = Duration::from_secs(30);

/// A connection that was not made.
#[derive(Debug, Error)]
pub enum ConnectError {
    #[error(transparent)]
    Postgres(#[from] tokio_postgres::Error),
    #[error("no answer within {} s", .0.as_secs_f32())]
    Silent(Duration),
}

#[derive(Debug, Error)]
pub enum StateError {
    /// The text given is not repeated: it may hold a password.
    #[error("--state is not a PostgreSQL connection string: {0}")]
    BadUrl(String),
    #[error("PostgreSQL at {url} cannot be reached: {source}")]
    Unreachable {
        url: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("PostgreSQL refused a statement: {0}")]
    Statement(#[from] tokio_postgres::Error),
    #[error(
        "the shared state was made by a newer portcullis (tables version {found}, this build knows {known}): upgrade this replica"
    )]
    NewerSchema { found: i32, known: i32 },
    #[error("cannot write {path}: {message}")]
    Export { path: String, message: String },
    #[error(transparent)]
    Store(#[from] crate::auth::StoreError),
    #[error("the shared state holds what this build cannot read: {0}")]
    Corrupt(String),
}

impl StateError {
    fn unreachable(url: &StateUrl, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Unreachable {
            url: url.to_string(),
            source: Box::new(source),
        }
    }
}

/// Where the shared state is: a `postgres://` URL or a `key=value`
/// connection string. Shown without its password.
#[derive(Clone)]
pub struct StateUrl {
    config: tokio_postgres::Config,
    shown: String,
}

impl FromStr for StateUrl {
    type Err = StateError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut config = tokio_postgres::Config::from_str(text)
            .map_err(|err| StateError::BadUrl(err.to_string()))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_WITHIN);
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(UNACKNOWLEDGED_WITHIN);
        }
        let shown = shown(&config);
        Ok(Self { config, shown })
    }
}

impl StateUrl {
    /// How long making a connection may take, start-up included.
    fn connect_within(&self) -> Duration {
        self.config
            .get_connect_timeout()
            .copied()
            .unwrap_or(CONNECT_WITHIN)
    }

    /// A connection of its own, made within [`Self::connect_within`]
    /// (`tokio_postgres` bounds only the socket's connect, not the
    /// start-up a silent server never answers).
    pub(crate) async fn connect(
        &self,
    ) -> Result<
        (
            tokio_postgres::Client,
            tokio_postgres::Connection<tokio_postgres::Socket, tokio_postgres::tls::NoTlsStream>,
        ),
        ConnectError,
    > {
        let within = self.connect_within();
        tokio::time::timeout(within, self.config.connect(NoTls))
            .await
            .map_err(|_| ConnectError::Silent(within))?
            .map_err(ConnectError::from)
    }
}

impl fmt::Display for StateUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for StateUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StateUrl({})", self.shown)
    }
}

/// Where the connection goes, from the parsed settings rather than the
/// text given: a password, wherever the text put it, is never shown.
fn shown(config: &tokio_postgres::Config) -> String {
    let user = config
        .get_user()
        .map(|user| format!("{user}@"))
        .unwrap_or_default();
    let ports = config.get_ports();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(at, host)| {
            let name = match host {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            };
            match ports.get(at).or(ports.first()) {
                Some(port) => format!("{name}:{port}"),
                None => name,
            }
        })
        .collect();
    let dbname = config.get_dbname().unwrap_or("");
    format!("postgres://{user}{}/{dbname}", hosts.join(","))
}

/// The shared state, its tables made or checked: a pool of connections.
#[derive(Clone)]
pub struct SharedState {
    pool: Pool,
    url: StateUrl,
}

impl SharedState {
    /// Connects and brings the tables to this version's shape (several
    /// replicas starting at once take turns).
    pub async fn connect(url: &StateUrl) -> Result<Self, StateError> {
        let manager = Manager::from_config(
            url.config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .create_timeout(Some(url.connect_within()))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|err| StateError::unreachable(url, err))?;
        let state = Self {
            pool,
            url: url.clone(),
        };
        let mut client = state.client().await?;
        schema::migrate(&mut client).await?;
        Ok(state)
    }

    pub fn url(&self) -> &StateUrl {
        &self.url
    }

    /// A connection from the pool.
    async fn client(&self) -> Result<deadpool_postgres::Client, StateError> {
        self.pool
            .get()
            .await
            .map_err(|err| StateError::unreachable(&self.url, err))
    }

    /// A connection of its own, outside the pool, for `LISTEN`: the
    /// notifications come on the connection's own stream.
    async fn dedicated(
        &self,
    ) -> Result<
        (
            tokio_postgres::Client,
            tokio_postgres::Connection<tokio_postgres::Socket, tokio_postgres::tls::NoTlsStream>,
        ),
        StateError,
    > {
        self.url
            .connect()
            .await
            .map_err(|err| StateError::unreachable(&self.url, err))
    }
}

/// `time` as milliseconds since the epoch, the tables' time column.
fn millis(time: std::time::SystemTime) -> i64 {
    time.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use super::*;

    #[test]
    fn passwords_are_never_shown() {
        for (given, shown) in [
            (
                "postgres://app:s3cret@db.example:5432/portcullis",
                "postgres://app@db.example:5432/portcullis",
            ),
            (
                "postgresql://app@db/portcullis?password=s3cret&sslmode=disable",
                "postgres://app@db:5432/portcullis",
            ),
            (
                "host=/run/pg user=app password='s3 cret' dbname=p port=5433",
                "postgres://app@/run/pg:5433/p",
            ),
        ] {
            let url: StateUrl = given.parse().unwrap();
            assert_eq!(url.to_string(), shown);
            assert!(!format!("{url:?}").contains("s3"));
        }
    }

    #[test]
    fn a_string_that_is_no_connection_string_is_refused_without_its_password() {
        for bad in [
            "postgres://app:s3cret@db:notaport/p",
            "password=s3cret nonsense",
        ] {
            let err = bad.parse::<StateUrl>().err().unwrap();
            assert!(matches!(err, StateError::BadUrl(..)));
            assert!(!err.to_string().contains("s3cret"), "{err}");
        }
    }

    #[test]
    fn a_connection_is_bounded_unless_the_url_bounds_it_itself() {
        let plain: StateUrl = "postgres://app@db/p".parse().unwrap();
        assert_eq!(plain.config.get_connect_timeout(), Some(&CONNECT_WITHIN));
        assert_eq!(
            plain.config.get_tcp_user_timeout(),
            Some(&UNACKNOWLEDGED_WITHIN)
        );
        for given in [
            "postgres://app@db/p?connect_timeout=3&tcp_user_timeout=4",
            "host=db user=app dbname=p connect_timeout=3 tcp_user_timeout=4",
        ] {
            let url: StateUrl = given.parse().unwrap();
            assert_eq!(url.connect_within(), Duration::from_secs(3), "{given}");
            assert_eq!(
                url.config.get_tcp_user_timeout(),
                Some(&Duration::from_secs(4)),
                "{given}"
            );
        }
    }

    /// A port that takes the connection and never answers its start-up
    /// (a wedged server, a proxy with nothing behind it) fails it.
    #[tokio::test]
    async fn a_server_that_never_answers_fails_the_connection() {
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let url: StateUrl = format!("postgres://app:s3cret@127.0.0.1:{port}/p?connect_timeout=1")
            .parse()
            .unwrap();
        let err = url.connect().await.err().unwrap();
        assert!(matches!(err, ConnectError::Silent(within) if within == Duration::from_secs(1)));
        let err = SharedState::connect(&url).await.err().unwrap();
        assert!(matches!(err, StateError::Unreachable { .. }), "{err}");
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }
}
