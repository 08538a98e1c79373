//! What the audit log costs a write: `cargo run --release -p kip-open --example
//! audit_bench -- [ROUNDS] [PER_ROUND]`. On one on-disk nexus, alternates rounds of
//! small UPSERTs (each its own durable statement) run unaudited and audited, and prints
//! the median time per UPSERT of each mode and their ratio.

use kip_engine::{Access, Budget, Nexus};
use kip_open::Open;
use serde_json::json;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(8);
    let per: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(300);
    let dir = tempfile::tempdir().expect("tempdir");
    // AUDIT_BENCH_MEMORY=1: an in-memory nexus (no fsync): the recording's CPU cost alone.
    let n = if std::env::var_os("AUDIT_BENCH_MEMORY").is_some() {
        Nexus::in_memory().expect("nexus")
    } else {
        Nexus::open(dir.path()).expect("open")
    };
    let upsert = |i: usize| {
        json!({
            "command": "UPSERT { CONCEPT ?p { {type: \"Person\", name: :n} SET ATTRIBUTES { person_class: \"Human\", note: :note } } }",
            "parameters": {"n": format!("p{}", i % 5000), "note": format!("note {i}")}
        })
    };
    // AUDIT_BENCH_AA=1: both modes unaudited (an A/A run: what the alternation alone
    // measures).
    let aa = std::env::var_os("AUDIT_BENCH_AA").is_some();
    let (mut plain, mut audited) = (Vec::new(), Vec::new());
    let mut i = 0;
    for round in 0..rounds * 2 {
        let audit = round % 2 == 1;
        for _ in 0..per {
            let args = upsert(i);
            i += 1;
            let t = Instant::now();
            let r = if audit && !aa {
                n.execute_audited(&args, Access::ReadWrite, &Budget::default(), "bench")
            } else {
                n.execute_json(&args, Access::ReadWrite).to_json()
            };
            let us = t.elapsed().as_secs_f64() * 1e6;
            assert!(r.get("error").is_none(), "{r}");
            if audit {
                audited.push(us);
            } else {
                plain.push(us);
            }
        }
    }
    let (p, a) = (median(plain), median(audited));
    println!(
        "small UPSERT: {p:.0} us unaudited, {a:.0} us audited (median of {} each): {:.3}x",
        rounds * per,
        a / p
    );
}
