//! The steps of loading a set that build what decisions read, beside
//! the compiled policies and schema: its data tables (path classes, the
//! command table, the tiers), the entity store, and the names (client,
//! tool and action uids) each request is decided with. `Engine::load_as`
//! runs them in order.

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use cedar_policy::{Entities, EntityUid, Schema};
use serde_json::Value;

use super::bundle::PolicyBundle;
use super::entities::{self, ClientRecord};
use super::input::{ToolType, ToolTypes};
use super::load::{self, CompiledSet, Provenance};
use super::problem::{LoadError, Problem, ProblemKind};
use crate::facts::{CommandClassError, CommandClasses, PathClasses};
use crate::tools::{Registry, ToolId};

/// The action entities of the schema, resolved once.
#[derive(Debug)]
pub(super) struct Actions {
    pub discover_tool: EntityUid,
    pub call_tool: EntityUid,
    pub run_command: EntityUid,
    /// Absent from schemas recorded before clients could be refused the
    /// policies; such a set denies every `read_policy` request.
    pub read_policy: Option<EntityUid>,
    /// Absent from schemas recorded before downstream servers; such a set
    /// denies every `relay_request` request.
    pub relay_request: Option<EntityUid>,
    /// Absent from schemas recorded before the approval inbox; such a set
    /// lets nobody approve.
    pub approve: Option<EntityUid>,
}

/// A set's data tables, read beside its policies.
pub(super) struct Tables {
    pub path_classes: PathClasses,
    pub command_classes: CommandTable,
    pub tier_json: Vec<Value>,
    pub tier_names: BTreeSet<String>,
    pub tier_capabilities: HashMap<String, Vec<String>>,
}

/// The compiled set and its data tables; every problem of either, all of
/// them at once.
pub(super) fn compiled(
    bundle: &PolicyBundle,
    types: &ToolTypes,
    provenance: Provenance,
    known: Option<&load::Known<'_>>,
) -> Result<(CompiledSet, Tables), LoadError> {
    let mut problems = Vec::new();
    let compiled = load::compile(bundle, types, provenance, known);
    let path_classes = path_classes(bundle, provenance, &mut problems);
    let command_classes = command_table(bundle, provenance, known.is_some(), &mut problems);
    let tiers = entities::tier_entities(&bundle.tiers)
        .map_err(|problem| problems.push(problem))
        .ok();
    let compiled = match compiled {
        Ok(compiled) => compiled,
        Err(mut compile_problems) => {
            compile_problems.append(&mut problems);
            return Err(LoadError {
                problems: compile_problems,
            });
        }
    };
    let (Some(path_classes), Some(command_classes), Some((tier_json, tier_names))) =
        (path_classes, command_classes, tiers)
    else {
        return Err(LoadError { problems });
    };
    let tier_capabilities = tier_capabilities(&tier_json);
    Ok((
        compiled,
        Tables {
            path_classes,
            command_classes,
            tier_json,
            tier_names,
            tier_capabilities,
        },
    ))
}

fn path_classes(
    bundle: &PolicyBundle,
    provenance: Provenance,
    problems: &mut Vec<Problem>,
) -> Option<PathClasses> {
    let parse = match provenance {
        Provenance::Current => PathClasses::parse,
        Provenance::Recorded => PathClasses::parse_recorded,
    };
    parse(&bundle.path_classes.display, &bundle.path_classes.text)
        .map_err(|err| {
            problems.push(Problem::new(
                ProblemKind::PathClasses,
                &bundle.path_classes.display,
                err.to_string(),
            ))
        })
        .ok()
}

fn command_table(
    bundle: &PolicyBundle,
    provenance: Provenance,
    validated: bool,
    problems: &mut Vec<Problem>,
) -> Option<CommandTable> {
    if validated {
        // This very set loaded whole before, table included: only a
        // shell command needs the table, so it is read then.
        return Some(CommandTable::deferred(
            &bundle.commands.display,
            &bundle.commands.text,
        ));
    }
    let parse = match provenance {
        Provenance::Current => CommandClasses::parse,
        Provenance::Recorded => CommandClasses::parse_recorded,
    };
    parse(&bundle.commands.display, &bundle.commands.text)
        .map(CommandTable::parsed)
        .map_err(|err| {
            problems.push(Problem::new(
                ProblemKind::CommandClasses,
                &bundle.commands.display,
                err.to_string(),
            ))
        })
        .ok()
}

fn tier_capabilities(tier_json: &[Value]) -> HashMap<String, Vec<String>> {
    tier_json
        .iter()
        .filter_map(|tier| {
            let id = tier.pointer("/uid/id")?.as_str()?.to_owned();
            let capabilities = tier
                .pointer("/attrs/capabilities")?
                .as_array()?
                .iter()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect();
            Some((id, capabilities))
        })
        .collect()
}

/// Every client's tier is one the set declares.
pub(super) fn check_client_tiers(
    clients: &[ClientRecord],
    tier_names: &BTreeSet<String>,
    tiers_file: &str,
) -> Result<(), LoadError> {
    let problems: Vec<Problem> = clients
        .iter()
        .filter(|client| !tier_names.contains(&client.tier))
        .map(|client| {
            Problem::new(
                ProblemKind::UnknownTier,
                tiers_file,
                format!(
                    "client `{}` has tier `{}`, which is not declared here (declared: {})",
                    client.name,
                    client.tier,
                    tier_names.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            )
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(LoadError { problems })
    }
}

/// The entities decisions read, as Cedar's store and as the JSON that
/// fixtures and audit records name them by.
pub(super) struct EntityStore {
    pub entities: Entities,
    pub json: Vec<Value>,
}

impl EntityStore {
    /// Tiers, tools, clients, the shell and (where the schema declares
    /// reading them) the policies, validated against the schema.
    pub(super) fn build(
        tier_json: &[Value],
        registry: &Registry,
        clients: &[ClientRecord],
        schema: &Schema,
        tiers_file: &str,
    ) -> Result<Self, LoadError> {
        let mut json = tier_json.to_vec();
        json.extend(entities::tool_entities(registry));
        json.extend(clients.iter().map(entities::client_entity));
        json.push(entities::shell_entity());
        if declared_action(schema, "read_policy").is_some() {
            json.push(entities::policies_entity());
        }
        let entities = Entities::from_json_value(Value::Array(json.clone()), Some(schema))
            .map_err(|err| LoadError {
                problems: vec![
                    Problem::new(ProblemKind::Entities, tiers_file, err.to_string())
                        .with_help(miette::Diagnostic::help(&err).map(|h| h.to_string())),
                ],
            })?;
        Ok(Self { entities, json })
    }
}

/// An action the schema declares (`read_policy` and `relay_request` are
/// absent from sets recorded before them).
fn declared_action(schema: &Schema, name: &str) -> Option<EntityUid> {
    entities::entity_uid("Portcullis::Action", name)
        .ok()
        .filter(|uid| schema.actions().any(|action| action == uid))
}

/// The uids a request is decided with, resolved once per load.
pub(super) struct Names {
    pub clients: HashMap<String, EntityUid>,
    pub tools: HashMap<ToolId, EntityUid>,
    pub actions: Actions,
    /// Each typed tool's own call action, and its type.
    pub calls: HashMap<ToolId, (EntityUid, ToolType)>,
    pub shell: EntityUid,
    pub policies_resource: EntityUid,
}

impl Names {
    pub(super) fn resolve(
        schema: &Schema,
        registry: &Registry,
        clients: &[ClientRecord],
        types: &ToolTypes,
    ) -> Result<Self, LoadError> {
        let uid = |kind: &str, id: &str| -> Result<EntityUid, LoadError> {
            entities::entity_uid(kind, id).map_err(|err| LoadError {
                problems: vec![Problem::new(
                    ProblemKind::Entities,
                    "entities",
                    err.to_string(),
                )],
            })
        };
        let mut client_uids = HashMap::new();
        for client in clients {
            client_uids.insert(
                client.name.clone(),
                uid(entities::CLIENT_TYPE, &client.name)?,
            );
        }
        let mut tool_uids = HashMap::new();
        for tool in registry.iter() {
            tool_uids.insert(
                tool.spec.id.clone(),
                uid(entities::TOOL_TYPE, &tool.spec.id.to_string())?,
            );
        }
        let actions = Actions {
            discover_tool: uid("Portcullis::Action", "discover_tool")?,
            call_tool: uid("Portcullis::Action", "call_tool")?,
            run_command: uid("Portcullis::Action", "run_command")?,
            read_policy: declared_action(schema, "read_policy"),
            relay_request: declared_action(schema, "relay_request"),
            approve: declared_action(schema, "approve"),
        };
        let mut calls = HashMap::new();
        for ty in types.iter() {
            calls.insert(
                ty.id.clone(),
                (uid("Portcullis::Action", &ty.id.to_string())?, ty.clone()),
            );
        }
        Ok(Self {
            clients: client_uids,
            tools: tool_uids,
            actions,
            calls,
            shell: uid(entities::SHELL_TYPE, entities::SHELL_ID)?,
            policies_resource: uid(entities::POLICIES_TYPE, entities::POLICIES_ID)?,
        })
    }
}

/// The command table of a loaded set: parsed at load, or, when the set
/// loaded whole before, on the first command judged without the checks it
/// passed then.
#[derive(Debug)]
pub(super) struct CommandTable {
    source: Option<(String, String)>,
    parsed: OnceLock<Result<CommandClasses, CommandClassError>>,
}

impl CommandTable {
    pub(super) fn parsed(table: CommandClasses) -> Self {
        Self {
            source: None,
            parsed: OnceLock::from(Ok(table)),
        }
    }

    pub(super) fn deferred(display: &str, text: &str) -> Self {
        Self {
            source: Some((display.to_owned(), text.to_owned())),
            parsed: OnceLock::new(),
        }
    }

    pub(super) fn get(&self) -> Result<&CommandClasses, &CommandClassError> {
        self.parsed
            .get_or_init(|| {
                let (display, text) = self.source.as_ref().map_or(("", ""), |(d, t)| (d, t));
                CommandClasses::parse_checked_before(display, text)
            })
            .as_ref()
    }
}
