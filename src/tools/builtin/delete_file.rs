//! `delete_file`: removes one regular file inside the root, only if the
//! name still holds the file that was decided.

use serde_json::json;

use super::{SpecParts, path_argument, path_property};
use crate::tools::confined;
use crate::tools::run::{Invocation, ToolFailure};
use crate::tools::spec::{Effect, PathRole, ToolSpec};

pub fn spec() -> ToolSpec {
    super::spec(SpecParts {
        name: "delete_file",
        description: "Delete one file inside the workspace. It cannot be undone: use it only when \
             the file must go; folders are refused.",
        effects: &[Effect::Write, Effect::Destructive],
        required_capabilities: &["write", "destructive"],
        path_arguments: vec![path_argument("path", PathRole::Write, None)],
        input_schema: json!({
            "type": "object",
            "properties": {"path": path_property("File to delete, relative to the workspace root.")},
            "required": ["path"],
            "additionalProperties": false
        }),
        output_schema: json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "deleted": {"type": "boolean"}},
            "required": ["path", "deleted"]
        }),
        redact: &[],
    })
}

pub fn run(call: &mut Invocation<'_>) -> Result<serde_json::Value, ToolFailure> {
    let decided = call.path("path")?;
    confined::remove_file(call.root, decided)?;
    Ok(json!({"path": call.display(&decided.canonical), "deleted": true}))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use serde_json::json;

    use crate::tools::builtin::Builtin;
    use crate::tools::builtin::test_support::run;
    use crate::tools::run::ToolFailure;

    #[test]
    fn deletes_a_file_and_refuses_folders_and_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), "x").unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        let out = run(Builtin::DeleteFile, dir.path(), json!({"path": "a.txt"})).unwrap();
        assert_eq!(out, json!({"path": "a.txt", "deleted": true}));
        assert!(!dir.path().join("a.txt").exists());
        assert_eq!(
            run(Builtin::DeleteFile, dir.path(), json!({"path": "d"})),
            Err(ToolFailure::NotAFile)
        );
        assert_eq!(
            run(Builtin::DeleteFile, dir.path(), json!({"path": "a.txt"})),
            Err(ToolFailure::NotFound)
        );
    }
}
