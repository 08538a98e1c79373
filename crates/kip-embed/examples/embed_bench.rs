//! The local embedder's speed: one query text at a time (what a SEARCH in mode
//! `semantic` or `hybrid` waits for) and batches (what the background worker does).
//!
//! `cargo run --release -p kip-embed --example embed_bench -- MODEL_DIR [ROUNDS]`
//! prints the median, lower and upper quartile of the time to embed one query text of
//! a few words, of a sentence, of a paragraph (~60 tokens, the single-text path) and of
//! a longer text (~150 tokens, candle), then the throughput in batches.
//! It pins the thread count first, as the `kip` binary does
//! ([`kip_embed::pin_thread_count`]); `EMBED_BENCH_UNPINNED=1` leaves it unset, to
//! measure what that is worth; `RAYON_NUM_THREADS=1` runs the arithmetic on one thread;
//! `EMBED_BENCH_ONLY="3 words"` (or `sentence`, `paragraph`, `long text`) measures one
//! case only.
#![allow(clippy::unwrap_used, missing_docs)]

use kip_embed::{Embedder, LocalEmbedder};
use std::time::{Duration, Instant};

fn quartiles(mut v: Vec<Duration>) -> (Duration, Duration, Duration) {
    v.sort();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.25), at(0.5), at(0.75))
}

fn main() {
    if std::env::var_os("EMBED_BENCH_UNPINNED").is_none() {
        println!("threads: {}", kip_embed::pin_thread_count());
    } else {
        println!("threads: not pinned");
    }
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).expect("usage: embed_bench MODEL_DIR [ROUNDS]");
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(200);
    let e = LocalEmbedder::open(std::path::Path::new(dir)).expect("model");
    let queries = [
        ("3 words", "database storage engine"),
        (
            "sentence",
            "which project did I say was running late because of the vendor",
        ),
        (
            "paragraph",
            "Notes from the planning meeting: the team agreed to move the launch of the mobile \
             app to March, Alice owns the payment integration, Bob will review the security \
             audit findings, and we still need a decision on the analytics vendor before the \
             budget review at the end of the quarter.",
        ),
        (
            "long text",
            "Notes from the planning meeting: the team agreed to move the launch of the mobile \
             app to March, Alice owns the payment integration, Bob will review the security \
             audit findings, and we still need a decision on the analytics vendor before the \
             budget review at the end of the quarter. Carol reported that the data migration \
             is two weeks behind because the old warehouse exports dates in three different \
             formats, and proposed a cleanup script that Dan will test on a copy first. The \
             support team asked for a shared glossary of product names, since customers keep \
             confusing the starter plan with the free trial. Next meeting on Thursday at ten, \
             with the vendor's sales engineer joining for the last half hour to answer \
             questions about pricing, data residency and the service level agreement.",
        ),
    ];
    // Warm up (allocations, the thread pool, page faults on the weights).
    for _ in 0..20 {
        e.embed(&[queries[1].1]).unwrap();
    }
    let only = std::env::var("EMBED_BENCH_ONLY").ok();
    for (label, text) in queries {
        if only.as_deref().is_some_and(|o| o != label) {
            continue;
        }
        let mut t = Vec::with_capacity(rounds);
        for i in 0..rounds {
            // A different text each round, so no cache anywhere can answer.
            let q = format!("{text} {i}");
            let t0 = Instant::now();
            e.embed(&[q.as_str()]).unwrap();
            t.push(t0.elapsed());
        }
        let (lo, med, hi) = quartiles(t);
        println!("one query ({label}): median {med:?} (quartiles {lo:?} - {hi:?})");
    }
    if only.is_some() {
        return;
    }
    let texts: Vec<String> = (0..512)
        .map(|i| {
            format!(
                "Note {i}: meeting with the team about the roadmap, budget item {} and travel plans",
                i * 7
            )
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let t0 = Instant::now();
    e.embed(&refs).unwrap();
    let s = t0.elapsed().as_secs_f64();
    println!("batches: {:.0} texts/s", refs.len() as f64 / s);
}
