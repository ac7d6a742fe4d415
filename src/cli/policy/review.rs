//! `portcullis policy review --candidate DIR --audit LOG`: one report that
//! joins the proof of what a candidate set newly permits (`policy diff`
//! against the set in force at the end of the log) with a replay of the
//! recorded traffic under it: which recorded decisions would change, the
//! openings (deny to allow, deny to ask) first, grouped by tool and client,
//! with counts over time. As a table, JSON, or a self-contained HTML page
//! (`review_html.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use anyhow::Context;
use clap::Args;
use serde::Serialize;

use super::diff::{SetPath, Side, proven};
use super::review_html;
use crate::audit::{
    Change, Kind, Line, RecordedAction, Records, Replay, ReplaySummary, load_snapshot,
    snapshots_dir,
};
use crate::cli::{Exit, Format, print_json, printable};
use crate::loosening::{Loosening, loosenings};
use crate::pdp::{Diff, Engine, Finding, Outcome, PolicyBundle};

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

/// The whole report, as JSON and as the HTML page draws it.
#[derive(Debug, Serialize)]
pub struct Report {
    pub old: SetRef,
    pub candidate: SetRef,
    pub proof: Proof,
    pub replay: Replayed,
    /// Whether the candidate newly permits anything: proven, or seen in
    /// the recorded traffic.
    pub opens: bool,
}

#[derive(Debug, Serialize)]
pub struct SetRef {
    pub hash: String,
    pub source: String,
}

#[derive(Debug, Serialize)]
pub struct Proof {
    pub wider: bool,
    /// The actions and passes the candidate widens, with counterexamples.
    pub widenings: Vec<Finding>,
    /// The loosenings of its data files (`crate::loosening`), each a
    /// widening too.
    pub data_widenings: Vec<Loosening>,
    /// How many (action, pass) pairs were proven.
    pub proven: usize,
    pub bounds: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct Replayed {
    pub records: u64,
    pub decisions: u64,
    pub redecided: u64,
    pub same: u64,
    pub changed: usize,
    pub transitions: BTreeMap<String, u64>,
    /// Changed decisions by transition, tool and client: openings first.
    pub groups: Vec<Group>,
    /// Changed decisions over time, by transition.
    pub over_time: OverTime,
    pub changes: Vec<Change>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Group {
    pub transition: String,
    /// Deny to allow or deny to ask: the candidate opens what was shut.
    pub opening: bool,
    pub action: RecordedAction,
    pub tool: String,
    pub client: String,
    pub count: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    /// Whether the proof names a widening for this tool (or action): a
    /// recorded opening the proof does not name would mean data the proof
    /// does not see (a recorded tier, say).
    pub proven: bool,
}

#[derive(Debug, Serialize)]
pub struct OverTime {
    /// `hour` or `day`.
    pub bucket: &'static str,
    pub transitions: Vec<String>,
    pub series: Vec<Bucket>,
}

#[derive(Debug, Serialize)]
pub struct Bucket {
    pub start: String,
    /// Changed decisions in the bucket, by transition.
    pub counts: BTreeMap<String, u64>,
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

fn report(
    old: SetRef,
    candidate: SetRef,
    (diff, data): (Diff, Vec<Loosening>),
    summary: ReplaySummary,
) -> Report {
    let proven = diff.findings.len();
    let widenings: Vec<Finding> = diff.findings.into_iter().filter(|f| f.wider).collect();
    let groups = groups(&summary.changes, &widenings);
    let over_time = over_time(&summary.changes);
    let wider = !widenings.is_empty() || !data.is_empty();
    let opens = wider || groups.iter().any(|g| g.opening);
    Report {
        old,
        candidate,
        proof: Proof {
            wider,
            widenings,
            data_widenings: data,
            proven,
            bounds: diff.bounds,
        },
        replay: Replayed {
            records: summary.records,
            decisions: summary.decisions,
            redecided: summary.redecided,
            same: summary.same,
            changed: summary.changes.len(),
            transitions: summary.transitions,
            groups,
            over_time,
            changes: summary.changes,
        },
        opens,
    }
}

fn transition(change: &Change) -> String {
    format!("{}->{}", change.before, change.after)
}

fn is_opening(change: &Change) -> bool {
    change.before == Outcome::Deny && change.after != Outcome::Deny
}

/// Openings first (deny->allow, then deny->ask), then by count.
fn groups(changes: &[Change], widenings: &[Finding]) -> Vec<Group> {
    let mut groups: BTreeMap<(String, String, String, String), Group> = BTreeMap::new();
    for change in changes {
        let key = (
            transition(change),
            change.action.as_str().to_owned(),
            change.tool.clone(),
            change.client.clone(),
        );
        let group = groups.entry(key).or_insert_with(|| Group {
            transition: transition(change),
            opening: is_opening(change),
            action: change.action,
            tool: change.tool.clone(),
            client: change.client.clone(),
            count: 0,
            first_seq: change.seq,
            last_seq: change.seq,
            proven: proof_names(widenings, change),
        });
        group.count += 1;
        group.last_seq = change.seq;
    }
    let rank = |t: &str| match t {
        "deny->allow" => 0,
        "deny->ask" => 1,
        _ => 2,
    };
    let mut groups: Vec<Group> = groups.into_values().collect();
    groups.sort_by(|a, b| {
        rank(&a.transition)
            .cmp(&rank(&b.transition))
            .then(b.count.cmp(&a.count))
            .then(a.tool.cmp(&b.tool))
            .then(a.client.cmp(&b.client))
    });
    groups
}

/// Whether a widening of the proof is about this recorded decision's tool
/// (or, for the gate and the rest, its action).
fn proof_names(widenings: &[Finding], change: &Change) -> bool {
    widenings.iter().any(|finding| {
        let tool = finding
            .counterexample
            .as_ref()
            .and_then(|c| c.tool.as_deref());
        match change.action {
            RecordedAction::CallTool => {
                tool == Some(change.tool.as_str()) && !finding.action.ends_with("\"discover_tool\"")
            }
            RecordedAction::DiscoverTool => {
                finding.action.ends_with("\"discover_tool\"") && tool == Some(change.tool.as_str())
            }
            other => finding.action.ends_with(&format!("\"{}\"", other.as_str())),
        }
    })
}

fn over_time(changes: &[Change]) -> OverTime {
    let at = |change: &Change| {
        humantime::parse_rfc3339_weak(&change.time)
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs())
    };
    let (first, last) = changes
        .iter()
        .map(at)
        .fold((u64::MAX, 0), |(lo, hi), t| (lo.min(t), hi.max(t)));
    let (bucket, width) = if last.saturating_sub(first) > 72 * 3600 {
        ("day", 86_400)
    } else {
        ("hour", 3_600)
    };
    let mut series: BTreeMap<u64, BTreeMap<String, u64>> = BTreeMap::new();
    let mut transitions: Vec<String> = Vec::new();
    for change in changes {
        let start = at(change) / width * width;
        *series
            .entry(start)
            .or_default()
            .entry(transition(change))
            .or_insert(0) += 1;
        if !transitions.contains(&transition(change)) {
            transitions.push(transition(change));
        }
    }
    transitions.sort();
    OverTime {
        bucket,
        transitions,
        series: series
            .into_iter()
            .map(|(start, counts)| Bucket {
                start: humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(start))
                    .to_string(),
                counts,
            })
            .collect(),
    }
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
