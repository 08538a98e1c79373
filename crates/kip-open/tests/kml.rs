//! KML semantics, one test per rule (spec §4, DECISIONS.md items 1-12).

mod common;
use common::*;
use kip_engine::{Access, Nexus};
use kip_open::Open;
use serde_json::{json, Value};

fn concept(n: &Nexus, ty: &str, name: &str) -> Value {
    let r = run_with(
        n,
        "FIND(?c) WHERE { ?c {type: :t, name: :n} }",
        json!({"t": ty, "n": name}),
    );
    r["result"][0].clone()
}

/// Metadata without the engine's reserved `_` keys (`_version`, `_updated_at`).
fn authored(meta: &Value) -> Value {
    let mut m = meta.as_object().cloned().unwrap_or_default();
    m.retain(|k, _| !k.starts_with('_'));
    Value::Object(m)
}

fn links(n: &Nexus, pred: &str) -> Value {
    run_with(n, "FIND(?l) WHERE { ?l (?s, :p, ?o) }", json!({"p": pred}))["result"].clone()
}

#[test]
fn bootstrap_loads_genesis_core_types_and_persons() {
    let n = nexus();
    for (t, name) in [
        ("$ConceptType", "$ConceptType"),
        ("$ConceptType", "$PropositionType"),
        ("$ConceptType", "Domain"),
        ("$PropositionType", "belongs_to_domain"),
        ("Domain", "CoreSchema"),
        ("Domain", "Unsorted"),
        ("Domain", "Archived"),
        ("Domain", "System"),
        ("$ConceptType", "Person"),
        ("$ConceptType", "Event"),
        ("$ConceptType", "SleepTask"),
        // RC11 (DECISIONS.md item 33): every standard type and predicate capsule.
        ("$ConceptType", "Preference"),
        ("$ConceptType", "Insight"),
        ("$ConceptType", "Commitment"),
        ("$ConceptType", "Experience"),
        ("$ConceptType", "ExperienceStep"),
        ("$ConceptType", "Skill"),
        ("$PropositionType", "involves"),
        ("$PropositionType", "mentions"),
        ("$PropositionType", "consolidated_to"),
        ("$PropositionType", "derived_from"),
        ("$PropositionType", "caused_by"),
        ("$PropositionType", "compiled_to"),
        ("$PropositionType", "derived_insight"),
        ("$PropositionType", "has_step"),
        ("Person", "$self"),
        ("Person", "$system"),
    ] {
        assert!(concept(&n, t, name).is_object(), "{t} {name} missing");
    }
    // The System domain is protected like the other core domains.
    assert_eq!(
        err(
            &n,
            r#"DELETE CONCEPT ?d DETACH WHERE { ?d {type: "Domain", name: "System"} }"#
        ),
        "KIP_3004"
    );
    // The genesis links exist.
    let core = ok(
        &n,
        r#"FIND(?x.name) WHERE { (?x, "belongs_to_domain", {type: "Domain", name: "CoreSchema"}) }"#,
    );
    assert!(core
        .as_array()
        .expect("array")
        .contains(&json!("$ConceptType")));
}

#[test]
fn reopening_never_reruns_bootstrap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = {
        let n = Nexus::open(dir.path()).expect("open");
        ok(
            &n,
            r#"UPSERT { CONCEPT ?x { {type: "Person", name: "Alice"} } }"#,
        );
        n.admin().dump().expect("dump")
    };
    let n = Nexus::open(dir.path()).expect("reopen");
    assert_eq!(n.admin().dump().expect("dump"), first);
}

#[test]
fn blocks_run_in_order_and_handles_must_be_defined_before_use() {
    let n = nexus();
    medical_schema(&n);
    let e = err_obj(
        &n,
        r#"UPSERT {
            CONCEPT ?a { {type: "Drug", name: "A"} SET PROPOSITIONS { ("treats", ?h) } }
            CONCEPT ?h { {type: "Symptom", name: "H"} }
        }"#,
    );
    assert_eq!(e["code"], "KIP_3001");
    assert!(e["message"].as_str().expect("msg").contains("?h"));
    // Nothing of the failed UPSERT exists.
    assert!(concept(&n, "Drug", "A").is_null());
}

#[test]
fn a_handle_defined_twice_is_rejected() {
    let n = nexus();
    medical_schema(&n);
    let code = err(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} } CONCEPT ?a { {type: "Drug", name: "B"} } }"#,
    );
    assert_eq!(code, "KIP_1001");
}

#[test]
fn concept_by_type_and_name_is_match_or_create() {
    let n = nexus();
    medical_schema(&n);
    let r1 = ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "Aspirin"} } }"#,
    );
    let r2 = ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "Aspirin"} SET ATTRIBUTES { x: 1 } } }"#,
    );
    assert_eq!(r1["upsert_concept_nodes"], r2["upsert_concept_nodes"]);
    assert_eq!(
        ok(&n, r#"FIND(COUNT(?d)) WHERE { ?d {type: "Drug"} }"#),
        json!(1)
    );
}

#[test]
fn concept_by_id_is_match_only() {
    let n = nexus();
    medical_schema(&n);
    let id = ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "Aspirin"} } }"#,
    )["upsert_concept_nodes"][0]
        .clone();
    let id = id.as_str().expect("id");
    ok(
        &n,
        &format!(
            r#"UPSERT {{ CONCEPT ?a {{ {{id: "{id}"}} SET ATTRIBUTES {{ risk_level: 3 }} }} }}"#
        ),
    );
    assert_eq!(
        concept(&n, "Drug", "Aspirin")["attributes"]["risk_level"],
        3
    );
    for missing in ["C:999999", "not-an-id", "P:1"] {
        assert_eq!(
            err(
                &n,
                &format!(r#"UPSERT {{ CONCEPT ?a {{ {{id: "{missing}"}} }} }}"#)
            ),
            "KIP_3002",
            "{missing}"
        );
    }
}

#[test]
fn proposition_by_structure_is_match_or_create_with_every_endpoint_form() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    let fact = ok(&n, r#"FIND(?l.id) WHERE { ?l ({type: "Drug", name: "Aspirin"}, "treats", {type: "Symptom", name: "Headache"}) }"#)[0].clone();
    let fact = fact.as_str().expect("id").to_string();
    let r = ok(
        &n,
        &format!(
            r#"UPSERT {{
                CONCEPT ?john {{ {{type: "Person", name: "John"}} }}
                PROPOSITION ?p1 {{ (?john, "stated", ({{type: "Drug", name: "Aspirin"}}, "treats", {{type: "Symptom", name: "Headache"}})) }}
                PROPOSITION ?p2 {{ (?john, "stated", (id: "{fact}")) }}
                PROPOSITION ?p3 {{ ({{type: "Person", name: "John"}}, "stated", ?p1) }}
            }}"#
        ),
    );
    let ids = r["upsert_proposition_links"].as_array().expect("ids");
    assert_eq!(ids.len(), 3);
    // The nested form and the (id: ...) form name the same fact: same link.
    assert_eq!(ids[0], ids[1]);
    assert_ne!(ids[0], ids[2]);
    assert_eq!(links(&n, "stated").as_array().expect("arr").len(), 2);
}

#[test]
fn proposition_by_id_is_match_only() {
    let n = nexus();
    medical_schema(&n);
    assert_eq!(
        err(
            &n,
            r#"UPSERT { PROPOSITION ?p { (id: "P:424242") SET ATTRIBUTES { a: 1 } } }"#
        ),
        "KIP_3002"
    );
    medical_facts(&n);
    let id = ok(&n, r#"FIND(?l.id) WHERE { ?l ({type: "Drug", name: "Aspirin"}, "treats", {type: "Symptom", name: "Fever"}) }"#)[0].clone();
    let id = id.as_str().expect("id");
    ok(
        &n,
        &format!(
            r#"UPSERT {{ PROPOSITION ?p {{ (id: "{id}") SET ATTRIBUTES {{ efficacy: "high" }} }} }}"#
        ),
    );
    let l = ok(&n, &format!(r#"FIND(?l) WHERE {{ ?l (id: "{id}") }}"#));
    assert_eq!(l[0]["attributes"]["efficacy"], "high");
}

#[test]
fn set_attributes_is_a_shallow_merge_and_null_is_stored() {
    let n = nexus();
    medical_schema(&n);
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} SET ATTRIBUTES { x: 1, tags: ["a", "b"], obj: {k: 1, j: 2} } } }"#,
    );
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} SET ATTRIBUTES { tags: ["c"], obj: {k: 9}, gone: null } } }"#,
    );
    let c = concept(&n, "Drug", "A");
    assert_eq!(
        c["attributes"],
        json!({"x": 1, "tags": ["c"], "obj": {"k": 9}, "gone": null})
    );
}

#[test]
fn with_metadata_is_a_shallow_merge() {
    let n = nexus();
    medical_schema(&n);
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} } } WITH METADATA { source: "s1", confidence: 0.5 }"#,
    );
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} } } WITH METADATA { confidence: 0.8, author: "me" }"#,
    );
    assert_eq!(
        authored(&concept(&n, "Drug", "A")["metadata"]),
        json!({"source": "s1", "confidence": 0.8, "author": "me"})
    );
}

#[test]
fn metadata_precedence_statement_block_entry_with_null_override() {
    let n = nexus();
    medical_schema(&n);
    ok(
        &n,
        r#"UPSERT {
            CONCEPT ?h { {type: "Symptom", name: "H"} }
            CONCEPT ?a { {type: "Drug", name: "A"}
                SET PROPOSITIONS { ("treats", ?h) WITH METADATA { confidence: 0.2, entry: true } }
            } WITH METADATA { confidence: null, block: true, source: "block" }
        } WITH METADATA { source: "stmt", confidence: 0.9, author: "x" }"#,
    );
    assert_eq!(
        authored(&concept(&n, "Symptom", "H")["metadata"]),
        json!({"source": "stmt", "confidence": 0.9, "author": "x"})
    );
    assert_eq!(
        authored(&concept(&n, "Drug", "A")["metadata"]),
        json!({"source": "block", "confidence": null, "author": "x", "block": true})
    );
    let l = links(&n, "treats");
    assert_eq!(
        authored(&l[0]["metadata"]),
        json!({"source": "block", "confidence": 0.2, "author": "x", "block": true, "entry": true})
    );
}

#[test]
fn set_propositions_is_additive() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "Paracetamol"} SET PROPOSITIONS { ("treats", {type: "Symptom", name: "Headache"}) } } }"#,
    );
    let treated = ok(
        &n,
        r#"FIND(?s.name) WHERE { ({type: "Drug", name: "Paracetamol"}, "treats", ?s) } ORDER BY ?s.name"#,
    );
    assert_eq!(treated, json!(["Fever", "Headache"]));
}

#[test]
fn set_propositions_targets_must_exist() {
    let n = nexus();
    medical_schema(&n);
    for target in [
        r#"{type: "Symptom", name: "Nope"}"#,
        r#"{id: "C:987654"}"#,
        r#"(id: "P:987654")"#,
        r#"({type: "Drug", name: "A"}, "treats", {type: "Symptom", name: "Nope"})"#,
    ] {
        let cmd = format!(
            r#"UPSERT {{ CONCEPT ?a {{ {{type: "Drug", name: "A"}} SET PROPOSITIONS {{ ("treats", {target}) }} }} }}"#
        );
        assert_eq!(err(&n, &cmd), "KIP_3002", "{target}");
    }
    assert!(
        concept(&n, "Drug", "A").is_null(),
        "failed UPSERTs leave nothing"
    );
}

#[test]
fn spo_is_unique_and_a_repeated_upsert_updates_the_link() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    let before = links(&n, "treats").as_array().expect("arr").len();
    ok(
        &n,
        r#"UPSERT { PROPOSITION ?p { ({type: "Drug", name: "Aspirin"}, "treats", {type: "Symptom", name: "Headache"}) SET ATTRIBUTES { efficacy: "high" } } WITH METADATA { confidence: 0.99 } }"#,
    );
    let all = links(&n, "treats");
    assert_eq!(all.as_array().expect("arr").len(), before);
    let l = ok(
        &n,
        r#"FIND(?l) WHERE { ?l ({type: "Drug", name: "Aspirin"}, "treats", {type: "Symptom", name: "Headache"}) }"#,
    );
    assert_eq!(l[0]["attributes"]["efficacy"], "high");
    assert_eq!(l[0]["metadata"]["confidence"], 0.99);
    assert_eq!(l[0]["metadata"]["source"], "test");
}

#[test]
fn unregistered_types_and_predicates_are_type_mismatch_with_a_suggestion() {
    let n = nexus();
    medical_schema(&n);
    let e = err_obj(&n, r#"UPSERT { CONCEPT ?a { {type: "drug", name: "A"} } }"#);
    assert_eq!(e["code"], "KIP_2001");
    assert!(
        e["message"]
            .as_str()
            .expect("msg")
            .contains("Did you mean 'Drug'"),
        "{e}"
    );
    let e = err_obj(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "A"} SET PROPOSITIONS { ("treat", {type: "Domain", name: "CoreSchema"}) } } }"#,
    );
    assert_eq!(e["code"], "KIP_2001");
    assert!(
        e["message"].as_str().expect("msg").contains("'treats'"),
        "{e}"
    );
    assert!(concept(&n, "Drug", "A").is_null());
}

#[test]
fn types_may_be_registered_earlier_in_the_same_upsert() {
    let n = nexus();
    ok(
        &n,
        r#"UPSERT {
            CONCEPT ?t { {type: "$ConceptType", name: "Planet"} SET ATTRIBUTES { description: "A planet" } }
            CONCEPT ?p { {type: "$PropositionType", name: "orbits"} SET ATTRIBUTES { description: "orbits", subject_types: ["Planet"], object_types: ["Planet"] } }
            CONCEPT ?sun { {type: "Planet", name: "Sun"} }
            CONCEPT ?earth { {type: "Planet", name: "Earth"} SET PROPOSITIONS { ("orbits", ?sun) } }
        }"#,
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?e.name) WHERE { (?e, "orbits", {type: "Planet", name: "Sun"}) }"#
        ),
        json!(["Earth"])
    );
}

#[test]
fn new_type_definitions_need_their_required_attributes() {
    let n = nexus();
    assert_eq!(
        err(
            &n,
            r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Planet"} } }"#
        ),
        "KIP_2003"
    );
    assert_eq!(
        err(
            &n,
            r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Planet"} SET ATTRIBUTES { description: 5 } } }"#
        ),
        "KIP_2003"
    );
    assert_eq!(
        err(
            &n,
            r#"UPSERT { CONCEPT ?t { {type: "$PropositionType", name: "orbits"} SET ATTRIBUTES { description: "d", subject_types: ["*"] } } }"#
        ),
        "KIP_2003"
    );
    // Evolving an existing definition's other attributes needs nothing more.
    ok(
        &n,
        r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Person"} SET ATTRIBUTES { display_hint: "P" } } }"#,
    );
}

#[test]
fn protected_core_cannot_be_deleted_or_have_identity_or_directives_changed() {
    let n = nexus();
    for target in [
        r#"{type: "$ConceptType", name: "$ConceptType"}"#,
        r#"{type: "$ConceptType", name: "$PropositionType"}"#,
        r#"{type: "$ConceptType", name: "Domain"}"#,
        r#"{type: "$PropositionType", name: "belongs_to_domain"}"#,
        r#"{type: "Domain", name: "CoreSchema"}"#,
        r#"{type: "Domain", name: "Unsorted"}"#,
        r#"{type: "Domain", name: "Archived"}"#,
        r#"{type: "Person", name: "$self"}"#,
        r#"{type: "Person", name: "$system"}"#,
    ] {
        assert_eq!(
            err(
                &n,
                &format!("DELETE CONCEPT ?x DETACH WHERE {{ ?x {target} }}")
            ),
            "KIP_3004",
            "{target}"
        );
    }
    assert_eq!(
        err(
            &n,
            r#"DELETE PROPOSITIONS ?l WHERE { ?l ({type: "$ConceptType", name: "Domain"}, "belongs_to_domain", {type: "Domain", name: "CoreSchema"}) }"#
        ),
        "KIP_3004"
    );
    assert_eq!(
        err(
            &n,
            r#"UPSERT { CONCEPT ?s { {type: "Person", name: "$self"} SET ATTRIBUTES { core_directives: [] } } }"#
        ),
        "KIP_3004"
    );
    assert_eq!(
        err(
            &n,
            r#"DELETE ATTRIBUTES {"core_directives"} FROM ?s WHERE { ?s {type: "Person", name: "$self"} }"#
        ),
        "KIP_3004"
    );
    // Ordinary attributes evolve.
    ok(
        &n,
        r#"UPSERT { CONCEPT ?s { {type: "Person", name: "$self"} SET ATTRIBUTES { persona: "curious" } } }"#,
    );
    ok(
        &n,
        r#"UPSERT { CONCEPT ?d { {type: "$ConceptType", name: "Domain"} SET ATTRIBUTES { description: "Organizes knowledge." } } }"#,
    );
    assert_eq!(
        concept(&n, "Person", "$self")["attributes"]["persona"],
        "curious"
    );
}

#[test]
fn the_same_upsert_twice_gives_the_same_graph_and_result() {
    let n = nexus();
    medical_schema(&n);
    let cmd = r#"UPSERT {
        CONCEPT ?h { {type: "Symptom", name: "H"} SET ATTRIBUTES { a: [1, 2] } }
        CONCEPT ?d { {type: "Drug", name: "D"} SET PROPOSITIONS { ("treats", ?h) WITH METADATA { c: 1 } } }
        PROPOSITION ?p { (?d, "has_side_effect", ?h) SET ATTRIBUTES { s: "x" } }
    } WITH METADATA { source: "idem" }"#;
    let r1 = ok(&n, cmd);
    let g1 = n.admin().dump().expect("dump");
    let r2 = ok(&n, cmd);
    assert_eq!(r1, r2);
    assert_eq!(n.admin().dump().expect("dump"), g1);
}

#[test]
fn upsert_result_lists_each_top_level_block() {
    let n = nexus();
    medical_schema(&n);
    let r = ok(
        &n,
        r#"UPSERT { CONCEPT ?h { {type: "Symptom", name: "H"} } PROPOSITION ?p { ({type: "Domain", name: "Unsorted"}, "belongs_to_domain", {type: "Domain", name: "CoreSchema"}) } CONCEPT ?d { {type: "Drug", name: "D"} } }"#,
    );
    assert_eq!(r["blocks"], 3);
    assert_eq!(r["upsert_concept_nodes"].as_array().expect("arr").len(), 2);
    assert_eq!(
        r["upsert_proposition_links"].as_array().expect("arr").len(),
        1
    );
}

#[test]
fn an_error_in_any_block_leaves_the_graph_exactly_as_it_was() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    let before = n.admin().dump().expect("dump");
    let e = err(
        &n,
        r#"UPSERT {
            CONCEPT ?x { {type: "Drug", name: "New One"} SET ATTRIBUTES { a: 1 } }
            CONCEPT ?y { {type: "Drug", name: "Aspirin"} SET ATTRIBUTES { risk_level: 99 } SET PROPOSITIONS { ("treats", ?x) } }
            CONCEPT ?z { {type: "Nope", name: "Z"} }
        }"#,
    );
    assert_eq!(e, "KIP_2001");
    assert_eq!(n.admin().dump().expect("dump"), before);
}

#[test]
fn dry_run_validates_everything_and_writes_nothing() {
    let n = nexus();
    medical_schema(&n);
    let before = n.admin().dump().expect("dump");
    let r = n
        .execute_json(&json!({"command": r#"UPSERT { CONCEPT ?x { {type: "Drug", name: "Dry"} } }"#, "dry_run": true}), Access::ReadWrite)
        .to_json();
    assert_eq!(r["result"]["valid"], true);
    // RC11 §6.2.2: the effect counts the statement, and its ID arrays are empty.
    assert_eq!(
        r["result"]["effect"],
        json!({"blocks": 1, "upsert_concept_nodes": [], "upsert_proposition_links": []})
    );
    let r = n
        .execute_json(&json!({"command": r#"UPSERT { CONCEPT ?x { {type: "Drugs", name: "Dry"} } }"#, "dry_run": true}), Access::ReadWrite)
        .to_json();
    assert_eq!(r["error"]["code"], "KIP_2001");
    let r = n
        .execute_json(&json!({"command": r#"DELETE CONCEPT ?x DETACH WHERE { ?x {type: "Domain", name: "CoreSchema"} }"#, "dry_run": true}), Access::ReadWrite)
        .to_json();
    assert_eq!(r["error"]["code"], "KIP_3004");
    assert_eq!(n.admin().dump().expect("dump"), before);
}

#[test]
fn delete_attributes_and_metadata_report_counts() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    let r = ok(
        &n,
        r#"DELETE ATTRIBUTES {"risk_level", "nope"} FROM ?d WHERE { ?d {type: "Drug"} }"#,
    );
    assert_eq!(r, json!({"updated_concepts": 3, "updated_propositions": 0}));
    assert!(concept(&n, "Drug", "Aspirin")["attributes"]
        .get("risk_level")
        .is_none());
    let r = ok(
        &n,
        r#"DELETE METADATA {"confidence"} FROM ?l WHERE { ?l (?s, "treats", ?o) }"#,
    );
    assert_eq!(r, json!({"updated_concepts": 0, "updated_propositions": 4}));
    assert!(links(&n, "treats")[0]["metadata"]
        .get("confidence")
        .is_none());
}

#[test]
fn delete_propositions_with_filter() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "Aspirin"} SET PROPOSITIONS { ("treats", {type: "Symptom", name: "Stomach Upset"}) WITH METADATA { source: "untrusted" } } } }"#,
    );
    let r = ok(
        &n,
        r#"DELETE PROPOSITIONS ?l WHERE { ?l (?s, "treats", ?o) FILTER(?l.metadata.source == "untrusted") }"#,
    );
    assert_eq!(r, json!({"deleted_propositions": 1}));
    assert_eq!(links(&n, "treats").as_array().expect("arr").len(), 4);
}

#[test]
fn delete_concept_detach_cascades_through_higher_order_links() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    ok(
        &n,
        r#"UPSERT {
            CONCEPT ?j { {type: "Person", name: "John"} }
            PROPOSITION ?s1 { (?j, "stated", ({type: "Drug", name: "Aspirin"}, "treats", {type: "Symptom", name: "Headache"})) }
            PROPOSITION ?s2 { ({type: "Person", name: "$self"}, "stated", ?s1) }
        }"#,
    );
    let r = ok(
        &n,
        r#"DELETE CONCEPT ?d DETACH WHERE { ?d {type: "Drug", name: "Aspirin"} }"#,
    );
    // 4 direct links of Aspirin + John's statement about one of them + $self's statement about that.
    assert_eq!(r, json!({"deleted_concepts": 1, "deleted_propositions": 6}));
    assert_eq!(links(&n, "stated"), json!([]));
    assert!(concept(&n, "Person", "John").is_object());
}

#[test]
fn delete_that_matches_nothing_succeeds_with_zero_counts() {
    let n = nexus();
    medical_schema(&n);
    assert_eq!(
        ok(
            &n,
            r#"DELETE CONCEPT ?d DETACH WHERE { ?d {type: "Drug", name: "Nothing"} }"#
        ),
        json!({"deleted_concepts": 0, "deleted_propositions": 0})
    );
    assert_eq!(
        ok(
            &n,
            r#"DELETE PROPOSITIONS ?l WHERE { ?l (?s, "treats", ?o) }"#
        ),
        json!({"deleted_propositions": 0})
    );
    // An explicit id that does not exist is NotFound.
    assert_eq!(
        err(
            &n,
            r#"DELETE CONCEPT ?d DETACH WHERE { ?d {id: "C:123456"} }"#
        ),
        "KIP_3002"
    );
}

#[test]
fn deleting_a_type_still_in_use_is_refused() {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    assert_eq!(
        err(
            &n,
            r#"DELETE CONCEPT ?t DETACH WHERE { ?t {type: "$ConceptType", name: "Drug"} }"#
        ),
        "KIP_2002"
    );
    assert_eq!(
        err(
            &n,
            r#"DELETE CONCEPT ?t DETACH WHERE { ?t {type: "$PropositionType", name: "treats"} }"#
        ),
        "KIP_2002"
    );
    ok(
        &n,
        r#"DELETE CONCEPT ?t DETACH WHERE { ?t {type: "$PropositionType", name: "follows"} }"#,
    );
}

#[test]
fn capsules_load_atomically() {
    let n = nexus();
    let insight = include_str!("../../../spec/capsules/Insight.kip");
    let results = n.load_capsule(insight).expect("load Insight");
    assert!(!results.is_empty());
    assert!(concept(&n, "$ConceptType", "Insight").is_object());
    let before = n.admin().dump().expect("dump");
    let bad = "UPSERT { CONCEPT ?a { {type: \"Person\", name: \"Zed\"} } }\nUPSERT { CONCEPT ?b { {type: \"Nope\", name: \"x\"} } }";
    assert_eq!(
        n.load_capsule(bad).expect_err("second fails").code.as_str(),
        "KIP_2001"
    );
    assert_eq!(n.admin().dump().expect("dump"), before);
}

#[test]
fn a_newer_storage_format_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let n = Nexus::open(dir.path()).expect("open");
        n.write(
            |w| {
                Ok(kip_engine::store::GraphWrite::set_meta(
                    w,
                    "format_version",
                    &99u64.to_le_bytes(),
                )?)
            },
            false,
        )
        .expect("bump format");
    }
    let e = Nexus::open(dir.path()).expect_err("newer format");
    assert!(e.message.contains("newer kip-nexus"), "{}", e.message);
}

// The migrations of old storage formats are tested on a directory written by an
// earlier release: tests/old_formats.rs.

/// A capsule larger than the per-command limit (an export of a big graph) loads: its
/// commands are parsed one at a time. A syntax error near its end still writes nothing.
#[test]
fn a_capsule_larger_than_the_command_limit_loads_in_one_transaction() {
    let n = nexus();
    medical_schema(&n);
    let filler = format!("// {}\n", "x".repeat(17 * 1024 * 1024));
    let ok_capsule = format!(
        "UPSERT {{ CONCEPT ?a {{ {{type: \"Drug\", name: \"Big1\"}} }} }}\n{filler}UPSERT {{ CONCEPT ?b {{ {{type: \"Drug\", name: \"Big2\"}} }} }}\n"
    );
    assert!(ok_capsule.len() > 16 * 1024 * 1024);
    let results = n.load_capsule(&ok_capsule).expect("large capsule loads");
    assert_eq!(results.len(), 2);
    assert!(concept(&n, "Drug", "Big1").is_object());
    assert!(concept(&n, "Drug", "Big2").is_object());

    let before = n.admin().dump().expect("dump");
    let bad = format!(
        "UPSERT {{ CONCEPT ?a {{ {{type: \"Drug\", name: \"Big3\"}} }} }}\n{filler}UPSERT {{ CONCEPT ?b {{ {{type: \"Drug\" name: \"Big4\"}} }} }}\n"
    );
    let e = n.load_capsule(&bad).expect_err("syntax error at the end");
    assert_eq!(e.code.as_str(), "KIP_1001");
    assert_eq!(e.line, Some(3), "{e}");
    assert_eq!(n.admin().dump().expect("dump"), before);
}

/// One capsule that creates concepts, links new and existing ones, names an existing
/// link again and the same new link twice: every key resolves to the element it names
/// (on PostgreSQL this runs through the batched key lookups and the write buffer).
#[test]
fn a_capsule_mixing_new_and_existing_keys_resolves_each_once() {
    let n = nexus();
    ok(
        &n,
        r#"UPSERT { CONCEPT ?k { {type: "$PropositionType", name: "knows"} SET ATTRIBUTES { description: "knows", subject_types: ["Person"], object_types: ["Person"] } } }"#,
    );
    let first = ok(
        &n,
        r#"UPSERT {
            CONCEPT ?a { {type: "Person", name: "Old1"} }
            CONCEPT ?b { {type: "Person", name: "Old2"} }
            PROPOSITION ?l { (?a, "knows", ?b) }
        }"#,
    );
    let old_link = first["upsert_proposition_links"][0].clone();
    let r = ok(
        &n,
        r#"UPSERT {
            CONCEPT ?n { {type: "Person", name: "New"} }
            PROPOSITION ?p1 { (?n, "knows", {type: "Person", name: "Old1"}) }
            PROPOSITION ?p2 { ({type: "Person", name: "Old1"}, "knows", {type: "Person", name: "Old2"}) SET ATTRIBUTES { since: 2020 } }
            PROPOSITION ?p3 { ({type: "Person", name: "Old2"}, "knows", ?n) }
            CONCEPT ?o { {type: "Person", name: "Old2"} SET ATTRIBUTES { x: 1 } }
            PROPOSITION ?p4 { (?n, "knows", {type: "Person", name: "Old1"}) SET ATTRIBUTES { again: true } }
        }"#,
    );
    let links = r["upsert_proposition_links"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(links.len(), 4, "{r}");
    assert_eq!(links[0], links[3], "the same new link named twice: {r}");
    assert_eq!(links[1], old_link, "an existing link named again: {r}");
    assert_eq!(
        r["upsert_concept_nodes"][1], first["upsert_concept_nodes"][1],
        "an existing concept: {r}"
    );
    let count = |n: &Nexus| ok(n, r#"FIND(COUNT(?l)) WHERE { ?l (?s, "knows", ?o) }"#);
    assert_eq!(count(&n), json!(3));
    let p1 = ok(
        &n,
        r#"FIND(?l.attributes) WHERE { ?l ({type: "Person", name: "New"}, "knows", {type: "Person", name: "Old1"}) }"#,
    );
    assert_eq!(p1, json!([{"again": true}]));

    // Deleted, then created again in one capsule with links: a new concept, new links.
    ok(
        &n,
        r#"DELETE CONCEPT ?c DETACH WHERE { ?c {type: "Person", name: "Old1"} }"#,
    );
    assert_eq!(count(&n), json!(1));
    let r = ok(
        &n,
        r#"UPSERT {
            CONCEPT ?a { {type: "Person", name: "Old1"} }
            PROPOSITION ?x { (?a, "knows", {type: "Person", name: "New"}) }
            PROPOSITION ?y { ({type: "Person", name: "New"}, "knows", ?a) }
            PROPOSITION ?z { ({type: "Person", name: "Old2"}, "knows", {type: "Person", name: "New"}) }
        }"#,
    );
    assert_ne!(
        r["upsert_concept_nodes"][0], first["upsert_concept_nodes"][0],
        "{r}"
    );
    assert_eq!(count(&n), json!(3), "{r}");
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(?p)) WHERE { ?p {type: "Person", name: "Old1"} }"#
        ),
        json!(1)
    );
}

/// A capsule big enough that PostgreSQL writes its new rows with `COPY` (elements, text
/// postings, attribute entries), then the same capsule again (every row exists: the
/// upsert path), then a change of half of them: every index answers as on the embedded
/// store and the integrity check is clean.
#[test]
fn a_big_capsule_is_written_in_bulk_and_every_index_follows() {
    let n = nexus();
    ok(
        &n,
        r#"UPSERT {
            CONCEPT ?t { {type: "$ConceptType", name: "Gadget"} SET ATTRIBUTES { description: "A gadget" } }
            CONCEPT ?p { {type: "$PropositionType", name: "fits"} SET ATTRIBUTES { description: "fits", subject_types: ["Gadget"], object_types: ["Gadget"] } }
        }"#,
    );
    let capsule = |tag: &str| {
        let mut c = String::from("UPSERT {\n");
        for i in 0..600 {
            c.push_str(&format!(
                "CONCEPT ?g{i} {{ {{type: \"Gadget\", name: \"g{i}\"}} SET ATTRIBUTES {{ rank: {i}, description: \"sprocket number {i} {tag}\" }} }}\n"
            ));
        }
        for i in 1..600 {
            c.push_str(&format!(
                "PROPOSITION ?l{i} {{ (?g{i}, \"fits\", ?g{}) }}\n",
                i - 1
            ));
        }
        c.push('}');
        c
    };
    let first = ok(&n, &capsule("alpha"));
    assert_eq!(
        first["upsert_concept_nodes"].as_array().map(Vec::len),
        Some(600)
    );
    let again = ok(&n, &capsule("alpha"));
    assert_eq!(again, first, "the same capsule names the same elements");
    let count = |q: &str| ok(&n, q);
    assert_eq!(
        count(r#"FIND(COUNT(?g)) WHERE { ?g {type: "Gadget"} }"#),
        json!(600)
    );
    assert_eq!(
        count(r#"FIND(COUNT(?l)) WHERE { ?l (?a, "fits", ?b) }"#),
        json!(599)
    );
    assert_eq!(
        count(r#"FIND(COUNT(?g)) WHERE { ?g {type: "Gadget"} FILTER(?g.attributes.rank >= 590) }"#),
        json!(10)
    );
    let hits = ok(
        &n,
        r#"SEARCH CONCEPT "sprocket" WITH TYPE "Gadget" LIMIT 1000"#,
    );
    assert_eq!(hits.as_array().map(Vec::len), Some(600), "{hits}");

    // Half of them change their description (postings move) and rank (attribute
    // entries move); a quarter are deleted.
    let mut c = String::from("UPSERT {\n");
    for i in (0..600).step_by(2) {
        c.push_str(&format!(
            "CONCEPT ?g{i} {{ {{type: \"Gadget\", name: \"g{i}\"}} SET ATTRIBUTES {{ rank: {}, description: \"widget {i}\" }} }}\n",
            i + 1000
        ));
    }
    c.push('}');
    ok(&n, &c);
    ok(
        &n,
        r#"DELETE CONCEPT ?g DETACH WHERE { ?g {type: "Gadget"} FILTER(?g.attributes.rank < 150) }"#,
    );
    let hits = ok(
        &n,
        r#"SEARCH CONCEPT "sprocket" WITH TYPE "Gadget" LIMIT 1000"#,
    );
    assert_eq!(
        hits.as_array().map(Vec::len),
        Some(225),
        "odd numbers from 151: {hits}"
    );
    let hits = ok(
        &n,
        r#"SEARCH CONCEPT "widget" WITH TYPE "Gadget" LIMIT 1000"#,
    );
    assert_eq!(hits.as_array().map(Vec::len), Some(300), "{hits}");
    assert_eq!(
        count(
            r#"FIND(COUNT(?g)) WHERE { ?g {type: "Gadget"} FILTER(?g.attributes.rank >= 1000) }"#
        ),
        json!(300)
    );
    assert_eq!(
        count(r#"FIND(COUNT(?g)) WHERE { ?g {type: "Gadget"} }"#),
        json!(525)
    );
    let problems = n.admin().check_integrity().expect("check");
    assert!(problems.is_empty(), "{problems:?}");
}
