//! Tests of the decision point as a whole: loading (and refusing) policy
//! sets, and the allow / ask / deny passes with every fail-closed case.

use std::collections::BTreeSet;

use super::*;
use crate::facts::{ToolFacts, Transport};
use crate::tools::{Registry, ToolId};

const ALLOW_BUILTIN_TO_PAIRED: &str = r#"
@id("allow.paired.builtin")
@reason("paired clients may use the built-in workspace tools")
permit (
  principal in Portcullis::Tier::"paired",
  action in Portcullis::Action::"use_tool",
  resource in Portcullis::Server::"builtin"
);
"#;

fn clients() -> Vec<ClientRecord> {
    vec![
        ClientRecord {
            name: "alice".into(),
            tier: "paired".into(),
        },
        ClientRecord {
            name: "rita".into(),
            tier: "readonly".into(),
        },
    ]
}

fn with_policy(name: &str, text: &str) -> PolicyBundle {
    let mut bundle = PolicyBundle::builtin();
    bundle.policies.push(SourceFile {
        logical: format!("policies/{name}"),
        display: format!("policies/{name}"),
        text: text.to_owned(),
    });
    bundle
}

fn engine(bundle: &PolicyBundle) -> Engine {
    Engine::load(bundle, &Registry::builtin().unwrap(), &clients()).unwrap()
}

fn problems(bundle: &PolicyBundle) -> Vec<Problem> {
    Engine::load(bundle, &Registry::builtin().unwrap(), &clients())
        .unwrap_err()
        .problems
}

fn clean() -> ToolFacts {
    ToolFacts::without_paths(Transport::Cli)
}

fn decide(
    engine: &Engine,
    client: &str,
    action: ToolAction,
    tool: &str,
    facts: &ToolFacts,
) -> Decision {
    let (server, name) = tool.split_once('/').unwrap();
    let id = ToolId::new(server, name);
    // A call of a typed tool carries its input: one argument set that fits
    // every built-in tool.
    let mut facts = facts.clone();
    if action == ToolAction::Call && facts.input.is_none() {
        let arguments = serde_json::json!({"path": "a.txt", "content": "x",
            "old_string": "a", "new_string": "b", "pattern": "x"});
        facts.input = engine.tool_input(&id, &arguments).transpose().unwrap();
    }
    engine.decide(&Query::tool(
        client,
        action,
        &id,
        &facts,
        "client_elicitation",
    ))
}

fn ids(decision: &Decision) -> Vec<&str> {
    decision.policies.iter().map(|p| p.id.as_str()).collect()
}

// ---- loading ----

#[test]
fn the_builtin_set_loads_and_names_every_policy_by_its_id() {
    let engine = engine(&PolicyBundle::builtin());
    let ids: BTreeSet<String> = engine
        .policies()
        .policies()
        .map(|p| p.id().to_string())
        .collect();
    assert!(ids.contains("hard.no_process_spawn"));
    assert!(ids.contains("approval.writes"));
    assert_eq!(ids.len(), engine.policy_count());
    assert_eq!(engine.tiers(), ["owner", "paired", "readonly"]);
}

#[test]
fn a_typo_is_refused_with_file_line_and_column() {
    let bundle = with_policy(
        "50_typo.cedar",
        "\n\n@id(\"x\") @reason(\"r\")\npermit (principal, action, resource) when { context.approvd };\n",
    );
    let problems = problems(&bundle);
    // One problem for each action the policy applies to, all at the typo;
    // where the action's context has a near name, the help suggests it.
    assert!(!problems.is_empty());
    for p in &problems {
        assert_eq!(p.kind, ProblemKind::Validation);
        assert_eq!(p.file, "policies/50_typo.cedar");
        assert_eq!((p.line, p.column), (Some(4), Some(45)), "{p}");
        assert!(p.message.contains("approvd"), "{p}");
    }
    assert!(
        problems
            .iter()
            .any(|p| p.help.as_deref() == Some("did you mean `approved`?"))
    );
}

#[test]
fn a_parse_error_is_refused_with_file_line_and_column() {
    let bundle = with_policy(
        "50_parse.cedar",
        "@id(\"x\") @reason(\"r\")\npermit (principal, action, resource) when { context.a =~ 1 };\n",
    );
    let problems = problems(&bundle);
    assert_eq!(problems[0].kind, ProblemKind::Parse);
    assert_eq!(problems[0].file, "policies/50_parse.cedar");
    assert_eq!(problems[0].line, Some(2));
}

#[test]
fn a_duplicate_id_names_both_files() {
    let bundle = with_policy(
        "50_dup.cedar",
        "@id(\"allow.x\") @reason(\"r\")\npermit (principal, action, resource);\n",
    );
    let mut bundle = bundle;
    bundle.policies.push(SourceFile {
        logical: "policies/60_dup.cedar".into(),
        display: "policies/60_dup.cedar".into(),
        text: "@id(\"allow.x\") @reason(\"r\")\nforbid (principal, action, resource);\n".into(),
    });
    let problems = problems(&bundle);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::DuplicateId);
    assert_eq!(problems[0].file, "policies/60_dup.cedar");
    assert!(
        problems[0].message.contains("policies/50_dup.cedar"),
        "{}",
        problems[0]
    );
    assert_eq!(problems[0].line, Some(1));
}

#[test]
fn a_team_policy_in_the_hard_namespace_is_refused_with_its_file() {
    for (text, _) in [
        // Shadowing with a permit, restating a weaker forbid, a new one.
        (
            "@id(\"hard.no_worktree\") @reason(\"r\")\npermit (principal, action, resource);\n",
            (),
        ),
        (
            "@id(\"hard.no_write_outside_root\") @reason(\"r\")\nforbid (principal, action, resource) when { false };\n",
            (),
        ),
        (
            "@id(\"hard.mine\") @reason(\"r\")\nforbid (principal, action, resource);\n",
            (),
        ),
    ] {
        let bundle = with_policy("05_exception.cedar", text);
        let problems = problems(&bundle);
        assert!(
            problems
                .iter()
                .any(|p| p.kind == ProblemKind::ReservedHardConstraint
                    && p.file == "policies/05_exception.cedar"),
            "{text}: {problems:?}"
        );
    }
}

#[test]
fn a_policy_without_id_or_reason_is_refused_where_it_stands() {
    let bundle = with_policy(
        "50_anon.cedar",
        "// first\n\npermit (principal, action, resource);\n@id(\"y\")\nforbid (principal, action, resource);\n",
    );
    let problems = problems(&bundle);
    let kinds: Vec<ProblemKind> = problems.iter().map(|p| p.kind).collect();
    assert_eq!(kinds, [ProblemKind::MissingId, ProblemKind::MissingReason]);
    assert_eq!(problems[0].line, Some(3));
    assert_eq!(problems[1].line, Some(4));
}

#[test]
fn an_impossible_policy_is_refused() {
    let bundle = with_policy(
        "50_impossible.cedar",
        "@id(\"never\") @reason(\"r\")\npermit (principal, action in Portcullis::Action::\"call_tool\", resource) when { 1 == 2 };\n",
    );
    let problems = problems(&bundle);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::ValidationWarning);
    assert_eq!(problems[0].file, "policies/50_impossible.cedar");
    // Where the policy starts (its annotations).
    assert_eq!(problems[0].line, Some(1));
}

#[test]
fn a_set_assembled_without_the_builtins_is_refused() {
    let mut bundle = PolicyBundle::builtin();
    bundle.builtin.clear();
    let problems = problems(&bundle);
    assert_eq!(problems.len(), HARD_CONSTRAINTS.len(), "{problems:?}");
    assert!(
        problems
            .iter()
            .all(|p| p.kind == ProblemKind::MissingHardConstraint)
    );
}

#[test]
fn a_builtin_turned_into_a_permit_is_refused() {
    let mut bundle = PolicyBundle::builtin();
    let hard = &mut bundle.builtin[0];
    hard.text = hard.text.replacen("\nforbid (", "\npermit (", 1);
    let problems = problems(&bundle);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::MissingHardConstraint);
    assert!(problems[0].message.contains("hard.no_process_spawn"));
}

#[test]
fn a_schema_error_names_the_schema_file() {
    let mut bundle = PolicyBundle::builtin();
    bundle.schemas[0]
        .text
        .push_str("\nentity Broken = { x: NoSuchType };\n");
    let problems = problems(&bundle);
    assert!(
        problems.iter().any(|p| p.kind == ProblemKind::Schema),
        "{problems:?}"
    );
}

#[test]
fn a_tiers_file_with_something_other_than_tiers_is_refused() {
    let mut bundle = PolicyBundle::builtin();
    bundle.tiers.text =
        r#"[{"uid": {"type": "Portcullis::Client", "id": "sneaky"}, "attrs": {}, "parents": []}]"#
            .into();
    let problems = problems(&bundle);
    assert_eq!(problems[0].kind, ProblemKind::Entities);
}

#[test]
fn a_tiers_file_that_is_not_json_is_refused_with_its_line() {
    let mut bundle = PolicyBundle::builtin();
    bundle.tiers.text = "[\n  {,\n]".into();
    let problems = problems(&bundle);
    assert_eq!(problems[0].kind, ProblemKind::Entities);
    assert_eq!(problems[0].line, Some(2));
}

#[test]
fn a_tier_with_a_mistyped_attribute_is_refused() {
    let mut bundle = PolicyBundle::builtin();
    bundle.tiers.text = r#"[{"uid": {"type": "Portcullis::Tier", "id": "paired"}, "attrs": {"capabilities": "read"}, "parents": []},
                            {"uid": {"type": "Portcullis::Tier", "id": "readonly"}, "attrs": {"capabilities": []}, "parents": []}]"#.into();
    let problems = problems(&bundle);
    assert_eq!(problems[0].kind, ProblemKind::Entities, "{problems:?}");
}

#[test]
fn a_client_of_an_undeclared_tier_is_refused() {
    let err = Engine::load(
        &PolicyBundle::builtin(),
        &Registry::builtin().unwrap(),
        &[ClientRecord {
            name: "x".into(),
            tier: "admin".into(),
        }],
    )
    .unwrap_err();
    assert!(err.problems[0].message.contains("admin"));
}

#[test]
fn a_bad_path_class_table_is_refused() {
    let mut bundle = PolicyBundle::builtin();
    bundle.path_classes.text = "[secrets]\nglobs = [\"[\"]".into();
    let problems = problems(&bundle);
    assert_eq!(problems[0].kind, ProblemKind::PathClasses);
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let mut bundle = with_policy("50_a.cedar", "permit (principal, action, resource);");
    bundle.policies.push(SourceFile {
        logical: "policies/51_b.cedar".into(),
        display: "policies/51_b.cedar".into(),
        text: "permit (".into(),
    });
    bundle.path_classes.text = "nonsense".into();
    let kinds: BTreeSet<String> = problems(&bundle)
        .iter()
        .map(|p| format!("{:?}", p.kind))
        .collect();
    assert!(
        kinds.contains("MissingId") && kinds.contains("Parse") && kinds.contains("PathClasses"),
        "{kinds:?}"
    );
}

// ---- deciding ----

#[test]
fn the_empty_allowlist_denies_everything() {
    let engine = engine(&PolicyBundle::builtin());
    for tool in [
        "builtin/read_file",
        "builtin/list_dir",
        "builtin/search",
        "builtin/write_file",
        "builtin/edit_file",
    ] {
        for action in [ToolAction::Discover, ToolAction::Call] {
            let d = decide(&engine, "alice", action, tool, &clean());
            assert_eq!(d.outcome, Outcome::Deny, "{tool} {action:?}");
            assert_eq!(d.cause, Cause::NotPermitted, "{tool} {action:?}");
        }
    }
}

#[test]
fn an_allowlisted_read_is_allowed_with_its_permit() {
    let engine = engine(&with_policy("20_allow.cedar", ALLOW_BUILTIN_TO_PAIRED));
    let d = decide(
        &engine,
        "alice",
        ToolAction::Call,
        "builtin/read_file",
        &clean(),
    );
    assert_eq!((d.outcome, d.cause), (Outcome::Allow, Cause::Permitted));
    assert_eq!(ids(&d), ["allow.paired.builtin"]);
    assert_eq!(
        &*d.policies[0].reason,
        "paired clients may use the built-in workspace tools"
    );
    assert_eq!(&*d.policies[0].file, "policies/20_allow.cedar");
    assert!(d.errors.is_empty());
    assert_eq!(d.policy_set.cedar_sdk_version, "4.14.1");
    assert_eq!(d.policy_set.hash.len(), 64);
}

#[test]
fn an_allowlisted_write_asks_and_names_the_approval_policy() {
    let engine = engine(&with_policy("20_allow.cedar", ALLOW_BUILTIN_TO_PAIRED));
    let d = decide(
        &engine,
        "alice",
        ToolAction::Call,
        "builtin/write_file",
        &clean(),
    );
    assert_eq!(
        (d.outcome, d.cause),
        (Outcome::Ask, Cause::ApprovalRequired)
    );
    assert_eq!(ids(&d), ["approval.writes"]);
    // Listing the write tool needs no approval.
    let d = decide(
        &engine,
        "alice",
        ToolAction::Discover,
        "builtin/write_file",
        &clean(),
    );
    assert_eq!(d.outcome, Outcome::Allow);
}

#[test]
fn a_hard_constraint_beats_the_allowlist_and_an_approval() {
    let engine = engine(&with_policy("20_allow.cedar", ALLOW_BUILTIN_TO_PAIRED));
    let escaping = ToolFacts {
        writes_inside_root: false,
        ..clean()
    };
    let d = decide(
        &engine,
        "alice",
        ToolAction::Call,
        "builtin/write_file",
        &escaping,
    );
    assert_eq!((d.outcome, d.cause), (Outcome::Deny, Cause::Forbidden));
    assert_eq!(ids(&d), ["hard.no_write_outside_root"]);
    assert_eq!(
        d.reason(),
        "writes outside the workspace root are never allowed"
    );
    let into_git = ToolFacts {
        writes_vcs_metadata: true,
        touches_vcs_metadata: true,
        ..clean()
    };
    let d = decide(
        &engine,
        "alice",
        ToolAction::Call,
        "builtin/edit_file",
        &into_git,
    );
    assert_eq!(ids(&d), ["hard.no_vcs_metadata_write"]);
}

#[test]
fn the_capability_gate_denies_a_tier_without_the_capability() {
    let engine = engine(&with_policy(
        "20_allow.cedar",
        "@id(\"allow.all\") @reason(\"everyone\")\npermit (principal, action in Portcullis::Action::\"use_tool\", resource);",
    ));
    let d = decide(
        &engine,
        "rita",
        ToolAction::Call,
        "builtin/write_file",
        &clean(),
    );
    assert_eq!((d.outcome, d.cause), (Outcome::Deny, Cause::Forbidden));
    assert_eq!(ids(&d), ["tier.capability_gate"]);
    // The tool stays visible, so the refusal can name the capability.
    let d = decide(
        &engine,
        "rita",
        ToolAction::Discover,
        "builtin/write_file",
        &clean(),
    );
    assert_eq!(d.outcome, Outcome::Allow);
    let d = decide(
        &engine,
        "rita",
        ToolAction::Call,
        "builtin/read_file",
        &clean(),
    );
    assert_eq!(d.outcome, Outcome::Allow);
}

#[test]
fn reads_outside_the_root_and_secrets_are_denied() {
    let engine = engine(&with_policy("20_allow.cedar", ALLOW_BUILTIN_TO_PAIRED));
    let outside = ToolFacts {
        reads_inside_root: false,
        ..clean()
    };
    let d = decide(
        &engine,
        "alice",
        ToolAction::Call,
        "builtin/read_file",
        &outside,
    );
    assert_eq!(ids(&d), ["paths.no_read_outside_root"]);
    let secret = ToolFacts {
        path_classes: BTreeSet::from(["secrets".to_owned()]),
        ..clean()
    };
    let d = decide(
        &engine,
        "alice",
        ToolAction::Call,
        "builtin/read_file",
        &secret,
    );
    assert_eq!((d.outcome, d.cause), (Outcome::Deny, Cause::Forbidden));
    assert_eq!(ids(&d), ["paths.no_secrets"]);
}

#[test]
fn a_policy_may_refuse_an_approval_channel() {
    let engine = engine(&with_policy(
        "20_allow.cedar",
        &format!(
            "{ALLOW_BUILTIN_TO_PAIRED}\n@id(\"approval.not_from_client\") @reason(\"writes are approved only at the console\")\n\
             forbid (principal, action in Portcullis::Action::\"call_tool\", resource) when {{ context.approval_channel == \"client_elicitation\" }};"
        ),
    ));
    let d = decide(
        &engine,
        "alice",
        ToolAction::Call,
        "builtin/write_file",
        &clean(),
    );
    assert_eq!((d.outcome, d.cause), (Outcome::Deny, Cause::Forbidden));
    assert_eq!(ids(&d), ["approval.not_from_client"]);
}

// ---- failing closed ----

#[test]
fn an_unknown_client_is_denied_before_cedar() {
    // A permit for every principal: without the existence check, Cedar
    // would skip the erroring capability gate and allow.
    let engine = engine(&with_policy(
        "20_allow.cedar",
        "@id(\"allow.all\") @reason(\"everyone\")\npermit (principal, action, resource);",
    ));
    let d = decide(
        &engine,
        "ghost",
        ToolAction::Call,
        "builtin/read_file",
        &clean(),
    );
    assert_eq!((d.outcome, d.cause), (Outcome::Deny, Cause::UnknownClient));
}

#[test]
fn an_unknown_tool_is_denied_before_cedar() {
    let engine = engine(&with_policy(
        "20_allow.cedar",
        "@id(\"allow.all\") @reason(\"everyone\")\npermit (principal, action, resource);",
    ));
    let d = decide(&engine, "alice", ToolAction::Call, "shell/exec", &clean());
    assert_eq!((d.outcome, d.cause), (Outcome::Deny, Cause::UnknownTool));
}

#[test]
fn a_policy_that_errors_denies_instead_of_being_skipped() {
    // `forbid ... when { 9223372036854775807 + (if context.approved then 1 else 0) > 0 }`
    // overflows on the approved pass; the permit alone would allow, and so
    // would Cedar, which skips the erroring forbid.
    let engine = engine(&with_policy(
        "20_allow.cedar",
        &format!(
            "{ALLOW_BUILTIN_TO_PAIRED}\n@id(\"overflow\") @reason(\"errors at evaluation\")\n\
             forbid (principal, action in Portcullis::Action::\"call_tool\", resource)\n\
             when {{ 9223372036854775807 + (if context.reads_inside_root then 1 else 0) > 0 }};"
        ),
    ));
    let d = decide(
        &engine,
        "alice",
        ToolAction::Call,
        "builtin/read_file",
        &clean(),
    );
    assert_eq!((d.outcome, d.cause), (Outcome::Deny, Cause::PolicyError));
    assert_eq!(d.errors.len(), 1);
    assert_eq!(d.errors[0].policy.as_deref(), Some("overflow"));
    // Cedar itself allowed it: the deny is portcullis's doing.
    let request = cedar_request(&engine, "alice", "builtin/read_file");
    let response = engine
        .authorizer
        .is_authorized(&request, &engine.policies, &engine.entities);
    assert_eq!(response.decision(), cedar_policy::Decision::Allow);
}

#[test]
fn an_error_only_in_the_approval_pass_denies_too() {
    let engine = engine(&with_policy(
        "20_allow.cedar",
        &format!(
            "{ALLOW_BUILTIN_TO_PAIRED}\n@id(\"overflow.approved\") @reason(\"errors when approved\")\n\
             forbid (principal, action in Portcullis::Action::\"call_tool\", resource)\n\
             when {{ 9223372036854775807 + (if context.approved then 1 else 0) > 0 }};"
        ),
    ));
    let d = decide(
        &engine,
        "alice",
        ToolAction::Call,
        "builtin/write_file",
        &clean(),
    );
    assert_eq!((d.outcome, d.cause), (Outcome::Deny, Cause::PolicyError));
    assert_eq!(d.errors[0].policy.as_deref(), Some("overflow.approved"));
}

#[test]
fn a_schema_the_context_does_not_build_against_refuses_to_load() {
    // The team's schema requires a context attribute portcullis does not
    // compute. No policy reads it, so strict validation passes; the request
    // shape check refuses the set, so nothing is ever decided under it.
    let mut bundle = with_policy("20_allow.cedar", ALLOW_BUILTIN_TO_PAIRED);
    bundle.schemas[0].text = bundle.schemas[0].text.replace(
        "    path_classes: Set<String>,\n  };",
        "    path_classes: Set<String>,\n    session: String,\n  };",
    );
    assert!(bundle.schemas[0].text.contains("session: String"));
    let problems = problems(&bundle);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].kind, ProblemKind::Context);
    assert!(
        problems[0].message.contains("does not match the schema"),
        "{}",
        problems[0]
    );
}

#[test]
fn a_schema_with_a_mistyped_context_attribute_refuses_to_load() {
    let mut bundle = PolicyBundle::builtin();
    // An attribute no default policy reads, so validation has nothing to
    // say and the check of the context portcullis builds must.
    bundle.schemas[0].text = bundle.schemas[0].text.replacen(
        "    touches_vcs_metadata: Bool,",
        "    touches_vcs_metadata: Long,",
        1,
    );
    assert!(
        bundle.schemas[0]
            .text
            .contains("touches_vcs_metadata: Long")
    );
    let problems = problems(&bundle);
    assert_eq!(problems[0].kind, ProblemKind::Schema, "{problems:?}");
    assert!(
        problems[0]
            .message
            .contains("`touches_vcs_metadata: Long` is declared"),
        "the schema floor names the declaration: {problems:?}"
    );
}

fn cedar_request(engine: &Engine, client: &str, tool: &str) -> cedar_policy::Request {
    use cedar_policy::{Context, RestrictedExpression as R};
    let facts = clean();
    let context = Context::from_pairs([
        ("approved".to_owned(), R::new_bool(false)),
        ("approval_channel".to_owned(), R::new_string("none".into())),
        ("approvers".to_owned(), R::new_long(0)),
        (
            "transport".to_owned(),
            R::new_string(facts.transport.as_str().into()),
        ),
        ("reads_inside_root".to_owned(), R::new_bool(true)),
        ("writes_inside_root".to_owned(), R::new_bool(true)),
        ("touches_vcs_metadata".to_owned(), R::new_bool(false)),
        ("writes_vcs_metadata".to_owned(), R::new_bool(false)),
        ("path_classes".to_owned(), R::new_set([])),
    ])
    .unwrap();
    let (server, name) = tool.split_once('/').unwrap();
    cedar_policy::Request::new(
        engine.clients[client].clone(),
        engine.actions.call_tool.clone(),
        engine.tools[&ToolId::new(server, name)].clone(),
        context,
        Some(&engine.schema),
    )
    .unwrap()
}

// ---- fixtures ----

#[test]
fn the_shipped_fixtures_pass() {
    let bundle = PolicyBundle::builtin();
    let engine = engine(&bundle);
    let results = run_fixtures(&engine, &bundle);
    assert!(results.len() >= 25, "{}", results.len());
    let failed: Vec<&CaseResult> = results.iter().filter(|r| !r.passed()).collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn the_shipped_fixtures_pin_every_default_policy() {
    let bundle = PolicyBundle::builtin();
    let engine = engine(&bundle);
    let pinned: BTreeSet<String> = bundle
        .tests
        .iter()
        .flat_map(|f| serde_json::from_str::<Vec<serde_json::Value>>(&f.text).unwrap())
        .flat_map(|case| case["reason"].as_array().unwrap().clone())
        .map(|id| id.as_str().unwrap().to_owned())
        .collect();
    let all: BTreeSet<String> = engine
        .policies()
        .policies()
        .map(|p| p.id().to_string())
        .collect();
    assert_eq!(pinned, all);
}

#[test]
fn a_fixture_that_expects_the_wrong_thing_fails_and_says_why() {
    let mut bundle = PolicyBundle::builtin();
    bundle.tests = vec![SourceFile {
        logical: "policies/tests/wrong.json".into(),
        display: "policies/tests/wrong.json".into(),
        text: r#"[{"name": "wrong", "request": {"principal": "Portcullis::Client::\"alice\"",
            "action": "Portcullis::Action::\"call_tool\"", "resource": "Portcullis::Tool::\"builtin/read_file\"",
            "context": {"approved": false, "approval_channel": "none", "transport": "cli", "reads_inside_root": false,
                        "writes_inside_root": true, "touches_vcs_metadata": false, "writes_vcs_metadata": false, "path_classes": []}},
            "entities": "entities/fixtures.json", "decision": "allow", "reason": [], "num_errors": 0}]"#.into(),
    }];
    let engine = engine(&bundle);
    let results = run_fixtures(&engine, &bundle);
    let failure = results[0].failure.as_deref().unwrap();
    assert!(failure.contains("expected allow, got deny"), "{failure}");
    assert!(failure.contains("paths.no_read_outside_root"), "{failure}");
}

#[test]
fn a_fixture_file_that_is_not_json_fails() {
    let mut bundle = PolicyBundle::builtin();
    bundle.tests[0].text = "{".into();
    let engine = engine(&bundle);
    let results = run_fixtures(&engine, &bundle);
    assert!(!results[0].passed());
}

#[test]
fn a_fixture_with_a_context_off_the_schema_fails() {
    let mut bundle = PolicyBundle::builtin();
    bundle.tests[0].text = bundle.tests[0]
        .text
        .replacen("\"approved\"", "\"aproved\"", 1);
    let engine = engine(&bundle);
    let results = run_fixtures(&engine, &bundle);
    assert!(
        results[0].failure.as_deref().unwrap().contains("context"),
        "{:?}",
        results[0]
    );
}

#[test]
fn an_entity_id_is_taken_as_written_and_a_bad_type_name_is_an_error() {
    let uid = super::entity_uid("Portcullis::Client", "a \"quoted\" \\ name").unwrap();
    assert_eq!(uid.id().unescaped(), "a \"quoted\" \\ name");
    assert_eq!(uid.type_name().to_string(), "Portcullis::Client");
    assert_eq!(super::client_uid("a \"quoted\" \\ name"), uid);
    assert_eq!(
        super::tool_uid("builtin/read_file").to_string(),
        r#"Portcullis::Tool::"builtin/read_file""#
    );
    let err = super::entity_uid("Portcullis::", "x").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Portcullis:: is not an entity type name"),
        "{err}"
    );
}

// ---- the set cache ----

#[test]
fn a_set_loaded_from_the_cache_decides_as_one_loaded_from_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let cache = SetCache::new(dir.path().join("sets"));
    let bundle = PolicyBundle::builtin();
    let registry = Registry::builtin().unwrap();
    let load = || {
        Engine::load_proven(
            &bundle,
            &registry,
            &clients(),
            Some(&cache),
            Audience::AnyClient,
        )
        .unwrap()
        .0
    };
    let fresh = load();
    assert!(cache.validated(&bundle.hash()).is_some());
    let cached = load();
    assert_eq!(fresh.identity(), cached.identity());
    for engine in [&fresh, &cached] {
        let failed: Vec<CaseResult> = run_fixtures(engine, &bundle)
            .into_iter()
            .filter(|r| !r.passed())
            .collect();
        assert!(failed.is_empty(), "{failed:#?}");
    }
    // The command table, read on first use, is the same table.
    let root = tempfile::tempdir().unwrap();
    let root = crate::facts::Root::new(root.path()).unwrap();
    for command in ["ls -la", "git push", "rm -rf /", "cat .env", "sort -o x y"] {
        let judge = |engine: &Engine| {
            let decision =
                crate::gate::judge(engine, "alice", &root, None, command, Transport::Cli)
                    .unwrap()
                    .decision;
            let ids: Vec<String> = decision.policies.iter().map(|p| p.id.clone()).collect();
            (decision.outcome, ids)
        };
        assert_eq!(judge(&fresh), judge(&cached), "{command}");
    }
}

/// A team file where each of alice and bob has a grant and a forbid of
/// their own, with an unscoped forbid between them and a multi-byte
/// character in a reason.
const SCOPED_FILE: &str = r#"@id("grant.alice") @reason("alice reads")
permit (principal == Portcullis::Client::"alice", action, resource == Portcullis::Tool::"builtin/read_file");
@id("grant.bob") @reason("bob reads — and more")
permit (principal == Portcullis::Client::"bob", action, resource == Portcullis::Tool::"builtin/read_file");
@id("nobody.writes") @reason("no writes")
forbid (principal, action, resource == Portcullis::Tool::"builtin/write_file");
@id("alice.no_search") @reason("alice does not search")
forbid (principal == Portcullis::Client::"alice", action, resource == Portcullis::Tool::"builtin/search");
@id("bob.no_list") @reason("bob does not list")
forbid (principal == Portcullis::Client::"bob", action, resource == Portcullis::Tool::"builtin/list_dir");
"#;

#[test]
fn the_scoped_policies_are_found_whole_with_their_annotations() {
    let bundle = with_policy("70_scoped.cedar", SCOPED_FILE);
    let scoped: Vec<_> = super::load::scoped_policies(&bundle)
        .into_iter()
        .filter(|p| p.file == "policies/70_scoped.cedar")
        .collect();
    let found: Vec<(&str, &str)> = scoped
        .iter()
        .map(|p| (&SCOPED_FILE[p.start..p.end], p.principal.as_str()))
        .collect();
    assert_eq!(found.len(), 4, "{found:#?}");
    for (text, principal) in &found {
        assert!(text.starts_with("@id(") && text.ends_with(';'), "{text}");
        assert!(text.contains(principal), "{text} {principal}");
    }
    assert!(found[1].0.starts_with("@id(\"grant.bob\")"));
    assert_eq!(found[1].1, r#"Portcullis::Client::"bob""#);
}

#[test]
fn an_engine_for_its_clients_only_leaves_out_the_policies_of_others_and_decides_alike() {
    let dir = tempfile::tempdir().unwrap();
    let cache = SetCache::new(dir.path().join("sets"));
    let bundle = with_policy("70_scoped.cedar", SCOPED_FILE);
    let registry = Registry::builtin().unwrap();
    let alice = [ClientRecord {
        name: "alice".into(),
        tier: "paired".into(),
    }];
    let load = |audience| {
        Engine::load_proven(&bundle, &registry, &alice, Some(&cache), audience)
            .unwrap()
            .0
    };
    // The first load knows nothing yet and reads everything.
    let first = load(Audience::LoadedClientsOnly);
    let everything = load(Audience::AnyClient);
    let alice_only = load(Audience::LoadedClientsOnly);
    let ids = |engine: &Engine| -> BTreeSet<String> {
        engine
            .policies()
            .policies()
            .map(|p| p.id().to_string())
            .collect()
    };
    for id in ["grant.bob", "bob.no_list"] {
        assert!(ids(&first).contains(id) && ids(&everything).contains(id));
        assert!(!ids(&alice_only).contains(id), "{id}");
    }
    for id in ["grant.alice", "alice.no_search", "nobody.writes"] {
        assert!(ids(&alice_only).contains(id), "{id}");
    }
    assert_eq!(
        ids(&everything).len(),
        ids(&alice_only).len() + 2,
        "nothing else is left out"
    );
    for tool in [
        "builtin/read_file",
        "builtin/write_file",
        "builtin/search",
        "builtin/list_dir",
    ] {
        let decided = |engine: &Engine, who: &str| {
            let decision = decide(engine, who, ToolAction::Call, tool, &clean());
            let ids: Vec<String> = decision.policies.iter().map(|p| p.id.clone()).collect();
            (decision.outcome, ids)
        };
        assert_eq!(
            decided(&everything, "alice"),
            decided(&alice_only, "alice"),
            "{tool}"
        );
        // Another client is unknown to an engine loaded for alice.
        assert_eq!(decided(&alice_only, "bob").0, Outcome::Deny);
    }
}

#[test]
fn a_span_that_is_not_a_whole_stretch_of_its_file_leaves_nothing_out() {
    let file = SourceFile {
        logical: "policies/a.cedar".into(),
        display: "policies/a.cedar".into(),
        text: "é permit (principal, action, resource);".into(),
    };
    let principals = std::collections::HashSet::new();
    let span = |start, end| super::load::ScopedPolicy {
        file: file.logical.clone(),
        start,
        end,
        principal: "Portcullis::Client::\"x\"".into(),
    };
    for scoped in [vec![span(1, 4)], vec![span(5, 3)], vec![span(3, 400)]] {
        let leave_out = super::load::LeaveOut {
            scoped: &scoped,
            principals: &principals,
        };
        assert_eq!(leave_out.text(&file), file.text, "{scoped:?}");
    }
    let scoped = [span(3, file.text.len())];
    let leave_out = super::load::LeaveOut {
        scoped: &scoped,
        principals: &principals,
    };
    assert_eq!(leave_out.text(&file).trim(), "é");
}

#[test]
fn a_set_that_does_not_load_is_not_remembered() {
    let dir = tempfile::tempdir().unwrap();
    let cache = SetCache::new(dir.path().join("sets"));
    let mut bundle = PolicyBundle::builtin();
    bundle
        .commands
        .text
        .push_str("\n[[rule]]\nclass = \"x\"\nprogram = \"(\"\n");
    let registry = Registry::builtin().unwrap();
    assert!(
        Engine::load_proven(
            &bundle,
            &registry,
            &clients(),
            Some(&cache),
            Audience::AnyClient
        )
        .is_err()
    );
    assert!(cache.validated(&bundle.hash()).is_none());
}

#[test]
fn a_downstream_request_of_the_client_is_denied_unless_a_policy_permits_it() {
    let files = server_uid("files");
    let ask = |engine: &Engine, method: &str| {
        engine
            .decide(&Query::request("alice", &files, method, Transport::Stdio))
            .outcome
    };
    let defaults = engine(&PolicyBundle::builtin());
    for method in ["elicitation/create", "sampling/createMessage", "roots/list"] {
        assert_eq!(ask(&defaults, method), Outcome::Deny, "{method}");
    }
    let permitted = engine(&with_policy(
        "relay.cedar",
        r#"@id("allow.files.elicitation")
@reason("files may ask the user")
permit (principal, action == Portcullis::Action::"relay_request", resource == Portcullis::Server::"files")
when { context.method == "elicitation/create" };"#,
    ));
    assert_eq!(ask(&permitted, "elicitation/create"), Outcome::Allow);
    assert_eq!(ask(&permitted, "roots/list"), Outcome::Deny);
    let unknown = permitted.decide(&Query::request(
        "mallory",
        &files,
        "elicitation/create",
        Transport::Stdio,
    ));
    assert_eq!(
        (unknown.outcome, unknown.cause),
        (Outcome::Deny, Cause::UnknownClient)
    );
}

#[test]
fn a_relay_policy_that_misreads_the_context_does_not_validate() {
    let found = problems(&with_policy(
        "relay.cedar",
        r#"@id("allow.relay.typo")
@reason("typo")
permit (principal, action == Portcullis::Action::"relay_request", resource)
when { context.methd == "roots/list" };"#,
    ));
    assert!(
        found.iter().any(|p| p.kind == ProblemKind::Validation),
        "{found:?}"
    );
}

#[test]
fn a_schema_whose_request_facts_do_not_fit_refuses_to_load() {
    let mut bundle = PolicyBundle::builtin();
    bundle.schemas[0].text = bundle.schemas[0]
        .text
        .replace("    method: String,\n", "    method: Long,\n");
    assert!(bundle.schemas[0].text.contains("method: Long"));
    let found = problems(&bundle);
    assert!(
        found
            .iter()
            .any(|p| p.kind == ProblemKind::Schema && p.message.contains("method: Long")),
        "{found:?}"
    );
}

#[test]
fn a_set_recorded_without_relay_request_denies_it() {
    let mut bundle = PolicyBundle::builtin();
    let text = &bundle.schemas[0].text;
    let start = text.find("  action relay_request").unwrap();
    let end = start + text[start..].find("};").unwrap() + 2;
    bundle.schemas[0].text = format!("{}{}", &text[..start], &text[end..]);
    // Today's loader refuses a schema without a built-in action; a set
    // recorded before relay_request existed still replays.
    assert!(
        problems(&bundle)
            .iter()
            .any(|p| p.message.contains("action `relay_request` is not declared"))
    );
    let engine = Engine::load_recorded(&bundle, &Registry::builtin().unwrap(), &clients()).unwrap();
    let decision = engine.decide(&Query::request(
        "alice",
        &server_uid("files"),
        "elicitation/create",
        Transport::Stdio,
    ));
    assert_eq!(
        (decision.outcome, decision.cause),
        (Outcome::Deny, Cause::NotPermitted)
    );
}

// ---- typed input ----

const DOCS_ONLY: &str = r#"
@id("args.docs_only")
@reason("files may be written only under docs/")
forbid (principal, action == Portcullis::Action::"builtin/write_file", resource)
unless { context.input.path like "docs/*" };
"#;

/// Arguments that fill every required property of `schema` with a value
/// of its type.
fn required_arguments(schema: &serde_json::Value) -> serde_json::Value {
    let mut arguments = serde_json::Map::new();
    for name in schema["required"].as_array().into_iter().flatten() {
        let name = name.as_str().unwrap();
        let value = match schema["properties"][name]["type"].as_str() {
            Some("integer") => serde_json::json!(1),
            Some("boolean") => serde_json::json!(true),
            _ => serde_json::json!("a.txt"),
        };
        arguments.insert(name.to_owned(), value);
    }
    serde_json::Value::Object(arguments)
}

#[test]
fn every_tool_action_and_its_built_context_fit_the_schema() {
    let engine = engine(&PolicyBundle::builtin());
    let specs: Vec<crate::tools::ToolSpec> = Registry::builtin_specs()
        .into_iter()
        .map(|(spec, _)| spec)
        .chain(Registry::harness().unwrap().iter().map(|t| t.spec.clone()))
        .chain(Registry::bridge_tools().into_iter().map(|(spec, _)| spec))
        .collect();
    assert_eq!(engine.tool_types().count(), specs.len());
    for spec in specs {
        let arguments = required_arguments(&spec.input_schema);
        let input = engine.tool_input(&spec.id, &arguments).unwrap().unwrap();
        let (action, ty) = &engine.calls[&spec.id];
        let expression = input::record_expression(&ty.fields, &input.values).unwrap();
        let facts = ToolFacts::without_paths(Transport::Stdio);
        let context = context::tool_context(
            &facts,
            (false, "none", 0),
            context::ToolShape::Current,
            Some(&expression),
            None,
        )
        .unwrap();
        cedar_policy::Request::new(
            client_uid("alice"),
            action.clone(),
            tool_uid(&spec.id.to_string()),
            context,
            Some(engine.schema()),
        )
        .unwrap_or_else(|err| panic!("{}: {err}", spec.id));
    }
}

#[test]
fn an_argument_policy_decides_on_the_typed_input() {
    let mut bundle = with_policy("20_allow.cedar", ALLOW_BUILTIN_TO_PAIRED);
    bundle.policies.push(SourceFile {
        logical: "policies/25_args.cedar".into(),
        display: "policies/25_args.cedar".into(),
        text: DOCS_ONLY.into(),
    });
    let engine = engine(&bundle);
    let write = ToolId::new("builtin", "write_file");
    let decide_path = |path: &str| {
        let mut facts = clean();
        facts.input = engine
            .tool_input(&write, &serde_json::json!({"path": path, "content": "x"}))
            .unwrap()
            .ok();
        engine.decide(&Query::tool(
            "alice",
            ToolAction::Call,
            &write,
            &facts,
            "client_elicitation",
        ))
    };
    let docs = decide_path("docs/a.md");
    assert_eq!(
        (docs.outcome, ids(&docs)),
        (Outcome::Ask, vec!["approval.writes"])
    );
    let elsewhere = decide_path("src/a.rs");
    assert_eq!(
        (elsewhere.outcome, ids(&elsewhere)),
        (Outcome::Deny, vec!["args.docs_only"])
    );
}

#[test]
fn a_call_without_input_decides_as_before_unless_a_policy_reads_an_argument() {
    let mut bundle = with_policy("20_allow.cedar", ALLOW_BUILTIN_TO_PAIRED);
    bundle.policies.push(SourceFile {
        logical: "policies/25_args.cedar".into(),
        display: "policies/25_args.cedar".into(),
        text: DOCS_ONLY.into(),
    });
    let engine = engine(&bundle);
    let bare = clean();
    let read = engine.decide(&Query::tool(
        "alice",
        ToolAction::Call,
        &ToolId::new("builtin", "read_file"),
        &bare,
        "client_elicitation",
    ));
    assert_eq!(read.outcome, Outcome::Allow, "{read:?}");
    let write = engine.decide(&Query::tool(
        "alice",
        ToolAction::Call,
        &ToolId::new("builtin", "write_file"),
        &bare,
        "client_elicitation",
    ));
    assert_eq!(
        (write.outcome, write.cause),
        (Outcome::Deny, Cause::PolicyError)
    );
}

#[test]
fn an_input_that_does_not_fit_its_type_denies() {
    let engine = engine(&with_policy("20_allow.cedar", ALLOW_BUILTIN_TO_PAIRED));
    for values in [
        serde_json::json!({"path": 3}),
        serde_json::json!({}),
        serde_json::json!({"path": "a", "unknown": true}),
    ] {
        let mut facts = clean();
        facts.input = Some(crate::facts::ToolInput {
            values: values.as_object().unwrap().clone(),
            redacted: Default::default(),
        });
        let decision = engine.decide(&Query::tool(
            "alice",
            ToolAction::Call,
            &ToolId::new("builtin", "read_file"),
            &facts,
            "client_elicitation",
        ));
        assert_eq!(
            (decision.outcome, decision.cause),
            (Outcome::Deny, Cause::PolicyError),
            "{values}"
        );
        assert!(decision.errors[0].message.contains("type"), "{decision:?}");
    }
}

#[test]
fn a_schema_the_tool_actions_cannot_extend_refuses_to_load_and_says_why() {
    let mut bundle = PolicyBundle::builtin();
    bundle.schemas[0].text = bundle.schemas[0].text.replace(
        "    path_classes: Set<String>,\n  };\n\n  // Facts about one shell command",
        "    path_classes: Set<String>,\n    input: String,\n  };\n\n  // Facts about one shell command",
    );
    assert!(bundle.schemas[0].text.contains("input: String"));
    let found = problems(&bundle);
    assert!(
        found
            .iter()
            .any(|p| p.kind == ProblemKind::Schema && p.message.contains("`input`")),
        "{found:?}"
    );
}

#[test]
fn built_in_tool_definitions_that_do_not_read_refuse_the_set() {
    for (text, expected) in [
        ("not json", "do not read"),
        (
            r#"{"tools": [{"id": "no-slash", "input_schema": {}}]}"#,
            "not a tool id",
        ),
    ] {
        let mut bundle = PolicyBundle::builtin();
        bundle.tools.as_mut().unwrap().text = text.to_owned();
        let found = problems(&bundle);
        assert!(
            found.iter().any(|p| p.message.contains(expected)),
            "{text}: {found:?}"
        );
    }
}

#[test]
fn a_set_without_built_in_tool_definitions_decides_calls_as_call_tool() {
    let mut bundle = with_policy("20_allow.cedar", ALLOW_BUILTIN_TO_PAIRED);
    bundle.tools = None;
    let engine = engine(&bundle);
    assert_eq!(engine.tool_types().count(), 0);
    let d = decide(
        &engine,
        "alice",
        ToolAction::Call,
        "builtin/read_file",
        &clean(),
    );
    assert_eq!(d.outcome, Outcome::Allow, "{d:?}");
}

fn with_shadow(text: &str) -> PolicyBundle {
    let mut bundle = with_policy("20_allowlist.cedar", ALLOW_BUILTIN_TO_PAIRED);
    bundle.shadow.push(SourceFile {
        logical: "policies/shadow/90_try.cedar".into(),
        display: "policies/shadow/90_try.cedar".into(),
        text: text.to_owned(),
    });
    bundle
}

#[test]
fn a_shadow_forbid_is_decided_beside_the_set_and_never_enforced() {
    let engine = engine(&with_shadow(
        r#"@id("shadow.no_search") @reason("trying out")
        forbid (principal, action, resource == Portcullis::Tool::"builtin/search");"#,
    ));
    let search = decide(
        &engine,
        "alice",
        ToolAction::Call,
        "builtin/search",
        &clean(),
    );
    assert_eq!(search.outcome, Outcome::Allow);
    let shadow = search.shadow.expect("the shadow set decides otherwise");
    assert_eq!(shadow.outcome, Outcome::Deny);
    assert_eq!(shadow.cause, Cause::Forbidden);
    assert_eq!(shadow.policies[0].id, "shadow.no_search");
    assert_eq!(&*shadow.policies[0].file, "policies/shadow/90_try.cedar");

    // Where both sets decide alike, nothing is said.
    let read = decide(
        &engine,
        "alice",
        ToolAction::Call,
        "builtin/read_file",
        &clean(),
    );
    assert_eq!(read.outcome, Outcome::Allow);
    assert!(read.shadow.is_none(), "{:?}", read.shadow);
}

#[test]
fn a_shadow_permit_that_changes_only_the_reasons_is_recorded() {
    let engine = engine(&with_shadow(
        r#"@id("shadow.also_read") @reason("another reason")
        permit (principal, action, resource == Portcullis::Tool::"builtin/read_file");"#,
    ));
    let read = decide(
        &engine,
        "alice",
        ToolAction::Call,
        "builtin/read_file",
        &clean(),
    );
    assert_eq!(read.outcome, Outcome::Allow);
    let shadow = read.shadow.expect("other determining policies");
    assert_eq!(shadow.outcome, Outcome::Allow);
    assert!(shadow.policies.iter().any(|p| p.id == "shadow.also_read"));
}

#[test]
fn a_broken_shadow_policy_refuses_the_load_with_its_file() {
    let found = problems(&with_shadow(
        "forbid (principal, action, resource) when { nope };",
    ));
    assert!(
        found
            .iter()
            .any(|p| p.file == "policies/shadow/90_try.cedar"),
        "{found:?}"
    );
}

#[test]
fn only_requests_that_can_meet_a_differing_policy_are_decided_twice() {
    let engine = engine(&with_shadow(
        r#"@id("shadow.no_search") @reason("trying out")
        forbid (principal, action, resource == Portcullis::Tool::"builtin/search");"#,
    ));
    let shadow = engine.shadow.as_ref().unwrap();
    let differing: Vec<String> = shadow.differing.iter().map(ToString::to_string).collect();
    assert_eq!(differing, ["shadow.no_search"]);
    let uid = |text: &str| text.parse::<cedar_policy::EntityUid>().unwrap();
    let (alice, read, search) = (
        uid(r#"Portcullis::Client::"alice""#),
        uid(r#"Portcullis::Tool::"builtin/read_file""#),
        uid(r#"Portcullis::Tool::"builtin/search""#),
    );
    let slice = |resource: &cedar_policy::EntityUid, action: &str| {
        let action = uid(&format!(r#"Portcullis::Action::"{action}""#));
        let index = engine.scope.as_ref().unwrap();
        let slice = index.slice_for(&action, &alice, resource, engine.entities());
        (action, slice)
    };
    let (action, enforced) = slice(&read, "builtin/read_file");
    assert!(!shadow.may_differ(
        enforced.as_deref().map(|s| &s.all.policies),
        &action,
        &alice,
        &read,
        engine.entities()
    ));
    let (action, enforced) = slice(&search, "builtin/search");
    assert!(shadow.may_differ(
        enforced.as_deref().map(|s| &s.all.policies),
        &action,
        &alice,
        &search,
        engine.entities()
    ));
}

#[test]
fn a_remembered_discovery_is_the_answer_cedar_gives_each_client() {
    let bundle = with_shadow(
        r#"@id("shadow.no_search") @reason("trying out")
        forbid (principal, action, resource == Portcullis::Tool::"builtin/search");"#,
    );
    let remembering = engine(&bundle);
    for tool in ["builtin/search", "builtin/write_file", "builtin/read_file"] {
        for client in ["alice", "rita", "nobody"] {
            let first = decide(&remembering, client, ToolAction::Discover, tool, &clean());
            let again = decide(&remembering, client, ToolAction::Discover, tool, &clean());
            let fresh = decide(
                &engine(&bundle),
                client,
                ToolAction::Discover,
                tool,
                &clean(),
            );
            for answer in [&again, &fresh] {
                assert_eq!(answer.outcome, first.outcome, "{client} {tool}");
                assert_eq!(answer.cause, first.cause, "{client} {tool}");
                assert_eq!(ids(answer), ids(&first), "{client} {tool}");
                assert_eq!(answer.shadow, first.shadow, "{client} {tool}");
            }
        }
    }
    assert_eq!(remembering.discoveries.len(), 9);
    let search = decide(
        &remembering,
        "alice",
        ToolAction::Discover,
        "builtin/search",
        &clean(),
    );
    assert_eq!(search.outcome, Outcome::Allow);
    assert!(
        search.shadow.is_some(),
        "the shadow's answer is remembered too"
    );
}
