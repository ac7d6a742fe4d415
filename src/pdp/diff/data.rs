//! Changes to the data a set decides with: a tier's capabilities, a
//! tool's declared effects or required capabilities, a tool or tier that
//! is new. SymCC compares two policy sets within one world of data, so the
//! policies are compared under NEW's data (`pinned.rs`), and each change
//! to the data that could open something is searched apart: the requests
//! it is about (a client of that tier, a call of that tool) are taken from
//! OLD entirely, and whatever NEW permits of them is decided again on both
//! sides with each side's own data (`counterexample.rs`). A tier that only
//! loses capabilities, or a tool that only gains required capabilities,
//! opens nothing a policy of the default shape can see, and is not
//! searched.

use std::collections::{BTreeMap, BTreeSet};

use cedar_policy::EntityUid;
use serde_json::Value;

use crate::pdp::Engine;
use crate::pdp::entities::{TIER_TYPE, TOOL_TYPE};

/// One change to the data that may open requests, and the Cedar condition
/// that picks the requests it is about.
#[derive(Debug, Clone)]
pub(super) struct Opening {
    pub what: String,
    pub condition: String,
    /// About a tool (else about a tier): only tool requests can meet it.
    pub tool: bool,
    /// The attributes whose values changed, when only they did: a policy
    /// that names none of them cannot tell the two data apart. `None` when
    /// the entity is new or its place in the hierarchy changed.
    pub attributes: Option<BTreeSet<String>>,
}

impl Opening {
    /// Whether a policy of `engine` that can apply to `action` names one of
    /// the changed attributes (an attribute is only ever read by its name:
    /// `.name`, `["name"]`, `has name`); an action `engine` does not know
    /// counts as named.
    pub(super) fn read_by(&self, engine: &Engine, action: &EntityUid) -> bool {
        let Some(attributes) = &self.attributes else {
            return true;
        };
        let Some(policies) = engine
            .scope
            .as_ref()
            .and_then(|index| index.for_action(action))
        else {
            return true;
        };
        policies
            .map(ToString::to_string)
            .any(|text| attributes.iter().any(|name| text.contains(name.as_str())))
    }
}

/// The changes from OLD's data to NEW's that may open requests.
pub(super) fn openings(old: &Engine, new: &Engine) -> Vec<Opening> {
    let (old_data, new_data) = (data(old), data(new));
    let mut openings = Vec::new();
    for (uid, new_entity) in &new_data {
        let kind = uid.type_name().to_string();
        let old_entity = old_data.get(uid);
        if old_entity == Some(new_entity) {
            continue;
        }
        if kind == TIER_TYPE {
            let widened = match old_entity {
                None => true,
                Some(old_entity) => {
                    !strings(new_entity, "/attrs/capabilities")
                        .is_subset(&strings(old_entity, "/attrs/capabilities"))
                        || new_entity.get("parents") != old_entity.get("parents")
                        || attrs_beyond(new_entity, "capabilities")
                            != attrs_beyond(old_entity, "capabilities")
                }
            };
            if widened {
                openings.push(Opening {
                    what: format!("tier {}", uid.id().unescaped()),
                    condition: format!("principal.tier == {uid}"),
                    tool: false,
                    attributes: changed_attributes(old_entity, new_entity),
                });
            }
        } else if kind == TOOL_TYPE {
            let tightened_only = old_entity.is_some_and(|old_entity| {
                strings(new_entity, "/attrs/required_capabilities")
                    .is_superset(&strings(old_entity, "/attrs/required_capabilities"))
                    && attrs_beyond(new_entity, "required_capabilities")
                        == attrs_beyond(old_entity, "required_capabilities")
                    && new_entity.get("parents") == old_entity.get("parents")
            });
            if !tightened_only {
                openings.push(Opening {
                    what: format!("tool {}", uid.id().unescaped()),
                    condition: format!("resource == {uid}"),
                    tool: true,
                    attributes: changed_attributes(old_entity, new_entity),
                });
            }
        }
    }
    openings
}

/// The names of the attributes whose values differ, when the entity
/// existed and kept its parents.
fn changed_attributes(old: Option<&Value>, new: &Value) -> Option<BTreeSet<String>> {
    let old = old?;
    if old.get("parents") != new.get("parents") {
        return None;
    }
    let attrs = |entity: &Value| entity.get("attrs").and_then(Value::as_object).cloned();
    let (before, after) = (
        attrs(old).unwrap_or_default(),
        attrs(new).unwrap_or_default(),
    );
    Some(
        before
            .keys()
            .chain(after.keys())
            .filter(|name| before.get(*name) != after.get(*name))
            .cloned()
            .collect(),
    )
}

/// The tier and tool entities of a side, by uid.
fn data(engine: &Engine) -> BTreeMap<EntityUid, Value> {
    engine
        .entities_json()
        .iter()
        .filter_map(|entity| {
            let kind = entity.pointer("/uid/type")?.as_str()?;
            let id = entity.pointer("/uid/id")?.as_str()?;
            let uid = match kind {
                TIER_TYPE => crate::pdp::entity_uid(TIER_TYPE, id).ok()?,
                TOOL_TYPE => crate::pdp::tool_uid(id),
                _ => return None,
            };
            Some((uid, entity.clone()))
        })
        .collect()
}

fn strings(entity: &Value, pointer: &str) -> BTreeSet<String> {
    entity
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The entity's attributes other than `except`.
fn attrs_beyond(entity: &Value, except: &str) -> Value {
    let mut attrs = entity.get("attrs").cloned().unwrap_or(Value::Null);
    if let Some(object) = attrs.as_object_mut() {
        object.remove(except);
    }
    attrs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pdp::PolicyBundle;
    use crate::tools::Registry;

    fn engine_with_tiers(readonly: &str) -> Engine {
        let mut bundle = PolicyBundle::builtin();
        let tiers: Value = serde_json::from_str(&bundle.tiers.text).unwrap();
        let tiers: Vec<Value> = tiers
            .as_array()
            .unwrap()
            .iter()
            .cloned()
            .map(|mut tier| {
                if tier["uid"]["id"] == "readonly" {
                    tier["attrs"]["capabilities"] = serde_json::from_str(readonly).unwrap();
                }
                tier
            })
            .collect();
        bundle.tiers.text = serde_json::to_string(&tiers).unwrap();
        Engine::load(&bundle, &Registry::builtin().unwrap(), &[]).unwrap()
    }

    #[test]
    fn the_same_data_opens_nothing() {
        let engine = engine_with_tiers(r#"["read"]"#);
        assert!(openings(&engine, &engine).is_empty());
    }

    #[test]
    fn a_tier_that_gains_a_capability_opens_its_clients_requests() {
        let (old, new) = (
            engine_with_tiers(r#"["read"]"#),
            engine_with_tiers(r#"["read", "write"]"#),
        );
        let found = openings(&old, &new);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].what, "tier readonly");
        assert_eq!(
            found[0].condition,
            r#"principal.tier == Portcullis::Tier::"readonly""#
        );
        assert!(!found[0].tool);
        // Taking it away again opens nothing.
        assert!(openings(&new, &old).is_empty());
    }

    #[test]
    fn an_opening_matters_only_to_actions_whose_policies_read_what_changed() {
        let (old, new) = (
            engine_with_tiers(r#"["read"]"#),
            engine_with_tiers(r#"["read", "write"]"#),
        );
        let found = openings(&old, &new);
        let opening = &found[0];
        assert_eq!(
            opening.attributes,
            Some(BTreeSet::from(["capabilities".to_owned()]))
        );
        let action = |name: &str| {
            format!(r#"Portcullis::Action::"{name}""#)
                .parse::<EntityUid>()
                .unwrap()
        };
        // tier.capability_gate reads capabilities for calls only.
        assert!(opening.read_by(&new, &action("builtin/write_file")));
        assert!(!opening.read_by(&new, &action("discover_tool")));
        assert!(!opening.read_by(&new, &action("run_command")));
        // An action the index does not know is taken as read.
        assert!(opening.read_by(&new, &action("nowhere/unknown")));
    }

    #[test]
    fn a_tier_that_trades_one_capability_for_another_opens_its_requests() {
        let (old, new) = (
            engine_with_tiers(r#"["read"]"#),
            engine_with_tiers(r#"["network"]"#),
        );
        assert_eq!(openings(&old, &new).len(), 1);
    }
}
