//! What a saved vector graph saves: `cargo run --release -p kip-open --example
//! graph_restore_bench -- [N] [DIR]`. Writes N concepts into a data directory (a fresh
//! temporary one, or DIR), embeds them with a fast synthetic 384-dimension embedder
//! (vectors clustered around 2,000 centres by the concept's number: the model is not
//! what is measured), lets the graph build (threshold lowered to N / 2) and be saved,
//! then reopens the directory and reports the build time, the save's size, the reopen
//! time, when the background thread had restored the graph, the recall@10 of the
//! restored graph against the exact search, and the reopen time without a save.

use kip_embed::{EmbedError, Embedder};
use kip_engine::{Access, Nexus};
use kip_open::Open;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DIM: usize = 384;

#[derive(Debug)]
struct Clustered;

fn unit(mut x: u64) -> impl FnMut() -> f32 {
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
}

/// The vector of text "c<i> ...": noise around centre i % 2000.
fn vector_of(i: u64) -> Vec<f32> {
    let mut centre = unit(0x9e37_79b9_7f4a_7c15 ^ (i % 2000).wrapping_mul(0x2545_f491));
    let mut noise = unit(0x2545_f491_4f6c_dd1d ^ i.wrapping_mul(0x9e37_79b9));
    let mut v: Vec<f32> = (0..DIM).map(|_| centre() + 0.8 * noise()).collect();
    kip_embed::normalize(&mut v);
    v
}

impl Embedder for Clustered {
    fn model_id(&self) -> &str {
        "bench:clustered-384"
    }
    fn dim(&self) -> usize {
        DIM
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts
            .iter()
            .map(|t| {
                let i = t
                    .split(|c: char| !c.is_ascii_digit())
                    .find(|w| !w.is_empty())
                    .and_then(|w| w.parse().ok())
                    .unwrap_or(0);
                vector_of(i)
            })
            .collect())
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = args
        .get(2)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| tmp.path().join("nexus"));
    let mut nexus = Nexus::open(&dir).expect("open");
    let run = |nx: &Nexus, cmd: &str| {
        let r = nx
            .execute_json(&json!({ "command": cmd }), Access::ReadWrite)
            .to_json();
        assert!(r.get("error").is_none(), "{r}");
    };
    run(
        &nexus,
        r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Note"} SET ATTRIBUTES { description: "a note" } } }"#,
    );
    for chunk in 0..n.div_ceil(1000) {
        let mut blocks = String::new();
        for i in chunk * 1000..((chunk + 1) * 1000).min(n) {
            blocks.push_str(&format!(
                "CONCEPT ?c{i} {{ {{type: \"Note\", name: \"c{i}\"}} }}\n"
            ));
        }
        run(&nexus, &format!("UPSERT {{ {blocks} }}"));
    }
    nexus.set_embedder(Arc::new(Clustered)).expect("embedder");
    let sem = nexus.recall().semantic().expect("semantic").clone();
    let t = Instant::now();
    nexus
        .recall()
        .wait_for_embeddings(Duration::from_secs(3600), &mut |_| {})
        .expect("embedded");
    println!(
        "{n} concepts embedded in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    sem.set_ann_min(n / 2);
    let t = Instant::now();
    assert!(sem.wait_for_ann(Duration::from_secs(7200)), "graph");
    let build = t.elapsed();
    let manifest = dir
        .join(kip_engine::semantic::GRAPH_DIR)
        .join("concepts")
        .join("manifest.json");
    while !manifest.exists() {
        std::thread::sleep(Duration::from_millis(100));
    }
    let saved_at = t.elapsed();
    let bytes: u64 = std::fs::read_dir(manifest.parent().expect("dir"))
        .expect("dir")
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    drop(sem);
    drop(nexus);
    let t = Instant::now();
    let mut nexus = Nexus::open(&dir).expect("reopen");
    nexus.set_embedder(Arc::new(Clustered)).expect("embedder");
    let reopen = t.elapsed();
    let sem = nexus.recall().semantic().expect("semantic").clone();
    assert!(sem.wait_restored(Duration::from_secs(3600)), "restore");
    let restored = t.elapsed();
    assert!(sem.has_ann(), "the graph was not restored");
    sem.set_ann_min(n / 2);
    let mut recall = 0.0;
    let mut times = Vec::new();
    for q in 0..200u64 {
        let v = vector_of(q * 13 + 7);
        let t = Instant::now();
        let a = sem.nearest(&v, 10, None);
        times.push(t.elapsed());
        let e = sem.nearest_exact(&v, 10);
        let want: std::collections::HashSet<u64> = e.iter().map(|x| x.1).collect();
        recall += a.iter().filter(|x| want.contains(&x.1)).count() as f64 / 10.0;
    }
    times.sort();
    drop(sem);
    drop(nexus);
    // The same reopen without the save, for comparison.
    std::fs::remove_dir_all(dir.join(kip_engine::semantic::GRAPH_DIR)).expect("remove");
    let t = Instant::now();
    let mut nexus = Nexus::open(&dir).expect("reopen");
    nexus.set_embedder(Arc::new(Clustered)).expect("embedder");
    let plain_reopen = t.elapsed();
    let sem = nexus.recall().semantic().expect("semantic").clone();
    println!(
        "reopen without a saved graph: {:.2} s",
        plain_reopen.as_secs_f64()
    );
    println!(
        "graph of {} vectors: built in {:.1} s (saved {:.1} s later, {:.0} MiB); reopen {:.2} s, graph restored in the background {:.2} s after the start of the open; restored graph recall@10 {:.3}, search median {:?}",
        sem.len(),
        build.as_secs_f64(),
        (saved_at - build).as_secs_f64(),
        bytes as f64 / (1 << 20) as f64,
        reopen.as_secs_f64(),
        restored.as_secs_f64(),
        recall / 200.0,
        times[times.len() / 2]
    );
}
