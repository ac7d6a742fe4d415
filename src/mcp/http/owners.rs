//! Which client opened each legacy session. rmcp knows sessions but not
//! tokens; this map is what makes a session id presented with another
//! client's token a 404, as if it did not exist.

use std::collections::HashMap;
use std::sync::Mutex;

#[derive(Default)]
pub struct SessionOwners {
    /// Session id → fingerprint of the client that initialized it.
    owners: Mutex<HashMap<String, String>>,
}

impl SessionOwners {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn open(&self, session: &str, fingerprint: &str) {
        self.map()
            .insert(session.to_owned(), fingerprint.to_owned());
    }

    /// Whether `fingerprint` opened `session`. A session this map never
    /// saw is nobody's: every session is opened through the guard.
    pub fn owned_by(&self, session: &str, fingerprint: &str) -> bool {
        self.map()
            .get(session)
            .is_some_and(|owner| owner == fingerprint)
    }

    pub fn close(&self, session: &str) {
        self.map().remove(session);
    }

    /// Forgets every session `alive` says is gone (rmcp ends idle ones).
    pub fn retain(&self, alive: impl Fn(&str) -> bool) {
        self.map().retain(|session, _| alive(session));
    }

    pub fn len(&self) -> usize {
        self.map().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_belongs_only_to_the_client_that_opened_it() {
        let owners = SessionOwners::default();
        owners.open("s1", "aaaa");
        assert!(owners.owned_by("s1", "aaaa"));
        assert!(!owners.owned_by("s1", "bbbb"));
        assert!(
            !owners.owned_by("s2", "aaaa"),
            "an unknown session is nobody's"
        );
        owners.close("s1");
        assert!(!owners.owned_by("s1", "aaaa"));
    }

    #[test]
    fn sessions_that_ended_are_forgotten() {
        let owners = SessionOwners::default();
        owners.open("s1", "aaaa");
        owners.open("s2", "aaaa");
        owners.retain(|session| session == "s2");
        assert_eq!(owners.len(), 1);
        assert!(owners.owned_by("s2", "aaaa"));
    }
}
