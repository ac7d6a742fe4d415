//! The tools of a coding agent's own harness (Claude Code's Read, Edit,
//! Write, Glob, Grep, WebFetch, ...): portcullis never runs them, it decides
//! them before the harness does (`portcullis hook claude-code`). They are
//! tool entities of the server `harness`, with declared effects, so the
//! same policies, tiers, path rules and hard constraints apply to them as
//! to any tool.
//!
//! The list is closed: a harness tool not named here is unknown, and an
//! unknown tool is denied. Input schemas are loose on purpose (the harness
//! adds fields between releases, and a field portcullis does not read
//! changes nothing it decides on) but strict on the fields it does read.

use serde_json::{Value, json};

use super::spec::{Effect, PathArgument, PathRole, ToolId, ToolSpec};

/// The server id of the harness's tools.
pub const HARNESS_SERVER: &str = "harness";

/// The default of a path argument that the harness reads as "the shell's
/// folder" when it is absent (Glob's and Grep's `path`); the hook puts the
/// event's `cwd` in its place before the facts are computed.
pub const SHELL_FOLDER: &str = ".";

/// Longest path a harness argument may hold, in bytes (Linux PATH_MAX).
const MAX_PATH_LENGTH: u64 = 4096;

/// What the harness does with one of its tools, as far as portcullis
/// judges it.
struct Declared {
    name: &'static str,
    description: &'static str,
    effects: &'static [Effect],
    required_capabilities: &'static [&'static str],
    /// Path arguments: (name, role, presence).
    paths: &'static [(&'static str, PathRole, Presence)],
    /// Other string arguments that must be present.
    required_strings: &'static [&'static str],
}

/// Whether a path argument must be there, and what its absence means.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Presence {
    Required,
    /// Absent means the shell's folder.
    DefaultsToShellFolder,
    /// Absent means nothing is read through it.
    Optional,
}

const READ: &[Effect] = &[Effect::Read];
const EDIT: &[Effect] = &[Effect::Read, Effect::Write];

/// Every harness tool portcullis knows. Tools with no effects touch only
/// the conversation (a to-do list, a question to the user, a sub-agent
/// whose own tool calls come through the hook one by one).
const DECLARED: &[Declared] = &[
    Declared {
        name: "Read",
        description: "Reads a file.",
        effects: READ,
        required_capabilities: &["read"],
        paths: &[("file_path", PathRole::Read, Presence::Required)],
        required_strings: &[],
    },
    Declared {
        name: "Glob",
        description: "Lists files whose names match a pattern, below `path` (the shell's folder by default).",
        effects: READ,
        required_capabilities: &["read"],
        paths: &[
            ("pattern", PathRole::Read, Presence::Required),
            ("path", PathRole::Read, Presence::DefaultsToShellFolder),
        ],
        required_strings: &[],
    },
    Declared {
        name: "Grep",
        description: "Searches file contents below `path` (the shell's folder by default), optionally only in files matching `glob`.",
        effects: READ,
        required_capabilities: &["read"],
        paths: &[
            ("path", PathRole::Read, Presence::DefaultsToShellFolder),
            ("glob", PathRole::Read, Presence::Optional),
        ],
        required_strings: &["pattern"],
    },
    Declared {
        name: "LS",
        description: "Lists a folder.",
        effects: READ,
        required_capabilities: &["read"],
        paths: &[("path", PathRole::Read, Presence::Required)],
        required_strings: &[],
    },
    Declared {
        name: "Write",
        description: "Creates or replaces a file.",
        effects: &[Effect::Write],
        required_capabilities: &["write"],
        paths: &[("file_path", PathRole::Write, Presence::Required)],
        required_strings: &[],
    },
    Declared {
        name: "Edit",
        description: "Replaces text in a file.",
        effects: EDIT,
        required_capabilities: &["read", "write"],
        paths: &[("file_path", PathRole::ReadWrite, Presence::Required)],
        required_strings: &[],
    },
    Declared {
        name: "MultiEdit",
        description: "Makes several replacements in one file.",
        effects: EDIT,
        required_capabilities: &["read", "write"],
        paths: &[("file_path", PathRole::ReadWrite, Presence::Required)],
        required_strings: &[],
    },
    Declared {
        name: "NotebookEdit",
        description: "Changes a cell of a Jupyter notebook.",
        effects: EDIT,
        required_capabilities: &["read", "write"],
        paths: &[("notebook_path", PathRole::ReadWrite, Presence::Required)],
        required_strings: &[],
    },
    Declared {
        name: "DeleteFile",
        description: "Deletes a file (a `*** Delete File:` section of a Codex patch).",
        effects: &[Effect::Write, Effect::Destructive],
        required_capabilities: &["write", "destructive"],
        paths: &[("file_path", PathRole::Write, Presence::Required)],
        required_strings: &[],
    },
    Declared {
        name: "WebFetch",
        description: "Fetches a URL.",
        effects: &[Effect::Network],
        required_capabilities: &["network"],
        paths: &[],
        required_strings: &["url"],
    },
    Declared {
        name: "WebSearch",
        description: "Searches the web.",
        effects: &[Effect::Network],
        required_capabilities: &["network"],
        paths: &[],
        required_strings: &["query"],
    },
    Declared {
        name: "REPL",
        description: "Runs code in an interpreter: it spawns processes.",
        effects: &[Effect::Process],
        required_capabilities: &[],
        paths: &[],
        required_strings: &[],
    },
    Declared {
        name: "EnterWorktree",
        description: "Creates a git worktree and moves the session into it.",
        effects: &[Effect::Worktree],
        required_capabilities: &[],
        paths: &[],
        required_strings: &[],
    },
    Declared {
        name: "ExitWorktree",
        description: "Leaves, and may remove, a git worktree.",
        effects: &[Effect::Worktree],
        required_capabilities: &[],
        paths: &[],
        required_strings: &[],
    },
    conversation("TodoWrite", "Updates the session's to-do list."),
    conversation(
        "Task",
        "Starts a sub-agent; its own tool calls are decided one by one.",
    ),
    conversation(
        "Agent",
        "Starts a sub-agent; its own tool calls are decided one by one.",
    ),
    conversation("ExitPlanMode", "Leaves plan mode, asking the user."),
    conversation("EnterPlanMode", "Enters plan mode."),
    conversation("AskUserQuestion", "Asks the user a question."),
    conversation("TaskCreate", "Adds a task to the session's task list."),
    conversation("TaskGet", "Reads a task of the session's task list."),
    conversation("TaskUpdate", "Changes a task of the session's task list."),
    conversation("TaskList", "Lists the session's task list."),
    conversation(
        "TaskOutput",
        "Reads the output of a background command already decided.",
    ),
    conversation("TaskStop", "Stops a background command already decided."),
    conversation(
        "BashOutput",
        "Reads the output of a background command already decided.",
    ),
    conversation("KillShell", "Stops a background command already decided."),
    conversation(
        "Skill",
        "Loads a skill's instructions into the conversation.",
    ),
];

const fn conversation(name: &'static str, description: &'static str) -> Declared {
    Declared {
        name,
        description,
        effects: &[],
        required_capabilities: &[],
        paths: &[],
        required_strings: &[],
    }
}

/// The specs of every harness tool.
pub fn harness_specs() -> Vec<ToolSpec> {
    DECLARED.iter().map(spec).collect()
}

fn spec(declared: &Declared) -> ToolSpec {
    let mut properties = serde_json::Map::new();
    let mut required: Vec<&str> = Vec::new();
    for (name, _, presence) in declared.paths {
        properties.insert(
            (*name).to_owned(),
            json!({"type": "string", "minLength": 1, "maxLength": MAX_PATH_LENGTH}),
        );
        if *presence == Presence::Required {
            required.push(name);
        }
    }
    for name in declared.required_strings {
        properties.insert((*name).to_owned(), json!({"type": "string"}));
        required.push(name);
    }
    ToolSpec {
        id: ToolId::new(HARNESS_SERVER, declared.name),
        description: declared.description.to_owned(),
        effects: declared.effects.to_vec(),
        required_capabilities: declared
            .required_capabilities
            .iter()
            .map(|c| (*c).to_owned())
            .collect(),
        path_arguments: declared
            .paths
            .iter()
            .map(|(name, role, presence)| PathArgument {
                name: (*name).to_owned(),
                role: *role,
                default: (*presence == Presence::DefaultsToShellFolder)
                    .then(|| SHELL_FOLDER.to_owned()),
            })
            .collect(),
        input_schema: json!({
            "type": "object",
            "properties": Value::Object(properties),
            "required": required,
        }),
        output_schema: json!({"type": "object"}),
        redact: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Registry;

    #[test]
    fn every_harness_tool_registers_and_declares_its_paths_as_strings() {
        let registry = Registry::harness().unwrap();
        assert_eq!(registry.iter().count(), DECLARED.len());
        let write = registry.lookup("harness/Write").unwrap();
        assert!(
            write
                .arguments
                .check(&json!({"file_path": "/x", "content": "y", "new_field": 1}))
                .is_ok()
        );
        assert!(write.arguments.check(&json!({"content": "y"})).is_err());
        assert!(write.arguments.check(&json!({"file_path": 7})).is_err());
        assert!(!write.spec.read_only());
        assert!(
            registry
                .lookup("harness/TodoWrite")
                .unwrap()
                .spec
                .read_only()
        );
    }
}
