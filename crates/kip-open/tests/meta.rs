//! META: every DESCRIBE form and shape, type-list paging, and SEARCH ranking, prefixes,
//! case, accents, CJK, WITH TYPE, LIMIT, deletions and index consistency.

mod common;
use common::*;
use kip_engine::Nexus;
use kip_engine::QueryLimits;
use serde_json::{json, Value};

fn setup() -> Nexus {
    let n = nexus();
    medical_schema(&n);
    medical_facts(&n);
    n
}

#[test]
fn describe_primer_has_identity_domain_map_and_total() {
    let n = setup();
    ok(
        &n,
        r#"UPSERT { CONCEPT ?d { {type: "Domain", name: "Medicine"} SET ATTRIBUTES { description: "Drugs and symptoms" } }
        CONCEPT ?a { {type: "Drug", name: "Aspirin"} SET PROPOSITIONS { ("belongs_to_domain", ?d) } }
        CONCEPT ?h { {type: "Symptom", name: "Headache"} SET PROPOSITIONS { ("belongs_to_domain", ?d) } } }"#,
    );
    let p = ok(&n, "DESCRIBE PRIMER");
    assert_eq!(p["identity"]["name"], "$self");
    assert!(
        p["identity"]["core_directives"]
            .as_array()
            .expect("directives")
            .len()
            >= 5
    );
    assert!(p["identity"]["core_directives"][0].is_string());
    // CoreSchema, Unsorted, Archived, System (RC11) and the test's Medical.
    assert_eq!(p["total_domains"], 5);
    let med = p["domain_map"]
        .as_array()
        .expect("map")
        .iter()
        .find(|d| d["name"] == "Medicine")
        .cloned()
        .expect("Medicine");
    assert_eq!(med["member_count"], 2);
    assert_eq!(med["description"], "Drugs and symptoms");
    // Aspirin is the most connected member; treats is its most used predicate.
    assert_eq!(
        med["key_concepts"][0],
        json!({"type": "Drug", "name": "Aspirin"})
    );
    assert_eq!(med["key_predicates"][0], "treats");
}

#[test]
fn describe_primer_stays_bounded() {
    let n = setup();
    let mut s = String::from("UPSERT {");
    for i in 0..80 {
        s.push_str(&format!(r#" CONCEPT ?d{i} {{ {{type: "Domain", name: "D{i}"}} SET ATTRIBUTES {{ description: "domain {i}" }} }}"#));
    }
    s.push('}');
    ok(&n, &s);
    let p = ok(&n, "DESCRIBE PRIMER");
    assert_eq!(p["total_domains"], 84);
    assert_eq!(p["domain_map"].as_array().expect("map").len(), 50);
}

#[test]
fn describe_domains_lists_summaries_with_member_counts() {
    let n = setup();
    let d = ok(&n, "DESCRIBE DOMAINS");
    let core = d
        .as_array()
        .expect("arr")
        .iter()
        .find(|x| x["name"] == "CoreSchema")
        .cloned()
        .expect("core");
    assert!(core["member_count"].as_u64().expect("count") >= 14);
    assert!(core["description"].is_string());
    // Membership counts follow writes and deletes.
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "Aspirin"} SET PROPOSITIONS { ("belongs_to_domain", {type: "Domain", name: "Unsorted"}) } } }"#,
    );
    let count = |n: &Nexus| {
        ok(n, "DESCRIBE DOMAINS")
            .as_array()
            .expect("arr")
            .iter()
            .find(|x| x["name"] == "Unsorted")
            .expect("u")["member_count"]
            .clone()
    };
    assert_eq!(count(&n), 1);
    ok(
        &n,
        r#"DELETE CONCEPT ?a DETACH WHERE { ?a {type: "Drug", name: "Aspirin"} }"#,
    );
    assert_eq!(count(&n), 0);
}

#[test]
fn describe_type_lists_are_sorted_names_and_page() {
    let mut n = setup();
    let all = ok(&n, "DESCRIBE CONCEPT TYPES");
    let names: Vec<String> = all
        .as_array()
        .expect("arr")
        .iter()
        .map(|v| v.as_str().expect("s").to_string())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert!(names.contains(&"Drug".to_string()) && names.contains(&"$ConceptType".to_string()));
    let preds = ok(&n, "DESCRIBE PROPOSITION TYPES");
    assert!(preds.as_array().expect("arr").contains(&json!("treats")));
    // Paging: pages concatenate to the whole list.
    let mut got = Vec::new();
    let mut q = "DESCRIBE CONCEPT TYPES LIMIT 3".to_string();
    loop {
        let r = run(&n, &q);
        got.extend(r["result"].as_array().cloned().expect("page"));
        match r["next_cursor"].as_str() {
            Some(c) => q = format!("DESCRIBE CONCEPT TYPES LIMIT 3 CURSOR \"{c}\""),
            None => break,
        }
    }
    assert_eq!(json!(got), all);
    assert_eq!(
        err(
            &n,
            r#"DESCRIBE PROPOSITION TYPES CURSOR "kc1_1_0000000000000000""#
        ),
        "KIP_1001"
    );
    n.set_limits(QueryLimits {
        default_page: 2,
        ..QueryLimits::default()
    });
    assert!(run(&n, "DESCRIBE PROPOSITION TYPES")["next_cursor"].is_string());
}

#[test]
fn describe_one_type_returns_its_definition_or_a_suggestion() {
    let n = setup();
    let d = ok(&n, r#"DESCRIBE CONCEPT TYPE "Drug""#);
    assert_eq!(d["type"], "$ConceptType");
    assert_eq!(d["name"], "Drug");
    assert_eq!(d["attributes"]["description"], "A medicine");
    let p = ok(&n, r#"DESCRIBE PROPOSITION TYPE "treats""#);
    assert_eq!(p["attributes"]["subject_types"], json!(["Drug"]));
    let e = err_obj(&n, r#"DESCRIBE CONCEPT TYPE "drug""#);
    assert_eq!(e["code"], "KIP_2001");
    assert!(e["message"].as_str().expect("m").contains("'Drug'"));
    assert_eq!(err(&n, r#"DESCRIBE PROPOSITION TYPE "treat""#), "KIP_2001");
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("arr")
        .iter()
        .map(|x| x["name"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn search_ranks_an_exact_name_above_description_mentions() {
    let n = setup();
    ok(
        &n,
        r#"UPSERT { CONCEPT ?x { {type: "Drug", name: "Aspirin Complex"} SET ATTRIBUTES { description: "contains aspirin and aspirin and vitamin C" } } }"#,
    );
    let r = ok(&n, r#"SEARCH CONCEPT "aspirin""#);
    assert_eq!(names(&r)[0], "Aspirin");
    assert!(names(&r).contains(&"Aspirin Complex".to_string()));
    let s0 = r[0]["metadata"]["_score"].as_f64().expect("score");
    let s1 = r[1]["metadata"]["_score"].as_f64().expect("score");
    assert!(s0 > s1, "{r}");
}

#[test]
fn search_finds_an_exact_name_ranked_far_behind_and_keeps_the_order_of_the_rest() {
    // 120 symptoms mention "orchid" three times in a short description: each outscores,
    // by BM25, the drug named "Orchid" whose long description never says it. The drug is
    // far outside the candidates a search reads (LIMIT 10: the best 40), yet named
    // exactly as the query it must come first; the rest keep their BM25 order and ties
    // go by concept number.
    let n = setup();
    let mut s = String::from("UPSERT {");
    for i in 0..120 {
        let tf = if i % 2 == 0 {
            "orchid orchid orchid"
        } else {
            "orchid orchid"
        };
        s.push_str(&format!(
            r#" CONCEPT ?s{i} {{ {{type: "Symptom", name: "S{i:03}"}} SET ATTRIBUTES {{ description: "{tf} rash" }} }}"#
        ));
    }
    s.push_str(r#" CONCEPT ?d { {type: "Drug", name: "Orchid"} SET ATTRIBUTES { description: "a long text about flowers that grow in greenhouses and need care, water, light and patience from their gardeners" } } }"#);
    ok(&n, &s);
    let r = ok(&n, r#"SEARCH CONCEPT "orchid""#);
    let got = names(&r);
    assert_eq!(got.len(), 10, "{r}");
    assert_eq!(got[0], "Orchid", "{r}");
    // Then the three-mention symptoms, lowest numbers first (equal scores).
    let want: Vec<String> = (0..9).map(|i| format!("S{:03}", i * 2)).collect();
    assert_eq!(&got[1..], &want[..], "{r}");
    let scores: Vec<f64> = r
        .as_array()
        .expect("arr")
        .iter()
        .map(|x| x["metadata"]["_score"].as_f64().expect("score"))
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    // WITH TYPE reads only the wanted type, wherever it ranks.
    assert_eq!(
        names(&ok(&n, r#"SEARCH CONCEPT "orchid" WITH TYPE "Drug""#)),
        vec!["Orchid"]
    );
    let symptoms = names(&ok(
        &n,
        r#"SEARCH CONCEPT "orchid" WITH TYPE "Symptom" LIMIT 3"#,
    ));
    assert_eq!(symptoms, vec!["S000", "S002", "S004"]);
}

#[test]
fn search_matches_prefixes_case_and_accents() {
    let n = setup();
    ok(
        &n,
        r#"UPSERT { CONCEPT ?x { {type: "Symptom", name: "Fièvre Légère"} } }"#,
    );
    assert_eq!(names(&ok(&n, r#"SEARCH CONCEPT "aspir""#))[0], "Aspirin");
    assert_eq!(names(&ok(&n, r#"SEARCH CONCEPT "ASPIRIN""#))[0], "Aspirin");
    assert_eq!(
        names(&ok(&n, r#"SEARCH CONCEPT "fievre legere""#))[0],
        "Fièvre Légère"
    );
    assert_eq!(
        names(&ok(&n, r#"SEARCH CONCEPT "acetylsalicylic""#)),
        vec!["Aspirin"]
    );
}

#[test]
fn search_finds_cjk_terms() {
    let n = setup();
    ok(
        &n,
        r#"UPSERT { CONCEPT ?x { {type: "Symptom", name: "Dark Mode Fatigue"} SET ATTRIBUTES { aliases: ["深色模式", "暗黑模式疲劳"] } } CONCEPT ?y { {type: "Drug", name: "阿司匹林肠溶片"} } }"#,
    );
    assert_eq!(
        names(&ok(&n, r#"SEARCH CONCEPT "深色模式""#))[0],
        "Dark Mode Fatigue"
    );
    assert_eq!(
        names(&ok(&n, r#"SEARCH CONCEPT "阿司匹林""#))[0],
        "阿司匹林肠溶片"
    );
}

#[test]
fn search_with_type_limit_and_default_limit() {
    let n = setup();
    let mut s = String::from("UPSERT {");
    for i in 0..15 {
        s.push_str(&format!(
            r#" CONCEPT ?s{i} {{ {{type: "Symptom", name: "Pain {i}"}} }}"#
        ));
    }
    s.push_str(r#" CONCEPT ?d { {type: "Drug", name: "Pain Killer"} } }"#);
    ok(&n, &s);
    assert_eq!(
        ok(&n, r#"SEARCH CONCEPT "pain""#)
            .as_array()
            .expect("arr")
            .len(),
        10
    );
    assert_eq!(
        ok(&n, r#"SEARCH CONCEPT "pain" LIMIT 3"#)
            .as_array()
            .expect("arr")
            .len(),
        3
    );
    assert_eq!(
        names(&ok(&n, r#"SEARCH CONCEPT "pain" WITH TYPE "Drug""#)),
        vec!["Pain Killer"]
    );
    assert_eq!(
        err(&n, r#"SEARCH CONCEPT "pain" WITH TYPE "drug""#),
        "KIP_2001"
    );
}

#[test]
fn search_proposition_matches_predicates_and_endpoint_names() {
    let n = setup();
    let r = ok(&n, r#"SEARCH PROPOSITION "treats" LIMIT 20"#);
    assert_eq!(r.as_array().expect("arr").len(), 4);
    assert!(r
        .as_array()
        .expect("arr")
        .iter()
        .all(|l| l["predicate"] == "treats"));
    let r = ok(
        &n,
        r#"SEARCH PROPOSITION "aspirin" WITH TYPE "is_class_of""#,
    );
    assert_eq!(r.as_array().expect("arr").len(), 1);
    assert!(r[0]["metadata"]["_score"].as_f64().expect("score") > 0.0);
}

#[test]
fn deleted_and_updated_elements_leave_the_index() {
    let n = setup();
    ok(
        &n,
        r#"DELETE CONCEPT ?d DETACH WHERE { ?d {type: "Drug", name: "Aspirin"} }"#,
    );
    assert!(!names(&ok(&n, r#"SEARCH CONCEPT "aspirin""#)).contains(&"Aspirin".to_string()));
    assert_eq!(ok(&n, r#"SEARCH PROPOSITION "aspirin""#), json!([]));
    ok(
        &n,
        r#"UPSERT { CONCEPT ?d { {type: "Drug", name: "Paracetamol"} SET ATTRIBUTES { description: "analgesic" } } }"#,
    );
    assert_eq!(
        names(&ok(&n, r#"SEARCH CONCEPT "analgesic""#)),
        vec!["Paracetamol"]
    );
    ok(
        &n,
        r#"UPSERT { CONCEPT ?d { {type: "Drug", name: "Paracetamol"} SET ATTRIBUTES { description: "antipyretic" } } }"#,
    );
    assert_eq!(ok(&n, r#"SEARCH CONCEPT "analgesic""#), json!([]));
    ok(
        &n,
        r#"DELETE ATTRIBUTES {"description"} FROM ?d WHERE { ?d {type: "Drug", name: "Paracetamol"} }"#,
    );
    assert_eq!(ok(&n, r#"SEARCH CONCEPT "antipyretic""#), json!([]));
}

#[test]
fn reindex_rebuilds_the_same_index() {
    let n = setup();
    let before = ok(&n, r#"SEARCH CONCEPT "aspirin headache fever""#);
    let mut calls = 0;
    n.admin()
        .reindex(&mut |done, total| {
            calls += 1;
            assert!(done <= total);
        })
        .expect("reindex");
    assert!(calls >= 1);
    assert_eq!(ok(&n, r#"SEARCH CONCEPT "aspirin headache fever""#), before);
}

#[test]
fn an_empty_search_term_returns_nothing() {
    let n = setup();
    assert_eq!(ok(&n, r#"SEARCH CONCEPT "  ""#), json!([]));
}
