//! Walking a decided folder by handles, for `search`.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, Stat, fstat, openat, statat};

use super::open::{failure, kind_of, open_beneath, open_folder};
use crate::facts::{ResolvedPath, Root};
use crate::tools::run::ToolFailure;

/// Deepest folder the walk enters below its start; each level holds one
/// open handle while the walk is below it.
const MAX_DEPTH: usize = 128;
/// Largest ignore file read; a larger one is skipped as if absent.
const MAX_IGNORE_FILE_BYTES: u64 = 1024 * 1024;
/// The files that say what a walk skips, in a folder, most binding first.
const IGNORE_FILES: [&str; 2] = [".ignore", ".gitignore"];

/// A regular file the walk found, opened: its path (for facts and display),
/// the handle, and what `fstat` on the handle says.
pub struct Found<'a> {
    pub path: &'a Path,
    pub file: File,
    pub stat: Stat,
}

/// How a walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkEnd {
    /// Every file was visited.
    Finished,
    /// `stop` said so, or a visit did.
    Stopped,
}

/// One folder the walk is in.
struct Level {
    folder: OwnedFd,
    path: PathBuf,
    entries: std::vec::IntoIter<(OsString, FileType)>,
    ignores: Vec<Gitignore>,
}

/// Visits every regular, non-hidden, not ignored file below a decided
/// folder, in name order, each opened relative to its folder's handle with
/// `O_NOFOLLOW | O_NONBLOCK`. Folders are entered by handle the same way, so
/// a symlink (or a folder swapped for one) is never followed, and what is
/// visited is the object found under that name in a folder inside the walk.
/// `.gitignore` and `.ignore` files of the start folder, of every folder
/// walked, and of the folders between the root and the start are honoured.
/// `stop` is asked before each entry; `visit` returns whether to go on.
pub fn walk_files(
    root: &Root,
    start: &ResolvedPath,
    stop: &dyn Fn() -> bool,
    visit: &mut dyn FnMut(Found<'_>) -> bool,
) -> Result<WalkEnd, ToolFailure> {
    let folder = open_folder(root, start)?;
    let mut ignores = folder_ignores(folder.as_fd(), &start.canonical);
    ignores.extend(ancestor_ignores(root, start));
    let mut levels = vec![Level {
        entries: sorted_entries(folder.as_fd())?,
        folder,
        path: start.canonical.clone(),
        ignores,
    }];
    while let Some(level) = levels.last_mut() {
        let Some((name, mut kind)) = level.entries.next() else {
            levels.pop();
            continue;
        };
        if stop() {
            return Ok(WalkEnd::Stopped);
        }
        if name.as_bytes().starts_with(b".") {
            continue;
        }
        if kind == FileType::Unknown {
            match statat(&level.folder, &name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => kind = kind_of(&stat),
                Err(_) => continue,
            }
        }
        let path = level.path.join(&name);
        if !(kind.is_dir() || kind.is_file()) || is_ignored(&levels, &path, kind.is_dir()) {
            continue;
        }
        let Some(level) = levels.last() else { break };
        if kind.is_dir() {
            if levels.len() <= MAX_DEPTH
                && let Some(below) = enter(level, &name, path)
            {
                levels.push(below);
            }
            continue;
        }
        let Some((file, stat)) = open_file(level, &name) else {
            continue;
        };
        let found = Found {
            path: &path,
            file,
            stat,
        };
        if !visit(found) {
            return Ok(WalkEnd::Stopped);
        }
    }
    Ok(WalkEnd::Finished)
}

/// The folder `name` of `level`, entered by handle, with its entries and
/// ignore files; `None` when it is gone or was swapped for a symlink since
/// it was listed.
fn enter(level: &Level, name: &OsStr, path: PathBuf) -> Option<Level> {
    let flags =
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let folder = openat(&level.folder, name, flags, Mode::empty()).ok()?;
    let entries = sorted_entries(folder.as_fd()).ok()?;
    let ignores = folder_ignores(folder.as_fd(), &path);
    Some(Level {
        folder,
        path,
        entries,
        ignores,
    })
}

/// The file `name` of `level`, opened without following a link, with its
/// status; `None` when it is gone, or something else than a file (a FIFO,
/// a device) by the time it opened: skipped without a read.
fn open_file(level: &Level, name: &OsStr) -> Option<(File, Stat)> {
    let flags =
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = openat(&level.folder, name, flags, Mode::empty()).ok()?;
    let stat = fstat(&fd).ok()?;
    kind_of(&stat).is_file().then(|| (File::from(fd), stat))
}

fn is_ignored(levels: &[Level], path: &Path, is_dir: bool) -> bool {
    for level in levels.iter().rev() {
        for ignore in &level.ignores {
            match ignore.matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
    }
    false
}

/// A folder's entries with their kinds as the folder reports them, sorted
/// by name.
fn sorted_entries(
    folder: BorrowedFd<'_>,
) -> Result<std::vec::IntoIter<(OsString, FileType)>, ToolFailure> {
    let mut dir = Dir::read_from(folder).map_err(failure)?;
    let mut entries = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry.map_err(failure)?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        entries.push((
            OsString::from(std::ffi::OsStr::from_bytes(name)),
            entry.file_type(),
        ));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(entries.into_iter())
}

/// The ignore files of one opened folder, each read by handle.
fn folder_ignores(folder: BorrowedFd<'_>, path: &Path) -> Vec<Gitignore> {
    IGNORE_FILES
        .iter()
        .filter_map(|name| {
            let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = openat(folder, *name, flags, Mode::empty()).ok()?;
            let stat = fstat(&fd).ok()?;
            if !kind_of(&stat).is_file() {
                return None;
            }
            let mut text = String::new();
            File::from(fd)
                .take(MAX_IGNORE_FILE_BYTES)
                .read_to_string(&mut text)
                .ok()?;
            let mut builder = GitignoreBuilder::new(path);
            for line in text.lines() {
                // A line git would not understand is skipped, as git does.
                let _ = builder.add_line(None, line);
            }
            builder.build().ok().filter(|ignore| !ignore.is_empty())
        })
        .collect()
}

/// The ignore files of the folders from the root down to (not including)
/// the start folder, outermost first, so the start's own rules win.
fn ancestor_ignores(root: &Root, start: &ResolvedPath) -> Vec<Gitignore> {
    let Some(relative) = start.relative(root) else {
        return Vec::new();
    };
    let mut ancestors: Vec<&Path> = relative.ancestors().skip(1).collect();
    ancestors.reverse();
    let mut ignores: Vec<Gitignore> = Vec::new();
    for ancestor in ancestors {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK;
        let Ok(folder) = open_beneath(root.handle(), ancestor, flags) else {
            continue;
        };
        let mut found = folder_ignores(folder.as_fd(), &root.path().join(ancestor));
        // Matched innermost first, like the walk's levels.
        found.append(&mut ignores);
        ignores = found;
    }
    ignores
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::facts::resolve;

    fn visited(root: &Root, start: &str) -> Vec<String> {
        let start = resolve(root, start).unwrap();
        let mut seen = Vec::new();
        let end = walk_files(root, &start, &|| false, &mut |found| {
            seen.push(
                found
                    .path
                    .strip_prefix(root.path())
                    .unwrap()
                    .display()
                    .to_string(),
            );
            true
        })
        .unwrap();
        assert_eq!(end, WalkEnd::Finished);
        seen
    }

    #[test]
    fn visits_files_in_order_skipping_hidden_ignored_and_linked_ones() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir_all(ws.join("src/deep")).unwrap();
        fs::create_dir_all(ws.join("target")).unwrap();
        fs::create_dir_all(dir.path().join("outside")).unwrap();
        fs::write(dir.path().join("outside/o.txt"), "o").unwrap();
        fs::write(ws.join("b.txt"), "").unwrap();
        fs::write(ws.join("a.txt"), "").unwrap();
        fs::write(ws.join(".env"), "").unwrap();
        fs::write(ws.join("src/deep/x.rs"), "").unwrap();
        fs::write(ws.join("src/skip.log"), "").unwrap();
        fs::write(ws.join("src/keep.log"), "").unwrap();
        fs::write(ws.join("target/t"), "").unwrap();
        fs::write(ws.join(".gitignore"), "target/\n*.log\n").unwrap();
        fs::write(ws.join("src/.ignore"), "!keep.log\n").unwrap();
        symlink(dir.path().join("outside"), ws.join("out")).unwrap();
        symlink(dir.path().join("outside/o.txt"), ws.join("o.txt")).unwrap();
        let root = Root::new(&ws).unwrap();
        assert_eq!(
            visited(&root, "."),
            ["a.txt", "b.txt", "src/deep/x.rs", "src/keep.log"]
        );
        // Rules of the folders above the start still hold.
        assert_eq!(visited(&root, "src"), ["src/deep/x.rs", "src/keep.log"]);
    }

    #[test]
    fn a_fifo_is_skipped_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), "").unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join("fifo"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let root = Root::new(dir.path()).unwrap();
        assert_eq!(visited(&root, "."), ["a.txt"]);
    }

    #[test]
    fn stops_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), "").unwrap();
        let root = Root::new(dir.path()).unwrap();
        let start = resolve(&root, ".").unwrap();
        let end = walk_files(&root, &start, &|| true, &mut |_| true).unwrap();
        assert_eq!(end, WalkEnd::Stopped);
    }
}
