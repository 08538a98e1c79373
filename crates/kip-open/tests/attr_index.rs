//! The attribute value index (`kip_store::attrs`): queries that use it answer exactly
//! what a scan answers (FILTER ranges, ORDER BY walks with LIMIT and cursors, ties,
//! values of every kind, missing values), every write path keeps it right (`kip check`
//! clean), a reopen keeps it, and `kip explain` shows it.

mod common;
use common::*;
use kip_engine::Nexus;
use kip_open::Open;
use proptest::prelude::*;
use serde_json::{json, Value};

/// Runs `cmd` with the index allowed, then with every query answered by scanning.
fn both(n: &mut Nexus, cmd: &str) -> (Value, Value) {
    let on = run(n, cmd);
    let mut limits = n.limits().clone();
    limits.attr_index = false;
    n.set_limits(limits.clone());
    let off = run(n, cmd);
    limits.attr_index = true;
    n.set_limits(limits);
    (on, off)
}

/// Every page of `cmd` (which ends in `LIMIT k`), following `next_cursor`.
fn pages(n: &Nexus, cmd: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut r = run(n, cmd);
    for _ in 0..200 {
        assert!(r.get("error").is_none(), "{cmd} => {r}");
        out.push(r["result"].clone());
        let Some(c) = r["next_cursor"].as_str() else {
            return out;
        };
        r = run(n, &format!("{cmd} CURSOR \"{c}\""));
    }
    panic!("more than 200 pages for {cmd}");
}

fn pages_both(n: &mut Nexus, cmd: &str) -> (Vec<Value>, Vec<Value>) {
    let on = pages(n, cmd);
    let mut limits = n.limits().clone();
    limits.attr_index = false;
    n.set_limits(limits.clone());
    let off = pages(n, cmd);
    limits.attr_index = true;
    n.set_limits(limits);
    (on, off)
}

fn check_clean(n: &Nexus) {
    let problems = n.admin().check_integrity().expect("check runs");
    assert!(problems.is_empty(), "{problems:?}");
}

fn docs(n: &Nexus, values: &[Value]) {
    let mut blocks = String::new();
    for (i, v) in values.iter().enumerate() {
        let attrs = if v.is_null() {
            String::from("note: \"no rank\"")
        } else {
            format!("rank: {v}, parity: {}", i % 2 == 0)
        };
        blocks.push_str(&format!(
            "CONCEPT ?d{i} {{ {{type: \"Drug\", name: \"d{i}\"}} SET ATTRIBUTES {{ {attrs} }} }}\n"
        ));
    }
    ok(n, &format!("UPSERT {{ {blocks} }}"));
}

const QUERIES: &[&str] = &[
    "FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank > 3) }",
    "FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank >= 3 && ?d.attributes.rank < 7) }",
    "FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(2.5 < ?d.attributes.rank) }",
    "FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank == 4) }",
    "FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank == \"b\") }",
    "FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank > \"a\") }",
    "FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank <= \"m\") }",
    "FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.parity == true) }",
    "FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank > 9007199254740992) }",
    "FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank > 5 && ?d.attributes.rank < 2) }",
    "FIND(?d.name, ?d.attributes.rank) WHERE { ?d {type: \"Drug\"} } ORDER BY ?d.attributes.rank DESC LIMIT 3",
    "FIND(?d.name, ?d.attributes.rank) WHERE { ?d {type: \"Drug\"} } ORDER BY ?d.attributes.rank ASC LIMIT 3",
    "FIND(?d.name) WHERE { ?d {type: \"Drug\"} } ORDER BY ?d.attributes.rank DESC, ?d.name ASC LIMIT 4",
    "FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank > 2) } ORDER BY ?d.attributes.rank DESC LIMIT 2",
    "FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.parity == false) } ORDER BY ?d.attributes.rank LIMIT 2",
    "FIND(?d.attributes.parity, COUNT(?d)) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank < 5) }",
];

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (-3i64..12).prop_map(|i| json!(i)),
        2 => (-30i64..120).prop_map(|i| json!(i as f64 / 10.0)),
        1 => prop_oneof![
            Just(json!(9007199254740993u64)),
            Just(json!(9007199254740992u64)),
            Just(json!(-0.0)),
        ],
        2 => "[a-d]{0,2}".prop_map(Value::String),
        1 => Just(json!("z".repeat(70))),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => Just(json!([1, 2])),
        1 => Just(Value::Null),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_index_answers_what_a_scan_answers(values in proptest::collection::vec(value(), 1..40)) {
        let mut n = nexus();
        medical_schema(&n);
        docs(&n, &values);
        for q in QUERIES {
            let (on, off) = both(&mut n, q);
            prop_assert_eq!(&on, &off, "{}", q);
            if q.contains("LIMIT") {
                let (on, off) = pages_both(&mut n, q);
                prop_assert_eq!(&on, &off, "{} (pages)", q);
            }
        }
        check_clean(&n);
    }
}

#[test]
fn numbers_only_take_the_ordered_walk_and_ties_stay_exact() {
    let mut n = nexus();
    medical_schema(&n);
    // Many ties at the top: the walk must read the whole tie before it stops.
    let values: Vec<Value> = (0..60).map(|i| json!(i % 5)).collect();
    docs(&n, &values);
    for q in QUERIES {
        let (on, off) = both(&mut n, q);
        assert_eq!(on, off, "{q}");
    }
    for q in QUERIES.iter().filter(|q| q.contains("LIMIT")) {
        let (on, off) = pages_both(&mut n, q);
        assert_eq!(on, off, "{q}");
    }
    let top = ok(
        &n,
        "FIND(?d.attributes.rank) WHERE { ?d {type: \"Drug\"} } ORDER BY ?d.attributes.rank DESC LIMIT 3",
    );
    // One projected column: distinct values.
    assert_eq!(top, json!([4, 3, 2]));
    let top = ok(
        &n,
        "FIND(?d.name, ?d.attributes.rank) WHERE { ?d {type: \"Drug\"} } ORDER BY ?d.attributes.rank DESC LIMIT 3",
    );
    assert_eq!(top[1], json!([4, 4, 4]));
}

/// Names of the first column of every page of `cmd`, in order.
fn paged_names(n: &Nexus, cmd: &str) -> Vec<String> {
    pages(n, cmd)
        .iter()
        .flat_map(|p| p[0].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(String::from))
        .collect()
}

#[test]
fn ties_go_by_concept_number_and_a_page_stops_after_its_last_row() {
    let mut n = nexus();
    medical_schema(&n);
    // 300 drugs: d0..d299 created in order (ascending concept numbers); ranks 7 for
    // all but the first three, which are ranked 1, 2, 3.
    let values: Vec<Value> = (0..300)
        .map(|i| json!(if i < 3 { i + 1 } else { 7 }))
        .collect();
    docs(&n, &values);
    let desc = "FIND(?d.name, ?d.attributes.rank) WHERE { ?d {type: \"Drug\"} } ORDER BY ?d.attributes.rank DESC LIMIT 3";
    let asc = "FIND(?d.name, ?d.attributes.rank) WHERE { ?d {type: \"Drug\"} } ORDER BY ?d.attributes.rank ASC LIMIT 3";
    // The name determines the row: ties follow the concept number, descending under
    // DESC (the order the index walk meets them) and ascending under ASC.
    assert_eq!(ok(&n, desc)[0], json!(["d299", "d298", "d297"]));
    assert_eq!(ok(&n, asc)[0], json!(["d0", "d1", "d2"]));
    let (on, off) = both(&mut n, desc);
    assert_eq!(on, off);
    // Paging through the whole tie: every drug exactly once, in that order, the same
    // with and without the index.
    let all_desc = paged_names(&n, desc);
    let mut expected: Vec<String> = (3..300).rev().map(|i| format!("d{i}")).collect();
    expected.extend(["d2", "d1", "d0"].map(String::from));
    assert_eq!(all_desc, expected);
    let (on, off) = pages_both(&mut n, desc);
    assert_eq!(on, off);
    let (on, off) = pages_both(&mut n, asc);
    assert_eq!(on, off);
    // The walk reads the page and stops: with a work budget far below the tie's 297
    // drugs the first page and a page from the middle of the tie still answer (a page
    // that read the whole tie would exhaust it).
    let mut limits = n.limits().clone();
    limits.max_work = 60;
    n.set_limits(limits.clone());
    let first = run(&n, desc);
    assert_eq!(
        first["result"][0],
        json!(["d299", "d298", "d297"]),
        "{first}"
    );
    let cursor = first["next_cursor"]
        .as_str()
        .expect("more pages")
        .to_string();
    let second = run(&n, &format!("{desc} CURSOR \"{cursor}\""));
    assert_eq!(
        second["result"][0],
        json!(["d296", "d295", "d294"]),
        "{second}"
    );
    // A cursor without the tie's concept number (as made before ties went by it) is
    // refused as stale rather than resumed at a place that could skip rows.
    let (hex, fp) = cursor
        .strip_prefix("kc2_")
        .and_then(|c| c.rsplit_once('_'))
        .expect("cursor shape");
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    let mut anchor: Value = serde_json::from_slice(&bytes).expect("anchor");
    assert_eq!(anchor.as_array().map(Vec::len), Some(4), "{anchor}");
    anchor.as_array_mut().expect("array").truncate(3);
    let legacy: String = anchor
        .to_string()
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    let stale = run(&n, &format!("{desc} CURSOR \"kc2_{legacy}_{fp}\""));
    assert_eq!(stale["error"]["code"], json!("KIP_1001"), "{stale}");
    // Without the index the same query reads every drug and runs out of budget.
    limits.attr_index = false;
    n.set_limits(limits);
    let scanned = run(&n, desc);
    assert_eq!(scanned["error"]["code"], json!("KIP_4002"), "{scanned}");
}

#[test]
fn explain_names_the_index_and_its_entries() {
    let n = nexus();
    medical_schema(&n);
    let values: Vec<Value> = (0..20).map(|i| json!(i)).collect();
    docs(&n, &values);
    let plan = n
        .explain("FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank > 17) }")
        .expect("explain");
    assert!(
        plan[0].contains(
            "match concept ?d {type Drug}: range of the attribute index Drug.rank where ?d.attributes.rank > 17 (2 entries)"
        ),
        "{plan:?}"
    );
    // Not selective (more than half the type): the type is scanned.
    let plan = n
        .explain("FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank > 2) }")
        .expect("explain");
    assert!(
        plan[0].contains(": scan of the type index (Drug)"),
        "{plan:?}"
    );
    // ORDER BY: the walk, when every Drug has a rank.
    let plan = n
        .explain(
            "FIND(?d.name) WHERE { ?d {type: \"Drug\"} } ORDER BY ?d.attributes.rank DESC LIMIT 3",
        )
        .expect("explain");
    assert_eq!(
        plan.last().map(String::as_str),
        Some("order by ?d.attributes.rank DESC: walk of the attribute index Drug.rank in order, stopping once the page is full"),
        "{plan:?}"
    );
    // One Drug without a rank: it sorts first descending, the index cannot place it.
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "unranked"} } }"#,
    );
    let plan = n
        .explain(
            "FIND(?d.name) WHERE { ?d {type: \"Drug\"} } ORDER BY ?d.attributes.rank DESC LIMIT 3",
        )
        .expect("explain");
    assert!(
        plan.last().is_some_and(
            |l| l.ends_with("every solution read, the best page kept (bounded buffer)")
        ),
        "{plan:?}"
    );
    // Links: the access path of each step.
    let plan = n
        .explain("FIND(?d.name, COUNT(?s)) WHERE { ?d {type: \"Drug\", name: \"d1\"} (?d, \"treats\", ?s) }")
        .expect("explain");
    assert!(
        plan[0]
            .ends_with("lookup in the (type, name) index  [est. ~1 per input row, ~1 rows after]"),
        "{plan:?}"
    );
    assert!(
        plan[1].contains(": out-links of the subject by predicate (spo index)"),
        "{plan:?}"
    );
    assert!(plan[2].starts_with("group: "), "{plan:?}");
    // An OR is not a range.
    let plan = n
        .explain("FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank > 17 || ?d.attributes.rank < 1) }")
        .expect("explain");
    assert!(!plan[0].contains("attribute index"), "{plan:?}");
}

fn ranks(n: &Nexus) -> Value {
    ok(
        n,
        "FIND(?d.name, ?d.attributes.rank) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank >= 0) } ORDER BY ?d.attributes.rank DESC LIMIT 100",
    )
}

/// The first `k` names by rank, highest first.
fn top_names(n: &Nexus, k: usize) -> Vec<String> {
    ranks(n)[0]
        .as_array()
        .map(|a| {
            a.iter()
                .take(k)
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn every_write_path_keeps_the_index() {
    let n = nexus();
    medical_schema(&n);
    docs(&n, &(0..10).map(|i| json!(i)).collect::<Vec<_>>());
    check_clean(&n);
    // UPSERT changing a value, adding one, removing one (by replacing the attributes).
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "d1"} SET ATTRIBUTES { rank: 50 } } }"#,
    );
    ok(
        &n,
        r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "new"} SET ATTRIBUTES { rank: 7.5 } } }"#,
    );
    check_clean(&n);
    assert_eq!(ranks(&n)[0][0], json!("d1"));
    // UPDATE (RC11).
    ok(
        &n,
        r#"UPDATE ?d SET ATTRIBUTES { rank: ADD(?d.attributes.rank, 100) } WHERE { ?d {type: "Drug", name: "d2"} }"#,
    );
    check_clean(&n);
    assert_eq!(top_names(&n, 2), ["d2", "d1"]);
    assert_eq!(ranks(&n)[1][0], json!(102));
    // DELETE of an attribute and of a concept.
    ok(
        &n,
        r#"DELETE ATTRIBUTES {"rank"} FROM ?d WHERE { ?d {type: "Drug", name: "d2"} }"#,
    );
    ok(
        &n,
        r#"DELETE CONCEPT ?d DETACH WHERE { ?d {type: "Drug", name: "d1"} }"#,
    );
    check_clean(&n);
    assert_eq!(ranks(&n)[0][0], json!("d9"));
    // MERGE (RC11): the source's values go, the target keeps or takes them.
    ok(
        &n,
        r#"MERGE CONCEPT ?dup INTO ?canon WHERE { ?dup {type: "Drug", name: "d8"} ?canon {type: "Drug", name: "d3"} }"#,
    );
    check_clean(&n);
    let names = ok(
        &n,
        "FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank == 8) }",
    );
    assert!(
        !names.as_array().is_some_and(|a| a.contains(&json!("d8"))),
        "{names}"
    );
    // The memory-server tools.
    let r = n.memory().call(
        "create_entities",
        &json!({"entities": [{"name": "tool-made", "entityType": "Drug", "observations": ["x"]}]}),
    );
    assert!(r.is_ok(), "{r:?}");
    let r = n
        .memory()
        .call("delete_entities", &json!({"entityNames": ["d9"]}));
    assert!(r.is_ok(), "{r:?}");
    check_clean(&n);
    // A rebuild gives the same index.
    n.admin().reindex(&mut |_, _| {}).expect("reindex");
    check_clean(&n);
    assert_eq!(top_names(&n, 3), ["new", "d7", "d6"]);
}

#[test]
fn the_index_survives_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let n = Nexus::open(dir.path()).expect("open");
        medical_schema(&n);
        docs(&n, &(0..30).map(|i| json!(i)).collect::<Vec<_>>());
        ok(
            &n,
            r#"UPSERT { CONCEPT ?a { {type: "Drug", name: "d3"} SET ATTRIBUTES { rank: 300 } } }"#,
        );
    }
    let n = Nexus::open(dir.path()).expect("reopen");
    check_clean(&n);
    assert_eq!(ranks(&n)[0][0], json!("d3"));
    let plan = n
        .explain("FIND(?d.name) WHERE { ?d {type: \"Drug\"} FILTER(?d.attributes.rank > 28) }")
        .expect("explain");
    assert!(plan[0].contains("attribute index"), "{plan:?}");
}
