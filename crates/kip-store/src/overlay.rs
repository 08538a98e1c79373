//! The in-memory write layer: committed writes to the secondary indexes, kept in sorted
//! runs until they are folded into redb in one large sorted pass.
//!
//! The pure secondary indexes (`concept_type`, `concept_name`, `pos`, `osp` and the text
//! postings) take most of a small write's cost when written to redb directly: their keys
//! arrive in random order (a link's object, a word of a description), and redb copies a
//! whole leaf page the first time a transaction touches it and then has to checksum and
//! re-link every dirty page at commit. Here a transaction's changes to those indexes go
//! into a private sorted map instead ([`IndexChanges`]); at commit they are published
//! into the shared [`Overlay`] under a new version number (as one more sorted run per
//! index, merged with the smaller runs before it: see [`Layer`]), and every read merges
//! the overlay into the redb range it scans. A *fold* (at each checkpoint, before every
//! durable commit, and when a transaction's own changes grow large) writes the overlay
//! into the redb tables in key order, so each leaf is copied once per fold rather than
//! once per transaction.
//!
//! Durability is unchanged: the write-ahead log records the records (concepts,
//! propositions), and replaying them derives the index entries again. A checkpoint folds
//! the overlay *into the same durable commit* that lets the log be emptied, so a crash
//! never loses an index entry whose record survived.
//!
//! Snapshots: every entry carries the version of the transaction that wrote it, and each
//! transaction stores the overlay's `(floor, version)` as of its commit in the `meta`
//! table, so a reader reads them from its own redb snapshot (no lock is held across a
//! commit). It sees the entries with `floor < ver <= version`, the newest per key (a
//! removal hides the key). Entries at or below `floor` were folded into redb before that
//! snapshot, so they are ignored (the redb table is the truth for them, including any
//! change made to them by the folding transaction itself). A version's entries are
//! published before its transaction commits (invisible until a snapshot names that
//! version) and withdrawn if the commit fails. Folded entries are dropped from memory
//! once no reader that might need them is alive: a reader takes the current generation
//! token *before* opening its snapshot, and a fold's entries are pruned only when every
//! token older than the fold's is gone.
//!
//! The writer (there is one at a time, from its start to the end of its commit: the
//! nexus's write gate) sees every published version above its floor plus its own
//! private changes.

use super::keys::KeyCache;
use super::{storage_error, StoreResult};
use redb::Table;
use std::cell::{Ref, RefCell};
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{
    Arc, Condvar, Mutex, MutexGuard, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak,
};

/// The text part of an overlay key. Kept inline up to 24 bytes (types, predicates,
/// terms and most names), so comparing keys in a map of half a million entries reads
/// the map's own nodes instead of following a pointer per comparison.
pub(crate) type Text = compact_str::CompactString;
/// `(text, element)`: `concept_type`, `concept_name` and the postings.
pub(crate) type StrKey = (Text, u64);
/// `(predicate, object, subject)`: `pos`.
pub(crate) type PosKey = (Text, u64, u64);
/// `(object, predicate, subject)`: `osp`.
pub(crate) type OspKey = (u64, Text, u64);

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
    inner: RefCell<ChangeLog<K, V>>,
}

#[derive(Debug)]
struct ChangeLog<K, V> {
    /// Sorted by key, one entry per key.
    sorted: Vec<(K, Option<V>)>,
    /// Appended since the last sort, oldest first.
    log: Vec<(K, Option<V>)>,
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
    fn sort(&mut self) {
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
const CHUNK: usize = 256;
/// A transaction folds the overlay and its own index changes into redb once it holds
/// this many changed index keys (bounds a huge transaction's memory: ~100 bytes each).
const MAX_TXN_CHANGES: usize = 1 << 19;

/// One overlaid index: where its shared entries and a transaction's changes live.
pub(crate) struct Which<K: 'static, V: 'static> {
    slot: usize,
    layer: fn(&Layers) -> &Layer<K, V>,
    layer_mut: fn(&mut Layers) -> &mut Layer<K, V>,
    changes: fn(&IndexChanges) -> &Changes<K, V>,
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

/// A transaction's changes to the overlaid indexes (the last change of a key wins).
#[derive(Debug, Default)]
pub(crate) struct IndexChanges {
    pub concept_type: Changes<StrKey, ()>,
    pub concept_name: Changes<StrKey, ()>,
    pub pos: Changes<PosKey, u64>,
    pub osp: Changes<OspKey, u64>,
    pub postings: Changes<StrKey, u64>,
}

impl IndexChanges {
    /// Number of changed keys.
    pub fn len(&self) -> usize {
        self.concept_type.len()
            + self.concept_name.len()
            + self.pos.len()
            + self.osp.len()
            + self.postings.len()
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
    }
}

/// One entry of a run: key, version, value (`None`: a removal).
type RunEntry<K, V> = (K, u64, Option<V>);

/// A sorted run: one transaction's published changes, or the merge of several adjacent
/// ones. Entries are sorted by key, then version.
#[derive(Debug)]
struct Run<K, V> {
    entries: Vec<RunEntry<K, V>>,
    /// Lowest and highest version in the run.
    min_ver: u64,
    max_ver: u64,
}

impl<K: Clone, V: Clone> Run<K, V> {
    /// The run without the entries `drop` selects, or `None` when nothing is left.
    fn without(&self, drop: impl Fn(u64) -> bool) -> Option<Run<K, V>> {
        let entries: Vec<_> = self
            .entries
            .iter()
            .filter(|e| !drop(e.1))
            .cloned()
            .collect();
        let min_ver = entries.iter().map(|e| e.1).min()?;
        let max_ver = entries.iter().map(|e| e.1).max()?;
        Some(Run {
            entries,
            min_ver,
            max_ver,
        })
    }
}

/// A run is merged with the runs published after it once it holds fewer than this many
/// times their entries, so each run is at least this much larger than all later ones
/// together: at most about log2(entries) runs, and (simulated over a bulk load of 2M
/// entries in 10k-entry transactions) each entry copied about 4 times in all.
const FANOUT: usize = 2;
/// At most this many runs per index (a read searches each; one more for a moment after a
/// publish that lost two races with pruning): a server's small writes would otherwise
/// leave about log2(entries / entries per write) of them (about 20 at 2M entries); the
/// cap merges the newest into the smallest instead (a copy of that run per publish, at
/// most 1/2048 of the layer). Bulk loads stay below it (links publish about 1,000
/// entries per index and transaction; a cap of 8 looked 3-5% slower on a 300k load, in
/// three alternated pairs, within this VM's noise).
const MAX_RUNS: usize = 12;

/// The versioned entries of one index, as sorted runs (a small in-memory log-structured
/// merge): publishing a transaction appends its already sorted changes as a run and
/// merges the smallest runs, which costs a few sequential copies per entry instead of
/// one search of a shared tree with string comparisons per entry. Runs are immutable
/// and shared (`Arc`), so the writer (or, for large publishes, the merger thread: see
/// [`Overlay::start_merger`]) merges them without holding the lock readers need.
#[derive(Debug)]
pub(crate) struct Layer<K, V> {
    /// Oldest first; every version in a run is below every version in the runs after
    /// it (only adjacent runs are merged).
    runs: Vec<Arc<Run<K, V>>>,
    /// Entries in all runs.
    len: usize,
}

impl<K, V> Default for Layer<K, V> {
    fn default() -> Self {
        Layer {
            runs: Vec::new(),
            len: 0,
        }
    }
}

/// Whether `(lo, hi)` holds no key (also the case in which `BTreeMap::range` panics).
fn empty_range<K: Ord>(lo: &Bound<K>, hi: &Bound<K>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a >= b
        }
        _ => false,
    }
}

/// The entries of a sorted run whose key lies within `(lo, hi)`.
fn run_range<'r, K: Ord, V>(
    entries: &'r [RunEntry<K, V>],
    lo: &Bound<K>,
    hi: &Bound<K>,
) -> &'r [RunEntry<K, V>] {
    let start = match lo {
        Bound::Included(k) => entries.partition_point(|e| e.0 < *k),
        Bound::Excluded(k) => entries.partition_point(|e| e.0 <= *k),
        Bound::Unbounded => 0,
    };
    let end = match hi {
        Bound::Included(k) => entries.partition_point(|e| e.0 <= *k),
        Bound::Excluded(k) => entries.partition_point(|e| e.0 < *k),
        Bound::Unbounded => entries.len(),
    };
    entries.get(start..end).unwrap_or(&[])
}

/// Merges two adjacent runs' entries (every version in `older` below every version in
/// `newer`) into one sorted run.
fn merge_two<K: Ord + Clone, V: Clone>(
    older: &[RunEntry<K, V>],
    newer: Vec<RunEntry<K, V>>,
) -> Vec<RunEntry<K, V>> {
    let mut out = Vec::with_capacity(older.len() + newer.len());
    let mut old = older.iter().peekable();
    for e in newer {
        while let Some(o) = old.next_if(|o| o.0 <= e.0) {
            out.push(o.clone());
        }
        out.push(e);
    }
    out.extend(old.cloned());
    out
}

/// Calls `f` with each key of the runs' entries (`heads`: one slice per run, oldest run
/// first) and its newest entry whose version passes `visible`, in key order; keys
/// without one are left out. Stops when `f` returns `Ok(false)`.
fn merge_visible<'a, K: Ord, V>(
    mut heads: Vec<&'a [RunEntry<K, V>]>,
    visible: impl Fn(u64) -> bool,
    mut f: impl FnMut(&'a K, &'a Option<V>) -> StoreResult<bool>,
) -> StoreResult<()> {
    heads.retain(|h| !h.is_empty());
    while !heads.is_empty() {
        let mut min: Option<&'a K> = None;
        for h in &heads {
            if let Some(e) = h.first() {
                if min.is_none_or(|m| e.0 < *m) {
                    min = Some(&e.0);
                }
            }
        }
        let Some(key) = min else { break };
        // Runs are in version order and each run in version order per key, so the
        // last visible entry met is the newest.
        let mut newest = None;
        for h in heads.iter_mut() {
            while let Some((k, ver, v)) = h.first() {
                if k != key {
                    break;
                }
                if visible(*ver) {
                    newest = Some(v);
                }
                *h = h.get(1..).unwrap_or(&[]);
            }
        }
        heads.retain(|h| !h.is_empty());
        if let Some(v) = newest {
            if !f(key, v)? {
                break;
            }
        }
    }
    Ok(())
}

/// Publishes one index's changes under `ver` as a new run, merging it with the runs
/// before it while they are less than [`FANOUT`] times its size. The merge runs without
/// the lock (runs are shared and immutable, and the writer is the only one adding runs);
/// the lock is taken only to swap the merged run in, and if a prune replaced one of the
/// merged runs meanwhile, the merge is redone. The entries are invisible to readers until
/// the version is committed.
fn publish_into<K: Ord + Clone, V: Clone>(
    overlay: &Overlay,
    which: &Which<K, V>,
    changes: Changes<K, V>,
    ver: u64,
) {
    let changes = changes.into_sorted();
    if changes.is_empty() {
        return;
    }
    let added = changes.len();
    let mut fresh: Vec<RunEntry<K, V>> = changes.into_iter().map(|(k, v)| (k, ver, v)).collect();
    let background = overlay.background.load(Ordering::Relaxed);
    if background > 0 && added >= background {
        // Append only; the merger thread merges it with the runs before it. Past the
        // cap (the merger is behind), merge here as below.
        let mut l = overlay.layers_mut();
        let layer = (which.layer_mut)(&mut l);
        if layer.runs.len() + 1 < MAX_RUNS {
            layer.runs.push(Arc::new(Run {
                entries: std::mem::take(&mut fresh),
                min_ver: ver,
                max_ver: ver,
            }));
            layer.len += added;
            overlay.counts[which.slot].store(layer.len, Ordering::SeqCst);
            drop(l);
            overlay.wake_merger();
            return;
        }
    }
    for attempt in 0..3 {
        let tail: Vec<Arc<Run<K, V>>> = {
            let l = overlay.layers();
            let runs = &(which.layer)(&l).runs;
            let mut j = runs.len();
            let mut size = fresh.len();
            // The last attempt pushes the run as it is (always correct; later publishes
            // merge it).
            while attempt < 2 && j > 0 && runs[j - 1].entries.len() < FANOUT * size {
                j -= 1;
                size += runs[j].entries.len();
            }
            // Small writes make small runs: bound how many a read has to search.
            while attempt < 2 && j > 0 && j >= MAX_RUNS {
                j -= 1;
            }
            runs[j..].to_vec()
        };
        let mut entries = std::mem::take(&mut fresh);
        for r in tail.iter().rev() {
            entries = merge_two(&r.entries, entries);
        }
        let min_ver = tail.first().map_or(ver, |r| r.min_ver);
        let mut l = overlay.layers_mut();
        let layer = (which.layer_mut)(&mut l);
        let n = layer.runs.len();
        let same = n >= tail.len()
            && layer.runs[n - tail.len()..]
                .iter()
                .zip(&tail)
                .all(|(a, b)| Arc::ptr_eq(a, b));
        if same {
            layer.runs.truncate(n - tail.len());
            layer.runs.push(Arc::new(Run {
                entries,
                min_ver,
                max_ver: ver,
            }));
            layer.len += added;
            overlay.counts[which.slot].store(layer.len, Ordering::SeqCst);
            return;
        }
        // A prune replaced one of the merged runs: take this version's entries back
        // out of the merge (the version is unique to this publish) and try again.
        fresh = entries.into_iter().filter(|e| e.1 == ver).collect();
    }
}

/// Publishes of at least this many entries (per index) leave their merge to the merger
/// thread when one runs ([`Overlay::start_merger`]); smaller ones merge at once (the copy
/// is small, and a server's single writes do not wake a thread each).
const BACKGROUND_MIN: usize = 256;

/// The merger thread's work on one index: while the newest run is at least half the
/// size of the run before it (the rule [`publish_into`] applies), merges the newest runs
/// into one, without the lock, and swaps the merged run in for them if they are all
/// still in the layer, side by side (a publish may have appended runs after them
/// meanwhile; a prune or withdrawal that replaced one makes it give up until the next
/// wake-up). Merging adjacent runs keeps every entry and the version order, so readers
/// see the same entries before and after the swap.
fn merge_layer<K: Ord + Clone, V: Clone>(overlay: &Overlay, which: &Which<K, V>) {
    for _ in 0..2 * MAX_RUNS {
        if !merge_once(overlay, which, || ()) {
            return;
        }
    }
}

/// One merge of [`merge_layer`]; `between` runs after the merge and before the swap (a
/// test's way to race it). True if it merged something.
fn merge_once<K: Ord + Clone, V: Clone>(
    overlay: &Overlay,
    which: &Which<K, V>,
    between: impl FnOnce(),
) -> bool {
    let group: Vec<Arc<Run<K, V>>> = {
        let l = overlay.layers();
        let runs = &(which.layer)(&l).runs;
        let Some(last) = runs.len().checked_sub(1) else {
            return false;
        };
        let mut j = last;
        let mut size = runs[last].entries.len();
        while j > 0 && runs[j - 1].entries.len() < FANOUT * size {
            j -= 1;
            size += runs[j].entries.len();
        }
        if j == last {
            return false;
        }
        runs[j..].to_vec()
    };
    let (Some(first), Some(newest)) = (group.first(), group.last()) else {
        return false;
    };
    let mut entries = newest.entries.clone();
    for r in group.iter().rev().skip(1) {
        entries = merge_two(&r.entries, entries);
    }
    let merged = Arc::new(Run {
        entries,
        min_ver: first.min_ver,
        max_ver: newest.max_ver,
    });
    between();
    let mut l = overlay.layers_mut();
    let layer = (which.layer_mut)(&mut l);
    let Some(at) = layer.runs.iter().position(|r| Arc::ptr_eq(r, first)) else {
        return false;
    };
    let end = at + group.len();
    let present = layer
        .runs
        .get(at..end)
        .is_some_and(|rs| rs.iter().zip(&group).all(|(a, b)| Arc::ptr_eq(a, b)));
    if !present {
        return false;
    }
    layer.runs.splice(at..end, [merged]);
    true
}

/// Wakes the merger thread; it stops when the overlay is dropped.
#[derive(Debug, Default)]
struct MergerSignal {
    /// (work pending, stop)
    state: Mutex<(bool, bool)>,
    wake: Condvar,
}

impl MergerSignal {
    fn set(&self, stop: bool) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.0 = true;
        st.1 |= stop;
        self.wake.notify_one();
    }

    /// Waits for work; false once stopped.
    fn wait(&self) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while !st.0 && !st.1 {
            st = self.wake.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.0 = false;
        !st.1
    }
}

impl<K: Ord + Clone, V: Clone> Layer<K, V> {
    /// Drops the entries whose version `drop` selects.
    fn remove_versions(
        &mut self,
        drop: impl Fn(u64) -> bool + Copy,
        touches: impl Fn(&Run<K, V>) -> bool,
    ) {
        let runs = std::mem::take(&mut self.runs);
        for r in runs {
            if !touches(&r) {
                self.runs.push(r);
            } else if let Some(kept) = r.without(drop) {
                self.runs.push(Arc::new(kept));
            }
        }
        self.len = self.runs.iter().map(|r| r.entries.len()).sum();
    }

    fn unpublish(&mut self, ver: u64) {
        self.remove_versions(|v| v == ver, |r| r.min_ver <= ver && ver <= r.max_ver);
    }

    fn prune(&mut self, upto: u64) {
        self.runs.retain(|r| r.max_ver > upto);
        self.remove_versions(|v| v <= upto, |r| r.min_ver <= upto);
    }

    fn len(&self) -> usize {
        self.len
    }

    /// Appends to `out` the resolved entries of keys in `(lo, hi)`: per key the newest
    /// version in `(floor, at]`, keys without one left out. Stops after about `max`
    /// entries; returns the last key examined when it stopped early (resume after it).
    fn chunk(
        &self,
        lo: &Bound<K>,
        hi: &Bound<K>,
        floor: u64,
        at: u64,
        max: usize,
        out: &mut VecDeque<(K, Option<V>)>,
    ) -> Option<K> {
        if empty_range(lo, hi) {
            return None;
        }
        let heads = self
            .runs
            .iter()
            .filter(|r| r.max_ver > floor && r.min_ver <= at)
            .map(|r| run_range(&r.entries, lo, hi))
            .collect();
        let mut pushed = 0usize;
        let mut resume = None;
        let _ = merge_visible(
            heads,
            |ver| ver > floor && ver <= at,
            |k, v| {
                out.push_back((k.clone(), v.clone()));
                pushed += 1;
                if pushed >= max {
                    resume = Some(k.clone());
                    return Ok(false);
                }
                Ok(true)
            },
        );
        resume
    }

    /// Calls `f` with the newest entry above `floor` of every key, in key order.
    fn for_each_latest<'a>(
        &'a self,
        floor: u64,
        f: &mut dyn FnMut(&'a K, &'a Option<V>) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let heads = self
            .runs
            .iter()
            .filter(|r| r.max_ver > floor)
            .map(|r| r.entries.as_slice())
            .collect();
        merge_visible(heads, |ver| ver > floor, |k, v| f(k, v).map(|()| true))
    }
}

/// The shared layers, one per overlaid index.
#[derive(Debug, Default)]
pub(crate) struct Layers {
    pub concept_type: Layer<StrKey, ()>,
    pub concept_name: Layer<StrKey, ()>,
    pub pos: Layer<PosKey, u64>,
    pub osp: Layer<OspKey, u64>,
    pub postings: Layer<StrKey, u64>,
    /// Folds whose entries are still in memory: (floor, generation token), oldest first.
    prunes: VecDeque<(u64, Arc<()>)>,
}

impl Layers {
    fn len(&self) -> usize {
        self.concept_type.len()
            + self.concept_name.len()
            + self.pos.len()
            + self.osp.len()
            + self.postings.len()
    }

    fn prune(&mut self, upto: u64) {
        self.concept_type.prune(upto);
        self.concept_name.prune(upto);
        self.pos.prune(upto);
        self.osp.prune(upto);
        self.postings.prune(upto);
    }
}

#[derive(Debug)]
struct Visible {
    /// The newest committed version.
    version: u64,
    /// Versions up to this one are folded into the redb tables.
    floor: u64,
    /// Held by every reader whose snapshot has this floor.
    generation: Arc<()>,
    /// Entries published since the last fold.
    unfolded: usize,
}

/// The committed, not yet folded secondary-index writes (see the module documentation).
#[derive(Debug)]
pub struct Overlay {
    layers: RwLock<Layers>,
    visible: Mutex<Visible>,
    max_txn_changes: AtomicUsize,
    /// Entries per layer (by [`Which`] slot), readable without the lock: a scan of an
    /// index whose layer is empty skips the overlay entirely.
    counts: [AtomicUsize; 5],
    /// The writers' `concept_key` cache (see `store/keys.rs`); lives here because it
    /// follows the same commits.
    keys: Mutex<KeyCache>,
    /// Publishes of at least this many entries per index (0: none) append their run and
    /// leave the merge to [`merge_pending`] (set by [`Overlay::start_merger`]).
    ///
    /// [`merge_pending`]: Overlay::merge_pending
    background: AtomicUsize,
    /// The merger thread's wake-up, once started.
    merger: OnceLock<Arc<MergerSignal>>,
}

impl Drop for Overlay {
    fn drop(&mut self) {
        if let Some(m) = self.merger.get() {
            m.set(true);
        }
    }
}

impl Default for Overlay {
    fn default() -> Self {
        Overlay {
            layers: RwLock::new(Layers::default()),
            visible: Mutex::new(Visible {
                version: 0,
                floor: 0,
                generation: Arc::new(()),
                unfolded: 0,
            }),
            max_txn_changes: AtomicUsize::new(MAX_TXN_CHANGES),
            counts: Default::default(),
            keys: Mutex::new(KeyCache::default()),
            background: AtomicUsize::new(0),
            merger: OnceLock::new(),
        }
    }
}

/// A reader's view of the overlay: the `(floor, version)` its redb snapshot names, and
/// the generation token it took before opening that snapshot.
#[derive(Debug)]
pub struct Snapshot {
    floor: u64,
    at: u64,
    generation: Option<Arc<()>>,
}

impl Snapshot {
    /// A snapshot of `(floor, version)` (read from the redb snapshot's `meta`) holding
    /// `token` (from [`Overlay::reader_token`], taken before the redb snapshot).
    pub fn new(floor: u64, version: u64, token: Arc<()>) -> Snapshot {
        Snapshot {
            floor,
            at: version,
            generation: Some(token),
        }
    }
}

/// Encodes the overlay state a transaction stores in `meta`.
pub(crate) fn encode_state(floor: u64, version: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&floor.to_le_bytes());
    b[8..].copy_from_slice(&version.to_le_bytes());
    b
}

/// Decodes [`encode_state`]; `(0, 0)` for anything else.
pub(crate) fn decode_state(b: &[u8]) -> (u64, u64) {
    match (b.get(..8), b.get(8..16)) {
        (Some(f), Some(v)) => {
            let mut fb = [0u8; 8];
            let mut vb = [0u8; 8];
            fb.copy_from_slice(f);
            vb.copy_from_slice(v);
            (u64::from_le_bytes(fb), u64::from_le_bytes(vb))
        }
        _ => (0, 0),
    }
}

impl Overlay {
    fn visible(&self) -> MutexGuard<'_, Visible> {
        self.visible.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn layers(&self) -> RwLockReadGuard<'_, Layers> {
        self.layers.read().unwrap_or_else(|p| p.into_inner())
    }

    fn layers_mut(&self) -> RwLockWriteGuard<'_, Layers> {
        self.layers.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a thread that merges the runs large publishes append (so a bulk load's
    /// merges run on another core than its statements). It holds the overlay weakly and
    /// ends when the overlay is dropped. Without it, publishes merge inline. If the
    /// thread cannot be spawned, publishes keep merging inline.
    pub fn start_merger(self: &Arc<Self>) {
        let signal = Arc::new(MergerSignal::default());
        if self.merger.set(signal.clone()).is_err() {
            return;
        }
        let weak: Weak<Overlay> = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("kip-overlay-merge".into())
            .spawn(move || {
                while signal.wait() {
                    let Some(overlay) = weak.upgrade() else {
                        return;
                    };
                    overlay.merge_pending();
                }
            });
        if spawned.is_ok() {
            self.background.store(BACKGROUND_MIN, Ordering::Relaxed);
        }
    }

    /// Merges the runs that appended publishes left (what the merger thread does on each
    /// wake-up; callable directly, e.g. by tests).
    pub(crate) fn merge_pending(&self) {
        merge_layer(self, &CONCEPT_TYPE);
        merge_layer(self, &CONCEPT_NAME);
        merge_layer(self, &POS);
        merge_layer(self, &OSP);
        merge_layer(self, &POSTINGS);
    }

    fn wake_merger(&self) {
        if let Some(m) = self.merger.get() {
            m.set(false);
        }
    }

    /// Makes publishes of at least `min` entries append without merging, with no merger
    /// thread, so a test can interleave [`Overlay::merge_pending`] deterministically.
    #[cfg(test)]
    fn set_background(&self, min: usize) {
        self.background.store(min, Ordering::Relaxed);
    }

    /// The writers' `concept_key` cache (only write transactions may use it).
    pub(crate) fn keys(&self) -> MutexGuard<'_, KeyCache> {
        self.keys.lock().unwrap_or_else(|p| {
            // A holder panicked midway: start again from an empty (always correct) map.
            let mut g = p.into_inner();
            *g = KeyCache::default();
            self.keys.clear_poison();
            g
        })
    }

    /// The token a reader holds while its snapshot lives; take it *before* opening the
    /// redb snapshot (see the module documentation).
    pub fn reader_token(&self) -> Arc<()> {
        self.visible().generation.clone()
    }

    /// The floor a new write transaction starts from, and the newest version (what a fold
    /// by that transaction would cover).
    pub(crate) fn writer_start(&self) -> (u64, u64) {
        let v = self.visible();
        (v.floor, v.version)
    }

    /// How many changed index keys a transaction may hold before it folds them.
    pub fn max_txn_changes(&self) -> usize {
        self.max_txn_changes.load(Ordering::Relaxed)
    }

    /// Sets [`Overlay::max_txn_changes`] (tests use a small value to fold often).
    pub fn set_max_txn_changes(&self, n: usize) {
        self.max_txn_changes.store(n.max(1), Ordering::Relaxed);
    }

    /// Entries published since the last fold (what the next fold would write).
    pub fn unfolded(&self) -> usize {
        self.visible().unfolded
    }

    /// Publishes a transaction's changes under `ver` (the version its `meta` names),
    /// invisible to readers until a committed snapshot names that version. Returns the
    /// version, or `None` when there was nothing to publish.
    pub(crate) fn publish(&self, changes: IndexChanges, ver: u64) -> Option<u64> {
        if changes.is_empty() {
            return None;
        }
        publish_into(self, &CONCEPT_TYPE, changes.concept_type, ver);
        publish_into(self, &CONCEPT_NAME, changes.concept_name, ver);
        publish_into(self, &POS, changes.pos, ver);
        publish_into(self, &OSP, changes.osp, ver);
        publish_into(self, &POSTINGS, changes.postings, ver);
        Some(ver)
    }

    /// Withdraws a version whose transaction did not commit.
    pub(crate) fn unpublish(&self, ver: u64) {
        let mut l = self.layers_mut();
        l.concept_type.unpublish(ver);
        l.concept_name.unpublish(ver);
        l.pos.unpublish(ver);
        l.osp.unpublish(ver);
        l.postings.unpublish(ver);
        self.store_counts(&l);
    }

    fn store_counts(&self, l: &Layers) {
        let lens = [
            l.concept_type.len(),
            l.concept_name.len(),
            l.pos.len(),
            l.osp.len(),
            l.postings.len(),
        ];
        for (c, n) in self.counts.iter().zip(lens) {
            c.store(n, Ordering::SeqCst);
        }
    }

    /// Commits the redb transaction with `commit` and, if that succeeds, records `ver` as
    /// the newest version and a fold up to `folded` (a new generation: readers from now
    /// on see the fold). On failure the published version is withdrawn. No lock is held
    /// while `commit` runs: readers learn the version from their snapshot.
    pub(crate) fn commit(
        &self,
        ver: Option<u64>,
        published: usize,
        folded: Option<u64>,
        commit: impl FnOnce() -> StoreResult<()>,
    ) -> StoreResult<()> {
        if let Err(e) = commit() {
            if let Some(ver) = ver {
                self.unpublish(ver);
            }
            return Err(e);
        }
        self.keys().committed();
        let mut v = self.visible();
        if let Some(ver) = ver {
            v.version = ver;
        }
        if let Some(floor) = folded {
            v.floor = floor;
            v.unfolded = 0;
            let old = std::mem::replace(&mut v.generation, Arc::new(()));
            self.layers_mut().prunes.push_back((floor, old));
        }
        v.unfolded += published;
        drop(v);
        self.prune();
        Ok(())
    }

    /// Ends a reader's snapshot: drops folded entries only it still needed.
    pub fn end_read(&self, s: &mut Snapshot) {
        if s.generation.take().is_some() {
            self.prune();
        }
    }

    /// Drops folded entries no reader can still need. Opportunistic: when the layers are
    /// busy (a fold is reading them), the next commit or finished reader does it.
    pub(crate) fn prune(&self) {
        let ready = {
            let l = self.layers();
            l.prunes
                .front()
                .is_some_and(|(_, g)| Arc::strong_count(g) == 1)
        };
        if !ready {
            return;
        }
        let mut l = match self.layers.try_write() {
            Ok(l) => l,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        let mut upto = None;
        while l
            .prunes
            .front()
            .is_some_and(|(_, g)| Arc::strong_count(g) == 1)
        {
            upto = l.prunes.pop_front().map(|(floor, _)| floor);
        }
        if let Some(upto) = upto {
            l.prune(upto);
            self.store_counts(&l);
        }
    }

    /// Entries held in memory (folded ones included until they are pruned).
    pub fn entries(&self) -> usize {
        self.layers().len()
    }
}

/// How one reader or the writer sees the overlay: the shared layers between `floor` and
/// `at`, then (for the writer) its own changes on top.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub overlay: &'a Overlay,
    pub floor: u64,
    pub at: u64,
    pub private: Option<&'a IndexChanges>,
}

impl<'a> View<'a> {
    pub fn of_snapshot(overlay: &'a Overlay, s: &Snapshot) -> View<'a> {
        View {
            overlay,
            floor: s.floor,
            at: s.at,
            private: None,
        }
    }

    /// The overlay entries of one index with keys in `bounds()`, in key order; `None`
    /// (without calling `bounds`) when the index has no overlay entries at all.
    pub fn stream<K: Ord + Clone, V: Clone>(
        &self,
        which: &Which<K, V>,
        bounds: impl FnOnce() -> (Bound<K>, Bound<K>),
    ) -> Option<Stream<'a, K, V>> {
        let own = self.private.map(which.changes).filter(|c| !c.is_empty());
        if own.is_none() && self.overlay.counts[which.slot].load(Ordering::SeqCst) == 0 {
            return None;
        }
        let (lo, hi) = bounds();
        let empty = empty_range(&lo, &hi);
        let private = match own {
            Some(c) if !empty => {
                let entries = c.sorted();
                let start = match &lo {
                    Bound::Included(k) => entries.partition_point(|e| e.0 < *k),
                    Bound::Excluded(k) => entries.partition_point(|e| e.0 <= *k),
                    Bound::Unbounded => 0,
                };
                let end = match &hi {
                    Bound::Included(k) => entries.partition_point(|e| e.0 <= *k),
                    Bound::Excluded(k) => entries.partition_point(|e| e.0 < *k),
                    Bound::Unbounded => entries.len(),
                };
                Some(Private {
                    entries,
                    next: start,
                    end: end.max(start),
                })
            }
            _ => None,
        };
        Some(Stream {
            overlay: self.overlay,
            layer: which.layer,
            floor: self.floor,
            at: self.at,
            lo,
            hi,
            buf: VecDeque::new(),
            shared_done: empty,
            private,
        })
    }
}

/// Iterator over the overlay entries of a key range (see [`View::stream`]); a removal is
/// `(key, None)`.
pub(crate) struct Stream<'a, K, V> {
    overlay: &'a Overlay,
    layer: fn(&Layers) -> &Layer<K, V>,
    floor: u64,
    at: u64,
    lo: Bound<K>,
    hi: Bound<K>,
    buf: VecDeque<(K, Option<V>)>,
    shared_done: bool,
    private: Option<Private<'a, K, V>>,
}

/// The writing transaction's own changes in a stream's range.
struct Private<'a, K, V> {
    entries: Ref<'a, [(K, Option<V>)]>,
    next: usize,
    end: usize,
}

impl<K: Clone, V: Clone> Private<'_, K, V> {
    fn peek(&self) -> Option<&(K, Option<V>)> {
        if self.next < self.end {
            self.entries.get(self.next)
        } else {
            None
        }
    }

    fn take(&mut self) -> Option<(K, Option<V>)> {
        let e = self.peek().cloned();
        self.next += 1;
        e
    }
}

impl<K: Ord + Clone, V: Clone> Stream<'_, K, V> {
    fn fill(&mut self) {
        while self.buf.is_empty() && !self.shared_done {
            let resume = {
                let layers = self.overlay.layers();
                (self.layer)(&layers).chunk(
                    &self.lo,
                    &self.hi,
                    self.floor,
                    self.at,
                    CHUNK,
                    &mut self.buf,
                )
            };
            match resume {
                Some(k) => self.lo = Bound::Excluded(k),
                None => self.shared_done = true,
            }
        }
    }
}

impl<K: Ord + Clone, V: Clone> Iterator for Stream<'_, K, V> {
    type Item = (K, Option<V>);

    fn next(&mut self) -> Option<Self::Item> {
        self.fill();
        let own = self.private.as_ref().and_then(|p| p.peek());
        // (take the transaction's own change, drop the shared entry it replaces)
        let (take_own, replaces) = match (self.buf.front(), own) {
            (None, None) => return None,
            (Some(_), None) => (false, false),
            (None, Some(_)) => (true, false),
            (Some((shared, _)), Some((own, _))) => match shared.cmp(own) {
                std::cmp::Ordering::Less => (false, false),
                // The transaction's own change replaces the committed one.
                std::cmp::Ordering::Equal => (true, true),
                std::cmp::Ordering::Greater => (true, false),
            },
        };
        if replaces {
            self.buf.pop_front();
        }
        if take_own {
            self.private.as_mut().and_then(|p| p.take())
        } else {
            self.buf.pop_front()
        }
    }
}

/// One entry of a merged scan: from the redb table, or from the overlay.
pub(crate) enum Item<'x, B, K, V> {
    Base(&'x B),
    Over(&'x K, &'x V),
}

/// Merges a redb range (`base`, in key order) with overlay entries of the same range:
/// `cmp(base entry, overlay key)`; an overlay entry replaces a base entry with the same
/// key, and a removal hides it. Stops when `emit` returns `false`. Without overlay
/// entries (`None`, the common case) the base range is passed through as it is.
pub(crate) fn merge<B, E: Into<crate::StoreError>, K, V>(
    base: impl Iterator<Item = Result<B, E>>,
    over: Option<impl Iterator<Item = (K, Option<V>)>>,
    cmp: impl Fn(&B, &K) -> std::cmp::Ordering,
    mut emit: impl FnMut(Item<'_, B, K, V>) -> StoreResult<bool>,
) -> StoreResult<()> {
    use std::cmp::Ordering;
    let Some(over) = over else {
        for b in base {
            // By reference: moving redb's entry guards out of the `Result` costs a copy
            // per entry on this hot path.
            let keep = match &b {
                Ok(entry) => emit(Item::Base(entry))?,
                Err(_) => true,
            };
            if let Err(e) = b {
                return Err(storage_error(e));
            }
            if !keep {
                break;
            }
        }
        return Ok(());
    };
    let mut base = base.peekable();
    let mut over = over.peekable();
    loop {
        let order = match (base.peek(), over.peek()) {
            (None, None) => return Ok(()),
            (Some(Err(_)), _) => {
                return match base.next() {
                    Some(Err(e)) => Err(storage_error(e)),
                    _ => Ok(()),
                }
            }
            (Some(Ok(_)), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(Ok(b)), Some((k, _))) => cmp(b, k),
        };
        let go_on = match order {
            Ordering::Less => match base.next() {
                Some(Ok(b)) => emit(Item::Base(&b))?,
                _ => true,
            },
            Ordering::Equal | Ordering::Greater => {
                if order == Ordering::Equal {
                    base.next();
                }
                match over.next() {
                    Some((k, Some(v))) => emit(Item::Over(&k, &v))?,
                    _ => true,
                }
            }
        };
        if !go_on {
            return Ok(());
        }
    }
}

/// One resolved overlay entry: a key and its value, or `None` for a removal.
pub(crate) type Entry<'a, K, V> = (&'a K, &'a Option<V>);

/// Writes overlay entries into their redb table (a fold).
pub(crate) trait Apply<K, V> {
    /// Writes `items` (in key order, each key once) into the table.
    fn apply_sorted(&mut self, items: &[Entry<'_, K, V>]) -> StoreResult<()>;
}

/// A run of cursor inserts shorter than this is not worth its set-up (a descent, the
/// neighbour keys, a leaf rewrite): the next [`PLAIN_STRETCH`] entries use plain inserts.
const MIN_RUN: usize = 4;
const PLAIN_STRETCH: usize = 64;

/// Writes sorted entries into `table`. New keys that fall into the same gap between the
/// table's existing keys (new ids appended under one term, predicate or type: the usual
/// shape of a fold) go in through one redb cursor, which buffers them and splices them
/// into the tree leaf by leaf instead of descending from the root once per key; where
/// gaps hold only a key or two (incoming links spread over many objects), plain inserts
/// are cheaper, so the writer switches between the two by the length of its last run.
/// Replaced values and removals always use plain operations. Either way the table ends
/// up with exactly the same entries.
pub(crate) fn write_sorted<'i, TK, TV, K: 'i, V: 'i>(
    table: &mut Table<'_, TK, TV>,
    items: &[Entry<'i, K, V>],
    key: impl Fn(&'i K) -> TK::SelfType<'i>,
    value: impl Fn(&'i V) -> TV::SelfType<'i>,
) -> StoreResult<()>
where
    TK: redb::Key + 'static,
    TV: redb::Value + 'static,
{
    let mut i = 0;
    let mut plain = 0usize;
    while let Some(&(k, v)) = items.get(i) {
        let Some(v) = v else {
            table.remove(key(k)).map_err(storage_error)?;
            i += 1;
            continue;
        };
        if plain > 0 {
            table.insert(key(k), value(v)).map_err(storage_error)?;
            plain -= 1;
            i += 1;
            continue;
        }
        // The gap before the first existing key >= k; inserts go in while they sort
        // strictly before that key (an equal key is a replacement: plain insert).
        let mut run = 0usize;
        {
            let mut cursor = table
                .lower_bound_mut(Bound::Included(key(k)))
                .map_err(storage_error)?;
            while let Some(&(k, Some(v))) = items.get(i) {
                match cursor.insert_before(key(k), value(v)) {
                    Ok(()) => {
                        run += 1;
                        i += 1;
                    }
                    Err(redb::CursorError::UnorderedKey) => break,
                    Err(e) => return Err(storage_error(redb::Error::from(e))),
                }
            }
            cursor.close().map_err(storage_error)?;
        }
        if run == 0 {
            table.insert(key(k), value(v)).map_err(storage_error)?;
            i += 1;
        }
        if run < MIN_RUN {
            plain = PLAIN_STRETCH;
        }
    }
    Ok(())
}

impl Apply<StrKey, ()> for Table<'_, (&'static str, u64), ()> {
    fn apply_sorted(&mut self, items: &[Entry<'_, StrKey, ()>]) -> StoreResult<()> {
        write_sorted(self, items, |(t, id)| (t.as_str(), *id), |_| ())
    }
}

impl Apply<StrKey, u64> for Table<'_, (&'static str, u64), u64> {
    fn apply_sorted(&mut self, items: &[Entry<'_, StrKey, u64>]) -> StoreResult<()> {
        write_sorted(self, items, |(t, id)| (t.as_str(), *id), |v| *v)
    }
}

impl Apply<PosKey, u64> for Table<'_, (&'static str, u64, u64), u64> {
    fn apply_sorted(&mut self, items: &[Entry<'_, PosKey, u64>]) -> StoreResult<()> {
        write_sorted(self, items, |(p, o, s)| (p.as_str(), *o, *s), |v| *v)
    }
}

impl Apply<OspKey, u64> for Table<'_, (u64, &'static str, u64), u64> {
    fn apply_sorted(&mut self, items: &[Entry<'_, OspKey, u64>]) -> StoreResult<()> {
        write_sorted(self, items, |(o, p, s)| (*o, p.as_str(), *s), |v| *v)
    }
}

/// Folds one index: the shared entries above `floor` (when `shared` is given), then the
/// transaction's own changes, each in key order.
pub(crate) fn fold_index<K: Ord + Clone, V: Clone, T: Apply<K, V>>(
    table: &mut T,
    shared: Option<(&Layer<K, V>, u64)>,
    own: &mut Changes<K, V>,
) -> StoreResult<()> {
    if let Some((layer, floor)) = shared {
        let mut items = Vec::new();
        layer.for_each_latest(floor, &mut |k, v| {
            items.push((k, v));
            Ok(())
        })?;
        table.apply_sorted(&items)?;
    }
    let own = own.take_sorted();
    let items: Vec<Entry<'_, K, V>> = own.iter().map(|(k, v)| (k, v)).collect();
    table.apply_sorted(&items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn keys(s: &mut Stream<'_, StrKey, u64>) -> Vec<(StrKey, Option<u64>)> {
        s.collect()
    }

    fn changes(items: &[(&str, u64, Option<u64>)]) -> IndexChanges {
        let mut c = IndexChanges::default();
        for (t, id, v) in items {
            c.postings.insert((Text::from(*t), *id), *v);
        }
        c
    }

    fn commit(o: &Overlay, c: IndexChanges, folded: Option<u64>) -> Option<u64> {
        let n = c.len();
        let next = o.writer_start().1 + 1;
        let ver = o.publish(c, next);
        o.commit(ver, n, folded, || Ok(())).expect("commit");
        ver
    }

    /// What a reader opening a snapshot now would see.
    fn begin(o: &Overlay) -> Snapshot {
        let token = o.reader_token();
        let (floor, version) = o.writer_start();
        Snapshot::new(floor, version, token)
    }

    fn view(o: &Overlay, s: &Snapshot) -> Vec<(StrKey, Option<u64>)> {
        let v = View::of_snapshot(o, s);
        match v.stream(&POSTINGS, || (Bound::Unbounded, Bound::Unbounded)) {
            Some(mut st) => keys(&mut st),
            None => Vec::new(),
        }
    }

    #[test]
    fn a_snapshot_sees_the_versions_committed_before_it_and_newest_first() {
        let o = Overlay::default();
        commit(&o, changes(&[("a", 1, Some(1)), ("b", 2, Some(2))]), None);
        let s1 = begin(&o);
        commit(&o, changes(&[("a", 1, None), ("c", 3, Some(3))]), None);
        let s2 = begin(&o);
        assert_eq!(
            view(&o, &s1),
            vec![(("a".into(), 1), Some(1)), (("b".into(), 2), Some(2))]
        );
        assert_eq!(
            view(&o, &s2),
            vec![
                (("a".into(), 1), None),
                (("b".into(), 2), Some(2)),
                (("c".into(), 3), Some(3))
            ]
        );
        // Published but not committed: invisible; withdrawn on failure.
        let ver = o.publish(changes(&[("d", 4, Some(4))]), 3);
        let s3 = begin(&o);
        assert_eq!(view(&o, &s3).len(), 3);
        assert!(o
            .commit(ver, 1, None, || Err(storage_error("disk full")))
            .is_err());
        assert_eq!(o.entries(), 4);
    }

    #[test]
    fn folded_entries_are_ignored_and_pruned_once_older_readers_are_gone() {
        let o = Overlay::default();
        commit(&o, changes(&[("a", 1, Some(1))]), None);
        let old = begin(&o);
        // A fold up to version 1 (in a transaction that also publishes version 2).
        commit(&o, changes(&[("b", 2, Some(2))]), Some(1));
        let new = begin(&o);
        assert_eq!(view(&o, &old), vec![(("a".into(), 1), Some(1))]);
        assert_eq!(view(&o, &new), vec![(("b".into(), 2), Some(2))]);
        assert_eq!(o.entries(), 2, "the old reader still needs version 1");
        drop(old);
        commit(&o, IndexChanges::default(), None);
        assert_eq!(o.entries(), 1);
        assert_eq!(o.unfolded(), 1);
    }

    use proptest::prelude::*;

    use redb::ReadableTable;

    const SORTED: redb::TableDefinition<(&str, u64), u64> = redb::TableDefinition::new("t");

    /// Many one-entry publishes (a server's small writes) stay within the run cap and
    /// keep every entry.
    #[test]
    fn small_publishes_stay_within_the_run_cap() {
        let o = Overlay::default();
        for v in 1..=10_000u64 {
            let key = (Text::from(format!("t{}", v % 31)), v);
            let changes: Changes<StrKey, u64> = [(key, Some(v))].into_iter().collect();
            publish_into(&o, &POSTINGS, changes, v);
            let l = o.layers();
            assert!(
                l.postings.runs.len() <= MAX_RUNS,
                "{} runs",
                l.postings.runs.len()
            );
        }
        let l = o.layers();
        assert_eq!(l.postings.len(), 10_000);
        let mut n = 0;
        l.postings
            .for_each_latest(0, &mut |k, v| {
                assert_eq!(*v, Some(k.1));
                n += 1;
                Ok(())
            })
            .expect("walk");
        assert_eq!(n, 10_000);
    }

    /// Prunes that replace runs while a writer publishes (its merge then has to be
    /// redone) lose nothing and keep the runs in version order.
    #[test]
    fn publishing_while_pruning_keeps_every_entry() {
        let o = Overlay::default();
        let done = std::sync::atomic::AtomicBool::new(false);
        let key = |v: u64, i: u64| (Text::from(format!("t{}", (v * 7 + i) % 97)), v * 10 + i);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    o.layers_mut().postings.prune(1);
                }
            });
            for v in 1..=1500u64 {
                let changes: Changes<StrKey, u64> = (0..4).map(|i| (key(v, i), Some(v))).collect();
                publish_into(&o, &POSTINGS, changes, v);
            }
            done.store(true, Ordering::SeqCst);
        });
        o.layers_mut().postings.prune(1);
        assert_every_entry_once(&o.layers().postings, 1499 * 4, 10);
    }

    /// The layer holds `count` entries, each key once, in runs in version order, and
    /// each entry's value is its version: its element id divided by `per_version`.
    fn assert_every_entry_once(layer: &Layer<StrKey, u64>, count: usize, per_version: u64) {
        assert_eq!(layer.len(), count);
        for w in layer.runs.windows(2) {
            assert!(w[0].max_ver < w[1].min_ver);
        }
        let mut seen = 0;
        layer
            .for_each_latest(0, &mut |k, v| {
                assert_eq!(*v, Some(k.1 / per_version));
                seen += 1;
                Ok(())
            })
            .expect("walk");
        assert_eq!(seen, count);
    }

    /// The merger thread merging appended runs while this thread publishes and another
    /// prunes: every entry published after the pruned version is still there, once, in
    /// runs that are in version order and within the cap.
    #[test]
    fn merger_thread_keeps_every_entry() {
        let o = Arc::new(Overlay::default());
        o.start_merger();
        assert_eq!(o.background.load(Ordering::Relaxed), BACKGROUND_MIN);
        let done = std::sync::atomic::AtomicBool::new(false);
        let n = BACKGROUND_MIN as u64 + 50;
        let key = |v: u64, i: u64| (Text::from(format!("t{}", (v * 7 + i) % 97)), v * 10_000 + i);
        std::thread::scope(|sc| {
            sc.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    o.layers_mut().postings.prune(1);
                    std::thread::yield_now();
                }
            });
            for v in 1..=120u64 {
                let changes: Changes<StrKey, u64> = (0..n).map(|i| (key(v, i), Some(v))).collect();
                publish_into(&o, &POSTINGS, changes, v);
                assert!(o.layers().postings.runs.len() <= MAX_RUNS);
            }
            done.store(true, Ordering::SeqCst);
        });
        o.layers_mut().postings.prune(1);
        o.merge_pending();
        let l = o.layers();
        let layer = &l.postings;
        assert!(
            layer.runs.len() <= 8,
            "{} runs after merging",
            layer.runs.len()
        );
        assert_every_entry_once(layer, 119 * n as usize, 10_000);
    }

    /// A withdrawal or prune that lands between the merger's merge and its swap wins:
    /// the merge is dropped, so no withdrawn or pruned entry comes back.
    #[test]
    fn a_merge_raced_by_a_withdrawal_or_prune_is_dropped() {
        let o = Overlay::default();
        o.set_background(1);
        for v in 1..=4u64 {
            let changes: Changes<StrKey, u64> =
                [((Text::from("k"), v), Some(v))].into_iter().collect();
            publish_into(&o, &POSTINGS, changes, v);
        }
        assert_eq!(o.layers().postings.runs.len(), 4);
        // All four runs merge; version 4 is withdrawn meanwhile.
        assert!(!merge_once(&o, &POSTINGS, || o
            .layers_mut()
            .postings
            .unpublish(4)));
        assert_eq!(o.layers().postings.len(), 3);
        // Unraced, the three left merge into one.
        assert!(merge_once(&o, &POSTINGS, || ()));
        assert_eq!(o.layers().postings.runs.len(), 1);
        assert_eq!(o.layers().postings.len(), 3);
        // Two entries: large enough to merge with the three before them; version 1 is
        // pruned meanwhile.
        let changes: Changes<StrKey, u64> = [
            ((Text::from("k"), 5), Some(5)),
            ((Text::from("k"), 6), Some(5)),
        ]
        .into_iter()
        .collect();
        publish_into(&o, &POSTINGS, changes, 5);
        let mut raced = false;
        assert!(!merge_once(&o, &POSTINGS, || {
            raced = true;
            o.layers_mut().postings.prune(1);
        }));
        assert!(raced);
        let l = o.layers();
        assert_eq!(l.postings.len(), 4);
        let mut vers = Vec::new();
        l.postings
            .for_each_latest(0, &mut |k, _| {
                vers.push(k.1);
                Ok(())
            })
            .expect("walk");
        assert_eq!(vers, vec![2, 3, 5, 6]);
    }

    /// One step of the layer model test.
    #[derive(Debug, Clone)]
    enum LayerOp {
        /// Publish a transaction's changes (keys 0..40) under the next version.
        Publish(BTreeMap<u8, Option<u64>>),
        /// Withdraw the newest version (a failed commit).
        Unpublish,
        /// Drop every entry at or below this fraction (0..=4 quarters) of the versions.
        Prune(u8),
        /// Read keys in `[lo, hi)` as of `(floor, at)` (quarters of the versions), at most
        /// `max` entries per chunk.
        Read(u8, u8, u8, u8, usize),
        /// What the merger thread does when woken.
        Merge,
    }

    fn layer_op() -> impl Strategy<Value = LayerOp> {
        prop_oneof![
            6 => prop::collection::btree_map(
                0u8..40,
                prop_oneof![3 => (0u64..9).prop_map(Some), 1 => Just(None)],
                0..25,
            )
            .prop_map(LayerOp::Publish),
            1 => Just(LayerOp::Unpublish),
            1 => (0u8..5).prop_map(LayerOp::Prune),
            3 => (0u8..41, 0u8..41, 0u8..5, 0u8..5, 1usize..6)
                .prop_map(|(a, b, f, t, m)| LayerOp::Read(a, b, f, t, m)),
            2 => Just(LayerOp::Merge),
        ]
    }

    /// Two readers of a transaction's changes at once (a join's nested streams) share
    /// the sorted list; a change made after them is sorted in by the next reader.
    #[test]
    fn changes_are_read_by_nested_streams_and_sorted_after_new_changes() {
        let mut c: Changes<u64, u64> = [(3, Some(1)), (1, Some(1)), (3, None)]
            .into_iter()
            .collect();
        {
            let a = c.sorted();
            let b = c.sorted();
            assert_eq!(&*a, &[(1, Some(1)), (3, None)][..]);
            assert_eq!(&*a, &*b);
        }
        c.insert(2, Some(7));
        c.insert(1, None);
        assert_eq!(c.len(), 4);
        assert_eq!(&*c.sorted(), &[(1, None), (2, Some(7)), (3, None)][..]);
        assert_eq!(c.len(), 3);
        assert_eq!(c.into_sorted(), vec![(1, None), (2, Some(7)), (3, None)]);
    }

    proptest! {
        /// Changes read back at any point equal a map with the last change per key.
        #[test]
        fn changes_keep_the_last_change_per_key(
            ops in prop::collection::vec((0u8..40, prop::option::of(0u64..5), any::<bool>()), 0..200),
        ) {
            let mut c: Changes<u8, u64> = Changes::default();
            let mut model: BTreeMap<u8, Option<u64>> = BTreeMap::new();
            for (k, v, read) in ops {
                c.insert(k, v);
                model.insert(k, v);
                prop_assert!(c.len() >= model.len());
                if read {
                    let got: Vec<(u8, Option<u64>)> = c.sorted().to_vec();
                    let want: Vec<(u8, Option<u64>)> = model.iter().map(|(k, v)| (*k, *v)).collect();
                    prop_assert_eq!(got, want);
                    prop_assert_eq!(c.len(), model.len());
                }
            }
            let want: Vec<(u8, Option<u64>)> = model.into_iter().collect();
            prop_assert_eq!(c.take_sorted(), want);
            prop_assert!(c.is_empty());
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 128,
            rng_seed: proptest::test_runner::RngSeed::Fixed(9),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]
        /// The run layer (publishing with merges, withdrawing, pruning, chunked reads at
        /// any `(floor, at)`, the fold's walk) agrees with a plain map of
        /// `(key, version) -> value`, and keeps its runs in version order; also when
        /// publishes only append and the merger's work comes in between.
        #[test]
        fn run_layer_matches_a_versioned_map(
            background in prop_oneof![Just(0usize), 1usize..4],
            ops in prop::collection::vec(layer_op(), 1..60),
        ) {
            let key = |k: u8| (Text::from(format!("k{k:02}")), u64::from(k % 3));
            let o = Overlay::default();
            o.set_background(background);
            let mut model: BTreeMap<(StrKey, u64), Option<u64>> = BTreeMap::new();
            let mut ver = 0u64;
            for op in ops {
                match op {
                    LayerOp::Publish(c) => {
                        ver += 1;
                        let changes: Changes<StrKey, u64> =
                            c.iter().map(|(k, v)| (key(*k), *v)).collect();
                        for (k, v) in changes.sorted().iter() {
                            model.insert((k.clone(), ver), *v);
                        }
                        publish_into(&o, &POSTINGS, changes, ver);
                    }
                    LayerOp::Unpublish => {
                        o.layers_mut().postings.unpublish(ver);
                        model.retain(|(_, v), _| *v != ver);
                        ver = ver.saturating_sub(1);
                    }
                    LayerOp::Prune(q) => {
                        let upto = ver * u64::from(q) / 4;
                        o.layers_mut().postings.prune(upto);
                        model.retain(|(_, v), _| *v > upto);
                    }
                    LayerOp::Read(a, b, f, t, max) => {
                        let floor = ver * u64::from(f) / 4;
                        let at = ver * u64::from(t) / 4;
                        let lo = Bound::Included(key(a.min(b)));
                        let hi = Bound::Excluded(key(a.max(b)));
                        let mut want = Vec::new();
                        let mut last: Option<(&StrKey, Option<u64>)> = None;
                        for ((k, v), val) in &model {
                            if std::ops::RangeBounds::contains(&(lo.clone(), hi.clone()), k) && *v > floor && *v <= at {
                                match &mut last {
                                    Some((lk, lv)) if *lk == k => *lv = *val,
                                    _ => {
                                        want.extend(last.take().map(|(k, v)| (k.clone(), v)));
                                        last = Some((k, *val));
                                    }
                                }
                            }
                        }
                        want.extend(last.take().map(|(k, v)| (k.clone(), v)));
                        let mut got = Vec::new();
                        let mut from = lo;
                        loop {
                            let mut out = VecDeque::new();
                            let l = o.layers();
                            let resume = l.postings.chunk(&from, &hi, floor, at, max, &mut out);
                            prop_assert!(out.len() <= max);
                            got.extend(out);
                            match resume {
                                Some(k) => from = Bound::Excluded(k),
                                None => break,
                            }
                        }
                        prop_assert_eq!(got, want);
                    }
                    LayerOp::Merge => o.merge_pending(),
                }
                let l = o.layers();
                let layer = &l.postings;
                prop_assert_eq!(layer.len(), model.len());
                for w in layer.runs.windows(2) {
                    prop_assert!(w[0].max_ver < w[1].min_ver);
                }
                prop_assert!(layer.runs.len() <= MAX_RUNS);
                for r in &layer.runs {
                    prop_assert!(r.entries.windows(2).all(|e| (&e[0].0, e[0].1) < (&e[1].0, e[1].1)));
                }
                let mut walked = Vec::new();
                layer.for_each_latest(0, &mut |k, v| {
                    walked.push((k.clone(), *v));
                    Ok(())
                }).expect("walk");
                let mut newest: BTreeMap<StrKey, Option<u64>> = BTreeMap::new();
                for ((k, _), v) in &model {
                    newest.insert(k.clone(), *v);
                }
                prop_assert_eq!(walked, newest.into_iter().collect::<Vec<_>>());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 64,
            rng_seed: proptest::test_runner::RngSeed::Fixed(5),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]
        /// A fold through cursor runs and plain inserts leaves the table with exactly
        /// the entries a map model says: long runs into one gap, runs cut short by an
        /// existing key, replaced values, removals of present and absent keys.
        #[test]
        fn sorted_writes_leave_exactly_the_modelled_entries(
            existing in prop::collection::btree_map((0u8..3, 0u64..200), 0u64..9, 0..150),
            changes in prop::collection::btree_map(
                (0u8..3, 0u64..200),
                prop_oneof![3 => (0u64..9).prop_map(Some), 1 => Just(None)],
                0..300,
            ),
        ) {
            let term = |t: u8| ["ka", "kalo", "mi"][usize::from(t)];
            let db = redb::Database::builder()
                .create_with_backend(redb::backends::InMemoryBackend::new())
                .expect("db");
            let txn = db.begin_write().expect("txn");
            let mut model = BTreeMap::new();
            {
                let mut t = txn.open_table(SORTED).expect("table");
                for ((k, id), v) in &existing {
                    t.insert((term(*k), *id), *v).expect("insert");
                    model.insert((term(*k).to_string(), *id), *v);
                }
                let keys: Vec<(StrKey, Option<u64>)> = changes
                    .iter()
                    .map(|((k, id), v)| ((Text::from(term(*k)), *id), *v))
                    .collect();
                let items: Vec<Entry<'_, StrKey, u64>> = keys.iter().map(|(k, v)| (k, v)).collect();
                t.apply_sorted(&items).expect("write");
                for ((k, id), v) in &changes {
                    match v {
                        Some(v) => model.insert((term(*k).to_string(), *id), *v),
                        None => model.remove(&(term(*k).to_string(), *id)),
                    };
                }
                let got: BTreeMap<(String, u64), u64> = t
                    .iter()
                    .expect("iter")
                    .map(|e| {
                        let (k, v) = e.expect("entry");
                        let (text, id) = k.value();
                        ((text.to_string(), id), v.value())
                    })
                    .collect();
                prop_assert_eq!(got, model);
            }
            txn.commit().expect("commit");
        }
    }

    #[test]
    fn streams_resume_across_chunks_and_the_writers_changes_win() {
        let o = Overlay::default();
        let mut c = IndexChanges::default();
        for id in 0..(3 * CHUNK as u64 + 7) {
            c.postings.insert(("t".into(), id), Some(id));
        }
        commit(&o, c, None);
        let mut own = IndexChanges::default();
        own.postings.insert(("t".into(), 5), None);
        own.postings.insert(("t".into(), 10_000), Some(1));
        own.postings.insert(("s".into(), 1), Some(1));
        let view = View {
            overlay: &o,
            floor: 0,
            at: u64::MAX,
            private: Some(&own),
        };
        let got: Vec<_> = view
            .stream(&POSTINGS, || {
                (
                    Bound::Included((Text::from("t"), 0)),
                    Bound::Included((Text::from("t"), u64::MAX)),
                )
            })
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(got.len(), 3 * CHUNK + 7 + 1);
        assert!(got.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(got[5], (("t".into(), 5), None));
        assert_eq!(got.last(), Some(&(("t".into(), 10_000), Some(1))));
        // An empty or inverted range yields nothing (and does not panic).
        let none: Vec<_> = view
            .stream(&POSTINGS, || {
                (
                    Bound::Excluded((Text::from("t"), 3)),
                    Bound::Excluded((Text::from("t"), 3)),
                )
            })
            .into_iter()
            .flatten()
            .collect();
        assert!(none.is_empty());
        // An index without overlay entries is not looked at.
        assert!(view.stream(&POS, || unreachable!()).is_none());
    }

    #[test]
    fn merge_replaces_and_hides_base_entries() {
        let base: Vec<Result<u64, String>> = vec![Ok(1u64), Ok(2), Ok(4), Ok(6)];
        let over = vec![(2u64, None), (3, Some(30u64)), (4, Some(40)), (7, Some(70))];
        let mut seen = Vec::new();
        merge(
            base.into_iter(),
            Some(over.into_iter()),
            |b, k| b.cmp(k),
            |item| {
                seen.push(match item {
                    Item::Base(b) => (*b, 0),
                    Item::Over(k, v) => (*k, *v),
                });
                Ok(true)
            },
        )
        .expect("merge");
        assert_eq!(seen, vec![(1, 0), (3, 30), (4, 40), (6, 0), (7, 70)]);
    }
}
