//! `portcullis check`: decides one tool call offline, as `serve` would,
//! and prints the decision with its facts; it never runs the tool.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::{Value, json};

use super::policy_set::load_for_client;
use super::simulated_call::{Call, Checked, ResolvedArgument, decide};
use super::{ClientArgs, Exit, Format, PolicyArgs, print_json};
use crate::facts::ToolFacts;
use crate::pdp::{ClientRecord, Decision, Outcome, ToolAction};
use crate::servers::Servers;
use crate::tools::ToolId;

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub policies: PolicyArgs,
    #[command(flatten)]
    pub client: ClientArgs,
    /// The tool, as `server/name` (or a bare name when only one server has it).
    #[arg(long)]
    pub tool: String,
    /// The call's arguments, a JSON object.
    #[arg(long, default_value = "{}")]
    pub args: String,
    /// The workspace root that paths are judged against.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    /// Decide a call, or whether the tool shows in the client's listing.
    #[arg(long, value_enum, default_value_t = CheckAction::Call)]
    pub action: CheckAction,
    /// The channel an approval would come through, for policies that care.
    #[arg(long, default_value = "client_elicitation")]
    pub approval_channel: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckAction {
    Call,
    Discover,
}

pub fn run(args: &CheckArgs, format: Format) -> anyhow::Result<Exit> {
    let client = args.client.record();
    let (bundle, registry, engine) = match load_for_client(&args.policies, &client, format)? {
        Ok(loaded) => loaded,
        Err(exit) => return Ok(exit),
    };

    let arguments: serde_json::Value = serde_json::from_str(&args.args)
        .map_err(|err| anyhow::anyhow!("--args is not JSON: {err}"))?;
    let action = match args.action {
        CheckAction::Call => ToolAction::Call,
        CheckAction::Discover => ToolAction::Discover,
    };
    let servers = Servers::of(&bundle).unwrap_or_default();
    let Checked {
        tool: tool_id,
        facts,
        paths,
        decision,
    } = decide(
        &Call {
            engine: &engine,
            registry: &registry,
            servers: &servers,
            client: &client,
            tool: &args.tool,
            action,
            approval_channel: &args.approval_channel,
        },
        &arguments,
        &args.root,
    )?;
    match format {
        Format::Json => print_json(&json!({
            "decision": decision.outcome,
            "cause": decision.cause,
            "reason": decision.reason(),
            "policies": decision.policies,
            "errors": decision.errors,
            "policy_set": decision.policy_set,
            "request": {
                "client": client.name,
                "tier": client.tier,
                "tool": tool_id,
                "action": args.action,
                "facts": facts,
                "paths": paths,
            },
        }))?,
        Format::Human => print_human(&decision, &client, &tool_id, args.action, &facts, &paths),
    }
    Ok(match decision.outcome {
        Outcome::Allow => Exit::Ok,
        Outcome::Ask => Exit::Ask,
        Outcome::Deny => Exit::Deny,
    })
}

fn print_human(
    decision: &Decision,
    client: &ClientRecord,
    tool: &ToolId,
    action: CheckAction,
    facts: &ToolFacts,
    paths: &[ResolvedArgument],
) {
    let verb = match action {
        CheckAction::Call => "call",
        CheckAction::Discover => "discover",
    };
    println!(
        "{} ({}): {verb} {tool} by client `{}` (tier {})",
        decision.outcome.as_str().to_uppercase(),
        decision.cause.as_str(),
        client.name,
        client.tier
    );
    if decision.policies.is_empty() {
        println!("  {}", decision.reason());
    }
    for policy in &decision.policies {
        println!("  {}  [{}]\n    {}", policy.id, policy.file, policy.reason);
    }
    for error in &decision.errors {
        println!("  error: {}", error.message);
    }
    for path in paths {
        println!(
            "  {}: {} -> {} ({})",
            path.argument,
            path.requested.display(),
            path.canonical.display(),
            if path.inside_root {
                "inside the root"
            } else {
                "outside the root"
            }
        );
    }
    let classes: Vec<&str> = facts.path_classes.iter().map(String::as_str).collect();
    println!(
        "  facts: reads_inside_root={} writes_inside_root={} touches_vcs_metadata={} writes_vcs_metadata={} path_classes=[{}]",
        facts.reads_inside_root,
        facts.writes_inside_root,
        facts.touches_vcs_metadata,
        facts.writes_vcs_metadata,
        classes.join(", ")
    );
    if let Some(input) = &facts.input {
        println!("  input: {}", Value::Object(input.values.clone()));
        for (field, digest) in &input.redacted {
            println!("  redacted: {field} (sha256 {digest})");
        }
    }
    let set = &decision.policy_set;
    println!(
        "  policy set {} (portcullis {}, cedar {}, language {})",
        set.hash, set.portcullis_version, set.cedar_sdk_version, set.cedar_lang_version
    );
}
