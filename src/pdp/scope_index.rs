//! The policies a request can meet, found by their scopes. Cedar evaluates
//! every policy of the set it is given; a set with a permit per client per
//! server reaches thousands, and most of them cannot match a given request
//! by scope alone. A policy whose scope does not match is never satisfied
//! and never evaluates its conditions (so never errors): deciding with the
//! policies whose scope can match gives the same decision, the same
//! determining policies and the same errors as the whole set.
//!
//! At load every policy (static and template-linked) is indexed by the
//! actions its action scope can match (through the action hierarchy), and
//! its principal and resource scopes are kept. Per request, the slice is
//! the policies of the action whose principal and resource scopes can
//! match the request's principal and resource (an `in` scope matches the
//! entity or any of its ancestors in the request's entities). Slices are
//! cached by everything they depend on: the action, the principal and
//! resource with their ancestors.
//!
//! A slice also knows which of its policies read the approval facts
//! (`context_reads.rs`), so that the second pass of an unapproved
//! decision evaluates only what an approval can change (`for_approval`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use cedar_policy::{
    ActionConstraint, Effect, Entities, EntityTypeName, EntityUid, Policy, PolicyId, PolicySet,
    PrincipalConstraint, Request, ResourceConstraint, Response, Schema,
};

use super::bounded_memo::BoundedMemo;
use super::context_reads::ContextReads;

/// At most this many slices are kept; past it the cache starts over (a
/// replay of a long log meets many principals).
const MAX_SLICES: usize = 4096;

/// What a principal or resource scope can match.
#[derive(Debug, Clone)]
enum Scope {
    Any,
    Eq(EntityUid),
    In(EntityUid),
    Is(EntityTypeName),
    IsIn(EntityTypeName, EntityUid),
}

impl Scope {
    fn of_principal(constraint: PrincipalConstraint) -> Self {
        match constraint {
            PrincipalConstraint::Any => Self::Any,
            PrincipalConstraint::Eq(uid) => Self::Eq(uid),
            PrincipalConstraint::In(uid) => Self::In(uid),
            PrincipalConstraint::Is(kind) => Self::Is(kind),
            PrincipalConstraint::IsIn(kind, uid) => Self::IsIn(kind, uid),
        }
    }

    fn of_resource(constraint: ResourceConstraint) -> Self {
        match constraint {
            ResourceConstraint::Any => Self::Any,
            ResourceConstraint::Eq(uid) => Self::Eq(uid),
            ResourceConstraint::In(uid) => Self::In(uid),
            ResourceConstraint::Is(kind) => Self::Is(kind),
            ResourceConstraint::IsIn(kind, uid) => Self::IsIn(kind, uid),
        }
    }

    /// Whether the scope can match `entity`, whose ancestors are `above`.
    fn matches(&self, entity: &EntityUid, above: &[EntityUid]) -> bool {
        let within = |uid: &EntityUid| uid == entity || above.contains(uid);
        match self {
            Self::Any => true,
            Self::Eq(uid) => uid == entity,
            Self::In(uid) => within(uid),
            Self::Is(kind) => kind == entity.type_name(),
            Self::IsIn(kind, uid) => kind == entity.type_name() && within(uid),
        }
    }
}

#[derive(Debug)]
struct Entry {
    policy: Policy,
    principal: Scope,
    resource: Scope,
    /// The context attributes it reads (`context_reads.rs`), worked out
    /// when a slice first holds the policy: reading them takes Cedar a
    /// second parse of the policy's text, which a set of a thousand
    /// policies scoped to other clients would pay at every hook's start
    /// for slices it never builds.
    reads: OnceLock<ContextReads>,
    forbid: bool,
}

impl Entry {
    fn reads(&self) -> &ContextReads {
        self.reads.get_or_init(|| ContextReads::of(&self.policy))
    }
}

/// The policies a request can meet, and the parts of them the second
/// pass of an unapproved decision needs, each with the context attributes
/// its policies read.
#[derive(Debug)]
pub(super) struct Slice {
    pub(super) all: Part,
    /// The policies that read the approval facts.
    approval: Part,
    /// All but the forbids that do not read them.
    without_fixed_forbids: Part,
    /// The forbids that do not read them: one that holds without the
    /// approval holds with it.
    fixed_forbids: HashSet<PolicyId>,
}

/// Some policies of a slice, and what of the context they read.
#[derive(Debug)]
pub(super) struct Part {
    pub(super) policies: PolicySet,
    pub(super) reads: ContextReads,
}

impl Part {
    fn new(templates: &PolicySet) -> Self {
        Self {
            policies: templates.clone(),
            reads: ContextReads::default(),
        }
    }

    fn add(&mut self, entry: &Entry) -> Option<()> {
        add(&mut self.policies, &entry.policy)?;
        self.reads.extend(entry.reads());
        Some(())
    }
}

impl Slice {
    /// For a request the first pass (`unapproved`, without errors) did
    /// not allow: the policies the approved pass must evaluate to decide as
    /// the whole slice would, and the forbids known to hold in it already.
    ///
    /// A policy that does not read the approval facts says in the second
    /// pass what it said in the first, and errs as little. So when a forbid
    /// of that kind held, the answer is deny whatever the rest says, and
    /// only the policies that read the approval are evaluated again (for
    /// the other forbids that hold, and their errors). When none held, the
    /// forbids of that kind are out; and when nothing held at all, no
    /// permit of that kind holds either.
    pub(super) fn for_approval(&self, unapproved: &Response) -> (&Part, Vec<PolicyId>) {
        let held: Vec<&PolicyId> = unapproved.diagnostics().reason().collect();
        let fixed: Vec<PolicyId> = held
            .iter()
            .filter(|id| self.fixed_forbids.contains(id))
            .map(|id| (*id).clone())
            .collect();
        if !fixed.is_empty() || held.is_empty() {
            (&self.approval, fixed)
        } else {
            (&self.without_fixed_forbids, fixed)
        }
    }
}

/// Everything a slice depends on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SliceKey {
    action: EntityUid,
    principal: EntityUid,
    principal_above: Vec<EntityUid>,
    resource: EntityUid,
    resource_above: Vec<EntityUid>,
}

#[derive(Debug)]
pub(super) struct ScopeIndex {
    entries: Vec<Entry>,
    /// Every template, so a slice can link the policies it keeps.
    templates: PolicySet,
    /// For each action of the schema, the entries whose action scope can
    /// match it.
    by_action: HashMap<EntityUid, Vec<usize>>,
    slices: BoundedMemo<SliceKey, Arc<Slice>>,
    /// Slices for the engine's own entities, which never change: by the
    /// action, principal and resource alone, without their ancestors
    /// looked up and hashed on every request.
    own_slices: BoundedMemo<(EntityUid, EntityUid, EntityUid), Arc<Slice>>,
}

impl ScopeIndex {
    /// Indexes `policies` for the actions of `schema`. `None` when the
    /// schema's action hierarchy cannot be read: then every request is
    /// decided with the whole set, which is always right.
    pub(super) fn new(schema: &Schema, policies: &PolicySet) -> Option<Self> {
        let actions = schema.action_entities().ok()?;
        let mut templates = PolicySet::new();
        for template in policies.templates() {
            templates.add_template(template.clone()).ok()?;
        }
        let entries: Vec<Entry> = policies
            .policies()
            .map(|policy| Entry {
                principal: Scope::of_principal(policy.principal_constraint()),
                resource: Scope::of_resource(policy.resource_constraint()),
                reads: OnceLock::new(),
                forbid: policy.effect() == Effect::Forbid,
                policy: policy.clone(),
            })
            .collect();
        let mut by_action = HashMap::new();
        for action in schema.actions() {
            let mut groups: Vec<&EntityUid> = vec![action];
            if let Some(ancestors) = actions.ancestors(action) {
                groups.extend(ancestors);
            }
            let matching = entries
                .iter()
                .enumerate()
                .filter(|(_, entry)| match entry.policy.action_constraint() {
                    ActionConstraint::Any => true,
                    ActionConstraint::Eq(uid) => uid == *action,
                    ActionConstraint::In(uids) => uids.iter().any(|uid| groups.contains(&uid)),
                })
                .map(|(at, _)| at)
                .collect();
            by_action.insert(action.clone(), matching);
        }
        Some(Self {
            entries,
            templates,
            by_action,
            slices: BoundedMemo::new(MAX_SLICES),
            own_slices: BoundedMemo::new(MAX_SLICES),
        })
    }

    /// The policies whose action scope can match `action`; `None` for an
    /// action the index does not know.
    pub(super) fn for_action(
        &self,
        action: &EntityUid,
    ) -> Option<impl Iterator<Item = &cedar_policy::Policy>> {
        let at = self.by_action.get(action)?;
        Some(
            at.iter()
                .filter_map(|&at| self.entries.get(at))
                .map(|entry| &entry.policy),
        )
    }

    /// The policies of the set that `request` can meet, with `entities`;
    /// `None` for a request the index cannot place (an action the schema
    /// does not declare, a request without an entity): decide it with the
    /// whole set.
    pub(super) fn slice(&self, request: &Request, entities: &Entities) -> Option<Arc<Slice>> {
        self.slice_for(
            request.action()?,
            request.principal()?,
            request.resource()?,
            entities,
        )
    }

    /// As `slice_for`, for `entities` that are the engine's own (the
    /// same store on every call, so a slice depends on the request's
    /// parts alone).
    pub(super) fn slice_for_own(
        &self,
        action: &EntityUid,
        principal: &EntityUid,
        resource: &EntityUid,
        entities: &Entities,
    ) -> Option<Arc<Slice>> {
        let key = (action.clone(), principal.clone(), resource.clone());
        if let Some(slice) = self.own_slices.get(&key) {
            return Some(slice);
        }
        let slice = self.slice_for(action, principal, resource, entities)?;
        self.own_slices.insert(key, Arc::clone(&slice));
        Some(slice)
    }

    /// As `slice`, by the request's parts.
    pub(super) fn slice_for(
        &self,
        action: &EntityUid,
        principal: &EntityUid,
        resource: &EntityUid,
        entities: &Entities,
    ) -> Option<Arc<Slice>> {
        let candidates = self.by_action.get(action)?;
        let above = |uid: &EntityUid| -> Vec<EntityUid> {
            let mut above: Vec<EntityUid> = entities
                .ancestors(uid)
                .map(|ancestors| ancestors.cloned().collect())
                .unwrap_or_default();
            above.sort_unstable();
            above
        };
        let key = SliceKey {
            action: action.clone(),
            principal: principal.clone(),
            principal_above: above(principal),
            resource: resource.clone(),
            resource_above: above(resource),
        };
        if let Some(slice) = self.slices.get(&key) {
            return Some(slice);
        }
        let slice = Arc::new(self.build(candidates, &key)?);
        self.slices.insert(key, Arc::clone(&slice));
        Some(slice)
    }

    fn build(&self, candidates: &[usize], key: &SliceKey) -> Option<Slice> {
        let mut slice = Slice {
            all: Part::new(&self.templates),
            approval: Part::new(&self.templates),
            without_fixed_forbids: Part::new(&self.templates),
            fixed_forbids: HashSet::new(),
        };
        for &at in candidates {
            let entry = self.entries.get(at)?;
            if !entry
                .principal
                .matches(&key.principal, &key.principal_above)
                || !entry.resource.matches(&key.resource, &key.resource_above)
            {
                continue;
            }
            slice.all.add(entry)?;
            if entry.reads().reads_approval() {
                slice.approval.add(entry)?;
                slice.without_fixed_forbids.add(entry)?;
            } else if entry.forbid {
                slice.fixed_forbids.insert(entry.policy.id().clone());
            } else {
                slice.without_fixed_forbids.add(entry)?;
            }
        }
        Some(slice)
    }
}

/// Adds a policy to a set holding every template: linked again if it is
/// a template's link.
fn add(set: &mut PolicySet, policy: &Policy) -> Option<()> {
    match (policy.template_id(), policy.template_links()) {
        (Some(template), Some(links)) => {
            set.link(template.clone(), policy.id().clone(), links).ok()
        }
        _ => set.add(policy.clone()).ok(),
    }
}

#[cfg(test)]
mod tests;
