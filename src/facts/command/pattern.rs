//! The regular expressions of the command table, checked when the table
//! loads and compiled the first time a command needs one. A table holds
//! dozens and a command needs a few: compiling them all was most of the
//! time it takes to load a policy set (about 5 ms of a 12 ms load), which a
//! hook process pays on every tool call.
//!
//! The check at load parses the pattern with the parser the `regex` crate
//! compiles from, with the same settings, so a pattern that loads compiles,
//! unless it is past the compiled-size limit. Each use says what a pattern
//! that will not compile counts as, and every use picks the stricter side:
//! a rule that adds a class applies, a pattern that proves a harmless use
//! does not match.

use std::sync::OnceLock;

use regex::{Regex, RegexSet};

#[derive(Debug, Clone)]
pub struct Pattern {
    source: String,
    compiled: OnceLock<Option<Regex>>,
}

impl Pattern {
    /// Checks the syntax; the message is the parser's.
    pub fn new(source: &str) -> Result<Self, String> {
        check(source)?;
        Ok(Self {
            source: source.to_owned(),
            compiled: OnceLock::new(),
        })
    }

    /// A pattern whose syntax was checked when the same text loaded
    /// before.
    pub fn checked_before(source: &str) -> Self {
        Self {
            source: source.to_owned(),
            compiled: OnceLock::new(),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    fn regex(&self) -> Option<&Regex> {
        self.compiled
            .get_or_init(|| compile_or_warn(&self.source, Regex::new))
            .as_ref()
    }

    /// Whether it matches somewhere in `text`; `failed` if it cannot be
    /// compiled.
    pub fn is_match_or(&self, text: &str, failed: bool) -> bool {
        self.regex().map_or(failed, |regex| regex.is_match(text))
    }

    /// Whether its leftmost match is the whole of `text`; `failed` if it
    /// cannot be compiled.
    pub fn matches_whole_or(&self, text: &str, failed: bool) -> bool {
        self.regex().map_or(failed, |regex| {
            regex
                .find(text)
                .is_some_and(|m| m.start() == 0 && m.end() == text.len())
        })
    }
}

/// Several patterns matched in one pass, compiled on first use.
#[derive(Debug, Clone)]
pub struct PatternSet {
    sources: Vec<String>,
    compiled: OnceLock<Option<RegexSet>>,
}

impl PatternSet {
    /// Of patterns already checked one by one.
    pub fn new(patterns: &[&Pattern]) -> Self {
        Self {
            sources: patterns.iter().map(|p| p.as_str().to_owned()).collect(),
            compiled: OnceLock::new(),
        }
    }

    /// The indices of the patterns that match; every index if the set
    /// cannot be compiled.
    pub fn matches_or_all(&self, text: &str) -> Vec<usize> {
        let set = self.compiled.get_or_init(|| {
            compile_or_warn(&self.sources.join(" | "), |_| RegexSet::new(&self.sources))
        });
        match set {
            Some(set) => set.matches(text).into_iter().collect(),
            None => (0..self.sources.len()).collect(),
        }
    }
}

fn check(source: &str) -> Result<(), String> {
    regex_syntax::Parser::new()
        .parse(source)
        .map(drop)
        .map_err(|err| err.to_string())
}

fn compile_or_warn<T>(
    source: &str,
    compile: impl FnOnce(&str) -> Result<T, regex::Error>,
) -> Option<T> {
    match compile(source) {
        Ok(compiled) => Some(compiled),
        Err(err) => {
            tracing::warn!(pattern = source, error = %err, "a command-table pattern does not compile; it counts on the strict side");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_is_checked_at_once_and_matching_is_as_regex() {
        assert!(Pattern::new("(").is_err());
        assert!(Pattern::new(r"\p{NoSuchClass}").is_err());
        let pattern = Pattern::new("-[0-9]+").unwrap();
        assert!(pattern.is_match_or("x -20", false));
        assert!(pattern.matches_whole_or("-20", false));
        assert!(!pattern.matches_whole_or("-20x", true));
        let set = PatternSet::new(&[&Pattern::new("^a$").unwrap(), &Pattern::new("b").unwrap()]);
        assert_eq!(set.matches_or_all("ab"), vec![1]);
    }

    #[test]
    fn a_pattern_past_the_size_limit_loads_and_counts_on_the_side_asked() {
        let huge = Pattern::new(r"\w{1000}\w{1000}\w{1000}").unwrap();
        assert!(huge.is_match_or("anything", true));
        assert!(!huge.matches_whole_or("anything", false));
        let set = PatternSet::new(&[&huge, &Pattern::new("x").unwrap()]);
        assert_eq!(set.matches_or_all("y"), vec![0, 1]);
    }
}
