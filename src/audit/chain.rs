//! Where a log's chain of records is kept, behind the one writer that
//! batches, chains, signs and acknowledges them (`log.rs`): a file beside
//! its head on one machine ([`super::FileChain`]), or a table a fleet
//! shares. A store only keeps what it is given durably and says where the
//! chain ends; it never makes a record.

use super::head::Mark;

/// How much of a log is checked before the first append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    Whole,
    /// Only its end, where that tells whether appending is safe (a
    /// short-lived process: a hook).
    End,
}

/// Why a store cannot be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainError {
    /// It cannot be reached or read.
    Open(String),
    /// What it holds does not verify: nothing is appended to it.
    Broken(String),
}

/// A batch that did not become durable.
#[derive(Debug)]
pub struct Failed {
    pub error: String,
    /// Set when the store could not be brought back to its end before the
    /// batch: nothing chains onto it until a whole check settles it.
    pub unrestored: Option<String>,
}

/// A batch as the writer made it: its lines, whole, one after another,
/// and each record's place in the chain (in the same order), so that no
/// store reads back what the writer just wrote.
pub struct Batch<'a> {
    /// Whole records, each ending in a newline.
    pub lines: &'a [u8],
    /// Each record's seq and hash; the last is where the chain then ends.
    pub marks: &'a [Mark],
}

impl Batch<'_> {
    /// Where the chain ends once the batch is in.
    pub fn end(&self) -> Option<&Mark> {
        self.marks.last()
    }
}

pub trait ChainStore: Send {
    /// Names the log in messages.
    fn describe(&self) -> String;
    /// Checks what is stored and settles what a crash left (a batch cut
    /// short, never acknowledged, is cut off).
    fn open(&mut self, check: Check) -> Result<(), ChainError>;
    /// Takes the chain for one batch (a lock, say) and tells where it truly
    /// ends now.
    fn begin(&mut self) -> Result<Option<Mark>, String>;
    /// Makes `batch` durable before it returns; `last` is the log's last
    /// batch. When it fails, none of its records counts.
    fn commit(&mut self, batch: &Batch<'_>, last: bool) -> Result<(), Failed>;
    /// Lets go of what `begin` took.
    fn finish(&mut self);
}
