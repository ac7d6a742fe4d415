//! Records of the audit log and the pure functions that chain them.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::canonical::{encode, sha256_hex};

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
    /// An approval question, its answer, or a refused approval state.
    Approval,
    /// A signature over the position the chain has reached: the last
    /// record of every batch.
    Checkpoint,
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

    /// The record as a log line: its canonical encoding, newline-terminated.
    /// Written this way, the line less its `"hash"` member is exactly what
    /// the hash was computed over.
    /// The line `Record::chained(prev_seq, prev_hash, time, kind, body)
    /// .to_line()` would write, from the body's canonical encoding: the
    /// writer chains records without walking their bodies again (a caller
    /// encodes its own body, on its own thread). Returns the seq, the hash
    /// and the line, newline included.
    pub fn line_from_encoded(
        prev_seq: u64,
        prev_hash: &str,
        time: &str,
        kind: Kind,
        body: &[u8],
    ) -> (u64, String, Vec<u8>) {
        let seq = prev_seq + 1;
        // Canonical order: body, hash, kind, prev, seq, time; the hash is
        // over the same object without its `hash` member.
        let mut rest = Vec::with_capacity(160);
        rest.extend_from_slice(b",\"kind\":");
        rest.extend_from_slice(&encode(&json!(kind)));
        rest.extend_from_slice(b",\"prev\":");
        rest.extend_from_slice(&encode(&Value::from(prev_hash)));
        rest.extend_from_slice(b",\"seq\":");
        rest.extend_from_slice(seq.to_string().as_bytes());
        rest.extend_from_slice(b",\"time\":");
        rest.extend_from_slice(&encode(&Value::from(time)));
        rest.push(b'}');
        let mut hasher = Sha256::new();
        hasher.update(b"{\"body\":");
        hasher.update(body);
        hasher.update(&rest);
        let hash = hex::encode(hasher.finalize());
        let mut line = Vec::with_capacity(body.len() + rest.len() + 90);
        line.extend_from_slice(b"{\"body\":");
        line.extend_from_slice(body);
        line.extend_from_slice(b",\"hash\":\"");
        line.extend_from_slice(hash.as_bytes());
        line.push(b'"');
        line.extend_from_slice(&rest);
        line.push(b'\n');
        (seq, hash, line)
    }

    pub fn to_line(&self) -> Vec<u8> {
        let mut line = encode(&json!({
            "seq": self.seq, "prev": self.prev, "time": self.time, "kind": self.kind,
            "body": self.body, "hash": self.hash,
        }));
        line.push(b'\n');
        line
    }
}

/// A record as read back, its body left unparsed until someone needs it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredRecord {
    pub seq: u64,
    pub prev: String,
    pub time: String,
    pub kind: Kind,
    pub body: Box<RawValue>,
    pub hash: String,
    /// Whether the line hashes to `hash` (set by the reader).
    #[serde(skip)]
    pub hash_valid: bool,
}

impl StoredRecord {
    /// The body as a value. A `RawValue` holds JSON the reader already
    /// parsed, so the `Null` fallback is never taken.
    pub fn body_value(&self) -> Value {
        serde_json::from_str(self.body.get()).unwrap_or(Value::Null)
    }
}

/// The member that carries the hash in a canonical line. Top-level keys are
/// sorted (`body`, `hash`, `kind`, `prev`, `seq`, `time`) and nothing after
/// `hash` can contain this text, so the last occurrence is the top-level one.
const HASH_MEMBER: &[u8] = b",\"hash\":\"";

/// Whether a line (without its newline) hashes to the hash it carries:
/// SHA-256 of the line with its `,"hash":"..."` member removed. For a
/// record written by portcullis this is the hash of its canonical encoding;
/// any changed byte, re-formatting included, breaks it.
pub fn line_hash_is_valid(line: &[u8], claimed: &str) -> bool {
    let Some(start) = line
        .windows(HASH_MEMBER.len())
        .rposition(|w| w == HASH_MEMBER)
    else {
        return false;
    };
    let value_start = start + HASH_MEMBER.len();
    let value_end = value_start + 64;
    if line.get(value_start..value_end) != Some(claimed.as_bytes())
        || line.get(value_end) != Some(&b'"')
    {
        return false;
    }
    let mut hasher = Sha256::new();
    hasher.update(&line[..start]);
    hasher.update(&line[value_end + 1..]);
    hex::encode(hasher.finalize()) == claimed
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

    #[test]
    fn a_line_from_an_encoded_body_is_the_line_of_the_record() {
        for (kind, body) in [
            (
                Kind::Decision,
                json!({"z": [1, "\"hash\":\"", {"b": null, "a": "é\n"}], "a": true}),
            ),
            (Kind::System, json!({})),
            (Kind::Checkpoint, json!({"key": "\u{1F600}", "n": -3})),
        ] {
            let record = Record::chained(
                41,
                "ab",
                "2026-12-02T12:00:00.000Z".into(),
                kind,
                body.clone(),
            );
            let (seq, hash, line) = Record::line_from_encoded(
                41,
                "ab",
                "2026-12-02T12:00:00.000Z",
                kind,
                &encode(&body),
            );
            assert_eq!((seq, hash), (record.seq, record.hash.clone()));
            assert_eq!(line, record.to_line());
        }
    }

    #[test]
    fn the_line_less_its_hash_member_hashes_to_the_hash() {
        let body = json!({"policy_set": {"hash": "abc"}, "z": [1, "\"hash\":\""], "a": true});
        let record = Record::chained(
            0,
            GENESIS,
            "2026-12-02T12:00:00.000Z".into(),
            Kind::Decision,
            body,
        );
        let line = record.to_line();
        let line = &line[..line.len() - 1];
        assert!(line_hash_is_valid(line, &record.hash));
        let stored: StoredRecord = serde_json::from_slice(line).unwrap();
        assert_eq!(stored.hash, record.hash);
        let mut edited = line.to_vec();
        let at = edited.iter().position(|b| *b == b't').unwrap();
        edited[at] = b'f';
        assert!(!line_hash_is_valid(&edited, &record.hash));
        let reformatted = String::from_utf8(line.to_vec())
            .unwrap()
            .replacen(",", ", ", 1);
        assert!(!line_hash_is_valid(reformatted.as_bytes(), &record.hash));
    }
}
