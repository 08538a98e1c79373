//! The redb tables and the two views over them: [`ReadTables`] (a read snapshot) and
//! [`WriteTables`] (inside one write transaction). Both implement [`GraphRead`] through
//! the same generic helpers, so reads inside a write see exactly what a snapshot would.

use super::deferred::{Deferred, OspOp, PairOp, PosOp};
use super::{
    decode, encode, storage_error, ConceptRecord, Continue, ElemRef, GraphRead, GraphWrite,
    PropRecord, StoreResult,
};
use super::{TEXT_DOCS, TEXT_LEN};
use crate::meta::text;
use redb::{
    ReadOnlyTable, ReadTransaction, ReadableTable, ReadableTableMetadata, Table, TableDefinition,
    WriteTransaction,
};
use std::cell::Ref;

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
/// (term, element) -> weighted term frequency (high 32 bits) and document length (low 32
/// bits), so BM25 needs no second lookup per posting.
pub(crate) const POSTINGS: TableDefinition<(&str, u64), u64> =
    TableDefinition::new("text_postings2");
/// Storage format 1 kept each element's analysed text here; format 2 derives it from the
/// record when needed, and the migration deletes this table.
pub(crate) const LEGACY_DOCS: TableDefinition<u64, &[u8]> = TableDefinition::new("text_docs");

const NEXT_CONCEPT: &str = "next_concept_id";
const NEXT_PROP: &str = "next_prop_id";
/// `meta` key: the sequence number of the last write-ahead log record applied.
pub(crate) const WAL_SEQ: &str = "wal_seq";

/// Operation log tags (see [`WriteTables::apply_log`]).
const OP_PUT_CONCEPT: u8 = 1;
const OP_DEL_CONCEPT: u8 = 2;
const OP_PUT_PROP: u8 = 3;
const OP_DEL_PROP: u8 = 4;
const OP_META: u8 = 5;
/// A transaction whose operation log grows past this is committed durably instead of
/// through the write-ahead log (bulk loads: one big sequential write either way).
const LOG_LIMIT: usize = 32 << 20;

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
    postings: ReadOnlyTable<(&'static str, u64), u64>,
}

impl ReadTables {
    fn pending_delta(&self, _key: &str) -> i64 {
        0
    }

    /// Opens every table of a read transaction (the store must have been initialised).
    pub fn open(txn: &ReadTransaction) -> StoreResult<ReadTables> {
        Ok(ReadTables {
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
        })
    }

    fn concept_type_r(&self) -> StoreResult<&ReadOnlyTable<(&'static str, u64), ()>> {
        Ok(&self.concept_type)
    }
    fn concept_name_r(&self) -> StoreResult<&ReadOnlyTable<(&'static str, u64), ()>> {
        Ok(&self.concept_name)
    }
    fn pos_r(&self) -> StoreResult<&ReadOnlyTable<(&'static str, u64, u64), u64>> {
        Ok(&self.pos)
    }
    fn osp_r(&self) -> StoreResult<&ReadOnlyTable<(u64, &'static str, u64), u64>> {
        Ok(&self.osp)
    }
    fn postings_r(&self) -> StoreResult<&ReadOnlyTable<(&'static str, u64), u64>> {
        Ok(&self.postings)
    }
}

type PosTable<'t> = Table<'t, (&'static str, u64, u64), u64>;
type OspTable<'t> = Table<'t, (u64, &'static str, u64), u64>;

/// Read-write view of every table inside one write transaction.
///
/// The pure secondary indexes (`concept_type`, `concept_name`, `pos`, `osp`, postings)
/// are deferred (`store/deferred.rs`): their writes are applied in key order when the
/// transaction flushes or before the index is read.
pub struct WriteTables<'t> {
    meta: Table<'t, &'static str, &'static [u8]>,
    concepts: Table<'t, u64, &'static [u8]>,
    concept_key: Table<'t, (&'static str, &'static str), u64>,
    concept_type: Deferred<Table<'t, (&'static str, u64), ()>, PairOp<()>>,
    concept_name: Deferred<Table<'t, (&'static str, u64), ()>, PairOp<()>>,
    props: Table<'t, u64, &'static [u8]>,
    spo: Table<'t, (u64, &'static str, u64), u64>,
    pos: Deferred<PosTable<'t>, PosOp>,
    osp: Deferred<OspTable<'t>, OspOp>,
    stats: Table<'t, &'static str, u64>,
    postings: Deferred<Table<'t, (&'static str, u64), u64>, PairOp<u64>>,
    /// Statistics deltas of this transaction, applied by [`WriteTables::flush`]: hot
    /// counters (links per predicate) would otherwise be rewritten on every insert.
    pending: std::collections::HashMap<String, i64>,
    /// The operation log of this transaction (for the write-ahead log); `None` once it
    /// outgrew [`LOG_LIMIT`] or a change bypassed it.
    log: Option<Vec<u8>>,
    /// Identifier counters handed out by this transaction, written by
    /// [`WriteTables::flush`] (one `meta` write per counter, not one per element).
    counters: Vec<(&'static str, u64)>,
}

impl<'t> WriteTables<'t> {
    /// Opens (creating if needed) every table in a write transaction.
    pub fn open(txn: &'t WriteTransaction) -> StoreResult<WriteTables<'t>> {
        Ok(WriteTables {
            meta: txn.open_table(META).map_err(storage_error)?,
            concepts: txn.open_table(CONCEPTS).map_err(storage_error)?,
            concept_key: txn.open_table(CONCEPT_KEY).map_err(storage_error)?,
            concept_type: Deferred::new(txn.open_table(CONCEPT_TYPE).map_err(storage_error)?),
            concept_name: Deferred::new(txn.open_table(CONCEPT_NAME).map_err(storage_error)?),
            props: txn.open_table(PROPS).map_err(storage_error)?,
            spo: txn.open_table(SPO).map_err(storage_error)?,
            pos: Deferred::new(txn.open_table(POS).map_err(storage_error)?),
            osp: Deferred::new(txn.open_table(OSP).map_err(storage_error)?),
            stats: txn.open_table(STATS).map_err(storage_error)?,
            postings: Deferred::new(txn.open_table(POSTINGS).map_err(storage_error)?),
            pending: std::collections::HashMap::new(),
            log: Some(Vec::new()),
            counters: Vec::new(),
        })
    }

    fn concept_type_r(&self) -> StoreResult<Ref<'_, Table<'t, (&'static str, u64), ()>>> {
        self.concept_type.read()
    }
    fn concept_name_r(&self) -> StoreResult<Ref<'_, Table<'t, (&'static str, u64), ()>>> {
        self.concept_name.read()
    }
    fn pos_r(&self) -> StoreResult<Ref<'_, PosTable<'t>>> {
        self.pos.read()
    }
    fn osp_r(&self) -> StoreResult<Ref<'_, OspTable<'t>>> {
        self.osp.read()
    }
    fn postings_r(&self) -> StoreResult<Ref<'_, Table<'t, (&'static str, u64), u64>>> {
        self.postings.read()
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
                return Err(storage_error("write-ahead log record is cut short"));
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
                    let key = std::str::from_utf8(a)
                        .map_err(|_| storage_error("write-ahead log: a meta key is not UTF-8"))?;
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

    fn bump_stat(&mut self, key: &str, delta: i64) -> StoreResult<()> {
        match self.pending.get_mut(key) {
            Some(d) => *d += delta,
            None => {
                self.pending.insert(key.to_string(), delta);
            }
        }
        Ok(())
    }

    /// Applies the queued secondary-index writes and writes the statistics deltas and id
    /// counters of this transaction. Must run before commit (the nexus does it for every
    /// write transaction); a transaction dropped without it is meant to be aborted.
    pub fn flush(&mut self) -> StoreResult<()> {
        self.concept_type.flush()?;
        self.concept_name.flush()?;
        self.pos.flush()?;
        self.osp.flush()?;
        self.postings.flush()?;
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

    pub fn concept(
        t: &impl ReadableTable<u64, &'static [u8]>,
        id: u64,
    ) -> StoreResult<Option<ConceptRecord>> {
        match t.get(id).map_err(storage_error)? {
            Some(g) => Ok(Some(decode(g.value())?)),
            None => Ok(None),
        }
    }

    pub fn prop(
        t: &impl ReadableTable<u64, &'static [u8]>,
        id: u64,
    ) -> StoreResult<Option<PropRecord>> {
        match t.get(id).map_err(storage_error)? {
            Some(g) => Ok(Some(decode(g.value())?)),
            None => Ok(None),
        }
    }

    pub fn concept_by_key(
        t: &impl ReadableTable<(&'static str, &'static str), u64>,
        ty: &str,
        name: &str,
    ) -> StoreResult<Option<u64>> {
        Ok(t.get((ty, name)).map_err(storage_error)?.map(|g| g.value()))
    }

    pub fn scan_index(
        t: &impl ReadableTable<(&'static str, u64), ()>,
        key: &str,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        for item in t.range((key, 0u64)..).map_err(storage_error)? {
            let (k, _) = item.map_err(storage_error)?;
            let (kk, id) = k.value();
            if kk != key || !f(id)? {
                break;
            }
        }
        Ok(())
    }

    pub fn scan_ids(
        t: &impl ReadableTable<u64, &'static [u8]>,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        for item in t.iter().map_err(storage_error)? {
            let (k, _) = item.map_err(storage_error)?;
            if !f(k.value())? {
                break;
            }
        }
        Ok(())
    }

    /// Scans a `(u64, &str, u64) -> id` table for a fixed first component and optional
    /// second component: `f(second, third, id)`.
    pub fn scan_triple(
        t: &impl ReadableTable<(u64, &'static str, u64), u64>,
        first: u64,
        second: Option<&str>,
        f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let start = second.unwrap_or("");
        for item in t.range((first, start, 0u64)..).map_err(storage_error)? {
            let (k, v) = item.map_err(storage_error)?;
            let (a, b, c) = k.value();
            if a != first || second.is_some_and(|s| s != b) {
                break;
            }
            if !f(b, ElemRef::decode(c), v.value())? {
                break;
            }
        }
        Ok(())
    }

    pub fn scan_pos(
        t: &impl ReadableTable<(&'static str, u64, u64), u64>,
        p: &str,
        f: &mut dyn FnMut(ElemRef, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        for item in t.range((p, 0u64, 0u64)..).map_err(storage_error)? {
            let (k, v) = item.map_err(storage_error)?;
            let (pp, o, s) = k.value();
            if pp != p {
                break;
            }
            if !f(ElemRef::decode(s), ElemRef::decode(o), v.value())? {
                break;
            }
        }
        Ok(())
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
                read::concept(&self.concepts, id)
            }
            fn concept_by_key(&self, concept_type: &str, name: &str) -> StoreResult<Option<u64>> {
                read::concept_by_key(&self.concept_key, concept_type, name)
            }
            fn scan_type(
                &self,
                concept_type: &str,
                f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_index(&*self.concept_type_r()?, concept_type, f)
            }
            fn scan_name(
                &self,
                name: &str,
                f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_index(&*self.concept_name_r()?, name, f)
            }
            fn scan_concepts(
                &self,
                f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_ids(&self.concepts, f)
            }
            fn prop(&self, id: u64) -> StoreResult<Option<PropRecord>> {
                read::prop(&self.props, id)
            }
            fn prop_by_spo(&self, s: ElemRef, p: &str, o: ElemRef) -> StoreResult<Option<u64>> {
                Ok(self
                    .spo
                    .get((s.encode(), p, o.encode()))
                    .map_err(storage_error)?
                    .map(|g| g.value()))
            }
            fn scan_out(
                &self,
                s: ElemRef,
                p: Option<&str>,
                f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_triple(&self.spo, s.encode(), p, f)
            }
            fn scan_in(
                &self,
                o: ElemRef,
                p: Option<&str>,
                f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_triple(&*self.osp_r()?, o.encode(), p, f)
            }
            fn scan_predicate(
                &self,
                p: &str,
                f: &mut dyn FnMut(ElemRef, ElemRef, u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_pos(&*self.pos_r()?, p, f)
            }
            fn scan_props(
                &self,
                f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_ids(&self.props, f)
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
                    self.concepts.len().map_err(storage_error)?,
                    self.props.len().map_err(storage_error)?,
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
                let postings = self.postings_r()?;
                for item in postings.range((from, 0u64)..).map_err(storage_error)? {
                    let (k, v) = item.map_err(storage_error)?;
                    let (t, key) = k.value();
                    let packed = v.value();
                    if !f(t, key, (packed >> 32) as u32, packed as u32)? {
                        break;
                    }
                }
                Ok(())
            }
            fn posting(&self, term: &str, key: u64) -> StoreResult<Option<(u32, u32)>> {
                Ok(self
                    .postings_r()?
                    .get((term, key))
                    .map_err(storage_error)?
                    .map(|g| ((g.value() >> 32) as u32, g.value() as u32)))
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
        self.concepts
            .insert(id, bytes.as_slice())
            .map_err(storage_error)?;
        let same_key =
            old.is_some_and(|o| o.concept_type == rec.concept_type && o.name == rec.name);
        if !same_key {
            if let Some(o) = old {
                self.concept_key
                    .remove((o.concept_type.as_str(), o.name.as_str()))
                    .map_err(storage_error)?;
                self.concept_type
                    .push(((o.concept_type.clone(), id), None))?;
                self.concept_name.push(((o.name.clone(), id), None))?;
                self.bump_stat(&format!("t:{}", o.concept_type), -1)?;
            }
            self.concept_key
                .insert((rec.concept_type.as_str(), rec.name.as_str()), id)
                .map_err(storage_error)?;
            self.concept_type
                .push(((rec.concept_type.clone(), id), Some(())))?;
            self.concept_name.push(((rec.name.clone(), id), Some(())))?;
            self.bump_stat(&format!("t:{}", rec.concept_type), 1)?;
        }
        Ok(())
    }

    fn delete_concept(&mut self, id: u64, rec: &ConceptRecord) -> StoreResult<()> {
        self.log_op(OP_DEL_CONCEPT, id, &[], &[]);
        self.unindex(ElemRef::Concept(id).encode(), &text::concept_doc(rec))?;
        self.concepts.remove(id).map_err(storage_error)?;
        self.concept_key
            .remove((rec.concept_type.as_str(), rec.name.as_str()))
            .map_err(storage_error)?;
        self.concept_type
            .push(((rec.concept_type.clone(), id), None))?;
        self.concept_name.push(((rec.name.clone(), id), None))?;
        self.bump_stat(&format!("t:{}", rec.concept_type), -1)
    }

    fn put_prop(&mut self, id: u64, rec: &PropRecord, old: Option<&PropRecord>) -> StoreResult<()> {
        let bytes = encode(rec)?;
        self.log_op(OP_PUT_PROP, id, &bytes, &[]);
        self.props
            .insert(id, bytes.as_slice())
            .map_err(storage_error)?;
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
            self.spo.insert((s, p, o), id).map_err(storage_error)?;
            self.pos.push(((p.to_string(), o, s), Some(id)))?;
            self.osp.push(((o, p.to_string(), s), Some(id)))?;
            self.bump_stat(&format!("p:{p}"), 1)?;
            if p == super::DOMAIN_PREDICATE {
                self.bump_stat(&super::domain_stat_key(rec.object), 1)?;
            }
        }
        Ok(())
    }

    fn delete_prop(&mut self, id: u64, rec: &PropRecord) -> StoreResult<()> {
        self.log_op(OP_DEL_PROP, id, &[], &[]);
        self.props.remove(id).map_err(storage_error)?;
        self.remove_prop_index(rec)
    }

    fn set_meta(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.log_op(OP_META, 0, key.as_bytes(), value);
        self.meta.insert(key, value).map_err(storage_error)?;
        Ok(())
    }
}

impl WriteTables<'_> {
    /// Adds a document to the text index.
    fn index(&mut self, key: u64, doc: &text::Doc) -> StoreResult<()> {
        if doc.terms.is_empty() {
            return Ok(());
        }
        for (t, tf) in &doc.terms {
            let packed = (u64::from(*tf) << 32) | u64::from(doc.len);
            self.postings.push(((t.clone(), key), Some(packed)))?;
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
            self.postings.push(((t.clone(), key), None))?;
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
        self.postings
            .table_mut()?
            .retain(|_, _| false)
            .map_err(storage_error)?;
        self.stats
            .retain(|k, _| !k.starts_with("df:") && k != TEXT_DOCS && k != TEXT_LEN)
            .map_err(storage_error)?;
        let total = self.concepts.len().map_err(storage_error)?;
        let mut done = 0u64;
        let mut ids = Vec::new();
        read::scan_ids(&self.concepts, &mut |n| {
            ids.push(n);
            Ok(true)
        })?;
        for n in ids {
            if let Some(c) = read::concept(&self.concepts, n)? {
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
        self.spo.remove((s, p, o)).map_err(storage_error)?;
        self.pos.push(((p.to_string(), o, s), None))?;
        self.osp.push(((o, p.to_string(), s), None))?;
        if p == super::DOMAIN_PREDICATE {
            self.bump_stat(&super::domain_stat_key(rec.object), -1)?;
        }
        self.bump_stat(&format!("p:{p}"), -1)
    }
}
