//! `portcullis gate`: judges one shell command line through the decision
//! point and prints the verdict; it never runs the command.

use std::path::PathBuf;

use clap::Args;

use super::policy_set::load_for_client;
use super::{ClientArgs, Exit, Format, PolicyArgs, print_json, printable};
use crate::facts::{Root, Transport, shell_quote};
use crate::gate::judge;
use crate::pdp::Outcome;

#[derive(Debug, Args)]
pub struct GateArgs {
    #[command(flatten)]
    pub policies: PolicyArgs,
    #[command(flatten)]
    pub client: ClientArgs,
    /// The workspace root that writes are judged against.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    /// The folder the command would run in, relative to the root.
    #[arg(long)]
    pub cwd: Option<String>,
    /// The command line, as one string (as a shell would get it).
    #[arg(long, conflicts_with = "argv")]
    pub command: Option<String>,
    /// The command as words, after `--` (each word is quoted as written).
    #[arg(last = true)]
    pub argv: Vec<String>,
}

pub fn run(args: &GateArgs, format: Format) -> anyhow::Result<Exit> {
    let command = match (&args.command, args.argv.is_empty()) {
        (Some(command), _) => command.clone(),
        (None, false) => shell_quote(&args.argv),
        (None, true) => anyhow::bail!("give the command with --command STRING or after --"),
    };
    let client = args.client.record();
    let (_, _, engine) = match load_for_client(&args.policies, &client, format)? {
        Ok(loaded) => loaded,
        Err(exit) => return Ok(exit),
    };
    let root = Root::new(&args.root).map_err(|err| anyhow::anyhow!("--root: {err}"))?;
    let answer = judge(
        &engine,
        &client.name,
        &root,
        args.cwd.as_deref(),
        &command,
        Transport::Cli,
    )
    .map_err(|err| anyhow::anyhow!("{err}"))?;
    match format {
        Format::Json => print_json(&answer.to_json())?,
        Format::Human => {
            let decision = &answer.decision;
            println!(
                "{} ({}, layer {}): {}",
                decision.outcome.as_str().to_uppercase(),
                decision.cause.as_str(),
                answer.layer(),
                printable(&command)
            );
            for policy in &decision.policies {
                println!("  {}: {}", policy.id, policy.reason);
            }
            for part in &answer.facts.parts {
                let classes: Vec<&str> = part.classes.iter().map(String::as_str).collect();
                println!(
                    "  {}  [{}]",
                    printable(&shell_quote(&part.argv)),
                    classes.join(", ")
                );
            }
            if answer.facts.opaque {
                println!("  opaque: part of the command cannot be seen through");
            }
            if !answer.facts.writes_inside_root {
                println!("  writes outside the root");
            }
        }
    }
    Ok(match answer.decision.outcome {
        Outcome::Allow => Exit::Ok,
        Outcome::Ask => Exit::Ask,
        Outcome::Deny => Exit::Deny,
    })
}
