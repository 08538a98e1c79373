//! Retrieval quality of the SEARCH modes with the real model (all-MiniLM-L6-v2): 300
//! personal-memory concepts and 100 queries phrased by meaning
//! (`tests/data/recall_set.json`), scored by recall@5 and MRR (over the top 10) for
//! keyword, semantic and hybrid search. The floors asserted are the figures measured
//! when the set was made (docs/performance.md, "Semantic recall") minus a margin, so
//! quality cannot regress silently.
//!
//! `#[ignore]`d in a plain `cargo test` (it needs the model that scripts/setup-test-env.sh
//! unpacks); scripts/test.sh includes it.

use kip_engine::{Access, Nexus};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

struct Scores {
    recall5: f64,
    mrr: f64,
}

fn measure(n: &Nexus, queries: &[(String, String)], mode: &str) -> Scores {
    let (mut hits, mut rr) = (0usize, 0f64);
    for (q, want) in queries {
        let r = n
            .execute_json(
                &json!({
                    "command": format!("SEARCH CONCEPT :q WITH TYPE \"Memory\" MODE \"{mode}\" LIMIT 10"),
                    "parameters": {"q": q}
                }),
                Access::ReadOnly,
            )
            .to_json();
        let names: Vec<&str> = r["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{q}: {r}"))
            .iter()
            .filter_map(|x| x["name"].as_str())
            .collect();
        if let Some(rank) = names.iter().position(|n| n == want) {
            if rank < 5 {
                hits += 1;
            }
            rr += 1.0 / (rank + 1) as f64;
        }
    }
    let total = queries.len() as f64;
    Scores {
        recall5: hits as f64 / total,
        mrr: rr / total,
    }
}

#[test]
#[ignore = "needs the model from scripts/setup-test-env.sh"]
fn hybrid_recalls_by_meaning_better_than_keywords() {
    let set: Value = serde_json::from_str(include_str!("data/recall_set.json")).expect("set");
    let dir = std::env::var_os("KIP_TEST_MODEL").map_or_else(
        || {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/models/all-MiniLM-L6-v2")
        },
        std::path::PathBuf::from,
    );
    let model = kip_embed::LocalEmbedder::open(&dir)
        .unwrap_or_else(|e| panic!("{e} (scripts/setup-test-env.sh unpacks the model)"));
    let mut n = kip_open::testing::nexus().expect("nexus");
    n.set_embedder(Arc::new(model)).expect("embedder");
    let ok = |r: Value| assert!(r.get("error").is_none(), "{r}");
    ok(n.execute_json(
        &json!({"command": r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Memory"} SET ATTRIBUTES { description: "something remembered", display_hint: "M" } } }"#}),
        Access::ReadWrite,
    )
    .to_json());
    for c in set["concepts"].as_array().expect("concepts") {
        ok(n.execute_json(
            &json!({
                "command": "UPSERT { CONCEPT ?m { {type: \"Memory\", name: :name} SET ATTRIBUTES { description: :d } } }",
                "parameters": {"name": c["name"], "d": c["description"]}
            }),
            Access::ReadWrite,
        )
        .to_json());
    }
    let left = n
        .recall()
        .wait_for_embeddings(Duration::from_secs(600), &mut |_| {})
        .expect("embedding");
    assert_eq!(left, 0);
    let of_kind = |kind: &str| -> Vec<(String, String)> {
        set["queries"]
            .as_array()
            .expect("queries")
            .iter()
            .filter(|q| q["kind"] == kind)
            .map(|q| {
                (
                    q["query"].as_str().expect("query").to_string(),
                    q["expect"][0].as_str().expect("expect").to_string(),
                )
            })
            .collect()
    };
    let queries = of_kind("meaning");
    assert_eq!(queries.len(), 100);
    // The material the hybrid fusion's constants were measured on (with
    // tests/conversation_recall.rs): each query's keyword and semantic rankings.
    if let Some(path) = std::env::var_os("KIP_RECALL_DUMP") {
        let ranking = |q: &str, mode: &str| -> Value {
            let r = n
                .execute_json(
                    &json!({
                        "command": format!("SEARCH CONCEPT :q WITH TYPE \"Memory\" MODE \"{mode}\" LIMIT 200"),
                        "parameters": {"q": q}
                    }),
                    Access::ReadOnly,
                )
                .to_json();
            Value::Array(
                r["result"]
                    .as_array()
                    .map(|hits| {
                        hits.iter()
                            .map(|h| json!([h["name"], h["metadata"]["_score"]]))
                            .collect()
                    })
                    .unwrap_or_default(),
            )
        };
        let dump: Vec<Value> = ["meaning", "name"]
            .iter()
            .flat_map(|kind| of_kind(kind).into_iter().map(move |q| (kind, q)))
            .map(|(kind, (q, want))| {
                json!({"kind": kind, "question": q, "evidence": [want],
                       "keyword": ranking(&q, "keyword"), "semantic": ranking(&q, "semantic")})
            })
            .collect();
        std::fs::write(path, serde_json::to_string(&dump).expect("json")).expect("dump");
    }
    let kw = measure(&n, &queries, "keyword");
    let sem = measure(&n, &queries, "semantic");
    let hy = measure(&n, &queries, "hybrid");
    for (mode, s) in [("keyword", &kw), ("semantic", &sem), ("hybrid", &hy)] {
        eprintln!(
            "by meaning: {mode:9} recall@5 {:.2}  MRR {:.3}",
            s.recall5, s.mrr
        );
    }
    // Searches by name (what agents also do): hybrid must not lose what keywords find.
    let by_name = of_kind("name");
    let (nkw, nsem, nhy) = (
        measure(&n, &by_name, "keyword"),
        measure(&n, &by_name, "semantic"),
        measure(&n, &by_name, "hybrid"),
    );
    for (mode, s) in [("keyword", &nkw), ("semantic", &nsem), ("hybrid", &nhy)] {
        eprintln!(
            "by name:    {mode:9} recall@5 {:.2}  MRR {:.3}",
            s.recall5, s.mrr
        );
    }
    assert!(nhy.recall5 >= nkw.recall5 && nhy.recall5 >= nsem.recall5);
    assert!(
        nhy.mrr + 0.05 >= nkw.mrr,
        "by name: hybrid MRR {} vs keyword {}",
        nhy.mrr,
        nkw.mrr
    );
    // Floors: measured figures minus a margin (docs/performance.md).
    assert!(
        sem.recall5 >= FLOOR_SEMANTIC_RECALL5,
        "semantic recall@5 {}",
        sem.recall5
    );
    assert!(
        hy.recall5 >= FLOOR_HYBRID_RECALL5,
        "hybrid recall@5 {}",
        hy.recall5
    );
    assert!(hy.mrr >= FLOOR_HYBRID_MRR, "hybrid MRR {}", hy.mrr);
    // Hybrid beats keyword clearly and is at least as good as semantic alone.
    assert!(
        hy.recall5 >= kw.recall5 + 0.2,
        "hybrid {} vs keyword {}",
        hy.recall5,
        kw.recall5
    );
    assert!(
        hy.recall5 + 1e-9 >= sem.recall5,
        "hybrid {} vs semantic {}",
        hy.recall5,
        sem.recall5
    );
    assert!(
        hy.mrr + 0.01 >= sem.mrr,
        "hybrid MRR {} vs semantic {}",
        hy.mrr,
        sem.mrr
    );
}

// Measured (2026-11-25, all-MiniLM-L6-v2): by meaning, keyword 0.74 / 0.605, semantic
// 1.00 / 0.954, hybrid 1.00 / 0.963; by name, keyword and hybrid 1.00 / 1.000, semantic
// 0.90 / 0.917.
const FLOOR_SEMANTIC_RECALL5: f64 = 0.95;
const FLOOR_HYBRID_RECALL5: f64 = 0.95;
const FLOOR_HYBRID_MRR: f64 = 0.92;
