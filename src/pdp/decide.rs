//! The one decision point: allow, ask or deny for a tool request.

use cedar_policy::{
    AuthorizationError, Decision as CedarDecision, Entities, EntityUid, PolicyId, PolicySet,
    Request, Response, RestrictedExpression,
};

use super::context::{
    approve_context, command_context, policy_context, request_context, tool_context,
};
use super::context_reads::ContextReads;
use super::decision::{Cause, Decision, DecisionError, DeterminingPolicy, Outcome, ShadowDecision};
use super::engine::{Engine, Shadow};
use super::input::record_expression;
use super::query::{ApproveAsked, Asked, Asker, NO_APPROVAL, Query, ToolAction, ToolRef};
use super::scope_index::Slice;
use crate::facts::{CommandFacts, ToolFacts, Transport};
use crate::tools::ToolId;

impl Engine {
    /// The decision point: every decision portcullis makes, live or in
    /// replay, comes from here. Unapproved, it decides in up to two passes
    /// (design.md, "Decisions"): as if nobody approved (allow?), then as if
    /// a human approved through `approval_channel` (ask?), else deny.
    /// Approved, one pass with `approved = true`: allow only if Cedar allows
    /// with no errors (a policy may still refuse the channel). Any error in
    /// any pass is a deny: Cedar skips a policy that errors, even a forbid.
    /// A discovery this engine answered before gets the same answer
    /// (`discovery_memo.rs`).
    pub fn decide(&self, query: &Query<'_>) -> Decision {
        self.discoveries.answer(query, || self.decide_fresh(query))
    }

    /// The decision, with the shadow set's beside it when they differ.
    fn decide_fresh(&self, query: &Query<'_>) -> Decision {
        let (mut decision, shadow_may_differ) = self.decide_enforced(query, self.shadow.as_deref());
        if let Some(shadow) = self.shadow.as_deref().filter(|_| shadow_may_differ) {
            let (beside, _) = shadow.engine.decide_enforced(query, None);
            let ids = |policies: &[DeterminingPolicy]| {
                policies.iter().map(|p| p.id.clone()).collect::<Vec<_>>()
            };
            if beside.outcome != decision.outcome
                || ids(&beside.policies) != ids(&decision.policies)
            {
                decision.shadow = Some(Box::new(ShadowDecision {
                    outcome: beside.outcome,
                    cause: beside.cause,
                    policies: beside.policies,
                }));
            }
        }
        decision
    }

    /// The decision of this engine's own policies, and whether `shadow`
    /// may decide the request otherwise: only when a policy in which the
    /// two sets differ is among those either can meet by scope. A request
    /// refused before Cedar is asked (an unknown client or tool) is refused
    /// alike by both.
    fn decide_enforced(&self, query: &Query<'_>, shadow: Option<&Shadow>) -> (Decision, bool) {
        let (entities, principal, own_entities) = match query.asker {
            Asker::Client(name) => match self.clients.get(name) {
                Some(principal) => (&self.entities, principal, true),
                None => return (self.denied(Cause::UnknownClient), false),
            },
            Asker::Recorded {
                entities,
                principal,
            } => (entities, principal, false),
        };
        let mut input = None;
        let (action, resource, facts) = match self.target(query.asked, &mut input) {
            Ok(target) => target,
            Err(refused) => return (refused, false),
        };
        // Both passes ask about the same principal, action and resource:
        // one slice serves them.
        let slice = self.scope.as_ref().and_then(|index| {
            if own_entities {
                index.slice_for_own(action, principal, resource, entities)
            } else {
                index.slice_for(action, principal, resource, entities)
            }
        });
        let shadow_may_differ = shadow.is_some_and(|shadow| {
            shadow.may_differ(
                slice.as_deref().map(|s| &s.all.policies),
                action,
                principal,
                resource,
                entities,
            )
        });
        let request = Pass {
            entities,
            principal,
            action,
            resource,
            facts,
            slice: slice.as_deref(),
            approvers: query.approvers,
        };
        let decision = if query.approved {
            self.one_pass(&request, true, query.approval_channel)
        } else if matches!(query.asked, Asked::Approve { .. }) {
            self.one_pass(&request, false, query.approval_channel)
        } else {
            self.two_pass(&request, query.approval_channel)
        };
        (decision, shadow_may_differ)
    }

    /// The action, resource and facts `asked` is about, or the refusal when
    /// it names what this engine does not know. `input` holds a call's
    /// typed arguments for the facts to borrow.
    fn target<'a>(
        &'a self,
        asked: Asked<'a>,
        input: &'a mut Option<RestrictedExpression>,
    ) -> Result<(&'a EntityUid, &'a EntityUid, Facts<'a>), Decision> {
        match asked {
            Asked::Tool {
                action,
                tool,
                facts,
            } => {
                let resource = match tool {
                    ToolRef::Entity(uid) => uid,
                    ToolRef::Id(id) => self
                        .tools
                        .get(id)
                        .ok_or_else(|| self.denied(Cause::UnknownTool))?,
                };
                match self.call_action(action, tool, facts) {
                    Ok(Some((action, expression))) => {
                        let input = &*input.insert(expression);
                        Ok((action, resource, Facts::Tool(facts, Some(input))))
                    }
                    Ok(None) => Ok((self.tool_action(action), resource, Facts::Tool(facts, None))),
                    Err(error) => Err(self.decision(
                        Outcome::Deny,
                        Cause::PolicyError,
                        Vec::new(),
                        vec![error],
                    )),
                }
            }
            Asked::Command { facts, transport } => Ok((
                &self.actions.run_command,
                &self.shell,
                Facts::Command(facts, transport),
            )),
            Asked::Policies { transport } => match &self.actions.read_policy {
                Some(action) => Ok((action, &self.policies_resource, Facts::Policies(transport))),
                None => Err(self.denied(Cause::NotPermitted)),
            },
            Asked::Approve { tool, asked } => {
                let ToolRef::Entity(resource) = tool else {
                    return Err(self.denied(Cause::UnknownTool));
                };
                match &self.actions.approve {
                    Some(action) => Ok((action, resource, Facts::Approve(asked))),
                    None => Err(self.denied(Cause::NotPermitted)),
                }
            }
            Asked::Request {
                server,
                method,
                transport,
            } => match &self.actions.relay_request {
                Some(action) => Ok((action, server, Facts::Request(method, transport))),
                None => Err(self.denied(Cause::NotPermitted)),
            },
        }
    }

    fn denied(&self, cause: Cause) -> Decision {
        self.decision(Outcome::Deny, cause, Vec::new(), Vec::new())
    }

    /// For a call of a tool the set types, its own action and its input
    /// as a Cedar record. A call without a recorded input (a record from
    /// before per-tool actions, replayed under a candidate that types the
    /// tool) has an empty one: policies that do not read arguments decide
    /// as they did, and one that reads an argument errors, which denies.
    fn call_action(
        &self,
        action: ToolAction,
        tool: ToolRef<'_>,
        facts: &ToolFacts,
    ) -> Result<Option<(&EntityUid, RestrictedExpression)>, DecisionError> {
        if action != ToolAction::Call {
            return Ok(None);
        }
        let typed = match tool {
            ToolRef::Id(id) => self.calls.get(id),
            ToolRef::Entity(uid) => uid
                .id()
                .unescaped()
                .split_once('/')
                .and_then(|(server, name)| self.calls.get(&ToolId::new(server, name))),
        };
        let Some((action, ty)) = typed else {
            return Ok(None);
        };
        let Some(input) = &facts.input else {
            let empty = RestrictedExpression::new_record([]).map_err(|err| DecisionError {
                policy: None,
                message: err.to_string(),
            })?;
            return Ok(Some((action, empty)));
        };
        let expression =
            record_expression(&ty.fields, &input.values).map_err(|err| DecisionError {
                policy: None,
                message: format!("the input does not fit the tool's type: {err}"),
            })?;
        Ok(Some((action, expression)))
    }

    fn tool_action(&self, action: ToolAction) -> &EntityUid {
        match action {
            ToolAction::Discover => &self.actions.discover_tool,
            ToolAction::Call => &self.actions.call_tool,
        }
    }

    fn two_pass(&self, request: &Pass<'_>, approval_channel: &str) -> Decision {
        let unapproved = match self.pass(request, request.all(self), false, NO_APPROVAL) {
            Ok(response) => response,
            Err(denied) => return denied,
        };
        if unapproved.decision() == CedarDecision::Allow {
            let policies = self.determining(&unapproved);
            return self.decision(Outcome::Allow, Cause::Permitted, policies, Vec::new());
        }

        // The second pass evaluates only what an approval can change
        // (`Slice::for_approval`); the forbids that hold either way are
        // known from the first.
        let (policies, held) = match request.slice {
            Some(slice) => {
                let (part, held) = slice.for_approval(&unapproved);
                ((&part.policies, Some(&part.reads)), held)
            }
            None => (request.all(self), Vec::new()),
        };
        let approved = match self.pass(request, policies, true, approval_channel) {
            Ok(response) => response,
            Err(denied) => return denied,
        };
        if approved.decision() == CedarDecision::Allow && held.is_empty() {
            // What stands between the call and an allow: the forbids that
            // held without the approval.
            let policies = self.determining(&unapproved);
            return self.decision(Outcome::Ask, Cause::ApprovalRequired, policies, Vec::new());
        }
        // Even an approval would not help. The forbids that still hold are
        // the reason; if none do, nothing permits the call.
        let still = (approved.decision() == CedarDecision::Deny)
            .then(|| approved.diagnostics().reason())
            .into_iter()
            .flatten();
        let policies = self.determining_ids(still.chain(&held));
        let cause = if policies.is_empty() {
            Cause::NotPermitted
        } else {
            Cause::Forbidden
        };
        self.decision(Outcome::Deny, cause, policies, Vec::new())
    }

    /// One pass: as approved (a human said yes), or for an action that
    /// is never itself asked about (`approve`).
    fn one_pass(&self, request: &Pass<'_>, approved: bool, approval_channel: &str) -> Decision {
        let response = match self.pass(request, request.all(self), approved, approval_channel) {
            Ok(response) => response,
            Err(denied) => return denied,
        };
        let policies = self.determining(&response);
        if response.decision() == CedarDecision::Allow {
            let cause = if approved {
                Cause::Approved
            } else {
                Cause::Permitted
            };
            return self.decision(Outcome::Allow, cause, policies, Vec::new());
        }
        let cause = if policies.is_empty() {
            Cause::NotPermitted
        } else {
            Cause::Forbidden
        };
        self.decision(Outcome::Deny, cause, policies, Vec::new())
    }

    /// One pass: a Cedar response with no errors, or the deny that any
    /// error makes it (Cedar skips an erroring policy, even a forbid).
    fn pass(
        &self,
        request: &Pass<'_>,
        policies: (&PolicySet, Option<&ContextReads>),
        approved: bool,
        approval_channel: &str,
    ) -> Result<Response, Decision> {
        let response = self
            .evaluate(request, policies, approved, approval_channel)
            .map_err(|error| {
                self.decision(Outcome::Deny, Cause::PolicyError, Vec::new(), vec![error])
            })?;
        match errors_of(&response) {
            Some(errors) => {
                Err(self.decision(Outcome::Deny, Cause::PolicyError, Vec::new(), errors))
            }
            None => Ok(response),
        }
    }

    fn evaluate(
        &self,
        request: &Pass<'_>,
        (policies, only): (&PolicySet, Option<&ContextReads>),
        approved: bool,
        approval_channel: &str,
    ) -> Result<Response, DecisionError> {
        let Pass {
            entities,
            principal,
            action,
            resource,
            facts,
            ..
        } = *request;
        let context = match facts {
            Facts::Tool(facts, input) => tool_context(
                facts,
                (approved, approval_channel, request.approvers),
                self.tool_shape,
                input,
                only,
            ),
            Facts::Command(facts, transport) => command_context(
                facts,
                transport,
                approved,
                approval_channel,
                self.command_shape,
                only,
            ),
            Facts::Policies(transport) => {
                policy_context(transport, approved, approval_channel, only)
            }
            Facts::Request(method, transport) => {
                request_context(method, transport, approved, approval_channel, only)
            }
            Facts::Approve(asked) => approve_context(&asked, only),
        }
        .map_err(|err| DecisionError {
            policy: None,
            message: format!("the context does not build: {err}"),
        })?;
        // No schema here: the load checked that this context shape and these
        // entity types build against the schema (`Engine::load`), and the
        // shape is fixed by `tool_context`. Checking again per request
        // would cost a third of a decision and prove nothing new.
        let request = Request::new(
            principal.clone(),
            action.clone(),
            resource.clone(),
            context,
            None,
        )
        .map_err(|err| DecisionError {
            policy: None,
            message: format!("the request does not build: {err}"),
        })?;
        Ok(self.authorizer.is_authorized(&request, policies, entities))
    }

    /// Cedar on one request, with the policies whose scope can match it
    /// (the same answer as the whole set, for less): what `decide` does in
    /// each pass, for the policy fixtures.
    pub(super) fn authorize(&self, request: &Request, entities: &Entities) -> Response {
        match self
            .scope
            .as_ref()
            .and_then(|index| index.slice(request, entities))
        {
            Some(slice) => self
                .authorizer
                .is_authorized(request, &slice.all.policies, entities),
            None => self
                .authorizer
                .is_authorized(request, &self.policies, entities),
        }
    }

    pub(super) fn determining(&self, response: &Response) -> Vec<DeterminingPolicy> {
        self.determining_ids(response.diagnostics().reason())
    }

    fn determining_ids<'a>(
        &self,
        ids: impl Iterator<Item = &'a PolicyId>,
    ) -> Vec<DeterminingPolicy> {
        let mut policies: Vec<DeterminingPolicy> = ids
            .map(|id| {
                let origin = self.origin(id);
                DeterminingPolicy {
                    id: id.to_string(),
                    reason: origin.map_or_else(|| "".into(), |o| o.reason.clone()),
                    file: origin.map_or_else(|| "".into(), |o| o.file.clone()),
                }
            })
            .collect();
        policies.sort_by(|a, b| a.id.cmp(&b.id));
        policies
    }

    fn decision(
        &self,
        outcome: Outcome,
        cause: Cause,
        policies: Vec<DeterminingPolicy>,
        errors: Vec<DecisionError>,
    ) -> Decision {
        Decision {
            outcome,
            cause,
            policies,
            errors,
            policy_set: self.identity.clone(),
            shadow: None,
        }
    }
}

/// What stays the same between the two passes of a decision.
struct Pass<'a> {
    entities: &'a Entities,
    principal: &'a EntityUid,
    action: &'a EntityUid,
    resource: &'a EntityUid,
    facts: Facts<'a>,
    /// The policies the request can meet (`ScopeIndex`), when placed;
    /// else the engine's whole set decides.
    slice: Option<&'a Slice>,
    /// How many approve in the approved pass.
    approvers: u32,
}

impl Pass<'_> {
    /// The policies the first pass evaluates, and the context attributes
    /// they read (`None`: all of them).
    fn all<'s>(&'s self, engine: &'s Engine) -> (&'s PolicySet, Option<&'s ContextReads>) {
        match self.slice {
            Some(slice) => (&slice.all.policies, Some(&slice.all.reads)),
            None => (&engine.policies, None),
        }
    }
}

/// The facts a request is decided on.
#[derive(Clone, Copy)]
pub(super) enum Facts<'a> {
    Tool(&'a ToolFacts, Option<&'a RestrictedExpression>),
    Command(&'a CommandFacts, Transport),
    Policies(Transport),
    Request(&'a str, Transport),
    Approve(ApproveAsked<'a>),
}

/// The evaluation errors of a response, sorted, or `None` when there are none.
fn errors_of(response: &Response) -> Option<Vec<DecisionError>> {
    let mut errors: Vec<DecisionError> = response
        .diagnostics()
        .errors()
        .map(|err| match err {
            AuthorizationError::PolicyEvaluationError(inner) => DecisionError {
                policy: Some(inner.policy_id().to_string()),
                message: err.to_string(),
            },
        })
        .collect();
    if errors.is_empty() {
        return None;
    }
    errors.sort_by(|a, b| (&a.policy, &a.message).cmp(&(&b.policy, &b.message)));
    Some(errors)
}
