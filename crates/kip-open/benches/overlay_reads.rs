//! Reads while the index overlay holds many small committed writes (a server between
//! checkpoints), against the same reads once the overlay is folded.
//!
//! An in-memory nexus (no write-ahead log, so no checkpoint by log size or age) gets
//! 20,000 entities with links in 1,000-block capsules, then 4,000 single-statement
//! UPSERTs (each a new entity linked to an existing one: a handful of overlay entries
//! per transaction). `incoming_links` asks for the links into one entity (an `osp` scan
//! through the overlay); `type_scan_page` pages through a type (`concept_type`).
//!
//! Run with `cargo bench -p kip-open --bench overlay_reads`.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, Criterion};
use kip_engine::{Access, Nexus};
use kip_open::Open;
use serde_json::json;
use std::fmt::Write;

const SCHEMA: &str = r#"UPSERT {
    CONCEPT ?t { {type: "$ConceptType", name: "Entity"} SET ATTRIBUTES { description: "benchmark entity" } }
    CONCEPT ?p { {type: "$PropositionType", name: "related_to"} SET ATTRIBUTES { description: "relation", subject_types: ["*"], object_types: ["*"] } }
}"#;

fn capsule(c: usize) -> String {
    let mut s = String::from("UPSERT {\n");
    for b in 0..1000usize {
        let i = c * 1000 + b;
        let _ = write!(
            s,
            "CONCEPT {{ {{type: \"Entity\", name: \"e{i}\"}} SET ATTRIBUTES {{ description: \"entity number {i}\" }}"
        );
        if i > 0 {
            let j = (i * 7919) % i;
            let _ = write!(
                s,
                " SET PROPOSITIONS {{ (\"related_to\", {{type: \"Entity\", name: \"e{j}\"}}) }}"
            );
        }
        s.push_str(" }\n");
    }
    s.push_str("}\n");
    s
}

fn run(n: &Nexus, cmd: &str) {
    let r = n.execute_json(&json!({ "command": cmd }), Access::ReadWrite);
    assert!(!r.has_error(), "{cmd}");
}

fn reads(c: &mut Criterion, n: &Nexus, label: &str) {
    let mut g = c.benchmark_group(format!("overlay_reads_{label}"));
    let mut i = 0usize;
    g.bench_function("incoming_links", |b| {
        b.iter(|| {
            i = (i + 7) % 20_000;
            run(
                n,
                &format!(
                    "FIND(?a.name) WHERE {{ ?b {{type: \"Entity\", name: \"e{i}\"}} (?a, \"related_to\", ?b) }}"
                ),
            );
        })
    });
    g.bench_function("type_scan_page", |b| {
        b.iter(|| run(n, "FIND(?a.name) WHERE { ?a {type: \"Entity\"} } LIMIT 50"))
    });
    g.finish();
}

fn bench(c: &mut Criterion) {
    let n = Nexus::in_memory().expect("nexus");
    n.load_capsule(SCHEMA).expect("schema");
    for k in 0..20 {
        n.load_capsule(&capsule(k)).expect("capsule");
    }
    for k in 0..4000usize {
        run(
            &n,
            &format!(
                "UPSERT {{ CONCEPT {{ {{type: \"Entity\", name: \"s{k}\"}} SET PROPOSITIONS {{ (\"related_to\", {{type: \"Entity\", name: \"e{}\"}}) }} }} }}",
                (k * 13) % 20_000
            ),
        );
    }
    reads(c, &n, "small_writes_unfolded");
    n.admin().checkpoint().expect("fold");
    reads(c, &n, "folded");
}

criterion_group!(benches, bench);
criterion_main!(benches);
