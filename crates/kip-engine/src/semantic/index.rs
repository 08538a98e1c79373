//! The vectors in memory and their nearest-neighbour search: quantized slots, the
//! exact scan, and the HNSW graph (hnsw_rs) built in the background over them. The
//! invariants checked together here: a slot is never reused while a graph may name it,
//! and the graph's rows are the slots' quantized bytes.
//!
//! Concepts and propositions live in two spaces ([`Space`]), each with its own slots
//! and graph: a memory holds several links per concept (3.7 in the benchmark graph),
//! and a concept search that had to walk past the links' slots (and, in one shared
//! graph, through their nodes with a filter) would pay for every link it never returns.

use super::text::link_tag;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::RwLock;

/// Below this many live vectors of a kind the search compares the query with every
/// vector; from it on an HNSW graph is built in the background (or restored from its
/// save) and used once ready. Measured on real MiniLM embeddings of memory-like
/// sentences (docs/performance.md, `real_recall_bench`): the graph answers in 0.53 ms
/// against the exact scan's 0.73 ms at 20k, 0.34 against 1.85 ms at 50k and 0.69 against
/// 3.69 ms at 100k, recall@10 0.994-0.998; from 50k on the graph saves more than a
/// millisecond per search and its build (14 s at 50k) is done once, then saved.
pub const ANN_MIN: usize = 50_000;
/// HNSW links per node and layer.
const ANN_LINKS: usize = 16;
/// Candidates explored per inserted node (build quality).
const ANN_EF_BUILD: usize = 100;
/// Candidates explored per search in a graph of [`ANN_EF_LARGE_FROM`] nodes or more, at
/// least (recall; docs/performance.md).
pub const ANN_EF_SEARCH: usize = 128;
/// Candidates explored per search in a smaller graph, at least.
pub const ANN_EF_SEARCH_SMALL: usize = 64;
/// Graph size from which a search explores [`ANN_EF_SEARCH`] candidates instead of
/// [`ANN_EF_SEARCH_SMALL`]. Measured on real MiniLM embeddings of memory-like sentences
/// (`hybrid_bench`, recall@10 against the exact search over 200 new sentences): with 64
/// candidates 0.998 at 100k, 0.994 at 300k, 0.970 at 600k, 0.924 at 1M; with 128, 0.998,
/// 1.000, 0.991 and 0.955. The walk's time grows with the candidates (at 100k 1.26 ms
/// with 128, 0.75-0.87 ms with 64), and below 300k nodes 64 of them lose at most 0.6
/// points of recall@10.
pub const ANN_EF_LARGE_FROM: usize = 300_000;

/// Candidates a search for the `k` nearest explores in a graph of `nodes` nodes.
pub(super) fn ef_search(nodes: usize, k: usize) -> usize {
    let ef = if nodes >= ANN_EF_LARGE_FROM {
        ANN_EF_SEARCH
    } else {
        ANN_EF_SEARCH_SMALL
    };
    ef.max(k)
}
/// Vectors inserted into the graph per step of a background build (the build checks
/// for shutdown between steps).
const ANN_BUILD_STEP: usize = 2_048;
/// Vectors a graph catches up with per step (under the read lock: searches go on, the
/// embedding worker's next store waits for the step).
const ANN_CATCH_UP_STEP: usize = 512;

/// Cosine distance of two graph rows (`1 - cos`, never negative). A graph row is a
/// quantized vector's bytes followed by 4 bytes holding the f32 inverse of their norm
/// ([`graph_row`]), so one integer dot gives the cosine (the distance sees only the two
/// rows, not their slots).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Cosine;

fn inverse_norm(row: &[i8]) -> f32 {
    match row.len().checked_sub(4).and_then(|i| row.get(i..)) {
        Some(t) => f32::from_le_bytes([t[0] as u8, t[1] as u8, t[2] as u8, t[3] as u8]),
        None => 0.0,
    }
}

impl hnsw_rs::prelude::Distance<i8> for Cosine {
    fn eval(&self, a: &[i8], b: &[i8]) -> f32 {
        let n = a.len().min(b.len()).saturating_sub(4);
        let dot = kip_embed::dot_i8i8_wide(&a[..n], &b[..n]) as f32;
        (1.0 - dot * inverse_norm(a) * inverse_norm(b)).clamp(0.0, 2.0)
    }
}

/// A quantized vector's graph row: its bytes, then the f32 inverse of their norm (0 for
/// an all-zero vector) as 4 bytes.
fn graph_row(q: &[i8]) -> Vec<i8> {
    let n = (kip_embed::dot_i8i8_wide(q, q) as f32).sqrt();
    let inv = if n > 0.0 { 1.0 / n } else { 0.0 };
    let mut row = Vec::with_capacity(q.len() + 4);
    row.extend_from_slice(q);
    row.extend(inv.to_le_bytes().map(|b| b as i8));
    row
}

/// The HNSW graph over slots `0..covered` of a [`Space`] (slot numbers are its data
/// ids), on the quantized bytes. Slots from `covered` on (added while the graph was
/// built, or since it was saved) are searched exactly until the background thread has
/// inserted them ([`extend_ann`]); a new slot goes straight into a graph that has
/// caught up.
pub(super) struct Ann {
    pub(super) graph: hnsw_rs::prelude::Hnsw<'static, i8, Cosine>,
    pub(super) covered: AtomicUsize,
}

impl Ann {
    pub(super) fn new(graph: hnsw_rs::prelude::Hnsw<'static, i8, Cosine>, covered: usize) -> Ann {
        Ann {
            graph,
            covered: AtomicUsize::new(covered),
        }
    }

    pub(super) fn covered(&self) -> usize {
        self.covered.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for Ann {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ann").finish_non_exhaustive()
    }
}

/// The vectors in memory: concepts and propositions apart (see the module comment).
#[derive(Debug, Default)]
pub(super) struct Vectors {
    pub(super) concepts: Space,
    pub(super) links: Space,
}

impl Vectors {
    /// Empty spaces for vectors of `dim` dimensions, with a graph from `ann_min` live
    /// vectors of a space on.
    pub(super) fn new(dim: usize, ann_min: usize) -> Vectors {
        let space = || Space {
            dim,
            ann_min,
            ..Space::default()
        };
        Vectors {
            concepts: space(),
            links: space(),
        }
    }

    pub(super) fn space(&self, links: bool) -> &Space {
        if links {
            &self.links
        } else {
            &self.concepts
        }
    }

    pub(super) fn space_mut(&mut self, links: bool) -> &mut Space {
        if links {
            &mut self.links
        } else {
            &mut self.concepts
        }
    }

    /// Stores the vector of element `id` (a concept of type `tag`, or a proposition when
    /// `tag` is a [`link_tag`]).
    pub(super) fn put(&mut self, id: u64, tag: &str, v: &[f32]) {
        let (q, scale) = kip_embed::quantize(v);
        self.put_quantized(id, tag, q, scale);
    }

    /// [`Vectors::put`] of a vector already quantized.
    pub(super) fn put_quantized(&mut self, id: u64, tag: &str, q: Vec<i8>, scale: f32) {
        self.space_mut(tag.starts_with('\u{0}'))
            .put_quantized(id, tag, q, scale);
    }

    pub(super) fn remove(&mut self, id: u64) {
        self.concepts.remove(id);
        self.links.remove(id);
    }

    pub(super) fn live(&self) -> usize {
        self.concepts.live() + self.links.live()
    }

    pub(super) fn cosine(&self, id: u64, q: &[f32]) -> Option<f32> {
        self.concepts
            .cosine(id, q)
            .or_else(|| self.links.cosine(id, q))
    }

    /// The `k` most similar elements of a kind: `(cosine, key)`, best first (see
    /// [`Space::nearest`]).
    pub(super) fn nearest(&self, q: &[f32], k: usize, kind: Kind<'_>) -> Vec<(f32, u64)> {
        match kind {
            Kind::Concepts(t) => self.concepts.nearest(q, k, t.map(str::to_string)),
            Kind::Links(p) => self.links.nearest(q, k, p.map(link_tag)),
        }
    }

    /// Whether a space searches through its graph.
    pub(super) fn has_ann(&self) -> bool {
        self.concepts.ann.is_some() || self.links.ann.is_some()
    }

    /// Whether every space big enough for a graph has it, covering every slot.
    pub(super) fn ann_settled(&self) -> bool {
        [&self.concepts, &self.links].iter().all(|s| match &s.ann {
            Some(a) => a.covered() >= s.ids.len(),
            None => s.live() < s.ann_min,
        })
    }

    #[cfg(feature = "testing")]
    pub(super) fn set_ann_min(&mut self, n: usize) {
        self.concepts.ann_min = n;
        self.links.ann_min = n;
    }
}

/// The vectors of one kind of element, in append-only slots: a changed vector gets a
/// new slot and its old one is marked dead (an HNSW graph cannot move a node);
/// `compact` drops the dead slots (and the graph, rebuilt in the background) once they
/// are half of them. Each vector is held quantized ([`kip_embed::quantize`]: one byte
/// per dimension and a scale), a quarter of its f32 size; the store keeps the f32
/// values.
#[derive(Debug, Default)]
pub(super) struct Space {
    pub(super) dim: usize,
    /// Element per slot (`DEAD`: the slot's vector was replaced or removed).
    pub(super) ids: Vec<u64>,
    pub(super) types: Vec<u32>,
    pub(super) data: Vec<i8>,
    pub(super) scales: Vec<f32>,
    /// Slot per element (foldhash: a search looks up the slot of each keyword
    /// candidate to score it).
    pub(super) slot: foldhash::HashMap<u64, usize>,
    pub(super) dead: usize,
    pub(super) type_names: Vec<String>,
    pub(super) type_ids: HashMap<String, u32>,
    /// The graph, when built or restored: it covers slots `0..covered` ([`Ann`]).
    pub(super) ann: Option<Ann>,
    /// Bumped when slots are renumbered (a background build of the old numbering is
    /// then thrown away).
    pub(super) generation: u64,
    /// Live vectors from which the graph is built and used ([`ANN_MIN`]; tests lower it).
    pub(super) ann_min: usize,
    /// Slots of the graph last saved to disk (0: none saved since it was built).
    pub(super) saved: usize,
}

pub(super) const DEAD: u64 = u64::MAX;

impl Space {
    pub(super) fn type_id(&mut self, t: &str) -> u32 {
        if let Some(&i) = self.type_ids.get(t) {
            return i;
        }
        let i = self.type_names.len() as u32;
        self.type_names.push(t.to_string());
        self.type_ids.insert(t.to_string(), i);
        i
    }

    pub(super) fn row(&self, slot: usize) -> &[i8] {
        &self.data[slot * self.dim..(slot + 1) * self.dim]
    }

    /// The cosine of slot `s`'s vector with the unit query `q`.
    pub(super) fn score(&self, s: usize, q: &[f32]) -> f32 {
        kip_embed::dot_i8_wide(q, self.row(s)) * self.scales[s]
    }

    pub(super) fn live(&self) -> usize {
        self.ids.len() - self.dead
    }

    pub(super) fn put_quantized(&mut self, id: u64, concept_type: &str, q: Vec<i8>, scale: f32) {
        if q.len() != self.dim {
            return;
        }
        let t = self.type_id(concept_type);
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
            if a.covered() == s {
                a.graph.insert_slice((&graph_row(&q), s));
                a.covered.store(s + 1, Ordering::SeqCst);
            }
        }
        self.compact_if_sparse();
    }

    /// Appends a slot restored from a saved graph: element `id` of type `tag` with its
    /// quantized vector, or a dead slot (`None`: the element is gone or its vector
    /// changed since the save).
    pub(super) fn push_restored(&mut self, id: u64, tag: &str, row: Option<(&[i8], f32)>) {
        let s = self.ids.len();
        match row {
            Some((q, scale)) if q.len() == self.dim => {
                let t = self.type_id(tag);
                self.slot.insert(id, s);
                self.ids.push(id);
                self.types.push(t);
                self.data.extend_from_slice(q);
                self.scales.push(scale);
            }
            _ => {
                self.ids.push(DEAD);
                self.types.push(0);
                self.data.extend(std::iter::repeat_n(0, self.dim));
                self.scales.push(0.0);
                self.dead += 1;
            }
        }
    }

    pub(super) fn remove(&mut self, id: u64) {
        if let Some(s) = self.slot.remove(&id) {
            self.ids[s] = DEAD;
            self.dead += 1;
            self.compact_if_sparse();
        }
    }

    /// Drops the dead slots once they are at least half of all (and 1,000 or more).
    pub(super) fn compact_if_sparse(&mut self) {
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
        self.saved = 0;
        self.generation += 1;
    }

    pub(super) fn cosine(&self, id: u64, q: &[f32]) -> Option<f32> {
        let &s = self.slot.get(&id)?;
        Some(self.score(s, q))
    }

    /// The `k` most similar elements (of type or [`link_tag`] `named` when given):
    /// `(cosine, key)`, best first. Exact below [`ANN_MIN`] live vectors or while the
    /// graph is being built; approximate (HNSW, filtered inside the search) otherwise.
    pub(super) fn nearest(&self, q: &[f32], k: usize, named: Option<String>) -> Vec<(f32, u64)> {
        if q.len() != self.dim || k == 0 {
            return Vec::new();
        }
        let want = match named {
            Some(t) => match self.type_ids.get(&t) {
                Some(&i) => Some(i),
                None => return Vec::new(),
            },
            None => None,
        };
        let keep = |s: usize| self.ids[s] != DEAD && want.is_none_or(|t| self.types[s] == t);
        let every_node = want.is_none() && self.dead == 0;
        if let (Some(a), true) = (&self.ann, self.live() >= self.ann_min) {
            let covered = a.covered().min(self.ids.len());
            let filter = |s: &usize| *s < covered && keep(*s);
            let ef = ef_search(covered, k);
            let (qq, _) = kip_embed::quantize(q);
            let qq = graph_row(&qq);
            // All `ef` candidates the walk kept, not only the first `k`: the walk orders
            // them by the quantized query's distance, the answer by the exact query's
            // score (below), and among a million close vectors the two orders differ
            // near the k-th place (recall@10 at 1M real embeddings 0.947 -> see
            // docs/performance.md). Scoring the extra candidates costs microseconds.
            // Unfiltered when every node qualifies (hnsw_rs's filtered walk does more).
            let found = if every_node {
                a.graph.search(&qq, ef, ef)
            } else {
                a.graph.search_filter(&qq, ef, ef, Some(&filter))
            };
            let mut out: Vec<(f32, u64)> = found
                .into_iter()
                .filter(|n| n.d_id < covered && keep(n.d_id))
                .map(|n| (self.score(n.d_id, q), self.ids[n.d_id]))
                .collect();
            // The slots the graph has not caught up with yet, exactly.
            if covered < self.ids.len() {
                out.extend(self.exact_from(q, k, &keep, covered));
            }
            out.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            out.truncate(k);
            return out;
        }
        self.exact(q, k, &keep)
    }

    pub(super) fn exact(
        &self,
        q: &[f32],
        k: usize,
        keep: &dyn Fn(usize) -> bool,
    ) -> Vec<(f32, u64)> {
        self.exact_from(q, k, keep, 0)
    }

    /// [`Space::exact`] over the slots from `from` on.
    fn exact_from(
        &self,
        q: &[f32],
        k: usize,
        keep: &dyn Fn(usize) -> bool,
        from: usize,
    ) -> Vec<(f32, u64)> {
        // A bounded min-heap of the best k.
        let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(OrdF32, u64)>> =
            std::collections::BinaryHeap::with_capacity(k + 1);
        let rows = self.data.get(from * self.dim..).unwrap_or_default();
        for (s, row) in (from..).zip(rows.chunks_exact(self.dim)) {
            if !keep(s) {
                continue;
            }
            let c = kip_embed::dot_i8_wide(q, row) * self.scales[s];
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

/// Builds the HNSW graph of each space of `vectors` that has none and holds enough
/// vectors; returns whether a graph was published.
pub(super) fn build_ann(vectors: &RwLock<Vectors>, stop: &AtomicBool) -> bool {
    let concepts = build_space(vectors, false, stop);
    let links = build_space(vectors, true, stop);
    concepts || links
}

/// Builds the graph of one space: the slots are copied under the read lock and
/// inserted outside any lock (in steps, so a shutdown is not kept waiting), then the
/// graph is published under the write lock, covering those slots ([`extend_ann`]
/// inserts the ones added meanwhile).
fn build_space(vectors: &RwLock<Vectors>, links: bool, stop: &AtomicBool) -> bool {
    let (generation, upto, dim, rows) = {
        let all = vectors.read().unwrap_or_else(|p| p.into_inner());
        let v = all.space(links);
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
    let mut all = vectors.write().unwrap_or_else(|p| p.into_inner());
    let v = all.space_mut(links);
    if v.generation != generation || v.ann.is_some() {
        return false;
    }
    // The slots added meanwhile are searched exactly until `extend_ann` inserts them.
    v.ann = Some(Ann::new(graph, upto));
    v.saved = 0;
    true
}

/// Inserts into the graph of each space the slots it does not cover yet, a step at a
/// time under the read lock (searches go on; they scan those slots exactly until
/// then). Returns whether it inserted anything. Only the background thread calls it,
/// so steps never overlap; a store of a new vector takes the write lock, so it never
/// runs during a step.
pub(super) fn extend_ann(vectors: &RwLock<Vectors>, stop: &AtomicBool) -> bool {
    let mut any = false;
    for links in [false, true] {
        loop {
            if stop.load(Ordering::SeqCst) {
                return any;
            }
            let all = vectors.read().unwrap_or_else(|p| p.into_inner());
            let v = all.space(links);
            let Some(a) = &v.ann else { break };
            let from = a.covered();
            let to = v.ids.len().min(from.saturating_add(ANN_CATCH_UP_STEP));
            if from >= to {
                break;
            }
            let rows: Vec<Vec<i8>> = (from..to).map(|s| graph_row(v.row(s))).collect();
            let batch: Vec<(&[i8], usize)> = rows
                .iter()
                .zip(from..)
                .map(|(r, s)| (r.as_slice(), s))
                .collect();
            a.graph.parallel_insert_slice(&batch);
            a.covered.store(to, Ordering::SeqCst);
            any = true;
        }
    }
    any
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
