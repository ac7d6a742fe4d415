//! `portcullis policy review --candidate DIR --audit LOG`: one report that
//! joins the proof of what a candidate set newly permits (`policy diff`
//! against the set in force at the end of the log) with a replay of the
//! recorded traffic under it: which recorded decisions would change, the
//! openings (deny to allow, deny to ask) first, grouped by tool and client,
//! with counts over time (`crate::review`). As a table, JSON, or a
//! self-contained HTML page (`review_html.rs`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;

use super::diff::{SetPath, Side, proven};
use super::review_html;
use crate::audit::{Kind, Line, Records, Replay, load_snapshot, snapshots_dir};
use crate::cli::{Exit, Format, print_json, printable};
use crate::loosening::loosenings;
use crate::pdp::{Engine, PolicyBundle};
use crate::review::{Report, SetRef, report};

#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// The proposed set: a policies folder, a folder holding `policies/`
    /// (and `schemas/`), or `builtin`.
    #[arg(long)]
    pub candidate: SetPath,
    /// The audit log whose traffic is replayed; the set in force is the
    /// last one it names (its snapshot beside it).
    #[arg(long, env = "PORTCULLIS_AUDIT", value_name = "FILE")]
    pub audit: PathBuf,
    /// Compare against this set instead of the log's last one.
    #[arg(long)]
    pub old: Option<SetPath>,
    /// Also write the report as a self-contained HTML page.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

pub fn run(args: &ReviewArgs, format: Format) -> anyhow::Result<Exit> {
    let Some((old_ref, old, old_bundle)) = load_old(args, format)? else {
        return Ok(Exit::Unproven);
    };
    let candidate_bundle = args
        .candidate
        .bundle()
        .map_err(|err| anyhow::anyhow!("--candidate: {err}"))?;
    let Some(candidate) = Side::of(candidate_bundle.clone(), false, "the candidate", format)?
    else {
        return Ok(Exit::Unproven);
    };
    let candidate = candidate.engine;
    let Some(diff) = proven(&old, &candidate, format)? else {
        return Ok(Exit::Unproven);
    };
    let data = loosenings(&old_bundle, &candidate_bundle);
    let mut replay = Replay::new(&args.audit, Some(&candidate_bundle))?;
    let summary = replay.run(&args.audit, |_| {})?;
    let report = report(
        old_ref,
        SetRef {
            hash: candidate.identity().hash.clone(),
            source: "--candidate".to_owned(),
        },
        (diff, data),
        summary,
    );
    if let Some(path) = &args.html {
        std::fs::write(path, review_html::page(&report))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    match format {
        Format::Json => print_json(&serde_json::to_value(&report)?)?,
        Format::Human => print_human(&report),
    }
    Ok(if report.opens { Exit::Wider } else { Exit::Ok })
}

/// The set the candidate is judged against, with where it came from.
fn load_old(
    args: &ReviewArgs,
    format: Format,
) -> anyhow::Result<Option<(SetRef, Engine, PolicyBundle)>> {
    if let Some(old) = &args.old {
        let bundle = old
            .bundle()
            .map_err(|err| anyhow::anyhow!("--old: {err}"))?;
        let Some(Side { engine, .. }) = Side::of(bundle.clone(), false, "--old", format)? else {
            return Ok(None);
        };
        let hash = engine.identity().hash.clone();
        return Ok(Some((
            SetRef {
                hash,
                source: "--old".to_owned(),
            },
            engine,
            bundle,
        )));
    }
    let (hash, seq) = last_set(&args.audit)?;
    let bundle = load_snapshot(&snapshots_dir(&args.audit), &hash)
        .with_context(|| format!("the set in force, {hash}, has no readable snapshot"))?;
    let Some(Side { engine, .. }) = Side::of(bundle.clone(), true, "the set in force", format)?
    else {
        return Ok(None);
    };
    Ok(Some((
        SetRef {
            hash,
            source: format!("the log's last set, seq {seq}"),
        },
        engine,
        bundle,
    )))
}

/// The last policy set the log names: by a decision, a start, or a reload.
fn last_set(log: &Path) -> anyhow::Result<(String, u64)> {
    let records = Records::open(log).with_context(|| format!("cannot read {}", log.display()))?;
    let mut last = None;
    for line in records {
        let Line::Record { record, .. } = line? else {
            continue;
        };
        let body = record.body_value();
        let named = match record.kind {
            Kind::System if body["event"] == "policy_reload" => body["new"].as_str(),
            _ => body["policy_set"]["hash"].as_str().or_else(|| {
                body["policy_set"]
                    .as_str()
                    .filter(|_| body["event"] == "start")
            }),
        };
        if let Some(hash) = named {
            last = Some((hash.to_owned(), record.seq));
        }
    }
    last.with_context(|| format!("{} names no policy set", log.display()))
}

fn print_human(report: &Report) {
    println!(
        "policy review: candidate {} against {} ({})",
        short(&report.candidate.hash),
        short(&report.old.hash),
        report.old.source
    );
    println!(
        "\nwhat the candidate can newly permit, proven ({} action-pass pairs):",
        report.proof.proven
    );
    if report.proof.widenings.is_empty() && report.proof.data_widenings.is_empty() {
        println!("  nothing: it permits no request the set in force refuses");
    }
    for loosening in &report.proof.data_widenings {
        println!("  data: {loosening}");
    }
    for finding in &report.proof.widenings {
        let example = finding.counterexample.as_ref().map_or(String::new(), |c| {
            format!(
                "{} -> {}: client `{}` (tier {}) -> {}",
                c.old.as_str(),
                c.new.as_str(),
                c.client,
                c.tier,
                c.resource
            )
        });
        println!(
            "  {} ({}): {example}",
            finding.action,
            finding.outcome.as_str()
        );
    }
    let replay = &report.replay;
    println!(
        "\nrecorded decisions replayed under the candidate: {} of {} records, {} same, {} changed",
        replay.redecided, replay.records, replay.same, replay.changed
    );
    if !replay.groups.is_empty() {
        println!(
            "  {:<12} {:<28} {:<16} {:>6}  proven",
            "TRANSITION", "TOOL", "CLIENT", "COUNT"
        );
    }
    for group in &replay.groups {
        println!(
            "  {:<12} {:<28} {:<16} {:>6}  {}",
            group.transition,
            printable(&group.tool),
            printable(&group.client),
            group.count,
            if group.proven { "yes" } else { "no" }
        );
    }
    if !replay.over_time.series.is_empty() {
        println!("\nchanged decisions per {}:", replay.over_time.bucket);
        for bucket in &replay.over_time.series {
            let counts: Vec<String> = bucket
                .counts
                .iter()
                .map(|(transition, count)| format!("{transition} {count}"))
                .collect();
            println!("  {}  {}", bucket.start, counts.join(", "));
        }
    }
    println!(
        "\n{}",
        if report.opens {
            "the candidate OPENS what the set in force keeps shut"
        } else {
            "the candidate opens nothing"
        }
    );
}

fn short(hash: &str) -> &str {
    hash.get(..16).unwrap_or(hash)
}
