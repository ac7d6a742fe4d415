//! `portcullis schema show [--tool T]`: the Cedar schema policies are
//! validated against, with the action and `context.input` type generated
//! for each tool, and what of each tool's input policies cannot see. The
//! text is a `.cedarschema` an editor or `cedar validate` can use.

use anyhow::Context;
use clap::{Args, Subcommand};
use serde_json::json;

use super::policy_set;
use super::{Exit, Format, PolicyArgs, print_json};
use crate::pdp::{ToolType, schema_json, schema_text};

#[derive(Debug, Subcommand)]
pub enum SchemaCommand {
    /// Print the schema: the set's own files, then one generated action
    /// per tool (`Action::"builtin/write_file"`, in `call_tool`) whose
    /// context is `ToolFacts` plus `input`.
    Show(ShowArgs),
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub policies: PolicyArgs,
    /// Only this tool's generated action: `server/tool`, or the bare name
    /// when one tool has it.
    #[arg(long, value_name = "TOOL")]
    pub tool: Option<String>,
}

pub fn run(command: SchemaCommand, format: Format) -> anyhow::Result<Exit> {
    match command {
        SchemaCommand::Show(args) => show(&args, format),
    }
}

fn show(args: &ShowArgs, format: Format) -> anyhow::Result<Exit> {
    let (bundle, engine, _) = match policy_set::load(&args.policies, format)? {
        Ok(loaded) => loaded,
        Err(exit) => return Ok(exit),
    };
    let mut types: Vec<&ToolType> = engine.tool_types().collect();
    types.sort_by(|a, b| a.id.cmp(&b.id));
    if let Some(wanted) = &args.tool {
        types = vec![one_tool(&types, wanted)?];
    }
    let base = schema_json(&bundle).context("the schema does not parse")?;
    let generated = schema_text(types.iter().copied(), &base, args.tool.is_none())
        .map_err(anyhow::Error::msg)?;
    match format {
        Format::Json => print_json(&json!({
            "schema": generated,
            "tools": types.iter().map(|t| json!({
                "id": t.id.to_string(),
                "action": format!("Portcullis::Action::\"{}\"", t.id),
                "not_visible": t.hidden.iter().map(|h| json!({"path": h.path, "why": h.why})).collect::<Vec<_>>(),
                "redacted": t.redact,
            })).collect::<Vec<_>>(),
        }))?,
        Format::Human => {
            let what = if args.tool.is_none() {
                "The set's schema, with the actions"
            } else {
                "The action"
            };
            println!(
                "// {what} generated from each tool's input schema: one action per tool,\n\
                 // in call_tool, whose context is ToolFacts plus `input`."
            );
            println!("{}", generated.trim_end());
            print_unseen(&types);
        }
    }
    Ok(Exit::Ok)
}

/// The one tool `wanted` names, by `server/tool` or by its name alone.
fn one_tool<'a>(types: &[&'a ToolType], wanted: &str) -> anyhow::Result<&'a ToolType> {
    let named = |types: &[&'a ToolType], id: &dyn Fn(&ToolType) -> bool| -> Vec<&'a ToolType> {
        types.iter().copied().filter(|t| id(t)).collect()
    };
    let mut matching = named(types, &|t| t.id.to_string() == wanted);
    if matching.is_empty() {
        matching = named(types, &|t| t.id.name() == wanted);
    }
    let ids = |types: &[&ToolType]| {
        types
            .iter()
            .map(|t| t.id.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match matching.as_slice() {
        [one] => Ok(one),
        [] => anyhow::bail!(
            "--tool: this set types no tool `{wanted}` (a downstream tool must be pinned in servers.lock); known: {}",
            ids(types)
        ),
        _ => anyhow::bail!(
            "--tool: `{wanted}` names several tools ({}); give `server/tool`",
            ids(&matching)
        ),
    }
}

/// The arguments of `types` that policies cannot see, and why.
fn print_unseen(types: &[&ToolType]) {
    let unseen: Vec<String> = types
        .iter()
        .flat_map(|t| {
            t.redact
                .iter()
                .map(move |r| format!("//   {} {r}: redacted (recorded only as its SHA-256)", t.id))
                .chain(
                    t.hidden
                        .iter()
                        .map(move |h| format!("//   {} {}: {}", t.id, h.path, h.why)),
                )
        })
        .collect();
    if !unseen.is_empty() {
        println!("\n// Not visible to policies:");
        for line in unseen {
            println!("{line}");
        }
    }
}
