//! What a confined command may do, drawn from its decision and the
//! workspace as it is when the command starts.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{secrets, vcs};
use crate::facts::{CommandFacts, PathClasses};

/// The confinement of one command. It travels as JSON to the `confined`
/// process, which trusts it as it trusts its own argv: whoever can start
/// that process can run the command unconfined anyway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The only tree the command may change (canonical).
    pub root: PathBuf,
    /// Where the command starts.
    pub cwd: PathBuf,
    /// VCS metadata inside the root, kept read-only: folders by name
    /// (`.git`, `.hg`, ...), git directories by content, `.git` files and
    /// the git directories they point to.
    pub read_only: Vec<PathBuf>,
    /// Secret-class files and folders outside the root, made unreadable.
    pub hidden: Vec<PathBuf>,
    /// Whether the command may use the network (else a network namespace
    /// of its own, with no interface up).
    pub network: bool,
    /// Folders outside the root it may write too (a server's entry says).
    #[serde(default)]
    pub writable: Vec<PathBuf>,
    /// Whether `/tmp` and `/dev/shm` are private, empty and writable (a
    /// command's scratch), or read-only like the rest (a server, which
    /// says what it writes).
    #[serde(default)]
    pub private_tmp: bool,
}

impl Plan {
    /// The plan for a command the decision point let run in `cwd` beneath
    /// `root` (canonical). VCS metadata stays writable only when the
    /// decision was a `vcs_write` it let through; the network only when
    /// the command's classes include `network`; secrets are hidden unless
    /// the command was judged to read one.
    pub fn for_command(
        root: &Path,
        cwd: &Path,
        facts: &CommandFacts,
        secret_classes: &PathClasses,
        home: Option<&Path>,
    ) -> Self {
        let read_only = if facts.classes.contains("vcs_write") {
            Vec::new()
        } else {
            vcs::metadata_in(root)
        };
        let hidden = if facts.classes.contains("secrets") {
            Vec::new()
        } else {
            secrets::outside(root, home, secret_classes)
        };
        Self {
            root: root.to_owned(),
            cwd: cwd.to_owned(),
            read_only,
            hidden,
            network: facts.classes.contains("network"),
            writable: Vec::new(),
            private_tmp: true,
        }
    }

    /// The plan for a stdio downstream server run in `root` (canonical):
    /// writes beneath it and the folders its entry names, its VCS metadata
    /// read-only, every secret-class file beneath it and outside it
    /// covered (a server never reads one: policies decide on the path as it
    /// resolved, and the server resolves it again), the network only as
    /// its entry says.
    pub fn for_server(
        root: &Path,
        writable: &[PathBuf],
        network: bool,
        secret_classes: &PathClasses,
        home: Option<&Path>,
    ) -> Self {
        let mut hidden = secrets::outside(root, home, secret_classes);
        hidden.extend(secrets::inside(root, secret_classes));
        Self {
            root: root.to_owned(),
            cwd: root.to_owned(),
            read_only: vcs::metadata_in(root),
            hidden,
            network,
            writable: writable.to_vec(),
            private_tmp: false,
        }
    }
}
