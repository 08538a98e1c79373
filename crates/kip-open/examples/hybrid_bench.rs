//! A SEARCH by meaning through KIP, as an agent sends it, on a memory of N concepts:
//! `cargo run --release -p kip-open --example hybrid_bench -- N MODEL_DIR CACHE
//! [DATA_DIR]`.
//!
//! The concepts are N memory-like sentences (type `Note`, name `n<i>`, the sentence as
//! description), written through KIP UPSERT into a store in DATA_DIR (a temporary
//! directory when omitted; an existing one is reused as it is). Their vectors come from
//! CACHE, a file of f32 vectors the local model (MODEL_DIR) computed for the first R
//! sentences of the same generator (`real_recall_bench N MODEL_DIR CACHE` writes it;
//! embedding a million texts on two cores takes about 80 minutes, so R may be smaller
//! than N): concept i < R gets the model's vector of its sentence; a concept i >= R gets
//! the normalized mix `w * v[a] + (1 - w) * v[b]` of two of them (a, b, w drawn from
//! i), a point among the real ones, not a random one. The benchmark embedder answers
//! a stored concept's text from that table and hands every other text (the queries) to
//! the real model.
//!
//! Then 200 query texts of each kind are searched, a few words ("the roof repair 17")
//! and a whole new sentence (another seed), each text new to the process so that every
//! search embeds its query: `SEARCH CONCEPT "<text>" WITH TYPE "Note" MODE "hybrid"
//! LIMIT 10`, the same in mode `semantic` and `keyword`, and the hybrid again with the
//! query embeddings cached (what the search costs without the model). It prints the
//! medians, the graph's recall@10 against the exact search over 200 new sentences, the
//! peak RSS, and the median of 200 small durable UPSERTs with the model configured (the
//! worker embedding each new concept in the background) and without an embedder.

use kip_embed::{EmbedError, Embedder, LocalEmbedder};
use kip_engine::{Access, Nexus};
use kip_open::Open;
use serde_json::json;
use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "common/sentences.rs"]
mod sentences;
use sentences::{median, Rng};

const DIM: usize = 384;

/// The `kip` binary's allocator (crates/kip-cli/src/main.rs), so that the figures are
/// the server's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Stored concepts' vectors from a table, everything else from the model.
#[derive(Debug)]
struct Table {
    model: LocalEmbedder,
    /// The real vectors, `DIM` per row; emptied once the concepts are embedded.
    real: Mutex<Vec<f32>>,
}

impl Table {
    /// The vector of concept `i` (see the module docs).
    fn vector(real: &[f32], i: usize) -> Vec<f32> {
        let rows = real.len() / DIM;
        let row = |r: usize| &real[r * DIM..(r + 1) * DIM];
        if i < rows {
            return row(i).to_vec();
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (i as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
        rng.next();
        let a = (rng.next() % rows as u64) as usize;
        let b = (rng.next() % rows as u64) as usize;
        let w = 0.2 + 0.6 * ((rng.next() >> 40) as f32 / (1u64 << 24) as f32);
        let mut v: Vec<f32> = row(a)
            .iter()
            .zip(row(b))
            .map(|(x, y)| w * x + (1.0 - w) * y)
            .collect();
        kip_embed::normalize(&mut v);
        v
    }
}

impl Embedder for Table {
    fn model_id(&self) -> &str {
        "bench:minilm-table"
    }
    fn dim(&self) -> usize {
        DIM
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // A stored concept's text starts with its name, `n<i>: `.
        let index = |t: &str| {
            t.strip_prefix('n')?
                .split_once(':')
                .and_then(|(d, _)| d.parse::<usize>().ok())
        };
        if texts.iter().all(|t| index(t).is_some()) {
            let real = self.real.lock().unwrap_or_else(|p| p.into_inner());
            if !real.is_empty() {
                return Ok(texts
                    .iter()
                    .map(|t| Table::vector(&real, index(t).unwrap_or(0)))
                    .collect());
            }
        }
        self.model.embed(texts)
    }
}

/// `VmHWM` (peak) or `VmRSS` (now) of this process, in MiB.
fn rss_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    kip_embed::pin_thread_count();
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let model =
        LocalEmbedder::open(std::path::Path::new(args.get(2).expect("MODEL_DIR"))).expect("model");
    let real: Vec<f32> = {
        let mut bytes = Vec::new();
        std::fs::File::open(args.get(3).expect("CACHE"))
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .expect("cache");
        bytes
            .chunks_exact(4)
            .map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]]))
            .collect()
    };
    let rows = real.len() / DIM;
    assert!(rows > 0, "the cache holds no vectors");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = args
        .get(4)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| tmp.path().join("nexus"));
    let fresh = !dir.exists();
    let mut nexus = Nexus::open(&dir).expect("open");
    let run = |nx: &Nexus, cmd: &str| {
        let r = nx
            .execute_json(&json!({ "command": cmd }), Access::ReadWrite)
            .to_json();
        assert!(r.get("error").is_none(), "{r}");
        r
    };
    let mut texts = Rng(0x2545_f491_4f6c_dd1d);
    if fresh {
        let t = Instant::now();
        run(
            &nexus,
            r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Note"} SET ATTRIBUTES { description: "a note" } } }"#,
        );
        for chunk in 0..n.div_ceil(1000) {
            let mut blocks = String::new();
            for i in chunk * 1000..((chunk + 1) * 1000).min(n) {
                let s = texts.sentence();
                blocks.push_str(&format!(
                    "CONCEPT ?c{i} {{ {{type: \"Note\", name: \"n{i}\"}} SET ATTRIBUTES {{ description: {} }} }}\n",
                    json!(s)
                ));
            }
            run(&nexus, &format!("UPSERT {{ {blocks} }}"));
        }
        println!("{n} concepts written in {:.1} s", t.elapsed().as_secs_f64());
    }
    let table = Arc::new(Table {
        model,
        real: Mutex::new(real),
    });
    nexus
        .set_embedder(Arc::clone(&table) as Arc<dyn Embedder>)
        .expect("embedder");
    let sem = nexus.recall().semantic().expect("semantic").clone();
    let t = Instant::now();
    nexus
        .recall()
        .wait_for_embeddings(Duration::from_secs(7200), &mut |_| {})
        .expect("embedded");
    println!(
        "{n} concepts embedded from the table in {:.1} s ({rows} real vectors, {} mixed)",
        t.elapsed().as_secs_f64(),
        n.saturating_sub(rows)
    );
    // From here on every text goes to the model.
    *table.real.lock().unwrap_or_else(|p| p.into_inner()) = Vec::new();
    let t = Instant::now();
    assert!(sem.wait_for_ann(Duration::from_secs(7200)), "graph");
    println!(
        "graph ready {:.1} s later ({} vectors)",
        t.elapsed().as_secs_f64(),
        sem.len()
    );
    // Two kinds of query text, each new to the process: a few words ("the roof repair
    // 17", what agents usually search for) and a whole sentence.
    let mut queries = Rng(0x51_7cc1_b727_220a);
    let mut texts_of = |kind: &str, tag: &str| -> Vec<String> {
        (0..200)
            .map(|i| match kind {
                "short" => format!("{} {tag}{i}", queries.pick(sentences::THINGS)),
                _ => format!("{} ({tag} {i})", queries.sentence()),
            })
            .collect()
    };
    let search = |text: &str, mode: &str| {
        let cmd = format!(
            "SEARCH CONCEPT {} WITH TYPE \"Note\" MODE \"{mode}\" LIMIT 10",
            json!(text)
        );
        let t = Instant::now();
        let r = run(&nexus, &cmd);
        let took = t.elapsed();
        let hits = r["result"].as_array().map_or(0, Vec::len);
        assert!(hits > 0, "{cmd}: no result");
        took
    };
    // Warm up: the model, the pool, the pages of the indexes.
    for q in texts_of("sentence", "warm-up").iter().take(20) {
        search(q, "hybrid");
    }
    let mut report = Vec::new();
    for kind in ["short", "sentence"] {
        for mode in ["hybrid", "semantic", "keyword"] {
            let qs = texts_of(kind, mode);
            let times: Vec<Duration> = qs.iter().map(|q| search(q, mode)).collect();
            report.push((format!("{mode}, new {kind} query"), median(times)));
            if mode == "hybrid" {
                let times: Vec<Duration> = qs.iter().map(|q| search(q, mode)).collect();
                report.push((
                    format!("hybrid, {kind} query's embedding cached"),
                    median(times),
                ));
                // The model alone, between searches (as a server sees it: the search
                // in between leaves other data in the CPU's caches).
                let fresh = texts_of(kind, "model");
                let mut times = Vec::new();
                for (q, other) in fresh.iter().zip(&qs) {
                    search(other, mode);
                    let t = Instant::now();
                    sem.embed_query(q).expect("embed");
                    times.push(t.elapsed());
                }
                report.push((
                    format!("the model alone, new {kind} query, between searches"),
                    median(times),
                ));
            }
        }
    }
    let (mut recall, mut graph_t, mut exact_t) = (0.0, vec![], vec![]);
    let qs = texts_of("sentence", "recall");
    for q in &qs {
        let v = sem.embed_query(q).expect("embed");
        let t = Instant::now();
        let a = sem.nearest(&v, 10, None);
        graph_t.push(t.elapsed());
        let t = Instant::now();
        let x = sem.nearest_exact(&v, 10);
        exact_t.push(t.elapsed());
        let want: std::collections::HashSet<u64> = x.iter().map(|y| y.1).collect();
        recall += a.iter().filter(|y| want.contains(&y.1)).count() as f64 / 10.0;
    }
    println!("{n} concepts, medians of 200 searches:");
    for (what, m) in report {
        println!("  {what}: {m:?}");
    }
    println!(
        "  vectors alone: graph {:?}, exact {:?}; graph recall@10 {:.3}",
        median(graph_t),
        median(exact_t),
        recall / qs.len() as f64
    );
    println!(
        "  RSS after the searches {:.0} MiB (peak {:.0} MiB, with the vector table and the file it was read from)",
        rss_mib("VmRSS:"),
        rss_mib("VmHWM:")
    );
    // A small durable UPSERT (one new Note) with the model configured, where the
    // background worker embeds each new concept right after its commit, then the same
    // on the same store opened without an embedder.
    let upserts = |nx: &Nexus, tag: &str| -> Duration {
        let mut rng = Rng(0x0123_4567_89ab_cdef);
        let times: Vec<Duration> = (0..200)
            .map(|i| {
                let cmd = format!(
                    "UPSERT {{ CONCEPT ?n {{ {{type: \"Note\", name: \"{tag}-{i}\"}} SET ATTRIBUTES {{ description: {} }} }} }}",
                    json!(rng.sentence())
                );
                let t = Instant::now();
                run(nx, &cmd);
                let took = t.elapsed();
                // A pause, as between an agent's writes, so the worker can embed.
                std::thread::sleep(Duration::from_millis(10));
                took
            })
            .collect();
        median(times)
    };
    let with_model = upserts(&nexus, "with-model");
    drop(sem);
    drop(nexus);
    let plain = Nexus::open(&dir).expect("reopen");
    let without = upserts(&plain, "without-model");
    println!("  small UPSERT, median of 200: {with_model:?} with the model configured, {without:?} without an embedder");
}
