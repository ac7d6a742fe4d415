//! The few settings a `serve` keeps warm for hooks, the least recently
//! asked let go first: a new set, client or root past the bound costs one
//! rebuild, not every other warm setting with it.

use std::collections::HashMap;
use std::hash::Hash;

/// At most `bound` values by key, each stamped with when it was last used.
pub(super) struct Warm<K, V> {
    bound: usize,
    used: u64,
    entries: HashMap<K, (V, u64)>,
}

impl<K: Eq + Hash + Clone, V: Clone> Warm<K, V> {
    pub fn new(bound: usize) -> Self {
        Self {
            bound,
            used: 0,
            entries: HashMap::new(),
        }
    }

    /// The value kept for `key`, now the most recently used.
    pub fn get(&mut self, key: &K) -> Option<V> {
        self.used += 1;
        let (value, used) = self.entries.get_mut(key)?;
        *used = self.used;
        Some(value.clone())
    }

    /// Keeps `value` for `key`, letting the least recently used go when
    /// the bound is reached. The bound is small: a scan finds it.
    pub fn insert(&mut self, key: K, value: V) {
        self.used += 1;
        if !self.entries.contains_key(&key) && self.entries.len() >= self.bound {
            let coldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(key, _)| key.clone());
            if let Some(coldest) = coldest {
                self.entries.remove(&coldest);
            }
        }
        self.entries.insert(key, (value, self.used));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_bound_the_least_recently_used_goes_and_only_it() {
        let mut warm = Warm::new(3);
        for key in ["a", "b", "c"] {
            warm.insert(key, key.to_uppercase());
        }
        assert_eq!(warm.get(&"a").as_deref(), Some("A"));
        warm.insert("d", "D".to_owned());
        assert_eq!(warm.get(&"b"), None, "b was used least recently");
        for (key, value) in [("a", "A"), ("c", "C"), ("d", "D")] {
            assert_eq!(warm.get(&key).as_deref(), Some(value), "{key} kept");
        }
        warm.insert("e", "E".to_owned());
        assert_eq!(warm.get(&"a"), None, "a, used before c and d, went next");
    }

    #[test]
    fn keeping_a_key_again_replaces_it_and_lets_nothing_go() {
        let mut warm = Warm::new(2);
        warm.insert("a", 1);
        warm.insert("b", 2);
        warm.insert("a", 3);
        assert_eq!(warm.get(&"a"), Some(3));
        assert_eq!(warm.get(&"b"), Some(2));
    }
}
