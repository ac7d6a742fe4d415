//! Proofs already made, kept by policy set: proving takes a solver run at
//! every start (about half of `serve`'s start-up), and a set proven once is
//! proven for good, since the proof depends only on the set's files (which
//! its hash covers) and on the properties of this release. The cache lives
//! in the token store's folder, beside the checkpoint key, where whoever
//! can write the log or the policies cannot. A marker only ever skips the
//! solver: the structural check of the hard constraints runs at every load.

use std::fs;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::atomic_file::{self, Mode};

/// What a marker says: this set, under this release, was proven.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct Marker {
    hash: String,
    portcullis_version: String,
    queries: usize,
}

/// A folder of proof markers, one per set hash and release.
#[derive(Debug, Clone)]
pub struct ProofCache {
    dir: PathBuf,
}

impl ProofCache {
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn path(&self, hash: &str) -> PathBuf {
        self.dir
            .join(format!("{hash}.{}.json", env!("CARGO_PKG_VERSION")))
    }

    /// The number of solver queries of an earlier proof of this set, if
    /// there was one. A marker that does not name exactly this set and
    /// release counts as none.
    pub fn known(&self, hash: &str) -> Option<usize> {
        let text = fs::read_to_string(self.path(hash)).ok()?;
        let marker: Marker = serde_json::from_str(&text).ok()?;
        (marker.hash == hash && marker.portcullis_version == env!("CARGO_PKG_VERSION"))
            .then_some(marker.queries)
    }

    /// Keeps a proof. Failing to keep it costs only the next start's time,
    /// so the error is the caller's to log.
    pub fn remember(&self, hash: &str, queries: usize) -> std::io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let marker = Marker {
            hash: hash.to_owned(),
            portcullis_version: env!("CARGO_PKG_VERSION").to_owned(),
            queries,
        };
        let text = serde_json::to_vec(&marker).map_err(std::io::Error::other)?;
        atomic_file::replace(&self.path(hash), &text, Mode::Private)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_is_known_only_for_its_own_set_and_release() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ProofCache::new(dir.path().join("proofs"));
        assert_eq!(cache.known("abc"), None);
        cache.remember("abc", 8).unwrap();
        assert_eq!(cache.known("abc"), Some(8));
        assert_eq!(cache.known("abd"), None);
        // A marker copied to another set's name does not count.
        fs::copy(cache.path("abc"), cache.path("other")).unwrap();
        assert_eq!(cache.known("other"), None);
        // Nor does a damaged one.
        fs::write(cache.path("abc"), "{").unwrap();
        assert_eq!(cache.known("abc"), None);
    }
}
