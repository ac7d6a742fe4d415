//! Whether a fleet's replicas served different policy sets at the same
//! time: each replica loads the set from its own folder, so a folder that
//! lagged (a deploy half done, a reload refused on one replica) shows as
//! two chains deciding under different hashes over overlapping times. The
//! records say it; this finds it across chains.

use std::io;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use super::record::Kind;
use super::verify::{Line, Records};

/// One replica deciding under one set from `from` to `to` (the times of
/// its first and last decision under it, RFC 3339, which sort as text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Served {
    pub chain: String,
    pub policy_set: String,
    pub from: String,
    pub to: String,
}

/// Two replicas that decided under different sets over overlapping times.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Divergence {
    pub first: Served,
    pub second: Served,
}

/// The spans each chain decided under each set, in its order.
pub fn served(chain: &str, log: &Path) -> io::Result<Vec<Served>> {
    let mut spans: Vec<Served> = Vec::new();
    for line in Records::open(log)? {
        let Line::Record { record, .. } = line? else {
            continue;
        };
        if record.kind != Kind::Decision {
            continue;
        }
        let body: Value = serde_json::from_str(record.body.get()).unwrap_or(Value::Null);
        let Some(hash) = body["policy_set"]["hash"].as_str() else {
            continue;
        };
        match spans.last_mut() {
            Some(span) if span.policy_set == hash => span.to.clone_from(&record.time),
            _ => spans.push(Served {
                chain: chain.to_owned(),
                policy_set: hash.to_owned(),
                from: record.time.clone(),
                to: record.time.clone(),
            }),
        }
    }
    Ok(spans)
}

/// Every pair of spans of different chains that overlap in time under
/// different sets.
pub fn divergences(spans: &[Served]) -> Vec<Divergence> {
    let mut found = Vec::new();
    for (at, first) in spans.iter().enumerate() {
        for second in &spans[at + 1..] {
            let overlap = first.from <= second.to && second.from <= first.to;
            if first.chain != second.chain && first.policy_set != second.policy_set && overlap {
                found.push(Divergence {
                    first: first.clone(),
                    second: second.clone(),
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(chain: &str, set: &str, from: &str, to: &str) -> Served {
        Served {
            chain: chain.to_owned(),
            policy_set: set.to_owned(),
            from: format!("2026-12-05T10:00:{from}Z"),
            to: format!("2026-12-05T10:00:{to}Z"),
        }
    }

    #[test]
    fn only_different_sets_of_different_replicas_at_overlapping_times_diverge() {
        let spans = [
            span("r1", "a", "00", "10"),
            span("r1", "b", "11", "20"),
            span("r2", "a", "00", "12"),
            span("r2", "b", "13", "20"),
            span("r3", "b", "21", "30"),
        ];
        let found = divergences(&spans);
        // r1 moved to b at :11 while r2 served a until :12; nothing else.
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            (
                found[0].first.chain.as_str(),
                found[0].first.policy_set.as_str()
            ),
            ("r1", "b")
        );
        assert_eq!(
            (
                found[0].second.chain.as_str(),
                found[0].second.policy_set.as_str()
            ),
            ("r2", "a")
        );
        assert!(divergences(&spans[2..]).is_empty());
    }
}
