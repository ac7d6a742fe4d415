//! One tool call decided offline as `serve` would decide it: its facts
//! computed from its arguments against a root, never run. `check` prints
//! it; `policy diff` confirms each counterexample with it.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::facts::{Root, ToolFacts, Transport};
use crate::pdp::{ClientRecord, Decision, Engine, Query, ToolAction};
use crate::servers::Servers;
use crate::tools::{Registry, ToolId};

#[derive(Debug, Serialize)]
pub(crate) struct ResolvedArgument {
    pub argument: String,
    pub requested: PathBuf,
    pub canonical: PathBuf,
    pub inside_root: bool,
}

/// One call to decide: the set, the client, the tool and how.
pub(crate) struct Call<'a> {
    pub engine: &'a Engine,
    pub registry: &'a Registry,
    pub servers: &'a Servers,
    pub client: &'a ClientRecord,
    pub tool: &'a str,
    pub action: ToolAction,
    pub approval_channel: &'a str,
}

pub(crate) struct Checked {
    pub tool: ToolId,
    pub facts: ToolFacts,
    pub paths: Vec<ResolvedArgument>,
    pub decision: Decision,
}

/// Computes the call's facts from its arguments against `root`, as
/// `serve` would, and decides it. Arguments that do not fit the tool are
/// an error, as they are for a client.
pub(crate) fn decide(call: &Call<'_>, arguments: &Value, root: &Path) -> anyhow::Result<Checked> {
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
