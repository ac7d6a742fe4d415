//! What a policy reads of `context.input`, and the reads no tool's type can
//! ever satisfy: a redacted argument (recorded only as a hash, so replay
//! could not rebuild the value) or one the mapping leaves out. Cedar's
//! validator rejects such a read as a missing attribute; this says why.
//!
//! Also the one scope that silently stopped matching when calls became
//! per-tool actions: `action == Action::"call_tool"`.

use serde_json::Value;

use super::ToolTypes;
use crate::tools::ToolId;

/// Why the policy (in Cedar's JSON form) reads an input attribute that a
/// tool in its scope does not show policies, if it does. With
/// `named_only`, only tools its action scope names one by one count (a
/// policy for every call may read an argument guarded by its tool).
pub fn check_reads(policy: &Value, types: &ToolTypes, named_only: bool) -> Option<String> {
    let in_scope = match scoped_tools(policy.get("action")) {
        Scoped::Named(tools) => tools,
        Scoped::All if named_only => return None,
        Scoped::All => types.iter().map(|t| t.id.clone()).collect(),
    };
    let mut reads = Vec::new();
    collect_reads(policy.get("conditions")?, &mut reads);
    let mut reasons = Vec::new();
    for read in reads {
        for tool in types.iter().filter(|t| in_scope.contains(&t.id)) {
            let under = |field: &str| read == field || read.starts_with(&format!("{field}."));
            if let Some(field) = tool.redact.iter().find(|f| under(f)) {
                reasons.push(format!(
                    "`context.input.{read}`: `{field}` of {} is not visible to policies (recorded \
                     only as its SHA-256), so no policy may read it; to let policies see it, name it \
                     in `visible` of the tool's servers.toml entry and not in `redact` (a built-in \
                     tool's never shows)",
                    tool.id
                ));
            } else if let Some(hidden) = tool.hidden.iter().find(|h| under(&h.path)) {
                reasons.push(format!(
                    "`context.input.{read}`: `{}` of {} is not visible to policies ({})",
                    hidden.path, tool.id, hidden.why
                ));
            }
        }
    }
    reasons.sort();
    reasons.dedup();
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// Whether the policy's action scope, or a condition, compares `action`
/// with `call_tool` by `==`: no call is that action any more (each is its
/// tool's action, a child of `call_tool`), so such a policy never applies.
pub fn compares_call_tool(policy: &Value) -> bool {
    let is_call_tool = |entity: Option<&Value>| {
        entity.is_some_and(|e| {
            e.get("type").and_then(Value::as_str) == Some("Portcullis::Action")
                && e.get("id").and_then(Value::as_str) == Some("call_tool")
        })
    };
    let scope = policy.get("action");
    let in_scope = scope.and_then(|s| s.get("op")).and_then(Value::as_str) == Some("==")
        && is_call_tool(scope.and_then(|s| s.get("entity")));
    in_scope
        || policy
            .get("conditions")
            .is_some_and(|c| condition_compares(c, &is_call_tool))
}

fn condition_compares(value: &Value, is_call_tool: &dyn Fn(Option<&Value>) -> bool) -> bool {
    match value {
        Value::Object(object) => {
            if let Some(Value::Object(eq)) = object.get("==") {
                let action = |side: Option<&Value>| {
                    side.and_then(|s| s.get("Var")).and_then(Value::as_str) == Some("action")
                };
                let literal = |side: Option<&Value>| {
                    is_call_tool(
                        side.and_then(|s| s.get("Value"))
                            .and_then(|v| v.get("__entity")),
                    )
                };
                let (left, right) = (eq.get("left"), eq.get("right"));
                if (action(left) && literal(right)) || (action(right) && literal(left)) {
                    return true;
                }
            }
            object.values().any(|v| condition_compares(v, is_call_tool))
        }
        Value::Array(items) => items.iter().any(|v| condition_compares(v, is_call_tool)),
        _ => false,
    }
}

/// The tools whose per-tool action a scope can match.
enum Scoped {
    All,
    Named(Vec<ToolId>),
}

fn scoped_tools(scope: Option<&Value>) -> Scoped {
    let Some(scope) = scope else {
        return Scoped::All;
    };
    let entities: Vec<&Value> = match (scope.get("entity"), scope.get("entities")) {
        (Some(entity), _) => vec![entity],
        (None, Some(Value::Array(entities))) => entities.iter().collect(),
        _ => return Scoped::All,
    };
    let mut tools = Vec::new();
    for entity in entities {
        match entity.get("id").and_then(Value::as_str) {
            Some("call_tool" | "use_tool") => return Scoped::All,
            Some(id) => {
                if let Some((server, name)) = id.split_once('/') {
                    tools.push(ToolId::new(server, name));
                }
            }
            None => {}
        }
    }
    Scoped::Named(tools)
}

/// Every attribute path read under `context.input` (by `.` or `has`).
fn collect_reads(value: &Value, reads: &mut Vec<String>) {
    match value {
        Value::Object(object) => {
            for key in [".", "has"] {
                if let Some(access) = object.get(key) {
                    // `has` may test a path at once: `context has input.content`.
                    let attrs: Vec<&str> = match access.get("attr") {
                        Some(Value::String(attr)) => vec![attr.as_str()],
                        Some(Value::Array(attrs)) => {
                            attrs.iter().filter_map(Value::as_str).collect()
                        }
                        _ => Vec::new(),
                    };
                    let left = access.get("left").and_then(context_path);
                    if let (false, Some(mut path)) = (attrs.is_empty(), left) {
                        path.extend(attrs.iter().map(|a| (*a).to_owned()));
                        if path.len() > 1 && path[0] == "input" {
                            reads.push(path[1..].join("."));
                        }
                    }
                }
            }
            object.values().for_each(|v| collect_reads(v, reads));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_reads(v, reads)),
        _ => {}
    }
}

/// The attribute path of `context.a.b`, if the expression is one.
fn context_path(expr: &Value) -> Option<Vec<String>> {
    if expr.get("Var").and_then(Value::as_str) == Some("context") {
        return Some(Vec::new());
    }
    let access = expr.get(".")?;
    let mut path = context_path(access.get("left")?)?;
    path.push(access.get("attr")?.as_str()?.to_owned());
    Some(path)
}
