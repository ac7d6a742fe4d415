//! Approvals of shell commands that outlive the process that asked: the
//! hook asks the human (through the harness) and hands the approval to
//! the `portcullis exec` the harness then runs. Both processes share a key
//! beside the token store; the nonce of an approval is spent by creating a
//! file named after it, which succeeds once whichever process tries.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use thiserror::Error;

use super::seal::{ApprovalSeal, SealError};
use crate::canonical::sha256_hex;
use crate::clock::Clock;

/// The shared key's file, beside the token store.
pub const COMMAND_APPROVAL_KEY_FILE: &str = "command-approvals.key";
/// The folder of spent nonces, beside it.
const SPENT_FOLDER: &str = "command-approvals.spent";

#[derive(Debug, Error)]
pub enum CommandApprovalError {
    #[error("the approval key {}: {err}", path.display())]
    Key { path: PathBuf, err: io::Error },
    #[error(
        "the approval key {} can be read by others (mode {mode:o}); make it 0600",
        path.display()
    )]
    KeyReadable { path: PathBuf, mode: u32 },
    #[error("no randomness: {0}")]
    Random(#[from] getrandom::Error),
    #[error("the approval is refused: {}", .0)]
    Refused(SealError),
    #[error("the approval cannot be spent: {0}")]
    Spend(io::Error),
}

/// What an approval is bound to: the exact command text, where it runs and
/// under which root. Another command, folder or root is another call.
pub fn command_digest(command: &str, root: &Path, cwd: &Path) -> String {
    sha256_hex(&json!({"command": command, "root": root, "cwd": cwd}))
}

/// Issues and redeems command approvals with the key in `keys`.
pub struct CommandApprovals {
    seal: ApprovalSeal,
    spent: PathBuf,
    clock: Arc<dyn Clock>,
}

impl CommandApprovals {
    /// Opens (or makes, 0600) the shared key in the folder `keys`.
    pub fn open(
        keys: &Path,
        ttl: Duration,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, CommandApprovalError> {
        let path = keys.join(COMMAND_APPROVAL_KEY_FILE);
        let key = load_or_create_key(&path)?;
        Ok(Self {
            seal: ApprovalSeal::with_key(key, ttl, clock.clone()),
            spent: keys.join(SPENT_FOLDER),
            clock,
        })
    }

    /// An approval of `digest` for the client `client`.
    pub fn issue(&self, client: &str, digest: &str) -> Result<String, CommandApprovalError> {
        Ok(self.seal.seal(client, digest)?)
    }

    /// Checks an approval and spends it: it works once, for that client
    /// and that command only.
    pub fn redeem(
        &self,
        token: &str,
        client: &str,
        digest: &str,
    ) -> Result<(), CommandApprovalError> {
        let unspent = self
            .seal
            .verify(token, client, digest)
            .map_err(CommandApprovalError::Refused)?;
        fs::create_dir_all(&self.spent).map_err(CommandApprovalError::Spend)?;
        self.forget_expired();
        let marker = self
            .spent
            .join(format!("{}-{}", unspent.expires, unspent.nonce));
        match fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&marker)
        {
            Ok(_) => Ok(()),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                Err(CommandApprovalError::Refused(SealError::Replayed))
            }
            Err(err) => Err(CommandApprovalError::Spend(err)),
        }
    }

    /// Spent nonces of expired approvals are no longer needed: an expired
    /// approval is refused before its nonce is looked at.
    fn forget_expired(&self) {
        let now = self.clock.now_millis();
        for entry in fs::read_dir(&self.spent).into_iter().flatten().flatten() {
            let expired = entry
                .file_name()
                .to_str()
                .and_then(|n| n.split_once('-'))
                .and_then(|(expires, _)| expires.parse::<u64>().ok())
                .is_some_and(|expires| expires <= now);
            if expired {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

fn load_or_create_key(path: &Path) -> Result<[u8; 64], CommandApprovalError> {
    let failed = |err| CommandApprovalError::Key {
        path: path.to_owned(),
        err,
    };
    match fs::read(path) {
        Ok(bytes) => {
            let mode = fs::metadata(path).map_err(failed)?.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(CommandApprovalError::KeyReadable {
                    path: path.to_owned(),
                    mode,
                });
            }
            <[u8; 64]>::try_from(bytes.as_slice()).map_err(|_| {
                failed(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("it holds {} bytes, not 64", bytes.len()),
                ))
            })
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            let mut key = [0u8; 64];
            getrandom::fill(&mut key)?;
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).map_err(failed)?;
            }
            let created = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path);
            match created {
                Ok(mut file) => {
                    file.write_all(&key)
                        .and_then(|()| file.sync_all())
                        .map_err(failed)?;
                    Ok(key)
                }
                // Another process made it first: theirs is the key.
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => load_or_create_key(path),
                Err(err) => Err(failed(err)),
            }
        }
        Err(err) => Err(failed(err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{ManualClock, SystemClock};

    fn approvals(dir: &Path) -> CommandApprovals {
        CommandApprovals::open(dir, Duration::from_secs(600), Arc::new(SystemClock)).unwrap()
    }

    #[test]
    fn an_approval_runs_its_command_once_in_any_process() {
        let dir = tempfile::tempdir().unwrap();
        let digest = command_digest("git commit -m x", Path::new("/w"), Path::new("/w"));
        let token = approvals(dir.path()).issue("agent", &digest).unwrap();
        let other = command_digest("git commit -m y", Path::new("/w"), Path::new("/w"));
        let second = approvals(dir.path());
        assert!(matches!(
            second.redeem(&token, "agent", &other),
            Err(CommandApprovalError::Refused(SealError::OtherCall))
        ));
        assert!(matches!(
            second.redeem(&token, "someone", &digest),
            Err(CommandApprovalError::Refused(SealError::Foreign))
        ));
        second.redeem(&token, "agent", &digest).unwrap();
        assert!(matches!(
            approvals(dir.path()).redeem(&token, "agent", &digest),
            Err(CommandApprovalError::Refused(SealError::Replayed))
        ));
    }

    #[test]
    fn an_expired_approval_is_refused_and_its_nonce_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(
            std::time::UNIX_EPOCH + Duration::from_secs(1_000),
        ));
        let a = CommandApprovals::open(dir.path(), Duration::from_secs(60), clock.clone()).unwrap();
        let first = a.issue("agent", "d").unwrap();
        a.redeem(&first, "agent", "d").unwrap();
        let late = a.issue("agent", "d").unwrap();
        clock.advance(Duration::from_secs(61));
        assert!(matches!(
            a.redeem(&late, "agent", "d"),
            Err(CommandApprovalError::Refused(SealError::Expired))
        ));
        let fresh = a.issue("agent", "d").unwrap();
        a.redeem(&fresh, "agent", "d").unwrap();
        let spent = fs::read_dir(dir.path().join(SPENT_FOLDER)).unwrap().count();
        assert_eq!(spent, 1, "the first approval's nonce was forgotten");
    }

    #[test]
    fn a_key_others_can_read_or_of_the_wrong_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(COMMAND_APPROVAL_KEY_FILE);
        fs::write(&path, [0u8; 64]).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            CommandApprovals::open(dir.path(), Duration::from_secs(1), Arc::new(SystemClock)),
            Err(CommandApprovalError::KeyReadable { .. })
        ));
        fs::write(&path, [0u8; 10]).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let err = CommandApprovals::open(dir.path(), Duration::from_secs(1), Arc::new(SystemClock))
            .err()
            .unwrap();
        assert!(err.to_string().contains("10 bytes"), "{err}");
    }
}
