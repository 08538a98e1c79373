//! KQL cursors (Specification §44.8; docs/semantics.md "KQL cursors"): a traversal
//! started with `CURSOR null` is pinned to the snapshot of its first page, bound to its
//! query, and its tokens are of their own family. On whichever backend the test matrix
//! selects.

mod common;
use common::*;
use kip_engine::{Access, Nexus};
use serde_json::{json, Value};
use std::sync::OnceLock;

fn response_schema() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let text = include_str!("../../../spec/kip2/schemas/kip-response.schema.json");
        let schema: Value = serde_json::from_str(text).expect("response schema is JSON");
        jsonschema::draft202012::new(&schema).expect("response schema compiles")
    })
}

/// Sends one operation; the response, checked against the response schema (where
/// `next_cursor` belongs).
fn send(n: &Nexus, command: &str, params: Value) -> Value {
    let request = json!({"kip": "2.0", "operations": [{"command": command, "parameters": params}]});
    let r = n.execute_json(&request, Access::ReadWrite).to_json();
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

fn code(r: &Value) -> String {
    r["results"][0]["error"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn people(n: &Nexus, names: &[&str]) {
    let mut m = String::from("MUTATE {\n");
    for (i, name) in names.iter().enumerate() {
        m.push_str(&format!(
            "  CREATE CONCEPT ?p{i} {{ TYPE \"Person\" NAME \"{name}\" }}\n"
        ));
    }
    m.push('}');
    let r = send(n, &m, json!({}));
    assert_eq!(r["status"], "succeeded", "{r:#}");
}

const PAGED: &str = r#"FIND(?p.name) WHERE { ?p {type: "Person"} FILTER(STARTS_WITH(?p.name, :prefix)) } ORDER BY ?p.name LIMIT 2 CURSOR :cursor"#;

/// Every page of the traversal: (rows, next_cursor) per page.
fn pages(n: &Nexus, prefix: &str, between: &mut dyn FnMut(usize)) -> Vec<Value> {
    let mut cursor = Value::Null;
    let mut out = Vec::new();
    for page in 0..10 {
        let r = send(n, PAGED, json!({"prefix": prefix, "cursor": cursor}));
        assert_eq!(r["status"], "succeeded", "{r:#}");
        out.push(r["results"][0]["result"].clone());
        match &r["results"][0]["next_cursor"] {
            Value::String(t) => cursor = json!(t),
            _ => return out,
        }
        between(page);
    }
    panic!("the traversal did not end");
}

#[test]
fn kip2_kql_016_kql_cursor_pins_snapshot() {
    let n = nexus();
    people(&n, &["A1", "A2", "A3", "A4", "A5"]);
    // After the first page, a new matching row that sorts first and one that sorts
    // last are committed: neither appears, nothing moves, nothing repeats.
    let seen = pages(&n, "A", &mut |page| {
        if page == 0 {
            people(&n, &["A0", "A9"]);
        }
    });
    assert_eq!(
        seen,
        vec![json!(["A1", "A2"]), json!(["A3", "A4"]), json!(["A5"])]
    );
    // A new traversal sees the present.
    let now = pages(&n, "A", &mut |_| {});
    assert_eq!(
        now.concat_rows(),
        json!(["A0", "A1", "A2", "A3", "A4", "A5", "A9"])
    );
}

trait Concat {
    fn concat_rows(&self) -> Value;
}

impl Concat for Vec<Value> {
    fn concat_rows(&self) -> Value {
        Value::Array(
            self.iter()
                .flat_map(|p| p.as_array().cloned().unwrap_or_default())
                .collect(),
        )
    }
}

#[test]
fn kip2_kql_017_cursor_query_mismatch_fails() {
    let n = nexus();
    people(&n, &["A1", "A2", "A3", "B1"]);
    let first = send(&n, PAGED, json!({"prefix": "A", "cursor": null}));
    let token = first["results"][0]["next_cursor"].clone();
    assert!(token.is_string(), "{first:#}");
    // The same text with another parameter is another query.
    let other = send(&n, PAGED, json!({"prefix": "B", "cursor": token}));
    assert_eq!(code(&other), "CursorMismatch", "{other:#}");
    // So is another text.
    let text =
        r#"FIND(?p.name) WHERE { ?p {type: "Person"} } ORDER BY ?p.name LIMIT 2 CURSOR :cursor"#;
    let other = send(&n, text, json!({"cursor": token}));
    assert_eq!(code(&other), "CursorMismatch", "{other:#}");
    // The right query continues; asking for the same page again gives the same rows.
    for _ in 0..2 {
        let next = send(&n, PAGED, json!({"prefix": "A", "cursor": token}));
        assert_eq!(next["results"][0]["result"], json!(["A3"]), "{next:#}");
        assert!(next["results"][0].get("next_cursor").is_none());
    }
}

#[test]
fn kip2_kql_018_cursor_type_mismatch_fails() {
    let n = nexus();
    people(&n, &["A1", "A2", "A3"]);
    let first = send(&n, PAGED, json!({"prefix": "A", "cursor": null}));
    let token = first["results"][0]["next_cursor"].clone();
    let search = send(
        &n,
        r#"SEARCH CONCEPT "A1" MODE "keyword" LIMIT 2 CURSOR :cursor"#,
        json!({"cursor": token}),
    );
    assert_eq!(code(&search), "CursorTypeMismatch", "{search:#}");
    // A string that is no KQL cursor given to a FIND.
    let forged = send(&n, PAGED, json!({"prefix": "A", "cursor": "page-2"}));
    assert_eq!(code(&forged), "CursorTypeMismatch", "{forged:#}");
    // A well-formed token that was never given (or has expired).
    let unknown = send(
        &n,
        PAGED,
        json!({"prefix": "A", "cursor": "kqlc_00000000000000000000000000000000"}),
    );
    assert_eq!(code(&unknown), "CursorExpired", "{unknown:#}");
}

#[test]
fn a_cursor_without_limit_pages_by_the_default_page_and_a_limit_alone_answers_no_cursor() {
    let n = nexus();
    people(&n, &["A1", "A2", "A3"]);
    let r = send(
        &n,
        r#"FIND(?p.name) WHERE { ?p {type: "Person"} } ORDER BY ?p.name CURSOR :c"#,
        json!({"c": null}),
    );
    assert_eq!(
        r["results"][0]["result"],
        json!(["A1", "A2", "A3"]),
        "{r:#}"
    );
    assert!(r["results"][0].get("next_cursor").is_none());
    let r = send(
        &n,
        r#"FIND(?p.name) WHERE { ?p {type: "Person"} } ORDER BY ?p.name LIMIT 1"#,
        json!({}),
    );
    assert_eq!(r["results"][0]["result"], json!(["A1"]));
    assert!(r["results"][0].get("next_cursor").is_none());
    let bad = send(
        &n,
        r#"FIND(?p.name) WHERE { ?p {type: "Person"} } LIMIT 1 CURSOR :c"#,
        json!({"c": 3}),
    );
    assert_eq!(code(&bad), "TypeMismatch", "{bad:#}");
}

#[test]
fn a_cursor_is_not_opened_inside_an_atomic_request() {
    let n = nexus();
    people(&n, &["A1", "A2", "A3"]);
    let request = json!({"kip": "2.0", "execution": {"mode": "atomic"}, "operations": [
        {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "A4" }"#},
        {"command": PAGED, "parameters": {"prefix": "A", "cursor": null}}
    ]});
    let r = n.execute_json(&request, Access::ReadWrite).to_json();
    assert_eq!(
        r["results"][1]["error"]["code"], "UnsupportedCapability",
        "{r:#}"
    );
    // The atomic request rolled back whole.
    let all = send(
        &n,
        r#"FIND(?p.name) WHERE { ?p {type: "Person"} } ORDER BY ?p.name"#,
        json!({}),
    );
    assert_eq!(
        all["results"][0]["result"],
        json!(["A1", "A2", "A3"]),
        "{all:#}"
    );
}
