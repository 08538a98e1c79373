//! KIP 2.0 retention and forgetting through the wire (Specification §19, §60): SET
//! RETENTION, ARCHIVE, TOMBSTONE and PURGE are not retraction and not each other.
//! Named by the conformance document's case ids where one applies.

mod common;
use common::*;
use kip_engine::{Access, Nexus};
use serde_json::{json, Value};

fn run_with(n: &Nexus, command: &str, params: Value) -> Value {
    n.execute_json(
        &json!({"kip": "2.0", "operations": [{"command": command, "parameters": params}]}),
        Access::ReadWrite,
    )
    .to_json()
}

fn ok(n: &Nexus, command: &str, params: Value) -> Value {
    let r = run_with(n, command, params);
    assert_eq!(r["status"], "succeeded", "{command}\n{r:#}");
    r["results"][0]["result"].clone()
}

fn code(r: &Value) -> String {
    r["results"][0]["error"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn seed(n: &Nexus) -> Value {
    ok(
        n,
        r#"MUTATE {
  CREATE CONCEPT ?alice { TYPE "Person" NAME "Alice" }
  CREATE CONCEPT ?dark { TYPE "Preference" NAME "Dark" }
  CREATE CONCEPT ?note { TYPE "Person" NAME "Zed the lonely" SET ATTRIBUTES { description: "unreferenced" } }
  CREATE EVIDENCE ?e { SET FIELDS { evidence_class: "user_statement", payload: "I like dark" } }
  ENSURE PROPOSITION ?p (?alice, "prefers", ?dark)
  CREATE ASSERTION ?a { SET FIELDS { proposition: ?p, asserted_by: ?alice, stance: "support", mode: "stated", confidence: 0.9 }
                        SET STRUCTURAL { ("evidence", ?e) {role: "support"} } }
}"#,
        json!({}),
    )["handles"]
        .clone()
}

#[test]
fn kip2_kml_025_archive_is_not_retraction() {
    let n = nexus();
    let h = seed(&n);
    ok(&n, "ARCHIVE :a", json!({"a": h["a"]}));
    let r = ok(
        &n,
        r#"FIND(?a.lifecycle.status, ?a._system.state) WHERE { ?a ASSERTION {state: "archived"} }"#,
        json!({}),
    );
    assert_eq!(r, json!([["active", "archived"]]));
    assert_eq!(
        ok(&n, "FIND(COUNT(?a)) WHERE { ?a ASSERTION {} }", json!({})),
        json!([0]),
        "out of ordinary recall"
    );
}

#[test]
fn kip2_kml_026_tombstone_is_not_purge() {
    let n = nexus();
    let h = seed(&n);
    ok(&n, "TOMBSTONE :c", json!({"c": h["note"]}));
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {name: "Zed the lonely"} }"#,
            json!({})
        ),
        json!([0])
    );
    let r = ok(
        &n,
        r#"FIND(?c._system.state, ?c.attributes.description) WHERE { ?c CONCEPT {name: "Zed the lonely", state: "tombstoned"} }"#,
        json!({}),
    );
    assert_eq!(r, json!([["tombstoned", "unreferenced"]]), "nothing erased");
}

#[test]
fn kip2_kml_028_referenced_evidence_purge_is_denied() {
    let n = nexus();
    let h = seed(&n);
    let r = run_with(&n, r#"PURGE :e CONFIRM "PURGE""#, json!({"e": h["e"]}));
    assert_eq!(code(&r), "PurgeDenied", "{r}");
    let r = run_with(&n, r#"PURGE :c CONFIRM "PURGE""#, json!({"c": h["alice"]}));
    assert_eq!(code(&r), "PurgeDenied");
    assert!(r["results"][0]["error"]["details"]["referenced_by"]
        .as_array()
        .is_some_and(|a| !a.is_empty()));
}

#[test]
fn a_purge_erases_the_content_and_leaves_a_stub() {
    let n = nexus();
    let h = seed(&n);
    let bad = run_with(
        &n,
        r#"PURGE :c REFERENCE POLICY "everything" CONFIRM "PURGE""#,
        json!({"c": h["note"]}),
    );
    assert_eq!(code(&bad), "ConstraintViolation");
    ok(&n, r#"PURGE :c CONFIRM "PURGE""#, json!({"c": h["note"]}));
    let stub = ok(
        &n,
        r#"FIND(?c.id, ?c.name, ?c.attributes, ?c.governance.purged, ?c.schema_ref) WHERE { ?c CONCEPT {state: "purged"} }"#,
        json!({}),
    );
    assert_eq!(
        stub,
        json!([[
            h["note"],
            null,
            null,
            true,
            "kip://profiles/cognitive-memory@2.0.0/Person"
        ]])
    );
    let digest = ok(
        &n,
        r#"FIND(?c.content_digest) WHERE { ?c CONCEPT {state: "purged"} }"#,
        json!({}),
    );
    assert!(digest[0].as_str().is_some_and(|d| d.starts_with("sha256:")));
    // Gone for KIP 1.x and for search too.
    let one_x = n
        .execute_json(
            &json!({"command": r#"FIND(?c) WHERE { ?c {type: "Person", name: "Zed the lonely"} }"#}),
            Access::ReadOnly,
        )
        .to_json();
    assert_eq!(one_x["result"], json!([]), "{one_x}");
    let search = n
        .execute_json(
            &json!({"command": r#"SEARCH CONCEPT "lonely" LIMIT 5"#}),
            Access::ReadOnly,
        )
        .to_json();
    assert!(!search.to_string().contains("Zed"), "{search}");
}

#[test]
fn set_retention_is_state_and_a_legal_hold_is_not_kml() {
    let n = nexus();
    let h = seed(&n);
    ok(
        &n,
        r#"SET RETENTION :c { retention_class: "ephemeral", expires_at: "2030-01-01T00:00:00Z" }"#,
        json!({"c": h["note"]}),
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.retention.retention_class, ?c.retention.expires_at) WHERE { ?c CONCEPT {name: "Zed the lonely"} }"#,
            json!({})
        ),
        json!([["ephemeral", "2030-01-01T00:00:00Z"]])
    );
    let hold = run_with(
        &n,
        r#"SET RETENTION :c { legal_hold: true }"#,
        json!({"c": h["note"]}),
    );
    assert_eq!(code(&hold), "ProtectedGovernanceField");
    let stale = run_with(
        &n,
        r#"SET RETENTION :c { retention_class: "standard" } EXPECT VERSION 1"#,
        json!({"c": h["note"]}),
    );
    assert_eq!(code(&stale), "VersionConflict");
}
