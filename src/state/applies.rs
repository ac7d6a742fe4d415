//! A fleet's `policy apply`: the operator-signed records that let one exact
//! wider policy set through every replica's `serve --reload tighten-only`.
//! A row is a claim, not a proof: each replica checks the record's
//! signature with the operator key it was given (`--apply-key`), so whoever
//! can write the table cannot let a set through. Each insert notifies
//! `portcullis_policy_applies` at its commit, so every replica looks again
//! at once rather than at its next change of files.

use std::time::SystemTime;

use serde_json::Value;

use super::listen::{Listening, listen};
use super::{SharedState, StateError, millis};

/// The channel every insert notifies, with the set's hash.
const APPLIES_CHANNEL: &str = "portcullis_policy_applies";

impl SharedState {
    /// Stores the record that lets the set `hash` through and tells every
    /// replica, in one transaction.
    pub async fn add_apply(&self, hash: &str, record: &Value) -> Result<(), StateError> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await?;
        transaction
            .execute(
                "INSERT INTO portcullis_policy_applies (policy_set, record, applied_ms) VALUES ($1, $2, $3)",
                &[&hash, &record.to_string(), &millis(SystemTime::now())],
            )
            .await?;
        transaction
            .execute("SELECT pg_notify($1, $2)", &[&APPLIES_CHANNEL, &hash])
            .await?;
        transaction.commit().await?;
        Ok(())
    }

    /// The records stored for the set `hash`, oldest first; a row that is
    /// not JSON is skipped (it could carry no signature anyway).
    pub async fn applies_of(&self, hash: &str) -> Result<Vec<Value>, StateError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT record FROM portcullis_policy_applies WHERE policy_set = $1 ORDER BY applied_ms",
                &[&hash],
            )
            .await?;
        Ok(rows
            .iter()
            .filter_map(|row| serde_json::from_str(row.get::<_, &str>(0)).ok())
            .collect())
    }

    /// The hashes of sets applied from now on, as they are applied.
    pub async fn follow_applies(&self) -> Result<Listening, StateError> {
        listen(self, APPLIES_CHANNEL).await
    }
}
