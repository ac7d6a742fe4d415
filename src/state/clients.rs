//! The fleet's clients and approvers: the token store as two tables
//! (name, tier or groups, SHA-256 of the token), written by `portcullis
//! token … --state`. Every change fires the tables' trigger, which tells
//! every listening replica. A name is a client's or an approver's, never
//! both: creating either takes one advisory lock and looks in both.

use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::{SharedState, StateError};
use crate::auth::{
    Revoked, StoreError, StoredApprover, StoredClient, Token, new_approver, new_client,
};

/// Any number: the key of the advisory lock creations take turns on.
const NAMES_LOCK: i64 = 0x6e61_6d65_7321;

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

    /// Every approver, by name.
    pub async fn approvers(&self) -> Result<Vec<StoredApprover>, StateError> {
        let client = self.state.client().await?;
        let rows = client
            .query(
                "SELECT name, groups, token_sha256, created FROM portcullis_approvers ORDER BY name",
                &[],
            )
            .await?;
        Ok(rows.iter().map(approver).collect())
    }

    /// Adds a client and returns its token, the only time it is shown.
    pub async fn create(
        &self,
        name: &str,
        tier: &str,
    ) -> Result<(Token, StoredClient), StateError> {
        let (token, stored) = new_client(name, tier)?;
        self.insert_named(
            name,
            "SELECT 1 FROM portcullis_approvers WHERE name = $1",
            StoreError::NameTaken(name.to_owned()),
            StoreError::Exists(name.to_owned()),
            "INSERT INTO portcullis_clients (name, tier, token_sha256, created) VALUES ($1, $2, $3, $4)",
            &[&stored.name, &stored.tier, &stored.token_sha256, &stored.created],
        )
        .await?;
        Ok((token, stored))
    }

    /// Adds an approver of `groups` and returns its token, the only time
    /// it is shown.
    pub async fn create_approver(
        &self,
        name: &str,
        groups: &[String],
    ) -> Result<(Token, StoredApprover), StateError> {
        let (token, stored) = new_approver(name, groups)?;
        self.insert_named(
            name,
            "SELECT 1 FROM portcullis_clients WHERE name = $1",
            StoreError::Exists(name.to_owned()),
            StoreError::ApproverExists(name.to_owned()),
            "INSERT INTO portcullis_approvers (name, groups, token_sha256, created) VALUES ($1, $2, $3, $4)",
            &[&stored.name, &stored.groups, &stored.token_sha256, &stored.created],
        )
        .await?;
        Ok((token, stored))
    }

    /// Runs `insert` with `params` unless `other` (a query of the other
    /// table) finds the name, under the lock every creation takes.
    async fn insert_named(
        &self,
        name: &str,
        other: &str,
        taken: StoreError,
        exists: StoreError,
        insert: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<(), StateError> {
        let mut client = self.state.client().await?;
        let transaction = client.transaction().await?;
        transaction
            .execute("SELECT pg_advisory_xact_lock($1)", &[&NAMES_LOCK])
            .await?;
        if transaction.query_opt(other, &[&name]).await?.is_some() {
            return Err(taken.into());
        }
        match transaction.execute(insert, params).await {
            Ok(_) => {}
            Err(err) if err.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                return Err(exists.into());
            }
            Err(err) => return Err(err.into()),
        }
        transaction.commit().await?;
        Ok(())
    }

    /// Removes a client or an approver; every replica refuses its token
    /// from the moment it hears of it.
    pub async fn revoke(&self, name: &str) -> Result<Revoked, StateError> {
        let client = self.state.client().await?;
        if let Some(row) = client
            .query_opt(
                "DELETE FROM portcullis_clients WHERE name = $1 RETURNING name, tier, token_sha256, created",
                &[&name],
            )
            .await?
        {
            return Ok(Revoked::Client(stored(&row)));
        }
        let row = client
            .query_opt(
                "DELETE FROM portcullis_approvers WHERE name = $1 RETURNING name, groups, token_sha256, created",
                &[&name],
            )
            .await?
            .ok_or_else(|| StoreError::NoSuchClient(name.to_owned()))?;
        Ok(Revoked::Approver(approver(&row)))
    }
}

/// A row of `name, groups, token_sha256, created`.
fn approver(row: &tokio_postgres::Row) -> StoredApprover {
    StoredApprover {
        name: row.get(0),
        groups: row.get(1),
        token_sha256: row.get(2),
        created: row.get(3),
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
