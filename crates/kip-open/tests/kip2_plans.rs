//! How KIP 2.0 reads are planned and run (KQL §291: clause order is for readability;
//! docs/semantics.md "KIP 2.0 query planning"): the answer never depends on the order
//! patterns and FILTERs are written in, a LIMIT stops the search instead of running
//! into the row bound, ORDER BY with a LIMIT keeps the best rows in a stable order,
//! and a read that runs past its time budget says so. On whichever backend the test
//! matrix selects.

mod common;
use common::*;
use kip_engine::{Access, Nexus, QueryLimits};
use serde_json::{json, Value};
use std::time::Duration;

fn send(n: &Nexus, command: &str) -> Value {
    let request = json!({"kip": "2.0", "operations": [{"command": command}]});
    n.execute_json(&request, Access::ReadWrite).to_json()
}

/// The result of a command that must succeed.
fn ok(n: &Nexus, command: &str) -> Value {
    let r = send(n, command);
    assert_eq!(r["status"], "succeeded", "{command}\n{r:#}");
    r["results"][0]["result"].clone()
}

fn code(r: &Value) -> String {
    r["results"][0]["error"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// `count` people P00, P01, ... with `rank` i % 5; the even ones prefer Dark, every
/// third one prefers Light.
fn people(n: &Nexus, count: usize) {
    let mut m = String::from(
        "MUTATE {\n  CREATE CONCEPT ?dark { TYPE \"Preference\" NAME \"Dark\" }\n  CREATE CONCEPT ?light { TYPE \"Preference\" NAME \"Light\" }\n",
    );
    for i in 0..count {
        m.push_str(&format!(
            "  CREATE CONCEPT ?p{i} {{ TYPE \"Person\" NAME \"P{i:02}\" SET ATTRIBUTES {{ rank: {} }} }}\n",
            i % 5
        ));
        if i % 2 == 0 {
            m.push_str(&format!(
                "  ENSURE PROPOSITION (?p{i}, \"prefers\", ?dark)\n"
            ));
        }
        if i % 3 == 0 {
            m.push_str(&format!(
                "  ENSURE PROPOSITION (?p{i}, \"prefers\", ?light)\n"
            ));
        }
    }
    m.push('}');
    ok(n, &m);
}

fn sorted(v: Value) -> Vec<Value> {
    let mut items = v.as_array().cloned().unwrap_or_default();
    items.sort_by_key(|x| x.to_string());
    items
}

#[test]
fn kql_291_patterns_written_in_either_order_give_the_same_solutions() {
    let n = nexus();
    people(&n, 12);
    let forward = ok(
        &n,
        r#"FIND(?p.name) WHERE { ?d {type: "Preference", name: "Dark"} (?p, "prefers", ?d) }"#,
    );
    let reversed = ok(
        &n,
        r#"FIND(?p.name) WHERE { (?p, "prefers", ?d) ?d {type: "Preference", name: "Dark"} }"#,
    );
    assert_eq!(sorted(forward.clone()), sorted(reversed));
    assert_eq!(
        sorted(forward),
        sorted(json!(["P00", "P02", "P04", "P06", "P08", "P10"]))
    );
    // Three patterns, the selective one last.
    let both = ok(
        &n,
        r#"FIND(?p.name) WHERE { (?p, "prefers", ?l) (?p, "prefers", ?d) ?l {type: "Preference", name: "Light"} ?d {type: "Preference", name: "Dark"} }"#,
    );
    assert_eq!(sorted(both), sorted(json!(["P00", "P06"])));
}

#[test]
fn kql_291_a_filter_written_before_its_pattern_applies_to_the_solutions() {
    let n = nexus();
    people(&n, 10);
    let before = ok(
        &n,
        r#"FIND(?p.name) WHERE { FILTER(?p.attributes.rank >= 3) ?p {type: "Person"} }"#,
    );
    let after = ok(
        &n,
        r#"FIND(?p.name) WHERE { ?p {type: "Person"} FILTER(?p.attributes.rank >= 3) }"#,
    );
    assert_eq!(sorted(before.clone()), sorted(after));
    assert_eq!(sorted(before), sorted(json!(["P03", "P04", "P08", "P09"])));
    // A NOT written before the pattern binding the variable it shares.
    let not = ok(
        &n,
        r#"FIND(?p.name) WHERE { NOT { (?p, "prefers", ?x) } ?p {type: "Person"} }"#,
    );
    assert_eq!(sorted(not), sorted(json!(["P01", "P05", "P07"])));
}

#[test]
fn a_limit_stops_the_search_before_the_row_bound() {
    let mut n = nexus();
    people(&n, 30);
    n.set_limits(QueryLimits {
        max_rows: 10,
        ..QueryLimits::default()
    });
    let all = send(&n, r#"FIND(?p.name) WHERE { ?p {type: "Person"} }"#);
    assert_eq!(code(&all), "ResourceExhausted", "{all:#}");
    let some = ok(&n, r#"FIND(?p.name) WHERE { ?p {type: "Person"} } LIMIT 5"#);
    assert_eq!(some.as_array().map(Vec::len), Some(5));
    // Through a NOT and an OPTIONAL too.
    let not = ok(
        &n,
        r#"FIND(?p.name) WHERE { ?p {type: "Person"} NOT { (?p, "prefers", ?x) } } LIMIT 3"#,
    );
    assert_eq!(not, json!(["P01", "P05", "P07"]));
    let optional = ok(
        &n,
        r#"FIND(?p.name, ?x.name) WHERE { ?p {type: "Person"} OPTIONAL { (?p, "prefers", ?x) } } LIMIT 4"#,
    );
    assert_eq!(optional.as_array().map(Vec::len), Some(4));
    assert_eq!(
        ok(&n, r#"FIND(?p) WHERE { ?p {type: "Person"} } LIMIT 0"#),
        json!([])
    );
}

#[test]
fn order_by_with_a_limit_keeps_the_best_rows_and_ties_in_solution_order() {
    let n = nexus();
    people(&n, 60);
    let all = ok(
        &n,
        r#"FIND(?p.name, ?p.attributes.rank) WHERE { ?p {type: "Person"} } ORDER BY ?p.attributes.rank DESC"#,
    );
    let all = all.as_array().cloned().unwrap_or_default();
    assert_eq!(all.len(), 60);
    for k in [1, 7, 12, 13, 40] {
        let top = ok(
            &n,
            &format!(
                r#"FIND(?p.name, ?p.attributes.rank) WHERE {{ ?p {{type: "Person"}} }} ORDER BY ?p.attributes.rank DESC LIMIT {k}"#
            ),
        );
        assert_eq!(top, json!(all[..k]), "LIMIT {k}");
    }
    // Rank 4 first (twelve of them), ties in the order the solutions came.
    assert!(all[..12].iter().all(|r| r[1] == json!(4)));
    assert_eq!(all[0][0], json!("P04"));
}

#[test]
fn grouped_counts_over_many_groups_keep_first_appearance_order() {
    let n = nexus();
    people(&n, 20);
    assert_eq!(
        ok(
            &n,
            r#"FIND(?p.attributes.rank, COUNT(?p)) WHERE { ?p {type: "Person"} }"#
        ),
        json!([[0, 4], [1, 4], [2, 4], [3, 4], [4, 4]])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?x.name, COUNT(?p)) WHERE { ?x {type: "Preference"} (?p, "prefers", ?x) } ORDER BY COUNT(?p) DESC"#
        ),
        json!([["Dark", 10], ["Light", 7]])
    );
}

#[test]
fn union_branches_both_answer_and_a_limit_cuts_across_them() {
    let n = nexus();
    people(&n, 7);
    let text = r#"FIND(?p.name) WHERE { ?x {type: "Preference", name: "Dark"} (?p, "prefers", ?x) FILTER(?p.attributes.rank > 2) UNION { ?y {type: "Preference", name: "Light"} (?p, "prefers", ?y) FILTER(?p.attributes.rank > 2) } }"#;
    // Dark: P04 (rank 4); Light: P03 (rank 3).
    assert_eq!(sorted(ok(&n, text)), sorted(json!(["P04", "P03"])));
    let limited = ok(&n, &format!("{text} LIMIT 1"));
    assert_eq!(limited.as_array().map(Vec::len), Some(1));
}

#[test]
fn a_read_past_its_time_budget_is_execution_timeout() {
    let mut n = nexus();
    people(&n, 5);
    n.set_limits(QueryLimits {
        timeout: Duration::ZERO,
        ..QueryLimits::default()
    });
    let r = send(&n, r#"FIND(?p.name) WHERE { ?p {type: "Person"} }"#);
    assert_eq!(code(&r), "ExecutionTimeout", "{r:#}");
}

/// Preferences with a `rank` of every kind the attribute index orders: numbers (with
/// ties), strings and booleans; `long` adds one string too long to be indexed.
fn ranked(n: &Nexus, long: bool) {
    let ranks = [
        "3", "1", "\"b\"", "3", "true", "2.5", "\"a\"", "-4", "false", "3", "10", "1",
    ];
    let mut m = String::from("MUTATE {\n");
    for (i, r) in ranks.iter().enumerate() {
        m.push_str(&format!(
            "  CREATE CONCEPT ?c{i} {{ TYPE \"Preference\" NAME \"R{i:02}\" SET ATTRIBUTES {{ rank: {r} }} }}\n"
        ));
    }
    if long {
        m.push_str(&format!(
            "  CREATE CONCEPT ?long {{ TYPE \"Preference\" NAME \"Long\" SET ATTRIBUTES {{ rank: \"{}\" }} }}\n",
            "z".repeat(80)
        ));
    }
    m.push('}');
    ok(n, &m);
}

#[test]
fn order_by_over_the_attribute_index_agrees_with_the_full_sort_for_every_kind() {
    for long in [false, true] {
        let n = nexus();
        ranked(&n, long);
        for dir in ["ASC", "DESC"] {
            let text = format!(
                r#"FIND(?c.name, ?c.attributes.rank) WHERE {{ ?c {{type: "Preference"}} }} ORDER BY ?c.attributes.rank {dir}"#
            );
            let all = ok(&n, &text);
            let all = all.as_array().cloned().unwrap_or_default();
            assert_eq!(all.len(), 12 + usize::from(long));
            for k in [1, 2, 3, 5, 9, 12] {
                let top = ok(&n, &format!("{text} LIMIT {k}"));
                assert_eq!(top, json!(all[..k]), "{dir} LIMIT {k}, long {long}");
            }
        }
        // Numbers first, then strings, then booleans; DESC reverses it all.
        let asc = ok(
            &n,
            r#"FIND(?c.attributes.rank) WHERE { ?c {type: "Preference"} } ORDER BY ?c.attributes.rank LIMIT 12"#,
        );
        let mut expected = vec![json!(-4), json!(1), json!(1), json!(2.5), json!(3)];
        expected.extend([json!(3), json!(3), json!(10), json!("a"), json!("b")]);
        expected.extend([json!(false), json!(true)]);
        if long {
            expected.pop();
            expected.insert(10, json!("z".repeat(80)));
        }
        assert_eq!(asc, json!(expected), "long {long}");
        // Ties keep solution (creation) order in both directions.
        let ties = ok(
            &n,
            r#"FIND(?c.name) WHERE { ?c {type: "Preference"} FILTER(?c.attributes.rank == 3) } ORDER BY ?c.attributes.rank DESC LIMIT 2"#,
        );
        assert_eq!(ties, json!(["R00", "R03"]));
    }
}

#[test]
fn a_range_filter_over_the_attribute_index_finds_what_the_scan_finds() {
    let n = nexus();
    ranked(&n, true);
    for (indexed, scanned) in [
        ("?c.attributes.rank > 2", "ADD(?c.attributes.rank, 0) > 2"),
        (
            "?c.attributes.rank >= 3 && ?c.attributes.rank < 10",
            "ADD(?c.attributes.rank, 0) >= 3 && ADD(?c.attributes.rank, 0) < 10",
        ),
        ("1 == ?c.attributes.rank", "1 == ADD(?c.attributes.rank, 0)"),
        (
            "?c.attributes.rank <= -4",
            "ADD(?c.attributes.rank, 0) <= -4",
        ),
        (
            "?c.attributes.rank > 100",
            "ADD(?c.attributes.rank, 0) > 100",
        ),
        (
            "?c.attributes.rank > 5 && ?c.attributes.rank < 2",
            "ADD(?c.attributes.rank, 0) > 5 && ADD(?c.attributes.rank, 0) < 2",
        ),
    ] {
        let q = |f: &str| {
            sorted(ok(
                &n,
                &format!(r#"FIND(?c.name) WHERE {{ ?c {{type: "Preference"}} FILTER({f}) }}"#),
            ))
        };
        assert_eq!(q(indexed), q(scanned), "{indexed}");
    }
    assert_eq!(
        sorted(ok(
            &n,
            r#"FIND(?c.name) WHERE { ?c {type: "Preference"} FILTER(?c.attributes.rank > 2) }"#
        )),
        sorted(json!(["R00", "R03", "R05", "R09", "R10"]))
    );
}

#[test]
fn counts_of_elements_skip_nulls_and_distinct_counts_by_value() {
    let n = nexus();
    people(&n, 6);
    // Dark: P00, P02, P04; Light: P00, P03. One preference nobody holds counts 0.
    ok(&n, r#"CREATE CONCEPT ?x { TYPE "Preference" NAME "Loud" }"#);
    assert_eq!(
        ok(
            &n,
            r#"FIND(?x.name, COUNT(?p)) WHERE { ?x {type: "Preference"} OPTIONAL { (?p, "prefers", ?x) } } ORDER BY ?x.name"#
        ),
        json!([["Dark", 3], ["Light", 2], ["Loud", 0]])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(?p), COUNT(DISTINCT ?p)) WHERE { ?x {type: "Preference"} (?p, "prefers", ?x) }"#
        ),
        json!([[5, 4]])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(DISTINCT ?p.attributes.rank), SUM(?p.attributes.rank)) WHERE { ?p {type: "Person"} }"#
        ),
        json!([[5, 10]])
    );
}

#[test]
fn order_by_two_keys_with_a_limit_orders_ties_by_the_second_key() {
    let n = nexus();
    ranked(&n, false);
    // rank 3 is held by R00, R03, R09; by name DESC the first two of them are R09, R03.
    let text = r#"FIND(?c.name) WHERE { ?c {type: "Preference"} FILTER(?c.attributes.rank > -100) } ORDER BY ?c.attributes.rank DESC, ?c.name DESC"#;
    let all = ok(&n, text);
    assert_eq!(all[1], json!("R09"), "{all}");
    assert_eq!(all[2], json!("R03"), "{all}");
    for k in [1, 2, 3, 4] {
        let top = ok(&n, &format!("{text} LIMIT {k}"));
        assert_eq!(
            top,
            json!(all.as_array().map(|a| a[..k].to_vec())),
            "LIMIT {k}"
        );
    }
}

#[test]
fn the_largest_limit_is_no_overflow() {
    let n = nexus();
    people(&n, 3);
    let huge = u64::MAX;
    for text in [
        format!(r#"FIND(?p.name) WHERE {{ ?p {{type: "Person"}} }} ORDER BY ?p.name LIMIT {huge}"#),
        format!(r#"FIND(?p.name) WHERE {{ ?p {{type: "Person"}} }} LIMIT {huge}"#),
    ] {
        assert_eq!(ok(&n, &text).as_array().map(Vec::len), Some(3), "{text}");
    }
    let r = n
        .execute_json(
            &json!({"kip": "2.0", "operations": [{"command": format!(r#"FIND(?p.name) WHERE {{ ?p {{type: "Person"}} }} ORDER BY ?p.name LIMIT {huge} CURSOR :c"#), "parameters": {"c": null}}]}),
            Access::ReadWrite,
        )
        .to_json();
    assert_eq!(
        r["results"][0]["result"].as_array().map(Vec::len),
        Some(3),
        "{r:#}"
    );
}
