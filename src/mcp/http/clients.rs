//! Who an HTTP request comes from: its bearer token, checked against the
//! client directory as it is now (a revoked token stops working on the
//! next request), mapped to the keeper of that client.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::auth::{ClientDirectory, ClientList, OWNER_TIER, authenticate_among};
use crate::keeper::Keeper;

/// The keepers of the clients the policies were loaded with, by fingerprint.
pub type Keepers = HashMap<String, Arc<Keeper>>;

/// The clients one `serve --http` serves, each with its own keeper.
pub struct Clients {
    directory: Arc<dyn ClientDirectory>,
    /// Replaced whole when the policies are loaded again for a changed list
    /// of clients ([`Clients::admit`]).
    keepers: ArcSwap<Keepers>,
}

/// Why a request was not let in. The client is told none of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No token, a token the directory does not hold, or an owner's token.
    Unknown,
    /// A valid token of a client created (or re-tiered) since the policies
    /// were last loaded: refused until they are loaded with it.
    NotLoaded,
    /// The directory cannot say who the clients are: nobody gets in.
    DirectoryUnavailable,
}

impl Clients {
    pub fn new(
        directory: Arc<dyn ClientDirectory>,
        keepers: impl IntoIterator<Item = Arc<Keeper>>,
    ) -> Self {
        Self {
            directory,
            keepers: ArcSwap::from_pointee(by_fingerprint(keepers)),
        }
    }

    /// Every keeper serving now.
    pub fn keepers(&self) -> Vec<Arc<Keeper>> {
        self.keepers.load().values().cloned().collect()
    }

    /// The clients the directory holds now, owners left out.
    pub fn listed(&self) -> Option<ClientList> {
        let clients = self.directory.current()?;
        Some(
            clients
                .iter()
                .filter(|client| client.tier != OWNER_TIER)
                .cloned()
                .collect(),
        )
    }

    /// Serves these keepers from now on: a client's keeper that is still
    /// among them is kept (its calls in flight with it), the others replace
    /// or drop theirs.
    pub fn admit(&self, keepers: impl IntoIterator<Item = Arc<Keeper>>) {
        self.keepers.store(Arc::new(by_fingerprint(keepers)));
    }

    /// The keeper of the client whose token this is.
    pub fn authenticate(&self, token: &str) -> Result<Arc<Keeper>, Refusal> {
        let clients = self
            .directory
            .current()
            .ok_or(Refusal::DirectoryUnavailable)?;
        let client = authenticate_among(&clients, token)
            .filter(|client| client.tier != OWNER_TIER)
            .ok_or(Refusal::Unknown)?;
        match self.keepers.load().get(&client.fingerprint()) {
            Some(keeper) if keeper.client().tier == client.tier => Ok(Arc::clone(keeper)),
            _ => {
                tracing::warn!(client = %client.name, tier = %client.tier,
                    "a client created or changed since the policies were loaded is refused until they are loaded with it");
                Err(Refusal::NotLoaded)
            }
        }
    }
}

fn by_fingerprint(keepers: impl IntoIterator<Item = Arc<Keeper>>) -> Keepers {
    keepers
        .into_iter()
        .map(|keeper| (keeper.client().fingerprint.clone(), keeper))
        .collect()
}
