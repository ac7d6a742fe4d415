//! Checking a log offline: the chain from the first record to the last,
//! then the end of the log against the head file.

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use ed25519_dalek::VerifyingKey;
use serde::Serialize;

use super::checkpoint::Checkpoint;
use super::head::{self, Head, Mark, head_path};
use super::record::{GENESIS, Kind, StoredRecord, line_hash_is_valid};

/// What is wrong with a log, at the first place it goes wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Break {
    /// A line is not a record.
    Unreadable { line: u64, message: String },
    /// A record's hash is not the hash of its content: it was edited.
    Edited { seq: u64 },
    /// A record does not follow the one before it: one was deleted,
    /// inserted or moved.
    OutOfSequence {
        line: u64,
        expected_seq: u64,
        found_seq: u64,
    },
    /// A record's `prev` is not the hash of the record before it.
    Unlinked { seq: u64 },
    /// The log has records but no head file.
    HeadMissing,
    /// The head file is not readable.
    HeadUnreadable { message: String },
    /// The log ends before its head: records were removed from the end.
    Truncated { log_seq: u64, head_seq: u64 },
    /// The log goes on past its head: records were appended after the fact.
    Extended { log_seq: u64, head_seq: u64 },
    /// The last record is not the one the head names: it was replaced.
    HeadMismatch { seq: u64 },
    /// The head file says something no writer writes.
    HeadTampered { message: String },
    /// A checkpoint does not name the record just before it.
    CheckpointMisplaced { seq: u64 },
    /// A checkpoint is not signed by the key the auditor holds.
    BadSignature { seq: u64 },
    /// With a key: records after the last signed checkpoint (every batch a
    /// writer appends ends with one, so these were added or the signed
    /// end was cut off).
    UnsignedTail { signed_seq: u64, log_seq: u64 },
    /// With a key: not one checkpoint signed by it.
    NothingSigned,
    /// An exported checkpoint the log should still contain is not in it.
    ExpectationMissing { seq: u64 },
}

impl std::error::Error for Break {}

impl fmt::Display for Break {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Break::Unreadable { line, message } => {
                write!(f, "line {line}: not a record: {message}")
            }
            Break::Edited { seq } => write!(
                f,
                "seq {seq}: the record's hash does not match its content (edited)"
            ),
            Break::OutOfSequence {
                line,
                expected_seq,
                found_seq,
            } => write!(
                f,
                "line {line}: expected seq {expected_seq}, found seq {found_seq} (a record was deleted, inserted or moved)"
            ),
            Break::Unlinked { seq } => {
                write!(f, "seq {seq}: prev is not the hash of the record before it")
            }
            Break::HeadMissing => write!(f, "the head file is missing"),
            Break::HeadUnreadable { message } => {
                write!(f, "the head file is unreadable: {message}")
            }
            Break::Truncated { log_seq, head_seq } => {
                write!(
                    f,
                    "the log ends at seq {log_seq} but its head is at seq {head_seq} (records were removed from the end)"
                )
            }
            Break::Extended { log_seq, head_seq } => {
                write!(
                    f,
                    "the log goes on to seq {log_seq} past its head at seq {head_seq} (records were appended)"
                )
            }
            Break::HeadMismatch { seq } => write!(
                f,
                "seq {seq}: the last record is not the one the head names (replaced)"
            ),
            Break::HeadTampered { message } => {
                write!(f, "the head file was tampered with: {message}")
            }
            Break::CheckpointMisplaced { seq } => write!(
                f,
                "seq {seq}: the checkpoint does not name the record before it"
            ),
            Break::BadSignature { seq } => write!(
                f,
                "seq {seq}: the checkpoint is not signed by this key (forged or rewritten)"
            ),
            Break::UnsignedTail {
                signed_seq,
                log_seq,
            } => write!(
                f,
                "the log goes on to seq {log_seq} past its last signed checkpoint at seq {signed_seq} (records were added, or the signed end was cut off)"
            ),
            Break::NothingSigned => write!(
                f,
                "no checkpoint signed by this key: the log is not the one the key signed (deleted, replaced or never signed)"
            ),
            Break::ExpectationMissing { seq } => write!(
                f,
                "the exported checkpoint at seq {seq} is not in the log (rewritten or cut)"
            ),
        }
    }
}

/// What a scan of the records found.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    pub records: u64,
    pub last: Option<Mark>,
    pub checkpoints: u64,
    /// The last checkpoint (signed by the auditor's key, when one is given).
    pub last_checkpoint: Option<Checkpoint>,
    /// Whether the expected checkpoint (if any) was found in place.
    pub expectation_met: bool,
    /// Bytes of complete, valid records from the start.
    pub good_bytes: u64,
    /// The file ends with an incomplete line (a write cut short).
    pub partial_tail: bool,
    pub first_break: Option<Break>,
}

/// Reads records one at a time, in constant memory.
pub struct Records<R> {
    reader: R,
    line: u64,
    buffer: Vec<u8>,
}

impl Records<BufReader<File>> {
    pub fn open(path: &Path) -> io::Result<Self> {
        Ok(Self::new(BufReader::with_capacity(
            1 << 16,
            File::open(path)?,
        )))
    }
}

impl<R: BufRead> Records<R> {
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            line: 0,
            buffer: Vec::with_capacity(4096),
        }
    }
}

/// One line of the log.
pub enum Line {
    Record {
        record: Box<StoredRecord>,
        bytes: u64,
    },
    /// A final line without its newline.
    Partial,
    Unreadable {
        line: u64,
        message: String,
    },
}

impl<R: BufRead> Iterator for Records<R> {
    type Item = io::Result<Line>;

    fn next(&mut self) -> Option<Self::Item> {
        self.buffer.clear();
        match self.reader.read_until(b'\n', &mut self.buffer) {
            Ok(0) => None,
            Err(err) => Some(Err(err)),
            Ok(bytes) => {
                self.line += 1;
                if self.buffer.last() != Some(&b'\n') {
                    return Some(Ok(Line::Partial));
                }
                let line = &self.buffer[..self.buffer.len() - 1];
                Some(Ok(match serde_json::from_slice::<StoredRecord>(line) {
                    Ok(mut record) => {
                        record.hash_valid = line_hash_is_valid(line, &record.hash);
                        Line::Record {
                            record: Box::new(record),
                            bytes: bytes as u64,
                        }
                    }
                    Err(err) => Line::Unreadable {
                        line: self.line,
                        message: err.to_string(),
                    },
                }))
            }
        }
    }
}

/// What an auditor brings to a verification.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    /// The public key that signs checkpoints.
    pub key: Option<VerifyingKey>,
    /// A position exported earlier (`audit checkpoint --export`) that the
    /// log must still contain.
    pub expect: Option<Mark>,
}

/// Follows the chain one record at a time: what `scan` and replay share.
#[derive(Debug, Clone)]
pub struct Chain {
    prev: String,
    scan: Scan,
    trust: Trust,
}

impl Default for Chain {
    fn default() -> Self {
        Self::new(Trust::default())
    }
}

impl Chain {
    pub fn new(trust: Trust) -> Self {
        Self {
            prev: GENESIS.to_owned(),
            scan: Scan::default(),
            trust,
        }
    }

    /// Checks the next record (on line `line`, `bytes` long with its newline).
    pub fn check(&mut self, line: u64, record: &StoredRecord, bytes: u64) -> Result<(), Break> {
        let expected = self.scan.records + 1;
        if record.seq != expected {
            return Err(Break::OutOfSequence {
                line,
                expected_seq: expected,
                found_seq: record.seq,
            });
        }
        if !record.hash_valid {
            return Err(Break::Edited { seq: record.seq });
        }
        if record.prev != self.prev {
            return Err(Break::Unlinked { seq: record.seq });
        }
        if record.kind == Kind::Checkpoint {
            self.checkpoint(record)?;
        }
        if let Some(expect) = &self.trust.expect
            && expect.seq == record.seq
        {
            if expect.hash != record.hash {
                return Err(Break::ExpectationMissing { seq: expect.seq });
            }
            self.scan.expectation_met = true;
        }
        self.prev.clone_from(&record.hash);
        self.scan.records = record.seq;
        self.scan.good_bytes += bytes;
        self.scan.last = Some(Mark {
            seq: record.seq,
            hash: record.hash.clone(),
        });
        Ok(())
    }

    /// A checkpoint must sign the record just before it, with the
    /// auditor's key when there is one.
    fn checkpoint(&mut self, record: &StoredRecord) -> Result<(), Break> {
        let checkpoint = Checkpoint::from_body(&record.body_value())
            .filter(|c| c.seq + 1 == record.seq && c.hash == record.prev)
            .ok_or(Break::CheckpointMisplaced { seq: record.seq })?;
        if let Some(key) = &self.trust.key
            && !checkpoint.signed_by(key)
        {
            return Err(Break::BadSignature { seq: record.seq });
        }
        self.scan.checkpoints += 1;
        self.scan.last_checkpoint = Some(checkpoint);
        Ok(())
    }

    /// Notes that the file ended with an incomplete line.
    pub fn partial_tail(&mut self) {
        self.scan.partial_tail = true;
    }

    pub fn into_scan(self) -> Scan {
        self.scan
    }
}

/// Checks the chain of a log, stopping at the first break.
pub fn scan(path: &Path) -> io::Result<Scan> {
    scan_trusting(path, Trust::default())
}

/// As `scan`, with what the auditor brings.
pub fn scan_trusting(path: &Path, trust: Trust) -> io::Result<Scan> {
    let mut chain = Chain::new(trust);
    for (index, item) in Records::open(path)?.enumerate() {
        let line = index as u64 + 1;
        let checked = match item? {
            Line::Partial => {
                chain.partial_tail();
                break;
            }
            Line::Unreadable { line, message } => Err(Break::Unreadable { line, message }),
            Line::Record { record, bytes } => chain.check(line, &record, bytes),
        };
        if let Err(broken) = checked {
            let mut scan = chain.into_scan();
            scan.first_break = Some(broken);
            return Ok(scan);
        }
    }
    Ok(chain.into_scan())
}

/// The result of verifying a log: the scan, and the break if any.
#[derive(Debug, Clone)]
pub struct Verified {
    pub scan: Scan,
    /// The last batch was written but never acknowledged (a crash between
    /// the write and the head update); its records are valid.
    pub unacknowledged_tail: bool,
}

/// Verifies the chain and the head. `Err` carries the first break.
pub fn verify(path: &Path) -> io::Result<Result<Verified, Break>> {
    verify_trusting(path, Trust::default())
}

/// Verifies the chain, the head, every checkpoint, and with a key that the
/// log is signed to its end; with an expectation, that it still holds the
/// exported position.
pub fn verify_trusting(path: &Path, trust: Trust) -> io::Result<Result<Verified, Break>> {
    let scan = scan_trusting(path, trust.clone())?;
    if let Some(broken) = scan.first_break.clone() {
        return Ok(Err(broken));
    }
    if let Some(expect) = &trust.expect
        && !scan.expectation_met
    {
        return Ok(Err(Break::ExpectationMissing { seq: expect.seq }));
    }
    if trust.key.is_some() {
        let Some(signed) = &scan.last_checkpoint else {
            return Ok(Err(Break::NothingSigned));
        };
        // The checkpoint record itself follows the position it signs.
        let log_seq = scan.last.as_ref().map_or(0, |m| m.seq);
        if log_seq != signed.seq + 1 {
            return Ok(Err(Break::UnsignedTail {
                signed_seq: signed.seq + 1,
                log_seq,
            }));
        }
    }
    Ok(check_end(path, scan))
}

/// Checks where a scanned log ends against its head file.
pub fn check_end(path: &Path, scan: Scan) -> Result<Verified, Break> {
    let head = match head::read(&head_path(path)) {
        Ok(Some(head)) => head,
        Ok(None) if scan.records == 0 => {
            return Ok(Verified {
                scan,
                unacknowledged_tail: false,
            });
        }
        Ok(None) => return Err(Break::HeadMissing),
        Err(err) => {
            return Err(Break::HeadUnreadable {
                message: err.to_string(),
            });
        }
    };
    let unacknowledged_tail = match end_against_head(&head, scan.last.as_ref())? {
        // A partial line after the committed end is a batch cut short by a
        // crash: never acknowledged, so nothing ran on it.
        End::Committed => scan.partial_tail,
        End::Pending | End::PartOfPending => true,
    };
    Ok(Verified {
        scan,
        unacknowledged_tail,
    })
}

/// Where a log's last complete record lies against its head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// At the committed mark: every record was acknowledged.
    Committed,
    /// At the pending mark: the last batch landed whole but was never
    /// acknowledged.
    Pending,
    /// Between the two: a crash cut the last batch short; none of it was
    /// acknowledged, and a writer cuts it back to the committed mark.
    PartOfPending,
}

/// The one check of a log's end against its head, for the verifier and
/// the writer alike. Any end the writing protocol cannot leave is a break.
pub fn end_against_head(head: &Head, last: Option<&Mark>) -> Result<End, Break> {
    let committed_seq = head.committed.as_ref().map_or(0, |m| m.seq);
    if let Some(pending) = &head.pending
        && pending.seq <= committed_seq
    {
        return Err(Break::HeadTampered {
            message: format!(
                "pending seq {} is not past committed seq {committed_seq}",
                pending.seq
            ),
        });
    }
    if last == head.committed.as_ref() {
        return Ok(End::Committed);
    }
    if head.pending.is_some() && last == head.pending.as_ref() {
        return Ok(End::Pending);
    }
    let log_seq = last.map_or(0, |m| m.seq);
    if let Some(pending) = &head.pending
        && log_seq > committed_seq
        && log_seq < pending.seq
    {
        return Ok(End::PartOfPending);
    }
    Err(if log_seq < committed_seq {
        Break::Truncated {
            log_seq,
            head_seq: committed_seq,
        }
    } else if log_seq > committed_seq {
        Break::Extended {
            log_seq,
            head_seq: committed_seq,
        }
    } else {
        Break::HeadMismatch { seq: log_seq }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(seq: u64) -> Mark {
        Mark {
            seq,
            hash: format!("h{seq}"),
        }
    }

    fn head(committed: u64, pending: Option<u64>) -> Head {
        Head {
            committed: (committed > 0).then(|| mark(committed)),
            pending: pending.map(mark),
        }
    }

    #[test]
    fn every_end_the_writer_can_leave_is_accepted() {
        assert_eq!(end_against_head(&head(0, None), None), Ok(End::Committed));
        assert_eq!(
            end_against_head(&head(5, None), Some(&mark(5))),
            Ok(End::Committed)
        );
        assert_eq!(
            end_against_head(&head(5, Some(9)), Some(&mark(5))),
            Ok(End::Committed)
        );
        assert_eq!(
            end_against_head(&head(5, Some(9)), Some(&mark(9))),
            Ok(End::Pending)
        );
        assert_eq!(
            end_against_head(&head(5, Some(9)), Some(&mark(7))),
            Ok(End::PartOfPending)
        );
        assert_eq!(
            end_against_head(&head(0, Some(3)), Some(&mark(1))),
            Ok(End::PartOfPending)
        );
    }

    #[test]
    fn every_other_end_is_a_break() {
        assert_eq!(
            end_against_head(&head(5, None), Some(&mark(4))),
            Err(Break::Truncated {
                log_seq: 4,
                head_seq: 5
            })
        );
        assert_eq!(
            end_against_head(&head(5, None), Some(&mark(6))),
            Err(Break::Extended {
                log_seq: 6,
                head_seq: 5
            })
        );
        assert_eq!(
            end_against_head(&head(5, Some(9)), Some(&mark(10))),
            Err(Break::Extended {
                log_seq: 10,
                head_seq: 5
            })
        );
        let forged = Mark {
            seq: 5,
            hash: "other".into(),
        };
        assert_eq!(
            end_against_head(&head(5, None), Some(&forged)),
            Err(Break::HeadMismatch { seq: 5 })
        );
        assert!(matches!(
            end_against_head(&head(5, Some(5)), Some(&mark(5))),
            Err(Break::HeadTampered { .. })
        ));
        assert!(matches!(
            end_against_head(&head(0, None), Some(&mark(1))),
            Err(Break::Extended { .. })
        ));
    }
}
