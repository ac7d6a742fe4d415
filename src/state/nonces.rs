//! The fleet's spent approval nonces: a row each, under a primary key, so
//! that of two replicas spending one nonce at once exactly one inserts it.
//! Rows of expired states are swept now and then: an expired state is
//! refused before its nonce is looked at.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::SharedState;
use crate::approval::{LedgerUnavailable, NonceLedger, Spending, Spent, Unspent};
use crate::clock::Clock;

/// One spend in this many also sweeps the expired rows.
const SWEEP_EVERY: u32 = 64;

pub struct SharedNonces {
    state: SharedState,
    clock: Arc<dyn Clock>,
    spends: AtomicU32,
}

impl SharedNonces {
    pub fn new(state: SharedState, clock: Arc<dyn Clock>) -> Self {
        Self {
            state,
            clock,
            spends: AtomicU32::new(0),
        }
    }

    async fn spend_now(&self, unspent: Unspent) -> Result<Spent, super::StateError> {
        let client = self.state.client().await?;
        let expires = i64::try_from(unspent.expires).unwrap_or(i64::MAX);
        let inserted = client
            .execute(
                "INSERT INTO portcullis_approval_nonces (nonce, expires_ms) VALUES ($1, $2) ON CONFLICT (nonce) DO NOTHING",
                &[&unspent.nonce, &expires],
            )
            .await?;
        if self
            .spends
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(SWEEP_EVERY)
        {
            let now = i64::try_from(self.clock.now_millis()).unwrap_or(i64::MAX);
            client
                .execute(
                    "DELETE FROM portcullis_approval_nonces WHERE expires_ms <= $1",
                    &[&now],
                )
                .await?;
        }
        Ok(if inserted == 1 {
            Spent::Now
        } else {
            Spent::Before
        })
    }
}

impl NonceLedger for SharedNonces {
    fn spend(&self, unspent: Unspent) -> Spending<'_> {
        Box::pin(async move {
            self.spend_now(unspent)
                .await
                .map_err(|err| LedgerUnavailable(err.to_string()))
        })
    }
}
