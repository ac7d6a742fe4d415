//! `read_file`: reads one text file inside the root, bounded in bytes,
//! from the very file that was decided.

use serde_json::json;

use super::{MAX_FILE_BYTES, SpecParts, path_argument, path_property};
use crate::tools::confined;
use crate::tools::run::{Invocation, ToolFailure};
use crate::tools::spec::{Effect, PathRole, ToolSpec};

/// Lines returned when the caller gives no limit.
const DEFAULT_LIMIT: u64 = 2000;
/// Most text returned in one call; the rest is reported as truncated.
const MAX_RETURNED_BYTES: usize = 256 * 1024;

pub fn spec() -> ToolSpec {
    super::spec(SpecParts {
        name: "read_file",
        description: "Read a UTF-8 text file inside the workspace, optionally a window of lines \
             (offset counts from 0). Use it to look at a file you know the path of; use `search` \
             to find files by content and `list_dir` to find them by name.",
        effects: &[Effect::Read],
        required_capabilities: &["read"],
        path_arguments: vec![path_argument("path", PathRole::Read, None)],
        input_schema: json!({
            "type": "object",
            "properties": {
                "path": path_property("File to read, relative to the workspace root."),
                "offset": {"type": "integer", "minimum": 0, "maximum": 100_000_000u64,
                           "description": "First line to return, counting from 0."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100_000,
                          "description": "Most lines to return (default 2000)."}
            },
            "required": ["path"],
            "additionalProperties": false
        }),
        output_schema: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "content": {"type": "string"},
                "offset": {"type": "integer"},
                "lines": {"type": "integer", "description": "Lines returned."},
                "total_lines": {"type": "integer"},
                "truncated": {"type": "boolean", "description": "More lines follow the ones returned."}
            },
            "required": ["path", "content", "offset", "lines", "total_lines", "truncated"]
        }),
        redact: &[],
    })
}

pub fn run(call: &mut Invocation<'_>) -> Result<serde_json::Value, ToolFailure> {
    let decided = call.path("path")?;
    let (mut file, stat) = confined::open_file(call.root, decided)?;
    let text = confined::read_text(&mut file, &stat, MAX_FILE_BYTES)?;
    let path = decided.canonical.clone();
    let offset = call.integer("offset").unwrap_or(0);
    let limit = call.integer("limit").unwrap_or(DEFAULT_LIMIT);
    let total_lines = text.lines().count() as u64;
    let mut content = String::new();
    let mut lines = 0u64;
    let mut truncated = false;
    for line in text
        .lines()
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
    {
        if lines == limit || content.len() + line.len() + 1 > MAX_RETURNED_BYTES {
            truncated = true;
            break;
        }
        content.push_str(line);
        content.push('\n');
        lines += 1;
    }
    Ok(json!({
        "path": call.display(&path),
        "content": content,
        "offset": offset,
        "lines": lines,
        "total_lines": total_lines,
        "truncated": truncated,
    }))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use serde_json::json;

    use crate::tools::builtin::Builtin;
    use crate::tools::builtin::test_support::run;
    use crate::tools::run::ToolFailure;

    #[test]
    fn reads_a_window_of_lines() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), "one\ntwo\nthree\nfour\n").unwrap();
        let out = run(
            Builtin::ReadFile,
            dir.path(),
            json!({"path": "a.txt", "offset": 1, "limit": 2}),
        )
        .unwrap();
        assert_eq!(out["content"], "two\nthree\n");
        assert_eq!(out["total_lines"], 4);
        assert_eq!(out["truncated"], true);
        assert_eq!(out["path"], "a.txt");
        let all = run(Builtin::ReadFile, dir.path(), json!({"path": "a.txt"})).unwrap();
        assert_eq!(all["truncated"], false);
        assert_eq!(all["lines"], 4);
    }

    #[test]
    fn refuses_missing_binary_and_folders() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("bin"), [0xff, 0xfe, 0x00]).unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        assert_eq!(
            run(Builtin::ReadFile, dir.path(), json!({"path": "nope"})),
            Err(ToolFailure::NotFound)
        );
        assert_eq!(
            run(Builtin::ReadFile, dir.path(), json!({"path": "bin"})),
            Err(ToolFailure::NotText)
        );
        assert_eq!(
            run(Builtin::ReadFile, dir.path(), json!({"path": "sub"})),
            Err(ToolFailure::NotAFile)
        );
    }
}
