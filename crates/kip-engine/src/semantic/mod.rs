//! Semantic recall: the embeddings of concepts and propositions, kept up to date in the
//! background, and the nearest-neighbour search SEARCH `MODE "semantic"` and `"hybrid"`
//! use. This file holds the pipeline (the `Semantic` handle, its worker, the query
//! cache); `text.rs` what is embedded and how a vector is stored; `index.rs` the
//! vectors in memory and their search (exact scan, HNSW graph).
//!
//! - What is embedded, one vector per element: for a concept ([`embedding_text`]) its
//!   name, then the values of the attributes the keyword index reads
//!   ([`kip_storage::text::DESCRIPTIVE_ATTRIBUTES`]: description, aliases, observations,
//!   ...): `name: value. value`; for a proposition ([`prop_embedding_text`]) its subject's
//!   name, its predicate in words and its object's name, then the predicate's
//!   description: `Alice works at Acme. The subject is employed by the object.`
//! - Writes never wait for the model: a write that changes an element's embedded text
//!   (or deletes it) marks it in the same transaction (`kip_storage::VECTORS_ON`; renaming
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
//!   filter runs inside the graph search. Concepts and propositions have a space (and a
//!   graph) each. A graph is saved under the data directory (`persist.rs`) and restored
//!   at the next open instead of being rebuilt.

mod index;
mod persist;
mod text;

pub use index::{Kind, ANN_EF_LARGE_FROM, ANN_EF_SEARCH, ANN_EF_SEARCH_SMALL, ANN_MIN};
pub use persist::DIR as GRAPH_DIR;
pub use text::{check_vectors, embedding_text, prop_embedding_text, stale_elements};

use crate::store::backend::Backend;
use crate::store::{ElemRef, GraphRead, StoreResult};
use index::{build_ann, extend_ann, Vectors};
use kip_embed::Embedder;
use kip_lang::KipError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};
use text::{decode_vector, element_text, encode_vector, link_tag, text_hash};

/// `meta` key: the id of the model that made the stored vectors.
pub const VECTOR_MODEL_KEY: &str = "vector_model";
/// Concepts the worker embeds per model call and per write transaction.
pub const WORKER_BATCH: usize = 32;

/// Progress of the background embedding.
#[derive(Debug, Default)]
struct Progress {
    /// Bumped after each batch the worker stores (or fails).
    rounds: u64,
    /// The last failure of the model, if the last batch failed.
    error: Option<String>,
    /// A batch is being stored: its marks may be gone from the store before its vectors
    /// are in the in-memory index, so a waiter does not count it done yet.
    storing: bool,
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
    /// The graph thread (restore, build, catch-up, saves).
    ann_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// The data directory the graphs are saved under (`None`: not saved).
    root: Option<std::path::PathBuf>,
    /// Set once the saved graphs were restored (or found missing or unusable).
    restored: AtomicBool,
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
        let mut vectors = Vectors::new(embedder.dim(), ANN_MIN);
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
        let root = store.path().map(std::path::Path::to_path_buf);
        let sem = Arc::new(Semantic {
            embedder,
            queries: Mutex::new(QueryCache::default()),
            vectors: RwLock::new(vectors),
            stop: AtomicBool::new(false),
            wake: (Mutex::new(true), Condvar::new()),
            progress: (Mutex::new(Progress::default()), Condvar::new()),
            threads: Mutex::new(Vec::new()),
            ann_thread: Mutex::new(None),
            root,
            restored: AtomicBool::new(false),
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
                .spawn(move || {
                    if let Some(s) = sem.upgrade() {
                        s.restore_graphs();
                    }
                    loop {
                        let Some(s) = sem.upgrade() else { return };
                        if s.stop.load(Ordering::SeqCst) {
                            return;
                        }
                        if build_ann(&s.vectors, &s.stop) {
                            tracing::info!("the vector index (HNSW) is built: {} vectors", s.len());
                        }
                        extend_ann(&s.vectors, &s.stop);
                        s.save_grown();
                        drop(s);
                        std::thread::sleep(Duration::from_millis(500));
                    }
                })
                .map_err(|e| {
                    KipError::internal(format!("cannot start the vector index thread: {e}"))
                })?
        };
        *lock(&sem.ann_thread) = Some(ann);
        Ok(sem)
    }

    /// The embedder's model id.
    pub fn model_id(&self) -> &str {
        self.embedder.model_id()
    }

    /// The embedding of a search text embedded recently (the query cache), if any.
    pub fn cached_query(&self, text: &str) -> Option<Vec<f32>> {
        lock(&self.queries).get(text)
    }

    /// Embeds one query text (the last [`QUERY_CACHE`] distinct texts are remembered).
    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>, KipError> {
        if let Some(v) = self.cached_query(text) {
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
            let (m, c) = &self.progress;
            // Done when nothing is marked and no batch is between its commit (which
            // clears its marks) and the in-memory index (which gets its vectors after).
            if left == 0 && !lock(m).storing {
                return Ok(0);
            }
            self.nudge();
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
            .has_ann()
    }

    /// Waits until the HNSW graph is built (when there are enough vectors for one) or
    /// `timeout` passes; returns whether searches use it.
    pub fn wait_for_ann(&self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        loop {
            {
                let v = self.vectors.read().unwrap_or_else(|p| p.into_inner());
                if v.ann_settled() {
                    return v.has_ann();
                }
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the saved graphs were restored, or found missing or unusable (the
    /// background thread does it first after open); returns whether that happened
    /// within `timeout`.
    pub fn wait_restored(&self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        while !self.restored.load(Ordering::SeqCst) {
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// Sets the number of live vectors from which the graph is built and used (tests;
    /// feature `testing`).
    #[cfg(feature = "testing")]
    pub fn set_ann_min(&self, n: usize) {
        self.vectors
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .set_ann_min(n.max(1));
    }

    /// Loads vectors directly (benchmarks and tests of the vector index: no model, no
    /// store): `(concept, type, unit vector)`. Feature `testing`.
    #[cfg(feature = "testing")]
    pub fn insert_raw(&self, items: &[(u64, &str, Vec<f32>)]) {
        let mut v = self.vectors.write().unwrap_or_else(|p| p.into_inner());
        for (id, t, x) in items {
            v.put(*id, t, x);
        }
    }

    /// The exact `k` nearest concepts (every vector compared), for measuring the
    /// graph's recall.
    #[doc(hidden)]
    pub fn nearest_exact(&self, q: &[f32], k: usize) -> Vec<(f32, u64)> {
        let v = self.vectors.read().unwrap_or_else(|p| p.into_inner());
        let c = &v.concepts;
        c.exact(q, k, &|s| c.ids[s] != index::DEAD)
    }

    /// Whether no vector is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops the worker and the graph thread and waits for them, then saves a graph
    /// that grew since its last save (see [`Semantic::save_grown`]). A graph thread
    /// still reading a saved graph is not waited for (a one-shot `kip exec` would wait
    /// seconds for a graph it never uses): it only reads files, and ends with the
    /// process or once the read is done.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.nudge();
        let threads = std::mem::take(&mut *lock(&self.threads));
        let ann = lock(&self.ann_thread).take();
        let joined = !threads.is_empty() || ann.is_some();
        for h in threads {
            let _ = h.join();
        }
        if let Some(h) = ann {
            if self.restored.load(Ordering::SeqCst) {
                let _ = h.join();
            }
        }
        if joined {
            self.save_grown();
        }
    }

    /// Restores the saved graph of each space (see `persist.rs`): read outside any lock,
    /// then adopted under the write lock. Runs first on the background thread.
    fn restore_graphs(&self) {
        self.restore_saved();
        self.restored.store(true, Ordering::SeqCst);
    }

    fn restore_saved(&self) {
        let Some(root) = &self.root else { return };
        for links in [false, true] {
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            let dir = persist::space_dir(root, links);
            match persist::load(root, self.embedder.model_id(), links, self.embedder.dim()) {
                Ok(None) => {}
                Ok(Some(loaded)) => {
                    let mut v = self.vectors.write().unwrap_or_else(|p| p.into_inner());
                    let space = v.space_mut(links);
                    if space.ann.is_none() {
                        let kept = persist::adopt(space, loaded);
                        tracing::info!(
                            "vector index restored from {}: {kept} vectors",
                            dir.display()
                        );
                    }
                }
                Err(why) => tracing::warn!(
                    "the saved vector index {} is not used ({why}); it is rebuilt in the background",
                    dir.display()
                ),
            }
        }
    }

    /// Saves each space's graph when it covers every slot and was never saved or has
    /// grown by a tenth since (a restored graph takes the few vectors it lacks in the
    /// background, so small growth is not worth rewriting a large file). A failure is
    /// logged and retried only after the same growth: the graph is derived data,
    /// rebuilt when it cannot be restored. Holds the read lock while it writes (searches
    /// go on; the worker's next store waits).
    pub fn save_grown(&self) {
        let Some(root) = &self.root else { return };
        let v = self.vectors.read().unwrap_or_else(|p| p.into_inner());
        let mut saved = Vec::new();
        for links in [false, true] {
            let space = v.space(links);
            let Some(a) = &space.ann else { continue };
            let n = space.ids.len();
            let due = a.covered() >= n && (space.saved == 0 || n >= space.saved + space.saved / 10);
            if !due || n == 0 {
                continue;
            }
            match persist::save(root, self.embedder.model_id(), links, space) {
                Ok(0) => {}
                Ok(slots) => saved.push((links, slots)),
                Err(e) => {
                    // Counted as saved, so the next try waits for the same growth
                    // instead of rewriting the whole graph every half second.
                    saved.push((links, n));
                    static WARN: crate::store::throttle::Throttle =
                        crate::store::throttle::Throttle::new(Duration::from_secs(600));
                    if let Some(suppressed) = WARN.allow() {
                        tracing::warn!(
                            suppressed,
                            "cannot save the vector index under {}: {e}",
                            root.display()
                        );
                    }
                }
            }
        }
        drop(v);
        if !saved.is_empty() {
            let mut v = self.vectors.write().unwrap_or_else(|p| p.into_inner());
            for (links, slots) in saved {
                let space = if links { &mut v.links } else { &mut v.concepts };
                if space.ann.is_some() {
                    space.saved = slots;
                }
            }
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
        lock(&s.progress.0).storing = true;
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
        p.storing = false;
        p.rounds += 1;
        c.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_put_replace_remove_and_rank() {
        let mut v = Vectors::new(2, ANN_MIN);
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

    #[test]
    fn a_larger_graph_explores_more_candidates_and_never_fewer_than_asked() {
        use index::{ef_search, ANN_EF_LARGE_FROM, ANN_EF_SEARCH, ANN_EF_SEARCH_SMALL};
        const { assert!(ANN_EF_SEARCH_SMALL < ANN_EF_SEARCH) };
        assert_eq!(ef_search(ANN_MIN, 10), ANN_EF_SEARCH_SMALL);
        assert_eq!(ef_search(ANN_EF_LARGE_FROM - 1, 40), ANN_EF_SEARCH_SMALL);
        assert_eq!(ef_search(ANN_EF_LARGE_FROM, 40), ANN_EF_SEARCH);
        assert_eq!(ef_search(5_000_000, 10), ANN_EF_SEARCH);
        // A page larger than the walk's candidates widens the walk to the page.
        assert_eq!(ef_search(ANN_MIN, 500), 500);
        assert_eq!(ef_search(ANN_EF_LARGE_FROM, 500), 500);
    }
}
