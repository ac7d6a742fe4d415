//! Replacing and removing a decided file through its opened folder.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{
    AtFlags, Mode, OFlags, Stat, fchmod, fstat, mkdirat, openat, renameat, statat, unlinkat,
};
use rustix::io::Errno;

use super::open::{based, check_same, failure, folder_flags, id_of, kind_of};
use crate::facts::{ResolvedPath, Root};
use crate::tools::run::ToolFailure;

/// Mode of a folder `write_file` creates, before the umask.
const NEW_FOLDER_MODE: u32 = 0o755;
/// Mode of a file `write_file` creates, before the umask.
const NEW_FILE_MODE: u32 = 0o644;
/// Attempts at a fresh temporary name before giving up.
const TEMP_NAME_ATTEMPTS: usize = 8;

/// The folder a decided file lives in, opened by handle, and the file's
/// name in it.
struct Parent<'a> {
    folder: OwnedFd,
    name: &'a OsStr,
}

/// Walks to the decided file's folder one handle at a time, creating the
/// folders the decision saw missing (and only those), checking on the way
/// that the decision's anchor is the object met, and that no folder passed
/// is a git directory by content: the decision judged those names not to be
/// VCS metadata, so a repository found there now was moved in since.
fn open_parent<'a>(
    root: &Root,
    decided: &'a ResolvedPath,
    create: bool,
) -> Result<Parent<'a>, ToolFailure> {
    let based = based(root, decided)?;
    let names = based.names()?;
    let (_, folders) = names.split_last().ok_or(ToolFailure::NotAFile)?;
    let name = decided.canonical.file_name().ok_or(ToolFailure::NotAFile)?;
    let missing = decided.anchor.map_or(usize::MAX, |anchor| anchor.missing);
    // How many names lead to the anchor (0: the base itself).
    let anchor_depth = names.len().checked_sub(missing);
    let mut folder =
        rustix::fs::openat(based.fd(), ".", folder_flags(), Mode::empty()).map_err(failure)?;
    refuse_git_dir(folder.as_fd())?;
    if anchor_depth == Some(0) {
        check_anchor(&fstat(&folder).map_err(failure)?, decided)?;
    }
    for (index, folder_name) in folders.iter().enumerate() {
        let depth = index + 1;
        let beyond_anchor = anchor_depth.is_some_and(|anchor| depth > anchor);
        folder = match openat(&folder, *folder_name, folder_flags(), Mode::empty()) {
            Ok(next) => next,
            Err(Errno::NOENT) if create && beyond_anchor => {
                match mkdirat(&folder, *folder_name, Mode::from_raw_mode(NEW_FOLDER_MODE)) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(errno) => return Err(failure(errno)),
                }
                openat(&folder, *folder_name, folder_flags(), Mode::empty()).map_err(failure)?
            }
            // A folder the decision saw is gone, or is a symlink now.
            Err(Errno::NOENT | Errno::NOTDIR) if !beyond_anchor => {
                return Err(ToolFailure::PathChanged);
            }
            Err(errno) => return Err(failure(errno)),
        };
        refuse_git_dir(folder.as_fd())?;
        if anchor_depth == Some(depth) {
            check_anchor(&fstat(&folder).map_err(failure)?, decided)?;
        }
    }
    Ok(Parent { folder, name })
}

/// The anchor is a folder on the way: it must be the decided one.
fn check_anchor(stat: &Stat, decided: &ResolvedPath) -> Result<(), ToolFailure> {
    match decided.anchor {
        Some(anchor) if anchor.id == id_of(stat) => Ok(()),
        _ => Err(ToolFailure::PathChanged),
    }
}

/// Refuses a folder that git would take for a repository's directory (a
/// `HEAD` file with `objects/` and `refs/`, or with `commondir`), as the
/// decision's facts do by path.
fn refuse_git_dir(folder: BorrowedFd<'_>) -> Result<(), ToolFailure> {
    let kind = |name: &str| {
        statat(folder, name, AtFlags::empty())
            .ok()
            .map(|stat| kind_of(&stat))
    };
    let is_file = |name| kind(name).is_some_and(|k| k.is_file());
    let is_dir = |name| kind(name).is_some_and(|k| k.is_dir());
    if is_file("HEAD") && ((is_dir("objects") && is_dir("refs")) || is_file("commondir")) {
        return Err(ToolFailure::PathChanged);
    }
    Ok(())
}

/// What is now at the name in the opened folder, without following it.
fn entry(parent: &Parent<'_>) -> Result<Option<Stat>, ToolFailure> {
    match statat(&parent.folder, parent.name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(stat)),
        Err(Errno::NOENT) => Ok(None),
        Err(errno) => Err(failure(errno)),
    }
}

/// Replaces a decided file's content atomically: a temporary file created
/// (never opened, so never a FIFO or a link) in the opened folder, synced,
/// then renamed over the name relative to that folder. Readers see the old
/// file or the new one. A new file gets mode 0644 less the umask; an
/// existing file keeps its permissions. A name that became a symlink is
/// replaced, not written through.
pub fn replace_file(root: &Root, decided: &ResolvedPath, text: &str) -> Result<(), ToolFailure> {
    let parent = open_parent(root, decided, true)?;
    let current = entry(&parent)?;
    let mut keep_mode = None;
    match &current {
        Some(stat) if kind_of(stat).is_dir() => return Err(ToolFailure::NotAFile),
        Some(stat) if decided.exists => {
            check_same(stat, decided)?;
            keep_mode = Some(stat.st_mode & 0o7777);
        }
        // Decided as existing and gone now: someone else removed it, and
        // what was decided no longer holds.
        None if decided.exists => return Err(ToolFailure::PathChanged),
        // Appeared since the decision: its name is replaced, its object
        // (whatever it is, wherever its other names are) is not touched.
        _ => {}
    }
    let (temp, temp_name) = create_temp(&parent)?;
    let written = write_temp(temp, text, keep_mode).and_then(|()| {
        renameat(&parent.folder, &temp_name, &parent.folder, parent.name).map_err(failure)
    });
    if written.is_err() {
        let _ = unlinkat(&parent.folder, &temp_name, AtFlags::empty());
    }
    written
}

fn create_temp(parent: &Parent<'_>) -> Result<(File, String), ToolFailure> {
    for _ in 0..TEMP_NAME_ATTEMPTS {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|_| ToolFailure::Internal)?;
        let name = format!(".portcullis-{}", hex::encode(random));
        match openat(
            &parent.folder,
            name.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(NEW_FILE_MODE),
        ) {
            Ok(fd) => return Ok((File::from(fd), name)),
            Err(Errno::EXIST) => continue,
            Err(errno) => return Err(failure(errno)),
        }
    }
    Err(ToolFailure::Internal)
}

fn write_temp(mut temp: File, text: &str, keep_mode: Option<u32>) -> Result<(), ToolFailure> {
    temp.write_all(text.as_bytes())
        .map_err(ToolFailure::from_io)?;
    if let Some(mode) = keep_mode {
        fchmod(&temp, Mode::from_raw_mode(mode)).map_err(failure)?;
    }
    temp.sync_all().map_err(ToolFailure::from_io)
}

/// Removes a decided file: its name in the opened folder, only if that name
/// is still the decided regular file.
pub fn remove_file(root: &Root, decided: &ResolvedPath) -> Result<(), ToolFailure> {
    let parent = open_parent(root, decided, false)?;
    let current = entry(&parent)?.ok_or(ToolFailure::NotFound)?;
    if !kind_of(&current).is_file() {
        return Err(ToolFailure::NotAFile);
    }
    check_same(&current, decided)?;
    unlinkat(&parent.folder, parent.name, AtFlags::empty()).map_err(failure)
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::facts::resolve;

    fn tree() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir_all(ws.join("docs")).unwrap();
        fs::write(ws.join("docs/a.txt"), "a").unwrap();
        fs::create_dir_all(dir.path().join("outside")).unwrap();
        let root = Root::new(&ws).unwrap();
        (dir, root)
    }

    #[test]
    fn a_folder_swapped_for_a_symlink_after_the_decision_is_refused() {
        let (dir, root) = tree();
        let ws = root.path().to_owned();
        let decided = resolve(&root, "docs/new/b.txt").unwrap();
        fs::rename(ws.join("docs"), dir.path().join("docs-moved")).unwrap();
        symlink(dir.path().join("outside"), ws.join("docs")).unwrap();
        assert_eq!(
            replace_file(&root, &decided, "x"),
            Err(ToolFailure::PathChanged)
        );
        assert_eq!(fs::read_dir(dir.path().join("outside")).unwrap().count(), 0);
    }

    #[test]
    fn another_folder_renamed_in_after_the_decision_is_refused() {
        let (dir, root) = tree();
        let ws = root.path().to_owned();
        let decided = resolve(&root, "docs/a.txt").unwrap();
        fs::rename(ws.join("docs"), dir.path().join("docs-moved")).unwrap();
        fs::create_dir(ws.join("docs")).unwrap();
        fs::write(ws.join("docs/a.txt"), "other").unwrap();
        assert_eq!(
            replace_file(&root, &decided, "x"),
            Err(ToolFailure::PathChanged)
        );
        assert_eq!(remove_file(&root, &decided), Err(ToolFailure::PathChanged));
        assert_eq!(fs::read_to_string(ws.join("docs/a.txt")).unwrap(), "other");
    }

    #[test]
    fn a_git_directory_moved_under_a_decided_name_is_refused() {
        let (_dir, root) = tree();
        let ws = root.path().to_owned();
        let decided = resolve(&root, "docs/hooks/pre-commit").unwrap();
        assert!(!decided.in_vcs_metadata);
        fs::create_dir_all(ws.join("docs/objects")).unwrap();
        fs::create_dir_all(ws.join("docs/refs")).unwrap();
        fs::write(ws.join("docs/HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(
            replace_file(&root, &decided, "#!/bin/sh"),
            Err(ToolFailure::PathChanged)
        );
        assert!(!ws.join("docs/hooks").exists());
    }

    #[test]
    fn a_name_that_became_a_symlink_is_replaced_not_written_through() {
        let (dir, root) = tree();
        let ws = root.path().to_owned();
        let decided = resolve(&root, "docs/b.txt").unwrap();
        fs::write(dir.path().join("outside/target"), "outside").unwrap();
        symlink(dir.path().join("outside/target"), ws.join("docs/b.txt")).unwrap();
        replace_file(&root, &decided, "inside").unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join("outside/target")).unwrap(),
            "outside"
        );
        assert_eq!(fs::read_to_string(ws.join("docs/b.txt")).unwrap(), "inside");
    }

    #[test]
    fn keeps_the_mode_of_a_replaced_file_and_leaves_no_temporary_file() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, root) = tree();
        let ws = root.path().to_owned();
        fs::set_permissions(ws.join("docs/a.txt"), fs::Permissions::from_mode(0o600)).unwrap();
        let decided = resolve(&root, "docs/a.txt").unwrap();
        replace_file(&root, &decided, "new").unwrap();
        let meta = fs::metadata(ws.join("docs/a.txt")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read_dir(ws.join("docs")).unwrap().count(), 1);
    }

    #[test]
    fn removes_only_the_decided_regular_file() {
        let (_dir, root) = tree();
        let ws = root.path().to_owned();
        let decided = resolve(&root, "docs/a.txt").unwrap();
        remove_file(&root, &decided).unwrap();
        assert!(!ws.join("docs/a.txt").exists());
        assert_eq!(remove_file(&root, &decided), Err(ToolFailure::NotFound));
        let folder = resolve(&root, "docs").unwrap();
        assert_eq!(remove_file(&root, &folder), Err(ToolFailure::NotAFile));
    }
}
