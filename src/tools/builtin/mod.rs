//! The built-in workspace tools: one file each, with its spec (effects,
//! capabilities, input and output schemas) beside its code. Input schemas
//! are tight (lengths, bounds, no unknown properties) because they are
//! checked before the decision: anything they let through reaches the facts
//! and, if allowed, the tool.

mod delete_file;
mod edit_file;
mod list_dir;
mod read_file;
mod search;
mod write_file;

use serde_json::json;

use super::run::{Invocation, ToolFailure};
use super::spec::{Effect, PathArgument, PathRole, ToolId, ToolSpec};
use crate::keeper::Authorized;

/// The server id of the tools portcullis implements itself.
pub const BUILTIN_SERVER: &str = "builtin";

/// Longest path an argument may hold, in bytes (Linux PATH_MAX).
const MAX_PATH_LENGTH: u64 = 4096;
/// Largest text `write_file` and `edit_file` accept in one call.
const MAX_CONTENT_LENGTH: u64 = 1024 * 1024;
/// Largest file `read_file`, `edit_file` and `search` read.
const MAX_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// The built-in tools, as a closed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    ReadFile,
    ListDir,
    Search,
    WriteFile,
    EditFile,
    DeleteFile,
}

impl Builtin {
    pub const ALL: [Builtin; 6] = [
        Builtin::ReadFile,
        Builtin::ListDir,
        Builtin::Search,
        Builtin::WriteFile,
        Builtin::EditFile,
        Builtin::DeleteFile,
    ];

    pub fn spec(self) -> ToolSpec {
        match self {
            Builtin::ReadFile => read_file::spec(),
            Builtin::ListDir => list_dir::spec(),
            Builtin::Search => search::spec(),
            Builtin::WriteFile => write_file::spec(),
            Builtin::EditFile => edit_file::spec(),
            Builtin::DeleteFile => delete_file::spec(),
        }
    }

    /// Runs the tool. Blocking: call it off the async runtime. Only the
    /// keeper holds an [`Authorized`], made once an allow is recorded.
    pub fn run(
        self,
        call: &mut Invocation<'_>,
        _authorized: &Authorized,
    ) -> Result<serde_json::Value, ToolFailure> {
        match self {
            Builtin::ReadFile => read_file::run(call),
            Builtin::ListDir => list_dir::run(call),
            Builtin::Search => search::run(call),
            Builtin::WriteFile => write_file::run(call),
            Builtin::EditFile => edit_file::run(call),
            Builtin::DeleteFile => delete_file::run(call),
        }
    }
}

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

struct SpecParts<'a> {
    name: &'a str,
    description: &'a str,
    effects: &'a [Effect],
    required_capabilities: &'a [&'a str],
    path_arguments: Vec<PathArgument>,
    input_schema: serde_json::Value,
    output_schema: serde_json::Value,
    redact: &'a [&'a str],
}

fn spec(parts: SpecParts<'_>) -> ToolSpec {
    ToolSpec {
        id: ToolId::new(BUILTIN_SERVER, parts.name),
        description: parts.description.to_owned(),
        effects: parts.effects.to_vec(),
        required_capabilities: parts
            .required_capabilities
            .iter()
            .map(|c| (*c).to_owned())
            .collect(),
        path_arguments: parts.path_arguments,
        input_schema: parts.input_schema,
        output_schema: parts.output_schema,
        redact: parts.redact.iter().map(|r| (*r).to_owned()).collect(),
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use std::path::Path;

    use serde_json::Value;

    use super::Builtin;
    use crate::facts::{PathClasses, Root, Transport, tool_call_facts};
    use crate::tools::run::{CancelFlag, Invocation, Progress, ToolFailure};

    /// Runs a built-in tool on `root` as the server would after an allow.
    pub fn run(tool: Builtin, root: &Path, arguments: Value) -> Result<Value, ToolFailure> {
        run_with(tool, root, arguments, &CancelFlag::default()).0
    }

    pub fn run_with(
        tool: Builtin,
        root: &Path,
        arguments: Value,
        cancel: &CancelFlag,
    ) -> (Result<Value, ToolFailure>, Vec<Progress>) {
        let root = Root::new(root).unwrap();
        let spec = tool.spec();
        let classes = PathClasses::parse_recorded("c", "[x]\nglobs = [\"x\"]").unwrap();
        let facts = tool_call_facts(
            &spec.path_arguments,
            &arguments,
            &root,
            &classes,
            Transport::Cli,
        )
        .unwrap();
        let mut seen = Vec::new();
        let mut progress = |p: Progress| seen.push(p);
        let mut call = Invocation {
            root: &root,
            arguments: &arguments,
            paths: &facts.paths,
            cancel,
            progress: &mut progress,
            may_read: &|_, _| true,
            deadline: None,
        };
        let result = tool.run(&mut call, &crate::keeper::Authorized::for_tests());
        (result, seen)
    }
}
