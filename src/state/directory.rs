//! The fleet's clients and approvers as one replica knows them: read whole at start and
//! again whenever the table's trigger says it changed (`LISTEN`), so a
//! revocation reaches every replica in the time a notification takes.
//!
//! It fails closed: while the notifications cannot reach this replica
//! (PostgreSQL restarting, the network cut), the list it holds is trusted
//! only for [`TRUSTED_WITHOUT_LISTENING`] after it was last read; past
//! that, every request is refused until the table is read again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;

use super::listen::listen;
use super::{ClientTable, SharedState, StateError};
use crate::auth::{ApproverDirectory, ApproverList, ClientDirectory, ClientList};

/// The channel the clients table's trigger notifies.
const CHANNEL: &str = "portcullis_clients";

/// How long a list read while no notification could arrive is trusted: a
/// revocation made meanwhile is missed for at most this long.
const TRUSTED_WITHOUT_LISTENING: Duration = Duration::from_secs(1);

/// How often a replica that lost its notifications reads the table again
/// and tries to listen.
const RETRY: Duration = Duration::from_millis(250);

pub struct SharedDirectory {
    clients: ArcSwapOption<Read>,
    listening: AtomicBool,
}

/// The lists, and when they were read.
struct Read {
    clients: ClientList,
    approvers: ApproverList,
    at: Instant,
}

impl SharedDirectory {
    /// The lists as last read, while they can be trusted.
    fn fresh(&self) -> Option<Arc<Read>> {
        let read = self.clients.load_full()?;
        let fresh = self.listening.load(Ordering::Acquire)
            || read.at.elapsed() <= TRUSTED_WITHOUT_LISTENING;
        fresh.then_some(read)
    }
}

impl ClientDirectory for SharedDirectory {
    fn current(&self) -> Option<ClientList> {
        self.fresh().map(|read| read.clients.clone())
    }
}

impl ApproverDirectory for SharedDirectory {
    fn approvers(&self) -> Option<ApproverList> {
        self.fresh().map(|read| read.approvers.clone())
    }
}

impl SharedDirectory {
    /// Reads the clients and follows the table's changes from now on, on
    /// the current runtime. Fails if the table cannot be read now.
    pub async fn follow(state: SharedState) -> Result<Arc<Self>, StateError> {
        let directory = Arc::new(Self {
            clients: ArcSwapOption::empty(),
            listening: AtomicBool::new(false),
        });
        directory.read(&state).await?;
        tokio::spawn(Arc::clone(&directory).listen(state));
        Ok(directory)
    }

    async fn read(&self, state: &SharedState) -> Result<(), StateError> {
        let table = ClientTable::of(state);
        let clients = table.list().await?;
        let approvers = table.approvers().await?;
        self.clients.store(Some(Arc::new(Read {
            clients: clients.into(),
            approvers: approvers.into(),
            at: Instant::now(),
        })));
        Ok(())
    }

    /// Listens for changes until the process ends, reconnecting whenever
    /// the connection is lost.
    async fn listen(self: Arc<Self>, state: SharedState) {
        loop {
            match self.listen_once(&state).await {
                Ok(()) => tracing::warn!("the clients' notifications stopped: reconnecting"),
                Err(err) => {
                    tracing::warn!(error = %err, "the clients' notifications cannot be heard: reading the table until they can");
                }
            }
            self.listening.store(false, Ordering::Release);
            tokio::time::sleep(RETRY).await;
            if let Err(err) = self.read(&state).await {
                tracing::debug!(error = %err, "the clients cannot be read");
            }
        }
    }

    /// One connection's worth of listening: `LISTEN` first, then a read,
    /// so no change falls between the two.
    async fn listen_once(&self, state: &SharedState) -> Result<(), StateError> {
        let mut listening = listen(state, CHANNEL).await?;
        let listened = async {
            self.read(state).await?;
            self.listening.store(true, Ordering::Release);
            while listening.heard.recv().await.is_some() {
                // Several changes heard at once are one read.
                while listening.heard.try_recv().is_ok() {}
                self.read(state).await?;
            }
            Ok(())
        }
        .await;
        self.listening.store(false, Ordering::Release);
        listened
    }
}
