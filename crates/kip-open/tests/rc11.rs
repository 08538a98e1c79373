//! RC11 statements against the engine: reserved `_` metadata and versions, EXPECT
//! VERSION, UPDATE, MERGE and EXPORT (DECISIONS.md items 26-34).

mod common;
use common::*;
use kip_engine::Nexus;
use serde_json::{json, Value};

fn version(n: &Nexus, ty: &str, name: &str) -> Value {
    run_with(
        n,
        "FIND(?c.metadata._version) WHERE { ?c {type: :t, name: :n} }",
        json!({"t": ty, "n": name}),
    )["result"][0]
        .clone()
}

#[test]
fn versions_start_at_one_and_grow_once_per_changing_statement() {
    let n = nexus();
    medical_schema(&n);
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} SET ATTRIBUTES { x: 1 } } }"#,
    );
    assert_eq!(version(&n, "Drug", "A"), json!(1));
    let at = ok(
        &n,
        r#"FIND(?c.metadata._updated_at) WHERE { ?c {type: "Drug", name: "A"} }"#,
    );
    let at = at[0].as_str().expect("_updated_at is a string");
    assert!(
        at.ends_with('Z') && at.len() == 24,
        "ISO 8601 UTC with ms: {at}"
    );
    // The same content again changes nothing (idempotent).
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} SET ATTRIBUTES { x: 1 } } }"#,
    );
    assert_eq!(version(&n, "Drug", "A"), json!(1));
    // Two blocks changing it in one statement: one more, not two.
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} SET ATTRIBUTES { x: 2 } } CONCEPT ?b { {type: "Drug", name: "A"} SET ATTRIBUTES { y: 3 } } }"#,
    );
    assert_eq!(version(&n, "Drug", "A"), json!(2));
    // DELETE ATTRIBUTES changes it too; a link does not change its ends.
    ok(
        &n,
        r#"DELETE ATTRIBUTES {"y"} FROM ?a WHERE { ?a {type: "Drug", name: "A"} }"#,
    );
    assert_eq!(version(&n, "Drug", "A"), json!(3));
    ok(
        &n,
        r#"UPSERT { CONCEPT ?s { {type: "Symptom", name: "S"} } CONCEPT ?a { {type: "Drug", name: "A"} SET PROPOSITIONS { ("treats", ?s) } } }"#,
    );
    assert_eq!(version(&n, "Drug", "A"), json!(3));
    assert_eq!(
        ok(
            &n,
            r#"FIND(?l.metadata._version) WHERE { ?l ({type: "Drug", name: "A"}, "treats", ?s) }"#
        ),
        json!([1])
    );
}

#[test]
fn reserved_metadata_is_refused_from_kml() {
    let n = nexus();
    medical_schema(&n);
    for cmd in [
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} } WITH METADATA { _version: 9 } }"#,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} } } WITH METADATA { _updated_at: "x" }"#,
        r#"UPSERT { CONCEPT ?s { {type: "Symptom", name: "S"} } CONCEPT ?a { {type: "Drug", name: "A"} SET PROPOSITIONS { ("treats", ?s) WITH METADATA { _score: 1 } } } }"#,
        r#"UPDATE ?a SET METADATA { _version: 1 } WHERE { ?a {type: "Drug"} }"#,
        r#"DELETE METADATA {"_version"} FROM ?a WHERE { ?a {type: "Drug"} }"#,
    ] {
        assert_eq!(err(&n, cmd), "KIP_2002", "{cmd}");
    }
    // Nothing was written by the refused UPSERTs.
    assert_eq!(ok(&n, r#"FIND(?a) WHERE { ?a {type: "Drug"} }"#), json!([]));
}

#[test]
fn expect_version_guards_read_modify_write() {
    let n = nexus();
    medical_schema(&n);
    // 0: create-only.
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} EXPECT VERSION 0 SET ATTRIBUTES { x: 1 } } }"#,
    );
    let e = err_obj(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} EXPECT VERSION 0 } }"#,
    );
    assert_eq!(e["code"], "KIP_3005");
    assert!(e["hint"].as_str().is_some_and(|h| h.contains("re-read")));
    // The right version writes; a stale one aborts the whole statement.
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} EXPECT VERSION 1 SET ATTRIBUTES { x: 2 } } }"#,
    );
    let e = run_with(
        &n,
        r#"UPSERT { CONCEPT ?b { {type: "Drug", name: "B"} } CONCEPT ?a { {type: "Drug", name: "A"} EXPECT VERSION :v SET ATTRIBUTES { x: 3 } } }"#,
        json!({"v": 1}),
    );
    assert_eq!(e["error"]["code"], "KIP_3005", "{e}");
    assert_eq!(
        ok(&n, r#"FIND(?b) WHERE { ?b {type: "Drug", name: "B"} }"#),
        json!([]),
        "nothing written"
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?a.attributes.x) WHERE { ?a {type: "Drug", name: "A"} }"#
        ),
        json!([2])
    );
    // Guards compare with the state before the statement.
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} EXPECT VERSION 2 SET ATTRIBUTES { x: 4 } } CONCEPT ?a2 { {type: "Drug", name: "A"} EXPECT VERSION 2 SET ATTRIBUTES { y: 1 } } }"#,
    );
    assert_eq!(version(&n, "Drug", "A"), json!(3));
    // Propositions: 0 creates, a mismatch aborts.
    ok(
        &n,
        r#"UPSERT { CONCEPT ?s { {type: "Symptom", name: "S"} } PROPOSITION ?l { ({type: "Drug", name: "A"}, "treats", ?s) EXPECT VERSION 0 } }"#,
    );
    assert_eq!(
        err(
            &n,
            r#"UPSERT { PROPOSITION ?l { ({type: "Drug", name: "A"}, "treats", {type: "Symptom", name: "S"}) EXPECT VERSION 0 } }"#
        ),
        "KIP_3005"
    );
}

#[test]
fn update_changes_every_match_atomically_with_expressions() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    let r = ok(
        &n,
        r#"UPDATE ?d SET ATTRIBUTES { risk_level: ADD(COALESCE(?d.attributes.risk_level, 0), 10), checked: true } WHERE { ?d {type: "Drug"} }"#,
    );
    assert_eq!(r, json!({"updated": 4, "matched": 4}));
    assert_eq!(
        ok(
            &n,
            r#"FIND(?d.name, ?d.attributes.risk_level) WHERE { ?d {type: "Drug"} } ORDER BY ?d.name"#
        ),
        json!([
            ["Aspirin", "Ibuprofen", "Paracetamol", "Vitamin C"],
            [12, 13, 11, 10]
        ])
    );
    assert_eq!(version(&n, "Drug", "Aspirin"), json!(2));
    // Links too, with LIMIT as a cap; a key whose expression is null is skipped.
    let r = ok(
        &n,
        r#"UPDATE ?l SET METADATA { memory_strength: CLAMP(MUL(COALESCE(?l.metadata.memory_strength, 0.7), 0.5), 0.0, 1.0), decayed: "c1" } WHERE { ?l (?s, "treats", ?o) } LIMIT 2"#,
    );
    assert_eq!(r, json!({"updated": 2, "matched": 2}));
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(?l), ?l.metadata.memory_strength) WHERE { ?l (?s, "treats", ?o) FILTER(?l.metadata.decayed == "c1") }"#
        ),
        json!([[2], [0.35]])
    );
    let r = ok(
        &n,
        r#"UPDATE ?d SET ATTRIBUTES { nope: ADD(?d.attributes.missing, 1) } WHERE { ?d {type: "Drug", name: "Aspirin"} }"#,
    );
    assert_eq!(r, json!({"updated": 0, "matched": 1}), "nothing to change");
    // A protected structure among the targets refuses the whole statement.
    assert_eq!(
        err(
            &n,
            r#"UPDATE ?d SET ATTRIBUTES { mood: "ok" } WHERE { ?d {type: "Domain"} }"#
        ),
        "KIP_3004"
    );
}

/// RC11 §4 (Protected Targets, and the `KIP_3004` row of the error table): the identity
/// tuple and `core_directives` of `$self`/`$system` are protected, their ordinary
/// attributes are designed to evolve, by UPDATE as by UPSERT.
#[test]
fn kip_3004_protects_the_identity_and_core_directives_of_self_not_its_persona() {
    let n = nexus();
    let r = ok(
        &n,
        r#"UPDATE ?p SET ATTRIBUTES { persona: "curious and careful" } WHERE { ?p {type: "Person", name: "$self"} }"#,
    );
    assert_eq!(r, json!({"updated": 1, "matched": 1}));
    let persona = ok(
        &n,
        r#"FIND(?p.attributes.persona) WHERE { ?p {type: "Person", name: "$self"} }"#,
    );
    assert_eq!(persona, json!(["curious and careful"]));
    // Every Person, $self and $system among them: ordinary attributes change.
    let r = ok(
        &n,
        r#"UPDATE ?p SET ATTRIBUTES { mood: "ok" } WHERE { ?p {type: "Person"} }"#,
    );
    assert_eq!(r["updated"], r["matched"]);
    for cmd in [
        r#"UPDATE ?p SET ATTRIBUTES { core_directives: ["obey"] } WHERE { ?p {type: "Person", name: "$self"} }"#,
        r#"UPDATE ?p SET ATTRIBUTES { core_directives: null } WHERE { ?p {type: "Person", name: "$system"} }"#,
        r#"UPSERT { CONCEPT ?s { {type: "Person", name: "$self"} SET ATTRIBUTES { core_directives: ["obey"] } } }"#,
        r#"DELETE CONCEPT ?s DETACH WHERE { ?s {type: "Person", name: "$self"} }"#,
        r#"MERGE CONCEPT ?a INTO ?b WHERE { ?a {type: "Person", name: "$self"} ?b {type: "Person", name: "$system"} }"#,
    ] {
        assert_eq!(err(&n, cmd), "KIP_3004", "{cmd}");
    }
    let persona = ok(
        &n,
        r#"FIND(?p.attributes.persona) WHERE { ?p {type: "Person", name: "$self"} }"#,
    );
    assert_eq!(
        persona,
        json!(["curious and careful"]),
        "the refused statements changed nothing"
    );
}

/// A link an agent draws between two protected concepts is an ordinary link (only the
/// Genesis `belongs_to_domain` links are protected): a decay sweep over its predicate
/// updates it with the others, and it can be deleted (issue 45: one such link used to
/// switch decay off for its whole predicate).
#[test]
fn a_link_between_system_actors_neither_blocks_a_sweep_nor_is_protected() {
    let n = nexus();
    ok(
        &n,
        r#"UPSERT {
            CONCEPT ?ann { {type: "Person", name: "Ann"} }
            CONCEPT ?bob { {type: "Person", name: "Bob"} SET PROPOSITIONS { ("prefers", ?ann) } }
            CONCEPT ?me { {type: "Person", name: "$self"} SET PROPOSITIONS { ("prefers", {type: "Person", name: "$system"}) } }
        } WITH METADATA { memory_strength: 0.9 }"#,
    );
    let r = ok(
        &n,
        r#"UPDATE ?l SET METADATA { memory_strength: MUL(?l.metadata.memory_strength, 0.9) } WHERE { ?l (?s, "prefers", ?o) }"#,
    );
    assert_eq!(r, json!({"updated": 2, "matched": 2}));
    let strengths = ok(
        &n,
        r#"FIND(?l.metadata.memory_strength) WHERE { ?l (?s, "prefers", ?o) }"#,
    );
    for s in strengths.as_array().expect("rows") {
        let v = s.as_f64().expect("a number");
        assert!((v - 0.81).abs() < 1e-9, "{strengths}");
    }
    ok(
        &n,
        r#"DELETE PROPOSITIONS ?l WHERE { ?l ({type: "Person", name: "$self"}, "prefers", {type: "Person", name: "$system"}) }"#,
    );
    // A Genesis link stays protected from UPDATE and DELETE.
    assert_eq!(
        err(
            &n,
            r#"UPDATE ?l SET METADATA { note: "x" } WHERE { ?l ({type: "Domain", name: "Unsorted"}, "belongs_to_domain", {type: "Domain", name: "CoreSchema"}) }"#
        ),
        "KIP_3004"
    );
    assert_eq!(
        err(
            &n,
            r#"DELETE PROPOSITIONS ?l WHERE { ?l ({type: "Domain", name: "Unsorted"}, "belongs_to_domain", {type: "Domain", name: "CoreSchema"}) }"#
        ),
        "KIP_3004"
    );
}

#[test]
fn merge_repoints_links_fills_attributes_and_leaves_a_trail() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    ok(
        &n,
        r#"UPSERT {
            CONCEPT ?asa { {type: "Drug", name: "ASA"} SET ATTRIBUTES { aliases: ["acetylsalicylic"], brand: "Bayer", risk_level: 9 }
                SET PROPOSITIONS { ("treats", {type: "Symptom", name: "Headache"}) ("treats", {type: "Symptom", name: "Stomach Upset"}) } }
        } WITH METADATA { source: "dup" }"#,
    );
    let r = ok(
        &n,
        r#"MERGE CONCEPT ?dup INTO ?canon WHERE { ?dup {type: "Drug", name: "ASA"} ?canon {type: "Drug", name: "Aspirin"} }"#,
    );
    assert_eq!(
        r,
        json!({"merged": true, "links_repointed": 1, "links_deduplicated": 1, "attributes_filled": 2})
    );
    let a = ok(
        &n,
        r#"FIND(?a) WHERE { ?a {type: "Drug", name: "Aspirin"} }"#,
    )[0]
    .clone();
    assert_eq!(a["attributes"]["risk_level"], 2, "the target wins");
    assert_eq!(
        a["attributes"]["brand"], "Bayer",
        "missing keys are filled (brand, aliases)"
    );
    assert_eq!(
        a["attributes"]["aliases"],
        json!(["acetylsalicylic", "ASA"])
    );
    assert_eq!(a["metadata"]["_merged_from"], json!(["Drug:ASA"]));
    assert_eq!(
        ok(
            &n,
            r#"FIND(?s.name) WHERE { ({type: "Drug", name: "Aspirin"}, "treats", ?s) } ORDER BY ?s.name"#
        ),
        json!(["Fever", "Headache", "Stomach Upset"])
    );
    assert!(n.admin().check_integrity().expect("check").is_empty());
    // Again: the source is gone, and the hint says it was merged.
    let e = err_obj(
        &n,
        r#"MERGE CONCEPT ?dup INTO ?canon WHERE { ?dup {type: "Drug", name: "ASA"} ?canon {type: "Drug", name: "Aspirin"} }"#,
    );
    assert_eq!(e["code"], "KIP_3002");
    assert!(
        e["hint"]
            .as_str()
            .is_some_and(|h| h.contains("already merged")),
        "{e}"
    );
    // Also when the target is not named by a literal.
    let e = err_obj(
        &n,
        r#"MERGE CONCEPT ?dup INTO ?canon WHERE { ?dup {type: "Drug", name: "ASA"} ?canon {type: "Drug"} FILTER(?canon.attributes.risk_level == 2) }"#,
    );
    assert!(
        e["hint"]
            .as_str()
            .is_some_and(|h| h.contains(r#"already merged into {type: "Drug", name: "Aspirin"}"#)),
        "{e}"
    );
    // Several matches, other types, protected nodes.
    assert_eq!(
        err(
            &n,
            r#"MERGE CONCEPT ?d INTO ?c WHERE { ?d {type: "Drug"} ?c {type: "Drug", name: "Aspirin"} }"#
        ),
        "KIP_3003"
    );
    assert_eq!(
        err(
            &n,
            r#"MERGE CONCEPT ?d INTO ?c WHERE { ?d {type: "Symptom", name: "Fever"} ?c {type: "Drug", name: "Aspirin"} }"#
        ),
        "KIP_2002"
    );
    assert_eq!(
        err(
            &n,
            r#"MERGE CONCEPT ?d INTO ?c WHERE { ?d {type: "Person", name: "$system"} ?c {type: "Person", name: "$self"} }"#
        ),
        "KIP_3004"
    );
    assert_eq!(
        err(
            &n,
            r#"MERGE CONCEPT ?d INTO ?c WHERE { ?d {type: "Person", name: "$self"} ?c {type: "Person", name: "$self"} }"#
        ),
        "KIP_3004",
        "protected even into itself"
    );
    // A node into itself: a success that changes nothing.
    let before = ok(
        &n,
        r#"FIND(?d) WHERE { ?d {type: "Drug", name: "Aspirin"} }"#,
    );
    assert_eq!(
        ok(
            &n,
            r#"MERGE CONCEPT ?d INTO ?c WHERE { ?d {type: "Drug", name: "Aspirin"} ?c {type: "Drug", name: "Aspirin"} }"#
        ),
        json!({"merged": true, "links_repointed": 0, "links_deduplicated": 0, "attributes_filled": 0})
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?d) WHERE { ?d {type: "Drug", name: "Aspirin"} }"#
        ),
        before
    );
}

#[test]
fn export_re_imports_to_the_same_graph_without_reserved_metadata() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    let r = ok(
        &n,
        r#"EXPORT ?x WHERE { ?x {type: "Drug"} UNION { ?x (?d, "treats", ?s) } UNION { ?x {type: "Symptom"} } }"#,
    );
    assert_eq!(r["concepts"], 7, "{r}");
    assert_eq!(r["propositions"], 4, "{r}");
    let capsule = r["capsule"].as_str().expect("capsule text");
    assert!(
        !capsule.contains("_version") && !capsule.contains("_updated_at"),
        "{capsule}"
    );
    let m = nexus();
    medical_schema(&m);
    ok(&m, capsule);
    for probe in [
        r#"FIND(?d.name, ?d.attributes.risk_level) WHERE { ?d {type: "Drug"} } ORDER BY ?d.name"#,
        r#"FIND(?d.name, ?s.name, ?l.metadata.confidence) WHERE { ?l (?d, "treats", ?s) } ORDER BY ?d.name, ?s.name"#,
    ] {
        assert_eq!(ok(&m, probe), ok(&n, probe), "{probe}");
    }
    // Pages: each one is a capsule of its own, and the pages cover everything once.
    let mut cursor: Option<String> = None;
    let mut total = 0;
    loop {
        let r = match &cursor {
            None => run(&n, r#"EXPORT ?x WHERE { ?x {type: "Drug"} } LIMIT 3"#),
            Some(c) => run_with(
                &n,
                r#"EXPORT ?x WHERE { ?x {type: "Drug"} } LIMIT 3 CURSOR :c"#,
                json!({"c": c}),
            ),
        };
        total += r["result"]["concepts"].as_u64().expect("count");
        let k = nexus();
        medical_schema(&k);
        ok(&k, r["result"]["capsule"].as_str().expect("capsule"));
        match r["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(total, 4);
    // EXPORT reads: the read-only interface accepts it.
    let r = n
        .execute_json(
            &json!({"command": r#"EXPORT ?x WHERE { ?x {type: "Drug", name: "Aspirin"} }"#}),
            kip_engine::Access::ReadOnly,
        )
        .to_json();
    assert_eq!(r["result"]["concepts"], 1, "{r}");
}

#[test]
fn the_memory_tools_keep_versions_too() {
    let n = nexus();
    n.memory().call(
        "create_entities",
        &json!({"entities": [{"name": "Ada", "entityType": "person", "observations": ["math"]}]}),
    )
    .expect("create");
    assert_eq!(version(&n, "Person", "Ada"), json!(1));
    n.memory()
        .call(
            "add_observations",
            &json!({"observations": [{"entityName": "Ada", "contents": ["engines"]}]}),
        )
        .expect("add");
    assert_eq!(version(&n, "Person", "Ada"), json!(2));
}

#[test]
fn search_modes_degrade_to_keyword_with_normalized_scores_and_a_threshold() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    let keyword = ok(&n, r#"SEARCH CONCEPT "aspirin" LIMIT 5"#);
    let first = keyword[0]["metadata"]["_score"].as_f64().expect("_score");
    assert!(
        first > 0.0 && first < 1.0,
        "in [0, 1], the top hit not forced to 1: {first}"
    );
    let scores: Vec<f64> = keyword
        .as_array()
        .expect("hits")
        .iter()
        .filter_map(|h| h["metadata"]["_score"].as_f64())
        .collect();
    assert!(
        scores.windows(2).all(|w| w[0] >= w[1]),
        "descending: {scores:?}"
    );
    // Without an embedding model, semantic and hybrid answer as keyword does.
    for mode in ["semantic", "hybrid", "keyword"] {
        let r = ok(
            &n,
            &format!(r#"SEARCH CONCEPT "aspirin" MODE "{mode}" LIMIT 5"#),
        );
        assert_eq!(r, keyword, "{mode}");
    }
    // THRESHOLD drops weak hits: above the best score nothing is left.
    let none = ok(
        &n,
        &format!(
            r#"SEARCH CONCEPT "aspirin" THRESHOLD {}"#,
            (first + 0.0001).min(1.0)
        ),
    );
    assert_eq!(none, json!([]));
    let some = ok(
        &n,
        &format!(r#"SEARCH CONCEPT "aspirin" THRESHOLD {first}"#),
    );
    assert_eq!(some[0]["name"], "Aspirin");
    // The primer says which modes are real.
    let p = ok(&n, "DESCRIBE PRIMER");
    assert_eq!(p["identity"]["search_modes"], json!(["keyword"]));
}

#[test]
fn the_read_only_interface_refuses_update_and_merge_and_answers_export() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    for cmd in [
        r#"UPDATE ?d SET ATTRIBUTES { x: 1 } WHERE { ?d {type: "Drug"} }"#,
        r#"MERGE CONCEPT ?a INTO ?b WHERE { ?a {type: "Drug", name: "Aspirin"} ?b {type: "Drug", name: "Ibuprofen"} }"#,
    ] {
        let r = n
            .execute_json(&json!({ "command": cmd }), kip_engine::Access::ReadOnly)
            .to_json();
        assert_eq!(r["error"]["code"], "KIP_3004", "{cmd}: {r}");
    }
    assert_eq!(
        ok(
            &n,
            r#"FIND(?d.attributes.x) WHERE { ?d {type: "Drug", name: "Aspirin"} }"#
        ),
        json!([null]),
        "nothing was written"
    );
}

/// RC9+ query forms: predicate variables with FILTER/IN and bare-variable ORDER BY
/// keys (the rc9 parse corpus, executed).
#[test]
fn predicate_variables_order_and_filter() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    let r = ok(
        &n,
        r#"FIND(?pred, ?o.name) WHERE { ?d {type: "Drug", name: "Aspirin"} ?l (?d, ?pred, ?o) FILTER(IN(?pred, ["treats", "is_class_of"])) } ORDER BY ?pred ASC, ?o.name DESC LIMIT 20"#,
    );
    assert_eq!(
        r,
        json!([
            ["is_class_of", "treats", "treats"],
            ["NSAID", "Headache", "Fever"]
        ])
    );
    let r = ok(
        &n,
        r#"FIND(?pred, ?o) WHERE { ?l ({type: "Drug", name: "Aspirin"}, ?pred, ?o) FILTER(?pred != "belongs_to_domain") } LIMIT 50"#,
    );
    assert_eq!(r[0].as_array().map(Vec::len), Some(4), "{r}");
}

/// EXPORT writes a link about a link as a nested structural clause, which re-imports.
#[test]
fn export_of_higher_order_links_re_imports() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    ok(
        &n,
        r#"UPSERT { CONCEPT ?ada { {type: "Person", name: "Ada"} } PROPOSITION ?s { (?ada, "stated", ({type: "Drug", name: "Aspirin"}, "treats", {type: "Symptom", name: "Headache"})) SET ATTRIBUTES { certainty: 0.8 } } }"#,
    );
    let r = ok(
        &n,
        r#"EXPORT ?x WHERE { ?x {type: "Drug", name: "Aspirin"} UNION { ?x {type: "Symptom", name: "Headache"} } UNION { ?x {type: "Person", name: "Ada"} } UNION { ?x ({type: "Drug", name: "Aspirin"}, "treats", {type: "Symptom", name: "Headache"}) } UNION { ?x (?p, "stated", ?f) } }"#,
    );
    let capsule = r["capsule"].as_str().expect("capsule");
    assert!(
        capsule.contains(
            r#"({type: "Drug", name: "Aspirin"}, "treats", {type: "Symptom", name: "Headache"})"#
        ),
        "{capsule}"
    );
    let m = nexus();
    medical_schema(&m);
    ok(&m, capsule);
    let probe = r#"FIND(?who.name, ?s.attributes.certainty, ?d.name) WHERE { ?s (?who, "stated", ?f) ?f (?d, "treats", ?h) }"#;
    assert_eq!(ok(&m, probe), ok(&n, probe));
    assert_eq!(ok(&m, probe), json!([["Ada"], [0.8], ["Aspirin"]]));
}

/// The spec's own sweep (RC11 §4.3, rc9_004) runs on a fresh nexus: the Genesis links
/// it would touch are all `belongs_to_domain`, which it filters out.
#[test]
fn the_spec_decay_sweep_runs_on_a_fresh_nexus() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    let sweep = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../conformance/parse/valid_rc9plus/rc9_004_update_decay.kip"
    ))
    .expect("corpus file");
    let r = ok(&n, &sweep);
    assert_eq!(r["matched"], r["updated"], "{r}");
    assert_eq!(r["updated"], 7, "the seven links between the facts: {r}");
    // Converges: a second run with the same marker changes nothing.
    assert_eq!(ok(&n, &sweep), json!({"updated": 0, "matched": 0}));
    let strengths = ok(
        &n,
        r#"FIND(?l.metadata.memory_strength) WHERE { ?l (?s, "treats", ?o) }"#,
    );
    let s = strengths[0].as_f64().expect("a number");
    assert!((s - 0.7 * 0.95).abs() < 1e-12, "0.7 decayed once: {s}");
}
