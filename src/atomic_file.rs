//! Replacing a file so that a crash leaves the old content or the new, never
//! half of either: the one way portcullis rewrites its own files (token
//! store, policy snapshots, formatted policies). The audit log is appended
//! to, never replaced, and is not written here.

use std::fs::{self, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Who may read the new file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Owner only (0600), from the moment the file exists: for secrets.
    Private,
    /// As the file it replaces, or owner only when there was none.
    AsBefore,
}

/// Writes `bytes` to a temporary file in `path`'s folder, syncs it, renames
/// it over `path` and syncs the folder, so the rename itself is durable.
pub fn replace(path: &Path, bytes: &[u8], mode: Mode) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    // A named temporary file is created 0600: nothing can read it before
    // its permissions are settled.
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    if mode == Mode::AsBefore
        && let Ok(meta) = fs::metadata(path)
    {
        temp.as_file()
            .set_permissions(Permissions::from_mode(meta.permissions().mode()))?;
    }
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|err| err.error)?;
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode_of(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_file_is_owner_only_and_a_replaced_one_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        replace(&path, b"one", Mode::AsBefore).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"one");
        assert_eq!(mode_of(&path), 0o600);
        fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        replace(&path, b"two", Mode::AsBefore).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(mode_of(&path), 0o644);
        replace(&path, b"three", Mode::Private).unwrap();
        assert_eq!(mode_of(&path), 0o600);
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
    }

    #[test]
    fn a_folder_that_does_not_exist_is_an_error_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing/f.txt");
        assert!(replace(&path, b"x", Mode::Private).is_err());
        assert!(!dir.path().join("missing").exists());
    }
}
