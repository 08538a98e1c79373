//! Vector recall and speed: `cargo run --release -p kip-open --example vector_bench --
//! [N] [MODEL_DIR]`. Loads N synthetic 384-dimension unit vectors (clustered around
//! 2,000 centres, like embeddings of texts on many topics) into a nexus's vector index,
//! waits for the HNSW graph, then reports the build time, recall@10 of the graph
//! against the exact search over 200 queries, and the median latency of both. With a
//! model directory it also reports the local embedder's throughput (texts/s) on
//! memory-like sentences. `VECTOR_BENCH_ANN_MIN=N` builds the graph from N vectors
//! instead of the engine's threshold (to measure the graph below it).
//! `VECTOR_BENCH_LINKS=R` also loads R proposition vectors per concept vector (3.7 in
//! the benchmark graph), as a memory holds them: the searches are still for concepts.

use kip_embed::Embedder;
use kip_engine::Nexus;
use kip_open::Open;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../tests/common/embedders.rs"]
mod embedders;

struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
    fn near(&mut self, c: &[f32]) -> Vec<f32> {
        let mut v: Vec<f32> = c.iter().map(|x| x + 0.8 * self.unit()).collect();
        kip_embed::normalize(&mut v);
        v
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let mut nexus = Nexus::in_memory().expect("nexus");
    nexus
        .set_embedder(Arc::new(embedders::Words::new(384)))
        .expect("embedder");
    let sem = nexus.recall().semantic().expect("semantic").clone();
    if let Some(min) = std::env::var("VECTOR_BENCH_ANN_MIN")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        sem.set_ann_min(min);
    }
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let centres: Vec<Vec<f32>> = (0..2000)
        .map(|_| (0..384).map(|_| rng.unit()).collect())
        .collect();
    for chunk in 0..n.div_ceil(10_000) {
        let items: Vec<(u64, &str, Vec<f32>)> = (chunk * 10_000..((chunk + 1) * 10_000).min(n))
            .map(|i| (1_000_000 + i as u64, "Doc", rng.near(&centres[i % 2000])))
            .collect();
        sem.insert_raw(&items);
    }
    let links_per_concept: f64 = std::env::var("VECTOR_BENCH_LINKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    let links = (n as f64 * links_per_concept) as usize;
    let tag = "\u{0}knows";
    for chunk in 0..links.div_ceil(10_000) {
        let items: Vec<(u64, &str, Vec<f32>)> = (chunk * 10_000..((chunk + 1) * 10_000).min(links))
            .map(|i| {
                (
                    1u64 << 62 | i as u64,
                    tag,
                    rng.near(&centres[(i * 7) % 2000]),
                )
            })
            .collect();
        sem.insert_raw(&items);
    }
    let t = Instant::now();
    let built = sem.wait_for_ann(Duration::from_secs(7200));
    let build = t.elapsed();
    let queries: Vec<Vec<f32>> = (0..200)
        .map(|i| rng.near(&centres[(i * 13) % 2000]))
        .collect();
    let (mut recall, mut ann_t, mut exact_t) = (0.0, Vec::new(), Vec::new());
    for q in &queries {
        let t = Instant::now();
        let a = sem.nearest(q, 10, None);
        ann_t.push(t.elapsed());
        let t = Instant::now();
        let e = sem.nearest_exact(q, 10);
        exact_t.push(t.elapsed());
        let want: std::collections::HashSet<u64> = e.iter().map(|x| x.1).collect();
        recall += a.iter().filter(|x| want.contains(&x.1)).count() as f64 / 10.0;
    }
    println!(
        "{n} concept vectors (+{links} link vectors): graph {} in {:.1} s; recall@10 {:.3}; search median {:?} (graph) vs {:?} (exact)",
        if built { "built" } else { "NOT built" },
        build.as_secs_f64(),
        recall / queries.len() as f64,
        median(ann_t),
        median(exact_t)
    );
    if let Some(dir) = args.get(2) {
        let e = kip_embed::LocalEmbedder::open(std::path::Path::new(dir)).expect("model");
        let texts: Vec<String> = (0..512)
            .map(|i| format!("Note {i}: meeting with the team about the roadmap, budget item {} and travel plans", i * 7))
            .collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let t = Instant::now();
        e.embed(&refs).expect("embed");
        let s = t.elapsed().as_secs_f64();
        let mut q = Vec::new();
        for text in refs.iter().take(50) {
            let t1 = Instant::now();
            e.embed(&[text]).expect("embed");
            q.push(t1.elapsed());
        }
        println!(
            "local embedder: {:.0} texts/s in batches; one query text: median {:?}",
            512.0 / s,
            median(q)
        );
    }
}
