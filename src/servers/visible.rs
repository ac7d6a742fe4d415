//! Which arguments of a downstream tool policies may read, and so the log
//! holds in clear. None but its path arguments unless the team names them:
//! a downstream tool's arguments are file contents, messages and queries a
//! log must not keep, and what no policy reads, replay does not need. Every
//! other argument is recorded as its SHA-256 and left out of the tool's
//! Cedar type, as `redact` does for the ones a team names.

use serde::Deserialize;
use serde_json::Value;

use super::catalog::place_arguments;
use super::config::ServerConfig;

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

impl ServerConfig {
    /// The arguments of `tool` (dotted paths into `input_schema`) recorded
    /// only as their SHA-256 and never shown to policies: every one its
    /// entry, or else its server's default, does not make visible, except
    /// its path arguments (judged, and recorded, as paths), and every one
    /// it redacts.
    pub fn hashed_arguments(&self, tool: &str, input_schema: &Value) -> Vec<String> {
        let rule = self.rule_for(tool);
        let visible = rule
            .and_then(|rule| rule.visible.as_ref())
            .or(self.visible.as_ref());
        let mut shown: Vec<String> = match rule {
            Some(rule) => rule.paths.iter().map(|p| p.name.clone()).collect(),
            None => place_arguments(input_schema),
        };
        match visible {
            Some(Visible::All) => shown.clear(),
            Some(Visible::Listed(names)) => shown.extend(names.iter().cloned()),
            None => {}
        }
        let mut hashed = Vec::new();
        if !matches!(visible, Some(Visible::All)) {
            not_shown(input_schema, "", &shown, &mut hashed);
        }
        if let Some(rule) = rule {
            hashed.extend(rule.redact.iter().cloned());
        }
        hashed.sort();
        hashed.dedup();
        hashed
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::pdp::SourceFile;
    use crate::servers::ServersConfig;

    fn config(text: &str) -> ServersConfig {
        ServersConfig::parse(&SourceFile {
            logical: "policies/servers.toml".into(),
            display: "servers.toml".into(),
            text: text.to_owned(),
        })
        .unwrap()
    }

    fn schema() -> serde_json::Value {
        json!({"type": "object", "properties": {
            "path": {"type": "string"},
            "content": {"type": "string"},
            "mode": {"type": "string"},
            "auth": {"type": "object", "properties": {
                "user": {"type": "string"}, "token": {"type": "string"}}}
        }})
    }

    #[test]
    fn only_path_arguments_are_visible_unless_named() {
        let servers = config(
            "[servers.files]\ncommand = \"x\"\n[servers.files.tools.write]\neffects = [\"write\"]\npaths = { path = \"write\" }\n",
        );
        let hashed = servers.servers[0].hashed_arguments("write", &schema());
        assert_eq!(hashed, ["auth", "content", "mode"]);
    }

    #[test]
    fn an_undeclared_tool_shows_its_place_arguments_only() {
        let servers = config("[servers.files]\ncommand = \"x\"\n");
        let hashed = servers.servers[0].hashed_arguments("anything", &schema());
        assert_eq!(hashed, ["auth", "content", "mode"]);
    }

    #[test]
    fn a_tool_list_names_nested_arguments_and_wins_over_the_server_default() {
        let servers = config(
            "[servers.files]\ncommand = \"x\"\nvisible = \"all\"\n[servers.files.tools.write]\neffects = [\"write\"]\nvisible = [\"mode\", \"auth.user\"]\n",
        );
        let hashed = servers.servers[0].hashed_arguments("write", &schema());
        assert_eq!(hashed, ["auth.token", "content", "path"]);
    }

    #[test]
    fn a_server_default_of_all_shows_everything_but_what_is_redacted() {
        let servers = config(
            "[servers.files]\ncommand = \"x\"\nvisible = \"all\"\n[servers.files.tools.write]\neffects = [\"write\"]\nredact = [\"content\"]\n",
        );
        let hashed = servers.servers[0].hashed_arguments("write", &schema());
        assert_eq!(hashed, ["content"]);
        let other = servers.servers[0].hashed_arguments("other", &schema());
        assert!(other.is_empty(), "{other:?}");
    }

    #[test]
    fn a_wrong_visible_value_is_refused_with_its_place() {
        for (text, expected) in [
            (
                "[servers.a]\ncommand = \"x\"\nvisible = \"some\"\n",
                "give a list",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.t]\neffects = [\"none\"]\nvisible = [\"a..b\"]\n",
                "not an argument name",
            ),
            (
                "[servers.a]\ncommand = \"x\"\n[servers.a.tools.t]\neffects = [\"none\"]\nvisible = [\"k\"]\nredact = [\"k\"]\n",
                "both",
            ),
        ] {
            let problems = ServersConfig::parse(&SourceFile {
                logical: "policies/servers.toml".into(),
                display: "servers.toml".into(),
                text: text.to_owned(),
            })
            .unwrap_err();
            let said: Vec<String> = problems.iter().map(ToString::to_string).collect();
            let said = said.join("\n");
            assert!(said.contains(expected), "{text}: {said}");
        }
    }
}
