//! Semantic recall: the embeddings of concepts, kept up to date in the background, and
//! the nearest-neighbour search SEARCH `MODE "semantic"` and `"hybrid"` use.
//!
//! - What is embedded ([`embedding_text`]): a concept's name, then the values of the
//!   attributes the keyword index reads ([`kip_store::text::DESCRIPTIVE_ATTRIBUTES`]:
//!   description, aliases, observations, ...): `name: value. value`. One vector per concept.
//!   `$PropositionType` concepts are embedded like any other, so a predicate is found by
//!   meaning too and `SEARCH PROPOSITION` reaches its links through it.
//! - Writes never wait for the model: a write that changes a concept's searchable text
//!   marks it in the same transaction (`kip_store::VECTORS_ON`); a worker thread takes
//!   marked concepts in batches, embeds them, and stores each vector with the hash of
//!   the text it embedded, clearing the mark only if the concept still has that text.
//!   Vectors are not in the write-ahead log: after a crash the replayed write marks the
//!   concept again and the worker redoes it.
//! - The model's id is stored in `meta` (`vector_model`); opening with another model
//!   drops every vector and marks every concept.
//! - The search is exact (every vector of the wanted type is compared with the query),
//!   over an in-memory copy of the vectors loaded at open.

use crate::store::backend::Backend;
use crate::store::{ConceptRecord, GraphRead, StoreResult};
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

/// The vectors in memory: concept ids and their types, and the vectors one after the
/// other.
#[derive(Debug, Default)]
struct Vectors {
    dim: usize,
    ids: Vec<u64>,
    types: Vec<u32>,
    data: Vec<f32>,
    slot: HashMap<u64, usize>,
    type_names: Vec<String>,
    type_ids: HashMap<String, u32>,
}

impl Vectors {
    fn type_id(&mut self, t: &str) -> u32 {
        if let Some(&i) = self.type_ids.get(t) {
            return i;
        }
        let i = self.type_names.len() as u32;
        self.type_names.push(t.to_string());
        self.type_ids.insert(t.to_string(), i);
        i
    }

    fn put(&mut self, id: u64, concept_type: &str, v: &[f32]) {
        if v.len() != self.dim {
            return;
        }
        let t = self.type_id(concept_type);
        match self.slot.get(&id) {
            Some(&i) => {
                self.types[i] = t;
                self.data[i * self.dim..(i + 1) * self.dim].copy_from_slice(v);
            }
            None => {
                self.slot.insert(id, self.ids.len());
                self.ids.push(id);
                self.types.push(t);
                self.data.extend_from_slice(v);
            }
        }
    }

    fn remove(&mut self, id: u64) {
        let Some(i) = self.slot.remove(&id) else {
            return;
        };
        let last = self.ids.len() - 1;
        if i != last {
            let moved = self.ids[last];
            self.ids.swap(i, last);
            self.types.swap(i, last);
            let (a, b) = self.data.split_at_mut(last * self.dim);
            a[i * self.dim..(i + 1) * self.dim].copy_from_slice(&b[..self.dim]);
            self.slot.insert(moved, i);
        }
        self.ids.pop();
        self.types.pop();
        self.data.truncate(last * self.dim);
    }

    fn cosine(&self, id: u64, q: &[f32]) -> Option<f32> {
        let &i = self.slot.get(&id)?;
        Some(kip_embed::dot(
            &self.data[i * self.dim..(i + 1) * self.dim],
            q,
        ))
    }

    /// The `k` most similar concepts (of `concept_type` when given): `(cosine, id)`,
    /// best first.
    fn nearest(&self, q: &[f32], k: usize, concept_type: Option<&str>) -> Vec<(f32, u64)> {
        if q.len() != self.dim || k == 0 {
            return Vec::new();
        }
        let want = match concept_type {
            Some(t) => match self.type_ids.get(t) {
                Some(&i) => Some(i),
                None => return Vec::new(),
            },
            None => None,
        };
        // A bounded min-heap of the best k.
        let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(OrdF32, u64)>> =
            std::collections::BinaryHeap::with_capacity(k + 1);
        for (i, row) in self.data.chunks_exact(self.dim).enumerate() {
            if want.is_some_and(|t| self.types[i] != t) {
                continue;
            }
            let s = kip_embed::dot(row, q);
            if heap.len() < k {
                heap.push(std::cmp::Reverse((OrdF32(s), self.ids[i])));
            } else if heap.peek().is_some_and(|w| s > w.0 .0 .0) {
                heap.pop();
                heap.push(std::cmp::Reverse((OrdF32(s), self.ids[i])));
            }
        }
        let mut out: Vec<(f32, u64)> = heap.into_iter().map(|r| (r.0 .0 .0, r.0 .1)).collect();
        out.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        out
    }
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

/// The embedder of a nexus, its vectors and its worker.
pub struct Semantic {
    embedder: Arc<dyn Embedder>,
    vectors: RwLock<Vectors>,
    stop: AtomicBool,
    wake: (Mutex<bool>, Condvar),
    progress: (Mutex<Progress>, Condvar),
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
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
            for (id, v) in loaded {
                if let Some((t, _)) = r.concept_head(id)? {
                    vectors.put(id, &t, &v);
                }
            }
            Ok(())
        })?;
        let sem = Arc::new(Semantic {
            embedder,
            vectors: RwLock::new(vectors),
            stop: AtomicBool::new(false),
            wake: (Mutex::new(true), Condvar::new()),
            progress: (Mutex::new(Progress::default()), Condvar::new()),
            worker: Mutex::new(None),
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
        *lock(&sem.worker) = Some(handle);
        Ok(sem)
    }

    /// The embedder's model id.
    pub fn model_id(&self) -> &str {
        self.embedder.model_id()
    }

    /// Embeds one query text.
    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>, KipError> {
        let mut v = self
            .embedder
            .embed(&[text])
            .map_err(|e| KipError::internal(format!("cannot embed the search text: {e}")))?;
        Ok(v.pop().unwrap_or_default())
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
                    "the embedding model failed ({left} concepts not embedded): {e}"
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

    /// Cosine similarities of the `k` nearest concepts: `(cosine, id)`, best first.
    pub fn nearest(&self, q: &[f32], k: usize, concept_type: Option<&str>) -> Vec<(f32, u64)> {
        self.vectors
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .nearest(q, k, concept_type)
    }

    /// The cosine similarity of one concept's vector with `q` (`None`: not embedded).
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
            .ids
            .len()
    }

    /// Whether no vector is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops the worker and waits for it.
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.nudge();
        if let Some(h) = lock(&self.worker).take() {
            let _ = h.join();
        }
    }
}

/// A concept of a batch with the text embedded and its vector (`None`: the concept is
/// gone).
type Embedded = (u64, Option<(String, Vec<f32>)>);

/// One batch of work: marked concepts with their text (or `None`: gone).
fn take_batch(r: &dyn GraphRead, from: u64) -> StoreResult<Vec<(u64, Option<String>)>> {
    let mut ids = Vec::new();
    r.scan_embedding_marks(from, &mut |id| {
        ids.push(id);
        Ok(ids.len() < WORKER_BATCH)
    })?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let c = r.concept(id)?;
        out.push((id, c.map(|c| embedding_text(&c))));
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
                    let current = w.concept(*id)?;
                    match (current, d) {
                        (None, _) => {
                            w.put_vector(*id, None)?;
                            gone.push(*id);
                        }
                        (Some(c), Some((text, v))) => {
                            // Stored only if the concept still has the text embedded;
                            // else its mark stays and the next round redoes it.
                            if embedding_text(&c) == *text {
                                w.put_vector(*id, Some(&encode_vector(text_hash(text), v)))?;
                                stored.push((*id, c.concept_type.clone(), v.clone()));
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
            // Every concept of the batch changed meanwhile: let the writes settle.
            std::thread::sleep(Duration::from_millis(50));
        }
        let (m, c) = &s.progress;
        let mut p = lock(m);
        p.error = None;
        p.rounds += 1;
        c.notify_all();
    }
}

/// Concepts whose stored vector is missing or was made from another text.
pub fn stale_concepts(r: &dyn GraphRead) -> Result<Vec<u64>, KipError> {
    let mut ids = Vec::new();
    r.scan_concepts(&mut |id| {
        ids.push(id);
        Ok(true)
    })?;
    let mut stale = Vec::new();
    for id in ids {
        let Some(c) = r.concept(id)? else { continue };
        let fresh = r
            .vector(id)?
            .and_then(|b| decode_vector(&b))
            .is_some_and(|(h, _)| h == text_hash(&embedding_text(&c)));
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
            v.nearest(&[1.0, 0.0], 2, None)
                .iter()
                .map(|x| x.1)
                .collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert_eq!(
            v.nearest(&[0.0, 1.0], 5, Some("A"))
                .iter()
                .map(|x| x.1)
                .collect::<Vec<_>>(),
            vec![3, 1]
        );
        v.put(1, "A", &[0.0, 1.0]);
        assert_eq!(v.nearest(&[0.0, 1.0], 1, Some("A"))[0].1, 1);
        v.remove(1);
        assert_eq!(v.ids.len(), 2);
        assert_eq!(
            v.cosine(3, &[0.6, 0.8]).map(|c| (c * 100.0).round()),
            Some(100.0)
        );
        assert!(v.nearest(&[1.0, 0.0], 3, Some("C")).is_empty());
        let b = encode_vector(7, &[0.5, -1.0]);
        assert_eq!(decode_vector(&b), Some((7, vec![0.5, -1.0])));
        assert_eq!(decode_vector(&b[..5]), None);
    }
}
