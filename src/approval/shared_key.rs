//! The sealing key a fleet's replicas share, so that a state sealed by one
//! opens on another. It is given to every replica (a file, or an
//! environment variable) and never stored in the shared database: whoever
//! can read the database must not be able to forge an approval.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// The environment variable that may hold the key, as 128 hex digits.
pub const APPROVAL_KEY_ENV: &str = "PORTCULLIS_APPROVAL_KEY";

#[derive(Debug, Error)]
pub enum SharedKeyError {
    #[error("the approval key {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the approval key {} can be read by others (mode {mode:o}); run `chmod 600 {}`",
        path.display(), path.display()
    )]
    Readable { path: PathBuf, mode: u32 },
    /// The key's text is never repeated.
    #[error("the approval key from {0} is not 64 bytes, nor 128 hex digits")]
    Malformed(String),
}

/// The key in `path`: 64 bytes, or 128 hex digits (a trailing newline
/// allowed), in a file only its owner can read.
pub fn shared_key_from_file(path: &Path) -> Result<[u8; 64], SharedKeyError> {
    let read = |source| SharedKeyError::Read {
        path: path.to_owned(),
        source,
    };
    let mode = std::fs::metadata(path).map_err(read)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(SharedKeyError::Readable {
            path: path.to_owned(),
            mode,
        });
    }
    let bytes = std::fs::read(path).map_err(read)?;
    if let Ok(key) = <[u8; 64]>::try_from(bytes.as_slice()) {
        return Ok(key);
    }
    shared_key_from_hex(&String::from_utf8_lossy(&bytes))
        .map_err(|_| SharedKeyError::Malformed(path.display().to_string()))
}

/// The key as 128 hex digits (surrounding white space ignored).
pub fn shared_key_from_hex(text: &str) -> Result<[u8; 64], SharedKeyError> {
    let malformed = || SharedKeyError::Malformed(APPROVAL_KEY_ENV.to_owned());
    let bytes = hex::decode(text.trim()).map_err(|_| malformed())?;
    <[u8; 64]>::try_from(bytes.as_slice()).map_err(|_| malformed())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use super::*;

    fn key_file(contents: &[u8], mode: u32) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("approval.key");
        std::fs::write(&path, contents).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        (dir, path)
    }

    #[test]
    fn a_key_reads_as_bytes_or_hex() {
        let key: [u8; 64] = std::array::from_fn(|i| u8::try_from(i).unwrap());
        let (_dir, raw) = key_file(&key, 0o600);
        assert_eq!(shared_key_from_file(&raw).unwrap(), key);
        let text = format!("{}\n", hex::encode(key));
        let (_dir, hexed) = key_file(text.as_bytes(), 0o400);
        assert_eq!(shared_key_from_file(&hexed).unwrap(), key);
        assert_eq!(shared_key_from_hex(&text).unwrap(), key);
    }

    #[test]
    fn short_loose_missing_and_malformed_keys_are_refused_without_their_text() {
        let (_dir, short) = key_file(b"0123", 0o600);
        assert!(matches!(
            shared_key_from_file(&short),
            Err(SharedKeyError::Malformed(_))
        ));
        let (_dir, loose) = key_file(&[7u8; 64], 0o644);
        assert!(matches!(
            shared_key_from_file(&loose),
            Err(SharedKeyError::Readable { mode: 0o644, .. })
        ));
        assert!(matches!(
            shared_key_from_file(Path::new("/nonexistent/approval.key")),
            Err(SharedKeyError::Read { .. })
        ));
        let secret = "zz".repeat(64);
        let err = shared_key_from_hex(&secret).err().unwrap();
        assert!(!err.to_string().contains(&secret));
        assert!(shared_key_from_hex(&"ab".repeat(63)).is_err());
    }
}
