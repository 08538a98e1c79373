//! KML write throughput on an on-disk nexus (durable commits):
//! - `bulk_load`: 100,000 concepts + 300,000 propositions through UPSERT capsules of
//!   1,000 blocks (one transaction per capsule). Scale with `KIP_BENCH_CONCEPTS`.
//! - `small_upsert`: one new concept + one link, one transaction each.
//!
//! Run with `cargo bench -p kip-open --bench kml`.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kip_engine::{Access, Nexus};
use kip_open::Open;
use serde_json::json;
use std::fmt::Write;
use std::time::{Duration, Instant};

const SCHEMA: &str = r#"UPSERT {
    CONCEPT ?t { {type: "$ConceptType", name: "Entity"} SET ATTRIBUTES { description: "benchmark entity" } }
    CONCEPT ?p { {type: "$PropositionType", name: "related_to"} SET ATTRIBUTES { description: "relation", subject_types: ["*"], object_types: ["*"] } }
}"#;

/// Capsule `c` holds blocks `c*1000 .. c*1000+999`; each concept links to three earlier
/// concepts (in this capsule by handle, or in earlier capsules by {type, name}).
fn capsule(c: usize, per: usize) -> String {
    let mut s = String::from("UPSERT {\n");
    for b in 0..per {
        let i = c * per + b;
        let _ = write!(
            s,
            "CONCEPT ?c{b} {{ {{type: \"Entity\", name: \"e{i}\"}} SET ATTRIBUTES {{ rank: {r}, description: \"entity number {i}\" }}",
            r = i % 97
        );
        if i > 0 {
            s.push_str(" SET PROPOSITIONS {");
            for k in 1..=3usize {
                let j = (i * 7 + k * 13) % i.max(1);
                let j = if j == i { i - 1 } else { j };
                if j >= c * per {
                    let _ = write!(s, " (\"related_to\", ?c{})", j - c * per);
                } else {
                    let _ = write!(s, " (\"related_to\", {{type: \"Entity\", name: \"e{j}\"}})");
                }
            }
            s.push_str(" }");
        }
        s.push_str(" }\n");
    }
    s.push_str("} WITH METADATA { source: \"bench\" }\n");
    s
}

fn bulk(c: &mut Criterion) {
    let concepts: usize = std::env::var("KIP_BENCH_CONCEPTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let per = 1000.min(concepts);
    let capsules: Vec<String> = (0..concepts / per).map(|i| capsule(i, per)).collect();
    let mut g = c.benchmark_group("kml");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(1));
    g.warm_up_time(Duration::from_millis(1));
    g.throughput(Throughput::Elements((concepts * 4) as u64));
    g.bench_function(
        format!("bulk_load_{concepts}_concepts_{}_links", concepts * 3 - 3),
        |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let dir = tempfile::tempdir().expect("tempdir");
                    let n = Nexus::open(dir.path()).expect("open");
                    n.load_capsule(SCHEMA).expect("schema");
                    let start = Instant::now();
                    for cap in &capsules {
                        n.load_capsule(cap).expect("capsule");
                    }
                    total += start.elapsed();
                }
                total
            })
        },
    );
    g.finish();
}

fn small(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = Nexus::open(dir.path()).expect("open");
    n.load_capsule(SCHEMA).expect("schema");
    n.load_capsule(&capsule(0, 1000)).expect("seed");
    let mut i = 0usize;
    let mut g = c.benchmark_group("kml");
    g.throughput(Throughput::Elements(1));
    g.bench_function("small_upsert_one_concept_one_link", |b| {
        b.iter(|| {
            i += 1;
            let cmd = format!(
                "UPSERT {{ CONCEPT ?x {{ {{type: \"Entity\", name: \"s{i}\"}} SET PROPOSITIONS {{ (\"related_to\", {{type: \"Entity\", name: \"e{}\"}}) }} }} }}",
                i % 1000
            );
            let r = n.execute_json(&json!({ "command": cmd }), Access::ReadWrite);
            assert!(!r.has_error());
        })
    });
    g.finish();
}

criterion_group!(benches, small, bulk);
criterion_main!(benches);
