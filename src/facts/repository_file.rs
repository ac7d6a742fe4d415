//! Reading a repository's own files (its configuration, index, refs, a
//! `.git` file): a repository is the project's, and anything may stand
//! where git keeps a file. A FIFO at `.git/config` held `git status`'s
//! judgement for ever; so a file is opened without blocking, only a
//! regular file is read, and no more of it than its reader can use. What
//! cannot be read so is an error its reader takes as "not proven" (the
//! gate) or "not there" (confinement, which finds a git directory inside
//! the root by what it holds as well as by the `.git` file naming it).

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use rustix::fs::{Mode, OFlags};

/// The bytes of the regular file at `path`, at most `limit` of them: a
/// file that is not regular, or is larger, is an error (`NotFound` stays
/// `NotFound`).
pub fn read(path: &Path, limit: u64) -> io::Result<Vec<u8>> {
    let (file, size) = open(path)?;
    if size > limit {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            "larger than its reader reads",
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(io::Error::new(io::ErrorKind::FileTooLarge, "it grew"));
    }
    Ok(bytes)
}

/// The text of the regular file at `path`, as `read` reads it.
pub fn read_text(path: &Path, limit: u64) -> io::Result<String> {
    String::from_utf8(read(path, limit)?)
        .map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err))
}

/// The first bytes of the regular file at `path`, up to `count`.
pub fn read_start(path: &Path, count: usize) -> io::Result<Vec<u8>> {
    let (file, _) = open(path)?;
    let mut bytes = Vec::with_capacity(count);
    file.take(count as u64).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The regular file at `path` (links followed, as git follows them),
/// opened without waiting on a FIFO or a device, and its size.
fn open(path: &Path) -> io::Result<(File, u64)> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    let file = File::from(fd);
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok((file, meta.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_regular_file_within_its_limit_is_read_and_a_fifo_never_blocks() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("config");
        std::fs::write(&file, "[core]\n").expect("file");
        assert_eq!(read_text(&file, 100).expect("read"), "[core]\n");
        assert_eq!(read_start(&file, 3).expect("read"), b"[co");
        assert_eq!(
            read(&file, 3).expect_err("too large").kind(),
            io::ErrorKind::FileTooLarge
        );
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .expect("fifo");
        for err in [
            read(&fifo, 100).expect_err("a fifo"),
            read_start(&fifo, 10).expect_err("a fifo"),
            read(dir.path(), 100).expect_err("a folder"),
        ] {
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        }
        let missing = read(&dir.path().join("missing"), 100).expect_err("missing");
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        std::fs::write(&file, [0xff, 0xfe]).expect("file");
        assert_eq!(
            read_text(&file, 100).expect_err("not text").kind(),
            io::ErrorKind::InvalidData
        );
    }
}
