//! `hook install claude-code`: the hook entry merged into a Claude Code
//! settings file. Other hooks and settings are kept; a file that is not a
//! JSON object is refused, never overwritten; an earlier portcullis entry is
//! updated in place, so installing twice leaves one entry.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use thiserror::Error;

use crate::atomic_file::{self, Mode};

/// How long Claude Code lets the hook run, in seconds. The hook answers in
/// milliseconds; a hook Claude Code kills is "no opinion", so the margin is
/// wide.
pub const HOOK_TIMEOUT_SECS: u64 = 30;

/// What every portcullis hook command line holds after the binary's path,
/// before any of its options: how an earlier entry is recognised.
pub const CLAUDE_CODE_SUFFIX: &str = " hook claude-code";

/// What `hook install --no-confine` adds after it.
pub const NO_CONFINE_FLAG: &str = " --no-confine";

/// Whether a hook command is one `hook install` wrote: the binary, `hook
/// claude-code`, then nothing but options (`--no-confine`, `--socket`).
fn is_ours(command: &str) -> bool {
    command
        .find(CLAUDE_CODE_SUFFIX)
        .map(|at| &command[at + CLAUDE_CODE_SUFFIX.len()..])
        .is_some_and(|options| options.is_empty() || options.starts_with(" --"))
}

#[derive(Debug, Error)]
pub enum InstallError {
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path} is not valid JSON ({message}); fix it or move it away, nothing was changed")]
    NotJson { path: PathBuf, message: String },
    #[error("{path}: `{field}` is not {expected}; nothing was changed")]
    Shape {
        path: PathBuf,
        field: &'static str,
        expected: &'static str,
    },
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// What the install did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Installed {
    Added,
    /// An earlier portcullis entry now runs this command.
    Updated,
    AlreadyThere,
}

/// Merges a `PreToolUse` hook running `command` for every tool (`*`) into
/// the settings file at `path`, creating it (and its folder) if needed.
pub fn install_claude_code(path: &Path, command: &str) -> Result<Installed, InstallError> {
    let mut settings = read_settings(path)?;
    let shape = |field, expected| InstallError::Shape {
        path: path.to_owned(),
        field,
        expected,
    };
    let root = settings
        .as_object_mut()
        .ok_or_else(|| shape("(the file)", "a JSON object"))?;
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| shape("hooks", "an object"))?;
    let groups = hooks
        .entry("PreToolUse")
        .or_insert_with(|| Value::Array(Vec::new()))
        .as_array_mut()
        .ok_or_else(|| shape("hooks.PreToolUse", "an array"))?;
    let ours = groups.iter_mut().find_map(|group| {
        group
            .get_mut("hooks")?
            .as_array_mut()?
            .iter_mut()
            .find(|hook| {
                hook.get("command")
                    .and_then(Value::as_str)
                    .is_some_and(is_ours)
            })
    });
    let installed = match ours {
        Some(hook) if hook.get("command").and_then(Value::as_str) == Some(command) => {
            Installed::AlreadyThere
        }
        Some(hook) => {
            hook["command"] = Value::String(command.to_owned());
            Installed::Updated
        }
        None => {
            groups.push(json!({
                "matcher": "*",
                "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_SECS}]
            }));
            Installed::Added
        }
    };
    if installed != Installed::AlreadyThere {
        write_settings(path, &settings)?;
    }
    Ok(installed)
}

fn read_settings(path: &Path) -> Result<Value, InstallError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) if err.kind() == io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(InstallError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    serde_json::from_str(&text).map_err(|err| InstallError::NotJson {
        path: path.to_owned(),
        message: err.to_string(),
    })
}

fn write_settings(path: &Path, settings: &Value) -> Result<(), InstallError> {
    let write_error = |source| InstallError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(write_error)?;
    }
    let mut text =
        serde_json::to_string_pretty(settings).map_err(|e| write_error(io::Error::other(e)))?;
    text.push('\n');
    atomic_file::replace(path, text.as_bytes(), Mode::AsBefore).map_err(write_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMAND: &str = "/opt/bin/portcullis hook claude-code";

    #[test]
    fn installing_merges_keeps_other_hooks_and_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".claude/settings.json");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let before = json!({
            "model": "opus",
            "hooks": {
                "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}],
                "PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "fmt"}]}]
            }
        });
        fs::write(&path, before.to_string()).unwrap();
        assert_eq!(
            install_claude_code(&path, COMMAND).unwrap(),
            Installed::Added
        );
        assert_eq!(
            install_claude_code(&path, COMMAND).unwrap(),
            Installed::AlreadyThere
        );
        let after: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(after["model"], "opus");
        assert_eq!(
            after["hooks"]["PostToolUse"],
            before["hooks"]["PostToolUse"]
        );
        let pre = after["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0], before["hooks"]["PreToolUse"][0]);
        assert_eq!(pre[1]["matcher"], "*");
        assert_eq!(pre[1]["hooks"][0]["command"], COMMAND);

        let moved = "/usr/local/bin/portcullis hook claude-code";
        assert_eq!(
            install_claude_code(&path, moved).unwrap(),
            Installed::Updated
        );
        let after: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(after["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
        assert_eq!(
            after["hooks"]["PreToolUse"][1]["hooks"][0]["command"],
            moved
        );
    }

    #[test]
    fn an_earlier_entry_with_options_is_updated_and_others_are_not_taken_for_ours() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        let socket =
            "/opt/bin/portcullis hook claude-code --no-confine --socket '/run/user/1/h.sock'";
        install_claude_code(&path, socket).unwrap();
        assert_eq!(
            install_claude_code(&path, COMMAND).unwrap(),
            Installed::Updated
        );
        let after: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        let pre = after["hooks"]["PreToolUse"].as_array().unwrap();
        assert_eq!(pre.len(), 1);
        assert_eq!(pre[0]["hooks"][0]["command"], COMMAND);
        for theirs in [
            "/opt/bin/portcullis hook claude-code-audit",
            "/opt/bin/portcullis hook claude-code.sh",
            "./guard.sh",
        ] {
            assert!(!is_ours(theirs), "{theirs}");
        }
        assert!(is_ours(socket));
        assert!(is_ours(COMMAND));
    }

    #[test]
    fn a_missing_file_and_folder_are_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p/.claude/settings.json");
        assert_eq!(
            install_claude_code(&path, COMMAND).unwrap(),
            Installed::Added
        );
        let after: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            after["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"],
            HOOK_TIMEOUT_SECS
        );
    }

    #[test]
    fn a_file_of_another_shape_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        for text in [
            "{ not json",
            "[1, 2]",
            r#"{"hooks": []}"#,
            r#"{"hooks": {"PreToolUse": {}}}"#,
        ] {
            fs::write(&path, text).unwrap();
            assert!(install_claude_code(&path, COMMAND).is_err(), "{text}");
            assert_eq!(fs::read_to_string(&path).unwrap(), text);
        }
    }
}
