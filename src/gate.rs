//! The command gate: allow, ask or deny for a shell command, before the
//! agent's harness runs it. portcullis parses and judges; it never runs
//! the command. The CLI (`portcullis gate`) and the MCP tool `gate` both
//! come here, and both decide through the one decision point (action
//! `run_command`).

use serde::Serialize;
use serde_json::{Value, json};
use thiserror::Error;

use crate::facts::{
    CommandError, CommandFacts, PathError, Root, Transport, command_facts, resolve,
};
use crate::pdp::{Decision, Engine, Query};

/// The channel an approval of a command would come through: the harness
/// asks its user.
pub const GATE_APPROVAL_CHANNEL: &str = "harness";

#[derive(Debug, Error)]
pub enum GateError {
    #[error("{0}")]
    Command(#[from] CommandError),
    #[error("cwd: {0}")]
    Cwd(PathError),
    /// Loops and OS errors name places and tell whether they exist; the
    /// caller learns only that the folder cannot be used.
    #[error("cwd: the folder cannot be resolved inside the root")]
    CwdUnresolvable,
    #[error("the command table does not load: {0}")]
    Table(String),
}

/// A judged command.
#[derive(Debug, Clone)]
pub struct GateAnswer {
    pub decision: Decision,
    pub facts: CommandFacts,
}

#[derive(Serialize)]
struct PartView<'a> {
    argv: &'a [String],
    program: &'a str,
    classes: Vec<&'a str>,
}

impl GateAnswer {
    /// Which layer decided: the file of the first determining policy, or
    /// `default` when none did (nothing permits the command).
    pub fn layer(&self) -> String {
        self.decision
            .policies
            .first()
            .map(|p| {
                let file = p.file.rsplit('/').next().unwrap_or(&p.file);
                file.trim_end_matches(".cedar").to_owned()
            })
            .unwrap_or_else(|| "default".to_owned())
    }

    /// The schema of [`GateAnswer::to_json`]: the `gate` tool's output
    /// schema, so clients can check what they get.
    pub fn schema() -> Value {
        let strings = json!({"type": "array", "items": {"type": "string"}});
        json!({
            "type": "object",
            "properties": {
                "decision": {"enum": ["allow", "ask", "deny"]},
                "cause": {"type": "string"},
                "layer": {"type": "string"},
                "reason": {"type": "string"},
                "policies": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"id": {"type": "string"}, "reason": {"type": "string"}},
                        "required": ["id", "reason"]
                    }
                },
                "commands": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "argv": strings,
                            "program": {"type": "string"},
                            "classes": strings
                        },
                        "required": ["argv", "program", "classes"]
                    }
                },
                "classes": strings,
                "opaque": {"type": "boolean"},
                "writes_inside_root": {"type": "boolean"}
            },
            "required": [
                "decision", "cause", "layer", "reason", "policies", "commands", "classes",
                "opaque", "writes_inside_root"
            ]
        })
    }

    /// Why: the reasons of the deciding policies, or, when none decided,
    /// that nothing allows the command unasked.
    pub fn reason(&self) -> String {
        if self.decision.policies.is_empty() {
            "no policy allows this command without a human's approval".to_owned()
        } else {
            self.decision.reason()
        }
    }

    /// The structured answer of `gate`, for machines.
    pub fn to_json(&self) -> Value {
        let parts: Vec<PartView<'_>> = self
            .facts
            .parts
            .iter()
            .map(|p| PartView {
                argv: &p.argv,
                program: &p.program,
                classes: p.classes.iter().map(String::as_str).collect(),
            })
            .collect();
        json!({
            "decision": self.decision.outcome,
            "cause": self.decision.cause,
            "layer": self.layer(),
            "reason": self.reason(),
            "policies": self.decision.policies.iter().map(|p| json!({"id": p.id, "reason": p.reason})).collect::<Vec<_>>(),
            "commands": parts,
            "classes": self.facts.classes,
            "opaque": self.facts.opaque,
            "writes_inside_root": self.facts.writes_inside_root,
        })
    }
}

/// Judges `command` as run by `client` in `cwd` (relative to the root;
/// the root if absent).
pub fn judge(
    engine: &Engine,
    client: &str,
    root: &Root,
    cwd: Option<&str>,
    command: &str,
    transport: Transport,
) -> Result<GateAnswer, GateError> {
    // The root is canonical already: only a given cwd needs resolving.
    let resolved;
    let cwd: &std::path::Path = match cwd {
        None => root.path(),
        Some(cwd) => {
            resolved = resolve(root, cwd).map_err(|err| {
                if err.is_input() {
                    GateError::Cwd(err)
                } else {
                    tracing::debug!(error = %err, "the gate's cwd cannot be resolved");
                    GateError::CwdUnresolvable
                }
            })?;
            &resolved.canonical
        }
    };
    let table = engine
        .command_classes()
        .map_err(|err| GateError::Table(err.to_string()))?;
    let facts = command_facts(command, cwd, root, table)?;
    let decision = engine.decide(&Query::command(
        client,
        &facts,
        transport,
        GATE_APPROVAL_CHANNEL,
    ));
    Ok(GateAnswer { decision, facts })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pdp::{ClientRecord, PolicyBundle};
    use crate::tools::Registry;

    #[test]
    fn every_answer_fits_the_schema_clients_are_given() {
        let engine = Engine::load(
            &PolicyBundle::builtin(),
            &Registry::builtin().unwrap(),
            &[ClientRecord {
                name: "agent".into(),
                tier: "paired".into(),
            }],
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path()).unwrap();
        let validator = jsonschema::validator_for(&GateAnswer::schema()).unwrap();
        for command in [
            "ls -la | grep x",
            "rm -rf build",
            "git push",
            "eval \"$X\"",
            "cat .env",
        ] {
            let answer = judge(&engine, "agent", &root, None, command, Transport::Cli).unwrap();
            let json = answer.to_json();
            assert!(validator.is_valid(&json), "{command}: {json}");
        }
    }
}
