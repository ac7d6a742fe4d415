//! Where the nonce of an approval state is spent: in the process that
//! sealed it (one machine), or where every replica of a fleet sees it. A
//! state opens once, whichever replica it comes back to.

use std::future::Future;
use std::pin::Pin;

use super::seal::Unspent;

/// Whether a nonce was spent now or before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spent {
    Now,
    Before,
}

/// The ledger could not say: the state is refused, as a spent one is.
#[derive(Debug, thiserror::Error)]
#[error("the approval ledger is unavailable: {0}")]
pub struct LedgerUnavailable(pub String);

pub type Spending<'a> = Pin<Box<dyn Future<Output = Result<Spent, LedgerUnavailable>> + Send + 'a>>;

/// Spends nonces shared beyond one process.
pub trait NonceLedger: Send + Sync {
    fn spend(&self, unspent: Unspent) -> Spending<'_>;
}
