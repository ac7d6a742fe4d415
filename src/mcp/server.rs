use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, InputRequiredResult,
    JsonObject, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::approvals::{self, Approvals, Retry};
use super::errors;
use super::resources::{PolicyResource, policy_resources};
use crate::keeper::{Approval, CallOutcome, GateFailure, Keeper};
use crate::pdp::PolicyBundle;
use crate::tools::{ArgumentValidator, Effect, Progress, RegisteredTool};

const TOOLS_LIST: &str = "tools_list";
const TOOL_CALL: &str = "tool_call";
const GATE: &str = "gate";

/// The rmcp handler. One per process: a stdio process serves one client.
pub struct PortcullisServer {
    keeper: Arc<Keeper>,
    approvals: Approvals,
    resources: Vec<PolicyResource>,
    tool_call_arguments: ArgumentValidator,
    no_arguments: ArgumentValidator,
    gate_arguments: ArgumentValidator,
}

fn object(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn tool_call_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 256,
                     "description": "The name of a tool listed by tools_list."},
            "arguments": {"type": "object", "description": "The tool's arguments, as its input schema says."}
        },
        "required": ["name"],
        "additionalProperties": false
    })
}

fn gate_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1, "maxLength": crate::facts::MAX_COMMAND_BYTES,
                        "description": "The shell command line, as the shell would get it."},
            "cwd": {"type": "string", "minLength": 1, "maxLength": 4096,
                    "description": "The folder it would run in, relative to the workspace root; the root if absent."}
        },
        "required": ["command"],
        "additionalProperties": false
    })
}

fn no_arguments_schema() -> Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

impl PortcullisServer {
    pub fn new(keeper: Arc<Keeper>, bundle: &PolicyBundle, approvals: Approvals) -> Self {
        Self {
            keeper,
            approvals,
            resources: policy_resources(bundle),
            tool_call_arguments: compiled(&tool_call_schema()),
            no_arguments: compiled(&no_arguments_schema()),
            gate_arguments: compiled(&gate_schema()),
        }
    }

    fn mcp_tool(tool: &RegisteredTool) -> Tool {
        let spec = &tool.spec;
        let annotations = ToolAnnotations::new()
            .read_only(spec.read_only())
            .destructive(spec.effects.contains(&Effect::Destructive))
            .open_world(spec.effects.contains(&Effect::Network));
        Tool::new(
            Keeper::mcp_name(spec),
            spec.description.clone(),
            object(spec.input_schema.clone()),
        )
        .with_raw_output_schema(object(spec.output_schema.clone()))
        .with_annotations(annotations)
    }

    fn wrappers() -> [Tool; 3] {
        [
            Tool::new(
                TOOLS_LIST,
                "List the tools this client may call, with their input schemas, as data. \
                 Use it when your client cannot refresh its tool list; otherwise the tools are \
                 listed directly.",
                object(no_arguments_schema()),
            )
            .with_annotations(ToolAnnotations::new().read_only(true))
            .with_raw_output_schema(object(json!({
                "type": "object",
                "properties": {"tools": {"type": "array"}},
                "required": ["tools"]
            }))),
            Tool::new(
                TOOL_CALL,
                "Call a tool by name with its arguments. The same decision and the same result as \
                 calling the tool directly; use it only when your client cannot call a tool that \
                 tools_list shows.",
                object(tool_call_schema()),
            ),
            Tool::new(
                GATE,
                "Ask whether a shell command may run, before your harness runs it: allow, ask (get \
                 your user's approval first) or deny, with the reason and every program the command \
                 would run. It never runs anything. Use it for every shell command.",
                object(gate_schema()),
            )
            .with_annotations(ToolAnnotations::new().read_only(true)),
        ]
    }

    async fn tools_list(&self, request_id: &str) -> Result<Value, ErrorData> {
        let tools: Vec<Value> = self
            .keeper
            .discoverable(request_id)
            .await
            .map_err(audit_unavailable)?
            .into_iter()
            .map(|tool| {
                json!({
                    "name": Keeper::mcp_name(&tool.spec),
                    "description": tool.spec.description,
                    "input_schema": tool.spec.input_schema,
                    "output_schema": tool.spec.output_schema,
                    "read_only": tool.spec.read_only(),
                })
            })
            .collect();
        Ok(json!({"tools": tools}))
    }
}

/// A listing that could not be recorded is not given: fail closed.
fn audit_unavailable(_: crate::keeper::AuditUnavailable) -> ErrorData {
    ErrorData::internal_error("the audit log is unavailable", None)
}

/// The request's JSON-RPC id, as recorded in the audit log.
fn request_id(context: &RequestContext<RoleServer>) -> String {
    serde_json::to_string(&context.id).unwrap_or_default()
}

/// Compiles one of the wrappers' own schemas, which are constants.
fn compiled(schema: &Value) -> ArgumentValidator {
    match ArgumentValidator::compile(schema) {
        Ok(validator) => validator,
        // The wrapper schemas are literals above, covered by the tests; a
        // failure here is a bug in this file, not something input can cause.
        Err(err) => unreachable!("a wrapper schema does not compile: {err}"),
    }
}

impl PortcullisServer {
    /// Runs one call through the keeper, forwarding its progress.
    async fn run_call(
        &self,
        context: &RequestContext<RoleServer>,
        id: &str,
        name: &str,
        arguments: Value,
        approval: Approval,
    ) -> CallOutcome {
        let token = context.meta.get_progress_token();
        let peer = context.peer.clone();
        let (sender, mut receiver) = mpsc::unbounded_channel::<Progress>();
        // Progress goes out in order while the tool runs; `call` drops the
        // sender before it returns, so this loop ends before the result is
        // sent and no progress can follow it.
        let forward = async move {
            while let Some(progress) = receiver.recv().await {
                if let Some(token) = &token {
                    let note = ProgressNotificationParam::new(token.clone(), progress.done as f64)
                        .with_message(progress.message);
                    if let Err(err) = peer.notify_progress(note).await {
                        tracing::debug!(error = %err, "progress notification not sent");
                    }
                }
            }
        };
        let (outcome, ()) = tokio::join!(
            self.keeper
                .call(id, name, arguments, approval, sender, context.ct.clone()),
            forward
        );
        outcome
    }
}

impl ServerHandler for PortcullisServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().build())
            .with_server_info(Implementation::new("portcullis", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "portcullis decides every tool call before it runs. A refused call returns \
                 isError with a reason_code and the reason; the policies are readable as resources.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools: Vec<Tool> = self
            .keeper
            .discoverable(&request_id(&context))
            .await
            .map_err(audit_unavailable)?
            .into_iter()
            .map(Self::mcp_tool)
            .collect();
        tools.extend(Self::wrappers());
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let (name, arguments) = match request.name.as_ref() {
            TOOLS_LIST => {
                self.no_arguments
                    .check(&arguments)
                    .map_err(|err| ErrorData::invalid_params(err.to_string(), None))?;
                return Ok(CallToolResult::structured(
                    self.tools_list(&request_id(&context)).await?,
                )
                .into());
            }
            GATE => {
                self.gate_arguments
                    .check(&arguments)
                    .map_err(|err| ErrorData::invalid_params(err.to_string(), None))?;
                let command = arguments["command"].as_str().unwrap_or_default();
                let cwd = arguments.get("cwd").and_then(Value::as_str);
                return match self.keeper.gate(&request_id(&context), command, cwd).await {
                    Ok(answer) => Ok(CallToolResult::structured(answer.to_json()).into()),
                    Err(GateFailure::Input(err)) => {
                        Err(ErrorData::invalid_params(err.to_string(), None))
                    }
                    Err(GateFailure::AuditUnavailable) => Ok(errors::audit_unavailable()),
                };
            }
            TOOL_CALL => {
                self.tool_call_arguments
                    .check(&arguments)
                    .map_err(|err| ErrorData::invalid_params(err.to_string(), None))?;
                let name = arguments["name"].as_str().unwrap_or_default().to_owned();
                let inner = arguments
                    .get("arguments")
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                (name, inner)
            }
            other => (other.to_owned(), arguments),
        };

        let id = request_id(&context);
        let modern = context
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        let askable = context
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        let mut approval = if askable {
            Approval::Askable
        } else {
            Approval::Unavailable
        };
        if modern && (request.request_state.is_some() || request.input_responses.is_some()) {
            let retry = self
                .approvals
                .check_retry(
                    &self.keeper,
                    &id,
                    &name,
                    &arguments,
                    request.request_state.as_deref(),
                    request.input_responses.as_ref(),
                )
                .await;
            match retry {
                Retry::Granted => approval = Approval::Granted,
                Retry::Declined(why) => return Ok(errors::approval_declined(why, &[])),
                Retry::AskAgain => {}
            }
        }

        let outcome = self
            .run_call(&context, &id, &name, arguments.clone(), approval)
            .await;
        let CallOutcome::NeedsApproval {
            decision,
            digest,
            question,
        } = outcome
        else {
            return errors::to_response(outcome)
                .unwrap_or_else(|| Err(ErrorData::internal_error("cancelled", None)));
        };
        let asking: Vec<String> = decision.policies.iter().map(|p| p.id.clone()).collect();
        let Some(form) = approvals::question(&question) else {
            return Err(ErrorData::internal_error(
                "the approval question could not be built",
                None,
            ));
        };
        if modern {
            let state = self
                .approvals
                .seal
                .seal(&self.keeper.client().fingerprint, &digest)
                .map_err(|err| ErrorData::internal_error(err.to_string(), None))?;
            self.keeper
                .record_approval(
                    &id,
                    "asked",
                    &digest,
                    json!({"policies": asking, "era": "2026-07-28"}),
                )
                .await;
            let requests = approvals::input_requests(&question).ok_or_else(|| {
                ErrorData::internal_error("the approval question could not be built", None)
            })?;
            return Ok(InputRequiredResult::new(Some(requests), Some(state)).into());
        }
        self.keeper
            .record_approval(
                &id,
                "asked",
                &digest,
                json!({"policies": asking, "era": "legacy"}),
            )
            .await;
        let answer = context
            .peer
            .create_elicitation_with_timeout(form, Some(self.approvals.timeout))
            .await;
        let verdict = match &answer {
            Ok(answer) => approvals::judge(answer),
            Err(rmcp::ServiceError::Timeout { .. }) => Err("timeout"),
            Err(err) => {
                tracing::warn!(error = %err, "the approval question failed");
                Err("no_answer")
            }
        };
        self.keeper
            .record_approval(
                &id,
                "answered",
                &digest,
                json!({"answer": verdict.err().unwrap_or("approve")}),
            )
            .await;
        if let Err(why) = verdict {
            return Ok(errors::approval_declined(why, &asking));
        }
        let outcome = self
            .run_call(&context, &id, &name, arguments, Approval::Granted)
            .await;
        errors::to_response(outcome)
            .unwrap_or_else(|| Err(ErrorData::internal_error("cancelled", None)))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(
            self.resources.iter().map(PolicyResource::listing).collect(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let resource = self
            .resources
            .iter()
            .find(|r| r.uri == request.uri)
            .ok_or_else(|| {
                ErrorData::resource_not_found(format!("no resource {}", request.uri), None)
            })?;
        Ok(ReadResourceResult::new(vec![resource.contents()]).into())
    }
}
