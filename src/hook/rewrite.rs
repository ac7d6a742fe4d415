//! A shell command the hook lets through, handed back to the harness as a
//! `portcullis exec` of the same text: the harness's own shell tool then
//! runs it confined by the kernel, under the same root, policies and log.
//! An asked command carries an approval of that exact text, so the human's
//! yes in the harness is the only one needed.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::approval::{CommandApprovalError, CommandApprovals, command_digest};
use crate::facts::shell_quote;

pub struct CommandRewrite {
    /// `portcullis exec` with the flags that give it the hook's root,
    /// policies, token store and audit log.
    pub exec: Vec<String>,
    /// Issues the approval an asked command carries.
    pub approvals: CommandApprovals,
    /// The client the hook authenticated: the approval is theirs.
    pub client: String,
    /// The root the command was judged against (canonical).
    pub root: PathBuf,
}

impl CommandRewrite {
    /// The tool input that runs `command` (as judged, from `cwd`) through
    /// `exec`: the original input with its `command` replaced.
    pub fn input(
        &self,
        original: &Value,
        command: &str,
        cwd: &Path,
        asked: bool,
    ) -> Result<Value, CommandApprovalError> {
        let mut words = self.exec.clone();
        if asked {
            let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_owned());
            let digest = command_digest(command, &self.root, &cwd);
            words.push("--approved".into());
            words.push(self.approvals.issue(&self.client, &digest)?);
        }
        words.push("--command".into());
        words.push(command.to_owned());
        let mut input = original.clone();
        if let Some(fields) = input.as_object_mut() {
            fields.insert("command".into(), Value::String(shell_quote(&words)));
        }
        Ok(input)
    }
}
