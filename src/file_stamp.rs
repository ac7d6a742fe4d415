//! Whether a file changed since it was last read, without reading it: its
//! size, modification time and inode. Files portcullis watches (the token
//! store, the policy folders) are replaced by rename, so a change gives a
//! new inode even within one mtime tick.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileStamp {
    inode: u64,
    modified_ns: i128,
    len: u64,
}

impl FileStamp {
    /// The stamp of `path` as it is now; `None` if it cannot be read.
    pub fn of(path: &Path) -> Option<Self> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Self {
            inode: meta.ino(),
            modified_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            len: meta.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use super::*;

    #[test]
    fn a_replaced_file_has_a_new_stamp_and_an_untouched_one_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "a").unwrap();
        let first = FileStamp::of(&path).unwrap();
        assert_eq!(FileStamp::of(&path), Some(first));
        let staged = dir.path().join("g");
        std::fs::write(&staged, "b").unwrap();
        std::fs::rename(&staged, &path).unwrap();
        assert_ne!(
            FileStamp::of(&path),
            Some(first),
            "same size, same tick, new inode"
        );
        assert_eq!(FileStamp::of(&dir.path().join("missing")), None);
    }
}
