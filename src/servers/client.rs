//! portcullis as the client of one downstream server: progress of a
//! forwarded call goes back to the caller that asked for it, under the
//! caller's own token; requests the server makes of its client
//! (elicitation, sampling, roots) are decided and audited upstream, never
//! answered here.

#![expect(
    deprecated,
    reason = "sampling and roots are deprecated from 2026-07-28 on, and servers of the 2025 era still ask for them: each ask is decided like a call"
)]

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ErrorData, Implementation, ListRootsResult,
    LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};
use tokio::sync::{Mutex, mpsc};

use super::upstream::{RelaySlot, UpstreamRequest};
use crate::tools::Progress;

/// Where the progress of one forwarded call goes.
pub(super) struct ProgressRoute {
    pub sender: mpsc::UnboundedSender<Progress>,
    /// The last value relayed.
    last: Option<f64>,
}

impl ProgressRoute {
    pub fn new(sender: mpsc::UnboundedSender<Progress>) -> Self {
        Self { sender, last: None }
    }
}

/// The routes of the calls in flight, by the token portcullis gave the
/// downstream, and that token by the call's request id (an agent such as
/// Codex reports its events as `codex/event` notifications that name the
/// request, not a progress token).
#[derive(Default)]
pub(super) struct RouteTable {
    pub by_token: HashMap<ProgressToken, ProgressRoute>,
    pub by_request: HashMap<String, ProgressToken>,
}

impl RouteTable {
    /// Progress only ever increases: a step that does not is dropped
    /// rather than relayed out of order.
    pub fn progress(&mut self, progress: ProgressNotificationParam) {
        let Some(route) = self.by_token.get_mut(&progress.progress_token) else {
            return;
        };
        if route.last.is_some_and(|last| progress.progress <= last) {
            return;
        }
        route.last = Some(progress.progress);
        let _ = route.sender.send(Progress {
            done: progress.progress,
            total: progress.total,
            message: progress.message.unwrap_or_default(),
        });
    }

    /// An agent's event is the next whole step of the call it names.
    pub fn agent_event(&mut self, request: &str, message: String) {
        let Some(token) = self.by_request.get(request) else {
            return;
        };
        let Some(route) = self.by_token.get_mut(token) else {
            return;
        };
        let done = route.last.map_or(1.0, |last| last.floor() + 1.0);
        route.last = Some(done);
        let _ = route.sender.send(Progress {
            done,
            total: None,
            message,
        });
    }
}

/// Held locked while a call is sent, so a notification can never look for
/// its route before it is there.
pub(super) type Routes = Arc<Mutex<RouteTable>>;

pub(super) struct DownstreamClient {
    pub server: String,
    pub relay: RelaySlot,
    /// Told when the server says its tool list changed, so the live
    /// definitions are listed again and checked against their pins.
    pub list_changed: mpsc::UnboundedSender<()>,
}

/// The answer to a downstream whose request was not relayed.
pub fn refused(method: &str) -> ErrorData {
    ErrorData::invalid_request(
        format!("portcullis refuses {method} from this server: no policy allows it"),
        None,
    )
}

impl DownstreamClient {
    async fn relay(
        &self,
        context: &RequestContext<RoleClient>,
        request: UpstreamRequest,
    ) -> Result<serde_json::Value, ErrorData> {
        let method = request.method();
        let id = serde_json::to_string(&context.id).unwrap_or_default();
        match self.relay.get() {
            Some(relay) => relay.relay(id, &self.server, request).await,
            // No client session yet: nobody to ask, nothing to decide for.
            None => Err(refused(method)),
        }
    }
}

fn from_value<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, ErrorData> {
    serde_json::from_value(value)
        .map_err(|err| ErrorData::internal_error(format!("the client's answer: {err}"), None))
}

impl ClientHandler for DownstreamClient {
    fn get_info(&self) -> ClientConfig {
        // Elicitation and sampling are declared so that a server asks, and
        // every ask is decided; tasks, so that a 2026 server runs a long
        // call as one rather than holding the request; roots are not, so a server that takes its
        // folders from its client keeps the ones its command line gave it.
        let mut capabilities = ClientCapabilities::builder()
            .enable_elicitation()
            .enable_sampling()
            .enable_tasks()
            .build();
        capabilities.experimental = None;
        ClientConfig::new(
            capabilities,
            Implementation::new("portcullis", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::info!(server = %self.server, level = ?params.level, logger = ?params.logger, data = %params.data, "log message");
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.list_changed.send(());
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        from_value(
            self.relay(&context, UpstreamRequest::Elicitation(request))
                .await?,
        )
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        from_value(
            self.relay(&context, UpstreamRequest::Sampling(params))
                .await?,
        )
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        from_value(self.relay(&context, UpstreamRequest::Roots).await?)
    }
}
