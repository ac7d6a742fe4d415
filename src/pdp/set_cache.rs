//! What is known of a policy set by its hash: that it was proven, and that
//! it validated strictly (with its schema in Cedar's JSON form, quicker to
//! read than the text form). Proving takes a solver run (about half of
//! `serve`'s start-up); parsing the schema and validating take a few
//! milliseconds that a hook process would otherwise pay at every tool call.
//! Both depend only on the set's files (which its hash covers) and on this
//! release, so a set proven or validated once is so for good. The cache
//! lives in the token store's folder, beside the checkpoint key, where
//! whoever can write the log or the policies cannot. A marker only ever
//! skips the solver, the schema's text parser and Cedar's validator, and
//! in a process that decides for one client and exits (a hook, `exec`)
//! the parse of the policies scoped to other clients: every other policy
//! is parsed, and the structural check of the hard constraints and every
//! other load check run, at every load.

use std::fs;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::load::ScopedPolicy;
use crate::atomic_file::{self, Mode};

/// What a marker says: this set, under this release, was proven.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct Marker {
    hash: String,
    portcullis_version: String,
    queries: usize,
}

/// A folder of markers, per set hash and release.
#[derive(Debug, Clone)]
pub struct SetCache {
    dir: PathBuf,
}

impl SetCache {
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
    pub fn proven(&self, hash: &str) -> Option<usize> {
        let text = fs::read_to_string(self.path(hash)).ok()?;
        let marker: Marker = serde_json::from_str(&text).ok()?;
        (marker.hash == hash && marker.portcullis_version == env!("CARGO_PKG_VERSION"))
            .then_some(marker.queries)
    }

    /// Keeps a proof. Failing to keep it costs only the next start's time,
    /// so the error is the caller's to log.
    pub fn remember_proof(&self, hash: &str, queries: usize) -> std::io::Result<()> {
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

/// What a validation marker says: this set, under this release, validated
/// strictly, this is its schema, and these of its policies are scoped to
/// one principal each.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct Validated {
    hash: String,
    portcullis_version: String,
    schema_fragments: Vec<serde_json::Value>,
    #[serde(default)]
    scoped: Vec<ScopedPolicy>,
}

/// What a load may skip of a set that validated before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedSet {
    /// The schema, in Cedar's JSON form.
    pub schema_fragments: Vec<serde_json::Value>,
    /// Where the policies scoped to one principal are (`load::scoped_policies`).
    pub scoped: Vec<ScopedPolicy>,
}

impl SetCache {
    fn validated_path(&self, hash: &str) -> PathBuf {
        self.dir.join(format!(
            "{hash}.{}.validated.json",
            env!("CARGO_PKG_VERSION")
        ))
    }

    /// What is known of this set, if it validated strictly before under
    /// this release.
    pub fn validated(&self, hash: &str) -> Option<ValidatedSet> {
        let text = fs::read(self.validated_path(hash)).ok()?;
        let marker: Validated = serde_json::from_slice(&text).ok()?;
        (marker.hash == hash && marker.portcullis_version == env!("CARGO_PKG_VERSION")).then_some(
            ValidatedSet {
                schema_fragments: marker.schema_fragments,
                scoped: marker.scoped,
            },
        )
    }

    /// Keeps a strict validation, the schema it validated against and
    /// where the set's policies scoped to one principal are.
    pub fn remember_validated(&self, hash: &str, set: ValidatedSet) -> std::io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        let marker = Validated {
            hash: hash.to_owned(),
            portcullis_version: env!("CARGO_PKG_VERSION").to_owned(),
            schema_fragments: set.schema_fragments,
            scoped: set.scoped,
        };
        let text = serde_json::to_vec(&marker).map_err(std::io::Error::other)?;
        atomic_file::replace(&self.validated_path(hash), &text, Mode::Private)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_is_known_only_for_its_own_set_and_release() {
        let dir = tempfile::tempdir().unwrap();
        let cache = SetCache::new(dir.path().join("proofs"));
        assert_eq!(cache.proven("abc"), None);
        cache.remember_proof("abc", 8).unwrap();
        assert_eq!(cache.proven("abc"), Some(8));
        assert_eq!(cache.proven("abd"), None);
        // A marker copied to another set's name does not count.
        fs::copy(cache.path("abc"), cache.path("other")).unwrap();
        assert_eq!(cache.proven("other"), None);
        // Nor does a damaged one.
        fs::write(cache.path("abc"), "{").unwrap();
        assert_eq!(cache.proven("abc"), None);
    }

    #[test]
    fn a_validation_is_known_only_for_its_own_set_and_release() {
        let dir = tempfile::tempdir().unwrap();
        let cache = SetCache::new(dir.path().join("proofs"));
        assert_eq!(cache.validated("abc"), None);
        let set = ValidatedSet {
            schema_fragments: vec![serde_json::json!({"Portcullis": {}})],
            scoped: vec![ScopedPolicy {
                file: "policies/a.cedar".to_owned(),
                start: 3,
                end: 40,
                principal: r#"Portcullis::Client::"c""#.to_owned(),
            }],
        };
        cache.remember_validated("abc", set.clone()).unwrap();
        assert_eq!(cache.validated("abc"), Some(set));
        assert_eq!(cache.validated("abd"), None);
        fs::copy(cache.validated_path("abc"), cache.validated_path("other")).unwrap();
        assert_eq!(cache.validated("other"), None);
        fs::write(cache.validated_path("abc"), "[").unwrap();
        assert_eq!(cache.validated("abc"), None);
    }
}
