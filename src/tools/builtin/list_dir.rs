//! `list_dir`: lists one folder inside the root, bounded in entries and
//! time, without following symlinks.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{AtFlags, Dir, FileType, statat};
use serde_json::json;

use super::{SpecParts, path_argument, path_property};
use crate::tools::confined;
use crate::tools::run::{Invocation, ToolFailure};
use crate::tools::spec::{Effect, PathRole, ToolSpec};

/// Most entries returned; the rest are reported as truncated.
const MAX_ENTRIES: usize = 5000;

pub fn spec() -> ToolSpec {
    super::spec(SpecParts {
        name: "list_dir",
        description: "List the entries of a folder inside the workspace (name, kind, size), sorted \
             by name. Use it to find files by name; use `read_file` to read them and `search` to \
             find them by content.",
        effects: &[Effect::Read],
        required_capabilities: &["read"],
        path_arguments: vec![path_argument("path", PathRole::Read, Some("."))],
        input_schema: json!({
            "type": "object",
            "properties": {
                "path": path_property("Folder to list, relative to the workspace root; the root if absent.")
            },
            "additionalProperties": false
        }),
        output_schema: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "entries": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "kind": {"type": "string", "enum": ["file", "dir", "symlink", "other"]},
                        "size": {"type": "integer"}
                    },
                    "required": ["name", "kind", "size"]
                }},
                "truncated": {"type": "boolean"}
            },
            "required": ["path", "entries", "truncated"]
        }),
        redact: &[],
    })
}

pub fn run(call: &mut Invocation<'_>) -> Result<serde_json::Value, ToolFailure> {
    let decided = call.path("path")?;
    let path = decided.canonical.clone();
    let folder = confined::open_folder(call.root, decided)?;
    let mut listing = Dir::read_from(&folder).map_err(|_| ToolFailure::Internal)?;
    let mut entries = Vec::new();
    let mut out_of_time = false;
    while let Some(entry) = listing.read() {
        if call.cancel.is_cancelled() {
            return Err(ToolFailure::Cancelled);
        }
        if call.out_of_time() {
            out_of_time = true;
            break;
        }
        let entry = entry.map_err(|_| ToolFailure::Internal)?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        // Described relative to the opened folder, never following a link;
        // an entry gone since the listing is left out.
        let Ok(stat) = statat(&folder, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let kind = match FileType::from_raw_mode(stat.st_mode) {
            FileType::Symlink => "symlink",
            FileType::Directory => "dir",
            FileType::RegularFile => "file",
            _ => "other",
        };
        entries.push((
            name.to_string_lossy().into_owned(),
            kind,
            u64::try_from(stat.st_size).unwrap_or(0),
        ));
    }
    entries.sort();
    let truncated = out_of_time || entries.len() > MAX_ENTRIES;
    entries.truncate(MAX_ENTRIES);
    let entries: Vec<serde_json::Value> = entries
        .into_iter()
        .map(|(name, kind, size)| json!({"name": name, "kind": kind, "size": size}))
        .collect();
    Ok(json!({"path": call.display(&path), "entries": entries, "truncated": truncated}))
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use serde_json::json;

    use crate::tools::builtin::Builtin;
    use crate::tools::builtin::test_support::run;
    use crate::tools::run::ToolFailure;

    #[test]
    fn lists_sorted_entries_with_kinds() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("b.txt"), "12345").unwrap();
        fs::create_dir(dir.path().join("a")).unwrap();
        symlink("b.txt", dir.path().join("c")).unwrap();
        let out = run(Builtin::ListDir, dir.path(), json!({})).unwrap();
        assert_eq!(
            out["entries"],
            json!([
                {"name": "a", "kind": "dir", "size": out["entries"][0]["size"]},
                {"name": "b.txt", "kind": "file", "size": 5},
                {"name": "c", "kind": "symlink", "size": out["entries"][2]["size"]}
            ])
        );
        assert_eq!(out["path"], "");
    }

    #[test]
    fn refuses_a_file() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("f"), "").unwrap();
        assert_eq!(
            run(Builtin::ListDir, dir.path(), json!({"path": "f"})),
            Err(ToolFailure::NotAFolder)
        );
    }
}
