//! [`GraphRead`] and [`GraphWrite`] over one database transaction.
//!
//! Reads are queries on the transaction (a write transaction sees its own writes: they
//! are executed as they come). Scans are read in pages (keyset pagination: each page
//! starts after the last row of the previous one), so a scan that stops early reads
//! little, a scan of a million rows holds one page in memory, and the visitor may query
//! the transaction again between pages. Statistics deltas and id counters are kept in
//! memory and written once, at commit ([`PgTx::flush`]).
//!
//! Why one file of about 850 lines: the `GraphRead` implementation (its second half, 500
//! lines) is one `impl` block, which Rust keeps in one file; the transaction's state
//! and helpers above it are what that block reads. Writes (`write.rs`), paged scans
//! (`scan.rs`) and the read-ahead (`ahead.rs`) live beside it.

mod ahead;
mod elements;
mod history;
mod scan;
mod write;

use crate::buffer::{Buffer, ConceptRow, PropRow, FLUSH_AT};
use crate::conn::{get, Conn, Params};
use crate::keys::{KeyCache, KeyMap, View};
use kip_storage::text;
use kip_storage::{
    decode, encode, ConceptRecord, Continue, ElemRef, GraphRead, GraphWrite, PropRecord, Stat,
    StoreError, StoreResult,
};
use postgres::types::ToSql;
use postgres::Row;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ops::Bound;

/// A map hashed with foldhash: the key maps are probed for every endpoint of a bulk
/// load, where SipHash was a visible share of the time.
pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Rows read by the first page of a scan (most scans stop early: LIMIT, EXISTS).
const FIRST_PAGE: i64 = 64;
/// The largest page, reached by growing each page fourfold.
const MAX_PAGE: i64 = 8192;
/// `kip_stats` keys of the id counters: the last concept and proposition number
/// allocated (0: none yet), advanced by the number a transaction allocated, in the
/// same statement as the other counts.
pub(crate) const LAST_IDS: [&str; 2] = ["#last_concept", "#last_prop"];
/// `kip_stats` keys of the element counts ([`GraphRead::totals`]); the engine's keys
/// never start with `#`.
pub(crate) const CONCEPTS: &str = "#concepts";
pub(crate) const PROPS: &str = "#props";

/// An element key ([`ElemRef::encode`]) as stored: bit 63 flipped, so that the order of
/// the keys is the order of the signed column.
pub(crate) fn ek(key: u64) -> i64 {
    (key ^ (1 << 63)) as i64
}

/// The element key of a stored value ([`ek`] reversed).
pub(crate) fn uk(v: i64) -> u64 {
    (v as u64) ^ (1 << 63)
}

/// A concept or proposition number as stored (numbers stay below 2^63).
fn num(id: u64) -> StoreResult<i64> {
    i64::try_from(id).map_err(|_| StoreError::Other(format!("element number {id} is too large")))
}

/// A stored number read back.
fn unum(v: i64) -> StoreResult<u64> {
    u64::try_from(v).map_err(|_| StoreError::Corruption(format!("negative element number {v}")))
}

fn utf8(b: Vec<u8>) -> StoreResult<String> {
    String::from_utf8(b).map_err(|_| StoreError::Corruption("a stored name is not UTF-8".into()))
}

/// Where a page of a scan ends: the query parameters the next page starts after.
type Cursor = Vec<Box<dyn ToSql + Sync>>;

/// A transaction of a pooled connection, read-only or writing.
pub(crate) struct PgTx<'c> {
    conn: RefCell<&'c mut Conn>,
    /// Statistics deltas not yet written (a write transaction's).
    stats: HashMap<String, i64>,
    /// The last concept and proposition numbers allocated before this transaction
    /// (read with its `BEGIN`, or on first use).
    last_ids: [Option<u64>; 2],
    /// Numbers this transaction allocated, per kind.
    allocated: [u64; 2],
    /// Whether embedding marks are kept ([`kip_storage::VECTORS_ON`]).
    vectors_on: bool,
    /// Row changes not yet written.
    buf: RefCell<Buffer>,
    /// Concept and proposition numbers from which on nothing is in the tables: numbers
    /// this transaction allocated and has not flushed (or not yet allocated at all), so
    /// a point read of one that is not in the buffer needs no query. Set by the first
    /// allocation, moved up by each flush.
    floor: Cell<(Option<u64>, Option<u64>)>,
    /// `{type, name}` -> concept, as this transaction knows it: read from the tables
    /// (one by one or by [`GraphRead::prefetch`]) or filed/removed by its own writes.
    /// Valid for the whole transaction: a read is one snapshot, and a write holds the
    /// writers' lock, so the tables change only through this transaction.
    known_keys: RefCell<KeyMap<Option<u64>>>,
    /// `(subject, predicate, object)` -> link, likewise.
    known_spo: RefCell<FastMap<(i64, String, i64), Option<u64>>>,
    /// Records read ahead by [`GraphRead::prefetch_elements`] (`None`: no such
    /// element), by element key; a write of the element drops its entry (the buffer
    /// holds the new state).
    records: RefCell<HashMap<u64, Option<Vec<u8>>>>,
    /// Read-ahead of a read-only transaction (see `ahead.rs`).
    pub(crate) ahead: ahead::Ahead,
    /// The process's key cache and what this transaction read to use it (see
    /// `keys.rs`); consulted after `known_keys`.
    shared: Option<(&'c KeyCache, View)>,
    /// Keys this transaction took from concepts (deletes, renames). The database raises
    /// the key epoch for them (triggers on `kip_concepts`, schema migration 2); the
    /// cache then reads the new value before the commit.
    pub(crate) removed_keys: i64,
    /// This transaction's place in history (`kip_storage::history`).
    txn_history: kip_storage::history::TxnHistory,
}

/// Records read ahead and kept per transaction at most.
const RECORDS_MAX: usize = 100_000;

/// Keys a prefetch query asks for at most.
const PREFETCH_CHUNK: usize = 5_000;

/// Entries of a key map beyond which lookups are no longer remembered (own writes
/// always are, until a flush has written them).
const KNOWN_MAX: usize = 1_000_000;

impl<'c> PgTx<'c> {
    pub(crate) fn new(conn: &'c mut Conn) -> PgTx<'c> {
        PgTx {
            conn: RefCell::new(conn),
            stats: HashMap::new(),
            last_ids: [None, None],
            allocated: [0, 0],
            vectors_on: false,
            buf: RefCell::new(Buffer::default()),
            floor: Cell::new((None, None)),
            known_keys: RefCell::new(KeyMap::default()),
            known_spo: RefCell::new(FastMap::default()),
            records: RefCell::new(HashMap::new()),
            ahead: ahead::Ahead::default(),
            shared: None,
            removed_keys: 0,
            txn_history: Default::default(),
        }
    }

    /// Lets this transaction use the process's key cache with what it read at `BEGIN`.
    pub(crate) fn share_keys(&mut self, cache: &'c KeyCache, view: View) {
        cache.begin(view);
        self.shared = Some((cache, view));
    }

    /// What this transaction knows of keys, for the key cache once it has committed.
    pub(crate) fn take_keys(&mut self) -> KeyMap<Option<u64>> {
        std::mem::take(self.known_keys.get_mut())
    }

    /// What a write transaction read with its `BEGIN` (see `PgStore::begin_write`):
    /// whether embedding marks are on, and the id counters.
    pub(crate) fn preloaded(&mut self, vectors_on: bool, last_ids: [u64; 2]) {
        self.vectors_on = vectors_on;
        self.last_ids = last_ids.map(Some);
    }

    /// The next number `alloc` would hand out, per kind.
    fn next_ids(&self) -> [Option<u64>; 2] {
        [0, 1].map(|k| self.last_ids[k].map(|l| l + self.allocated[k] + 1))
    }

    /// Writes the buffered row changes, so that a query sees them.
    fn sync(&self) -> StoreResult<()> {
        let mut buf = self.buf.borrow_mut();
        if buf.is_empty() {
            return Ok(());
        }
        let mut batch = crate::buffer::Batch::default();
        buf.drain_into(&mut batch, self.fresh());
        batch.run(&mut self.conn.borrow_mut())?;
        // Everything allocated so far is in the tables now.
        if self.floor.get() != (None, None) {
            let [c, p] = self.next_ids();
            self.floor.set((c, p));
        }
        Ok(())
    }

    /// Flushes when the buffer has grown big; forgets the key maps when they have
    /// (after a flush, the tables hold this transaction's writes).
    fn grew(&self) -> StoreResult<()> {
        if self.buf.borrow().len() >= FLUSH_AT {
            self.sync()?;
        }
        if self.known_keys.borrow().len() + self.known_spo.borrow().len() >= 2 * KNOWN_MAX {
            self.sync()?;
            self.known_keys.borrow_mut().clear();
            self.known_spo.borrow_mut().clear();
        }
        Ok(())
    }

    fn remember_key(&self, t: &str, n: &str, id: Option<u64>) {
        if let (Some((cache, view)), Some(id)) = (self.shared(), id) {
            cache.found(view, [(t, n, id)]);
        }
        let mut k = self.known_keys.borrow_mut();
        if k.len() < KNOWN_MAX {
            k.insert(t, n, id);
        }
    }

    /// The process's key cache, while this transaction may use it: not once it has
    /// taken a key from a concept. From then on its own lookups may see its flushed
    /// rename (which a rollback undoes, so it must not be filed), and its own record
    /// of the keys it removed may have been forgotten (`grew`), so the cache's older
    /// answer must not be taken either.
    fn shared(&self) -> Option<(&'c KeyCache, View)> {
        if self.removed_keys > 0 {
            return None;
        }
        self.shared
    }

    /// The concept of a key as the process's key cache knows it (see `keys.rs`).
    fn shared_key(&self, t: &str, n: &str) -> Option<u64> {
        let (cache, view) = self.shared()?;
        cache.get(view, t, n)
    }

    fn remember_spo(&self, key: (i64, String, i64), id: Option<u64>) {
        let mut k = self.known_spo.borrow_mut();
        if k.len() < KNOWN_MAX {
            k.insert(key, id);
        }
    }

    /// A record read ahead (`Some(None)`: no such element), reading the group it came
    /// with first when it is time to (see `ahead.rs`).
    fn cached_record(&self, e: ElemRef) -> StoreResult<Option<Option<Vec<u8>>>> {
        let key = e.encode();
        if let Some(r) = self.records.borrow().get(&key) {
            return Ok(Some(r.clone()));
        }
        self.records_ahead(key)?;
        Ok(self.records.borrow().get(&key).cloned())
    }

    /// The numbers of which no row can be in the tables (see `floor`).
    fn fresh(&self) -> crate::buffer::Fresh {
        let (concepts, props) = self.floor.get();
        crate::buffer::Fresh { concepts, props }
    }

    /// True when no row of this element can be in the tables (see `floor`).
    fn unwritten(&self, e: ElemRef) -> bool {
        let (c, p) = self.floor.get();
        match e {
            ElemRef::Concept(n) => c.is_some_and(|f| n >= f),
            ElemRef::Prop(n) => p.is_some_and(|f| n >= f),
        }
    }

    fn query(&self, sql: &str, params: &Params<'_>) -> StoreResult<Vec<Row>> {
        self.conn.borrow_mut().query(sql, params)
    }

    fn query_opt(&self, sql: &str, params: &Params<'_>) -> StoreResult<Option<Row>> {
        self.conn.borrow_mut().query_opt(sql, params)
    }

    fn execute(&self, sql: &str, params: &Params<'_>) -> StoreResult<u64> {
        self.conn.borrow_mut().execute(sql, params)
    }

    fn stat_key(key: Stat<'_>) -> String {
        key.key().into_owned()
    }

    pub(crate) fn stored_stat(&self, key: &str) -> StoreResult<i64> {
        let row = self.query_opt("SELECT n FROM kip_stats WHERE key = $1", &[&key.as_bytes()])?;
        Ok(match row {
            Some(r) => get::<i64>(&r, 0)?,
            None => 0,
        })
    }

    fn count(&self, key: &str) -> StoreResult<u64> {
        let n = self.stored_stat(key)? + self.stats.get(key).copied().unwrap_or(0);
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn bump_key(&mut self, key: &str, delta: i64) {
        match self.stats.get_mut(key) {
            Some(d) => *d += delta,
            None => {
                self.stats.insert(key.to_owned(), delta);
            }
        }
    }

    /// Hands out the next number of a kind (0: concepts, 1: propositions).
    fn alloc(&mut self, kind: usize) -> StoreResult<u64> {
        let last = match self.last_ids[kind] {
            Some(l) => l,
            None => {
                let l = u64::try_from(self.stored_stat(LAST_IDS[kind])?).unwrap_or(0);
                self.last_ids[kind] = Some(l);
                l
            }
        };
        let id = last
            .checked_add(self.allocated[kind] + 1)
            .filter(|id| *id < 1 << 62)
            .ok_or_else(|| StoreError::Other("element numbers exhausted".into()))?;
        if self.allocated[kind] == 0 {
            let (c, p) = self.floor.get();
            self.floor.set(if kind == 0 {
                (Some(id), p)
            } else {
                (c, Some(id))
            });
        }
        self.allocated[kind] += 1;
        Ok(id)
    }

    /// Writes everything pending (rows, counts, id counters) in one statement: before
    /// commit.
    pub(crate) fn flush(&mut self) -> StoreResult<()> {
        let mut stats = std::mem::take(&mut self.stats);
        for kind in [0, 1] {
            if self.allocated[kind] > 0 {
                let n = i64::try_from(self.allocated[kind]).unwrap_or(i64::MAX);
                *stats.entry(LAST_IDS[kind].to_owned()).or_insert(0) += n;
            }
        }
        let (keys, deltas): (Vec<Vec<u8>>, Vec<i64>) = stats
            .into_iter()
            .filter(|(_, d)| *d != 0)
            .map(|(k, d)| (k.into_bytes(), d))
            .unzip();
        let mut batch = crate::buffer::Batch::default();
        let fresh = self.fresh();
        self.buf.get_mut().drain_into(&mut batch, fresh);
        if !keys.is_empty() {
            // Counts that reach 0 stay as rows of 0 (read as absent would be).
            batch.add(
                "INSERT INTO kip_stats (key, n) SELECT * FROM unnest(?1::bytea[], ?2::bigint[]) \
                 ON CONFLICT (key) DO UPDATE SET n = kip_stats.n + excluded.n",
                vec![Box::new(keys), Box::new(deltas)],
            );
        }
        batch.run(self.conn.get_mut())
    }
}

impl GraphRead for PgTx<'_> {
    fn concept(&self, id: u64) -> StoreResult<Option<ConceptRecord>> {
        if let Some(r) = self.buf.borrow().concepts.get(&num(id)?) {
            return r.as_ref().map(|r| decode(&r.rec)).transpose();
        }
        if self.unwritten(ElemRef::Concept(id)) {
            return Ok(None);
        }
        if let Some(r) = self.cached_record(ElemRef::Concept(id))? {
            return r.as_ref().map(|r| decode(r)).transpose();
        }
        let row = self.query_opt("SELECT rec FROM kip_concepts WHERE id = $1", &[&num(id)?])?;
        row.map(|r| decode(get::<&[u8]>(&r, 0)?)).transpose()
    }

    fn concept_head(&self, id: u64) -> StoreResult<Option<(String, String)>> {
        if let Some(r) = self.buf.borrow().concepts.get(&num(id)?) {
            return Ok(r.as_ref().map(|r| (r.ty.clone(), r.name.clone())));
        }
        if self.unwritten(ElemRef::Concept(id)) {
            return Ok(None);
        }
        if let Some(r) = self.cached_record(ElemRef::Concept(id))? {
            return r
                .as_ref()
                .map(|r| decode::<ConceptRecord>(r).map(|c| (c.concept_type, c.name)))
                .transpose();
        }
        let row = self.query_opt(
            "SELECT type, name FROM kip_concepts WHERE id = $1",
            &[&num(id)?],
        )?;
        row.map(|r| Ok((utf8(get(&r, 0)?)?, utf8(get(&r, 1)?)?)))
            .transpose()
    }

    fn concept_by_key(&self, concept_type: &str, name: &str) -> StoreResult<Option<u64>> {
        {
            let known = self.known_keys.borrow();
            if !known.is_empty() {
                if let Some(id) = known.get(concept_type, name) {
                    return Ok(id);
                }
            }
        }
        if let Some(id) = self.shared_key(concept_type, name) {
            return Ok(Some(id));
        }
        let row = self.query_opt(
            "SELECT id FROM kip_concepts WHERE type = $1 AND name = $2",
            &[&concept_type.as_bytes(), &name.as_bytes()],
        )?;
        let id = row.map(|r| unum(get(&r, 0)?)).transpose()?;
        self.remember_key(concept_type, name, id);
        Ok(id)
    }

    fn scan_type(
        &self,
        concept_type: &str,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.sync()?;
        self.scan_ids(
            "SELECT id FROM kip_concepts WHERE type = $1 ORDER BY id LIMIT $2",
            "SELECT id FROM kip_concepts WHERE type = $1 AND id > $2 ORDER BY id LIMIT $3",
            &[&concept_type.as_bytes()],
            false,
            f,
        )
    }

    fn scan_name(
        &self,
        name: &str,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.sync()?;
        self.scan_ids(
            "SELECT id FROM kip_concepts WHERE name = $1 ORDER BY id LIMIT $2",
            "SELECT id FROM kip_concepts WHERE name = $1 AND id > $2 ORDER BY id LIMIT $3",
            &[&name.as_bytes()],
            false,
            f,
        )
    }

    fn scan_names(
        &self,
        names: &[&str],
        f: &mut dyn FnMut(&str, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.sync()?;
        // An index probe per name (LATERAL), many names per query; every concept of a
        // name comes back at once (a name's concepts are few: one per type).
        for chunk in names.chunks(PREFETCH_CHUNK) {
            let keys: Vec<&[u8]> = chunk.iter().map(|n| n.as_bytes()).collect();
            let rows = self.query(
                "SELECT k.i, c.id FROM unnest($1::bytea[]) WITH ORDINALITY AS k(n, i) \
                 CROSS JOIN LATERAL (SELECT id FROM kip_concepts WHERE name = k.n) AS c \
                 ORDER BY k.i, c.id",
                &[&keys],
            )?;
            for r in &rows {
                let i = usize::try_from(get::<i64>(r, 0)?)
                    .ok()
                    .and_then(|i| i.checked_sub(1))
                    .and_then(|i| chunk.get(i))
                    .ok_or_else(|| StoreError::Corruption("a name out of its list".into()))?;
                if !f(i, unum(get(r, 1)?)?)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn scan_concepts(&self, f: &mut dyn FnMut(u64) -> StoreResult<Continue>) -> StoreResult<()> {
        self.sync()?;
        self.scan_ids(
            "SELECT id FROM kip_concepts ORDER BY id LIMIT $1",
            "SELECT id FROM kip_concepts WHERE id > $1 ORDER BY id LIMIT $2",
            &[],
            false,
            f,
        )
    }

    fn prop(&self, id: u64) -> StoreResult<Option<PropRecord>> {
        if let Some(r) = self.buf.borrow().props.get(&num(id)?) {
            return r.as_ref().map(|r| decode(&r.rec)).transpose();
        }
        if self.unwritten(ElemRef::Prop(id)) {
            return Ok(None);
        }
        if let Some(r) = self.cached_record(ElemRef::Prop(id))? {
            return r.as_ref().map(|r| decode(r)).transpose();
        }
        let row = self.query_opt("SELECT rec FROM kip_props WHERE id = $1", &[&num(id)?])?;
        row.map(|r| decode(get::<&[u8]>(&r, 0)?)).transpose()
    }

    fn prop_by_spo(&self, s: ElemRef, p: &str, o: ElemRef) -> StoreResult<Option<u64>> {
        let key = (ek(s.encode()), p.to_owned(), ek(o.encode()));
        {
            let known = self.known_spo.borrow();
            if !known.is_empty() {
                if let Some(id) = known.get(&key) {
                    return Ok(*id);
                }
            }
        }
        if self.unwritten(s) || self.unwritten(o) {
            return Ok(None);
        }
        let row = self.query_opt(
            "SELECT id FROM kip_props WHERE s = $1 AND p = $2 AND o = $3",
            &[&key.0, &p.as_bytes(), &key.2],
        )?;
        let id = row.map(|r| unum(get(&r, 0)?)).transpose()?;
        self.remember_spo(key, id);
        Ok(id)
    }

    fn scan_out(
        &self,
        s: ElemRef,
        p: Option<&str>,
        f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.scan_links("s", "o", ek(s.encode()), p, &mut |p, o, id| f(p, o, id))
    }

    fn scan_in(
        &self,
        o: ElemRef,
        p: Option<&str>,
        f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.scan_links("o", "s", ek(o.encode()), p, &mut |p, s, id| f(p, s, id))
    }

    fn scan_many(
        &self,
        nodes: &[ElemRef],
        names: &[String],
        forward: bool,
        f: &mut dyn FnMut(ElemRef, &str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.links_of_many(nodes, names, forward, f)
    }

    fn scan_predicate(
        &self,
        p: &str,
        f: &mut dyn FnMut(ElemRef, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.sync()?;
        self.paged(
            "SELECT s, o, id FROM kip_props WHERE p = $1 ORDER BY o, s LIMIT $2",
            "SELECT s, o, id FROM kip_props WHERE p = $1 AND (o, s) > ($2, $3) ORDER BY o, s LIMIT $4",
            &[&p.as_bytes()],
            &|r| Ok(vec![Box::new(get::<i64>(r, 1)?), Box::new(get::<i64>(r, 0)?)]),
            &mut |r| {
                let s = ElemRef::decode(uk(get(r, 0)?));
                let o = ElemRef::decode(uk(get(r, 1)?));
                f(s, o, unum(get(r, 2)?)?)
            },
        )
    }

    fn scan_props(&self, f: &mut dyn FnMut(u64) -> StoreResult<Continue>) -> StoreResult<()> {
        self.sync()?;
        self.scan_ids(
            "SELECT id FROM kip_props ORDER BY id LIMIT $1",
            "SELECT id FROM kip_props WHERE id > $1 ORDER BY id LIMIT $2",
            &[],
            true,
            f,
        )
    }

    fn stat(&self, key: Stat<'_>) -> StoreResult<u64> {
        self.count(&Self::stat_key(key))
    }

    fn totals(&self) -> StoreResult<(u64, u64)> {
        Ok((self.count(CONCEPTS)?, self.count(PROPS)?))
    }

    fn meta(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        let row = self.query_opt(
            "SELECT value FROM kip_meta WHERE key = $1",
            &[&key.as_bytes()],
        )?;
        row.map(|r| get::<Vec<u8>>(&r, 0)).transpose()
    }

    fn scan_postings(
        &self,
        from: &str,
        f: &mut dyn FnMut(&str, u64, u32, u32) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.sync()?;
        self.paged(
            "SELECT term, elem, tf, len FROM kip_postings WHERE term >= $1 ORDER BY term, elem LIMIT $2",
            "SELECT term, elem, tf, len FROM kip_postings WHERE term >= $1 AND (term, elem) > ($2, $3) ORDER BY term, elem LIMIT $4",
            &[&from.as_bytes()],
            &|r| Ok(vec![Box::new(get::<Vec<u8>>(r, 0)?), Box::new(get::<i64>(r, 1)?)]),
            &mut |r| {
                let term = std::str::from_utf8(get::<&[u8]>(r, 0)?)
                    .map_err(|_| StoreError::Corruption("a stored term is not UTF-8".into()))?;
                let tf = u32::try_from(get::<i64>(r, 2)?).unwrap_or(u32::MAX);
                let len = u32::try_from(get::<i64>(r, 3)?).unwrap_or(u32::MAX);
                f(term, uk(get(r, 1)?), tf, len)
            },
        )
    }

    fn posting(&self, term: &str, key: u64) -> StoreResult<Option<(u32, u32)>> {
        if let Some(p) = self.posting_ahead(term, key) {
            return Ok(p);
        }
        self.sync()?;
        let row = self.query_opt(
            "SELECT tf, len FROM kip_postings WHERE term = $1 AND elem = $2",
            &[&term.as_bytes(), &ek(key)],
        )?;
        row.map(|r| {
            Ok((
                u32::try_from(get::<i64>(&r, 0)?).unwrap_or(u32::MAX),
                u32::try_from(get::<i64>(&r, 1)?).unwrap_or(u32::MAX),
            ))
        })
        .transpose()
    }

    fn scan_attr(
        &self,
        concept_type: &str,
        attr: &str,
        lo: Bound<&str>,
        hi: Bound<&str>,
        rev: bool,
        f: &mut dyn FnMut(&str, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.sync()?;
        let mut cond = String::from("type = $1 AND attr = $2");
        let mut fixed: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(4);
        let (ty, at) = (concept_type.as_bytes(), attr.as_bytes());
        fixed.push(&ty);
        fixed.push(&at);
        let lo_b;
        let hi_b;
        match lo {
            Bound::Included(v) | Bound::Excluded(v) => {
                lo_b = v.as_bytes();
                fixed.push(&lo_b);
                let op = if matches!(lo, Bound::Included(_)) {
                    ">="
                } else {
                    ">"
                };
                cond.push_str(&format!(" AND vkey {op} ${}", fixed.len()));
            }
            Bound::Unbounded => {}
        }
        match hi {
            Bound::Included(v) | Bound::Excluded(v) => {
                hi_b = v.as_bytes();
                fixed.push(&hi_b);
                let op = if matches!(hi, Bound::Included(_)) {
                    "<="
                } else {
                    "<"
                };
                cond.push_str(&format!(" AND vkey {op} ${}", fixed.len()));
            }
            Bound::Unbounded => {}
        }
        let n = fixed.len();
        let (dir, cmp) = if rev { ("DESC", "<") } else { ("ASC", ">") };
        let first = format!(
            "SELECT vkey, id FROM kip_attrs WHERE {cond} ORDER BY vkey {dir}, id {dir} LIMIT ${}",
            n + 1
        );
        let next = format!(
            "SELECT vkey, id FROM kip_attrs WHERE {cond} AND (vkey, id) {cmp} (${}, ${}) \
             ORDER BY vkey {dir}, id {dir} LIMIT ${}",
            n + 1,
            n + 2,
            n + 3
        );
        self.paged_grouped(
            &first,
            &next,
            &fixed,
            &|r| {
                Ok(vec![
                    Box::new(get::<Vec<u8>>(r, 0)?),
                    Box::new(get::<i64>(r, 1)?),
                ])
            },
            Some(&|r| Ok(ElemRef::Concept(unum(get(r, 1)?)?).encode())),
            &mut |r| {
                let v = std::str::from_utf8(get::<&[u8]>(r, 0)?).map_err(|_| {
                    StoreError::Corruption("a stored value key is not UTF-8".into())
                })?;
                f(v, unum(get(r, 1)?)?)
            },
        )
    }

    fn wants_prefetch(&self) -> bool {
        true
    }

    fn prefetch_elements(&self, elems: &[ElemRef]) -> StoreResult<()> {
        self.read_records(elems)
    }

    fn prefetch_postings(&self, postings: &[(&str, u64)]) -> StoreResult<()> {
        self.read_postings(postings)
    }

    fn count_in_many(&self, nodes: &[ElemRef], p: &str) -> StoreResult<Vec<u64>> {
        self.sync()?;
        let mut out = Vec::with_capacity(nodes.len());
        for chunk in nodes.chunks(PREFETCH_CHUNK) {
            let keys: Vec<i64> = chunk.iter().map(|e| ek(e.encode())).collect();
            let rows = self.query(
                "SELECT (SELECT count(*) FROM kip_props WHERE o = f.e AND p = $2) \
                 FROM unnest($1::bigint[]) WITH ORDINALITY AS f(e, i) ORDER BY f.i",
                &[&keys, &p.as_bytes()],
            )?;
            for r in &rows {
                out.push(u64::try_from(get::<i64>(r, 0)?).unwrap_or(0));
            }
        }
        Ok(out)
    }

    fn prefetch(
        &self,
        concepts: &[(&str, &str)],
        links: &[(ElemRef, &str, ElemRef)],
    ) -> StoreResult<()> {
        let wanted: Vec<(&str, &str)> = {
            let known = self.known_keys.borrow();
            let mut seen = std::collections::HashSet::new();
            concepts
                .iter()
                .filter(|(t, n)| {
                    !known.contains(t, n)
                        && seen.insert((*t, *n))
                        && self.shared_key(t, n).is_none()
                })
                .copied()
                .collect()
        };
        for chunk in wanted.chunks(PREFETCH_CHUNK) {
            let types: Vec<&[u8]> = chunk.iter().map(|k| k.0.as_bytes()).collect();
            let names: Vec<&[u8]> = chunk.iter().map(|k| k.1.as_bytes()).collect();
            let rows = self.query(
                "SELECT k.t, k.n, c.id FROM unnest($1::bytea[], $2::bytea[]) AS k(t, n) \
                 CROSS JOIN LATERAL (SELECT id FROM kip_concepts \
                     WHERE type = k.t AND name = k.n LIMIT 1) AS c",
                &[&types, &names],
            )?;
            let mut found = HashMap::with_capacity(rows.len());
            for r in &rows {
                found.insert((utf8(get(r, 0)?)?, utf8(get(r, 1)?)?), unum(get(r, 2)?)?);
            }
            for (t, n) in chunk {
                let id = found.get(&((*t).to_owned(), (*n).to_owned())).copied();
                self.remember_key(t, n, id);
            }
        }
        let wanted: Vec<(i64, &str, i64)> = {
            let known = self.known_spo.borrow();
            let mut seen = std::collections::HashSet::new();
            links
                .iter()
                .filter(|(s, _, o)| !self.unwritten(*s) && !self.unwritten(*o))
                .map(|(s, p, o)| (ek(s.encode()), *p, ek(o.encode())))
                .filter(|k| !known.contains_key(&(k.0, k.1.to_owned(), k.2)) && seen.insert(*k))
                .collect()
        };
        for chunk in wanted.chunks(PREFETCH_CHUNK) {
            let s: Vec<i64> = chunk.iter().map(|k| k.0).collect();
            let p: Vec<&[u8]> = chunk.iter().map(|k| k.1.as_bytes()).collect();
            let o: Vec<i64> = chunk.iter().map(|k| k.2).collect();
            let rows = self.query(
                "SELECT k.s, k.p, k.o, l.id \
                 FROM unnest($1::bigint[], $2::bytea[], $3::bigint[]) AS k(s, p, o) \
                 CROSS JOIN LATERAL (SELECT id FROM kip_props \
                     WHERE s = k.s AND p = k.p AND o = k.o LIMIT 1) AS l",
                &[&s, &p, &o],
            )?;
            let mut found = HashMap::with_capacity(rows.len());
            for r in &rows {
                found.insert(
                    (get::<i64>(r, 0)?, utf8(get(r, 1)?)?, get::<i64>(r, 2)?),
                    unum(get(r, 3)?)?,
                );
            }
            for (s, p, o) in chunk {
                let key = (*s, (*p).to_owned(), *o);
                let id = found.get(&key).copied();
                self.remember_spo(key, id);
            }
        }
        Ok(())
    }

    fn scan_embedding_marks(
        &self,
        from: u64,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.sync()?;
        self.paged(
            "SELECT elem FROM kip_embed_marks WHERE elem >= $1 ORDER BY elem LIMIT $2",
            "SELECT elem FROM kip_embed_marks WHERE elem >= $1 AND elem > $2 ORDER BY elem LIMIT $3",
            &[&ek(from)],
            &|r| Ok(vec![Box::new(get::<i64>(r, 0)?)]),
            &mut |r| f(uk(get(r, 0)?)),
        )
    }

    fn embedding_marks(&self) -> StoreResult<u64> {
        self.sync()?;
        let row = self.query_opt("SELECT count(*) FROM kip_embed_marks", &[])?;
        Ok(match row {
            Some(r) => u64::try_from(get::<i64>(&r, 0)?).unwrap_or(0),
            None => 0,
        })
    }

    fn vector(&self, id: u64) -> StoreResult<Option<Vec<u8>>> {
        self.sync()?;
        let row = self.query_opt("SELECT v FROM kip_vectors WHERE elem = $1", &[&ek(id)])?;
        row.map(|r| get::<Vec<u8>>(&r, 0)).transpose()
    }

    fn scan_vectors(
        &self,
        f: &mut dyn FnMut(u64, &[u8]) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.sync()?;
        self.paged(
            "SELECT elem, v FROM kip_vectors ORDER BY elem LIMIT $1",
            "SELECT elem, v FROM kip_vectors WHERE elem > $1 ORDER BY elem LIMIT $2",
            &[],
            &|r| Ok(vec![Box::new(get::<i64>(r, 0)?)]),
            &mut |r| f(uk(get(r, 0)?), get::<&[u8]>(r, 1)?),
        )
    }
}

impl kip_storage::RequestLog for PgTx<'_> {
    fn request_record(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        let row = self.query_opt(
            "SELECT outcome FROM kip_requests WHERE key = $1",
            &[&key.as_bytes()],
        )?;
        match row {
            Some(r) => Ok(Some(get::<Vec<u8>>(&r, 0)?)),
            None => Ok(None),
        }
    }
}
