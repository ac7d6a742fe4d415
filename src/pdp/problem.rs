//! A problem found while loading a policy set, located in its file.

use std::fmt;
use thiserror::Error;

use serde::Serialize;

/// What kind of problem; tests and tools branch on this, people read the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// A `.cedar` file does not parse.
    Parse,
    /// A policy has no `@id`.
    MissingId,
    /// A policy has no `@reason`.
    MissingReason,
    /// Two policies share an `@id`.
    DuplicateId,
    /// A hard-constraint `forbid` that must always be present is missing.
    MissingHardConstraint,
    /// A team's file defines a policy in the `hard.` namespace, which only
    /// the built-in hard constraints may use.
    ReservedHardConstraint,
    /// The solver found a request the hard constraints promise to deny
    /// that the assembled set does not deny.
    HardConstraintProof,
    /// A schema file does not parse, or the fragments do not form a schema.
    Schema,
    /// Strict validation failed.
    Validation,
    /// Strict validation warned (an impossible policy, say): refused too.
    ValidationWarning,
    /// The tier entities do not load against the schema.
    Entities,
    /// The requests portcullis builds do not fit the schema (a context
    /// attribute missing or mistyped).
    Context,
    /// A client was given a tier that `tiers.json` does not declare.
    UnknownTier,
    /// The path class table does not load.
    PathClasses,
    /// The command class table does not load.
    CommandClasses,
    /// `servers.toml` or `servers.lock` does not load, or the tools they
    /// declare do not fit the registry.
    Servers,
    /// A policy or schema file cannot be read (missing, unreadable,
    /// misnamed), or a reload could not finish.
    Files,
}

/// One problem, with where it is when that is known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub kind: ProblemKind,
    pub file: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
    pub help: Option<String>,
}

impl Problem {
    pub fn new(kind: ProblemKind, file: &str, message: impl Into<String>) -> Self {
        Self {
            kind,
            file: file.to_owned(),
            line: None,
            column: None,
            message: message.into(),
            help: None,
        }
    }

    /// Places the problem at a byte offset of `text`, the whole file.
    pub fn at_offset(mut self, text: &str, offset: usize) -> Self {
        let (line, column) = line_column(text, offset);
        self.line = Some(line);
        self.column = Some(column);
        self
    }

    pub fn with_help(mut self, help: Option<String>) -> Self {
        self.help = help;
        self
    }

    /// A problem from a Cedar diagnostic whose spans are offsets into `text`
    /// (Cedar keeps the source it parsed, which is why each file is parsed
    /// as one string).
    pub fn from_diagnostic(
        kind: ProblemKind,
        file: &str,
        text: &str,
        diagnostic: &dyn miette::Diagnostic,
    ) -> Self {
        let problem = Self::new(kind, file, diagnostic.to_string())
            .with_help(diagnostic.help().map(|h| h.to_string()));
        let offset = diagnostic
            .labels()
            .and_then(|mut labels| labels.next())
            .map(|label| label.offset());
        match offset {
            Some(offset) if offset <= text.len() => problem.at_offset(text, offset),
            _ => problem,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let (Some(line), Some(column)) = (self.line, self.column) {
            write!(f, ":{line}:{column}")?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

/// 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_become_lines_and_columns() {
        let text = "ab\ncdé\nf";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 3), (2, 1));
        assert_eq!(line_column(text, 5), (2, 3));
        // é is two bytes: the offset after it is column 4.
        assert_eq!(line_column(text, 7), (2, 4));
        assert_eq!(line_column(text, 8), (3, 1));
        assert_eq!(line_column(text, 100), (3, 2));
    }

    #[test]
    fn display_is_file_line_column_message_help() {
        let p = Problem::new(ProblemKind::Parse, "a.cedar", "bad")
            .at_offset("x\ny", 2)
            .with_help(Some("fix it".into()));
        assert_eq!(p.to_string(), "a.cedar:2:1: bad\n  help: fix it");
    }
}

/// The policy set did not load; nothing can be decided with it.
#[derive(Debug, Error)]
#[error("the policy set does not load ({} problem{})", .problems.len(), if .problems.len() == 1 { "" } else { "s" })]
pub struct LoadError {
    pub problems: Vec<Problem>,
}
