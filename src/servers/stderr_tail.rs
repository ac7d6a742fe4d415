//! The last lines a stdio server wrote on stderr, kept so that a call it
//! cannot answer says why at once (an agent without credentials, one that
//! exited) instead of the client waiting out the timeout and the reason
//! reaching only the operator's log.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

/// How many lines are kept, and how much of each.
const LINES: usize = 8;
const LINE_CHARS: usize = 240;

/// Shared between the task reading a server's stderr and its calls; kept
/// across restarts, so the lines of a server that died are still there.
#[derive(Clone)]
pub struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    /// Counts the lines that report an error, for a call to wait on.
    errors: watch::Sender<u64>,
}

impl Default for StderrTail {
    fn default() -> Self {
        Self {
            lines: Arc::default(),
            errors: watch::Sender::new(0),
        }
    }
}

impl StderrTail {
    /// Keeps `line` (sanitized), and tells the waiting calls when it
    /// reports an error.
    pub fn push(&self, line: &str) {
        let line = sanitized(line);
        if line.is_empty() {
            return;
        }
        let error = reports_error(&line);
        {
            let mut lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
            if lines.len() == LINES {
                lines.pop_front();
            }
            lines.push_back(line);
        }
        if error {
            self.errors.send_modify(|count| *count += 1);
        }
    }

    /// The lines kept, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    /// A receiver that sees every error line written from now on.
    pub fn errors(&self) -> watch::Receiver<u64> {
        self.errors.subscribe()
    }
}

/// The line without terminal escapes or control characters, cut to a
/// bounded length: it goes into a client's result.
fn sanitized(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI sequences (`ESC [ ... letter`): colours and cursor moves.
            if chars.peek() == Some(&'[') {
                chars.next();
                for next in chars.by_ref() {
                    if next.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        if c.is_control() {
            out.push(' ');
            continue;
        }
        if out.chars().count() == LINE_CHARS {
            out.push('…');
            break;
        }
        out.push(c);
    }
    out.trim().to_owned()
}

/// Whether a line says the server failed: an `error`, `fatal` or `panic`
/// word, unless it says it is trying again.
fn reports_error(line: &str) -> bool {
    let lower = line.to_lowercase();
    if lower.contains("retrying") || lower.contains("will retry") {
        return false;
    }
    lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|word| matches!(word, "error" | "fatal" | "panic" | "panicked"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines_cleaned_and_bounded() {
        let tail = StderrTail::default();
        for i in 0..20 {
            tail.push(&format!("\u{1b}[31mline {i}\u{1b}[0m\r"));
        }
        let lines = tail.lines();
        assert_eq!(lines.len(), LINES);
        assert_eq!(lines[0], "line 12");
        assert_eq!(lines[LINES - 1], "line 19");
        tail.push(&"x".repeat(1000));
        let long = tail.lines().pop().unwrap();
        assert_eq!(long.chars().count(), LINE_CHARS + 1);
        tail.push("   \u{7}  ");
        assert_eq!(tail.lines().len(), LINES, "a blank line is not kept");
    }

    #[test]
    fn error_lines_are_counted_and_retries_are_not() {
        let tail = StderrTail::default();
        let errors = tail.errors();
        tail.push("starting up");
        tail.push("ERROR stream error: 401 Unauthorized; retrying 1/5");
        assert_eq!(*errors.borrow(), 0);
        tail.push("ERROR codex_core: 401 Unauthorized: missing credentials");
        tail.push("thread 'main' panicked at src/main.rs:3:5");
        tail.push("no errors found");
        assert_eq!(*errors.borrow(), 2);
    }
}
