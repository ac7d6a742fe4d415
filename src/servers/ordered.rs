//! A downstream's progress in the order it was sent. rmcp hands each
//! notification to a task of its own, so two steps sent back to back can
//! reach a handler in either order, and a step sent just before a result can
//! be handled after it. A transport's `receive` is sequential: steps are
//! taken from there onto one queue that one task routes, and a call that
//! has its answer waits for the queue to pass that point, so every step the
//! downstream sent before its result reaches the caller, in order, before it.
//! The same transport notes the cancellations it sends, and hands on a task
//! made for one of them (see `late`).

use std::future::Future;
use std::time::Instant;

use rmcp::RoleClient;
use rmcp::model::{GetMeta, JsonRpcMessage, ProgressNotificationParam, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::client::Routes;
use super::late::{Cancelled, LateTasks};

/// The notification an agent reports its events with: each names the
/// request in `_meta.requestId` and holds the event in `msg`.
const AGENT_EVENT: &str = "codex/event";
/// The most of an event's text a progress message carries.
const EVENT_TEXT: usize = 200;

/// What the routing task is given, in the order the transport received it.
#[derive(Debug)]
pub(super) enum Arrival {
    Progress(ProgressNotificationParam),
    /// An agent's event, for the call with this request id (as JSON text).
    AgentEvent {
        request: String,
        message: String,
    },
    /// Answered once everything received before it has been routed.
    Mark(oneshot::Sender<()>),
}

/// The queue of one connection's arrivals.
pub(super) type Arrivals = mpsc::UnboundedSender<Arrival>;

/// A downstream transport whose progress and agent events are also put on
/// the queue as they are received. Every message still goes on to rmcp,
/// which resets a call's timeout on its progress.
pub(super) struct InOrder<T> {
    inner: T,
    arrivals: Arrivals,
    cancelled: Cancelled,
    late: LateTasks,
}

impl<T> InOrder<T> {
    pub fn new(inner: T, arrivals: Arrivals, late: LateTasks) -> Self {
        Self {
            inner,
            arrivals,
            cancelled: Cancelled::default(),
            late,
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for InOrder<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.cancelled.sent(&item, Instant::now());
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        // No await from here on: a receive dropped by rmcp's select either
        // has not taken a message or has queued and returned it.
        if let JsonRpcMessage::Notification(notification) = &message
            && let Some(arrival) = arrival(&notification.notification)
        {
            let _ = self.arrivals.send(arrival);
        }
        if let Some(task) = self.cancelled.task_in(&message, Instant::now()) {
            let _ = self.late.send(task);
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// What a notification means for a call's progress, if anything.
fn arrival(notification: &ServerNotification) -> Option<Arrival> {
    match notification {
        ServerNotification::ProgressNotification(progress) => {
            Some(Arrival::Progress(progress.params.clone()))
        }
        ServerNotification::CustomNotification(custom) if custom.method == AGENT_EVENT => {
            let request = custom.get_meta().get("requestId")?.to_string();
            Some(Arrival::AgentEvent {
                request,
                message: event_message(custom.params.as_ref()),
            })
        }
        ServerNotification::CustomNotification(custom) => {
            tracing::debug!(method = %custom.method, "a notification portcullis does not relay");
            None
        }
        _ => None,
    }
}

/// An event's type, with its text cut short when it has one.
fn event_message(params: Option<&Value>) -> String {
    let msg = params.and_then(|p| p.get("msg"));
    let kind = msg
        .and_then(|m| m.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("event");
    match msg
        .and_then(|m| m.get("message").or_else(|| m.get("delta")))
        .and_then(Value::as_str)
    {
        Some(text) => format!(
            "{kind}: {}",
            text.chars().take(EVENT_TEXT).collect::<String>()
        ),
        None => kind.to_owned(),
    }
}

/// Routes one connection's arrivals, one at a time, until its transport
/// and its connection are gone.
pub(super) async fn route(mut arrivals: mpsc::UnboundedReceiver<Arrival>, routes: Routes) {
    while let Some(arrival) = arrivals.recv().await {
        match arrival {
            Arrival::Progress(progress) => routes.lock().await.progress(progress),
            Arrival::AgentEvent { request, message } => {
                routes.lock().await.agent_event(&request, message);
            }
            Arrival::Mark(passed) => {
                let _ = passed.send(());
            }
        }
    }
}

/// Waits until everything received before now has been routed; at once
/// when the connection's queue is gone.
pub(super) async fn settle(arrivals: &Arrivals) {
    let (passed, wait) = oneshot::channel();
    if arrivals.send(Arrival::Mark(passed)).is_ok() {
        let _ = wait.await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::{NumberOrString, ProgressToken};
    use tokio::sync::Mutex;

    use super::*;
    use crate::servers::client::{ProgressRoute, RouteTable};
    use crate::tools::Progress;

    /// A transport whose received messages are the ones queued on it.
    struct Queued(mpsc::UnboundedReceiver<RxJsonRpcMessage<RoleClient>>);

    impl Transport<RoleClient> for Queued {
        type Error = std::io::Error;

        fn send(
            &mut self,
            _item: TxJsonRpcMessage<RoleClient>,
        ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
            std::future::ready(Ok(()))
        }

        fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
            self.0.recv()
        }

        async fn close(&mut self) -> Result<(), Self::Error> {
            Ok(())
        }
    }

    fn message(json: Value) -> RxJsonRpcMessage<RoleClient> {
        serde_json::from_value(json).expect("a server message")
    }

    fn progress(token: &str, done: u32, text: &str) -> RxJsonRpcMessage<RoleClient> {
        message(
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": token, "progress": done, "message": text}}),
        )
    }

    fn agent_event(request: u32, msg: Value) -> RxJsonRpcMessage<RoleClient> {
        message(
            serde_json::json!({"jsonrpc": "2.0", "method": "codex/event",
            "params": {"_meta": {"requestId": request}, "id": "0", "msg": msg}}),
        )
    }

    /// A table with one call in flight: request 7, token "t".
    fn one_call() -> (Routes, mpsc::UnboundedReceiver<Progress>) {
        let (sender, steps) = mpsc::unbounded_channel();
        let token = ProgressToken(NumberOrString::String("t".into()));
        let mut table = RouteTable::default();
        table
            .by_token
            .insert(token.clone(), ProgressRoute::new(sender));
        table.by_request.insert("7".to_owned(), token);
        (Arc::new(Mutex::new(table)), steps)
    }

    fn drained(steps: &mut mpsc::UnboundedReceiver<Progress>) -> Vec<(f64, String)> {
        std::iter::from_fn(|| steps.try_recv().ok())
            .map(|step| (step.done, step.message))
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_step_received_before_a_mark_is_routed_in_order_before_it_passes() {
        let (routes, mut steps) = one_call();
        let (queue, received) = mpsc::unbounded_channel();
        let (arrivals, routed) = mpsc::unbounded_channel();
        tokio::spawn(route(routed, routes));
        let mut transport = InOrder::new(
            Queued(received),
            arrivals.clone(),
            mpsc::unbounded_channel().0,
        );
        let sent: Vec<_> = (1..=50)
            .map(|done| progress("t", done, &format!("step {done}")))
            .collect();
        for step in sent {
            queue.send(step).expect("queued");
            assert!(transport.receive().await.is_some(), "passed on to rmcp");
        }
        settle(&arrivals).await;
        let expected: Vec<_> = (1..=50)
            .map(|done| (f64::from(done), format!("step {done}")))
            .collect();
        assert_eq!(drained(&mut steps), expected);
    }

    #[tokio::test]
    async fn agent_events_become_numbered_steps_of_the_request_they_name() {
        let (routes, mut steps) = one_call();
        let (queue, received) = mpsc::unbounded_channel();
        let (arrivals, routed) = mpsc::unbounded_channel();
        tokio::spawn(route(routed, routes));
        let mut transport = InOrder::new(
            Queued(received),
            arrivals.clone(),
            mpsc::unbounded_channel().0,
        );
        let long = "x".repeat(500);
        for event in [
            agent_event(7, serde_json::json!({"type": "task_started"})),
            agent_event(
                7,
                serde_json::json!({"type": "agent_message", "message": long}),
            ),
            agent_event(8, serde_json::json!({"type": "task_started"})),
            progress("other", 1, "not ours"),
        ] {
            queue.send(event).expect("queued");
            transport.receive().await;
        }
        settle(&arrivals).await;
        let expected = vec![
            (1.0, "task_started".to_owned()),
            (2.0, format!("agent_message: {}", "x".repeat(EVENT_TEXT))),
        ];
        assert_eq!(drained(&mut steps), expected);
    }

    #[tokio::test]
    async fn a_step_that_goes_back_is_dropped() {
        let (routes, mut steps) = one_call();
        let (arrivals, routed) = mpsc::unbounded_channel();
        tokio::spawn(route(routed, routes));
        for done in [2.0, 1.0, 3.0] {
            arrivals
                .send(Arrival::Progress(ProgressNotificationParam::new(
                    ProgressToken(NumberOrString::String("t".into())),
                    done,
                )))
                .expect("queued");
        }
        settle(&arrivals).await;
        let done: Vec<_> = drained(&mut steps).into_iter().map(|(d, _)| d).collect();
        assert_eq!(done, [2.0, 3.0]);
    }

    #[tokio::test]
    async fn settling_a_connection_that_is_gone_does_not_wait() {
        let (arrivals, routed) = mpsc::unbounded_channel();
        drop(routed);
        settle(&arrivals).await;
    }
}
