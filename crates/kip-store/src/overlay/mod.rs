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
/// `(type, attribute, value key, concept)`: `attr_values`.
pub(crate) type AttrKey = (Text, Text, Text, u64);

mod changes;
mod fold;
mod read;
mod runs;
#[cfg(test)]
mod tests;

pub(crate) use changes::*;
pub(crate) use fold::*;
pub(crate) use read::*;
pub(crate) use runs::*;

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
    counts: [AtomicUsize; 6],
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
        merge_layer(self, &ATTRS);
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
        publish_into(self, &ATTRS, changes.attrs, ver);
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
        l.attrs.unpublish(ver);
        self.store_counts(&l);
    }

    fn store_counts(&self, l: &Layers) {
        let lens = [
            l.concept_type.len(),
            l.concept_name.len(),
            l.pos.len(),
            l.osp.len(),
            l.postings.len(),
            l.attrs.len(),
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
