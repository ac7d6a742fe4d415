//! The paths a repository tracks, read from its index: `git grep` and
//! `git show` print what is tracked, so a tracked `.env` is read by them as
//! surely as by `cat .env`, with no name in the command to judge.
//!
//! Only the entries' paths are read (and which are submodules, whose own
//! repositories git reads too), and only from an index whose whole
//! list of paths is in this one file: a split index (its entries partly in
//! a shared file), a sparse one (a folder standing for the files beneath
//! it), a repository with other than SHA-1 object names, a version other
//! than 2, 3 and 4, or any byte out of place gives no answer, and the
//! command is then not proven. The format is git's
//! `Documentation/gitformat-index.txt`; the tests hold this reader to
//! `git ls-files` as the oracle for every version.

use std::path::Path;

use super::git_config::ObjectNames;
use crate::facts::repository_file;

/// Bytes before an entry's flags: ctime, mtime, dev, ino, mode, uid, gid,
/// size (4 bytes each but the times, 8) and a SHA-1 object name.
const FIXED: usize = 40 + 20;
/// A flag saying a second 16-bit flags word follows (version 3 and later).
const EXTENDED: u16 = 0x4000;
/// The mode of a sparse index's folder entry.
const SPARSE_FOLDER: u32 = 0o040_000;
/// The mode of a submodule's entry (a commit of another repository).
const GITLINK: u32 = 0o160_000;
/// More than the indexes the gate reads through on one judgement hold.
pub const MAX_INDEX_BYTES: u64 = 64 << 20;

/// What a repository's index lists.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Index {
    /// Every tracked path, relative to the working tree.
    pub paths: Vec<String>,
    /// The paths among them that are submodules.
    pub submodules: Vec<String>,
}

/// What `git_dir`'s index tracks, nothing when it has no index, `None`
/// when it cannot be read whole or is larger than what is left of
/// `budget`, the bytes one judgement reads through (a workspace's
/// repositories and their submodules share it). `object_names` is what the
/// repository's configuration says of its object names: the entries'
/// length follows them.
pub fn tracked(git_dir: &Path, object_names: ObjectNames, budget: &mut u64) -> Option<Index> {
    if object_names != ObjectNames::Sha1 {
        return None;
    }
    match repository_file::read(&git_dir.join("index"), *budget) {
        Ok(bytes) => {
            *budget -= bytes.len() as u64;
            entries(&bytes)
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Some(Index::default()),
        Err(_) => None,
    }
}

/// The entries of an index file's bytes.
fn entries(bytes: &[u8]) -> Option<Index> {
    let mut reader = Reader { bytes, at: 0 };
    if reader.take(4)? != b"DIRC" {
        return None;
    }
    let version = reader.u32()?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = reader.u32()?;
    let mut index = Index::default();
    let mut previous: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = reader.at;
        let mode = {
            let fixed = reader.take(FIXED)?;
            u32::from_be_bytes(fixed[24..28].try_into().ok()?)
        };
        if mode == SPARSE_FOLDER {
            return None;
        }
        let flags = reader.u16()?;
        if flags & EXTENDED != 0 {
            if version < 3 {
                return None;
            }
            reader.u16()?;
        }
        let name = if version == 4 {
            let strip = reader.varint()?;
            let kept = previous.len().checked_sub(strip)?;
            let mut name = previous[..kept].to_vec();
            name.extend_from_slice(reader.until_nul()?);
            name
        } else {
            let name = reader.until_nul()?.to_vec();
            // One to eight NULs end the entry on a multiple of eight bytes,
            // the name's own NUL among them.
            let length = reader.at - start;
            let padded = length.div_ceil(8) * 8;
            if reader.take(padded - length)?.iter().any(|byte| *byte != 0) {
                return None;
            }
            name
        };
        let path = String::from_utf8(name.clone()).ok()?;
        if mode == GITLINK {
            index.submodules.push(path.clone());
        }
        index.paths.push(path);
        previous = name;
    }
    extensions_allow(&mut reader)?;
    Some(index)
}

/// Reads the extensions after the entries up to the closing checksum:
/// `None` when one of them says the entries are not all here.
fn extensions_allow(reader: &mut Reader<'_>) -> Option<()> {
    const CHECKSUM: usize = 20;
    while reader.bytes.len().checked_sub(reader.at)? > CHECKSUM {
        let signature = reader.take(4)?;
        if signature == b"link" || signature == b"sdir" {
            return None;
        }
        let size = usize::try_from(reader.u32()?).ok()?;
        reader.take(size)?;
    }
    (reader.bytes.len() - reader.at == CHECKSUM).then_some(())
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, count: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(count)?;
        let taken = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(taken)
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    /// The bytes up to a NUL, which is passed over.
    fn until_nul(&mut self) -> Option<&'a [u8]> {
        let rest = self.bytes.get(self.at..)?;
        let length = rest.iter().position(|byte| *byte == 0)?;
        self.at += length + 1;
        Some(&rest[..length])
    }

    /// Git's offset varint (`varint.c`): seven bits a byte, high bit set
    /// when another follows, each continuation adding one.
    fn varint(&mut self) -> Option<usize> {
        let mut byte = self.take(1)?[0];
        let mut value = usize::from(byte & 0x7f);
        while byte & 0x80 != 0 {
            byte = self.take(1)?[0];
            value = value
                .checked_add(1)?
                .checked_mul(128)?
                .checked_add(usize::from(byte & 0x7f))?;
        }
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The index of the repository at `dir`, with the whole budget.
    fn read_whole(dir: &Path) -> Option<Index> {
        let mut budget = MAX_INDEX_BYTES;
        tracked(&dir.join(".git"), ObjectNames::Sha1, &mut budget)
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        let output = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git runs");
        assert!(output.status.success(), "git {args:?}: {output:?}");
        String::from_utf8(output.stdout).expect("utf-8")
    }

    /// A repository tracking names that share prefixes (version 4
    /// compresses them), a long one, nested ones and one not ASCII.
    fn repository() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        git(dir.path(), &["init", "-q"]);
        let names = [
            ".env",
            "src/a.rs",
            "src/ab.rs",
            "src/deep/er/x.txt",
            "docs/naïve.md",
            // Longer than the 12 bits an entry's flags hold for its length.
            &format!("long/{0}/{0}/{0}/{0}/{0}/x", "n".repeat(200)),
        ];
        for name in names {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("folder");
            std::fs::write(&path, name).expect("file");
        }
        git(dir.path(), &["add", "-A"]);
        dir
    }

    #[test]
    fn every_index_version_reads_as_git_lists_it() {
        let dir = repository();
        for version in ["2", "3", "4"] {
            git(dir.path(), &["update-index", "--index-version", version]);
            if version == "3" {
                // An extended flag, which only version 3 and later carry.
                std::fs::write(dir.path().join("src/new.rs"), "new").expect("file");
                git(dir.path(), &["add", "--intent-to-add", "src/new.rs"]);
                git(
                    dir.path(),
                    &["update-index", "--skip-worktree", "src/ab.rs"],
                );
            }
            let listed: Vec<String> = git(dir.path(), &["-c", "core.quotePath=false", "ls-files"])
                .lines()
                .map(str::to_owned)
                .collect();
            let read = read_whole(dir.path()).expect("readable");
            assert_eq!(read.paths, listed, "version {version}");
            assert!(read.paths.contains(&".env".to_owned()));
            assert!(read.submodules.is_empty());
        }
    }

    /// A submodule is an entry of its own mode: the paths git lists with
    /// that mode are the submodules read.
    #[test]
    fn submodules_read_as_git_lists_them() {
        let dir = repository();
        let inner = dir.path().join("vendor/inner");
        std::fs::create_dir_all(&inner).expect("folder");
        git(&inner, &["init", "-q"]);
        git(&inner, &["commit", "-q", "--allow-empty", "-m", "i"]);
        git(dir.path(), &["add", "vendor/inner"]);
        let gitlinks: Vec<String> = git(dir.path(), &["ls-files", "-s"])
            .lines()
            .filter(|line| line.starts_with("160000 "))
            .filter_map(|line| line.split_once('\t').map(|(_, path)| path.to_owned()))
            .collect();
        assert_eq!(gitlinks, ["vendor/inner"]);
        let read = read_whole(dir.path()).expect("readable");
        assert_eq!(read.submodules, gitlinks);
        assert!(read.paths.contains(&"vendor/inner".to_owned()));
    }

    /// The indexes of one judgement share a budget of bytes: each read
    /// takes its size from it, and one larger than what is left is not read.
    #[test]
    fn an_index_larger_than_the_budget_left_gives_no_answer() {
        let dir = repository();
        let size = std::fs::metadata(dir.path().join(".git/index"))
            .expect("index")
            .len();
        let mut budget = size + 10;
        assert!(tracked(&dir.path().join(".git"), ObjectNames::Sha1, &mut budget).is_some());
        assert_eq!(budget, 10);
        assert_eq!(
            tracked(&dir.path().join(".git"), ObjectNames::Sha1, &mut budget),
            None
        );
        assert_eq!(budget, 10);
    }

    #[test]
    fn an_index_whose_entries_are_not_all_in_it_gives_no_answer() {
        let dir = repository();
        git(dir.path(), &["update-index", "--split-index"]);
        assert_eq!(read_whole(dir.path()), None);
    }

    #[test]
    fn a_repository_without_an_index_tracks_nothing() {
        let dir = tempfile::tempdir().expect("temp dir");
        git(dir.path(), &["init", "-q"]);
        assert_eq!(read_whole(dir.path()), Some(Index::default()));
    }

    #[test]
    fn bytes_out_of_place_give_no_answer() {
        let dir = repository();
        let bytes = std::fs::read(dir.path().join(".git/index")).expect("index");
        assert!(entries(&bytes).is_some());
        for cut in [3, 12, 70, bytes.len() / 2, bytes.len() - 21] {
            assert_eq!(entries(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut version = bytes.clone();
        version[7] = 5;
        assert_eq!(entries(&version), None);
        let mut padding = bytes.clone();
        // The first entry's padding: the header's 12 bytes, 62 fixed, the
        // name `.env` and its NUL, then NULs up to byte 84.
        padding[80] = b'x';
        assert_eq!(entries(&padding), None);
    }

    #[test]
    fn another_object_format_gives_no_answer() {
        let dir = repository();
        let mut budget = MAX_INDEX_BYTES;
        let git_dir = dir.path().join(".git");
        assert_eq!(tracked(&git_dir, ObjectNames::Unknown, &mut budget), None);
        assert_eq!(budget, MAX_INDEX_BYTES, "nothing read");
    }
}
