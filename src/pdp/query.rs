//! One question for the decision point: who asks, about what, approved or
//! not. The engine answers it (`decide.rs`) and its discovery memo keys on
//! it (`discovery_memo.rs`); both read it from here, so neither imports
//! the other for it.

use cedar_policy::{Entities, EntityUid};

use crate::facts::{CommandFacts, ToolFacts, Transport};
use crate::tools::ToolId;

/// Which tool action is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolAction {
    /// May the client see the tool in its listing?
    Discover,
    /// May the client run this call?
    Call,
}

/// Who asks, and against which entities.
#[derive(Debug, Clone, Copy)]
pub enum Asker<'a> {
    /// A live client, by name, against the engine's own entities. Cedar
    /// does not check that a principal exists (a missing one makes
    /// attribute-reading forbids error, and Cedar skips erroring policies),
    /// so an unknown name is denied before Cedar is asked.
    Client(&'a str),
    /// A recorded principal with the entities its record names (replay).
    Recorded {
        entities: &'a Entities,
        principal: &'a EntityUid,
    },
}

/// A tool, by registry id (checked to exist) or by recorded entity.
#[derive(Debug, Clone, Copy)]
pub enum ToolRef<'a> {
    Id(&'a ToolId),
    Entity(&'a EntityUid),
}

/// What is asked about.
#[derive(Debug, Clone, Copy)]
pub enum Asked<'a> {
    Tool {
        action: ToolAction,
        tool: ToolRef<'a>,
        facts: &'a ToolFacts,
    },
    /// A shell command for the command gate (action `run_command`).
    Command {
        facts: &'a CommandFacts,
        transport: Transport,
    },
    /// Reading the policies in force (action `read_policy`).
    Policies { transport: Transport },
    /// May an approver approve this call (action `approve`), for a
    /// question of the approval inbox; the principal is the approver.
    Approve {
        tool: ToolRef<'a>,
        asked: ApproveAsked<'a>,
    },
    /// A downstream server's request of the client (action
    /// `relay_request`), by the server's entity.
    Request {
        server: &'a EntityUid,
        method: &'a str,
        transport: Transport,
    },
}

/// The question an approver answers: the asking call's facts and who
/// asked.
#[derive(Debug, Clone, Copy)]
pub struct ApproveAsked<'a> {
    pub facts: &'a ToolFacts,
    pub client: &'a str,
    pub client_tier: &'a str,
}

/// One question for the decision point.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    pub asker: Asker<'a>,
    pub asked: Asked<'a>,
    /// A human approved through `approval_channel`: decide in one pass as
    /// approved, instead of the two passes that tell allow from ask.
    pub approved: bool,
    /// The channel a human approval would come through if one is needed;
    /// policies may refuse approvals from some channels.
    pub approval_channel: &'a str,
    /// How many distinct people approve in the approved pass (a tool
    /// request's `context.approvers`; 0 in the first pass).
    pub approvers: u32,
}

impl<'a> Query<'a> {
    /// A live client's tool request, not (yet) approved.
    pub fn tool(
        client: &'a str,
        action: ToolAction,
        tool: &'a ToolId,
        facts: &'a ToolFacts,
        approval_channel: &'a str,
    ) -> Self {
        Self {
            asker: Asker::Client(client),
            asked: Asked::Tool {
                action,
                tool: ToolRef::Id(tool),
                facts,
            },
            approved: false,
            approval_channel,
            approvers: ONE_APPROVER,
        }
    }

    /// A live client's shell command, not (yet) approved.
    pub fn command(
        client: &'a str,
        facts: &'a CommandFacts,
        transport: Transport,
        approval_channel: &'a str,
    ) -> Self {
        Self {
            asker: Asker::Client(client),
            asked: Asked::Command { facts, transport },
            approved: false,
            approval_channel,
            approvers: ONE_APPROVER,
        }
    }

    /// May an approver (its entities built by the caller, who knows the
    /// approvers) approve this question? Decided in one pass: an approval
    /// is never itself asked about.
    pub fn approve(
        entities: &'a Entities,
        approver: &'a EntityUid,
        tool: &'a EntityUid,
        asked: ApproveAsked<'a>,
    ) -> Self {
        Self {
            asker: Asker::Recorded {
                entities,
                principal: approver,
            },
            asked: Asked::Approve {
                tool: ToolRef::Entity(tool),
                asked,
            },
            approved: false,
            approval_channel: INBOX_CHANNEL,
            approvers: ONE_APPROVER,
        }
    }

    /// May a live client read the policies it runs under?
    pub fn policies(client: &'a str, transport: Transport) -> Self {
        Self {
            asker: Asker::Client(client),
            asked: Asked::Policies { transport },
            approved: false,
            approval_channel: NO_APPROVAL,
            approvers: ONE_APPROVER,
        }
    }

    /// May a downstream server's request reach this live client?
    pub fn request(
        client: &'a str,
        server: &'a EntityUid,
        method: &'a str,
        transport: Transport,
    ) -> Self {
        Self {
            asker: Asker::Client(client),
            asked: Asked::Request {
                server,
                method,
                transport,
            },
            approved: false,
            approval_channel: NO_APPROVAL,
            approvers: ONE_APPROVER,
        }
    }

    /// The same question, with a human's approval through its channel.
    pub fn approved(self) -> Self {
        Self {
            approved: true,
            ..self
        }
    }

    /// The same question, `approvers` people approving in the approved
    /// pass.
    pub fn by(self, approvers: u32) -> Self {
        Self { approvers, ..self }
    }
}

/// Approvers of a decision with one approval: what a client's own channel
/// gives, and what records from before quorums were decided with.
pub const ONE_APPROVER: u32 = 1;

/// The most approvers the inbox gathers for one question: its hypothetical
/// pass counts this many, and a question needs the fewest of 1 to this that
/// the policies allow.
pub const INBOX_MAX_APPROVERS: u32 = 3;

/// The channel of approvals given in the approval inbox.
pub const INBOX_CHANNEL: &str = "inbox";

/// The `approval_channel` of the first pass, where nobody has approved.
pub const NO_APPROVAL: &str = "none";
