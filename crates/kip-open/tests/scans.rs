//! Scans over many concepts: the merge join of a type scan with the links into it, and
//! grouping by bindings, answer exactly what the nested loop answers.

mod common;
use common::*;
use kip_open::Open;
use serde_json::{json, Value};

/// Symptoms, drugs treating them (some symptoms untreated, some drugs treating many),
/// links into a proposition and from symptoms, so the predicate's links are not all
/// into Symptoms.
fn graph(n: &kip_engine::Nexus) {
    medical_schema(n);
    let mut blocks = String::new();
    for i in 0..30 {
        blocks.push_str(&format!(
            "CONCEPT ?s{i} {{ {{type: \"Symptom\", name: \"s{i}\"}} SET ATTRIBUTES {{ w: {} }} }}\n",
            i % 4
        ));
    }
    for d in 0..40 {
        let mut links = String::new();
        for k in 0..(d % 7) {
            links.push_str(&format!("(\"treats\", ?s{}) ", (d * 3 + k * 5) % 25));
        }
        blocks.push_str(&format!(
            "CONCEPT ?d{d} {{ {{type: \"Drug\", name: \"d{d}\"}} SET PROPOSITIONS {{ {links} (\"follows\", ?s{}) }} }}\n",
            d % 30
        ));
    }
    ok(n, &format!("UPSERT {{ {blocks} }}"));
    ok(
        n,
        r#"UPSERT { CONCEPT ?x { {type: "Symptom", name: "s1"} SET PROPOSITIONS { ("follows", {type: "Drug", name: "d1"}) } } }"#,
    );
}

fn same(n: &kip_engine::Nexus, merged: &str, nested: &str) -> Value {
    let a = ok(n, merged);
    let b = ok(n, nested);
    assert_eq!(a, b, "{merged}\n{nested}");
    a
}

#[test]
fn the_merge_join_answers_what_the_nested_loop_answers() {
    let n = nexus();
    graph(&n);
    // The FILTER between the two steps keeps the nested loop.
    let counts = same(
        &n,
        r#"FIND(?s.name, COUNT(?d)) WHERE { ?s {type: "Symptom"} (?d, "treats", ?s) } ORDER BY COUNT(?d) DESC LIMIT 50"#,
        r#"FIND(?s.name, COUNT(?d)) WHERE { ?s {type: "Symptom"} FILTER(?s.name != "") (?d, "treats", ?s) } ORDER BY COUNT(?d) DESC LIMIT 50"#,
    );
    assert!(
        counts[0].as_array().is_some_and(|a| !a.is_empty()),
        "{counts}"
    );
    let plan = n
        .explain(r#"FIND(?s.name, COUNT(?d)) WHERE { ?s {type: "Symptom"} (?d, "treats", ?s) }"#)
        .expect("explain");
    assert!(plan[1].contains("merged with the scan above"), "{plan:?}");
    assert!(
        plan[2]
            .starts_with("group: COUNT of the links into each scanned concept read from the index"),
        "{plan:?}"
    );
    let plan = n
        .explain(r#"FIND(?s.name, COUNT(?d)) WHERE { ?s {type: "Symptom"} FILTER(?s.name != "") (?d, "treats", ?s) }"#)
        .expect("explain");
    assert!(!plan[2].contains("merged"), "{plan:?}");
    assert!(
        plan[3].starts_with("group: rows grouped by the bindings"),
        "{plan:?}"
    );
    same(
        &n,
        r#"FIND(?s.name, ?d.name, ?l) WHERE { ?s {type: "Symptom"} ?l (?d, "follows", ?s) }"#,
        r#"FIND(?s.name, ?d.name, ?l) WHERE { ?s {type: "Symptom"} FILTER(?s.name != "") ?l (?d, "follows", ?s) }"#,
    );
    same(
        &n,
        r#"FIND(?s.name, ?d.name) WHERE { ?s {type: "Symptom"} (?d {type: "Drug"}, "treats", ?s) FILTER(?s.attributes.w == 1) }"#,
        r#"FIND(?s.name, ?d.name) WHERE { ?s {type: "Symptom"} FILTER(?s.name != "") (?d {type: "Drug"}, "treats", ?s) FILTER(?s.attributes.w == 1) }"#,
    );
    // Streaming pages (LIMIT without ORDER BY) over the join.
    let mut cursor: Option<String> = None;
    let mut seen = Vec::new();
    loop {
        let q = match &cursor {
            None => r#"FIND(?s.name, ?d.name) WHERE { ?s {type: "Symptom"} (?d, "treats", ?s) } LIMIT 7"#.to_string(),
            Some(c) => format!(r#"FIND(?s.name, ?d.name) WHERE {{ ?s {{type: "Symptom"}} (?d, "treats", ?s) }} LIMIT 7 CURSOR "{c}""#),
        };
        let r = run(&n, &q);
        assert!(r.get("error").is_none(), "{r}");
        seen.push(r["result"].clone());
        match r["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let all = ok(
        &n,
        r#"FIND(?s.name, ?d.name) WHERE { ?s {type: "Symptom"} FILTER(?s.name != "") (?d, "treats", ?s) } LIMIT 1000"#,
    );
    let paged: usize = seen
        .iter()
        .map(|p| p[0].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(paged, all[0].as_array().map_or(0, Vec::len));
}

#[test]
fn grouping_merges_bindings_whose_keys_are_equal() {
    let n = nexus();
    graph(&n);
    // Grouped by an attribute many symptoms share: bindings merge into four groups.
    let r = ok(
        &n,
        r#"FIND(?s.attributes.w, COUNT(?d), COUNT(DISTINCT ?d), MIN(?d.name), MAX(?d.name)) WHERE { ?s {type: "Symptom"} (?d, "treats", ?s) } ORDER BY ?s.attributes.w"#,
    );
    assert_eq!(r[0], json!([0, 1, 2, 3]), "{r}");
    let total = ok(
        &n,
        r#"FIND(COUNT(?d)) WHERE { ?s {type: "Symptom"} (?d, "treats", ?s) }"#,
    );
    let sum: u64 = r[1]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).sum())
        .unwrap_or(0);
    assert_eq!(json!(sum), total);
    // Per group, each distinct count is at most the count.
    for (c, d) in r[1]
        .as_array()
        .into_iter()
        .flatten()
        .zip(r[2].as_array().into_iter().flatten())
    {
        assert!(d.as_u64() <= c.as_u64(), "{r}");
    }
}

#[test]
fn link_counts_read_from_the_index_match_the_rows() {
    let n = nexus();
    graph(&n);
    // Counted from the index (COUNT only, grouped by the scanned concept) against the
    // same query kept on rows by a FILTER between the steps.
    for (fast, rows) in [
        (
            r#"FIND(?s.name, COUNT(?d)) WHERE { ?s {type: "Symptom"} (?d, "treats", ?s) } ORDER BY COUNT(?d) DESC, ?s.name LIMIT 5"#,
            r#"FIND(?s.name, COUNT(?d)) WHERE { ?s {type: "Symptom"} FILTER(?s.name != "") (?d, "treats", ?s) } ORDER BY COUNT(?d) DESC, ?s.name LIMIT 5"#,
        ),
        (
            r#"FIND(?s.attributes.w, COUNT(?d), COUNT(?s)) WHERE { ?s {type: "Symptom"} (?d, "follows", ?s) }"#,
            r#"FIND(?s.attributes.w, COUNT(?d), COUNT(?s)) WHERE { ?s {type: "Symptom"} FILTER(?s.name != "") (?d, "follows", ?s) }"#,
        ),
        (
            r#"FIND(COUNT(?d)) WHERE { ?s {type: "Symptom"} (?d, "treats", ?s) }"#,
            r#"FIND(COUNT(?d)) WHERE { ?s {type: "Symptom"} FILTER(?s.name != "") (?d, "treats", ?s) }"#,
        ),
        (
            r#"FIND(COUNT(?d)) WHERE { ?s {type: "Symptom", name: "nobody"} (?d, "treats", ?s) }"#,
            r#"FIND(COUNT(?d)) WHERE { ?s {type: "Symptom", name: "nobody"} FILTER(?s.name != "") (?d, "treats", ?s) }"#,
        ),
        // An ORDER BY on the link's other end keeps the rows.
        (
            r#"FIND(?s.name, COUNT(?d)) WHERE { ?s {type: "Symptom"} (?d, "treats", ?s) } ORDER BY ?d.name LIMIT 50"#,
            r#"FIND(?s.name, COUNT(?d)) WHERE { ?s {type: "Symptom"} FILTER(?s.name != "") (?d, "treats", ?s) } ORDER BY ?d.name LIMIT 50"#,
        ),
    ] {
        same(&n, fast, rows);
    }
    // More than 64 links per scanned concept: one lookup per concept, counted too.
    let mut blocks = String::from(
        r#"CONCEPT ?a { {type: "DrugClass", name: "A"} } CONCEPT ?b { {type: "DrugClass", name: "B"} }"#,
    );
    for d in 0..70 {
        blocks.push_str(&format!(
            " CONCEPT ?x{d} {{ {{type: \"Drug\", name: \"c{d}\"}} SET PROPOSITIONS {{ (\"is_class_of\", ?a) {} }} }}",
            if d % 3 == 0 { "(\"is_class_of\", ?b)" } else { "" }
        ));
    }
    ok(&n, &format!("UPSERT {{ {blocks} }}"));
    let r = same(
        &n,
        r#"FIND(?k.name, COUNT(?d)) WHERE { ?k {type: "DrugClass"} (?d, "is_class_of", ?k) } ORDER BY ?k.name"#,
        r#"FIND(?k.name, COUNT(?d)) WHERE { ?k {type: "DrugClass"} FILTER(?k.name != "") (?d, "is_class_of", ?k) } ORDER BY ?k.name"#,
    );
    assert_eq!(r, json!([["A", "B"], [70, 24]]));
}

/// The shapes a PostgreSQL read transaction reads ahead (a type scan's page, then per
/// row its links and the records at their far ends), with a hub whose links are more
/// than a batch keeps per element, answer as computed here; on the test matrix's
/// PostgreSQL leg also exactly as an in-memory embedded store does.
#[test]
fn scans_with_per_row_links_and_projections_answer_exactly() {
    let load = |n: &kip_engine::Nexus| {
        ok(
            n,
            r#"UPSERT {
                CONCEPT ?k { {type: "$PropositionType", name: "knows"} SET ATTRIBUTES { description: "knows", subject_types: ["Person"], object_types: ["Person"] } }
            }"#,
        );
        let mut c = String::from("UPSERT {\n");
        for i in 0..120 {
            c.push_str(&format!(
                "CONCEPT ?p{i} {{ {{type: \"Person\", name: \"p{i:03}\"}} SET ATTRIBUTES {{ rank: {} }} }}\n",
                i % 10
            ));
        }
        // p000 knows 60 others (a hub); p(i) knows i % 4 others for i > 0.
        for j in 1..=60 {
            c.push_str(&format!(
                "PROPOSITION ?h{j} {{ (?p0, \"knows\", ?p{j}) }}\n"
            ));
        }
        for i in 1..120 {
            for k in 1..=(i % 4) {
                c.push_str(&format!(
                    "PROPOSITION ?l{i}_{k} {{ (?p{i}, \"knows\", ?p{}) }}\n",
                    (i + k * 7) % 120
                ));
            }
        }
        c.push('}');
        ok(n, &c);
    };
    let queries = [
        r#"FIND(?p.name, ?q.name) WHERE { ?p {type: "Person"} OPTIONAL { (?p, "knows", ?q) } } ORDER BY ?p.name ASC, ?q.name ASC"#,
        r#"FIND(?p.name) WHERE { ?p {type: "Person"} NOT { (?p, "knows", ?x) } } ORDER BY ?p.name ASC"#,
        r#"FIND(?p.name, COUNT(?q)) WHERE { ?p {type: "Person"} (?p, "knows", ?q) } ORDER BY COUNT(?q) DESC, ?p.name ASC LIMIT 5"#,
        r#"FIND(?q.name, COUNT(?p)) WHERE { ?q {type: "Person"} (?p, "knows", ?q) } ORDER BY COUNT(?p) DESC, ?q.name ASC LIMIT 5"#,
        r#"FIND(?p.name, ?q.attributes.rank) WHERE { ?p {type: "Person"} (?p, "knows", ?q) FILTER(?q.attributes.rank > 7) } ORDER BY ?p.name ASC, ?q.attributes.rank ASC"#,
        r#"FIND(?p.name) WHERE { ?p {type: "Person"} (?p, "knows", ?q) (?q, "knows", ?r) FILTER(?r.name == "p000") }"#,
    ];
    let n = nexus();
    load(&n);
    let answers: Vec<Value> = queries.iter().map(|q| ok(&n, q)).collect();
    // Computed: the 29 persons p004, p008, ... p116 know nobody, nor do the two
    // persons the bootstrap makes ($self, $system).
    assert_eq!(
        answers[1].as_array().map(Vec::len),
        Some(31),
        "{}",
        answers[1]
    );
    // Several columns come as columns.
    assert_eq!(answers[2][0][0], json!("p000"), "{}", answers[2]);
    assert_eq!(answers[2][1][0], json!(60), "{}", answers[2]);
    let optional_rows: usize = 2 + 60 + (1..120).map(|i| (i % 4).max(1)).sum::<usize>();
    assert_eq!(
        answers[0][0].as_array().map(Vec::len),
        Some(optional_rows),
        "{}",
        answers[0]
    );
    if kip_open::testing::on_postgres() {
        let m = kip_engine::Nexus::in_memory().expect("in-memory nexus");
        load(&m);
        for (q, a) in queries.iter().zip(&answers) {
            assert_eq!(a, &ok(&m, q), "{q}");
        }
    }
}

/// A path walk through hubs with more links than a PostgreSQL batch reads per element
/// (they are then scanned on their own, paged), forwards and backwards: every link is
/// met once, in the same order as on the embedded store.
#[test]
fn a_walk_through_hubs_meets_every_link() {
    let load = |n: &kip_engine::Nexus| {
        ok(
            n,
            r#"UPSERT {
                CONCEPT ?k { {type: "$PropositionType", name: "follows"} SET ATTRIBUTES { description: "follows", subject_types: ["*"], object_types: ["*"] } }
            }"#,
        );
        let mut c = String::from("UPSERT {\n CONCEPT ?hub { {type: \"Person\", name: \"hub\"} }\n CONCEPT ?sink { {type: \"Person\", name: \"sink\"} }\n");
        for i in 0..300 {
            c.push_str(&format!(
                "CONCEPT ?l{i} {{ {{type: \"Person\", name: \"leaf{i:03}\"}} SET PROPOSITIONS {{ (\"follows\", ?sink) }} }}\n"
            ));
            c.push_str(&format!(
                "PROPOSITION ?h{i} {{ (?hub, \"follows\", ?l{i}) }}\n"
            ));
        }
        c.push('}');
        ok(n, &c);
    };
    let queries = [
        r#"FIND(COUNT(?x)) WHERE { ({type: "Person", name: "hub"}, "follows"{1,2}, ?x) }"#,
        r#"FIND(?x.name) WHERE { ({type: "Person", name: "hub"}, "follows"{1,2}, ?x) }"#,
        r#"FIND(?x.name) WHERE { (?x, "follows"{1,2}, {type: "Person", name: "sink"}) }"#,
        r#"FIND(COUNT(?x)) WHERE { (?x, "follows"{2}, {type: "Person", name: "sink"}) }"#,
    ];
    let n = nexus();
    load(&n);
    let answers: Vec<Value> = queries.iter().map(|q| ok(&n, q)).collect();
    assert_eq!(answers[0], json!(301), "300 leaves and the sink");
    assert_eq!(answers[1].as_array().map(Vec::len), Some(301));
    assert_eq!(
        answers[2].as_array().map(Vec::len),
        Some(301),
        "300 leaves and the hub"
    );
    assert_eq!(answers[3], json!(1), "the hub, two hops before the sink");
    if kip_open::testing::on_postgres() {
        let m = kip_engine::Nexus::in_memory().expect("in-memory nexus");
        load(&m);
        for (q, a) in queries.iter().zip(&answers) {
            assert_eq!(a, &ok(&m, q), "{q}");
        }
    }
}
