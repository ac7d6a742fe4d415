//! The built-in workspace tools, as the registry declares them. Their input
//! schemas are tight (lengths, bounds, no unknown properties) because the
//! schema is checked before the decision: anything it lets through reaches
//! the facts and, if allowed, the tool.

use serde_json::json;

use super::spec::{Effect, PathArgument, PathRole, ToolId, ToolSpec};

/// The server id of the tools portcullis implements itself.
pub const BUILTIN_SERVER: &str = "builtin";

/// Longest path an argument may hold, in bytes (Linux PATH_MAX).
const MAX_PATH_LENGTH: u64 = 4096;
/// Largest text `write_file` and `edit_file` accept in one call.
const MAX_CONTENT_LENGTH: u64 = 1024 * 1024;

fn path_property(what: &str) -> serde_json::Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_PATH_LENGTH,
        "description": what,
    })
}

fn path_argument(name: &str, role: PathRole, default: Option<&str>) -> PathArgument {
    PathArgument {
        name: name.to_owned(),
        role,
        default: default.map(str::to_owned),
    }
}

fn tool(
    name: &str,
    description: &str,
    effects: &[Effect],
    required_capabilities: &[&str],
    path_arguments: Vec<PathArgument>,
    input_schema: serde_json::Value,
) -> ToolSpec {
    ToolSpec {
        id: ToolId::new(BUILTIN_SERVER, name),
        description: description.to_owned(),
        effects: effects.to_vec(),
        required_capabilities: required_capabilities
            .iter()
            .map(|c| (*c).to_owned())
            .collect(),
        path_arguments,
        input_schema,
    }
}

pub fn specs() -> Vec<ToolSpec> {
    vec![
        tool(
            "read_file",
            "Read a text file inside the workspace, optionally a window of lines. \
             Use it to look at a file you know the path of; use `search` to find \
             files by content and `list_dir` to find them by name.",
            &[Effect::Read],
            &["read"],
            vec![path_argument("path", PathRole::Read, None)],
            json!({
                "type": "object",
                "properties": {
                    "path": path_property("File to read, relative to the workspace root."),
                    "offset": {"type": "integer", "minimum": 0, "maximum": 100_000_000u64,
                               "description": "First line to return, counting from 0."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100_000,
                              "description": "Most lines to return."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        ),
        tool(
            "list_dir",
            "List the entries of a folder inside the workspace. Use it to find files \
             by name; do not use it to read them.",
            &[Effect::Read],
            &["read"],
            vec![path_argument("path", PathRole::Read, Some("."))],
            json!({
                "type": "object",
                "properties": {
                    "path": path_property("Folder to list, relative to the workspace root; the root if absent.")
                },
                "additionalProperties": false
            }),
        ),
        tool(
            "search",
            "Search the files below a folder for a regular expression, honouring \
             .gitignore. Use it to find where something is; use `read_file` once \
             you know the file.",
            &[Effect::Read],
            &["read"],
            vec![path_argument("path", PathRole::Read, Some("."))],
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "minLength": 1, "maxLength": 1000,
                                "description": "Regular expression (Rust regex syntax)."},
                    "path": path_property("Folder to search below, relative to the workspace root; the root if absent."),
                    "max_results": {"type": "integer", "minimum": 1, "maximum": 10_000,
                                    "description": "Stop after this many matching lines."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
        tool(
            "write_file",
            "Create or replace a whole text file inside the workspace, atomically. \
             Use `edit_file` to change part of an existing file.",
            &[Effect::Write],
            &["write"],
            vec![path_argument("path", PathRole::Write, None)],
            json!({
                "type": "object",
                "properties": {
                    "path": path_property("File to write, relative to the workspace root."),
                    "content": {"type": "string", "maxLength": MAX_CONTENT_LENGTH,
                                "description": "The complete new content."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        ),
        tool(
            "edit_file",
            "Replace one exact, unique occurrence of a string in a text file inside \
             the workspace. Fails if the old string is missing or occurs more than \
             once; use `write_file` to replace a whole file.",
            &[Effect::Read, Effect::Write],
            &["read", "write"],
            vec![path_argument("path", PathRole::ReadWrite, None)],
            json!({
                "type": "object",
                "properties": {
                    "path": path_property("File to edit, relative to the workspace root."),
                    "old_string": {"type": "string", "minLength": 1, "maxLength": MAX_CONTENT_LENGTH,
                                   "description": "Exact text to replace; must occur exactly once."},
                    "new_string": {"type": "string", "maxLength": MAX_CONTENT_LENGTH,
                                   "description": "Text to put in its place."}
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": false
            }),
        ),
    ]
}
