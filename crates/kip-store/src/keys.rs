//! The writers' cache of the `concept_key` index: `(type, name) -> id`.
//!
//! Every link an UPSERT creates names its two endpoints by `{type, name}`, so a bulk load
//! of links looks up two concept keys per link; in a large store each lookup is a redb
//! B-tree descent whose pages the index writes keep pushing out of the cache (about 2 us
//! at 1M concepts, a quarter of the time of loading links). Write transactions consult
//! this map first.
//!
//! Correctness rests on these rules:
//! - only write transactions use it, and they run one at a time from their start to the
//!   end of their commit (the nexus's write gate), so the map describes the committed
//!   store plus the changes of the one transaction running;
//! - a transaction's changes go into the map as it makes them: a new or renamed key is
//!   inserted, a deleted or renamed-away key removed; a key found in redb is inserted too;
//!   every change is recorded with the value it replaced (an undo log);
//! - when a transaction commits, its undo log is dropped ([`KeyCache::committed`]); when
//!   the next transaction starts and finds an undo log left over, its transaction did
//!   not commit (failed, dry run, or a commit error), so the log is played backwards
//!   ([`KeyCache::begin`]) and the map is again exactly what it was before it. The
//!   overlay reports a commit right after redb's commit returns (`Overlay::commit`),
//!   with nothing in between that can fail.
//!
//! *Complete*: at its first miss, a write transaction that finds the `concept_key` table
//! small (at most [`FILL_LIMIT`] keys) and the map not complete loads every key into it
//! ([`KeyCache::fill`]); from then on a key missing from the map does not exist, so
//! creating a concept no longer costs a B-tree descent to learn that its key is new (one
//! per new concept in a bulk load). The map stays complete through every commit and
//! rollback (both are exact); only emptying it when full ends that.
//!
//! The map holds at most [`MAX_KEYS`] keys (about 50 bytes each); when full it starts
//! again empty (and not complete).

use compact_str::CompactString;
use foldhash::fast::RandomState;
use std::collections::HashMap;

/// foldhash (randomly seeded per map) instead of SipHash, which was most of a lookup's
/// time; crafted colliding names could only slow lookups down, never change them. Keys
/// are kept inline up to 24 bytes (most types and names), so a lookup in a map of a
/// million names compares against the bucket itself instead of following a pointer to a
/// heap string (one cache miss fewer per lookup).
type Map<V> = HashMap<CompactString, V, RandomState>;

/// Keys held before the map is emptied (about 50 MiB).
pub(crate) const MAX_KEYS: usize = 1 << 20;

/// A `concept_key` table with at most this many keys is loaded whole into a map that is
/// not complete (a scan of up to ~30 ms, once).
pub(crate) const FILL_LIMIT: u64 = 1 << 17;

/// One change of the running transaction: the key and the id it had before (`None`:
/// absent).
type Undo = (CompactString, CompactString, Option<u64>);

/// `type -> name -> id` (two levels, so a lookup needs no allocation).
#[derive(Debug)]
pub(crate) struct KeyCache {
    map: Map<Map<u64>>,
    len: usize,
    max: usize,
    /// Changes of the running (or last, uncommitted) transaction, oldest first.
    undo: Vec<Undo>,
    /// Whether the map holds every key of the store (see the module documentation).
    complete: bool,
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
            undo: Vec::new(),
            complete: false,
        }
    }

    /// A write transaction starts: undoes the changes an uncommitted one left behind.
    pub fn begin(&mut self) {
        while let Some((t, n, old)) = self.undo.pop() {
            match old {
                Some(id) => {
                    self.set(&t, &n, id);
                }
                None => {
                    self.unset(&t, &n);
                }
            }
        }
    }

    /// The running transaction committed: its keys are the store's now.
    pub fn committed(&mut self) {
        self.undo.clear();
    }

    pub fn get(&self, concept_type: &str, name: &str) -> Option<u64> {
        self.map.get(concept_type)?.get(name).copied()
    }

    /// Whether a key missing from the map does not exist in the store.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Loads every key of the store (`keys`, all of them, at the start of a write
    /// transaction) into an empty or partial map and marks it complete, unless it does
    /// not fit.
    pub fn fill(&mut self, keys: Vec<(String, String, u64)>) {
        for (t, n, id) in keys {
            if self.len >= self.max {
                self.clear();
                return;
            }
            self.set(&t, &n, id);
        }
        self.complete = true;
    }

    fn clear(&mut self) {
        self.map.clear();
        self.undo.clear();
        self.len = 0;
        self.complete = false;
    }

    /// Sets a key; returns the id it had.
    fn set(&mut self, concept_type: &str, name: &str, id: u64) -> Option<u64> {
        let names = match self.map.get_mut(concept_type) {
            Some(names) => names,
            None => self
                .map
                .entry(CompactString::from(concept_type))
                .or_default(),
        };
        let old = names.insert(CompactString::from(name), id);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// Removes a key; returns the id it had.
    fn unset(&mut self, concept_type: &str, name: &str) -> Option<u64> {
        let names = self.map.get_mut(concept_type)?;
        let old = names.remove(name);
        if old.is_some() {
            self.len -= 1;
        }
        if names.is_empty() {
            self.map.remove(concept_type);
        }
        old
    }

    /// Records `(concept_type, name) -> id` for the running transaction.
    pub fn insert(&mut self, concept_type: &str, name: &str, id: u64) {
        if self.len >= self.max {
            // Nothing left in the map: nothing to roll back either.
            self.clear();
        }
        let old = self.set(concept_type, name, id);
        if old != Some(id) {
            self.undo.push((
                CompactString::from(concept_type),
                CompactString::from(name),
                old,
            ));
        }
    }

    /// Removes `(concept_type, name)` for the running transaction.
    pub fn remove(&mut self, concept_type: &str, name: &str) {
        if let Some(old) = self.unset(concept_type, name) {
            self.undo.push((
                CompactString::from(concept_type),
                CompactString::from(name),
                Some(old),
            ));
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
        // No commit: bob goes, and ada (deleted by it) comes back.
        c.begin();
        assert_eq!(c.get("Person", "bob"), None);
        assert_eq!(c.get("Person", "ada"), Some(1));
        assert_eq!(c.len(), 1);
        c.insert("Person", "cy", 3);
        c.committed();
        c.begin();
        assert_eq!(c.get("Person", "cy"), Some(3));
    }

    #[test]
    fn a_filled_cache_stays_complete_through_commits_and_rollbacks() {
        let mut c = KeyCache::with_max(10);
        assert!(!c.is_complete());
        c.fill(vec![
            ("T".into(), "a".into(), 1),
            ("T".into(), "b".into(), 2),
        ]);
        assert!(c.is_complete());
        c.begin();
        c.insert("T", "c", 3);
        c.remove("T", "a");
        c.insert("T", "b", 9);
        c.committed();
        c.begin();
        c.insert("U", "d", 4);
        c.remove("T", "b");
        c.insert("T", "a", 5);
        // Not committed: the next transaction sees the map as the last commit left it.
        c.begin();
        assert!(c.is_complete());
        assert_eq!(c.get("T", "a"), None);
        assert_eq!(c.get("T", "b"), Some(9));
        assert_eq!(c.get("T", "c"), Some(3));
        assert_eq!(c.get("U", "d"), None);
        assert_eq!(c.len(), 2);
        // Too many keys to hold: no longer complete.
        for i in 0..20u64 {
            c.insert("V", &i.to_string(), i);
        }
        assert!(!c.is_complete());
        let mut small = KeyCache::with_max(1);
        small.fill(vec![
            ("T".into(), "a".into(), 1),
            ("T".into(), "b".into(), 2),
        ]);
        assert!(!small.is_complete());
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
