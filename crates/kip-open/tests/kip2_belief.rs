//! KIP 2.0 BELIEF, BELIEF SLOT and Schema Packages through the wire, on whichever
//! backend the test matrix selects. Named by the conformance document's case ids
//! (`KIP2-KQL-019`...) where one applies; the policy is the one docs/semantics.md
//! ("BELIEF") describes.

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

/// Alice, Bob and Carol; Dark and Light; the propositions Alice-prefers-Dark (?p) and
/// Alice-prefers-Light (?q), with no assertion yet.
fn seed(n: &Nexus) -> Value {
    ok(
        n,
        r#"MUTATE {
  CREATE CONCEPT ?alice { TYPE "Person" NAME "Alice" SET FIELDS {key: "alice"} }
  CREATE CONCEPT ?bob { TYPE "Person" NAME "Bob" }
  CREATE CONCEPT ?carol { TYPE "Person" NAME "Carol" }
  CREATE CONCEPT ?dark { TYPE "Preference" NAME "Dark" }
  CREATE CONCEPT ?light { TYPE "Preference" NAME "Light" }
  ENSURE PROPOSITION ?p (?alice, "prefers", ?dark)
  ENSURE PROPOSITION ?q (?alice, "prefers", ?light)
}"#,
        json!({}),
    )["handles"]
        .clone()
}

fn assert_by(n: &Nexus, h: &Value, who: &str, prop: &str, stance: &str, mode: &str, c: f64) {
    ok(
        n,
        &format!(
            r#"CREATE ASSERTION ?a {{ SET FIELDS {{ proposition: :p, asserted_by: :who, stance: "{stance}", mode: "{mode}", confidence: {c} }} }}"#
        ),
        json!({"p": h[prop], "who": h[who]}),
    );
}

fn status(n: &Nexus, h: &Value, prop: &str) -> Value {
    ok(
        n,
        "FIND(?b.status, ?b.support.score, ?b.opposition.score) WHERE { ?p PROPOSITION (id: :p) ?b BELIEF (?p) }",
        json!({"p": h[prop]}),
    )[0]
        .clone()
}

#[test]
fn kip2_core_001_and_kql_021_nothing_on_record_is_insufficient() {
    let n = nexus();
    let h = seed(&n);
    assert_eq!(status(&n, &h, "p"), json!(["insufficient", 0.0, 0.0]));
    let slot = ok(
        &n,
        r#"FIND(?s.status, ?s.accepted_values) WHERE { ?a CONCEPT {key: "alice"} ?s BELIEF SLOT (?a, "prefers") }"#,
        json!({}),
    );
    assert_eq!(slot, json!([["insufficient", []]]));
    assert_eq!(
        ok(&n, "FIND(COUNT(?a)) WHERE { ?a ASSERTION {} }", json!({})),
        json!([0]),
        "a read creates nothing (§21.2)"
    );
}

#[test]
fn kip2_kql_019_belief_is_virtual_and_follows_support_and_opposition() {
    let n = nexus();
    let h = seed(&n);
    assert_by(&n, &h, "alice", "p", "support", "stated", 0.9);
    assert_eq!(status(&n, &h, "p"), json!(["accepted", 0.9, 0.0]));
    assert_by(&n, &h, "bob", "p", "reject", "observed", 0.8);
    assert_eq!(status(&n, &h, "p")[0], "contested");
    assert_by(&n, &h, "carol", "q", "support", "inferred", 0.3);
    assert_eq!(status(&n, &h, "q")[0], "uncertain");
}

#[test]
fn one_actor_asserting_twice_is_one_root() {
    let n = nexus();
    let h = seed(&n);
    assert_by(&n, &h, "carol", "p", "support", "stated", 0.3);
    assert_by(&n, &h, "carol", "p", "support", "stated", 0.3);
    assert_eq!(status(&n, &h, "p"), json!(["uncertain", 0.3, 0.0]));
    assert_by(&n, &h, "bob", "p", "support", "stated", 0.3);
    let s = status(&n, &h, "p");
    assert_eq!(s, json!(["accepted", 0.51, 0.0]), "1 - 0.7 * 0.7");
}

#[test]
fn retracted_and_hypothetical_claims_are_not_eligible() {
    let n = nexus();
    let h = seed(&n);
    assert_by(&n, &h, "bob", "p", "support", "hypothetical", 0.9);
    assert_eq!(status(&n, &h, "p")[0], "insufficient");
    let with = ok(
        &n,
        "FIND(?b.status) WHERE { ?p PROPOSITION (id: :p) ?b BELIEF (?p) } WITH EPISTEMIC {include_hypothetical: true}",
        json!({"p": h["p"]}),
    );
    assert_eq!(with, json!(["accepted"]));
    assert_by(&n, &h, "alice", "p", "support", "stated", 0.9);
    ok(
        &n,
        r#"RETRACT ASSERTION ?a WHERE { ?a ASSERTION {mode: "stated"} }"#,
        json!({}),
    );
    assert_eq!(status(&n, &h, "p")[0], "insufficient");
}

#[test]
fn kip2_kql_020_belief_target_is_bounded() {
    let n = nexus();
    seed(&n);
    let unbound = run_with(&n, "FIND(?b) WHERE { ?b BELIEF (?nothing) }", json!({}));
    assert_eq!(code(&unbound), "ProjectionTargetUnbound");
    let whole = run_with(
        &n,
        r#"FIND(?b) WHERE { ?b BELIEF (?s, "prefers", ?o) }"#,
        json!({}),
    );
    assert_eq!(code(&whole), "ProjectionTargetUnbounded");
    let policy = run_with(
        &n,
        r#"FIND(?b) WHERE { ?p PROPOSITION (?s, "prefers", ?o) ?b BELIEF (?p) } WITH EPISTEMIC {policy: "strict"}"#,
        json!({}),
    );
    assert_eq!(code(&policy), "ProjectionPolicyUnavailable");
}

#[test]
fn a_grounded_missing_tuple_is_insufficient_and_not_created() {
    let n = nexus();
    let h = seed(&n);
    let r = ok(
        &n,
        r#"FIND(?b.status, ?b.proposition_id) WHERE { ?b BELIEF (:bob, "prefers", :dark) }"#,
        json!({"bob": h["bob"], "dark": h["dark"]}),
    );
    assert_eq!(r, json!([["insufficient", null]]));
    assert_eq!(
        ok(
            &n,
            r#"FIND(COUNT(?p)) WHERE { ?p PROPOSITION (?s, "prefers", ?o) }"#,
            json!({})
        ),
        json!([2])
    );
}

fn status_package() -> Value {
    json!({
        "format": "KIP-Schema-Package",
        "manifest": {"package_id": "kip://test/status", "version": "1.0.0"},
        "definitions": {
            "concept_types": {"Service": {"kind": "ConceptType"}, "Status": {"kind": "ConceptType"}},
            "predicates": {"status": {"kind": "PredicateType", "functional": true}}
        }
    })
}

#[test]
fn kip2_kql_022_belief_slot_detects_functional_conflict() {
    let n = nexus();
    n.admin()
        .install_schema_package(&status_package(), true)
        .expect("installs");
    let h = ok(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?svc { TYPE "Service" NAME "api" }
  CREATE CONCEPT ?up { TYPE "Status" NAME "up" }
  CREATE CONCEPT ?down { TYPE "Status" NAME "down" }
  CREATE CONCEPT ?mon { TYPE "Person" NAME "Monitor" }
  ASSERT (?svc, "status", ?up) { by: ?mon, mode: "observed", confidence: 0.9 }
}"#,
        json!({}),
    )["handles"]
        .clone();
    let slot = |n: &Nexus| {
        ok(
            n,
            "FIND(?s.status, ?s.functional) WHERE { ?s BELIEF SLOT (:svc, \"status\") }",
            json!({"svc": h["svc"]}),
        )
    };
    assert_eq!(slot(&n), json!([["accepted", true]]));
    ok(
        &n,
        r#"ASSERT (:svc, "status", :down) { by: :mon, mode: "observed", confidence: 0.9 }"#,
        json!({"svc": h["svc"], "down": h["down"], "mon": h["mon"]}),
    );
    assert_eq!(slot(&n), json!([["contested", true]]));
}

#[test]
fn kip2_schema_packages_install_once_resolve_exactly_and_refuse_shadowing() {
    let n = nexus();
    let admin = n.admin();
    assert_eq!(
        admin
            .install_schema_package(&status_package(), false)
            .expect("installs")["active"],
        json!(false)
    );
    // Installed but not active: not in the environment.
    let r = run_with(
        &n,
        r#"CREATE CONCEPT ?s { TYPE "Service" NAME "x" }"#,
        json!({}),
    );
    assert_eq!(code(&r), "SchemaSymbolNotFound");
    admin
        .install_schema_package(&status_package(), true)
        .expect("activates");
    ok(
        &n,
        r#"CREATE CONCEPT ?s { TYPE "Service" NAME "x" }"#,
        json!({}),
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?s.schema_ref) WHERE { ?s CONCEPT {type: "kip://test/status@1.0.0/Service"} }"#,
            json!({})
        ),
        json!(["kip://test/status@1.0.0/Service"])
    );
    let mut changed = status_package();
    changed["definitions"]["concept_types"]["Other"] = json!({"kind": "ConceptType"});
    assert_eq!(
        admin
            .install_schema_package(&changed, true)
            .expect_err("immutable")
            .code
            .name(),
        "ConstraintViolation"
    );
    let shadow = json!({"format": "KIP-Schema-Package", "manifest": {"package_id": "kip://test/bad", "version": "1"},
                        "definitions": {"concept_types": {"Assertion": {}}}});
    assert!(admin.install_schema_package(&shadow, true).is_err());
    // A second package defining Person makes the local name ambiguous.
    let person = json!({"format": "KIP-Schema-Package", "manifest": {"package_id": "kip://test/people", "version": "1.0.0"},
                        "definitions": {"concept_types": {"Person": {}}}});
    admin
        .install_schema_package(&person, true)
        .expect("installs");
    let amb = run_with(
        &n,
        r#"CREATE CONCEPT ?p { TYPE "Person" NAME "Y" }"#,
        json!({}),
    );
    assert_eq!(code(&amb), "SchemaSymbolAmbiguous", "{amb}");
    ok(
        &n,
        r#"CREATE CONCEPT ?p { TYPE "kip://profiles/cognitive-memory@2.0.0/Person" NAME "Y" }"#,
        json!({}),
    );
    let listed = ok(&n, "LIST SCHEMA PACKAGES", json!({}));
    assert_eq!(listed.as_array().map(Vec::len), Some(4), "{listed}");
    let env = ok(&n, "DESCRIBE SCHEMA ENVIRONMENT", json!({}));
    assert!(env["packages"]
        .as_array()
        .is_some_and(|p| p.contains(&json!("kip://test/status@1.0.0"))));
}

#[test]
fn kip2_meta_005_and_schema_016_describe_type_returns_exact_identity() {
    let n = nexus();
    let d = ok(&n, r#"DESCRIBE TYPE "Person""#, json!({}));
    assert_eq!(d["symbol"], "kip://profiles/cognitive-memory@2.0.0/Person");
    assert_eq!(d["package_ref"], "kip://profiles/cognitive-memory@2.0.0");
    let p = ok(&n, r#"DESCRIBE PREDICATE "prefers""#, json!({}));
    assert_eq!(p["symbol"], "kip://profiles/cognitive-memory@2.0.0/prefers");
    let types = ok(&n, "LIST TYPES", json!({}));
    assert!(types
        .as_array()
        .is_some_and(|t| t.iter().any(|x| x["local_name"] == "Experience")));
    let unknown = run_with(&n, r#"DESCRIBE TYPE "Spaceship""#, json!({}));
    assert_eq!(code(&unknown), "SchemaSymbolNotFound");
}

#[test]
fn kip2_meta_006_describe_ambiguous_symbol_fails() {
    let n = nexus();
    n.admin()
        .install_schema_package(
            &json!({"format": "KIP-Schema-Package", "manifest": {"package_id": "kip://test/prefs", "version": "1.0.0"},
                    "definitions": {"predicates": {"prefers": {}}}}),
            true,
        )
        .expect("installs");
    let r = run_with(&n, r#"DESCRIBE PREDICATE "prefers""#, json!({}));
    assert_eq!(code(&r), "SchemaSymbolAmbiguous", "{r}");
    let exact = ok(
        &n,
        r#"DESCRIBE PREDICATE "kip://test/prefs@1.0.0/prefers""#,
        json!({}),
    );
    assert_eq!(exact["package_ref"], "kip://test/prefs@1.0.0");
}

#[test]
fn kip2_kml_019_a_different_actor_cannot_supersede() {
    let n = nexus();
    let h = seed(&n);
    assert_by(&n, &h, "alice", "p", "support", "stated", 0.9);
    let r = run_with(
        &n,
        r#"ASSERT (:alice, "prefers", :dark) { by: :bob, mode: "stated", stance: "reject" } SUPERSEDING ?old"#,
        json!({"alice": h["alice"], "dark": h["dark"], "bob": h["bob"]}),
    );
    assert_ne!(r["status"], "succeeded");
    let r = run_with(
        &n,
        r#"MUTATE { ASSERT ?new (:alice, "prefers", :dark) { by: :bob, mode: "stated", stance: "reject" } }"#,
        json!({"alice": h["alice"], "dark": h["dark"], "bob": h["bob"]}),
    );
    let new = r["results"][0]["result"]["handles"]["new"].clone();
    let old = ok(
        &n,
        "FIND(?a.id) WHERE { ?a ASSERTION {stance: \"support\"} }",
        json!({}),
    )[0]
    .clone();
    let r = run_with(
        &n,
        "SUPERSEDE ASSERTION :old BY :new",
        json!({"old": old, "new": new}),
    );
    assert_eq!(code(&r), "SupersessionMismatch", "{r}");
    assert_eq!(status(&n, &h, "p")[0], "contested", "both claims stand");
}

#[test]
fn kip2_meta_024_readonly_accepts_preview_but_rejects_commit_kml() {
    let n = nexus();
    let kml = r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Ro" }"#;
    let p = n
        .execute_json(
            &json!({"kip": "2.0", "operations": [{"command": "PREVIEW KML :t", "parameters": {"t": kml}}]}),
            Access::ReadOnly,
        )
        .to_json();
    assert_eq!(p["results"][0]["result"]["committed"], false, "{p}");
    let w = n
        .execute_json(
            &json!({"kip": "2.0", "operations": [{"command": kml}]}),
            Access::ReadOnly,
        )
        .to_json();
    assert_eq!(code(&w), "ReadonlyViolation");
}
