//! A loaded policy set: everything a decision needs, built once per load and
//! shared read-only by every request.

mod shapes;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cedar_policy::{Authorizer, Entities, EntityUid, PolicyId, PolicySet, Schema};
use serde_json::Value;
use thiserror::Error;

use super::assembly::{self, Actions, CommandTable};
use super::bundle::PolicyBundle;
use super::context::{CommandShape, ToolShape};
use super::decision::PolicySetIdentity;
use super::discovery_memo::DiscoveryMemo;
use super::entities::{self, ClientRecord};
use super::input::{InputError, ToolType, ToolTypes};
use super::load::{self, PolicyOrigin, Provenance};
use super::problem::{LoadError, Problem, ProblemKind};
use super::proof::{self, Proof};
use super::scope_index::ScopeIndex;
use super::set_cache::{SetCache, ValidatedSet};
use crate::facts::{
    CallFactsError, CommandClassError, CommandClasses, PathClasses, Root, ToolCallFacts, Transport,
    tool_call_facts,
};
use crate::tools::{Registry, ToolId, ToolSpec};
use shapes::{check_fixed_shapes, check_request_shape};

/// A call's arguments that facts cannot be computed from.
#[derive(Debug, Error)]
pub enum CallFactsProblem {
    #[error(transparent)]
    Path(#[from] CallFactsError),
    #[error(transparent)]
    Input(#[from] InputError),
}

#[derive(Debug)]
pub struct Engine {
    pub(super) schema: Schema,
    pub(super) policies: PolicySet,
    /// The policies each request can meet by scope (`scope_index.rs`):
    /// the same answer as the whole set, for less. `None` only when the
    /// schema's action hierarchy cannot be read.
    pub(super) scope: Option<ScopeIndex>,
    pub(super) entities: Entities,
    pub(super) authorizer: Authorizer,
    pub(super) origins: HashMap<PolicyId, PolicyOrigin>,
    pub(super) clients: HashMap<String, EntityUid>,
    pub(super) tools: HashMap<ToolId, EntityUid>,
    pub(super) actions: Actions,
    /// Each tool's own call action (a child of `call_tool`) and input
    /// type, for every tool the set types: built-in, harness and pinned.
    pub(super) calls: HashMap<ToolId, (EntityUid, ToolType)>,
    pub(super) identity: Arc<PolicySetIdentity>,
    path_classes: PathClasses,
    command_classes: CommandTable,
    pub(super) shell: EntityUid,
    pub(super) policies_resource: EntityUid,
    pub(super) command_shape: CommandShape,
    pub(super) tool_shape: ToolShape,
    tiers: Vec<String>,
    tier_capabilities: HashMap<String, Vec<String>>,
    /// The entities as JSON, kept for fixtures and audit records.
    entities_json: Vec<Value>,
    /// The set `policies/shadow/` makes (`PolicyBundle::shadow_set`),
    /// decided beside this one and never enforced.
    pub(super) shadow: Option<Box<Shadow>>,
    /// Where each entity of `entities_json` is, by type and id: every
    /// decision record names four of them, however many tools there are.
    entity_index: HashMap<(String, String), usize>,
    pub(super) discoveries: DiscoveryMemo,
}

/// Whom a loaded engine decides for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Any client the process may come to know (`serve`, whose clients
    /// can be created while it runs): every policy is loaded.
    AnyClient,
    /// Only the clients it was loaded with, in a process that decides and
    /// exits (a hook, `exec`): a set validated before leaves out, unparsed,
    /// its policies scoped to another principal, which no decision of this
    /// engine can meet (it denies any other client as unknown). A team
    /// folder of a thousand per-client grants then costs a hook what one
    /// grant does.
    LoadedClientsOnly,
}

impl Engine {
    /// Compiles the bundle, builds the entities of the registry and the
    /// clients, and validates all of it against the schema.
    pub fn load(
        bundle: &PolicyBundle,
        registry: &Registry,
        clients: &[ClientRecord],
    ) -> Result<Self, LoadError> {
        Self::load_as(bundle, registry, clients, Provenance::Current, None)
    }

    /// Loads a set that will decide, and proves that it keeps the promises
    /// of the hard constraints (`proof.rs`). A counterexample refuses the
    /// set; without a solver the load goes on on the structural check and
    /// says so once.
    ///
    /// With a `cache`, a set proven before is not proven again, and a set
    /// proven now is remembered there; so is a set validated strictly, with
    /// its schema in Cedar's JSON form, so that a later load of the same
    /// set skips the schema's text parser and Cedar's validator.
    pub fn load_proven(
        bundle: &PolicyBundle,
        registry: &Registry,
        clients: &[ClientRecord],
        cache: Option<&SetCache>,
        audience: Audience,
    ) -> Result<(Self, Proof), LoadError> {
        let bundle_hash = bundle.hash();
        let validated = cache.and_then(|cache| cache.validated(&bundle_hash));
        let principals: HashSet<String> = clients
            .iter()
            .map(|client| entities::client_uid(&client.name).to_string())
            .collect();
        let known = validated.as_ref().map(|set| load::Known {
            schema_fragments: &set.schema_fragments,
            leave_out: (audience == Audience::LoadedClientsOnly).then_some(load::LeaveOut {
                scoped: &set.scoped,
                principals: &principals,
            }),
        });
        let engine = Self::load_as(
            bundle,
            registry,
            clients,
            Provenance::Current,
            known.as_ref(),
        )?;
        if let (None, Some(cache)) = (&validated, cache) {
            let kept = load::schema_json(bundle)
                .ok_or_else(|| std::io::Error::other("the schema has no JSON form"))
                .and_then(|schema_fragments| {
                    cache.remember_validated(
                        &bundle_hash,
                        ValidatedSet {
                            schema_fragments,
                            scoped: load::scoped_policies(bundle),
                        },
                    )
                });
            if let Err(err) = kept {
                tracing::info!(error = %err, "the validation could not be kept for the next start");
            }
        }
        let hash = &engine.identity.hash;
        if let Some(queries) = cache.and_then(|cache| cache.proven(hash)) {
            tracing::debug!(policy_set = %hash, "the hard constraints were proven for this set before");
            return Ok((engine, Proof::Proven { queries }));
        }
        match proof::prove(&engine.policies, &engine.schema) {
            Ok(proof) => {
                match (&proof, cache) {
                    (Proof::SolverAbsent { reason }, _) => proof::warn_solver_absent(reason),
                    (Proof::Proven { queries }, Some(cache)) => {
                        if let Err(err) = cache.remember_proof(hash, *queries) {
                            tracing::info!(error = %err, "the proof could not be kept for the next start");
                        }
                    }
                    (Proof::Proven { .. }, None) => {}
                }
                Ok((engine, proof))
            }
            Err(err) => Err(LoadError {
                problems: vec![
                    Problem::new(
                        ProblemKind::HardConstraintProof,
                        "policies",
                        err.to_string(),
                    )
                    .with_help(Some(
                        "the hard constraints are built in; a set that does not keep them \
                             was assembled wrongly: report it"
                            .to_owned(),
                    )),
                ],
            }),
        }
    }

    /// Loads a policy set recorded in an audit snapshot, for replay: it is
    /// held to the rules of when it was recorded (a command table from
    /// before `[[program]]` descriptions, a schema from before the gate's
    /// VCS metadata facts), because its decisions are replayed from the
    /// recorded facts, not re-derived.
    pub fn load_recorded(
        bundle: &PolicyBundle,
        registry: &Registry,
        clients: &[ClientRecord],
    ) -> Result<Self, LoadError> {
        Self::load_as(bundle, registry, clients, Provenance::Recorded, None)
    }

    /// The load, as a pipeline of named steps: compile the set and read
    /// its data tables; check the clients' tiers; build the entities;
    /// resolve the names decisions use; check the context shapes against
    /// the schema; then assemble (with the shadow set, loaded alike).
    fn load_as(
        bundle: &PolicyBundle,
        registry: &Registry,
        clients: &[ClientRecord],
        provenance: Provenance,
        known: Option<&load::Known<'_>>,
    ) -> Result<Self, LoadError> {
        let mut types = ToolTypes::of(bundle).map_err(|problems| LoadError { problems })?;
        if known.is_some() {
            // This very set validated whole before, every tool's action in
            // it: only the actions of the tools this engine can be asked
            // about are built (a hook decides one tool; each action costs
            // its share of the schema at every start).
            types.retain(|id| registry.get(id).is_some());
        }
        let (compiled, tables) = assembly::compiled(bundle, &types, provenance, known)?;
        assembly::check_client_tiers(clients, &tables.tier_names, &bundle.tiers.display)?;
        let store = assembly::EntityStore::build(
            &tables.tier_json,
            registry,
            clients,
            &compiled.schema,
            &bundle.tiers.display,
        )?;
        let names = assembly::Names::resolve(&compiled.schema, registry, clients, &types)?;
        let (command_shape, tool_shape) = check_request_shape(
            &compiled.schema,
            &names.actions,
            &names.tools,
            &names.shell,
            provenance,
        )?;
        check_fixed_shapes(&compiled.schema, &names.actions, &names.policies_resource)?;
        let scope = ScopeIndex::new(&compiled.schema, &compiled.policies);
        let shadow = match bundle.shadow_set() {
            Some(set) => {
                let engine = Self::load_as(&set, registry, clients, provenance, None)?;
                Some(Box::new(Shadow::beside(&compiled.policies, engine)))
            }
            None => None,
        };
        let identity = Arc::new(PolicySetIdentity {
            hash: bundle.hash(),
            portcullis_version: env!("CARGO_PKG_VERSION").to_owned(),
            cedar_sdk_version: cedar_policy::get_sdk_version().to_string(),
            cedar_lang_version: cedar_policy::get_lang_version().to_string(),
        });
        Ok(Self {
            schema: compiled.schema,
            policies: compiled.policies,
            scope,
            entities: store.entities,
            authorizer: Authorizer::new(),
            origins: compiled.origins,
            clients: names.clients,
            tools: names.tools,
            actions: names.actions,
            calls: names.calls,
            identity,
            path_classes: tables.path_classes,
            command_classes: tables.command_classes,
            shell: names.shell,
            policies_resource: names.policies_resource,
            command_shape,
            tool_shape,
            tiers: tables.tier_names.into_iter().collect(),
            tier_capabilities: tables.tier_capabilities,
            entity_index: index_entities(&store.json),
            entities_json: store.json,
            shadow,
            discoveries: DiscoveryMemo::default(),
        })
    }

    /// The typed input of a call of `tool`, whose arguments passed its
    /// input schema: `None` when the set has no type for the tool (a tool
    /// nobody pinned), an error when a value does not fit its type.
    pub fn tool_input(
        &self,
        tool: &ToolId,
        arguments: &Value,
    ) -> Option<Result<crate::facts::ToolInput, InputError>> {
        self.calls.get(tool).map(|(_, ty)| ty.input(arguments))
    }

    /// Everything a call is decided on besides who asks: its path facts
    /// (judged against `root`) and its typed input. The arguments must
    /// have passed the tool's input schema.
    pub fn call_facts(
        &self,
        spec: &ToolSpec,
        arguments: &Value,
        root: &Root,
        transport: Transport,
    ) -> Result<ToolCallFacts, CallFactsProblem> {
        let mut call = tool_call_facts(
            &spec.path_arguments,
            arguments,
            root,
            &self.path_classes,
            transport,
        )?;
        call.facts.input = self.tool_input(&spec.id, arguments).transpose()?;
        Ok(call)
    }

    /// The generated input type of each tool, by id.
    pub fn tool_types(&self) -> impl Iterator<Item = &ToolType> {
        self.calls.values().map(|(_, ty)| ty)
    }

    pub fn identity(&self) -> &Arc<PolicySetIdentity> {
        &self.identity
    }

    pub fn path_classes(&self) -> &PathClasses {
        &self.path_classes
    }

    /// The command table; an error only for a table read on first use
    /// that does not parse (which a set that loaded whole before cannot
    /// do, since its hash covers the table).
    pub fn command_classes(&self) -> Result<&CommandClasses, &CommandClassError> {
        self.command_classes.get()
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    pub fn policies(&self) -> &PolicySet {
        &self.policies
    }

    pub fn entities(&self) -> &Entities {
        &self.entities
    }

    /// The tier names `tiers.json` declares, sorted.
    pub fn tiers(&self) -> &[String] {
        &self.tiers
    }

    /// The capabilities `tiers.json` gives a tier (none for an unknown tier).
    pub fn tier_capabilities(&self, tier: &str) -> &[String] {
        self.tier_capabilities.get(tier).map_or(&[], Vec::as_slice)
    }

    /// The entities a decision about this client and tool reads: the
    /// client, its tier, the tool and its server (for audit records).
    pub fn entities_for(&self, client: &str, tier: &str, tool: &ToolId) -> Vec<Value> {
        let wanted = [
            (entities::TIER_TYPE, tier.to_owned()),
            (entities::SERVER_TYPE, tool.server().to_owned()),
            (entities::TOOL_TYPE, tool.to_string()),
            (entities::CLIENT_TYPE, client.to_owned()),
        ];
        let mut found: Vec<usize> = wanted
            .into_iter()
            .filter_map(|(kind, id)| self.entity_index.get(&(kind.to_owned(), id)).copied())
            .collect();
        // In the order of `entities_json`, as records have always listed them.
        found.sort_unstable();
        found
            .into_iter()
            .filter_map(|at| self.entities_json.get(at).cloned())
            .collect()
    }

    /// The entities a command decision reads: the client, its tier and
    /// the shell (for audit records).
    pub fn command_entities(&self, client: &str, tier: &str) -> Vec<Value> {
        self.client_entities_and(client, tier, entities::SHELL_TYPE)
    }

    /// The entities a `read_policy` decision read: the client, its tier and
    /// the policy set (for audit records).
    pub fn policy_entities(&self, client: &str, tier: &str) -> Vec<Value> {
        self.client_entities_and(client, tier, entities::POLICIES_TYPE)
    }

    /// The entities a `relay_request` decision read: the client, its tier
    /// and the server (for audit records).
    pub fn server_entities(&self, client: &str, tier: &str, server: &str) -> Vec<Value> {
        self.client_entities_and(client, tier, entities::SERVER_TYPE)
            .into_iter()
            .filter(|e| {
                e.pointer("/uid/type").and_then(Value::as_str) != Some(entities::SERVER_TYPE)
                    || e.pointer("/uid/id").and_then(Value::as_str) == Some(server)
            })
            .collect()
    }

    /// The client, its tier, and every entity of type `resource_type`.
    fn client_entities_and(&self, client: &str, tier: &str, resource_type: &str) -> Vec<Value> {
        self.entities_json
            .iter()
            .filter(|e| {
                let kind = e.pointer("/uid/type").and_then(Value::as_str);
                let id = e.pointer("/uid/id").and_then(Value::as_str);
                (kind == Some(entities::CLIENT_TYPE) && id == Some(client))
                    || (kind == Some(entities::TIER_TYPE) && id == Some(tier))
                    || kind == Some(resource_type)
            })
            .cloned()
            .collect()
    }

    pub fn entities_json(&self) -> &[Value] {
        &self.entities_json
    }

    /// How many policies (and templates) the set holds.
    pub fn policy_count(&self) -> usize {
        self.origins.len()
    }

    pub fn origin(&self, id: &PolicyId) -> Option<&PolicyOrigin> {
        self.origins.get(id)
    }
}

/// The shadow set, and the policies in which it differs from the enforced
/// one: a request that meets none of them by scope is decided alike by
/// both, so only the others are decided twice.
#[derive(Debug)]
pub(super) struct Shadow {
    pub engine: Engine,
    pub(super) differing: HashSet<PolicyId>,
}

impl Shadow {
    fn beside(enforced: &PolicySet, engine: Engine) -> Self {
        let texts = |set: &PolicySet| -> HashMap<PolicyId, String> {
            set.policies()
                .map(|policy| (policy.id().clone(), policy.to_string()))
                .collect()
        };
        let (ours, theirs) = (texts(enforced), texts(&engine.policies));
        let differing = ours
            .iter()
            .filter(|(id, text)| theirs.get(*id) != Some(*text))
            .chain(
                theirs
                    .iter()
                    .filter(|(id, text)| ours.get(*id) != Some(*text)),
            )
            .map(|(id, _)| id.clone())
            .collect();
        Self { engine, differing }
    }

    /// Whether a policy in which the sets differ is among those the
    /// enforced set's `slice` holds or the shadow's slice for the same
    /// request would; without a slice (no scope index), every one is.
    pub(super) fn may_differ(
        &self,
        slice: Option<&PolicySet>,
        action: &EntityUid,
        principal: &EntityUid,
        resource: &EntityUid,
        entities: &Entities,
    ) -> bool {
        if self.differing.is_empty() {
            return false;
        }
        let touches = |set: Option<&PolicySet>| {
            set.is_none_or(|set| set.policies().any(|p| self.differing.contains(p.id())))
        };
        let theirs = self
            .engine
            .scope
            .as_ref()
            .and_then(|index| index.slice_for(action, principal, resource, entities));
        touches(slice) || touches(theirs.as_deref().map(|s| &s.all.policies))
    }
}

/// The position of each entity, by type and id.
fn index_entities(entities: &[Value]) -> HashMap<(String, String), usize> {
    entities
        .iter()
        .enumerate()
        .filter_map(|(at, entity)| {
            let kind = entity.pointer("/uid/type")?.as_str()?;
            let id = entity.pointer("/uid/id")?.as_str()?;
            Some(((kind.to_owned(), id.to_owned()), at))
        })
        .collect()
}
