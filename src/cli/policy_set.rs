//! Loading a policy set for a command that decides or reports on it
//! (`check`, `gate`, `policy ...`, `serve`), and reporting why a set does
//! not load: one way for every command, so each exits alike.

use std::io::Write;

use serde_json::json;

use super::{Exit, Format, PolicyArgs, print_json};
use crate::pdp::{Audience, ClientRecord, Engine, PolicyBundle, Problem, ProblemKind, Proof};
use crate::servers::registry_for;
use crate::tools::Registry;

/// The bundle and the registry of its tools, or the problems reported.
fn bundle_and_registry(
    args: &PolicyArgs,
    format: Format,
) -> anyhow::Result<Result<(PolicyBundle, Registry), Exit>> {
    let bundle = args.bundle()?;
    match registry_for(&bundle) {
        Ok(registry) => Ok(Ok((bundle, registry))),
        Err(err) => {
            report_problems(&err.problems, format)?;
            Ok(Err(Exit::ValidationFailure))
        }
    }
}

/// Loads the bundle and the engine, or reports why not.
pub(crate) fn load(
    args: &PolicyArgs,
    format: Format,
) -> anyhow::Result<Result<(PolicyBundle, Engine, Proof), Exit>> {
    let (bundle, registry) = match bundle_and_registry(args, format)? {
        Ok(loaded) => loaded,
        Err(exit) => return Ok(Err(exit)),
    };
    match Engine::load_proven(&bundle, &registry, &[], None, Audience::AnyClient) {
        Ok((engine, proof)) => Ok(Ok((bundle, engine, proof))),
        Err(err) => {
            report_problems(&err.problems, format)?;
            Ok(Err(Exit::ValidationFailure))
        }
    }
}

/// Loads the policy set with one client (for `check` and `gate`). A tier
/// the set does not declare is a usage error; any other problem is
/// reported, with the exit code of a set that does not load.
pub(crate) fn load_for_client(
    args: &PolicyArgs,
    client: &ClientRecord,
    format: Format,
) -> anyhow::Result<Result<(PolicyBundle, Registry, Engine), Exit>> {
    let (bundle, registry) = match bundle_and_registry(args, format)? {
        Ok(loaded) => loaded,
        Err(exit) => return Ok(Err(exit)),
    };
    match Engine::load_proven(
        &bundle,
        &registry,
        std::slice::from_ref(client),
        None,
        Audience::AnyClient,
    ) {
        Ok((engine, _)) => Ok(Ok((bundle, registry, engine))),
        Err(err)
            if err
                .problems
                .iter()
                .all(|p| p.kind == ProblemKind::UnknownTier) =>
        {
            let message = err
                .problems
                .first()
                .map(|p| p.message.clone())
                .unwrap_or_default();
            anyhow::bail!("--tier: {message}");
        }
        Err(err) => {
            report_problems(&err.problems, format)?;
            Ok(Err(Exit::ValidationFailure))
        }
    }
}

pub(crate) fn report_problems(problems: &[Problem], format: Format) -> anyhow::Result<()> {
    match format {
        Format::Json => print_json(&json!({"valid": false, "problems": problems})),
        Format::Human => {
            let mut stderr = std::io::stderr().lock();
            for problem in problems {
                writeln!(stderr, "error: {problem}")?;
            }
            writeln!(
                stderr,
                "the policy set does not validate: {} problem{}",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            )?;
            Ok(())
        }
    }
}
