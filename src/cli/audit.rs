//! `portcullis audit {verify,replay,show}`: the auditor's offline commands.
//! They read a log and its snapshots; they never append to a log or reach
//! a running service.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

use super::audit_shared::{
    ChainArg, ExportArgs, each_log, each_log_then, export, is_shared, report_divergences,
};
use super::{Exit, Format, PolicyArgs, print_json, printable};
use crate::audit::{
    Checkpoint, DecisionRecord, Kind, Line, Mark, RecordedPolicy, Records, Replay, StoredRecord,
    Trust, read_public_key, scan_trusting, verify_trusting,
};
use crate::pdp::Cause;

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the hash chain from the first record to the head.
    Verify(VerifyArgs),
    /// Re-decide every decision, under its recorded policy set or a candidate.
    Replay(ReplayArgs),
    /// Show records as a table (or JSON), filtered.
    Show(ShowArgs),
    /// The latest signed checkpoint of a log, to keep elsewhere.
    Checkpoint(CheckpointArgs),
    /// Write a fleet's audit chains (`postgres://…`) as JSON Lines logs,
    /// each with its head and policy snapshots, for the offline tools.
    Export(ExportArgs),
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    pub log: PathBuf,
    /// The public key that signs checkpoints (`audit-signing.pub` beside
    /// the token store, or its text): every checkpoint must carry its
    /// signature, and the log must be signed to its end.
    #[arg(long, value_name = "PUBKEY")]
    pub key: Option<String>,
    /// A checkpoint exported earlier (`audit checkpoint --export`, as JSON
    /// or a file holding it) that the log must still contain; of a shared
    /// state, the chain it came from (`--chain`) must.
    #[arg(long, value_name = "CHECKPOINT")]
    pub expect: Option<String>,
    #[command(flatten)]
    pub chain: ChainArg,
}

#[derive(Debug, Args)]
pub struct CheckpointArgs {
    pub log: PathBuf,
    /// Print the latest checkpoint as one line of JSON for an external
    /// record (a ticket, a transparency log, another host).
    #[arg(long)]
    pub export: bool,
    /// Check its signature with this public key first.
    #[arg(long, value_name = "PUBKEY")]
    pub key: Option<String>,
    #[command(flatten)]
    pub chain: ChainArg,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    pub log: PathBuf,
    /// A candidate policy set: replay under it instead of the recorded sets.
    /// Giving only one of --policies/--schema takes the built-in other.
    #[command(flatten)]
    pub candidate: PolicyArgs,
    /// Threads re-deciding records (the chain is verified on one, in a
    /// single pass) [default: one per core].
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: Option<u32>,
    #[command(flatten)]
    pub chain: ChainArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DecisionFilter {
    Allow,
    Ask,
    Deny,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    pub log: PathBuf,
    /// Only decisions of this client.
    #[arg(long)]
    pub client: Option<String>,
    /// Only records of this session.
    #[arg(long)]
    pub session: Option<String>,
    /// Only decisions with this outcome.
    #[arg(long, value_enum)]
    pub decision: Option<DecisionFilter>,
    /// Only records at or after this time (RFC 3339, e.g. 2026-12-02T10:00:00Z).
    #[arg(long)]
    pub since: Option<String>,
    /// Only decisions the shadow policies (`policies/shadow/`) would have
    /// made differently, with the shadow outcome and its policies.
    #[arg(long)]
    pub shadow_diff: bool,
    #[command(flatten)]
    pub chain: ChainArg,
}

/// A log given as a file, or a fleet's shared state (`postgres://…`),
/// whose every chain is read through an export of its own.
pub fn run(command: AuditCommand, format: Format) -> anyhow::Result<Exit> {
    match command {
        AuditCommand::Verify(args) => {
            if args.expect.is_some() && args.chain.chain.is_none() && is_shared(&args.log) {
                anyhow::bail!(
                    "--expect holds one chain's checkpoint: name that chain with --chain ID (a replica's id) to verify a shared state against it"
                );
            }
            each_log_then(
                &args.log,
                &args.chain,
                format,
                |log| verify_log(&args, log, format),
                report_divergences,
            )
        }
        AuditCommand::Replay(args) => each_log(&args.log, &args.chain, format, |log| {
            replay(&args, log, format)
        }),
        AuditCommand::Show(args) => each_log(&args.log, &args.chain, format, |log| {
            show(&args, log, format)
        }),
        AuditCommand::Checkpoint(args) => each_log(&args.log, &args.chain, format, |log| {
            checkpoint(&args, log, format)
        }),
        AuditCommand::Export(args) => export(&args, format),
    }
}

/// An exported checkpoint, as JSON text or a file holding it.
fn read_expectation(source: &str) -> anyhow::Result<Checkpoint> {
    let text = std::fs::read_to_string(source).unwrap_or_else(|_| source.to_owned());
    serde_json::from_str(text.trim()).map_err(|err| {
        anyhow::anyhow!("--expect: not an exported checkpoint ({err}); use `portcullis audit checkpoint --export LOG`")
    })
}

fn trust(key: Option<&str>, expect: Option<&str>) -> anyhow::Result<Trust> {
    let key = key
        .map(read_public_key)
        .transpose()
        .map_err(|err| anyhow::anyhow!("--key: {err}"))?;
    let expect = match expect {
        Some(source) => {
            let checkpoint = read_expectation(source)?;
            if let Some(key) = &key
                && !checkpoint.signed_by(key)
            {
                anyhow::bail!("--expect: the checkpoint is not signed by --key");
            }
            // The checkpoint record follows the position it signs; the
            // log must still hold that position.
            Some(checkpoint.mark())
        }
        None => None,
    };
    Ok(Trust { key, expect })
}

fn checkpoint(args: &CheckpointArgs, log: &Path, format: Format) -> anyhow::Result<Exit> {
    let trust = trust(args.key.as_deref(), None)?;
    let scan = scan_trusting(log, trust)
        .map_err(|err| anyhow::anyhow!("cannot read {}: {err}", log.display()))?;
    if let Some(broken) = &scan.first_break {
        println!("FAILED: {broken}");
        return Ok(Exit::Failure);
    }
    let Some(checkpoint) = scan.last_checkpoint else {
        anyhow::bail!("{} holds no checkpoint", log.display());
    };
    let line = serde_json::to_string(&checkpoint)?;
    match (args.export, format) {
        (true, _) | (false, Format::Json) => println!("{line}"),
        (false, Format::Human) => println!(
            "checkpoint at seq {} ({}), signed by key {} at {}",
            checkpoint.seq, checkpoint.hash, checkpoint.key, checkpoint.time
        ),
    }
    Ok(Exit::Ok)
}

fn verify_log(args: &VerifyArgs, log: &Path, format: Format) -> anyhow::Result<Exit> {
    let trust = trust(args.key.as_deref(), args.expect.as_deref())?;
    let keyed = trust.key.is_some();
    let result = verify_trusting(log, trust)
        .map_err(|err| anyhow::anyhow!("cannot read {}: {err}", log.display()))?;
    match result {
        Ok(verified) => {
            let head = verified
                .scan
                .last
                .as_ref()
                .map(|m| m.hash.clone())
                .unwrap_or_default();
            let signed: Option<Mark> = verified.scan.last_checkpoint.as_ref().map(Checkpoint::mark);
            let vouch = match (&signed, keyed) {
                (Some(mark), true) => format!(
                    "signed by the key to its end (last checkpoint signs seq {})",
                    mark.seq
                ),
                (Some(mark), false) => format!(
                    "{} checkpoints, the last at seq {}; without --key they are not vouched for, only the chain and the head (which whoever can write the log folder can rewrite)",
                    verified.scan.checkpoints, mark.seq
                ),
                (None, _) => {
                    "no checkpoints; only the chain and the head are vouched for".to_owned()
                }
            };
            match format {
                Format::Json => print_json(&json!({
                    "ok": true,
                    "records": verified.scan.records,
                    "head": head,
                    "unacknowledged_tail": verified.unacknowledged_tail,
                    "checkpoints": verified.scan.checkpoints,
                    "last_signed": signed,
                    "key_checked": keyed,
                    "vouch": vouch,
                }))?,
                Format::Human => {
                    println!("ok: {} records, head {head}", verified.scan.records);
                    println!("{vouch}");
                    if verified.unacknowledged_tail {
                        println!(
                            "note: the last batch was written but never acknowledged (a crash); no tool ran on it"
                        );
                    }
                }
            }
            Ok(Exit::Ok)
        }
        Err(broken) => {
            match format {
                Format::Json => print_json(
                    &json!({"ok": false, "break": broken, "message": broken.to_string()}),
                )?,
                Format::Human => println!("FAILED: {broken}"),
            }
            Ok(Exit::Failure)
        }
    }
}

fn replay(args: &ReplayArgs, log: &Path, format: Format) -> anyhow::Result<Exit> {
    let candidate = if args.candidate.policies.is_some() || args.candidate.schema.is_some() {
        Some(args.candidate.bundle()?)
    } else {
        None
    };
    let mut replay = Replay::new(log, candidate.as_ref())?;
    let jobs = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, usize::from),
        |jobs| usize::try_from(jobs).unwrap_or(1),
    );
    let mut shown = Progress::new(std::io::stderr().is_terminal());
    let summary = replay.run_with_jobs(log, jobs, |records| shown.update(records));
    shown.finish();
    let summary = summary?;
    let changed = summary.changes.len();
    match format {
        Format::Json => print_json(&json!({
            "policy_set": if candidate.is_some() { "candidate" } else { "recorded" },
            "summary": summary,
        }))?,
        Format::Human => {
            println!(
                "replayed {} decisions of {} records under the {} policy set{}: {} same, {changed} changed, {} same outcome for other reasons, {} not re-decided (no Cedar decision)",
                summary.redecided,
                summary.records,
                if candidate.is_some() {
                    "candidate"
                } else {
                    "recorded"
                },
                if candidate.is_some() { "" } else { "s" },
                summary.same,
                summary.reasons_changed.len(),
                summary.not_redecided,
            );
            for (transition, count) in &summary.transitions {
                println!("  {transition}: {count}");
            }
            for change in summary.changes.iter().chain(&summary.reasons_changed) {
                println!(
                    "seq {} {} {} {} {}: {} -> {} [{}] -> [{}]",
                    change.seq,
                    change.time,
                    printable(&change.client),
                    change.action,
                    printable(&change.tool),
                    change.before,
                    change.after,
                    change.before_policies.join(", "),
                    change.after_policies.join(", "),
                );
            }
            if !summary.shadows_not_reproduced.is_empty() {
                println!(
                    "{} shadow decisions do not reproduce: seq {}",
                    summary.shadows_not_reproduced.len(),
                    summary
                        .shadows_not_reproduced
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
        }
    }
    Ok(
        if changed == 0 && summary.shadows_not_reproduced.is_empty() {
            Exit::Ok
        } else {
            Exit::Deny
        },
    )
}

fn show(args: &ShowArgs, log: &Path, format: Format) -> anyhow::Result<Exit> {
    let since = match &args.since {
        Some(text) => Some(
            humantime::parse_rfc3339_weak(text)
                .map_err(|err| anyhow::anyhow!("--since {text}: {err}"))?,
        ),
        None => None,
    };
    let records = Records::open(log)
        .map_err(|err| anyhow::anyhow!("cannot read {}: {err}", log.display()))?;
    let mut shown = Vec::new();
    let mut unreadable = 0;
    if format == Format::Human {
        println!(
            "{:>6}  {:<24} {:<8} {:<16} {:<14} {:<22} {:<6} why",
            "seq", "time", "kind", "client", "action", "tool", "result"
        );
    }
    for line in records {
        let record = match line? {
            Line::Record { record, .. } => record,
            Line::Partial | Line::Unreadable { .. } => {
                unreadable += 1;
                continue;
            }
        };
        let Some((body, decision)) = selected(args, since, &record) else {
            continue;
        };
        match format {
            Format::Json => shown.push(json!({
                "seq": record.seq, "prev": record.prev, "time": record.time, "kind": record.kind,
                "body": body, "hash": record.hash,
            })),
            Format::Human => println!(
                "{}",
                human_row(&record, &body, decision.as_ref(), args.shadow_diff)?
            ),
        }
    }
    if format == Format::Json {
        print_json(&shown)?;
    }
    if unreadable > 0 {
        eprintln!(
            "warning: {unreadable} unreadable line(s) skipped; run `portcullis audit verify`"
        );
    }
    Ok(Exit::Ok)
}

/// The record's body and, for a decision, the decision, when the filters
/// of `args` (and `since`) keep it.
fn selected(
    args: &ShowArgs,
    since: Option<SystemTime>,
    record: &StoredRecord,
) -> Option<(Value, Option<DecisionRecord>)> {
    if let Some(since) = since {
        let at: SystemTime =
            humantime::parse_rfc3339_weak(&record.time).unwrap_or(SystemTime::UNIX_EPOCH);
        if at < since {
            return None;
        }
    }
    let body = record.body_value();
    let decision: Option<DecisionRecord> = match record.kind {
        Kind::Decision => serde_json::from_value(body.clone()).ok(),
        _ => None,
    };
    let session = body.get("session").and_then(Value::as_str);
    if args.session.as_deref().is_some_and(|s| Some(s) != session) {
        return None;
    }
    if args.client.is_some() || args.decision.is_some() || args.shadow_diff {
        let d = decision.as_ref()?;
        if args.shadow_diff && d.shadow.is_none() {
            return None;
        }
        if args.client.as_deref().is_some_and(|c| c != d.client.name) {
            return None;
        }
        let wanted = args.decision.map(|f| match f {
            DecisionFilter::Allow => "allow",
            DecisionFilter::Ask => "ask",
            DecisionFilter::Deny => "deny",
        });
        if wanted.is_some_and(|w| w != d.decision.as_str()) {
            return None;
        }
    }
    Some((body, decision))
}

/// One line of the human table, every text made inert.
fn human_row(
    record: &StoredRecord,
    body: &Value,
    decision: Option<&DecisionRecord>,
    shadow_diff: bool,
) -> anyhow::Result<String> {
    let (client, action, tool, result, why) = match decision {
        Some(d) => {
            let mut why = why_of(d.cause, &d.policies);
            if let Some(shadow) = d.shadow.as_ref().filter(|_| shadow_diff) {
                why = format!(
                    "{why}  shadow: {} ({})",
                    shadow.decision.as_str(),
                    why_of(shadow.cause, &shadow.policies)
                );
            }
            (
                d.client.name.clone(),
                d.action.to_string(),
                d.resource.clone().unwrap_or_else(|| d.tool.clone()),
                d.decision.as_str().to_owned(),
                why,
            )
        }
        None => (
            String::new(),
            String::new(),
            String::new(),
            body.get("status")
                .or_else(|| body.get("event"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            body.get("decision_seq")
                .map(|s| format!("decision {s}"))
                .unwrap_or_default(),
        ),
    };
    let kind = serde_json::to_value(record.kind)?
        .as_str()
        .unwrap_or("")
        .to_owned();
    Ok(format!(
        "{:>6}  {:<24} {:<8} {:<16} {:<14} {:<22} {:<6} {}",
        record.seq,
        record.time,
        kind,
        printable(&client),
        action,
        printable(&tool),
        result,
        printable(&why)
    ))
}

/// What decided: the determining policies, else the cause.
fn why_of(cause: Cause, policies: &[RecordedPolicy]) -> String {
    if policies.is_empty() {
        cause.to_string()
    } else {
        policies
            .iter()
            .map(|p| p.id.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// How far a replay has got: a progress bar on a terminal; otherwise a
/// count line at most once a second (for logs of CI jobs).
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    started: Instant,
    last_line: Option<Instant>,
}

impl Progress {
    fn new(terminal: bool) -> Self {
        let bar = terminal.then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{spinner} replayed {human_pos} records ({per_sec}, {elapsed})",
            ) {
                bar.set_style(style);
            }
            bar
        });
        Self {
            bar,
            started: Instant::now(),
            last_line: None,
        }
    }

    fn update(&mut self, records: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(records);
            return;
        }
        let due = self
            .last_line
            .is_none_or(|last| last.elapsed() >= std::time::Duration::from_secs(1));
        if due && records > 0 {
            let rate = records as f64 / self.started.elapsed().as_secs_f64().max(1e-6);
            eprintln!("replayed {records} records ({rate:.0}/s)");
            self.last_line = Some(Instant::now());
        }
    }

    fn finish(&self) {
        // The bar goes, so the summary starts on a line of its own.
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
