//! A proof, at load, that the assembled policy set keeps the promises of
//! the hard constraints, whatever else it holds: no request whose facts say
//! a write leaves the root, a write lands in VCS metadata, or a tool spawns
//! processes or touches worktrees is allowed, for any client, tier, entity
//! data, `approved` or `approval_channel`. Since "ask" is "allowed once
//! approved", no such request is ever ask either.
//!
//! The solver (SymCC over cvc5) reasons over every request and entity
//! store the schema admits. Each tool's own call action (`Action::
//! "builtin/write_file"`) is proven through one representative: those
//! actions share their parents, principal and resource types, and a
//! context that is `ToolFacts` plus `input`; they differ only in `input`,
//! which no property and no hard constraint reads, so a counterexample for
//! one is a counterexample for the representative. (Proving each would cost
//! a solver query per tool and property at every new set.) With the built-ins always present the proof
//! should never fail; it guards the built-ins themselves and any change to
//! how a set is assembled. Where cvc5 is absent the load says so once and
//! rests on the structural check (the built-ins present, nothing else in
//! the `hard.` namespace).

use std::sync::Once;

use cedar_policy::{
    Effect, Entities, EntityUid, Policy, PolicyId, PolicySet, Request, RequestEnv, Schema,
};
use cedar_policy_symcc::solver::LocalSolver;
use cedar_policy_symcc::{CedarSymCompiler, CompiledPolicySet};

use super::solver;
use thiserror::Error;

/// One promise of the hard constraints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Property {
    pub name: &'static str,
    /// The action group it is about (the action itself or any action in
    /// it).
    pub group: &'static str,
    /// Cedar condition that makes a request one the property is about.
    pub condition: &'static str,
}

/// What the hard constraints promise.
pub const PROPERTIES: [Property; 6] = [
    Property {
        name: "a tool that spawns processes is never available",
        group: "use_tool",
        condition: r#"resource.effects.contains("process")"#,
    },
    Property {
        name: "a tool that touches git worktrees is never available",
        group: "use_tool",
        condition: r#"resource.effects.contains("worktree")"#,
    },
    Property {
        name: "a tool call never writes outside the root",
        group: "call_tool",
        condition: "!context.writes_inside_root",
    },
    Property {
        name: "a tool call never writes into VCS metadata",
        group: "call_tool",
        condition: "context.writes_vcs_metadata",
    },
    Property {
        name: "a command never writes outside the root",
        group: "run_command",
        condition: "!context.writes_inside_root",
    },
    Property {
        name: "a command never writes into VCS metadata",
        group: "run_command",
        condition: "context.writes_vcs_metadata",
    },
];

/// What the proof found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proof {
    /// Every property holds in every request environment it applies to.
    Proven { queries: usize },
    /// No solver: nothing was proven beyond the structural check.
    SolverAbsent { reason: String },
}

#[derive(Debug, Error)]
pub enum ProofError {
    #[error(
        "the policy set allows a request the hard constraints promise to deny ({property}); counterexample:\n{text}"
    )]
    Counterexample {
        property: &'static str,
        /// The request and entities the solver found, as Cedar values, so
        /// that the engine can decide them again.
        request: Box<Request>,
        entities: Box<Entities>,
        text: String,
    },
    #[error("the proof could not be run: {0}")]
    Failed(String),
}

/// Proves every property for `policies` under `schema`.
///
/// What is proven is stronger than "this set denies": the set's forbids
/// alone deny every such request even beside a permit of everything. So
/// no permit, present or added later, can open one, and the solver never
/// sees the permits: a team's thousands of per-client permits would make
/// every query thousands of times larger (10,000 took 76 s and 12 GB, and
/// then failed), for nothing, since a permit can only widen.
pub fn prove(policies: &PolicySet, schema: &Schema) -> Result<Proof, ProofError> {
    let forbids = forbids_beside_permit_all(policies)?;
    let policies = &forbids;
    solver::on_own_thread(|| prove_async(policies, schema)).map_err(ProofError::Failed)?
}

async fn prove_async(policies: &PolicySet, schema: &Schema) -> Result<Proof, ProofError> {
    let mut compiler = match solver::cvc5() {
        Ok(compiler) => compiler,
        Err(reason) => return Ok(Proof::SolverAbsent { reason }),
    };
    let actions = schema
        .action_entities()
        .map_err(|err| ProofError::Failed(err.to_string()))?;
    let mut queries = 0;
    let mut envs: Vec<RequestEnv> = schema.request_envs().collect();
    envs.sort_by_key(|env| env.action().to_string());
    for builtin in BUILTIN_ACTIONS {
        if !envs.iter().any(|env| is_builtin(env.action(), builtin)) {
            return Err(ProofError::Failed(format!(
                "the schema has no request of the built-in action `{builtin}`: the properties \
                 about it could not be stated"
            )));
        }
    }
    let mut tool_action_proven = false;
    for env in envs {
        if is_tool_action(env.action()) {
            if tool_action_proven {
                continue;
            }
            tool_action_proven = true;
        }
        for property in PROPERTIES
            .iter()
            .filter(|p| in_group(&actions, env.action(), p.group) || about(env.action(), p.group))
        {
            queries += 1;
            if let Some(found) =
                counterexample(&mut compiler, policies, schema, &env, property).await?
            {
                return Err(ProofError::Counterexample {
                    property: property.name,
                    text: found.to_string(),
                    request: Box::new(found.request),
                    entities: Box::new(found.entities),
                });
            }
        }
    }
    Ok(Proof::Proven { queries })
}

/// A request the property is about that `policies` allows, if any: the
/// set plus "forbid whatever the property is not about" must always deny.
async fn counterexample(
    compiler: &mut CedarSymCompiler<LocalSolver>,
    policies: &PolicySet,
    schema: &Schema,
    env: &RequestEnv,
    property: &Property,
) -> Result<Option<cedar_policy_symcc::Env>, ProofError> {
    let failed = |err: String| ProofError::Failed(format!("{}: {err}", property.name));
    let scope = Policy::parse(
        Some(PolicyId::new("portcullis.proof.scope")),
        format!(
            "forbid (principal, action, resource) unless {{ {} }};",
            property.condition
        ),
    )
    .map_err(|err| failed(err.to_string()))?;
    let mut query = policies.clone();
    query.add(scope).map_err(|err| failed(err.to_string()))?;
    let compiled =
        CompiledPolicySet::compile(&query, env, schema).map_err(|err| failed(err.to_string()))?;
    let found = compiler
        .check_always_denies_with_counterexample_opt(&compiled)
        .await
        .map_err(|err| failed(err.to_string()))?;
    Ok(found)
}

/// The forbids of `policies` (static, templates and their links), and one
/// permit of everything.
fn forbids_beside_permit_all(policies: &PolicySet) -> Result<PolicySet, ProofError> {
    let failed = |err: cedar_policy::PolicySetError| ProofError::Failed(err.to_string());
    let mut set = PolicySet::new();
    for template in policies.templates() {
        if template.effect() == Effect::Forbid {
            set.add_template(template.clone()).map_err(failed)?;
        }
    }
    for policy in policies.policies() {
        if policy.effect() != Effect::Forbid {
            continue;
        }
        match (policy.template_id(), policy.template_links()) {
            (Some(template), Some(links)) => set
                .link(template.clone(), policy.id().clone(), links)
                .map_err(failed)?,
            _ => set.add(policy.clone()).map_err(failed)?,
        }
    }
    let everything = Policy::parse(
        Some(PolicyId::new("portcullis.proof.permit_everything")),
        "permit (principal, action, resource);",
    )
    .map_err(|err| ProofError::Failed(err.to_string()))?;
    set.add(everything).map_err(failed)?;
    Ok(set)
}

/// Whether `action` is one tool's own call action (`server/tool`); the
/// schema's own actions have plain names.
fn is_tool_action(action: &EntityUid) -> bool {
    action.id().unescaped().contains('/')
}

/// The actions the properties are about, by name.
const BUILTIN_ACTIONS: [&str; 3] = ["discover_tool", "call_tool", "run_command"];

fn is_builtin(action: &EntityUid, name: &str) -> bool {
    action.type_name().to_string() == "Portcullis::Action" && action.id().unescaped() == name
}

/// Whether a property of `group` is about `action` by the built-in
/// hierarchy, whatever the schema says: a schema that takes `call_tool`
/// out of `use_tool` cannot take a call out of reach of a property (the
/// schema floor refuses such a schema too; the proof does not rest on it).
fn about(action: &EntityUid, group: &str) -> bool {
    let tool = is_tool_action(action);
    match group {
        "use_tool" => {
            tool || is_builtin(action, "discover_tool") || is_builtin(action, "call_tool")
        }
        "call_tool" => tool || is_builtin(action, "call_tool"),
        other => is_builtin(action, other),
    }
}

/// Whether `action` is `group` or in it.
fn in_group(actions: &Entities, action: &EntityUid, group: &str) -> bool {
    let is = |uid: &EntityUid| uid.id().unescaped() == group;
    is(action)
        || actions
            .ancestors(action)
            .is_some_and(|mut ancestors| ancestors.any(is))
}

/// Says once per process that there is no solver.
pub fn warn_solver_absent(reason: &str) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        tracing::warn!("the hard constraints were checked structurally, not proven: {reason}");
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pdp::{Engine, PolicyBundle};
    use crate::tools::Registry;

    fn solver_present() -> bool {
        let path = std::env::var("CVC5").unwrap_or_else(|_| "cvc5".into());
        std::process::Command::new(path)
            .arg("--version")
            .output()
            .is_ok_and(|out| out.status.success())
    }

    #[test]
    fn the_builtin_set_is_proven() {
        if !solver_present() {
            eprintln!("skipped: cvc5 is not on PATH (CI installs it)");
            return;
        }
        let engine =
            Engine::load(&PolicyBundle::builtin(), &Registry::builtin().unwrap(), &[]).unwrap();
        let proof = prove(engine.policies(), engine.schema()).unwrap();
        assert!(
            matches!(proof, Proof::Proven { queries } if queries >= 6),
            "{proof:?}"
        );
    }

    #[test]
    fn a_set_of_thousands_of_permits_is_proven_on_its_forbids() {
        if !solver_present() {
            eprintln!("skipped: cvc5 is not on PATH (CI installs it)");
            return;
        }
        let engine =
            Engine::load(&PolicyBundle::builtin(), &Registry::builtin().unwrap(), &[]).unwrap();
        let mut set = engine.policies().clone();
        for c in 0..2_000 {
            let text = format!(
                "permit (principal == Portcullis::Client::\"c{c}\", action in Portcullis::Action::\"use_tool\", resource);"
            );
            set.add(Policy::parse(Some(PolicyId::new(format!("c{c}"))), text).unwrap())
                .unwrap();
        }
        let reduced = forbids_beside_permit_all(&set).unwrap();
        assert_eq!(
            reduced.policies().count(),
            engine
                .policies()
                .policies()
                .filter(|p| p.effect() == Effect::Forbid)
                .count()
                + 1,
            "only the forbids and one permit reach the solver"
        );
        let proof = prove(&set, engine.schema()).unwrap();
        assert!(matches!(proof, Proof::Proven { .. }), "{proof:?}");
    }

    #[test]
    fn a_set_assembled_without_one_builtin_has_a_counterexample_the_engine_confirms() {
        if !solver_present() {
            eprintln!("skipped: cvc5 is not on PATH (CI installs it)");
            return;
        }
        let engine =
            Engine::load(&PolicyBundle::builtin(), &Registry::builtin().unwrap(), &[]).unwrap();
        // A broken assembly: one built-in dropped, and a permit a team may
        // well write.
        let mut broken = PolicySet::new();
        for policy in engine.policies().policies() {
            if policy.id().to_string() != "hard.no_write_outside_root" {
                broken.add(policy.clone()).unwrap();
            }
        }
        broken
            .add(
                Policy::parse(
                    Some(PolicyId::new("allow.everything")),
                    "permit (principal, action, resource);",
                )
                .unwrap(),
            )
            .unwrap();
        let err = prove(&broken, engine.schema()).unwrap_err();
        let ProofError::Counterexample {
            property,
            request,
            entities,
            text,
        } = &err
        else {
            panic!("{err}");
        };
        assert_eq!(*property, "a tool call never writes outside the root");
        assert!(text.contains("writes_inside_root: false"), "{text}");
        assert!(err.to_string().contains("counterexample"), "{err}");
        // Cedar confirms: the broken set allows the request, the real one
        // denies it.
        let authorizer = cedar_policy::Authorizer::new();
        let broken_answer = authorizer.is_authorized(request, &broken, entities);
        assert_eq!(broken_answer.decision(), cedar_policy::Decision::Allow);
        let real_answer = authorizer.is_authorized(request, engine.policies(), entities);
        assert_eq!(real_answer.decision(), cedar_policy::Decision::Deny);
        assert!(
            real_answer
                .diagnostics()
                .reason()
                .any(|id| id.to_string() == "hard.no_write_outside_root")
        );
    }
}
