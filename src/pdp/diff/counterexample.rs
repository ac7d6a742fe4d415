//! A request the solver found that NEW permits and OLD does not, made
//! readable, and decided again by both sides the way the decision point
//! decides (two passes, any error a deny) before it is reported: the
//! solver's word is checked, not trusted.

use cedar_policy::{
    Authorizer, Context, Decision as CedarDecision, Entities, EntityUid, EvalResult, Request,
    RestrictedExpression,
};
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::{DiffError, Pass};
use crate::pdp::entities::{ClientRecord, TOOL_TYPE, client_entity};
use crate::pdp::{Engine, NO_APPROVAL, Outcome};

/// The approval channel `portcullis check` assumes when none is given.
const CHECK_CHANNEL: &str = "client_elicitation";
/// The client a counterexample names when the policies name none.
const READABLE_CLIENT: &str = "agent";

#[derive(Debug, Clone, Serialize)]
pub struct Counterexample {
    /// The client's name (its id in the token store).
    pub client: String,
    pub tier: String,
    pub action: String,
    pub resource: String,
    /// The tool, as `server/name`, when the request is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The whole context record, as the policies see it.
    pub context: Value,
    /// The tool's arguments (`context.input`), when the action reads them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// The channel the human approval comes through (for an ask).
    pub approval_channel: String,
    /// How OLD and NEW decide this request.
    pub old: Outcome,
    pub new: Outcome,
    /// Whether `portcullis check` can make this same request: a tool
    /// request from the command line whose facts are those of arguments
    /// inside the root.
    pub checkable: bool,
}

impl Counterexample {
    pub(super) fn confirm(
        found: &cedar_policy_symcc::Env,
        pass: Pass,
        old: &Engine,
        new: &Engine,
    ) -> Result<Self, DiffError> {
        let request = &found.request;
        let unreadable = || DiffError::Failed("the solver's counterexample is incomplete".into());
        let principal = request.principal().ok_or_else(unreadable)?;
        let action = request.action().ok_or_else(unreadable)?;
        let resource = request.resource().ok_or_else(unreadable)?;
        let context = request.context().ok_or_else(unreadable)?;
        let tier = match found
            .entities
            .get(principal)
            .and_then(|client| client.attr("tier"))
        {
            Some(Ok(EvalResult::EntityUid(tier))) => tier.id().unescaped().to_owned(),
            _ => return Err(unreadable()),
        };
        let mut client = ClientRecord {
            name: principal.id().unescaped().to_owned(),
            tier,
        };
        let mut approval_channel = match (pass, context.get("approval_channel")) {
            (Pass::Ask, Some(EvalResult::String(channel))) => channel,
            _ => CHECK_CHANNEL.to_owned(),
        };
        let outcomes = |client: &ClientRecord, channel: &str| {
            let decide =
                |engine: &Engine| decide(engine, client, action, resource, context, channel);
            (decide(old), decide(new))
        };
        let found_outcomes = outcomes(&client, &approval_channel);
        // The solver names what nothing constrains with empty strings; a
        // name and channel a person would use do as well when both sides
        // decide the same with them.
        let named = ClientRecord {
            name: READABLE_CLIENT.to_owned(),
            tier: client.tier.clone(),
        };
        if client.name.is_empty() && outcomes(&named, &approval_channel) == found_outcomes {
            client = named;
        }
        if approval_channel != CHECK_CHANNEL && outcomes(&client, CHECK_CHANNEL) == found_outcomes {
            approval_channel = CHECK_CHANNEL.to_owned();
        }
        // Every change above kept both outcomes.
        let (old_outcome, new_outcome) = found_outcomes;
        let mut context_json = context_json(context);
        if pass == Pass::Ask {
            context_json["approval_channel"] = json!(approval_channel);
        }
        let tool = (resource.type_name().to_string() == TOOL_TYPE)
            .then(|| resource.id().unescaped().to_owned());
        let arguments = tool.as_ref().map(|_| {
            context_json
                .get("input")
                .map(plain_json)
                .unwrap_or_else(|| json!({}))
        });
        let checkable = tool.is_some() && is_checkable(&context_json);
        Ok(Self {
            old: old_outcome,
            new: new_outcome,
            client: client.name,
            tier: client.tier,
            action: action.to_string(),
            resource: resource.to_string(),
            tool,
            context: context_json,
            arguments,
            approval_channel,
            checkable,
        })
    }
}

/// The decision point's two passes, on bare Cedar: as if nobody approved,
/// then as if a human approved through `channel`. A resource the side does
/// not know is refused, as the decision point refuses an unknown tool.
fn decide(
    engine: &Engine,
    client: &ClientRecord,
    action: &EntityUid,
    resource: &EntityUid,
    context: &Context,
    channel: &str,
) -> Outcome {
    if engine.entities().get(resource).is_none() {
        return Outcome::Deny;
    }
    let principal = crate::pdp::client_uid(&client.name);
    // A serving engine knows its own clients; the counterexample's client
    // takes the place of one of the same name.
    let mut entities = engine.entities().clone();
    if entities.get(&principal).is_some() {
        let Ok(without) = entities.remove_entities([principal.clone()]) else {
            return Outcome::Deny;
        };
        entities = without;
    }
    let Ok(entities) = entities.add_entities_from_json_value(json!([client_entity(client)]), None)
    else {
        return Outcome::Deny;
    };
    let allows = |approved: bool, channel: &str| {
        pass_allows(
            engine,
            &entities,
            [&principal, action, resource],
            context,
            approved,
            channel,
        )
    };
    if allows(false, NO_APPROVAL) {
        Outcome::Allow
    } else if allows(true, channel) {
        Outcome::Ask
    } else {
        Outcome::Deny
    }
}

fn pass_allows(
    engine: &Engine,
    entities: &Entities,
    [principal, action, resource]: [&EntityUid; 3],
    context: &Context,
    approved: bool,
    channel: &str,
) -> bool {
    let pairs = context.clone().into_iter().map(|(key, value)| {
        let value = match key.as_str() {
            "approved" => RestrictedExpression::new_bool(approved),
            "approval_channel" => RestrictedExpression::new_string(channel.to_owned()),
            _ => value,
        };
        (key, value)
    });
    let Ok(context) = Context::from_pairs(pairs) else {
        return false;
    };
    let Ok(request) = Request::new(
        principal.clone(),
        action.clone(),
        resource.clone(),
        context,
        None,
    ) else {
        return false;
    };
    let response = Authorizer::new().is_authorized(&request, engine.policies(), entities);
    response.decision() == CedarDecision::Allow && response.diagnostics().errors().next().is_none()
}

/// Facts `check` computes for arguments that name paths inside the root,
/// outside VCS metadata and outside every path class, from the command
/// line.
fn is_checkable(context: &Value) -> bool {
    let is = |key: &str, want: Value| context.get(key) == Some(&want);
    is("transport", json!("cli"))
        && is("reads_inside_root", json!(true))
        && is("writes_inside_root", json!(true))
        && is("touches_vcs_metadata", json!(false))
        && is("writes_vcs_metadata", json!(false))
        && is("path_classes", json!([]))
}

fn context_json(context: &Context) -> Value {
    let mut object = Map::new();
    for (key, _) in context.clone() {
        if let Some(value) = context.get(&key) {
            object.insert(key, cedar_json(&value));
        }
    }
    Value::Object(object)
}

/// A Cedar value in Cedar's JSON form (entities and extension values
/// escaped).
fn cedar_json(value: &EvalResult) -> Value {
    match value {
        EvalResult::Bool(b) => json!(b),
        EvalResult::Long(n) => json!(n),
        EvalResult::String(s) => json!(s),
        EvalResult::EntityUid(uid) => json!({"__entity": {
            "type": uid.type_name().to_string(),
            "id": uid.id().unescaped(),
        }}),
        EvalResult::Set(set) => Value::Array(set.iter().map(cedar_json).collect()),
        EvalResult::Record(record) => Value::Object(
            record
                .iter()
                .map(|(key, value)| (key.clone(), cedar_json(value)))
                .collect(),
        ),
        EvalResult::ExtensionValue(text) => json!({"__extn": text}),
    }
}

/// A tool's input as the JSON arguments a client sends: decimals as
/// numbers, addresses as strings.
fn plain_json(value: &Value) -> Value {
    match value {
        Value::Object(object) => match object.get("__extn").and_then(Value::as_str) {
            Some(text) => extension_argument(text),
            None => Value::Object(
                object
                    .iter()
                    .map(|(key, value)| (key.clone(), plain_json(value)))
                    .collect(),
            ),
        },
        Value::Array(items) => Value::Array(items.iter().map(plain_json).collect()),
        other => other.clone(),
    }
}

/// `decimal("1.5")` → 1.5, `ip("10.0.0.1")` → "10.0.0.1".
fn extension_argument(text: &str) -> Value {
    let inner = text
        .split_once("(\"")
        .and_then(|(_, rest)| rest.strip_suffix("\")"))
        .unwrap_or(text);
    if text.starts_with("decimal")
        && let Ok(number) = inner.parse::<f64>()
    {
        return json!(number);
    }
    json!(inner)
}
