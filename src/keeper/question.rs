//! The question put to a human when a call needs an approval.

use serde_json::Value;

use super::{AskedCall, Keeper};
use crate::facts::{ResolvedPath, ToolCallFacts};
use crate::pdp::Decision;
use crate::tools::RegisteredTool;

/// Longest beginning of a content argument shown, in characters (escaped);
/// its full size is always shown.
const QUESTION_CONTENT_CHARS: usize = 200;

impl Keeper {
    /// What decides the answer comes first and whole: the tool, every path
    /// as resolved (relative to the root, or absolute when outside it), and
    /// the size of every other argument with its beginning escaped and
    /// marked as content, so that no long or crafted content can push a path
    /// out of view or pose as one.
    pub(super) fn question(
        &self,
        tool: &RegisteredTool,
        arguments: &Value,
        paths: &[(String, ResolvedPath)],
        decision: &Decision,
    ) -> String {
        let mut lines = vec![format!(
            "portcullis: `{}` asks to run `{}`.",
            self.client.name,
            Self::mcp_name(&tool.spec)
        )];
        for (name, resolved) in paths {
            let shown = self.shown_path(resolved);
            lines.push(format!("  path `{name}`: {shown:?}"));
        }
        if let Value::Object(map) = arguments {
            for (name, value) in map {
                if paths.iter().any(|(path, _)| path == name) {
                    continue;
                }
                lines.push(content_line(name, value));
            }
        }
        let reasons: Vec<String> = decision
            .policies
            .iter()
            .map(|p| format!("{} ({})", p.reason, p.id))
            .collect();
        lines.push(format!(
            "It needs your approval because: {}. Approve this one call?",
            reasons.join("; ")
        ));
        lines.join("\n")
    }
}

impl Keeper {
    /// A resolved path as a human reads it: relative to the root, or
    /// absolute and marked when outside it.
    fn shown_path(&self, resolved: &ResolvedPath) -> String {
        match resolved.relative(&self.setting.root) {
            Some(relative) if relative.as_os_str().is_empty() => ".".to_owned(),
            Some(relative) => relative.display().to_string(),
            None => format!("{} (outside the root)", resolved.canonical.display()),
        }
    }

    /// The call as the approval inbox shows it: what policies see of it,
    /// and the names (only) of what they do not.
    pub(super) fn asked_call(&self, tool: &RegisteredTool, call: &ToolCallFacts) -> AskedCall {
        let (arguments, hidden) = match &call.facts.input {
            Some(input) => (
                input.values.clone(),
                input.redacted.keys().cloned().collect(),
            ),
            None => (serde_json::Map::new(), Vec::new()),
        };
        AskedCall {
            tool: tool.spec.id.clone(),
            name: Self::mcp_name(&tool.spec),
            facts: call.facts.clone(),
            paths: call
                .paths
                .iter()
                .map(|(name, resolved)| (name.clone(), self.shown_path(resolved)))
                .collect(),
            arguments,
            hidden,
        }
    }
}

fn content_line(name: &str, value: &Value) -> String {
    let text = match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let escaped = format!("{text:?}");
    let mut beginning: String = escaped.chars().take(QUESTION_CONTENT_CHARS).collect();
    if escaped.chars().count() > QUESTION_CONTENT_CHARS {
        beginning.push_str(" …");
    }
    format!(
        "  content `{name}`: {} bytes, begins [content] {beginning} [end of content]",
        text.len()
    )
}
