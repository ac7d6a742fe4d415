//! The fleet's clients: the token store as a table (name, tier, SHA-256
//! of the token), written by `portcullis token … --state`. Every change
//! fires the table's trigger, which tells every listening replica.

use tokio_postgres::error::SqlState;

use super::{SharedState, StateError};
use crate::auth::{StoreError, StoredClient, Token, new_client};

/// The clients' table of one shared state.
pub struct ClientTable<'a> {
    state: &'a SharedState,
}

impl<'a> ClientTable<'a> {
    pub fn of(state: &'a SharedState) -> Self {
        Self { state }
    }

    /// Every client, by name.
    pub async fn list(&self) -> Result<Vec<StoredClient>, StateError> {
        let client = self.state.client().await?;
        let rows = client
            .query(
                "SELECT name, tier, token_sha256, created FROM portcullis_clients ORDER BY name",
                &[],
            )
            .await?;
        Ok(rows.iter().map(stored).collect())
    }

    /// Adds a client and returns its token, the only time it is shown.
    pub async fn create(
        &self,
        name: &str,
        tier: &str,
    ) -> Result<(Token, StoredClient), StateError> {
        let (token, stored) = new_client(name, tier)?;
        let client = self.state.client().await?;
        let inserted = client
            .execute(
                "INSERT INTO portcullis_clients (name, tier, token_sha256, created) VALUES ($1, $2, $3, $4)",
                &[&stored.name, &stored.tier, &stored.token_sha256, &stored.created],
            )
            .await;
        match inserted {
            Ok(_) => Ok((token, stored)),
            Err(err) if err.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                Err(StoreError::Exists(name.to_owned()).into())
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Removes a client; every replica refuses its token from the moment
    /// it hears of it.
    pub async fn revoke(&self, name: &str) -> Result<StoredClient, StateError> {
        let client = self.state.client().await?;
        let row = client
            .query_opt(
                "DELETE FROM portcullis_clients WHERE name = $1 RETURNING name, tier, token_sha256, created",
                &[&name],
            )
            .await?
            .ok_or_else(|| StoreError::NoSuchClient(name.to_owned()))?;
        Ok(stored(&row))
    }
}

/// A row of `name, tier, token_sha256, created`.
fn stored(row: &tokio_postgres::Row) -> StoredClient {
    StoredClient {
        name: row.get(0),
        tier: row.get(1),
        token_sha256: row.get(2),
        created: row.get(3),
    }
}
