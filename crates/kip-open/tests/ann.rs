//! The vector index: once a nexus holds `semantic::ANN_MIN` vectors (lowered to 4,000
//! here) an HNSW graph is built in
//! the background; its answers must match the exact search (recall@10 >= 0.95, also
//! with a type filter, which runs inside the graph search), and vectors replaced or
//! removed afterwards must never come back.

use kip_engine::Nexus;
use kip_open::Open;
use std::sync::Arc;
use std::time::Duration;

#[path = "common/embedders.rs"]
mod embedders;
use embedders::{Never, Words};

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
    n.set_embedder(Arc::new(Never(DIM))).expect("embedder");
    let sem = n.recall().semantic().expect("semantic").clone();
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

#[test]
fn links_have_a_space_and_a_graph_of_their_own() {
    use kip_engine::store::ElemRef;
    let mut n = Nexus::in_memory().expect("nexus");
    n.set_embedder(Arc::new(Never(DIM))).expect("embedder");
    let sem = n.recall().semantic().expect("semantic").clone();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let centres: Vec<Vec<f32>> = (0..200)
        .map(|_| (0..DIM).map(|_| rng.unit()).collect())
        .collect();
    sem.set_ann_min(4_000);
    // 2,000 concepts (below the graph's threshold) and 6,000 propositions (above it),
    // on the same topics.
    let concepts: Vec<(u64, &str, Vec<f32>)> = (0..2_000)
        .map(|i| (10 + i as u64, "A", rng.vector(&centres[i % 200], 0.6)))
        .collect();
    let tag = "\u{0}knows";
    let links: Vec<(u64, &str, Vec<f32>)> = (0..6_000)
        .map(|i| {
            (
                ElemRef::Prop(10 + i as u64).encode(),
                tag,
                rng.vector(&centres[(i * 3) % 200], 0.6),
            )
        })
        .collect();
    sem.insert_raw(&concepts);
    sem.insert_raw(&links);
    assert_eq!(sem.len(), 8_000);
    // The propositions get a graph; the concepts, fewer than the threshold on their
    // own, are searched exactly (8,000 vectors together would have made one graph).
    assert!(sem.wait_for_ann(Duration::from_secs(300)), "no link graph");
    for i in 0..50 {
        let q = rng.vector(&centres[(i * 11) % 200], 0.6);
        let found = sem.nearest(&q, 10, None);
        assert_eq!(
            found,
            sem.nearest_exact(&q, 10),
            "concepts are searched exactly"
        );
        assert!(
            found.iter().all(|x| (10..2_010).contains(&x.1)),
            "{found:?}"
        );
        let by_type = sem.nearest(&q, 10, Some("A"));
        assert_eq!(by_type, found);
        let l = sem.nearest_links(&q, 10, None);
        assert_eq!(l.len(), 10);
        assert!(l.iter().all(|x| (10..6_010).contains(&x.1)), "{l:?}");
        assert_eq!(sem.nearest_links(&q, 10, Some("knows")).len(), 10);
        assert!(sem.nearest_links(&q, 10, Some("likes")).is_empty());
    }
    // A proposition's own vector finds it through the graph.
    let hit = sem.nearest_links(&links[123].2, 1, None);
    assert_eq!(hit[0].1, 10 + 123);
}

fn exec(n: &Nexus, cmd: &str) -> serde_json::Value {
    let r = n
        .execute_json(
            &serde_json::json!({ "command": cmd }),
            kip_engine::Access::ReadWrite,
        )
        .to_json();
    assert!(r.get("error").is_none(), "{cmd}\n{r}");
    r["result"].clone()
}

fn open_with_model(dir: &std::path::Path) -> (Nexus, Arc<kip_engine::semantic::Semantic>) {
    let mut n = Nexus::open(dir).expect("open");
    n.set_embedder(Arc::new(Words::new(DIM))).expect("embedder");
    let sem = n.recall().semantic().expect("semantic").clone();
    assert!(
        sem.wait_restored(Duration::from_secs(60)),
        "restore attempted"
    );
    (n, sem)
}

const QUERY: &str = r#"SEARCH CONCEPT "topic 7 colour 3" WITH TYPE "Note" MODE "semantic" LIMIT 5"#;

#[test]
fn a_saved_graph_is_restored_at_open_and_checked_against_the_store() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("nexus");
    let graph_dir = dir.join(kip_engine::semantic::GRAPH_DIR).join("concepts");
    let (n, sem) = open_with_model(&dir);
    sem.set_ann_min(300);
    exec(
        &n,
        r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Note"} SET ATTRIBUTES { description: "a note" } } }"#,
    );
    for chunk in 0..6 {
        let mut blocks = String::new();
        for i in chunk * 200..(chunk + 1) * 200 {
            blocks.push_str(&format!(
                "CONCEPT ?n{i} {{ {{type: \"Note\", name: \"n{i}\"}} SET ATTRIBUTES {{ description: \"topic {} colour {} shape {}\" }} }}\n",
                i % 50,
                i % 7,
                i % 11
            ));
        }
        exec(&n, &format!("UPSERT {{ {blocks} }}"));
    }
    n.recall()
        .wait_for_embeddings(Duration::from_secs(120), &mut |_| {})
        .expect("embedded");
    assert!(sem.wait_for_ann(Duration::from_secs(120)), "graph built");
    let total = sem.len();
    assert!(total >= 1_200, "{total}");
    // The background thread saves a graph once it is built.
    let manifest = graph_dir.join("manifest.json");
    for _ in 0..600 {
        if manifest.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(manifest.exists(), "the graph was not saved");
    let mode =
        |p: &std::path::Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&dir.join(kip_engine::semantic::GRAPH_DIR)), 0o700);
    assert_eq!(mode(&manifest), 0o600);
    let before = exec(&n, QUERY);
    assert_eq!(before.as_array().map(Vec::len), Some(5), "{before}");
    drop(sem);
    drop(n);

    // Reopened: the graph is there once the background thread has restored it (not
    // rebuilt: the default threshold would not even build one for so few vectors), and
    // answers the same.
    let (n, sem) = open_with_model(&dir);
    assert!(sem.has_ann(), "restored");
    assert_eq!(sem.len(), total);
    sem.set_ann_min(300);
    assert_eq!(exec(&n, QUERY), before);
    // A concept deleted while no model is configured: its vector leaves the store, and
    // the next open marks its slot dead instead of trusting the saved graph.
    let gone = before[0]["name"].as_str().expect("name").to_string();
    drop(sem);
    drop(n);
    let plain = Nexus::open(&dir).expect("open without a model");
    exec(
        &plain,
        &format!(r#"DELETE CONCEPT ?n DETACH WHERE {{ ?n {{type: "Note", name: "{gone}"}} }}"#),
    );
    // And one written meanwhile: embedded after the next open, then inserted into
    // the restored graph.
    exec(
        &plain,
        r#"UPSERT { CONCEPT ?n { {type: "Note", name: "late"} SET ATTRIBUTES { description: "zebra quartz umbrella" } } }"#,
    );
    drop(plain);
    let (n, sem) = open_with_model(&dir);
    assert!(sem.has_ann(), "restored");
    n.recall()
        .wait_for_embeddings(Duration::from_secs(60), &mut |_| {})
        .expect("embedded");
    sem.set_ann_min(300);
    assert!(
        sem.wait_for_ann(Duration::from_secs(60)),
        "the graph takes the new vector"
    );
    assert_eq!(sem.len(), total);
    let late = exec(
        &n,
        r#"SEARCH CONCEPT "zebra quartz umbrella" MODE "semantic" LIMIT 1"#,
    );
    assert_eq!(late[0]["name"], "late", "{late}");
    // A restored graph that grows by more than a tenth is saved again (as soon as it
    // has), and that save is restored in turn.
    let saved_slots = || -> u64 {
        std::fs::read(&manifest)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|m| m["slots"].as_u64())
            .unwrap_or(0)
    };
    let first = saved_slots();
    assert!(first > 0);
    let mut blocks = String::new();
    for i in 0..200 {
        blocks.push_str(&format!(
            "CONCEPT ?m{i} {{ {{type: \"Note\", name: \"m{i}\"}} SET ATTRIBUTES {{ description: \"grown {i} pebble\" }} }}\n"
        ));
    }
    exec(&n, &format!("UPSERT {{ {blocks} }}"));
    n.recall()
        .wait_for_embeddings(Duration::from_secs(60), &mut |_| {})
        .expect("embedded");
    assert!(sem.wait_for_ann(Duration::from_secs(60)), "caught up");
    let grown = sem.len() as u64;
    for _ in 0..600 {
        if saved_slots() > first {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let second = saved_slots();
    assert!(
        second >= first + first / 10 && second <= grown,
        "saved again: {first} -> {second} (of {grown})"
    );
    drop(sem);
    drop(n);
    let (n, sem) = open_with_model(&dir);
    assert!(sem.has_ann(), "restored again");
    assert_eq!(sem.len() as u64, grown);
    sem.set_ann_min(300);
    // Many notes tie on this hashed embedder: another graph may pick other tied ones,
    // never worse ones.
    let scores = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .map(|x| x["metadata"]["_score"].to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(scores(&exec(&n, QUERY)), scores(&before));
    exec(
        &n,
        r#"DELETE CONCEPT ?m DETACH WHERE { ?m {type: "Note"} FILTER(STARTS_WITH(?m.name, "m")) }"#,
    );
    n.recall()
        .wait_for_embeddings(Duration::from_secs(60), &mut |_| {})
        .expect("settled");
    let after = exec(&n, QUERY);
    assert!(
        after
            .as_array()
            .is_some_and(|a| a.iter().all(|x| x["name"] != gone.as_str())),
        "{after}"
    );
    drop(sem);
    drop(n);

    // A damaged save is not used (no panic, no wrong answer): the vectors are searched
    // exactly and the graph is rebuilt in the background.
    let graph_file = std::fs::read_dir(&graph_dir)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".hnsw.graph"))
        .expect("graph file");
    let mut bytes = std::fs::read(&graph_file).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&graph_file, &bytes).expect("write");
    let (n, sem) = open_with_model(&dir);
    assert!(!sem.has_ann(), "a damaged graph must not be restored");
    assert_eq!(sem.len(), total);
    assert_eq!(scores(&exec(&n, QUERY)), scores(&after));
}

/// A graph that cannot be saved (here the save's directory name is taken by a file)
/// costs nothing but the warning: searches go on through the graph, nothing panics.
#[test]
fn a_graph_that_cannot_be_saved_is_still_used() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("nexus");
    let (n, sem) = open_with_model(&dir);
    std::fs::write(dir.join(kip_engine::semantic::GRAPH_DIR), b"in the way").expect("file");
    sem.set_ann_min(300);
    exec(
        &n,
        r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Note"} SET ATTRIBUTES { description: "a note" } } }"#,
    );
    let mut blocks = String::new();
    for i in 0..400 {
        blocks.push_str(&format!(
            "CONCEPT ?n{i} {{ {{type: \"Note\", name: \"n{i}\"}} SET ATTRIBUTES {{ description: \"topic {} colour {}\" }} }}\n",
            i % 50,
            i % 7
        ));
    }
    exec(&n, &format!("UPSERT {{ {blocks} }}"));
    n.recall()
        .wait_for_embeddings(Duration::from_secs(60), &mut |_| {})
        .expect("embedded");
    assert!(sem.wait_for_ann(Duration::from_secs(60)), "graph built");
    std::thread::sleep(Duration::from_millis(700));
    let found = exec(&n, QUERY);
    assert_eq!(found.as_array().map(Vec::len), Some(5), "{found}");
    assert!(dir.join(kip_engine::semantic::GRAPH_DIR).is_file());
    drop(sem);
    drop(n);
}
