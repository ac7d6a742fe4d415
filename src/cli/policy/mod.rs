//! `portcullis policy {validate,test,fmt,diff,apply,review,export}`: what a
//! security team runs on a policy change before it ships. Only `fmt` and
//! `test --accept` write policy files, atomically; `export` writes its own
//! folder.

mod apply;
mod diff;
mod export;
mod review;
mod review_html;

use std::path::Path;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::policy_set::{load, report_problems};
use super::{Exit, Format, PolicyArgs, print_json};
use crate::atomic_file::{self, Mode};
use crate::pdp::{self, Problem, Proof};
use crate::servers::Servers;

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Parse and strictly validate the policy set; warnings are errors.
    Validate(PolicyArgs),
    /// Run the fixture tests in `policies/tests/` (`cedar run-tests` format).
    /// A failing case says what the policies decide now and which policies
    /// decided it; `--accept` rewrites those expectations.
    Test(TestArgs),
    /// Format the `.cedar` files in place, or only check them.
    Fmt(FmtArgs),
    /// Prove whether NEW permits anything OLD does not, per action and
    /// outcome, with a counterexample for each widening. Exit 0: NEW is no
    /// wider; 4: it is wider; 2: the sets could not be compared.
    Diff(diff::DiffArgs),
    /// Let this exact policy set through a running `serve --reload
    /// tighten-only`, which refuses a set that permits more than the one in
    /// force until it is applied.
    Apply(apply::ApplyArgs),
    /// One report for a proposed set: what the proof says it newly permits,
    /// and which recorded decisions of an audit log would change under it
    /// (table, `--format json`, `--html FILE`). Exit 0: it opens nothing;
    /// 4: it opens something; 2: it could not be judged.
    Review(review::ReviewArgs),
    /// Write the assembled set as a bundle the official Cedar CLI runs
    /// unchanged: every enforced policy (the built-in hard constraints
    /// included), the schema with each tool's action, the entities, and
    /// the fixtures with their entities (`cedar validate --deny-warnings`,
    /// `cedar run-tests`).
    Export(export::ExportArgs),
}

#[derive(Debug, Args)]
pub struct TestArgs {
    #[command(flatten)]
    pub policies: PolicyArgs,
    /// Rewrite the expectations of every case that ran and decided
    /// otherwise (decision, determining policies, number of errors) to
    /// what the policies decide now, after printing each change: as a
    /// snapshot test is updated. A case that cannot run is not touched.
    #[arg(long)]
    pub accept: bool,
}

#[derive(Debug, Args)]
pub struct FmtArgs {
    #[command(flatten)]
    pub policies: PolicyArgs,
    /// Change nothing; exit 1 and list the files that are not formatted.
    #[arg(long, short = 'c')]
    pub check: bool,
    #[arg(long, short = 'l', default_value_t = 80)]
    pub line_width: usize,
    #[arg(long, short = 'i', default_value_t = 2)]
    pub indent_width: isize,
}

pub fn run(command: PolicyCommand, format: Format) -> anyhow::Result<Exit> {
    match command {
        PolicyCommand::Validate(args) => validate(&args, format),
        PolicyCommand::Test(args) => test(&args, format),
        PolicyCommand::Fmt(args) => fmt(&args, format),
        PolicyCommand::Diff(args) => diff::run(&args, format),
        PolicyCommand::Apply(args) => apply::run(&args, format),
        PolicyCommand::Review(args) => review::run(&args, format),
        PolicyCommand::Export(args) => export::run(&args, format),
    }
}

fn validate(args: &PolicyArgs, format: Format) -> anyhow::Result<Exit> {
    let (bundle, engine, proof) = match load(args, format)? {
        Ok(loaded) => loaded,
        Err(exit) => return Ok(exit),
    };
    let identity = engine.identity();
    // The set loaded, so its servers did.
    let servers = Servers::of(&bundle).unwrap_or_default();
    let pinned: Vec<Value> = servers
        .config
        .servers
        .iter()
        .map(|server| {
            let tools = servers
                .lock
                .servers
                .get(&server.name)
                .map_or(0, |t| t.len());
            json!({"name": server.name, "pinned_tools": tools})
        })
        .collect();
    let servers_text = if pinned.is_empty() {
        String::new()
    } else {
        let each: Vec<String> = pinned
            .iter()
            .map(|s| {
                format!(
                    "{} ({} pinned tools)",
                    s["name"].as_str().unwrap_or_default(),
                    s["pinned_tools"]
                )
            })
            .collect();
        format!(", downstream servers {}", each.join(", "))
    };
    let (proven, proof_text) = match &proof {
        Proof::Proven { queries } => (
            true,
            format!(
                "hard constraints proven for the whole set ({} properties, {queries} solver queries)",
                pdp::PROPERTIES.len()
            ),
        ),
        Proof::SolverAbsent { reason } => (
            false,
            format!("hard constraints checked structurally, not proven: {reason}"),
        ),
    };
    match format {
        Format::Json => print_json(&json!({
            "valid": true,
            "problems": [],
            "policies": engine.policy_count(),
            "files": bundle.policies.len(),
            "builtin_files": bundle.builtin.len(),
            "tiers": engine.tiers(),
            "path_classes": engine.path_classes().names(),
            "servers": pinned,
            "policy_set": identity,
            "hard_constraints": {
                "proven": proven,
                "properties": pdp::PROPERTIES.iter().map(|p| p.name).collect::<Vec<_>>(),
                "detail": proof_text,
            },
        }))?,
        Format::Human => println!(
            "ok: {} policies in {} files and the built-in hard constraints, tiers {}, path classes {}{}; {}; policy set {}",
            engine.policy_count(),
            bundle.policies.len(),
            engine.tiers().join(", "),
            engine.path_classes().names().join(", "),
            servers_text,
            proof_text,
            identity.hash
        ),
    }
    Ok(Exit::Ok)
}

fn test(args: &TestArgs, format: Format) -> anyhow::Result<Exit> {
    if args.accept && args.policies.policies.is_none() {
        anyhow::bail!("the built-in fixtures cannot be rewritten; pass --policies DIR");
    }
    let (bundle, engine, _) = match load(&args.policies, format)? {
        Ok(loaded) => loaded,
        Err(exit) => return Ok(exit),
    };
    let results = pdp::run_fixtures(&engine, &bundle);
    let accepted = if args.accept {
        let rewritten = pdp::accepted_fixtures(&bundle, &results);
        for (path, text) in &rewritten {
            atomic_file::replace(std::path::Path::new(path), text.as_bytes(), Mode::AsBefore)
                .with_context(|| format!("cannot rewrite {path}"))?;
        }
        results.iter().filter(|r| r.acceptable()).count()
    } else {
        0
    };
    // Accepted cases now pass; what could not run still fails.
    let failed = results.iter().filter(|r| !r.passed()).count() - accepted;
    let passed = results.len() - failed;
    match format {
        Format::Json => print_json(&json!({
            "passed": passed, "failed": failed, "accepted": accepted, "results": results
        }))?,
        Format::Human => {
            for result in results.iter().filter(|r| !r.passed()) {
                let verb = if args.accept && result.acceptable() {
                    "ACCEPTED"
                } else {
                    "FAIL"
                };
                println!(
                    "{verb} {}: {}\n  {}",
                    result.file,
                    result.name,
                    result.failure.as_deref().unwrap_or_default()
                );
                if let Some(observed) = &result.observed {
                    for policy in &observed.determined_by {
                        println!(
                            "  decided by {} ({}) in {}",
                            policy.id, policy.reason, policy.file
                        );
                    }
                    if observed.determined_by.is_empty() {
                        println!("  decided by no policy (nothing permits it)");
                    }
                }
            }
            if results.is_empty() {
                println!("no fixture tests found (add JSON files to policies/tests/)");
            }
            if accepted > 0 {
                println!("{accepted} expectations rewritten to what the policies decide now");
            }
            println!("{passed} passed, {failed} failed");
        }
    }
    Ok(if failed == 0 && !results.is_empty() {
        Exit::Ok
    } else {
        Exit::Failure
    })
}

fn fmt(args: &FmtArgs, format: Format) -> anyhow::Result<Exit> {
    if args.policies.policies.is_none() && !args.check {
        anyhow::bail!("the built-in policies cannot be rewritten; pass --policies DIR, or --check");
    }
    let bundle = args.policies.bundle()?;
    let config = cedar_policy_formatter::Config {
        line_width: args.line_width,
        indent_width: args.indent_width,
    };
    let mut unformatted = Vec::new();
    let mut problems = Vec::new();
    for file in bundle.policies.iter().chain(&bundle.shadow) {
        let pretty = match cedar_policy_formatter::policies_str_to_pretty(&file.text, &config) {
            Ok(pretty) => pretty,
            Err(err) => {
                problems.push(Problem::new(
                    pdp::ProblemKind::Parse,
                    &file.display,
                    format!("{err}"),
                ));
                continue;
            }
        };
        if pretty == file.text {
            continue;
        }
        unformatted.push(file.display.clone());
        if !args.check {
            write_atomically(Path::new(&file.display), &pretty)?;
        }
    }
    if !problems.is_empty() {
        report_problems(&problems, format)?;
        return Ok(Exit::ValidationFailure);
    }
    match format {
        Format::Json => print_json(&json!({
            "check": args.check,
            "unformatted": unformatted,
        }))?,
        Format::Human => {
            for file in &unformatted {
                if args.check {
                    println!("not formatted: {file}");
                } else {
                    println!("formatted: {file}");
                }
            }
        }
    }
    Ok(if args.check && !unformatted.is_empty() {
        Exit::Failure
    } else {
        Exit::Ok
    })
}

/// Replaces a file so that a crash leaves either the old or the new text.
pub(super) fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    atomic_file::replace(path, text.as_bytes(), Mode::AsBefore)
        .with_context(|| format!("cannot write {}", path.display()))
}
