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
use super::decision::DeterminingPolicy;
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
pub enum ExpectedDecision {
    Allow,
    Deny,
}

/// The result of one case (or of a file that could not be read as cases).
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub file: String,
    pub name: String,
    /// The case's place in its file.
    #[serde(skip)]
    index: usize,
    /// Why the case failed; `None` when it passed.
    pub failure: Option<String>,
    /// What the policies decide now, when the case could be run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed: Option<Observed>,
}

/// What the policies decide for a case, and the policies that decided it:
/// why an expectation moved.
#[derive(Debug, Clone, Serialize)]
pub struct Observed {
    pub decision: ExpectedDecision,
    pub reason: Vec<String>,
    pub num_errors: usize,
    pub determined_by: Vec<DeterminingPolicy>,
}

impl CaseResult {
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }

    /// Whether the case ran and only its expectation differs: what
    /// `policy test --accept` may rewrite.
    pub fn acceptable(&self) -> bool {
        self.failure.is_some() && self.observed.is_some()
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
                    index: 0,
                    failure: Some(format!("not a list of test cases: {err}")),
                    observed: None,
                });
                continue;
            }
        };
        for (index, case) in cases.iter().enumerate() {
            let name = case
                .name
                .clone()
                .unwrap_or_else(|| format!("case {}", index + 1));
            let (failure, observed) = match run_case(engine, bundle, case) {
                Ok(observed) => (mismatch(case, &observed), Some(observed)),
                Err(failure) => (Some(failure.to_string()), None),
            };
            results.push(CaseResult {
                file: file.display.clone(),
                name,
                index,
                failure,
                observed,
            });
        }
    }
    results
}

/// The fixture files rewritten so that every case that ran but decided
/// otherwise expects what the policies decide now (decision, determining
/// policies, number of errors); every other case and key is kept as
/// written. Each is the file's path on disk and its new text.
pub fn accepted(bundle: &PolicyBundle, results: &[CaseResult]) -> Vec<(String, String)> {
    let mut rewritten = Vec::new();
    for file in &bundle.tests {
        let moved: Vec<&CaseResult> = results
            .iter()
            .filter(|r| r.file == file.display && r.acceptable())
            .collect();
        if moved.is_empty() {
            continue;
        }
        let Ok(Value::Array(mut cases)) = serde_json::from_str::<Value>(&file.text) else {
            continue;
        };
        for result in moved {
            let (Some(case), Some(observed)) = (cases.get_mut(result.index), &result.observed)
            else {
                continue;
            };
            case["decision"] = serde_json::json!(observed.decision);
            case["reason"] = serde_json::json!(observed.reason);
            case["num_errors"] = serde_json::json!(observed.num_errors);
        }
        if let Ok(text) = serde_json::to_string_pretty(&Value::Array(cases)) {
            rewritten.push((file.display.clone(), text + "\n"));
        }
    }
    rewritten
}

/// How a case's expectation differs from what was decided, if it does.
fn mismatch(case: &Case, observed: &Observed) -> Option<String> {
    let mut expected_reasons = case.reason.clone();
    expected_reasons.sort();
    let mut wrong = Vec::new();
    if observed.decision != case.decision {
        wrong.push(
            format!("expected {:?}, got {:?}", case.decision, observed.decision).to_lowercase(),
        );
    }
    if observed.reason != expected_reasons {
        wrong.push(format!(
            "expected determining policies {expected_reasons:?}, got {:?}",
            observed.reason
        ));
    }
    if observed.num_errors != case.num_errors {
        wrong.push(format!(
            "expected {} errors, got {}",
            case.num_errors, observed.num_errors
        ));
    }
    (!wrong.is_empty()).then(|| wrong.join("; "))
}

/// Why a case could not be run.
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
}

fn run_case(engine: &Engine, bundle: &PolicyBundle, case: &Case) -> Result<Observed, CaseFailure> {
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
    let context = fixture_context(engine, &case.request.context, &action)?;
    let request = Request::new(principal, action, resource, context, Some(engine.schema()))
        .map_err(|err| CaseFailure::Request(Box::new(err)))?;
    let response = engine.authorize(&request, &entities);
    let decision = match response.decision() {
        CedarDecision::Allow => ExpectedDecision::Allow,
        CedarDecision::Deny => ExpectedDecision::Deny,
    };
    let mut reason: Vec<String> = response
        .diagnostics()
        .reason()
        .map(ToString::to_string)
        .collect();
    reason.sort();
    Ok(Observed {
        decision,
        reason,
        num_errors: response.diagnostics().errors().count(),
        determined_by: engine.determining(&response),
    })
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

/// The engine's own entities with the case's on top (same uid: the case
/// wins), as Cedar JSON.
fn merged_entities_json(engine: &Engine, extra: Vec<Value>) -> Vec<Value> {
    let key = |entity: &Value| entity.get("uid").map(Value::to_string).unwrap_or_default();
    let mut by_uid: BTreeMap<String, Value> = engine
        .entities_json()
        .iter()
        .map(|e| (key(e), e.clone()))
        .collect();
    for entity in extra {
        by_uid.insert(key(&entity), entity);
    }
    by_uid.into_values().collect()
}

fn merged_entities(engine: &Engine, extra: Vec<Value>) -> Result<Entities, CaseFailure> {
    Entities::from_json_value(
        Value::Array(merged_entities_json(engine, extra)),
        Some(engine.schema()),
    )
    .map_err(|err| CaseFailure::Entities(Box::new(err)))
}

/// The cases of one fixture file as `cedar run-tests` reads them: each
/// case as written, and the whole of the entities it is decided with
/// (the engine's and its own), which the CLI does not add itself. A file
/// that does not read, or a case whose entities cannot be found, is the
/// error.
pub(super) fn exported_cases(
    engine: &Engine,
    bundle: &PolicyBundle,
    file: &SourceFile,
) -> Result<Vec<(Value, Vec<Value>)>, String> {
    let cases: Vec<Value> = serde_json::from_str(&file.text)
        .map_err(|err| format!("not a list of test cases: {err}"))?;
    cases
        .into_iter()
        .enumerate()
        .map(|(index, case)| {
            let entities: CaseEntities = serde_json::from_value(case["entities"].clone())
                .map_err(|err| format!("case {}: entities: {err}", index + 1))?;
            let extra = match entities {
                CaseEntities::Inline(entities) => entities,
                CaseEntities::File(name) => entity_file(&bundle.test_entities, &name)
                    .map_err(|err| format!("case {}: {err}", index + 1))?,
            };
            let mut case = case;
            if let Some(action) = case["request"]["action"]
                .as_str()
                .and_then(|text| text.parse::<EntityUid>().ok())
            {
                case["request"]["context"] =
                    current_context(engine, &case["request"]["context"], &action);
            }
            Ok((case, merged_entities_json(engine, extra)))
        })
        .collect()
}

/// A case's context as the schema reads it now. One written before tool
/// requests counted their approvers (`context.approvers`) gets what every
/// decision counted then: one when approved, none otherwise. Anything else
/// stays as written, for its mismatch to be the case's.
fn current_context(engine: &Engine, context: &Value, action: &EntityUid) -> Value {
    let fits = |value: &Value| {
        Context::from_json_value(value.clone(), Some((engine.schema(), action))).is_ok()
    };
    let Value::Object(fields) = context else {
        return context.clone();
    };
    if fields.contains_key("approvers") || fits(context) {
        return context.clone();
    }
    let approved = fields
        .get("approved")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut counted = fields.clone();
    counted.insert("approvers".to_owned(), Value::from(u32::from(approved)));
    let counted = Value::Object(counted);
    if fits(&counted) {
        counted
    } else {
        context.clone()
    }
}

fn fixture_context(
    engine: &Engine,
    context: &Value,
    action: &EntityUid,
) -> Result<Context, CaseFailure> {
    Context::from_json_value(
        current_context(engine, context, action),
        Some((engine.schema(), action)),
    )
    .map_err(|err| CaseFailure::Context(Box::new(err)))
}
