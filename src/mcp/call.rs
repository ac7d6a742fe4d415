//! One tool call as the MCP adapter runs it: through the approval flow and
//! the keeper, its progress forwarded to the client, its questions put to
//! the client's user. Shared by a call answered at once and one run as a
//! task.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::RequestContext;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::approvals;
use crate::approval::{Answer, Asking};
use crate::keeper::{Approval, CallOutcome, Keeper};
use crate::tools::Progress;

/// One tool call as the approval flow sees it: run it through the keeper,
/// or ask this client's user on the same call.
pub struct McpCall<'a> {
    pub keeper: &'a Arc<Keeper>,
    pub context: &'a RequestContext<RoleServer>,
    pub id: &'a str,
    pub name: &'a str,
    pub arguments: &'a Value,
    /// Stops the call: the request's own token, or a task's.
    pub cancel: CancellationToken,
    /// Told once the call is allowed and recorded, for a call that becomes
    /// a task then.
    pub decided: Mutex<Option<oneshot::Sender<()>>>,
}

impl McpCall<'_> {
    /// Runs one call through the keeper, forwarding its progress.
    async fn run_call(&self, approval: Approval) -> CallOutcome {
        let call = self;
        let McpCall {
            keeper,
            context,
            id,
            name,
            arguments,
            ..
        } = *call;
        let decided = call
            .decided
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let token = context.meta.get_progress_token();
        let peer = context.peer.clone();
        let (sender, mut receiver) = mpsc::unbounded_channel::<Progress>();
        // Progress is asked of a tool only when the client gave a token.
        let sender = token.is_some().then_some(sender);
        // Progress goes out in order while the tool runs; `call` drops the
        // sender before it returns, so this loop ends before the result is
        // sent and no progress can follow it.
        let forward = async move {
            while let Some(progress) = receiver.recv().await {
                if let Some(token) = &token {
                    let mut note = ProgressNotificationParam::new(token.clone(), progress.done)
                        .with_message(progress.message);
                    note.total = progress.total;
                    if let Err(err) = peer.notify_progress(note).await {
                        tracing::debug!(error = %err, "progress notification not sent");
                    }
                }
            }
        };
        let (outcome, ()) = tokio::join!(
            keeper.call_telling(
                id,
                name,
                arguments.clone(),
                approval,
                sender,
                call.cancel.clone(),
                decided
            ),
            forward
        );
        outcome
    }
}

impl Asking for McpCall<'_> {
    async fn run(&self, approval: Approval) -> CallOutcome {
        self.run_call(approval).await
    }

    async fn ask(&self, question: &str, timeout: Duration) -> Answer {
        let Some(form) = approvals::question(question) else {
            return Answer::Refuse("no_answer");
        };
        match self
            .context
            .peer
            .create_elicitation_with_timeout(form, Some(timeout))
            .await
        {
            Ok(answer) => approvals::judge(&answer),
            Err(rmcp::ServiceError::Timeout { .. }) => Answer::Refuse("timeout"),
            Err(err) => {
                tracing::warn!(error = %err, "the approval question failed");
                Answer::Refuse("no_answer")
            }
        }
    }

    async fn waiting(&self, message: &str) {
        let Some(token) = self.context.meta.get_progress_token() else {
            return;
        };
        let note = ProgressNotificationParam::new(token, 0.0).with_message(message.to_owned());
        if let Err(err) = self.context.peer.notify_progress(note).await {
            tracing::debug!(error = %err, "progress notification not sent");
        }
    }

    async fn stopped(&self) {
        self.cancel.cancelled().await;
    }
}
