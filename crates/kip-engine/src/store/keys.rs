//! The writers' cache of the `concept_key` index: `(type, name) -> id`.
//!
//! Every link an UPSERT creates names its two endpoints by `{type, name}`, so a bulk load
//! of links looks up two concept keys per link; in a large store each lookup is a redb
//! B-tree descent whose pages the index writes keep pushing out of the cache (about 2 us
//! at 1M concepts, a quarter of the time of loading links). Write transactions consult
//! this map first.
//!
//! Correctness rests on three rules:
//! - only write transactions use it, and they run one at a time from their start to the
//!   end of their commit (the nexus's write gate), so the map describes the committed
//!   store plus the changes of the one transaction running;
//! - a transaction's changes go into the map as it makes them: a new or renamed key is
//!   inserted (and remembered as *touched*), a deleted or renamed-away key removed; a key
//!   found in redb is inserted too (touched as well: inside a transaction, redb also
//!   holds that transaction's uncommitted keys);
//! - when a transaction commits, its touched keys become committed ([`KeyCache::committed`]);
//!   when the next transaction starts and finds touched keys left over, their transaction
//!   did not commit (failed, dry run, or a commit error), so they are removed
//!   ([`KeyCache::begin`]). Removing a key is always safe (the next lookup reads redb), so
//!   even a commit that succeeded without being reported costs only cache misses. A
//!   deleted key is never put back.
//!
//! The map holds at most [`MAX_KEYS`] keys (about 50 bytes each); when full it starts
//! again empty.

use compact_str::CompactString;
use foldhash::fast::RandomState;
use std::collections::HashMap;

/// foldhash (randomly seeded per map) instead of SipHash, which was most of a lookup's
/// time; crafted colliding names could only slow lookups down, never change them. Keys
/// are kept inline up to 24 bytes (most types and names), so a lookup in a map of a
/// million names compares against the bucket itself instead of following a pointer to a
/// heap string (one cache miss fewer per lookup).
type Map<V> = HashMap<CompactString, V, RandomState>;

/// Keys held before the map is emptied (about 70 MiB).
pub(crate) const MAX_KEYS: usize = 1 << 20;

/// `type -> name -> id` (two levels, so a lookup needs no allocation).
#[derive(Debug)]
pub(crate) struct KeyCache {
    map: Map<Map<u64>>,
    len: usize,
    max: usize,
    /// Keys inserted by the running (or last, uncommitted) transaction.
    touched: Vec<(CompactString, CompactString)>,
}

impl Default for KeyCache {
    fn default() -> Self {
        KeyCache::with_max(MAX_KEYS)
    }
}

impl KeyCache {
    /// A cache holding at most `max` keys.
    pub fn with_max(max: usize) -> KeyCache {
        KeyCache {
            map: Map::default(),
            len: 0,
            max: max.max(1),
            touched: Vec::new(),
        }
    }

    /// A write transaction starts: drops the keys an uncommitted one left behind.
    pub fn begin(&mut self) {
        for (t, n) in std::mem::take(&mut self.touched) {
            self.remove(&t, &n);
        }
    }

    /// The running transaction committed: its keys are the store's now.
    pub fn committed(&mut self) {
        self.touched.clear();
    }

    pub fn get(&self, concept_type: &str, name: &str) -> Option<u64> {
        self.map.get(concept_type)?.get(name).copied()
    }

    /// Records `(concept_type, name) -> id` for the running transaction.
    pub fn insert(&mut self, concept_type: &str, name: &str, id: u64) {
        if self.len >= self.max {
            // Nothing left in the map: nothing to roll back either.
            self.map.clear();
            self.touched.clear();
            self.len = 0;
        }
        let names = match self.map.get_mut(concept_type) {
            Some(names) => names,
            None => self
                .map
                .entry(CompactString::from(concept_type))
                .or_default(),
        };
        if names.insert(CompactString::from(name), id).is_none() {
            self.len += 1;
        }
        self.touched
            .push((CompactString::from(concept_type), CompactString::from(name)));
    }

    pub fn remove(&mut self, concept_type: &str, name: &str) {
        if let Some(names) = self.map.get_mut(concept_type) {
            if names.remove(name).is_some() {
                self.len -= 1;
            }
            if names.is_empty() {
                self.map.remove(concept_type);
            }
        }
    }

    /// Keys held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_an_uncommitted_transaction_are_dropped_when_the_next_one_starts() {
        let mut c = KeyCache::default();
        c.begin();
        c.insert("Person", "ada", 1);
        c.committed();
        c.begin();
        c.insert("Person", "bob", 2);
        c.remove("Person", "ada");
        assert_eq!(c.get("Person", "bob"), Some(2));
        assert_eq!(c.get("Person", "ada"), None);
        // No commit: bob goes, and ada (deleted by it) does not come back.
        c.begin();
        assert_eq!(c.get("Person", "bob"), None);
        assert_eq!(c.get("Person", "ada"), None);
        assert_eq!(c.len(), 0);
        c.insert("Person", "cy", 3);
        c.committed();
        c.begin();
        assert_eq!(c.get("Person", "cy"), Some(3));
    }

    #[test]
    fn a_full_cache_starts_again_empty() {
        let mut c = KeyCache::with_max(100);
        for i in 0..100u64 {
            c.insert("T", &i.to_string(), i);
            if i % 10 == 0 {
                c.committed();
            }
        }
        assert_eq!(c.len(), 100);
        c.insert("T", "one more", 7);
        assert_eq!(c.len(), 1);
        assert_eq!(c.get("T", "0"), None);
        assert_eq!(c.get("T", "one more"), Some(7));
    }
}
