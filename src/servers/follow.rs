//! What follows a 2026-07-28 server's first answer to a forwarded call
//! when that answer is not the result: the input it asks for (each ask
//! relayed upstream, where it is decided and recorded like the ask of a
//! 2025 server) and the task it runs the call as (polled until it ends,
//! cancelled when the caller stops). The decision was made before the
//! call was sent; nothing here decides anything.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, GetTaskParams,
    InputRequest, InputRequests, InputResponses, Task, TaskPayload, UpdateTaskParams,
};
use rmcp::service::Peer;
use rmcp::{RoleClient, ServiceError};
use serde_json::Value;
use tokio::time::Instant;

use super::upstream::{RelaySlot, UpstreamRequest};

/// How many times one call may ask for input before it is given up: a
/// server that keeps asking would otherwise hold the caller forever.
const MAX_INPUT_ROUNDS: usize = 8;

/// The bounds on how often a task is polled, whatever its server asks.
const POLL_FASTEST: Duration = Duration::from_millis(50);
const POLL_SLOWEST: Duration = Duration::from_secs(5);
const POLL_DEFAULT: Duration = Duration::from_millis(500);

/// How a call that did not answer at once ended.
#[derive(Debug)]
pub(super) enum Followed {
    Result(CallToolResult),
    /// The server went away.
    Unavailable,
    /// Nothing changed within the server's timeout.
    TimedOut,
    /// The caller stopped it; the server was told.
    Cancelled,
    /// The server failed it, or answered something portcullis cannot
    /// pass on; the reason is for the log.
    Failed(String),
}

/// One call's follow-up on one server.
pub(super) struct FollowUp<'a> {
    pub server: &'a str,
    pub peer: &'a Peer<RoleClient>,
    pub relay: &'a RelaySlot,
    /// How long the call may go without a change before it is given up.
    pub timeout: Duration,
    /// When the call is given up whatever it reports.
    pub deadline: Instant,
}

impl FollowUp<'_> {
    /// Follows `answer`, the server's answer to `params`, until the call
    /// has a result or ends otherwise.
    pub async fn follow(
        &self,
        mut answer: CallToolResponse,
        mut params: CallToolRequestParams,
        mut stop: Pin<&mut impl Future<Output = ()>>,
    ) -> Followed {
        let mut rounds = 0;
        loop {
            match answer {
                CallToolResponse::Complete(result) => return Followed::Result(result),
                CallToolResponse::Task(created) => return self.poll(created.task, stop).await,
                CallToolResponse::InputRequired(asked) => {
                    rounds += 1;
                    if rounds > MAX_INPUT_ROUNDS {
                        return Followed::Failed(format!(
                            "asked for input more than {MAX_INPUT_ROUNDS} times"
                        ));
                    }
                    let responses =
                        match self.answer(asked.input_requests.unwrap_or_default()).await {
                            Ok(responses) => responses,
                            Err(ended) => return ended,
                        };
                    params.input_responses = Some(responses);
                    params.request_state = asked.request_state;
                    let by = self.deadline.min(Instant::now() + self.timeout);
                    let sent =
                        tokio::time::timeout_at(by, self.peer.call_tool_once(params.clone()));
                    answer = tokio::select! {
                        sent = sent => match sent {
                            Ok(Ok(answer)) => answer,
                            Ok(Err(err)) => return failed(err),
                            Err(_) => return Followed::TimedOut,
                        },
                        () = &mut stop => return Followed::Cancelled,
                    };
                }
                _ => {
                    return Followed::Failed("an answer of a kind portcullis does not know".into());
                }
            }
        }
    }

    /// Polls `task` until it ends; a caller that stops cancels it.
    async fn poll(&self, task: Task, mut stop: Pin<&mut impl Future<Output = ()>>) -> Followed {
        let id = task.task_id.clone();
        let every = task
            .poll_interval_ms
            .map_or(POLL_DEFAULT, Duration::from_millis)
            .clamp(POLL_FASTEST, POLL_SLOWEST);
        let mut seen = (task.status, task.status_message);
        let mut changed = Instant::now();
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = &mut stop => {
                    self.cancel(&id).await;
                    return Followed::Cancelled;
                }
            }
            let got = tokio::select! {
                got = self.peer.get_task(GetTaskParams::new(id.clone())) => got,
                () = &mut stop => {
                    self.cancel(&id).await;
                    return Followed::Cancelled;
                }
            };
            let got = match got {
                Ok(got) => got.task,
                Err(err) => return failed(err),
            };
            let now = (got.task.status, got.task.status_message.clone());
            if now != seen {
                seen = now;
                changed = Instant::now();
            }
            if Instant::now() >= self.deadline {
                self.cancel(&id).await;
                return Followed::TimedOut;
            }
            match got.payload {
                TaskPayload::Completed { result } => {
                    return match serde_json::from_value(Value::Object(result)) {
                        Ok(result) => Followed::Result(result),
                        Err(err) => Followed::Failed(format!("its task's result: {err}")),
                    };
                }
                TaskPayload::Failed { error } => {
                    return Followed::Failed(format!("its task failed: {}", Value::Object(error)));
                }
                TaskPayload::Cancelled => {
                    return Followed::Failed("it cancelled the task itself".into());
                }
                TaskPayload::InputRequired { input_requests } => {
                    let responses = match self.answer(input_requests).await {
                        Ok(responses) => responses,
                        Err(ended) => {
                            self.cancel(&id).await;
                            return ended;
                        }
                    };
                    let update = UpdateTaskParams::new(id.clone(), responses);
                    if let Err(err) = self.peer.update_task(update).await {
                        return failed(err);
                    }
                    changed = Instant::now();
                }
                _ => {
                    if changed.elapsed() > self.timeout {
                        self.cancel(&id).await;
                        return Followed::TimedOut;
                    }
                }
            }
        }
    }

    /// Tells the server to stop `task`; it may not, and its result is not
    /// waited for.
    async fn cancel(&self, task: &str) {
        if let Err(err) = self
            .peer
            .cancel_task(CancelTaskParams::new(task.to_owned()))
            .await
        {
            tracing::debug!(server = self.server, task, error = %err, "the task could not be cancelled");
        }
    }

    /// Relays each ask upstream (decided there, like a 2025 server's
    /// request). A refused elicitation is declined, as a person would; a
    /// refused sampling or roots ask has no such answer and ends the call.
    async fn answer(&self, asks: InputRequests) -> Result<InputResponses, Followed> {
        let mut responses = InputResponses::new();
        for (key, ask) in asks {
            let request = match ask {
                InputRequest::Elicitation(request) => UpstreamRequest::Elicitation(request.params),
                InputRequest::CreateMessage(request) => UpstreamRequest::Sampling(request.params),
                InputRequest::ListRoots(_) => UpstreamRequest::Roots,
                _ => {
                    return Err(Followed::Failed(format!(
                        "input `{key}` of a kind portcullis does not know"
                    )));
                }
            };
            let method = request.method();
            let elicitation = matches!(request, UpstreamRequest::Elicitation(_));
            let answered = match self.relay.get() {
                Some(relay) => {
                    relay
                        .relay(format!("input:{key}"), self.server, request)
                        .await
                }
                None => Err(super::client::refused(method)),
            };
            let response = match answered {
                Ok(response) => response,
                Err(_) if elicitation => serde_json::json!({"action": "decline"}),
                Err(err) => return Err(Followed::Failed(format!("{method}: {}", err.message))),
            };
            responses.insert(key, response);
        }
        Ok(responses)
    }
}

fn failed(err: ServiceError) -> Followed {
    match err {
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => Followed::Unavailable,
        ServiceError::Timeout { .. } => Followed::TimedOut,
        other => Followed::Failed(other.to_string()),
    }
}
