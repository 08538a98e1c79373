//! The process's `{type, name}` -> concept cache, shared by its transactions.
//!
//! Resolving a concept's key is the most frequent query a memory on PostgreSQL runs:
//! every UPSERT names its concepts (and the types and predicates it checks) by key, a
//! FIND by `{type, name}` starts there, and a bulk load of links resolves two endpoints
//! per link. A key, once given to a concept, stays that concept's until the concept is
//! deleted or renamed (ids are never reused), so a positive answer can be remembered
//! across transactions, and across the other kip processes' writes, as long as one
//! knows that no concept lost its key in between.
//!
//! That is what the **key epoch** says: a count in `kip_stats` (`#key_epoch`) that
//! the database raises in every transaction that deletes, renames or truncates
//! concept rows (triggers on `kip_concepts`, schema migration 2: so whoever does it,
//! a kip of any version or an operator by hand, is seen). Each
//! transaction reads it with its `BEGIN` (in the same round trip), together with the
//! last concept number allocated and the table's identity; the cache answers only when
//! its entries were gathered under the same [`Token`] — no concept has lost its key
//! since — and only with concepts that exist in the transaction's snapshot (number at
//! most the last one allocated as of it). A different token empties the cache.
//!
//! Entries come from lookups (a concept committed before the transaction began, found
//! by key, is filed at once) and from the writes of a committed transaction (its new
//! concepts and renamed keys, filed after the commit, under the token that commit
//! produced). A transaction that rolled back files nothing; a write transaction that
//! took a key from a concept neither files nor consults anything until it ends (its
//! own flushed rename would look committed). Memory is bounded: when the cache holds `KIP_PG_KEY_CACHE` entries
//! (1,000,000 by default, about 100 MB at most; 0 turns it off), every other entry is
//! dropped to make room (an emptied cache would miss on every key a moment later).
//!
//! What it does not see (docs/deployment.md): a backup restored into the tables under
//! running servers brings back an older `kip_stats`, epoch included; restart the
//! servers after a restore. (A schema dropped and made again is seen: the table's
//! identity is part of the token.)

use crate::tx::FastMap;
use std::sync::RwLock;

/// `kip_stats` key of the key epoch: raised by the database in each transaction that
/// deletes or renames concept rows.
pub(crate) const KEY_EPOCH: &str = "#key_epoch";

/// Entries the cache holds at most, unless `KIP_PG_KEY_CACHE` says otherwise.
const DEFAULT_CAPACITY: usize = 1_000_000;

/// What the cache's entries are valid under: the concept table's identity (its OID: a
/// table made again is another) and the key epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) table: i64,
    pub(crate) epoch: i64,
}

/// What a transaction read with its `BEGIN` to use the cache: the token, and the last
/// concept number its snapshot holds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct View {
    pub(crate) token: Token,
    pub(crate) last_concept: u64,
}

/// A map from `{type, name}` keys, probed with borrowed strings (no key is built for
/// a lookup): type -> name -> value.
pub(crate) struct KeyMap<V> {
    map: FastMap<String, FastMap<String, V>>,
    len: usize,
}

impl<V> Default for KeyMap<V> {
    fn default() -> Self {
        KeyMap {
            map: FastMap::default(),
            len: 0,
        }
    }
}

impl<V: Copy> KeyMap<V> {
    pub(crate) fn get(&self, t: &str, n: &str) -> Option<V> {
        self.map.get(t)?.get(n).copied()
    }

    pub(crate) fn contains(&self, t: &str, n: &str) -> bool {
        self.map.get(t).is_some_and(|names| names.contains_key(n))
    }

    pub(crate) fn insert(&mut self, t: &str, n: &str, v: V) {
        let names = match self.map.get_mut(t) {
            Some(names) => names,
            None => self.map.entry(t.to_owned()).or_default(),
        };
        match names.get_mut(n) {
            Some(old) => *old = v,
            None => {
                names.insert(n.to_owned(), v);
                self.len += 1;
            }
        }
    }

    pub(crate) fn remove(&mut self, t: &str, n: &str) {
        if let Some(names) = self.map.get_mut(t) {
            if names.remove(n).is_some() {
                self.len -= 1;
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn clear(&mut self) {
        self.map.clear();
        self.len = 0;
    }

    /// Drops every other entry (in the map's order, which has nothing to do with use):
    /// room for as many new ones, keeping half of what was known.
    fn drop_half(&mut self) {
        let mut keep = false;
        for names in self.map.values_mut() {
            names.retain(|_, _| {
                keep = !keep;
                keep
            });
        }
        self.map.retain(|_, names| !names.is_empty());
        self.len = self.map.values().map(|names| names.len()).sum();
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &str, V)> + '_ {
        self.map
            .iter()
            .flat_map(|(t, names)| names.iter().map(move |(n, v)| (t.as_str(), n.as_str(), *v)))
    }
}

#[derive(Default)]
struct Inner {
    token: Option<Token>,
    /// `{type, name}` -> concept number.
    map: KeyMap<u64>,
}

impl Inner {
    /// Whether the entries are valid under `token`; empties the cache (and takes the
    /// token) when they are not.
    fn align(&mut self, token: Token) {
        if self.token != Some(token) {
            self.map.clear();
            self.token = Some(token);
        }
    }

    fn insert(&mut self, capacity: usize, t: &str, n: &str, id: u64) {
        if self.map.len() >= capacity && !self.map.contains(t, n) {
            self.map.drop_half();
        }
        self.map.insert(t, n, id);
    }
}

/// The cache (see the module's documentation).
pub(crate) struct KeyCache {
    inner: RwLock<Inner>,
    capacity: usize,
}

impl KeyCache {
    /// A cache of `KIP_PG_KEY_CACHE` entries at most (1,000,000 by default; 0: off).
    pub(crate) fn from_env() -> KeyCache {
        let capacity = std::env::var("KIP_PG_KEY_CACHE")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(DEFAULT_CAPACITY);
        KeyCache::new(capacity)
    }

    pub(crate) fn new(capacity: usize) -> KeyCache {
        KeyCache {
            inner: RwLock::new(Inner::default()),
            capacity,
        }
    }

    /// Whether the cache is used at all (`KIP_PG_KEY_CACHE` is not 0).
    pub(crate) fn is_on(&self) -> bool {
        self.capacity > 0
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        // A panic while holding the lock leaves a consistent map (every step keeps
        // `len` right), so a poisoned lock is still usable.
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Called with what a transaction read at `BEGIN`: a cache gathered under another
    /// token is emptied now (it may hold keys that concepts have lost since).
    pub(crate) fn begin(&self, view: View) {
        if self.capacity == 0 {
            return;
        }
        if self.read().token != Some(view.token) {
            self.write().align(view.token);
        }
    }

    /// The concept of `{t, n}` if the cache knows it and it exists in `view`'s snapshot.
    pub(crate) fn get(&self, view: View, t: &str, n: &str) -> Option<u64> {
        if self.capacity == 0 {
            return None;
        }
        let inner = self.read();
        if inner.token != Some(view.token) {
            return None;
        }
        let id = inner.map.get(t, n)?;
        (id <= view.last_concept).then_some(id)
    }

    /// Files concepts found by key in `view`'s snapshot. Only concepts committed
    /// before the transaction began are: a write transaction also finds the concepts it
    /// made itself and flushed, which do not exist if it rolls back (and whose numbers
    /// the next transaction then hands out again); those are filed by
    /// [`KeyCache::committed`].
    pub(crate) fn found<'a>(
        &self,
        view: View,
        found: impl IntoIterator<Item = (&'a str, &'a str, u64)>,
    ) {
        if self.capacity == 0 {
            return;
        }
        let mut inner = self.write();
        if inner.token != Some(view.token) {
            return;
        }
        for (t, n, id) in found {
            if id <= view.last_concept {
                inner.insert(self.capacity, t, n, id);
            }
        }
    }

    /// Files what a committed write transaction knows of keys (`None`: no concept has
    /// that key now), under the token its commit produced: `before` raised by the
    /// keys it removed.
    pub(crate) fn committed<'a>(
        &self,
        after: Token,
        keys: impl IntoIterator<Item = (&'a str, &'a str, Option<u64>)>,
    ) {
        if self.capacity == 0 {
            return;
        }
        let mut inner = self.write();
        inner.align(after);
        for (t, n, id) in keys {
            match id {
                Some(id) => inner.insert(self.capacity, t, n, id),
                None => inner.map.remove(t, n),
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.read().map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(epoch: i64, last: u64) -> View {
        View {
            token: Token { table: 7, epoch },
            last_concept: last,
        }
    }

    #[test]
    fn answers_only_under_its_token_and_within_the_snapshot() {
        let c = KeyCache::new(100);
        c.begin(view(1, 10));
        c.found(view(1, 10), [("Person", "Ada", 3), ("Person", "Bob", 10)]);
        assert_eq!(c.get(view(1, 10), "Person", "Ada"), Some(3));
        // An older snapshot (fewer concepts allocated) does not see concept 10.
        assert_eq!(c.get(view(1, 5), "Person", "Bob"), None);
        assert_eq!(c.get(view(1, 5), "Person", "Ada"), Some(3));
        // A concept lost its key since: the epoch moved, nothing is answered.
        assert_eq!(c.get(view(2, 10), "Person", "Ada"), None);
        // Another table (the schema made again) likewise.
        let other = View {
            token: Token { table: 8, epoch: 1 },
            last_concept: 10,
        };
        assert_eq!(c.get(other, "Person", "Ada"), None);
        // A transaction under the new epoch empties the cache.
        c.begin(view(2, 10));
        assert_eq!(c.len(), 0);
        assert_eq!(c.get(view(1, 10), "Person", "Ada"), None);
        // Lookups made under another token are not filed.
        c.found(view(1, 10), [("Person", "Ada", 3)]);
        assert_eq!(c.len(), 0);
        // Nor concepts numbered after the transaction's start (a write's own,
        // flushed but not committed).
        c.found(view(2, 10), [("Person", "Ada", 3), ("Person", "New", 11)]);
        assert_eq!(c.len(), 1);
        assert_eq!(c.get(view(2, 20), "Person", "New"), None);
    }

    #[test]
    fn a_commit_files_its_keys_under_the_token_it_produced() {
        let c = KeyCache::new(100);
        c.begin(view(4, 20));
        c.found(view(4, 20), [("Person", "Ada", 3), ("Person", "Bob", 4)]);
        // A commit that renamed Bob to Rob and created Cy: epoch 4 -> 5.
        c.committed(
            Token { table: 7, epoch: 5 },
            [
                ("Person", "Bob", None),
                ("Person", "Rob", Some(4)),
                ("Person", "Cy", Some(21)),
            ],
        );
        assert_eq!(c.get(view(5, 21), "Person", "Rob"), Some(4));
        assert_eq!(c.get(view(5, 21), "Person", "Cy"), Some(21));
        assert_eq!(c.get(view(5, 21), "Person", "Bob"), None);
        // Ada was filed under epoch 4: gone with the token.
        assert_eq!(c.get(view(5, 21), "Person", "Ada"), None);
        // A commit that removed nothing keeps the entries and drops its negatives.
        c.committed(Token { table: 7, epoch: 5 }, [("Person", "Rob", None)]);
        assert_eq!(c.get(view(5, 21), "Person", "Cy"), Some(21));
        assert_eq!(c.get(view(5, 21), "Person", "Rob"), None);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn a_full_cache_keeps_half_and_a_zero_capacity_is_off() {
        let c = KeyCache::new(4);
        c.begin(view(0, 100));
        c.found(
            view(0, 100),
            [("T", "a", 1), ("T", "b", 2), ("U", "c", 3), ("U", "d", 4)],
        );
        assert_eq!(c.len(), 4);
        // Updating a known key makes no room.
        c.found(view(0, 100), [("T", "a", 1)]);
        assert_eq!(c.len(), 4);
        c.found(view(0, 100), [("T", "e", 5)]);
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(view(0, 100), "T", "e"), Some(5));
        let kept = [("T", "a", 1), ("T", "b", 2), ("U", "c", 3), ("U", "d", 4)]
            .iter()
            .filter(|(t, n, id)| c.get(view(0, 100), t, n) == Some(*id))
            .count();
        assert_eq!(kept, 2);
        let off = KeyCache::new(0);
        off.begin(view(0, 100));
        off.found(view(0, 100), [("T", "a", 1)]);
        off.committed(Token { table: 7, epoch: 0 }, [("T", "b", Some(2))]);
        assert_eq!(off.get(view(0, 100), "T", "a"), None);
        assert_eq!(off.get(view(0, 100), "T", "b"), None);
    }
}
