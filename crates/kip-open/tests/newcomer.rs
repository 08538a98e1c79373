//! A new user's first searches on a small memory (issue 50), one test per step: stop
//! words do not rank, "database" finds the concept described as one, an untyped search
//! leaves the system's own structures out, and a hit does not carry kilobytes of text.
//! The hybrid legs need the model from scripts/setup-test-env.sh (`#[ignore]`d in a
//! plain `cargo test`; scripts/test.sh includes them). `kip model install` has its test
//! in the CLI's suite (crates/kip-cli/tests/model.rs).

mod common;

use common::{nexus, ok};
use kip_engine::Nexus;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// A newcomer's memory: a few things of work and home, one of them the database.
fn small_memory(n: &Nexus) {
    ok(
        n,
        r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Thing"} SET ATTRIBUTES { description: "something I keep track of" } } }"#,
    );
    for (name, d) in [
        ("Garden", "The vegetable garden behind the house: tomatoes and beans in the raised beds, the compost heap in the corner, watered in the evening."),
        ("Terraform", "Infrastructure-as-code tool that provisions the servers of the team; the state file lives in the bucket."),
        ("PostgreSQL", "Relational SQL server that stores the billing data of the shop."),
        ("Python", "Programming language of the data scripts and the notebooks."),
        ("Grafana", "Dashboards for the metrics of the servers and the alerts to the team."),
        ("Embedded key-value store", "The database inside the kip binary: redb, one file on disk, no server to run."),
        ("Mortgage", "Loan from the bank for the flat: 1,200 a month until 2041."),
    ] {
        ok(
            n,
            &format!(
                r#"UPSERT {{ CONCEPT ?c {{ {{type: "Thing", name: "{name}"}} SET ATTRIBUTES {{ description: "{d}" }} }} }}"#
            ),
        );
    }
}

fn names(r: &Value) -> Vec<String> {
    r.as_array()
        .map(|a| {
            a.iter()
                .map(|x| x["name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn model() -> Arc<kip_embed::LocalEmbedder> {
    let dir = std::env::var_os("KIP_TEST_MODEL").map_or_else(
        || {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/models/all-MiniLM-L6-v2")
        },
        std::path::PathBuf::from,
    );
    Arc::new(
        kip_embed::LocalEmbedder::open(&dir)
            .unwrap_or_else(|e| panic!("{e} (scripts/setup-test-env.sh unpacks the model)")),
    )
}

fn with_model() -> Nexus {
    let mut n = nexus();
    small_memory(&n);
    n.set_embedder(model()).expect("embedder");
    let left = n
        .recall()
        .wait_for_embeddings(Duration::from_secs(600), &mut |_| {})
        .expect("embedding");
    assert_eq!(left, 0);
    n
}

#[test]
fn stop_words_do_not_rank_a_keyword_search() {
    let n = nexus();
    small_memory(&n);
    // "to" and "the" are in most descriptions: only "bank" may count.
    let r = ok(
        &n,
        r#"SEARCH CONCEPT "money owed to the bank" WITH TYPE "Thing" MODE "keyword""#,
    );
    assert_eq!(names(&r), ["Mortgage"], "{r}");
    // Question words neither.
    let r = ok(
        &n,
        r#"SEARCH CONCEPT "what did I write about the compost?" MODE "keyword""#,
    );
    assert_eq!(names(&r), ["Garden"], "{r}");
    // A query of stop words only still searches by them (and exact names win).
    let r = ok(
        &n,
        r#"SEARCH CONCEPT "the" WITH TYPE "Thing" MODE "keyword""#,
    );
    assert!(!names(&r).is_empty(), "{r}");
}

#[test]
fn database_ranks_the_concept_described_as_one_first_by_keyword() {
    let n = nexus();
    small_memory(&n);
    let r = ok(&n, r#"SEARCH CONCEPT "database" MODE "keyword""#);
    assert_eq!(names(&r)[0], "Embedded key-value store", "{r}");
}

#[test]
#[ignore = "needs the model from scripts/setup-test-env.sh"]
fn database_ranks_the_concept_described_as_one_first_in_hybrid() {
    let n = with_model();
    // MiniLM alone puts PostgreSQL nearest to a bare "database"; the concept whose
    // text says "database" is the one asked for.
    for q in [
        r#"SEARCH CONCEPT "database""#,
        r#"SEARCH CONCEPT "database" WITH TYPE "Thing""#,
    ] {
        let r = ok(&n, q);
        assert_eq!(names(&r)[0], "Embedded key-value store", "{q}: {r}");
    }
    let r = ok(&n, r#"SEARCH CONCEPT "money owed to the bank""#);
    assert_eq!(names(&r)[0], "Mortgage", "{r}");
    // Names first for a name.
    let r = ok(&n, r#"SEARCH CONCEPT "grafana""#);
    assert_eq!(names(&r)[0], "Grafana", "{r}");
}

/// What an untyped search must not return: the system's own structures.
fn is_system(hit: &Value) -> bool {
    let (t, name) = (
        hit["type"].as_str().unwrap_or_default(),
        hit["name"].as_str().unwrap_or_default(),
    );
    t.starts_with('$')
        || t == "SleepTask"
        || (t == "Domain" && ["CoreSchema", "Unsorted", "Archived", "System"].contains(&name))
        || (t == "Person" && (name == "$self" || name == "$system"))
}

fn untyped_search_leaves_system_structures_out_on(n: &Nexus, modes: &[&str]) {
    for mode in modes {
        for q in [
            "archived",
            "system",
            "directives",
            "self",
            "person",
            "event",
            "sleep task",
            "belongs to domain",
            "the agent's identity and core directives",
        ] {
            let r = ok(
                n,
                &format!(r#"SEARCH CONCEPT "{q}" MODE "{mode}" LIMIT 50"#),
            );
            for hit in r.as_array().expect("hits") {
                assert!(!is_system(hit), "{q} ({mode}): {hit}");
            }
            let r = ok(
                n,
                &format!(r#"SEARCH PROPOSITION "{q}" MODE "{mode}" LIMIT 50"#),
            );
            for hit in r.as_array().expect("hits") {
                let s = ok(
                    n,
                    &format!(
                        r#"FIND(?s) WHERE {{ ?s {{id: "{}"}} }}"#,
                        hit["subject"].as_str().unwrap_or_default()
                    ),
                );
                if let Some(subject) = s.as_array().and_then(|a| a.first()) {
                    assert!(!is_system(subject), "{q} ({mode}): {hit} about {subject}");
                }
            }
        }
    }
    // Asked for by type, they are found.
    let r = ok(n, r#"SEARCH CONCEPT "$system" WITH TYPE "Person""#);
    assert_eq!(names(&r)[0], "$system", "{r}");
    let r = ok(n, r#"SEARCH CONCEPT "Archived" WITH TYPE "Domain""#);
    assert_eq!(names(&r)[0], "Archived", "{r}");
    let r = ok(n, r#"SEARCH CONCEPT "Event" WITH TYPE "$ConceptType""#);
    assert_eq!(names(&r)[0], "Event", "{r}");
}

#[test]
fn untyped_search_leaves_system_structures_out() {
    let n = nexus();
    small_memory(&n);
    untyped_search_leaves_system_structures_out_on(&n, &["keyword"]);
    // The user's own things are still found without a type.
    let r = ok(&n, r#"SEARCH CONCEPT "grafana""#);
    assert_eq!(names(&r)[0], "Grafana", "{r}");
}

#[test]
#[ignore = "needs the model from scripts/setup-test-env.sh"]
fn untyped_search_leaves_system_structures_out_with_a_model() {
    let n = with_model();
    untyped_search_leaves_system_structures_out_on(&n, &["keyword", "semantic", "hybrid"]);
}

#[test]
fn search_hits_carry_a_snippet_of_long_values() {
    let n = nexus();
    small_memory(&n);
    let long = "The notes of the garden, season after season. ".repeat(40);
    ok(
        &n,
        &format!(
            r#"UPSERT {{ CONCEPT ?c {{ {{type: "Thing", name: "Garden journal"}} SET ATTRIBUTES {{ description: "{long}", tags: ["garden", "journal"], log: [{}] }} }} }}"#,
            (0..40)
                .map(|i| format!(r#""watered the beans on day {i}""#))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    let r = ok(&n, r#"SEARCH CONCEPT "garden journal" LIMIT 1"#);
    let hit = &r[0];
    assert_eq!(hit["name"], "Garden journal");
    let d = hit["attributes"]["description"]
        .as_str()
        .expect("description");
    assert!(d.chars().count() <= 301 && d.ends_with('…'), "{d}");
    assert!(long.starts_with(d.trim_end_matches('…')), "{d}");
    // Short values whole; a long array left out; both named.
    assert_eq!(
        hit["attributes"]["tags"],
        serde_json::json!(["garden", "journal"])
    );
    assert!(hit["attributes"].get("log").is_none(), "{hit}");
    assert_eq!(
        hit["metadata"]["_truncated"],
        serde_json::json!(["description", "log"]),
        "{hit}"
    );
    // FIND reads the whole record.
    let f = ok(
        &n,
        r#"FIND(?c) WHERE { ?c {type: "Thing", name: "Garden journal"} }"#,
    );
    assert_eq!(
        f[0]["attributes"]["description"].as_str(),
        Some(long.as_str())
    );
    assert!(f[0]["metadata"].get("_truncated").is_none());
    // A short record is returned as it is, with no `_truncated`.
    let r = ok(&n, r#"SEARCH CONCEPT "grafana" LIMIT 1"#);
    assert!(r[0]["metadata"].get("_truncated").is_none(), "{r}");
}
