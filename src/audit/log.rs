//! The append side of the audit log: one writer thread, group commit.
//!
//! Callers hand records to the writer and wait; the writer takes every
//! record waiting, writes them in one go, syncs once, moves the head, and
//! only then answers each caller with its seq. So a tool runs only after its
//! decision record is on disk, and concurrent callers share one fsync.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::SystemTime;

use serde_json::Value;
use thiserror::Error;
use tokio::sync::oneshot;

use super::head::{self, Head, HeadFile, Mark, head_path};
use super::record::{GENESIS, Kind, Record};
use super::verify::{Break, scan};

/// Most records written in one batch.
const MAX_BATCH: usize = 4096;

#[derive(Debug, Error, Clone)]
pub enum AuditError {
    #[error("cannot open the audit log {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("the audit log {path} does not verify ({problem}); refusing to append to it")]
    Broken { path: PathBuf, problem: String },
    #[error("cannot write the audit log: {0}")]
    Write(String),
    #[error("the audit log writer has stopped")]
    Stopped,
}

struct Job {
    kind: Kind,
    body: Value,
    done: oneshot::Sender<Result<u64, AuditError>>,
}

/// A handle on the log; cheap to share behind an `Arc`.
pub struct AuditLog {
    jobs: mpsc::Sender<Job>,
    path: PathBuf,
}

impl AuditLog {
    /// Opens (or creates) a log, checks it to the end, finishes what a
    /// crash left (a cut-short last line, a head one batch behind), and
    /// starts the writer. A log that does not verify is refused: appending
    /// to it would hide the break.
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        let open_error = |message: String| AuditError::Open {
            path: path.to_owned(),
            message,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| open_error(e.to_string()))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| open_error(e.to_string()))?;
        let scanned = scan(path).map_err(|e| open_error(e.to_string()))?;
        let broken = |problem: String| AuditError::Broken {
            path: path.to_owned(),
            problem,
        };
        if let Some(first) = scanned.first_break {
            return Err(broken(first.to_string()));
        }
        let head_file_path = head_path(path);
        let head = head::read(&head_file_path).map_err(|e| broken(format!("head: {e}")))?;
        let end = scanned.last.clone();
        let committed = match head {
            None if end.is_none() => None,
            None => return Err(broken(Break::HeadMissing.to_string())),
            Some(head) if end == head.committed => head.committed,
            Some(head) if head.pending.is_some() && end == head.pending => head.pending,
            Some(head) => {
                let log_seq = end.as_ref().map_or(0, |m| m.seq);
                let head_seq = head.committed.as_ref().map_or(0, |m| m.seq);
                return Err(broken(format!(
                    "the log ends at seq {log_seq}, its head is at seq {head_seq}"
                )));
            }
        };
        if scanned.partial_tail {
            // An unacknowledged batch cut short by a crash.
            file.set_len(scanned.good_bytes)
                .map_err(|e| open_error(e.to_string()))?;
            file.sync_all().map_err(|e| open_error(e.to_string()))?;
        }
        let head_file = HeadFile::open(&head_file_path).map_err(|e| open_error(e.to_string()))?;
        head_file
            .write(&Head {
                committed: committed.clone(),
                pending: None,
            })
            .map_err(|e| open_error(e.to_string()))?;
        let (jobs, receiver) = mpsc::channel();
        let writer = Writer {
            file,
            head: head_file,
            last: committed,
            good_bytes: scanned.good_bytes,
            broken: None,
        };
        std::thread::Builder::new()
            .name("audit-writer".to_owned())
            .spawn(move || writer.run(&receiver))
            .map_err(|e| open_error(e.to_string()))?;
        Ok(Self {
            jobs,
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a record and waits until it is durable; returns its seq.
    pub async fn append(&self, kind: Kind, body: Value) -> Result<u64, AuditError> {
        let (done, wait) = oneshot::channel();
        self.jobs
            .send(Job { kind, body, done })
            .map_err(|_| AuditError::Stopped)?;
        wait.await.map_err(|_| AuditError::Stopped)?
    }

    /// Appends several records in one batch; their seqs once all are durable.
    pub async fn append_many(&self, records: Vec<(Kind, Value)>) -> Result<Vec<u64>, AuditError> {
        let mut waits = Vec::with_capacity(records.len());
        for (kind, body) in records {
            let (done, wait) = oneshot::channel();
            self.jobs
                .send(Job { kind, body, done })
                .map_err(|_| AuditError::Stopped)?;
            waits.push(wait);
        }
        let mut seqs = Vec::with_capacity(waits.len());
        for wait in waits {
            seqs.push(wait.await.map_err(|_| AuditError::Stopped)??);
        }
        Ok(seqs)
    }

    /// Queues a record without waiting for it: for records nothing waits
    /// on (an outcome, after its effect). The writer keeps order.
    pub fn submit(&self, kind: Kind, body: Value) -> Result<(), AuditError> {
        let (done, _) = oneshot::channel();
        self.jobs
            .send(Job { kind, body, done })
            .map_err(|_| AuditError::Stopped)
    }

    /// As `append`, for callers outside an async runtime.
    pub fn append_blocking(&self, kind: Kind, body: Value) -> Result<u64, AuditError> {
        let (done, wait) = oneshot::channel();
        self.jobs
            .send(Job { kind, body, done })
            .map_err(|_| AuditError::Stopped)?;
        wait.blocking_recv().map_err(|_| AuditError::Stopped)?
    }
}

struct Writer {
    file: File,
    head: HeadFile,
    last: Option<Mark>,
    good_bytes: u64,
    /// Set when a failed write could not be undone: every later append
    /// fails, rather than chain onto a damaged file.
    broken: Option<String>,
}

impl Writer {
    fn run(mut self, receiver: &mpsc::Receiver<Job>) {
        while let Ok(first) = receiver.recv() {
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match receiver.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            self.write_batch(batch);
        }
    }

    fn write_batch(&mut self, batch: Vec<Job>) {
        if let Some(reason) = &self.broken {
            let error = AuditError::Write(reason.clone());
            for job in batch {
                let _ = job.done.send(Err(error.clone()));
            }
            return;
        }
        let time = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
        let (mut seq, mut prev) = match &self.last {
            Some(mark) => (mark.seq, mark.hash.clone()),
            None => (0, GENESIS.to_owned()),
        };
        let mut bytes = Vec::with_capacity(batch.len() * 1024);
        let mut seqs = Vec::with_capacity(batch.len());
        for job in &batch {
            let record = Record::chained(seq, &prev, time.clone(), job.kind, job.body.clone());
            bytes.extend_from_slice(&record.to_line());
            seq = record.seq;
            prev = record.hash;
            seqs.push(seq);
        }
        let end = Mark { seq, hash: prev };
        match self.commit(&bytes, &end) {
            Ok(()) => {
                self.last = Some(end);
                self.good_bytes += bytes.len() as u64;
                for (job, seq) in batch.into_iter().zip(seqs) {
                    let _ = job.done.send(Ok(seq));
                }
            }
            Err(err) => {
                tracing::error!(error = %err, "audit log write failed; the calls waiting on it are denied");
                eprintln!(
                    "portcullis: cannot write the audit log ({err}); denying calls until it can"
                );
                self.undo();
                let error = AuditError::Write(err.to_string());
                for job in batch {
                    let _ = job.done.send(Err(error.clone()));
                }
            }
        }
    }

    fn commit(&mut self, bytes: &[u8], end: &Mark) -> io::Result<()> {
        self.head.write(&Head {
            committed: self.last.clone(),
            pending: Some(end.clone()),
        })?;
        self.file.write_all(bytes)?;
        self.file.sync_data()?;
        self.head.write(&Head {
            committed: Some(end.clone()),
            pending: None,
        })
    }

    /// Cuts a failed batch off the end of the file, so the next batch
    /// chains onto the last good record.
    fn undo(&mut self) {
        let restored = self
            .file
            .set_len(self.good_bytes)
            .and_then(|()| self.file.sync_all())
            .and_then(|()| {
                self.head.write(&Head {
                    committed: self.last.clone(),
                    pending: None,
                })
            });
        if let Err(err) = restored {
            self.broken = Some(format!(
                "the log could not be restored after a failed write: {err}"
            ));
        }
    }
}
