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
