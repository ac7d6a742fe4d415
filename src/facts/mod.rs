//! Trusted facts: what policies test about a call, computed in Rust from the
//! request and the registry, never taken from what the client claims.

mod command;
mod glob_overlap;
mod path_argument;
mod path_classes;
mod paths;
pub(crate) mod repository_file;
mod tool_call;
mod tool_input;

pub use command::{
    BUILTIN_COMMAND_TABLE, CommandClassError, CommandClasses, CommandError, CommandFacts,
    CommandPart, KNOWN_NODE_KINDS, Loosening, MAX_COMMAND_BYTES, MAX_WALK_ENTRIES, Reach,
    brace_alternatives, command_facts, command_loosenings, join_continuations, shell_quote,
    walk_reach,
};
pub use glob_overlap::{Dialect, secret_witness};
pub use path_argument::{PathArgument, PathRole, holds_paths};
pub use path_classes::{
    BUILTIN_PATH_CLASSES, PathClassError, PathClasses, builtin_class_globs, path_class_loosenings,
};
pub use paths::{
    Anchor, FileId, MAX_PATH_BYTES, PathError, ResolvedPath, Root, is_git_dir, is_vcs_metadata,
    is_vcs_name, resolve,
};
pub use tool_call::{
    CallFactsError, HARDLINKED, ToolCallFacts, ToolFacts, Transport, UNRESOLVABLE,
    forwarded_arguments, tool_call_facts,
};
pub use tool_input::ToolInput;
