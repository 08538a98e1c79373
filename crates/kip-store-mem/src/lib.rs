//! # kip-store-mem
//!
//! A storage backend in memory: every table of the contract as a persistent ordered
//! map (`imbl`), so a read snapshot is a clone of the root (constant time, never copied
//! again) and a write transaction works on its own clone, published by replacing the
//! root when it commits. Nothing is written anywhere: what it holds is gone with the
//! process. For tests and throwaway agents (`kip_open::Open::in_memory_contract`).
//!
//! It is also the proof that a backend takes one crate and no engine change: it
//! implements [`Backend`], [`GraphRead`], [`GraphWrite`] and the index upkeep target
//! ([`IndexTarget`]) of `kip-storage` and nothing else, and passes the contract's
//! conformance kit (`kip_storage::conformance`) like the redb and PostgreSQL backends.

use imbl::{OrdMap, OrdSet};
use kip_storage::backend::{AuditKeep, Backend};
use kip_storage::upkeep::{self, IndexTarget};
use kip_storage::{
    attrs, text, ConceptRecord, Continue, ElemRef, ElementRecord, GraphRead, GraphWrite,
    PropRecord, RequestLog, RequestLogWrite, Stat, StoreError, StoreResult, TEXT_DOCS,
    TEXT_INDEX_KEY, TEXT_LEN, VECTORS_ON,
};
use std::ops::Bound;

mod elements;
mod history;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// `(type, name)`, `(type or name, id)`, `(s, p, o)` and the like, as map keys.
type Pair = (String, u64);
type Spo = (u64, String, u64);
type Pos = (String, u64, u64);
type AttrKey = (String, String, String, u64);

/// Every table, as one value: a snapshot is a clone.
#[derive(Clone, Default)]
struct Tables {
    concepts: OrdMap<u64, Arc<ConceptRecord>>,
    concept_key: OrdMap<(String, String), u64>,
    concept_type: OrdSet<Pair>,
    concept_name: OrdSet<Pair>,
    props: OrdMap<u64, Arc<PropRecord>>,
    spo: OrdMap<Spo, u64>,
    pos: OrdMap<Pos, u64>,
    osp: OrdMap<Spo, u64>,
    stats: OrdMap<String, u64>,
    meta: OrdMap<String, Vec<u8>>,
    postings: OrdMap<(String, u64), (u32, u32)>,
    attrs: OrdSet<AttrKey>,
    marks: OrdSet<u64>,
    vectors: OrdMap<u64, Arc<Vec<u8>>>,
    /// The request log: key -> (made at, outcome), and (made at, key) for pruning.
    requests: OrdMap<String, (u64, Arc<Vec<u8>>)>,
    requests_by_time: OrdSet<(u64, String)>,
    /// KIP 2.0 element records: (space, encoded id) -> record.
    elements: OrdMap<(u32, u64), Arc<ElementRecord>>,
    /// Structural references, target first: (space, target, role, source).
    element_refs: OrdSet<(u32, u64, String, u64)>,
    next_concept: u64,
    next_prop: u64,
    next_evidence: u64,
    next_activity: u64,
    vectors_on: bool,
    /// History (`kip_storage::history`): version chain (space, key, part, valid_to) ->
    /// state, changes (space, seq) -> the keys that commit changed, commits (space,
    /// seq) -> record.
    hist_versions: OrdMap<(u32, u64, u8, u64), Arc<Vec<u8>>>,
    hist_changes: OrdMap<(u32, u64), Arc<Vec<u64>>>,
    hist_commits: OrdMap<(u32, u64), Arc<Vec<u8>>>,
    /// The write transaction's history state (reset when it commits).
    txn_history: kip_storage::history::TxnHistory,
}

/// The in-memory backend.
#[derive(Default)]
pub struct MemStore {
    /// The committed state.
    root: RwLock<Tables>,
    /// Held by a write transaction from its start to its publication: writes run one at
    /// a time, each on the state the previous one published.
    writer: Mutex<()>,
    /// The audit log (not graph data: not part of a snapshot).
    audit: Mutex<OrdMap<u64, Arc<Vec<u8>>>>,
}

impl std::fmt::Debug for MemStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemStore").finish_non_exhaustive()
    }
}

impl MemStore {
    /// An empty store (the engine bootstraps it when a nexus is made over it).
    pub fn new() -> MemStore {
        let mut t = Tables {
            next_concept: 1,
            next_prop: 1,
            next_evidence: 1,
            next_activity: 1,
            ..Tables::default()
        };
        t.meta.insert(
            TEXT_INDEX_KEY.into(),
            text::TEXT_INDEX_VERSION.to_le_bytes().to_vec(),
        );
        t.meta.insert(
            attrs::ATTR_INDEX_KEY.into(),
            attrs::ATTR_INDEX_VERSION.to_le_bytes().to_vec(),
        );
        MemStore {
            root: RwLock::new(t),
            ..MemStore::default()
        }
    }

    fn snapshot(&self) -> Tables {
        self.root.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn publish(&self, t: Tables) {
        *self.root.write().unwrap_or_else(|p| p.into_inner()) = t;
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Backend for MemStore {
    fn read_with(&self, f: &mut dyn FnMut(&dyn GraphRead) -> StoreResult<()>) -> StoreResult<()> {
        let t = self.snapshot();
        f(&t)
    }

    fn write_with(
        &self,
        f: &mut dyn FnMut(&mut dyn GraphWrite) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        let _gate = lock(&self.writer);
        let mut t = self.snapshot();
        if f(&mut t)? {
            kip_storage::history::finish(&mut t)?;
            self.publish(t);
        }
        Ok(())
    }

    fn reindex(&self, progress: &mut dyn FnMut(u64, u64)) -> StoreResult<()> {
        let _gate = lock(&self.writer);
        let mut t = self.snapshot();
        t.postings = OrdMap::new();
        t.attrs = OrdSet::new();
        let derived: Vec<String> = t
            .stats
            .keys()
            .filter(|k| k.starts_with("a:") || *k == TEXT_DOCS || *k == TEXT_LEN)
            .cloned()
            .collect();
        for k in derived {
            t.stats.remove(&k);
        }
        let all: Vec<(u64, Arc<ConceptRecord>)> =
            t.concepts.iter().map(|(k, v)| (*k, v.clone())).collect();
        let total = all.len() as u64;
        for (done, (id, c)) in all.iter().enumerate() {
            upkeep::index_text(
                &mut t,
                ElemRef::Concept(*id).encode(),
                &text::concept_doc(c),
            )?;
            upkeep::file_attrs(&mut t, *id, None, Some(c))?;
            if done % 1000 == 0 {
                progress(done as u64, total);
            }
        }
        progress(total, total);
        self.publish(t);
        Ok(())
    }

    fn check_storage(&self) -> StoreResult<Vec<String>> {
        Ok(Vec::new())
    }

    fn path(&self) -> Option<&Path> {
        None
    }

    fn kind(&self) -> &'static str {
        "memory"
    }

    fn location(&self) -> String {
        "in memory".into()
    }

    fn audit_append(
        &self,
        records: &[(u64, Vec<u8>)],
        keep: AuditKeep,
        _durable: bool,
    ) -> StoreResult<()> {
        let mut log = lock(&self.audit);
        for (seq, bytes) in records {
            log.insert(*seq, Arc::new(bytes.clone()));
        }
        let last = log.get_max().map_or(0, |(k, _)| *k);
        let cut = keep.cut(last);
        if cut > 0 {
            let (_, at, mut rest) = log.split_lookup(&cut);
            if let Some(v) = at {
                rest.insert(cut, v);
            }
            *log = rest;
        }
        Ok(())
    }

    fn audit_rewrite(&self, records: &[(u64, Vec<u8>)]) -> StoreResult<()> {
        let mut log = lock(&self.audit);
        for (seq, bytes) in records {
            if log.contains_key(seq) {
                log.insert(*seq, Arc::new(bytes.clone()));
            }
        }
        Ok(())
    }

    fn audit_range(
        &self,
        lo: u64,
        hi: u64,
        rev: bool,
        f: &mut dyn FnMut(u64, &[u8]) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        if lo >= hi {
            return Ok(());
        }
        let log = lock(&self.audit).clone();
        let range = log.range(lo..hi);
        if rev {
            for (k, v) in range.rev() {
                if !f(*k, v)? {
                    break;
                }
            }
        } else {
            for (k, v) in range {
                if !f(*k, v)? {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// Visits `iter` until `f` says stop.
fn each<I, T>(iter: I, mut f: impl FnMut(T) -> StoreResult<Continue>) -> StoreResult<()>
where
    I: Iterator<Item = T>,
{
    for x in iter {
        if !f(x)? {
            break;
        }
    }
    Ok(())
}

/// The bounds of the `(s, p, o)`-ordered keys with first part `first`, and second part
/// `p` if given.
fn spo_range(first: u64, p: Option<&str>) -> (Bound<Spo>, Bound<Spo>) {
    match p {
        Some(p) => (
            Bound::Included((first, p.to_owned(), 0)),
            Bound::Included((first, p.to_owned(), u64::MAX)),
        ),
        None => (
            Bound::Included((first, String::new(), 0)),
            match first.checked_add(1) {
                Some(next) => Bound::Excluded((next, String::new(), 0)),
                None => Bound::Unbounded,
            },
        ),
    }
}

/// The smallest string greater than `s` (`s` followed by NUL): every key whose part is
/// exactly `s` sorts before it, every key whose part is greater sorts at or after it.
fn just_after(s: &str) -> String {
    let mut n = String::with_capacity(s.len() + 1);
    n.push_str(s);
    n.push('\0');
    n
}

impl RequestLog for Tables {
    fn request_record(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        Ok(self.requests.get(key).map(|(_, v)| v.to_vec()))
    }
}

impl RequestLogWrite for Tables {
    fn put_request_record(&mut self, key: &str, at_ms: u64, outcome: &[u8]) -> StoreResult<()> {
        if let Some((old, _)) = self
            .requests
            .insert(key.to_owned(), (at_ms, Arc::new(outcome.to_vec())))
        {
            self.requests_by_time.remove(&(old, key.to_owned()));
        }
        self.requests_by_time.insert((at_ms, key.to_owned()));
        Ok(())
    }

    fn prune_request_records(&mut self, before_ms: u64, max: usize) -> StoreResult<u64> {
        let old: Vec<(u64, String)> = self
            .requests_by_time
            .range(..(before_ms, String::new()))
            .take(max)
            .cloned()
            .collect();
        for (at, key) in &old {
            self.requests_by_time.remove(&(*at, key.clone()));
            self.requests.remove(key);
        }
        Ok(old.len() as u64)
    }
}

impl GraphRead for Tables {
    fn concept(&self, id: u64) -> StoreResult<Option<ConceptRecord>> {
        Ok(self.concepts.get(&id).map(|c| ConceptRecord::clone(c)))
    }

    fn concept_head(&self, id: u64) -> StoreResult<Option<(String, String)>> {
        Ok(self
            .concepts
            .get(&id)
            .map(|c| (c.concept_type.clone(), c.name.clone())))
    }

    fn concept_by_key(&self, concept_type: &str, name: &str) -> StoreResult<Option<u64>> {
        Ok(self
            .concept_key
            .get(&(concept_type.to_owned(), name.to_owned()))
            .copied())
    }

    fn scan_type(
        &self,
        concept_type: &str,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let lo = (concept_type.to_owned(), 0);
        let hi = (concept_type.to_owned(), u64::MAX);
        each(self.concept_type.range(lo..=hi), |(_, id)| f(*id))
    }

    fn scan_name(
        &self,
        name: &str,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let lo = (name.to_owned(), 0);
        let hi = (name.to_owned(), u64::MAX);
        each(self.concept_name.range(lo..=hi), |(_, id)| f(*id))
    }

    fn scan_concepts(&self, f: &mut dyn FnMut(u64) -> StoreResult<Continue>) -> StoreResult<()> {
        each(self.concepts.keys(), |id| f(*id))
    }

    fn prop(&self, id: u64) -> StoreResult<Option<PropRecord>> {
        Ok(self.props.get(&id).map(|p| PropRecord::clone(p)))
    }

    fn prop_by_spo(&self, s: ElemRef, p: &str, o: ElemRef) -> StoreResult<Option<u64>> {
        Ok(self
            .spo
            .get(&(s.encode(), p.to_owned(), o.encode()))
            .copied())
    }

    fn scan_out(
        &self,
        s: ElemRef,
        p: Option<&str>,
        f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        each(
            self.spo.range(spo_range(s.encode(), p)),
            |((_, p, o), id)| f(p, ElemRef::decode(*o), *id),
        )
    }

    fn scan_in(
        &self,
        o: ElemRef,
        p: Option<&str>,
        f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        each(
            self.osp.range(spo_range(o.encode(), p)),
            |((_, p, s), id)| f(p, ElemRef::decode(*s), *id),
        )
    }

    fn scan_predicate(
        &self,
        p: &str,
        f: &mut dyn FnMut(ElemRef, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let lo = (p.to_owned(), 0, 0);
        let hi = (p.to_owned(), u64::MAX, u64::MAX);
        each(self.pos.range(lo..=hi), |((_, o, s), id)| {
            f(ElemRef::decode(*s), ElemRef::decode(*o), *id)
        })
    }

    fn scan_props(&self, f: &mut dyn FnMut(u64) -> StoreResult<Continue>) -> StoreResult<()> {
        each(self.props.keys(), |id| f(*id))
    }

    fn stat(&self, key: Stat<'_>) -> StoreResult<u64> {
        Ok(self.stats.get(key.key().as_ref()).copied().unwrap_or(0))
    }

    fn totals(&self) -> StoreResult<(u64, u64)> {
        Ok((self.concepts.len() as u64, self.props.len() as u64))
    }

    fn meta(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        Ok(self.meta.get(key).cloned())
    }

    fn scan_postings(
        &self,
        from: &str,
        f: &mut dyn FnMut(&str, u64, u32, u32) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        each(
            self.postings.range((from.to_owned(), 0)..),
            |((term, key), (tf, len))| f(term, *key, *tf, *len),
        )
    }

    fn posting(&self, term: &str, key: u64) -> StoreResult<Option<(u32, u32)>> {
        Ok(self.postings.get(&(term.to_owned(), key)).copied())
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
        let key = |v: &str, id: u64| (concept_type.to_owned(), attr.to_owned(), v.to_owned(), id);
        let lo = match lo {
            Bound::Included(v) => Bound::Included(key(v, 0)),
            Bound::Excluded(v) => Bound::Excluded(key(v, u64::MAX)),
            Bound::Unbounded => Bound::Included(key("", 0)),
        };
        let hi = match hi {
            Bound::Included(v) => Bound::Included(key(v, u64::MAX)),
            Bound::Excluded(v) => Bound::Excluded(key(v, 0)),
            Bound::Unbounded => {
                Bound::Excluded((concept_type.to_owned(), just_after(attr), String::new(), 0))
            }
        };
        if range_is_empty(&lo, &hi) {
            return Ok(());
        }
        let range = self.attrs.range((lo, hi));
        if rev {
            each(range.rev(), |(_, _, v, id)| f(v, *id))
        } else {
            each(range, |(_, _, v, id)| f(v, *id))
        }
    }

    fn scan_embedding_marks(
        &self,
        from: u64,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        each(self.marks.range(from..), |k| f(*k))
    }

    fn embedding_marks(&self) -> StoreResult<u64> {
        Ok(self.marks.len() as u64)
    }

    fn vector(&self, id: u64) -> StoreResult<Option<Vec<u8>>> {
        Ok(self.vectors.get(&id).map(|v| v.to_vec()))
    }

    fn scan_vectors(
        &self,
        f: &mut dyn FnMut(u64, &[u8]) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        each(self.vectors.iter(), |(k, v)| f(*k, v))
    }
}

/// Whether `(lo, hi)` holds nothing (a range whose start is after its end would make
/// the map's range panic).
fn range_is_empty<K: Ord>(lo: &Bound<K>, hi: &Bound<K>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
        _ => false,
    }
}

impl Tables {
    fn bump_key(&mut self, key: &str, delta: i64) -> StoreResult<()> {
        let now = self.stats.get(key).copied().unwrap_or(0);
        let next = now.checked_add_signed(delta).ok_or_else(|| {
            StoreError::Corruption(format!("the counter {key} would go below zero"))
        })?;
        if next == 0 {
            self.stats.remove(key);
        } else {
            self.stats.insert(key.to_owned(), next);
        }
        Ok(())
    }
}

impl GraphWrite for Tables {
    fn alloc_concept_id(&mut self) -> StoreResult<u64> {
        let id = self.next_concept;
        self.next_concept += 1;
        Ok(id)
    }

    fn alloc_prop_id(&mut self) -> StoreResult<u64> {
        let id = self.next_prop;
        self.next_prop += 1;
        Ok(id)
    }

    fn put_concept(
        &mut self,
        id: u64,
        rec: &ConceptRecord,
        old: Option<&ConceptRecord>,
    ) -> StoreResult<()> {
        upkeep::concept_put(self, id, rec, old)?;
        self.concepts.insert(id, Arc::new(rec.clone()));
        Ok(())
    }

    fn delete_concept(&mut self, id: u64, rec: &ConceptRecord) -> StoreResult<()> {
        upkeep::concept_delete(self, id, rec)?;
        self.concepts.remove(&id);
        Ok(())
    }

    fn put_prop(&mut self, id: u64, rec: &PropRecord, old: Option<&PropRecord>) -> StoreResult<()> {
        upkeep::prop_put(self, id, rec, old)?;
        self.props.insert(id, Arc::new(rec.clone()));
        Ok(())
    }

    fn delete_prop(&mut self, id: u64, rec: &PropRecord) -> StoreResult<()> {
        upkeep::prop_delete(self, id, rec)?;
        self.props.remove(&id);
        Ok(())
    }

    fn set_meta(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.meta.insert(key.to_owned(), value.to_vec());
        if key == VECTORS_ON {
            self.vectors_on = true;
        }
        Ok(())
    }

    fn enable_vectors(&mut self) -> StoreResult<bool> {
        if self.vectors_on {
            return Ok(false);
        }
        self.set_meta(VECTORS_ON, &[1])?;
        Ok(true)
    }

    fn mark_for_embedding(&mut self, ids: Option<&[u64]>) -> StoreResult<u64> {
        let all: Vec<u64> = match ids {
            Some(ids) => ids.to_vec(),
            None => self
                .concepts
                .keys()
                .copied()
                .chain(self.props.keys().map(|p| ElemRef::Prop(*p).encode()))
                .collect(),
        };
        let mut n = 0;
        for k in all {
            if self.marks.insert(k).is_none() {
                n += 1;
            }
        }
        Ok(n)
    }

    fn put_vector(&mut self, id: u64, bytes: Option<&[u8]>) -> StoreResult<()> {
        self.marks.remove(&id);
        if let Some(b) = bytes {
            self.vectors.insert(id, Arc::new(b.to_vec()));
        }
        Ok(())
    }

    fn clear_vectors(&mut self) -> StoreResult<()> {
        self.vectors = OrdMap::new();
        Ok(())
    }
}

impl IndexTarget for Tables {
    fn vectors_on(&self) -> bool {
        self.vectors_on
    }

    fn set_posting(&mut self, term: &str, key: u64, entry: Option<(u32, u32)>) -> StoreResult<()> {
        let k = (term.to_owned(), key);
        match entry {
            Some(e) => self.postings.insert(k, e),
            None => self.postings.remove(&k),
        };
        Ok(())
    }

    fn set_attr_entry(
        &mut self,
        concept_type: &str,
        attr: &str,
        value: &str,
        id: u64,
        present: bool,
    ) -> StoreResult<()> {
        let k = (
            concept_type.to_owned(),
            attr.to_owned(),
            value.to_owned(),
            id,
        );
        if present {
            self.attrs.insert(k);
        } else {
            self.attrs.remove(&k);
        }
        Ok(())
    }

    fn set_concept_key(
        &mut self,
        id: u64,
        concept_type: &str,
        name: &str,
        present: bool,
    ) -> StoreResult<()> {
        let key = (concept_type.to_owned(), name.to_owned());
        let ty = (concept_type.to_owned(), id);
        let nm = (name.to_owned(), id);
        if present {
            if let Some(other) = self.concept_key.insert(key, id).filter(|o| *o != id) {
                return Err(StoreError::Constraint(format!(
                    "{{type: {concept_type:?}, name: {name:?}}} is C:{other}'s already"
                )));
            }
            self.concept_type.insert(ty);
            self.concept_name.insert(nm);
        } else {
            self.concept_key.remove(&key);
            self.concept_type.remove(&ty);
            self.concept_name.remove(&nm);
        }
        Ok(())
    }

    fn set_link_key(
        &mut self,
        id: u64,
        s: ElemRef,
        p: &str,
        o: ElemRef,
        present: bool,
    ) -> StoreResult<()> {
        let (s, o) = (s.encode(), o.encode());
        let spo = (s, p.to_owned(), o);
        let pos = (p.to_owned(), o, s);
        let osp = (o, p.to_owned(), s);
        if present {
            if let Some(other) = self.spo.insert(spo, id).filter(|o| *o != id) {
                return Err(StoreError::Constraint(format!(
                    "the link ({}, {p:?}, {}) is P:{other}'s already",
                    ElemRef::decode(s).id_string(),
                    ElemRef::decode(o).id_string()
                )));
            }
            self.pos.insert(pos, id);
            self.osp.insert(osp, id);
        } else {
            self.spo.remove(&spo);
            self.pos.remove(&pos);
            self.osp.remove(&osp);
        }
        Ok(())
    }

    fn bump(&mut self, stat: Stat<'_>, delta: i64) -> StoreResult<()> {
        self.bump_key(&stat.key(), delta)
    }

    fn mark(&mut self, key: u64) -> StoreResult<()> {
        self.marks.insert(key);
        Ok(())
    }

    fn drop_vector(&mut self, key: u64) -> StoreResult<()> {
        self.vectors.remove(&key);
        Ok(())
    }
}
