//! Answers worked out once and then shared between threads, bounded: past
//! its capacity the memo starts again empty, so its memory stays bounded
//! whatever meets it (a replay of a long log, ten thousand clients), and a
//! forgotten answer costs one more computation.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

#[derive(Debug)]
pub(super) struct BoundedMemo<K, V> {
    answers: RwLock<HashMap<K, V>>,
    capacity: usize,
}

impl<K: Eq + Hash, V: Clone> BoundedMemo<K, V> {
    pub fn new(capacity: usize) -> Self {
        Self {
            answers: RwLock::default(),
            capacity,
        }
    }

    pub fn get(&self, key: &K) -> Option<V> {
        self.read().get(key).cloned()
    }

    pub fn insert(&self, key: K, value: V) {
        let mut answers = self.write();
        if answers.len() >= self.capacity {
            answers.clear();
        }
        answers.insert(key, value);
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.read().len()
    }

    // A panic while the map was held leaves it whole (each step is one
    // insert, clear or clone), so a poisoned lock still holds good answers.
    fn read(&self) -> RwLockReadGuard<'_, HashMap<K, V>> {
        self.answers.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<K, V>> {
        self.answers.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_kept_until_the_memo_is_full() {
        let memo = BoundedMemo::new(2);
        memo.insert("a", 1);
        memo.insert("b", 2);
        assert_eq!((memo.get(&"a"), memo.get(&"b")), (Some(1), Some(2)));
        assert_eq!(memo.get(&"c"), None);
        // Full: the next answer starts it again empty.
        memo.insert("c", 3);
        assert_eq!(memo.len(), 1);
        assert_eq!((memo.get(&"a"), memo.get(&"c")), (None, Some(3)));
    }

    #[test]
    fn a_lock_poisoned_by_a_panic_still_answers() {
        let memo = std::sync::Arc::new(BoundedMemo::new(4));
        memo.insert("a", 1);
        let held = std::sync::Arc::clone(&memo);
        let panicked = std::thread::spawn(move || {
            let _guard = held.write();
            panic!("while holding the memo");
        })
        .join();
        assert!(panicked.is_err());
        assert_eq!(memo.get(&"a"), Some(1));
        memo.insert("b", 2);
        assert_eq!(memo.get(&"b"), Some(2));
    }
}
