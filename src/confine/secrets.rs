//! The secret-class files and folders outside the root that a confined
//! command must not read: the user's credentials in their home folder and
//! the system's own.
//!
//! Only places where credentials live are listed (the home folder, its
//! dot-folders, `.config` and `.local/share`, `/etc/ssh` and a few fixed
//! system paths), each held to the secret class: listing every folder of
//! the machine would cost more than the command.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::facts::PathClasses;

/// System paths the built-in secret class names that exist on most
/// machines.
const SYSTEM: [&str; 9] = [
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/run/secrets",
    "/var/run/secrets",
];

/// Secret-class paths outside `root` (and not holding it), by the table
/// `classes`, under `home` and in the system's fixed places.
pub fn outside(root: &Path, home: Option<&Path>, classes: &PathClasses) -> Vec<PathBuf> {
    let mut candidates: Vec<PathBuf> = SYSTEM.iter().map(PathBuf::from).collect();
    candidates.extend(children(Path::new("/etc/ssh")));
    if let Some(home) = home {
        for entry in children(home) {
            let dot_folder = entry
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with('.'))
                && entry.is_dir();
            if dot_folder {
                candidates.extend(children(&entry));
            }
            candidates.push(entry);
        }
        candidates.extend(children(&home.join(".config")).flat_map(|c| children(&c)));
        candidates.extend(children(&home.join(".local/share")));
    }
    let mut hidden: Vec<PathBuf> = candidates
        .into_iter()
        .filter(|path| !path.starts_with(root) && !root.starts_with(path))
        .filter(|path| {
            path.symlink_metadata()
                .is_ok_and(|m| m.is_file() || m.is_dir())
        })
        .filter(|path| {
            let mut found = BTreeSet::new();
            classes.classify_into(path, &mut found);
            found.contains("secrets")
        })
        .collect();
    hidden.sort();
    hidden.dedup();
    // A folder hidden whole hides what is in it.
    let folders: Vec<PathBuf> = hidden.iter().filter(|p| p.is_dir()).cloned().collect();
    hidden.retain(|path| !folders.iter().any(|f| path != f && path.starts_with(f)));
    hidden
}

/// Most entries of a root looked through for secrets: past it the root is
/// too large to look through at a server's start, and what was found is
/// covered (the path classes still judge every path a tool is given).
const MOST_ENTRIES: usize = 200_000;

/// Secret-class files and folders beneath `root`, not following symbolic
/// links, not inside VCS metadata.
pub fn inside(root: &Path, classes: &PathClasses) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_owned()];
    let mut seen = 0;
    while let Some(folder) = pending.pop() {
        for entry in fs::read_dir(&folder).into_iter().flatten().flatten() {
            seen += 1;
            if seen > MOST_ENTRIES {
                tracing::warn!(root = %root.display(), "the root holds more than {MOST_ENTRIES} entries: secrets past them are not covered for its server");
                return found;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if crate::facts::is_vcs_name(&entry.file_name()) {
                continue;
            }
            let mut classes_of = BTreeSet::new();
            classes.classify_into(&path, &mut classes_of);
            if classes_of.contains("secrets") && (kind.is_file() || kind.is_dir()) {
                found.push(path);
            } else if kind.is_dir() {
                pending.push(path);
            }
        }
    }
    found.sort();
    found
}

fn children(folder: &Path) -> impl Iterator<Item = PathBuf> + use<> {
    fs::read_dir(folder)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::BUILTIN_PATH_CLASSES;

    #[test]
    fn credentials_in_the_home_folder_are_found_and_the_root_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let home = fs::canonicalize(dir.path()).unwrap();
        for folder in [".ssh", ".aws", ".config/gh", ".kube", "ws/.ssh", "notes"] {
            fs::create_dir_all(home.join(folder)).unwrap();
        }
        for file in [
            ".ssh/id_rsa",
            ".config/gh/hosts.yml",
            ".kube/config",
            ".netrc",
            ".bash_history",
            "notes/todo.txt",
            ".bashrc",
        ] {
            fs::write(home.join(file), "x").unwrap();
        }
        let classes = PathClasses::parse("path_classes.toml", BUILTIN_PATH_CLASSES).unwrap();
        let found = outside(&home.join("ws"), Some(&home), &classes);
        let mine: Vec<&Path> = found
            .iter()
            .filter_map(|p| p.strip_prefix(&home).ok())
            .collect();
        assert_eq!(
            mine,
            [
                ".aws",
                ".bash_history",
                ".config/gh/hosts.yml",
                ".kube/config",
                ".netrc",
                ".ssh"
            ]
            .map(Path::new)
        );
    }
}
