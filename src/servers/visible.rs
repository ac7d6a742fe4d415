//! Which arguments of a downstream tool policies may read, and so the log
//! holds in clear. None but its path arguments unless the team names them:
//! a downstream tool's arguments are file contents, messages and queries a
//! log must not keep, and what no policy reads, replay does not need. Every
//! other argument is recorded as its SHA-256 and left out of the tool's
//! Cedar type, as `redact` does for the ones a team names.

use serde::Deserialize;
use serde_json::Value;

/// The arguments a tool shows policies, as its `servers.toml` entry (or its
/// server's default) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visible {
    /// Every argument: a team's choice made on purpose, `visible = "all"`.
    All,
    /// The arguments named, dotted for nested ones.
    Listed(Vec<String>),
}

/// What the file may say: a list of names, or the word `all`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawVisible {
    Word(String),
    List(Vec<String>),
}

impl RawVisible {
    /// The visible arguments `where_` declares, or why the value is wrong.
    pub(super) fn check(self, where_: &str) -> Result<Visible, String> {
        match self {
            RawVisible::Word(word) if word == "all" => Ok(Visible::All),
            RawVisible::Word(word) => Err(format!(
                "{where_}: visible = \"{word}\": give a list of argument names, or \"all\""
            )),
            RawVisible::List(names) => {
                if let Some(bad) = names.iter().find(|name| name.split('.').any(str::is_empty)) {
                    return Err(format!(
                        "{where_}: `{bad}` in `visible` is not an argument name (dotted for a nested one)"
                    ));
                }
                Ok(Visible::Listed(names))
            }
        }
    }
}

/// The arguments (dotted paths into `input_schema`) recorded only as their
/// SHA-256 and never shown to policies: every one neither `shown` (the
/// path arguments) nor made visible by `visible`, and every one `redact`ed.
pub fn hashed_arguments(
    input_schema: &Value,
    visible: Option<&Visible>,
    mut shown: Vec<String>,
    redact: &[String],
) -> Vec<String> {
    let mut hashed = Vec::new();
    match visible {
        Some(Visible::All) => {}
        Some(Visible::Listed(names)) => {
            shown.extend(names.iter().cloned());
            not_shown(input_schema, "", &shown, &mut hashed);
        }
        None => not_shown(input_schema, "", &shown, &mut hashed),
    }
    hashed.extend(redact.iter().cloned());
    hashed.sort();
    hashed.dedup();
    hashed
}

/// Collects the properties of `schema` under `prefix` that `shown` neither
/// names nor holds a part of; one holding a part is looked into.
fn not_shown(schema: &Value, prefix: &str, shown: &[String], hashed: &mut Vec<String>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        let named = shown
            .iter()
            .any(|s| *s == path || path.starts_with(&format!("{s}.")));
        if named {
            continue;
        }
        let holds_part = shown.iter().any(|s| s.starts_with(&format!("{path}.")));
        if holds_part && property.get("properties").is_some() {
            not_shown(property, &path, shown, hashed);
        } else {
            hashed.push(path);
        }
    }
}
