//! The facts of one tool call: every path argument resolved against the
//! root and classified, folded into the `ToolFacts` policies test. Pure
//! apart from reading the filesystem to resolve paths; it never decides and
//! never takes a fact from the client.
//!
//! Only its tests import from `tools`, a floor above: they check the facts
//! of the real built-in tool declarations, which the code itself does not
//! need.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::path_argument::{PathArgument, path_values};
use super::path_classes::PathClasses;
use super::paths::{PathError, ResolvedPath, Root, resolve};
use super::tool_input::ToolInput;

/// The path class of a regular file with more than one name. Such a file
/// is judged as if it were outside the root; a team that trusts its
/// hardlinks can let a tier read them by naming this class.
pub const HARDLINKED: &str = "hardlinked";

/// The path class of a path the filesystem would not let portcullis
/// resolve; such a path is judged as outside the root.
pub const UNRESOLVABLE: &str = "unresolvable";

/// How the request reached portcullis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    Cli,
    Stdio,
    Http,
    /// A coding agent's harness asked, through `portcullis hook`, before
    /// running one of its own tools.
    Hook,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Cli => "cli",
            Transport::Stdio => "stdio",
            Transport::Http => "http",
            Transport::Hook => "hook",
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The facts of one tool call that become `context` (schema type
/// `Portcullis::ToolFacts`), less the approval fields, which the decision
/// point sets itself in each of its passes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolFacts {
    pub transport: Transport,
    pub reads_inside_root: bool,
    pub writes_inside_root: bool,
    pub touches_vcs_metadata: bool,
    pub writes_vcs_metadata: bool,
    pub path_classes: BTreeSet<String>,
    /// The typed arguments policies see as `context.input`, for a call of
    /// a tool the set types; absent for discovery (no arguments yet) and
    /// in records from before per-tool actions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<ToolInput>,
}

impl ToolFacts {
    /// The facts of a call with no paths: what `discover_tool` is decided on,
    /// since a listing has no arguments yet.
    pub fn without_paths(transport: Transport) -> Self {
        Self {
            transport,
            reads_inside_root: true,
            writes_inside_root: true,
            touches_vcs_metadata: false,
            writes_vcs_metadata: false,
            path_classes: BTreeSet::new(),
            input: None,
        }
    }
}

/// The facts of a call, and the resolved paths the tool must then operate
/// on (so it acts on exactly the paths the decision was made on).
#[derive(Debug, Clone)]
pub struct ToolCallFacts {
    pub facts: ToolFacts,
    pub paths: Vec<(String, ResolvedPath)>,
}

#[derive(Debug, Error)]
#[error("argument `{argument}`: {source}")]
pub struct CallFactsError {
    pub argument: String,
    #[source]
    pub source: PathError,
}

/// Computes the facts of a call whose arguments already passed the tool's
/// input schema.
pub fn tool_call_facts(
    path_arguments: &[PathArgument],
    arguments: &serde_json::Value,
    root: &Root,
    classes: &PathClasses,
    transport: Transport,
) -> Result<ToolCallFacts, CallFactsError> {
    let mut facts = ToolFacts::without_paths(transport);
    let mut paths = Vec::with_capacity(path_arguments.len());
    for argument in path_arguments {
        let given = arguments
            .get(&argument.name)
            .map(path_values)
            .unwrap_or_default();
        // The schema declares path arguments as strings or lists of them;
        // anything else here is absent, and only a declared default stands
        // in for it.
        let raws: Vec<&str> = match (given.is_empty(), &argument.default) {
            (false, _) => given,
            (true, Some(default)) => vec![default.as_str()],
            (true, None) => continue,
        };
        for raw in raws {
            let resolved = match resolve(root, raw) {
                Ok(resolved) => resolved,
                Err(source) if source.is_input() => {
                    return Err(CallFactsError {
                        argument: argument.name.clone(),
                        source,
                    });
                }
                Err(source) => {
                    // The same answer whether the place exists or not: no
                    // existence oracle, and no outside path in any message.
                    tracing::debug!(argument = %argument.name, error = %source, "a path that cannot be resolved is judged as outside the root");
                    facts.path_classes.insert(UNRESOLVABLE.to_owned());
                    ResolvedPath::unresolvable(root, raw)
                }
            };
            if argument.role.reads() {
                facts.reads_inside_root &= resolved.inside_root;
            }
            if argument.role.writes() {
                facts.writes_inside_root &= resolved.inside_root;
                facts.writes_vcs_metadata |= resolved.in_vcs_metadata;
            }
            facts.touches_vcs_metadata |= resolved.in_vcs_metadata;
            if resolved.hardlinked {
                facts.path_classes.insert(HARDLINKED.to_owned());
            }
            classes.classify_into(&resolved.canonical, &mut facts.path_classes);
            classes.classify_into(&resolved.requested, &mut facts.path_classes);
            if let Some(relative) = resolved.relative(root) {
                classes.classify_into(relative, &mut facts.path_classes);
            }
            paths.push((argument.name.clone(), resolved));
        }
    }
    Ok(ToolCallFacts { facts, paths })
}

/// The arguments a downstream server is sent: each path argument the
/// decision resolved inside the root, as the canonical path it resolved
/// (symlinks followed, `..` applied), not the string the client wrote, so
/// the server acts on the place that was decided about rather than on
/// whatever the string leads to when it resolves it again. Lists keep
/// their order; paths outside the root (refused anyway) and arguments that
/// were only defaulted stay as they were.
pub fn forwarded_arguments(
    mut arguments: serde_json::Value,
    paths: &[(String, ResolvedPath)],
) -> serde_json::Value {
    use serde_json::Value;
    let Some(fields) = arguments.as_object_mut() else {
        return arguments;
    };
    let canonical = |resolved: &ResolvedPath| {
        resolved
            .inside_root
            .then(|| resolved.canonical.to_str().map(str::to_owned))
            .flatten()
    };
    for (name, value) in fields.iter_mut() {
        let mut resolved = paths.iter().filter(|(n, _)| n == name).map(|(_, r)| r);
        match value {
            Value::String(text) => {
                if let Some(path) = resolved.next().and_then(canonical) {
                    *text = path;
                }
            }
            Value::Array(items) => {
                for item in items.iter_mut().filter(|item| item.is_string()) {
                    if let Some(path) = resolved.next().and_then(canonical) {
                        *item = Value::String(path);
                    }
                }
            }
            _ => {}
        }
    }
    arguments
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use serde_json::json;

    use super::*;
    use crate::tools::Registry;

    const CLASSES: &str = "[secrets]\nglobs = [\"**/.env\", \"**/*.pem\"]\n";

    fn facts(
        tool: &str,
        args: serde_json::Value,
        setup: impl FnOnce(&std::path::Path),
    ) -> ToolFacts {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir_all(ws.join(".git")).unwrap();
        setup(&ws);
        let root = Root::new(&ws).unwrap();
        let registry = Registry::builtin().unwrap();
        let spec = &registry.lookup(tool).unwrap().spec;
        let classes = PathClasses::parse_recorded("c.toml", CLASSES).unwrap();
        tool_call_facts(&spec.path_arguments, &args, &root, &classes, Transport::Cli)
            .unwrap()
            .facts
    }

    #[test]
    fn a_read_inside_the_root_has_clean_facts() {
        let f = facts("read_file", json!({"path": "a.txt"}), |_| {});
        assert_eq!(f, ToolFacts::without_paths(Transport::Cli));
    }

    #[test]
    fn a_read_outside_the_root_is_not_a_write_outside_it() {
        let f = facts("read_file", json!({"path": "/etc/hostname"}), |_| {});
        assert!(!f.reads_inside_root);
        assert!(f.writes_inside_root);
    }

    #[test]
    fn a_write_through_an_escaping_symlink_is_outside() {
        let f = facts(
            "write_file",
            json!({"path": "out/x", "content": ""}),
            |ws| {
                symlink("/tmp", ws.join("out")).unwrap();
            },
        );
        assert!(!f.writes_inside_root);
        assert!(f.reads_inside_root);
    }

    #[test]
    fn a_write_into_git_writes_vcs_metadata() {
        let f = facts(
            "write_file",
            json!({"path": ".git/hooks/post-checkout", "content": ""}),
            |_| {},
        );
        assert!(f.writes_vcs_metadata && f.touches_vcs_metadata);
    }

    #[test]
    fn a_read_of_git_touches_but_does_not_write_vcs_metadata() {
        let f = facts("read_file", json!({"path": ".git/config"}), |_| {});
        assert!(f.touches_vcs_metadata && !f.writes_vcs_metadata);
    }

    #[test]
    fn an_edit_both_reads_and_writes() {
        let f = facts(
            "edit_file",
            json!({"path": "../elsewhere", "old_string": "a", "new_string": "b"}),
            |_| {},
        );
        assert!(!f.reads_inside_root && !f.writes_inside_root);
    }

    #[test]
    fn classes_come_from_the_requested_and_the_resolved_path() {
        let f = facts("read_file", json!({"path": "config/.env"}), |_| {});
        assert_eq!(f.path_classes, BTreeSet::from(["secrets".to_owned()]));
        // A harmless name that leads to a secret is a secret.
        let f = facts("read_file", json!({"path": "notes.txt"}), |ws| {
            fs::write(ws.join("server.pem"), "k").unwrap();
            symlink("server.pem", ws.join("notes.txt")).unwrap();
        });
        assert_eq!(f.path_classes, BTreeSet::from(["secrets".to_owned()]));
        // A secret name that leads elsewhere is still a secret.
        let f = facts("read_file", json!({"path": ".env"}), |ws| {
            fs::write(ws.join("plain.txt"), "k").unwrap();
            symlink("plain.txt", ws.join(".env")).unwrap();
        });
        assert_eq!(f.path_classes, BTreeSet::from(["secrets".to_owned()]));
    }

    #[test]
    fn an_absent_path_with_a_default_is_the_root() {
        let f = facts("search", json!({"pattern": "x"}), |_| {});
        assert!(f.reads_inside_root);
    }

    #[test]
    fn a_bad_path_names_its_argument() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path()).unwrap();
        let registry = Registry::builtin().unwrap();
        let spec = &registry.lookup("read_file").unwrap().spec;
        let classes = PathClasses::parse_recorded("c.toml", CLASSES).unwrap();
        let err = tool_call_facts(
            &spec.path_arguments,
            &json!({"path": "a\0b"}),
            &root,
            &classes,
            Transport::Cli,
        )
        .unwrap_err();
        assert_eq!(err.argument, "path");
        assert!(matches!(err.source, PathError::Nul));
    }
}

#[cfg(test)]
mod error_texts {
    use std::fs;
    use std::os::unix::fs::symlink;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::tools::Registry;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Whatever path outside the root a client names (existing or not,
        /// a loop, a name too long for the filesystem), the answer is the
        /// same kind and no message carries any part of it.
        #[test]
        fn no_message_echoes_a_path_outside_the_root(
            name in "[A-Za-z0-9_]{3,12}",
            long in 256usize..600,
            shape in 0usize..5,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let ws = dir.path().join("ws");
            let outside = dir.path().join(format!("out_{name}"));
            fs::create_dir_all(&ws).unwrap();
            fs::create_dir_all(outside.join("present")).unwrap();
            symlink(outside.join("loop_b"), outside.join("loop_a")).unwrap();
            symlink(outside.join("loop_a"), outside.join("loop_b")).unwrap();
            let root = Root::new(&ws).unwrap();
            let raw = match shape {
                0 => format!("{}/present/{name}", outside.display()),
                1 => format!("{}/missing_{name}/x", outside.display()),
                2 => format!("{}/loop_a/{name}", outside.display()),
                3 => format!("../out_{name}/{}", "A".repeat(long)),
                _ => format!("{}/present/{}/{name}", outside.display(), "B".repeat(long)),
            };
            let registry = Registry::builtin().unwrap();
            let classes = PathClasses::parse_recorded("c.toml", "[secrets]\nglobs = [\"**/.env\"]\n").unwrap();
            for tool in ["read_file", "write_file"] {
                let spec = &registry.lookup(tool).unwrap().spec;
                let args = json!({"path": raw, "content": "x"});
                match tool_call_facts(&spec.path_arguments, &args, &root, &classes, Transport::Cli) {
                    Ok(call) => {
                        prop_assert!(!call.facts.reads_inside_root || !call.facts.writes_inside_root);
                        prop_assert!(!call.facts.writes_inside_root || tool == "read_file");
                    }
                    Err(err) => {
                        let text = err.to_string();
                        for part in [name.as_str(), "out_", "present", "missing_", "loop_", "AAA", "BBB"] {
                            prop_assert!(!text.contains(part), "{text:?} holds {part:?}");
                        }
                        prop_assert!(!text.contains(&dir.path().display().to_string()));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod forwarding {
    use std::fs;
    use std::os::unix::fs::symlink;

    use serde_json::json;

    use super::*;
    use crate::facts::{PathArgument, PathRole};

    #[test]
    fn a_downstream_gets_the_canonical_paths_the_decision_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let ws = fs::canonicalize(dir.path()).unwrap().join("ws");
        fs::create_dir_all(ws.join("docs")).unwrap();
        fs::write(ws.join("docs/a.md"), "a").unwrap();
        symlink(ws.join("docs"), ws.join("link")).unwrap();
        let root = Root::new(&ws).unwrap();
        let classes = PathClasses::parse_recorded("c.toml", "[x]\nglobs = [\"**/x\"]\n").unwrap();
        let argument = |name: &str| PathArgument {
            name: name.into(),
            role: PathRole::Read,
            default: None,
        };
        let arguments = [argument("path"), argument("paths")];
        let given = json!({
            "path": "link/./a.md",
            "paths": ["docs/../docs/a.md", 7, "/etc/hostname"],
            "depth": 2
        });
        let call = tool_call_facts(&arguments, &given, &root, &classes, Transport::Cli).unwrap();
        let sent = forwarded_arguments(given, &call.paths);
        let a = ws.join("docs/a.md").display().to_string();
        assert_eq!(
            sent,
            json!({"path": a, "paths": [a, 7, "/etc/hostname"], "depth": 2})
        );
    }
}
