//! Whether a pattern can name a secret, whatever is on disk when it is
//! judged. The gate expands a pattern against the file system it sees, and
//! the hooks match a tool's pattern against the secret globs; but the
//! shell that runs a command may see a home folder, or files, the judge
//! did not (`ls ~/.?sh` names `~/.ssh` wherever `~/.ssh` exists). So a
//! pattern is also matched against each built-in secret glob, name by
//! name: where some path is both one the pattern can expand to and one
//! the glob matches, that path (a witness) is judged in the pattern's
//! stead.
//!
//! A wildcard in the pattern counts against a *named* part of a secret
//! glob (`.?sh` against `.ssh`, `sha*` against `shadow`). Against a
//! wildcard part it counts only when its most ordinary name is a secret
//! (`*.pem` is `x.pem`): `*.md` could name `x.key.md`, as `**/*.key.*`
//! allows, but so could every pattern, and a file of that name is judged
//! by its name when it exists. For the same reason a name that is only
//! wildcards (`*`, `.*`, `.??`) aims at nothing: it is judged by what it
//! expands to.

use std::sync::OnceLock;

use super::command::brace_alternatives;
use super::path_classes::builtin_class_globs;

/// How a pattern's wildcards treat a name's leading dot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The shell's: `*`, `?` and `[...]` never match a leading `.`.
    Shell,
    /// A glob library's (ripgrep's `--glob`, a harness's `Glob` tool):
    /// wildcards match a leading `.` too.
    Glob,
}

/// A path `pattern` can name that a built-in secret glob matches, written
/// as the pattern writes it (`~/.ssh` for `~/.?sh`), or `None`. `pattern`
/// is absolute, `~`-relative, or relative to where the secret globs'
/// `**/` may start.
pub fn secret_witness(pattern: &str, dialect: Dialect) -> Option<String> {
    let pattern: Vec<&str> = normalized(pattern)?;
    if !pattern.iter().any(|part| has_wildcard(part)) {
        return None;
    }
    secret_globs()
        .iter()
        .find_map(|glob| witness(&pattern, glob, dialect))
}

/// The built-in secret globs, their brace lists spelled out, each split
/// into its names: made once.
fn secret_globs() -> &'static [Vec<String>] {
    static GLOBS: OnceLock<Vec<Vec<String>>> = OnceLock::new();
    GLOBS.get_or_init(|| {
        builtin_class_globs("secrets")
            .iter()
            .flat_map(|glob| brace_alternatives(glob).unwrap_or_else(|| vec![glob.clone()]))
            .map(|glob| glob.split('/').map(str::to_owned).collect())
            .collect()
    })
}

/// The pattern's names, `.` dropped and a `..` taking the name before it
/// away (as the path it names does); `None` for an empty pattern.
fn normalized(pattern: &str) -> Option<Vec<&str>> {
    if pattern.is_empty() {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for (index, part) in pattern.split('/').enumerate() {
        match part {
            // A leading empty name is the root of an absolute path.
            "" if index == 0 => parts.push(""),
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| !["", "..", "~"].contains(p)) => {
                parts.pop();
            }
            // `/..` is `/`.
            ".." if parts == [""] => {}
            _ => parts.push(part),
        }
    }
    Some(parts)
}

fn has_wildcard(part: &str) -> bool {
    part.contains(['*', '?', '['])
}

/// A path both `pattern` and the glob's names `glob` match, name by name
/// (`**` in the glob standing for any number of names).
fn witness(pattern: &[&str], glob: &[String], dialect: Dialect) -> Option<String> {
    // Depth-first over (pattern name, glob name), with the names chosen
    // so far; the state space is the product of two short paths.
    let mut seen = vec![false; (pattern.len() + 1) * (glob.len() + 1)];
    let mut stack: Vec<(usize, usize, Vec<String>)> = vec![(0, 0, Vec::new())];
    while let Some((p, g, chosen)) = stack.pop() {
        let slot = p * (glob.len() + 1) + g;
        if seen[slot] {
            continue;
        }
        seen[slot] = true;
        if p == pattern.len() && g == glob.len() {
            return Some(chosen.join("/"));
        }
        if glob.get(g).is_some_and(|name| name == "**") {
            stack.push((p, g + 1, chosen.clone()));
            // (the root of an absolute pattern too: `**/` starts anywhere)
            if let Some(part) = pattern.get(p) {
                let mut next = chosen.clone();
                next.push(filled(part));
                stack.push((p + 1, g, next));
            }
            continue;
        }
        let (Some(part), Some(name)) = (pattern.get(p), glob.get(g)) else {
            continue;
        };
        let found = match (has_wildcard(part), has_wildcard(name)) {
            // The pattern's most ordinary name (`x.pem` for `*.pem`), if
            // the glob matches it.
            (true, true) => Some(filled(part)).filter(|f| name_witness(f, name, dialect).is_some()),
            (true, false) if !aims(part) => None,
            _ => name_witness(part, name, dialect),
        };
        if let Some(found) = found {
            let mut next = chosen;
            next.push(found);
            stack.push((p + 1, g + 1, next));
        }
    }
    None
}

/// Whether a pattern name has a character of its own besides a leading
/// dot: something it aims at.
fn aims(part: &str) -> bool {
    tokens(part.strip_prefix('.').unwrap_or(part))
        .iter()
        .any(|token| matches!(token, Token::Literal(_)))
}

/// One name's pattern or glob, read into what each character may be.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Literal(char),
    AnyOne,
    AnyRun,
    Set {
        negated: bool,
        ranges: Vec<(char, char)>,
        /// A `[:class:]` inside: taken as any character, which can only
        /// widen what overlaps.
        open: bool,
    },
}

impl Token {
    fn accepts(&self, c: char, ignore_case: bool) -> bool {
        match self {
            Token::Literal(l) if ignore_case => l.eq_ignore_ascii_case(&c),
            Token::Literal(l) => *l == c,
            Token::AnyOne | Token::AnyRun => true,
            Token::Set {
                negated,
                ranges,
                open,
            } => {
                let within = |c: char| ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c));
                let hit = *open
                    || within(c)
                    || (ignore_case
                        && (within(c.to_ascii_lowercase()) || within(c.to_ascii_uppercase())));
                hit != *negated
            }
        }
    }

    /// Characters worth trying for this token: its own, then a few
    /// ordinary ones.
    fn candidates(&self, out: &mut Vec<char>) {
        match self {
            Token::Literal(c) => out.push(*c),
            Token::Set {
                negated: false,
                ranges,
                ..
            } => {
                for (lo, hi) in ranges {
                    out.extend((*lo..=*hi).take(64));
                }
            }
            _ => {}
        }
    }
}

const ORDINARY: [char; 8] = ['x', 'a', 'Z', '0', '_', '-', 'q', '~'];

fn tokens(name: &str) -> Vec<Token> {
    let chars: Vec<char> = name.chars().collect();
    let mut out = Vec::new();
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        index += 1;
        match c {
            '*' => {
                if out.last() != Some(&Token::AnyRun) {
                    out.push(Token::AnyRun);
                }
            }
            '?' => out.push(Token::AnyOne),
            '\\' if index < chars.len() => {
                out.push(Token::Literal(chars[index]));
                index += 1;
            }
            '[' => match set(&chars, index) {
                Some((token, next)) => {
                    out.push(token);
                    index = next;
                }
                None => out.push(Token::Literal('[')),
            },
            c => out.push(Token::Literal(c)),
        }
    }
    out
}

/// A bracket expression from just after its `[`: the token and where it
/// ends, or `None` when it does not close (then `[` is itself).
fn set(chars: &[char], mut index: usize) -> Option<(Token, usize)> {
    let negated = matches!(chars.get(index), Some('!' | '^'));
    if negated {
        index += 1;
    }
    let mut ranges = Vec::new();
    let mut open = false;
    let mut first = true;
    loop {
        let c = *chars.get(index)?;
        if c == ']' && !first {
            return Some((
                Token::Set {
                    negated,
                    ranges,
                    open,
                },
                index + 1,
            ));
        }
        first = false;
        if c == '[' && chars.get(index + 1) == Some(&':') {
            let close = (index + 2..chars.len().saturating_sub(1))
                .find(|&at| chars[at] == ':' && chars[at + 1] == ']')?;
            open = true;
            index = close + 2;
            continue;
        }
        let c = if c == '\\' {
            index += 1;
            *chars.get(index)?
        } else {
            c
        };
        if chars.get(index + 1) == Some(&'-') && chars.get(index + 2).is_some_and(|&h| h != ']') {
            let high = chars[index + 2];
            ranges.push((c.min(high), c.max(high)));
            index += 3;
        } else {
            ranges.push((c, c));
            index += 1;
        }
    }
}

/// The name a pattern name stands for when a glob's `**` takes it: its
/// own characters, each wildcard one ordinary character.
fn filled(part: &str) -> String {
    tokens(part)
        .iter()
        .map(|token| match token {
            Token::Literal(c) => *c,
            Token::Set {
                negated: false,
                ranges,
                ..
            } if !ranges.is_empty() => ranges[0].0,
            _ => 'x',
        })
        .collect()
}

/// A name both the pattern name `part` (matched as written) and the glob
/// name `name` (matched ignoring ASCII case, as path classes are) match.
fn name_witness(part: &str, name: &str, dialect: Dialect) -> Option<String> {
    let pattern = tokens(part);
    let glob = tokens(name);
    let leading_dot_is_literal = pattern.first() == Some(&Token::Literal('.'));
    let width = glob.len() + 1;
    let mut seen = vec![false; (pattern.len() + 1) * width * 2];
    // (pattern token, glob token, whether a character was taken, taken)
    let mut stack: Vec<(usize, usize, bool, String)> = vec![(0, 0, false, String::new())];
    let mut tried = Vec::new();
    while let Some((i, j, started, text)) = stack.pop() {
        let slot = (i * width + j) * 2 + usize::from(started);
        if seen[slot] {
            continue;
        }
        seen[slot] = true;
        if i == pattern.len() && j == glob.len() {
            return Some(text);
        }
        if pattern.get(i) == Some(&Token::AnyRun) {
            stack.push((i + 1, j, started, text.clone()));
        }
        if glob.get(j) == Some(&Token::AnyRun) {
            stack.push((i, j + 1, started, text.clone()));
        }
        let (Some(a), Some(b)) = (pattern.get(i), glob.get(j)) else {
            continue;
        };
        if *a == Token::AnyRun && *b == Token::AnyRun {
            continue;
        }
        tried.clear();
        a.candidates(&mut tried);
        b.candidates(&mut tried);
        tried.extend(ORDINARY);
        let Some(c) = tried.iter().copied().find(|&c| {
            let hidden = c == '.' && !started && !leading_dot_is_literal;
            a.accepts(c, false) && b.accepts(c, true) && !(hidden && dialect == Dialect::Shell)
        }) else {
            continue;
        };
        let next_i = if *a == Token::AnyRun { i } else { i + 1 };
        let next_j = if *b == Token::AnyRun { j } else { j + 1 };
        let mut next = text;
        next.push(c);
        stack.push((next_i, next_j, true, next));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(pattern: &str) -> Option<String> {
        secret_witness(pattern, Dialect::Shell)
    }

    #[test]
    fn a_pattern_that_can_name_a_secret_is_judged_by_it() {
        for (pattern, witness) in [
            ("~/.?sh", "~/.ssh"),
            ("~/.s*", "~/.ssh"),
            ("~/.ss[h]/id_rsa", "~/.ssh/id_rsa"),
            ("~/.[a]ws/credentials", "~/.aws/credentials"),
            ("~/.config/g?/hosts.yml", "~/.config/gh/hosts.yml"),
            ("~/.c*/g*/hosts.yml", "~/.config/gh/hosts.yml"),
            ("~/.k*/c*", "~/.kube/config"),
            ("/etc/sha*", "/etc/shadow"),
            ("/etc/s?adow", "/etc/shadow"),
            ("/etc/./sh[a-z]dow", "/etc/shadow"),
            ("/ws/x/../../etc/sha*", "/etc/shadow"),
            ("/ws/../../../../etc/sha*", "/etc/shadow"),
            ("/proc/self/env*", "/proc/self/environ"),
            ("/ws/.e?v", "/ws/.env"),
            ("/ws/.en[v]", "/ws/.env"),
            ("/ws/.E*", "/ws/.Env"),
            ("/ws/*/.e*", "/ws/x/.env"),
            ("/ws/*.pem", "/ws/x.pem"),
            ("/ws/keys/*.p12", "/ws/keys/x.p12"),
            ("~/.*_history", "~/.x_history"),
        ] {
            assert_eq!(shell(pattern).as_deref(), Some(witness), "{pattern}");
        }
    }

    #[test]
    fn a_pattern_that_cannot_name_a_secret_stays_itself() {
        for pattern in [
            "/ws/*.md",
            "/ws/*.json",
            "/ws/src/*",
            "/ws/*",
            "~/notes/*.txt",
            "/etc/host?",
            "/ws/.env",
            "/ws/[!.]env",
            "/ws/.*",
            "~/.??",
            "/etc/*",
        ] {
            assert_eq!(shell(pattern), None, "{pattern}");
        }
    }

    #[test]
    fn the_shell_hides_dot_names_from_a_wildcard_a_glob_library_does_not() {
        assert_eq!(shell("/ws/?env"), None);
        assert_eq!(shell("/ws/*env"), None);
        assert_eq!(
            secret_witness("/ws/?env", Dialect::Glob).as_deref(),
            Some("/ws/.env")
        );
    }

    #[test]
    fn bracket_expressions_are_read_as_the_shell_reads_them() {
        assert_eq!(shell("/ws/.e[!x]v").as_deref(), Some("/ws/.env"));
        assert_eq!(shell("/ws/.e[^n]v"), None);
        assert_eq!(shell("/ws/.e[[:alpha:]]v").as_deref(), Some("/ws/.env"));
        assert_eq!(shell("/ws/.e[]n]v").as_deref(), Some("/ws/.env"));
        assert_eq!(shell("/ws/.e[a-z"), None, "an open bracket is itself");
        assert_eq!(shell("/ws/.e\\nv"), None, "no wildcard left");
    }
}
