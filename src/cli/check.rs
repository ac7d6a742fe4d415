//! `portcullis check`: decides one tool call offline, as `serve` would,
//! and prints the decision with its facts; it never runs the tool.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::{Value, json};

use super::policy::load_for_client;
use super::{ClientArgs, Exit, Format, PolicyArgs, print_json};
use crate::facts::{Root, ToolFacts, Transport};
use crate::pdp::{ClientRecord, Decision, Engine, Outcome, Query, ToolAction};
use crate::servers::Servers;
use crate::tools::Registry;
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

#[derive(Debug, Serialize)]
struct ResolvedArgument {
    argument: String,
    requested: PathBuf,
    canonical: PathBuf,
    inside_root: bool,
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

/// One call `check` decides: the set, the client, the tool and how.
pub(super) struct Call<'a> {
    pub engine: &'a Engine,
    pub registry: &'a Registry,
    pub servers: &'a Servers,
    pub client: &'a ClientRecord,
    pub tool: &'a str,
    pub action: ToolAction,
    pub approval_channel: &'a str,
}

pub(super) struct Checked {
    tool: ToolId,
    facts: ToolFacts,
    paths: Vec<ResolvedArgument>,
    pub decision: Decision,
}

/// Computes the call's facts from its arguments against `root`, as
/// `serve` would, and decides it. Arguments that do not fit the tool are
/// an error, as they are for a client.
pub(super) fn decide(call: &Call<'_>, arguments: &Value, root: &Path) -> anyhow::Result<Checked> {
    let (tool_id, facts, paths) = match call.registry.lookup(call.tool) {
        // An unknown tool is still decided: the decision point denies it,
        // and that is the answer a client would get.
        None => {
            let id = match call.tool.split_once('/') {
                Some((server, name)) => ToolId::new(server, name),
                None => ToolId::new("", call.tool),
            };
            (id, ToolFacts::without_paths(Transport::Cli), Vec::new())
        }
        Some(tool) if call.action == ToolAction::Discover => (
            tool.spec.id.clone(),
            ToolFacts::without_paths(Transport::Cli),
            Vec::new(),
        ),
        Some(tool) => {
            tool.arguments
                .check(arguments)
                .map_err(|err| anyhow::anyhow!("--args: {err}"))?;
            // A downstream server with a root of its own has its paths
            // judged against it, as `serve` does.
            let folder = match call.servers.config.server(tool.spec.id.server()) {
                Some(server) => server
                    .judged_root(root)
                    .map_err(|err| anyhow::anyhow!("server `{}`: {err}", server.name))?,
                None => root.to_owned(),
            };
            let root = Root::new(&folder)
                .map_err(|err| anyhow::anyhow!("--root {}: {err}", folder.display()))?;
            let facts = call
                .engine
                .call_facts(&tool.spec, arguments, &root, Transport::Cli)
                .map_err(|err| anyhow::anyhow!("--args: {err}"))?;
            let paths = facts
                .paths
                .into_iter()
                .map(|(argument, resolved)| ResolvedArgument {
                    argument,
                    requested: resolved.requested,
                    canonical: resolved.canonical,
                    inside_root: resolved.inside_root,
                })
                .collect();
            (tool.spec.id.clone(), facts.facts, paths)
        }
    };
    let decision = call.engine.decide(&Query::tool(
        &call.client.name,
        call.action,
        &tool_id,
        &facts,
        call.approval_channel,
    ));
    Ok(Checked {
        tool: tool_id,
        facts,
        paths,
        decision,
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
