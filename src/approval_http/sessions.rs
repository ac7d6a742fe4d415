//! The page's sessions: an approver who gave their token once gets a
//! cookie naming a session here, and every form of that session carries a
//! CSRF token of its own. Both are random and live in this process only:
//! a restart logs everyone out.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use subtle::ConstantTimeEq;

use crate::audit::ApproverRef;

/// How long a session lasts after login.
const SESSION_LIFE: Duration = Duration::from_secs(8 * 3600);
/// Sessions kept at once; the oldest go first past it.
const MAX_SESSIONS: usize = 1024;

/// One approver's session.
#[derive(Debug, Clone)]
pub struct PageSession {
    pub approver: ApproverRef,
    /// What every form of this session must carry back.
    pub csrf: String,
    opened: Instant,
}

impl PageSession {
    /// Whether a form's CSRF token is this session's, compared in constant
    /// time.
    pub fn csrf_matches(&self, given: &str) -> bool {
        self.csrf.as_bytes().ct_eq(given.as_bytes()).into()
    }
}

#[derive(Default)]
pub struct PageSessions {
    open: Mutex<HashMap<String, PageSession>>,
}

fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

impl PageSessions {
    /// Opens a session for `approver`: its cookie value.
    pub fn open(&self, approver: ApproverRef) -> Result<String, getrandom::Error> {
        let id = random_hex()?;
        let session = PageSession {
            approver,
            csrf: random_hex()?,
            opened: Instant::now(),
        };
        let mut open = self.lock();
        open.retain(|_, s| s.opened.elapsed() < SESSION_LIFE);
        if open.len() >= MAX_SESSIONS
            && let Some(oldest) = open
                .iter()
                .min_by_key(|(_, s)| s.opened)
                .map(|(id, _)| id.clone())
        {
            open.remove(&oldest);
        }
        open.insert(id.clone(), session);
        Ok(id)
    }

    /// The session of a cookie value, while it lasts.
    pub fn get(&self, id: &str) -> Option<PageSession> {
        let mut open = self.lock();
        let session = open.get(id)?;
        if session.opened.elapsed() >= SESSION_LIFE {
            open.remove(id);
            return None;
        }
        Some(session.clone())
    }

    pub fn close(&self, id: &str) {
        self.lock().remove(id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, PageSession>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use super::*;

    fn alice() -> ApproverRef {
        ApproverRef {
            name: "alice".into(),
            fingerprint: "0123456789abcdef".into(),
            groups: vec!["security".into()],
        }
    }

    #[test]
    fn a_session_is_found_by_its_cookie_and_checks_its_own_csrf_only() {
        let sessions = PageSessions::default();
        let id = sessions.open(alice()).unwrap();
        let other = sessions.open(alice()).unwrap();
        let session = sessions.get(&id).unwrap();
        assert_eq!(session.approver.name, "alice");
        assert!(session.csrf_matches(&session.csrf.clone()));
        assert!(!session.csrf_matches(&sessions.get(&other).unwrap().csrf));
        assert!(!session.csrf_matches(""));
        assert!(sessions.get("not-a-session").is_none());
        sessions.close(&id);
        assert!(sessions.get(&id).is_none());
    }
}
