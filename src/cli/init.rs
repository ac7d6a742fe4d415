//! `portcullis init`: writes the default policy tree (policies, schema,
//! fixtures) for a team to edit. It overwrites a file that exists only with
//! `--force`.

use std::fs;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use serde_json::json;

use super::{Exit, Format, print_json};
use crate::pdp::{BUILTIN_COPY, PolicyBundle};

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The folder to write `policies/` and `schemas/` into (created if missing).
    pub dir: PathBuf,
    /// Overwrite files that already exist.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: &InitArgs, format: Format) -> anyhow::Result<Exit> {
    let bundle = PolicyBundle::builtin();
    let targets: Vec<(PathBuf, &str)> = bundle
        .team_files()
        .map(|file| (args.dir.join(&file.logical), file.text.as_str()))
        .chain(
            bundle
                .builtin
                .iter()
                .map(|file| (args.dir.join(BUILTIN_COPY), file.text.as_str())),
        )
        .collect();
    if !args.force {
        let existing: Vec<String> = targets
            .iter()
            .filter(|(path, _)| path.exists())
            .map(|(path, _)| path.display().to_string())
            .collect();
        if !existing.is_empty() {
            anyhow::bail!(
                "refusing to overwrite existing files (pass --force to overwrite): {}",
                existing.join(", ")
            );
        }
    }
    for (path, text) in &targets {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        super::policy::write_atomically(path, text)?;
    }
    let policies = args.dir.join("policies");
    let schemas = args.dir.join("schemas");
    match format {
        Format::Json => print_json(&json!({
            "written": targets.iter().map(|(p, _)| p.display().to_string()).collect::<Vec<_>>(),
            "policies": policies,
            "schema": schemas,
        }))?,
        Format::Human => {
            for (path, _) in &targets {
                println!("wrote {}", path.display());
            }
            println!(
                "next: edit {}, then run `portcullis policy validate --policies {} --schema {}` and `portcullis policy test ...` with the same flags",
                policies.join("20_allowlist.cedar").display(),
                policies.display(),
                schemas.display()
            );
        }
    }
    Ok(Exit::Ok)
}
