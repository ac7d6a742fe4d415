//! What a tool needs to run, and how it may fail.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use thiserror::Error;

use crate::facts::{ResolvedPath, Root};

/// Set when the caller cancels; long-running tools poll it.
#[derive(Debug, Clone, Default)]
pub struct CancelFlag(Arc<AtomicBool>);

impl CancelFlag {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// A progress report from a running tool (or relayed from a downstream
/// server, whose progress may be fractional and have a total).
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub done: f64,
    pub total: Option<f64>,
    pub message: String,
}

/// One run of a tool, on the paths the decision was made on.
pub struct Invocation<'a> {
    pub root: &'a Root,
    pub arguments: &'a serde_json::Value,
    /// The path arguments as resolved when the call was decided.
    pub paths: &'a [(String, ResolvedPath)],
    pub cancel: &'a CancelFlag,
    pub progress: &'a mut dyn FnMut(Progress),
    /// Whether the caller may read a file the tool finds by itself (search
    /// walks a tree): each such file is decided by the decision point, as
    /// the paths the client named were. The flag says whether the opened
    /// file has other names (its link count, read on the handle).
    pub may_read: &'a dyn Fn(&Path, bool) -> bool,
    /// When a tool that walks (search, list_dir) must stop and return what
    /// it has, marked truncated.
    pub deadline: Option<Instant>,
}

impl Invocation<'_> {
    /// Whether the call's time budget is spent.
    pub fn out_of_time(&self) -> bool {
        self.deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
    }

    /// A path argument as it was resolved when the call was decided. A tool
    /// reaches it only through `confined`, which refuses to act on anything
    /// but the object decided about.
    pub fn path(&self, argument: &str) -> Result<&ResolvedPath, ToolFailure> {
        self.paths
            .iter()
            .find(|(name, _)| name == argument)
            .map(|(_, path)| path)
            .ok_or(ToolFailure::Internal)
    }

    pub fn string(&self, name: &str) -> Option<&str> {
        self.arguments.get(name).and_then(serde_json::Value::as_str)
    }

    pub fn integer(&self, name: &str) -> Option<u64> {
        self.arguments.get(name).and_then(serde_json::Value::as_u64)
    }

    /// A path shown to the client: relative to the root.
    pub fn display(&self, path: &Path) -> String {
        path.strip_prefix(self.root.path())
            .map_or_else(|_| String::new(), |p| p.display().to_string())
    }
}

/// How a tool failed. Each message is fixed text: a client never sees a
/// path, an OS error or a trace (those go to the server log).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ToolFailure {
    #[error("the file or folder does not exist")]
    NotFound,
    #[error("the path is not a regular file")]
    NotAFile,
    #[error("the path is not a folder")]
    NotAFolder,
    #[error("the file is not UTF-8 text")]
    NotText,
    #[error("the file is larger than {0} bytes, the most this tool reads")]
    TooLarge(u64),
    #[error("old_string does not occur in the file")]
    OldStringMissing,
    #[error("old_string occurs {0} times in the file; make it unique")]
    OldStringNotUnique(usize),
    #[error("the pattern is not a valid regular expression")]
    BadPattern,
    #[error("the path changed after the call was decided; try again")]
    PathChanged,
    #[error("the call was cancelled")]
    Cancelled,
    #[error("permission denied")]
    PermissionDenied,
    #[error("the tool's server is not running; try again later")]
    ServerUnavailable,
    #[error("no agent is configured: servers.toml declares no `kind = \"agent\"` server")]
    AgentUnavailable,
    /// The agent exited, or wrote an error while the turn ran: what it
    /// last wrote on stderr.
    #[error("the agent cannot answer: {0}")]
    AgentFailed(String),
    #[error("the tool's server did not answer in time")]
    TimedOut,
    #[error("the tool reported an error")]
    Downstream,
    #[error("the tool's result does not fit the output schema it declares")]
    DownstreamInvalidResult,
    #[error("no such session")]
    SessionNotFound,
    #[error("the session has a turn in flight; wait for its reply or cancel it")]
    SessionBusy,
    #[error("the tool failed")]
    Internal,
}

impl ToolFailure {
    /// A stable code for the failure, for clients and the audit log to
    /// match on rather than the text.
    pub fn code(&self) -> &'static str {
        match self {
            ToolFailure::NotFound => "path_not_found",
            ToolFailure::NotAFile => "not_a_file",
            ToolFailure::NotAFolder => "not_a_folder",
            ToolFailure::NotText => "not_text",
            ToolFailure::TooLarge(_) => "too_large",
            ToolFailure::OldStringMissing => "old_string_missing",
            ToolFailure::OldStringNotUnique(_) => "old_string_not_unique",
            ToolFailure::BadPattern => "bad_pattern",
            ToolFailure::PathChanged => "path_changed",
            ToolFailure::Cancelled => "cancelled",
            ToolFailure::PermissionDenied => "path_refused",
            ToolFailure::ServerUnavailable => "server_unavailable",
            ToolFailure::AgentUnavailable | ToolFailure::AgentFailed(_) => "agent_unavailable",
            ToolFailure::TimedOut => "timed_out",
            ToolFailure::Downstream => "downstream_error",
            ToolFailure::DownstreamInvalidResult => "downstream_invalid_result",
            ToolFailure::SessionNotFound => "session_not_found",
            ToolFailure::SessionBusy => "session_busy",
            ToolFailure::Internal => "internal",
        }
    }

    /// Maps an I/O error to a failure, logging the details (which may hold
    /// paths) on the server side only.
    pub fn from_io(err: std::io::Error) -> Self {
        match err.kind() {
            std::io::ErrorKind::NotFound => ToolFailure::NotFound,
            std::io::ErrorKind::PermissionDenied => ToolFailure::PermissionDenied,
            std::io::ErrorKind::NotADirectory => ToolFailure::NotAFolder,
            std::io::ErrorKind::IsADirectory => ToolFailure::NotAFile,
            std::io::ErrorKind::InvalidData => ToolFailure::NotText,
            _ => {
                tracing::warn!(error = %err, "tool I/O error");
                ToolFailure::Internal
            }
        }
    }
}
