use std::fs;

use serde_json::json;

use super::{MAX_FILE_BYTES, SpecParts, path_argument, path_property};
use crate::tools::run::{Invocation, Progress, ToolFailure};
use crate::tools::spec::{Effect, PathRole, ToolSpec};

/// Matching lines returned when the caller gives no limit.
const DEFAULT_MAX_RESULTS: u64 = 200;
/// A progress report every this many files searched.
const PROGRESS_EVERY: u64 = 64;
/// Longest line text returned per match, in characters.
const MAX_LINE_CHARS: usize = 400;
/// Largest compiled pattern accepted, so a pattern cannot exhaust memory.
const MAX_REGEX_BYTES: usize = 1 << 20;

pub fn spec() -> ToolSpec {
    super::spec(SpecParts {
        name: "search",
        description: "Search the text files below a folder of the workspace for a regular \
             expression (Rust regex syntax), honouring .gitignore and skipping hidden files. \
             Returns matching lines with their file and line number. Use it to find where \
             something is; use `read_file` once you know the file.",
        effects: &[Effect::Read],
        required_capabilities: &["read"],
        path_arguments: vec![path_argument("path", PathRole::Read, Some("."))],
        input_schema: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1, "maxLength": 1000,
                            "description": "Regular expression (Rust regex syntax)."},
                "path": path_property("Folder to search below, relative to the workspace root; the root if absent."),
                "max_results": {"type": "integer", "minimum": 1, "maximum": 10_000,
                                "description": "Stop after this many matching lines (default 200)."}
            },
            "required": ["pattern"],
            "additionalProperties": false
        }),
        output_schema: json!({
            "type": "object",
            "properties": {
                "matches": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "line": {"type": "integer"},
                        "text": {"type": "string"}
                    },
                    "required": ["path", "line", "text"]
                }},
                "files_searched": {"type": "integer"},
                "truncated": {"type": "boolean"}
            },
            "required": ["matches", "files_searched", "truncated"]
        }),
    })
}

pub fn run(call: &mut Invocation<'_>) -> Result<serde_json::Value, ToolFailure> {
    let base = call.path("path")?.canonical.clone();
    if !base.is_dir() {
        return Err(ToolFailure::NotAFolder);
    }
    let pattern = call.string("pattern").ok_or(ToolFailure::Internal)?;
    let regex = regex::RegexBuilder::new(pattern)
        .size_limit(MAX_REGEX_BYTES)
        .build()
        .map_err(|_| ToolFailure::BadPattern)?;
    let max_results = call.integer("max_results").unwrap_or(DEFAULT_MAX_RESULTS);
    let walker = ignore::WalkBuilder::new(&base)
        .require_git(false)
        .follow_links(false)
        .build();
    let mut matches = Vec::new();
    let mut files_searched = 0u64;
    let mut truncated = false;
    'files: for entry in walker {
        if call.cancel.is_cancelled() {
            return Err(ToolFailure::Cancelled);
        }
        if call.out_of_time() {
            truncated = true;
            break;
        }
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        if !(call.may_read)(path) {
            continue;
        }
        files_searched += 1;
        if files_searched.is_multiple_of(PROGRESS_EVERY) {
            (call.progress)(Progress {
                done: files_searched,
                message: format!("{files_searched} files searched"),
            });
        }
        if let Some(text) = read_if_text(path) {
            for (index, line) in text.lines().enumerate() {
                if !regex.is_match(line) {
                    continue;
                }
                if matches.len() as u64 == max_results {
                    truncated = true;
                    break 'files;
                }
                matches.push(json!({
                    "path": call.display(path),
                    "line": index + 1,
                    "text": line.chars().take(MAX_LINE_CHARS).collect::<String>(),
                }));
            }
        }
    }
    Ok(json!({"matches": matches, "files_searched": files_searched, "truncated": truncated}))
}

/// The file's text, or `None` for what search skips: unreadable, too large
/// or not UTF-8.
fn read_if_text(path: &std::path::Path) -> Option<String> {
    let meta = fs::metadata(path).ok()?;
    if meta.len() > MAX_FILE_BYTES {
        return None;
    }
    String::from_utf8(fs::read(path).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use std::fs;

    use serde_json::json;

    use crate::tools::builtin::Builtin;
    use crate::tools::builtin::test_support::{run, run_with};
    use crate::tools::run::{CancelFlag, ToolFailure};

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("src")).unwrap();
        fs::create_dir_all(dir.path().join("target")).unwrap();
        fs::write(
            dir.path().join("src/main.rs"),
            "fn main() {\n    needle();\n}\n",
        )
        .unwrap();
        fs::write(dir.path().join("target/out.rs"), "needle\n").unwrap();
        fs::write(dir.path().join(".hidden"), "needle\n").unwrap();
        fs::write(dir.path().join(".gitignore"), "target/\n").unwrap();
        dir
    }

    #[test]
    fn finds_matches_honouring_gitignore_and_skipping_hidden_files() {
        let dir = tree();
        let out = run(Builtin::Search, dir.path(), json!({"pattern": "needle"})).unwrap();
        assert_eq!(
            out["matches"],
            json!([{"path": "src/main.rs", "line": 2, "text": "    needle();"}])
        );
        assert_eq!(out["truncated"], false);
    }

    #[test]
    fn stops_at_max_results() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a"), "x\nx\nx\n").unwrap();
        let out = run(
            Builtin::Search,
            dir.path(),
            json!({"pattern": "x", "max_results": 2}),
        )
        .unwrap();
        assert_eq!(out["matches"].as_array().unwrap().len(), 2);
        assert_eq!(out["truncated"], true);
    }

    #[test]
    fn refuses_a_bad_pattern() {
        let dir = tree();
        assert_eq!(
            run(Builtin::Search, dir.path(), json!({"pattern": "("})),
            Err(ToolFailure::BadPattern)
        );
    }

    #[test]
    fn reports_progress_in_order() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..200 {
            fs::write(dir.path().join(format!("f{i}")), "x\n").unwrap();
        }
        let (out, progress) = run_with(
            Builtin::Search,
            dir.path(),
            json!({"pattern": "y"}),
            &CancelFlag::default(),
        );
        assert_eq!(out.unwrap()["files_searched"], 200);
        let done: Vec<u64> = progress.iter().map(|p| p.done).collect();
        assert_eq!(done, [64, 128, 192]);
    }

    #[test]
    fn stops_when_cancelled() {
        let dir = tree();
        let cancel = CancelFlag::default();
        cancel.cancel();
        let (out, _) = run_with(
            Builtin::Search,
            dir.path(),
            json!({"pattern": "needle"}),
            &cancel,
        );
        assert_eq!(out, Err(ToolFailure::Cancelled));
    }
}
