//! The keepers `serve` makes: one per client, sharing the policies, the
//! tools and the log; and, for `serve --http`, what it takes to make more
//! while it runs (`admission.rs` follows the clients with it).

use std::sync::Arc;

use crate::approval::{AskingClient, KeeperFor};
use crate::audit::AuditLog;
use crate::auth::StoredClient;
use crate::bridge::Bridge;
use crate::facts::Transport;
use crate::keeper::{AuditSink, ClientIdentity, Keeper, Limits, Setting};
use crate::mcp::http::Clients;
use crate::servers::Fleet;

/// Makes the keeper of a client, sharing the policies, tools and log.
#[derive(Clone)]
pub(super) struct KeeperMaker {
    pub settings: Arc<arc_swap::ArcSwap<Setting>>,
    pub audit: Arc<AuditLog>,
    pub session: String,
    pub limits: Limits,
    pub fleet: Option<Arc<Fleet>>,
    pub bridge: Option<Arc<Bridge>>,
    pub transport: Transport,
}

impl KeeperMaker {
    pub fn keeper(&self, client: StoredClient) -> Arc<Keeper> {
        self.keeper_of(ClientIdentity::from(client))
    }

    fn keeper_of(&self, client: ClientIdentity) -> Arc<Keeper> {
        let keeper = Keeper::sharing(
            Arc::clone(&self.settings),
            client,
            self.transport,
            Arc::clone(&self.audit) as Arc<dyn AuditSink>,
            self.session.clone(),
        )
        .with_limits(self.limits);
        let keeper = match &self.fleet {
            Some(fleet) => keeper.with_fleet(Arc::clone(fleet)),
            None => keeper,
        };
        Arc::new(match &self.bridge {
            Some(bridge) => keeper.with_bridge(Arc::clone(bridge)),
            None => keeper,
        })
    }
}

/// In a fleet, a question another replica asked is answered through a
/// keeper of the asking client here.
impl KeeperFor for KeeperMaker {
    fn keeper_for(&self, client: &AskingClient) -> Arc<Keeper> {
        self.keeper_of(ClientIdentity {
            name: client.name.clone(),
            tier: client.tier.clone(),
            fingerprint: client.fingerprint.clone(),
        })
    }
}

/// The clients `serve --http` serves, and what it takes to serve more.
pub(super) struct Admission {
    pub clients: Arc<Clients>,
    pub maker: KeeperMaker,
    /// The clients as last admitted.
    pub served: Vec<StoredClient>,
}
