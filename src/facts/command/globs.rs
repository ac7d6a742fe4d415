//! What a word with a glob (`*`, `?`, `[...]`) or a brace list (`{a,b}`)
//! becomes when the shell expands it. `cat .e?v` reads `.env`, and
//! `cat .e{n,x}v` reads `.env` whether or not `.exv` exists, so the gate
//! judges the words the shell will pass, not the pattern.
//!
//! The gate does not know whether a word was quoted, so it expands every
//! word that looks like a pattern: for a quoted one this can only judge
//! more strictly. What it cannot expand here (a pattern after a `cd`,
//! nested braces, too many matches) is opaque.

use std::path::Path;

use globset::GlobBuilder;

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
    word.find('{')
        .is_some_and(|open| word[open..].contains(',') && word[open..].contains('}'))
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
        match glob(&alternative, cwd, home) {
            Some(matches) if matches.is_empty() => words.push(alternative),
            Some(matches) => words.extend(matches),
            None => return Expansion::Unknown,
        }
        if words.len() > MAX_EXPANSIONS {
            return Expansion::Unknown;
        }
    }
    Expansion::Words(words)
}

/// Brace expansion of one (not nested) `{a,b,...}` group, repeated for
/// every group; `None` for nesting.
fn braces(word: &str) -> Option<Vec<String>> {
    let Some(open) = word.find('{') else {
        return Some(vec![word.to_owned()]);
    };
    let close = open + word[open..].find('}')?;
    let inner = &word[open + 1..close];
    if inner.contains('{') {
        return None;
    }
    if !inner.contains(',') {
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
    for choice in inner.split(',') {
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
        assert_eq!(words("~/.ss?/id_r?a"), ["~/.ssh/id_rsa"]);
        assert_eq!(words(".s*/*"), [".ssh/id_rsa"]);
        assert_eq!(words("*.md"), ["*.md"], "no match: the pattern stays");
        assert_eq!(expand("*.rs", None, None), Expansion::Unknown);
        assert_eq!(expand("{a,{b,c}}", Some(cwd), None), Expansion::Unknown);
    }
}
