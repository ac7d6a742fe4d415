//! The policy review: one typed report joining the proof of what a
//! candidate set newly permits (`pdp::diff`, and the loosenings of its
//! data files) with a replay of recorded traffic under it
//! (`audit::Replay`): which recorded decisions would change, the openings
//! (deny to allow, deny to ask) first, grouped by tool and client, with
//! counts over time. `portcullis policy review` prints it as a table, JSON
//! or an HTML page.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use serde::Serialize;

use crate::audit::{Change, RecordedAction, ReplaySummary};
use crate::loosening::Loosening;
use crate::pdp::{Diff, Finding, Outcome};

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

/// The report of a candidate set: the proof of what it newly permits
/// (`diff`, with the loosenings of its data files) and the replay of the
/// recorded traffic under it (`summary`).
pub fn report(
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
