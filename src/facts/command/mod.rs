//! Facts about a shell command, for the command gate: every program it
//! would run (wrappers seen through), their classes, whether every write
//! stays inside the root, and whether anything could not be seen. Nothing
//! here runs anything.

mod classes;
mod parse;
mod unwrap;

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use classes::{CommandClassError, CommandClasses};
pub use parse::MAX_COMMAND_BYTES;
use unwrap::OPAQUE;

use super::paths::{Root, resolve};
use unwrap::{Unwrapped, unwrap_source};

/// Redirection targets that are not files.
const DEVICES: [&str; 4] = ["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"];

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CommandError {
    #[error("the command is empty")]
    Empty,
    #[error("the command is longer than {MAX_COMMAND_BYTES} bytes")]
    TooLong,
    #[error("the command contains a NUL byte")]
    Nul,
}

/// One program the command would run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandPart {
    pub argv: Vec<String>,
    pub program: String,
    pub classes: BTreeSet<String>,
}

/// The facts of a command (schema type `Portcullis::CommandFacts`, less
/// the approval fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandFacts {
    pub classes: BTreeSet<String>,
    pub programs: BTreeSet<String>,
    pub writes_inside_root: bool,
    pub opaque: bool,
    pub parts: Vec<CommandPart>,
}

/// Judges `source` as run in `cwd` (inside or outside `root`).
pub fn command_facts(
    source: &str,
    cwd: &Path,
    root: &Root,
    table: &CommandClasses,
) -> Result<CommandFacts, CommandError> {
    if source.trim().is_empty() {
        return Err(CommandError::Empty);
    }
    if source.len() > MAX_COMMAND_BYTES {
        return Err(CommandError::TooLong);
    }
    if source.contains('\0') {
        return Err(CommandError::Nul);
    }
    let mut unwrapped = Unwrapped::default();
    unwrap_source(source, 0, &mut unwrapped);
    let mut facts = CommandFacts {
        classes: BTreeSet::new(),
        programs: BTreeSet::new(),
        writes_inside_root: true,
        opaque: unwrapped.opaque,
        parts: Vec::new(),
    };
    for run in &unwrapped.runs {
        let mut classes = table.classify(&run.name, &run.args);
        classes.extend(run.extra.iter().cloned());
        facts.classes.extend(classes.iter().cloned());
        facts.programs.insert(run.program.clone());
        let mut argv = vec![run.program.clone()];
        argv.extend(run.args.iter().cloned());
        facts.parts.push(CommandPart {
            argv,
            program: run.program.clone(),
            classes,
        });
    }
    judge_writes(&unwrapped, cwd, root, &mut facts);
    if facts.parts.is_empty() && !facts.opaque {
        // Only assignments, comments or empty groups: nothing to run,
        // but nothing seen either.
        facts.opaque = true;
    }
    if facts.opaque {
        facts.classes.insert(OPAQUE.to_owned());
    }
    Ok(facts)
}

fn judge_writes(unwrapped: &Unwrapped, cwd: &Path, root: &Root, facts: &mut CommandFacts) {
    for target in &unwrapped.writes {
        let Some(target) = target else {
            facts.opaque = true;
            continue;
        };
        if DEVICES.contains(&target.as_str()) {
            continue;
        }
        let relative = !target.starts_with('/') && !target.starts_with('~');
        if relative && unwrapped.changes_directory {
            // After a `cd`, where a relative path points is unknown.
            facts.opaque = true;
            continue;
        }
        let absolute = if relative {
            cwd.join(target).to_string_lossy().into_owned()
        } else {
            target.clone()
        };
        match resolve(root, &absolute) {
            Ok(resolved) => facts.writes_inside_root &= resolved.inside_root,
            Err(_) => facts.opaque = true,
        }
    }
}
