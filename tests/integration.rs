//! Integration tests: they drive the real `portcullis` binary.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test fails by panicking, helpers included"
)]

mod approvals;
mod arguments;
mod audit;
mod audit_integrity;
mod book;
mod bridge;
mod bridge_app_server;
mod cli_check;
mod cli_doctor;
mod cli_init;
mod cli_policy;
mod cli_token;
mod conformance;
mod downstream;
mod exec;
mod executable;
mod filesystem_races;
mod fleet;
mod fleet_apply;
mod fleet_inbox;
mod floor;
mod gate_corpus;
mod gate_oracle;
mod gate_properties;
mod haproxy;
mod hook;
mod http;
mod inbox;
mod interop_clients;
mod interop_python;
mod interop_ts;
mod load;
mod mcp_client;
mod mcp_raw;
mod metrics;
mod oracle;
mod page;
mod policy_diff;
mod policy_review;
mod ports;
mod postgres;
mod regression;
mod reload;
mod shadow;
mod shutdown;
mod tasks;
mod util;
