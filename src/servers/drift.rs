//! How what running servers list differs from what is pinned: the report
//! of `servers diff`, the drift `serve` logs and audits at start.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use super::pins::{ServersLock, definition_hash};

/// One tool whose live definition is not its pin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Drift {
    pub server: String,
    pub tool: String,
    pub kind: DriftKind,
    /// The pinned hash, when pinned.
    pub pinned: Option<String>,
    /// The live hash, when the server lists the tool.
    pub live: Option<String>,
    /// The pinned fields that differ (`description`, `inputSchema`, ...).
    pub fields: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftKind {
    /// Listed, never pinned.
    NotPinned,
    /// Listed with another definition than its pin.
    Changed,
    /// Pinned, and the server no longer lists it.
    Missing,
}

impl DriftKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DriftKind::NotPinned => "not_pinned",
            DriftKind::Changed => "changed",
            DriftKind::Missing => "missing",
        }
    }
}

/// The drift of every server in `live` (a server that is not running is
/// not compared: its tools are unavailable, not changed).
pub fn drift(lock: &ServersLock, live: &BTreeMap<String, Vec<Value>>) -> Vec<Drift> {
    let mut found = Vec::new();
    for (server, tools) in live {
        let pins = lock.servers.get(server);
        let mut listed = BTreeSet::new();
        for definition in tools {
            let Some(name) = definition.get("name").and_then(Value::as_str) else {
                continue;
            };
            listed.insert(name.to_owned());
            let live_hash = definition_hash(definition);
            let pin = pins.and_then(|p| p.get(name));
            let (kind, fields) = match pin {
                None => (DriftKind::NotPinned, Vec::new()),
                Some(pin) if pin.sha256 == live_hash => continue,
                Some(pin) => (
                    DriftKind::Changed,
                    changed_fields(&pin.definition, definition),
                ),
            };
            found.push(Drift {
                server: server.clone(),
                tool: name.to_owned(),
                kind,
                pinned: pin.map(|p| p.sha256.clone()),
                live: Some(live_hash),
                fields,
            });
        }
        for (name, pin) in pins.into_iter().flatten() {
            if !listed.contains(name) {
                found.push(Drift {
                    server: server.clone(),
                    tool: name.clone(),
                    kind: DriftKind::Missing,
                    pinned: Some(pin.sha256.clone()),
                    live: None,
                    fields: Vec::new(),
                });
            }
        }
    }
    found
}

fn changed_fields(pinned: &Value, live: &Value) -> Vec<String> {
    let keys: BTreeSet<&String> = pinned
        .as_object()
        .into_iter()
        .chain(live.as_object())
        .flat_map(|o| o.keys())
        .collect();
    keys.into_iter()
        .filter(|k| pinned.get(k.as_str()) != live.get(k.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::{Pin, pinned_definition};
    use serde_json::json;

    #[test]
    fn new_changed_and_missing_tools_are_told_apart() {
        let mut lock = ServersLock::new();
        let pins = lock.servers.entry("s".into()).or_default();
        pins.insert("same".into(), Pin::of(json!({"name": "same"})));
        pins.insert(
            "edited".into(),
            Pin::of(json!({"name": "edited", "description": "old"})),
        );
        pins.insert("gone".into(), Pin::of(json!({"name": "gone"})));
        let live = BTreeMap::from([(
            "s".to_owned(),
            vec![
                pinned_definition(&json!({"name": "same"})),
                pinned_definition(&json!({"name": "edited", "description": "new"})),
                pinned_definition(&json!({"name": "fresh"})),
            ],
        )]);
        let found = drift(&lock, &live);
        let kinds: Vec<(&str, DriftKind)> =
            found.iter().map(|d| (d.tool.as_str(), d.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("edited", DriftKind::Changed),
                ("fresh", DriftKind::NotPinned),
                ("gone", DriftKind::Missing)
            ]
        );
        assert_eq!(found[0].fields, ["description"]);
        assert!(
            drift(&lock, &BTreeMap::new()).is_empty(),
            "a server not running is not compared"
        );
    }
}
