//! A transaction's private changes to the overlaid indexes ([`Changes`] per index,
//! [`IndexChanges`] for all six), and which index is which ([`Which`]).

use super::*;

/// One index's changes in a transaction: the new value of a key, or `None` (removed);
/// the last change of a key wins.
///
/// Changes are appended to a log and sorted into one key-ordered list (the last change
/// of each key kept) when they are next read, not inserted into a sorted map one by
/// one: a bulk UPSERT makes ten or more index changes per concept, and a map insert per
/// change (with its key comparisons down the tree and its node allocations) was about a
/// tenth of a load's time, while reads of a transaction's own index changes are rare
/// (a DELETE's cascade, a query inside a transaction).
///
/// The sorting happens behind a shared reference (a read), hence the `RefCell`. It never
/// fails: the log is non-empty only after an insert, an insert needs `&mut self`, so no
/// reader's borrow (a [`Stream`] holds one) can be alive then, and every later reader
/// sorts the log before it borrows.
#[derive(Debug)]
pub(crate) struct Changes<K, V> {
    pub(super) inner: RefCell<ChangeLog<K, V>>,
}

#[derive(Debug)]
pub(super) struct ChangeLog<K, V> {
    /// Sorted by key, one entry per key.
    pub(super) sorted: Vec<(K, Option<V>)>,
    /// Appended since the last sort, oldest first.
    pub(super) log: Vec<(K, Option<V>)>,
}

impl<K, V> Default for Changes<K, V> {
    fn default() -> Self {
        Changes {
            inner: RefCell::new(ChangeLog {
                sorted: Vec::new(),
                log: Vec::new(),
            }),
        }
    }
}

impl<K: Ord, V> ChangeLog<K, V> {
    pub(super) fn sort(&mut self) {
        if self.log.is_empty() {
            return;
        }
        let mut log = std::mem::take(&mut self.log);
        // Stable: the changes of one key stay in the order they were made.
        log.sort_by(|a, b| a.0.cmp(&b.0));
        let mut newest: Vec<(K, Option<V>)> = Vec::with_capacity(log.len());
        for change in log {
            match newest.last_mut() {
                Some(last) if last.0 == change.0 => *last = change,
                _ => newest.push(change),
            }
        }
        if self.sorted.is_empty() {
            self.sorted = newest;
            return;
        }
        let older = std::mem::take(&mut self.sorted);
        let mut merged = Vec::with_capacity(older.len() + newest.len());
        let mut a = older.into_iter().peekable();
        let mut b = newest.into_iter().peekable();
        loop {
            let order = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => x.0.cmp(&y.0),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => break,
            };
            let next = match order {
                std::cmp::Ordering::Less => a.next(),
                std::cmp::Ordering::Equal => {
                    a.next();
                    b.next()
                }
                std::cmp::Ordering::Greater => b.next(),
            };
            merged.extend(next);
        }
        self.sorted = merged;
    }
}

impl<K: Ord, V> Changes<K, V> {
    /// Records the new value of `key` (`None`: removed).
    pub fn insert(&mut self, key: K, value: Option<V>) {
        self.inner.get_mut().log.push((key, value));
    }

    /// Changes recorded: the number of changed keys, or more while changes to the same
    /// key are still unsorted (exact after [`Changes::sort`]).
    pub fn len(&self) -> usize {
        self.inner
            .try_borrow()
            .map_or(0, |c| c.sorted.len() + c.log.len())
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sorts the changes made since the last read.
    pub fn sort(&mut self) {
        self.inner.get_mut().sort();
    }

    /// The changes in key order, one per key.
    pub fn sorted(&self) -> Ref<'_, [(K, Option<V>)]> {
        let unsorted = self.inner.try_borrow().is_ok_and(|c| !c.log.is_empty());
        if unsorted {
            if let Ok(mut c) = self.inner.try_borrow_mut() {
                c.sort();
            }
        }
        Ref::map(self.inner.borrow(), |c| c.sorted.as_slice())
    }

    /// Takes the changes out, in key order, one per key.
    pub fn take_sorted(&mut self) -> Vec<(K, Option<V>)> {
        let c = self.inner.get_mut();
        c.sort();
        std::mem::take(&mut c.sorted)
    }

    /// The changes in key order, one per key.
    pub fn into_sorted(mut self) -> Vec<(K, Option<V>)> {
        self.take_sorted()
    }
}

impl<K: Ord, V> FromIterator<(K, Option<V>)> for Changes<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, Option<V>)>>(iter: I) -> Self {
        let mut c = Changes::default();
        for (k, v) in iter {
            c.insert(k, v);
        }
        c
    }
}

/// Entries fetched from the shared layer per lock acquisition while scanning.
pub(super) const CHUNK: usize = 256;
/// A transaction folds the overlay and its own index changes into redb once it holds
/// this many changed index keys (bounds a huge transaction's memory: ~100 bytes each).
pub(super) const MAX_TXN_CHANGES: usize = 1 << 19;

/// One overlaid index: where its shared entries and a transaction's changes live.
pub(crate) struct Which<K: 'static, V: 'static> {
    pub(super) slot: usize,
    pub(super) layer: fn(&Layers) -> &Layer<K, V>,
    pub(super) layer_mut: fn(&mut Layers) -> &mut Layer<K, V>,
    pub(super) changes: fn(&IndexChanges) -> &Changes<K, V>,
}

pub(crate) const CONCEPT_TYPE: Which<StrKey, ()> = Which {
    slot: 0,
    layer: |l| &l.concept_type,
    layer_mut: |l| &mut l.concept_type,
    changes: |c| &c.concept_type,
};
pub(crate) const CONCEPT_NAME: Which<StrKey, ()> = Which {
    slot: 1,
    layer: |l| &l.concept_name,
    layer_mut: |l| &mut l.concept_name,
    changes: |c| &c.concept_name,
};
pub(crate) const POS: Which<PosKey, u64> = Which {
    slot: 2,
    layer: |l| &l.pos,
    layer_mut: |l| &mut l.pos,
    changes: |c| &c.pos,
};
pub(crate) const OSP: Which<OspKey, u64> = Which {
    slot: 3,
    layer: |l| &l.osp,
    layer_mut: |l| &mut l.osp,
    changes: |c| &c.osp,
};
pub(crate) const POSTINGS: Which<StrKey, u64> = Which {
    slot: 4,
    layer: |l| &l.postings,
    layer_mut: |l| &mut l.postings,
    changes: |c| &c.postings,
};

pub(crate) const ATTRS: Which<AttrKey, ()> = Which {
    slot: 5,
    layer: |l| &l.attrs,
    layer_mut: |l| &mut l.attrs,
    changes: |c| &c.attrs,
};

/// A transaction's changes to the overlaid indexes (the last change of a key wins).
#[derive(Debug, Default)]
pub(crate) struct IndexChanges {
    pub concept_type: Changes<StrKey, ()>,
    pub concept_name: Changes<StrKey, ()>,
    pub pos: Changes<PosKey, u64>,
    pub osp: Changes<OspKey, u64>,
    pub postings: Changes<StrKey, u64>,
    pub attrs: Changes<AttrKey, ()>,
}

impl IndexChanges {
    /// Number of changed keys.
    pub fn len(&self) -> usize {
        self.concept_type.len()
            + self.concept_name.len()
            + self.pos.len()
            + self.osp.len()
            + self.postings.len()
            + self.attrs.len()
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sorts every index's changes (so [`IndexChanges::len`] is exact).
    pub fn sort(&mut self) {
        self.concept_type.sort();
        self.concept_name.sort();
        self.pos.sort();
        self.osp.sort();
        self.postings.sort();
        self.attrs.sort();
    }
}
