//! The request shapes a set is checked for once, at load: each action's
//! principal, resource and context as portcullis builds them, against what
//! the schema declares, so that no decision has to validate its request.

use std::collections::{BTreeSet, HashMap};

use cedar_policy::{EntityUid, Request, Schema};

use crate::facts::{CommandFacts, ToolFacts, Transport};
use crate::pdp::assembly::Actions;
use crate::pdp::context::{
    CommandShape, ToolShape, approve_context, command_context, policy_context, request_context,
    tool_context,
};
use crate::pdp::entities;
use crate::pdp::load::Provenance;
use crate::pdp::problem::{LoadError, Problem, ProblemKind};
use crate::pdp::query::ApproveAsked;
use crate::tools::ToolId;

/// An action whose request shape is fixed by portcullis (a client, a
/// resource of one type, a context built in `context.rs`), checked once per
/// load when the schema declares the action.
struct FixedShape<'a> {
    action: Option<&'a EntityUid>,
    principal_type: &'static str,
    resource: EntityUid,
    context: Result<cedar_policy::Context, Box<cedar_policy::ContextCreationError>>,
    /// What the schema must say, for the help text.
    expected: &'static str,
}

fn check_fixed_shape(schema: &Schema, shape: FixedShape<'_>) -> Result<(), LoadError> {
    let Some(action) = shape.action else {
        return Ok(());
    };
    let refuse = |message: String| LoadError {
        problems: vec![
            Problem::new(ProblemKind::Context, "schemas", message).with_help(Some(format!(
                "{}; compare with `portcullis init`",
                shape.expected
            ))),
        ],
    };
    let principal = entities::entity_uid(shape.principal_type, "probe")
        .map_err(|err| refuse(err.to_string()))?;
    let context = shape.context.map_err(|err| refuse(err.to_string()))?;
    Request::new(
        principal,
        action.clone(),
        shape.resource,
        context,
        Some(schema),
    )
    .map(|_| ())
    .map_err(|err| {
        refuse(format!(
            "the request portcullis builds for {action} does not match the schema: {err}"
        ))
    })
}

/// Checks, once per load, the `read_policy` and `relay_request` requests
/// `decide` builds, for a schema that declares them.
pub(super) fn check_fixed_shapes(
    schema: &Schema,
    actions: &Actions,
    policies: &EntityUid,
) -> Result<(), LoadError> {
    check_fixed_shape(
        schema,
        FixedShape {
            action: actions.read_policy.as_ref(),
            principal_type: entities::CLIENT_TYPE,
            resource: policies.clone(),
            context: policy_context(Transport::Stdio, true, "probe", None),
            expected: "read_policy applies to principal Client, resource Policies, context PolicyFacts",
        },
    )?;
    check_fixed_shape(
        schema,
        FixedShape {
            action: actions.relay_request.as_ref(),
            principal_type: entities::CLIENT_TYPE,
            resource: entities::server_uid("probe"),
            context: request_context("elicitation/create", Transport::Stdio, true, "probe", None),
            expected: "relay_request applies to principal Client, resource Server, context RequestFacts",
        },
    )?;
    let mut facts = ToolFacts::without_paths(Transport::Stdio);
    facts.path_classes.insert("probe".to_owned());
    check_fixed_shape(
        schema,
        FixedShape {
            action: actions.approve.as_ref(),
            principal_type: entities::APPROVER_TYPE,
            resource: entities::tool_uid("probe/probe"),
            context: approve_context(
                &ApproveAsked {
                    facts: &facts,
                    client: "probe",
                    client_tier: "probe",
                },
                None,
            ),
            expected: "approve applies to principal Approver, resource Tool, context ApprovalFacts",
        },
    )
}

/// Checks, once per load, that the requests `decide` builds (a client, a
/// tool action, a tool, and the context of `tool_context`) are valid for the
/// schema. A team's schema that portcullis's facts do not fit refuses to
/// load, rather than deny at every call.
pub(super) fn check_request_shape(
    schema: &Schema,
    actions: &Actions,
    tools: &HashMap<ToolId, EntityUid>,
    shell: &EntityUid,
    provenance: Provenance,
) -> Result<(CommandShape, ToolShape), LoadError> {
    let principal = entities::entity_uid(entities::CLIENT_TYPE, "probe")
        .map_err(|err| shape_refused(err.to_string()))?;
    let tool_shape = tool_shape(schema, actions, tools, &principal, provenance)?;
    let command_shape = command_shape(schema, actions, shell, &principal, provenance)?;
    Ok((command_shape, tool_shape))
}

/// The schema does not declare the request portcullis builds.
fn shape_refused(message: String) -> LoadError {
    LoadError {
        problems: vec![
            Problem::new(ProblemKind::Context, "schemas", message).with_help(Some(
                "the schema's ToolFacts must declare exactly the attributes portcullis computes; \
                 compare with `portcullis init`"
                    .to_owned(),
            )),
        ],
    }
}

/// The shape of a tool request's context the schema declares: today's,
/// or for a recorded set the one before `approvers`.
fn tool_shape(
    schema: &Schema,
    actions: &Actions,
    tools: &HashMap<ToolId, EntityUid>,
    principal: &EntityUid,
    provenance: Provenance,
) -> Result<ToolShape, LoadError> {
    let resource = match tools.values().next() {
        Some(uid) => uid.clone(),
        None => entities::entity_uid(entities::TOOL_TYPE, "probe/probe")
            .map_err(|err| shape_refused(err.to_string()))?,
    };
    let mut facts = ToolFacts::without_paths(Transport::Stdio);
    facts.path_classes.insert("probe".to_owned());
    let fits = |shape: ToolShape| -> Result<(), LoadError> {
        for action in [&actions.discover_tool, &actions.call_tool] {
            let context = tool_context(&facts, (true, "probe", 2), shape, None, None)
                .map_err(|err| shape_refused(err.to_string()))?;
            Request::new(
                principal.clone(),
                action.clone(),
                resource.clone(),
                context,
                Some(schema),
            )
            .map_err(|err| {
                shape_refused(format!(
                    "the request portcullis builds for {action} does not match the schema: {err}"
                ))
            })?;
        }
        Ok(())
    };
    match (fits(ToolShape::Current), provenance) {
        (Ok(()), _) => Ok(ToolShape::Current),
        (Err(_), Provenance::Recorded) if fits(ToolShape::WithoutApprovers).is_ok() => {
            Ok(ToolShape::WithoutApprovers)
        }
        (Err(err), _) => Err(err),
    }
}

/// The shape of a command request's context the schema declares: today's,
/// or for a recorded set the one before the VCS metadata facts.
fn command_shape(
    schema: &Schema,
    actions: &Actions,
    shell: &EntityUid,
    principal: &EntityUid,
    provenance: Provenance,
) -> Result<CommandShape, LoadError> {
    let command = CommandFacts {
        classes: BTreeSet::from(["probe".to_owned()]),
        programs: BTreeSet::from(["probe".to_owned()]),
        writes_inside_root: true,
        writes_vcs_metadata: false,
        touches_vcs_metadata: false,
        opaque: false,
        parts: Vec::new(),
    };
    let fits = |shape: CommandShape| -> Result<(), LoadError> {
        let context = command_context(&command, Transport::Stdio, true, "probe", shape, None)
            .map_err(|err| shape_refused(err.to_string()))?;
        Request::new(
            principal.clone(),
            actions.run_command.clone(),
            shell.clone(),
            context,
            Some(schema),
        )
        .map(|_| ())
        .map_err(|err| {
            shape_refused(format!(
                "the request portcullis builds for {} does not match the schema: {err}",
                actions.run_command
            ))
        })
    };
    match (fits(CommandShape::Current), provenance) {
        (Ok(()), _) => Ok(CommandShape::Current),
        (Err(_), Provenance::Recorded) if fits(CommandShape::WithoutVcsMetadata).is_ok() => {
            Ok(CommandShape::WithoutVcsMetadata)
        }
        (Err(err), _) => Err(err),
    }
}
