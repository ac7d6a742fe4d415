//! A harness tool's paths as the harness will resolve them. Claude Code
//! resolves a relative path from its shell's folder (the event's `cwd`),
//! not from the workspace root, and reads Glob's `pattern` and Grep's
//! `glob` below the tool's `path`; the facts must be computed on what the
//! tool will touch, so every path is made absolute here first.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::facts::{
    Dialect, MAX_WALK_ENTRIES, brace_alternatives, builtin_class_globs, secret_witness, walk_reach,
};
use crate::tools::{PathArgument, SHELL_FOLDER};

/// Arguments that are patterns below the tool's `path` argument.
const PATTERNS: [&str; 2] = ["pattern", "glob"];

/// The pattern that picks the files a tool reads the contents of (Grep's).
const CONTENT_FILTER: &str = "glob";

/// The folder a tool's patterns hang from.
const PATTERN_BASE: &str = "path";

/// Characters that make a path component a pattern.
const GLOB_CHARACTERS: [char; 4] = ['*', '?', '[', '{'];

/// The input with every declared path argument absolute: relative paths
/// joined to `cwd`, absent "shell's folder" arguments set to `cwd`, and
/// patterns joined to their base. A pattern that climbs (`..`) after its
/// first wildcard can reach anywhere, so it is judged as reading `/`.
pub fn judged_input(input: &Value, paths: &[PathArgument], cwd: &Path) -> Value {
    let mut judged = input.clone();
    let Some(object) = judged.as_object_mut() else {
        return judged;
    };
    let base = match object.get(PATTERN_BASE) {
        Some(Value::String(path)) => absolute(path, cwd),
        _ => cwd.to_owned(),
    };
    for argument in paths {
        let value = match object.get(&argument.name) {
            // Grep's `glob` chooses the files whose contents it reads;
            // Glob's `pattern` only lists names.
            Some(Value::String(raw)) if argument.name == CONTENT_FILTER => {
                secret_it_matches(raw, &base)
                    .unwrap_or_else(|| pattern_reach(&absolute(raw, &base)))
            }
            Some(Value::String(raw)) if PATTERNS.contains(&argument.name.as_str()) => {
                pattern_reach(&absolute(raw, &base))
            }
            Some(Value::String(raw)) => absolute(raw, cwd),
            // Not a string: the input schema refuses it, unchanged.
            Some(_) => continue,
            None if argument.default.as_deref() == Some(SHELL_FOLDER) => cwd.to_owned(),
            None => continue,
        };
        object.insert(
            argument.name.clone(),
            Value::String(value.to_string_lossy().into_owned()),
        );
    }
    // A content search reads every file below its folder, which a folder's
    // own path cannot tell: what it would read is looked through, as the
    // command gate looks through `rg PATTERN FOLDER`, and a file that must
    // be judged apart stands in for the filter.
    let searches_contents = paths.iter().any(|argument| argument.name == CONTENT_FILTER);
    if searches_contents {
        let glob = input.get(CONTENT_FILTER).and_then(Value::as_str);
        if let Some(witness) = content_witness(&base, glob) {
            object.insert(
                CONTENT_FILTER.to_owned(),
                Value::String(witness.to_string_lossy().into_owned()),
            );
        }
    }
    judged
}

/// What a content search below `base` (narrowed by `glob`, as ripgrep's
/// `--glob` narrows it) reads that must be judged apart from the folder:
/// the first file a built-in secret glob names (a link judged by what it
/// points at too), else the first file with another name (which may be a
/// secret's), else `/` when the tree is too large to look through (it may
/// hold anything). The walk is ripgrep's: hidden files and what ignore
/// files exclude are left out; links are followed, which is only stricter.
fn content_witness(base: &Path, glob: Option<&str>) -> Option<PathBuf> {
    content_witness_within(base, glob, MAX_WALK_ENTRIES)
}

fn content_witness_within(base: &Path, glob: Option<&str>, budget: usize) -> Option<PathBuf> {
    if !base.is_dir() {
        return None;
    }
    let Some(secrets) = builtin_secrets() else {
        return Some(PathBuf::from("/"));
    };
    let globs: Vec<String> = glob.map(str::to_owned).into_iter().collect();
    let mut secret = None;
    let mut budget = budget;
    let reached = walk_reach(
        &[base.to_path_buf()],
        false,
        false,
        &globs,
        &mut |path| {
            if secret.is_none() && secrets.is_match(path) {
                secret = Some(PathBuf::from(path));
            }
        },
        &mut budget,
    );
    secret
        .or(reached.hardlinked)
        .or_else(|| (!reached.whole).then(|| PathBuf::from("/")))
}

/// A secret a pattern can name, judged in its stead: the pattern's brace
/// lists are expanded (`{.env,x}`), and each alternative with a wildcard
/// is matched name by name against the built-in secret globs (`.e*` and
/// `.en?` can name `.env`; `facts::secret_witness`), so a pattern is as
/// secret as what it can match. The built-in secret globs only: a team's
/// own are judged on the pattern as written.
fn secret_it_matches(raw: &str, base: &Path) -> Option<PathBuf> {
    let alternatives = brace_alternatives(raw).unwrap_or_else(|| vec![raw.to_owned()]);
    let secrets = builtin_secrets()?;
    alternatives.iter().find_map(|alternative| {
        let candidate = absolute(alternative, base);
        if alternative.contains(GLOB_CHARACTERS) {
            secret_witness(&candidate.to_string_lossy(), Dialect::Glob).map(PathBuf::from)
        } else {
            secrets.is_match(&candidate).then_some(candidate)
        }
    })
}

/// The built-in secret globs as one set: made once.
fn builtin_secrets() -> Option<&'static globset::GlobSet> {
    static SET: std::sync::OnceLock<Option<globset::GlobSet>> = std::sync::OnceLock::new();
    SET.get_or_init(|| {
        let mut set = globset::GlobSetBuilder::new();
        for glob in builtin_class_globs("secrets") {
            set.add(
                globset::GlobBuilder::new(glob)
                    .case_insensitive(true)
                    .literal_separator(true)
                    .build()
                    .ok()?,
            );
        }
        set.build().ok()
    })
    .as_ref()
}

fn absolute(raw: &str, from: &Path) -> PathBuf {
    // `~` is the home folder, which path resolution expands itself.
    if raw.starts_with('~') || raw.is_empty() {
        return PathBuf::from(raw);
    }
    from.join(raw)
}

/// Where a pattern can reach: itself (path classes see its names), or `/`
/// when it can climb where no fact can follow: a `..` after a wildcard, or
/// a `..` a brace list spells out (`{..,src}`: braces are expanded as text
/// before anything is matched, so they can say `..` anywhere). A wildcard
/// or a character class never matches `..` itself: directory listings do
/// not hold it.
fn pattern_reach(pattern: &Path) -> PathBuf {
    let mut wild = false;
    for component in pattern.components() {
        match component {
            Component::Normal(name) => {
                let name = name.to_string_lossy();
                wild |= name.contains(GLOB_CHARACTERS);
                if wild && name.contains("..") {
                    return PathBuf::from("/");
                }
            }
            Component::ParentDir if wild => return PathBuf::from("/"),
            _ => {}
        }
    }
    pattern.to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::Registry;

    fn judged(tool: &str, input: Value) -> Value {
        let registry = Registry::harness().unwrap();
        let spec = &registry.lookup(&format!("harness/{tool}")).unwrap().spec;
        judged_input(&input, &spec.path_arguments, Path::new("/ws/sub"))
    }

    #[test]
    fn relative_paths_are_from_the_shell_folder() {
        let j = judged("Read", json!({"file_path": "../x.txt", "limit": 3}));
        assert_eq!(j, json!({"file_path": "/ws/sub/../x.txt", "limit": 3}));
        let j = judged("Write", json!({"file_path": "/etc/passwd", "content": ""}));
        assert_eq!(j["file_path"], "/etc/passwd");
    }

    #[test]
    fn an_absent_search_folder_is_the_shell_folder() {
        let j = judged("Grep", json!({"pattern": "TODO"}));
        assert_eq!(j, json!({"pattern": "TODO", "path": "/ws/sub"}));
        let j = judged(
            "Grep",
            json!({"pattern": "TODO", "path": "lib", "glob": "*.env"}),
        );
        assert_eq!(j["glob"], "/ws/sub/lib/.env", "`*.env` can read `.env`");
    }

    #[test]
    fn patterns_hang_from_their_folder_and_climbing_after_a_wildcard_reaches_everything() {
        assert_eq!(
            judged("Glob", json!({"pattern": "**/*.rs"}))["pattern"],
            "/ws/sub/**/*.rs"
        );
        assert_eq!(
            judged("Glob", json!({"pattern": "*.rs", "path": "/srv"}))["pattern"],
            "/srv/*.rs"
        );
        assert_eq!(
            judged("Glob", json!({"pattern": "/etc/*"}))["pattern"],
            "/etc/*"
        );
        assert_eq!(
            judged("Glob", json!({"pattern": "*/../../../etc/*"}))["pattern"],
            "/"
        );
        assert_eq!(
            judged("Glob", json!({"pattern": "../*.rs"}))["pattern"],
            "/ws/sub/../*.rs"
        );
    }

    #[test]
    fn wrong_types_are_left_for_the_schema_to_refuse() {
        assert_eq!(judged("Read", json!({"file_path": 7}))["file_path"], 7);
    }

    #[test]
    fn a_pattern_is_judged_by_the_secret_it_can_match() {
        for glob in [
            ".env", "{.env,x}", ".e*", ".en?", "*.pem", "{a,.ssh}", "ID_RSA*",
        ] {
            let j = judged(
                "Grep",
                json!({"pattern": "TODO", "path": "lib", "glob": glob}),
            );
            let judged_as = j["glob"].as_str().unwrap();
            assert!(
                judged_as.starts_with("/ws/sub/lib/") && !judged_as.contains(['*', '?', '{']),
                "{glob}: {judged_as}"
            );
        }
        let j = judged("Grep", json!({"pattern": "TODO", "glob": "*.rs"}));
        assert_eq!(j["glob"], "/ws/sub/*.rs");
        let j = judged("Grep", json!({"pattern": "TODO", "glob": "*"}));
        assert_eq!(j["glob"], "/ws/sub/*");
        assert_eq!(
            judged("Glob", json!({"pattern": ".e*"}))["pattern"],
            "/ws/sub/.e*",
            "Glob lists names"
        );
    }

    #[test]
    fn a_content_search_is_judged_by_what_it_would_read() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        std::fs::create_dir_all(base.join("src")).unwrap();
        std::fs::write(base.join("src/main.rs"), "fn main() {}").unwrap();
        std::fs::write(base.join(".env"), "KEY=1").unwrap();
        let witness = |glob: Option<&str>| content_witness_within(base, glob, 100);
        assert_eq!(witness(None), None, "ripgrep leaves hidden files out");
        std::fs::write(base.join("src/id_rsa"), "k").unwrap();
        assert_eq!(witness(None), Some(base.join("src/id_rsa")));
        assert_eq!(witness(Some("*.rs")), None, "the glob narrows the walk");
        std::fs::remove_file(base.join("src/id_rsa")).unwrap();
        std::os::unix::fs::symlink("../.env", base.join("src/config")).unwrap();
        assert!(
            witness(None).is_some_and(|w| w.ends_with(".env")),
            "{:?}",
            witness(None)
        );
        std::fs::remove_file(base.join("src/config")).unwrap();
        std::fs::hard_link(base.join("src/main.rs"), base.join("src/copy.rs")).unwrap();
        assert!(witness(None).is_some_and(|w| w.starts_with(base.join("src"))));
        std::fs::remove_file(base.join("src/copy.rs")).unwrap();
        assert_eq!(witness(None), None);
        assert_eq!(
            content_witness_within(base, None, 1),
            Some(PathBuf::from("/")),
            "a tree too large to look through may hold anything"
        );
        assert_eq!(
            content_witness_within(&base.join("src/main.rs"), None, 100),
            None
        );
    }
}
