//! KQL semantics, one test per rule (spec §3, DECISIONS.md items 13-19).

mod common;
use common::*;
use kip_engine::QueryLimits;
use kip_engine::{Access, Nexus};
use serde_json::{json, Value};
use std::time::Duration;

fn setup() -> Nexus {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    n
}

fn sorted(v: Value) -> Vec<Value> {
    let mut a = v.as_array().cloned().unwrap_or_default();
    a.sort_by_key(|x| x.to_string());
    a
}

#[test]
fn concept_clause_forms_match_by_id_type_name() {
    let n = setup();
    let id = ok(
        &n,
        r#"FIND(?d.id) WHERE { ?d {type: "Drug", name: "Aspirin"} }"#,
    )[0]
    .clone();
    let by_id = ok(&n, &format!(r#"FIND(?d.name) WHERE {{ ?d {{id: {id}}} }}"#));
    assert_eq!(by_id, json!(["Aspirin"]));
    assert_eq!(
        sorted(ok(&n, r#"FIND(?d.name) WHERE { ?d {type: "Drug"} }"#)).len(),
        4
    );
    assert_eq!(
        ok(&n, r#"FIND(?d.type) WHERE { ?d {name: "Headache"} }"#),
        json!(["Symptom"])
    );
}

#[test]
fn an_exact_concept_that_does_not_exist_is_an_empty_result() {
    let n = setup();
    assert_eq!(
        ok(&n, r#"FIND(?d) WHERE { ?d {type: "Drug", name: "Nope"} }"#),
        json!([])
    );
}

#[test]
fn an_id_that_matches_nothing_is_not_found() {
    let n = setup();
    assert_eq!(
        err(&n, r#"FIND(?d) WHERE { ?d {id: "C:99999"} }"#),
        "KIP_3002"
    );
    assert_eq!(
        err(&n, r#"FIND(?l) WHERE { ?l (id: "garbage") }"#),
        "KIP_3002"
    );
    // Inside OPTIONAL it is just no match.
    let r = ok(
        &n,
        r#"FIND(?d.name, ?x) WHERE { ?d {type: "Drug", name: "Aspirin"} OPTIONAL { ?x {id: "C:99999"} } }"#,
    );
    assert_eq!(r, json!([["Aspirin"], [null]]));
}

#[test]
fn unregistered_or_miscased_names_in_patterns_are_type_mismatch() {
    let n = setup();
    let e = err_obj(&n, r#"FIND(?d) WHERE { ?d {type: "drug"} }"#);
    assert_eq!(e["code"], "KIP_2001");
    assert!(e["message"].as_str().expect("m").contains("'Drug'"));
    assert_eq!(
        err(&n, r#"FIND(?d) WHERE { (?d, "Treats", ?s) }"#),
        "KIP_2001"
    );
    assert_eq!(
        err(&n, r#"FIND(?d) WHERE { (?d, "treats" | "cures", ?s) }"#),
        "KIP_2001"
    );
}

#[test]
fn link_variables_and_proposition_ids() {
    let n = setup();
    let r = ok(
        &n,
        r#"FIND(?l) WHERE { ?l ({type: "Drug", name: "Aspirin"}, "treats", {type: "Symptom", name: "Headache"}) }"#,
    );
    let link = &r[0];
    assert_eq!(link["predicate"], "treats");
    for k in ["id", "subject", "object", "attributes", "metadata"] {
        assert!(link.get(k).is_some(), "{k}");
    }
    let id = link["id"].as_str().expect("id");
    let r = ok(
        &n,
        &format!(r#"FIND(?l.subject, ?l.predicate) WHERE {{ ?l (id: "{id}") }}"#),
    );
    assert_eq!(r[1], json!(["treats"]));
}

#[test]
fn whole_concepts_project_as_objects() {
    let n = setup();
    let r = ok(
        &n,
        r#"FIND(?d) WHERE { ?d {type: "Drug", name: "Aspirin"} }"#,
    );
    let c = &r[0];
    assert_eq!(c["type"], "Drug");
    assert_eq!(c["name"], "Aspirin");
    assert_eq!(c["attributes"]["risk_level"], 2);
    assert_eq!(c["metadata"]["source"], "test");
    assert!(c["id"].as_str().expect("id").starts_with("C:"));
    assert_eq!(
        ok(
            &n,
            r#"FIND(?d.attributes) WHERE { ?d {type: "Drug", name: "Paracetamol"} }"#
        ),
        json!([{"risk_level": 1}])
    );
}

#[test]
fn predicate_variables_bind_the_predicate_name() {
    let n = setup();
    let r = ok(
        &n,
        r#"FIND(?p, ?o.name) WHERE { ({type: "Drug", name: "Ibuprofen"}, ?p, ?o) } ORDER BY ?p, ?o.name"#,
    );
    assert_eq!(r, json!([["is_class_of", "treats"], ["NSAID", "Headache"]]));
    let r = ok(
        &n,
        r#"FIND(?p) WHERE { ({type: "Drug", name: "Aspirin"}, ?p, ?o) FILTER(?p != "treats") } ORDER BY ?p"#,
    );
    assert_eq!(r, json!(["has_side_effect", "is_class_of"]));
}

fn higher_order(n: &Nexus) {
    ok(
        n,
        r#"UPSERT {
            CONCEPT ?j { {type: "Person", name: "John"} }
            CONCEPT ?a { {type: "Person", name: "Auditor"} }
            PROPOSITION ?s { (?j, "stated", ({type: "Drug", name: "Aspirin"}, "treats", {type: "Symptom", name: "Headache"})) } WITH METADATA { confidence: 0.7 }
            PROPOSITION ?v { (?a, "stated", ?s) }
        }"#,
    );
}

#[test]
fn higher_order_patterns_in_object_and_subject_position_and_nested() {
    let n = setup();
    higher_order(&n);
    let r = ok(
        &n,
        r#"FIND(?u.name, ?d.name, ?s.name) WHERE { (?u, "stated", (?d, "treats", ?s)) }"#,
    );
    assert_eq!(r, json!([["John"], ["Aspirin"], ["Headache"]]));
    let r = ok(
        &n,
        r#"FIND(?st.metadata.confidence) WHERE {
        ?fact ({type: "Drug", name: "Aspirin"}, "treats", {type: "Symptom", name: "Headache"})
        ?st ({type: "Person", name: "John"}, "stated", ?fact) }"#,
    );
    assert_eq!(r, json!([0.7]));
    let r = ok(
        &n,
        r#"FIND(?who.name) WHERE { ((?x, "treats", {type: "Symptom", name: "Headache"}), "stated", ?who) }"#,
    );
    assert_eq!(r, json!([]));
    let r = ok(
        &n,
        r#"FIND(?aud.name, ?u.name) WHERE { (?aud, "stated", (?u, "stated", ({type: "Drug", name: "Aspirin"}, "treats", ?s))) }"#,
    );
    assert_eq!(r, json!([["Auditor"], ["John"]]));
    // Subject position.
    let r = ok(
        &n,
        r#"FIND(?aud.name) WHERE { (?aud, "stated", ?st) ?st ((?u, "stated", ?f), "stated", ?x) }"#,
    );
    assert_eq!(r, json!([]));
    // Inline named endpoints.
    let r = ok(
        &n,
        r#"FIND(?u.name, ?f.predicate) WHERE { (?u {type: "Person"}, "stated", ?f (?d, "treats", ?s)) }"#,
    );
    assert_eq!(r, json!([["John"], ["treats"]]));
}

fn chain(n: &Nexus) {
    // a -> b -> c -> d -> b (cycle), e isolated.
    ok(
        n,
        r#"UPSERT {
            CONCEPT ?a { {type: "Person", name: "a"} } CONCEPT ?b { {type: "Person", name: "b"} }
            CONCEPT ?c { {type: "Person", name: "c"} } CONCEPT ?d { {type: "Person", name: "d"} }
            CONCEPT ?e { {type: "Person", name: "e"} }
            PROPOSITION { (?a, "follows", ?b) } PROPOSITION { (?b, "follows", ?c) }
            PROPOSITION { (?c, "follows", ?d) } PROPOSITION { (?d, "follows", ?b) }
        }"#,
    );
}

fn reach(n: &Nexus, hops: &str) -> Vec<Value> {
    sorted(ok(
        n,
        &format!(
            r#"FIND(?x.name) WHERE {{ ({{type: "Person", name: "a"}}, "follows"{hops}, ?x) }}"#
        ),
    ))
}

#[test]
fn hop_ranges_with_zero_hop_exact_open_and_cycles() {
    let n = setup();
    chain(&n);
    assert_eq!(reach(&n, "{1,1}"), vec![json!("b")]);
    assert_eq!(reach(&n, "{0,1}"), vec![json!("a"), json!("b")]);
    assert_eq!(reach(&n, "{2}"), vec![json!("c")]);
    assert_eq!(reach(&n, "{1,2}"), vec![json!("b"), json!("c")]);
    assert_eq!(reach(&n, "{1,}"), vec![json!("b"), json!("c"), json!("d")]);
    assert_eq!(reach(&n, "{3,3}"), vec![json!("d")]);
    // Walks keep going around the cycle; each (start, end) pair is one solution.
    assert_eq!(reach(&n, "{4,4}"), vec![json!("b")]);
    assert_eq!(
        reach(&n, "{0,16}"),
        vec![json!("a"), json!("b"), json!("c"), json!("d")]
    );
    // Reverse: from the object.
    let r = sorted(ok(
        &n,
        r#"FIND(?x.name) WHERE { (?x, "follows"{1,2}, {type: "Person", name: "c"}) }"#,
    ));
    assert_eq!(r, vec![json!("a"), json!("b"), json!("d")]);
    // Both ends free: (start, end) pairs.
    let r = ok(
        &n,
        r#"FIND(COUNT(?y)) WHERE { ?x {type: "Person", name: "e"} (?x, "follows"{0,3}, ?y) }"#,
    );
    assert_eq!(r, json!(1));
    let r = ok(
        &n,
        r#"FIND(?x.name, ?y.name) WHERE { (?x, "follows"{3}, ?y) } ORDER BY ?x.name"#,
    );
    assert_eq!(r, json!([["a", "b", "c", "d"], ["d", "b", "c", "d"]]));
}

#[test]
fn hop_limits_are_enforced() {
    let n = setup();
    let e = err_obj(
        &n,
        r#"FIND(?x) WHERE { ({type: "Drug", name: "Aspirin"}, "follows"{1,500}, ?x) }"#,
    );
    assert_eq!(e["code"], "KIP_4002");
    assert_eq!(
        err(
            &n,
            r#"FIND(?x) WHERE { ({type: "Drug", name: "Aspirin"}, "follows"{20,}, ?x) }"#
        ),
        "KIP_4002"
    );
    assert_eq!(
        err(
            &n,
            r#"FIND(?x) WHERE { ({type: "Drug", name: "Aspirin"}, "follows"{3,1}, ?x) }"#
        ),
        "KIP_1001"
    );
}

#[test]
fn predicate_alternatives() {
    let n = setup();
    let r = sorted(ok(
        &n,
        r#"FIND(?o.name) WHERE { ({type: "Drug", name: "Aspirin"}, "is_class_of" | "has_side_effect", ?o) }"#,
    ));
    assert_eq!(r, vec![json!("NSAID"), json!("Stomach Upset")]);
}

fn filter_names(n: &Nexus, f: &str) -> Vec<Value> {
    sorted(ok(
        n,
        &format!(r#"FIND(?d.name) WHERE {{ ?d {{type: "Drug"}} FILTER({f}) }}"#),
    ))
}

#[test]
fn every_filter_operator_and_function() {
    let n = setup();
    let names = |v: &[&str]| v.iter().map(|s| json!(s)).collect::<Vec<_>>();
    assert_eq!(
        filter_names(&n, "?d.attributes.risk_level == 2"),
        names(&["Aspirin"])
    );
    assert_eq!(
        filter_names(&n, "?d.attributes.risk_level == 2.0"),
        names(&["Aspirin"])
    );
    assert_eq!(
        filter_names(&n, "?d.attributes.risk_level != 2"),
        names(&["Ibuprofen", "Paracetamol", "Vitamin C"])
    );
    assert_eq!(
        filter_names(&n, "?d.attributes.risk_level < 2"),
        names(&["Paracetamol"])
    );
    assert_eq!(
        filter_names(&n, "?d.attributes.risk_level <= 2"),
        names(&["Aspirin", "Paracetamol"])
    );
    assert_eq!(
        filter_names(&n, "?d.attributes.risk_level > 2"),
        names(&["Ibuprofen"])
    );
    assert_eq!(
        filter_names(&n, "?d.attributes.risk_level >= 2"),
        names(&["Aspirin", "Ibuprofen"])
    );
    assert_eq!(
        filter_names(
            &n,
            "?d.attributes.risk_level >= 2 && ?d.attributes.risk_level < 3"
        ),
        names(&["Aspirin"])
    );
    assert_eq!(
        filter_names(
            &n,
            "?d.attributes.risk_level == 1 || ?d.name == \"Ibuprofen\""
        ),
        names(&["Ibuprofen", "Paracetamol"])
    );
    assert_eq!(
        filter_names(&n, "!(?d.attributes.risk_level >= 2)"),
        names(&["Paracetamol", "Vitamin C"])
    );
    assert_eq!(
        filter_names(&n, "IN(?d.attributes.risk_level, [1, 3])"),
        names(&["Ibuprofen", "Paracetamol"])
    );
    assert_eq!(
        filter_names(&n, "IS_NULL(?d.attributes.risk_level)"),
        names(&["Vitamin C"])
    );
    assert_eq!(
        filter_names(&n, "IS_NOT_NULL(?d.attributes.description)"),
        names(&["Aspirin"])
    );
    assert_eq!(
        filter_names(&n, "CONTAINS(?d.name, \"prof\")"),
        names(&["Ibuprofen"])
    );
    assert_eq!(filter_names(&n, "CONTAINS(?d.name, \"PROF\")"), names(&[]));
    assert_eq!(
        filter_names(&n, "STARTS_WITH(?d.name, \"Para\")"),
        names(&["Paracetamol"])
    );
    assert_eq!(
        filter_names(&n, "ENDS_WITH(?d.name, \"in\")"),
        names(&["Aspirin"])
    );
    assert_eq!(
        filter_names(&n, "REGEX(?d.name, \"^(Asp|Ibu)\")"),
        names(&["Aspirin", "Ibuprofen"])
    );
    // Mixed types compare false with < and >; null compares false.
    assert_eq!(
        filter_names(&n, "?d.attributes.risk_level > \"1\""),
        names(&[])
    );
    assert_eq!(filter_names(&n, "?d.attributes.nothing < 5"), names(&[]));
    assert_eq!(
        err(
            &n,
            r#"FIND(?d) WHERE { ?d {type: "Drug"} FILTER(REGEX(?d.name, "(")) }"#
        ),
        "KIP_1001"
    );
}

#[test]
fn iso_timestamps_compare_chronologically_as_strings() {
    let n = setup();
    ok(
        &n,
        r#"UPSERT { CONCEPT ?e { {type: "Event", name: "e1"} SET ATTRIBUTES { start_time: "2025-03-01T10:00:00Z" } } CONCEPT ?f { {type: "Event", name: "e2"} SET ATTRIBUTES { start_time: "2024-12-31T23:59:59Z" } } }"#,
    );
    let r = ok(
        &n,
        r#"FIND(?e.name) WHERE { ?e {type: "Event"} FILTER(?e.attributes.start_time > "2025-01-01T00:00:00Z") }"#,
    );
    assert_eq!(r, json!(["e1"]));
}

#[test]
fn optional_is_a_left_join_with_null_projection() {
    let n = setup();
    let r = ok(
        &n,
        r#"FIND(?d.name, ?s.name) WHERE { ?d {type: "Drug"} OPTIONAL { (?d, "has_side_effect", ?s) } } ORDER BY ?d.name"#,
    );
    assert_eq!(
        r,
        json!([
            ["Aspirin", "Ibuprofen", "Paracetamol", "Vitamin C"],
            ["Stomach Upset", null, null, null]
        ])
    );
    let r = ok(
        &n,
        r#"FIND(?d.name) WHERE { ?d {type: "Drug"} OPTIONAL { (?d, "has_side_effect", ?s) } FILTER(IS_NULL(?s)) } ORDER BY ?d.name"#,
    );
    assert_eq!(r, json!(["Ibuprofen", "Paracetamol", "Vitamin C"]));
    // A FILTER written before the OPTIONAL still sees its bindings.
    let r = ok(
        &n,
        r#"FIND(?d.name) WHERE { ?d {type: "Drug"} FILTER(IS_NOT_NULL(?s)) OPTIONAL { (?d, "has_side_effect", ?s) } }"#,
    );
    assert_eq!(r, json!(["Aspirin"]));
}

#[test]
fn not_is_a_pure_filter_with_private_variables() {
    let n = setup();
    let r = ok(
        &n,
        r#"FIND(?d.name) WHERE { ?d {type: "Drug"} NOT { ?c {name: "NSAID"} (?d, "is_class_of", ?c) } } ORDER BY ?d.name"#,
    );
    assert_eq!(r, json!(["Paracetamol", "Vitamin C"]));
    let e = err_obj(
        &n,
        r#"FIND(?d.name, ?c) WHERE { ?d {type: "Drug"} NOT { ?c {name: "NSAID"} (?d, "is_class_of", ?c) } }"#,
    );
    assert_eq!(e["code"], "KIP_3001");
}

#[test]
fn union_branches_are_independent_and_merged_with_nulls() {
    let n = setup();
    let r = sorted(ok(
        &n,
        r#"FIND(?d.name) WHERE {
        ?d {type: "Drug"} (?d, "treats", {name: "Headache"})
        UNION { ?d {type: "Drug"} (?d, "treats", {name: "Fever"}) } }"#,
    ));
    assert_eq!(
        r,
        vec![json!("Aspirin"), json!("Ibuprofen"), json!("Paracetamol")]
    );
    // External variables are not visible inside UNION: ?d there is a fresh binding.
    let r = ok(
        &n,
        r#"FIND(?d.name, ?s.name) WHERE {
        ?d {type: "Drug", name: "Vitamin C"}
        UNION { ?s {type: "Symptom", name: "Fever"} } }"#,
    );
    assert_eq!(r, json!([["Vitamin C", null], [null, "Fever"]]));
}

#[test]
fn groups_nest_arbitrarily() {
    let n = setup();
    let r = ok(
        &n,
        r#"FIND(?d.name, ?s.name) WHERE {
        ?d {type: "Drug"}
        OPTIONAL { (?d, "treats", ?s) NOT { (?d, "is_class_of", {name: "NSAID"}) } }
    } ORDER BY ?d.name, ?s.name"#,
    );
    assert_eq!(
        r,
        json!([
            ["Aspirin", "Ibuprofen", "Paracetamol", "Vitamin C"],
            [null, null, "Fever", null]
        ])
    );
}

#[test]
fn solutions_are_a_set_over_the_projection() {
    let n = setup();
    // Two drugs treat Headache: the symptom appears once.
    let r = ok(
        &n,
        r#"FIND(?s.name) WHERE { (?d, "treats", ?s) ?s {name: "Headache"} }"#,
    );
    assert_eq!(r, json!(["Headache"]));
}

#[test]
fn aggregations_with_implicit_grouping() {
    let n = setup();
    assert_eq!(
        ok(&n, r#"FIND(COUNT(?d)) WHERE { ?d {type: "Drug"} }"#),
        json!(4)
    );
    assert_eq!(
        ok(&n, r#"FIND(COUNT(?l)) WHERE { ?l (?d, "treats", ?s) }"#),
        json!(4)
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(DISTINCT ?s)) WHERE { (?d, "treats", ?s) }"#
        ),
        json!(2)
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(SUM(?d.attributes.risk_level), AVG(?d.attributes.risk_level), MIN(?d.attributes.risk_level), MAX(?d.attributes.risk_level)) WHERE { ?d {type: "Drug"} }"#
        ),
        json!([6, 2.0, 1, 3])
    );
    let r = ok(
        &n,
        r#"FIND(?s.name, COUNT(?d)) WHERE { (?d, "treats", ?s) } ORDER BY ?s.name"#,
    );
    assert_eq!(r, json!([["Fever", "Headache"], [2, 2]]));
    // COUNT counts solutions with the variable bound: OPTIONAL misses count 0.
    let r = ok(
        &n,
        r#"FIND(?d.name, COUNT(?s)) WHERE { ?d {type: "Drug"} OPTIONAL { (?d, "treats", ?s) } } ORDER BY COUNT(?s) DESC, ?d.name ASC"#,
    );
    assert_eq!(
        r,
        json!([
            ["Aspirin", "Ibuprofen", "Paracetamol", "Vitamin C"],
            [2, 1, 1, 0]
        ])
    );
    // Over zero solutions: COUNT 0, the others null.
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(?d), SUM(?d.attributes.x), MAX(?d.name)) WHERE { ?d {type: "Drug", name: "Nope"} }"#
        ),
        json!([0, null, null])
    );
}

#[test]
fn order_by_several_keys_with_nulls_last_ascending_first_descending() {
    let n = setup();
    let r = ok(
        &n,
        r#"FIND(?d.name) WHERE { ?d {type: "Drug"} } ORDER BY ?d.attributes.risk_level ASC"#,
    );
    assert_eq!(
        r,
        json!(["Paracetamol", "Aspirin", "Ibuprofen", "Vitamin C"])
    );
    let r = ok(
        &n,
        r#"FIND(?d.name) WHERE { ?d {type: "Drug"} } ORDER BY ?d.attributes.risk_level DESC"#,
    );
    assert_eq!(
        r,
        json!(["Vitamin C", "Ibuprofen", "Aspirin", "Paracetamol"])
    );
    let r = ok(
        &n,
        r#"FIND(?s.name, ?d.name) WHERE { (?d, "treats", ?s) } ORDER BY ?s.name DESC, ?d.name"#,
    );
    assert_eq!(
        r,
        json!([
            ["Headache", "Headache", "Fever", "Fever"],
            ["Aspirin", "Ibuprofen", "Aspirin", "Paracetamol"]
        ])
    );
}

fn many(n: &Nexus, count: usize) {
    let mut s = String::from("UPSERT {");
    for i in 0..count {
        s.push_str(&format!(r#" CONCEPT ?c{i} {{ {{type: "Symptom", name: "s{i:04}"}} SET ATTRIBUTES {{ i: {i} }} }}"#));
    }
    s.push('}');
    ok(n, &s);
}

fn page_through(n: &Nexus, query: &str, limit: usize) -> Vec<Value> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..1000 {
        let q = match &cursor {
            Some(c) => format!("{query} LIMIT {limit} CURSOR \"{c}\""),
            None => format!("{query} LIMIT {limit}"),
        };
        let r = run(n, &q);
        assert!(r.get("error").is_none(), "{r}");
        let page = r["result"].as_array().cloned().expect("page");
        assert!(page.len() <= limit);
        all.extend(page);
        match r.get("next_cursor").and_then(Value::as_str) {
            Some(c) => cursor = Some(c.to_string()),
            None => return all,
        }
    }
    panic!("paging did not end");
}

#[test]
fn cursor_paging_is_stable_and_complete() {
    let n = setup();
    many(&n, 57);
    for query in [
        r#"FIND(?s.name) WHERE { ?s {type: "Symptom"} }"#,
        r#"FIND(?s.name) WHERE { ?s {type: "Symptom"} } ORDER BY ?s.attributes.i DESC"#,
    ] {
        let full = ok(&n, query).as_array().cloned().expect("full");
        assert_eq!(full.len(), 60);
        for limit in [1, 7, 60, 100] {
            assert_eq!(
                page_through(&n, query, limit),
                full,
                "{query} LIMIT {limit}"
            );
        }
    }
}

#[test]
fn forged_or_foreign_cursors_are_rejected() {
    let n = setup();
    many(&n, 20);
    let r = run(
        &n,
        r#"FIND(?s.name) WHERE { ?s {type: "Symptom"} } LIMIT 5"#,
    );
    let c = r["next_cursor"].as_str().expect("cursor").to_string();
    let e = err_obj(
        &n,
        &format!(r#"FIND(?d.name) WHERE {{ ?d {{type: "Drug"}} }} LIMIT 5 CURSOR "{c}""#),
    );
    assert_eq!(e["code"], "KIP_1001");
    assert!(e["hint"].as_str().expect("hint").contains("without CURSOR"));
    assert_eq!(
        err(
            &n,
            r#"FIND(?d.name) WHERE { ?d {type: "Drug"} } CURSOR "abc""#
        ),
        "KIP_1001"
    );
    assert_eq!(
        err(&n, r#"FIND(?d.name) WHERE { ?d {type: "Drug"} } LIMIT 0"#),
        "KIP_1001"
    );
}

#[test]
fn without_limit_a_default_page_applies_with_a_cursor() {
    let mut n = setup();
    many(&n, 30);
    n.set_limits(QueryLimits {
        default_page: 10,
        ..QueryLimits::default()
    });
    let r = run(&n, r#"FIND(?s.name) WHERE { ?s {type: "Symptom"} }"#);
    assert_eq!(r["result"].as_array().expect("arr").len(), 10);
    assert!(r["next_cursor"].is_string());
}

#[test]
fn result_is_columnar() {
    let n = setup();
    let r = ok(
        &n,
        r#"FIND(?d.name, ?d.attributes.risk_level) WHERE { ?d {type: "Drug"} FILTER(?d.attributes.risk_level >= 2) } ORDER BY ?d.name"#,
    );
    assert_eq!(r, json!([["Aspirin", "Ibuprofen"], [2, 3]]));
    let r = ok(
        &n,
        r#"FIND(?d.name) WHERE { ?d {type: "Drug", name: "Aspirin"} }"#,
    );
    assert_eq!(r, json!(["Aspirin"]));
}

#[test]
fn unbound_projection_variables_are_reference_errors() {
    let n = setup();
    let e = err_obj(&n, r#"FIND(?x.name) WHERE { ?d {type: "Drug"} }"#);
    assert_eq!(e["code"], "KIP_3001");
    assert!(e["message"].as_str().expect("m").contains("?x"));
}

#[test]
fn runaway_queries_end_in_resource_errors() {
    let mut n = setup();
    many(&n, 50);
    n.set_limits(QueryLimits {
        max_work: 500,
        ..QueryLimits::default()
    });
    let e = err_obj(
        &n,
        r#"FIND(?a.name, ?b.name) WHERE { ?a {type: "Symptom"} ?b {type: "Symptom"} }"#,
    );
    assert_eq!(e["code"], "KIP_4002");
    n.set_limits(QueryLimits {
        timeout: Duration::ZERO,
        ..QueryLimits::default()
    });
    let e = err_obj(
        &n,
        r#"FIND(?a.name, ?b.name, ?c.name) WHERE { ?a {type: "Symptom"} ?b {type: "Symptom"} ?c {type: "Symptom"} } ORDER BY ?c.name"#,
    );
    assert_eq!(e["code"], "KIP_4001");
    n.set_limits(QueryLimits {
        max_rows: 100,
        ..QueryLimits::default()
    });
    let e = err_obj(
        &n,
        r#"FIND(?a.name, ?b.name) WHERE { ?a {type: "Symptom"} ?b {type: "Symptom"} } ORDER BY ?a.name"#,
    );
    assert_eq!(e["code"], "KIP_4002");
    assert!(e["hint"].as_str().expect("hint").contains("LIMIT"));
}

#[test]
fn readonly_interface_runs_queries() {
    let n = setup();
    let r = n
        .execute_json(
            &json!({"command": r#"FIND(COUNT(?d)) WHERE { ?d {type: "Drug"} }"#}),
            Access::ReadOnly,
        )
        .to_json();
    assert_eq!(r, json!({"result": 4}));
}

#[test]
fn explain_shows_the_plan_independent_of_written_order() {
    let n = setup();
    let a = n
        .explain(r#"FIND(?d.name) WHERE { ?d {type: "Drug"} (?d, "treats", ?s) ?s {type: "Symptom", name: "Headache"} }"#)
        .expect("explain");
    let b = n
        .explain(r#"FIND(?d.name) WHERE { ?s {type: "Symptom", name: "Headache"} (?d, "treats", ?s) ?d {type: "Drug"} }"#)
        .expect("explain");
    assert_eq!(a, b);
    assert!(
        a[0].contains("Headache"),
        "the selective pattern runs first: {a:?}"
    );
    // Every pattern step shows the planner's estimates: rows per input row and rows
    // after the step.
    assert!(
        a[0].contains("[est. ~1 per input row, ~1 rows after]"),
        "{a:?}"
    );
    for line in a.iter().filter(|l| l.starts_with("match")) {
        assert!(
            line.contains("est. ~") || line.contains("check of a bound variable"),
            "{line}"
        );
    }
}

#[test]
fn order_by_limit_keeps_the_best_distinct_rows_over_many_duplicates() {
    let n = setup();
    many(&n, 57);
    // 60 x 60 solutions, each projected name repeated 60 times.
    let q = r#"FIND(?s.name) WHERE { ?s {type: "Symptom"} ?t {type: "Symptom"} FILTER(IS_NOT_NULL(?s.attributes.i)) } ORDER BY ?s.attributes.i DESC"#;
    let top = ok(&n, &format!("{q} LIMIT 5"));
    assert_eq!(top, json!(["s0056", "s0055", "s0054", "s0053", "s0052"]));
    let all = ok(&n, &format!("{q} LIMIT 1000"));
    assert_eq!(all.as_array().expect("arr").len(), 57);
    assert_eq!(
        page_through(&n, q, 7),
        all.as_array().cloned().expect("arr")
    );
}
