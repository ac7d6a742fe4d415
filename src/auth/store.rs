//! The token store: one file of clients (name, tier, SHA-256 of the token),
//! written atomically and owner-only. It holds hashes, never tokens, and
//! checks a presented token in constant time; it does not decide.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;
use thiserror::Error;

use super::token::{Token, generate, hash_token};
use crate::atomic_file::{self, Mode};

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("cannot read the token store {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "the token store {path} is readable or writable by others (mode {mode:o}); run `chmod 600 {path}`"
    )]
    LoosePermissions { path: PathBuf, mode: u32 },
    #[error("the token store {path} is not valid: {message}")]
    Corrupt { path: PathBuf, message: String },
    #[error("cannot write the token store {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("a client named `{0}` already exists; revoke it first")]
    Exists(String),
    #[error("no client named `{0}`")]
    NoSuchClient(String),
    #[error("an approver named `{0}` already exists; revoke it first")]
    ApproverExists(String),
    #[error("`{0}` names an approver, and a client and an approver never share a name")]
    NameTaken(String),
    #[error(
        "an approver belongs to at least one group, each a name of A-Z a-z 0-9 . _ -; `{0}` is not"
    )]
    BadGroup(String),
    #[error("client names are 1 to 64 characters of A-Z a-z 0-9 . _ -; `{0}` is not")]
    BadName(String),
    #[error("MCP clients never get the `owner` tier")]
    OwnerTier,
    #[error("the operating system gave no randomness: {0}")]
    Random(String),
}

/// One client in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredClient {
    pub name: String,
    pub tier: String,
    /// SHA-256 of the token, hex.
    pub token_sha256: String,
    /// RFC 3339, UTC.
    pub created: String,
}

impl StoredClient {
    pub fn fingerprint(&self) -> String {
        self.token_sha256.chars().take(16).collect()
    }
}

/// One approver in the store: a person who answers the questions of the
/// approval inbox. Kept apart from the clients, so that an approver's
/// token can never open an MCP session, nor a client's answer a question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredApprover {
    pub name: String,
    /// The approver groups (declared in tiers.json) it belongs to.
    pub groups: Vec<String>,
    /// SHA-256 of the token, hex.
    pub token_sha256: String,
    /// RFC 3339, UTC.
    pub created: String,
}

impl StoredApprover {
    pub fn fingerprint(&self) -> String {
        self.token_sha256.chars().take(16).collect()
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreFile {
    version: u32,
    clients: Vec<StoredClient>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    approvers: Vec<StoredApprover>,
}

const STORE_VERSION: u32 = 1;

/// What `revoke` removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revoked {
    Client(StoredClient),
    Approver(StoredApprover),
}

/// The token store: a JSON file, mode 0600, replaced atomically on change.
#[derive(Debug)]
pub struct TokenStore {
    path: PathBuf,
    clients: Vec<StoredClient>,
    approvers: Vec<StoredApprover>,
}

/// The tier no MCP client is given: not by `token create`, and not by a
/// hand-edited store (`serve` refuses it).
pub const OWNER_TIER: &str = "owner";

/// Where the store lives unless told otherwise: `$XDG_STATE_HOME/portcullis`
/// or `~/.local/state/portcullis`.
pub fn default_store_path() -> Option<PathBuf> {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        })?;
    Some(state.join("portcullis").join("tokens.json"))
}

/// A new client named `name` of `tier`, with its token: what every store
/// (this file, or a fleet's table) adds. Names and tiers are checked here,
/// once for all of them.
pub fn new_client(name: &str, tier: &str) -> Result<(Token, StoredClient), StoreError> {
    if !valid_name(name) {
        return Err(StoreError::BadName(name.to_owned()));
    }
    if tier == OWNER_TIER {
        return Err(StoreError::OwnerTier);
    }
    let (token, token_sha256, created) = fresh_token()?;
    let client = StoredClient {
        name: name.to_owned(),
        tier: tier.to_owned(),
        token_sha256,
        created,
    };
    Ok((token, client))
}

/// A new approver named `name` in `groups`, with its token.
pub fn new_approver(name: &str, groups: &[String]) -> Result<(Token, StoredApprover), StoreError> {
    if !valid_name(name) {
        return Err(StoreError::BadName(name.to_owned()));
    }
    if groups.is_empty() {
        return Err(StoreError::BadGroup(String::new()));
    }
    if let Some(bad) = groups.iter().find(|group| !valid_name(group)) {
        return Err(StoreError::BadGroup(bad.clone()));
    }
    let (token, token_sha256, created) = fresh_token()?;
    let mut groups = groups.to_vec();
    groups.sort();
    groups.dedup();
    Ok((
        token,
        StoredApprover {
            name: name.to_owned(),
            groups,
            token_sha256,
            created,
        },
    ))
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// A token, its hash as stored, and now as a creation time.
fn fresh_token() -> Result<(Token, String, String), StoreError> {
    let token = generate().map_err(|err| StoreError::Random(err.to_string()))?;
    let hash = hex::encode(hash_token(token.as_str()));
    let created = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    Ok((token, hash, created))
}

/// The client among `clients` whose token this is. Every stored hash is
/// compared, in constant time, so the time taken says nothing about which
/// (if any) stored token shares a prefix with the one given.
pub fn authenticate_among<'a>(
    clients: &'a [StoredClient],
    token: &str,
) -> Option<&'a StoredClient> {
    among(clients, |c| &c.token_sha256, token)
}

/// The approver among `approvers` whose token this is, compared as
/// [`authenticate_among`] compares clients.
pub fn authenticate_approver<'a>(
    approvers: &'a [StoredApprover],
    token: &str,
) -> Option<&'a StoredApprover> {
    among(approvers, |a| &a.token_sha256, token)
}

fn among<'a, T>(entries: &'a [T], hash_of: impl Fn(&T) -> &String, token: &str) -> Option<&'a T> {
    let given = hex::encode(hash_token(token));
    let mut found = None;
    for entry in entries {
        let equal: bool = hash_of(entry).as_bytes().ct_eq(given.as_bytes()).into();
        if equal && found.is_none() {
            found = Some(entry);
        }
    }
    found
}

impl TokenStore {
    /// Opens an existing store, refusing one that others can read or write.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let read_error = |source| StoreError::Read {
            path: path.to_owned(),
            source,
        };
        let meta = fs::metadata(path).map_err(read_error)?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(StoreError::LoosePermissions {
                path: path.to_owned(),
                mode,
            });
        }
        let text = fs::read_to_string(path).map_err(read_error)?;
        let file: StoreFile = serde_json::from_str(&text).map_err(|err| StoreError::Corrupt {
            path: path.to_owned(),
            message: err.to_string(),
        })?;
        if file.version != STORE_VERSION {
            return Err(StoreError::Corrupt {
                path: path.to_owned(),
                message: format!("unknown version {}", file.version),
            });
        }
        Ok(Self {
            path: path.to_owned(),
            clients: file.clients,
            approvers: file.approvers,
        })
    }

    /// Opens the store, or starts an empty one if the file does not exist.
    pub fn open_or_new(path: &Path) -> Result<Self, StoreError> {
        match Self::open(path) {
            Err(StoreError::Read { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                Ok(Self {
                    path: path.to_owned(),
                    clients: Vec::new(),
                    approvers: Vec::new(),
                })
            }
            other => other,
        }
    }

    pub fn clients(&self) -> &[StoredClient] {
        &self.clients
    }

    pub fn approvers(&self) -> &[StoredApprover] {
        &self.approvers
    }

    /// Adds a client and returns its token, the only time it is shown.
    pub fn create(&mut self, name: &str, tier: &str) -> Result<Token, StoreError> {
        if self.clients.iter().any(|c| c.name == name) {
            return Err(StoreError::Exists(name.to_owned()));
        }
        if self.approvers.iter().any(|a| a.name == name) {
            return Err(StoreError::NameTaken(name.to_owned()));
        }
        let (token, client) = new_client(name, tier)?;
        self.clients.push(client);
        self.save()?;
        Ok(token)
    }

    /// Adds an approver and returns its token, the only time it is shown.
    pub fn create_approver(
        &mut self,
        name: &str,
        groups: &[String],
    ) -> Result<(Token, StoredApprover), StoreError> {
        if self.approvers.iter().any(|a| a.name == name) {
            return Err(StoreError::ApproverExists(name.to_owned()));
        }
        if self.clients.iter().any(|c| c.name == name) {
            return Err(StoreError::Exists(name.to_owned()));
        }
        let (token, approver) = new_approver(name, groups)?;
        self.approvers.push(approver.clone());
        self.save()?;
        Ok((token, approver))
    }

    /// Removes the client or approver of this name.
    pub fn revoke(&mut self, name: &str) -> Result<Revoked, StoreError> {
        let removed = if let Some(index) = self.clients.iter().position(|c| c.name == name) {
            Revoked::Client(self.clients.remove(index))
        } else if let Some(index) = self.approvers.iter().position(|a| a.name == name) {
            Revoked::Approver(self.approvers.remove(index))
        } else {
            return Err(StoreError::NoSuchClient(name.to_owned()));
        };
        self.save()?;
        Ok(removed)
    }

    /// The client whose token this is (see [`authenticate_among`]).
    pub fn authenticate(&self, token: &str) -> Option<&StoredClient> {
        authenticate_among(&self.clients, token)
    }

    /// Writes the store to a temporary file in the same folder, mode 0600
    /// from creation, then renames it over the old one: a crash leaves the
    /// old store or the new one, never half of either.
    fn save(&self) -> Result<(), StoreError> {
        let write_error = |source| StoreError::Write {
            path: self.path.clone(),
            source,
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(write_error)?;
        let file = StoreFile {
            version: STORE_VERSION,
            clients: self.clients.clone(),
            approvers: self.approvers.clone(),
        };
        let text = serde_json::to_string_pretty(&file)
            .map_err(|err| write_error(io::Error::other(err)))?;
        let mut bytes = text.into_bytes();
        bytes.push(b'\n');
        atomic_file::replace(&self.path, &bytes, Mode::Private).map_err(write_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::token::fingerprint;

    fn store() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/tokens.json");
        (dir, path)
    }

    #[test]
    fn create_authenticate_revoke() {
        let (_dir, path) = store();
        let mut s = TokenStore::open_or_new(&path).unwrap();
        let token = s.create("claude", "paired").unwrap();
        let reopened = TokenStore::open(&path).unwrap();
        let client = reopened.authenticate(token.as_str()).unwrap();
        assert_eq!(
            (client.name.as_str(), client.tier.as_str()),
            ("claude", "paired")
        );
        assert_eq!(
            client.fingerprint(),
            fingerprint(&hash_token(token.as_str()))
        );
        assert!(reopened.authenticate("pcl_wrong").is_none());
        assert!(reopened.authenticate("").is_none());
        let mut s = reopened;
        s.revoke("claude").unwrap();
        assert!(
            TokenStore::open(&path)
                .unwrap()
                .authenticate(token.as_str())
                .is_none()
        );
    }

    #[test]
    fn the_store_holds_no_token_and_is_0600() {
        let (_dir, path) = store();
        let token = TokenStore::open_or_new(&path)
            .unwrap()
            .create("a", "paired")
            .unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(!text.contains(token.as_str()));
        assert!(!text.contains(&token.as_str()[4..]));
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn a_loose_store_is_refused() {
        let (_dir, path) = store();
        TokenStore::open_or_new(&path)
            .unwrap()
            .create("a", "paired")
            .unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            TokenStore::open(&path),
            Err(StoreError::LoosePermissions { mode: 0o644, .. })
        ));
    }

    #[test]
    fn owner_bad_names_and_duplicates_are_refused() {
        let (_dir, path) = store();
        let mut s = TokenStore::open_or_new(&path).unwrap();
        assert!(matches!(s.create("a", "owner"), Err(StoreError::OwnerTier)));
        assert!(matches!(
            s.create("a b", "paired"),
            Err(StoreError::BadName(_))
        ));
        assert!(matches!(
            s.create("", "paired"),
            Err(StoreError::BadName(_))
        ));
        s.create("a", "paired").unwrap();
        assert!(matches!(
            s.create("a", "paired"),
            Err(StoreError::Exists(_))
        ));
        assert!(matches!(
            s.revoke("nobody"),
            Err(StoreError::NoSuchClient(_))
        ));
    }

    #[test]
    fn a_missing_store_is_an_error_for_open() {
        let (_dir, path) = store();
        assert!(matches!(
            TokenStore::open(&path),
            Err(StoreError::Read { .. })
        ));
    }

    #[test]
    fn a_corrupt_store_is_refused_and_not_overwritten() {
        let (_dir, path) = store();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, "{not json").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            TokenStore::open_or_new(&path),
            Err(StoreError::Corrupt { .. })
        ));
        assert_eq!(fs::read_to_string(&path).unwrap(), "{not json");
    }
}
