//! `portcullis policy export DIR`: the assembled set as a bundle the
//! official Cedar CLI validates and tests unchanged (`pdp::export`), for a
//! team's CI that wants `cedar` alone to check its policies.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use serde_json::json;

use super::write_atomically;
use crate::cli::policy_set::load;
use crate::cli::{Exit, Format, PolicyArgs, print_json};
use crate::pdp::{self, EXPORTED_POLICIES, EXPORTED_SCHEMA};

#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub policies: PolicyArgs,
    /// The folder to write the bundle to: absent or empty, unless --force.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Write over the files of an earlier export in DIR.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: &ExportArgs, format: Format) -> anyhow::Result<Exit> {
    let occupied = std::fs::read_dir(&args.dir)
        .map(|mut entries| entries.next().is_some())
        .unwrap_or(false);
    if occupied && !args.force {
        anyhow::bail!(
            "{} exists and is not empty; pass --force to write over an earlier export",
            args.dir.display()
        );
    }
    let (bundle, engine, _) = match load(&args.policies, format)? {
        Ok(loaded) => loaded,
        Err(exit) => return Ok(exit),
    };
    let export = pdp::export(&engine, &bundle)?;
    for file in &export.files {
        let path = args.dir.join(&file.path);
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder)
                .with_context(|| format!("cannot create {}", folder.display()))?;
        }
        write_atomically(&path, &file.text)?;
    }
    let at = |name: &str| args.dir.join(name).display().to_string();
    let validate = format!(
        "cedar validate --policies {} --schema {} --deny-warnings",
        at(EXPORTED_POLICIES),
        at(EXPORTED_SCHEMA)
    );
    let tests: Vec<String> = export
        .tests
        .iter()
        .map(|tests| {
            format!(
                "cedar run-tests --policies {} --schema {} --tests {}",
                at(EXPORTED_POLICIES),
                at(EXPORTED_SCHEMA),
                at(tests)
            )
        })
        .collect();
    match format {
        Format::Json => print_json(&json!({
            "dir": args.dir,
            "policies": export.policies,
            "cases": export.cases,
            "files": export.files.iter().map(|f| &f.path).collect::<Vec<_>>(),
            "commands": std::iter::once(&validate).chain(&tests).collect::<Vec<_>>(),
        }))?,
        Format::Human => {
            println!(
                "exported {} policies, the schema, the entities and {} fixture cases in {} files to {}",
                export.policies,
                export.cases,
                export.tests.len(),
                Path::new(&args.dir).display()
            );
            println!("check it with the Cedar CLI (cedar-policy-cli):");
            println!("  {validate}");
            for command in &tests {
                println!("  {command}");
            }
        }
    }
    Ok(Exit::Ok)
}
