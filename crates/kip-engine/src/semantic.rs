//! Semantic recall: the embeddings of concepts, kept up to date in the background, and
//! the nearest-neighbour search SEARCH `MODE "semantic"` and `"hybrid"` use.
//!
//! One file on purpose: the in-memory vectors, their graph index and the worker that
//! feeds them share one lock and one slot numbering, and each part's invariants (a slot
//! is never reused while a graph may name it; a vector is stored only for the text it
//! was made from) are easiest to check side by side. Split candidates, if it grows:
//! `Vectors` + `build_ann` (the index) and `worker` + `take_batch` (the pipeline).
//!
//! - What is embedded, one vector per element: for a concept ([`embedding_text`]) its
//!   name, then the values of the attributes the keyword index reads
//!   ([`kip_store::text::DESCRIPTIVE_ATTRIBUTES`]: description, aliases, observations,
//!   ...): `name: value. value`; for a proposition ([`prop_embedding_text`]) its subject's
//!   name, its predicate in words and its object's name, then the predicate's
//!   description: `Alice works at Acme. The subject is employed by the object.`
//! - Writes never wait for the model: a write that changes an element's embedded text
//!   (or deletes it) marks it in the same transaction (`kip_store::VECTORS_ON`; renaming
//!   a concept marks its links, editing a predicate's description marks the predicate's
//!   links); a worker thread takes marked elements in batches, embeds them, and stores
//!   each vector with the hash of the text it embedded, clearing the mark only if the
//!   element still has that text (a deleted element's vector leaves memory).
//!   Vectors are not in the write-ahead log: after a crash the replayed write marks the
//!   concept again and the worker redoes it.
//! - The model's id is stored in `meta` (`vector_model`); opening with another model
//!   drops every vector and marks every concept.
//! - The search runs over an in-memory copy of the vectors loaded at open: exact (every
//!   vector compared) below [`ANN_MIN`] vectors, else through an HNSW graph (hnsw_rs)
//!   built in the background after open and kept up to date as vectors come; the type
//!   filter runs inside the graph search.

use crate::store::backend::Backend;
use crate::store::{ConceptRecord, ElemRef, GraphRead, PropRecord, StoreResult};
use kip_embed::Embedder;
use kip_lang::KipError;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

/// `meta` key: the id of the model that made the stored vectors.
pub const VECTOR_MODEL_KEY: &str = "vector_model";
/// Concepts the worker embeds per model call and per write transaction.
pub const WORKER_BATCH: usize = 32;

/// The text embedded for a concept: `name: first value. next value. ...` (the colon
/// after the name measured better with MiniLM than a full stop: a name is often a made-up
/// word the model knows nothing of).
pub fn embedding_text(c: &ConceptRecord) -> String {
    let mut out = c.name.clone();
    let mut first = true;
    let mut push = |s: &str| {
        let s = s.trim();
        if !s.is_empty() {
            if !out.is_empty() {
                out.push_str(if first { ": " } else { ". " });
            }
            first = false;
            out.push_str(s);
        }
    };
    for k in kip_store::text::DESCRIPTIVE_ATTRIBUTES {
        match c.attributes.get(k) {
            Some(Value::String(s)) => push(s),
            Some(Value::Array(items)) => {
                for it in items {
                    if let Value::String(s) = it {
                        push(s);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// A predicate in words: `works_at` -> `works at`.
fn predicate_words(p: &str) -> String {
    p.replace(['_', '-'], " ")
}

/// How an endpoint of a link reads in its text: a concept's name; a proposition (a
/// higher-order link) as its predicate in words.
fn endpoint_text(r: &dyn GraphRead, e: ElemRef) -> StoreResult<String> {
    Ok(match e {
        ElemRef::Concept(n) => r.concept_head(n)?.map(|(_, name)| name).unwrap_or_default(),
        ElemRef::Prop(n) => r
            .prop(n)?
            .map(|p| predicate_words(&p.predicate))
            .unwrap_or_default(),
    })
}

/// The text embedded for a proposition: `subject predicate-in-words object`, then the
/// predicate's description when its `$PropositionType` has one.
pub fn prop_embedding_text(r: &dyn GraphRead, p: &PropRecord) -> StoreResult<String> {
    let mut out = format!(
        "{} {} {}",
        endpoint_text(r, p.subject)?,
        predicate_words(&p.predicate),
        endpoint_text(r, p.object)?
    );
    let def = match r.concept_by_key(kip_store::PROPOSITION_TYPE, &p.predicate)? {
        Some(n) => r.concept(n)?,
        None => None,
    };
    if let Some(Value::String(d)) = def.as_ref().and_then(|c| c.attributes.get("description")) {
        let d = d.trim();
        if !d.is_empty() {
            out.push_str(". ");
            out.push_str(d);
        }
    }
    Ok(out.trim().to_string())
}

/// The vector-index type tag of a link of `predicate` (concept types never start with
/// a NUL, so the two kinds cannot collide).
fn link_tag(predicate: &str) -> String {
    format!("\u{0}{predicate}")
}

/// An element's current type tag (a concept's type; [`link_tag`] of a link's predicate)
/// and embedded text, by [`ElemRef::encode`] key; `None` when it is gone.
fn element_text(r: &dyn GraphRead, key: u64) -> StoreResult<Option<(String, String)>> {
    Ok(match ElemRef::decode(key) {
        ElemRef::Concept(n) => r
            .concept(n)?
            .map(|c| (c.concept_type.clone(), embedding_text(&c))),
        ElemRef::Prop(n) => match r.prop(n)? {
            Some(p) => Some((link_tag(&p.predicate), prop_embedding_text(r, &p)?)),
            None => None,
        },
    })
}

/// FNV-1a of the embedded text: what a stored vector was made from.
fn text_hash(t: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in t.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn encode_vector(hash: u64, v: &[f32]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + v.len() * 4);
    b.extend_from_slice(&hash.to_le_bytes());
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    b
}

fn decode_vector(b: &[u8]) -> Option<(u64, Vec<f32>)> {
    if b.len() < 8 || !(b.len() - 8).is_multiple_of(4) {
        return None;
    }
    let hash = u64::from_le_bytes(b[..8].try_into().ok()?);
    let v = b[8..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Some((hash, v))
}

/// Below this many live vectors the search compares the query with every vector; from
/// it on an HNSW graph is built in the background and used once ready. Measured on
/// synthetic 384-dimension vectors (docs/performance.md): the exact search takes 5.7 ms
/// at 30k, and the graph was not faster on that data below 100k, so the graph starts
/// where a scan gets long.
pub const ANN_MIN: usize = 200_000;
/// HNSW links per node and layer.
const ANN_LINKS: usize = 16;
/// Candidates explored per inserted node (build quality).
const ANN_EF_BUILD: usize = 100;
/// Candidates explored per search, at least (recall; docs/performance.md).
pub const ANN_EF_SEARCH: usize = 128;
/// Vectors inserted into the graph per step of a background build (the build checks
/// for shutdown between steps).
const ANN_BUILD_STEP: usize = 2_048;

/// Cosine distance of two graph rows (`1 - cos`, never negative). A graph row is a
/// quantized vector's bytes followed by 4 bytes holding the f32 inverse of their norm
/// ([`graph_row`]), so one integer dot gives the cosine (the distance sees only the two
/// rows, not their slots).
#[derive(Debug, Clone, Copy, Default)]
struct Cosine;

fn inverse_norm(row: &[i8]) -> f32 {
    match row.len().checked_sub(4).and_then(|i| row.get(i..)) {
        Some(t) => f32::from_le_bytes([t[0] as u8, t[1] as u8, t[2] as u8, t[3] as u8]),
        None => 0.0,
    }
}

impl hnsw_rs::prelude::Distance<i8> for Cosine {
    fn eval(&self, a: &[i8], b: &[i8]) -> f32 {
        let n = a.len().min(b.len()).saturating_sub(4);
        let dot = kip_embed::dot_i8i8(&a[..n], &b[..n]) as f32;
        (1.0 - dot * inverse_norm(a) * inverse_norm(b)).clamp(0.0, 2.0)
    }
}

/// A quantized vector's graph row: its bytes, then the f32 inverse of their norm (0 for
/// an all-zero vector) as 4 bytes.
fn graph_row(q: &[i8]) -> Vec<i8> {
    let n = (kip_embed::dot_i8i8(q, q) as f32).sqrt();
    let inv = if n > 0.0 { 1.0 / n } else { 0.0 };
    let mut row = Vec::with_capacity(q.len() + 4);
    row.extend_from_slice(q);
    row.extend(inv.to_le_bytes().map(|b| b as i8));
    row
}

/// The HNSW graph over slots `0..upto` of [`Vectors`] (slot numbers are its data ids),
/// on the quantized bytes.
struct Ann {
    graph: hnsw_rs::prelude::Hnsw<'static, i8, Cosine>,
}

impl std::fmt::Debug for Ann {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ann").finish_non_exhaustive()
    }
}

/// The vectors in memory, in append-only slots: a changed vector gets a new slot and its
/// old one is marked dead (an HNSW graph cannot move a node); `compact` drops the dead
/// slots (and the graph, rebuilt in the background) once they are half of them. Each
/// vector is held quantized ([`kip_embed::quantize`]: one byte per dimension and a
/// scale), a quarter of its f32 size; the store keeps the f32 values.
#[derive(Debug, Default)]
struct Vectors {
    dim: usize,
    /// Element per slot (`DEAD`: the slot's vector was replaced or removed).
    ids: Vec<u64>,
    types: Vec<u32>,
    data: Vec<i8>,
    scales: Vec<f32>,
    slot: HashMap<u64, usize>,
    dead: usize,
    type_names: Vec<String>,
    type_ids: HashMap<String, u32>,
    /// Whether a type id is a [`link_tag`] (a predicate) rather than a concept type.
    type_is_link: Vec<bool>,
    /// The graph, when built: it covers every slot (new slots are inserted as they come).
    ann: Option<Ann>,
    /// Bumped when slots are renumbered (a background build of the old numbering is
    /// then thrown away).
    generation: u64,
    /// Live vectors from which the graph is built and used ([`ANN_MIN`]; tests lower it).
    ann_min: usize,
}

const DEAD: u64 = u64::MAX;

impl Vectors {
    fn type_id(&mut self, t: &str) -> u32 {
        if let Some(&i) = self.type_ids.get(t) {
            return i;
        }
        let i = self.type_names.len() as u32;
        self.type_names.push(t.to_string());
        self.type_is_link.push(t.starts_with('\u{0}'));
        self.type_ids.insert(t.to_string(), i);
        i
    }

    fn row(&self, slot: usize) -> &[i8] {
        &self.data[slot * self.dim..(slot + 1) * self.dim]
    }

    /// The cosine of slot `s`'s vector with the unit query `q`.
    fn score(&self, s: usize, q: &[f32]) -> f32 {
        kip_embed::dot_i8(q, self.row(s)) * self.scales[s]
    }

    fn live(&self) -> usize {
        self.ids.len() - self.dead
    }

    fn put(&mut self, id: u64, concept_type: &str, v: &[f32]) {
        if v.len() != self.dim {
            return;
        }
        let t = self.type_id(concept_type);
        let (q, scale) = kip_embed::quantize(v);
        if let Some(&old) = self.slot.get(&id) {
            if self.types[old] == t && self.row(old) == q.as_slice() {
                return;
            }
            self.ids[old] = DEAD;
            self.dead += 1;
        }
        let s = self.ids.len();
        self.slot.insert(id, s);
        self.ids.push(id);
        self.types.push(t);
        self.data.extend_from_slice(&q);
        self.scales.push(scale);
        if let Some(a) = &self.ann {
            a.graph.insert_slice((&graph_row(&q), s));
        }
        self.compact_if_sparse();
    }

    fn remove(&mut self, id: u64) {
        if let Some(s) = self.slot.remove(&id) {
            self.ids[s] = DEAD;
            self.dead += 1;
            self.compact_if_sparse();
        }
    }

    /// Drops the dead slots once they are at least half of all (and 1,000 or more).
    fn compact_if_sparse(&mut self) {
        if self.dead < 1_000 || self.dead * 2 < self.ids.len() {
            return;
        }
        let mut ids = Vec::with_capacity(self.live());
        let mut types = Vec::with_capacity(self.live());
        let mut data = Vec::with_capacity(self.live() * self.dim);
        let mut scales = Vec::with_capacity(self.live());
        for s in 0..self.ids.len() {
            if self.ids[s] != DEAD {
                ids.push(self.ids[s]);
                types.push(self.types[s]);
                data.extend_from_slice(self.row(s));
                scales.push(self.scales[s]);
            }
        }
        self.slot = ids.iter().enumerate().map(|(s, &id)| (id, s)).collect();
        self.ids = ids;
        self.types = types;
        self.data = data;
        self.scales = scales;
        self.dead = 0;
        self.ann = None;
        self.generation += 1;
    }

    fn cosine(&self, id: u64, q: &[f32]) -> Option<f32> {
        let &s = self.slot.get(&id)?;
        Some(self.score(s, q))
    }

    /// The `k` most similar elements of a kind: `(cosine, key)`, best first. Exact below
    /// [`ANN_MIN`] live vectors or while the graph is being built; approximate (HNSW,
    /// filtered inside the search) otherwise.
    fn nearest(&self, q: &[f32], k: usize, kind: Kind<'_>) -> Vec<(f32, u64)> {
        if q.len() != self.dim || k == 0 {
            return Vec::new();
        }
        let (links, named) = match kind {
            Kind::Concepts(t) => (false, t.map(str::to_string)),
            Kind::Links(p) => (true, p.map(link_tag)),
        };
        let want = match named {
            Some(t) => match self.type_ids.get(&t) {
                Some(&i) => Some(i),
                None => return Vec::new(),
            },
            None => None,
        };
        let keep = |s: usize| {
            self.ids[s] != DEAD
                && match want {
                    Some(t) => self.types[s] == t,
                    None => self.type_is_link[self.types[s] as usize] == links,
                }
        };
        let every_node =
            want.is_none() && self.dead == 0 && self.type_is_link.iter().all(|&l| l == links);
        if let (Some(a), true) = (&self.ann, self.live() >= self.ann_min) {
            let filter = |s: &usize| *s < self.ids.len() && keep(*s);
            let ef = ANN_EF_SEARCH.max(k);
            let (qq, _) = kip_embed::quantize(q);
            let qq = graph_row(&qq);
            // Unfiltered when every node qualifies (hnsw_rs's filtered walk does more).
            let found = if every_node {
                a.graph.search(&qq, k, ef)
            } else {
                a.graph.search_filter(&qq, k, ef, Some(&filter))
            };
            let mut out: Vec<(f32, u64)> = found
                .into_iter()
                .filter(|n| n.d_id < self.ids.len() && keep(n.d_id))
                .map(|n| (self.score(n.d_id, q), self.ids[n.d_id]))
                .collect();
            out.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            out.truncate(k);
            return out;
        }
        self.exact(q, k, &keep)
    }

    fn exact(&self, q: &[f32], k: usize, keep: &dyn Fn(usize) -> bool) -> Vec<(f32, u64)> {
        // A bounded min-heap of the best k.
        let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(OrdF32, u64)>> =
            std::collections::BinaryHeap::with_capacity(k + 1);
        for (s, row) in self.data.chunks_exact(self.dim).enumerate() {
            if !keep(s) {
                continue;
            }
            let c = kip_embed::dot_i8(q, row) * self.scales[s];
            if heap.len() < k {
                heap.push(std::cmp::Reverse((OrdF32(c), self.ids[s])));
            } else if heap.peek().is_some_and(|w| c > w.0 .0 .0) {
                heap.pop();
                heap.push(std::cmp::Reverse((OrdF32(c), self.ids[s])));
            }
        }
        let mut out: Vec<(f32, u64)> = heap.into_iter().map(|r| (r.0 .0 .0, r.0 .1)).collect();
        out.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        out
    }
}

/// Builds the HNSW graph of `vectors` when it has none and holds enough vectors: the
/// slots are copied under the read lock, inserted outside any lock (in steps, so a
/// shutdown is not kept waiting), then the slots added meanwhile are inserted and the
/// graph published under the write lock. Returns whether a graph was published.
fn build_ann(vectors: &RwLock<Vectors>, stop: &AtomicBool) -> bool {
    let (generation, upto, dim, rows) = {
        let v = vectors.read().unwrap_or_else(|p| p.into_inner());
        if v.ann.is_some() || v.live() < v.ann_min {
            return false;
        }
        (v.generation, v.ids.len(), v.dim, v.data.clone())
    };
    let graph =
        hnsw_rs::prelude::Hnsw::<i8, Cosine>::new(ANN_LINKS, upto.max(1), 16, ANN_EF_BUILD, Cosine);
    let graph_rows: Vec<Vec<i8>> = rows.chunks_exact(dim).map(graph_row).collect();
    drop(rows);
    let all: Vec<(&[i8], usize)> = graph_rows
        .iter()
        .enumerate()
        .map(|(s, r)| (r.as_slice(), s))
        .collect();
    for step in all.chunks(ANN_BUILD_STEP) {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        graph.parallel_insert_slice(&step.to_vec());
    }
    let mut v = vectors.write().unwrap_or_else(|p| p.into_inner());
    if v.generation != generation || v.ann.is_some() {
        return false;
    }
    for s in upto..v.ids.len() {
        graph.insert_slice((&graph_row(v.row(s)), s));
    }
    v.ann = Some(Ann { graph });
    true
}

/// Which vectors a nearest-neighbour search considers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind<'a> {
    /// Concepts (of this type when given).
    Concepts(Option<&'a str>),
    /// Propositions (of this predicate when given).
    Links(Option<&'a str>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct OrdF32(f32);
impl Eq for OrdF32 {}
impl PartialOrd for OrdF32 {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for OrdF32 {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// Progress of the background embedding.
#[derive(Debug, Default)]
struct Progress {
    /// Bumped after each batch the worker stores (or fails).
    rounds: u64,
    /// The last failure of the model, if the last batch failed.
    error: Option<String>,
}

/// Query texts whose embeddings are kept ([`Semantic::embed_query`]).
pub const QUERY_CACHE: usize = 512;

/// The embeddings of recent query texts, oldest evicted first (agents repeat their
/// searches: a cached query costs a lookup instead of a model run).
#[derive(Debug, Default)]
struct QueryCache {
    vectors: HashMap<String, Vec<f32>>,
    order: std::collections::VecDeque<String>,
}

impl QueryCache {
    fn get(&mut self, text: &str) -> Option<Vec<f32>> {
        let v = self.vectors.get(text)?.clone();
        // Most recently used last.
        if let Some(i) = self.order.iter().position(|t| t == text) {
            if let Some(t) = self.order.remove(i) {
                self.order.push_back(t);
            }
        }
        Some(v)
    }

    fn put(&mut self, text: &str, v: &[f32]) {
        if self.vectors.contains_key(text) {
            return;
        }
        while self.order.len() >= QUERY_CACHE {
            match self.order.pop_front() {
                Some(old) => {
                    self.vectors.remove(&old);
                }
                None => break,
            }
        }
        self.order.push_back(text.to_string());
        self.vectors.insert(text.to_string(), v.to_vec());
    }
}

/// The embedder of a nexus, its vectors and its worker.
pub struct Semantic {
    embedder: Arc<dyn Embedder>,
    queries: Mutex<QueryCache>,
    vectors: RwLock<Vectors>,
    stop: AtomicBool,
    wake: (Mutex<bool>, Condvar),
    progress: (Mutex<Progress>, Condvar),
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Semantic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semantic")
            .field("model", &self.embedder.model_id())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Semantic {
    /// Enables vectors in `store` for `embedder`: records the model (dropping the vectors
    /// of another model and marking every concept), loads the stored vectors, and starts
    /// the worker.
    pub fn start(
        store: &Arc<dyn Backend>,
        embedder: Arc<dyn Embedder>,
    ) -> Result<Arc<Semantic>, KipError> {
        let model = embedder.model_id().to_string();
        store.write(
            |w| -> Result<(), KipError> {
                let first = w.enable_vectors()?;
                let stored = w.meta(VECTOR_MODEL_KEY)?;
                if first || stored.as_deref() != Some(model.as_bytes()) {
                    if stored.is_some() {
                        w.clear_vectors()?;
                    }
                    w.mark_for_embedding(None)?;
                    w.set_meta(VECTOR_MODEL_KEY, model.as_bytes())?;
                }
                Ok(())
            },
            false,
        )?;
        let mut vectors = Vectors {
            dim: embedder.dim(),
            ann_min: ANN_MIN,
            ..Vectors::default()
        };
        store.read(|r| -> Result<(), KipError> {
            let mut loaded = Vec::new();
            r.scan_vectors(&mut |id, b| {
                if let Some((_, v)) = decode_vector(b) {
                    loaded.push((id, v));
                }
                Ok(true)
            })?;
            for (key, v) in loaded {
                let tag = match ElemRef::decode(key) {
                    ElemRef::Concept(n) => r.concept_head(n)?.map(|(t, _)| t),
                    ElemRef::Prop(n) => r.prop(n)?.map(|p| link_tag(&p.predicate)),
                };
                if let Some(t) = tag {
                    vectors.put(key, &t, &v);
                }
            }
            Ok(())
        })?;
        let sem = Arc::new(Semantic {
            embedder,
            queries: Mutex::new(QueryCache::default()),
            vectors: RwLock::new(vectors),
            stop: AtomicBool::new(false),
            wake: (Mutex::new(true), Condvar::new()),
            progress: (Mutex::new(Progress::default()), Condvar::new()),
            threads: Mutex::new(Vec::new()),
        });
        let handle = {
            let sem = Arc::downgrade(&sem);
            let store = Arc::clone(store);
            std::thread::Builder::new()
                .name("kip-embed".into())
                .spawn(move || worker(sem, store))
                .map_err(|e| {
                    KipError::internal(format!("cannot start the embedding worker: {e}"))
                })?
        };
        lock(&sem.threads).push(handle);
        let ann = {
            let sem = Arc::downgrade(&sem);
            std::thread::Builder::new()
                .name("kip-ann".into())
                .spawn(move || loop {
                    let Some(s) = sem.upgrade() else { return };
                    if s.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    if build_ann(&s.vectors, &s.stop) {
                        tracing::info!("the vector index (HNSW) is built: {} vectors", s.len());
                    }
                    drop(s);
                    std::thread::sleep(Duration::from_millis(500));
                })
                .map_err(|e| {
                    KipError::internal(format!("cannot start the vector index thread: {e}"))
                })?
        };
        lock(&sem.threads).push(ann);
        Ok(sem)
    }

    /// The embedder's model id.
    pub fn model_id(&self) -> &str {
        self.embedder.model_id()
    }

    /// Embeds one query text (the last [`QUERY_CACHE`] distinct texts are remembered).
    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>, KipError> {
        if let Some(v) = lock(&self.queries).get(text) {
            return Ok(v);
        }
        let v = self
            .embedder
            .embed(&[text])
            .map_err(|e| KipError::internal(format!("cannot embed the search text: {e}")))?
            .pop()
            .unwrap_or_default();
        if v.len() == self.embedder.dim() {
            lock(&self.queries).put(text, &v);
        }
        Ok(v)
    }

    /// Wakes the worker (after a write).
    pub fn nudge(&self) {
        let (m, c) = &self.wake;
        *lock(m) = true;
        c.notify_one();
    }

    /// Waits until no concept is marked for embedding (or `timeout` passes, or the model
    /// keeps failing); returns how many are still marked.
    pub fn wait_idle(
        &self,
        store: &Arc<dyn Backend>,
        timeout: Duration,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, KipError> {
        let end = Instant::now() + timeout;
        loop {
            let left = store.read(|r| -> Result<u64, KipError> { Ok(r.embedding_marks()?) })?;
            progress(left);
            if left == 0 {
                return Ok(0);
            }
            self.nudge();
            let (m, c) = &self.progress;
            let g = lock(m);
            if let Some(e) = &g.error {
                return Err(KipError::internal(format!(
                    "the embedding model failed ({left} elements not embedded): {e}"
                )));
            }
            let now = Instant::now();
            if now >= end {
                return Ok(left);
            }
            let seen = g.rounds;
            let (g, _) = c
                .wait_timeout_while(g, (end - now).min(Duration::from_millis(500)), |p| {
                    p.rounds == seen
                })
                .unwrap_or_else(|p| p.into_inner());
            drop(g);
        }
    }

    /// Cosine similarities of the `k` nearest concepts (of `concept_type` when given):
    /// `(cosine, concept number)`, best first.
    pub fn nearest(&self, q: &[f32], k: usize, concept_type: Option<&str>) -> Vec<(f32, u64)> {
        self.vectors
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .nearest(q, k, Kind::Concepts(concept_type))
    }

    /// Cosine similarities of the `k` nearest propositions (of `predicate` when given):
    /// `(cosine, proposition number)`, best first.
    pub fn nearest_links(&self, q: &[f32], k: usize, predicate: Option<&str>) -> Vec<(f32, u64)> {
        let v = self.vectors.read().unwrap_or_else(|p| p.into_inner());
        v.nearest(q, k, Kind::Links(predicate))
            .into_iter()
            .filter_map(|(c, key)| match ElemRef::decode(key) {
                ElemRef::Prop(n) => Some((c, n)),
                ElemRef::Concept(_) => None,
            })
            .collect()
    }

    /// The cosine similarity of one element's vector with `q`, by [`ElemRef::encode`]
    /// key (`None`: not embedded).
    pub fn cosine(&self, id: u64, q: &[f32]) -> Option<f32> {
        self.vectors
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .cosine(id, q)
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.vectors
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .live()
    }

    /// Whether searches use the HNSW graph (built in the background from
    /// [`ANN_MIN`] vectors on).
    pub fn has_ann(&self) -> bool {
        self.vectors
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .ann
            .is_some()
    }

    /// Waits until the HNSW graph is built (when there are enough vectors for one) or
    /// `timeout` passes; returns whether searches use it.
    pub fn wait_for_ann(&self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        loop {
            {
                let v = self.vectors.read().unwrap_or_else(|p| p.into_inner());
                if v.ann.is_some() || v.live() < v.ann_min {
                    return v.ann.is_some();
                }
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sets the number of live vectors from which the graph is built and used (tests).
    #[doc(hidden)]
    pub fn set_ann_min(&self, n: usize) {
        self.vectors
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .ann_min = n.max(1);
    }

    /// Loads vectors directly (benchmarks and tests of the vector index: no model, no
    /// store): `(concept, type, unit vector)`.
    #[doc(hidden)]
    pub fn insert_raw(&self, items: &[(u64, &str, Vec<f32>)]) {
        let mut v = self.vectors.write().unwrap_or_else(|p| p.into_inner());
        for (id, t, x) in items {
            v.put(*id, t, x);
        }
    }

    /// The exact `k` nearest (every vector compared), for measuring the graph's recall.
    #[doc(hidden)]
    pub fn nearest_exact(&self, q: &[f32], k: usize) -> Vec<(f32, u64)> {
        let v = self.vectors.read().unwrap_or_else(|p| p.into_inner());
        v.exact(q, k, &|s| v.ids[s] != DEAD)
    }

    /// Whether no vector is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops the worker and waits for it.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.nudge();
        let threads = std::mem::take(&mut *lock(&self.threads));
        for h in threads {
            let _ = h.join();
        }
    }
}

/// An element of a batch with the text embedded and its vector (`None`: the element is
/// gone).
type Embedded = (u64, Option<(String, Vec<f32>)>);

/// One batch of work: marked elements (keys) with their text (or `None`: gone).
fn take_batch(r: &dyn GraphRead, from: u64) -> StoreResult<Vec<(u64, Option<String>)>> {
    let mut ids = Vec::new();
    r.scan_embedding_marks(from, &mut |id| {
        ids.push(id);
        Ok(ids.len() < WORKER_BATCH)
    })?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.push((id, element_text(r, id)?.map(|(_, text)| text)));
    }
    Ok(out)
}

fn worker(sem: std::sync::Weak<Semantic>, store: Arc<dyn Backend>) {
    let mut backoff = Duration::from_millis(500);
    let mut from = 0u64;
    loop {
        let Some(s) = sem.upgrade() else { return };
        if s.stop.load(Ordering::SeqCst) {
            return;
        }
        let batch = match store.read(|r| take_batch(r, from).map_err(KipError::from)) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("embedding worker: cannot read marks: {}", e.message);
                Vec::new()
            }
        };
        if batch.is_empty() {
            if from != 0 {
                // Wrapped around: start again from the lowest mark.
                from = 0;
                continue;
            }
            let (m, c) = &s.wake;
            let g = lock(m);
            let (mut g, _) = c
                .wait_timeout_while(g, Duration::from_secs(1), |woken| {
                    !*woken && !s.stop.load(Ordering::SeqCst)
                })
                .unwrap_or_else(|p| p.into_inner());
            *g = false;
            continue;
        }
        from = batch.last().map_or(0, |(id, _)| id + 1);
        let texts: Vec<&str> = batch.iter().filter_map(|(_, c)| c.as_deref()).collect();
        let vecs = if texts.is_empty() {
            Ok(Vec::new())
        } else {
            s.embedder.embed(&texts)
        };
        let vecs = match vecs {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("embedding worker: {e}; retrying in {backoff:?}");
                {
                    let (m, c) = &s.progress;
                    let mut p = lock(m);
                    p.error = Some(e.to_string());
                    p.rounds += 1;
                    c.notify_all();
                }
                from = 0;
                drop(s);
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        backoff = Duration::from_millis(500);
        let mut it = vecs.into_iter();
        let mut done: Vec<Embedded> = Vec::with_capacity(batch.len());
        let mut stored: Vec<(u64, String, Vec<f32>)> = Vec::new();
        let mut gone: Vec<u64> = Vec::new();
        for (id, c) in &batch {
            match c {
                Some(text) => {
                    if let Some(v) = it.next() {
                        done.push((*id, Some((text.clone(), v))));
                    }
                }
                None => done.push((*id, None)),
            }
        }
        let wrote = store.write(
            |w| -> Result<(), KipError> {
                stored.clear();
                gone.clear();
                for (id, d) in &done {
                    let current = element_text(w, *id)?;
                    match (current, d) {
                        (None, _) => {
                            w.put_vector(*id, None)?;
                            gone.push(*id);
                        }
                        (Some((tag, now)), Some((text, v))) => {
                            // Stored only if the element still has the text embedded;
                            // else its mark stays and the next round redoes it.
                            if now == *text {
                                w.put_vector(*id, Some(&encode_vector(text_hash(text), v)))?;
                                stored.push((*id, tag, v.clone()));
                            }
                        }
                        (Some(_), None) => {}
                    }
                }
                Ok(())
            },
            false,
        );
        match wrote {
            Ok(()) => {
                let mut vs = s.vectors.write().unwrap_or_else(|p| p.into_inner());
                for (id, t, v) in &stored {
                    vs.put(*id, t, v);
                }
                for id in &gone {
                    vs.remove(*id);
                }
            }
            Err(e) => tracing::warn!("embedding worker: cannot store vectors: {}", e.message),
        }
        if stored.is_empty() && gone.is_empty() {
            // Every element of the batch changed meanwhile: let the writes settle.
            std::thread::sleep(Duration::from_millis(50));
        }
        let (m, c) = &s.progress;
        let mut p = lock(m);
        p.error = None;
        p.rounds += 1;
        c.notify_all();
    }
}

/// The stored vectors' invariants, for `kip check`: each decodes, all have one
/// dimension, holds only finite numbers, and belongs to an element that exists (a
/// deleted element's vector goes in the same transaction). Returns the problems found.
pub fn check_vectors(r: &dyn GraphRead) -> StoreResult<Vec<String>> {
    let mut problems = Vec::new();
    let mut dim: Option<usize> = None;
    let mut keys = Vec::new();
    r.scan_vectors(&mut |key, bytes| {
        let id = ElemRef::decode(key).id_string();
        match decode_vector(bytes) {
            None => problems.push(format!("the stored vector of {id} does not decode")),
            Some((_, v)) => {
                if v.iter().any(|x| !x.is_finite()) {
                    problems.push(format!(
                        "the stored vector of {id} holds a non-finite number"
                    ));
                }
                match dim {
                    None => dim = Some(v.len()),
                    Some(d) if d != v.len() => problems.push(format!(
                        "the stored vector of {id} has {} dimensions, the others {d}",
                        v.len()
                    )),
                    Some(_) => {}
                }
            }
        }
        keys.push(key);
        Ok(true)
    })?;
    for key in keys {
        let exists = match ElemRef::decode(key) {
            ElemRef::Concept(n) => r.concept_head(n)?.is_some(),
            ElemRef::Prop(n) => r.prop(n)?.is_some(),
        };
        if !exists {
            problems.push(format!(
                "a vector is stored for {}, which does not exist",
                ElemRef::decode(key).id_string()
            ));
        }
    }
    Ok(problems)
}

/// Elements ([`ElemRef::encode`] keys) whose stored vector is missing or was made from
/// another text.
pub fn stale_elements(r: &dyn GraphRead) -> Result<Vec<u64>, KipError> {
    let mut ids = Vec::new();
    r.scan_concepts(&mut |id| {
        ids.push(id);
        Ok(true)
    })?;
    r.scan_props(&mut |id| {
        ids.push(ElemRef::Prop(id).encode());
        Ok(true)
    })?;
    let mut stale = Vec::new();
    for id in ids {
        let Some((_, text)) = element_text(r, id)? else {
            continue;
        };
        let fresh = r
            .vector(id)?
            .and_then(|b| decode_vector(&b))
            .is_some_and(|(h, _)| h == text_hash(&text));
        if !fresh {
            stale.push(id);
        }
    }
    Ok(stale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_put_replace_remove_and_rank() {
        let mut v = Vectors {
            dim: 2,
            ..Vectors::default()
        };
        v.put(1, "A", &[1.0, 0.0]);
        v.put(2, "B", &[0.0, 1.0]);
        v.put(3, "A", &[0.6, 0.8]);
        assert_eq!(
            v.nearest(&[1.0, 0.0], 2, Kind::Concepts(None))
                .iter()
                .map(|x| x.1)
                .collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert_eq!(
            v.nearest(&[0.0, 1.0], 5, Kind::Concepts(Some("A")))
                .iter()
                .map(|x| x.1)
                .collect::<Vec<_>>(),
            vec![3, 1]
        );
        v.put(1, "A", &[0.0, 1.0]);
        assert_eq!(v.nearest(&[0.0, 1.0], 1, Kind::Concepts(Some("A")))[0].1, 1);
        v.remove(1);
        assert_eq!(v.live(), 2);
        assert!(v
            .nearest(&[0.0, 1.0], 3, Kind::Concepts(None))
            .iter()
            .all(|x| x.1 != 1));
        assert_eq!(
            v.cosine(3, &[0.6, 0.8]).map(|c| (c * 100.0).round()),
            Some(100.0)
        );
        assert!(v
            .nearest(&[1.0, 0.0], 3, Kind::Concepts(Some("C")))
            .is_empty());
        // Links are a kind apart: never among concepts, filtered by predicate.
        v.put(9, &link_tag("knows"), &[0.6, 0.8]);
        assert!(v
            .nearest(&[0.6, 0.8], 5, Kind::Concepts(None))
            .iter()
            .all(|x| x.1 != 9));
        let links = v.nearest(&[1.0, 0.0], 5, Kind::Links(None));
        assert_eq!(links.iter().map(|x| x.1).collect::<Vec<_>>(), vec![9]);
        assert!((links[0].0 - 0.6).abs() < 0.01, "{links:?}");
        assert!(v.nearest(&[1.0, 0.0], 5, Kind::Links(Some("A"))).is_empty());
        assert_eq!(
            v.nearest(&[1.0, 0.0], 5, Kind::Links(Some("knows"))).len(),
            1
        );
        let b = encode_vector(7, &[0.5, -1.0]);
        assert_eq!(decode_vector(&b), Some((7, vec![0.5, -1.0])));
        let mut c = QueryCache::default();
        for i in 0..QUERY_CACHE + 2 {
            c.put(&format!("q{i}"), &[i as f32]);
            // q0 stays the most recently used.
            assert_eq!(c.get("q0"), Some(vec![0.0]));
        }
        assert_eq!(c.vectors.len(), QUERY_CACHE);
        assert_eq!(c.get("q1"), None, "the least recently used went first");
        assert_eq!(
            c.get(&format!("q{}", QUERY_CACHE + 1)),
            Some(vec![(QUERY_CACHE + 1) as f32])
        );
        assert_eq!(decode_vector(&b[..5]), None);
    }
}
