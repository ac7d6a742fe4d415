//! Records of the audit log and the pure functions that chain them.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::canonical::sha256_hex;

/// The `prev` of the first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A decision, written before anything it allows runs.
    Decision,
    /// What became of an allowed call: executed, failed or cancelled.
    Outcome,
    /// The server's own events: start (with the policy set), shutdown.
    System,
}

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub seq: u64,
    pub prev: String,
    pub time: String,
    pub kind: Kind,
    pub body: Value,
    pub hash: String,
}

/// The hash of a record: SHA-256 over the canonical encoding of every field
/// but `hash`.
pub fn record_hash(seq: u64, prev: &str, time: &str, kind: Kind, body: &Value) -> String {
    sha256_hex(&json!({"seq": seq, "prev": prev, "time": time, "kind": kind, "body": body}))
}

impl Record {
    /// Builds the record that follows `(prev_seq, prev_hash)`.
    pub fn chained(prev_seq: u64, prev_hash: &str, time: String, kind: Kind, body: Value) -> Self {
        let seq = prev_seq + 1;
        let hash = record_hash(seq, prev_hash, &time, kind, &body);
        Self {
            seq,
            prev: prev_hash.to_owned(),
            time,
            kind,
            body,
            hash,
        }
    }

    /// Whether `hash` is the hash of the rest of the record.
    pub fn hash_is_valid(&self) -> bool {
        record_hash(self.seq, &self.prev, &self.time, self.kind, &self.body) == self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_hashes_its_content_and_links_to_the_previous_one() {
        let first = Record::chained(
            0,
            GENESIS,
            "t".into(),
            Kind::System,
            json!({"event": "start"}),
        );
        assert_eq!(first.seq, 1);
        assert!(first.hash_is_valid());
        let second = Record::chained(first.seq, &first.hash, "t".into(), Kind::System, json!({}));
        assert_eq!(second.prev, first.hash);
        let mut edited = second.clone();
        edited.body = json!({"x": 1});
        assert!(!edited.hash_is_valid());
        let mut moved = second;
        moved.seq = 5;
        assert!(!moved.hash_is_valid());
    }
}
