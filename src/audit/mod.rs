//! The tamper-evident audit log: JSON Lines, each record chained to the one
//! before by SHA-256 (over the RFC 8785 canonical encoding), a head file
//! that catches a cut tail, and a content-addressed store of every policy
//! set a record names. Decision records are durable before anything they
//! allow runs. `verify` and `replay` work offline, from the log folder alone.

mod applied;
mod chain;
mod checkpoint;
mod decision_record;
mod divergence;
mod file_chain;
mod head;
mod log;
mod record;
mod replay;
mod snapshot;
mod verify;

pub use applied::{
    APPLY_EVENT, Applied, ApplyTrust, applied, applied_path, apply as apply_set, apply_record,
    operator_signed, signed_apply,
};
pub use chain::{Batch, ChainError, ChainStore, Check, Failed};
pub use checkpoint::{
    Checkpoint, KeyError, PRIVATE_KEY_FILE, PUBLIC_KEY_FILE, Signer, fingerprint,
    load_or_create as load_or_create_signer, public_key_text, read_public_key,
};
pub use decision_record::{
    ApproverRef, ClientRef, DecisionRecord, RecordedAction, RecordedAnswer, RecordedPolicy,
    ShadowRecord,
};
pub use divergence::{Divergence, Served, divergences, served};
pub use file_chain::FileChain;
pub use head::{Head, HeadFile, Mark, head_path};
pub use log::{AuditError, AuditLog};
pub use record::{GENESIS, Kind, Record, StoredRecord, line_hash_is_valid};
pub use replay::{Change, Replay, ReplayError, ReplaySummary};
pub use snapshot::{load as load_snapshot, snapshots_dir, store as store_snapshot};
pub use verify::{
    Break, Chain, Line, Records, Scan, Trust, Verified, check_end, scan, scan_trusting, verify,
    verify_trusting,
};
