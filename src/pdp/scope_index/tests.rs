//! The differential proof that a slice decides as the whole set: generated
//! policy sets (every kind of scope, templates and their links, conditions
//! that error for some entities) and requests (known and unknown
//! principals and resources, every action), decided with both.

use std::collections::BTreeSet;

use cedar_policy::{
    Authorizer, Context, Entities, EntityUid, PolicyId, PolicySet, Request, Schema, SlotId,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::ScopeIndex;
use crate::pdp::context_reads::ContextReads;

const SCHEMA: &str = r#"
namespace P {
  entity Tier;
  entity Client in [Tier] = { name: String };
  entity Other;
  entity Server;
  entity Tool in [Server] = { effects: Set<String> };
  action use_tool;
  action call_tool in [use_tool] appliesTo { principal: [Client, Other], resource: [Tool, Server], context: { approved: Bool } };
  action discover_tool in [use_tool] appliesTo { principal: [Client, Other], resource: [Tool, Server], context: { approved: Bool } };
  action "t/one" in [call_tool] appliesTo { principal: [Client, Other], resource: [Tool, Server], context: { approved: Bool } };
  action "t/two" in [call_tool] appliesTo { principal: [Client, Other], resource: [Tool, Server], context: { approved: Bool } };
  action run_command appliesTo { principal: [Client, Other], resource: [Tool, Server], context: { approved: Bool } };
}
"#;

const TIERS: usize = 3;
const CLIENTS: usize = 6;
const SERVERS: usize = 3;
const TOOLS: usize = 6;
const ACTIONS: [&str; 6] = [
    "use_tool",
    "call_tool",
    "discover_tool",
    "t/one",
    "t/two",
    "run_command",
];

fn uid(kind: &str, id: &str) -> EntityUid {
    format!("P::{kind}::\"{id}\"").parse().unwrap()
}

/// One generated case: who belongs where, the policies, the requests.
#[derive(Debug, Clone)]
struct Case {
    client_tiers: Vec<Vec<usize>>,
    tool_servers: Vec<Vec<usize>>,
    policies: Vec<GeneratedPolicy>,
    requests: Vec<(usize, usize, usize, bool)>,
}

#[derive(Debug, Clone)]
struct GeneratedPolicy {
    forbid: bool,
    principal: usize,
    action: usize,
    resource: usize,
    condition: usize,
    /// A template with slots, linked this many times.
    links: Vec<(usize, usize)>,
}

/// The principal scopes, by index; `?principal` in a template.
fn principal_scope(choice: usize, n: usize) -> String {
    match choice % 8 {
        0 => "principal".into(),
        1 => format!("principal == P::Client::\"c{}\"", n % CLIENTS),
        2 => format!("principal in P::Tier::\"t{}\"", n % TIERS),
        3 => format!("principal in P::Client::\"c{}\"", n % CLIENTS),
        4 => "principal is P::Client".into(),
        5 => format!("principal is P::Client in P::Tier::\"t{}\"", n % TIERS),
        6 => "principal is P::Other".into(),
        _ => "principal == P::Other::\"o\"".into(),
    }
}

fn action_scope(choice: usize) -> String {
    match choice % 8 {
        0 => "action".into(),
        1 => "action in P::Action::\"use_tool\"".into(),
        2 => "action in P::Action::\"call_tool\"".into(),
        3 => "action == P::Action::\"t/one\"".into(),
        4 => "action in [P::Action::\"t/two\", P::Action::\"discover_tool\"]".into(),
        5 => "action == P::Action::\"call_tool\"".into(),
        6 => "action == P::Action::\"run_command\"".into(),
        _ => "action in P::Action::\"t/one\"".into(),
    }
}

fn resource_scope(choice: usize, n: usize) -> String {
    match choice % 7 {
        0 => "resource".into(),
        1 => format!("resource == P::Tool::\"u{}\"", n % TOOLS),
        2 => format!("resource in P::Server::\"s{}\"", n % SERVERS),
        3 => "resource is P::Tool".into(),
        4 => format!("resource is P::Tool in P::Server::\"s{}\"", n % SERVERS),
        5 => format!("resource in P::Tool::\"u{}\"", n % TOOLS),
        _ => "resource is P::Server".into(),
    }
}

/// Conditions, some of which error for some entities (an Other has no
/// name, a Server no effects, an unknown entity no attributes at all).
fn condition(choice: usize) -> &'static str {
    match choice % 8 {
        0 => "",
        7 => " when { context.level > 1 }",
        1 => " when { context.approved }",
        2 => " when { principal.name == \"c1\" }",
        3 => " unless { resource.effects.contains(\"write\") }",
        4 => " when { principal in P::Tier::\"t1\" }",
        // Errs only once approved: in the second pass alone.
        5 => " when { context.approved && principal.name == \"c1\" }",
        _ => " unless { context.approved }",
    }
}

fn policy_set(case: &Case) -> PolicySet {
    let mut set = PolicySet::new();
    for (at, policy) in case.policies.iter().enumerate() {
        let effect = if policy.forbid { "forbid" } else { "permit" };
        if policy.links.is_empty() {
            let text = format!(
                "{effect} ({}, {}, {}){};",
                principal_scope(policy.principal, at),
                action_scope(policy.action),
                resource_scope(policy.resource, at),
                condition(policy.condition)
            );
            let parsed =
                cedar_policy::Policy::parse(Some(PolicyId::new(format!("p{at}"))), text).unwrap();
            set.add(parsed).unwrap();
        } else {
            let principal = if policy.principal % 2 == 0 {
                "principal == ?principal"
            } else {
                "principal in ?principal"
            };
            let resource = if policy.resource % 2 == 0 {
                "resource == ?resource"
            } else {
                "resource in ?resource"
            };
            let text = format!(
                "{effect} ({principal}, {}, {resource}){};",
                action_scope(policy.action),
                condition(policy.condition)
            );
            let template =
                cedar_policy::Template::parse(Some(PolicyId::new(format!("t{at}"))), text).unwrap();
            set.add_template(template).unwrap();
            for (link, (p, r)) in policy.links.iter().enumerate() {
                let principal = match p % 3 {
                    0 => uid("Client", &format!("c{}", p % CLIENTS)),
                    1 => uid("Tier", &format!("t{}", p % TIERS)),
                    _ => uid("Other", "o"),
                };
                let resource = match r % 2 {
                    0 => uid("Tool", &format!("u{}", r % TOOLS)),
                    _ => uid("Server", &format!("s{}", r % SERVERS)),
                };
                set.link(
                    PolicyId::new(format!("t{at}")),
                    PolicyId::new(format!("t{at}.{link}")),
                    [
                        (SlotId::principal(), principal),
                        (SlotId::resource(), resource),
                    ]
                    .into(),
                )
                .unwrap();
            }
        }
    }
    set
}

fn entities(case: &Case) -> Entities {
    let mut all = Vec::new();
    for t in 0..TIERS {
        all.push(serde_json::json!({"uid": {"type": "P::Tier", "id": format!("t{t}")}, "attrs": {}, "parents": []}));
    }
    for (c, tiers) in case.client_tiers.iter().enumerate() {
        let parents: Vec<_> = tiers
            .iter()
            .map(|t| serde_json::json!({"type": "P::Tier", "id": format!("t{}", t % TIERS)}))
            .collect();
        all.push(
            serde_json::json!({"uid": {"type": "P::Client", "id": format!("c{c}")},
            "attrs": {"name": format!("c{c}")}, "parents": parents}),
        );
    }
    all.push(
        serde_json::json!({"uid": {"type": "P::Other", "id": "o"}, "attrs": {}, "parents": []}),
    );
    for s in 0..SERVERS {
        all.push(serde_json::json!({"uid": {"type": "P::Server", "id": format!("s{s}")}, "attrs": {}, "parents": []}));
    }
    for (u, servers) in case.tool_servers.iter().enumerate() {
        let parents: Vec<_> = servers
            .iter()
            .map(|s| serde_json::json!({"type": "P::Server", "id": format!("s{}", s % SERVERS)}))
            .collect();
        let effects = if u % 2 == 0 {
            vec!["write"]
        } else {
            vec!["read"]
        };
        all.push(
            serde_json::json!({"uid": {"type": "P::Tool", "id": format!("u{u}")},
            "attrs": {"effects": effects}, "parents": parents}),
        );
    }
    Entities::from_json_value(serde_json::Value::Array(all), None).unwrap()
}

fn request_of(principal: usize, action: usize, resource: usize, approved: bool) -> Request {
    request_reading(principal, action, resource, approved, None)
}

/// The request, its context holding only the attributes `only` reads.
fn request_reading(
    principal: usize,
    action: usize,
    resource: usize,
    approved: bool,
    only: Option<&ContextReads>,
) -> Request {
    let level = i64::try_from(principal % 3).unwrap();
    // One past the known ones is an entity the store does not hold.
    let principal = match principal % (CLIENTS + 2) {
        c if c < CLIENTS => uid("Client", &format!("c{c}")),
        c if c == CLIENTS => uid("Other", "o"),
        _ => uid("Client", "unknown"),
    };
    let resource = match resource % (TOOLS + SERVERS + 1) {
        u if u < TOOLS => uid("Tool", &format!("u{u}")),
        s if s < TOOLS + SERVERS => uid("Server", &format!("s{}", s - TOOLS)),
        _ => uid("Tool", "unknown"),
    };
    let action = uid("Action", ACTIONS[action % ACTIONS.len()]);
    let context = Context::from_pairs(
        [
            (
                "approved",
                cedar_policy::RestrictedExpression::new_bool(approved),
            ),
            ("level", cedar_policy::RestrictedExpression::new_long(level)),
        ]
        .into_iter()
        .filter(|(name, _)| only.is_none_or(|reads| reads.reads(name)))
        .map(|(name, value)| (name.to_owned(), value)),
    )
    .unwrap();
    Request::new(principal, action, resource, context, None).unwrap()
}

fn case() -> impl Strategy<Value = Case> {
    let policy = (
        any::<bool>(),
        0usize..64,
        0usize..64,
        0usize..64,
        0usize..64,
        prop_oneof![
            4 => Just(Vec::new()),
            1 => prop::collection::vec((0usize..64, 0usize..64), 1..4),
        ],
    )
        .prop_map(
            |(forbid, principal, action, resource, condition, links)| GeneratedPolicy {
                forbid,
                principal,
                action,
                resource,
                condition,
                links,
            },
        );
    (
        prop::collection::vec(prop::collection::vec(0usize..TIERS, 0..3), CLIENTS),
        prop::collection::vec(prop::collection::vec(0usize..SERVERS, 0..3), TOOLS),
        prop::collection::vec(policy, 0..24),
        prop::collection::vec((0usize..64, 0usize..64, 0usize..64, any::<bool>()), 20),
    )
        .prop_map(|(client_tiers, tool_servers, policies, requests)| Case {
            client_tiers,
            tool_servers,
            policies,
            requests,
        })
}

/// What a response says: decision, determining policies, erroring ones.
fn answer(
    response: &cedar_policy::Response,
) -> (cedar_policy::Decision, BTreeSet<String>, BTreeSet<String>) {
    let reasons = response
        .diagnostics()
        .reason()
        .map(ToString::to_string)
        .collect();
    let errors = response
        .diagnostics()
        .errors()
        .map(|err| match err {
            cedar_policy::AuthorizationError::PolicyEvaluationError(inner) => {
                format!("{}: {err}", inner.policy_id())
            }
        })
        .collect();
    (response.decision(), reasons, errors)
}

/// Runs `cases` generated cases of 20 requests each; returns how many
/// requests were compared, and how many second passes were narrowed.
fn differential(cases: u32) -> (u64, u64) {
    let schema: Schema = SCHEMA.parse().unwrap();
    let authorizer = Authorizer::new();
    let compared = std::cell::Cell::new(0u64);
    let narrowed_passes = std::cell::Cell::new(0u64);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&case(), |case| {
            let set = policy_set(&case);
            let entities = entities(&case);
            let index = ScopeIndex::new(&schema, &set).unwrap();
            for &(p, a, r, approved) in &case.requests {
                let request = request_of(p, a, r, approved);
                let whole = authorizer.is_authorized(&request, &set, &entities);
                let slice = index.slice(&request, &entities).unwrap();
                // With only the attributes its policies read.
                let read = request_reading(p, a, r, approved, Some(&slice.all.reads));
                let sliced = authorizer.is_authorized(&read, &slice.all.policies, &entities);
                prop_assert_eq!(answer(&whole), answer(&sliced), "{:?}", request);
                compared.set(compared.get() + 1);
                // The second pass of a decision the first did not allow,
                // narrowed to what an approval can change, says what the
                // whole set says with the approval.
                let unapproved =
                    authorizer.is_authorized(&request_of(p, a, r, false), &set, &entities);
                if unapproved.decision() == cedar_policy::Decision::Allow
                    || unapproved.diagnostics().errors().next().is_some()
                {
                    continue;
                }
                let with_approval = request_of(p, a, r, true);
                let whole = authorizer.is_authorized(&with_approval, &set, &entities);
                let (part, held) = slice.for_approval(&unapproved);
                let read = request_reading(p, a, r, true, Some(&part.reads));
                let narrowed = answer(&authorizer.is_authorized(&read, &part.policies, &entities));
                let narrowed = if held.is_empty() {
                    narrowed
                } else {
                    let (decision, reasons, errors) = narrowed;
                    let mut reasons = if decision == cedar_policy::Decision::Deny {
                        reasons
                    } else {
                        BTreeSet::new()
                    };
                    reasons.extend(held.iter().map(ToString::to_string));
                    (cedar_policy::Decision::Deny, reasons, errors)
                };
                prop_assert_eq!(answer(&whole), narrowed, "approved {:?}", with_approval);
                narrowed_passes.set(narrowed_passes.get() + 1);
            }
            Ok(())
        })
        .unwrap();
    (compared.get(), narrowed_passes.get())
}

#[test]
fn a_slice_decides_as_the_whole_set() {
    let (compared, narrowed) = differential(300);
    assert_eq!(compared, 300 * 20);
    assert!(narrowed > 300, "only {narrowed} second passes compared");
}

/// The full run the performance issue asks for: 100,000 requests over
/// 5,000 generated sets (`cargo test --lib -- --ignored`, run by `.ci/run`).
#[test]
#[ignore = "long: run by .ci/run in its own step"]
fn a_slice_decides_as_the_whole_set_over_100_000_generated_cases() {
    let (compared, narrowed) = differential(5_000);
    eprintln!(
        "{compared} generated requests decided identically, {narrowed} narrowed second passes"
    );
    assert!(compared >= 100_000);
}

#[test]
fn a_slice_holds_only_what_the_scope_can_match() {
    let schema: Schema = SCHEMA.parse().unwrap();
    let mut set = PolicySet::new();
    for c in 0..100 {
        let text = format!(
            "permit (principal == P::Client::\"c{c}\", action in P::Action::\"call_tool\", resource in P::Server::\"s0\");"
        );
        set.add(cedar_policy::Policy::parse(Some(PolicyId::new(format!("c{c}"))), text).unwrap())
            .unwrap();
    }
    set.add(
        cedar_policy::Policy::parse(
            Some(PolicyId::new("everyone")),
            "forbid (principal, action, resource) unless { context.approved };",
        )
        .unwrap(),
    )
    .unwrap();
    let case = Case {
        client_tiers: vec![vec![]; CLIENTS],
        tool_servers: vec![vec![0]; TOOLS],
        policies: Vec::new(),
        requests: Vec::new(),
    };
    let entities = entities(&case);
    let index = ScopeIndex::new(&schema, &set).unwrap();
    let slice = index.slice(&request_of(3, 3, 0, true), &entities).unwrap();
    let ids: BTreeSet<String> = slice
        .all
        .policies
        .policies()
        .map(|p| p.id().to_string())
        .collect();
    assert_eq!(
        ids,
        BTreeSet::from(["c3".to_owned(), "everyone".to_owned()])
    );
    // The same request again is served from the cache: the same slice.
    let again = index.slice(&request_of(3, 3, 0, true), &entities).unwrap();
    assert!(std::sync::Arc::ptr_eq(&slice, &again));
}
