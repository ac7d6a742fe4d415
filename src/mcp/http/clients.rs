//! Who an HTTP request comes from: its bearer token, checked against the
//! token store as it is now (a revoked token stops working on the next
//! request), mapped to the keeper of that client.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::auth::{OWNER_TIER, TokenStore};
use crate::file_stamp::FileStamp;
use crate::keeper::Keeper;

/// The clients one `serve --http` serves, each with its own keeper.
pub struct Clients {
    store_path: PathBuf,
    /// The store as last read, with the stamp of that version of the file;
    /// re-read when the file changes.
    store: Mutex<(Option<FileStamp>, Option<Arc<TokenStore>>)>,
    /// By fingerprint: the clients the policies were loaded with.
    keepers: HashMap<String, Arc<Keeper>>,
}

/// Why a request was not let in. The client is told none of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No token, a token the store does not hold, or an owner's token.
    Unknown,
    /// A valid token of a client created (or re-tiered) after `serve`
    /// started: its tier is not in the loaded policies until a restart.
    NotLoaded,
    /// The store cannot be read: nobody gets in.
    StoreUnreadable,
}

impl Clients {
    pub fn new(store_path: PathBuf, keepers: impl IntoIterator<Item = Arc<Keeper>>) -> Self {
        Self {
            store_path,
            store: Mutex::new((None, None)),
            keepers: keepers
                .into_iter()
                .map(|keeper| (keeper.client().fingerprint.clone(), keeper))
                .collect(),
        }
    }

    pub fn keepers(&self) -> impl Iterator<Item = &Arc<Keeper>> {
        self.keepers.values()
    }

    /// The keeper of the client whose token this is.
    pub fn authenticate(&self, token: &str) -> Result<Arc<Keeper>, Refusal> {
        let store = self.current_store().ok_or(Refusal::StoreUnreadable)?;
        let client = store
            .authenticate(token)
            .filter(|client| client.tier != OWNER_TIER)
            .ok_or(Refusal::Unknown)?;
        match self.keepers.get(&client.fingerprint()) {
            Some(keeper) if keeper.client().tier == client.tier => Ok(Arc::clone(keeper)),
            _ => {
                tracing::warn!(client = %client.name, tier = %client.tier,
                    "a client created or changed after serve started is refused until serve restarts");
                Err(Refusal::NotLoaded)
            }
        }
    }

    /// The store as it is now, read again only when its file changed. The
    /// lock is held for the stat, not for the hashing: requests of several
    /// clients authenticate at once.
    fn current_store(&self) -> Option<Arc<TokenStore>> {
        let mut cached = self
            .store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let stamp = FileStamp::of(&self.store_path);
        if stamp.is_none() || cached.0 != stamp {
            let store = match TokenStore::open(&self.store_path) {
                Ok(store) => Some(Arc::new(store)),
                Err(err) => {
                    tracing::error!(error = %err, "the token store cannot be read: every request is refused");
                    None
                }
            };
            *cached = (stamp, store);
        }
        cached.1.clone()
    }
}
