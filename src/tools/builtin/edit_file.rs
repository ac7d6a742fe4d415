//! `edit_file`: replaces one exact, unique piece of text in a file inside
//! the root, through the confined file access; it never follows a symlink.

use serde_json::json;

use super::{MAX_CONTENT_LENGTH, MAX_FILE_BYTES, SpecParts, path_argument, path_property};
use crate::tools::confined;
use crate::tools::run::{Invocation, ToolFailure};
use crate::tools::spec::{Effect, PathRole, ToolSpec};

pub fn spec() -> ToolSpec {
    super::spec(SpecParts {
        name: "edit_file",
        description: "Replace one exact, unique occurrence of a string in a UTF-8 text file inside \
             the workspace, atomically. Fails if old_string is missing or occurs more than once \
             (add surrounding lines to make it unique); use `write_file` to replace a whole file.",
        effects: &[Effect::Read, Effect::Write],
        required_capabilities: &["read", "write"],
        path_arguments: vec![path_argument("path", PathRole::ReadWrite, None)],
        input_schema: json!({
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
        output_schema: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "bytes": {"type": "integer"}},
            "required": ["path", "bytes"]
        }),
        redact: &["old_string", "new_string"],
    })
}

pub fn run(call: &mut Invocation<'_>) -> Result<serde_json::Value, ToolFailure> {
    let decided = call.path("path")?;
    let old = call.string("old_string").ok_or(ToolFailure::Internal)?;
    let new = call.string("new_string").ok_or(ToolFailure::Internal)?;
    let (mut file, stat) = confined::open_file(call.root, decided)?;
    let text = confined::read_text(&mut file, &stat, MAX_FILE_BYTES)?;
    match text.matches(old).count() {
        0 => return Err(ToolFailure::OldStringMissing),
        1 => {}
        n => return Err(ToolFailure::OldStringNotUnique(n)),
    }
    let edited = text.replacen(old, new, 1);
    confined::replace_file(call.root, decided, &edited)?;
    Ok(json!({"path": call.display(&decided.canonical), "bytes": edited.len()}))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use serde_json::json;

    use crate::tools::builtin::Builtin;
    use crate::tools::builtin::test_support::run;
    use crate::tools::run::ToolFailure;

    fn edit(dir: &std::path::Path, old: &str, new: &str) -> Result<serde_json::Value, ToolFailure> {
        run(
            Builtin::EditFile,
            dir,
            json!({"path": "f.rs", "old_string": old, "new_string": new}),
        )
    }

    #[test]
    fn replaces_a_unique_string() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f.rs"), "let a = 1;\nlet b = 2;\n").unwrap();
        edit(dir.path(), "b = 2", "b = 3").unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("f.rs")).unwrap(),
            "let a = 1;\nlet b = 3;\n"
        );
    }

    #[test]
    fn refuses_a_missing_or_repeated_string_and_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f.rs"), "x x\n").unwrap();
        assert_eq!(
            edit(dir.path(), "y", "z"),
            Err(ToolFailure::OldStringMissing)
        );
        assert_eq!(
            edit(dir.path(), "x", "z"),
            Err(ToolFailure::OldStringNotUnique(2))
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("f.rs")).unwrap(),
            "x x\n"
        );
    }
}
