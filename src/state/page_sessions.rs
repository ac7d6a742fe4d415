//! The approval page's sessions of a fleet: a row each, keyed by the
//! SHA-256 of the cookie's value (whoever reads the table cannot log in
//! with what is there), so that a balancer may send each request of an
//! approver's browser to another replica. Logging out deletes the row on
//! every replica at once.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::{SharedState, StateError, millis};
use crate::approval_http::{
    PageSession, SESSION_LIFE, SessionStore, SessionsPending, SessionsUnavailable,
};
use crate::audit::ApproverRef;

/// The sessions of one shared state.
pub struct SharedPageSessions {
    state: SharedState,
}

impl SharedPageSessions {
    pub fn new(state: SharedState) -> Self {
        Self { state }
    }

    async fn keep_now(&self, id: &str, session: PageSession) -> Result<(), StateError> {
        let client = self.state.client().await?;
        let oldest = millis(SystemTime::now() - SESSION_LIFE);
        client
            .execute(
                "DELETE FROM portcullis_page_sessions WHERE opened_ms <= $1",
                &[&oldest],
            )
            .await?;
        client
            .execute(
                "INSERT INTO portcullis_page_sessions (id_sha256, approver, fingerprint, groups, csrf, opened_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &hashed(id),
                    &session.approver.name,
                    &session.approver.fingerprint,
                    &session.approver.groups,
                    &session.csrf,
                    &millis(session.opened),
                ],
            )
            .await?;
        Ok(())
    }

    async fn find_now(&self, id: &str) -> Result<Option<PageSession>, StateError> {
        let client = self.state.client().await?;
        let row = client
            .query_opt(
                "SELECT approver, fingerprint, groups, csrf, opened_ms FROM portcullis_page_sessions WHERE id_sha256 = $1",
                &[&hashed(id)],
            )
            .await?;
        Ok(row.map(|row| PageSession {
            approver: ApproverRef {
                name: row.get(0),
                fingerprint: row.get(1),
                groups: row.get(2),
            },
            csrf: row.get(3),
            opened: UNIX_EPOCH
                + Duration::from_millis(u64::try_from(row.get::<_, i64>(4)).unwrap_or(0)),
        }))
    }

    async fn end_now(&self, id: &str) -> Result<(), StateError> {
        let client = self.state.client().await?;
        client
            .execute(
                "DELETE FROM portcullis_page_sessions WHERE id_sha256 = $1",
                &[&hashed(id)],
            )
            .await?;
        Ok(())
    }
}

impl SessionStore for SharedPageSessions {
    fn keep(&self, id: &str, session: PageSession) -> SessionsPending<'_, ()> {
        let id = id.to_owned();
        Box::pin(async move { self.keep_now(&id, session).await.map_err(unavailable) })
    }

    fn find(&self, id: &str) -> SessionsPending<'_, Option<PageSession>> {
        let id = id.to_owned();
        Box::pin(async move { self.find_now(&id).await.map_err(unavailable) })
    }

    fn end(&self, id: &str) -> SessionsPending<'_, ()> {
        let id = id.to_owned();
        Box::pin(async move { self.end_now(&id).await.map_err(unavailable) })
    }
}

fn hashed(id: &str) -> String {
    hex::encode(Sha256::digest(id.as_bytes()))
}

fn unavailable(err: StateError) -> SessionsUnavailable {
    SessionsUnavailable(err.to_string())
}
