//! The policy sets an operator has let through `serve --reload
//! tighten-only` with `portcullis policy apply`. A set the proof (or the
//! data comparison) shows to widen what is allowed or asked is loaded only
//! once the audit chain holds a signed `policy_apply` record for its exact
//! hash: one covered by a checkpoint signed with the log's key, or one
//! carrying the signature of an operator key `serve` was given with
//! `--apply-key`. Whoever can only write files (the policy folder, the log
//! folder) cannot make either.
//!
//! `FILE.applied` beside the log is only a nudge: `serve` watches it and
//! looks at the chain when it changes. A list written by hand lets nothing
//! through.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::checkpoint::{Signer, fingerprint, signature_valid};
use super::record::Kind;
use super::verify::{Chain, Line, Records, Trust};
use crate::atomic_file::{self, Mode};

/// The `event` of the system record `policy apply` appends.
pub const APPLY_EVENT: &str = "policy_apply";

/// One set let through, as the nudge file lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub policy_set: String,
    /// When (RFC 3339).
    pub at: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppliedFile {
    applied: Vec<Applied>,
}

/// Whose signature lets a wider set through.
#[derive(Debug, Clone)]
pub enum ApplyTrust {
    /// A `policy_apply` record covered by a checkpoint this key signed:
    /// the log's own key, which only the operator beside the token store
    /// holds.
    Log(VerifyingKey),
    /// A `policy_apply` record carrying this operator key's signature over
    /// the set hash (`serve --apply-key`).
    Operator(VerifyingKey),
}

/// What an operator key signs: a fixed tag keeps the signature from
/// meaning anything else.
fn apply_message(hash: &str) -> Vec<u8> {
    format!("portcullis policy apply v1\n{hash}\n").into_bytes()
}

/// The body of the record that lets `hash` through; with an operator's
/// signer, it carries the operator's signature.
pub fn apply_record(hash: &str, operator: Option<&Signer>) -> Value {
    let mut record = json!({"event": APPLY_EVENT, "policy_set": hash});
    if let Some(signer) = operator {
        record["key"] = json!(signer.fingerprint());
        record["signature"] = json!(signer.sign(&apply_message(hash)));
    }
    record
}

/// Whether `body` is a `policy_apply` record of the set `hash` that the
/// operator key `key` signed: what a fleet's shared records are held to,
/// where no replica's log key covers them.
pub fn operator_signed(body: &Value, hash: &str, key: &VerifyingKey) -> bool {
    body["event"] == APPLY_EVENT
        && body["policy_set"] == hash
        && body["key"] == fingerprint(key)
        && body["signature"]
            .as_str()
            .is_some_and(|s| signature_valid(key, &apply_message(hash), s))
}

/// Whether the log at `log` lets `hash` through under `trust`. Only the
/// intact part of the chain counts: a record after a break is not read.
pub fn signed_apply(log: &Path, hash: &str, trust: &ApplyTrust) -> io::Result<bool> {
    let records = match Records::open(log) {
        Ok(records) => records,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(err) => return Err(err),
    };
    let chain_key = match trust {
        ApplyTrust::Log(key) => Some(*key),
        ApplyTrust::Operator(_) => None,
    };
    let mut chain = Chain::new(Trust {
        key: chain_key,
        expect: None,
    });
    let mut asked = false;
    for line in records {
        let Line::Record { record, bytes } = line? else {
            break;
        };
        if chain.check(record.seq, &record, bytes).is_err() {
            break;
        }
        match (record.kind, trust) {
            (Kind::System, _) => {
                let body = record.body_value();
                if body["event"] != APPLY_EVENT || body["policy_set"] != hash {
                    continue;
                }
                if let ApplyTrust::Operator(key) = trust {
                    if operator_signed(&body, hash, key) {
                        return Ok(true);
                    }
                } else {
                    asked = true;
                }
            }
            // The chain checked this checkpoint's signature with the
            // log's key: the record before it is covered.
            (Kind::Checkpoint, ApplyTrust::Log(_)) if asked => return Ok(true),
            _ => {}
        }
    }
    Ok(false)
}

/// Where the nudge file of the log `log` is.
pub fn applied_path(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".applied");
    PathBuf::from(name)
}

/// The sets the nudge file lists; none when it does not exist.
pub fn applied(path: &Path) -> io::Result<Vec<Applied>> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let file: AppliedFile = serde_json::from_str(&text).map_err(|err| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {err}", path.display()),
        )
    })?;
    Ok(file.applied)
}

/// Adds `hash` to the nudge file (once; a second time moves its time),
/// atomically, so that a watching `serve` looks again; whether it is new.
pub fn apply(path: &Path, hash: &str, at: SystemTime) -> io::Result<bool> {
    let mut file = AppliedFile {
        applied: applied(path)?,
    };
    let before = file.applied.len();
    file.applied.retain(|a| a.policy_set != hash);
    let new = file.applied.len() == before;
    file.applied.push(Applied {
        policy_set: hash.to_owned(),
        at: humantime::format_rfc3339_seconds(at).to_string(),
    });
    let mut text = serde_json::to_string_pretty(&file).map_err(io::Error::other)?;
    text.push('\n');
    if let Some(folder) = path.parent().filter(|f| !f.as_os_str().is_empty()) {
        fs::create_dir_all(folder)?;
    }
    atomic_file::replace(path, text.as_bytes(), Mode::AsBefore)?;
    Ok(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{AuditLog, load_or_create_signer};

    #[test]
    fn a_shared_record_counts_only_signed_by_the_operator_for_that_exact_set() {
        let (dir, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let operator = load_or_create_signer(dir.path()).unwrap();
        let stranger = load_or_create_signer(other.path()).unwrap();
        let key = operator.verifying_key();
        let signed = apply_record("abc", Some(&operator));
        assert!(operator_signed(&signed, "abc", &key));
        assert!(!operator_signed(&signed, "abd", &key), "another set");
        let foreign = apply_record("abc", Some(&stranger));
        assert!(!operator_signed(&foreign, "abc", &key), "another key");
        let mut claimed = foreign.clone();
        claimed["key"] = json!(fingerprint(&key));
        assert!(
            !operator_signed(&claimed, "abc", &key),
            "a key named, not signed by"
        );
        assert!(
            !operator_signed(&apply_record("abc", None), "abc", &key),
            "unsigned"
        );
        let mut other_event = signed.clone();
        other_event["event"] = json!("policy_reload");
        assert!(!operator_signed(&other_event, "abc", &key));
        assert!(!operator_signed(&json!("abc"), "abc", &key), "not a record");
    }

    #[test]
    fn a_set_is_listed_once_and_a_damaged_list_is_an_error_not_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = applied_path(&dir.path().join("audit.jsonl"));
        assert!(
            applied(&path).unwrap().is_empty(),
            "no file: nothing listed"
        );
        assert!(apply(&path, "aa", SystemTime::UNIX_EPOCH).unwrap());
        assert!(!apply(&path, "aa", SystemTime::UNIX_EPOCH).unwrap());
        assert!(apply(&path, "bb", SystemTime::UNIX_EPOCH).unwrap());
        assert_eq!(applied(&path).unwrap().len(), 2);
        fs::write(&path, "{not json").unwrap();
        assert!(applied(&path).is_err());
        assert!(apply(&path, "aa", SystemTime::UNIX_EPOCH).is_err());
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "{not json",
            "nothing lost"
        );
    }

    fn keys(dir: &Path, name: &str) -> Signer {
        let folder = dir.join(name);
        fs::create_dir_all(&folder).unwrap();
        load_or_create_signer(&folder).unwrap()
    }

    #[test]
    fn only_a_record_covered_by_the_logs_key_lets_a_set_through() {
        let dir = tempfile::tempdir().unwrap();
        let log_path = dir.path().join("log/audit.jsonl");
        fs::create_dir_all(log_path.parent().unwrap()).unwrap();
        let log_key = keys(dir.path(), "log-key").verifying_key();
        let other = keys(dir.path(), "other");
        let trust = ApplyTrust::Log(log_key);
        assert!(
            !signed_apply(&log_path, "aa", &trust).unwrap(),
            "no log yet"
        );
        // Written by a writer without the log's key: no checkpoint it signed.
        let unsigned = AuditLog::open(&log_path, None).unwrap();
        unsigned
            .append_blocking(Kind::System, apply_record("aa", None))
            .unwrap();
        drop(unsigned);
        assert!(!signed_apply(&log_path, "aa", &trust).unwrap());
        let forged = AuditLog::open(&log_path, Some(other)).unwrap();
        forged
            .append_blocking(Kind::System, apply_record("aa", None))
            .unwrap();
        drop(forged);
        assert!(
            !signed_apply(&log_path, "aa", &trust).unwrap(),
            "another key's checkpoint"
        );
        let signed = AuditLog::open(&log_path, Some(keys(dir.path(), "log-key"))).unwrap();
        signed
            .append_blocking(Kind::System, apply_record("bb", None))
            .unwrap();
        drop(signed);
        assert!(
            !signed_apply(&log_path, "bb", &trust).unwrap(),
            "the chain holds a checkpoint by another key before it: only the intact, trusted part counts"
        );
    }

    #[test]
    fn the_logs_key_covers_the_record_before_its_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let log_path = dir.path().join("log/audit.jsonl");
        fs::create_dir_all(log_path.parent().unwrap()).unwrap();
        let signer = keys(dir.path(), "log-key");
        let trust = ApplyTrust::Log(signer.verifying_key());
        let log = AuditLog::open(&log_path, Some(signer)).unwrap();
        log.append_blocking(Kind::System, json!({"event": "start"}))
            .unwrap();
        log.append_blocking(Kind::System, apply_record("aa", None))
            .unwrap();
        drop(log);
        assert!(signed_apply(&log_path, "aa", &trust).unwrap());
        assert!(
            !signed_apply(&log_path, "a", &trust).unwrap(),
            "the exact hash only"
        );
    }

    #[test]
    fn an_operator_key_signs_the_hash_itself() {
        let dir = tempfile::tempdir().unwrap();
        let log_path = dir.path().join("log/audit.jsonl");
        fs::create_dir_all(log_path.parent().unwrap()).unwrap();
        let operator = keys(dir.path(), "operator");
        let stranger = keys(dir.path(), "stranger");
        let trust = ApplyTrust::Operator(operator.verifying_key());
        let log = AuditLog::open(&log_path, None).unwrap();
        log.append_blocking(Kind::System, apply_record("aa", None))
            .unwrap();
        log.append_blocking(Kind::System, apply_record("aa", Some(&stranger)))
            .unwrap();
        let mut moved = apply_record("bb", Some(&operator));
        moved["policy_set"] = json!("aa");
        log.append_blocking(Kind::System, moved).unwrap();
        assert!(!signed_apply(&log_path, "aa", &trust).unwrap());
        log.append_blocking(Kind::System, apply_record("aa", Some(&operator)))
            .unwrap();
        drop(log);
        assert!(signed_apply(&log_path, "aa", &trust).unwrap());
    }
}
