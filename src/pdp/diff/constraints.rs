//! What makes a symbolic request one a side could really decide, written
//! as forbids beside its policies: a client of one of its tiers (and in
//! no other), a resource it knows (a tool's own action is about that tool
//! only), the pass the query is about. A request outside them is denied
//! by that side, so it can neither be a counterexample for NEW nor count
//! as permitted by OLD.

use std::collections::{BTreeMap, BTreeSet};

use cedar_policy::{EntityUid, Policy, PolicyId, PolicySet, RequestEnv};

use super::Pass;
use crate::pdp::NO_APPROVAL;
use crate::pdp::entities::{CLIENT_TYPE, TIER_TYPE, TOOL_TYPE, tool_uid};
use crate::pdp::{Engine, InputType};

pub(super) struct Constraints {
    tiers: Vec<EntityUid>,
    /// Every entity the side knows, by type name.
    known: BTreeMap<String, BTreeSet<EntityUid>>,
    /// Each tool's own call action, and its tool.
    tool_of_action: BTreeMap<EntityUid, EntityUid>,
    /// The top-level string arguments of each tool's own action, and
    /// whether each is required: a tool's JSON Schema may ask them to be
    /// non-empty, which the Cedar type does not say.
    strings: BTreeMap<EntityUid, Vec<(String, bool)>>,
    /// `call_tool` itself, which decides only the calls of tools that
    /// have no action of their own.
    call_tool: EntityUid,
}

impl Constraints {
    pub(super) fn of(engine: &Engine) -> Self {
        let mut known: BTreeMap<String, BTreeSet<EntityUid>> = BTreeMap::new();
        for entity in engine.entities().iter() {
            let uid = entity.uid();
            known
                .entry(uid.type_name().to_string())
                .or_default()
                .insert(uid);
        }
        let tiers = known
            .get(TIER_TYPE)
            .map(|tiers| tiers.iter().cloned().collect())
            .unwrap_or_default();
        let tool_of_action = engine
            .calls
            .iter()
            .map(|(id, (action, _))| (action.clone(), tool_uid(&id.to_string())))
            .collect();
        let strings = engine
            .calls
            .values()
            .map(|(action, ty)| {
                let strings = ty
                    .fields
                    .iter()
                    .filter(|field| field.ty == InputType::String)
                    .map(|field| (field.name.clone(), field.required))
                    .collect();
                (action.clone(), strings)
            })
            .collect();
        Self {
            tiers,
            known,
            tool_of_action,
            strings,
            call_tool: engine.actions.call_tool.clone(),
        }
    }

    /// `policies` with the forbids that keep the solver to requests of
    /// `env` this side could decide in `pass`; `checkable` also keeps it
    /// to tool requests `portcullis check` can make (from the command
    /// line, every path inside the root, no path class).
    pub(super) fn restrict(
        &self,
        policies: &PolicySet,
        env: &RequestEnv,
        pass: Pass,
        checkable: bool,
        extra: Option<String>,
    ) -> Result<PolicySet, String> {
        let mut conditions = vec![match pass {
            Pass::Allow => format!(
                "context.approved == false && context.approval_channel == \"{NO_APPROVAL}\""
            ),
            Pass::Ask => "context.approved".to_owned(),
        }];
        if env.principal().to_string() == CLIENT_TYPE {
            conditions.push(self.client());
            // A tool request's approvers: none before an approval, and one
            // in the approved pass (what `check` decides with; quorums of
            // the inbox are outside the search).
            if is_tool_request(env) {
                conditions.push(match pass {
                    Pass::Allow => "context.approvers == 0".to_owned(),
                    Pass::Ask => "context.approvers == 1".to_owned(),
                });
            }
        }
        conditions.push(self.resource(env));
        if checkable && is_tool_request(env) {
            conditions.push(
                "context.transport == \"cli\" && context.reads_inside_root && \
                 context.writes_inside_root && !context.touches_vcs_metadata && \
                 !context.writes_vcs_metadata && context.path_classes.isEmpty()"
                    .to_owned(),
            );
            conditions.extend(self.non_empty_strings(env));
        }
        conditions.extend(extra);
        let mut set = policies.clone();
        for (at, condition) in conditions.iter().enumerate() {
            let policy = Policy::parse(
                Some(PolicyId::new(format!("portcullis.diff.constraint.{at}"))),
                format!("forbid (principal, action, resource) unless {{ {condition} }};"),
            )
            .map_err(|err| err.to_string())?;
            set.add(policy).map_err(|err| err.to_string())?;
        }
        Ok(set)
    }

    /// Every string argument of the tool's action, when given, is
    /// non-empty.
    fn non_empty_strings(&self, env: &RequestEnv) -> Vec<String> {
        let Some(strings) = self.strings.get(env.action()) else {
            return Vec::new();
        };
        strings
            .iter()
            .map(|(name, required)| {
                let field = format!("context.input[{}]", cedar_string(name));
                if *required {
                    format!("{field} != \"\"")
                } else {
                    format!(
                        "if context.input has {} then {field} != \"\" else true",
                        cedar_string(name)
                    )
                }
            })
            .collect()
    }

    /// A client whose tier is one of this side's, and who is in exactly
    /// the tiers its own tier is in: as `tiers.json` and the token store
    /// build it.
    fn client(&self) -> String {
        if self.tiers.is_empty() {
            return "false".to_owned();
        }
        let one_of = any_of("principal.tier", &self.tiers);
        let placed = self
            .tiers
            .iter()
            .map(|tier| format!("(principal in {tier}) == (principal.tier in {tier})"))
            .collect::<Vec<_>>()
            .join(" && ");
        format!("({one_of}) && {placed}")
    }

    /// A resource this side knows; for a tool's own action that tool,
    /// and for `call_tool` a tool without an action of its own (the
    /// decision point never asks otherwise). An action of NEW's that is
    /// not this side's is about NEW's tool of the same name.
    fn resource(&self, env: &RequestEnv) -> String {
        let known = self
            .known
            .get(&env.resource().to_string())
            .cloned()
            .unwrap_or_default();
        let own_tool = self.tool_of_action.get(env.action()).cloned().or_else(|| {
            let id = env.action().id().unescaped().to_owned();
            id.contains('/').then(|| tool_uid(&id))
        });
        let candidates: Vec<EntityUid> = match own_tool {
            Some(tool) => known.into_iter().filter(|uid| *uid == tool).collect(),
            None if *env.action() == self.call_tool => {
                let owned: BTreeSet<&EntityUid> = self.tool_of_action.values().collect();
                known
                    .into_iter()
                    .filter(|uid| !owned.contains(uid))
                    .collect()
            }
            None => known.into_iter().collect(),
        };
        if candidates.is_empty() {
            "false".to_owned()
        } else {
            any_of("resource", &candidates)
        }
    }
}

/// Whether `env` is about a tool, with `ToolFacts` for its context.
pub(super) fn is_tool_request(env: &RequestEnv) -> bool {
    env.resource().to_string() == TOOL_TYPE
}

/// `text` as a Cedar string literal.
fn cedar_string(text: &str) -> String {
    format!("\"{}\"", text.escape_default())
}

fn any_of(subject: &str, uids: &[EntityUid]) -> String {
    uids.iter()
        .map(|uid| format!("{subject} == {uid}"))
        .collect::<Vec<_>>()
        .join(" || ")
}
