//! The audit commands on a fleet's shared state: a `postgres://` source is
//! exported, chain by chain, to the JSON Lines logs the offline tools read
//! (`audit export` keeps them; `verify`, `replay`, `show` and `checkpoint`
//! read a temporary export of every chain), so an auditor's tools are the
//! same whichever way the records were kept.

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;

use super::state_paths::with_state;
use super::{Exit, Format, print_json};
use crate::audit::{divergences, served};
use crate::state::{StateUrl, valid_chain_name};

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The fleet's shared state (`postgres://…`).
    pub state: String,
    /// The folder each chain is written to, as CHAIN.jsonl with its head
    /// and policy snapshots.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Only this chain (a replica's id).
    #[arg(long, value_name = "ID")]
    pub chain: Option<String>,
}

/// Which chain of a shared state an auditor's command reads.
#[derive(Debug, Args)]
pub struct ChainArg {
    /// Only this chain of a shared state (a replica's id) [default: every
    /// chain, each in turn].
    #[arg(long, value_name = "ID")]
    pub chain: Option<String>,
}

/// The shared state a log argument names, if it names one.
fn shared_source(log: &Path) -> anyhow::Result<Option<StateUrl>> {
    match log.to_str() {
        Some(text) if text.starts_with("postgres://") || text.starts_with("postgresql://") => {
            Ok(Some(text.parse()?))
        }
        _ => Ok(None),
    }
}

/// Runs `each` on the log `source` names: the file itself, or every chain
/// of a shared state, each announced by its name (or only `chain`),
/// exported to a temporary folder. A failure of any is the exit; else the
/// first verdict.
pub fn each_log(
    source: &Path,
    chain: &ChainArg,
    format: Format,
    each: impl FnMut(&Path) -> anyhow::Result<Exit>,
) -> anyhow::Result<Exit> {
    each_log_then(source, chain, format, each, |_, _| Ok(()))
}

/// As [`each_log`], then `after` on every chain read from a shared state
/// (not on a single file).
pub fn each_log_then(
    source: &Path,
    chain: &ChainArg,
    format: Format,
    mut each: impl FnMut(&Path) -> anyhow::Result<Exit>,
    after: impl FnOnce(&[(String, PathBuf)], Format) -> anyhow::Result<()>,
) -> anyhow::Result<Exit> {
    let only = chain.chain.as_deref();
    let Some(url) = shared_source(source)? else {
        if only.is_some() {
            anyhow::bail!(
                "--chain picks one chain of a fleet's shared state (postgres://…); a log file holds one chain"
            );
        }
        return each(source);
    };
    check_chain_name(only)?;
    let folder = tempfile::tempdir()?;
    let exported = export_chains(&url, only, folder.path())?;
    if exported.is_empty() {
        anyhow::bail!("{url} holds no audit chain");
    }
    let mut worst = Exit::Ok;
    for (chain, file) in &exported {
        // One chain asked for by name needs no announcing, and an exported
        // checkpoint must be its line alone.
        if format == Format::Human && only.is_none() {
            println!("chain {chain}:");
        }
        // A failure outranks any verdict, and a verdict a clean chain.
        match each(file)? {
            Exit::Ok => {}
            Exit::Failure => worst = Exit::Failure,
            verdict if worst == Exit::Ok => worst = verdict,
            _ => {}
        }
    }
    after(&exported, format)?;
    Ok(worst)
}

/// Says which replicas decided under different policy sets over the same
/// time (each loads the set from its own folder: one that lagged shows
/// here). Reported, not failed: the chains are sound either way.
pub fn report_divergences(chains: &[(String, PathBuf)], format: Format) -> anyhow::Result<()> {
    let mut spans = Vec::new();
    for (chain, file) in chains {
        spans.extend(served(chain, file)?);
    }
    let found = divergences(&spans);
    match format {
        Format::Json => print_json(&json!({"divergences": found}))?,
        Format::Human if found.is_empty() => {
            println!("every replica decided under the same policy set at any one time");
        }
        Format::Human => {
            for divergence in &found {
                let (a, b) = (&divergence.first, &divergence.second);
                println!(
                    "replicas served different policy sets at the same time: {} decided under {} from {} to {}, {} under {} from {} to {}",
                    a.chain, a.policy_set, a.from, a.to, b.chain, b.policy_set, b.from, b.to
                );
            }
        }
    }
    Ok(())
}

/// Writes the chains (all, or `only`) of `url` into `folder`.
fn export_chains(
    url: &StateUrl,
    only: Option<&str>,
    folder: &Path,
) -> anyhow::Result<Vec<(String, PathBuf)>> {
    std::fs::create_dir_all(folder)?;
    let every = with_state(url, async |state| state.chains().await)?;
    let chains = match only {
        Some(chain) if every.iter().any(|held| held == chain) => vec![chain.to_owned()],
        Some(chain) => anyhow::bail!(
            "{url} holds no chain `{chain}` (it holds: {})",
            if every.is_empty() {
                "none".to_owned()
            } else {
                every.join(", ")
            }
        ),
        None => every,
    };
    with_state(url, async |state| {
        let mut written = Vec::new();
        for chain in chains {
            // A name the database holds but no replica could have given
            // (`--replica-id` is checked) is not made a file name.
            if !valid_chain_name(&chain) {
                tracing::warn!(chain = %chain, "a chain whose name is not a replica id is left out");
                continue;
            }
            let file = folder.join(format!("{chain}.jsonl"));
            state.export_chain(&chain, &file).await?;
            written.push((chain, file));
        }
        Ok(written)
    })
}

fn check_chain_name(chain: Option<&str>) -> anyhow::Result<()> {
    if chain.is_some_and(|chain| !valid_chain_name(chain)) {
        anyhow::bail!("--chain is a replica id: 1 to 64 characters of A-Z a-z 0-9 . _ -");
    }
    Ok(())
}

/// Whether `source` is a fleet's shared state rather than a log file.
pub fn is_shared(source: &Path) -> bool {
    matches!(shared_source(source), Ok(Some(_)))
}

pub fn export(args: &ExportArgs, format: Format) -> anyhow::Result<Exit> {
    let Some(url) = shared_source(Path::new(&args.state))? else {
        anyhow::bail!("`audit export` reads a fleet's shared state: give a postgres:// URL");
    };
    check_chain_name(args.chain.as_deref())?;
    let written = export_chains(&url, args.chain.as_deref(), &args.out)?;
    match format {
        Format::Json => print_json(&json!({
            "chains": written.iter().map(|(chain, file)| json!({"chain": chain, "log": file})).collect::<Vec<_>>(),
        }))?,
        Format::Human => {
            for (chain, file) in &written {
                println!("{chain}: {}", file.display());
            }
        }
    }
    Ok(Exit::Ok)
}
