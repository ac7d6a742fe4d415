//! The entities every decision sees, built once per load: tiers from
//! `policies/tiers.json`, servers and tools from the registry, clients from
//! the caller (the token store, or `check`'s flags).

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Value, json};

use super::bundle::SourceFile;
use super::problem::{Problem, ProblemKind};
use crate::tools::Registry;

pub const TIER_TYPE: &str = "Portcullis::Tier";
pub const CLIENT_TYPE: &str = "Portcullis::Client";
pub const APPROVER_TYPE: &str = "Portcullis::Approver";
pub const APPROVER_GROUP_TYPE: &str = "Portcullis::ApproverGroup";
pub const SERVER_TYPE: &str = "Portcullis::Server";
pub const TOOL_TYPE: &str = "Portcullis::Tool";
pub const SHELL_TYPE: &str = "Portcullis::Shell";
/// The one shell the command gate judges commands for.
pub const SHELL_ID: &str = "local";
pub const POLICIES_TYPE: &str = "Portcullis::Policies";
/// The policy set in force, resource of every `read_policy` request.
pub const POLICIES_ID: &str = "current";

/// A client portcullis knows, with the tier its token was issued for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClientRecord {
    pub name: String,
    pub tier: String,
}

impl From<&crate::auth::StoredClient> for ClientRecord {
    fn from(client: &crate::auth::StoredClient) -> Self {
        Self {
            name: client.name.clone(),
            tier: client.tier.clone(),
        }
    }
}

/// The tier and approver group entities of `tiers.json` and the tiers'
/// names, after checking that the file holds nothing else (clients,
/// approvers and tools come from elsewhere, and must not be smuggled in
/// through a data file).
pub fn tier_entities(file: &SourceFile) -> Result<(Vec<Value>, BTreeSet<String>), Problem> {
    let value: Value = serde_json::from_str(&file.text).map_err(|err| {
        let mut problem = Problem::new(ProblemKind::Entities, &file.display, err.to_string());
        problem.line = Some(err.line());
        problem.column = Some(err.column());
        problem
    })?;
    let Value::Array(entities) = value else {
        return Err(Problem::new(
            ProblemKind::Entities,
            &file.display,
            "expected a JSON array of Cedar entities",
        ));
    };
    let mut names = BTreeSet::new();
    let mut groups = BTreeSet::new();
    for entity in &entities {
        let kind = entity.pointer("/uid/type").and_then(Value::as_str);
        let id = entity.pointer("/uid/id").and_then(Value::as_str);
        let (seen, what) = match (kind, id) {
            (Some(TIER_TYPE), Some(id)) => (names.insert(id.to_owned()), "tier"),
            (Some(APPROVER_GROUP_TYPE), Some(id)) => {
                (groups.insert(id.to_owned()), "approver group")
            }
            _ => {
                return Err(Problem::new(
                    ProblemKind::Entities,
                    &file.display,
                    format!(
                        "every entity here must be a {TIER_TYPE} or a {APPROVER_GROUP_TYPE} with a string id; found {}",
                        entity.get("uid").unwrap_or(&Value::Null)
                    ),
                ));
            }
        };
        if !seen {
            return Err(Problem::new(
                ProblemKind::Entities,
                &file.display,
                format!("{what} `{}` is declared twice", id.unwrap_or_default()),
            ));
        }
    }
    Ok((entities, names))
}

/// The server and tool entities of the registry.
pub fn tool_entities(registry: &Registry) -> Vec<Value> {
    let mut servers = BTreeSet::new();
    let mut out = Vec::new();
    for tool in registry.iter() {
        let spec = &tool.spec;
        servers.insert(spec.id.server().to_owned());
        let effects: Vec<&str> = spec.effects.iter().map(|e| e.as_str()).collect();
        out.push(json!({
            "uid": {"type": TOOL_TYPE, "id": spec.id.to_string()},
            "attrs": {
                "name": spec.id.name(),
                "server": spec.id.server(),
                "effects": effects,
                "required_capabilities": spec.required_capabilities,
                "read_only": spec.read_only(),
            },
            "parents": [{"type": SERVER_TYPE, "id": spec.id.server()}],
        }));
    }
    for server in servers {
        out.push(json!({
            "uid": {"type": SERVER_TYPE, "id": server},
            "attrs": {"name": server},
            "parents": [],
        }));
    }
    out
}

/// A name that is not a Cedar entity type (only a type name can be bad: any
/// string is an id).
#[derive(Debug, thiserror::Error)]
#[error("{kind} is not an entity type name: {source}")]
pub struct BadEntityType {
    kind: String,
    source: Box<cedar_policy::ParseErrors>,
}

/// A type name of portcullis's own schema, parsed once: replay builds a
/// client and a tool uid for every record.
fn own_type(name: &'static str) -> cedar_policy::EntityTypeName {
    #[expect(
        clippy::expect_used,
        reason = "invariant: the type names are constants of this file, covered by a test"
    )]
    name.parse().expect("a constant type name parses")
}

static CLIENT_TYPE_NAME: std::sync::LazyLock<cedar_policy::EntityTypeName> =
    std::sync::LazyLock::new(|| own_type(CLIENT_TYPE));
static TOOL_TYPE_NAME: std::sync::LazyLock<cedar_policy::EntityTypeName> =
    std::sync::LazyLock::new(|| own_type(TOOL_TYPE));

static APPROVER_TYPE_NAME: std::sync::LazyLock<cedar_policy::EntityTypeName> =
    std::sync::LazyLock::new(|| own_type(APPROVER_TYPE));

/// The uid of the approver named `name`.
pub fn approver_uid(name: &str) -> cedar_policy::EntityUid {
    cedar_policy::EntityUid::from_type_name_and_id(
        APPROVER_TYPE_NAME.clone(),
        cedar_policy::EntityId::new(name),
    )
}

static SERVER_TYPE_NAME: std::sync::LazyLock<cedar_policy::EntityTypeName> =
    std::sync::LazyLock::new(|| own_type(SERVER_TYPE));

/// The uid of the server named `name`.
pub fn server_uid(name: &str) -> cedar_policy::EntityUid {
    cedar_policy::EntityUid::from_type_name_and_id(
        SERVER_TYPE_NAME.clone(),
        cedar_policy::EntityId::new(name),
    )
}

/// The uid of the client named `name`.
pub fn client_uid(name: &str) -> cedar_policy::EntityUid {
    cedar_policy::EntityUid::from_type_name_and_id(
        CLIENT_TYPE_NAME.clone(),
        cedar_policy::EntityId::new(name),
    )
}

/// The uid of the tool with id `id` (`server/name`).
pub fn tool_uid(id: &str) -> cedar_policy::EntityUid {
    cedar_policy::EntityUid::from_type_name_and_id(
        TOOL_TYPE_NAME.clone(),
        cedar_policy::EntityId::new(id),
    )
}

/// The uid `kind::"id"`; the id is taken as it is, never parsed.
pub fn entity_uid(kind: &str, id: &str) -> Result<cedar_policy::EntityUid, BadEntityType> {
    let type_name = kind
        .parse::<cedar_policy::EntityTypeName>()
        .map_err(|source| BadEntityType {
            kind: kind.to_owned(),
            source: Box::new(source),
        })?;
    Ok(cedar_policy::EntityUid::from_type_name_and_id(
        type_name,
        cedar_policy::EntityId::new(id),
    ))
}

/// The shell entity, resource of every `run_command` request.
pub fn shell_entity() -> Value {
    json!({"uid": {"type": SHELL_TYPE, "id": SHELL_ID}, "attrs": {}, "parents": []})
}

/// The policy set entity, resource of every `read_policy` request.
pub fn policies_entity() -> Value {
    json!({"uid": {"type": POLICIES_TYPE, "id": POLICIES_ID}, "attrs": {}, "parents": []})
}

/// A client entity: its tier is its parent and its `tier` attribute.
pub fn client_entity(client: &ClientRecord) -> Value {
    json!({
        "uid": {"type": CLIENT_TYPE, "id": client.name},
        "attrs": {
            "name": client.name,
            "tier": {"__entity": {"type": TIER_TYPE, "id": client.tier}},
        },
        "parents": [{"type": TIER_TYPE, "id": client.tier}],
    })
}
