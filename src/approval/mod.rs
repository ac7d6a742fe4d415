//! Approvals: an `ask` turned into a human decision, bound to the exact
//! call and usable once.
//!
//! The answer to a question comes back through the client (MCP elicitation),
//! so what binds it to the call must be something the client cannot forge:
//! a sealed state (HMAC-SHA256 under a key that never leaves this process)
//! naming the client's fingerprint, a digest of the call (tool, arguments,
//! policy set), an expiry and a nonce, which is spent on first use.

mod command;
mod flow;
mod grant;
mod inbox;
mod ledger;
mod questions;
mod seal;
mod shared_key;

pub use command::{
    COMMAND_APPROVAL_KEY_FILE, CommandApprovalError, CommandApprovals, command_digest,
};
pub use flow::{Answer, Approvals, Asking, Era, Reply, Request, SealUnavailable};
pub use grant::Grant;
pub use inbox::{Announce, Ended, Inbox, KeeperFor};
pub use ledger::{LedgerUnavailable, NonceLedger, Spending, Spent};
pub use questions::{
    AnswerError, AnswerView, AskingClient, AskingPolicy, CLOSED_KEPT, QuestionCall, QuestionStore,
    QuestionView, Status, Stored, StoredQuestion, Verdict, check_answer, closes_with, shown_at,
};
pub use seal::{ApprovalSeal, SealError, Unspent, action_digest};
pub use shared_key::{APPROVAL_KEY_ENV, SharedKeyError, shared_key_from_file, shared_key_from_hex};
