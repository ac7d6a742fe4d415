//! One harness event, decided: the event's tool mapped to a portcullis
//! request, decided and recorded by the keeper, and the decision turned
//! into the harness's answer. Every path out of here is an answer, and any
//! failure is a deny with its reason.

use serde_json::Value;

use super::answer::{HookAnswer, Permission};
use super::event::PreToolUse;
use super::patch::{FileChange, PatchError, patch_files};
use super::paths::judged_input;
use super::rewrite::CommandRewrite;
use crate::keeper::{GateFailure, HarnessCall, HarnessVerdict, Keeper};
use crate::pdp::{Decision, Outcome};
use crate::tools::{HARNESS_SERVER, Registry, ToolId};

/// Which harness sent the event: they name their tools differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Harness {
    ClaudeCode,
    Codex,
}

/// Where an event goes: the command gate, a Codex patch (file by file),
/// one harness tool, or a tool of an MCP server the harness connects to.
enum Route<'a> {
    Command,
    Patch,
    Tool(&'a str),
    Mcp(ToolId),
}

fn route(harness: Harness, tool: &str) -> Route<'_> {
    match (harness, tool) {
        (_, "Bash") | (Harness::Codex, "shell") => Route::Command,
        (Harness::Codex, "apply_patch") => Route::Patch,
        (_, tool) => match mcp_tool(tool) {
            Some(id) => Route::Mcp(id),
            None => Route::Tool(tool),
        },
    }
}

/// The harness tools deciding this event can involve: the registry a hook
/// process needs (see `Registry::harness_named`). An MCP tool is none of
/// them.
pub fn tools_needed(harness: Harness, event: &PreToolUse) -> Vec<&str> {
    match route(harness, &event.tool_name) {
        Route::Command | Route::Mcp(_) => Vec::new(),
        Route::Patch => FileChange::TOOLS.to_vec(),
        Route::Tool(tool) => vec![tool],
    }
}

/// `mcp__<server>__<tool>` names a tool of an MCP server the harness
/// connects to itself: to portcullis, the downstream tool `server/tool`.
pub fn mcp_tool(tool: &str) -> Option<ToolId> {
    let rest = tool.strip_prefix("mcp__")?;
    let (server, name) = rest.split_once("__")?;
    Some(ToolId::new(server, name))
}

/// Decides one event, with a keeper built on a harness registry holding
/// at least `tools_needed`.
/// `rewrite`, when the harness can run a changed command, has an allowed
/// or approved shell command run through `portcullis exec`.
pub async fn decide(
    keeper: &Keeper,
    harness: Harness,
    event: &PreToolUse,
    rewrite: Option<&CommandRewrite>,
) -> HookAnswer {
    let registry = keeper.registry();
    let request_id = event.tool_use_id.as_deref().unwrap_or("hook");
    let id = match route(harness, &event.tool_name) {
        Route::Command => return command(keeper, request_id, event, rewrite).await,
        Route::Patch => return patch(keeper, registry, request_id, event).await,
        Route::Tool(tool) => ToolId::new(HARNESS_SERVER, tool),
        Route::Mcp(id) => id,
    };
    let mcp = id.server() != HARNESS_SERVER;
    let verdict = harness_tool(keeper, registry, request_id, id, &event.tool_input, event).await;
    match verdict {
        // A tool of a server portcullis does not know: its effects are
        // unknown, so nothing about it can be allowed.
        Ok(HarnessVerdict::Unknown) if mcp => HookAnswer::deny(format!(
            "portcullis: `{}` is not a pinned tool of a server in servers.toml, so it is denied; declare the server and run `portcullis servers pin`",
            event.tool_name
        )),
        verdict => answer(verdict),
    }
}

async fn harness_tool(
    keeper: &Keeper,
    registry: &Registry,
    request_id: &str,
    id: ToolId,
    input: &Value,
    event: &PreToolUse,
) -> Result<HarnessVerdict, AuditFailed> {
    let paths = registry
        .get(&id)
        .map(|known| known.spec.path_arguments.as_slice())
        .unwrap_or_default();
    let judged = judged_input(input, paths, &event.cwd);
    // A harness tool is recorded by its own name (a patch's files as
    // `Write`, `Edit`, ...), an MCP tool by the name the harness gave it.
    let shown = if id.server() == HARNESS_SERVER {
        id.name().to_owned()
    } else {
        event.tool_name.clone()
    };
    keeper
        .harness_call(&HarnessCall {
            request_id,
            tool: &shown,
            id,
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
    said(decision.outcome, &decision.reason())
}

fn said(outcome: Outcome, reason: &str) -> HookAnswer {
    let verb = match outcome {
        Outcome::Allow => "allowed",
        Outcome::Ask => "needs your approval",
        Outcome::Deny => "denied",
    };
    HookAnswer {
        permission: Permission::from(outcome),
        reason: format!("portcullis: {verb}: {reason}"),
        updated_input: None,
    }
}

async fn command(
    keeper: &Keeper,
    request_id: &str,
    event: &PreToolUse,
    rewrite: Option<&CommandRewrite>,
) -> HookAnswer {
    let Some(command) = command_text(&event.tool_input) else {
        return HookAnswer::deny("portcullis: the command is missing from the tool input");
    };
    let cwd = event.cwd.to_string_lossy();
    match keeper
        .gate(request_id, &command, Some(&cwd), Some(rewrite.is_some()))
        .await
    {
        Ok(judged) => {
            let outcome = judged.decision.outcome;
            let mut answer = said(outcome, &judged.reason());
            if let Some(rewrite) = rewrite
                && outcome != Outcome::Deny
            {
                match rewrite.input(
                    &event.tool_input,
                    &command,
                    &event.cwd,
                    outcome == Outcome::Ask,
                ) {
                    Ok(input) => answer.updated_input = Some(input),
                    Err(err) => {
                        return HookAnswer::deny(format!(
                            "portcullis: the command cannot be handed to `portcullis exec`: {err}"
                        ));
                    }
                }
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
/// exactly the words that will run. Codex runs every command as `bash -lc
/// SCRIPT`: that login shell is the harness's own, started for every
/// command whatever the model asks, so the script is what is judged (a
/// login shell the model writes itself is opaque to the gate).
fn command_text(input: &Value) -> Option<String> {
    match input.get("command")? {
        Value::String(line) => Some(line.clone()),
        Value::Array(words) => {
            let words: Option<Vec<&str>> = words.iter().map(Value::as_str).collect();
            let words = words?;
            if let [shell, "-lc", script] = words.as_slice()
                && matches!(
                    *shell,
                    "bash" | "/bin/bash" | "/usr/bin/bash" | "zsh" | "/bin/zsh"
                )
            {
                return Some((*script).to_owned());
            }
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
        let verdict = harness_tool(
            keeper,
            registry,
            request_id,
            ToolId::new(HARNESS_SERVER, file.tool()),
            &input,
            event,
        )
        .await;
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
        // A patch's files are harness tools, never deferred: if one were,
        // it would count as the strictest.
        Permission::Deny | Permission::Defer => 2,
    }
}
