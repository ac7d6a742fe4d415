//! Where the keeper's records go: the audit log, or memory in unit tests.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::audit::{AuditError, AuditLog, Kind};

/// A durable append that has not finished yet.
pub type Appending<'a> = Pin<Box<dyn Future<Output = Result<Vec<u64>, AuditError>> + Send + 'a>>;

/// What the keeper needs of an audit log.
pub trait AuditSink: Send + Sync {
    /// Appends records as one durable batch; their seqs, once durable.
    fn append_many(&self, records: Vec<(Kind, Value)>) -> Appending<'_>;

    /// Queues a record the caller does not wait for; it lands before any
    /// record appended later.
    fn submit(&self, kind: Kind, body: Value) -> Result<(), AuditError>;
}

impl AuditSink for AuditLog {
    fn append_many(&self, records: Vec<(Kind, Value)>) -> Appending<'_> {
        Box::pin(AuditLog::append_many(self, records))
    }

    fn submit(&self, kind: Kind, body: Value) -> Result<(), AuditError> {
        AuditLog::submit(self, kind, body)
    }
}

#[cfg(test)]
pub(crate) mod memory {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// Records in memory, in order; can be made to fail like a full disk.
    #[derive(Default)]
    pub struct MemorySink {
        pub records: Mutex<Vec<(Kind, Value)>>,
        pub failing: AtomicBool,
    }

    impl MemorySink {
        pub fn bodies(&self, kind: Kind) -> Vec<Value> {
            let records = self.records.lock().unwrap();
            records
                .iter()
                .filter(|(k, _)| *k == kind)
                .map(|(_, body)| body.clone())
                .collect()
        }

        fn push(&self, records: Vec<(Kind, Value)>) -> Result<Vec<u64>, AuditError> {
            if self.failing.load(Ordering::Relaxed) {
                return Err(AuditError::Write("failing on purpose".into()));
            }
            let mut all = self.records.lock().unwrap();
            let mut seqs = Vec::new();
            for record in records {
                all.push(record);
                seqs.push(all.len() as u64);
            }
            Ok(seqs)
        }
    }

    impl AuditSink for MemorySink {
        fn append_many(&self, records: Vec<(Kind, Value)>) -> Appending<'_> {
            let result = self.push(records);
            Box::pin(async move { result })
        }

        fn submit(&self, kind: Kind, body: Value) -> Result<(), AuditError> {
            self.push(vec![(kind, body)]).map(|_| ())
        }
    }
}
