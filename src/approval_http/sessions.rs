//! The page's sessions: an approver who gave their token once gets a
//! cookie naming a session, and every form of that session carries a CSRF
//! token of its own. Both are random. One server keeps them in memory (a
//! restart logs everyone out); a fleet keeps them in its shared state, so
//! that a balancer may send each request of a browser to another replica.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use subtle::ConstantTimeEq;

use crate::audit::ApproverRef;

/// How long a session lasts after login.
pub const SESSION_LIFE: Duration = Duration::from_secs(8 * 3600);
/// Sessions one process keeps at once; the oldest go first past it.
const MAX_SESSIONS: usize = 1024;

/// One approver's session.
#[derive(Debug, Clone)]
pub struct PageSession {
    pub approver: ApproverRef,
    /// What every form of this session must carry back.
    pub csrf: String,
    pub opened: SystemTime,
}

impl PageSession {
    /// Whether a form's CSRF token is this session's, compared in constant
    /// time.
    pub fn csrf_matches(&self, given: &str) -> bool {
        self.csrf.as_bytes().ct_eq(given.as_bytes()).into()
    }

    /// Whether it still lasts at `now`.
    pub fn lasts_at(&self, now: SystemTime) -> bool {
        now.duration_since(self.opened)
            .is_ok_and(|age| age < SESSION_LIFE)
    }
}

/// The sessions cannot be read or written now: nobody is let in.
#[derive(Debug, thiserror::Error)]
#[error("the page's sessions cannot be reached: {0}")]
pub struct SessionsUnavailable(pub String);

pub type SessionsPending<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, SessionsUnavailable>> + Send + 'a>>;

/// Where sessions are kept, by the cookie's value.
pub trait SessionStore: Send + Sync {
    fn keep(&self, id: &str, session: PageSession) -> SessionsPending<'_, ()>;
    /// The session, while it lasts.
    fn find(&self, id: &str) -> SessionsPending<'_, Option<PageSession>>;
    fn end(&self, id: &str) -> SessionsPending<'_, ()>;
}

/// Why no session was opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("no randomness for a session: try again")]
    Random(#[from] getrandom::Error),
    #[error(transparent)]
    Unavailable(#[from] SessionsUnavailable),
}

/// The sessions of the page, wherever they are kept.
pub struct PageSessions {
    store: Arc<dyn SessionStore>,
}

impl Default for PageSessions {
    fn default() -> Self {
        Self::in_store(Arc::new(MemorySessions::default()))
    }
}

fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

impl PageSessions {
    pub fn in_store(store: Arc<dyn SessionStore>) -> Self {
        Self { store }
    }

    /// Opens a session for `approver`: its cookie value.
    pub async fn open(&self, approver: ApproverRef) -> Result<String, OpenError> {
        let id = random_hex()?;
        let session = PageSession {
            approver,
            csrf: random_hex()?,
            opened: SystemTime::now(),
        };
        self.store.keep(&id, session).await?;
        Ok(id)
    }

    /// The session of a cookie value, while it lasts; none when the store
    /// cannot say.
    pub async fn get(&self, id: &str) -> Option<PageSession> {
        match self.store.find(id).await {
            Ok(found) => found.filter(|s| s.lasts_at(SystemTime::now())),
            Err(err) => {
                tracing::warn!(error = %err, "a page session cannot be read: the approver logs in again");
                None
            }
        }
    }

    pub async fn close(&self, id: &str) {
        if let Err(err) = self.store.end(id).await {
            tracing::warn!(error = %err, "a page session cannot be ended: it lasts until it expires");
        }
    }
}

/// The sessions of one process.
#[derive(Default)]
pub struct MemorySessions {
    open: Mutex<HashMap<String, PageSession>>,
}

impl MemorySessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, PageSession>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl SessionStore for MemorySessions {
    fn keep(&self, id: &str, session: PageSession) -> SessionsPending<'_, ()> {
        let now = SystemTime::now();
        let mut open = self.lock();
        open.retain(|_, s| s.lasts_at(now));
        if open.len() >= MAX_SESSIONS
            && let Some(oldest) = open
                .iter()
                .min_by_key(|(_, s)| s.opened)
                .map(|(id, _)| id.clone())
        {
            open.remove(&oldest);
        }
        open.insert(id.to_owned(), session);
        Box::pin(std::future::ready(Ok(())))
    }

    fn find(&self, id: &str) -> SessionsPending<'_, Option<PageSession>> {
        Box::pin(std::future::ready(Ok(self.lock().get(id).cloned())))
    }

    fn end(&self, id: &str) -> SessionsPending<'_, ()> {
        self.lock().remove(id);
        Box::pin(std::future::ready(Ok(())))
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

    #[tokio::test]
    async fn a_session_is_found_by_its_cookie_and_checks_its_own_csrf_only() {
        let sessions = PageSessions::default();
        let id = sessions.open(alice()).await.unwrap();
        let other = sessions.open(alice()).await.unwrap();
        let session = sessions.get(&id).await.unwrap();
        assert_eq!(session.approver.name, "alice");
        assert!(session.csrf_matches(&session.csrf.clone()));
        assert!(!session.csrf_matches(&sessions.get(&other).await.unwrap().csrf));
        assert!(!session.csrf_matches(""));
        assert!(sessions.get("not-a-session").await.is_none());
        sessions.close(&id).await;
        assert!(sessions.get(&id).await.is_none());
    }

    #[tokio::test]
    async fn a_session_past_its_life_is_gone_and_the_oldest_make_room() {
        let store = Arc::new(MemorySessions::default());
        let old = PageSession {
            approver: alice(),
            csrf: "c".into(),
            opened: SystemTime::now() - SESSION_LIFE,
        };
        store.keep("old", old).await.unwrap();
        let sessions = PageSessions::in_store(store.clone());
        assert!(sessions.get("old").await.is_none());
        let first = sessions.open(alice()).await.unwrap();
        assert!(store.find("old").await.unwrap().is_none(), "swept");
        for _ in 1..MAX_SESSIONS {
            sessions.open(alice()).await.unwrap();
        }
        assert!(sessions.get(&first).await.is_some());
        sessions.open(alice()).await.unwrap();
        assert_eq!(store.lock().len(), MAX_SESSIONS);
    }

    /// A store that cannot be reached.
    struct Down;

    impl SessionStore for Down {
        fn keep(&self, _: &str, _: PageSession) -> SessionsPending<'_, ()> {
            Box::pin(std::future::ready(Err(SessionsUnavailable("down".into()))))
        }
        fn find(&self, _: &str) -> SessionsPending<'_, Option<PageSession>> {
            Box::pin(std::future::ready(Err(SessionsUnavailable("down".into()))))
        }
        fn end(&self, _: &str) -> SessionsPending<'_, ()> {
            Box::pin(std::future::ready(Err(SessionsUnavailable("down".into()))))
        }
    }

    #[tokio::test]
    async fn sessions_that_cannot_be_reached_let_nobody_in() {
        let sessions = PageSessions::in_store(Arc::new(Down));
        assert!(matches!(
            sessions.open(alice()).await,
            Err(OpenError::Unavailable(_))
        ));
        assert!(sessions.get("any").await.is_none());
        sessions.close("any").await;
    }
}
