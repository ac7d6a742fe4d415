//! The rmcp handler: each MCP request translated into a call on the keeper
//! or the approval flow, and the answer translated back through `errors`.
//! It decides nothing and builds no error itself.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, GetTaskParams,
    GetTaskResult, Implementation, JsonObject, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerCapabilities, ServerConfig, SubscriptionFilter, Tool, ToolAnnotations, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::approvals;
use super::call::McpCall;
use super::errors;
use super::resources::{PolicyResource, policy_resources};
use super::tasks::{OwnedCall, Tasks};
use super::watchers::ToolWatchers;
use crate::approval::{Approvals, Era, Reply, Request};
use crate::gate::GateAnswer;
use crate::keeper::{CallOutcome, GateFailure, Keeper};
use crate::pdp::PolicyBundle;
use crate::servers::Surface;
use crate::tools::{
    ArgumentValidator, BridgeTool, Effect, SchemaError, ToolFailure, ToolSpec, bridge_specs,
};

const TOOLS_LIST: &str = "tools_list";
const TOOL_CALL: &str = "tool_call";
const GATE: &str = "gate";

/// Whose keeper answers a request.
#[derive(Clone)]
pub enum Callers {
    /// stdio: the one client the process was started for.
    One(Arc<Keeper>),
    /// Streamable HTTP: the client whose bearer token the request carried,
    /// put in the request's extensions as a [`Caller`] by the HTTP guard
    /// before the body was read.
    PerRequest,
}

/// The keeper of the client an HTTP request authenticated as.
#[derive(Clone)]
pub struct Caller(pub Arc<Keeper>);

/// The rmcp handler: one per stdio process, or one per HTTP session (or
/// stateless request), all clones sharing the keepers and the approval
/// seal, so that a clone costs a few reference counts.
#[derive(Clone)]
pub struct PortcullisServer {
    callers: Callers,
    approvals: Arc<Approvals>,
    resources: Arc<[PolicyResource]>,
    tool_call_arguments: Arc<ArgumentValidator>,
    no_arguments: Arc<ArgumentValidator>,
    gate_arguments: Arc<ArgumentValidator>,
    surface: Surface,
    /// The bridge's tools as the wrappers surface always lists them, agent
    /// or not.
    bridge_tools: Arc<[Tool]>,
    tasks: Tasks,
    /// Who is told when the tools clients see change.
    watchers: ToolWatchers,
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
    /// A handler answering for `callers`. Fails only if a wrapper's own
    /// schema does not compile, which the tests rule out.
    pub fn new(
        callers: Callers,
        bundle: &PolicyBundle,
        approvals: Arc<Approvals>,
        surface: Surface,
    ) -> Result<Self, SchemaError> {
        Ok(Self {
            callers,
            approvals,
            surface,
            bridge_tools: bridge_specs().iter().map(Self::mcp_tool).collect(),
            tasks: Tasks::default(),
            watchers: ToolWatchers::default(),
            resources: policy_resources(bundle).into(),
            tool_call_arguments: Arc::new(ArgumentValidator::compile(&tool_call_schema())?),
            no_arguments: Arc::new(ArgumentValidator::compile(&no_arguments_schema())?),
            gate_arguments: Arc::new(ArgumentValidator::compile(&gate_schema())?),
        })
    }

    /// Who this server tells when the tools clients see change.
    pub fn watchers(&self) -> ToolWatchers {
        self.watchers.clone()
    }

    /// A tool as clients see it. The annotations come from the effects the
    /// registry declares, never from a downstream's own claims; a tool with
    /// no output schema gets none.
    fn mcp_tool(spec: &ToolSpec) -> Tool {
        let annotations = ToolAnnotations::new()
            .read_only(spec.read_only())
            .destructive(spec.effects.contains(&Effect::Destructive))
            .open_world(spec.effects.contains(&Effect::Network));
        let listed = Tool::new(
            Keeper::mcp_name(spec),
            spec.description.clone(),
            object(spec.input_schema.clone()),
        )
        .with_annotations(annotations);
        if spec.output_schema.is_null() {
            listed
        } else {
            listed.with_raw_output_schema(object(errors::output_schema(&spec.output_schema)))
        }
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
            .with_raw_output_schema(object(errors::output_schema(&json!({
                "type": "object",
                "properties": {"tools": {"type": "array"}},
                "required": ["tools"]
            })))),
            Tool::new(
                TOOL_CALL,
                "Call a tool by name with its arguments. The same decision and the same result as \
                 calling the tool directly; use it only when your client cannot call a tool that \
                 tools_list shows.",
                object(tool_call_schema()),
            )
            .with_raw_output_schema(object(errors::output_schema(&json!({
                "type": "object",
                "description": "the called tool's own result, as its output schema says"
            })))),
            Tool::new(
                GATE,
                "Ask whether a shell command may run, before your harness runs it: allow, ask (get \
                 your user's approval first) or deny, with the reason and every program the command \
                 would run. It never runs anything. Use it for every shell command.",
                object(gate_schema()),
            )
            .with_raw_output_schema(object(errors::output_schema(&GateAnswer::schema())))
            .with_annotations(ToolAnnotations::new().read_only(true)),
        ]
    }

    /// The keeper of the client this request came from. Over HTTP a request
    /// without an authenticated caller never reaches here (the guard
    /// answers 401); if one did, it is refused rather than served as
    /// anyone.
    ///
    /// Over HTTP the keeper is told the connection: the MCP session the
    /// request belongs to (the guard let it through only for the client
    /// that opened it). A 2026-07-28 request has no session: the protocol
    /// has no connection beyond the client itself, which is what the keeper
    /// takes then.
    fn keeper(&self, context: &RequestContext<RoleServer>) -> Result<Arc<Keeper>, ErrorData> {
        match &self.callers {
            Callers::One(keeper) => Ok(Arc::clone(keeper)),
            Callers::PerRequest => {
                let parts = context.extensions.get::<axum::http::request::Parts>();
                let caller = parts
                    .and_then(|parts| parts.extensions.get::<Caller>())
                    .ok_or_else(|| errors::internal("the request has no authenticated client"))?;
                let session = parts
                    .and_then(|parts| parts.headers.get(super::http::SESSION_HEADER))
                    .and_then(|value| value.to_str().ok());
                Ok(match session {
                    Some(session) => {
                        Arc::new(caller.0.on_connection(&format!("mcp-session:{session}")))
                    }
                    None => Arc::clone(&caller.0),
                })
            }
        }
    }

    async fn tools_list(&self, keeper: &Keeper, request_id: &str) -> Result<Value, ErrorData> {
        let tools: Vec<Value> = keeper
            .discoverable(request_id, |tool| {
                json!({
                    "name": Keeper::mcp_name(&tool.spec),
                    "description": tool.spec.description,
                    "input_schema": tool.spec.input_schema,
                    "output_schema": tool.spec.output_schema,
                    "read_only": tool.spec.read_only(),
                })
            })
            .await
            .map_err(|_| errors::listing_unrecorded())?;
        Ok(json!({"tools": tools}))
    }
}

/// The request's JSON-RPC id, as recorded in the audit log.
fn request_id(context: &RequestContext<RoleServer>) -> String {
    serde_json::to_string(&context.id).unwrap_or_default()
}

impl PortcullisServer {
    async fn tools_list_call(
        &self,
        keeper: &Keeper,
        id: &str,
        arguments: &Value,
    ) -> Result<CallToolResponse, ErrorData> {
        self.no_arguments
            .check(arguments)
            .map_err(|err| errors::invalid_arguments(err.to_string()))?;
        Ok(CallToolResult::structured(self.tools_list(keeper, id).await?).into())
    }

    async fn gate_call(
        &self,
        keeper: &Keeper,
        id: &str,
        arguments: &Value,
    ) -> Result<CallToolResponse, ErrorData> {
        self.gate_arguments
            .check(arguments)
            .map_err(|err| errors::invalid_arguments(err.to_string()))?;
        let command = arguments["command"].as_str().unwrap_or_default();
        let cwd = arguments.get("cwd").and_then(Value::as_str);
        match keeper.gate(id, command, cwd, None).await {
            Ok(answer) => Ok(CallToolResult::structured(answer.to_json()).into()),
            Err(GateFailure::Input(err)) => Err(errors::invalid_arguments(err.to_string())),
            Err(GateFailure::AuditUnavailable) => Ok(errors::audit_unavailable()),
        }
    }

    /// The tool and arguments a `tool_call` wrapper names.
    fn unwrapped(&self, arguments: &Value) -> Result<(String, Value), ErrorData> {
        self.tool_call_arguments
            .check(arguments)
            .map_err(|err| errors::invalid_arguments(err.to_string()))?;
        let name = arguments["name"].as_str().unwrap_or_default().to_owned();
        let inner = arguments
            .get("arguments")
            .cloned()
            .unwrap_or_else(|| json!({}));
        Ok((name, inner))
    }
}

impl ServerHandler for PortcullisServer {
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.watchers.session(context.peer);
    }

    /// A 2026-07-28 client learns of changed tools on a stream it opens;
    /// the tool list is the only thing that changes while serving.
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.watchers.stream(context.sink().clone());
        context.cancelled().await;
        Ok(())
    }

    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
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
        let keeper = self.keeper(&context)?;
        let [tools_list, tool_call, gate] = Self::wrappers();
        if self.surface == Surface::Wrappers {
            let mut tools = self.bridge_tools.to_vec();
            tools.extend([tools_list, tool_call]);
            return Ok(ListToolsResult::with_all_items(tools));
        }
        let mut tools: Vec<Tool> = keeper
            .discoverable(&request_id(&context), |tool| Self::mcp_tool(&tool.spec))
            .await
            .map_err(|_| errors::listing_unrecorded())?;
        tools.extend([tools_list, tool_call, gate]);
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let keeper = self.keeper(&context)?;
        let id = request_id(&context);
        let arguments = Value::Object(request.arguments.clone().unwrap_or_default());
        let direct = self.surface == Surface::Direct;
        let (name, arguments) = match request.name.as_ref() {
            TOOLS_LIST => return self.tools_list_call(&keeper, &id, &arguments).await,
            TOOL_CALL => self.unwrapped(&arguments)?,
            other if direct || BridgeTool::named(other).is_some() => (other.to_owned(), arguments),
            other => return Err(errors::unknown_tool(other)),
        };
        if name == GATE {
            return self.gate_call(&keeper, &id, &arguments).await;
        }
        // The wrappers surface lists the bridge's tools agent or not: one
        // that is listed and cannot run says why, as any tool that exists
        // and may not run now does.
        if !direct && BridgeTool::named(&name).is_some() && !keeper.serves(&name) {
            return errors::reply(Reply::Done(CallOutcome::Failed(
                ToolFailure::AgentUnavailable,
            )));
        }
        let era = match context.protocol_version() {
            Some(version) if !version.has_initialize() => Era::Modern,
            _ => Era::Legacy,
        };
        let askable = context
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        let retried =
            (request.request_state.is_some() || request.input_responses.is_some()).then(|| {
                let answer = approvals::retried_answer(request.input_responses.as_ref());
                (request.request_state.as_deref(), answer)
            });
        let tasked = retried.is_none()
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks())
            && keeper.runs_as_task(&name).await;
        if tasked {
            let call = OwnedCall {
                keeper,
                context,
                id,
                name,
                arguments,
                era,
                askable,
            };
            return self.tasks.call(call, Arc::clone(&self.approvals)).await;
        }
        let adapter = McpCall {
            keeper: &keeper,
            context: &context,
            id: &id,
            name: &name,
            arguments: &arguments,
            cancel: context.ct.clone(),
            decided: Mutex::new(None),
        };
        let request = Request {
            request_id: &id,
            name: &name,
            arguments: &arguments,
            era,
            askable,
            retried,
        };
        let reply = self
            .approvals
            .call(&keeper, &adapter, request)
            .await
            .map_err(|_| errors::internal("the approval state could not be sealed"))?;
        errors::reply(reply)
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        self.tasks
            .owned(&*self.keeper(&context)?, &request.task_id)?;
        let task = self.tasks.manager().get_task(&request.task_id)?;
        Ok(GetTaskResult::new(task))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks
            .owned(&*self.keeper(&context)?, &request.task_id)?;
        self.tasks
            .manager()
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks
            .owned(&*self.keeper(&context)?, &request.task_id)?;
        self.tasks.manager().cancel_task(&request.task_id)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let readable = self
            .keeper(&context)?
            .policies_readable(&request_id(&context))
            .await
            .map_err(|_| errors::listing_unrecorded())?;
        let listed = if readable { &self.resources[..] } else { &[] };
        Ok(ListResourcesResult::with_all_items(
            listed.iter().map(PolicyResource::listing).collect(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let readable = self
            .keeper(&context)?
            .policies_readable(&request_id(&context))
            .await
            .map_err(|_| errors::listing_unrecorded())?;
        // A client that may not read the policies is told what it would be
        // told of a resource that does not exist.
        let resource = self
            .resources
            .iter()
            .filter(|_| readable)
            .find(|r| r.uri == request.uri)
            .ok_or_else(|| errors::resource_not_found(&request.uri))?;
        Ok(ReadResourceResult::new(vec![resource.contents()]).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_schemas_compile() {
        for schema in [tool_call_schema(), no_arguments_schema(), gate_schema()] {
            assert!(ArgumentValidator::compile(&schema).is_ok(), "{schema}");
        }
    }
}
