//! The shared layers: sorted runs per index ([`Layer`]), publishing a transaction's
//! changes as a run, merging runs (inline, or on the `kip-overlay-merge` thread), and
//! pruning what has been folded.

use super::*;

/// One entry of a run: key, version, value (`None`: a removal).
pub(super) type RunEntry<K, V> = (K, u64, Option<V>);

/// A sorted run: one transaction's published changes, or the merge of several adjacent
/// ones. Entries are sorted by key, then version.
#[derive(Debug)]
pub(super) struct Run<K, V> {
    pub(super) entries: Vec<RunEntry<K, V>>,
    /// Lowest and highest version in the run.
    pub(super) min_ver: u64,
    pub(super) max_ver: u64,
}

impl<K: Clone, V: Clone> Run<K, V> {
    /// The run without the entries `drop` selects, or `None` when nothing is left.
    pub(super) fn without(&self, drop: impl Fn(u64) -> bool) -> Option<Run<K, V>> {
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
pub(super) const FANOUT: usize = 2;
/// At most this many runs per index (a read searches each; one more for a moment after a
/// publish that lost two races with pruning): a server's small writes would otherwise
/// leave about log2(entries / entries per write) of them (about 20 at 2M entries); the
/// cap merges the newest into the smallest instead (a copy of that run per publish, at
/// most 1/2048 of the layer). Bulk loads stay below it (links publish about 1,000
/// entries per index and transaction; a cap of 8 looked 3-5% slower on a 300k load, in
/// three alternated pairs, within this VM's noise).
pub(super) const MAX_RUNS: usize = 12;

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
    pub(super) runs: Vec<Arc<Run<K, V>>>,
    /// Entries in all runs.
    pub(super) len: usize,
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
pub(crate) fn empty_range<K: Ord>(lo: &Bound<K>, hi: &Bound<K>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a >= b
        }
        _ => false,
    }
}

/// The entries of a sorted run whose key lies within `(lo, hi)`.
pub(super) fn run_range<'r, K: Ord, V>(
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
pub(super) fn merge_two<K: Ord + Clone, V: Clone>(
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
pub(super) fn merge_visible<'a, K: Ord, V>(
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
pub(super) fn publish_into<K: Ord + Clone, V: Clone>(
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
pub(super) const BACKGROUND_MIN: usize = 256;

/// The merger thread's work on one index: while the newest run is at least half the
/// size of the run before it (the rule [`publish_into`] applies), merges the newest runs
/// into one, without the lock, and swaps the merged run in for them if they are all
/// still in the layer, side by side (a publish may have appended runs after them
/// meanwhile; a prune or withdrawal that replaced one makes it give up until the next
/// wake-up). Merging adjacent runs keeps every entry and the version order, so readers
/// see the same entries before and after the swap.
pub(super) fn merge_layer<K: Ord + Clone, V: Clone>(overlay: &Overlay, which: &Which<K, V>) {
    for _ in 0..2 * MAX_RUNS {
        if !merge_once(overlay, which, || ()) {
            return;
        }
    }
}

/// One merge of [`merge_layer`]; `between` runs after the merge and before the swap (a
/// test's way to race it). True if it merged something.
pub(super) fn merge_once<K: Ord + Clone, V: Clone>(
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
pub(super) struct MergerSignal {
    /// (work pending, stop)
    pub(super) state: Mutex<(bool, bool)>,
    pub(super) wake: Condvar,
}

impl MergerSignal {
    pub(super) fn set(&self, stop: bool) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.0 = true;
        st.1 |= stop;
        self.wake.notify_one();
    }

    /// Waits for work; false once stopped.
    pub(super) fn wait(&self) -> bool {
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
    pub(super) fn remove_versions(
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

    pub(super) fn unpublish(&mut self, ver: u64) {
        self.remove_versions(|v| v == ver, |r| r.min_ver <= ver && ver <= r.max_ver);
    }

    pub(super) fn prune(&mut self, upto: u64) {
        self.runs.retain(|r| r.max_ver > upto);
        self.remove_versions(|v| v <= upto, |r| r.min_ver <= upto);
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Appends to `out` the resolved entries of keys in `(lo, hi)`: per key the newest
    /// version in `(floor, at]`, keys without one left out. Stops after about `max`
    /// entries; returns the last key examined when it stopped early (resume after it).
    pub(super) fn chunk(
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
    pub(super) fn for_each_latest<'a>(
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
    pub attrs: Layer<AttrKey, ()>,
    /// Folds whose entries are still in memory: (floor, generation token), oldest first.
    pub(super) prunes: VecDeque<(u64, Arc<()>)>,
}

impl Layers {
    pub(super) fn len(&self) -> usize {
        self.concept_type.len()
            + self.concept_name.len()
            + self.pos.len()
            + self.osp.len()
            + self.postings.len()
            + self.attrs.len()
    }

    pub(super) fn prune(&mut self, upto: u64) {
        self.concept_type.prune(upto);
        self.concept_name.prune(upto);
        self.pos.prune(upto);
        self.osp.prune(upto);
        self.postings.prune(upto);
        self.attrs.prune(upto);
    }
}
