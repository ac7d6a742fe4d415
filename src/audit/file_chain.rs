//! The audit log in a file: JSON Lines beside a head file, any number of
//! processes appending under an exclusive lock (`flock`). Each batch reads
//! first what other processes appended since (checking every record's
//! hash and link), and follows the head protocol (`head.rs`), so a crash at
//! any point leaves a log that ends where it was acknowledged, or one
//! whole batch later.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::chain::{Batch, ChainError, ChainStore, Check, Failed};
use super::head::{self, Head, HeadFile, Mark, head_path};
use super::record::{GENESIS, StoredRecord, line_hash_is_valid};
use super::verify::{Break, End, end_against_head, scan};

/// Why a writer cannot find or extend the true end of the log.
#[derive(Debug, Error)]
enum TailProblem {
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("head: {0}")]
    Head(io::Error),
    #[error(transparent)]
    Break(#[from] Break),
    #[error("the log shrank from {was} to {now} bytes under this process")]
    Shrank { was: u64, now: u64 },
    #[error("a record another writer left is unreadable: {0}")]
    Unreadable(serde_json::Error),
    #[error("seq {0}: a record another writer left does not chain")]
    Unchained(u64),
    #[error("the committed seq {0} is not in the log")]
    CommittedMissing(u64),
}

/// Where the log ends, as the writer knows it.
#[derive(Debug, Clone, Default)]
struct Tail {
    last: Option<Mark>,
    /// Bytes of complete, valid records from the start.
    bytes: u64,
}

/// A log file and its head, opened for append.
pub struct FileChain {
    /// Opened for append: with the lock held, every write lands at the
    /// true end of the file.
    file: File,
    path: PathBuf,
    head: HeadFile,
    tail: Tail,
}

impl FileChain {
    /// Opens (or creates, 0600) the log at `path` and its head; nothing is
    /// checked until [`ChainStore::open`].
    pub fn create(path: &Path) -> io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)?;
        let head = HeadFile::open(&head_path(path))?;
        Ok(Self {
            file,
            path: path.to_owned(),
            head,
            tail: Tail::default(),
        })
    }
}

impl ChainStore for FileChain {
    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn open(&mut self, check: Check) -> Result<(), ChainError> {
        self.check_and_settle(check)
    }

    fn begin(&mut self) -> Result<Option<Mark>, String> {
        self.file
            .lock()
            .map_err(|err| format!("cannot lock the log: {err}"))?;
        match self.catch_up() {
            Ok(()) => Ok(self.tail.last.clone()),
            Err(err) => {
                self.finish();
                Err(err.to_string())
            }
        }
    }

    fn commit(&mut self, batch: &Batch<'_>, last: bool) -> Result<(), Failed> {
        let (bytes, Some(end)) = (batch.lines, batch.end()) else {
            return Ok(());
        };
        match self.write_durably(bytes, end, last) {
            Ok(()) => {
                self.tail = Tail {
                    last: Some(end.clone()),
                    bytes: self.tail.bytes + bytes.len() as u64,
                };
                Ok(())
            }
            Err(err) => Err(Failed {
                error: err.to_string(),
                unrestored: self.undo(),
            }),
        }
    }

    fn finish(&mut self) {
        if let Err(err) = self.file.unlock() {
            tracing::error!(error = %err, "cannot unlock the audit log");
        }
    }
}

impl FileChain {
    /// Checks the log (all of it, or its end) and settles its end,
    /// holding the lock.
    fn check_and_settle(&mut self, check: Check) -> Result<(), ChainError> {
        let open_error = |err: io::Error| ChainError::Open(err.to_string());
        self.file.lock().map_err(&open_error)?;
        let opened = match check {
            Check::End => match self.clean_end() {
                Ok(Some(tail)) => {
                    self.tail = tail;
                    Ok(())
                }
                Ok(None) => self.open_under_lock(),
                Err(err) => Err(open_error(err)),
            },
            Check::Whole => self.open_under_lock(),
        };
        let unlocked = self.file.unlock();
        opened?;
        unlocked.map_err(open_error)
    }

    /// The end of the log, when it is exactly what the head says was
    /// committed, with nothing pending: the last line is a whole record
    /// whose hash is its own and the head's. `None` when anything else is
    /// found, for the whole check to sort out.
    fn clean_end(&self) -> io::Result<Option<Tail>> {
        let Some(head) = head::read(&head_path(&self.path))? else {
            return Ok(None);
        };
        let length = self.file.metadata()?.len();
        let (Some(committed), None) = (head.committed, head.pending) else {
            return Ok(None);
        };
        let Some(line) = last_line(&self.file, length)? else {
            return Ok(None);
        };
        let Ok(record) = serde_json::from_slice::<StoredRecord>(&line) else {
            return Ok(None);
        };
        let clean = record.seq == committed.seq
            && record.hash == committed.hash
            && line_hash_is_valid(&line, &record.hash);
        Ok(clean.then_some(Tail {
            last: Some(committed),
            bytes: length,
        }))
    }

    /// The whole log is checked once, under the lock, then reconciled
    /// with its head.
    fn open_under_lock(&mut self) -> Result<(), ChainError> {
        let open_error = ChainError::Open;
        let broken = ChainError::Broken;
        let scanned = scan(&self.path).map_err(|e| open_error(e.to_string()))?;
        if let Some(first) = scanned.first_break {
            return Err(broken(first.to_string()));
        }
        let head = head::read(&head_path(&self.path)).map_err(|e| broken(format!("head: {e}")))?;
        if head.is_none() && scanned.last.is_some() {
            return Err(broken(Break::HeadMissing.to_string()));
        }
        let found = Tail {
            last: scanned.last,
            bytes: scanned.good_bytes,
        };
        let tail = self
            .reconcile(head.unwrap_or_default(), found)
            .map_err(|problem| broken(problem.to_string()))?;
        self.settle(tail).map_err(|e| open_error(e.to_string()))
    }

    /// Decides where the log really ends, given its head and the complete
    /// records found: the committed end, or a whole batch that landed but
    /// was never acknowledged. Records past that (a batch cut short by a
    /// crash, never acknowledged) are cut off.
    fn reconcile(&self, head: Head, found: Tail) -> Result<Tail, TailProblem> {
        match end_against_head(&head, found.last.as_ref())? {
            End::Committed | End::Pending => Ok(found),
            End::PartOfPending => {
                let committed_seq = head.committed.as_ref().map_or(0, |m| m.seq);
                let bytes = offset_after(&self.path, committed_seq)?
                    .ok_or(TailProblem::CommittedMissing(committed_seq))?;
                Ok(Tail {
                    last: head.committed,
                    bytes,
                })
            }
        }
    }

    /// Cuts the file to `tail` if it is longer and marks the head there.
    fn settle(&mut self, tail: Tail) -> io::Result<()> {
        let length = self.file.metadata()?.len();
        if length > tail.bytes {
            self.file.set_len(tail.bytes)?;
            self.file.sync_all()?;
        }
        self.head.write(&Head {
            committed: tail.last.clone(),
            pending: None,
        })?;
        self.tail = tail;
        Ok(())
    }

    /// Reads, under the lock, what other processes appended since this
    /// one last wrote, checking every record's hash and link.
    fn catch_up(&mut self) -> Result<(), TailProblem> {
        let length = self.file.metadata()?.len();
        if length < self.tail.bytes {
            return Err(TailProblem::Shrank {
                was: self.tail.bytes,
                now: length,
            });
        }
        let head = head::read(&head_path(&self.path))
            .map_err(TailProblem::Head)?
            .unwrap_or_default();
        let mut found = self.tail.clone();
        if length > self.tail.bytes {
            let mut bytes = vec![0; (length - self.tail.bytes) as usize];
            self.file.read_exact_at(&mut bytes, self.tail.bytes)?;
            for line in bytes.split_inclusive(|b| *b == b'\n') {
                let Some(content) = line.strip_suffix(b"\n") else {
                    // A batch cut short by a writer that died.
                    break;
                };
                let record: StoredRecord =
                    serde_json::from_slice(content).map_err(TailProblem::Unreadable)?;
                let (seq, prev) = match &found.last {
                    Some(mark) => (mark.seq, mark.hash.as_str()),
                    None => (0, GENESIS),
                };
                if record.seq != seq + 1
                    || record.prev != prev
                    || !line_hash_is_valid(content, &record.hash)
                {
                    return Err(TailProblem::Unchained(record.seq));
                }
                found.last = Some(Mark {
                    seq: record.seq,
                    hash: record.hash,
                });
                found.bytes += line.len() as u64;
            }
        }
        if found.bytes == length && found.last == head.committed {
            self.tail = found;
            return Ok(());
        }
        let tail = self.reconcile(head, found)?;
        Ok(self.settle(tail)?)
    }

    /// The head protocol (`head.rs`): `pending` durable before the batch,
    /// the batch durable before anyone is answered. The move of
    /// `committed` is written but not synced (except for the log's last
    /// batch): it becomes durable with the next batch's `pending`, and a
    /// crash before that leaves the log ending at `pending`, which is a
    /// clean end. One fsync fewer per batch, and nothing acknowledged is
    /// ever only in memory.
    fn write_durably(&mut self, bytes: &[u8], end: &Mark, last: bool) -> io::Result<()> {
        self.head.write(&Head {
            committed: self.tail.last.clone(),
            pending: Some(end.clone()),
        })?;
        self.file.write_all(bytes)?;
        self.file.sync_data()?;
        let committed = Head {
            committed: Some(end.clone()),
            pending: None,
        };
        if last {
            self.head.write(&committed)
        } else {
            self.head.write_unsynced(&committed)
        }
    }

    /// Cuts a failed batch off the end of the file, so the next batch
    /// chains onto the last good record; why it could not, if it could not.
    fn undo(&mut self) -> Option<String> {
        let restored = self
            .file
            .set_len(self.tail.bytes)
            .and_then(|()| self.file.sync_all())
            .and_then(|()| {
                self.head.write(&Head {
                    committed: self.tail.last.clone(),
                    pending: None,
                })
            });
        restored
            .err()
            .map(|err| format!("the log could not be restored after a failed write: {err}"))
    }
}

/// The byte offset just after record `seq` (0 for seq 0).
fn offset_after(path: &Path, seq: u64) -> io::Result<Option<u64>> {
    if seq == 0 {
        return Ok(Some(0));
    }
    let mut offset = 0;
    for item in super::verify::Records::open(path)? {
        match item? {
            super::verify::Line::Record { record, bytes } => {
                offset += bytes;
                if record.seq == seq {
                    return Ok(Some(offset));
                }
            }
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// The last line of a file of `length` bytes, without its newline: read
/// backwards a few KiB at a time (a record is about 2 KiB), never more than
/// 1 MiB, which no record this writer makes comes near. `None` when the
/// file does not end with a newline, or the line is longer than that.
fn last_line(file: &File, length: u64) -> io::Result<Option<Vec<u8>>> {
    const FIRST_READ: u64 = 8 << 10;
    const LONGEST: u64 = 1 << 20;
    let mut window = FIRST_READ;
    loop {
        let take = length.min(window);
        let mut bytes = vec![0; usize::try_from(take).map_err(io::Error::other)?];
        file.read_exact_at(&mut bytes, length - take)?;
        let Some(body) = bytes.strip_suffix(b"\n") else {
            return Ok(None);
        };
        if let Some(newline) = body.iter().rposition(|b| *b == b'\n') {
            return Ok(Some(body[newline + 1..].to_vec()));
        }
        if take == length {
            return Ok(Some(body.to_vec()));
        }
        if window >= LONGEST {
            return Ok(None);
        }
        window *= 4;
    }
}
