//! The vector index: once a nexus holds `semantic::ANN_MIN` vectors (lowered to 4,000
//! here) an HNSW graph is built in
//! the background; its answers must match the exact search (recall@10 >= 0.95, also
//! with a type filter, which runs inside the graph search), and vectors replaced or
//! removed afterwards must never come back.

use kip_embed::{EmbedError, Embedder};
use kip_engine::Nexus;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug)]
struct Never;
impl Embedder for Never {
    fn model_id(&self) -> &str {
        "test:never"
    }
    fn dim(&self) -> usize {
        DIM
    }
    fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Err(EmbedError::Model("not used".into()))
    }
}

const DIM: usize = 48;

/// xorshift; clustered unit vectors (200 centres, noise around them), like embeddings
/// of texts on a few hundred topics.
struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
    fn vector(&mut self, centre: &[f32], noise: f32) -> Vec<f32> {
        let mut v: Vec<f32> = centre.iter().map(|c| c + noise * self.unit()).collect();
        kip_embed::normalize(&mut v);
        v
    }
}

fn recall(found: &[(f32, u64)], exact: &[(f32, u64)]) -> f64 {
    let want: std::collections::HashSet<u64> = exact.iter().map(|x| x.1).collect();
    found.iter().filter(|x| want.contains(&x.1)).count() as f64 / exact.len().max(1) as f64
}

#[test]
fn the_graph_answers_like_the_exact_search() {
    let mut n = Nexus::in_memory().expect("nexus");
    n.set_embedder(Arc::new(Never)).expect("embedder");
    let sem = n.semantic().expect("semantic").clone();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let centres: Vec<Vec<f32>> = (0..200)
        .map(|_| (0..DIM).map(|_| rng.unit()).collect())
        .collect();
    sem.set_ann_min(4_000);
    let total = 6_000;
    let items: Vec<(u64, &str, Vec<f32>)> = (0..total)
        .map(|i| {
            let t = if i % 2 == 0 { "A" } else { "B" };
            (1_000_000 + i as u64, t, rng.vector(&centres[i % 200], 0.6))
        })
        .collect();
    assert!(!sem.has_ann());
    sem.insert_raw(&items);
    assert!(
        sem.wait_for_ann(Duration::from_secs(300)),
        "the graph was not built"
    );
    // Vectors added after the build are in the graph too.
    let late: Vec<(u64, &str, Vec<f32>)> = (0..500)
        .map(|i| {
            (
                5_000_000 + i,
                "A",
                rng.vector(&centres[(i % 200) as usize], 0.6),
            )
        })
        .collect();
    sem.insert_raw(&late);
    let queries: Vec<Vec<f32>> = (0..200)
        .map(|i| rng.vector(&centres[(i * 7) % 200], 0.6))
        .collect();
    let (mut r_all, mut r_typed) = (0.0, 0.0);
    for q in &queries {
        let exact = sem.nearest_exact(q, 10);
        r_all += recall(&sem.nearest(q, 10, None), &exact);
        let typed = sem.nearest(q, 10, Some("B"));
        assert!(
            typed.iter().all(|x| x.1 % 2 == 1 && x.1 < 5_000_000),
            "type filter"
        );
        // The exact answer among type B: filter an exact top list long enough.
        let exact_b: Vec<(f32, u64)> = sem
            .nearest_exact(q, 400)
            .into_iter()
            .filter(|x| x.1 % 2 == 1 && x.1 < 5_000_000)
            .take(10)
            .collect();
        r_typed += recall(&typed, &exact_b);
    }
    let (r_all, r_typed) = (r_all / 200.0, r_typed / 200.0);
    eprintln!("recall@10: {r_all:.3} (all), {r_typed:.3} (type filter)");
    assert!(r_all >= 0.95, "recall@10 {r_all}");
    assert!(r_typed >= 0.95, "filtered recall@10 {r_typed}");
    // A late vector is found by the graph.
    let hit = sem.nearest(&late[3].2, 1, None);
    assert_eq!(hit[0].1, late[3].0);
    // Replaced and removed vectors never come back.
    let moved = items[10].0;
    sem.insert_raw(&[(moved, "A", late[3].2.clone())]);
    let far = sem.nearest(&items[10].2, 50, None);
    assert!(far.iter().filter(|x| x.1 == moved).all(|x| x.0 < 0.999));
}
