//! What a downstream asks of portcullis's own client (elicitation,
//! sampling, roots), and the relay that decides and passes it on: shared
//! by the client that receives such a request from a 2025-era server, the
//! follow-up of a 2026 server's `input_required` answer, and the fleet
//! that holds the relay.

#![expect(
    deprecated,
    reason = "sampling and roots are deprecated from 2026-07-28 on, and servers of the 2025 era still ask for them: each ask is decided like a call"
)]

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use rmcp::model::{CreateMessageRequestParams, ElicitRequestParams, ErrorData};
use serde_json::Value;

/// A request a downstream makes of its client, relayed upstream only when
/// a policy allows it.
#[derive(Debug)]
pub enum UpstreamRequest {
    Elicitation(ElicitRequestParams),
    Sampling(CreateMessageRequestParams),
    Roots,
}

impl UpstreamRequest {
    /// The MCP method, as policies and the audit log name it.
    pub fn method(&self) -> &'static str {
        match self {
            UpstreamRequest::Elicitation(_) => "elicitation/create",
            UpstreamRequest::Sampling(_) => "sampling/createMessage",
            UpstreamRequest::Roots => "roots/list",
        }
    }
}

/// Decides, records and (if allowed) relays a downstream's request to the
/// upstream client: the MCP adapter implements it, since only it has the
/// upstream session.
pub trait UpstreamRelay: Send + Sync {
    /// `request_id` is the downstream's id of its request, for the record.
    fn relay<'a>(
        &'a self,
        request_id: String,
        server: &'a str,
        request: UpstreamRequest,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ErrorData>> + Send + 'a>>;

    /// Tells the client its tool list changed: a server's tool drifted
    /// from its pin (and is hidden now) or came back to it.
    fn tools_changed(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// The relay to the upstream client, set once the upstream session runs.
pub(super) type RelaySlot = Arc<OnceLock<Arc<dyn UpstreamRelay>>>;
