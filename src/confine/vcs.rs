//! Finding the VCS metadata a confined command must not change: every
//! folder git, Mercurial and the others would use, however deep, and the
//! git directories that go by other names.

use std::fs;
use std::path::{Path, PathBuf};

use crate::facts::{is_git_dir, is_vcs_name, repository_file};

/// VCS metadata beneath `root`: folders and files named as metadata, git
/// directories recognised by content, and the targets of `.git` files
/// (`gitdir: ...`). Symbolic links are not followed: a link's target is
/// either beneath the root (found there) or outside it (read-only anyway).
pub fn metadata_in(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_owned()];
    while let Some(folder) = pending.pop() {
        if folder != root && is_git_dir(&folder) {
            found.push(folder);
            continue;
        }
        let Ok(entries) = fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if is_vcs_name(&entry.file_name()) {
                if kind.is_file()
                    && let Some(target) = gitdir_target(&path)
                {
                    found.push(target);
                }
                if kind.is_dir() || kind.is_file() {
                    found.push(path);
                }
            } else if kind.is_dir() {
                pending.push(path);
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// More than a `.git` file holds.
const MAX_DOT_GIT_BYTES: u64 = 64 << 10;

/// The git directory a `.git` file points to, when it exists. The file is
/// the workspace's: read without waiting on it, and no more than a `.git`
/// file holds.
fn gitdir_target(file: &Path) -> Option<PathBuf> {
    let text = repository_file::read_text(file, MAX_DOT_GIT_BYTES).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let target = file.parent()?.join(target);
    fs::canonicalize(target).ok().filter(|t| t.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_found_by_name_by_content_and_by_pointer() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        for folder in [
            ".git/objects",
            "vendor/lib/.hg",
            "evil/objects",
            "evil/refs",
            "modules/sub",
            "plain/src",
        ] {
            fs::create_dir_all(root.join(folder)).unwrap();
        }
        fs::write(root.join("evil/HEAD"), "ref: refs/heads/main\n").unwrap();
        fs::create_dir_all(root.join(".git/modules/sub")).unwrap();
        fs::write(
            root.join("modules/sub/.git"),
            "gitdir: ../../.git/modules/sub\n",
        )
        .unwrap();
        let found = metadata_in(&root);
        let expected: Vec<PathBuf> = [
            ".git",
            ".git/modules/sub",
            "evil",
            "modules/sub/.git",
            "vendor/lib/.hg",
        ]
        .iter()
        .map(|p| root.join(p))
        .collect();
        assert_eq!(found, expected);
    }
}
