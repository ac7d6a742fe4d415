//! The append side of the audit log: one writer thread per process, group
//! commit, and any number of processes on one log.
//!
//! Callers hand records to the writer and wait; the writer takes every
//! record waiting and, holding an exclusive lock on the log file (`flock`),
//! reads what other processes appended since its last batch (checking each
//! record's hash and link), chains its batch onto the true tail, ends it
//! with a signed checkpoint, writes it in one go, syncs once, moves the
//! head, and only then releases the lock and answers each caller with its
//! seq. So a tool runs only after its decision record is on disk,
//! concurrent callers share one fsync, and every process's records form one
//! chain. A process that dies holding the lock loses nothing it
//! acknowledged: the kernel drops the lock, and the next writer finishes or
//! cuts off the batch it left, as `open` does after a crash.

use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde_json::Value;
use thiserror::Error;
use tokio::sync::oneshot;

use super::chain::{Batch, ChainError, ChainStore, Check};
use super::checkpoint::Signer;
use super::file_chain::FileChain;
use super::head::Mark;
use super::record::{GENESIS, Kind, Record};
use crate::canonical::encode;
use crate::clock::{Clock, SystemClock};

/// Most records taken into one batch (a group from `append_many` is
/// never split, so a batch may go past it by one group).
const MAX_BATCH: usize = 4096;
/// How many records nobody waits for are held while the log cannot be
/// written.
const MAX_HELD: usize = 65_536;

/// How long records nobody waits for (an outcome, after its effect) are
/// held for a record someone does wait for, so both share one batch and
/// one pair of fsyncs. An agent's next call comes within a millisecond of
/// the last one's answer when it runs a script, and tens of milliseconds
/// later when a model reads the answer first: either way the outcome is
/// written with the next decision instead of in a batch of its own, which
/// cost a proxied call spaced 20 ms apart 1.8x the CPU of one made back to
/// back (with 2 ms). Nothing is acknowledged from a held record, and a
/// shutdown writes what is held.
const LINGER: Duration = Duration::from_millis(250);

#[derive(Debug, Error, Clone)]
pub enum AuditError {
    #[error("cannot open the audit log {log}: {message}")]
    Open { log: String, message: String },
    #[error("the audit log {log} does not verify ({problem}); refusing to append to it")]
    Broken { log: String, problem: String },
    #[error("cannot write the audit log: {0}")]
    Write(String),
    #[error("the audit log writer has stopped")]
    Stopped,
    #[error("the audit log was closed by this process's shutdown record")]
    Closed,
}

struct Job {
    kind: Kind,
    /// The body's canonical encoding, made by the caller: the one writer
    /// thread only chains and hashes.
    body: Vec<u8>,
    /// The last record this process writes: nothing after it is accepted.
    closes: bool,
    /// Whoever waits for the record to be durable; `None` when nobody
    /// does, and the record may linger for the next batch.
    done: Option<oneshot::Sender<Result<u64, AuditError>>>,
}

impl Job {
    fn awaited(
        kind: Kind,
        body: &Value,
        closes: bool,
    ) -> (Self, oneshot::Receiver<Result<u64, AuditError>>) {
        let (done, wait) = oneshot::channel();
        let job = Self {
            kind,
            body: encode(body),
            closes,
            done: Some(done),
        };
        (job, wait)
    }

    fn any_awaited(group: &[Self]) -> bool {
        group.iter().any(|job| job.done.is_some())
    }

    fn answer(self, result: Result<u64, AuditError>) {
        if let Some(done) = self.done {
            let _ = done.send(result);
        }
    }
}

/// A handle on the log; cheap to share behind an `Arc`.
pub struct AuditLog {
    /// Records go over in groups, each a whole `append_many`: a group is
    /// never split between batches, so its records share one write.
    jobs: mpsc::Sender<Vec<Job>>,
    file: Option<PathBuf>,
}

impl AuditLog {
    /// Opens (or creates) a log, checks it to the end, finishes what a
    /// crash left (a cut-short last batch, a head one batch behind), and
    /// starts the writer. A log that does not verify is refused: appending
    /// to it would hide the break. With a signer, every batch ends with a
    /// signed checkpoint.
    pub fn open(path: &Path, signer: Option<Signer>) -> Result<Self, AuditError> {
        Self::open_with_clock(path, signer, Arc::new(SystemClock))
    }

    /// As `open`, with records stamped by `clock`.
    pub fn open_with_clock(
        path: &Path,
        signer: Option<Signer>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, AuditError> {
        let (log, checked) = Self::open_in_background(path, signer, clock)?;
        checked.blocking_recv().map_err(|_| AuditError::Stopped)??;
        Ok(log)
    }

    /// Opens a log and checks it on the writer's thread, answering on the
    /// receiver when the check is done. Records can be handed over at once:
    /// the writer takes none until the whole log has verified, and refuses
    /// every one if it does not, so a log that does not verify is never
    /// appended to. A caller can meanwhile do what needs no record (an MCP
    /// handshake, say), which keeps start-up from growing with the log.
    pub fn open_in_background(
        path: &Path,
        signer: Option<Signer>,
        clock: Arc<dyn Clock>,
    ) -> Result<(Self, oneshot::Receiver<Result<(), AuditError>>), AuditError> {
        Self::start(path, signer, clock, Check::Whole, LINGER)
    }

    fn start(
        path: &Path,
        signer: Option<Signer>,
        clock: Arc<dyn Clock>,
        check: Check,
        linger: Duration,
    ) -> Result<(Self, oneshot::Receiver<Result<(), AuditError>>), AuditError> {
        let store = FileChain::create(path).map_err(|err| AuditError::Open {
            log: path.display().to_string(),
            message: err.to_string(),
        })?;
        let (mut log, checked) = Self::start_on(Box::new(store), signer, clock, check, linger)?;
        log.file = Some(path.to_owned());
        Ok((log, checked))
    }

    /// As [`AuditLog::open_in_background`], on another store than a file
    /// (a fleet's shared chain).
    pub fn open_store_in_background(
        store: Box<dyn ChainStore>,
        signer: Option<Signer>,
        clock: Arc<dyn Clock>,
    ) -> Result<(Self, oneshot::Receiver<Result<(), AuditError>>), AuditError> {
        Self::start_on(store, signer, clock, Check::Whole, LINGER)
    }

    /// Starts the writer on `store`, checked on the writer's thread first.
    fn start_on(
        store: Box<dyn ChainStore>,
        signer: Option<Signer>,
        clock: Arc<dyn Clock>,
        check: Check,
        linger: Duration,
    ) -> Result<(Self, oneshot::Receiver<Result<(), AuditError>>), AuditError> {
        let log = store.describe();
        let mut writer = Writer {
            store,
            signer,
            clock,
            broken: None,
            held: Vec::new(),
            closed: false,
            linger,
        };
        let (jobs, receiver) = mpsc::channel();
        let (checked, answer) = oneshot::channel();
        std::thread::Builder::new()
            .name("audit-writer".to_owned())
            .spawn(move || {
                let opened = writer.open_store(check);
                let refusal = opened.as_ref().err().cloned();
                let _ = checked.send(opened);
                match refusal {
                    None => writer.run(&receiver),
                    Some(error) => {
                        while let Ok(group) = receiver.recv() {
                            Writer::refuse(group, &error);
                        }
                    }
                }
            })
            .map_err(|err| AuditError::Open {
                log: log.clone(),
                message: err.to_string(),
            })?;
        Ok((Self { jobs, file: None }, answer))
    }

    /// Opens a log for a short-lived process that appends a record or two
    /// and exits (a harness hook): instead of the whole log, only its end is
    /// checked against the head, which is what appending depends on (a cut
    /// tail or a torn batch would be chained over and hidden). A break
    /// further back stays where it is, for `audit verify` and for `serve`,
    /// which checks the whole log, to find. A log whose end does not match
    /// its head cleanly (a crash left a batch pending, say) gets the whole
    /// check, as `open` gives it.
    pub fn open_at_end(
        path: &Path,
        signer: Option<Signer>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, AuditError> {
        let (log, checked) = Self::start(path, signer, clock, Check::End, LINGER)?;
        checked.blocking_recv().map_err(|_| AuditError::Stopped)??;
        Ok(log)
    }

    /// The log's file, when it is one (not a fleet's shared chain).
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    fn send(
        &self,
        kind: Kind,
        body: Value,
        closes: bool,
    ) -> Result<oneshot::Receiver<Result<u64, AuditError>>, AuditError> {
        let (job, wait) = Job::awaited(kind, &body, closes);
        self.queue(vec![job])?;
        Ok(wait)
    }

    fn queue(&self, group: Vec<Job>) -> Result<(), AuditError> {
        self.jobs.send(group).map_err(|_| AuditError::Stopped)
    }

    /// Appends a record and waits until it is durable; returns its seq.
    pub async fn append(&self, kind: Kind, body: Value) -> Result<u64, AuditError> {
        self.send(kind, body, false)?
            .await
            .map_err(|_| AuditError::Stopped)?
    }

    /// Appends this process's last record (its shutdown) and closes the
    /// log: anything submitted after it (an approval answered late, an
    /// outcome) is refused, not written.
    pub async fn close(&self, kind: Kind, body: Value) -> Result<u64, AuditError> {
        self.send(kind, body, true)?
            .await
            .map_err(|_| AuditError::Stopped)?
    }

    /// Appends several records in one batch; their seqs once all are durable.
    pub async fn append_many(&self, records: Vec<(Kind, Value)>) -> Result<Vec<u64>, AuditError> {
        let (group, waits): (Vec<Job>, Vec<_>) = records
            .into_iter()
            .map(|(kind, body)| Job::awaited(kind, &body, false))
            .unzip();
        self.queue(group)?;
        let mut seqs = Vec::with_capacity(waits.len());
        for wait in waits {
            seqs.push(wait.await.map_err(|_| AuditError::Stopped)??);
        }
        Ok(seqs)
    }

    /// Queues a record without waiting for it: for records nothing waits
    /// on (an outcome, after its effect). The writer keeps order, and may
    /// hold the record a moment (`LINGER`) to write it with the next
    /// record someone waits for.
    pub fn submit(&self, kind: Kind, body: Value) -> Result<(), AuditError> {
        self.queue(vec![Job {
            kind,
            body: encode(&body),
            closes: false,
            done: None,
        }])
    }

    /// As `append`, for callers outside an async runtime.
    pub fn append_blocking(&self, kind: Kind, body: Value) -> Result<u64, AuditError> {
        self.send(kind, body, false)?
            .blocking_recv()
            .map_err(|_| AuditError::Stopped)?
    }
}

struct Writer {
    /// Where the chain is kept: a file, or a table a fleet shares.
    store: Box<dyn ChainStore>,
    signer: Option<Signer>,
    clock: Arc<dyn Clock>,
    /// Set when a failed write could not be undone: nothing chains onto
    /// the store until a whole check finds its last good record again.
    broken: Option<String>,
    /// Records nobody waited for (an outcome: the effect already
    /// happened) whose batch failed: written first when the log can be
    /// written again, not lost.
    held: Vec<Job>,
    closed: bool,
    linger: Duration,
}

impl Writer {
    /// Writes what is queued, a batch at a time. A batch of records nobody
    /// waits for is held up to `linger` for one somebody does; it is
    /// written when that comes, when the linger is over, or when the last
    /// handle on the log is dropped, whichever is first.
    fn run(mut self, receiver: &mpsc::Receiver<Vec<Job>>) {
        let mut batch: Vec<Job> = Vec::new();
        // Whether someone waits for a record of the batch: then it is
        // written now.
        let mut awaited = false;
        // When the held batch must be written: the linger runs from the
        // first record held, so a stream of them cannot hold it longer.
        let mut due = Instant::now();
        loop {
            let next = if batch.is_empty() {
                receiver
                    .recv()
                    .map_err(|_| mpsc::RecvTimeoutError::Disconnected)
            } else {
                receiver.recv_timeout(due.saturating_duration_since(Instant::now()))
            };
            let mut group = match next {
                Ok(group) => {
                    if batch.is_empty() {
                        due = Instant::now() + self.linger;
                    }
                    Some(group)
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.write_batch(std::mem::take(&mut batch));
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    if !batch.is_empty() {
                        self.write_batch(batch);
                    }
                    return;
                }
            };
            // Whatever else is queued joins it, up to a full batch.
            while let Some(taken) = group {
                awaited |= Job::any_awaited(&taken);
                batch.extend(taken);
                group = (batch.len() < MAX_BATCH)
                    .then(|| receiver.try_recv().ok())
                    .flatten();
            }
            if awaited || batch.len() >= MAX_BATCH {
                self.write_batch(std::mem::take(&mut batch));
                awaited = false;
            }
        }
    }

    fn refuse(batch: Vec<Job>, error: &AuditError) {
        for job in batch {
            job.answer(Err(error.clone()));
        }
    }

    /// A failed batch: whoever waits is refused (their call fails
    /// closed); records nobody waits for are held for the next write, up
    /// to a bound past which they are refused and logged.
    fn set_aside(&mut self, batch: Vec<Job>, error: &AuditError) {
        let mut dropped = 0;
        for job in batch {
            if job.done.is_none() && self.held.len() < MAX_HELD {
                self.held.push(job);
            } else {
                dropped += usize::from(job.done.is_none());
                job.answer(Err(error.clone()));
            }
        }
        if dropped > 0 {
            tracing::error!(
                dropped,
                "records nobody waited for could not be held for the audit log"
            );
        }
    }

    fn write_batch(&mut self, batch: Vec<Job>) {
        let mut batch: Vec<Job> = std::mem::take(&mut self.held)
            .into_iter()
            .chain(batch)
            .collect();
        if self.closed {
            Self::refuse(batch, &AuditError::Closed);
            return;
        }
        if let Some(reason) = self.broken.take() {
            // The failure may have passed (a file made writable again):
            // the log is checked whole and settled at its last good
            // record, as at open, before anything chains onto it.
            if let Err(err) = self.open_store(Check::Whole) {
                self.set_aside(batch, &AuditError::Write(format!("{reason}; still: {err}")));
                self.broken = Some(reason);
                return;
            }
            tracing::warn!("the audit log is writable again: calls are recorded and run");
            eprintln!("portcullis: the audit log is writable again");
        }
        if let Some(at) = batch.iter().position(|job| job.closes) {
            let late = batch.split_off(at + 1);
            Self::refuse(late, &AuditError::Closed);
            self.closed = true;
        }
        let written = match self.store.begin() {
            Ok(end) => {
                let written = self.write_on(end, &batch);
                self.store.finish();
                written
            }
            Err(err) => Err(err),
        };
        match written {
            Ok(seqs) => {
                for (job, seq) in batch.into_iter().zip(seqs) {
                    job.answer(Ok(seq));
                }
            }
            Err(err) => {
                tracing::error!(error = %err, "audit log write failed; the calls waiting on it are denied");
                eprintln!(
                    "portcullis: cannot write the audit log ({err}); denying calls until it can"
                );
                self.set_aside(batch, &AuditError::Write(err.to_string()));
            }
        }
    }

    /// Chains `batch` (and a signed checkpoint) onto `end` and commits it
    /// to the store; the batch's seqs.
    fn write_on(&mut self, end: Option<Mark>, batch: &[Job]) -> Result<Vec<u64>, String> {
        let time = humantime::format_rfc3339_millis(self.clock.now()).to_string();
        let (mut seq, mut prev) = match &end {
            Some(mark) => (mark.seq, mark.hash.clone()),
            None => (0, GENESIS.to_owned()),
        };
        let size: usize = batch.iter().map(|job| job.body.len() + 200).sum();
        let mut bytes = Vec::with_capacity(size + 512);
        let mut marks = Vec::with_capacity(batch.len() + 1);
        for job in batch {
            let (next, hash, line) =
                Record::line_from_encoded(seq, &prev, &time, job.kind, &job.body);
            bytes.extend_from_slice(&line);
            seq = next;
            prev = hash;
            marks.push(Mark {
                seq,
                hash: prev.clone(),
            });
        }
        let seqs: Vec<u64> = marks.iter().map(|mark| mark.seq).collect();
        if let Some(signer) = &self.signer {
            let signed = Mark {
                seq,
                hash: prev.clone(),
            };
            let checkpoint = signer.checkpoint(&signed, &time);
            let body = serde_json::to_value(&checkpoint)
                .map_err(|err| format!("a checkpoint could not be encoded: {err}"))?;
            let (next, hash, line) =
                Record::line_from_encoded(seq, &prev, &time, Kind::Checkpoint, &encode(&body));
            bytes.extend_from_slice(&line);
            marks.push(Mark { seq: next, hash });
        }
        let last = batch.iter().any(|job| job.closes);
        let started = Instant::now();
        let committed = self.store.commit(
            &Batch {
                lines: &bytes,
                marks: &marks,
            },
            last,
        );
        match committed {
            Ok(()) => {
                crate::metrics::audit_batch(batch.len(), started.elapsed());
                Ok(seqs)
            }
            Err(failed) => {
                if let Some(unrestored) = failed.unrestored {
                    self.broken = Some(unrestored);
                }
                Err(failed.error)
            }
        }
    }

    /// Opens the store: checks it (whole, or its end) and settles what a
    /// crash left.
    fn open_store(&mut self, check: Check) -> Result<(), AuditError> {
        let log = self.store.describe();
        self.store.open(check).map_err(|err| match err {
            ChainError::Open(message) => AuditError::Open { log, message },
            ChainError::Broken(problem) => AuditError::Broken { log, problem },
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::audit::verify::verify;

    #[test]
    fn each_batch_is_stamped_with_the_time_its_clock_tells() {
        use std::time::{Duration, UNIX_EPOCH};

        use crate::clock::ManualClock;

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let clock = Arc::new(ManualClock::new(
            UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
        ));
        let log =
            AuditLog::open_with_clock(&path, None, Arc::clone(&clock) as Arc<dyn Clock>).unwrap();
        log.append_blocking(Kind::System, json!({"event": "start"}))
            .unwrap();
        clock.advance(Duration::from_millis(2_500));
        log.append_blocking(Kind::System, json!({"event": "later"}))
            .unwrap();
        let times: Vec<String> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|line| {
                serde_json::from_str::<Value>(line).unwrap()["time"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(
            times,
            ["2023-11-14T22:13:20.123Z", "2023-11-14T22:13:22.623Z"]
        );
        assert!(verify(&path).unwrap().is_ok());
    }

    #[test]
    fn a_log_opened_in_the_background_takes_no_record_until_it_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path, None).unwrap();
        for n in 0..3 {
            log.append_blocking(Kind::System, json!({"n": n})).unwrap();
        }
        drop(log);
        let good = std::fs::read_to_string(&path).unwrap();
        // A record handed over while the check runs lands after it.
        let (log, checked) =
            AuditLog::open_in_background(&path, None, Arc::new(SystemClock)).unwrap();
        log.submit(Kind::System, json!({"n": 3})).unwrap();
        assert!(checked.blocking_recv().unwrap().is_ok());
        assert_eq!(
            log.append_blocking(Kind::System, json!({"n": 4})).unwrap(),
            5
        );
        drop(log);
        // A log with a record taken out: every record is refused, none written.
        let mut lines: Vec<&str> = good.lines().collect();
        lines.remove(1);
        let broken = format!("{}\n", lines.join("\n"));
        std::fs::write(&path, &broken).unwrap();
        let (log, checked) =
            AuditLog::open_in_background(&path, None, Arc::new(SystemClock)).unwrap();
        let refused = log.append_blocking(Kind::System, json!({"n": 9}));
        assert!(
            matches!(refused, Err(AuditError::Broken { .. })),
            "{refused:?}"
        );
        assert!(matches!(
            checked.blocking_recv().unwrap(),
            Err(AuditError::Broken { .. })
        ));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), broken);
    }

    #[test]
    fn nothing_is_recorded_after_the_closing_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path, None).unwrap();
        let runtime = current_thread();
        runtime.block_on(async {
            log.append(Kind::System, json!({"event": "start"}))
                .await
                .unwrap();
            log.close(Kind::System, json!({"event": "shutdown"}))
                .await
                .unwrap();
            let late = log
                .append(Kind::Approval, json!({"event": "answered"}))
                .await;
            assert!(matches!(late, Err(AuditError::Closed)), "{late:?}");
        });
        assert!(
            log.submit(Kind::Outcome, json!({})).is_ok(),
            "queued, then refused"
        );
        assert!(matches!(
            log.append_blocking(Kind::Outcome, json!({})),
            Err(AuditError::Closed)
        ));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.lines().last().unwrap().contains("shutdown"));
        assert!(verify(&path).unwrap().is_ok());
    }

    #[test]
    fn two_handles_on_one_log_write_one_chain() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let signer = || Some(Signer::new(ed25519_dalek::SigningKey::from_bytes(&[3; 32])));
        let a = AuditLog::open(&path, signer()).unwrap();
        let b = AuditLog::open(&path, signer()).unwrap();
        for i in 0..20 {
            let log = if i % 2 == 0 { &a } else { &b };
            log.append_blocking(Kind::System, json!({"i": i})).unwrap();
        }
        let verified = verify(&path).unwrap().unwrap();
        // Twenty records, each in its own batch with its checkpoint.
        assert_eq!(verified.scan.records, 40);
        assert_eq!(verified.scan.checkpoints, 20);
    }

    #[test]
    fn opened_at_its_end_a_log_takes_records_only_if_its_end_is_the_head() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let clock = || Arc::new(SystemClock) as Arc<dyn Clock>;
        // A fresh log, then one whose last record is longer than the first
        // read from the end.
        let log = AuditLog::open_at_end(&path, None, clock()).unwrap();
        log.append_blocking(Kind::System, json!({"n": 1})).unwrap();
        log.append_blocking(Kind::System, json!({"pad": "x".repeat(20_000)}))
            .unwrap();
        drop(log);
        let log = AuditLog::open_at_end(&path, None, clock()).unwrap();
        log.append_blocking(Kind::System, json!({"n": 3})).unwrap();
        drop(log);
        assert_eq!(verify(&path).unwrap().unwrap().scan.records, 3);

        // The last record cut off: the end is not the head's, and the
        // whole check refuses the log.
        let text = std::fs::read_to_string(&path).unwrap();
        let cut: Vec<&str> = text.lines().collect();
        std::fs::write(&path, cut[..2].join("\n") + "\n").unwrap();
        assert!(matches!(
            AuditLog::open_at_end(&path, None, clock()),
            Err(AuditError::Broken { .. })
        ));
        // Nor does a torn last line pass: it is cut back to the head's end.
        std::fs::write(&path, text.clone() + "{\"seq\":4").unwrap();
        let log = AuditLog::open_at_end(&path, None, clock()).unwrap();
        log.append_blocking(Kind::System, json!({"n": 4})).unwrap();
        drop(log);
        assert_eq!(verify(&path).unwrap().unwrap().scan.records, 4);
    }

    /// A new signed log in a new folder, whose writer holds records nobody
    /// waits for `linger`; the folder lives as long as the first value.
    fn lingering(linger: Duration) -> (tempfile::TempDir, PathBuf, AuditLog) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let signer = Signer::new(ed25519_dalek::SigningKey::from_bytes(&[5; 32]));
        let (log, checked) = AuditLog::start(
            &path,
            Some(signer),
            Arc::new(SystemClock),
            Check::Whole,
            linger,
        )
        .unwrap();
        checked.blocking_recv().unwrap().unwrap();
        (dir, path, log)
    }

    fn kinds(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap()["kind"].to_string())
            .collect()
    }

    /// Waits for the log to hold `count` records; the writer is on its own
    /// thread. A minute is far past any linger the tests use that should
    /// end, and far short of the hour of the ones that should not.
    fn wait_for_records(path: &Path, count: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let kinds = kinds(path);
            if kinds.len() >= count || Instant::now() > deadline {
                return kinds;
            }
            std::thread::yield_now();
        }
    }

    const HOUR: Duration = Duration::from_secs(3600);

    fn current_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    #[test]
    fn a_record_nobody_waits_for_shares_the_batch_of_the_next_one() {
        let (_dir, path, log) = lingering(HOUR);
        log.submit(Kind::Outcome, json!({"status": "executed"}))
            .unwrap();
        log.append_blocking(Kind::Decision, json!({"decision": "allow"}))
            .unwrap();
        // One batch, so one checkpoint after both.
        assert_eq!(
            kinds(&path),
            ["\"outcome\"", "\"decision\"", "\"checkpoint\""]
        );
        assert!(verify(&path).unwrap().is_ok());
    }

    #[test]
    fn the_records_of_one_append_many_are_one_batch() {
        let (_dir, path, log) = lingering(HOUR);
        let runtime = current_thread();
        for _ in 0..20 {
            let records = (0..3).map(|n| (Kind::Decision, json!({"n": n}))).collect();
            runtime.block_on(log.append_many(records)).unwrap();
        }
        let kinds = kinds(&path);
        for batch in kinds.chunks(4) {
            assert_eq!(
                batch,
                [
                    "\"decision\"",
                    "\"decision\"",
                    "\"decision\"",
                    "\"checkpoint\""
                ]
            );
        }
        assert_eq!(kinds.len(), 80);
    }

    #[test]
    fn a_record_nobody_waits_for_is_written_when_the_linger_is_over() {
        let (_dir, path, log) = lingering(Duration::from_millis(1));
        log.submit(Kind::Outcome, json!({"status": "executed"}))
            .unwrap();
        assert_eq!(
            wait_for_records(&path, 2),
            ["\"outcome\"", "\"checkpoint\""]
        );
    }

    #[test]
    fn held_records_are_written_when_the_last_handle_is_dropped() {
        let (_dir, path, log) = lingering(HOUR);
        for n in 0..3 {
            log.submit(Kind::Outcome, json!({"n": n})).unwrap();
        }
        drop(log);
        assert_eq!(wait_for_records(&path, 4).len(), 4);
        assert!(verify(&path).unwrap().is_ok());
    }

    #[test]
    fn held_records_are_written_before_the_closing_record() {
        let (_dir, path, log) = lingering(HOUR);
        log.submit(Kind::Outcome, json!({"status": "executed"}))
            .unwrap();
        let runtime = current_thread();
        runtime
            .block_on(log.close(Kind::System, json!({"event": "shutdown"})))
            .unwrap();
        assert_eq!(
            kinds(&path),
            ["\"outcome\"", "\"system\"", "\"checkpoint\""]
        );
    }
}
