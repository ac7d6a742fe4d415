//! The coding-agent hook adapter: a harness (Claude Code, Codex) runs
//! `portcullis hook <harness>` before each of its own tools, with one
//! `PreToolUse` event on stdin; portcullis maps it to a request (Bash to the
//! command gate, file tools to path facts, web tools to a network tool),
//! decides and records it through the keeper, and answers in the harness's
//! format. It translates; it does not decide.

mod answer;
mod decide;
mod event;
pub mod install;
mod patch;
mod paths;
pub mod remote;
mod rewrite;

pub use answer::{HookAnswer, Permission};
pub use decide::{Harness, decide, mcp_tool, tools_needed};
pub use event::{EventError, MAX_EVENT_BYTES, PreToolUse};
pub use rewrite::CommandRewrite;
