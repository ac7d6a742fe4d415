//! `search`: finds lines matching a regular expression in the text files
//! below a folder, walking by handles, bounded in files, bytes and time.

use serde_json::json;

use super::{MAX_FILE_BYTES, SpecParts, path_argument, path_property};
use crate::tools::confined::{self, Found, WalkEnd};
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
        redact: &[],
    })
}

pub fn run(call: &mut Invocation<'_>) -> Result<serde_json::Value, ToolFailure> {
    let start = call.path("path")?.clone();
    let pattern = call.string("pattern").ok_or(ToolFailure::Internal)?;
    let regex = regex::RegexBuilder::new(pattern)
        .size_limit(MAX_REGEX_BYTES)
        .build()
        .map_err(|_| ToolFailure::BadPattern)?;
    let max_results = call.integer("max_results").unwrap_or(DEFAULT_MAX_RESULTS);
    let mut matches = Vec::new();
    let mut files_searched = 0u64;
    let mut full = false;
    let cancel = call.cancel;
    let deadline = call.deadline;
    let out_of_time = || deadline.is_some_and(|deadline| std::time::Instant::now() >= deadline);
    let stop = || cancel.is_cancelled() || out_of_time();
    let may_read = call.may_read;
    let root = call.root;
    let progress = &mut *call.progress;
    let end = confined::walk_files(root, &start, &stop, &mut |mut found: Found<'_>| {
        if !may_read(found.path, found.stat.st_nlink > 1) {
            return true;
        }
        files_searched += 1;
        if files_searched.is_multiple_of(PROGRESS_EVERY) {
            progress(Progress {
                done: files_searched as f64,
                total: None,
                message: format!("{files_searched} files searched"),
            });
        }
        // Unreadable, too large or not UTF-8: skipped.
        let Ok(text) = confined::read_text(&mut found.file, &found.stat, MAX_FILE_BYTES) else {
            return true;
        };
        for (index, line) in text.lines().enumerate() {
            if !regex.is_match(line) {
                continue;
            }
            if matches.len() as u64 == max_results {
                full = true;
                return false;
            }
            matches.push(json!({
                "path": display(root, found.path),
                "line": index + 1,
                "text": line.chars().take(MAX_LINE_CHARS).collect::<String>(),
            }));
        }
        true
    })?;
    if cancel.is_cancelled() {
        return Err(ToolFailure::Cancelled);
    }
    let truncated = full || end == WalkEnd::Stopped;
    Ok(json!({"matches": matches, "files_searched": files_searched, "truncated": truncated}))
}

fn display(root: &crate::facts::Root, path: &std::path::Path) -> String {
    path.strip_prefix(root.path())
        .map_or_else(|_| String::new(), |p| p.display().to_string())
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
        let done: Vec<f64> = progress.iter().map(|p| p.done).collect();
        assert_eq!(done, [64.0, 128.0, 192.0]);
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
