//! Fixture tests for policies, in the format of `cedar run-tests`: each file
//! in `policies/tests/` is a JSON array of cases, each a request, its
//! entities, and the expected decision, determining policy ids and number of
//! errors. Running them pins what every policy does, so a change that moves
//! a decision fails a test before it ships.
//!
//! One difference from `cedar run-tests`: the entities of a case are added to
//! the ones portcullis builds itself (tiers, registry tools), so a case lists
//! only its clients and extra tools. An entity listed in a case replaces a
//! built one with the same uid.

use std::collections::BTreeMap;

use cedar_policy::{Context, Decision as CedarDecision, Entities, EntityUid, Request};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::bundle::{PolicyBundle, SourceFile, TEST_ENTITIES_DIR};
use super::engine::Engine;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: Option<String>,
    request: CaseRequest,
    entities: CaseEntities,
    decision: ExpectedDecision,
    reason: Vec<String>,
    num_errors: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseRequest {
    principal: String,
    action: String,
    resource: String,
    context: Value,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum CaseEntities {
    Inline(Vec<Value>),
    /// A file in `policies/tests/entities/`, named relative to `policies/tests/`.
    File(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
enum ExpectedDecision {
    Allow,
    Deny,
}

/// The result of one case (or of a file that could not be read as cases).
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub file: String,
    pub name: String,
    /// Why the case failed; `None` when it passed.
    pub failure: Option<String>,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }
}

/// Runs every fixture file of the bundle against the engine.
pub fn run(engine: &Engine, bundle: &PolicyBundle) -> Vec<CaseResult> {
    let mut results = Vec::new();
    for file in &bundle.tests {
        let cases: Vec<Case> = match serde_json::from_str(&file.text) {
            Ok(cases) => cases,
            Err(err) => {
                results.push(CaseResult {
                    file: file.display.clone(),
                    name: "(file)".to_owned(),
                    failure: Some(format!("not a list of test cases: {err}")),
                });
                continue;
            }
        };
        for (index, case) in cases.iter().enumerate() {
            let name = case
                .name
                .clone()
                .unwrap_or_else(|| format!("case {}", index + 1));
            results.push(CaseResult {
                file: file.display.clone(),
                name,
                failure: run_case(engine, bundle, case)
                    .err()
                    .map(|failure| failure.to_string()),
            });
        }
    }
    results
}

/// Why a case failed: it could not be run, or it decided otherwise.
#[derive(Debug, thiserror::Error)]
enum CaseFailure {
    #[error("entities file `{0}` not found (it must be in policies/tests/{TEST_ENTITIES_DIR}/)")]
    NoEntitiesFile(String),
    #[error("{file}: {source}")]
    EntitiesFile {
        file: String,
        source: serde_json::Error,
    },
    #[error("the entities do not match the schema: {0}")]
    Entities(Box<cedar_policy::entities_errors::EntitiesError>),
    #[error("bad entity uid `{text}`: {source}")]
    Uid {
        text: String,
        source: Box<cedar_policy::ParseErrors>,
    },
    #[error("the context does not match the schema: {0}")]
    Context(Box<cedar_policy::ContextJsonError>),
    #[error("the request does not match the schema: {0}")]
    Request(Box<cedar_policy::RequestValidationError>),
    #[error("{}", .0.join("; "))]
    Decided(Vec<String>),
}

fn run_case(engine: &Engine, bundle: &PolicyBundle, case: &Case) -> Result<(), CaseFailure> {
    let extra = match &case.entities {
        CaseEntities::Inline(entities) => entities.clone(),
        CaseEntities::File(name) => entity_file(&bundle.test_entities, name)?,
    };
    let entities = merged_entities(engine, extra)?;
    let uid = |text: &str| -> Result<EntityUid, CaseFailure> {
        text.parse::<EntityUid>()
            .map_err(|source| CaseFailure::Uid {
                text: text.to_owned(),
                source: Box::new(source),
            })
    };
    let principal = uid(&case.request.principal)?;
    let action = uid(&case.request.action)?;
    let resource = uid(&case.request.resource)?;
    let context = Context::from_json_value(
        case.request.context.clone(),
        Some((engine.schema(), &action)),
    )
    .map_err(|err| CaseFailure::Context(Box::new(err)))?;
    let request = Request::new(principal, action, resource, context, Some(engine.schema()))
        .map_err(|err| CaseFailure::Request(Box::new(err)))?;
    let response = engine.authorize(&request, &entities);

    let decision = match response.decision() {
        CedarDecision::Allow => ExpectedDecision::Allow,
        CedarDecision::Deny => ExpectedDecision::Deny,
    };
    let mut reasons: Vec<String> = response
        .diagnostics()
        .reason()
        .map(ToString::to_string)
        .collect();
    reasons.sort();
    let mut expected_reasons = case.reason.clone();
    expected_reasons.sort();
    let errors: Vec<String> = response
        .diagnostics()
        .errors()
        .map(ToString::to_string)
        .collect();

    let mut wrong = Vec::new();
    if decision != case.decision {
        wrong.push(format!("expected {:?}, got {:?}", case.decision, decision).to_lowercase());
    }
    if reasons != expected_reasons {
        wrong.push(format!(
            "expected determining policies {expected_reasons:?}, got {reasons:?}"
        ));
    }
    if errors.len() != case.num_errors {
        wrong.push(format!(
            "expected {} errors, got {}: {errors:?}",
            case.num_errors,
            errors.len()
        ));
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(CaseFailure::Decided(wrong))
    }
}

fn entity_file(files: &[SourceFile], name: &str) -> Result<Vec<Value>, CaseFailure> {
    let logical = format!("policies/tests/{name}");
    let file = files
        .iter()
        .find(|f| f.logical == logical)
        .ok_or_else(|| CaseFailure::NoEntitiesFile(name.to_owned()))?;
    serde_json::from_str(&file.text).map_err(|source| CaseFailure::EntitiesFile {
        file: file.display.clone(),
        source,
    })
}

/// The engine's own entities with the case's on top (same uid: the case wins).
fn merged_entities(engine: &Engine, extra: Vec<Value>) -> Result<Entities, CaseFailure> {
    let key = |entity: &Value| entity.get("uid").map(Value::to_string).unwrap_or_default();
    let mut by_uid: BTreeMap<String, Value> = engine
        .entities_json()
        .iter()
        .map(|e| (key(e), e.clone()))
        .collect();
    for entity in extra {
        by_uid.insert(key(&entity), entity);
    }
    Entities::from_json_value(
        Value::Array(by_uid.into_values().collect()),
        Some(engine.schema()),
    )
    .map_err(|err| CaseFailure::Entities(Box::new(err)))
}
