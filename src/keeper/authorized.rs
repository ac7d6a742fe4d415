//! The proof that a call may run.

/// Made only by the keeper, and only once an allow decision's record is
/// durable: a tool's runner takes one, so no code path can run a tool
/// without a recorded allow (design.md, "authorized by type").
#[derive(Debug)]
pub struct Authorized {
    decision_seq: u64,
}

impl Authorized {
    /// Only the keeper's record step calls this, with the seq the audit log
    /// returned for the allow.
    pub(super) fn recorded(decision_seq: u64) -> Self {
        Self { decision_seq }
    }

    /// The seq of the decision record that allowed the call.
    pub fn decision_seq(&self) -> u64 {
        self.decision_seq
    }

    /// A proof for unit tests of the tools, which run them directly.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Self {
        Self { decision_seq: 0 }
    }
}
