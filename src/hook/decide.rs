//! One harness event, decided: the event's tool mapped to a portcullis
//! request, decided and recorded by the keeper, and the decision turned
//! into the harness's answer. Every path out of here is an answer, and any
//! failure is a deny with its reason.

use serde_json::Value;

use super::answer::{HookAnswer, Permission};
use super::event::PreToolUse;
use super::patch::{PatchError, patch_files};
use super::paths::judged_input;
use crate::keeper::{GateFailure, HarnessCall, HarnessVerdict, Keeper};
use crate::pdp::{Decision, Outcome};
use crate::tools::{HARNESS_SERVER, Registry, ToolId};

/// Which harness sent the event: they name their tools differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Harness {
    ClaudeCode,
    Codex,
}

/// Decides one event, with a keeper built on the harness registry.
pub async fn decide(keeper: &Keeper, harness: Harness, event: &PreToolUse) -> HookAnswer {
    let registry = keeper.registry();
    let request_id = event.tool_use_id.as_deref().unwrap_or("hook");
    let tool = event.tool_name.as_str();
    if tool == "Bash" || (harness == Harness::Codex && tool == "shell") {
        return command(keeper, request_id, event).await;
    }
    if harness == Harness::Codex && tool == "apply_patch" {
        return patch(keeper, registry, request_id, event).await;
    }
    if let Some(server) = mcp_server(tool) {
        // Known downstream servers come with the downstream-servers work;
        // until then every MCP tool the harness reaches directly is unknown.
        let verdict =
            harness_tool(keeper, registry, request_id, tool, &event.tool_input, event).await;
        return match verdict {
            Ok(HarnessVerdict::Unknown) => HookAnswer::deny(format!(
                "portcullis: the MCP server `{server}` is not one portcullis knows, so its tools are denied; serve them through portcullis"
            )),
            other => answer(other),
        };
    }
    answer(harness_tool(keeper, registry, request_id, tool, &event.tool_input, event).await)
}

/// `mcp__<server>__<tool>` names a tool of an MCP server the harness
/// connects to itself.
fn mcp_server(tool: &str) -> Option<&str> {
    let rest = tool.strip_prefix("mcp__")?;
    rest.split_once("__").map(|(server, _)| server)
}

async fn harness_tool(
    keeper: &Keeper,
    registry: &Registry,
    request_id: &str,
    tool: &str,
    input: &Value,
    event: &PreToolUse,
) -> Result<HarnessVerdict, AuditFailed> {
    let paths = registry
        .get(&ToolId::new(HARNESS_SERVER, tool))
        .map(|known| known.spec.path_arguments.as_slice())
        .unwrap_or_default();
    let judged = judged_input(input, paths, &event.cwd);
    keeper
        .harness_call(&HarnessCall {
            request_id,
            tool,
            input,
            judged: &judged,
        })
        .await
        .map_err(|_| AuditFailed)
}

/// The decision could not be recorded, so it cannot stand.
struct AuditFailed;

const AUDIT_FAILED: &str =
    "portcullis: the audit log cannot be written, so nothing may run (see the hook's stderr)";

fn answer(verdict: Result<HarnessVerdict, AuditFailed>) -> HookAnswer {
    match verdict {
        Ok(HarnessVerdict::Decided(decision)) => decided(&decision),
        Ok(HarnessVerdict::Unknown) => HookAnswer::deny(
            "portcullis: this harness tool is not one portcullis knows, so it is denied",
        ),
        Ok(HarnessVerdict::Invalid(message)) => HookAnswer::deny(format!(
            "portcullis: the tool input cannot be judged: {message}"
        )),
        Err(AuditFailed) => HookAnswer::deny(AUDIT_FAILED),
    }
}

fn decided(decision: &Decision) -> HookAnswer {
    let verb = match decision.outcome {
        Outcome::Allow => "allowed",
        Outcome::Ask => "needs your approval",
        Outcome::Deny => "denied",
    };
    HookAnswer {
        permission: Permission::from(decision.outcome),
        reason: format!("portcullis: {verb}: {}", decision.reason()),
    }
}

async fn command(keeper: &Keeper, request_id: &str, event: &PreToolUse) -> HookAnswer {
    let Some(command) = command_text(&event.tool_input) else {
        return HookAnswer::deny("portcullis: the command is missing from the tool input");
    };
    let cwd = event.cwd.to_string_lossy();
    match keeper.gate(request_id, &command, Some(&cwd)).await {
        Ok(judged) => {
            let mut answer = decided(&judged.decision);
            if judged.decision.policies.is_empty() {
                answer.reason = format!(
                    "portcullis: {}: no policy allows this command without a human's approval",
                    if judged.decision.outcome == Outcome::Ask {
                        "needs your approval"
                    } else {
                        "denied"
                    }
                );
            }
            answer
        }
        Err(GateFailure::Input(err)) => {
            HookAnswer::deny(format!("portcullis: the command cannot be judged: {err}"))
        }
        Err(GateFailure::AuditUnavailable) => HookAnswer::deny(AUDIT_FAILED),
    }
}

/// The command line of a shell tool: a string (Claude Code), or argv
/// words (Codex's exec form), quoted back into one line so the gate sees
/// exactly the words that will run.
fn command_text(input: &Value) -> Option<String> {
    match input.get("command")? {
        Value::String(line) => Some(line.clone()),
        Value::Array(words) => {
            let words: Option<Vec<&str>> = words.iter().map(Value::as_str).collect();
            let words = words?;
            (!words.is_empty()).then(|| crate::facts::shell_quote(&words))
        }
        _ => None,
    }
}

/// A Codex patch: every file it adds, changes, moves or deletes is decided
/// as a write of that file; the strictest answer is the patch's.
async fn patch(
    keeper: &Keeper,
    registry: &Registry,
    request_id: &str,
    event: &PreToolUse,
) -> HookAnswer {
    let text = match event
        .tool_input
        .get("command")
        .or_else(|| event.tool_input.get("input"))
    {
        Some(Value::String(text)) => text,
        _ => return HookAnswer::deny("portcullis: the patch is missing from the tool input"),
    };
    let files = match patch_files(text) {
        Ok(files) => files,
        Err(err @ PatchError::Empty) | Err(err @ PatchError::Malformed(_)) => {
            return HookAnswer::deny(format!("portcullis: the patch cannot be judged: {err}"));
        }
    };
    let mut strictest: Option<HookAnswer> = None;
    for file in files {
        let input = serde_json::json!({"file_path": file.path});
        let verdict = harness_tool(keeper, registry, request_id, file.tool(), &input, event).await;
        let answer = answer(verdict);
        let stricter = strictest
            .as_ref()
            .is_none_or(|so_far| rank(answer.permission) > rank(so_far.permission));
        if stricter {
            strictest = Some(answer);
        }
    }
    strictest.unwrap_or_else(|| HookAnswer::deny("portcullis: the patch names no file"))
}

fn rank(permission: Permission) -> u8 {
    match permission {
        Permission::Allow => 0,
        Permission::Ask => 1,
        Permission::Deny => 2,
    }
}
