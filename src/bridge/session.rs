//! What a bridge's session is, whichever store keeps it: its summary,
//! its turns and how each stands, where a new turn goes, why one cannot
//! start, and what a store's failure says.

use serde::Serialize;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("the session store {path}: {source}")]
    Open {
        path: String,
        source: rusqlite::Error,
    },
    #[error("the session store {path} was written by a newer portcullis (version {found})")]
    Newer { path: String, found: i64 },
    #[error(
        "the session store {path} holds prompts and replies and others can read or write it (mode {mode:o}): run `chmod 600 {path}`"
    )]
    LoosePermissions { path: String, mode: u32 },
    #[error("the session store: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("no randomness for a session id: {0}")]
    Random(String),
    #[error("the shared session store: {0}")]
    Shared(String),
}

/// How many characters of the first prompt make a session's title.
const TITLE_CHARS: usize = 80;

/// How a turn stands (and a session, by its last turn).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnState {
    Running,
    Completed,
    Failed,
    Cancelled,
    /// portcullis stopped while the turn ran; found so at the next start.
    Interrupted,
}

impl TurnState {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnState::Running => "running",
            TurnState::Completed => "completed",
            TurnState::Failed => "failed",
            TurnState::Cancelled => "cancelled",
            TurnState::Interrupted => "interrupted",
        }
    }

    pub fn parse(text: &str) -> Self {
        match text {
            "running" => TurnState::Running,
            "completed" => TurnState::Completed,
            "cancelled" => TurnState::Cancelled,
            "interrupted" => TurnState::Interrupted,
            _ => TurnState::Failed,
        }
    }
}

/// A session as its owner sees it in a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionSummary {
    pub id: String,
    pub title: String,
    pub created_at: String,
    pub updated_at: String,
    pub turns: u64,
    pub state: TurnState,
}

/// One turn, as its owner reads it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Turn {
    pub prompt: String,
    pub reply: Option<String>,
    pub state: TurnState,
    pub started_at: String,
    pub ended_at: Option<String>,
}

/// Where a new turn goes: its session, its number, and the agent's id of
/// the conversation when it has one (none: start a new one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnSlot {
    pub session_id: String,
    pub n: u64,
    pub conversation: Option<String>,
}

/// Why a turn cannot start.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// No such session for this owner (or none at all: the same answer).
    NotFound,
    /// The session has a turn in flight.
    Busy,
}

/// A session's title: the first words of its first prompt.
pub fn title_of(prompt: &str) -> String {
    prompt
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(TITLE_CHARS)
        .collect()
}

/// 128 random bits as hex: a session id nobody can guess (ownership is
/// checked anyway; an id says nothing about who made it or when).
pub fn new_session_id() -> Result<String, StoreError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|err| StoreError::Random(err.to_string()))?;
    Ok(hex::encode(bytes))
}
