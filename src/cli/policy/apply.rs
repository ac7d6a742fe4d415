//! `portcullis policy apply`: lets one exact policy set through a running
//! `serve --reload tighten-only`, after a person has read what it newly
//! permits (`policy diff`). The set must load as `serve` would load it; its
//! hash is added to the applied list beside the audit log, which `serve`
//! watches.

use std::path::PathBuf;
use std::time::SystemTime;

use anyhow::Context;
use clap::Args;
use serde_json::json;

use super::load;
use crate::audit::{applied_path, apply_set};
use crate::cli::serve::audit_path;
use crate::cli::{Exit, Format, PolicyArgs, print_json};

#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub policies: PolicyArgs,
    /// The audit log of the `serve` to let the set through [default: as
    /// `serve`'s].
    #[arg(long, env = "PORTCULLIS_AUDIT", value_name = "FILE")]
    pub audit: Option<PathBuf>,
}

pub fn run(args: &ApplyArgs, format: Format) -> anyhow::Result<Exit> {
    let (_, engine, _) = match load(&args.policies, format)? {
        Ok(loaded) => loaded,
        Err(exit) => return Ok(exit),
    };
    let hash = engine.identity().hash.clone();
    let log = audit_path(args.audit.as_deref())?;
    let file = applied_path(&log);
    let new = apply_set(&file, &hash, SystemTime::now())
        .with_context(|| format!("cannot record the applied set in {}", file.display()))?;
    match format {
        Format::Json => print_json(&json!({
            "policy_set": hash,
            "newly_applied": new,
            "applied_file": file,
        }))?,
        Format::Human => println!(
            "applied: policy set {hash}{}; a `serve --reload tighten-only` logging to {} loads it at its next look",
            if new { "" } else { " (already applied)" },
            log.display()
        ),
    }
    Ok(Exit::Ok)
}
