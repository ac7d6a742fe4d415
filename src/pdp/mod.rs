//! The policy decision point: loads the policy set (schema, policies, tier
//! data, path classes), validates it strictly, and answers allow / ask /
//! deny for every tool request. Every path that can run a tool asks here
//! first; nothing else decides.

mod approve;
mod assembly;
mod bounded_memo;
mod bundle;
mod context;
mod context_reads;
mod decide;
mod decision;
mod defaults;
mod diff;
mod discovery_memo;
mod engine;
mod entities;
mod export;
mod fixtures;
mod input;
mod load;
mod problem;
mod proof;
mod query;
mod schema_floor;
mod scope_index;
mod set_cache;
mod solver;

pub use approve::{ApproverRecord, approver_entity};
pub use bundle::{
    BUILTIN_COPY, BundleError, Framing, PolicyBundle, SERVERS_FILE, SERVERS_LOCK_FILE, SourceFile,
    name_problem,
};
pub use decision::{
    Cause, Decision, DecisionError, DeterminingPolicy, Outcome, PolicySetIdentity, ShadowDecision,
};
pub use diff::{Counterexample, Diff, DiffError, Finding, Pass, diff};
pub use engine::{Audience, CallFactsProblem, Engine};
pub use entities::{
    BadEntityType, ClientRecord, approver_uid, client_uid, entity_uid, server_uid, tier_entities,
    tool_uid,
};
pub use export::{
    EXPORTED_ENTITIES, EXPORTED_POLICIES, EXPORTED_SCHEMA, EXPORTED_TESTS, Export, ExportError,
    ExportedFile, export,
};
pub use fixtures::{CaseResult, accepted as accepted_fixtures, run as run_fixtures};
pub use input::{Field, Hidden, InputType, ToolType, schema_text};
pub use load::{HARD_CONSTRAINTS, schema_json};
pub use problem::LoadError;
pub use problem::{Problem, ProblemKind};
pub use proof::{PROPERTIES, Proof, ProofError, Property, prove};
pub use query::{
    ApproveAsked, Asked, Asker, INBOX_CHANNEL, INBOX_MAX_APPROVERS, NO_APPROVAL, ONE_APPROVER,
    Query, ToolAction, ToolRef,
};
pub use schema_floor::schema_loosenings;
pub use set_cache::SetCache;

#[cfg(test)]
mod tests;
