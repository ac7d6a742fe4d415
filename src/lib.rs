//! portcullis: an approval service between AI agents and the tools they call.
//!
//! One Cedar decision point ([`pdp::Engine::decide`]) answers allow, ask or
//! deny for every tool call before it runs. Policies, the schema and the
//! tier data live in `policies/` and `schemas/` (built into the binary as
//! defaults); the facts they test are computed here, in Rust.
//!
//! # Layout
//! - [`pdp`]: loads and strictly validates the policy set, and decides
//!   (`Engine::decide(&Query)`, the one place Cedar is evaluated).
//! - [`facts`]: trusted facts from a request (canonical paths against the
//!   root, path classes, shell command facts); they never decide.
//! - [`gate`]: the command gate: a shell command line judged through the
//!   decision point, part by part.
//! - [`tools`]: the registry of tools, their effects and input schemas,
//!   the built-in tools and their confined (handle-based) file access; a
//!   tool runs only with the keeper's `Authorized` proof.
//! - [`keeper`]: the one path from a request to a run: discover, validate,
//!   compute facts, decide, record, run, record the outcome.
//! - [`approval`]: asking a human, sealed states, the approval inbox, and
//!   the `Grant` only it makes.
//! - [`approval_http`]: the approval inbox over HTTP: the approvers' page,
//!   the JSON API, the signed webhook.
//! - [`audit`]: the hash-chained log (group commit, head, checkpoints),
//!   policy snapshots, offline verify and replay.
//! - [`auth`]: client and approver tokens, the token store, and the
//!   directory a running server checks a token against.
//! - [`state`]: what a fleet of replicas shares in PostgreSQL (`--state`):
//!   clients and approvers, approvals' spent nonces, the approval inbox's
//!   questions, the replicas' audit chains and the bridge's sessions.
//! - [`mcp`]: the MCP adapter (rmcp): it translates, it does not decide.
//! - [`servers`]: downstream MCP servers: `servers.toml`, the pins in
//!   `servers.lock`, their tools in the registry, and the connections a
//!   decided call is forwarded through.
//! - [`bridge`]: the agent bridge: callers' conversations with a downstream
//!   agent (an MCP server, or Codex's app-server protocol), each owned by
//!   its caller, in a SQLite session store (or a fleet's tables).
//! - [`loosening`]: what a change to a set's data files (schema, command
//!   table, path classes, servers, tiers) newly permits, entry by entry.
//! - [`review`]: the typed report of a candidate set: the proof of what it
//!   newly permits joined with the replay of recorded traffic under it.
//! - [`cli`]: the command-line adapter; it translates, it does not decide.
//! - [`hook`]: the coding-agent hook adapter (Claude Code, Codex): one
//!   harness event in, one answer out; it translates, it does not decide.
//! - [`metrics`]: what a running portcullis counts, for Prometheus.
//! - [`http_checks`]: the Host, Origin and bearer checks every endpoint
//!   shares; [`html_text`]: escaping for the pages portcullis writes.
//! - [`clock`]: the injected wall clock; [`atomic_file`]: crash-safe file
//!   replacement; [`canonical`]: the RFC 8785 encoding and SHA-256 that
//!   records, approvals and redacted arguments are hashed with.
//!
//! # Invariants
//! One decision point; fail closed (any Cedar error, unknown principal or
//! tool, or context off the schema is a deny); hard constraints are
//! `forbid`s that must be present; the allowlist is empty by default; facts
//! are computed, never taken from the client.

pub mod approval;
pub mod approval_http;
pub mod atomic_file;
pub mod audit;
pub mod auth;
pub mod bridge;
pub mod canonical;
pub mod cli;
pub mod clock;
pub mod confine;
pub mod facts;
pub mod file_stamp;
pub mod gate;
pub mod hook;
pub mod html_text;
pub mod http_checks;
pub mod keeper;
pub mod loosening;
pub mod mcp;
pub mod metrics;
pub mod pdp;
pub mod review;
pub mod servers;
pub mod state;
pub mod tools;

/// mimalloc, not the system allocator: a decision, a proxied message and a
/// replayed record each make hundreds of small allocations, freed on
/// other threads as often as not, where glibc's arenas cost the most.
/// Declared here, so the binary, the benches and the tests all allocate
/// alike.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
