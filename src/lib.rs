//! portcullis: an approval service between AI agents and the tools they call.
//!
//! One Cedar decision point ([`pdp::Engine::decide`]) answers allow, ask or
//! deny for every tool call before it runs. Policies, the schema and the
//! tier data live in `policies/` and `schemas/` (built into the binary as
//! defaults); the facts they test are computed here, in Rust.
//!
//! # Layout
//! - [`pdp`]: loads and strictly validates the policy set, and decides.
//! - [`facts`]: pure functions from a request to Cedar context (canonical
//!   paths against the root, path classes).
//! - [`tools`]: the registry of tools, their effects and input schemas.
//! - [`cli`]: the command-line adapter; it translates, it does not decide.
//!
//! # Invariants
//! One decision point; fail closed (any Cedar error, unknown principal or
//! tool, or context off the schema is a deny); hard constraints are
//! `forbid`s that must be present; the allowlist is empty by default; facts
//! are computed, never taken from the client.

pub mod approval;
pub mod atomic_file;
pub mod audit;
pub mod auth;
pub mod cli;
pub mod clock;
pub mod facts;
pub mod gate;
pub mod keeper;
pub mod mcp;
pub mod pdp;
pub mod tools;
