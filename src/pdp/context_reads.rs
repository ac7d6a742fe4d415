//! Which context attributes a policy reads. Two uses, both to evaluate
//! less for the same answer:
//! - the two passes of an unapproved decision (`decide.rs`) differ only in
//!   `context.approved`, `context.approval_channel` and `context.approvers`:
//!   a policy that reads none says in the second pass what it said in the first (and
//!   errs as little), so the second pass need not evaluate it again;
//! - a pass builds only the attributes its policies read: Cedar reads an
//!   attribute only by naming it (`context.x`, `context has x`), so one
//!   nobody names cannot change an answer.
//!
//! A policy that uses `context` in any other way (comparing the whole
//! record, say) reads all of it.

mod scan;

use std::collections::BTreeSet;

use cedar_policy::Policy;
use serde_json::Value;

/// The context attributes an approval changes.
const APPROVAL_FACTS: [&str; 3] = ["approved", "approval_channel", "approvers"];

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ContextReads {
    whole: bool,
    names: BTreeSet<String>,
}

impl ContextReads {
    /// What `policy`'s conditions read: from its text's tokens (`scan.rs`),
    /// or, where they cannot say, from its JSON form.
    pub(super) fn of(policy: &Policy) -> Self {
        policy
            .to_cedar()
            .and_then(|text| scan::scanned(&text))
            .unwrap_or_else(|| Self::of_form(policy))
    }

    /// What `policy`'s conditions read, from Cedar's JSON form of it (a
    /// second parse of a policy read from text). A policy whose form cannot
    /// be read is taken to read everything.
    fn of_form(policy: &Policy) -> Self {
        let mut reads = Self::default();
        match policy.to_json() {
            Ok(json) => {
                if let Some(conditions) = json.get("conditions") {
                    reads.collect(conditions);
                }
            }
            Err(_) => reads.whole = true,
        }
        reads
    }

    pub(super) fn extend(&mut self, other: &Self) {
        self.whole |= other.whole;
        self.names.extend(other.names.iter().cloned());
    }

    pub(super) fn reads(&self, attribute: &str) -> bool {
        self.whole || self.names.contains(attribute)
    }

    /// Whether an approval can change what the policies say.
    pub(super) fn reads_approval(&self) -> bool {
        APPROVAL_FACTS.iter().any(|name| self.reads(name))
    }

    /// Walks an expression tree (Cedar's JSON policy form).
    fn collect(&mut self, expression: &Value) {
        match expression {
            Value::Object(object) => {
                for (key, value) in object {
                    if key == "Var" && value == "context" {
                        self.whole = true;
                        continue;
                    }
                    if key == "." || key == "has" {
                        let on_context = value.get("left").is_some_and(|left| {
                            left.get("Var").is_some_and(|var| var == "context")
                        });
                        if on_context {
                            match value.get("attr").and_then(Value::as_str) {
                                Some(name) => {
                                    self.names.insert(name.to_owned());
                                }
                                None => self.whole = true,
                            }
                            continue;
                        }
                    }
                    self.collect(value);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| self.collect(item)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(conditions: &str) -> ContextReads {
        let text = format!("permit (principal, action, resource) {conditions};");
        ContextReads::of(&Policy::parse(None, text).unwrap())
    }

    #[test]
    fn a_policy_reads_the_approval_only_where_its_conditions_do() {
        for conditions in [
            "unless { context.approved }",
            "when { context.approval_channel == \"client_elicitation\" }",
            "when { context has approved }",
            "when { context[\"approved\"] }",
            "when { context == {\"approved\": true} }",
            "when { resource.x == 1 && (context.transport == \"stdio\" || context.approved) }",
            "when { if context.approved then true else false }",
        ] {
            assert!(reads(conditions).reads_approval(), "{conditions}");
        }
        for conditions in [
            "",
            "when { context.transport == \"stdio\" }",
            "when { context has path_classes && context.path_classes.contains(\"secrets\") }",
            "when { resource.approved }",
            "when { principal.tier.approved == context.writes_inside_root }",
        ] {
            assert!(!reads(conditions).reads_approval(), "{conditions}");
        }
    }

    #[test]
    fn the_attributes_read_are_those_named_and_all_for_the_whole_record() {
        let some = reads("when { context.input.path == \"x\" && context has path_classes }");
        assert!(some.reads("input") && some.reads("path_classes"));
        assert!(!some.reads("transport") && !some.reads("path"));
        let mut all = reads("when { [context].contains({}) }");
        assert!(all.reads("anything"));
        let mut joined = some.clone();
        joined.extend(&reads("unless { context.approved }"));
        assert!(joined.reads("input") && joined.reads("approved"));
        all.extend(&some);
        assert!(all.reads("transport"));
        assert!(!ContextReads::default().reads("approved"));
    }
}
