//! The floor under the schema: every declaration of the built-in schema
//! (entity types, the action hierarchy, the context records) is what the
//! hard constraints and the facts portcullis computes rest on, so a team's
//! schema may add to it but not take from it. A team that drops `in
//! ["use_tool"]` from `call_tool` would take every call out of reach of
//! `hard.no_process_spawn` while the policies still read the same; such a
//! schema is refused at load, naming the file and the declaration.
//!
//! Declarations are compared in Cedar's JSON form with type names
//! resolved (`Tier`, `Portcullis::Tier` and an entity reference to it are
//! one type), so only a change of meaning is refused, never a change of
//! spelling.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use cedar_policy::SchemaFragment;
use serde_json::{Map, Value};

use super::bundle::SourceFile;
use super::defaults;
use super::problem::{Problem, ProblemKind};

/// The namespace every built-in declaration lives in.
const NAMESPACE: &str = "Portcullis";

/// The declarations of one namespace, merged over a schema's files, each
/// with the file that declared it.
#[derive(Debug, Default)]
struct Declarations {
    entity_types: BTreeMap<String, (Value, String)>,
    actions: BTreeMap<String, (Value, String)>,
    common_types: BTreeMap<String, (Value, String)>,
}

impl Declarations {
    fn of(fragments: &[(Value, String)]) -> Self {
        let mut declarations = Self::default();
        for (fragment, file) in fragments {
            let Some(namespace) = fragment.get(NAMESPACE) else {
                continue;
            };
            let take = |key: &str, into: &mut BTreeMap<String, (Value, String)>| {
                for (name, value) in namespace
                    .get(key)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    into.insert(name.clone(), (value.clone(), file.clone()));
                }
            };
            take("entityTypes", &mut declarations.entity_types);
            take("actions", &mut declarations.actions);
            take("commonTypes", &mut declarations.common_types);
        }
        declarations
    }

    /// A common type's record, resolved; an inline record as it is.
    fn record<'a>(&'a self, value: &'a Value) -> Option<&'a Map<String, Value>> {
        match value.get("type").and_then(Value::as_str) {
            Some("Record") => value.get("attributes").and_then(Value::as_object),
            Some("EntityOrCommon") => {
                let name = value.get("name").and_then(Value::as_str)?;
                let (common, _) = self.common_types.get(local(name))?;
                common.get("attributes").and_then(Value::as_object)
            }
            Some(name) => {
                let (common, _) = self.common_types.get(local(name))?;
                common.get("attributes").and_then(Value::as_object)
            }
            None => None,
        }
    }
}

/// The built-in schema in Cedar's JSON form, a fragment per file of
/// `defaults::SCHEMAS` in order. Kept beside the text so a process that
/// decides once (a hook, `exec`) reads JSON instead of running Cedar's
/// schema parser, a tenth of an allowed hook's time; a test holds it equal
/// to the text, and a copy that does not read is never trusted for less
/// than the text.
const BUILTIN_JSON: &str = include_str!("builtin_schema.json");

/// The built-in schema's declarations, read once.
fn builtin() -> &'static Declarations {
    static BUILTIN: OnceLock<Declarations> = OnceLock::new();
    BUILTIN.get_or_init(|| {
        let fragments = builtin_from_json().unwrap_or_else(builtin_from_text);
        Declarations::of(&fragments)
    })
}

fn builtin_from_json() -> Option<Vec<(Value, String)>> {
    let values: Vec<Value> = serde_json::from_str(BUILTIN_JSON).ok()?;
    (values.len() == defaults::SCHEMAS.len()).then(|| {
        values
            .into_iter()
            .zip(defaults::SCHEMAS)
            .map(|(value, (logical, _))| (value, (*logical).to_owned()))
            .collect()
    })
}

fn builtin_from_text() -> Vec<(Value, String)> {
    defaults::SCHEMAS
        .iter()
        .filter_map(|(logical, text)| {
            let (fragment, _) = SchemaFragment::from_cedarschema_str(text).ok()?;
            Some((fragment.to_json_value().ok()?, (*logical).to_owned()))
        })
        .collect()
}

/// A name without the built-in namespace: the JSON form names a type of
/// the same namespace either way.
fn local(name: &str) -> &str {
    name.strip_prefix("Portcullis::")
        .or_else(|| name.strip_prefix("__cedar::"))
        .unwrap_or(name)
}

/// A type as one comparable text: `Set<String>`, `Tier`, a record's
/// attributes in order with their required-ness.
fn type_text(value: &Value, declarations: &Declarations) -> String {
    let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
    let named = |name: &str| match local(name) {
        "Boolean" => "Bool".to_owned(),
        other => other.to_owned(),
    };
    match kind {
        "Set" => format!(
            "Set<{}>",
            value
                .get("element")
                .map(|e| type_text(e, declarations))
                .unwrap_or_default()
        ),
        "Record" => record_text(
            value.get("attributes").and_then(Value::as_object),
            declarations,
        ),
        "Entity" | "EntityOrCommon" | "Extension" => {
            let name = value.get("name").and_then(Value::as_str).unwrap_or("");
            match declarations.common_types.get(local(name)) {
                // A common type stands for what it names.
                Some((common, _)) if !builtin_primitive(local(name)) => {
                    type_text(common, declarations)
                }
                _ => named(name),
            }
        }
        "String" | "Long" | "Bool" | "Boolean" => named(kind),
        other => match declarations.common_types.get(local(other)) {
            Some((common, _)) => type_text(common, declarations),
            None => named(other),
        },
    }
}

fn builtin_primitive(name: &str) -> bool {
    matches!(name, "String" | "Long" | "Bool" | "Boolean")
}

fn record_text(attributes: Option<&Map<String, Value>>, declarations: &Declarations) -> String {
    let fields: Vec<String> = attributes
        .into_iter()
        .flatten()
        .map(|(name, attribute)| attribute_text(name, attribute, declarations))
        .collect();
    format!("{{{}}}", fields.join(", "))
}

fn attribute_text(name: &str, attribute: &Value, declarations: &Declarations) -> String {
    let optional = attribute.get("required").and_then(Value::as_bool) == Some(false);
    format!(
        "{name}{}: {}",
        if optional { "?" } else { "" },
        type_text(attribute, declarations)
    )
}

fn names(value: Option<&Value>) -> BTreeSet<String> {
    value
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| match item {
            Value::String(name) => Some(local(name).to_owned()),
            // An action reference: `{"id": "use_tool", "type": ...}`.
            Value::Object(reference) => {
                let id = reference.get("id")?.as_str()?;
                let kind = reference
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("Action");
                Some(format!("{}::{id}", local(kind)))
            }
            _ => None,
        })
        .collect()
}

/// Refuses a team schema that removes, retypes or re-parents a built-in
/// declaration. `fragments` are the team's files in Cedar's JSON form,
/// each with the name errors call its file.
pub fn check(fragments: &[(Value, String)], files: &[SourceFile], problems: &mut Vec<Problem>) {
    let team = Declarations::of(fragments);
    let base = builtin();
    let all_files: Vec<&str> = files.iter().map(|f| f.display.as_str()).collect();
    let all_files = all_files.join(", ");
    let mut refuse = |file: &str, what: String| {
        problems.push(
            Problem::new(ProblemKind::Schema, file, what).with_help(Some(
                "the built-in declarations are what the hard constraints and the facts portcullis \
                 computes rest on: a team's schema may add types, attributes and actions, never \
                 remove, retype or re-parent a built-in one (compare with `portcullis init`)"
                    .to_owned(),
            )),
        );
    };
    let pair = (base, &team);
    check_entity_types(pair, &all_files, &mut refuse);
    check_common_types(pair, &all_files, &mut refuse);
    check_actions(pair, &all_files, &mut refuse);
}

/// Each built-in entity type is declared, with its parents and attributes.
fn check_entity_types(
    (base, team): (&Declarations, &Declarations),
    all_files: &str,
    refuse: &mut dyn FnMut(&str, String),
) {
    for (name, (declared, _)) in &base.entity_types {
        let Some((theirs, file)) = team.entity_types.get(name) else {
            refuse(
                all_files,
                format!("the built-in entity type `{name}` is not declared"),
            );
            continue;
        };
        let (ours, mine) = (
            names(declared.get("memberOfTypes")),
            names(theirs.get("memberOfTypes")),
        );
        if ours != mine {
            refuse(
                file,
                format!(
                    "entity `{name}`: its parents are [{}]; the built-in declaration has [{}]",
                    join(&mine),
                    join(&ours)
                ),
            );
        }
        compare_attributes(
            &format!("entity `{name}`"),
            base.record(declared.get("shape").unwrap_or(&Value::Null)),
            team.record(theirs.get("shape").unwrap_or(&Value::Null)),
            (base, team),
            file,
            refuse,
        );
    }
}

/// Each built-in common type is declared, with its attributes.
fn check_common_types(
    (base, team): (&Declarations, &Declarations),
    all_files: &str,
    refuse: &mut dyn FnMut(&str, String),
) {
    for (name, (declared, _)) in &base.common_types {
        let Some((theirs, file)) = team.common_types.get(name) else {
            refuse(
                all_files,
                format!("the built-in type `{name}` is not declared"),
            );
            continue;
        };
        compare_attributes(
            &format!("type `{name}`"),
            base.record(declared),
            team.record(theirs),
            (base, team),
            file,
            refuse,
        );
    }
}

/// Each built-in action is declared, in its groups, for its principal and
/// resource types, with its context.
fn check_actions(
    (base, team): (&Declarations, &Declarations),
    all_files: &str,
    refuse: &mut dyn FnMut(&str, String),
) {
    for (name, (declared, _)) in &base.actions {
        let Some((theirs, file)) = team.actions.get(name) else {
            refuse(
                all_files,
                format!("the built-in action `{name}` is not declared"),
            );
            continue;
        };
        let (ours, mine) = (
            names(declared.get("memberOf")),
            names(theirs.get("memberOf")),
        );
        if ours != mine {
            refuse(
                file,
                format!(
                    "action `{name}`: it is in [{}]; the built-in declaration puts it in [{}]",
                    join(&mine),
                    join(&ours)
                ),
            );
        }
        let applies = |value: &Value, key: &str| names(value.pointer(&format!("/appliesTo/{key}")));
        for key in ["principalTypes", "resourceTypes"] {
            let (ours, mine) = (applies(declared, key), applies(theirs, key));
            if ours != mine {
                refuse(
                    file,
                    format!(
                        "action `{name}`: its {key} are [{}]; the built-in declaration has [{}]",
                        join(&mine),
                        join(&ours)
                    ),
                );
            }
        }
        let context = |value: &Value| value.pointer("/appliesTo/context").cloned();
        match (context(declared), context(theirs)) {
            // The same built-in type by name: compared above.
            (Some(ours), Some(mine))
                if reference(&ours).is_some_and(|name| base.common_types.contains_key(name))
                    && reference(&ours) == reference(&mine) => {}
            (Some(ours), Some(mine)) => compare_attributes(
                &format!("action `{name}`'s context"),
                base.record(&ours),
                team.record(&mine),
                (base, team),
                file,
                refuse,
            ),
            (Some(_), None) => refuse(file, format!("action `{name}` declares no context")),
            _ => {}
        }
    }
}

/// A declaration as one comparable text, type names resolved.
fn declaration_text(kind: &str, value: &Value, declarations: &Declarations) -> String {
    match kind {
        "entity" => format!(
            "in [{}] {}",
            join(&names(value.get("memberOfTypes"))),
            value
                .get("shape")
                .map(|shape| type_text(shape, declarations))
                .unwrap_or_default()
        ),
        "action" => format!(
            "in [{}] principal [{}] resource [{}] context {}",
            join(&names(value.get("memberOf"))),
            join(&names(value.pointer("/appliesTo/principalTypes"))),
            join(&names(value.pointer("/appliesTo/resourceTypes"))),
            value
                .pointer("/appliesTo/context")
                .map(|context| type_text(context, declarations))
                .unwrap_or_default()
        ),
        _ => type_text(value, declarations),
    }
}

/// Every declaration of OLD's schema that NEW removes or changes, as
/// (file, entry, change): the set's own proof runs against NEW's schema,
/// so a declaration that changes meaning is a change `policy diff` names
/// rather than takes as given. A schema that does not read on one side
/// is one change.
pub fn schema_loosenings(old: &[SourceFile], new: &[SourceFile]) -> Vec<(String, String, String)> {
    let read = |files: &[SourceFile]| -> Option<Vec<(Value, String)>> {
        files
            .iter()
            .map(|file| {
                let (fragment, _) = SchemaFragment::from_cedarschema_str(&file.text).ok()?;
                Some((fragment.to_json_value().ok()?, file.logical.clone()))
            })
            .collect()
    };
    let (Some(old), Some(new)) = (read(old), read(new)) else {
        return vec![(
            "schemas".to_owned(),
            "the schema".to_owned(),
            "does not read on one side, so nothing of it can be compared".to_owned(),
        )];
    };
    let (old, new) = (Declarations::of(&old), Declarations::of(&new));
    let mut found = Vec::new();
    for (kind, before, after) in [
        ("entity", &old.entity_types, &new.entity_types),
        ("action", &old.actions, &new.actions),
        ("type", &old.common_types, &new.common_types),
    ] {
        for (name, (declared, file)) in before {
            let was = declaration_text(kind, declared, &old);
            match after.get(name) {
                None => found.push((
                    file.clone(),
                    format!("{kind} `{name}`"),
                    "removed".to_owned(),
                )),
                Some((theirs, file)) => {
                    let now = declaration_text(kind, theirs, &new);
                    if now != was {
                        found.push((
                            file.clone(),
                            format!("{kind} `{name}`"),
                            format!("changed from `{was}` to `{now}`"),
                        ));
                    }
                }
            }
        }
    }
    found
}

/// Every built-in attribute is declared alike (type and required-ness);
/// more attributes may be declared.
fn compare_attributes(
    what: &str,
    ours: Option<&Map<String, Value>>,
    mine: Option<&Map<String, Value>>,
    (base, team): (&Declarations, &Declarations),
    file: &str,
    refuse: &mut dyn FnMut(&str, String),
) {
    let Some(ours) = ours else {
        return;
    };
    let empty = Map::new();
    let mine = mine.unwrap_or(&empty);
    for (attribute, declared) in ours {
        let expected = attribute_text(attribute, declared, base);
        match mine.get(attribute) {
            None => refuse(
                file,
                format!("{what}: the built-in attribute `{expected}` is not declared"),
            ),
            Some(theirs) => {
                let found = attribute_text(attribute, theirs, team);
                if found != expected {
                    refuse(
                        file,
                        format!(
                            "{what}: `{found}` is declared; the built-in declaration is `{expected}`"
                        ),
                    );
                }
            }
        }
    }
}

/// The common type a context names, if it names one.
fn reference(value: &Value) -> Option<&str> {
    match value.get("type").and_then(Value::as_str)? {
        "Record" => None,
        "EntityOrCommon" => value.get("name").and_then(Value::as_str).map(local),
        name => Some(local(name)),
    }
}

fn join(names: &BTreeSet<String>) -> String {
    names.iter().cloned().collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `builtin_schema.json` is the built-in schema's text in Cedar's JSON
    /// form. After a change to the text, run this test with
    /// `PORTCULLIS_BLESS=1` to write the JSON again.
    #[test]
    fn the_built_in_schema_json_is_its_text_converted() {
        let converted: Vec<Value> = builtin_from_text().into_iter().map(|(v, _)| v).collect();
        assert_eq!(converted.len(), defaults::SCHEMAS.len());
        if std::env::var_os("PORTCULLIS_BLESS").is_some() {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/pdp/builtin_schema.json");
            let text = serde_json::to_string_pretty(&converted).unwrap() + "\n";
            std::fs::write(path, text).unwrap();
            return;
        }
        let kept: Vec<Value> = builtin_from_json()
            .unwrap()
            .into_iter()
            .map(|(v, _)| v)
            .collect();
        assert!(
            kept == converted,
            "src/pdp/builtin_schema.json is not the built-in schema's text: \
             run this test again with PORTCULLIS_BLESS=1"
        );
    }

    fn check_text(text: &str) -> Vec<Problem> {
        let (fragment, _) = SchemaFragment::from_cedarschema_str(text).unwrap();
        let json = fragment.to_json_value().unwrap();
        let file = SourceFile {
            logical: "schemas/team.cedarschema".into(),
            display: "team.cedarschema".into(),
            text: text.into(),
        };
        let mut problems = Vec::new();
        check(&[(json, "team.cedarschema".into())], &[file], &mut problems);
        problems
    }

    fn builtin_text() -> String {
        defaults::SCHEMAS[0].1.to_owned()
    }

    #[test]
    fn the_builtin_schema_and_additions_to_it_pass() {
        assert!(check_text(&builtin_text()).is_empty());
        let added = builtin_text().replace(
            "  action use_tool;",
            "  entity Team;\n  action use_tool;\n  action audit_probe in [\"use_tool\"] appliesTo { principal: [Client], resource: [Tool], context: ToolFacts };",
        );
        assert_ne!(added, builtin_text());
        assert!(check_text(&added).is_empty(), "{:?}", check_text(&added));
    }

    #[test]
    fn spelling_a_type_otherwise_is_the_same_declaration() {
        let text = builtin_text().replace("tier: Tier,", "tier: Portcullis::Tier,");
        assert_ne!(text, builtin_text());
        assert!(check_text(&text).is_empty(), "{:?}", check_text(&text));
    }

    #[test]
    fn an_action_taken_out_of_its_group_is_refused_by_name() {
        let text = builtin_text().replace("action call_tool in [\"use_tool\"]", "action call_tool");
        let problems = check_text(&text);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].message.contains("action `call_tool`"),
            "{problems:?}"
        );
        assert!(
            problems[0].message.contains("Action::use_tool"),
            "{problems:?}"
        );
        assert_eq!(problems[0].file, "team.cedarschema");
    }

    #[test]
    fn a_retyped_removed_or_optional_attribute_is_refused() {
        for (from, to, named) in [
            (
                "writes_inside_root: Bool,\n    // Some path the call reads",
                "writes_inside_root: String,\n    // Some path the call reads",
                "writes_inside_root",
            ),
            ("    effects: Set<String>,\n", "", "effects"),
            (
                "    effects: Set<String>,\n",
                "    effects?: Set<String>,\n",
                "effects",
            ),
            ("entity Tool in [Server]", "entity Tool", "entity `Tool`"),
            (
                "entity Client in [Tier]",
                "entity Client in [Tier, Server]",
                "entity `Client`",
            ),
            (
                "resource: [Shell],",
                "resource: [Shell, Tool],",
                "run_command",
            ),
        ] {
            let text = builtin_text().replacen(from, to, 1);
            assert_ne!(text, builtin_text(), "{from}");
            let problems = check_text(&text);
            assert!(!problems.is_empty(), "{from} -> {to}");
            assert!(
                problems.iter().any(|p| p.message.contains(named)),
                "{from} -> {to}: {problems:?}"
            );
        }
    }

    #[test]
    fn a_missing_declaration_names_it() {
        let text = builtin_text().replace("  entity Shell;\n", "");
        let problems = check_text(&text);
        assert!(
            problems
                .iter()
                .any(|p| p.message.contains("entity type `Shell` is not declared")),
            "{problems:?}"
        );
    }

    fn files(text: &str) -> Vec<SourceFile> {
        vec![SourceFile {
            logical: "schemas/portcullis.cedarschema".into(),
            display: "portcullis.cedarschema".into(),
            text: text.into(),
        }]
    }

    #[test]
    fn a_changed_or_removed_declaration_is_named_an_added_one_is_not() {
        let base = builtin_text().replace(
            "  entity Shell;",
            "  entity Shell;\n  entity Team = { size: Long };",
        );
        assert!(schema_loosenings(&files(&base), &files(&base)).is_empty());
        let respelt = base.replace("tier: Tier,", "tier: Portcullis::Tier,");
        assert!(schema_loosenings(&files(&base), &files(&respelt)).is_empty());
        let added = base.replace("  entity Shell;", "  entity Shell;\n  entity Other;");
        assert_ne!(added, base);
        assert!(schema_loosenings(&files(&base), &files(&added)).is_empty());
        let changed = base.replace("size: Long", "size: String");
        let found = schema_loosenings(&files(&base), &files(&changed));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].1, "entity `Team`");
        assert!(found[0].2.contains("size: String"), "{found:?}");
        let removed = builtin_text();
        let found = schema_loosenings(&files(&base), &files(&removed));
        assert_eq!(found[0].2, "removed", "{found:?}");
        assert_eq!(
            schema_loosenings(&files(&base), &files("namespace {")).len(),
            1
        );
    }

    #[test]
    fn a_context_named_in_either_json_form_is_the_same_declaration() {
        let (fragment, _) = SchemaFragment::from_cedarschema_str(&builtin_text()).unwrap();
        let mut json = fragment.to_json_value().unwrap();
        json["Portcullis"]["actions"]["call_tool"]["appliesTo"]["context"] =
            serde_json::json!({"type": "EntityOrCommon", "name": "Portcullis::ToolFacts"});
        let mut problems = Vec::new();
        check(&[(json, "team.json".into())], &[], &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
    }
}
