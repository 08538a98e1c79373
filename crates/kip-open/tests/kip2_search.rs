//! KIP 2.0 META `SEARCH` (Specification §66) through the wire (`Nexus::execute_json`
//! with `"kip": "2.0"`), on whichever backend the test matrix selects. Every response
//! is checked against `spec/kip2/schemas/kip-response.schema.json`. Tests are named by
//! the conformance document's case ids where one applies; the others by the rule of
//! docs/semantics.md ("KIP 2.0 on the one memory", SEARCH) they hold.

mod common;
#[path = "common/embedders.rs"]
mod embedders;
use common::*;
use embedders::Words;
use kip_engine::{Access, Nexus};
use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

fn response_schema() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let text = include_str!("../../../spec/kip2/schemas/kip-response.schema.json");
        let schema: Value = serde_json::from_str(text).expect("response schema is JSON");
        jsonschema::draft202012::new(&schema).expect("response schema compiles")
    })
}

/// Sends a 2.0 request; the response, checked against the response schema.
fn send_as(n: &Nexus, request: Value, access: Access) -> Value {
    let r = n.execute_json(&request, access).to_json();
    let errors: Vec<String> = response_schema()
        .iter_errors(&r)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "response breaks the schema: {errors:?}\n{r:#}"
    );
    r
}

fn send(n: &Nexus, request: Value) -> Value {
    send_as(n, request, Access::ReadWrite)
}

fn run2(n: &Nexus, command: &str) -> Value {
    send(
        n,
        json!({"kip": "2.0", "operations": [{"command": command}]}),
    )
}

/// The result of a command that must succeed.
fn ok2(n: &Nexus, command: &str) -> Value {
    let r = run2(n, command);
    assert_eq!(r["status"], "succeeded", "{command}\n{r:#}");
    r["results"][0]["result"].clone()
}

/// The error code of a command that must fail.
fn code(n: &Nexus, command: &str) -> String {
    let r = run2(n, command);
    assert_eq!(r["status"], "failed", "{command}\n{r:#}");
    r["results"][0]["error"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn ids(hits: &Value) -> Vec<String> {
    hits.as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h["id"].as_str().map(str::to_string))
        .collect()
}

fn names(hits: &Value) -> Vec<String> {
    hits.as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h["name"].as_str().map(str::to_string))
        .collect()
}

/// Whether a key named `key` appears anywhere in `v`.
fn has_key(v: &Value, key: &str) -> bool {
    match v {
        Value::Object(m) => m.contains_key(key) || m.values().any(|x| has_key(x, key)),
        Value::Array(a) => a.iter().any(|x| has_key(x, key)),
        _ => false,
    }
}

/// Alice (a keyed 2.0 concept whose display name is not her key), a keyless 2.0
/// preference, Alice prefers it (asserted), and Bob written by 1.x: the handles.
fn seed(n: &Nexus) -> Value {
    let h = ok2(
        n,
        r#"MUTATE {
  CREATE CONCEPT ?alice { TYPE "Person" NAME "Alice Liddell" SET FIELDS {key: "person:alice"} }
  CREATE CONCEPT ?dark { TYPE "Preference" NAME "Dark mode" SET ATTRIBUTES { description: "prefers a dark editor theme at night" } }
  ENSURE PROPOSITION ?p (?alice, "prefers", ?dark)
  CREATE ASSERTION ?a {
    SET FIELDS { proposition: ?p, asserted_by: ?alice, stance: "support", mode: "stated", confidence: 0.6 }
  }
}"#,
    )["handles"]
        .clone();
    ok(
        n,
        r#"UPSERT { CONCEPT ?b { {type: "Person", name: "Bob Marley"} SET ATTRIBUTES { description: "a reggae musician from Jamaica" } } }"#,
    );
    h
}

/// KIP2-META-007: a keyword SEARCH finds a concept 2.0 created (by its display name,
/// which is not in the text index, and by its description) and one 1.x wrote, with
/// the exact id, kind and schema identity, a snippet and a retrieval score.
#[test]
fn kip2_meta_007_keyword_search_returns_exact_candidate_identity() {
    let n = nexus();
    let h = seed(&n);
    let r = run2(&n, r#"SEARCH CONCEPT "Alice Liddell" MODE "keyword""#);
    assert_eq!(r["status"], "succeeded", "{r:#}");
    let hits = &r["results"][0]["result"];
    assert_eq!(ids(hits), [h["alice"].as_str().unwrap()], "{hits:#}");
    let alice = &hits[0];
    assert_eq!(alice["kind"], "concept");
    assert_eq!(alice["type"], "Person");
    assert_eq!(
        alice["schema_ref"],
        "kip://profiles/cognitive-memory@2.0.0/Person"
    );
    assert_eq!(alice["key"], "person:alice");
    assert_eq!(alice["name"], "Alice Liddell");
    assert_eq!(alice["retrieval"]["mode"], "keyword");
    let score = alice["retrieval"]["score"].as_f64().expect("a score");
    assert!(score > 0.0 && score <= 1.0, "{alice}");
    // The display name in lower case finds her too (as the 1.x search finds an
    // exact name).
    assert_eq!(
        ids(&ok2(&n, r#"SEARCH CONCEPT "alice liddell""#)),
        [h["alice"].as_str().unwrap()]
    );
    // The keyless 2.0 concept, by its description; the snippet is that description.
    let dark = ok2(&n, r#"SEARCH CONCEPT "editor theme""#);
    assert_eq!(ids(&dark), [h["dark"].as_str().unwrap()], "{dark:#}");
    assert_eq!(dark[0]["snippet"], "prefers a dark editor theme at night");
    // The 1.x concept.
    let bob = ok2(&n, r#"SEARCH CONCEPT "reggae""#);
    assert_eq!(names(&bob), ["Bob Marley"], "{bob:#}");
    assert!(bob[0]["id"].as_str().unwrap().starts_with("C:"));
    assert_eq!(bob[0]["kind"], "concept");
    // The context says what was searched and what the score is (§66.5).
    let search = &r["results"][0]["context"]["search"];
    assert_eq!(search["mode"], "keyword", "{r:#}");
    assert_eq!(search["score_semantics"], "retrieval_score_not_confidence");
    assert_eq!(search["consistency"], "snapshot");
    assert_eq!(r["results"][0]["context"]["space_id"], "default");
    // A miss is an empty list, not an error.
    assert_eq!(ok2(&n, r#"SEARCH CONCEPT "xylophone""#), json!([]));
}

/// §2.10, §27.3: a hit carries a retrieval score, never a confidence.
#[test]
fn a_search_hit_carries_a_retrieval_score_and_no_confidence() {
    let n = nexus();
    seed(&n);
    let r = run2(&n, r#"SEARCH CONCEPT "Alice Liddell""#);
    let hits = &r["results"][0]["result"];
    assert!(!hits.as_array().unwrap().is_empty());
    for hit in hits.as_array().unwrap() {
        assert!(hit["retrieval"]["score"].is_number(), "{hit}");
        assert!(!has_key(hit, "confidence"), "{hit}");
        assert!(!has_key(hit, "_score"), "{hit}");
    }
    assert!(!has_key(&r["results"][0]["context"], "confidence"));
}

/// KIP2-META-008 and KIP2-EPI-008 (and KIP2-X-003): a search changes nothing: the
/// concept's element object gains no score and its version stays, the assertion's
/// confidence stays.
#[test]
fn kip2_meta_008_and_epi_008_search_score_is_transient_and_not_confidence() {
    let n = nexus();
    let h = seed(&n);
    let before = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "independent"}, "operations": [
            {"command": "FIND(?c) WHERE { ?c CONCEPT {id: :alice} }", "parameters": {"alice": h["alice"]}},
            {"command": "FIND(?a.confidence) WHERE { ?a ASSERTION {id: :a} }", "parameters": {"a": h["a"]}},
        ]}),
    );
    assert_eq!(before["status"], "succeeded", "{before:#}");
    for q in [
        r#"SEARCH CONCEPT "Alice Liddell""#,
        r#"SEARCH PROPOSITION "dark""#,
    ] {
        assert!(!ok2(&n, q).as_array().unwrap().is_empty(), "{q}");
    }
    let after = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "independent"}, "operations": [
            {"command": "FIND(?c) WHERE { ?c CONCEPT {id: :alice} }", "parameters": {"alice": h["alice"]}},
            {"command": "FIND(?a.confidence) WHERE { ?a ASSERTION {id: :a} }", "parameters": {"a": h["a"]}},
        ]}),
    );
    assert_eq!(before["results"], after["results"]);
    assert_eq!(after["results"][1]["result"], json!([0.6]), "{after:#}");
    assert!(!has_key(&after["results"][0]["result"], "retrieval"));
}

/// `WITH TYPE` filters by a type of the Schema Environment, by local name or exact
/// symbol, including one only the profile defines; an unknown one is
/// `SchemaSymbolNotFound`.
#[test]
fn with_type_filters_by_a_resolved_type() {
    let n = nexus();
    let h = seed(&n);
    assert_eq!(
        ids(&ok2(&n, r#"SEARCH CONCEPT "dark" WITH TYPE "Preference""#)),
        [h["dark"].as_str().unwrap()]
    );
    assert_eq!(
        ok2(&n, r#"SEARCH CONCEPT "dark" WITH TYPE "Person""#),
        json!([])
    );
    assert_eq!(
        ids(&ok2(
            &n,
            r#"SEARCH CONCEPT "Alice Liddell" WITH TYPE "kip://profiles/cognitive-memory@2.0.0/Person""#
        )),
        [h["alice"].as_str().unwrap()]
    );
    // SelfModel is the profile's, not the 1.x schema's: no hits, no error.
    assert_eq!(
        ok2(&n, r#"SEARCH CONCEPT "dark" WITH TYPE "SelfModel""#),
        json!([])
    );
    assert_eq!(
        code(&n, r#"SEARCH CONCEPT "dark" WITH TYPE "Spaceship""#),
        "SchemaSymbolNotFound"
    );
    assert_eq!(
        code(&n, r#"SEARCH PROPOSITION "dark" WITH PREDICATE "orbits""#),
        "SchemaSymbolNotFound"
    );
}

/// Elements whose state is not `active` are not recalled (§19); the miss is not
/// absence (KIP2-META-009): FIND still reads the archived concept.
#[test]
fn archived_and_merged_concepts_are_not_returned() {
    let n = nexus();
    let h = seed(&n);
    let r = send(
        &n,
        json!({"kip": "2.0", "operations": [{"command": "ARCHIVE ?c WHERE { ?c CONCEPT {id: :d} }", "parameters": {"d": h["dark"]}}]}),
    );
    assert_eq!(r["status"], "succeeded", "{r:#}");
    assert_eq!(ok2(&n, r#"SEARCH CONCEPT "editor theme""#), json!([]));
    assert_eq!(
        ok2(&n, r#"SEARCH CONCEPT "Dark mode" WITH TYPE "Preference""#),
        json!([])
    );
    let found = send(
        &n,
        json!({"kip": "2.0", "operations": [{"command": "FIND(?c._system.state) WHERE { ?c CONCEPT {id: :d, state: \"archived\"} }", "parameters": {"d": h["dark"]}}]}),
    );
    assert_eq!(found["results"][0]["result"], json!(["archived"]));
    // A merged source is not a hit; its target is.
    ok2(
        &n,
        r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Alice L." SET FIELDS {key: "person:alice-2"} }"#,
    );
    ok2(
        &n,
        r#"MERGE CONCEPT ?s INTO ?t WHERE { ?s CONCEPT {key: "person:alice-2"} ?t CONCEPT {key: "person:alice"} }"#,
    );
    assert_eq!(
        ok2(&n, r#"SEARCH CONCEPT "Alice L." WITH TYPE "Person""#),
        json!([])
    );
    assert_eq!(
        ids(&ok2(
            &n,
            r#"SEARCH CONCEPT "Alice Liddell" WITH TYPE "Person""#
        )),
        [h["alice"].as_str().unwrap()]
    );
}

/// The 1.x control plane is not a 2.0 element: `$self` and `$system` are `Person`s in
/// the graph, but never hits.
#[test]
fn the_control_plane_is_not_searchable() {
    let n = nexus();
    seed(&n);
    for q in [
        r#"SEARCH CONCEPT "$self" WITH TYPE "Person""#,
        r#"SEARCH CONCEPT "system" WITH TYPE "Person""#,
        r#"SEARCH CONCEPT "Person""#,
    ] {
        let hits = ok2(&n, q);
        for name in names(&hits) {
            assert!(!name.starts_with('$'), "{q}: {hits:#}");
        }
        for hit in hits.as_array().unwrap() {
            assert_ne!(hit["type"], "$ConceptType", "{q}: {hit}");
        }
    }
}

/// SEARCH PROPOSITION: the propositions of the matching concepts, filtered by a
/// predicate the profile defines, with the predicate's exact symbol and a snippet.
#[test]
fn proposition_search_filters_by_predicate() {
    let n = nexus();
    let h = seed(&n);
    let hits = ok2(
        &n,
        r#"SEARCH PROPOSITION "Dark mode" WITH PREDICATE "prefers""#,
    );
    assert_eq!(ids(&hits), [h["p"].as_str().unwrap()], "{hits:#}");
    let p = &hits[0];
    assert_eq!(p["kind"], "proposition");
    assert_eq!(p["subject"], h["alice"]);
    assert_eq!(p["object"], h["dark"]);
    assert_eq!(p["predicate"], "prefers");
    assert_eq!(
        p["predicate_ref"],
        "kip://profiles/cognitive-memory@2.0.0/prefers"
    );
    assert_eq!(p["snippet"], "Alice Liddell prefers Dark mode");
    assert_eq!(p["retrieval"]["mode"], "keyword");
    assert_eq!(
        code(&n, r#"SEARCH PROPOSITION "dark" WITH TYPE "Person""#),
        "UnsupportedCapability"
    );
    assert_eq!(
        code(&n, r#"SEARCH CONCEPT "dark" WITH PREDICATE "prefers""#),
        "UnsupportedCapability"
    );
}

/// Semantic and hybrid search need an embedder; without one they are refused, never
/// run as keyword search. An omitted MODE is keyword search then.
#[test]
fn semantic_mode_without_an_embedder_is_search_mode_unsupported() {
    let n = nexus();
    seed(&n);
    for mode in ["semantic", "hybrid"] {
        let r = run2(&n, &format!(r#"SEARCH CONCEPT "dark" MODE "{mode}""#));
        let e = &r["results"][0]["error"];
        assert_eq!(e["code"], "SearchModeUnsupported", "{r:#}");
        assert_eq!(e["category"], "search");
        assert!(e["hint"].as_str().unwrap().contains("keyword"), "{e}");
    }
    let r = run2(&n, r#"SEARCH CONCEPT "dark""#);
    assert_eq!(r["results"][0]["context"]["search"]["mode"], "keyword");
    // A mode from a parameter is checked the same way.
    let r = send(
        &n,
        json!({"kip": "2.0", "operations": [{"command": "SEARCH CONCEPT :q MODE :m", "parameters": {"q": "dark", "m": "fuzzy"}}]}),
    );
    assert_eq!(
        r["results"][0]["error"]["code"], "SearchModeUnsupported",
        "{r:#}"
    );
}

/// §66.1: a runtime without a historical index refuses AS OF SEQ rather than search
/// the present.
#[test]
fn as_of_seq_is_historical_search_unavailable() {
    let n = nexus();
    seed(&n);
    assert_eq!(
        code(&n, r#"SEARCH CONCEPT "dark" AS OF SEQ 3"#),
        "HistoricalSearchUnavailable"
    );
}

/// Kinds without an index are refused, naming the kind, never answered with an empty
/// list; so is a CURSOR.
#[test]
fn unindexed_kinds_and_cursors_are_unsupported_capabilities() {
    let n = nexus();
    seed(&n);
    for kind in ["ASSERTION", "EVIDENCE", "ACTIVITY", "COGNITION"] {
        let r = run2(&n, &format!(r#"SEARCH {kind} "dark""#));
        let e = &r["results"][0]["error"];
        assert_eq!(e["code"], "UnsupportedCapability", "{r:#}");
        assert_eq!(e["details"]["kind"], kind);
        assert!(e["message"].as_str().unwrap().contains(kind), "{e}");
    }
    assert_eq!(
        code(&n, r#"SEARCH CONCEPT "dark" LIMIT 5 CURSOR "abc""#),
        "UnsupportedCapability"
    );
}

/// LIMIT, THRESHOLD and parameters; a read-only caller may search.
#[test]
fn limit_threshold_and_parameters() {
    let n = nexus();
    seed(&n);
    for name in ["Dark roast", "Dark chocolate", "Dark matter"] {
        ok2(
            &n,
            &format!(r#"CREATE CONCEPT ?x {{ TYPE "Preference" NAME "{name}" }}"#),
        );
    }
    assert_eq!(
        ok2(&n, r#"SEARCH CONCEPT "dark" LIMIT 2"#)
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let all = ok2(&n, r#"SEARCH CONCEPT "dark""#);
    assert_eq!(all.as_array().unwrap().len(), 4, "{all:#}");
    let scores: Vec<f64> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["retrieval"]["score"].as_f64().unwrap())
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    assert_eq!(ok2(&n, r#"SEARCH CONCEPT "dark" THRESHOLD 1"#), json!([]));
    assert_eq!(
        code(&n, r#"SEARCH CONCEPT "dark" THRESHOLD 2"#),
        "ConstraintViolation"
    );
    assert_eq!(
        code(&n, r#"SEARCH CONCEPT "dark" LIMIT 5000"#),
        "ResultLimitExceeded"
    );
    let r = send_as(
        &n,
        json!({"kip": "2.0", "operations": [{"command": "SEARCH CONCEPT :q WITH TYPE :t LIMIT :n", "parameters": {"q": "roast", "t": "Preference", "n": 5}}]}),
        Access::ReadOnly,
    );
    assert_eq!(r["status"], "succeeded", "{r:#}");
    assert_eq!(names(&r["results"][0]["result"]), ["Dark roast"]);
    assert_eq!(
        code(&n, r#"SEARCH CONCEPT 42"#),
        "TypeMismatch",
        "the search text is a string"
    );
}

/// Inside an atomic request a keyword SEARCH reads the request's own writes (its index
/// is written in the same transaction; §79).
#[test]
fn an_atomic_keyword_search_sees_the_writes_before_it() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "atomic"}, "operations": [
            {"command": r#"CREATE CONCEPT ?x { TYPE "Preference" NAME "Oolong tea" }"#},
            {"command": r#"SEARCH CONCEPT "oolong""#},
        ]}),
    );
    assert_eq!(r["status"], "succeeded", "{r:#}");
    assert_eq!(names(&r["results"][1]["result"]), ["Oolong tea"]);
    assert_eq!(r["results"][1]["context"]["search"]["mode"], "keyword");
}

/// DESCRIBE CAPABILITIES lists the three search modes as supported.
#[test]
fn capabilities_list_search() {
    let n = nexus();
    let c = ok2(&n, "DESCRIBE CAPABILITIES");
    for cap in ["keyword_search", "semantic_search", "hybrid_search"] {
        assert!(c["supported"].get(cap).is_some(), "{cap}: {c:#}");
    }
}

fn settle(n: &Nexus) {
    let left = n
        .recall()
        .wait_for_embeddings(Duration::from_secs(60), &mut |_| {})
        .expect("embedding");
    assert_eq!(left, 0, "still not embedded");
}

/// With an embedder (a bag of words, no model): semantic and hybrid run, hybrid is the
/// default, the context names the model and declares the vectors' weaker consistency
/// (KIP2-X-004); inside an atomic request only keyword search runs (§79).
#[test]
fn semantic_and_hybrid_search_with_an_embedder() {
    let mut n = nexus();
    n.set_embedder(Arc::new(Words::new(1024)))
        .expect("embedder");
    let h = seed(&n);
    settle(&n);
    for mode in ["semantic", "hybrid"] {
        let r = run2(
            &n,
            &format!(r#"SEARCH CONCEPT "dark editor theme" MODE "{mode}" LIMIT 3"#),
        );
        assert_eq!(r["status"], "succeeded", "{r:#}");
        let hits = &r["results"][0]["result"];
        assert_eq!(
            ids(hits)[0],
            h["dark"].as_str().unwrap(),
            "{mode}: {hits:#}"
        );
        assert_eq!(hits[0]["retrieval"]["mode"], mode);
        let s = hits[0]["retrieval"]["score"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&s));
        let search = &r["results"][0]["context"]["search"];
        assert_eq!(search["mode"], mode);
        assert_eq!(search["consistency"], "keyword_snapshot_vectors_eventual");
        assert_eq!(
            search["extensions"]["kip-nexus/search"]["embedding_model"],
            "test:words-1024"
        );
    }
    let r = run2(&n, r#"SEARCH CONCEPT "Alice Liddell""#);
    assert_eq!(r["results"][0]["context"]["search"]["mode"], "hybrid");
    assert_eq!(
        ids(&r["results"][0]["result"])[0],
        h["alice"].as_str().unwrap()
    );
    let atomic = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "atomic"}, "operations": [
            {"command": r#"SEARCH CONCEPT "dark" MODE "semantic""#},
        ]}),
    );
    assert_eq!(
        atomic["results"][0]["error"]["code"], "SearchIndexUnavailable",
        "{atomic:#}"
    );
    let atomic = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "atomic"}, "operations": [
            {"command": r#"SEARCH CONCEPT "dark""#},
        ]}),
    );
    assert_eq!(atomic["status"], "succeeded", "{atomic:#}");
    assert_eq!(atomic["results"][0]["context"]["search"]["mode"], "keyword");
}

fn model() -> Arc<dyn kip_embed::Embedder> {
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

/// Hybrid search with the real model finds by meaning what shares no word with the
/// query.
#[test]
#[ignore = "needs the model from scripts/setup-test-env.sh"]
fn hybrid_search_with_the_real_model_recalls_by_meaning() {
    let mut n = nexus();
    n.set_embedder(model()).expect("embedder");
    ok2(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?a { TYPE "Preference" NAME "Espresso" SET ATTRIBUTES { description: "strong coffee brewed under pressure" } }
  CREATE CONCEPT ?b { TYPE "Preference" NAME "Hiking" SET ATTRIBUTES { description: "long walks in the mountains" } }
  CREATE CONCEPT ?c { TYPE "Preference" NAME "Sailing" SET ATTRIBUTES { description: "boats on the open sea" } }
}"#,
    );
    settle(&n);
    let r = run2(
        &n,
        r#"SEARCH CONCEPT "a hot caffeinated drink" WITH TYPE "Preference" MODE "hybrid" LIMIT 1"#,
    );
    assert_eq!(r["status"], "succeeded", "{r:#}");
    assert_eq!(names(&r["results"][0]["result"]), ["Espresso"], "{r:#}");
    assert_eq!(r["results"][0]["context"]["search"]["mode"], "hybrid");
}
