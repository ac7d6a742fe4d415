//! NEW's data, fixed in the solver's model of the world. SymCC treats
//! every entity attribute as unknown; left so, a counterexample could call
//! `write_file` a read-only tool or give a tier capabilities it does not
//! have. Here the tiers, tools, servers, shell and policy set become
//! defined functions (SymCC's literal entity data) while clients stay
//! unknown. SymCC compares two sets only within one such world, so a
//! change to the data itself is handled apart (`data.rs`).

use std::sync::Arc;

use cedar_policy::{Policy, PolicyId, PolicySet, RequestEnv, Schema};
use cedar_policy_symcc::solver::LocalSolver;
use cedar_policy_symcc::{CedarSymCompiler, CompiledPolicySet, Env, SymEnv};

use super::DiffError;
use crate::pdp::Engine;
use crate::pdp::entities::CLIENT_TYPE;

/// The symbolic world of `env` with `side`'s data fixed in it.
pub(super) async fn with_data_of(
    compiler: &mut CedarSymCompiler<LocalSolver>,
    schema: &Schema,
    env: &RequestEnv,
    base: SymEnv,
    side: &Engine,
) -> Result<SymEnv, DiffError> {
    let request = any_request(compiler, schema, env, &base).await?;
    with_data(schema, env, &base, &request, side)
}

/// Some well-typed request of `env`. SymCC turns concrete entities into
/// literal data only beside a concrete request, which the solver finds
/// more surely than code that would build every context type by hand.
async fn any_request(
    compiler: &mut CedarSymCompiler<LocalSolver>,
    schema: &Schema,
    env: &RequestEnv,
    base: &SymEnv,
) -> Result<cedar_policy::Request, DiffError> {
    let action = env.action().to_string();
    let everything = Policy::parse(
        Some(PolicyId::new("portcullis.diff.everything")),
        "permit (principal, action, resource);",
    )
    .map_err(|err| DiffError::Failed(err.to_string()))?;
    let set =
        PolicySet::from_policies([everything]).map_err(|err| DiffError::Failed(err.to_string()))?;
    let compiled = CompiledPolicySet::compile_with_custom_symenv(&set, env, schema, base.clone())
        .map_err(|err| DiffError::Failed(format!("{action}: {err}")))?;
    let found = compiler
        .check_always_denies_with_counterexample_opt(&compiled)
        .await
        .map_err(|err| DiffError::Failed(format!("{action}: {err}")))?;
    found
        .map(|found| found.request)
        .ok_or_else(|| DiffError::Failed(format!("{action}: the schema admits no request")))
}

fn with_data(
    schema: &Schema,
    env: &RequestEnv,
    base: &SymEnv,
    request: &cedar_policy::Request,
    side: &Engine,
) -> Result<SymEnv, DiffError> {
    let concrete = SymEnv::from_concrete_env(
        env,
        schema,
        &Env {
            request: request.clone(),
            entities: side.entities().clone(),
        },
    )
    .map_err(|err| {
        DiffError::Failed(format!(
            "the tiers, tools and servers do not fit NEW's schema: {err}"
        ))
    })?;
    let mut pinned = concrete;
    // The entity map's type is not exported; its field is public.
    let entities = Arc::make_mut(&mut pinned.entities);
    for (kind, data) in entities.0.iter_mut() {
        if kind.to_string() == CLIENT_TYPE
            && let Some(unknown) = base.entities.0.get(kind)
        {
            *data = unknown.clone();
        }
    }
    pinned.request = base.request.clone();
    Ok(pinned)
}
