//! The request context Cedar sees, built from computed facts. Each shape is
//! fixed here, whatever the values: `Engine::load` checks every shape
//! against the schema once, with a probe built by these same functions, so
//! a context never fails to fit at decision time. Nothing here decides or
//! reads the world: facts in, a `Context` out.

use std::collections::BTreeSet;

use cedar_policy::{Context, ContextCreationError, RestrictedExpression};

use super::context_reads::ContextReads;
use super::query::{ApproveAsked, INBOX_CHANNEL};
use crate::facts::{CommandFacts, ToolFacts, Transport};

/// The attributes every action's context shares.
fn common(
    approved: bool,
    approval_channel: &str,
    transport: Transport,
) -> [(&'static str, RestrictedExpression); 3] {
    [
        ("approved", RestrictedExpression::new_bool(approved)),
        (
            "approval_channel",
            RestrictedExpression::new_string(approval_channel.to_owned()),
        ),
        (
            "transport",
            RestrictedExpression::new_string(transport.as_str().to_owned()),
        ),
    ]
}

/// The context of `pairs`; with `only`, of those its policies read (an
/// attribute no policy names cannot change an answer, and each costs its
/// evaluation into a value).
fn context(
    pairs: impl IntoIterator<Item = (&'static str, RestrictedExpression)>,
    only: Option<&ContextReads>,
) -> Result<Context, Box<ContextCreationError>> {
    Context::from_pairs(
        pairs
            .into_iter()
            .filter(|(name, _)| only.is_none_or(|reads| reads.reads(name)))
            .map(|(k, v)| (k.to_owned(), v)),
    )
    .map_err(Box::new)
}

fn strings(items: &BTreeSet<String>) -> RestrictedExpression {
    RestrictedExpression::new_set(
        items
            .iter()
            .map(|i| RestrictedExpression::new_string(i.clone())),
    )
}

/// What a tool call's paths come to, for its own context and an
/// approver's.
fn path_facts(facts: &ToolFacts) -> [(&'static str, RestrictedExpression); 5] {
    [
        (
            "reads_inside_root",
            RestrictedExpression::new_bool(facts.reads_inside_root),
        ),
        (
            "writes_inside_root",
            RestrictedExpression::new_bool(facts.writes_inside_root),
        ),
        (
            "touches_vcs_metadata",
            RestrictedExpression::new_bool(facts.touches_vcs_metadata),
        ),
        (
            "writes_vcs_metadata",
            RestrictedExpression::new_bool(facts.writes_vcs_metadata),
        ),
        ("path_classes", strings(&facts.path_classes)),
    ]
}

/// The context record of a tool request: schema type `Portcullis::ToolFacts`,
/// plus `input` for a call decided as its tool's own action.
pub(super) fn tool_context(
    facts: &ToolFacts,
    (approved, approval_channel, approvers): (bool, &str, u32),
    shape: ToolShape,
    input: Option<&RestrictedExpression>,
    only: Option<&ContextReads>,
) -> Result<Context, Box<ContextCreationError>> {
    let paths = path_facts(facts);
    let counted = (shape == ToolShape::Current).then(|| {
        let approvers = if approved { i64::from(approvers) } else { 0 };
        ("approvers", RestrictedExpression::new_long(approvers))
    });
    context(
        common(approved, approval_channel, facts.transport)
            .into_iter()
            .chain(paths)
            .chain(counted)
            .chain(input.map(|input| ("input", input.clone()))),
        only,
    )
}

/// Which `ToolFacts` record the schema declares. Policy sets recorded
/// before the approval inbox's quorums lack `approvers`; replay decides
/// their records without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ToolShape {
    Current,
    WithoutApprovers,
}

/// The context record of an `approve` request (schema type
/// `Portcullis::ApprovalFacts`): the asking call's facts and who asked.
pub(super) fn approve_context(
    asked: &ApproveAsked<'_>,
    only: Option<&ContextReads>,
) -> Result<Context, Box<ContextCreationError>> {
    let facts = asked.facts;
    let asker = [
        (
            "client",
            RestrictedExpression::new_string(asked.client.to_owned()),
        ),
        (
            "client_tier",
            RestrictedExpression::new_string(asked.client_tier.to_owned()),
        ),
    ];
    context(
        common(false, INBOX_CHANNEL, facts.transport)
            .into_iter()
            .chain(path_facts(facts))
            .chain(asker),
        only,
    )
}

/// The context record of a `read_policy` request (schema type
/// `Portcullis::PolicyFacts`): reading writes nothing, so the path facts
/// hold vacuously.
pub(super) fn policy_context(
    transport: Transport,
    approved: bool,
    approval_channel: &str,
    only: Option<&ContextReads>,
) -> Result<Context, Box<ContextCreationError>> {
    context(
        common(approved, approval_channel, transport)
            .into_iter()
            .chain(no_writes()),
        only,
    )
}

/// The path facts of a request that touches no path: every write (there
/// is none) is inside the root and outside VCS metadata.
fn no_writes() -> [(&'static str, RestrictedExpression); 3] {
    [
        ("writes_inside_root", RestrictedExpression::new_bool(true)),
        (
            "touches_vcs_metadata",
            RestrictedExpression::new_bool(false),
        ),
        ("writes_vcs_metadata", RestrictedExpression::new_bool(false)),
    ]
}

/// The context record of a `relay_request` request (schema type
/// `Portcullis::RequestFacts`): the path facts hold vacuously, as for
/// reading the policies, and the method is named.
pub(super) fn request_context(
    method: &str,
    transport: Transport,
    approved: bool,
    approval_channel: &str,
    only: Option<&ContextReads>,
) -> Result<Context, Box<ContextCreationError>> {
    let method = (
        "method",
        RestrictedExpression::new_string(method.to_owned()),
    );
    context(
        common(approved, approval_channel, transport)
            .into_iter()
            .chain(no_writes())
            .chain([method]),
        only,
    )
}

/// Which `CommandFacts` record the schema declares. Policy sets recorded
/// before the gate judged VCS metadata lack its two attributes; replay
/// decides their records with the record they were decided with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CommandShape {
    Current,
    WithoutVcsMetadata,
}

/// The context record of a command (schema type `Portcullis::CommandFacts`).
pub(super) fn command_context(
    facts: &CommandFacts,
    transport: Transport,
    approved: bool,
    approval_channel: &str,
    shape: CommandShape,
    only: Option<&ContextReads>,
) -> Result<Context, Box<ContextCreationError>> {
    let command = [
        ("classes", strings(&facts.classes)),
        ("programs", strings(&facts.programs)),
        (
            "writes_inside_root",
            RestrictedExpression::new_bool(facts.writes_inside_root),
        ),
        ("opaque", RestrictedExpression::new_bool(facts.opaque)),
    ];
    let vcs = match shape {
        CommandShape::Current => vec![
            (
                "writes_vcs_metadata",
                RestrictedExpression::new_bool(facts.writes_vcs_metadata),
            ),
            (
                "touches_vcs_metadata",
                RestrictedExpression::new_bool(facts.touches_vcs_metadata),
            ),
        ],
        CommandShape::WithoutVcsMetadata => Vec::new(),
    };
    context(
        common(approved, approval_channel, transport)
            .into_iter()
            .chain(command)
            .chain(vcs),
        only,
    )
}
