//! From files to a validated Cedar policy set: every `.cedar` file parsed as
//! one string (so Cedar's offsets are file offsets), every policy renamed to
//! its `@id`, strict validation with warnings counted as errors.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cedar_policy::{
    PolicyId, PolicySet, PrincipalConstraint, Schema, SchemaFragment, ValidationMode, Validator,
};
use serde::{Deserialize, Serialize};

use super::bundle::{PolicyBundle, SourceFile};
use super::input::{self, ToolTypes};
use super::problem::{Problem, ProblemKind};
use super::schema_floor;

/// The `forbid` policies that must be present in every policy set. Deleting
/// the file that holds them must not quietly lift them.
pub const HARD_CONSTRAINTS: [&str; 6] = [
    "hard.no_process_spawn",
    "hard.no_worktree",
    "hard.no_vcs_metadata_write",
    "hard.no_write_outside_root",
    "hard.no_command_vcs_metadata_write",
    "hard.no_command_write_outside_root",
];

/// Where a policy set comes from: assembled now from the built-ins and a
/// team's folder, or an audit snapshot of an earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provenance {
    Current,
    Recorded,
}

/// Where a policy came from and why it exists.
#[derive(Debug, Clone)]
pub struct PolicyOrigin {
    pub file: Arc<str>,
    pub reason: Arc<str>,
}

/// A policy whose scope names one principal (`principal == ...`), and where
/// its text is in its file, annotations included: a load for other
/// principals only can leave it out unparsed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ScopedPolicy {
    /// The file's logical path in the bundle.
    pub file: String,
    /// Byte offsets of the policy's text in the file.
    pub start: usize,
    pub end: usize,
    /// The principal, as Cedar writes an entity reference.
    pub principal: String,
}

/// What is known of this very set from an earlier load of it
/// (`set_cache.rs`).
#[derive(Debug, Clone, Copy)]
pub struct Known<'a> {
    /// Its schema, in Cedar's JSON form: the set validated strictly
    /// against it.
    pub schema_fragments: &'a [serde_json::Value],
    /// The policies a load for these principals only leaves out.
    pub leave_out: Option<LeaveOut<'a>>,
}

/// The policies scoped to a principal other than those a load decides for.
#[derive(Debug, Clone, Copy)]
pub struct LeaveOut<'a> {
    pub scoped: &'a [ScopedPolicy],
    /// The principals decided for, as Cedar writes an entity reference.
    pub principals: &'a HashSet<String>,
}

impl LeaveOut<'_> {
    /// `file`'s text with every policy scoped to another principal blanked
    /// out, offsets kept. A span that is not a whole stretch of the text
    /// keeps its policy: leaving out less is never wrong.
    pub(super) fn text<'t>(&self, file: &'t SourceFile) -> Cow<'t, str> {
        let mut bytes: Option<Vec<u8>> = None;
        for policy in self.scoped {
            let whole = policy.start <= policy.end
                && file.text.is_char_boundary(policy.start)
                && file.text.is_char_boundary(policy.end);
            if policy.file != file.logical || !whole || self.principals.contains(&policy.principal)
            {
                continue;
            }
            let bytes = bytes.get_or_insert_with(|| file.text.as_bytes().to_vec());
            bytes[policy.start..policy.end].fill(b' ');
        }
        match bytes.map(String::from_utf8) {
            Some(Ok(text)) => Cow::Owned(text),
            _ => Cow::Borrowed(&file.text),
        }
    }
}

/// A schema and a policy set that passed strict validation.
#[derive(Debug)]
pub struct CompiledSet {
    pub schema: Schema,
    pub policies: PolicySet,
    pub origins: HashMap<PolicyId, PolicyOrigin>,
}

/// Parses and validates the bundle's schema and policies, collecting every
/// problem rather than stopping at the first.
/// A set that will decide must hold every hard constraint, and only the
/// built-in file may define them; a recorded set being replayed decided
/// what it decided, with the constraints of its day.
///
/// `known` is what an earlier load of this very set under this release
/// found (see `SetCache`): the schema is read from its JSON form, Cedar's
/// validator is not run again, and the policies it says to leave out are
/// not parsed. A cached schema that does not read falls back to the files.
pub fn compile(
    bundle: &PolicyBundle,
    types: &ToolTypes,
    provenance: Provenance,
    known: Option<&Known<'_>>,
) -> Result<CompiledSet, Vec<Problem>> {
    let mut problems = Vec::new();
    let fragments = known.and_then(|known| fragments_from_json(known.schema_fragments));
    let already_validated = fragments.is_some();
    let leave_out = known.and_then(|known| known.leave_out.filter(|_| already_validated));
    let base = match fragments {
        Some(fragments) => Some(fragments),
        None => compile_schema(&bundle.schemas, &mut problems),
    };
    if provenance == Provenance::Current
        && let Some(fragments) = &base
    {
        let named: Vec<(serde_json::Value, String)> = fragments
            .iter()
            .zip(&bundle.schemas)
            .filter_map(|(fragment, file)| {
                Some((fragment.clone().to_json_value().ok()?, file.display.clone()))
            })
            .collect();
        schema_floor::check(&named, &bundle.schemas, &mut problems);
    }
    let schema =
        base.and_then(|base| with_tool_actions(base, types, &bundle.schemas, &mut problems));
    let files: Vec<SourceFile> = bundle.all_policies().cloned().collect();
    let (policies, origins) = compile_policies(&files, provenance, leave_out, &mut problems);
    let Some(schema) = schema else {
        return Err(problems);
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    if !already_validated {
        validate(&schema, &policies, &origins, &files, types, &mut problems);
        if provenance == Provenance::Current && !types.is_empty() {
            refuse_call_tool_equality(&policies, &origins, &files, &mut problems);
        }
    }
    if problems.is_empty() {
        Ok(CompiledSet {
            schema,
            policies,
            origins,
        })
    } else {
        Err(problems)
    }
}

/// The bundle's schema as Cedar JSON fragments, one per file, for the
/// set cache; `None` if a file does not parse.
pub fn schema_json(bundle: &PolicyBundle) -> Option<Vec<serde_json::Value>> {
    bundle
        .schemas
        .iter()
        .map(|file| {
            let (fragment, _) = SchemaFragment::from_cedarschema_str(&file.text).ok()?;
            fragment.to_json_value().ok()
        })
        .collect()
}

fn fragments_from_json(fragments: &[serde_json::Value]) -> Option<Vec<SchemaFragment>> {
    fragments
        .iter()
        .map(|json| SchemaFragment::from_json_value(json.clone()).ok())
        .collect()
}

/// The schema: the base fragments, plus one action per tool that has a
/// generated input type (`input::fragment`).
fn with_tool_actions(
    mut fragments: Vec<SchemaFragment>,
    types: &ToolTypes,
    files: &[SourceFile],
    problems: &mut Vec<Problem>,
) -> Option<Schema> {
    let names: Vec<&str> = files.iter().map(|f| f.display.as_str()).collect();
    let names = names.join(", ");
    if !types.is_empty() {
        let base: Vec<serde_json::Value> = fragments
            .iter()
            .filter_map(|fragment| fragment.clone().to_json_value().ok())
            .collect();
        let generated = input::fragment(types.iter(), &base)
            .map_err(|err| err.0)
            .and_then(|json| SchemaFragment::from_json_value(json).map_err(|err| err.to_string()));
        match generated {
            Ok(fragment) => fragments.push(fragment),
            Err(message) => {
                problems.push(
                    Problem::new(
                        ProblemKind::Schema,
                        &names,
                        format!("the per-tool actions cannot be generated: {message}"),
                    )
                    .with_help(Some(
                        "each call is decided as its tool's action, whose context is ToolFacts \
                         plus `input`; compare the schema with `portcullis init`"
                            .to_owned(),
                    )),
                );
                return None;
            }
        }
    }
    match Schema::from_schema_fragments(fragments) {
        Ok(schema) => Some(schema),
        Err(err) => {
            problems.push(
                Problem::new(ProblemKind::Schema, &names, err.to_string())
                    .with_help(miette::Diagnostic::help(&err).map(|h| h.to_string())),
            );
            None
        }
    }
}

fn compile_schema(
    files: &[SourceFile],
    problems: &mut Vec<Problem>,
) -> Option<Vec<SchemaFragment>> {
    let mut fragments = Vec::new();
    for file in files {
        match SchemaFragment::from_cedarschema_str(&file.text) {
            Ok((fragment, warnings)) => {
                // Schema warnings (a type shadowing a built-in, say) are
                // refused like validation warnings: they hide a mistake.
                for warning in warnings {
                    problems.push(Problem::from_diagnostic(
                        ProblemKind::Schema,
                        &file.display,
                        &file.text,
                        &warning,
                    ));
                }
                fragments.push(fragment);
            }
            Err(err) => problems.push(Problem::from_diagnostic(
                ProblemKind::Schema,
                &file.display,
                &file.text,
                &err,
            )),
        }
    }
    (fragments.len() == files.len()).then_some(fragments)
}

fn compile_policies(
    files: &[SourceFile],
    provenance: Provenance,
    leave_out: Option<LeaveOut<'_>>,
    problems: &mut Vec<Problem>,
) -> (PolicySet, HashMap<PolicyId, PolicyOrigin>) {
    let mut set = PolicySet::new();
    let mut origins: HashMap<PolicyId, PolicyOrigin> = HashMap::new();
    let problems_before = problems.len();
    for file in files {
        let text = match &leave_out {
            Some(leave_out) => leave_out.text(file),
            None => Cow::Borrowed(file.text.as_str()),
        };
        match text.parse::<PolicySet>() {
            Ok(parsed) => add_file(
                file,
                &parsed,
                provenance,
                (&mut set, &mut origins),
                problems,
            ),
            Err(errors) => {
                for error in errors.iter() {
                    problems.push(Problem::from_diagnostic(
                        ProblemKind::Parse,
                        &file.display,
                        &file.text,
                        error,
                    ));
                }
            }
        }
    }
    // A file that does not parse would make its hard constraints look
    // missing; report only what is really wrong.
    if problems.len() == problems_before && matches!(provenance, Provenance::Current) {
        require_hard_constraints(&set, problems);
    }
    (set, origins)
}

/// Adds a parsed file's templates and policies to `set`, each renamed to
/// its `@id`, remembering where each came from.
fn add_file(
    file: &SourceFile,
    parsed: &PolicySet,
    provenance: Provenance,
    (set, origins): (&mut PolicySet, &mut HashMap<PolicyId, PolicyOrigin>),
    problems: &mut Vec<Problem>,
) {
    let display: Arc<str> = Arc::from(file.display.as_str());
    let duplicate = |err: cedar_policy::PolicySetError| {
        Problem::new(ProblemKind::DuplicateId, &file.display, err.to_string())
    };
    for template in parsed.templates() {
        let (id, reason) = id_and_reason(template.annotations());
        if reserved(file, id, provenance, problems) {
            continue;
        }
        let source = template.to_cedar();
        let named = name_policy(file, &display, &source, id, reason, origins, problems);
        if let Some((id, origin)) = named {
            if let Err(err) = set.add_template(template.new_id(id.clone())) {
                problems.push(duplicate(err));
            }
            origins.insert(id, origin);
        }
    }
    for policy in parsed.policies() {
        let (id, reason) = id_and_reason(policy.annotations());
        if reserved(file, id, provenance, problems) {
            continue;
        }
        let source = policy.to_cedar().unwrap_or_default();
        let named = name_policy(file, &display, &source, id, reason, origins, problems);
        if let Some((id, origin)) = named {
            if let Err(err) = set.add(policy.new_id(id.clone())) {
                problems.push(duplicate(err));
            }
            origins.insert(id, origin);
        }
    }
}

/// Where the policies of the bundle scoped to one principal are, for a
/// later load to leave out those of other principals. A policy whose text
/// cannot be found in its file in order is not listed (and so never left
/// out); a file that does not parse lists none.
pub fn scoped_policies(bundle: &PolicyBundle) -> Vec<ScopedPolicy> {
    let mut scoped = Vec::new();
    for file in bundle.all_policies() {
        let Ok(parsed) = file.text.parse::<PolicySet>() else {
            continue;
        };
        let mut cursor = 0;
        for policy in parsed.policies() {
            let Some(text) = policy.to_cedar() else {
                continue;
            };
            let Some(start) = file.text[cursor..].find(&text).map(|at| at + cursor) else {
                continue;
            };
            cursor = start + text.len();
            if let PrincipalConstraint::Eq(principal) = policy.principal_constraint() {
                scoped.push(ScopedPolicy {
                    file: file.logical.clone(),
                    start,
                    end: cursor,
                    principal: principal.to_string(),
                });
            }
        }
    }
    scoped
}

/// A policy's `@id` and `@reason`, found among its annotations: Cedar's
/// lookup by key parses the key with its grammar at every call, a fifth of
/// the load of a thousand policies.
fn id_and_reason<'a>(
    annotations: impl Iterator<Item = (&'a str, &'a str)>,
) -> (Option<&'a str>, Option<&'a str>) {
    let (mut id, mut reason) = (None, None);
    for (key, value) in annotations {
        match key {
            "id" => id = Some(value),
            "reason" => reason = Some(value),
            _ => {}
        }
    }
    (id, reason)
}

/// Every built-in hard constraint is in the set, as a forbid.
fn require_hard_constraints(set: &PolicySet, problems: &mut Vec<Problem>) {
    for required in HARD_CONSTRAINTS {
        let id = PolicyId::new(required);
        let is_forbid = set
            .policy(&id)
            .is_some_and(|p| p.effect() == cedar_policy::Effect::Forbid);
        if !is_forbid {
            problems.push(
                Problem::new(
                    ProblemKind::MissingHardConstraint,
                    "policies",
                    format!("the hard constraint `{required}` is missing or is not a forbid"),
                )
                .with_help(Some(
                    "hard constraints are built into portcullis and added to every set; \
                     this set was assembled without them"
                        .to_owned(),
                )),
            );
        }
    }
}

/// Refuses a team's policy in the `hard.` namespace: the built-in hard
/// constraints are the only ones, so a team cannot shadow, weaken or
/// pretend to restore them.
fn reserved(
    file: &SourceFile,
    id: Option<&str>,
    provenance: Provenance,
    problems: &mut Vec<Problem>,
) -> bool {
    let builtin = file.logical.starts_with("builtin/");
    let Some(id) = id.filter(|id| id.trim_start().to_ascii_lowercase().starts_with("hard.")) else {
        return false;
    };
    if provenance == Provenance::Current && !builtin {
        problems.push(
            Problem::new(
                ProblemKind::ReservedHardConstraint,
                &file.display,
                format!(
                    "`{id}`: the `hard.` namespace belongs to the built-in hard constraints; \
                     a team's file may not define a policy in it"
                ),
            )
            .with_help(Some(
                "the hard constraints are built into portcullis and always loaded \
                 (policies/builtin/hard_constraints.cedar is a copy for reading); \
                 give your policy another id"
                    .to_owned(),
            )),
        );
        return true;
    }
    false
}

/// Checks a policy's `@id` and `@reason`; returns its id and origin when both
/// are present and the id is new.
fn name_policy(
    file: &SourceFile,
    display: &Arc<str>,
    source: &str,
    id: Option<&str>,
    reason: Option<&str>,
    origins: &HashMap<PolicyId, PolicyOrigin>,
    problems: &mut Vec<Problem>,
) -> Option<(PolicyId, PolicyOrigin)> {
    let locate = |problem: Problem| match file.text.find(source) {
        Some(offset) if !source.is_empty() => problem.at_offset(&file.text, offset),
        _ => problem,
    };
    let Some(id) = id else {
        problems.push(locate(
            Problem::new(ProblemKind::MissingId, &file.display, "policy has no @id")
                .with_help(Some("add @id(\"area.what_it_does\") above it".to_owned())),
        ));
        return None;
    };
    let Some(reason) = reason else {
        problems.push(locate(
            Problem::new(
                ProblemKind::MissingReason,
                &file.display,
                format!("policy `{id}` has no @reason"),
            )
            .with_help(Some(
                "add @reason(\"...\"): it is what a denied caller and an auditor read".to_owned(),
            )),
        ));
        return None;
    };
    let policy_id = PolicyId::new(id);
    if let Some(first) = origins.get(&policy_id) {
        problems.push(locate(Problem::new(
            ProblemKind::DuplicateId,
            &file.display,
            format!("@id(\"{id}\") is already used in {}", first.file),
        )));
        return None;
    }
    Some((
        policy_id,
        PolicyOrigin {
            file: Arc::clone(display),
            reason: Arc::from(reason),
        },
    ))
}

fn validate(
    schema: &Schema,
    policies: &PolicySet,
    origins: &HashMap<PolicyId, PolicyOrigin>,
    files: &[SourceFile],
    types: &ToolTypes,
    problems: &mut Vec<Problem>,
) {
    let validator = Validator::new(schema.clone());
    let result = validator.validate(policies, ValidationMode::Strict);
    let file_of = |id: &PolicyId| -> (&str, &str) {
        origins
            .get(id)
            .and_then(|origin| files.iter().find(|f| *f.display == *origin.file))
            .map_or(("policies", ""), |f| (f.display.as_str(), f.text.as_str()))
    };
    // A missing attribute under `context.input`, or a `has` test that can
    // never hold, may be a read of an argument no policy may see: say so.
    let unreadable = |id: &PolicyId| {
        policy_json(policies, id).and_then(|json| input::check_reads(&json, types, false))
    };
    let mut reported = std::collections::HashSet::new();
    for error in result.validation_errors() {
        let (file, text) = file_of(error.policy_id());
        let problem = Problem::from_diagnostic(ProblemKind::Validation, file, text, error);
        reported.insert(error.policy_id().clone());
        problems.push(match unreadable(error.policy_id()) {
            Some(reason) => problem.with_help(Some(reason)),
            None => problem,
        });
    }
    for warning in result.validation_warnings() {
        let (file, text) = file_of(warning.policy_id());
        let problem = Problem::from_diagnostic(ProblemKind::ValidationWarning, file, text, warning);
        reported.insert(warning.policy_id().clone());
        problems.push(match unreadable(warning.policy_id()) {
            Some(reason) => problem.with_help(Some(reason)),
            None => problem,
        });
    }
    // Cedar accepts a `has` test of a redacted argument inside a condition
    // that can still hold (`context.input has content || ...`): it is
    // always false, live and in replay, but it reads what the team marked
    // unreadable. A policy scoped to the tools it reads is refused for it.
    let ids = policies
        .policies()
        .map(|p| p.id().clone())
        .chain(policies.templates().map(|t| t.id().clone()));
    for id in ids.filter(|id| !reported.contains(id)) {
        let Some(reason) =
            policy_json(policies, &id).and_then(|json| input::check_reads(&json, types, true))
        else {
            continue;
        };
        let (file, _) = file_of(&id);
        problems.push(
            Problem::new(
                ProblemKind::Validation,
                file,
                format!("policy `{id}` reads an argument no policy may read"),
            )
            .with_help(Some(reason)),
        );
    }
}

/// A policy or template in Cedar's JSON form.
fn policy_json(policies: &PolicySet, id: &PolicyId) -> Option<serde_json::Value> {
    match policies.policy(id) {
        Some(policy) => policy.to_json().ok(),
        None => policies.template(id).and_then(|t| t.to_json().ok()),
    }
}

/// Refuses `action == Action::"call_tool"`, in the scope or a condition:
/// each call is decided as its tool's own action, so such a policy would
/// quietly never apply (a forbid written so would forbid nothing).
fn refuse_call_tool_equality(
    policies: &PolicySet,
    origins: &HashMap<PolicyId, PolicyOrigin>,
    files: &[SourceFile],
    problems: &mut Vec<Problem>,
) {
    let ids = policies
        .policies()
        .map(|p| p.id().clone())
        .chain(policies.templates().map(|t| t.id().clone()));
    let mut found: Vec<(String, PolicyId)> = ids
        .filter(|id| policy_json(policies, id).is_some_and(|json| input::compares_call_tool(&json)))
        .map(|id| (id.to_string(), id))
        .collect();
    found.sort();
    for (name, id) in found {
        let origin = origins.get(&id);
        let file = origin.map_or("policies", |o| &*o.file);
        let text = files
            .iter()
            .find(|f| f.display == file)
            .map(|f| f.text.as_str());
        let problem = Problem::new(
            ProblemKind::Validation,
            file,
            format!(
                "policy `{name}` compares `action == Action::\"call_tool\"`, which no call is: \
                 each call is decided as its tool's action (`Action::\"builtin/write_file\"`), \
                 a child of call_tool"
            ),
        )
        .with_help(Some(
            "write `action in Portcullis::Action::\"call_tool\"` (every call) or \
             `action == Portcullis::Action::\"server/tool\"` (one tool's calls)"
                .to_owned(),
        ));
        let at = text.and_then(|text| {
            let needle = format!("@id(\"{name}\")");
            text.find(&needle).map(|offset| (text, offset))
        });
        problems.push(match at {
            Some((text, offset)) => problem.at_offset(text, offset),
            None => problem,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_and_reason_are_what_cedar_reads_for_those_keys() {
        let set: PolicySet =
            r#"@id("a") @reason("why") @other("x") permit (principal, action, resource);
            @reason("") permit (principal, action, resource);"#
                .parse()
                .unwrap();
        for policy in set.policies() {
            assert_eq!(
                id_and_reason(policy.annotations()),
                (policy.annotation("id"), policy.annotation("reason"))
            );
        }
    }
}
