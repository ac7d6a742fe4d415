//! Opening a decided path by handle, and checking that what opened is what
//! was decided.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, Stat, fstat, openat, openat2};
use rustix::io::Errno;

use crate::facts::{FileId, ResolvedPath, Root};
use crate::tools::run::ToolFailure;

/// Cleared the first time the kernel answers that it has no `openat2`
/// (Linux before 5.6, or a sandbox that filters it): from then on every open
/// walks the path one component at a time, each with `O_NOFOLLOW`.
static HAS_OPENAT2: AtomicBool = AtomicBool::new(true);

/// How often an open retries when the kernel saw a rename race while
/// resolving beneath the base (`EAGAIN`) before calling the path changed.
const RENAME_RACE_RETRIES: usize = 4;

/// Where a decided path is opened from, and the path below it.
pub(super) struct Based<'a> {
    base: Base<'a>,
    pub relative: &'a Path,
}

enum Base<'a> {
    Root(BorrowedFd<'a>),
    Slash(OwnedFd),
}

impl Based<'_> {
    pub fn fd(&self) -> BorrowedFd<'_> {
        match &self.base {
            Base::Root(fd) => *fd,
            Base::Slash(fd) => fd.as_fd(),
        }
    }

    /// The names below the base, in order. A canonical path has no `.`,
    /// `..` or second root, so anything else is a bug, refused.
    pub fn names(&self) -> Result<Vec<&OsStr>, ToolFailure> {
        self.relative
            .components()
            .map(|component| match component {
                Component::Normal(name) => Ok(name),
                _ => Err(ToolFailure::Internal),
            })
            .collect()
    }
}

/// The base a decided path is opened from.
pub(super) fn based<'a>(
    root: &'a Root,
    decided: &'a ResolvedPath,
) -> Result<Based<'a>, ToolFailure> {
    if let Some(relative) = decided.relative(root) {
        return Ok(Based {
            base: Base::Root(root.handle()),
            relative,
        });
    }
    let relative = decided
        .canonical
        .strip_prefix("/")
        .map_err(|_| ToolFailure::Internal)?;
    let slash = rustix::fs::open(
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(failure)?;
    Ok(Based {
        base: Base::Slash(slash),
        relative,
    })
}

/// Opens `relative` below `base` without following any symlink and without
/// leaving `base`; `flags` apply to the last component.
pub(super) fn open_beneath(
    base: BorrowedFd<'_>,
    relative: &Path,
    flags: OFlags,
) -> Result<OwnedFd, Errno> {
    let flags = flags | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NOFOLLOW;
    let target: &Path = if relative.as_os_str().is_empty() {
        Path::new(".")
    } else {
        relative
    };
    if HAS_OPENAT2.load(Ordering::Relaxed) {
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        for _ in 0..RENAME_RACE_RETRIES {
            match openat2(base, target, flags, Mode::empty(), resolve) {
                Err(Errno::AGAIN) => continue,
                Err(Errno::NOSYS) => {
                    HAS_OPENAT2.store(false, Ordering::Relaxed);
                    return open_by_components(base, relative, flags);
                }
                other => return other,
            }
        }
        return Err(Errno::AGAIN);
    }
    open_by_components(base, relative, flags)
}

/// The walk `openat2` does, done by hand: each folder opened relative to the
/// one before with `O_NOFOLLOW`, so a symlink anywhere ends the walk.
pub(super) fn open_by_components(
    base: BorrowedFd<'_>,
    relative: &Path,
    flags: OFlags,
) -> Result<OwnedFd, Errno> {
    let mut names = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(name) => names.push(name),
            // Only canonical relative paths come here.
            _ => return Err(Errno::XDEV),
        }
    }
    let Some((last, folders)) = names.split_last() else {
        return openat(base, ".", flags | OFlags::NOFOLLOW, Mode::empty());
    };
    let mut folder = openat(base, ".", folder_flags(), Mode::empty())?;
    for name in folders {
        folder = openat(&folder, *name, folder_flags(), Mode::empty())?;
    }
    openat(&folder, *last, flags | OFlags::NOFOLLOW, Mode::empty())
}

/// How a folder on the way is opened: a handle only, never through a
/// symlink.
pub(super) fn folder_flags() -> OFlags {
    OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// The identity of what a handle holds.
pub(super) fn id_of(stat: &Stat) -> FileId {
    FileId {
        dev: stat.st_dev,
        ino: stat.st_ino,
    }
}

pub(super) fn kind_of(stat: &Stat) -> FileType {
    FileType::from_raw_mode(stat.st_mode)
}

/// Refuses an opened object that is not the one decided about: another
/// inode where one existed, or a file that gained a second name the
/// decision did not judge.
pub(super) fn check_same(stat: &Stat, decided: &ResolvedPath) -> Result<(), ToolFailure> {
    if decided.exists {
        let anchor = decided.anchor.ok_or(ToolFailure::PathChanged)?;
        if anchor.missing != 0 || anchor.id != id_of(stat) {
            return Err(ToolFailure::PathChanged);
        }
    }
    if kind_of(stat).is_file() && stat.st_nlink > 1 && !decided.hardlinked {
        return Err(ToolFailure::PathChanged);
    }
    Ok(())
}

/// Opens a decided file for reading: a regular file, the decided one,
/// opened without blocking (a FIFO opens at once, then is refused).
pub fn open_file(root: &Root, decided: &ResolvedPath) -> Result<(File, Stat), ToolFailure> {
    let based = based(root, decided)?;
    let fd = open_beneath(
        based.fd(),
        based.relative,
        OFlags::RDONLY | OFlags::NONBLOCK,
    )
    .map_err(failure)?;
    let stat = fstat(&fd).map_err(failure)?;
    if !kind_of(&stat).is_file() {
        return Err(ToolFailure::NotAFile);
    }
    check_same(&stat, decided)?;
    Ok((File::from(fd), stat))
}

/// Opens a decided folder for listing or walking.
pub fn open_folder(root: &Root, decided: &ResolvedPath) -> Result<OwnedFd, ToolFailure> {
    let based = based(root, decided)?;
    let fd = open_beneath(
        based.fd(),
        based.relative,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::DIRECTORY,
    )
    .map_err(|errno| match errno {
        Errno::NOTDIR => ToolFailure::NotAFolder,
        other => failure(other),
    })?;
    let stat = fstat(&fd).map_err(failure)?;
    check_same(&stat, decided)?;
    Ok(fd)
}

/// The fixed failure for an OS error; the error itself goes to the server
/// log only, since it may describe places the client may not learn about.
pub(super) fn failure(errno: Errno) -> ToolFailure {
    match errno {
        Errno::NOENT | Errno::NOTDIR => ToolFailure::NotFound,
        // A symlink met, a step out of the base, a rename seen mid-walk: the
        // path is no longer what was decided.
        Errno::LOOP | Errno::XDEV | Errno::AGAIN => ToolFailure::PathChanged,
        Errno::ACCESS | Errno::PERM => ToolFailure::PermissionDenied,
        Errno::ISDIR => ToolFailure::NotAFile,
        other => {
            tracing::debug!(error = %other, "tool filesystem error");
            ToolFailure::Internal
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use super::*;

    fn tree() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir_all(ws.join("a/b")).unwrap();
        fs::write(ws.join("a/b/f.txt"), "inside").unwrap();
        fs::create_dir_all(dir.path().join("outside")).unwrap();
        fs::write(dir.path().join("outside/f.txt"), "outside").unwrap();
        symlink(dir.path().join("outside"), ws.join("a/link")).unwrap();
        symlink("b/f.txt", ws.join("a/file_link")).unwrap();
        let root = Root::new(&ws).unwrap();
        (dir, root)
    }

    #[test]
    fn both_walks_open_plain_paths_and_refuse_every_symlink() {
        let (_dir, root) = tree();
        for open in [open_beneath, open_by_components] {
            let fd = open(root.handle(), Path::new("a/b/f.txt"), OFlags::RDONLY).unwrap();
            assert_eq!(
                fs::read_to_string(format!(
                    "/proc/self/fd/{}",
                    std::os::fd::AsRawFd::as_raw_fd(&fd)
                ))
                .unwrap(),
                "inside"
            );
            for through in ["a/link/f.txt", "a/file_link", "a/link"] {
                let err = open(root.handle(), Path::new(through), OFlags::RDONLY).unwrap_err();
                assert!(
                    matches!(err, Errno::LOOP | Errno::NOTDIR),
                    "{through}: {err}"
                );
            }
            assert_eq!(
                open(root.handle(), Path::new("a/none"), OFlags::RDONLY).unwrap_err(),
                Errno::NOENT
            );
            assert!(
                open(
                    root.handle(),
                    Path::new(""),
                    OFlags::RDONLY | OFlags::DIRECTORY
                )
                .is_ok()
            );
        }
        assert_eq!(
            open_by_components(root.handle(), Path::new("../outside/f.txt"), OFlags::RDONLY)
                .unwrap_err(),
            Errno::XDEV
        );
        assert_eq!(
            open_beneath(root.handle(), Path::new("../outside/f.txt"), OFlags::RDONLY).unwrap_err(),
            Errno::XDEV
        );
    }

    #[test]
    fn every_os_error_maps_to_a_fixed_failure() {
        assert_eq!(failure(Errno::NOENT), ToolFailure::NotFound);
        assert_eq!(failure(Errno::LOOP), ToolFailure::PathChanged);
        assert_eq!(failure(Errno::XDEV), ToolFailure::PathChanged);
        assert_eq!(failure(Errno::ACCESS), ToolFailure::PermissionDenied);
        assert_eq!(failure(Errno::ISDIR), ToolFailure::NotAFile);
        assert_eq!(failure(Errno::IO), ToolFailure::Internal);
    }
}
