//! The upstream end of a downstream server's request of its client: the
//! keeper decides and records it, and only an allowed one is put to this
//! session's client. The answer, or the client's refusal, goes back down.

#![expect(
    deprecated,
    reason = "sampling and roots are deprecated from 2026-07-28 on, and servers of the 2025 era still ask for them: each ask is decided like a call"
)]

use std::pin::Pin;
use std::sync::Weak;

use rmcp::model::ErrorData;
use rmcp::service::Peer;
use rmcp::{RoleServer, ServiceError};
use serde_json::Value;

use super::watchers::ToolWatchers;
use crate::keeper::Keeper;
use crate::servers::{UpstreamRelay, UpstreamRequest, relay_refused};

/// Relays allowed requests to the client of one session. It holds the
/// keeper weakly: the keeper holds the servers, which hold this.
pub struct SessionRelay {
    pub keeper: Weak<Keeper>,
    pub peer: Peer<RoleServer>,
    /// Who is told when the tools change.
    pub watchers: ToolWatchers,
}

fn unanswered(err: impl std::fmt::Display) -> ErrorData {
    tracing::info!(error = %err, "the client did not answer a relayed request");
    ErrorData::internal_error("the client did not answer", None)
}

impl SessionRelay {
    async fn put(&self, request: UpstreamRequest) -> Result<Value, ErrorData> {
        match request {
            UpstreamRequest::Elicitation(params) => {
                answered(self.peer.create_elicitation(params).await)
            }
            UpstreamRequest::Sampling(params) => answered(self.peer.create_message(params).await),
            UpstreamRequest::Roots => answered(self.peer.list_roots().await),
        }
    }
}

/// The client's answer as JSON, to go back down.
fn answered<T: serde::Serialize>(answer: Result<T, ServiceError>) -> Result<Value, ErrorData> {
    answer
        .map_err(unanswered)
        .and_then(|a| serde_json::to_value(a).map_err(unanswered))
}

impl UpstreamRelay for SessionRelay {
    fn relay<'a>(
        &'a self,
        request_id: String,
        server: &'a str,
        request: UpstreamRequest,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ErrorData>> + Send + 'a>> {
        Box::pin(async move {
            let method = request.method();
            let Some(keeper) = self.keeper.upgrade() else {
                return Err(relay_refused(method));
            };
            match keeper.relay_allowed(&request_id, server, method).await {
                Ok(true) => self.put(request).await,
                Ok(false) | Err(_) => Err(relay_refused(method)),
            }
        })
    }

    fn tools_changed(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.watchers.tell())
    }
}

/// The relay of a server with no single session to put a downstream's
/// requests to (HTTP: many clients, none of them the downstream's): every
/// request is refused, as without a relay, and a change of the tools is
/// told to every client watching.
pub struct NoticeRelay {
    pub watchers: ToolWatchers,
}

impl UpstreamRelay for NoticeRelay {
    fn relay<'a>(
        &'a self,
        _request_id: String,
        _server: &'a str,
        request: UpstreamRequest,
    ) -> Pin<Box<dyn Future<Output = Result<Value, ErrorData>> + Send + 'a>> {
        let method = request.method();
        Box::pin(std::future::ready(Err(relay_refused(method))))
    }

    fn tools_changed(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.watchers.tell())
    }
}
