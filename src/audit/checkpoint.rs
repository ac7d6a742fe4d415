//! Signed checkpoints: every batch the writer appends ends with a record
//! that signs, with an Ed25519 key kept away from the log, the position the
//! chain has reached (`seq`, `hash`, `time`). The hash of a record covers
//! every record before it, so an auditor holding only the public key can
//! tell whether anything up to the last checkpoint was rewritten, without
//! trusting the head file, which anyone who can write the log folder can
//! rewrite too.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::head::Mark;

/// File names of the key pair, in the token store's folder.
pub const PRIVATE_KEY_FILE: &str = "audit-signing.key";
pub const PUBLIC_KEY_FILE: &str = "audit-signing.pub";
const PRIVATE_TAG: &str = "portcullis-ed25519-private";
const PUBLIC_TAG: &str = "portcullis-ed25519";

#[derive(Debug, Error)]
pub enum KeyError {
    #[error("cannot read the signing key {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write the signing key {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "the signing key {path} can be read or written by others (mode {mode:o}); it must be 0600"
    )]
    Loose { path: PathBuf, mode: u32 },
    #[error("{what} is not a portcullis key: expected `{tag} <base64 of 32 bytes>`")]
    Malformed { what: String, tag: &'static str },
    #[error("no random bytes for a new key: {0}")]
    Random(String),
}

/// The body of a checkpoint record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// The position signed: the record just before this one.
    pub seq: u64,
    pub hash: String,
    pub time: String,
    /// The fingerprint of the public key that signed.
    pub key: String,
    /// Base64 of the Ed25519 signature over `message(seq, hash, time)`.
    pub signature: String,
}

impl Checkpoint {
    pub fn mark(&self) -> Mark {
        Mark {
            seq: self.seq,
            hash: self.hash.clone(),
        }
    }

    pub fn from_body(body: &Value) -> Option<Self> {
        serde_json::from_value(body.clone()).ok()
    }

    /// Whether `key` signed exactly this position.
    pub fn signed_by(&self, key: &VerifyingKey) -> bool {
        let Ok(bytes) = BASE64.decode(&self.signature) else {
            return false;
        };
        let Ok(signature) = Signature::from_slice(&bytes) else {
            return false;
        };
        self.key == fingerprint(key)
            && key
                .verify(&message(self.seq, &self.hash, &self.time), &signature)
                .is_ok()
    }
}

/// What is signed: a fixed tag keeps these signatures from meaning
/// anything else.
fn message(seq: u64, hash: &str, time: &str) -> Vec<u8> {
    format!("portcullis audit checkpoint v1\n{seq}\n{hash}\n{time}\n").into_bytes()
}

/// The first 16 hex digits of the SHA-256 of the public key.
pub fn fingerprint(key: &VerifyingKey) -> String {
    let digest = Sha256::digest(key.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The private half, held by the writer.
pub struct Signer {
    key: SigningKey,
    fingerprint: String,
}

impl Signer {
    pub fn new(key: SigningKey) -> Self {
        let fingerprint = fingerprint(&key.verifying_key());
        Self { key, fingerprint }
    }

    pub fn checkpoint(&self, mark: &Mark, time: &str) -> Checkpoint {
        let signature = self.key.sign(&message(mark.seq, &mark.hash, time));
        Checkpoint {
            seq: mark.seq,
            hash: mark.hash.clone(),
            time: time.to_owned(),
            key: self.fingerprint.clone(),
            signature: BASE64.encode(signature.to_bytes()),
        }
    }

    pub fn verifying_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    /// Base64 of the signature over `message`, for records that carry a
    /// signature of their own (an operator's `policy apply`).
    pub fn sign(&self, message: &[u8]) -> String {
        BASE64.encode(self.key.sign(message).to_bytes())
    }

    /// The fingerprint of this key's public half.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

/// Whether `signature` (base64) is `key`'s over `message`.
pub fn signature_valid(key: &VerifyingKey, message: &[u8], signature: &str) -> bool {
    let Ok(bytes) = BASE64.decode(signature) else {
        return false;
    };
    let Ok(signature) = Signature::from_slice(&bytes) else {
        return false;
    };
    key.verify(message, &signature).is_ok()
}

/// The text of a public key file.
pub fn public_key_text(key: &VerifyingKey) -> String {
    format!("{PUBLIC_TAG} {}\n", BASE64.encode(key.as_bytes()))
}

/// Reads a public key: a file holding `portcullis-ed25519 <base64>`, or
/// that text itself.
pub fn read_public_key(source: &str) -> Result<VerifyingKey, KeyError> {
    let text = match fs::read_to_string(source) {
        Ok(text) => text,
        Err(_) => source.to_owned(),
    };
    let malformed = || KeyError::Malformed {
        what: source.to_owned(),
        tag: PUBLIC_TAG,
    };
    let bytes = decode_tagged(&text, PUBLIC_TAG).ok_or_else(malformed)?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| malformed())
}

fn decode_tagged(text: &str, tag: &str) -> Option<[u8; 32]> {
    let mut words = text.split_whitespace();
    if words.next() != Some(tag) {
        return None;
    }
    let bytes = BASE64.decode(words.next()?).ok()?;
    if words.next().is_some() {
        return None;
    }
    bytes.try_into().ok()
}

/// Loads the private key in `dir`, creating the pair (private 0600,
/// public 0644) when there is none yet.
pub fn load_or_create(dir: &Path) -> Result<Signer, KeyError> {
    let path = dir.join(PRIVATE_KEY_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => {
            let mode = fs::metadata(&path)
                .map_err(|source| KeyError::Read {
                    path: path.clone(),
                    source,
                })?
                .permissions()
                .mode()
                & 0o777;
            if mode & 0o077 != 0 {
                return Err(KeyError::Loose { path, mode });
            }
            let seed = decode_tagged(&text, PRIVATE_TAG).ok_or_else(|| KeyError::Malformed {
                what: path.display().to_string(),
                tag: PRIVATE_TAG,
            })?;
            Ok(Signer::new(SigningKey::from_bytes(&seed)))
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => create(dir),
        Err(source) => Err(KeyError::Read { path, source }),
    }
}

fn create(dir: &Path) -> Result<Signer, KeyError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed).map_err(|err| KeyError::Random(err.to_string()))?;
    let key = SigningKey::from_bytes(&seed);
    let signer = Signer::new(key);
    let private = dir.join(PRIVATE_KEY_FILE);
    let write_error = |path: &Path| {
        let path = path.to_owned();
        move |source| KeyError::Write { path, source }
    };
    fs::create_dir_all(dir).map_err(write_error(dir))?;
    // `create_new`: two processes racing to create the pair cannot both
    // win; the loser reads the winner's key.
    let created = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&private);
    let mut file = match created {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => return load_or_create(dir),
        Err(source) => {
            return Err(KeyError::Write {
                path: private,
                source,
            });
        }
    };
    file.write_all(format!("{PRIVATE_TAG} {}\n", BASE64.encode(seed)).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(write_error(&private))?;
    let public = dir.join(PUBLIC_KEY_FILE);
    fs::write(&public, public_key_text(&signer.verifying_key())).map_err(write_error(&public))?;
    Ok(signer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_verifies_only_for_its_key_and_position() {
        let signer = Signer::new(SigningKey::from_bytes(&[7; 32]));
        let other = Signer::new(SigningKey::from_bytes(&[8; 32]));
        let mark = Mark {
            seq: 4,
            hash: "ab".repeat(32),
        };
        let checkpoint = signer.checkpoint(&mark, "2026-12-02T00:00:00.000Z");
        assert!(checkpoint.signed_by(&signer.verifying_key()));
        assert!(!checkpoint.signed_by(&other.verifying_key()));
        for forged in [
            Checkpoint {
                seq: 5,
                ..checkpoint.clone()
            },
            Checkpoint {
                hash: "cd".repeat(32),
                ..checkpoint.clone()
            },
            Checkpoint {
                time: "2027-01-01T00:00:00.000Z".into(),
                ..checkpoint.clone()
            },
            Checkpoint {
                signature: "not base64!".into(),
                ..checkpoint.clone()
            },
        ] {
            assert!(!forged.signed_by(&signer.verifying_key()), "{forged:?}");
        }
    }

    #[test]
    fn a_key_pair_is_created_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let first = load_or_create(dir.path()).unwrap();
        let mode = fs::metadata(dir.path().join(PRIVATE_KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = load_or_create(dir.path()).unwrap();
        assert_eq!(first.verifying_key(), again.verifying_key());
        let public = dir.path().join(PUBLIC_KEY_FILE);
        assert_eq!(
            read_public_key(public.to_str().unwrap()).unwrap(),
            first.verifying_key()
        );
        let text = fs::read_to_string(&public).unwrap();
        assert_eq!(read_public_key(&text).unwrap(), first.verifying_key());
    }

    #[test]
    fn bad_keys_are_refused_with_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join(PRIVATE_KEY_FILE);
        fs::write(&private, "portcullis-ed25519-private AAAA\n").unwrap();
        fs::set_permissions(&private, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            load_or_create(dir.path()),
            Err(KeyError::Malformed { .. })
        ));
        fs::set_permissions(&private, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            load_or_create(dir.path()),
            Err(KeyError::Loose { .. })
        ));
        assert!(matches!(
            read_public_key("ssh-ed25519 AAAA"),
            Err(KeyError::Malformed { .. })
        ));
    }
}
