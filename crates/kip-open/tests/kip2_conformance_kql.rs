//! KIP 2.0 conformance cases of the KQL and META suites
//! (`spec/kip2/conformance/KIP-2.0-Conformance-Tests.md` §19 and §21) that had no test
//! of their own, through the wire (`Nexus::execute_json` with `"kip": "2.0"`), on
//! whichever backend the test matrix selects. Each test is named after its case and
//! asserts the case's normative outcome as docs/semantics.md ("KIP 2.0 on the one
//! memory") maps it onto this store. A case for a feature that is not built yet
//! (capsules, VERIFY) asserts the honest `UnsupportedCapability`
//! (`..._unsupported_for_now`).

mod common;
use common::kip2::*;
use common::nexus;
use kip_engine::Nexus;
use serde_json::{json, Value};

/// Alice (key `alice`) prefers Dark, with a user statement as evidence and Alice's own
/// assertion (confidence 0.6); Bob; the handles.
fn seed(n: &Nexus) -> Value {
    ok(
        n,
        r#"MUTATE {
  CREATE CONCEPT ?alice { TYPE "Person" NAME "Alice" SET FIELDS {key: "alice"} }
  CREATE CONCEPT ?bob { TYPE "Person" NAME "Bob" SET FIELDS {key: "bob"} }
  CREATE CONCEPT ?dark { TYPE "Preference" NAME "Dark" }
  ENSURE PROPOSITION ?p (?alice, "prefers", ?dark)
  CREATE EVIDENCE ?msg { SET FIELDS { evidence_class: "user_statement", payload: "I like dark mode" } }
  CREATE ASSERTION ?a1 { SET FIELDS { proposition: ?p, asserted_by: ?alice, stance: "support", mode: "stated", confidence: 0.6 }
                         SET STRUCTURAL { ("evidence", ?msg) {role: "support"} } }
}"#,
    )["handles"]
        .clone()
}

/// A package with the functional predicates `timezone` and `is_vegetarian` on Persons.
fn person_facts(n: &Nexus) {
    let person = "kip://profiles/cognitive-memory@2.0.0/Person";
    n.admin()
        .install_schema_package(
            &json!({
                "format": "KIP-Schema-Package",
                "manifest": {"package_id": "kip://test/core-domain", "version": "1.0.0"},
                "definitions": {"predicates": {
                    "timezone": {"kind": "PredicateType", "subject": {"concept_types": [person]},
                                 "object": {"literal_types": ["string"]}, "functional": true},
                    "is_vegetarian": {"kind": "PredicateType", "subject": {"concept_types": [person]},
                                      "object": {"literal_types": ["boolean"]}, "functional": true}
                }}
            }),
            true,
        )
        .expect("the package installs");
}

// ---- KQL suite (§19) ----

#[test]
fn kip2_kql_002_proposition_pattern_reads_raw_state() {
    let n = nexus();
    let h = seed(&n);
    let q = ok_with(
        &n,
        r#"MUTATE { ENSURE PROPOSITION ?q (:b, "prefers", :d)
  CREATE ASSERTION ?r { SET FIELDS { proposition: ?q, asserted_by: :a, stance: "reject", mode: "stated", confidence: 0.9 } } }"#,
        json!({"a": h["alice"], "b": h["bob"], "d": h["dark"]}),
    )["handles"]["q"]
        .clone();
    // Accepted, rejected: the raw pattern reads both tuples alike, as stored.
    assert_eq!(
        ok(
            &n,
            r#"FIND(?p.id, ?s.name, ?o.name) WHERE { ?p PROPOSITION (?s, "prefers", ?o) } ORDER BY ?s.name"#
        ),
        json!([[h["p"], "Alice", "Dark"], [q, "Bob", "Dark"]])
    );
    let raw = ok_with(
        &n,
        "FIND(?p) WHERE { ?p PROPOSITION (id: :q) }",
        json!({"q": q}),
    );
    assert!(
        raw[0].get("status").is_none(),
        "no belief in a raw row: {raw}"
    );
    assert_eq!(
        ok_with(
            &n,
            "FIND(?b.status) WHERE { ?p PROPOSITION (id: :q) ?b BELIEF (?p) }",
            json!({"q": q})
        ),
        json!(["rejected"])
    );
}

#[test]
fn kip2_kql_003_predicate_variable_returns_exact_ref() {
    let n = nexus();
    let h = seed(&n);
    person_facts(&n);
    ok_with(
        &n,
        r#"ENSURE PROPOSITION (:a, "timezone", "+08:00")"#,
        json!({"a": h["alice"]}),
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?r) WHERE { ?a CONCEPT {key: "alice"} ?p PROPOSITION (?a, ?r, ?o) } ORDER BY ?r"#
        ),
        json!([
            "kip://profiles/cognitive-memory@2.0.0/prefers",
            "kip://test/core-domain@1.0.0/timezone"
        ])
    );
}

#[test]
fn kip2_kql_004_assertion_pattern_works() {
    let n = nexus();
    let h = seed(&n);
    ok_with(
        &n,
        r#"CREATE ASSERTION ?x { SET FIELDS { proposition: :p, asserted_by: :b, stance: "reject", mode: "observed", confidence: 0.4 } }"#,
        json!({"p": h["p"], "b": h["bob"]}),
    );
    assert_eq!(
        ok_with(
            &n,
            r#"FIND(?a.id) WHERE { ?a ASSERTION {proposition: :p, asserted_by: :w, stance: "support", mode: "stated"} }"#,
            json!({"p": h["p"], "w": h["alice"]})
        ),
        json!([h["a1"]])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?who.name, ?a.confidence) WHERE { ?a ASSERTION {stance: "reject", mode: "observed", asserted_by: ?who} }"#
        ),
        json!([["Bob", 0.4]])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?a.id) WHERE { ?a ASSERTION {stance: "reject", mode: "stated"} }"#
        ),
        json!([])
    );
}

#[test]
fn kip2_kql_005_evidence_pattern_works() {
    let n = nexus();
    let h = seed(&n);
    ok(
        &n,
        r#"CREATE EVIDENCE ?t { SET FIELDS { evidence_class: "tool_result", payload: "200 OK" } }"#,
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?e.id, ?e.payload) WHERE { ?e EVIDENCE {evidence_class: "user_statement"} }"#
        ),
        json!([[h["msg"], "I like dark mode"]])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?e.payload) WHERE { ?e EVIDENCE {evidence_class: "tool_result"} }"#
        ),
        json!(["200 OK"])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?e.id) WHERE { ?e EVIDENCE {evidence_class: "document"} }"#
        ),
        json!([])
    );
}

#[test]
fn kip2_kql_006_activity_pattern_works() {
    let n = nexus();
    let h = ok(
        &n,
        r#"MUTATE {
  CREATE ACTIVITY ?run { SET FIELDS { activity_class: "inference", status: "running" } }
  CREATE ACTIVITY ?done { SET FIELDS { activity_class: "inference", status: "completed" } }
  CREATE ACTIVITY ?tool { SET FIELDS { activity_class: "tool_call", status: "completed" } }
}"#,
    )["handles"]
        .clone();
    assert_eq!(
        ok(
            &n,
            r#"FIND(?x.id) WHERE { ?x ACTIVITY {activity_class: "inference", status: "completed"} }"#
        ),
        json!([h["done"]])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?x.id) WHERE { ?x ACTIVITY {status: "running"} }"#
        ),
        json!([h["run"]])
    );
    assert_eq!(
        count(
            &n,
            r#"FIND(COUNT(?x)) WHERE { ?x ACTIVITY {status: "completed"} }"#
        ),
        json!(2)
    );
}

#[test]
fn kip2_kql_009_not_is_no_visible_match_not_false() {
    let n = nexus();
    seed(&n);
    person_facts(&n);
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.name) WHERE { ?c CONCEPT {type: "Person"} NOT { (?c, "is_vegetarian", true) } } ORDER BY ?c.name"#
        ),
        json!(["Alice", "Bob"])
    );
    // Query negation only: nothing was asserted or believed about vegetarianism.
    assert_eq!(
        count(&n, "FIND(COUNT(?a)) WHERE { ?a ASSERTION {} }"),
        json!(1)
    );
    assert_eq!(
        count(
            &n,
            r#"FIND(COUNT(?p)) WHERE { ?p PROPOSITION (?s, "is_vegetarian", ?o) }"#
        ),
        json!(0)
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?b.status) WHERE { ?c CONCEPT {key: "alice"} ?b BELIEF (?c, "is_vegetarian", true) }"#
        ),
        json!(["insufficient"])
    );
}

#[test]
fn kip2_kql_011_union_combines_branches() {
    let n = nexus();
    seed(&n);
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.name) WHERE { ?c CONCEPT {key: "alice"} UNION { ?c CONCEPT {key: "bob"} } } ORDER BY ?c.name"#
        ),
        json!(["Alice", "Bob"])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.name) WHERE { ?c CONCEPT {key: "alice"} UNION { ?c CONCEPT {key: "nobody"} } }"#
        ),
        json!(["Alice"])
    );
}

#[test]
fn kip2_kql_013_count_zero_is_not_negative_belief() {
    let n = nexus();
    let h = seed(&n);
    person_facts(&n);
    assert_eq!(
        count(
            &n,
            r#"FIND(COUNT(?p)) WHERE { ?b CONCEPT {key: "bob"} ?p PROPOSITION (?b, "is_vegetarian", true) }"#
        ),
        json!(0)
    );
    assert_eq!(
        ok_with(
            &n,
            r#"FIND(?b.status, ?b.proposition_id) WHERE { ?b BELIEF (:bob, "is_vegetarian", true) }"#,
            json!({"bob": h["bob"]})
        ),
        json!([["insufficient", null]]),
        "no rows is not rejected"
    );
}

#[test]
fn kip2_kql_014_order_by_honors_explicit_key() {
    let n = nexus();
    ok(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?a { TYPE "Person" NAME "Ann" SET ATTRIBUTES {age: 40} }
  CREATE CONCEPT ?b { TYPE "Person" NAME "Ben" SET ATTRIBUTES {age: 20} }
  CREATE CONCEPT ?c { TYPE "Person" NAME "Cy" SET ATTRIBUTES {age: 30} }
}"#,
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.name) WHERE { ?c CONCEPT {type: "Person"} } ORDER BY ?c.attributes.age"#
        ),
        json!(["Ben", "Cy", "Ann"])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.name, ?c.attributes.age) WHERE { ?c CONCEPT {type: "Person"} } ORDER BY ?c.attributes.age DESC"#
        ),
        json!([["Ann", 40], ["Cy", 30], ["Ben", 20]])
    );
}

#[test]
fn kip2_kql_015_null_sort_keys_order_last() {
    let n = nexus();
    ok(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?a { TYPE "Person" NAME "Ann" SET ATTRIBUTES {age: 40} }
  CREATE CONCEPT ?b { TYPE "Person" NAME "Ben" }
  CREATE CONCEPT ?c { TYPE "Person" NAME "Cy" SET ATTRIBUTES {age: 30} }
}"#,
    );
    for (dir, expected) in [
        ("ASC", ["Cy", "Ann", "Ben"]),
        ("DESC", ["Ann", "Cy", "Ben"]),
    ] {
        assert_eq!(
            ok(
                &n,
                &format!(
                    r#"FIND(?c.name) WHERE {{ ?c CONCEPT {{type: "Person"}} }} ORDER BY ?c.attributes.age {dir}"#
                )
            ),
            json!(expected),
            "{dir}"
        );
    }
}

// KIP2-KQL-016..018 (cursors): kip2_cursors.rs.

#[test]
fn kip2_kql_021_belief_slot_empty_is_insufficient() {
    let n = nexus();
    let h = seed(&n);
    person_facts(&n);
    assert_eq!(
        ok_with(
            &n,
            r#"FIND(?s.status, ?s.accepted_values, ?s.functional) WHERE { ?s BELIEF SLOT (:a, "timezone") }"#,
            json!({"a": h["alice"]})
        ),
        json!([["insufficient", [], true]])
    );
}

#[test]
fn kip2_kql_024_as_of_reconstructs_old_mutable_state() {
    let n = nexus();
    let h = seed(&n);
    ok_with(
        &n,
        r#"UPDATE :a SET ATTRIBUTES {mood: "calm"}"#,
        json!({"a": h["alice"]}),
    );
    // Seq 1 is the seed's transaction: no mood then; the present has one.
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.attributes.mood) WHERE { ?c CONCEPT {key: "alice"} } AS OF SEQ 1"#
        ),
        json!([null])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.attributes.mood) WHERE { ?c CONCEPT {key: "alice"} } AS OF SEQ 2"#
        ),
        json!(["calm"])
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.attributes.mood) WHERE { ?c CONCEPT {key: "alice"} }"#
        ),
        json!(["calm"])
    );
}

#[test]
fn kip2_kql_025_as_of_reconstructs_lifecycle() {
    let n = nexus();
    let h = seed(&n);
    let seeded = ok(&n, "SNAPSHOT");
    ok_with(&n, "RETRACT ASSERTION :a", json!({"a": h["a1"]}));
    // AS OF TIME: the last commit at or before that time (the seed's).
    assert_eq!(
        ok_with(
            &n,
            "FIND(?a.lifecycle.status) WHERE { ?a ASSERTION {} } AS OF TIME :t",
            json!({"t": seeded["committed_at"]}),
        ),
        json!(["active"])
    );
    assert_eq!(
        ok_with(
            &n,
            "FIND(?a.lifecycle.status) WHERE { ?a ASSERTION {} } AS OF TX :tx",
            json!({"tx": seeded["tx_id"]}),
        ),
        json!(["active"])
    );
    // Before the memory's history began: refused, never the present.
    let r = run(
        &n,
        r#"FIND(?a.lifecycle.status) WHERE { ?a ASSERTION {} } AS OF TIME "2020-01-01T00:00:00Z""#,
    );
    assert_eq!(
        r["results"][0]["error"]["code"], "HistoricalSnapshotUnavailable",
        "{r}"
    );
    assert_eq!(
        ok(&n, "FIND(?a.lifecycle.status) WHERE { ?a ASSERTION {} }"),
        json!(["retracted"])
    );
}

#[test]
fn kip2_kql_026_for_time_selects_world_valid_state() {
    let n = nexus();
    let h = ok(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?alice { TYPE "Person" NAME "Alice" SET FIELDS {key: "alice"} }
  CREATE CONCEPT ?berlin { TYPE "Preference" NAME "Berlin" }
  ENSURE PROPOSITION ?p (?alice, "prefers", ?berlin)
  CREATE ASSERTION ?a { SET FIELDS { proposition: ?p, asserted_by: ?alice, stance: "support", mode: "stated", confidence: 0.9,
                                     valid_time: {from: "2020-01-01T00:00:00Z", until: "2021-01-01T00:00:00Z"} } }
}"#,
    )["handles"]
        .clone();
    let belief = |tail: &str| {
        let r = run_with(
            &n,
            &format!("FIND(?b.status) WHERE {{ ?p PROPOSITION (id: :p) ?b BELIEF (?p) }}{tail}"),
            json!({"p": h["p"]}),
        );
        assert_eq!(r["status"], "succeeded", "{r}");
        r["results"][0].clone()
    };
    let now = belief("");
    let then = belief(r#" FOR TIME "2020-06-01T00:00:00Z""#);
    // The projection follows the world time asked for...
    assert_eq!(now["result"], json!(["insufficient"]), "{now}");
    assert_eq!(then["result"], json!(["accepted"]), "{then}");
    // ... on the same cognitive snapshot (no time-axis conflation).
    assert_eq!(
        now["context"]["snapshot_seq"],
        then["context"]["snapshot_seq"]
    );
    assert_eq!(then["context"]["valid_at"], "2020-06-01T00:00:00Z");
    // Both axes at once: the belief then, as the memory held it at seq 1.
    assert_eq!(
        belief(r#" AS OF SEQ 1 FOR TIME "2020-06-01T00:00:00Z""#)["result"],
        json!(["accepted"])
    );
    let bad = run_with(
        &n,
        r#"FIND(?b.status) WHERE { ?p PROPOSITION (id: :p) ?b BELIEF (?p) } FOR TIME "June""#,
        json!({"p": h["p"]}),
    );
    assert_eq!(bad["results"][0]["error"]["code"], "TypeMismatch", "{bad}");
}

#[test]
fn kip2_kql_027_historical_read_answers_under_current_governance() {
    // No element is restricted yet (governance: issue 49); a historical read answers
    // through the same visibility as a current one (docs/semantics.md "History").
    let n = nexus();
    seed(&n);
    let r = send_ro(
        &n,
        json!({"kip": "2.0", "operations": [{"command": r#"FIND(?e.payload) WHERE { ?e EVIDENCE {} } AS OF SEQ 1"#}]}),
    );
    assert_eq!(
        r["results"][0]["result"],
        json!(["I like dark mode"]),
        "{r}"
    );
    assert_eq!(r["results"][0]["context"]["snapshot_seq"], 1, "{r}");
}

#[test]
fn kip2_kql_029_kql_read_has_no_write_receipt() {
    let n = nexus();
    seed(&n);
    let r = send_ro(
        &n,
        json!({"kip": "2.0", "operations": [{"command": "FIND(COUNT(?c)) WHERE { ?c CONCEPT {} }"}]}),
    );
    assert_eq!(r["status"], "succeeded", "{r}");
    // Appendix E: a read-only response carries `"receipt": null`.
    assert!(r["receipt"].is_null(), "{r}");
    let op = &r["results"][0];
    for field in ["receipt", "tx_id", "space_seq"] {
        assert!(op.get(field).is_none(), "{field}: {r}");
        assert!(op["context"].get(field).is_none(), "{field}: {r}");
    }
}
