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
use std::sync::{Arc, OnceLock};

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    CustomNotification, ElicitRequestParams, ElicitResult, ErrorData, GetMeta, Implementation,
    ListRootsResult, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, RoleClient};
use serde_json::Value;
use tokio::sync::{Mutex, mpsc};

use super::fleet::{UpstreamRelay, UpstreamRequest};
use crate::tools::Progress;

/// Where the progress of one forwarded call goes.
pub(super) struct ProgressRoute {
    pub sender: mpsc::UnboundedSender<Progress>,
    /// The last value relayed: notifications are handled on separate tasks,
    /// and progress only ever increases, so one that does not is late and
    /// dropped rather than relayed out of order.
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

/// Held locked while a call is sent, so a notification can never look for
/// its route before it is there.
pub(super) type Routes = Arc<Mutex<RouteTable>>;

/// The notification an agent reports its events with: each names the
/// request in `_meta.requestId` and holds the event in `msg`.
const AGENT_EVENT: &str = "codex/event";
/// The most of an event's text a progress message carries.
const EVENT_TEXT: usize = 200;

/// The relay to the upstream client, set once the upstream session runs.
pub(super) type RelaySlot = Arc<OnceLock<Arc<dyn UpstreamRelay>>>;

pub(super) struct DownstreamClient {
    pub server: String,
    pub routes: Routes,
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
        // every ask is decided; roots are not, so a server that takes its
        // folders from its client keeps the ones its command line gave it.
        let mut capabilities = ClientCapabilities::builder()
            .enable_elicitation()
            .enable_sampling()
            .build();
        capabilities.experimental = None;
        ClientConfig::new(
            capabilities,
            Implementation::new("portcullis", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let mut routes = self.routes.lock().await;
        let Some(route) = routes.by_token.get_mut(&params.progress_token) else {
            return;
        };
        if route.last.is_some_and(|last| params.progress <= last) {
            return;
        }
        route.last = Some(params.progress);
        let _ = route.sender.send(Progress {
            done: params.progress,
            total: params.total,
            message: params.message.unwrap_or_default(),
        });
    }

    /// An agent's event becomes a progress step of the call it names: the
    /// count of events so far, and the event's type (with its text, cut
    /// short, when it has one).
    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method != AGENT_EVENT {
            tracing::debug!(server = %self.server, method = %notification.method, "a notification portcullis does not relay");
            return;
        }
        let Some(request) = notification
            .get_meta()
            .get("requestId")
            .map(Value::to_string)
        else {
            return;
        };
        let msg = notification.params.as_ref().and_then(|p| p.get("msg"));
        let kind = msg
            .and_then(|m| m.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("event");
        let message = match msg
            .and_then(|m| m.get("message").or_else(|| m.get("delta")))
            .and_then(Value::as_str)
        {
            Some(text) => format!(
                "{kind}: {}",
                text.chars().take(EVENT_TEXT).collect::<String>()
            ),
            None => kind.to_owned(),
        };
        let mut routes = self.routes.lock().await;
        let Some(token) = routes.by_request.get(&request).cloned() else {
            return;
        };
        let Some(route) = routes.by_token.get_mut(&token) else {
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
