//! Downstream MCP servers: the team's `servers.toml`, the pins of their
//! tools in `servers.lock`, the tools they add to the registry, and the
//! running connections a call is forwarded through once it is decided.
//!
//! What it may not do: decide. A downstream tool is a registry entry like
//! any other; the keeper decides and records a call before `Fleet`
//! forwards it.

mod agent;
mod catalog;
mod child;
mod client;
mod compare;
mod config;
mod connection;
mod drift;
mod fleet;
mod follow;
mod guard;
mod late;
mod ordered;
mod pins;
mod protocol;
mod stderr_tail;
mod upstream;
mod visible;

use std::collections::BTreeMap;

use serde_json::Value;

pub use agent::{AgentMapping, AgentProtocol};
pub use catalog::{all_capabilities, downstream_specs, exposable, undeclared_places};
pub use child::{Bounded, MAX_FRAME_BYTES, stop_child};
pub use client::refused as relay_refused;
pub use compare::{ServerLoosening, server_loosenings};
pub use config::{
    DEFAULT_START_TIMEOUT, DEFAULT_TIMEOUT, Endpoint, RESERVED_SERVERS, ServerConfig,
    ServersConfig, Surface, ToolRule, UNDECLARED_EFFECTS, server_name_problem,
};
pub use connection::{ConnectError, start_stdio};
pub use drift::{Drift, DriftKind, drift};
pub use fleet::{Fleet, Forwarded, ServerState, ToolStatus};
pub use guard::{GUARD_SUBCOMMAND, NOT_CONFINED, run_guard};
pub use pins::{LOCK_VERSION, Pin, ServersLock, definition_hash, pinned_definition};
pub use stderr_tail::StderrTail;
pub use upstream::{UpstreamRelay, UpstreamRequest};

use crate::pdp::{LoadError, PolicyBundle, Problem, ProblemKind, SERVERS_FILE, tier_entities};
use crate::tools::{Registry, Runner, ToolId, ToolSpec};

/// A set's downstream servers and their pins, checked against each other.
#[derive(Debug, Clone, Default)]
pub struct Servers {
    pub config: ServersConfig,
    pub lock: ServersLock,
}

impl Servers {
    pub fn of(bundle: &PolicyBundle) -> Result<Self, LoadError> {
        let config = ServersConfig::of(bundle.servers.as_ref())
            .map_err(|problems| LoadError { problems })?;
        let lock = ServersLock::of(bundle.servers_lock.as_ref(), &config)
            .map_err(|problems| LoadError { problems })?;
        Ok(Self { config, lock })
    }

    /// The built-in tools and every downstream tool: the pinned ones, and
    /// those in `live` (what running servers list) that are not pinned.
    pub fn registry(
        &self,
        bundle: &PolicyBundle,
        live: &BTreeMap<String, Vec<Value>>,
    ) -> Result<Registry, LoadError> {
        let mut specs = Registry::builtin_specs();
        specs.extend(self.specs(bundle, live)?);
        if self.config.agent().is_some() {
            specs.extend(Registry::bridge_tools());
        }
        Self::checked(bundle, specs)
    }

    /// Only the pinned downstream tool `id`, if there is one: what a hook
    /// process needs to decide a harness's direct call of it.
    pub fn tool_registry(&self, bundle: &PolicyBundle, id: &ToolId) -> Result<Registry, LoadError> {
        let specs = self
            .specs(bundle, &BTreeMap::new())?
            .into_iter()
            .filter(|(spec, _)| spec.id == *id)
            .collect();
        Self::checked(bundle, specs)
    }

    fn specs(
        &self,
        bundle: &PolicyBundle,
        live: &BTreeMap<String, Vec<Value>>,
    ) -> Result<Vec<(ToolSpec, Runner)>, LoadError> {
        let capabilities = tier_entities(&bundle.tiers)
            .map(|(tiers, _)| all_capabilities(&tiers))
            .map_err(|problem| LoadError {
                problems: vec![problem],
            })?;
        let file = bundle
            .servers
            .as_ref()
            .map_or(SERVERS_FILE, |file| file.display.as_str());
        // Each check's messages, if any, are the set's problems.
        let refuse = |messages: Vec<String>| -> Result<(), LoadError> {
            if messages.is_empty() {
                return Ok(());
            }
            Err(LoadError {
                problems: messages
                    .into_iter()
                    .map(|message| Problem::new(ProblemKind::Servers, file, message))
                    .collect(),
            })
        };
        refuse(undeclared_places(&self.config, &self.lock))?;
        let specs = downstream_specs(&self.config, &self.lock, live, &capabilities);
        refuse(catalog::name_collisions(&specs))?;
        Ok(specs)
    }

    fn checked(
        bundle: &PolicyBundle,
        specs: Vec<(ToolSpec, Runner)>,
    ) -> Result<Registry, LoadError> {
        Registry::from_specs(specs).map_err(|err| LoadError {
            problems: vec![Problem::new(
                ProblemKind::Servers,
                bundle
                    .servers
                    .as_ref()
                    .map_or("policies/servers.toml", |f| f.display.as_str()),
                err.to_string(),
            )],
        })
    }
}

/// The registry of a set before any server runs: built-in tools and the
/// pinned downstream tools. What `policy validate`, `check` and the
/// fixtures decide against.
pub fn registry_for(bundle: &PolicyBundle) -> Result<Registry, LoadError> {
    Servers::of(bundle)?.registry(bundle, &BTreeMap::new())
}
