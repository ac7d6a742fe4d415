//! The content-addressed store of policy sets beside the log: the exact
//! files of every policy set hash a record names, so that replay can
//! rebuild it with nothing but the log folder.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use thiserror::Error;

use crate::atomic_file::{self, Mode};
use crate::pdp::{BundleError, Framing, PolicyBundle, SourceFile};

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Snapshot {
    hash: String,
    /// How the hash frames the files; absent in snapshots from before
    /// framing v2, which are v1.
    #[serde(default = "framing_v1")]
    framing: u8,
    files: Vec<SnapshotFile>,
}

fn framing_v1() -> u8 {
    1
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnapshotFile {
    path: String,
    text: String,
}

pub fn snapshots_dir(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".policies");
    PathBuf::from(name)
}

/// Stores the bundle's deciding files under its hash, unless already there.
pub fn store(dir: &Path, bundle: &PolicyBundle) -> io::Result<String> {
    let hash = bundle.hash();
    let path = dir.join(format!("{hash}.json"));
    if path.exists() {
        return Ok(hash);
    }
    fs::create_dir_all(dir)?;
    let snapshot = Snapshot {
        hash: hash.clone(),
        framing: bundle.framing.number(),
        files: bundle
            .deciding_files()
            .map(|f| SnapshotFile {
                path: f.logical.clone(),
                text: f.text.clone(),
            })
            .collect(),
    };
    let text = serde_json::to_string_pretty(&snapshot).map_err(io::Error::other)?;
    atomic_file::replace(&path, text.as_bytes(), Mode::AsBefore)?;
    Ok(hash)
}

/// Why a stored policy set cannot be loaded.
#[derive(Debug, Error)]
pub enum SnapshotError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path} is not a policy snapshot: {source}")]
    NotASnapshot {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: unknown hash framing {framing}")]
    UnknownFraming { path: PathBuf, framing: u8 },
    #[error("{path}: {source}")]
    Files { path: PathBuf, source: BundleError },
    #[error("{path} does not hash to its name: it was changed")]
    Changed { path: PathBuf },
}

/// Loads the policy set stored under `hash`, checking that its files still
/// hash to it.
pub fn load(dir: &Path, hash: &str) -> Result<PolicyBundle, SnapshotError> {
    let path = dir.join(format!("{hash}.json"));
    let text = fs::read_to_string(&path).map_err(|source| SnapshotError::Read {
        path: path.clone(),
        source,
    })?;
    let snapshot: Snapshot =
        serde_json::from_str(&text).map_err(|source| SnapshotError::NotASnapshot {
            path: path.clone(),
            source,
        })?;
    let files = snapshot
        .files
        .into_iter()
        .map(|f| SourceFile {
            display: format!("<snapshot {}>/{}", &hash[..12.min(hash.len())], f.path),
            logical: f.path,
            text: f.text,
        })
        .collect();
    let framing =
        Framing::from_number(snapshot.framing).ok_or_else(|| SnapshotError::UnknownFraming {
            path: path.clone(),
            framing: snapshot.framing,
        })?;
    let bundle =
        PolicyBundle::from_files(files, framing).map_err(|source| SnapshotError::Files {
            path: path.clone(),
            source,
        })?;
    if bundle.hash() != hash {
        return Err(SnapshotError::Changed { path });
    }
    Ok(bundle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored() -> (tempfile::TempDir, String, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let hash = store(dir.path(), &PolicyBundle::builtin()).unwrap();
        let path = dir.path().join(format!("{hash}.json"));
        (dir, hash, path)
    }

    #[test]
    fn a_stored_set_loads_back_to_the_same_hash() {
        let (dir, hash, _) = stored();
        assert_eq!(load(dir.path(), &hash).unwrap().hash(), hash);
        // Storing it again changes nothing.
        assert_eq!(store(dir.path(), &PolicyBundle::builtin()).unwrap(), hash);
    }

    #[test]
    fn each_broken_snapshot_is_named_for_what_is_wrong() {
        let (dir, hash, path) = stored();
        let text = fs::read_to_string(&path).unwrap();
        let mut snapshot: serde_json::Value = serde_json::from_str(&text).unwrap();

        let missing = load(dir.path(), &"0".repeat(64)).unwrap_err();
        assert!(matches!(missing, SnapshotError::Read { .. }), "{missing}");

        fs::write(&path, "{").unwrap();
        let err = load(dir.path(), &hash).unwrap_err();
        assert!(matches!(err, SnapshotError::NotASnapshot { .. }), "{err}");

        snapshot["framing"] = serde_json::json!(9);
        fs::write(&path, snapshot.to_string()).unwrap();
        let err = load(dir.path(), &hash).unwrap_err();
        assert!(
            matches!(err, SnapshotError::UnknownFraming { framing: 9, .. }),
            "{err}"
        );

        snapshot["framing"] = serde_json::json!(2);
        snapshot["files"][0]["path"] = serde_json::json!("elsewhere/x.txt");
        fs::write(&path, snapshot.to_string()).unwrap();
        let err = load(dir.path(), &hash).unwrap_err();
        assert!(matches!(err, SnapshotError::Files { .. }), "{err}");

        let mut changed: serde_json::Value = serde_json::from_str(&text).unwrap();
        let policy = changed["files"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|f| f["path"].as_str().unwrap().ends_with(".cedar"))
            .unwrap();
        policy["text"] = serde_json::json!("// edited after the fact\n");
        fs::write(&path, changed.to_string()).unwrap();
        let err = load(dir.path(), &hash).unwrap_err();
        assert!(matches!(err, SnapshotError::Changed { .. }), "{err}");
    }
}
