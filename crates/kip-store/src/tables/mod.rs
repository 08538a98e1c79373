//! The redb tables and the two views over them: [`ReadTables`] (a read snapshot) and
//! [`WriteTables`] (inside one write transaction). Both implement [`GraphRead`] through
//! the same generic helpers, so reads inside a write see exactly what a snapshot would.

use super::keys::{KeyCache, FILL_LIMIT};
use super::overlay::{
    self, decode_state, encode_state, fold_index, merge, write_sorted, AttrKey, Changes,
    IndexChanges, Item, OspKey, Overlay, PosKey, Snapshot, StrKey, Text, View, Which,
};
use super::postings;
use super::{
    decode, encode, storage_error, ConceptRecord, Continue, ElemRef, GraphRead, GraphWrite,
    PropRecord, StoreResult,
};
use super::{TEXT_DOCS, TEXT_LEN};
use crate::text;
use redb::{
    ReadOnlyTable, ReadTransaction, ReadableTable, ReadableTableMetadata, Table, TableDefinition,
    WriteTransaction,
};
use std::ops::Bound;
use std::sync::Arc;

mod graph_read;
use graph_read::read;
#[cfg(test)]
mod ceiling;
mod elements;
mod history;
pub(crate) use elements::{RefKey, ELEMENTS, ELEMENT_REFS};
pub(crate) use history::{
    convert_old_changes, ChangeKey, VersionKey, HIST_CHANGES, HIST_COMMITS, HIST_VERSIONS,
};
mod graph_write;
mod oplog;
use oplog::{
    OP_DEL_CONCEPT, OP_DEL_PROP, OP_META, OP_PRUNE_REQUESTS, OP_PUT_CONCEPT, OP_PUT_PROP,
    OP_PUT_REQUEST,
};

pub(crate) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
pub(crate) const CONCEPTS: TableDefinition<u64, &[u8]> = TableDefinition::new("concepts");
pub(crate) const CONCEPT_KEY: TableDefinition<(&str, &str), u64> =
    TableDefinition::new("concept_key");
pub(crate) const CONCEPT_TYPE: TableDefinition<(&str, u64), ()> =
    TableDefinition::new("concept_type");
pub(crate) const CONCEPT_NAME: TableDefinition<(&str, u64), ()> =
    TableDefinition::new("concept_name");
pub(crate) const PROPS: TableDefinition<u64, &[u8]> = TableDefinition::new("props");
pub(crate) const SPO: TableDefinition<(u64, &str, u64), u64> = TableDefinition::new("spo");
pub(crate) const POS: TableDefinition<(&str, u64, u64), u64> = TableDefinition::new("pos");
pub(crate) const OSP: TableDefinition<(u64, &str, u64), u64> = TableDefinition::new("osp");
pub(crate) const STATS: TableDefinition<&str, u64> = TableDefinition::new("stats");
/// (type, attribute, value key, concept) -> (): see [`crate::attrs`].
pub(crate) const ATTR_VALUES: TableDefinition<(&str, &str, &str, u64), ()> =
    TableDefinition::new("attr_values");
/// (term, first element) -> a block of postings: per element the weighted term frequency
/// and the document length, so BM25 needs no second lookup (see `store/postings.rs`).
pub(crate) use super::postings::POSTING_BLOCKS as POSTINGS;
/// element ([`ElemRef::encode`]) -> its embedding: the hash of the text embedded (u64, little-endian), then the
/// vector (f32 little-endian). Written by the engine's embedding worker, not logged in
/// the write-ahead log: a vector lost in a crash is recomputed, because the mark below
/// that asked for it comes back with the replayed write (see `docs/semantics.md`,
/// "Semantic recall").
pub(crate) const VECTORS: TableDefinition<u64, &[u8]> = TableDefinition::new("vectors");
/// element ([`ElemRef::encode`]) -> (): elements whose embedded text changed since their
/// vector was made, that have none, or that were deleted (so the worker drops its copy),
/// kept in the same transaction as the record once vectors are enabled (`meta`
/// [`crate::VECTORS_ON`]).
pub(crate) const EMBED_PENDING: TableDefinition<u64, ()> = TableDefinition::new("embed_pending");
/// seq -> one audit record (JSON): the log of the calls made to the nexus (see the
/// engine's `audit` module). Not graph data: not in the write-ahead log (its writes
/// commit durably), not in the overlay, read with its own transactions.
pub(crate) const AUDIT: TableDefinition<u64, &[u8]> = TableDefinition::new("audit_log");
/// The request log (see `kip_storage::RequestLog`): key -> made-at (u64, little-endian)
/// followed by the recorded outcome. Logged in the write-ahead log like the records.
pub(crate) const REQUESTS: TableDefinition<&str, &[u8]> = TableDefinition::new("request_log");
/// (made at, key) -> (): the request log in age order, for pruning.
pub(crate) const REQUESTS_BY_TIME: TableDefinition<(u64, &str), ()> =
    TableDefinition::new("request_log_time");
/// Storage format 1 kept each element's analysed text here; format 2 derives it from the
/// record when needed, and the migration deletes this table.
pub(crate) const LEGACY_DOCS: TableDefinition<u64, &[u8]> = TableDefinition::new("text_docs");

const NEXT_CONCEPT: &str = "next_concept_id";
const NEXT_PROP: &str = "next_prop_id";
/// `meta` key: the sequence number of the last write-ahead log record applied.
pub(crate) const WAL_SEQ: &str = "wal_seq";
/// `meta` key: the overlay's `(floor, version)` as of this snapshot (see
/// `store/overlay.rs`); reset when the nexus opens.
const OVERLAY_STATE: &str = "overlay_state";

/// A transaction whose operation log grows past this is committed durably instead of
/// through the write-ahead log (bulk loads: one big sequential write either way).
const LOG_LIMIT: usize = 32 << 20;
/// A transaction writes its staged records and `spo` keys into redb once it holds this
/// many (bounds its memory; a 1,000-block capsule stays well below).
const MAX_STAGED: usize = 1 << 16;

/// The key of `attr_values`: (type, attribute, value key, concept).
type AttrTableKey = (&'static str, &'static str, &'static str, u64);

/// `spo` key in a transaction's staged writes: `(subject, predicate, object)`.
type SpoKey = (u64, Text, u64);

/// Record and `spo` writes of a write transaction not yet in the redb tables (`None`:
/// removed). They go in at the end of the transaction in key order ([`write_sorted`]): a
/// capsule's new ids are consecutive, and a new subject's links sit together in `spo`,
/// so most of them enter through one cursor run instead of one root-to-leaf descent and
/// leaf rewrite each. The transaction's reads look here first.
#[derive(Debug, Default)]
struct Staged {
    concepts: Staging<u64, Vec<u8>>,
    props: Staging<u64, Vec<u8>>,
    spo: Staging<SpoKey, u64>,
}

/// Staged writes of one table (read back by key during the transaction, so a map).
type Staging<K, V> = std::collections::BTreeMap<K, Option<V>>;

impl Staged {
    fn len(&self) -> usize {
        self.concepts.len() + self.props.len() + self.spo.len()
    }
}

/// What a write transaction leaves for the write-ahead log (see [`super::wal`]).
#[derive(Debug)]
pub enum Sealed {
    /// Nothing was written.
    Nothing,
    /// One log record: append it, then commit without waiting for the disk.
    Record {
        /// Sequence number (also stored in `meta` by this transaction).
        seq: u64,
        /// The operation log.
        payload: Vec<u8>,
    },
    /// Too large for the log (or a change the log cannot express): commit durably.
    Durable,
}

/// A finished write transaction, ready for the nexus to commit.
#[derive(Debug)]
pub struct Finished {
    /// What goes into the write-ahead log.
    pub sealed: Sealed,
    /// The transaction's index changes, to publish into the overlay at commit...
    pub(crate) changes: IndexChanges,
    /// ... under this version (the one its `meta` names); `None` when there are none.
    pub version: Option<u64>,
    /// The overlay version the transaction folded up to, if it folded.
    pub folded: Option<u64>,
}

/// Read-only view of every table in one snapshot.
pub struct ReadTables {
    meta: ReadOnlyTable<&'static str, &'static [u8]>,
    concepts: ReadOnlyTable<u64, &'static [u8]>,
    concept_key: ReadOnlyTable<(&'static str, &'static str), u64>,
    concept_type: ReadOnlyTable<(&'static str, u64), ()>,
    concept_name: ReadOnlyTable<(&'static str, u64), ()>,
    props: ReadOnlyTable<u64, &'static [u8]>,
    spo: ReadOnlyTable<(u64, &'static str, u64), u64>,
    pos: ReadOnlyTable<(&'static str, u64, u64), u64>,
    osp: ReadOnlyTable<(u64, &'static str, u64), u64>,
    stats: ReadOnlyTable<&'static str, u64>,
    postings: ReadOnlyTable<(&'static str, u64), &'static [u8]>,
    attrs: ReadOnlyTable<AttrTableKey, ()>,
    vectors: ReadOnlyTable<u64, &'static [u8]>,
    embed_pending: ReadOnlyTable<u64, ()>,
    /// `None` in a store written before the request log existed and not yet opened for
    /// writing.
    requests: Option<ReadOnlyTable<&'static str, &'static [u8]>>,
    /// KIP 2.0 element records; `None` in a store written before they existed and not
    /// yet opened for writing (likewise `element_refs`).
    elements: Option<ReadOnlyTable<(u32, u64), &'static [u8]>>,
    element_refs: Option<ReadOnlyTable<RefKey, ()>>,
    /// History (`tables/history.rs`); `None` in a store written before it existed and
    /// not yet opened for writing.
    hist_versions: Option<ReadOnlyTable<VersionKey, &'static [u8]>>,
    hist_changes: Option<ReadOnlyTable<ChangeKey, &'static [u8]>>,
    hist_commits: Option<ReadOnlyTable<(u32, u64), &'static [u8]>>,
    overlay: Arc<Overlay>,
    snapshot: Snapshot,
}

impl ReadTables {
    fn pending_delta(&self, _key: &str) -> i64 {
        0
    }

    /// Nothing to remember in a snapshot (see [`WriteTables::note_absent`]).
    fn note_absent(&self, _key: (u64, &str, u64)) {}

    fn staged(&self) -> Option<&Staged> {
        None
    }

    /// Opens every table of a read transaction (the store must have been initialised).
    /// `token` is the overlay's [`Overlay::reader_token`], taken before `txn` began.
    pub fn open(
        txn: &ReadTransaction,
        overlay: Arc<Overlay>,
        token: Arc<()>,
    ) -> StoreResult<ReadTables> {
        let meta = txn.open_table(META).map_err(storage_error)?;
        let (floor, version) = meta
            .get(OVERLAY_STATE)
            .map_err(storage_error)?
            .map(|g| decode_state(g.value()))
            .unwrap_or((0, 0));
        let snapshot = Snapshot::new(floor, version, token);
        Ok(ReadTables {
            meta,
            concepts: txn.open_table(CONCEPTS).map_err(storage_error)?,
            concept_key: txn.open_table(CONCEPT_KEY).map_err(storage_error)?,
            concept_type: txn.open_table(CONCEPT_TYPE).map_err(storage_error)?,
            concept_name: txn.open_table(CONCEPT_NAME).map_err(storage_error)?,
            props: txn.open_table(PROPS).map_err(storage_error)?,
            spo: txn.open_table(SPO).map_err(storage_error)?,
            pos: txn.open_table(POS).map_err(storage_error)?,
            osp: txn.open_table(OSP).map_err(storage_error)?,
            stats: txn.open_table(STATS).map_err(storage_error)?,
            postings: txn.open_table(POSTINGS).map_err(storage_error)?,
            attrs: txn.open_table(ATTR_VALUES).map_err(storage_error)?,
            vectors: txn.open_table(VECTORS).map_err(storage_error)?,
            embed_pending: txn.open_table(EMBED_PENDING).map_err(storage_error)?,
            requests: match txn.open_table(REQUESTS) {
                Ok(t) => Some(t),
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(storage_error(e)),
            },
            elements: match txn.open_table(ELEMENTS) {
                Ok(t) => Some(t),
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(storage_error(e)),
            },
            element_refs: match txn.open_table(ELEMENT_REFS) {
                Ok(t) => Some(t),
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(storage_error(e)),
            },
            hist_versions: match txn.open_table(HIST_VERSIONS) {
                Ok(t) => Some(t),
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(storage_error(e)),
            },
            hist_changes: match txn.open_table(HIST_CHANGES) {
                Ok(t) => Some(t),
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(storage_error(e)),
            },
            hist_commits: match txn.open_table(HIST_COMMITS) {
                Ok(t) => Some(t),
                Err(redb::TableError::TableDoesNotExist(_)) => None,
                Err(e) => return Err(storage_error(e)),
            },
            overlay,
            snapshot,
        })
    }

    fn view(&self) -> View<'_> {
        View::of_snapshot(&self.overlay, &self.snapshot)
    }

    fn key_lookup(&self, concept_type: &str, name: &str) -> StoreResult<Option<u64>> {
        read::concept_by_key(&self.concept_key, concept_type, name)
    }
}

impl Drop for ReadTables {
    /// The last reader of an older snapshot lets the folded entries it needed go.
    fn drop(&mut self) {
        self.overlay.end_read(&mut self.snapshot);
    }
}

/// Read-write view of every table inside one write transaction.
///
/// The pure secondary indexes (`concept_type`, `concept_name`, `pos`, `osp`, postings)
/// are written to the in-memory overlay (`store/overlay.rs`): this transaction's changes
/// stay in sorted maps, are published into the shared overlay at commit, and reach the
/// redb tables when the overlay is folded.
pub struct WriteTables<'t> {
    meta: Table<'t, &'static str, &'static [u8]>,
    concepts: Table<'t, u64, &'static [u8]>,
    concept_key: Table<'t, (&'static str, &'static str), u64>,
    concept_type: Table<'t, (&'static str, u64), ()>,
    concept_name: Table<'t, (&'static str, u64), ()>,
    props: Table<'t, u64, &'static [u8]>,
    spo: Table<'t, (u64, &'static str, u64), u64>,
    pos: Table<'t, (&'static str, u64, u64), u64>,
    osp: Table<'t, (u64, &'static str, u64), u64>,
    stats: Table<'t, &'static str, u64>,
    postings: Table<'t, (&'static str, u64), &'static [u8]>,
    attrs: Table<'t, AttrTableKey, ()>,
    vectors: Table<'t, u64, &'static [u8]>,
    embed_pending: Table<'t, u64, ()>,
    audit: Table<'t, u64, &'static [u8]>,
    requests: Table<'t, &'static str, &'static [u8]>,
    requests_by_time: Table<'t, (u64, &'static str), ()>,
    elements: Table<'t, (u32, u64), &'static [u8]>,
    element_refs: Table<'t, RefKey, ()>,
    hist_versions: Table<'t, VersionKey, &'static [u8]>,
    hist_changes: Table<'t, ChangeKey, &'static [u8]>,
    hist_commits: Table<'t, (u32, u64), &'static [u8]>,
    /// This transaction's place in history (`kip_storage::history`).
    txn_history: kip_storage::history::TxnHistory,
    /// Whether this store keeps embedding marks ([`crate::VECTORS_ON`] in `meta`).
    vectors_on: bool,
    overlay: &'t Overlay,
    /// Overlay versions up to this one are in the redb tables (see `store/overlay.rs`).
    floor: u64,
    /// The newest committed overlay version when the transaction began.
    top: u64,
    /// This transaction's changes to the overlaid indexes.
    changes: IndexChanges,
    /// Set once this transaction folded the shared overlay into redb (up to `top`).
    folded: Option<u64>,
    /// Statistics deltas of this transaction, applied by [`WriteTables::flush`]: hot
    /// counters (links per predicate) would otherwise be rewritten on every insert.
    pending: std::collections::HashMap<String, i64, foldhash::fast::RandomState>,
    /// Scratch buffer for statistics keys.
    stat_key: String,
    /// The operation log of this transaction (for the write-ahead log); `None` once it
    /// outgrew [`LOG_LIMIT`] or a change bypassed it.
    log: Option<Vec<u8>>,
    /// Identifier counters handed out by this transaction, written by
    /// [`WriteTables::flush`] (one `meta` write per counter, not one per element).
    counters: Vec<(&'static str, u64)>,
    /// Record and `spo` writes waiting to go into redb in key order.
    staged: Staged,
    /// The last `(s, p, o)` a probe found missing from the `spo` table (see
    /// [`WriteTables::note_absent`]).
    spo_absent: std::cell::RefCell<Option<(u64, Text, u64)>>,
}

impl<'t> WriteTables<'t> {
    /// Opens (creating if needed) every table in a write transaction. `overlay` must be
    /// the nexus's overlay, and `txn` the only write transaction (redb guarantees that).
    pub fn open(txn: &'t WriteTransaction, overlay: &'t Overlay) -> StoreResult<WriteTables<'t>> {
        let meta = txn.open_table(META).map_err(storage_error)?;
        let vectors_on = meta
            .get(crate::VECTORS_ON)
            .map_err(storage_error)?
            .is_some();
        let (floor, top) = overlay.writer_start();
        overlay.keys().begin();
        Ok(WriteTables {
            meta,
            concepts: txn.open_table(CONCEPTS).map_err(storage_error)?,
            concept_key: txn.open_table(CONCEPT_KEY).map_err(storage_error)?,
            concept_type: txn.open_table(CONCEPT_TYPE).map_err(storage_error)?,
            concept_name: txn.open_table(CONCEPT_NAME).map_err(storage_error)?,
            props: txn.open_table(PROPS).map_err(storage_error)?,
            spo: txn.open_table(SPO).map_err(storage_error)?,
            pos: txn.open_table(POS).map_err(storage_error)?,
            osp: txn.open_table(OSP).map_err(storage_error)?,
            stats: txn.open_table(STATS).map_err(storage_error)?,
            postings: txn.open_table(POSTINGS).map_err(storage_error)?,
            attrs: txn.open_table(ATTR_VALUES).map_err(storage_error)?,
            vectors: txn.open_table(VECTORS).map_err(storage_error)?,
            embed_pending: txn.open_table(EMBED_PENDING).map_err(storage_error)?,
            requests: txn.open_table(REQUESTS).map_err(storage_error)?,
            requests_by_time: txn.open_table(REQUESTS_BY_TIME).map_err(storage_error)?,
            elements: txn.open_table(ELEMENTS).map_err(storage_error)?,
            element_refs: txn.open_table(ELEMENT_REFS).map_err(storage_error)?,
            hist_versions: txn.open_table(HIST_VERSIONS).map_err(storage_error)?,
            hist_changes: txn.open_table(HIST_CHANGES).map_err(storage_error)?,
            hist_commits: txn.open_table(HIST_COMMITS).map_err(storage_error)?,
            txn_history: Default::default(),
            audit: txn.open_table(AUDIT).map_err(storage_error)?,
            vectors_on,
            overlay,
            floor,
            top,
            changes: IndexChanges::default(),
            folded: None,
            pending: Default::default(),
            stat_key: String::new(),
            log: Some(Vec::new()),
            counters: Vec::new(),
            staged: Staged::default(),
            spo_absent: Default::default(),
        })
    }

    /// Loads a small `concept_key` table whole into the writers' key cache, which then
    /// answers misses too (see `store/keys.rs`). Runs at the first miss, not when the
    /// transaction opens, so opening a nexus (whose first transaction replays the log)
    /// does not pay for it. The table may hold this transaction's own new keys: the cache
    /// has them already, with their undo entries.
    fn fill_keys(&self, keys: &mut KeyCache) -> StoreResult<()> {
        if keys.is_complete() || self.concept_key.len().map_err(storage_error)? > FILL_LIMIT {
            return Ok(());
        }
        let mut all = Vec::new();
        for item in self.concept_key.iter().map_err(storage_error)? {
            let (k, v) = item.map_err(storage_error)?;
            let (t, n) = k.value();
            all.push((t.to_string(), n.to_string(), v.value()));
        }
        keys.fill(all);
        Ok(())
    }

    fn view(&self) -> View<'_> {
        View {
            overlay: self.overlay,
            floor: self.floor,
            at: u64::MAX,
            private: Some(&self.changes),
        }
    }

    /// Records a change to an overlaid index (folding when the transaction holds many).
    fn change<K: Ord, V>(
        &mut self,
        pick: fn(&mut IndexChanges) -> &mut Changes<K, V>,
        key: K,
        value: Option<V>,
    ) -> StoreResult<()> {
        pick(&mut self.changes).insert(key, value);
        if self.changes.len() >= self.overlay.max_txn_changes() {
            self.fold()?;
        }
        Ok(())
    }

    /// Writes the shared overlay (once per transaction) and this transaction's own index
    /// changes into the redb tables, in key order. A durable commit must fold first, so
    /// that the overlay never holds the only copy of an entry whose record is durable
    /// and no longer in the write-ahead log.
    pub fn fold(&mut self) -> StoreResult<()> {
        let overlay = self.overlay;
        let layers = overlay.layers();
        let shared = self.folded.is_none().then_some(self.floor);
        let c = &mut self.changes;
        fold_index(
            &mut self.concept_type,
            shared.map(|f| (&layers.concept_type, f)),
            &mut c.concept_type,
        )?;
        fold_index(
            &mut self.concept_name,
            shared.map(|f| (&layers.concept_name, f)),
            &mut c.concept_name,
        )?;
        fold_index(&mut self.pos, shared.map(|f| (&layers.pos, f)), &mut c.pos)?;
        fold_index(&mut self.osp, shared.map(|f| (&layers.osp, f)), &mut c.osp)?;
        fold_index(
            &mut self.postings,
            shared.map(|f| (&layers.postings, f)),
            &mut c.postings,
        )?;
        fold_index(
            &mut self.attrs,
            shared.map(|f| (&layers.attrs, f)),
            &mut c.attrs,
        )?;
        if self.folded.is_none() {
            self.folded = Some(self.top);
            self.floor = self.top;
        }
        Ok(())
    }

    /// Ends the transaction: [`WriteTables::flush`], [`WriteTables::seal`], a fold when
    /// the commit will be durable, and the overlay state its snapshot will name. Returns
    /// what the commit needs.
    pub fn finish(&mut self) -> StoreResult<Finished> {
        // The commit record goes into the operation log before it is sealed.
        kip_storage::history::finish(self)?;
        self.flush()?;
        let sealed = self.seal()?;
        if matches!(sealed, Sealed::Durable) {
            self.fold()?;
        }
        // Sorted now, so the count the overlay publishes is exact.
        self.changes.sort();
        // The writer is alone (redb's write lock), so its version is the next one.
        let version = (!self.changes.is_empty()).then_some(self.top + 1);
        if version.is_some() || self.folded.is_some() {
            self.store_overlay_state(version.unwrap_or(self.top))?;
        }
        Ok(Finished {
            sealed,
            changes: std::mem::take(&mut self.changes),
            version,
            folded: self.folded,
        })
    }

    /// Folds everything (a checkpoint, or opening the nexus) and records the state;
    /// returns the version folded up to. The transaction must commit durably.
    pub fn fold_all(&mut self) -> StoreResult<Option<u64>> {
        self.fold()?;
        self.store_overlay_state(self.top)?;
        Ok(self.folded)
    }

    /// Stores the overlay's `(floor, version)` as of this transaction in `meta` (not in
    /// the operation log: a replay starts from a new, empty overlay).
    fn store_overlay_state(&mut self, version: u64) -> StoreResult<()> {
        self.meta
            .insert(OVERLAY_STATE, &encode_state(self.floor, version)[..])
            .map_err(storage_error)?;
        Ok(())
    }

    /// `concept_key` through the writers' cache (`store/keys.rs`); a key found in redb
    /// is cached.
    fn key_lookup(&self, concept_type: &str, name: &str) -> StoreResult<Option<u64>> {
        {
            let mut keys = self.overlay.keys();
            if let Some(id) = keys.get(concept_type, name) {
                return Ok(Some(id));
            }
            self.fill_keys(&mut keys)?;
            if keys.is_complete() {
                return Ok(keys.get(concept_type, name));
            }
        }
        let found = read::concept_by_key(&self.concept_key, concept_type, name)?;
        if let Some(id) = found {
            self.overlay.keys().insert(concept_type, name, id);
        }
        Ok(found)
    }

    fn bump_stat(&mut self, key: &str, delta: i64) -> StoreResult<()> {
        match self.pending.get_mut(key) {
            Some(d) => *d += delta,
            None => {
                self.pending.insert(key.to_string(), delta);
            }
        }
        Ok(())
    }

    /// [`WriteTables::bump_stat`] of a counter, its key written into a reused buffer
    /// (no allocation when the key is already pending, the usual case in a capsule).
    fn bump_counter(&mut self, stat: crate::Stat<'_>, delta: i64) -> StoreResult<()> {
        use std::fmt::Write;
        let mut key = std::mem::take(&mut self.stat_key);
        key.clear();
        let _ = match stat {
            crate::Stat::Type(t) => write!(key, "t:{t}"),
            crate::Stat::Predicate(p) => write!(key, "p:{p}"),
            crate::Stat::Attr(t, a) => write!(key, "a:{t}\u{0}{a}"),
            other => write!(key, "{}", other.key()),
        };
        let r = self.bump_stat(&key, delta);
        self.stat_key = key;
        r
    }

    /// Writes the statistics deltas and id counters of this transaction. Must run
    /// before commit (the nexus does it for every write transaction, through
    /// [`WriteTables::finish`]); a transaction dropped without it is meant to be aborted.
    pub fn flush(&mut self) -> StoreResult<()> {
        self.write_staged()?;
        for (key, next) in std::mem::take(&mut self.counters) {
            self.set_meta(key, &next.to_le_bytes())?;
        }
        let pending = std::mem::take(&mut self.pending);
        for (key, delta) in pending {
            if delta != 0 {
                self.apply_stat(&key, delta)?;
            }
        }
        Ok(())
    }

    /// Remembers that the `spo` table has no `key` (the last such probe only), so
    /// filing that link next needs no second lookup ([`WriteTables::check_spo_free`]).
    /// Forgotten whenever staged keys go into the table.
    fn note_absent(&self, key: (u64, &str, u64)) {
        *self.spo_absent.borrow_mut() = Some((key.0, Text::from(key.1), key.2));
    }

    /// Whether the last probe of the `spo` table was for `key` and found nothing.
    pub(crate) fn probed_absent(&self, key: (u64, &str, u64)) -> bool {
        self.spo_absent
            .borrow()
            .as_ref()
            .is_some_and(|(s, p, o)| (*s, p.as_str(), *o) == key)
    }

    fn staged(&self) -> Option<&Staged> {
        Some(&self.staged)
    }

    /// Writes the staged records and `spo` keys into redb, each table in key order.
    fn write_staged(&mut self) -> StoreResult<()> {
        self.spo_absent.get_mut().take();
        let staged = std::mem::take(&mut self.staged);
        let items: Vec<_> = staged.concepts.iter().collect();
        write_sorted(&mut self.concepts, &items, |id| *id, |b| b.as_slice())?;
        let items: Vec<_> = staged.props.iter().collect();
        write_sorted(&mut self.props, &items, |id| *id, |b| b.as_slice())?;
        let items: Vec<_> = staged.spo.iter().collect();
        write_sorted(
            &mut self.spo,
            &items,
            |(s, p, o)| (*s, p.as_str(), *o),
            |id| *id,
        )?;
        Ok(())
    }

    /// Called after every staged write: writes them out once there are many.
    fn staged_grew(&mut self) -> StoreResult<()> {
        if self.staged.len() >= MAX_STAGED {
            self.write_staged()?;
        }
        Ok(())
    }

    fn pending_delta(&self, key: &str) -> i64 {
        self.pending.get(key).copied().unwrap_or(0)
    }

    fn apply_stat(&mut self, key: &str, delta: i64) -> StoreResult<()> {
        let cur = self
            .stats
            .get(key)
            .map_err(storage_error)?
            .map(|g| g.value())
            .unwrap_or(0);
        let next = if delta >= 0 {
            cur.saturating_add(delta.unsigned_abs())
        } else {
            cur.saturating_sub(delta.unsigned_abs())
        };
        if next == 0 {
            self.stats.remove(key).map_err(storage_error)?;
        } else {
            self.stats.insert(key, next).map_err(storage_error)?;
        }
        Ok(())
    }

    /// The next number counter `key` gives, as this transaction sees it.
    fn counter(&self, key: &'static str) -> StoreResult<u64> {
        match self.counters.iter().find(|(k, _)| *k == key) {
            Some((_, next)) => Ok(*next),
            None => Ok(super::meta_u64(self, key)?.unwrap_or(1)),
        }
    }

    fn alloc(&mut self, key: &'static str) -> StoreResult<u64> {
        let cur = match self.counters.iter().find(|(k, _)| *k == key) {
            Some((_, next)) => *next,
            None => super::meta_u64(self, key)?.unwrap_or(1),
        };
        if cur >= (1 << 62) {
            return Err(storage_error("identifier space exhausted"));
        }
        match self.counters.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = cur + 1,
            None => self.counters.push((key, cur + 1)),
        }
        Ok(cur)
    }
}
