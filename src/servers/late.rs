//! Tasks a server made for calls portcullis had already given up on.
//!
//! A call is given up on (its caller cancelled it, it ran past its longest
//! duration, its agent failed) by sending `notifications/cancelled`. A
//! server that answered with a task just before that notice reached it
//! takes the notice as too late and keeps the task running; rmcp, which
//! forgets a request once its cancellation is sent, drops the answer. The
//! transport sees both: the cancellations it sends and the answers it
//! receives. An answer to a cancelled request that holds a task is handed
//! on here, and the task is cancelled with `tasks/cancel`, so nothing runs
//! on that no one follows.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rmcp::RoleClient;
use rmcp::model::{CancelTaskParams, ClientNotification, JsonRpcMessage, RequestId, ServerResult};
use rmcp::service::{Peer, RxJsonRpcMessage, TxJsonRpcMessage};
use tokio::sync::mpsc;

/// How long after its cancellation a late answer is still looked for. A
/// server that takes longer than this to send an answer it had made has
/// stopped answering anything in time.
const LATE_ANSWER: Duration = Duration::from_secs(30);

/// The most cancelled requests remembered at once: a server that honours
/// cancellations never answers them, so they only leave by age, and a
/// burst of cancellations must not grow without bound.
const REMEMBERED: usize = 256;

/// The ids of a task made too late, for the connection's canceller.
pub(super) type LateTasks = mpsc::UnboundedSender<String>;

/// The requests of one connection cancelled lately, oldest first.
#[derive(Debug, Default)]
pub(super) struct Cancelled {
    requests: VecDeque<(RequestId, Instant)>,
}

impl Cancelled {
    /// Notes a cancellation portcullis is sending.
    pub fn sent(&mut self, message: &TxJsonRpcMessage<RoleClient>, now: Instant) {
        let JsonRpcMessage::Notification(notification) = message else {
            return;
        };
        let ClientNotification::CancelledNotification(cancelled) = &notification.notification
        else {
            return;
        };
        let Some(request) = &cancelled.params.request_id else {
            return;
        };
        self.forget_before(now);
        if self.requests.len() == REMEMBERED {
            self.requests.pop_front();
        }
        self.requests.push_back((request.clone(), now));
    }

    /// The task in an answer to a request cancelled lately, if it holds
    /// one. Any answer to such a request, task or not, ends the wait for it.
    pub fn task_in(
        &mut self,
        message: &RxJsonRpcMessage<RoleClient>,
        now: Instant,
    ) -> Option<String> {
        if self.requests.is_empty() {
            return None;
        }
        let (id, task) = match message {
            JsonRpcMessage::Response(response) => {
                let task = match &response.result {
                    ServerResult::CreateTaskResult(created) => Some(created.task.task_id.clone()),
                    _ => None,
                };
                (&response.id, task)
            }
            JsonRpcMessage::Error(error) => (error.id.as_ref()?, None),
            _ => return None,
        };
        self.forget_before(now);
        let position = self
            .requests
            .iter()
            .position(|(request, _)| request == id)?;
        self.requests.remove(position);
        task
    }

    fn forget_before(&mut self, now: Instant) {
        while self
            .requests
            .front()
            .is_some_and(|(_, at)| now.saturating_duration_since(*at) > LATE_ANSWER)
        {
            self.requests.pop_front();
        }
    }
}

/// Cancels each task made too late on `peer`, until the connection's
/// transport is gone. One at a time, each given as long as any request to
/// the server (`timeout`): a server that never acknowledges one holds the
/// next back no longer than that.
pub(super) async fn cancel_late_tasks(
    mut late: mpsc::UnboundedReceiver<String>,
    peer: Peer<RoleClient>,
    server: String,
    timeout: Duration,
) {
    while let Some(task) = late.recv().await {
        tracing::info!(
            server,
            task,
            "cancelling a task made for a call given up on"
        );
        let cancelling = peer.cancel_task(CancelTaskParams::new(task.clone()));
        match tokio::time::timeout(timeout, cancelling).await {
            Ok(Ok(_)) => {}
            Ok(Err(err)) => {
                tracing::warn!(server, task, error = %err, "a task made for a call given up on could not be cancelled");
            }
            Err(_) => {
                tracing::warn!(
                    server,
                    task,
                    "the server did not acknowledge the cancellation of a task made for a call given up on"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn sent(json: Value) -> TxJsonRpcMessage<RoleClient> {
        serde_json::from_value(json).expect("a client message")
    }

    fn received(json: Value) -> RxJsonRpcMessage<RoleClient> {
        serde_json::from_value(json).expect("a server message")
    }

    fn cancelling(id: u32) -> TxJsonRpcMessage<RoleClient> {
        sent(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "cancelled by the caller"}}),
        )
    }

    fn task_answer(id: u32, task: &str) -> RxJsonRpcMessage<RoleClient> {
        received(json!({"jsonrpc": "2.0", "id": id, "result": {
            "resultType": "task", "taskId": task, "status": "working",
            "createdAt": "2026-12-06T00:00:00Z", "lastUpdatedAt": "2026-12-06T00:00:00Z",
            "ttlMs": 60000, "pollIntervalMs": 50}}))
    }

    #[test]
    fn a_task_answering_a_cancelled_request_is_handed_on_once() {
        let now = Instant::now();
        let mut cancelled = Cancelled::default();
        cancelled.sent(&cancelling(7), now);
        assert_eq!(
            cancelled.task_in(&task_answer(7, "t-1"), now).as_deref(),
            Some("t-1")
        );
        assert_eq!(cancelled.task_in(&task_answer(7, "t-1"), now), None);
    }

    #[test]
    fn a_task_answering_a_request_never_cancelled_is_left_to_its_caller() {
        let now = Instant::now();
        let mut cancelled = Cancelled::default();
        cancelled.sent(&cancelling(7), now);
        assert_eq!(cancelled.task_in(&task_answer(8, "t-2"), now), None);
        assert_eq!(
            cancelled.task_in(&task_answer(7, "t-1"), now).as_deref(),
            Some("t-1")
        );
    }

    #[test]
    fn any_other_answer_to_a_cancelled_request_ends_the_wait_for_it() {
        let now = Instant::now();
        let mut cancelled = Cancelled::default();
        cancelled.sent(&cancelling(7), now);
        cancelled.sent(&cancelling(9), now);
        let plain = received(json!({"jsonrpc": "2.0", "id": 7,
            "result": {"content": [{"type": "text", "text": "done"}]}}));
        assert_eq!(cancelled.task_in(&plain, now), None);
        let error = received(json!({"jsonrpc": "2.0", "id": 9,
            "error": {"code": -32603, "message": "stopped"}}));
        assert_eq!(cancelled.task_in(&error, now), None);
        assert!(cancelled.requests.is_empty());
    }

    #[test]
    fn a_cancellation_is_forgotten_after_the_late_answers_wait() {
        let then = Instant::now();
        let mut cancelled = Cancelled::default();
        cancelled.sent(&cancelling(7), then);
        let later = then + LATE_ANSWER + Duration::from_millis(1);
        assert_eq!(cancelled.task_in(&task_answer(7, "t-1"), later), None);
        assert!(cancelled.requests.is_empty());
    }

    #[test]
    fn only_the_latest_cancellations_are_remembered() {
        let now = Instant::now();
        let mut cancelled = Cancelled::default();
        for id in 0..=REMEMBERED as u32 {
            cancelled.sent(&cancelling(id), now);
        }
        assert_eq!(cancelled.requests.len(), REMEMBERED);
        assert_eq!(cancelled.task_in(&task_answer(0, "t-0"), now), None);
        let last = REMEMBERED as u32;
        assert_eq!(
            cancelled.task_in(&task_answer(last, "t-n"), now).as_deref(),
            Some("t-n")
        );
    }

    #[test]
    fn other_notifications_are_not_cancellations() {
        let now = Instant::now();
        let mut cancelled = Cancelled::default();
        cancelled.sent(
            &sent(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            now,
        );
        assert!(cancelled.requests.is_empty());
    }
}
