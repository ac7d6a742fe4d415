//! How the bridge talks to a downstream agent (`kind = "agent"` in
//! `servers.toml`): which of its tools starts a conversation, which
//! continues one and under which argument, and where in a result the
//! conversation id and the reply are. `preset = "codex"` is Codex's
//! `codex mcp-server` (removed in Codex 0.154); `preset =
//! "codex-app-server"` is the current Codex's `codex app-server`, which
//! speaks its own JSON-RPC of threads and turns rather than MCP tools (the
//! bridge's `app_server` module), so it has no tools to map.

use serde_json::Value;

/// The agents portcullis knows the mapping of.
pub const PRESETS: [&str; 2] = ["codex", "codex-app-server"];

/// How the bridge speaks to the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentProtocol {
    /// An MCP server whose tools start and continue conversations; the
    /// fleet starts it, pins its tools and forwards the turns.
    McpTools,
    /// Codex's app-server protocol over the server's stdio; the bridge
    /// starts it itself, and the fleet leaves it alone.
    CodexAppServer,
}

/// The mapping keys that name tools, arguments and result places: what an
/// app-server agent, which has none, may not set.
const TOOL_MAPPING_KEYS: [&str; 6] = [
    "start_tool",
    "reply_tool",
    "prompt_argument",
    "session_argument",
    "session_from",
    "reply_from",
];

/// The mapping of one agent's tools onto the bridge's turns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentMapping {
    pub protocol: AgentProtocol,
    /// The tool that starts a conversation.
    pub start_tool: String,
    /// The tool that continues one.
    pub reply_tool: String,
    /// The argument of both that carries the prompt.
    pub prompt_argument: String,
    /// The argument of `reply_tool` that names the conversation.
    pub session_argument: String,
    /// A JSON pointer into a result (`/structuredContent/threadId`) to the
    /// conversation id.
    pub session_from: String,
    /// A JSON pointer into a result to the reply text; without one, the
    /// result's text content, joined.
    pub reply_from: Option<String>,
    /// Arguments the team fixes for every start (Codex's `sandbox`,
    /// `approval-policy`, `cwd`): the caller sends only the prompt.
    pub start_arguments: serde_json::Map<String, Value>,
}

/// What a team wrote of the mapping; a preset fills in what it leaves out.
#[derive(Debug, Default)]
pub(super) struct MappingFields {
    pub preset: Option<String>,
    pub start_tool: Option<String>,
    pub reply_tool: Option<String>,
    pub prompt_argument: Option<String>,
    pub session_argument: Option<String>,
    pub session_from: Option<String>,
    pub reply_from: Option<String>,
    pub start_arguments: serde_json::Map<String, Value>,
}

impl AgentMapping {
    /// Codex's `codex mcp-server`: `codex` starts, `codex-reply` continues
    /// by `threadId`, and both answer `{threadId, content}` as structured
    /// content.
    pub fn codex() -> Self {
        Self {
            protocol: AgentProtocol::McpTools,
            start_tool: "codex".to_owned(),
            reply_tool: "codex-reply".to_owned(),
            prompt_argument: "prompt".to_owned(),
            session_argument: "threadId".to_owned(),
            session_from: "/structuredContent/threadId".to_owned(),
            reply_from: Some("/structuredContent/content".to_owned()),
            start_arguments: serde_json::Map::new(),
        }
    }

    /// Codex's `codex app-server`: a turn's result, as the bridge's
    /// `app_server` module hands it over, holds `{threadId, reply}` as
    /// structured content; the
    /// start arguments are `thread/start`'s parameters (`sandbox`,
    /// `approvalPolicy`, `model`, `config`).
    pub fn codex_app_server() -> Self {
        Self {
            protocol: AgentProtocol::CodexAppServer,
            start_tool: "thread/start".to_owned(),
            reply_tool: "turn/start".to_owned(),
            prompt_argument: "prompt".to_owned(),
            session_argument: "threadId".to_owned(),
            session_from: "/structuredContent/threadId".to_owned(),
            reply_from: Some("/structuredContent/reply".to_owned()),
            start_arguments: serde_json::Map::new(),
        }
    }

    /// The app-server mapping with the team's `thread/start` parameters,
    /// or what is wrong with the fields.
    fn app_server_from_fields(server: &str, fields: MappingFields) -> Result<Self, Vec<String>> {
        let given = [
            fields.start_tool.is_some(),
            fields.reply_tool.is_some(),
            fields.prompt_argument.is_some(),
            fields.session_argument.is_some(),
            fields.session_from.is_some(),
            fields.reply_from.is_some(),
        ];
        let mut errors: Vec<String> = TOOL_MAPPING_KEYS
            .iter()
            .zip(given)
            .filter(|(_, given)| *given)
            .map(|(key, _)| {
                format!(
                    "server `{server}`: `{key}` maps MCP tools, and the app-server protocol has none"
                )
            })
            .collect();
        for fixed in ["cwd", "threadId", "input"] {
            if fields.start_arguments.contains_key(fixed) {
                errors.push(format!(
                    "server `{server}`: `start_arguments` may not set `{fixed}`: portcullis sets it (the server's root, the session, the caller's prompt)"
                ));
            }
        }
        if errors.is_empty() {
            Ok(Self {
                start_arguments: fields.start_arguments,
                ..Self::codex_app_server()
            })
        } else {
            Err(errors)
        }
    }

    /// The mapping `fields` describe, or what is wrong with them.
    pub(super) fn from_fields(server: &str, fields: MappingFields) -> Result<Self, Vec<String>> {
        let base = match fields.preset.as_deref() {
            Some("codex") => Some(Self::codex()),
            Some("codex-app-server") => return Self::app_server_from_fields(server, fields),
            Some(other) => {
                return Err(vec![format!(
                    "server `{server}`: preset `{other}` is not known (known: {})",
                    PRESETS.join(", ")
                )]);
            }
            None => None,
        };
        let mut errors = Vec::new();
        let mut take =
            |given: Option<String>, preset: Option<String>, key: &str| match given.or(preset) {
                Some(value) if !value.trim().is_empty() => value,
                Some(_) => {
                    errors.push(format!("server `{server}`: `{key}` is empty"));
                    String::new()
                }
                None => {
                    errors.push(format!(
                        "server `{server}`: an agent needs `{key}` (or a preset: {})",
                        PRESETS.join(", ")
                    ));
                    String::new()
                }
            };
        let mapping = Self {
            protocol: AgentProtocol::McpTools,
            start_tool: take(
                fields.start_tool,
                base.as_ref().map(|b| b.start_tool.clone()),
                "start_tool",
            ),
            reply_tool: take(
                fields.reply_tool,
                base.as_ref().map(|b| b.reply_tool.clone()),
                "reply_tool",
            ),
            prompt_argument: take(
                fields.prompt_argument,
                Some(
                    base.as_ref()
                        .map_or_else(|| "prompt".to_owned(), |b| b.prompt_argument.clone()),
                ),
                "prompt_argument",
            ),
            session_argument: take(
                fields.session_argument,
                base.as_ref().map(|b| b.session_argument.clone()),
                "session_argument",
            ),
            session_from: take(
                fields.session_from,
                base.as_ref().map(|b| b.session_from.clone()),
                "session_from",
            ),
            reply_from: fields
                .reply_from
                .or_else(|| base.as_ref().and_then(|b| b.reply_from.clone())),
            start_arguments: fields.start_arguments,
        };
        errors.extend(mapping.problems(server));
        if errors.is_empty() {
            Ok(mapping)
        } else {
            Err(errors)
        }
    }

    /// What is wrong with a mapping whose keys are all given: a fixed
    /// argument where the prompt goes, a place in a result that is not a
    /// JSON pointer.
    fn problems(&self, server: &str) -> Vec<String> {
        let mut problems = Vec::new();
        if self.start_arguments.contains_key(&self.prompt_argument) {
            problems.push(format!(
                "server `{server}`: `start_arguments` may not set `{}`: the caller's prompt goes there",
                self.prompt_argument
            ));
        }
        for (key, pointer) in [
            ("session_from", Some(&self.session_from)),
            ("reply_from", self.reply_from.as_ref()),
        ] {
            if let Some(pointer) = pointer.filter(|p| !p.is_empty() && !p.starts_with('/')) {
                problems.push(format!(
                    "server `{server}`: `{key}` = `{pointer}` is not a JSON pointer such as \"/structuredContent/threadId\""
                ));
            }
        }
        problems
    }

    /// The agent tool a turn calls, and its arguments: the start tool (with
    /// the team's fixed arguments) for a new conversation, else the reply
    /// tool naming the agent's `conversation`.
    pub fn request(&self, conversation: Option<&str>, prompt: &str) -> (String, Value) {
        let mut arguments = serde_json::Map::new();
        arguments.insert(
            self.prompt_argument.clone(),
            Value::String(prompt.to_owned()),
        );
        match conversation {
            Some(conversation) => {
                arguments.insert(
                    self.session_argument.clone(),
                    Value::String(conversation.to_owned()),
                );
                (self.reply_tool.clone(), Value::Object(arguments))
            }
            None => {
                for (name, value) in &self.start_arguments {
                    arguments
                        .entry(name.clone())
                        .or_insert_with(|| value.clone());
                }
                (self.start_tool.clone(), Value::Object(arguments))
            }
        }
    }

    /// The conversation id in a result, when it has one: a non-empty
    /// string, or a number.
    pub fn session_in(&self, result: &Value) -> Option<String> {
        match result.pointer(&self.session_from)? {
            Value::String(id) if !id.is_empty() => Some(id.clone()),
            Value::Number(id) => Some(id.to_string()),
            _ => None,
        }
    }

    /// The agent's reply in a result: the string at `reply_from`, or the
    /// result's text content joined by newlines.
    pub fn reply_in(&self, result: &Value) -> String {
        if let Some(reply) = self
            .reply_from
            .as_deref()
            .and_then(|pointer| result.pointer(pointer))
            .and_then(Value::as_str)
        {
            return reply.to_owned();
        }
        result
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|item| item.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|item| item.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_codex_preset_reads_codex_results() {
        let codex = AgentMapping::codex();
        let result = json!({"content": [{"type": "text", "text": "hi"}],
            "structuredContent": {"threadId": "t-1", "content": "hello"}});
        assert_eq!(codex.session_in(&result).as_deref(), Some("t-1"));
        assert_eq!(codex.reply_in(&result), "hello");
        assert_eq!(codex.session_in(&json!({"content": []})), None);
        assert_eq!(
            codex.reply_in(&json!({"content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]})),
            "a\nb"
        );
    }

    #[test]
    fn a_turn_starts_with_the_fixed_arguments_and_continues_by_id() {
        let mut codex = AgentMapping::codex();
        codex
            .start_arguments
            .insert("sandbox".into(), json!("read-only"));
        assert_eq!(
            codex.request(None, "hi"),
            (
                "codex".to_owned(),
                json!({"prompt": "hi", "sandbox": "read-only"})
            )
        );
        assert_eq!(
            codex.request(Some("t-1"), "more"),
            (
                "codex-reply".to_owned(),
                json!({"prompt": "more", "threadId": "t-1"})
            )
        );
    }

    #[test]
    fn a_mapping_is_a_preset_with_overrides_or_complete() {
        let overridden = AgentMapping::from_fields(
            "a",
            MappingFields {
                preset: Some("codex".into()),
                reply_tool: Some("continue".into()),
                ..MappingFields::default()
            },
        )
        .unwrap();
        assert_eq!(overridden.reply_tool, "continue");
        assert_eq!(overridden.start_tool, "codex");
        let errors = AgentMapping::from_fields("a", MappingFields::default()).unwrap_err();
        assert!(
            errors.iter().any(|e| e.contains("`start_tool`")),
            "{errors:?}"
        );
        assert!(!errors.iter().any(|e| e.contains("prompt_argument")));
        let unknown = AgentMapping::from_fields(
            "a",
            MappingFields {
                preset: Some("claude".into()),
                ..MappingFields::default()
            },
        )
        .unwrap_err();
        assert!(unknown[0].contains("preset `claude`"), "{unknown:?}");
        let pointer = AgentMapping::from_fields(
            "a",
            MappingFields {
                preset: Some("codex".into()),
                session_from: Some("threadId".into()),
                ..MappingFields::default()
            },
        )
        .unwrap_err();
        assert!(pointer[0].contains("not a JSON pointer"), "{pointer:?}");
    }

    #[test]
    fn the_app_server_preset_takes_thread_parameters_and_refuses_tool_keys() {
        let mut start_arguments = serde_json::Map::new();
        start_arguments.insert("sandbox".into(), json!("read-only"));
        let mapping = AgentMapping::from_fields(
            "a",
            MappingFields {
                preset: Some("codex-app-server".into()),
                start_arguments: start_arguments.clone(),
                ..MappingFields::default()
            },
        )
        .unwrap();
        assert_eq!(mapping.protocol, AgentProtocol::CodexAppServer);
        assert_eq!(mapping.start_arguments, start_arguments);
        let result = json!({"structuredContent": {"threadId": "t-9", "reply": "done"}});
        assert_eq!(mapping.session_in(&result).as_deref(), Some("t-9"));
        assert_eq!(mapping.reply_in(&result), "done");
        start_arguments.insert("input".into(), json!([]));
        let errors = AgentMapping::from_fields(
            "a",
            MappingFields {
                preset: Some("codex-app-server".into()),
                start_tool: Some("codex".into()),
                session_from: Some("/x".into()),
                start_arguments,
                ..MappingFields::default()
            },
        )
        .unwrap_err();
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(
            errors[0].contains("`start_tool` maps MCP tools"),
            "{errors:?}"
        );
        assert!(errors[1].contains("`session_from`"), "{errors:?}");
        assert!(errors[2].contains("may not set `input`"), "{errors:?}");
    }
}
