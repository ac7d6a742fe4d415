//! The proof that a human approved one call.

/// A human approved the call with this action digest. Made only by this
/// module's flow, after the answer (and, for a retried call, the sealed
/// state) were checked; the keeper decides again with `approved = true`
/// only when it holds one for the very call it is deciding.
/// Not `Clone`: one answer, one run.
#[derive(Debug)]
pub struct Grant {
    digest: String,
    channel: &'static str,
    approvers: u32,
}

impl Grant {
    /// An approval through the client (its elicitation, its retried
    /// state, its harness's prompt).
    pub(super) fn checked(digest: String, channel: &'static str) -> Self {
        Self {
            digest,
            channel,
            approvers: crate::pdp::ONE_APPROVER,
        }
    }

    /// An approval by `approvers` distinct people of the inbox.
    pub(super) fn by_quorum(digest: String, channel: &'static str, approvers: u32) -> Self {
        Self {
            digest,
            channel,
            approvers,
        }
    }

    /// The action digest of the approved call.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The channel the approval came through, which the decision with it
    /// is made under.
    pub fn channel(&self) -> &'static str {
        self.channel
    }

    /// How many distinct people approved.
    pub fn approvers(&self) -> u32 {
        self.approvers
    }

    /// A grant for unit tests of the keeper.
    #[cfg(test)]
    pub(crate) fn for_tests(digest: &str) -> Self {
        Self {
            digest: digest.to_owned(),
            channel: crate::keeper::APPROVAL_CHANNEL,
            approvers: crate::pdp::ONE_APPROVER,
        }
    }
}
