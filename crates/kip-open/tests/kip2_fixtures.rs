//! The reference engine's cross-engine KIP 2.0 fixtures (`spec/kip2/anda-fixtures/`),
//! run through the wire (`Nexus::execute_json` with `"kip": "2.0"`, DECISIONS.md item
//! 42) with their README's normalization, on whichever backend the test matrix selects.
//!
//! Every case must either pass or be answered `UnsupportedCapability` (declared, not
//! claimed: a statement this runtime does not run yet says so); a wrong answer fails the
//! test. The number passing is a floor that only goes up as the executors land. The four
//! cases DECISIONS.md item 45 names expect the Specification's codes instead of the
//! fixture's `InvalidSyntax`.

mod common;
use common::*;
use kip_engine::{Access, Nexus};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// Cases that pass today, at least (raise it when executors land).
const PASSING_FLOOR: usize = 79;

/// DECISIONS.md item 45: the fixture expects `InvalidSyntax` for a write the grammar
/// accepts and the Specification refuses semantically.
const D45: [(&str, &str, &[&str]); 4] = [
    (
        "core-truth-neutrality",
        "an Assertion's epistemic payload cannot be edited",
        &["EpistemicRevisionRequired", "ImmutableField"],
    ),
    (
        "lifecycle",
        "an Assertion's stance cannot be rewritten in place",
        &["EpistemicRevisionRequired", "ImmutableField"],
    ),
    (
        "governance",
        "an element's Governance block is not an author-writable field",
        &["ProtectedGovernanceField"],
    ),
    (
        "governance",
        "and neither is it writable at creation",
        &["ProtectedGovernanceField"],
    ),
];

/// Engine truth the README says the harness drops: wall-clock times, transaction ids,
/// digests and search scores.
const DROPPED: [&str; 8] = [
    "created_at",
    "updated_at",
    "committed_at",
    "asserted_at",
    "tx_id",
    "digest",
    "content_digest",
    "score",
];

fn is_element_id(s: &str) -> bool {
    s.split_once(':').is_some_and(|(k, n)| {
        matches!(k, "C" | "P" | "A" | "E" | "X")
            && !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
    })
}

/// The README's normalization: element ids become `C:<1>`, `P:<2>`, ... by order of
/// first appearance; dropped fields go.
fn normalize(v: &Value, ids: &mut HashMap<String, String>) -> Value {
    match v {
        Value::String(s) if is_element_id(s) => {
            let next = ids.len() + 1;
            let kind = &s[..1];
            Value::String(
                ids.entry(s.clone())
                    .or_insert_with(|| format!("{kind}:<{next}>"))
                    .clone(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| normalize(x, ids)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| !DROPPED.contains(&k.as_str()))
                .map(|(k, x)| (k.clone(), normalize(x, ids)))
                .collect::<Map<String, Value>>(),
        ),
        other => other.clone(),
    }
}

fn same(ours: &Value, expected: &Value, ordered: bool) -> bool {
    let (a, b) = (
        normalize(ours, &mut HashMap::new()),
        normalize(expected, &mut HashMap::new()),
    );
    match (&a, &b, ordered) {
        (Value::Array(x), Value::Array(y), false) => {
            let mut x: Vec<String> = x.iter().map(Value::to_string).collect();
            let mut y: Vec<String> = y.iter().map(Value::to_string).collect();
            x.sort();
            y.sort();
            x == y
        }
        _ => a == b,
    }
}

#[derive(Debug, Default)]
struct Tally {
    passed: usize,
    unsupported: usize,
    unsupported_cases: Vec<String>,
    wrong: Vec<String>,
}

fn send(n: &Nexus, command: &str, params: &Value) -> Value {
    let mut op = json!({"command": command});
    if params.as_object().is_some_and(|p| !p.is_empty()) {
        op["parameters"] = params.clone();
    }
    n.execute_json(
        &json!({"kip": "2.0", "operations": [op]}),
        Access::ReadWrite,
    )
    .to_json()
}

fn run_fixture(file: &str, tally: &mut Tally) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../spec/kip2/anda-fixtures")
        .join(format!("{file}.json"));
    let text = std::fs::read_to_string(path).expect("fixture");
    let fixture: Value = serde_json::from_str(&text).expect("fixture JSON");
    let n = nexus();
    // The README: extra packages are installed and activated (the owner's operation,
    // DECISIONS.md item 41).
    let mut setup_ok = true;
    for pkg in fixture["packages"].as_array().into_iter().flatten() {
        setup_ok &= n.admin().install_schema_package(pkg, true).is_ok();
    }
    for cmd in fixture["setup"].as_array().into_iter().flatten() {
        let r = send(&n, cmd.as_str().unwrap_or(""), &Value::Null);
        setup_ok &= r["status"] == "succeeded";
    }
    for case in fixture["cases"].as_array().into_iter().flatten() {
        let name = case["name"].as_str().unwrap_or("");
        let r = send(&n, case["command"].as_str().unwrap_or(""), &case["params"]);
        let result = &r["results"][0];
        let code = result["error"]["code"]
            .as_str()
            .or_else(|| r["error"]["code"].as_str())
            .unwrap_or("");
        let expect = &case["expect"];
        let pass = if let Some(e) = expect.get("error").and_then(Value::as_str) {
            match D45.iter().find(|(f, c, _)| *f == file && *c == name) {
                Some((_, _, codes)) => codes.contains(&code),
                None => code == e,
            }
        } else if let Some(want) = expect.get("result") {
            r["status"] == "succeeded"
                && same(&result["result"], want, case["ordered"] == json!(true))
        } else {
            r["status"] == "succeeded"
        };
        if pass {
            tally.passed += 1;
        } else if code == "UnsupportedCapability" || !setup_ok {
            tally.unsupported += 1;
            tally.unsupported_cases.push(format!("{file}: {name}"));
        } else {
            tally.wrong.push(format!("{file}: {name}: {r}"));
        }
    }
}

#[test]
fn the_anda_fixtures_pass_or_are_declared_unsupported() {
    let mut tally = Tally::default();
    for file in [
        "core-truth-neutrality",
        "epistemic-projection",
        "governance",
        "history",
        "lifecycle",
        "mutation-selection",
        "reads",
        "transactions",
    ] {
        run_fixture(file, &mut tally);
    }
    eprintln!(
        "anda fixtures: {} passed, {} not supported yet, {} wrong",
        tally.passed,
        tally.unsupported,
        tally.wrong.len()
    );
    for c in &tally.unsupported_cases {
        eprintln!("  not supported yet: {c}");
    }
    assert!(
        tally.wrong.is_empty(),
        "wrong answers:\n{}",
        tally.wrong.join("\n")
    );
    assert_eq!(tally.passed + tally.unsupported, 80, "every case ran");
    assert!(
        tally.passed >= PASSING_FLOOR,
        "{} passed, fewer than the floor {PASSING_FLOOR}",
        tally.passed
    );
}

#[test]
fn the_normalization_renames_ids_by_first_appearance_and_drops_engine_truth() {
    let v = json!([{"id": "C:17", "of": "P:3", "created_at": "2026-01-01"}, "C:17", "P:9", "X:1a"]);
    assert_eq!(
        normalize(&v, &mut HashMap::new()),
        json!([{"id": "C:<1>", "of": "P:<2>"}, "C:<1>", "P:<3>", "X:1a"])
    );
    assert!(same(&json!(["b", "a"]), &json!(["a", "b"]), false));
    assert!(!same(&json!(["b", "a"]), &json!(["a", "b"]), true));
}
