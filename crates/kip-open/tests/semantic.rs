//! Semantic recall (SEARCH MODE "semantic"/"hybrid"): the embedding pipeline with a
//! small deterministic embedder (words hashed into a vector), the power-loss behaviour
//! of the background worker, and, with the real all-MiniLM-L6-v2 model (`#[ignore]`d in
//! a plain `cargo test`; scripts/test.sh unpacks the model and includes them), recall by
//! meaning.

mod common;
use kip_embed::{EmbedError, Embedder};
use kip_engine::{Access, Nexus};
use kip_open::crashsim::{Disk, SimFile};
use kip_open::Open;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

#[path = "common/embedders.rs"]
mod embedders;
use embedders::Words;

const NOTE: &str = r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Note"} SET ATTRIBUTES { description: "a note", display_hint: "N" } } }"#;

fn run(n: &Nexus, cmd: &str) -> Value {
    let r = n
        .execute_json(&json!({ "command": cmd }), Access::ReadWrite)
        .to_json();
    assert!(r.get("error").is_none(), "{cmd}\n{r}");
    r["result"].clone()
}

fn note(n: &Nexus, name: &str, description: &str) {
    let r = n
        .execute_json(
            &json!({
                "command": "UPSERT { CONCEPT ?n { {type: \"Note\", name: :name} SET ATTRIBUTES { description: :d } } }",
                "parameters": {"name": name, "d": description}
            }),
            Access::ReadWrite,
        )
        .to_json();
    assert!(r.get("error").is_none(), "{r}");
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .map(|x| x["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn settle(n: &Nexus) {
    let left = n
        .recall()
        .wait_for_embeddings(Duration::from_secs(60), &mut |_| {})
        .expect("embedding");
    assert_eq!(left, 0, "still not embedded");
}

#[test]
fn writes_are_embedded_in_the_background_and_searched_by_vector() {
    let mut n = common::nexus();
    run(&n, NOTE);
    // Without an embedder every mode is keyword search and PRIMER says so.
    let kw = run(
        &n,
        r#"SEARCH CONCEPT "apples" WITH TYPE "Note" MODE "semantic""#,
    );
    assert_eq!(kw, json!([]));
    let primer = run(&n, "DESCRIBE PRIMER");
    assert_eq!(primer["identity"]["search_modes"], json!(["keyword"]));

    n.set_embedder(Arc::new(Words::new(1024)))
        .expect("embedder");
    let primer = run(&n, "DESCRIBE PRIMER");
    assert_eq!(
        primer["identity"]["search_modes"],
        json!(["keyword", "semantic", "hybrid"])
    );
    assert_eq!(
        primer["identity"]["embedding_model"],
        json!("test:words-1024")
    );

    note(&n, "fruit", "red apples and green pears");
    note(&n, "engine", "diesel motors and pistons");
    note(&n, "orchard", "apples grow on trees");
    settle(&n);
    let sem = run(
        &n,
        r#"SEARCH CONCEPT "apples pears" WITH TYPE "Note" MODE "semantic" LIMIT 2"#,
    );
    assert_eq!(names(&sem), ["fruit", "orchard"]);
    for hit in sem.as_array().into_iter().flatten() {
        let s = hit["metadata"]["_score"].as_f64().expect("score");
        assert!((0.0..=1.0).contains(&s), "{hit}");
    }
    // THRESHOLD applies to the cosine.
    let strict = run(
        &n,
        r#"SEARCH CONCEPT "apples pears" WITH TYPE "Note" MODE "semantic" THRESHOLD 0.5"#,
    );
    assert_eq!(names(&strict), ["fruit"]);
    // Hybrid is the default mode with an embedder; scores stay in [0, 1].
    let hy = run(&n, r#"SEARCH CONCEPT "pistons" WITH TYPE "Note""#);
    assert_eq!(names(&hy)[0], "engine");

    // A changed text is embedded again; a deleted concept is gone from the results.
    note(&n, "engine", "apples pears apples pears");
    settle(&n);
    let sem = run(
        &n,
        r#"SEARCH CONCEPT "apples pears" WITH TYPE "Note" MODE "semantic" LIMIT 1"#,
    );
    assert_eq!(names(&sem), ["engine"]);
    run(
        &n,
        r#"DELETE CONCEPT ?n DETACH WHERE { ?n {type: "Note", name: "engine"} }"#,
    );
    settle(&n);
    let sem = run(
        &n,
        r#"SEARCH CONCEPT "apples pears" WITH TYPE "Note" MODE "semantic""#,
    );
    assert!(!names(&sem).contains(&"engine".to_string()), "{sem}");
    assert_eq!(n.recall().mark_stale_embeddings().expect("stale"), 0);
    assert_eq!(
        n.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
}

#[test]
fn propositions_have_their_own_vectors() {
    let mut n = common::nexus();
    run(&n, NOTE);
    run(
        &n,
        r#"UPSERT {
            CONCEPT ?w { {type: "$PropositionType", name: "works_at"} SET ATTRIBUTES { description: "employment of a person", subject_types: ["*"], object_types: ["*"] } }
            CONCEPT ?l { {type: "$PropositionType", name: "likes"} SET ATTRIBUTES { description: "a taste", subject_types: ["*"], object_types: ["*"] } }
        }"#,
    );
    n.set_embedder(Arc::new(Words::new(1024)))
        .expect("embedder");
    for (name, d) in [
        ("alice", "a person"),
        ("acme", "a firm"),
        ("bob", "a person"),
        ("pizza", "a dish"),
    ] {
        note(&n, name, d);
    }
    settle(&n);
    let concepts_only = n.recall().semantic().expect("semantic").len();
    let link = |s: &str, p: &str, o: &str| {
        run(
            &n,
            &format!(
                r#"UPSERT {{ PROPOSITION ?x {{ ({{type: "Note", name: "{s}"}}, "{p}", {{type: "Note", name: "{o}"}}) }} }}"#
            ),
        )
    };
    link("alice", "works_at", "acme");
    link("bob", "likes", "pizza");
    link("alice", "likes", "pizza");
    settle(&n);
    // One vector per link too.
    assert_eq!(
        n.recall().semantic().expect("semantic").len(),
        concepts_only + 3
    );
    let subj = |r: &Value| -> Vec<(String, String)> {
        r.as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|x| {
                (
                    x["predicate"].as_str().unwrap_or_default().to_string(),
                    x["subject"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    };
    // "employment" is only in the predicate's description: the link is found through
    // its own text (endpoint names + predicate + description).
    let r = run(
        &n,
        r#"SEARCH PROPOSITION "employment acme" MODE "semantic" LIMIT 1"#,
    );
    assert_eq!(subj(&r)[0].0, "works_at", "{r}");
    let s = r[0]["metadata"]["_score"].as_f64().expect("score");
    assert!(s > 0.0 && s <= 1.0, "{r}");
    // The predicate filter applies to the vector search.
    let r = run(
        &n,
        r#"SEARCH PROPOSITION "alice pizza" WITH TYPE "likes" MODE "semantic""#,
    );
    assert!(!r.as_array().expect("list").is_empty(), "{r}");
    assert!(subj(&r).iter().all(|(p, _)| p == "likes"), "{r}");
    let r = run(
        &n,
        r#"SEARCH PROPOSITION "alice pizza" MODE "hybrid" LIMIT 1"#,
    );
    assert_eq!(subj(&r)[0].0, "likes", "{r}");

    // A changed predicate description changes its links' texts: they are embedded again.
    run(
        &n,
        r#"UPSERT { CONCEPT ?l { {type: "$PropositionType", name: "likes"} SET ATTRIBUTES { description: "fondness" } } }"#,
    );
    settle(&n);
    assert_eq!(n.recall().mark_stale_embeddings().expect("stale"), 0);
    let r = run(
        &n,
        r#"SEARCH PROPOSITION "fondness bob" MODE "semantic" LIMIT 1"#,
    );
    assert_eq!(subj(&r)[0].0, "likes", "{r}");

    // Deleting a concept and its links removes their vectors from memory too.
    let before = n.recall().semantic().expect("semantic").len();
    run(
        &n,
        r#"DELETE CONCEPT ?n DETACH WHERE { ?n {type: "Note", name: "pizza"} }"#,
    );
    settle(&n);
    assert_eq!(n.recall().semantic().expect("semantic").len(), before - 3);
    let r = run(
        &n,
        r#"SEARCH PROPOSITION "fondness" WITH TYPE "likes" MODE "semantic""#,
    );
    assert_eq!(r, json!([]));
    assert_eq!(
        n.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
    // kip check finds a vector of an element that does not exist, and a bad one.
    n.write(
        |w| {
            w.put_vector(999_999, Some(&[0u8; 12]))?;
            w.put_vector(999_998, Some(&[1u8; 5]))?;
            Ok(())
        },
        false,
    )
    .expect("write");
    let problems = n.admin().check_integrity().expect("check");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("C:999999, which does not exist")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("C:999998 does not decode")),
        "{problems:?}"
    );
}

/// What a [`Scripted`] model answers for a batch of texts.
type Answer = Result<Vec<Vec<f32>>, EmbedError>;

/// A 4-dimension test model whose answers come from a function.
struct Scripted(fn(&[&str]) -> Answer);

impl std::fmt::Debug for Scripted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Scripted")
    }
}

impl Embedder for Scripted {
    fn model_id(&self) -> &str {
        "test:scripted"
    }
    fn dim(&self) -> usize {
        4
    }
    fn embed(&self, texts: &[&str]) -> Answer {
        (self.0)(texts)
    }
}

/// A note "kiwi" ("a small fuzzy fruit") under `model`, found for "fuzzy" in both
/// modes that ask the model for the query's vector.
fn kiwi_found_by_keyword(model: Scripted) -> kip_engine::Nexus {
    let mut n = common::nexus();
    run(&n, NOTE);
    n.set_embedder(Arc::new(model)).expect("embedder");
    note(&n, "kiwi", "a small fuzzy fruit");
    for mode in ["semantic", "hybrid"] {
        let r = run(
            &n,
            &format!(r#"SEARCH CONCEPT "fuzzy" WITH TYPE "Note" MODE "{mode}""#),
        );
        assert_eq!(names(&r), ["kiwi"], "{mode}");
    }
    n
}

#[test]
fn a_fresh_write_is_found_by_keyword_before_it_is_embedded() {
    let n = kiwi_found_by_keyword(Scripted(|_| Err(EmbedError::Remote("unreachable".into()))));
    // Waiting reports the model's failure instead of hanging.
    let err = n
        .recall()
        .wait_for_embeddings(Duration::from_secs(20), &mut |_| {})
        .expect_err("the model fails");
    assert!(err.message.contains("unreachable"), "{}", err.message);
}

#[test]
fn a_model_that_panics_on_the_query_leaves_keyword_search_answering() {
    // The query is embedded on a thread of its own while the postings are read: a
    // panic there ends that thread only, and the search answers by keyword.
    kiwi_found_by_keyword(Scripted(|texts| {
        if texts.contains(&"fuzzy") {
            panic!("the model broke on the query");
        }
        Ok(texts.iter().map(|_| vec![1.0, 0.0, 0.0, 0.0]).collect())
    }));
}

fn files(disk: &Disk) -> (SimFile, SimFile) {
    (
        disk.existing(0).expect("database file"),
        disk.existing(1).expect("log file"),
    )
}

#[test]
fn a_power_loss_during_background_embedding_loses_nothing() {
    let disk = Disk::new();
    let (db, log) = (disk.file(), disk.file());
    {
        let mut n = Nexus::open_simulated(db, log).expect("create");
        run(&n, NOTE);
        n.set_embedder(Arc::new(Words::new(1024)))
            .expect("embedder");
        settle(&n);
    }
    let base = disk.power_loss(0);
    for seed in 0..6u64 {
        let disk = base.power_loss(0);
        let (db, log) = files(&disk);
        let mut n = Nexus::open_simulated(db, log).expect("open");
        n.set_embedder(Arc::new(Words::new(1024)))
            .expect("embedder");
        let mut written = Vec::new();
        for i in 0..12u64 {
            let name = format!("n{seed}_{i}");
            note(&n, &name, &format!("word{i} topic{} shared", i % 3));
            written.push(name);
            if i == 5 && seed % 2 == 0 {
                settle(&n);
            }
        }
        if seed % 3 == 0 {
            settle(&n);
        }
        // The power goes off with the worker somewhere in its work.
        let crashed = disk.power_loss(seed);
        drop(n);
        let (db, log) = files(&crashed);
        let mut n = Nexus::open_simulated(db, log).expect("reopen after the power loss");
        n.set_embedder(Arc::new(Words::new(1024)))
            .expect("embedder");
        settle(&n);
        // Every acknowledged write is there and embedded from its current text.
        assert_eq!(
            n.recall().mark_stale_embeddings().expect("stale"),
            0,
            "seed {seed}"
        );
        for (i, name) in written.iter().enumerate() {
            let r = run(
                &n,
                &format!(
                    r#"SEARCH CONCEPT "word{i} topic{}" WITH TYPE "Note" MODE "semantic" LIMIT 1"#,
                    i % 3
                ),
            );
            assert_eq!(names(&r), std::slice::from_ref(name), "seed {seed}");
        }
    }
}

fn model() -> Arc<dyn Embedder> {
    let dir = std::env::var_os("KIP_TEST_MODEL").map_or_else(
        || {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/models/all-MiniLM-L6-v2")
        },
        std::path::PathBuf::from,
    );
    Arc::new(kip_embed::LocalEmbedder::open(&dir).unwrap_or_else(|e| {
        panic!("{e} (scripts/setup-test-env.sh unpacks the model; or set KIP_TEST_MODEL)")
    }))
}

#[test]
#[ignore = "needs the model from scripts/setup-test-env.sh"]
fn the_real_model_recalls_by_meaning() {
    let mut n = common::nexus();
    run(&n, NOTE);
    n.set_embedder(model()).expect("embedder");
    for (name, d) in [
        ("redb", "Embedded key-value store written in Rust"),
        (
            "Website Redesign",
            "New landing page and navigation for the company site",
        ),
        ("Chocolate cake", "A recipe with dark cocoa and butter"),
        (
            "Marathon training",
            "Running plan: long runs on Sundays, intervals on Tuesdays",
        ),
        ("Flight to Lisbon", "Booked for May 3rd, window seat"),
    ] {
        note(&n, name, d);
    }
    settle(&n);
    // Keyword search cannot find these: no shared word.
    let kw = run(
        &n,
        r#"SEARCH CONCEPT "storage engine" WITH TYPE "Note" MODE "keyword""#,
    );
    assert_eq!(kw, json!([]));
    // (Queries whose nearest concept the reference implementation agrees on; MiniLM
    // puts a bare "database" closer to the company website than to redb.)
    for (query, want) in [
        ("storage engine", "redb"),
        ("key value database", "redb"),
        ("a trip abroad", "Flight to Lisbon"),
        ("dessert", "Chocolate cake"),
        ("jogging schedule", "Marathon training"),
        ("web design", "Website Redesign"),
    ] {
        for mode in ["semantic", "hybrid"] {
            let r = run(
                &n,
                &format!(r#"SEARCH CONCEPT "{query}" WITH TYPE "Note" MODE "{mode}" LIMIT 1"#),
            );
            assert_eq!(names(&r), [want], "{query} ({mode})");
        }
    }
    // A link by the meaning of its whole statement.
    run(
        &n,
        r#"UPSERT {
            CONCEPT ?p { {type: "$PropositionType", name: "prepared_for"} SET ATTRIBUTES { description: "what an effort gets someone ready for", subject_types: ["*"], object_types: ["*"] } }
            CONCEPT ?b { {type: "Note", name: "Berlin Marathon"} SET ATTRIBUTES { description: "A race in September" } }
            PROPOSITION ?l1 { ({type: "Note", name: "Marathon training"}, "prepared_for", ?b) }
            PROPOSITION ?l2 { ({type: "Note", name: "Chocolate cake"}, "prepared_for", {type: "Note", name: "Flight to Lisbon"}) }
        }"#,
    );
    settle(&n);
    for mode in ["semantic", "hybrid"] {
        let r = run(
            &n,
            &format!(
                r#"SEARCH PROPOSITION "getting ready for a running race" MODE "{mode}" LIMIT 1"#
            ),
        );
        let b = run(
            &n,
            r#"FIND(?b) WHERE { ?b {type: "Note", name: "Berlin Marathon"} }"#,
        );
        assert_eq!(r[0]["object"], b[0]["id"], "{mode}: {r}");
    }
}

/// [`Words`], except that a batch holding a text with "HOLD" waits until the test lets
/// it go: the worker is then busy, so vectors of elements deleted meanwhile stay in
/// memory until it is released.
#[derive(Debug)]
struct Held {
    words: Words,
    go: std::sync::Mutex<bool>,
    wake: std::sync::Condvar,
}

impl Held {
    fn release(&self) {
        *self.go.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.wake.notify_all();
    }
}

/// Releases a [`Held`] model when dropped, so a failed assertion ends the test instead
/// of leaving the worker (and the nexus's shutdown) waiting for ever.
struct ReleaseOnDrop(Arc<Held>);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl Embedder for Held {
    fn model_id(&self) -> &str {
        self.words.model_id()
    }
    fn dim(&self) -> usize {
        self.words.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.iter().any(|t| t.contains("HOLD")) {
            let mut go = self.go.lock().unwrap_or_else(|p| p.into_inner());
            while !*go {
                go = self.wake.wait(go).unwrap_or_else(|p| p.into_inner());
            }
        }
        self.words.embed(texts)
    }
}

#[test]
fn an_element_deleted_before_its_vector_is_dropped_is_never_a_result() {
    let mut n = common::nexus();
    run(&n, NOTE);
    run(
        &n,
        r#"UPSERT { CONCEPT ?l { {type: "$PropositionType", name: "bakes"} SET ATTRIBUTES { description: "baking", subject_types: ["*"], object_types: ["*"] } } }"#,
    );
    let model = Arc::new(Held {
        words: Words::new(1024),
        go: std::sync::Mutex::new(false),
        wake: std::sync::Condvar::new(),
    });
    n.set_embedder(Arc::clone(&model) as Arc<dyn Embedder>)
        .expect("embedder");
    // Dropped before the nexus (declared after it), on success or failure.
    let _release = ReleaseOnDrop(Arc::clone(&model));
    for (name, d) in [
        ("pie", "apple pie with cinnamon"),
        ("tart", "apple tart with cinnamon"),
        ("crumble", "apple crumble with cinnamon"),
        ("cake", "apple cake"),
        ("soup", "leek soup"),
    ] {
        note(&n, name, d);
    }
    for cook in ["pie", "tart", "crumble"] {
        run(
            &n,
            &format!(
                r#"UPSERT {{ PROPOSITION ?x {{ ({{type: "Note", name: "{cook}"}}, "bakes", {{type: "Note", name: "cake"}}) }} }}"#
            ),
        );
    }
    settle(&n);
    // The worker is now held on a new note: the deletions below mark their elements,
    // but their vectors stay in memory until it is released.
    note(&n, "held", "HOLD");
    let vectors = n.recall().semantic().expect("semantic").len();
    run(
        &n,
        r#"DELETE CONCEPT ?n DETACH WHERE { ?n {type: "Note", name: "pie"} }"#,
    );
    for mode in ["semantic", "hybrid"] {
        let r = run(
            &n,
            &format!(
                r#"SEARCH CONCEPT "apple pie cinnamon" WITH TYPE "Note" MODE "{mode}" LIMIT 3"#
            ),
        );
        let got = names(&r);
        assert_eq!(got.len(), 3, "{mode}: {r}");
        assert!(!got.contains(&"pie".to_string()), "{mode}: {r}");
        assert!(got.contains(&"tart".to_string()), "{mode}: {r}");
        // The pie's link went with it; the two others fill the page.
        let r = run(
            &n,
            &format!(r#"SEARCH PROPOSITION "pie bakes cake" MODE "{mode}" LIMIT 2"#),
        );
        let links = r.as_array().unwrap_or_else(|| panic!("{r}"));
        assert_eq!(links.len(), 2, "{mode}: {r}");
        assert!(links.iter().all(|l| l["predicate"] == "bakes"), "{r}");
    }
    // The deleted pie's and its link's vectors were still there all along.
    assert_eq!(n.recall().semantic().expect("semantic").len(), vectors);
    model.release();
    settle(&n);
    assert_eq!(n.recall().semantic().expect("semantic").len(), vectors - 1);
    assert_eq!(
        n.admin().check_integrity().expect("check"),
        Vec::<String>::new()
    );
}
