//! `write_file`: creates or replaces one file inside the root, by a
//! temporary file renamed in the opened folder, never through a symlink.

use serde_json::json;

use super::{MAX_CONTENT_LENGTH, SpecParts, path_argument, path_property};
use crate::tools::confined;
use crate::tools::run::{Invocation, ToolFailure};
use crate::tools::spec::{Effect, PathRole, ToolSpec};

pub fn spec() -> ToolSpec {
    super::spec(SpecParts {
        name: "write_file",
        description: "Create or replace a whole UTF-8 text file inside the workspace, atomically \
             (missing folders are created). Use `edit_file` to change part of an existing file.",
        effects: &[Effect::Write],
        required_capabilities: &["write"],
        path_arguments: vec![path_argument("path", PathRole::Write, None)],
        input_schema: json!({
            "type": "object",
            "properties": {
                "path": path_property("File to write, relative to the workspace root."),
                "content": {"type": "string", "maxLength": MAX_CONTENT_LENGTH,
                            "description": "The complete new content."}
            },
            "required": ["path", "content"],
            "additionalProperties": false
        }),
        output_schema: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "bytes": {"type": "integer"}},
            "required": ["path", "bytes"]
        }),
        redact: &["content"],
    })
}

pub fn run(call: &mut Invocation<'_>) -> Result<serde_json::Value, ToolFailure> {
    let decided = call.path("path")?;
    let content = call.string("content").ok_or(ToolFailure::Internal)?;
    confined::replace_file(call.root, decided, content)?;
    Ok(json!({"path": call.display(&decided.canonical), "bytes": content.len()}))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use serde_json::json;

    use crate::tools::builtin::Builtin;
    use crate::tools::builtin::test_support::run;
    use crate::tools::run::ToolFailure;

    #[test]
    fn writes_a_new_file_in_new_folders_and_replaces_an_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(
            Builtin::WriteFile,
            dir.path(),
            json!({"path": "a/b/c.txt", "content": "hi"}),
        )
        .unwrap();
        assert_eq!(out, json!({"path": "a/b/c.txt", "bytes": 2}));
        assert_eq!(
            fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "hi"
        );
        run(
            Builtin::WriteFile,
            dir.path(),
            json!({"path": "a/b/c.txt", "content": "bye"}),
        )
        .unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "bye"
        );
        // No temporary files left behind.
        assert_eq!(fs::read_dir(dir.path().join("a/b")).unwrap().count(), 1);
    }

    #[test]
    fn refuses_to_replace_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        assert_eq!(
            run(
                Builtin::WriteFile,
                dir.path(),
                json!({"path": "d", "content": ""})
            ),
            Err(ToolFailure::NotAFile)
        );
    }
}
