//! The registry of tools portcullis can gate: their ids, declared effects,
//! required capabilities, which arguments are paths, and their JSON input
//! schemas.
//!
//! The registry is the only source of the tool facts that policies test
//! (`resource.effects`, `resource.required_capabilities`, `resource.read_only`):
//! they come from here, never from a client or a downstream server's claims.
//!
//! Why the built-in tools import from `keeper`, floors above: a tool runs
//! only with a [`crate::keeper::Authorized`], the proof that an allow's
//! record is durable, and only the keeper's record step may make one (its
//! constructor is private to that module: authorized by type). Moving the
//! type down here would open its constructor to the crate; the arrow up is
//! the price of keeping that proof unforgeable, as with `approval::Grant`.

mod arguments;
mod bridge;
mod builtin;
pub mod confined;
mod harness;
mod registry;
mod run;
mod spec;

pub use arguments::{ArgumentError, ArgumentValidator, SchemaError};
pub use bridge::{BRIDGE_SERVER, BridgeTool, MAX_PROMPT, bridge_specs};
pub use builtin::{BUILTIN_SERVER, Builtin};
pub use harness::{HARNESS_SERVER, SHELL_FOLDER};
pub use registry::{RegisteredTool, Registry, RegistryError, Runner};
pub use run::{CancelFlag, Invocation, Progress, ToolFailure};
pub use spec::{Effect, PathArgument, PathRole, ToolId, ToolSpec};
