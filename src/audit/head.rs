//! The head file beside the log: how far the log was acknowledged, so that
//! a truncated tail (records removed from the end, which leaves a valid
//! chain) is detected.
//!
//! Each batch is written in three steps: the head gains a `pending` mark
//! (the batch's last seq and hash) and is synced, the batch is appended and
//! synced, then the head's `committed` mark moves to it (synced with the
//! next batch's first step, or at once for the log's last batch). After a crash the log ends at
//! `committed` (the batch never landed, or landed in part, and was never
//! acknowledged) or at `pending` (it landed but was not acknowledged). Any
//! other end means the log was cut or extended after the fact.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The head is rewritten in place, padded to this size, so that a shorter
/// head never leaves the tail of a longer one behind.
const HEAD_BYTES: usize = 512;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub seq: u64,
    pub hash: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Head {
    pub committed: Option<Mark>,
    pub pending: Option<Mark>,
}

pub fn head_path(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".head");
    PathBuf::from(name)
}

/// Reads a head file; `Ok(None)` when there is none, or it is empty (a
/// writer creates it before its first batch).
pub fn read(path: &Path) -> io::Result<Option<Head>> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(None),
        Ok(text) => serde_json::from_str(text.trim())
            .map(Some)
            .map_err(|err| io::Error::new(io::ErrorKind::InvalidData, err)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err),
    }
}

/// The open head file, rewritten in place.
pub struct HeadFile {
    file: File,
}

impl HeadFile {
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)?;
        Ok(Self { file })
    }

    pub fn write(&self, head: &Head) -> io::Result<()> {
        self.write_unsynced(head)?;
        self.file.sync_data()
    }

    /// Rewrites the head in the page cache only: every reader sees it at
    /// once, and a crash may lose it (the log writer's next synced write
    /// carries it, see `AuditLog`'s commit).
    pub fn write_unsynced(&self, head: &Head) -> io::Result<()> {
        let mut text = serde_json::to_string(head).map_err(io::Error::other)?;
        if text.len() >= HEAD_BYTES {
            return Err(io::Error::other("head too long"));
        }
        while text.len() < HEAD_BYTES - 1 {
            text.push(' ');
        }
        text.push('\n');
        self.file.write_all_at(text.as_bytes(), 0)
    }
}
