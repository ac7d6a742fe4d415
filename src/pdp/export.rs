//! The assembled policy set as the official Cedar CLI reads it, so that a
//! team's CI can validate and test its policies with `cedar` alone:
//! every enforced policy (the built-in hard constraints included, named by
//! their `@id`, which the CLI uses as the policy id), the assembled schema
//! (with each tool's generated action and `context.input` type), the
//! entities portcullis builds (tiers, capabilities, built-in, harness and
//! pinned downstream tools, servers), and the fixtures in `run-tests`
//! form, each case's entities written out whole (the CLI does not add
//! entities of its own, as `policy test` does).
//!
//! Shadow policies are left out: they are never enforced.

use std::collections::BTreeMap;

use cedar_policy::SchemaFragment;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::bundle::PolicyBundle;
use super::engine::Engine;
use super::fixtures::exported_cases;
use super::input;
use super::load::schema_json;

/// Where each part of a bundle is written, relative to its folder.
pub const EXPORTED_POLICIES: &str = "policies.cedar";
pub const EXPORTED_SCHEMA: &str = "schema.cedarschema";
pub const EXPORTED_ENTITIES: &str = "entities.json";
pub const EXPORTED_TESTS: &str = "tests";

/// One file of an export: its path in the bundle and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedFile {
    pub path: String,
    pub text: String,
}

/// A bundle the Cedar CLI runs unchanged.
#[derive(Debug, Clone)]
pub struct Export {
    pub files: Vec<ExportedFile>,
    pub policies: usize,
    pub cases: usize,
    /// The fixture files, as paths in the bundle: one `cedar run-tests`
    /// each.
    pub tests: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("the assembled schema cannot be written out: {0}")]
    Schema(String),
    #[error("{file}: {message}")]
    Fixture { file: String, message: String },
}

/// The bundle of `engine`'s set, which `bundle` loaded.
pub fn export(engine: &Engine, bundle: &PolicyBundle) -> Result<Export, ExportError> {
    let mut files = vec![
        ExportedFile {
            path: EXPORTED_POLICIES.to_owned(),
            text: policies_text(bundle),
        },
        ExportedFile {
            path: EXPORTED_SCHEMA.to_owned(),
            text: schema_text(engine, bundle)?,
        },
        ExportedFile {
            path: EXPORTED_ENTITIES.to_owned(),
            text: pretty(&Value::Array(engine.entities_json().to_vec())),
        },
    ];
    let mut tests = Vec::new();
    let mut cases = 0;
    // Entity files by content: the cases of a file mostly share theirs.
    let mut entity_files: BTreeMap<String, String> = BTreeMap::new();
    for file in &bundle.tests {
        let exported =
            exported_cases(engine, bundle, file).map_err(|message| ExportError::Fixture {
                file: file.display.clone(),
                message,
            })?;
        let mut written = Vec::with_capacity(exported.len());
        for (mut case, entities) in exported {
            let text = pretty(&Value::Array(entities));
            let name = format!(
                "entities/{}.json",
                &hex::encode(Sha256::digest(text.as_bytes()))[..16]
            );
            case["entities"] = Value::String(name.clone());
            entity_files.insert(name, text);
            written.push(case);
        }
        cases += written.len();
        let stem = file
            .logical
            .rsplit('/')
            .next()
            .unwrap_or(&file.logical)
            .to_owned();
        let path = format!("{EXPORTED_TESTS}/{stem}");
        files.push(ExportedFile {
            path: path.clone(),
            text: pretty(&Value::Array(written)),
        });
        tests.push(path);
    }
    files.extend(entity_files.into_iter().map(|(name, text)| ExportedFile {
        path: format!("{EXPORTED_TESTS}/{name}"),
        text,
    }));
    Ok(Export {
        files,
        policies: engine.policy_count(),
        cases,
        tests,
    })
}

/// Every enforced policy file, each under a line naming it, formatted as
/// `cedar format` would (so `cedar format --check` passes on it too).
fn policies_text(bundle: &PolicyBundle) -> String {
    let mut text = String::new();
    for file in bundle.all_policies() {
        text.push_str(&format!("// ---- {}\n", file.logical));
        text.push_str(file.text.trim_end());
        text.push_str("\n\n");
    }
    let config = cedar_policy_formatter::Config {
        line_width: 80,
        indent_width: 2,
    };
    // A set that loaded parses; were the formatter to refuse it, the text
    // as written is the same policies.
    cedar_policy_formatter::policies_str_to_pretty(&text, &config).unwrap_or(text)
}

/// The schema the set is validated against, in Cedar's own syntax: the
/// team's fragments and the generated per-tool actions, merged into one.
fn schema_text(engine: &Engine, bundle: &PolicyBundle) -> Result<String, ExportError> {
    let base = schema_json(bundle)
        .ok_or_else(|| ExportError::Schema("a schema file does not parse".to_owned()))?;
    let mut fragments = base.clone();
    let types: Vec<_> = engine.tool_types().collect();
    if !types.is_empty() {
        fragments.push(
            input::fragment(types.into_iter(), &base).map_err(|err| ExportError::Schema(err.0))?,
        );
    }
    let merged = merged_fragments(fragments)?;
    SchemaFragment::from_json_value(merged)
        .map_err(|err| ExportError::Schema(err.to_string()))?
        .to_cedarschema()
        .map_err(|err| ExportError::Schema(err.to_string()))
}

/// Cedar JSON schema fragments as one: each namespace's entity types,
/// actions and common types side by side (a valid schema declares each
/// once, so nothing is overwritten).
fn merged_fragments(fragments: Vec<Value>) -> Result<Value, ExportError> {
    let mut merged: Map<String, Value> = Map::new();
    for fragment in fragments {
        let Value::Object(namespaces) = fragment else {
            return Err(ExportError::Schema(
                "a fragment is not an object".to_owned(),
            ));
        };
        for (namespace, declarations) in namespaces {
            let Value::Object(declarations) = declarations else {
                return Err(ExportError::Schema(format!(
                    "namespace `{namespace}` is not an object"
                )));
            };
            let into = merged
                .entry(namespace.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            let Value::Object(into) = into else {
                continue;
            };
            for (kind, entries) in declarations {
                match (into.get_mut(&kind), entries) {
                    (Some(Value::Object(have)), Value::Object(more)) => {
                        for (name, declaration) in more {
                            if have.insert(name.clone(), declaration).is_some() {
                                return Err(ExportError::Schema(format!(
                                    "`{namespace}::{name}` is declared twice"
                                )));
                            }
                        }
                    }
                    (None, entries) => {
                        into.insert(kind, entries);
                    }
                    // Annotations and the like: the first stands.
                    (Some(_), _) => {}
                }
            }
        }
    }
    Ok(Value::Object(merged))
}

fn pretty(value: &Value) -> String {
    // Serializing a `Value` cannot fail: its keys are strings.
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Registry;

    #[test]
    fn the_shipped_set_exports_whole() {
        let bundle = PolicyBundle::builtin();
        let engine = Engine::load(&bundle, &Registry::builtin().unwrap(), &[]).unwrap();
        let export = export(&engine, &bundle).unwrap();
        let file = |path: &str| {
            export
                .files
                .iter()
                .find(|f| f.path == path)
                .unwrap_or_else(|| panic!("{path} missing"))
        };
        let policies = &file(EXPORTED_POLICIES).text;
        assert!(policies.contains("@id(\"tier.capability_gate\")"));
        assert!(policies.contains("// ---- "), "each file is named");
        let schema = &file(EXPORTED_SCHEMA).text;
        assert!(schema.contains("action \"call_tool\""), "{schema:.300}");
        assert!(
            schema.contains("builtin/read_file"),
            "the generated per-tool actions are in"
        );
        let parsed = cedar_policy::Schema::from_cedarschema_str(schema);
        assert!(parsed.is_ok(), "{:?}", parsed.err());
        assert!(export.cases >= 50, "{} cases", export.cases);
        assert_eq!(export.tests.len(), bundle.tests.len());
        for test in &export.tests {
            let cases: Vec<Value> = serde_json::from_str(&file(test).text).unwrap();
            for case in cases {
                let entities = case["entities"].as_str().unwrap();
                file(&format!("{EXPORTED_TESTS}/{entities}"));
            }
        }
    }

    #[test]
    fn a_declaration_made_twice_is_refused_not_overwritten() {
        let one = serde_json::json!({"N": {"entityTypes": {"A": {}}, "actions": {}}});
        let merged = merged_fragments(vec![
            one.clone(),
            serde_json::json!({"N": {"entityTypes": {"B": {}}}}),
        ])
        .unwrap();
        assert_eq!(
            merged["N"]["entityTypes"]
                .as_object()
                .unwrap()
                .keys()
                .collect::<Vec<_>>(),
            ["A", "B"]
        );
        let twice = merged_fragments(vec![one.clone(), one]).unwrap_err();
        assert!(
            twice.to_string().contains("`N::A` is declared twice"),
            "{twice}"
        );
        assert!(merged_fragments(vec![serde_json::json!([])]).is_err());
    }
}
