//! Long calls as tasks (the 2026-07-28 tasks extension, SEP-2663): a client
//! that declares the extension gets a task for a call of a tool that takes
//! long (`search`, the bridge's `prompt_send`, a tool of a downstream that
//! runs its own calls as tasks: `Keeper::runs_as_task`) once the call is
//! decided and allowed, and polls `tasks/get` for its result. Each task belongs to
//! the client that made it: another client's task id reads as unknown, as
//! one that never existed does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{CallToolResponse, CreateTaskResult};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::call::McpCall;
use super::errors;
use crate::approval::{Approvals, Era, Reply, Request};
use crate::keeper::Keeper;

/// One call, owned, to run where the request that made it cannot wait.
pub struct OwnedCall {
    pub keeper: Arc<Keeper>,
    pub context: RequestContext<RoleServer>,
    pub id: String,
    pub name: String,
    pub arguments: Value,
    pub era: Era,
    pub askable: bool,
}

/// The tasks of every client of this server, and whose each one is.
#[derive(Clone, Default)]
pub struct Tasks {
    manager: TaskManager,
    /// Task id → the fingerprint of the client that made it.
    owners: Arc<Mutex<HashMap<String, String>>>,
}

impl Tasks {
    /// Decides `call` and, once it is allowed and recorded, runs it as a
    /// task. A call that ends before it runs (denied, asked, unknown) is
    /// answered at once, as without tasks.
    pub async fn call(
        &self,
        call: OwnedCall,
        approvals: Arc<Approvals>,
    ) -> Result<CallToolResponse, ErrorData> {
        let owner = call.keeper.client().fingerprint.clone();
        let (told, decided) = oneshot::channel();
        let cancel = CancellationToken::new();
        let request_ct = call.context.ct.clone();
        let mut running = tokio::spawn(run(call, approvals, cancel.clone(), told));
        let allowed = tokio::select! {
            decided = decided => decided.is_ok(),
            () = request_ct.cancelled() => {
                cancel.cancel();
                false
            }
        };
        if !allowed {
            return match running.await {
                Ok(Ok(reply)) => errors::reply(reply),
                Ok(Err(err)) => Err(err),
                Err(_) => Err(errors::internal("the call failed")),
            };
        }
        let task = self.manager.spawn(TaskOptions::new(), move |context| {
            Box::pin(async move {
                let ended = tokio::select! {
                    ended = &mut running => ended,
                    () = context.cancelled() => {
                        cancel.cancel();
                        running.await
                    }
                };
                let cancelled = context.is_cancel_requested();
                match ended {
                    Ok(Ok(reply)) => match errors::reply(reply) {
                        Ok(CallToolResponse::Complete(result)) => Ok(result),
                        _ if cancelled => Err(TaskExit::Cancelled),
                        Ok(_) => Err(TaskExit::Error(errors::internal(
                            "the call ended without a result",
                        ))),
                        Err(err) => Err(TaskExit::Error(err)),
                    },
                    _ if cancelled => Err(TaskExit::Cancelled),
                    Ok(Err(err)) => Err(TaskExit::Error(err)),
                    Err(_) => Err(TaskExit::Error(errors::internal("the call failed"))),
                }
            })
        });
        {
            let mut owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
            // Tasks the manager has let go of are nobody's any more.
            owners.retain(|id, _| self.manager.get_task(id).is_ok());
            owners.insert(task.task_id.clone(), owner);
        }
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    /// The task `task_id`, if `keeper`'s client made it; otherwise the
    /// error an unknown task gets.
    pub fn owned(&self, keeper: &Keeper, task_id: &str) -> Result<(), ErrorData> {
        let owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
        match owners.get(task_id) {
            Some(owner) if *owner == keeper.client().fingerprint => Ok(()),
            _ => Err(ErrorData::invalid_params(
                format!("unknown task: {task_id}"),
                None,
            )),
        }
    }

    pub fn manager(&self) -> &TaskManager {
        &self.manager
    }
}

/// Runs the call through the approval flow, as a call that is not a task
/// does, telling `decided` when it is allowed.
async fn run(
    call: OwnedCall,
    approvals: Arc<Approvals>,
    cancel: CancellationToken,
    decided: oneshot::Sender<()>,
) -> Result<Reply, ErrorData> {
    let adapter = McpCall {
        keeper: &call.keeper,
        context: &call.context,
        id: &call.id,
        name: &call.name,
        arguments: &call.arguments,
        cancel,
        decided: Mutex::new(Some(decided)),
    };
    let request = Request {
        request_id: &call.id,
        name: &call.name,
        arguments: &call.arguments,
        era: call.era,
        askable: call.askable,
        retried: None,
    };
    approvals
        .call(&call.keeper, &adapter, request)
        .await
        .map_err(|_| errors::internal("the approval state could not be sealed"))
}
