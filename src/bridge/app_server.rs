//! The bridge's side of Codex's app-server protocol (`codex app-server`):
//! JSON-RPC without the `jsonrpc` member, one message per line over the
//! agent's stdio, a conversation a thread and a prompt a turn.
//!
//! The agent is started confined, as the fleet starts a stdio server, when
//! the first turn needs it and again after it went away; a thread it no
//! longer holds is resumed by id. A turn is `turn/start`, then the
//! notifications of its thread until `turn/completed`; its reply is the
//! last agent message. A cancelled or overdue turn is interrupted
//! (`turn/interrupt`) and waited for, briefly.
//!
//! What it may not do: approve anything for the agent. The agent's own
//! requests for approval (a command, a file change, more permissions, an
//! MCP elicitation, a question for the user) are declined, and any other
//! request is refused: the agent does what the `sandbox` and
//! `approvalPolicy` the team fixed in `start_arguments` let it do, and
//! nothing more on portcullis's word.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value, json};
use thiserror::Error;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::servers::{
    Bounded, ConnectError, Forwarded, MAX_FRAME_BYTES, ServerConfig, StderrTail, start_stdio,
    stop_child,
};
use crate::tools::Progress;

/// How long an interrupted turn gets to say it ended.
const INTERRUPT_WAIT: Duration = Duration::from_secs(5);

/// The method of the note the reader gives a turn when it declined one of
/// its thread's requests: not the protocol's, never sent to the agent.
const DECLINED: &str = "portcullis/declined";

#[derive(Debug, Error)]
enum LinkError {
    #[error("the agent did not start: {0}")]
    Start(#[from] ConnectError),
    #[error("the agent's root is not usable: {0}")]
    Root(String),
    #[error("the agent refused `{method}`: {message}")]
    Refused { method: String, message: String },
    #[error("the agent's answer to `{0}` has no {1}")]
    Malformed(&'static str, &'static str),
    #[error("the agent did not answer `{0}` in time")]
    TimedOut(String),
    #[error("the agent went away")]
    Gone,
}

/// One agent speaking the app-server protocol, started when needed.
pub struct AppServerAgent {
    server: ServerConfig,
    /// Where it runs and what its threads' `cwd` is: the server's root.
    folder: Result<PathBuf, String>,
    start_parameters: Map<String, Value>,
    stderr: StderrTail,
    running: tokio::sync::Mutex<Option<Arc<Running>>>,
}

/// A started agent process and the conversation with it.
struct Running {
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    child: tokio::sync::Mutex<Child>,
    next_id: AtomicU64,
    /// Requests waiting for their answer, by id.
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, String>>>>,
    /// The turns in flight, by thread id: where that thread's
    /// notifications go.
    turns: Mutex<HashMap<String, mpsc::UnboundedSender<Value>>>,
    /// The threads this process holds (started or resumed here).
    loaded: Mutex<HashSet<String>>,
    /// Cancelled when the agent's stdout ends.
    gone: CancellationToken,
}

/// How a turn's notifications end it.
enum Step {
    Going,
    Ended(Forwarded),
}

/// What a turn has seen so far.
#[derive(Default)]
struct TurnSoFar {
    reply: Option<String>,
    error: Option<String>,
    reports: u32,
}

impl AppServerAgent {
    /// The agent `server` (its mapping's `start_arguments` become
    /// `thread/start`'s parameters), run in `folder`.
    pub fn new(server: ServerConfig, folder: Result<PathBuf, String>) -> Self {
        let start_parameters = server
            .agent
            .as_ref()
            .map(|agent| agent.start_arguments.clone())
            .unwrap_or_default();
        Self {
            server,
            folder,
            start_parameters,
            stderr: StderrTail::default(),
            running: tokio::sync::Mutex::new(None),
        }
    }

    /// Whether the agent's own failure text reaches the caller
    /// (`pass_errors`).
    pub fn passes_errors(&self) -> bool {
        self.server.pass_errors
    }

    /// What the agent last wrote on stderr, across restarts.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lines()
    }

    /// One turn of the conversation `thread` (a new one when `None`). The
    /// result is shaped as an MCP tool result: the reply as text content,
    /// `{threadId, reply}` as structured content.
    pub async fn turn(
        &self,
        thread: Option<&str>,
        prompt: &str,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        stop: impl Future<Output = ()>,
    ) -> Forwarded {
        let running = match self.running().await {
            Ok(running) => running,
            Err(err) => {
                tracing::warn!(server = %self.server.name, error = %err, "the agent is unavailable");
                return Forwarded::Unavailable;
            }
        };
        let opened = self.open_thread(&running, thread).await;
        let thread = match opened {
            Ok(thread) => thread,
            Err(err) => return self.failed(&running, &err),
        };
        let (sender, events) = mpsc::unbounded_channel();
        let _listening = Listening::new(&running, &thread, sender);
        let input = json!([{"type": "text", "text": prompt, "text_elements": []}]);
        let started = running
            .request(
                "turn/start",
                json!({"threadId": thread, "input": input}),
                self.server.timeout,
            )
            .await
            .and_then(|answer| {
                answer
                    .pointer("/turn/id")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or(LinkError::Malformed("turn/start", "turn id"))
            });
        let turn = match started {
            Ok(turn) => turn,
            Err(err) => return self.failed(&running, &err),
        };
        self.follow(&running, &thread, &turn, events, progress, stop)
            .await
    }

    /// Stops the agent, if it runs: its stdin closed, then its guard
    /// ended.
    pub async fn shut_down(&self) {
        let Some(running) = self.running.lock().await.take() else {
            return;
        };
        running.stdin.lock().await.take();
        if let Err(err) = stop_child(&mut *running.child.lock().await).await {
            tracing::warn!(server = %self.server.name, error = %err, "the agent did not stop");
        }
    }

    /// The running agent, started (and initialized) when it is not.
    async fn running(&self) -> Result<Arc<Running>, LinkError> {
        let mut slot = self.running.lock().await;
        if let Some(running) = slot.as_ref()
            && !running.gone.is_cancelled()
        {
            return Ok(Arc::clone(running));
        }
        let folder = self.folder.clone().map_err(LinkError::Root)?;
        let mut child = start_stdio(&self.server, &folder, &self.stderr)?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(LinkError::Gone);
        };
        let running = Arc::new(Running {
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            child: tokio::sync::Mutex::new(child),
            next_id: AtomicU64::new(0),
            pending: Mutex::default(),
            turns: Mutex::default(),
            loaded: Mutex::default(),
            gone: CancellationToken::new(),
        });
        tokio::spawn(Arc::clone(&running).read(stdout, self.server.name.clone()));
        let client = json!({"clientInfo": {
            "name": "portcullis",
            "title": "portcullis agent bridge",
            "version": env!("CARGO_PKG_VERSION"),
        }});
        let initialized = match running
            .request("initialize", client, self.server.start_timeout)
            .await
        {
            Ok(_) => running.notify("initialized").await,
            Err(err) => Err(err),
        };
        if let Err(err) = initialized {
            running.stdin.lock().await.take();
            let _ = stop_child(&mut *running.child.lock().await).await;
            return Err(err);
        }
        *slot = Some(Arc::clone(&running));
        Ok(running)
    }

    /// The thread a turn runs in: a new one with the team's parameters, or
    /// `thread` resumed when this process does not hold it.
    async fn open_thread(
        &self,
        running: &Running,
        thread: Option<&str>,
    ) -> Result<String, LinkError> {
        let timeout = self.server.timeout;
        let Some(thread) = thread else {
            let mut parameters = self.start_parameters.clone();
            if let Ok(folder) = &self.folder {
                parameters.insert("cwd".to_owned(), json!(folder));
            }
            let answer = running
                .request("thread/start", Value::Object(parameters), timeout)
                .await?;
            let id = answer
                .pointer("/thread/id")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .ok_or(LinkError::Malformed("thread/start", "thread id"))?;
            running.loaded().insert(id.to_owned());
            return Ok(id.to_owned());
        };
        if !running.loaded().contains(thread) {
            running
                .request(
                    "thread/resume",
                    json!({"threadId": thread, "excludeTurns": true}),
                    timeout,
                )
                .await?;
            running.loaded().insert(thread.to_owned());
        }
        Ok(thread.to_owned())
    }

    /// Follows the turn's notifications to its end, or interrupts it when
    /// it is stopped, goes quiet past the server's `timeout`, or runs past
    /// its `max_duration`.
    async fn follow(
        &self,
        running: &Running,
        thread: &str,
        turn: &str,
        mut events: mpsc::UnboundedReceiver<Value>,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        stop: impl Future<Output = ()>,
    ) -> Forwarded {
        let deadline = tokio::time::Instant::now() + self.server.max_duration;
        let mut so_far = TurnSoFar::default();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                event = events.recv() => {
                    let Some(event) = event else {
                        return self.failed(running, &LinkError::Gone);
                    };
                    if let Step::Ended(forwarded) =
                        so_far.take(&event, thread, turn, progress.as_ref())
                    {
                        return forwarded;
                    }
                }
                () = &mut stop => {
                    running.interrupt(thread, turn, &mut events).await;
                    return Forwarded::Cancelled;
                }
                () = tokio::time::sleep(self.server.timeout) => {
                    tracing::warn!(server = %self.server.name, thread, turn, "the agent's turn went quiet past the timeout");
                    running.interrupt(thread, turn, &mut events).await;
                    return Forwarded::TimedOut;
                }
                () = tokio::time::sleep_until(deadline) => {
                    running.interrupt(thread, turn, &mut events).await;
                    return Forwarded::TimedOut;
                }
            }
        }
    }

    /// How a turn that failed at the protocol's level ends: the agent gone
    /// (its stderr tells the caller why), or a logged failure.
    fn failed(&self, running: &Running, err: &LinkError) -> Forwarded {
        tracing::warn!(server = %self.server.name, error = %err, "the agent's turn failed");
        match err {
            LinkError::Gone => Forwarded::AgentFailed,
            _ if running.gone.is_cancelled() => Forwarded::AgentFailed,
            LinkError::TimedOut(_) => Forwarded::TimedOut,
            _ => Forwarded::Failed,
        }
    }
}

impl TurnSoFar {
    /// Takes one notification of the turn's thread.
    fn take(
        &mut self,
        event: &Value,
        thread: &str,
        turn: &str,
        progress: Option<&mpsc::UnboundedSender<Progress>>,
    ) -> Step {
        let params = event.get("params").unwrap_or(&Value::Null);
        let of_turn = |at: &str| params.pointer(at).and_then(Value::as_str) == Some(turn);
        let said = match event.get("method").and_then(Value::as_str).unwrap_or("") {
            "turn/completed" if of_turn("/turn/id") => {
                return Step::Ended(self.ended(params, thread));
            }
            "item/completed" if of_turn("/turnId") => {
                let item = &params["item"];
                if item["type"] == "agentMessage"
                    && let Some(text) = item["text"].as_str()
                {
                    self.reply = Some(text.to_owned());
                }
                None
            }
            "item/started" if of_turn("/turnId") => started_item(&params["item"]),
            "error" => {
                let message = params
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("an error");
                if params["willRetry"] == true {
                    Some(format!("the agent: {message}"))
                } else {
                    self.error = Some(message.to_owned());
                    None
                }
            }
            DECLINED => Some(format!(
                "portcullis declined the agent's request: {}",
                params["request"].as_str().unwrap_or("a request")
            )),
            _ => None,
        };
        if let (Some(message), Some(progress)) = (said, progress) {
            self.reports += 1;
            let _ = progress.send(Progress {
                done: f64::from(self.reports),
                total: None,
                message,
            });
        }
        Step::Going
    }

    /// The result of a turn its `turn/completed` ended.
    fn ended(&mut self, params: &Value, thread: &str) -> Forwarded {
        let status = params.pointer("/turn/status").and_then(Value::as_str);
        let (reply, is_error) = match status {
            Some("completed") => (self.reply.take().unwrap_or_default(), false),
            _ => {
                let why = params
                    .pointer("/turn/error/message")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| self.error.take())
                    .unwrap_or_else(|| {
                        format!("the turn ended {}", status.unwrap_or("without a status"))
                    });
                (why, true)
            }
        };
        Forwarded::Result {
            result: json!({
                "content": [{"type": "text", "text": reply}],
                "structuredContent": {"threadId": thread, "reply": reply},
                "isError": is_error,
            }),
            is_error,
        }
    }
}

/// What a caller is told when the agent starts something in its turn.
fn started_item(item: &Value) -> Option<String> {
    match item["type"].as_str()? {
        "commandExecution" => Some(format!(
            "the agent runs `{}`",
            item["command"].as_str().unwrap_or("a command")
        )),
        "fileChange" => Some("the agent changes files".to_owned()),
        "mcpToolCall" => Some(format!(
            "the agent calls {}/{}",
            item["server"].as_str().unwrap_or("?"),
            item["tool"].as_str().unwrap_or("?")
        )),
        "webSearch" => Some("the agent searches the web".to_owned()),
        _ => None,
    }
}

/// The answer portcullis gives a request of the agent's, by method:
/// approvals declined, anything else refused.
fn answer_to(method: &str) -> Result<Value, (i64, &'static str)> {
    match method {
        "item/commandExecution/requestApproval" | "item/fileChange/requestApproval" => {
            Ok(json!({"decision": "decline"}))
        }
        "execCommandApproval" | "applyPatchApproval" => Ok(json!({"decision": "denied"})),
        "item/permissions/requestApproval" => Ok(json!({"permissions": {}})),
        "mcpServer/elicitation/request" => Ok(json!({"action": "decline", "content": null})),
        _ => Err((
            -32601,
            "portcullis answers no such request for the agent's callers",
        )),
    }
}

/// A turn's place in the routing table, given up when the turn ends.
struct Listening<'a> {
    running: &'a Running,
    thread: String,
}

impl<'a> Listening<'a> {
    fn new(running: &'a Running, thread: &str, sender: mpsc::UnboundedSender<Value>) -> Self {
        running.turns().insert(thread.to_owned(), sender);
        Self {
            running,
            thread: thread.to_owned(),
        }
    }
}

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        self.running.turns().remove(&self.thread);
    }
}

impl Running {
    fn turns(&self) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::UnboundedSender<Value>>> {
        self.turns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn loaded(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.loaded.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Result<Value, String>>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the agent's messages until its stdout ends (or a message runs
    /// past the frame limit): then every wait fails as the agent's going.
    async fn read(self: Arc<Self>, stdout: ChildStdout, server: String) {
        let mut lines = BufReader::new(Bounded::new(stdout, MAX_FRAME_BYTES)).lines();
        loop {
            match lines.next_line().await {
                Ok(Some(line)) => self.dispatch(&line, &server).await,
                Ok(None) => break,
                Err(err) => {
                    tracing::warn!(server = %server, error = %err, "the agent's output ends here");
                    break;
                }
            }
        }
        self.gone.cancel();
        self.pending().clear();
        self.turns().clear();
    }

    /// One message of the agent's: an answer, a notification routed to its
    /// thread's turn, or a request answered here.
    async fn dispatch(&self, line: &str, server: &str) {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            tracing::warn!(server = %server, "the agent wrote a line that is not JSON");
            return;
        };
        let method = message.get("method").and_then(Value::as_str);
        match (method, message.get("id")) {
            (None, Some(id)) => {
                let waiting = id.as_u64().and_then(|id| self.pending().remove(&id));
                if let Some(waiting) = waiting {
                    let answer = match message.get("error") {
                        Some(error) => Err(error["message"]
                            .as_str()
                            .unwrap_or("an error without a message")
                            .to_owned()),
                        None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
                    };
                    let _ = waiting.send(answer);
                }
            }
            (Some(method), Some(id)) => self.answer(method, id, &message, server).await,
            (Some(_), None) => self.route(&message),
            (None, None) => {
                tracing::warn!(server = %server, "the agent wrote a message that is neither request, answer nor notification");
            }
        }
    }

    /// Sends a notification to the turn of the thread it names.
    fn route(&self, message: &Value) {
        let thread = message.pointer("/params/threadId").and_then(Value::as_str);
        if let Some(turn) = thread.and_then(|thread| self.turns().get(thread).cloned()) {
            let _ = turn.send(message.clone());
        }
    }

    async fn answer(&self, method: &str, id: &Value, message: &Value, server: &str) {
        let answer = match answer_to(method) {
            Ok(result) => {
                tracing::info!(server = %server, request = method, "declined the agent's request");
                let thread = message.pointer("/params/threadId").cloned();
                self.route(&json!({
                    "method": DECLINED,
                    "params": {"threadId": thread, "request": method},
                }));
                json!({"id": id, "result": result})
            }
            Err((code, why)) => {
                tracing::info!(server = %server, request = method, "refused the agent's request");
                json!({"id": id, "error": {"code": code, "message": why}})
            }
        };
        if let Err(err) = self.write(&answer).await {
            tracing::warn!(server = %server, error = %err, "the answer to the agent's request was not sent");
        }
    }

    async fn write(&self, message: &Value) -> Result<(), LinkError> {
        let mut line = message.to_string();
        line.push('\n');
        let mut stdin = self.stdin.lock().await;
        let pipe = stdin.as_mut().ok_or(LinkError::Gone)?;
        pipe.write_all(line.as_bytes())
            .await
            .map_err(|_| LinkError::Gone)?;
        pipe.flush().await.map_err(|_| LinkError::Gone)
    }

    async fn notify(&self, method: &str) -> Result<(), LinkError> {
        self.write(&json!({"method": method})).await
    }

    /// Asks `method` and waits up to `timeout` for its answer.
    async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, LinkError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, answer) = oneshot::channel();
        self.pending().insert(id, sender);
        if self.gone.is_cancelled() {
            self.pending().remove(&id);
            return Err(LinkError::Gone);
        }
        self.write(&json!({"method": method, "id": id, "params": params}))
            .await?;
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err(message))) => Err(LinkError::Refused {
                method: method.to_owned(),
                message,
            }),
            Ok(Err(_)) => Err(LinkError::Gone),
            Err(_) => {
                self.pending().remove(&id);
                Err(LinkError::TimedOut(method.to_owned()))
            }
        }
    }

    /// Interrupts the turn and waits, briefly, for it to say it ended.
    async fn interrupt(
        &self,
        thread: &str,
        turn: &str,
        events: &mut mpsc::UnboundedReceiver<Value>,
    ) {
        let asked = self
            .request(
                "turn/interrupt",
                json!({"threadId": thread, "turnId": turn}),
                INTERRUPT_WAIT,
            )
            .await;
        if let Err(err) = asked {
            tracing::warn!(thread, turn, error = %err, "the agent's turn was not interrupted");
            return;
        }
        let ended = async {
            while let Some(event) = events.recv().await {
                if event["method"] == "turn/completed"
                    && event.pointer("/params/turn/id").and_then(Value::as_str) == Some(turn)
                {
                    return;
                }
            }
        };
        if tokio::time::timeout(INTERRUPT_WAIT, ended).await.is_err() {
            tracing::warn!(thread, turn, "the interrupted turn did not say it ended");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completed(turn: &str, status: &str, error: Value) -> Value {
        json!({"method": "turn/completed", "params": {"threadId": "t", "turn": {"id": turn, "status": status, "error": error}}})
    }

    fn structured(step: Step) -> (Value, bool) {
        match step {
            Step::Ended(Forwarded::Result { result, is_error }) => {
                (result["structuredContent"].clone(), is_error)
            }
            Step::Ended(other) => panic!("{other:?}"),
            Step::Going => panic!("the turn goes on"),
        }
    }

    #[test]
    fn a_turn_replies_with_its_last_agent_message_and_ignores_other_turns() {
        let mut so_far = TurnSoFar::default();
        for (turn, text) in [("u1", "first"), ("u1", "last"), ("other", "not mine")] {
            let item = json!({"method": "item/completed", "params": {"threadId": "t", "turnId": turn,
                "item": {"type": "agentMessage", "id": "i", "text": text}}});
            assert!(matches!(so_far.take(&item, "t", "u1", None), Step::Going));
        }
        assert!(matches!(
            so_far.take(
                &completed("other", "completed", Value::Null),
                "t",
                "u1",
                None
            ),
            Step::Going
        ));
        let (body, is_error) =
            structured(so_far.take(&completed("u1", "completed", Value::Null), "t", "u1", None));
        assert_eq!(body, json!({"threadId": "t", "reply": "last"}));
        assert!(!is_error);
    }

    #[test]
    fn a_failed_turn_says_why_from_its_error_or_the_last_error_that_will_not_be_retried() {
        let mut so_far = TurnSoFar::default();
        let retry = json!({"method": "error", "params": {"threadId": "t", "willRetry": true, "error": {"message": "Reconnecting... 1/5"}}});
        let fatal = json!({"method": "error", "params": {"threadId": "t", "willRetry": false, "error": {"message": "Unauthorized"}}});
        let (sender, mut reports) = mpsc::unbounded_channel();
        so_far.take(&retry, "t", "u1", Some(&sender));
        so_far.take(&fatal, "t", "u1", Some(&sender));
        assert_eq!(
            reports.try_recv().unwrap().message,
            "the agent: Reconnecting... 1/5"
        );
        assert!(
            reports.try_recv().is_err(),
            "a fatal error is the result, not progress"
        );
        let (body, is_error) =
            structured(so_far.take(&completed("u1", "failed", Value::Null), "t", "u1", None));
        assert_eq!(body["reply"], "Unauthorized");
        assert!(is_error);
        let mut own = TurnSoFar::default();
        let (body, _) = structured(own.take(
            &completed("u1", "failed", json!({"message": "quota"})),
            "t",
            "u1",
            None,
        ));
        assert_eq!(body["reply"], "quota");
        let (body, is_error) = structured(TurnSoFar::default().take(
            &completed("u1", "interrupted", Value::Null),
            "t",
            "u1",
            None,
        ));
        assert_eq!(body["reply"], "the turn ended interrupted");
        assert!(is_error);
    }

    #[test]
    fn every_approval_is_declined_and_every_other_request_refused() {
        for method in [
            "item/commandExecution/requestApproval",
            "item/fileChange/requestApproval",
        ] {
            assert_eq!(answer_to(method).unwrap(), json!({"decision": "decline"}));
        }
        for method in ["execCommandApproval", "applyPatchApproval"] {
            assert_eq!(answer_to(method).unwrap(), json!({"decision": "denied"}));
        }
        assert_eq!(
            answer_to("item/permissions/requestApproval").unwrap(),
            json!({"permissions": {}})
        );
        assert_eq!(
            answer_to("mcpServer/elicitation/request").unwrap()["action"],
            "decline"
        );
        for method in [
            "item/tool/call",
            "item/tool/requestUserInput",
            "account/chatgptAuthTokens/refresh",
            "anything/else",
        ] {
            assert_eq!(answer_to(method).unwrap_err().0, -32601, "{method}");
        }
    }

    #[test]
    fn what_the_agent_starts_is_told_as_progress() {
        assert_eq!(
            started_item(&json!({"type": "commandExecution", "command": "ls"})).as_deref(),
            Some("the agent runs `ls`")
        );
        assert_eq!(started_item(&json!({"type": "agentMessage"})), None);
        assert_eq!(started_item(&json!({})), None);
    }
}
