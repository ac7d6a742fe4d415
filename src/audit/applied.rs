//! The policy sets an operator has let through `serve --reload
//! tighten-only` with `portcullis policy apply`: a set the proof shows to
//! widen what is allowed or asked is loaded only once its exact hash is
//! listed here. The list sits beside the log (`FILE.applied`), with its
//! head and snapshots, in the operator's state folder, not in the policy
//! folder whose edits it judges.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::atomic_file::{self, Mode};

/// One set let through.
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

/// Where the list of applied sets of the log `log` is.
pub fn applied_path(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".applied");
    PathBuf::from(name)
}

/// The sets applied so far; none when the file does not exist.
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

/// Whether the set `hash` was applied.
pub fn is_applied(path: &Path, hash: &str) -> io::Result<bool> {
    Ok(applied(path)?.iter().any(|a| a.policy_set == hash))
}

/// Adds `hash` to the list (once), atomically; whether it is new.
pub fn apply(path: &Path, hash: &str, at: SystemTime) -> io::Result<bool> {
    let mut file = AppliedFile {
        applied: applied(path)?,
    };
    if file.applied.iter().any(|a| a.policy_set == hash) {
        return Ok(false);
    }
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
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_is_applied_once_and_found_by_its_exact_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = applied_path(&dir.path().join("audit.jsonl"));
        assert!(
            !is_applied(&path, "aa").unwrap(),
            "no file: nothing applied"
        );
        assert!(apply(&path, "aa", SystemTime::UNIX_EPOCH).unwrap());
        assert!(!apply(&path, "aa", SystemTime::UNIX_EPOCH).unwrap());
        assert!(apply(&path, "bb", SystemTime::UNIX_EPOCH).unwrap());
        assert!(is_applied(&path, "aa").unwrap());
        assert!(!is_applied(&path, "a").unwrap());
        assert_eq!(applied(&path).unwrap().len(), 2);
    }

    #[test]
    fn a_damaged_list_is_an_error_not_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = applied_path(&dir.path().join("audit.jsonl"));
        fs::write(&path, "{not json").unwrap();
        assert!(is_applied(&path, "aa").is_err());
        assert!(apply(&path, "aa", SystemTime::UNIX_EPOCH).is_err());
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "{not json",
            "nothing lost"
        );
    }
}
