//! Which arguments of a tool name paths, and how the tool uses them: the
//! part of a tool's declaration that facts are computed from. It lives with
//! the facts so that facts never depend on the tool registry.

use serde::{Deserialize, Serialize};

/// How a tool uses a path argument. Reads and writes are judged separately:
/// the root and VCS-metadata rules for writes are hard constraints, for reads
/// they are defaults a team may widen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathRole {
    Read,
    Write,
    ReadWrite,
}

impl PathRole {
    pub fn reads(self) -> bool {
        matches!(self, PathRole::Read | PathRole::ReadWrite)
    }

    pub fn writes(self) -> bool {
        matches!(self, PathRole::Write | PathRole::ReadWrite)
    }
}

/// An argument of a tool that names a file or folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathArgument {
    /// The property of the arguments object that holds the path.
    pub name: String,
    pub role: PathRole,
    /// Used when the argument is absent (e.g. `search` defaults to the root).
    pub default: Option<String>,
}
