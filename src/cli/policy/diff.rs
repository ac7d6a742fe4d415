//! `portcullis policy diff OLD NEW`: what a policy change newly permits,
//! proved by the solver (`pdp::diff`), as a table or JSON, with a request
//! for each widening that `portcullis check` can run.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use clap::Args;
use serde_json::{Value, json};

use crate::cli::policy_set::report_problems;
use crate::cli::{Exit, Format, print_json, printable, simulated_call};
use crate::loosening::loosenings;
use crate::pdp::{
    self, ClientRecord, Counterexample, Diff, Engine, Finding, Outcome, PolicyBundle, ToolAction,
};
use crate::servers::{Servers, registry_for};
use crate::tools::Registry;

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The set in force: a policies folder, a folder holding `policies/`
    /// (and `schemas/`), or `builtin` for the built-in defaults.
    pub old: SetPath,
    /// The proposed set, in the same forms.
    pub new: SetPath,
}

/// Where one side's policy set is.
#[derive(Debug, Clone)]
pub enum SetPath {
    Builtin,
    Folder {
        policies: PathBuf,
        schema: Option<PathBuf>,
    },
}

impl std::str::FromStr for SetPath {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "builtin" {
            return Ok(Self::Builtin);
        }
        // A folder that is not there is the set's problem, reported when
        // it is loaded (a set that cannot be compared exits 2, never as a
        // usage error).
        let path = PathBuf::from(text);
        let nested = path.join("policies");
        Ok(if nested.is_dir() {
            let schemas = path.join("schemas");
            Self::Folder {
                policies: nested,
                schema: schemas.is_dir().then_some(schemas),
            }
        } else {
            Self::Folder {
                policies: path,
                schema: None,
            }
        })
    }
}

impl SetPath {
    pub(crate) fn bundle(&self) -> anyhow::Result<PolicyBundle> {
        Ok(match self {
            Self::Builtin => PolicyBundle::builtin(),
            Self::Folder { policies, schema } => {
                if !policies.is_dir() {
                    anyhow::bail!("{} is not a folder (nor `builtin`)", policies.display());
                }
                PolicyBundle::load(Some(policies), schema.as_deref())?
            }
        })
    }

    /// The flags that make `check` (and the rest) read this set.
    pub(crate) fn flags(&self) -> Vec<String> {
        match self {
            Self::Builtin => Vec::new(),
            Self::Folder { policies, schema } => {
                let mut flags = vec!["--policies".to_owned(), shown(policies)];
                if let Some(schema) = schema {
                    flags.extend(["--schema".to_owned(), shown(schema)]);
                }
                flags
            }
        }
    }
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

pub fn run(args: &DiffArgs, format: Format) -> anyhow::Result<Exit> {
    let Some(old) = Side::load(&args.old, "OLD", format)? else {
        return Ok(Exit::Unproven);
    };
    let Some(new) = Side::load(&args.new, "NEW", format)? else {
        return Ok(Exit::Unproven);
    };
    let started = Instant::now();
    let Some(mut diff) = proven(&old.engine, &new.engine, format)? else {
        return Ok(Exit::Unproven);
    };
    let elapsed = started.elapsed();
    confirm_with_check(&mut diff, &old, &new)?;
    let data = loosenings(&old.bundle, &new.bundle);
    let wider = diff.wider() || !data.is_empty();
    let (old, new) = (&old.engine, &new.engine);
    match format {
        Format::Json => print_json(&json!({
            "old": old.identity(),
            "new": new.identity(),
            "wider": wider,
            "findings": diff.findings.iter().map(|f| finding_json(f, args)).collect::<Vec<_>>(),
            "data_widenings": data,
            "bounds": diff.bounds,
            "queries": diff.queries,
            "elapsed_ms": elapsed.as_millis() as u64,
        }))?,
        Format::Human => {
            print_human(&diff, args, old, new, elapsed);
            for loosening in &data {
                println!("WIDER (data) {loosening}");
            }
        }
    }
    Ok(if wider { Exit::Wider } else { Exit::Ok })
}

/// What NEW newly permits, or `None` once why it could not be proven
/// was reported.
pub(super) fn proven(old: &Engine, new: &Engine, format: Format) -> anyhow::Result<Option<Diff>> {
    match pdp::diff(old, new) {
        Ok(diff) => Ok(Some(diff)),
        Err(err) => {
            match format {
                Format::Json => print_json(&json!({"error": err.to_string()}))?,
                Format::Human => eprintln!("error: {err}"),
            }
            Ok(None)
        }
    }
}

/// A side's engines with one client each, by the client's name and tier
/// (`None` when the tier is not the side's).
type ByClient = HashMap<(String, String), Option<Rc<Engine>>>;

/// One side's set, loaded as `check` loads it.
pub(super) struct Side {
    bundle: PolicyBundle,
    registry: Registry,
    servers: Servers,
    pub engine: Engine,
    /// The side loaded with one counterexample's client, by name and tier:
    /// most counterexamples name the same few.
    with_client: RefCell<ByClient>,
}

impl Side {
    /// The side, or `None` after its problems were reported.
    fn load(path: &SetPath, name: &str, format: Format) -> anyhow::Result<Option<Self>> {
        match path.bundle() {
            Ok(bundle) => Self::of(bundle, false, name, format),
            Err(err) => {
                eprintln!("error: {name}: {err}");
                Ok(None)
            }
        }
    }

    /// The side of `bundle` (a recorded one held to the rules of its
    /// time), or `None` after its problems were reported.
    pub(super) fn of(
        bundle: PolicyBundle,
        recorded: bool,
        name: &str,
        format: Format,
    ) -> anyhow::Result<Option<Self>> {
        let loaded = registry_for(&bundle).and_then(|registry| {
            let engine = if recorded {
                Engine::load_recorded(&bundle, &registry, &[])
            } else {
                Engine::load(&bundle, &registry, &[])
            };
            engine.map(|engine| (registry, engine))
        });
        match loaded {
            Ok((registry, engine)) => Ok(Some(Self {
                servers: Servers::of(&bundle).unwrap_or_default(),
                bundle,
                registry,
                engine,
                with_client: RefCell::default(),
            })),
            Err(err) => {
                if format == Format::Human {
                    eprintln!("{name} does not load:");
                }
                report_problems(&err.problems, format)?;
                Ok(None)
            }
        }
    }

    /// The side with `client` among its clients; `None` when its tier is
    /// not one of the side's.
    fn engine_with(&self, client: &ClientRecord) -> Option<Rc<Engine>> {
        let key = (client.name.clone(), client.tier.clone());
        self.with_client
            .borrow_mut()
            .entry(key)
            .or_insert_with(|| {
                Engine::load(&self.bundle, &self.registry, std::slice::from_ref(client))
                    .ok()
                    .map(Rc::new)
            })
            .clone()
    }

    /// How `check` decides the counterexample's call against this side,
    /// in an empty root; a tier the side lacks is refused.
    fn check(&self, found: &Counterexample, root: &Path) -> Option<Outcome> {
        let tool = found.tool.as_deref()?;
        let client = ClientRecord {
            name: found.client.clone(),
            tier: found.tier.clone(),
        };
        let Some(engine) = self.engine_with(&client) else {
            return Some(Outcome::Deny);
        };
        let action = if found.action.ends_with("\"discover_tool\"") {
            ToolAction::Discover
        } else {
            ToolAction::Call
        };
        let call = simulated_call::Call {
            engine: &engine,
            registry: &self.registry,
            servers: &self.servers,
            client: &client,
            tool,
            action,
            approval_channel: &found.approval_channel,
        };
        let arguments = found.arguments.clone().unwrap_or_else(|| json!({}));
        simulated_call::decide(&call, &arguments, root)
            .ok()
            .map(|checked| checked.decision.outcome)
    }
}

/// Keeps `checkable` only for counterexamples that `check` really decides
/// as the proof says, facts computed from the arguments: the solver knows
/// the arguments' Cedar types, not every rule of the tool's JSON Schema.
fn confirm_with_check(diff: &mut Diff, old: &Side, new: &Side) -> anyhow::Result<()> {
    let root = tempfile::tempdir()?;
    for found in diff
        .findings
        .iter_mut()
        .filter_map(|finding| finding.counterexample.as_mut())
        .filter(|found| found.checkable)
    {
        if let (Some(arguments), Some(tool)) = (
            found.arguments.as_mut(),
            found
                .tool
                .as_deref()
                .and_then(|tool| new.registry.lookup(tool)),
        ) {
            complete(arguments, &tool.spec.input_schema);
        }
        found.checkable = new.check(found, root.path()) == Some(found.new)
            && old.check(found, root.path()) == Some(found.old);
    }
    Ok(())
}

/// Adds the required arguments the policies never see (a file's
/// content is redacted from them), each the plainest value of its type.
fn complete(arguments: &mut Value, schema: &Value) {
    let (Some(arguments), Some(required)) = (
        arguments.as_object_mut(),
        schema.get("required").and_then(Value::as_array),
    ) else {
        return;
    };
    for name in required.iter().filter_map(Value::as_str) {
        if arguments.contains_key(name) {
            continue;
        }
        let property = &schema["properties"][name];
        let plain = match property.get("type").and_then(Value::as_str) {
            Some("integer" | "number") => property.get("minimum").cloned().unwrap_or(json!(0)),
            Some("boolean") => json!(false),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => json!("x"),
        };
        arguments.insert(name.to_owned(), plain);
    }
}

fn finding_json(finding: &Finding, args: &DiffArgs) -> Value {
    let mut value = json!({
        "action": finding.action,
        "outcome": finding.outcome,
        "wider": finding.wider,
        "confirmed": finding.confirmed,
    });
    if let Some(change) = &finding.opened_by {
        value["opened_by"] = json!(change);
    }
    if let Some(found) = &finding.counterexample {
        let mut shown = serde_json::to_value(found).unwrap_or(Value::Null);
        if let (Some(object), Some(check)) =
            (shown.as_object_mut(), check_command(found, &args.new))
        {
            object.insert("check".to_owned(), json!(check));
            if let Some(old_check) = check_command(found, &args.old) {
                object.insert("check_old".to_owned(), json!(old_check));
            }
        }
        value["counterexample"] = shown;
    }
    value
}

/// `portcullis check …` that makes this request against `set`, when
/// `check` can make it.
fn check_command(found: &Counterexample, set: &SetPath) -> Option<Vec<String>> {
    let tool = found.tool.as_ref().filter(|_| found.checkable)?;
    let mut argv = vec!["portcullis".to_owned(), "check".to_owned()];
    argv.extend(set.flags());
    argv.extend([
        "--client".to_owned(),
        found.client.clone(),
        "--tier".to_owned(),
        found.tier.clone(),
        "--tool".to_owned(),
        tool.clone(),
        "--args".to_owned(),
        found
            .arguments
            .as_ref()
            .map_or_else(|| "{}".to_owned(), Value::to_string),
        "--approval-channel".to_owned(),
        found.approval_channel.clone(),
    ]);
    if found.action.ends_with("\"discover_tool\"") {
        argv.extend(["--action".to_owned(), "discover".to_owned()]);
    }
    Some(argv)
}

fn print_human(
    diff: &Diff,
    args: &DiffArgs,
    old: &Engine,
    new: &Engine,
    elapsed: std::time::Duration,
) {
    println!(
        "policy diff: OLD {} -> NEW {}",
        short(&old.identity().hash),
        short(&new.identity().hash)
    );
    let actions = print_table(diff);
    for finding in diff.findings.iter().filter(|f| f.wider) {
        print_finding(finding, &args.new);
    }
    println!("\nthe proof covers:");
    for bound in &diff.bounds {
        println!("  - {bound}");
    }
    print_verdict(diff, actions, elapsed);
}

/// One row per action, a column per pass; returns how many actions.
fn print_table(diff: &Diff) -> usize {
    let width = diff
        .findings
        .iter()
        .map(|f| f.action.len())
        .max()
        .unwrap_or(6)
        .max(6);
    println!("{:<width$}  {:<7}  {:<7}", "ACTION", "ALLOW", "ASK");
    let mut actions: Vec<&str> = diff.findings.iter().map(|f| f.action.as_str()).collect();
    actions.dedup();
    for action in &actions {
        let cell = |outcome: pdp::Pass| {
            diff.findings
                .iter()
                .find(|f| f.action == *action && f.outcome == outcome)
                .map_or("-", |f| match (f.wider, f.confirmed) {
                    (false, _) => "same",
                    (true, true) => "WIDER",
                    (true, false) => "MAYBE",
                })
        };
        println!(
            "{action:<width$}  {:<7}  {:<7}",
            cell(pdp::Pass::Allow),
            cell(pdp::Pass::Ask)
        );
    }
    actions.len()
}

/// A widened action and pass with its counterexample and the `check`
/// command line that reproduces it against `new`.
fn print_finding(finding: &pdp::Finding, new: &SetPath) {
    let Some(found) = &finding.counterexample else {
        return;
    };
    println!(
        "\n{} ({}) {}: OLD {}, NEW {}",
        if finding.confirmed {
            "WIDER"
        } else {
            "MAYBE WIDER"
        },
        finding.outcome.as_str(),
        finding.action,
        found.old.as_str(),
        found.new.as_str()
    );
    println!(
        "  client `{}` (tier {}) -> {}",
        printable(&found.client),
        printable(&found.tier),
        printable(&found.resource)
    );
    if let Some(change) = &finding.opened_by {
        println!("  opened by the change to {change}'s data");
    }
    if !finding.confirmed {
        println!(
            "  not confirmed: both sides decide this request alike; the change may open another"
        );
    }
    if let Some(arguments) = &found.arguments {
        println!("  arguments: {arguments}");
    }
    println!("  context: {}", found.context);
    match check_command(found, new) {
        Some(argv) => println!("  reproduce: {}", printable(&shell_words(&argv))),
        None => {
            println!("  (these facts come from no command line: `check` cannot make this request)");
        }
    }
}

fn print_verdict(diff: &Diff, actions: usize, elapsed: std::time::Duration) {
    let wider = diff.findings.iter().filter(|f| f.wider).count();
    let maybe = diff
        .findings
        .iter()
        .filter(|f| f.wider && !f.confirmed)
        .count();
    if maybe > 0 {
        println!(
            "{maybe} of them MAYBE: a change to the data that the solver could not separate from \
             the policies; the requests it found are decided alike, others may not be, so they count"
        );
    }
    if wider == 0 {
        println!(
            "NEW permits nothing OLD does not ({actions} actions x 2 passes, {} solver queries, {:.1} s)",
            diff.queries,
            elapsed.as_secs_f64()
        );
    } else {
        println!(
            "NEW is WIDER than OLD in {wider} of {} (action, pass) pairs ({} solver queries, {:.1} s)",
            diff.findings.len(),
            diff.queries,
            elapsed.as_secs_f64()
        );
    }
}

fn short(hash: &str) -> &str {
    hash.get(..16).unwrap_or(hash)
}

/// A command line a shell reads back as the same words.
fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|word| {
            if !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=@".contains(c))
            {
                word.clone()
            } else {
                format!("'{}'", word.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
