//! Where a running server finds its clients as they are now: the token
//! store's file on one machine, a table a fleet shares otherwise. A server
//! asks at every request, so a revoked token stops working at once; a
//! directory that cannot say who the clients are says so, and nobody gets
//! in.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::store::{StoredApprover, StoredClient, TokenStore};
use crate::file_stamp::FileStamp;

/// The clients as last known, shared by every request that checks one.
pub type ClientList = Arc<[StoredClient]>;

pub trait ClientDirectory: Send + Sync {
    /// Every client as the directory holds it now (owners included: the
    /// caller refuses them); `None` when it cannot be known, which refuses
    /// every request.
    fn current(&self) -> Option<ClientList>;
}

/// The approvers as last known.
pub type ApproverList = Arc<[StoredApprover]>;

/// Where the approval inbox finds its approvers as they are now, asked at
/// every request as the clients are.
pub trait ApproverDirectory: Send + Sync {
    /// Every approver as the directory holds it now; `None` when it cannot
    /// be known, which refuses every answer.
    fn approvers(&self) -> Option<ApproverList>;
}

/// The token store's file, read again only when it changed.
pub struct FileDirectory {
    path: PathBuf,
    /// The clients and approvers as last read, with the stamp of that
    /// version of the file.
    cached: Mutex<(Option<FileStamp>, Option<Lists>)>,
}

/// The store's two lists, read together.
type Lists = (ClientList, ApproverList);

impl FileDirectory {
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            cached: Mutex::new((None, None)),
        }
    }
}

impl FileDirectory {
    /// The store as it is now. The lock is held for the stat, not for the
    /// hashing: requests of several clients authenticate at once.
    fn read(&self) -> Option<Lists> {
        let mut cached = self
            .cached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let stamp = FileStamp::of(&self.path);
        if stamp.is_none() || cached.0 != stamp {
            let lists = match TokenStore::open(&self.path) {
                Ok(store) => Some((
                    ClientList::from(store.clients()),
                    ApproverList::from(store.approvers()),
                )),
                Err(err) => {
                    tracing::error!(error = %err, "the token store cannot be read: every request is refused");
                    None
                }
            };
            *cached = (stamp, lists);
        }
        cached.1.clone()
    }
}

impl ApproverDirectory for FileDirectory {
    fn approvers(&self) -> Option<ApproverList> {
        self.read().map(|(_, approvers)| approvers)
    }
}

impl ClientDirectory for FileDirectory {
    fn current(&self) -> Option<ClientList> {
        self.read().map(|(clients, _)| clients)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use super::*;

    #[test]
    fn the_file_is_read_again_when_it_changes_and_refused_when_it_goes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.json");
        let directory = FileDirectory::new(path.clone());
        assert!(directory.current().is_none());
        let mut store = TokenStore::open_or_new(&path).unwrap();
        store.create("a", "paired").unwrap();
        assert_eq!(directory.current().unwrap().len(), 1);
        store.create("b", "paired").unwrap();
        assert_eq!(directory.current().unwrap().len(), 2);
        std::fs::remove_file(&path).unwrap();
        assert!(directory.current().is_none());
    }
}
