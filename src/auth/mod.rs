//! Client tokens: who an MCP client is, checked before any MCP message is
//! read. The store keeps only SHA-256 hashes of tokens; a token is shown
//! once, when it is created.

mod directory;
mod store;
mod token;

pub use directory::{ApproverDirectory, ApproverList, ClientDirectory, ClientList, FileDirectory};
pub use store::{
    OWNER_TIER, Revoked, StoreError, StoredApprover, StoredClient, TokenStore, authenticate_among,
    authenticate_approver, default_store_path, new_approver, new_client,
};
pub use token::{Token, fingerprint, generate, hash_token};

/// What `serve` prints on stderr when authentication fails, whatever the
/// reason: it must not tell an attacker which check failed.
pub const AUTH_FAILED: &str = "portcullis: authentication failed";

/// The environment variable `serve` reads the client's token from.
pub const TOKEN_ENV: &str = "PORTCULLIS_TOKEN";
