//! The redb tables and the two views over them: [`ReadTables`] (a read snapshot) and
//! [`WriteTables`] (inside one write transaction). Both implement [`GraphRead`] through
//! the same generic helpers, so reads inside a write see exactly what a snapshot would.

use super::keys::{KeyCache, FILL_LIMIT};
use super::overlay::{
    self, decode_state, encode_state, fold_index, merge, write_sorted, Changes, IndexChanges, Item,
    OspKey, Overlay, PosKey, Snapshot, StrKey, Text, View, Which,
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
/// (term, first element) -> a block of postings: per element the weighted term frequency
/// and the document length, so BM25 needs no second lookup (see `store/postings.rs`).
pub(crate) use super::postings::POSTING_BLOCKS as POSTINGS;
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

/// Operation log tags (see [`WriteTables::apply_log`]).
const OP_PUT_CONCEPT: u8 = 1;
const OP_DEL_CONCEPT: u8 = 2;
const OP_PUT_PROP: u8 = 3;
const OP_DEL_PROP: u8 = 4;
const OP_META: u8 = 5;
/// A transaction whose operation log grows past this is committed durably instead of
/// through the write-ahead log (bulk loads: one big sequential write either way).
const LOG_LIMIT: usize = 32 << 20;
/// A transaction writes its staged records and `spo` keys into redb once it holds this
/// many (bounds its memory; a 1,000-block capsule stays well below).
const MAX_STAGED: usize = 1 << 16;

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
    overlay: Arc<Overlay>,
    snapshot: Snapshot,
}

impl ReadTables {
    fn pending_delta(&self, _key: &str) -> i64 {
        0
    }

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
}

impl<'t> WriteTables<'t> {
    /// Opens (creating if needed) every table in a write transaction. `overlay` must be
    /// the nexus's overlay, and `txn` the only write transaction (redb guarantees that).
    pub fn open(txn: &'t WriteTransaction, overlay: &'t Overlay) -> StoreResult<WriteTables<'t>> {
        let (floor, top) = overlay.writer_start();
        overlay.keys().begin();
        Ok(WriteTables {
            meta: txn.open_table(META).map_err(storage_error)?,
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

    fn log_op(&mut self, tag: u8, id: u64, a: &[u8], b: &[u8]) {
        let Some(log) = self.log.as_mut() else { return };
        if log.len() + a.len() + b.len() + 17 > LOG_LIMIT {
            self.log = None;
            return;
        }
        log.push(tag);
        log.extend_from_slice(&id.to_le_bytes());
        for part in [a, b] {
            // Parts are records and meta values, far below 4 GiB (LOG_LIMIT).
            log.extend_from_slice(&(part.len() as u32).to_le_bytes());
            log.extend_from_slice(part);
        }
    }

    /// Ends the transaction's operation log: stores its sequence number in `meta` and
    /// returns what to append to the write-ahead log. Call after [`WriteTables::flush`].
    pub fn seal(&mut self) -> StoreResult<Sealed> {
        let Some(log) = self.log.take() else {
            return Ok(Sealed::Durable);
        };
        if log.is_empty() {
            return Ok(Sealed::Nothing);
        }
        let seq = super::meta_u64(self, WAL_SEQ)?.unwrap_or(0) + 1;
        self.set_wal_seq(seq)?;
        Ok(Sealed::Record { seq, payload: log })
    }

    /// Sets the sequence number of the last applied log record (after a replay).
    pub fn set_wal_seq(&mut self, seq: u64) -> StoreResult<()> {
        self.meta
            .insert(WAL_SEQ, &seq.to_le_bytes()[..])
            .map_err(storage_error)?;
        Ok(())
    }

    /// Applies an operation log recorded by [`WriteTables::seal`] (write-ahead log replay).
    pub fn apply_log(&mut self, mut payload: &[u8]) -> StoreResult<()> {
        fn take<'a>(p: &mut &'a [u8], n: usize) -> StoreResult<&'a [u8]> {
            if p.len() < n {
                return Err(storage_error(crate::StoreError::Corruption(
                    "write-ahead log record is cut short".into(),
                )));
            }
            let (head, rest) = p.split_at(n);
            *p = rest;
            Ok(head)
        }
        fn part<'a>(p: &mut &'a [u8]) -> StoreResult<&'a [u8]> {
            let mut len = [0u8; 4];
            len.copy_from_slice(take(p, 4)?);
            take(p, u32::from_le_bytes(len) as usize)
        }
        while !payload.is_empty() {
            let tag = take(&mut payload, 1)?[0];
            let mut idb = [0u8; 8];
            idb.copy_from_slice(take(&mut payload, 8)?);
            let id = u64::from_le_bytes(idb);
            let a = part(&mut payload)?;
            let b = part(&mut payload)?;
            match tag {
                OP_PUT_CONCEPT => {
                    let rec: ConceptRecord = decode(a)?;
                    let old = self.concept(id)?;
                    self.put_concept(id, &rec, old.as_ref())?;
                }
                OP_DEL_CONCEPT => {
                    if let Some(old) = self.concept(id)? {
                        self.delete_concept(id, &old)?;
                    }
                }
                OP_PUT_PROP => {
                    let rec: PropRecord = decode(a)?;
                    let old = self.prop(id)?;
                    self.put_prop(id, &rec, old.as_ref())?;
                }
                OP_DEL_PROP => {
                    if let Some(old) = self.prop(id)? {
                        self.delete_prop(id, &old)?;
                    }
                }
                OP_META => {
                    let key = std::str::from_utf8(a).map_err(|_| {
                        storage_error(crate::StoreError::Corruption(
                            "write-ahead log: a meta key is not UTF-8".into(),
                        ))
                    })?;
                    self.set_meta(key, b)?;
                }
                other => {
                    return Err(storage_error(format!(
                        "write-ahead log: unknown operation {other}"
                    )))
                }
            }
        }
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

    /// [`WriteTables::bump_stat`] of `prefix` + `name` (`t:Type`, `p:pred`), without
    /// building the key when it is already pending (the usual case in a capsule).
    fn bump_named_stat(&mut self, prefix: &str, name: &str, delta: i64) -> StoreResult<()> {
        let mut key = std::mem::take(&mut self.stat_key);
        key.clear();
        key.push_str(prefix);
        key.push_str(name);
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

    fn staged(&self) -> Option<&Staged> {
        Some(&self.staged)
    }

    /// Writes the staged records and `spo` keys into redb, each table in key order.
    fn write_staged(&mut self) -> StoreResult<()> {
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

/// Generic read helpers shared by both views.
mod read {
    use super::*;

    /// A concept or proposition record: the transaction's staged write if there is one,
    /// else the table's.
    pub fn record<T: serde::de::DeserializeOwned>(
        t: &impl ReadableTable<u64, &'static [u8]>,
        staged: Option<&Staging<u64, Vec<u8>>>,
        id: u64,
    ) -> StoreResult<Option<T>> {
        if let Some(s) = staged.and_then(|s| s.get(&id)) {
            return s.as_deref().map(decode).transpose();
        }
        match t.get(id).map_err(storage_error)? {
            Some(g) => Ok(Some(decode(g.value())?)),
            None => Ok(None),
        }
    }

    /// Entries in a record table, counting the transaction's staged writes.
    pub fn count(
        t: &impl ReadableTable<u64, &'static [u8]>,
        staged: Option<&Staging<u64, Vec<u8>>>,
    ) -> StoreResult<u64> {
        let mut n = t.len().map_err(storage_error)?;
        for (id, v) in staged.into_iter().flatten() {
            let present = t.get(*id).map_err(storage_error)?.is_some();
            match (present, v.is_some()) {
                (false, true) => n += 1,
                (true, false) => n = n.saturating_sub(1),
                _ => {}
            }
        }
        Ok(n)
    }

    pub fn concept_by_key(
        t: &impl ReadableTable<(&'static str, &'static str), u64>,
        ty: &str,
        name: &str,
    ) -> StoreResult<Option<u64>> {
        Ok(t.get((ty, name)).map_err(storage_error)?.map(|g| g.value()))
    }

    /// `concept_type` / `concept_name`: the ids filed under `key`, in id order.
    pub fn scan_index(
        t: &impl ReadableTable<(&'static str, u64), ()>,
        view: View<'_>,
        which: &Which<StrKey, ()>,
        key: &str,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        // Open-ended, stopping at the first key of another text: cheaper per entry than
        // a bounded range, which compares every key with the end bound.
        let base = t.range((key, 0u64)..).map_err(storage_error)?;
        let over = view.stream(which, || {
            (
                Bound::Included((Text::from(key), 0)),
                Bound::Included((Text::from(key), u64::MAX)),
            )
        });
        merge(
            base,
            over,
            |(k, _), ok: &StrKey| k.value().cmp(&(ok.0.as_str(), ok.1)),
            |item| match item {
                Item::Base((k, _)) => {
                    let (kk, id) = k.value();
                    if kk != key {
                        return Ok(false);
                    }
                    f(id)
                }
                Item::Over(ok, ()) => f(ok.1),
            },
        )
    }

    /// Every id of a record table (with the transaction's staged writes), in order.
    pub fn scan_ids(
        t: &impl ReadableTable<u64, &'static [u8]>,
        staged: Option<&Staging<u64, Vec<u8>>>,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let over = staged
            .filter(|s| !s.is_empty())
            .map(|s| s.iter().map(|(id, v)| (*id, v.as_ref().map(|_| ()))));
        merge(
            t.iter().map_err(storage_error)?,
            over,
            |(k, _), id: &u64| k.value().cmp(id),
            |item| match item {
                Item::Base((k, _)) => f(k.value()),
                Item::Over(id, ()) => f(*id),
            },
        )
    }

    /// Scans a `(u64, &str, u64) -> id` table for a fixed first component and optional
    /// second component: `f(second, third, id)`.
    pub fn scan_triple(
        t: &impl ReadableTable<(u64, &'static str, u64), u64>,
        staged: Option<&Staging<SpoKey, u64>>,
        first: u64,
        second: Option<&str>,
        f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let start = second.unwrap_or("");
        let base = t.range((first, start, 0u64)..).map_err(storage_error)?;
        let over = staged.filter(|s| !s.is_empty()).map(|s| {
            let lo = Bound::Included((first, Text::from(start), 0));
            let hi = match second {
                Some(p) => Bound::Included((first, Text::from(p), u64::MAX)),
                None if first < u64::MAX => Bound::Excluded((first + 1, Text::default(), 0)),
                None => Bound::Unbounded,
            };
            s.range((lo, hi)).map(|(k, v)| (k.clone(), *v))
        });
        merge(
            base,
            over,
            |(k, _), ok: &SpoKey| {
                let (a, b, c) = k.value();
                (a, b, c).cmp(&(ok.0, ok.1.as_str(), ok.2))
            },
            |item| match item {
                Item::Base((k, v)) => {
                    let (a, b, c) = k.value();
                    if a != first || second.is_some_and(|s| s != b) {
                        return Ok(false);
                    }
                    f(b, ElemRef::decode(c), v.value())
                }
                Item::Over(ok, id) => f(&ok.1, ElemRef::decode(ok.2), *id),
            },
        )
    }

    /// `osp`: the links into `object` (with predicate `pred` if given), merged with the
    /// overlay: `f(predicate, subject, link id)` in key order.
    pub fn scan_osp(
        t: &impl ReadableTable<(u64, &'static str, u64), u64>,
        view: View<'_>,
        object: u64,
        pred: Option<&str>,
        f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let start = pred.unwrap_or("");
        let base = t.range((object, start, 0u64)..).map_err(storage_error)?;
        let over = view.stream(&overlay::OSP, || {
            let lo = Bound::Included((object, Text::from(start), 0));
            let hi = match pred {
                Some(p) => Bound::Included((object, Text::from(p), u64::MAX)),
                None if object < u64::MAX => Bound::Excluded((object + 1, Text::default(), 0)),
                None => Bound::Unbounded,
            };
            (lo, hi)
        });
        merge(
            base,
            over,
            |(k, _), ok: &OspKey| {
                let (a, b, c) = k.value();
                (a, b, c).cmp(&(ok.0, ok.1.as_str(), ok.2))
            },
            |item| match item {
                Item::Base((k, v)) => {
                    let (a, b, c) = k.value();
                    if a != object || pred.is_some_and(|p| p != b) {
                        return Ok(false);
                    }
                    f(b, ElemRef::decode(c), v.value())
                }
                Item::Over(ok, id) => f(&ok.1, ElemRef::decode(ok.2), *id),
            },
        )
    }

    /// `pos`: every link with predicate `p`: `f(subject, object, link id)`.
    pub fn scan_pos(
        t: &impl ReadableTable<(&'static str, u64, u64), u64>,
        view: View<'_>,
        p: &str,
        f: &mut dyn FnMut(ElemRef, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let base = t.range((p, 0u64, 0u64)..).map_err(storage_error)?;
        let over = view.stream(&overlay::POS, || {
            (
                Bound::Included((Text::from(p), 0, 0)),
                Bound::Included((Text::from(p), u64::MAX, u64::MAX)),
            )
        });
        merge(
            base,
            over,
            |(k, _), ok: &PosKey| k.value().cmp(&(ok.0.as_str(), ok.1, ok.2)),
            |item| match item {
                Item::Base((k, v)) => {
                    let (pp, o, s) = k.value();
                    if pp != p {
                        return Ok(false);
                    }
                    f(ElemRef::decode(s), ElemRef::decode(o), v.value())
                }
                Item::Over(ok, id) => f(ElemRef::decode(ok.2), ElemRef::decode(ok.1), *id),
            },
        )
    }

    /// Text postings from `from` on, in term order: `f(term, key, tf, doc length)`.
    pub fn scan_postings(
        t: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
        view: View<'_>,
        from: &str,
        f: &mut dyn FnMut(&str, u64, u32, u32) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let base = postings::BlockPostings::from_term(t, from)?;
        let over = view.stream(&overlay::POSTINGS, || {
            (Bound::Included((Text::from(from), 0)), Bound::Unbounded)
        });
        merge(
            base,
            over,
            |(term, key, _), ok: &StrKey| (&**term, *key).cmp(&(ok.0.as_str(), ok.1)),
            |item| match item {
                Item::Base((term, key, packed)) => {
                    f(term, *key, (packed >> 32) as u32, *packed as u32)
                }
                Item::Over(ok, packed) => f(&ok.0, ok.1, (packed >> 32) as u32, *packed as u32),
            },
        )
    }

    /// One posting: (weighted tf, document length).
    pub fn posting(
        t: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
        view: View<'_>,
        term: &str,
        key: u64,
    ) -> StoreResult<Option<(u32, u32)>> {
        let over = view
            .stream(&overlay::POSTINGS, || {
                let exact = (Text::from(term), key);
                (Bound::Included(exact.clone()), Bound::Included(exact))
            })
            .and_then(|mut s| s.next());
        let packed = match over {
            Some((_, v)) => v,
            None => postings::lookup(t, term, key)?,
        };
        Ok(packed.map(|p| ((p >> 32) as u32, p as u32)))
    }

    pub fn stat(t: &impl ReadableTable<&'static str, u64>, key: &str) -> StoreResult<u64> {
        Ok(t.get(key)
            .map_err(storage_error)?
            .map(|g| g.value())
            .unwrap_or(0))
    }

    pub fn meta(
        t: &impl ReadableTable<&'static str, &'static [u8]>,
        key: &str,
    ) -> StoreResult<Option<Vec<u8>>> {
        Ok(t.get(key)
            .map_err(storage_error)?
            .map(|g| g.value().to_vec()))
    }
}

macro_rules! impl_graph_read {
    ($ty:ty) => {
        impl GraphRead for $ty {
            fn concept(&self, id: u64) -> StoreResult<Option<ConceptRecord>> {
                read::record(&self.concepts, self.staged().map(|s| &s.concepts), id)
            }
            fn concept_by_key(&self, concept_type: &str, name: &str) -> StoreResult<Option<u64>> {
                self.key_lookup(concept_type, name)
            }
            fn scan_type(
                &self,
                concept_type: &str,
                f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_index(
                    &self.concept_type,
                    self.view(),
                    &overlay::CONCEPT_TYPE,
                    concept_type,
                    f,
                )
            }
            fn scan_name(
                &self,
                name: &str,
                f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_index(
                    &self.concept_name,
                    self.view(),
                    &overlay::CONCEPT_NAME,
                    name,
                    f,
                )
            }
            fn scan_concepts(
                &self,
                f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_ids(&self.concepts, self.staged().map(|s| &s.concepts), f)
            }
            fn prop(&self, id: u64) -> StoreResult<Option<PropRecord>> {
                read::record(&self.props, self.staged().map(|s| &s.props), id)
            }
            fn prop_by_spo(&self, s: ElemRef, p: &str, o: ElemRef) -> StoreResult<Option<u64>> {
                let key = (s.encode(), p, o.encode());
                if let Some(staged) = self.staged().filter(|st| !st.spo.is_empty()) {
                    if let Some(id) = staged.spo.get(&(key.0, Text::from(p), key.2)) {
                        return Ok(*id);
                    }
                }
                Ok(self.spo.get(key).map_err(storage_error)?.map(|g| g.value()))
            }
            fn scan_out(
                &self,
                s: ElemRef,
                p: Option<&str>,
                f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_triple(&self.spo, self.staged().map(|s| &s.spo), s.encode(), p, f)
            }
            fn scan_in(
                &self,
                o: ElemRef,
                p: Option<&str>,
                f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_osp(&self.osp, self.view(), o.encode(), p, f)
            }
            fn scan_predicate(
                &self,
                p: &str,
                f: &mut dyn FnMut(ElemRef, ElemRef, u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_pos(&self.pos, self.view(), p, f)
            }
            fn scan_props(
                &self,
                f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_ids(&self.props, self.staged().map(|s| &s.props), f)
            }
            fn stat(&self, key: &str) -> StoreResult<u64> {
                let base = read::stat(&self.stats, key)?;
                let delta = self.pending_delta(key);
                Ok(if delta >= 0 {
                    base.saturating_add(delta.unsigned_abs())
                } else {
                    base.saturating_sub(delta.unsigned_abs())
                })
            }
            fn totals(&self) -> StoreResult<(u64, u64)> {
                Ok((
                    read::count(&self.concepts, self.staged().map(|s| &s.concepts))?,
                    read::count(&self.props, self.staged().map(|s| &s.props))?,
                ))
            }
            fn meta(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
                read::meta(&self.meta, key)
            }
            fn scan_postings(
                &self,
                from: &str,
                f: &mut dyn FnMut(&str, u64, u32, u32) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_postings(&self.postings, self.view(), from, f)
            }
            fn posting(&self, term: &str, key: u64) -> StoreResult<Option<(u32, u32)>> {
                read::posting(&self.postings, self.view(), term, key)
            }
        }
    };
}

impl_graph_read!(ReadTables);
impl_graph_read!(WriteTables<'_>);

impl GraphWrite for WriteTables<'_> {
    fn alloc_concept_id(&mut self) -> StoreResult<u64> {
        self.alloc(NEXT_CONCEPT)
    }

    fn alloc_prop_id(&mut self) -> StoreResult<u64> {
        self.alloc(NEXT_PROP)
    }

    fn put_concept(
        &mut self,
        id: u64,
        rec: &ConceptRecord,
        old: Option<&ConceptRecord>,
    ) -> StoreResult<()> {
        if old.is_none_or(|o| text::concept_text_changed(o, rec)) {
            let key = ElemRef::Concept(id).encode();
            if let Some(o) = old {
                self.unindex(key, &text::concept_doc(o))?;
            }
            self.index(key, &text::concept_doc(rec))?;
        }
        let bytes = encode(rec)?;
        self.log_op(OP_PUT_CONCEPT, id, &bytes, &[]);
        self.staged.concepts.insert(id, Some(bytes));
        let same_key =
            old.is_some_and(|o| o.concept_type == rec.concept_type && o.name == rec.name);
        if !same_key {
            if let Some(o) = old {
                self.file_key(id, o, false)?;
            }
            self.file_key(id, rec, true)?;
        }
        self.staged_grew()
    }

    fn delete_concept(&mut self, id: u64, rec: &ConceptRecord) -> StoreResult<()> {
        self.log_op(OP_DEL_CONCEPT, id, &[], &[]);
        self.unindex(ElemRef::Concept(id).encode(), &text::concept_doc(rec))?;
        self.staged.concepts.insert(id, None);
        self.file_key(id, rec, false)?;
        self.staged_grew()
    }

    fn put_prop(&mut self, id: u64, rec: &PropRecord, old: Option<&PropRecord>) -> StoreResult<()> {
        let bytes = encode(rec)?;
        self.log_op(OP_PUT_PROP, id, &bytes, &[]);
        self.staged.props.insert(id, Some(bytes));
        let same_key = old.is_some_and(|o| {
            o.subject == rec.subject && o.predicate == rec.predicate && o.object == rec.object
        });
        if !same_key {
            if let Some(o) = old {
                self.remove_prop_index(o)?;
            }
            let (s, p, o) = (
                rec.subject.encode(),
                rec.predicate.as_str(),
                rec.object.encode(),
            );
            self.staged.spo.insert((s, Text::from(p), o), Some(id));
            self.change(|c| &mut c.pos, (Text::from(p), o, s), Some(id))?;
            self.change(|c| &mut c.osp, (o, Text::from(p), s), Some(id))?;
            self.bump_named_stat("p:", p, 1)?;
            if p == super::DOMAIN_PREDICATE {
                self.bump_stat(&super::domain_stat_key(rec.object), 1)?;
            }
        }
        self.staged_grew()
    }

    fn delete_prop(&mut self, id: u64, rec: &PropRecord) -> StoreResult<()> {
        self.log_op(OP_DEL_PROP, id, &[], &[]);
        self.staged.props.insert(id, None);
        self.remove_prop_index(rec)?;
        self.staged_grew()
    }

    fn set_meta(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.log_op(OP_META, 0, key.as_bytes(), value);
        self.meta.insert(key, value).map_err(storage_error)?;
        Ok(())
    }
}

impl WriteTables<'_> {
    /// Files concept `id` under its `{type, name}` (or, with `add` false, removes it):
    /// the `concept_key` table, the writers' key cache, the type and name indexes and
    /// the per-type count.
    fn file_key(&mut self, id: u64, rec: &ConceptRecord, add: bool) -> StoreResult<()> {
        let (ty, name) = (rec.concept_type.as_str(), rec.name.as_str());
        if add {
            self.concept_key
                .insert((ty, name), id)
                .map_err(storage_error)?;
            self.overlay.keys().insert(ty, name, id);
        } else {
            self.concept_key.remove((ty, name)).map_err(storage_error)?;
            self.overlay.keys().remove(ty, name);
        }
        let present = add.then_some(());
        self.change(|c| &mut c.concept_type, (Text::from(ty), id), present)?;
        self.change(|c| &mut c.concept_name, (Text::from(name), id), present)?;
        self.bump_named_stat("t:", ty, if add { 1 } else { -1 })
    }

    /// Adds a document to the text index.
    fn index(&mut self, key: u64, doc: &text::Doc) -> StoreResult<()> {
        if doc.terms.is_empty() {
            return Ok(());
        }
        for (t, tf) in &doc.terms {
            let packed = (u64::from(*tf) << 32) | u64::from(doc.len);
            self.change(
                |c| &mut c.postings,
                (Text::from(t.as_str()), key),
                Some(packed),
            )?;
        }
        self.bump_stat(TEXT_DOCS, 1)?;
        self.bump_stat(TEXT_LEN, i64::from(doc.len))
    }

    /// Removes a document from the text index. `doc` is the analysed text of the
    /// element as it was indexed: the text index is always updated in the transaction
    /// that changes the record, with the analysis of `TEXT_INDEX_VERSION` (a store
    /// indexed by another version is rebuilt when it is opened).
    fn unindex(&mut self, key: u64, doc: &text::Doc) -> StoreResult<()> {
        if doc.terms.is_empty() {
            // Never indexed (see `index`).
            return Ok(());
        }
        for t in doc.terms.keys() {
            self.change(|c| &mut c.postings, (Text::from(t.as_str()), key), None)?;
        }
        self.bump_stat(TEXT_DOCS, -1)?;
        self.bump_stat(TEXT_LEN, -i64::from(doc.len))
    }

    /// Drops and rebuilds the whole text index (every concept) from the graph;
    /// `progress(done, total)`. (`df:` statistics of older formats are dropped too.)
    pub fn rebuild_text_index(&mut self, progress: &mut dyn FnMut(u64, u64)) -> StoreResult<()> {
        // Not expressible as an operation log: this transaction commits durably.
        self.log = None;
        self.pending.remove(TEXT_DOCS);
        self.pending.remove(TEXT_LEN);
        // Everything in the overlay goes to redb first, so the cleared table is the
        // whole index (the fold moves this transaction's floor above every version).
        self.fold()?;
        self.write_staged()?;
        self.postings.retain(|_, _| false).map_err(storage_error)?;
        self.stats
            .retain(|k, _| !k.starts_with("df:") && k != TEXT_DOCS && k != TEXT_LEN)
            .map_err(storage_error)?;
        let total = self.concepts.len().map_err(storage_error)?;
        let mut done = 0u64;
        let mut ids = Vec::new();
        read::scan_ids(&self.concepts, None, &mut |n| {
            ids.push(n);
            Ok(true)
        })?;
        for n in ids {
            if let Some(c) = read::record::<ConceptRecord>(&self.concepts, None, n)? {
                self.index(ElemRef::Concept(n).encode(), &text::concept_doc(&c))?;
            }
            done += 1;
            if done.is_multiple_of(1000) {
                progress(done, total);
            }
        }
        progress(total, total);
        Ok(())
    }

    fn remove_prop_index(&mut self, rec: &PropRecord) -> StoreResult<()> {
        let (s, p, o) = (
            rec.subject.encode(),
            rec.predicate.as_str(),
            rec.object.encode(),
        );
        self.staged.spo.insert((s, Text::from(p), o), None);
        self.change(|c| &mut c.pos, (Text::from(p), o, s), None)?;
        self.change(|c| &mut c.osp, (o, Text::from(p), s), None)?;
        if p == super::DOMAIN_PREDICATE {
            self.bump_stat(&super::domain_stat_key(rec.object), -1)?;
        }
        self.bump_named_stat("p:", p, -1)
    }
}
