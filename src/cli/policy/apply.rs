//! `portcullis policy apply`: lets one exact policy set through a running
//! `serve --reload tighten-only`, after a person has read what it newly
//! permits (`policy diff`). The set must load as `serve` would load it.
//! Its approval is a `policy_apply` record in the audit chain: covered by a
//! checkpoint signed with the log's key (beside the token store), or
//! carrying the signature of an operator key (`--apply-keys`) that `serve`
//! was given with `--apply-key`. The nudge file beside the log tells a
//! watching `serve` to look; written by hand it lets nothing through.

use std::path::PathBuf;
use std::time::SystemTime;

use anyhow::Context;
use clap::Args;
use serde_json::json;

use crate::audit::{
    AuditLog, Kind, PUBLIC_KEY_FILE, applied_path, apply_record, apply_set, load_or_create_signer,
};
use crate::cli::policy_set::load;
use crate::cli::state_paths::{StateArgs, StoreArgs, audit_path, signer_for, with_state};
use crate::cli::{Exit, Format, PolicyArgs, print_json};
use crate::state::StateUrl;

#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub policies: PolicyArgs,
    /// The audit log of the `serve` to let the set through [default: as
    /// `serve`'s].
    #[arg(long, env = "PORTCULLIS_AUDIT", value_name = "FILE")]
    pub audit: Option<PathBuf>,
    #[command(flatten)]
    pub store: StoreArgs,
    /// Sign the approval with the operator key pair in DIR (created, mode
    /// 0600, on first use), for a `serve --apply-key DIR/audit-signing.pub`.
    /// Without it the approval is covered by the log's own key, which is
    /// kept beside the token store.
    #[arg(long, value_name = "DIR")]
    pub apply_keys: Option<PathBuf>,
    /// A fleet's shared state: the signed approval is stored there, where
    /// every replica given `--apply-key` finds it (and is told at once).
    /// Needs --apply-keys: no replica's log key is trusted by the others.
    #[command(flatten)]
    pub state: StateArgs,
}

pub fn run(args: &ApplyArgs, format: Format) -> anyhow::Result<Exit> {
    let (_, engine, _) = match load(&args.policies, format)? {
        Ok(loaded) => loaded,
        Err(exit) => return Ok(exit),
    };
    let hash = engine.identity().hash.clone();
    if let Some(url) = args.state.url()? {
        return apply_in_fleet(args, &url, &hash, format);
    }
    let log = audit_path(args.audit.as_deref())?;
    let (record, writer) = match &args.apply_keys {
        Some(dir) => (apply_record(&hash, Some(&operator_signer(dir)?)), None),
        None => (
            apply_record(&hash, None),
            Some(signer_for(&args.store, &log)?),
        ),
    };
    let audit = AuditLog::open(&log, writer)?;
    let seq = audit
        .append_blocking(Kind::System, record)
        .with_context(|| format!("cannot record the approval in {}", log.display()))?;
    drop(audit);
    let file = applied_path(&log);
    let new = apply_set(&file, &hash, SystemTime::now())
        .with_context(|| format!("cannot nudge serve through {}", file.display()))?;
    let operator_key = args
        .apply_keys
        .as_ref()
        .map(|dir| dir.join(PUBLIC_KEY_FILE));
    match format {
        Format::Json => print_json(&json!({
            "policy_set": hash,
            "record": seq,
            "newly_applied": new,
            "applied_file": file,
            "operator_key": operator_key,
        }))?,
        Format::Human => {
            println!(
                "applied: policy set {hash}, record {seq} of {}; a `serve --reload tighten-only` logging there loads it at its next look",
                log.display()
            );
            if let Some(key) = operator_key {
                println!(
                    "signed with the operator key {} (give serve `--apply-key {}`)",
                    key.display(),
                    key.display()
                );
            }
        }
    }
    Ok(Exit::Ok)
}

/// The operator's key in `dir`, made there (and the folder) the first time.
fn operator_signer(dir: &std::path::Path) -> anyhow::Result<crate::audit::Signer> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(load_or_create_signer(dir)?)
}

/// `policy apply --state`: the record, signed with the operator key, stored
/// in the shared state for every replica.
fn apply_in_fleet(
    args: &ApplyArgs,
    url: &StateUrl,
    hash: &str,
    format: Format,
) -> anyhow::Result<Exit> {
    let Some(dir) = &args.apply_keys else {
        anyhow::bail!(
            "a fleet's `policy apply` is signed with an operator key every replica trusts: give --apply-keys DIR, and each replica --apply-key DIR/{PUBLIC_KEY_FILE}"
        );
    };
    let record = apply_record(hash, Some(&operator_signer(dir)?));
    with_state(url, async |state| state.add_apply(hash, &record).await)?;
    let key = dir.join(PUBLIC_KEY_FILE);
    match format {
        Format::Json => print_json(&json!({
            "policy_set": hash,
            "state": url.to_string(),
            "operator_key": key,
        }))?,
        Format::Human => println!(
            "applied: policy set {hash}, signed with the operator key {}, in the shared state {url}; every `serve --reload tighten-only --apply-key {}` of the fleet loads it now",
            key.display(),
            key.display()
        ),
    }
    Ok(Exit::Ok)
}
