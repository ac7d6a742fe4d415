//! What a word with a glob (`*`, `?`, `[...]`) or a brace list (`{a,b}`)
//! becomes when the shell expands it. `cat .e?v` reads `.env`, and
//! `cat .e{n,x}v` reads `.env` whether or not `.exv` exists, so the gate
//! judges the words the shell will pass, not the pattern.
//!
//! The gate does not know whether a word was quoted, so it expands every
//! word that looks like a pattern: for a quoted one this can only judge
//! more strictly. What it cannot expand here (a pattern after a `cd`,
//! nested braces, too many matches) is opaque. A pattern that can name a
//! secret (`ls ~/.?sh`) is judged by that secret too, whatever the files
//! are when it is judged (`facts::glob_overlap`).

use std::path::Path;

use globset::GlobBuilder;

use crate::facts::{Dialect, secret_witness};

/// Most words one pattern may expand to before it is opaque.
pub const MAX_EXPANSIONS: usize = 256;

/// What a word expands to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expansion {
    /// No pattern: the word stays as it is.
    Plain,
    /// The words the shell would pass instead (without a match a glob
    /// stays as written, so it is among them).
    Words(Vec<String>),
    /// Cannot be known here.
    Unknown,
}

fn has_glob(word: &str) -> bool {
    word.contains(['*', '?', '['])
}

fn has_braces(word: &str) -> bool {
    word.find('{').is_some_and(|open| {
        let rest = &word[open..];
        rest.contains('}') && (rest.contains(',') || rest.contains(".."))
    })
}

/// The words of a sequence expression (`1..5`, `a..e`, `01..10..3`), as
/// bash makes them, or `None` when `inner` is not one. Too many is an
/// error: `Some(Err(()))`.
fn sequence(inner: &str) -> Option<Result<Vec<String>, ()>> {
    let parts: Vec<&str> = inner.split("..").collect();
    if !(2..=3).contains(&parts.len()) {
        return None;
    }
    let step: i64 = match parts.get(2) {
        Some(step) => step.parse::<i64>().ok()?.checked_abs()?.max(1),
        None => 1,
    };
    let letter = |text: &str| {
        let mut chars = text.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if c.is_ascii_alphabetic() => Some(c),
            _ => None,
        }
    };
    let (values, width): (Vec<i64>, usize) =
        if let (Some(a), Some(b)) = (letter(parts[0]), letter(parts[1])) {
            (range(i64::from(a as u8), i64::from(b as u8), step)?, 0)
        } else {
            let (a, b) = (parts[0].parse::<i64>().ok()?, parts[1].parse::<i64>().ok()?);
            let padded = |text: &str| {
                let digits = text.trim_start_matches('-');
                digits.len() > 1 && digits.starts_with('0')
            };
            let width = if padded(parts[0]) || padded(parts[1]) {
                parts[0].len().max(parts[1].len())
            } else {
                0
            };
            match range(a, b, step) {
                Some(values) => (values, width),
                None => return Some(Err(())),
            }
        };
    if letter(parts[0]).is_some() && letter(parts[1]).is_some() {
        return Some(Ok(values
            .into_iter()
            .filter_map(|v| u8::try_from(v).ok().map(|b| char::from(b).to_string()))
            .collect()));
    }
    Some(Ok(values
        .into_iter()
        .map(|v| {
            if v < 0 {
                format!("-{:0>width$}", -v, width = width.saturating_sub(1))
            } else {
                format!("{v:0>width$}")
            }
        })
        .collect()))
}

/// `from` to `to` by `step`, either way; `None` past `MAX_EXPANSIONS`.
fn range(from: i64, to: i64, step: i64) -> Option<Vec<i64>> {
    let count = from.abs_diff(to) / step.unsigned_abs() + 1;
    if count > MAX_EXPANSIONS as u64 {
        return None;
    }
    let mut values = Vec::new();
    let mut value = from;
    for _ in 0..count {
        values.push(value);
        value = if from <= to {
            value + step
        } else {
            value - step
        };
    }
    Some(values)
}

/// Expands `word` as run in `cwd`; `home` stands for a leading `~/`.
pub fn expand(word: &str, cwd: Option<&Path>, home: Option<&Path>) -> Expansion {
    if !has_glob(word) && !has_braces(word) {
        return Expansion::Plain;
    }
    let Some(alternatives) = braces(word) else {
        return Expansion::Unknown;
    };
    let mut words = Vec::new();
    for alternative in alternatives {
        if !has_glob(&alternative) {
            words.push(alternative);
            continue;
        }
        let Some(cwd) = cwd else {
            return Expansion::Unknown;
        };
        // What the pattern could name besides what it names now: the
        // shell that runs it may see other files, or another home.
        let aimed = if alternative.starts_with('/') || alternative.starts_with("~/") {
            secret_witness(&alternative, Dialect::Shell)
        } else {
            // Matched from the folder it runs in, written as it is.
            let from = format!("{}/", cwd.display());
            secret_witness(&format!("{from}{alternative}"), Dialect::Shell).map(|witness| {
                witness
                    .strip_prefix(&from)
                    .map_or(witness.clone(), str::to_owned)
            })
        };
        match glob(&alternative, cwd, home) {
            Some(matches) if matches.is_empty() => words.push(alternative),
            Some(matches) => words.extend(matches),
            None => return Expansion::Unknown,
        }
        words.extend(aimed.filter(|witness| !words.contains(witness)));
        if words.len() > MAX_EXPANSIONS {
            return Expansion::Unknown;
        }
    }
    Expansion::Words(words)
}

/// Brace expansion of one (not nested) `{a,b,...}` group or `{x..y}`
/// sequence, repeated for every group; `None` for nesting, or for a
/// sequence of more than `MAX_EXPANSIONS` words.
pub fn braces(word: &str) -> Option<Vec<String>> {
    let Some(open) = word.find('{') else {
        return Some(vec![word.to_owned()]);
    };
    let close = open + word[open..].find('}')?;
    let inner = &word[open + 1..close];
    if inner.contains('{') {
        return None;
    }
    let choices: Vec<String> = match sequence(inner) {
        Some(Ok(words)) => words,
        Some(Err(())) => return None,
        None if inner.contains(',') => inner.split(',').map(str::to_owned).collect(),
        None => Vec::new(),
    };
    if choices.is_empty() {
        // `{x}` is no brace expansion: keep it and go on after it.
        let rest = braces(&word[close + 1..])?;
        return Some(
            rest.into_iter()
                .map(|tail| format!("{}{tail}", &word[..=close]))
                .collect(),
        );
    }
    let (head, tail) = (&word[..open], &word[close + 1..]);
    let tails = braces(tail)?;
    let mut out = Vec::new();
    for choice in &choices {
        for tail in &tails {
            out.push(format!("{head}{choice}{tail}"));
            if out.len() > MAX_EXPANSIONS {
                return None;
            }
        }
    }
    Some(out)
}

/// The paths a glob matches, component by component, as the shell would
/// write them; `None` when that cannot be known (too many).
fn glob(pattern: &str, cwd: &Path, home: Option<&Path>) -> Option<Vec<String>> {
    let (start, prefix, rest) = if let Some(rest) = pattern.strip_prefix("~/") {
        (home?.to_path_buf(), "~/".to_owned(), rest)
    } else if let Some(rest) = pattern.strip_prefix('/') {
        (Path::new("/").to_path_buf(), "/".to_owned(), rest)
    } else {
        (cwd.to_path_buf(), String::new(), pattern)
    };
    // (path on disk, path as the shell writes it)
    let mut found = vec![(start, prefix)];
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    for (index, part) in parts.iter().enumerate() {
        let last = index + 1 == parts.len();
        let mut next = Vec::new();
        for (dir, written) in &found {
            if !has_glob(part) {
                let path = dir.join(part);
                if last || path.is_dir() {
                    next.push((
                        path,
                        format!("{written}{part}{}", if last { "" } else { "/" }),
                    ));
                }
                continue;
            }
            let matcher = GlobBuilder::new(part)
                .literal_separator(true)
                .build()
                .ok()?
                .compile_matcher();
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                // The shell's globs skip dot files unless the pattern
                // starts with a dot.
                if name.starts_with('.') && !part.starts_with('.') {
                    continue;
                }
                if matcher.is_match(name) {
                    let path = dir.join(name);
                    if last || path.is_dir() {
                        next.push((
                            path,
                            format!("{written}{name}{}", if last { "" } else { "/" }),
                        ));
                    }
                }
                if next.len() > MAX_EXPANSIONS {
                    return None;
                }
            }
        }
        found = next;
    }
    let mut words: Vec<String> = found.into_iter().map(|(_, written)| written).collect();
    words.sort();
    Some(words)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn globs_and_braces_become_the_words_the_shell_passes() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        fs::write(cwd.join(".env"), "").unwrap();
        fs::write(cwd.join("a.rs"), "").unwrap();
        fs::write(cwd.join("b.rs"), "").unwrap();
        fs::create_dir_all(cwd.join(".ssh")).unwrap();
        fs::write(cwd.join(".ssh/id_rsa"), "").unwrap();
        let words = |w: &str| match expand(w, Some(cwd), Some(cwd)) {
            Expansion::Words(words) => words,
            other => panic!("{w}: {other:?}"),
        };
        assert_eq!(expand("plain.txt", Some(cwd), None), Expansion::Plain);
        assert_eq!(words(".e?v"), [".env"]);
        assert_eq!(words("*.rs"), ["a.rs", "b.rs"]);
        assert_eq!(
            words("*"),
            ["a.rs", "b.rs"],
            "dot files are not matched by *"
        );
        assert_eq!(words(".e{n,x}v"), [".env", ".exv"]);
        assert_eq!(words("~/.ss?/id_r?a")[0], "~/.ssh/id_rsa");
        assert_eq!(words(".s*/*")[0], ".ssh/id_rsa");
        assert_eq!(words("*.md"), ["*.md"], "no match: the pattern stays");
        // What it could name is judged too, whatever is there now.
        let empty = tempfile::tempdir().unwrap();
        let could = |w: &str| match expand(w, Some(empty.path()), Some(empty.path())) {
            Expansion::Words(words) => words,
            other => panic!("{w}: {other:?}"),
        };
        assert_eq!(could("~/.?sh"), ["~/.?sh", "~/.ssh"]);
        assert_eq!(could(".e?v"), [".e?v", ".env"]);
        assert!(could("../../../../../../../../etc/sha*").contains(&"/etc/shadow".to_owned()));
        assert_eq!(could("*.md"), ["*.md"]);
        assert_eq!(expand("*.rs", None, None), Expansion::Unknown);
        assert_eq!(expand("{a,{b,c}}", Some(cwd), None), Expansion::Unknown);
    }

    #[test]
    fn brace_sequences_expand_as_bash_expands_them() {
        let words = |w: &str| match expand(w, None, None) {
            Expansion::Words(words) => words,
            other => panic!("{w}: {other:?}"),
        };
        assert_eq!(words(".{d..f}nv"), [".dnv", ".env", ".fnv"]);
        assert_eq!(words(".e{n..n}v"), [".env"]);
        assert_eq!(words(".gi{t..t}/config"), [".git/config"]);
        assert_eq!(words("f{3..1}"), ["f3", "f2", "f1"]);
        assert_eq!(words("{01..03}"), ["01", "02", "03"]);
        assert_eq!(words("{1..7..3}"), ["1", "4", "7"]);
        assert_eq!(words("{-1..1}"), ["-1", "0", "1"]);
        assert_eq!(expand("{1..100000000}", None, None), Expansion::Unknown);
        assert_eq!(
            words("{a..}"),
            ["{a..}"],
            "not a sequence: the word as written"
        );
        assert_eq!(words("{a..b}{1,2}"), ["a1", "a2", "b1", "b2"]);
    }
}
