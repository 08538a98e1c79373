//! Parser throughput: the Genesis capsule and a generated 1,000-block UPSERT capsule.
//! Run with `cargo bench -p kip-lang`; criterion reports MB/s.
#![allow(missing_docs)] // criterion_group! generates undocumented items

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use std::fmt::Write;
use std::hint::black_box;

fn genesis() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../spec/capsules/Genesis.kip"
    );
    std::fs::read_to_string(path).expect("read Genesis.kip")
}

/// 1,000 CONCEPT blocks, each with attributes, two propositions and block metadata.
fn bulk_capsule(blocks: usize) -> String {
    let mut s = String::from("UPSERT {\n");
    for i in 0..blocks {
        let _ = write!(
            s,
            r#"  CONCEPT ?c{i} {{
    {{type: "Drug", name: "Drug number {i}"}}
    SET ATTRIBUTES {{ description: "Synthetic drug {i} used for parser benchmarks", risk_level: {r}, aliases: ["D{i}", "drug-{i}"], approved: true }}
    SET PROPOSITIONS {{
      ("treats", {{type: "Symptom", name: "Symptom {s}"}})
      ("belongs_to_domain", {{type: "Domain", name: "Pharmacology"}}) WITH METADATA {{ confidence: 0.9 }}
    }}
  }}
  WITH METADATA {{ source: "bench", created_at: "2026-01-01T00:00:00Z" }}
"#,
            r = i % 5,
            s = i % 50
        );
    }
    s.push_str("}\nWITH METADATA { source: \"bench\", author: \"$system\", confidence: 1.0 }\n");
    s
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    for (name, text) in [
        ("genesis", genesis()),
        ("upsert_1000_blocks", bulk_capsule(1000)),
    ] {
        kip_lang::parse_script(&text).expect("benchmark input parses");
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(name), &text, |b, t| {
            b.iter(|| kip_lang::parse_script(black_box(t)).expect("parse"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
