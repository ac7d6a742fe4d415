//! Where the bridge keeps its callers' sessions: a SQLite file on one
//! machine ([`super::SessionStore`]), or tables a fleet shares, so that a
//! conversation started through one replica goes on through another. Each
//! keeps the same promises: a turn's row is durable before the agent is
//! asked, a session is its owner's alone, one turn runs at a time, and a
//! turn whose process died is found interrupted.

use super::session::{Refused, SessionSummary, StoreError, Turn, TurnSlot, TurnState};

pub trait SessionBackend: Send {
    /// Makes a new session owned by `owner` and its first turn, running.
    fn start(&mut self, owner: &str, agent: &str, prompt: &str) -> Result<TurnSlot, StoreError>;
    /// Adds a running turn to `owner`'s session `id`, unless it is not
    /// theirs or a turn of it is still running.
    fn continue_session(
        &mut self,
        owner: &str,
        id: &str,
        prompt: &str,
    ) -> Result<Result<TurnSlot, Refused>, StoreError>;
    /// Ends a turn with the agent's reply, and its conversation id when the
    /// session had none.
    fn finish(
        &mut self,
        slot: &TurnSlot,
        state: TurnState,
        reply: Option<&str>,
        conversation: Option<&str>,
    ) -> Result<(), StoreError>;
    /// `owner`'s sessions, most recently updated first.
    fn list(&mut self, owner: &str) -> Result<Vec<SessionSummary>, StoreError>;
    /// `owner`'s session `id` with its turns; `None` when it is not theirs.
    fn get(
        &mut self,
        owner: &str,
        id: &str,
    ) -> Result<Option<(SessionSummary, Vec<Turn>)>, StoreError>;
    /// Asks the other processes that share the store to cancel `owner`'s
    /// turn in `id` (one a stateless call started); whether such a turn
    /// runs. A store no other process serves from has none to ask.
    fn cancel_elsewhere(&mut self, _owner: &str, _id: &str) -> Result<bool, StoreError> {
        Ok(false)
    }
}
