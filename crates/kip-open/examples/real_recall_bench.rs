//! The vector graph on real embeddings: `cargo run --release -p kip-open --example
//! real_recall_bench -- N MODEL_DIR [CACHE_FILE]`. Generates N short memory-like
//! sentences from a seeded vocabulary of everyday English, embeds them with the local
//! model (a sentence-transformers directory, e.g. target/models/all-MiniLM-L6-v2; the
//! vectors are appended to CACHE_FILE when given, 6,400 at a time, so a rerun with the
//! same or a smaller N skips the model, and a larger N or an interrupted run only
//! embeds what is missing), builds the
//! HNSW graph over them (threshold lowered to N / 2), then embeds 200 new sentences as
//! queries and reports recall@10 of the graph against the exact search, the median
//! search time of both, and the median time of a whole semantic lookup of a new text
//! (embedding it included).

use kip_embed::Embedder;
use kip_engine::Nexus;
use kip_open::Open;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../tests/common/embedders.rs"]
mod embedders;

#[path = "common/sentences.rs"]
mod sentences;
use sentences::{embed_all, median, Rng};

fn main() {
    kip_embed::pin_thread_count();
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let model = args.get(2).expect("MODEL_DIR");
    let e = kip_embed::LocalEmbedder::open(std::path::Path::new(model)).expect("model");
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let texts: Vec<String> = (0..n).map(|_| rng.sentence()).collect();
    let distinct: std::collections::HashSet<&String> = texts.iter().collect();
    // The cache holds the vectors of the first sentences, in order; the missing ones
    // are embedded and appended as they come (an interrupted run keeps its progress, and
    // a cache made for fewer sentences is extended, not redone).
    let mut vectors: Vec<Vec<f32>> = Vec::new();
    if let Some(p) = args.get(3).map(std::path::Path::new).filter(|p| p.exists()) {
        let mut b = Vec::new();
        std::fs::File::open(p)
            .and_then(|mut f| f.read_to_end(&mut b))
            .expect("cache");
        vectors = b
            .chunks_exact(384 * 4)
            .map(|r| {
                r.chunks_exact(4)
                    .map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]]))
                    .collect()
            })
            .collect();
    }
    if vectors.len() < n {
        let from = vectors.len();
        let mut cache = args.get(3).map(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .expect("cache")
        });
        let t = Instant::now();
        for chunk in texts[from..].chunks(6400) {
            let v = embed_all(&e, chunk);
            if let Some(f) = cache.as_mut() {
                let bytes: Vec<u8> = v.iter().flatten().flat_map(|x| x.to_le_bytes()).collect();
                f.write_all(&bytes).and_then(|()| f.flush()).expect("write");
            }
            vectors.extend(v);
            println!(
                "embedded {} / {n} ({:.0} texts/s)",
                vectors.len(),
                (vectors.len() - from) as f64 / t.elapsed().as_secs_f64().max(1e-9)
            );
        }
    }
    // A cache made for more texts serves fewer (the same generator, in order).
    assert!(vectors.len() >= n, "the cache holds fewer vectors than N");
    vectors.truncate(n);
    let mut nexus = Nexus::in_memory().expect("nexus");
    nexus
        .set_embedder(Arc::new(embedders::Never(384)))
        .expect("embedder");
    let sem = nexus.recall().semantic().expect("semantic").clone();
    sem.set_ann_min(n / 2);
    for (chunk, vs) in vectors.chunks(10_000).enumerate() {
        let items: Vec<(u64, &str, Vec<f32>)> = vs
            .iter()
            .enumerate()
            .map(|(i, v)| ((chunk * 10_000 + i + 1) as u64, "Note", v.clone()))
            .collect();
        sem.insert_raw(&items);
    }
    let t = Instant::now();
    assert!(sem.wait_for_ann(Duration::from_secs(7200)), "graph");
    let build = t.elapsed();
    let mut qrng = Rng(0x9e37_79b9_7f4a_7c15);
    let queries: Vec<String> = (0..200).map(|_| qrng.sentence()).collect();
    let (mut recall, mut graph_t, mut exact_t, mut whole_t) = (0.0, vec![], vec![], vec![]);
    for q in &queries {
        let t = Instant::now();
        let v = e.embed(&[q.as_str()]).expect("embed").remove(0);
        let a = sem.nearest(&v, 10, None);
        whole_t.push(t.elapsed());
        let t = Instant::now();
        let a2 = sem.nearest(&v, 10, None);
        graph_t.push(t.elapsed());
        assert_eq!(a, a2);
        let t = Instant::now();
        let x = sem.nearest_exact(&v, 10);
        exact_t.push(t.elapsed());
        let want: std::collections::HashSet<u64> = x.iter().map(|y| y.1).collect();
        recall += a.iter().filter(|y| want.contains(&y.1)).count() as f64 / 10.0;
    }
    println!(
        "{n} real embeddings ({} distinct texts): graph built in {:.1} s; recall@10 {:.3} over 200 new queries; search median {:?} (graph) vs {:?} (exact); a new text embedded and searched: median {:?}",
        distinct.len(),
        build.as_secs_f64(),
        recall / queries.len() as f64,
        median(graph_t),
        median(exact_t),
        median(whole_t)
    );
}
