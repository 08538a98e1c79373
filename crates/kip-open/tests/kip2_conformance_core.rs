//! KIP 2.0 conformance cases of the CORE and SCHEMA suites
//! (`spec/kip2/conformance/KIP-2.0-Conformance-Tests.md` §13-14) that had no test of
//! their own, through the wire (`Nexus::execute_json` with `"kip": "2.0"`), on whichever
//! backend the test matrix selects. Each test is named after its case and asserts the
//! case's normative outcome as docs/semantics.md ("KIP 2.0 on the one memory") maps it
//! onto this store. A case for a feature that is not built yet asserts the honest
//! `UnsupportedCapability` (`..._unsupported_for_now`).

mod common;
use common::kip2::*;
use common::nexus;
use kip_engine::{Access, Nexus};
use serde_json::{json, Value};

const PERSON: &str = "kip://profiles/cognitive-memory@2.0.0/Person";

/// The canonical test package (§8) in the part these cases need: `timezone`
/// (Person → string), `works_for` (Person → Organization), `status`.
fn core_domain(version: &str) -> Value {
    json!({
        "format": "KIP-Schema-Package",
        "manifest": {"package_id": "kip://test/core-domain", "version": version},
        "definitions": {
            "concept_types": {
                "Project": {"kind": "ConceptType"},
                "Organization": {"kind": "ConceptType"}
            },
            "predicates": {
                "timezone": {"kind": "PredicateType", "subject": {"concept_types": [PERSON]},
                             "object": {"literal_types": ["string"]}, "functional": true},
                "status": {"kind": "PredicateType"},
                "works_for": {"kind": "PredicateType", "subject": {"concept_types": [PERSON]},
                              "object": {"concept_types": [format!("kip://test/core-domain@{version}/Organization")],
                                         "literal_types": []}}
            }
        }
    })
}

/// The second package of the `schema_ambiguous` fixture: another `status`.
fn secondary() -> Value {
    json!({
        "format": "KIP-Schema-Package",
        "manifest": {"package_id": "kip://test/secondary", "version": "1.0.0"},
        "definitions": {"predicates": {"status": {"kind": "PredicateType"}}}
    })
}

fn install(n: &Nexus, package: &Value) {
    n.admin()
        .install_schema_package(package, true)
        .expect("the package installs");
}

/// Alice and Bob (Persons keyed `alice`, `bob`) and the Preference Dark.
fn people(n: &Nexus) -> Value {
    ok(
        n,
        r#"MUTATE {
  CREATE CONCEPT ?alice { TYPE "Person" NAME "Alice" SET FIELDS {key: "alice"} }
  CREATE CONCEPT ?bob { TYPE "Person" NAME "Bob" SET FIELDS {key: "bob"} }
  CREATE CONCEPT ?dark { TYPE "Preference" NAME "Dark" }
}"#,
    )["handles"]
        .clone()
}

// ---- Core suite (§13) ----

#[test]
fn kip2_core_004_concurrent_ensure_converges() {
    let n = nexus();
    let h = people(&n);
    let ensure = |n: &Nexus| {
        run_with(
            n,
            r#"ENSURE PROPOSITION ?p (:a, "prefers", :d)"#,
            json!({"a": h["alice"], "d": h["dark"]}),
        )
    };
    let (one, two) = std::thread::scope(|s| {
        let a = s.spawn(|| ensure(&n));
        let b = s.spawn(|| ensure(&n));
        (a.join().expect("thread"), b.join().expect("thread"))
    });
    assert_eq!(one["status"], "succeeded", "{one}");
    assert_eq!(two["status"], "succeeded", "{two}");
    let p = &one["results"][0]["result"]["handles"]["p"];
    assert_eq!(
        p, &two["results"][0]["result"]["handles"]["p"],
        "both resolve to one canonical proposition"
    );
    assert_eq!(
        count(
            &n,
            r#"FIND(COUNT(?p)) WHERE { ?p PROPOSITION (?s, "prefers", ?o) }"#
        ),
        json!(1)
    );
}

#[test]
fn kip2_core_006_assertion_confidence_is_not_trust() {
    let n = nexus();
    let h = people(&n);
    let p = ok_with(
        &n,
        r#"ENSURE PROPOSITION ?p (:a, "prefers", :d)"#,
        json!({"a": h["alice"], "d": h["dark"]}),
    )["handles"]["p"]
        .clone();
    // The same confidence from two sources: one speaking for herself (stated), one
    // relaying what it was told (imported).
    for (who, mode) in [("alice", "stated"), ("bob", "imported")] {
        ok_with(
            &n,
            &format!(
                r#"CREATE ASSERTION ?a {{ SET FIELDS {{ proposition: :p, asserted_by: :w, stance: "support", mode: "{mode}", confidence: 0.7 }} }}"#
            ),
            json!({"p": p, "w": h[who]}),
        );
    }
    let belief = ok_with(
        &n,
        "FIND(?b.status, ?b.support.score_semantics) WHERE { ?p PROPOSITION (id: :p) ?b BELIEF (?p) }",
        json!({"p": p}),
    );
    assert_eq!(belief[0][1], "normalized_support_not_probability");
    assert_eq!(
        ok(
            &n,
            "FIND(?a.mode, ?a.confidence) WHERE { ?a ASSERTION {} } ORDER BY ?a.mode"
        ),
        json!([["imported", 0.7], ["stated", 0.7]]),
        "a projection writes nothing back into confidence"
    );
}

#[test]
fn kip2_core_011_equal_digest_does_not_force_evidence_identity() {
    let n = nexus();
    let make = |k: &str| {
        ok(
            &n,
            &format!(
                r#"CREATE EVIDENCE ?e {{ CLIENT KEY "{k}" SET FIELDS {{ evidence_class: "user_statement", payload: "ok", content_digest: "sha256:2689367b205c16ce32ed4200942b8b8b1e262dfc70d9bc9fbc77c49699a4f1df" }} }}"#
            ),
        )["handles"]["e"]
            .clone()
    };
    let first = make("message:1");
    let second = make("message:2");
    assert_ne!(first, second, "two observation events, two elements");
    assert_eq!(
        count(&n, "FIND(COUNT(?e)) WHERE { ?e EVIDENCE {} }"),
        json!(2)
    );
}

#[test]
fn kip2_core_014_activity_and_transaction_are_distinct() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "atomic", "idempotency_key": "core-014"}, "operations": [
            {"command": r#"CREATE ACTIVITY ?act { SET FIELDS { activity_class: "tool_call", status: "completed" } }"#}
        ]}),
    );
    assert_eq!(r["status"], "succeeded", "{r}");
    let act = r["results"][0]["result"]["handles"]["act"].clone();
    assert!(act.as_str().is_some_and(|s| s.starts_with("X:")), "{act}");
    // The activity is a cognitive element, read like one ...
    assert_eq!(
        ok_with(
            &n,
            "FIND(?x.kind, ?x.status) WHERE { ?x ACTIVITY {id: :x} }",
            json!({"x": act})
        ),
        json!([["activity", "completed"]])
    );
    // ... and the transaction that created it is another thing, looked up as one.
    let tx = ok(&n, r#"DESCRIBE TRANSACTION BY IDEMPOTENCY KEY "core-014""#);
    assert_eq!(tx["status"], "committed", "{tx}");
    assert_eq!(tx["result"]["created"], json!([act]));
    let unknown = run_with(&n, "DESCRIBE TRANSACTION :x", json!({"x": act}));
    assert_ne!(
        unknown["status"], "succeeded",
        "an activity id is not a transaction id: {unknown}"
    );
}

#[test]
fn kip2_core_017_facet_cannot_bypass_core() {
    let n = nexus();
    let h = people(&n);
    let p = ok_with(
        &n,
        r#"MUTATE { ENSURE PROPOSITION ?p (:a, "prefers", :d)
  CREATE ASSERTION ?x { SET FIELDS { proposition: ?p, asserted_by: :a, stance: "support", mode: "stated", confidence: 0.9 } } }"#,
        json!({"a": h["alice"], "d": h["dark"]}),
    )["handles"]
        .clone();
    for facet in [
        r#"{ _system: {origin: "forged", version: 99} }"#,
        r#"{ origin: "forged" }"#,
    ] {
        let r = run_with(
            &n,
            &format!(r#"UPDATE :a SET FACET "MnemonicState" {facet}"#),
            json!({"a": h["alice"]}),
        );
        assert_eq!(code(&r), "SchemaFieldNotFound", "{facet}: {r}");
    }
    let r = run_with(
        &n,
        r#"UPDATE :x SET FACET "MnemonicState" { proposition: :other }"#,
        json!({"x": p["x"], "other": h["bob"]}),
    );
    assert_eq!(code(&r), "EpistemicRevisionRequired", "{r}");
    let r = run_with(
        &n,
        r#"CREATE ASSERTION ?y { SET FIELDS { proposition: :p, asserted_by: :a, stance: "support", mode: "stated" } SET FACET "MnemonicState" { memory_strength: 0.5 } }"#,
        json!({"p": p["p"], "a": h["alice"]}),
    );
    assert_eq!(code(&r), "ConstraintViolation", "{r}");
    assert_eq!(
        ok_with(
            &n,
            "FIND({version: ?c._system.version, state: ?c._system.state}, ?c.facets) WHERE { ?c CONCEPT {id: :a} }",
            json!({"a": h["alice"]})
        ),
        json!([[{"version": 1, "state": "active"}, {}]])
    );
    assert_eq!(
        ok(&n, "FIND(?a.proposition) WHERE { ?a ASSERTION {} }"),
        json!([p["p"]])
    );
}

#[test]
fn kip2_core_019_retention_time_is_not_valid_time() {
    let n = nexus();
    let h = people(&n);
    let p = ok_with(
        &n,
        r#"ENSURE PROPOSITION ?p (:a, "prefers", :d)"#,
        json!({"a": h["alice"], "d": h["dark"]}),
    )["handles"]["p"]
        .clone();
    // Valid in the world during 2020 only; kept until 2030.
    let a = ok_with(
        &n,
        r#"CREATE ASSERTION ?a { SET FIELDS { proposition: :p, asserted_by: :b, stance: "support", mode: "observed", confidence: 0.9, valid_time: {from: "2020-01-01T00:00:00Z", until: "2021-01-01T00:00:00Z"} } }"#,
        json!({"p": p, "b": h["bob"]}),
    )["handles"]["a"]
        .clone();
    ok_with(
        &n,
        r#"SET RETENTION :a { retention_class: "standard", expires_at: "2030-01-01T00:00:00Z" }"#,
        json!({"a": a}),
    );
    assert_eq!(
        ok_with(
            &n,
            "FIND(?a.valid_time.until, ?a.retention.expires_at) WHERE { ?a ASSERTION {id: :a} }",
            json!({"a": a})
        ),
        json!([["2021-01-01T00:00:00Z", "2030-01-01T00:00:00Z"]]),
        "two fields, neither written into the other"
    );
    let belief = |epistemic: &str| {
        ok_with(
            &n,
            &format!(
                "FIND(?b.status) WHERE {{ ?p PROPOSITION (id: :p) ?b BELIEF (?p) }}{epistemic}"
            ),
            json!({"p": p}),
        )
    };
    // Kept (retention runs to 2030) yet not valid now: valid time decides belief.
    assert_eq!(belief(""), json!(["insufficient"]));
    assert_eq!(
        belief(r#" WITH EPISTEMIC {valid_at: "2020-06-01T00:00:00Z"}"#),
        json!(["accepted"])
    );
    // Valid time does not decide recall: the assertion is still in ordinary reads.
    assert_eq!(
        count(&n, "FIND(COUNT(?a)) WHERE { ?a ASSERTION {} }"),
        json!(1)
    );
}

/// Alice and her duplicate Alice-2 each prefer Dark, asserted by Alice and by Bob; the
/// handles.
fn duplicates(n: &Nexus) -> Value {
    ok(
        n,
        r#"MUTATE {
  CREATE CONCEPT ?alice { TYPE "Person" NAME "Alice" SET FIELDS {key: "alice"} }
  CREATE CONCEPT ?alice2 { TYPE "Person" NAME "Alice B" SET FIELDS {key: "alice-2"} }
  CREATE CONCEPT ?bob { TYPE "Person" NAME "Bob" SET FIELDS {key: "bob"} }
  CREATE CONCEPT ?dark { TYPE "Preference" NAME "Dark" }
  ENSURE PROPOSITION ?p (?alice, "prefers", ?dark)
  ENSURE PROPOSITION ?q (?alice2, "prefers", ?dark)
  CREATE ASSERTION ?a1 { SET FIELDS { proposition: ?p, asserted_by: ?alice, stance: "support", mode: "stated", confidence: 0.6 } }
  CREATE ASSERTION ?a2 { SET FIELDS { proposition: ?q, asserted_by: ?bob, stance: "support", mode: "observed", confidence: 0.8 } }
}"#,
    )["handles"]
        .clone()
}

#[test]
fn kip2_core_021_merge_preserves_raw_historical_endpoint() {
    let n = nexus();
    let h = duplicates(&n);
    ok_with(
        &n,
        "MERGE CONCEPT :s INTO :t",
        json!({"s": h["alice2"], "t": h["alice"]}),
    );
    // The old proposition still names the merged source ...
    assert_eq!(
        ok_with(
            &n,
            "FIND(?p.subject) WHERE { ?p PROPOSITION (id: :q) }",
            json!({"q": h["q"]})
        ),
        json!([h["alice2"]])
    );
    // ... while a new write that resolves the source's key lands on the target.
    let w = ok(
        &n,
        r#"MUTATE {
  UPSERT CONCEPT ?x { MATCH {type: "Person", key: "alice-2"} }
  CREATE CONCEPT ?l { TYPE "Preference" NAME "Light" }
  ENSURE PROPOSITION ?n (?x, "prefers", ?l)
}"#,
    )["handles"]
        .clone();
    assert_eq!(w["x"], h["alice"]);
    assert_eq!(
        ok_with(
            &n,
            "FIND(?p.subject) WHERE { ?p PROPOSITION (id: :n) }",
            json!({"n": w["n"]})
        ),
        json!([h["alice"]])
    );
}

#[test]
fn kip2_core_022_merge_collision_preserves_assertion_history() {
    let n = nexus();
    let h = duplicates(&n);
    ok_with(
        &n,
        "MERGE CONCEPT :s INTO :t",
        json!({"s": h["alice2"], "t": h["alice"]}),
    );
    // (Alice, prefers, Dark) and (Alice-2, prefers, Dark) now mean one tuple; each
    // proposition and each assertion with its own provenance stays addressable.
    assert_eq!(
        ok(
            &n,
            "FIND(?a.id, ?a.proposition, ?a.asserted_by, ?a.confidence) WHERE { ?a ASSERTION {} } ORDER BY ?a.confidence"
        ),
        json!([
            [h["a1"], h["p"], h["alice"], 0.6],
            [h["a2"], h["q"], h["bob"], 0.8]
        ])
    );
    assert_eq!(
        count(
            &n,
            r#"FIND(COUNT(?p)) WHERE { ?p PROPOSITION (?s, "prefers", ?o) }"#
        ),
        json!(2)
    );
}

// ---- Schema suite (§14) ----

#[test]
fn kip2_schema_001_durable_concept_schema_ref_is_exact_versioned() {
    let n = nexus();
    let h = people(&n);
    assert_eq!(
        ok_with(
            &n,
            "FIND(?c.type, ?c.schema_ref) WHERE { ?c CONCEPT {id: :a} }",
            json!({"a": h["alice"]})
        ),
        json!([["Person", PERSON]])
    );
    // The exact symbol selects it too.
    assert_eq!(
        ok(
            &n,
            &format!(
                r#"FIND(?c.name) WHERE {{ ?c CONCEPT {{type: "{PERSON}"}} }} ORDER BY ?c.name"#
            )
        ),
        json!(["Alice", "Bob"])
    );
}

#[test]
fn kip2_schema_002_durable_predicate_ref_is_exact_versioned() {
    let n = nexus();
    install(&n, &core_domain("1.0.0"));
    let h = people(&n);
    ok_with(
        &n,
        r#"ENSURE PROPOSITION ?p (:a, "timezone", "+08:00")"#,
        json!({"a": h["alice"]}),
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?p.predicate_ref, ?r) WHERE { ?p PROPOSITION (?s, ?r, "+08:00") }"#
        ),
        json!([[
            "kip://test/core-domain@1.0.0/timezone",
            "kip://test/core-domain@1.0.0/timezone"
        ]])
    );
}

#[test]
fn kip2_schema_003_ambiguous_alias_fails() {
    let n = nexus();
    install(&n, &core_domain("1.0.0"));
    install(&n, &secondary());
    let h = people(&n);
    let r = run_with(
        &n,
        r#"ENSURE PROPOSITION ?p (:a, "status", "ok")"#,
        json!({"a": h["alice"]}),
    );
    assert_eq!(code(&r), "SchemaSymbolAmbiguous", "{r}");
    assert_eq!(
        count(&n, "FIND(COUNT(?p)) WHERE { ?p PROPOSITION (?s, ?r, ?o) }"),
        json!(0),
        "no package was guessed"
    );
}

#[test]
fn kip2_schema_004_exact_ref_succeeds_under_ambiguity() {
    let n = nexus();
    install(&n, &core_domain("1.0.0"));
    install(&n, &secondary());
    let h = people(&n);
    ok_with(
        &n,
        r#"ENSURE PROPOSITION ?p (:a, "kip://test/secondary@1.0.0/status", "ok")"#,
        json!({"a": h["alice"]}),
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?p.predicate_ref) WHERE { ?p PROPOSITION (?s, "kip://test/secondary@1.0.0/status", ?o) }"#
        ),
        json!(["kip://test/secondary@1.0.0/status"])
    );
    assert_eq!(
        ok(
            &n,
            r#"DESCRIBE PREDICATE "kip://test/secondary@1.0.0/status""#
        )["package_ref"],
        "kip://test/secondary@1.0.0"
    );
}

#[test]
fn kip2_schema_005_subject_type_constraint_enforced() {
    let n = nexus();
    install(&n, &core_domain("1.0.0"));
    let project = ok(
        &n,
        r#"CREATE CONCEPT ?x { TYPE "Project" NAME "Alpha" SET FIELDS {key: "project:alpha"} }"#,
    )["handles"]["x"]
        .clone();
    let r = run_with(
        &n,
        r#"ENSURE PROPOSITION ?p (:x, "timezone", "+08")"#,
        json!({"x": project}),
    );
    assert!(
        ["ConstraintViolation", "TypeMismatch"].contains(&code(&r).as_str()),
        "{r}"
    );
    assert_eq!(
        count(&n, "FIND(COUNT(?p)) WHERE { ?p PROPOSITION (?s, ?r, ?o) }"),
        json!(0)
    );
}

#[test]
fn kip2_schema_007_structural_target_constraint_enforced() {
    let n = nexus();
    install(&n, &core_domain("1.0.0"));
    let h = ok(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?exp { TYPE "Experience" NAME "Deploy" SET ATTRIBUTES { goal: "ship", outcome_status: "success" } }
  CREATE CONCEPT ?org { TYPE "Organization" NAME "Acme" }
}"#,
    )["handles"]
        .clone();
    let r = run_with(
        &n,
        r#"UPDATE :e SET STRUCTURAL { ("has_step", :o) }"#,
        json!({"e": h["exp"], "o": h["org"]}),
    );
    assert_eq!(code(&r), "StructuralReferenceInvalid", "{r}");
    assert_eq!(
        count(
            &n,
            r#"FIND(COUNT(?s)) WHERE { ?e CONCEPT {name: "Deploy"} STRUCTURAL (?e, "has_step", ?s) }"#
        ),
        json!(0)
    );
}

#[test]
fn kip2_schema_008_unknown_facet_field_rejected() {
    let n = nexus();
    let h = people(&n);
    let r = run_with(
        &n,
        r#"UPDATE :a SET FACET "MnemonicState" { mood: "ok" }"#,
        json!({"a": h["alice"]}),
    );
    assert_eq!(code(&r), "SchemaFieldNotFound", "{r}");
    let r = run(
        &n,
        r#"CREATE CONCEPT ?p { TYPE "Person" NAME "P" SET FACET "MnemonicState" {mood: "ok"} }"#,
    );
    assert_eq!(code(&r), "SchemaFieldNotFound", "{r}");
    assert_eq!(
        ok_with(
            &n,
            "FIND(?c.facets) WHERE { ?c CONCEPT {id: :a} }",
            json!({"a": h["alice"]})
        ),
        json!([{}])
    );
}

#[test]
fn kip2_schema_009_schema_cannot_authorize_governance() {
    let n = nexus();
    let caps = |access: Access| {
        n.execute_json(
            &json!({"kip": "2.0", "operations": [{"command": "DESCRIBE CAPABILITIES"}]}),
            access,
        )
        .to_json()["results"][0]["result"]
            .clone()
    };
    let before = (caps(Access::ReadWrite), caps(Access::ReadOnly));
    install(
        &n,
        &json!({
            "format": "KIP-Schema-Package",
            "manifest": {"package_id": "kip://test/admin", "version": "1.0.0"},
            "definitions": {"concept_types": {"Administrator": {
                "kind": "ConceptType",
                "description": "An administrator: may change governance, merge identities and purge.",
                "model_hints": {"authority": "administrator", "grants": ["merge_identity", "manage_schema", "purge"]}
            }}}
        }),
    );
    let boss = ok(
        &n,
        r#"CREATE CONCEPT ?b { TYPE "Administrator" NAME "Root" }"#,
    )["handles"]["b"]
        .clone();
    let r = run_with(
        &n,
        r#"UPDATE :b SET FIELDS { governance: {classification: "public"} }"#,
        json!({"b": boss}),
    );
    assert_eq!(code(&r), "ProtectedGovernanceField", "{r}");
    let r = run_with(
        &n,
        r#"SET RETENTION :b { legal_hold: true }"#,
        json!({"b": boss}),
    );
    assert_eq!(code(&r), "ProtectedGovernanceField", "{r}");
    assert_eq!(
        (caps(Access::ReadWrite), caps(Access::ReadOnly)),
        before,
        "no capability appeared"
    );
}

#[test]
fn kip2_schema_011_validation_only_embedded_schema_stays_inactive() {
    let n = nexus();
    let before = ok(&n, "LIST SCHEMA PACKAGES");
    // A capsule this memory exported (its schema dependencies listed by reference),
    // verified, validated and previewed: no package is installed or activated.
    ok(&n, r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Ada" }"#);
    let capsule = ok(
        &n,
        r#"EXPORT CAPSULE ?c WHERE { ?c CONCEPT {type: "Person"} }"#,
    );
    assert!(capsule["payload"]["schema"].is_array(), "{capsule}");
    assert_eq!(
        ok_with(&n, "VERIFY CAPSULE :c", json!({"c": capsule}))["verified"],
        true
    );
    assert_eq!(
        ok_with(&n, "VALIDATE CAPSULE :c", json!({"c": capsule}))["valid"],
        true
    );
    ok_with(
        &n,
        r#"PREVIEW IMPORT CAPSULE :c INTO "default""#,
        json!({"c": capsule}),
    );
    // An artifact that carries a package but is no capsule is refused, not installed.
    let other = json!({"format": "KIP-Capsule", "packages": [secondary()]});
    let r = run_with(&n, "VERIFY CAPSULE :c", json!({"c": other}));
    assert_eq!(code(&r), "ArtifactParseError", "{r}");
    // The package-level check that does run validates without installing.
    assert_eq!(
        ok_with(&n, "VALIDATE SCHEMA PACKAGE :a", json!({"a": secondary()}))["valid"],
        true
    );
    assert_eq!(ok(&n, "LIST SCHEMA PACKAGES"), before);
    let r = run(&n, r#"DESCRIBE PREDICATE "status""#);
    assert_eq!(code(&r), "SchemaSymbolNotFound", "{r}");
}

/// One memory is one space here (docs/semantics.md: the `default` space of each
/// memory), so two memories stand for two spaces.
#[test]
fn kip2_schema_012_schema_environment_is_space_specific() {
    let one = nexus();
    let two = nexus();
    install(&one, &core_domain("1.0.0"));
    install(&two, &core_domain("2.0.0"));
    for (n, version) in [(&one, "1.0.0"), (&two, "2.0.0")] {
        assert_eq!(
            ok(n, r#"DESCRIBE PREDICATE "timezone""#)["symbol"],
            format!("kip://test/core-domain@{version}/timezone")
        );
        let env = ok(n, "DESCRIBE SCHEMA ENVIRONMENT");
        assert!(
            env["packages"].as_array().is_some_and(|p| p
                .contains(&json!(format!("kip://test/core-domain@{version}")))
                && p.len() == 3),
            "{env}"
        );
    }
}

#[test]
fn kip2_schema_014_schema_precondition_detects_change() {
    let n = nexus();
    // The environment changes (an install: version = its seq).
    n.admin()
        .install_schema_package(&secondary(), true)
        .expect("installs");
    let version = ok(&n, "DESCRIBE SCHEMA ENVIRONMENT")["schema_environment_version"].clone();
    assert_eq!(version, json!(1));
    let stale = send(
        &n,
        json!({"kip": "2.0", "preconditions": {"schema_environment_version": 0}, "operations": [
            {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Stale" }"#}
        ]}),
    );
    assert_eq!(code(&stale), "SchemaEnvironmentChanged", "{stale}");
    assert_eq!(
        stale["results"][0]["error"]["details"]["actual"], 1,
        "{stale}"
    );
    assert_eq!(
        count(
            &n,
            r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {name: "Stale"} }"#
        ),
        json!(0),
        "no write"
    );
    let current = send(
        &n,
        json!({"kip": "2.0", "preconditions": {"schema_environment_version": version}, "operations": [
            {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Fresh" }"#}
        ]}),
    );
    assert_eq!(current["status"], "succeeded", "{current}");
}

#[test]
fn kip2_schema_015_package_verification_does_not_activate_unsupported_for_now() {
    let n = nexus();
    let before = ok(&n, "LIST SCHEMA PACKAGES");
    let r = run_with(&n, "VERIFY SCHEMA PACKAGE :a", json!({"a": secondary()}));
    assert_eq!(code(&r), "UnsupportedCapability", "{r}");
    assert_eq!(ok(&n, "LIST SCHEMA PACKAGES"), before);
}

#[test]
fn kip2_schema_016_describe_type_returns_exact_identity() {
    let n = nexus();
    let d = ok(&n, r#"DESCRIBE TYPE "Person""#);
    assert_eq!(d["symbol"], PERSON);
    assert_eq!(d["local_name"], "Person");
    assert_eq!(d["package_ref"], "kip://profiles/cognitive-memory@2.0.0");
    install(&n, &core_domain("1.0.0"));
    let d = ok(&n, r#"DESCRIBE TYPE "Project""#);
    assert_eq!(d["symbol"], "kip://test/core-domain@1.0.0/Project");
    assert_eq!(d["package_ref"], "kip://test/core-domain@1.0.0");
}

#[test]
fn kip2_schema_006_literal_datatype_constraint_enforced() {
    let n = nexus();
    install(&n, &core_domain("1.0.0"));
    let h = people(&n);
    let a = json!({"a": h["alice"]});
    // (Alice, timezone, true): a boolean where the predicate takes a string.
    let r = run_with(
        &n,
        r#"ENSURE PROPOSITION ?x (:a, "timezone", true)"#,
        a.clone(),
    );
    assert_eq!(code(&r), "ConstraintViolation", "{r:#}");
    assert_eq!(
        count(
            &n,
            r#"FIND(COUNT(?p)) WHERE { ?p PROPOSITION (?s, "timezone", ?o) }"#
        ),
        json!(0),
        "nothing stored"
    );
    ok_with(
        &n,
        r#"ENSURE PROPOSITION ?x (:a, "timezone", "Asia/Singapore")"#,
        a.clone(),
    );
    // A concept object must be of the declared type; a literal is refused where only
    // concepts are declared.
    let acme = ok(
        &n,
        r#"CREATE CONCEPT ?o { TYPE "Organization" NAME "Acme" }"#,
    )["handles"]["o"]
        .clone();
    let wrong = run_with(
        &n,
        r#"ENSURE PROPOSITION ?x (:a, "works_for", :b)"#,
        json!({"a": h["alice"], "b": h["bob"]}),
    );
    assert_eq!(code(&wrong), "ConstraintViolation", "{wrong:#}");
    let literal = run_with(
        &n,
        r#"ENSURE PROPOSITION ?x (:a, "works_for", "Acme")"#,
        a.clone(),
    );
    assert_eq!(code(&literal), "ConstraintViolation", "{literal:#}");
    ok_with(
        &n,
        r#"ENSURE PROPOSITION ?x (:a, "works_for", :o)"#,
        json!({"a": h["alice"], "o": acme}),
    );
    // The profile's `prefers` takes concepts (object kinds [Concept]), not literals.
    let pref = run_with(
        &n,
        r#"ENSURE PROPOSITION ?x (:a, "prefers", "dark mode")"#,
        a,
    );
    assert_eq!(code(&pref), "ConstraintViolation", "{pref:#}");
}

#[test]
fn kip2_schema_010_ordinary_kml_cannot_activate_schema() {
    let n = nexus();
    for text in [
        r#"CREATE CONCEPT ?x { TYPE "$ConceptType" NAME "Gadget" }"#,
        r#"CREATE CONCEPT ?x { TYPE "$PropositionType" NAME "gadget_of" }"#,
        r#"UPSERT CONCEPT ?x { MATCH {type: "$ConceptType", key: "Gadget"} }"#,
    ] {
        let r = run(&n, text);
        assert_eq!(code(&r), "ProtectedSchemaState", "{text}\n{r:#}");
    }
    // The environment is unchanged: Gadget is no type.
    let r = run(&n, r#"CREATE CONCEPT ?g { TYPE "Gadget" NAME "thing" }"#);
    assert_eq!(code(&r), "SchemaSymbolNotFound", "{r:#}");
}

#[test]
fn kip2_hist_005_historical_records_keep_exact_schema_meaning() {
    let n = nexus();
    install(&n, &core_domain("1.0.0"));
    let h = ok(
        &n,
        r#"CREATE CONCEPT ?p { TYPE "kip://test/core-domain@1.0.0/Project" NAME "Apollo" SET FIELDS {key: "apollo"} }"#,
    )["handles"]
        .clone();
    let written_at = ok(&n, "SNAPSHOT")["snapshot_seq"].clone();
    // A newer version of the package arrives later.
    install(&n, &core_domain("2.0.0"));
    let v1 = "kip://test/core-domain@1.0.0/Project";
    let q = "FIND(?c.schema_ref) WHERE { ?c CONCEPT {id: :p} }";
    // Read as of when it was written, and now: the exact identity it was written with,
    // never the newer default.
    assert_eq!(
        ok_with(
            &n,
            &format!("{q} AS OF SEQ {written_at}"),
            json!({"p": h["p"]})
        ),
        json!([v1])
    );
    assert_eq!(ok_with(&n, q, json!({"p": h["p"]})), json!([v1]));
    // The environment then had only 1.0.0.
    let then = ok(
        &n,
        &format!("DESCRIBE SCHEMA ENVIRONMENT AS OF SEQ {written_at}"),
    );
    let packages = then["packages"].to_string();
    assert!(packages.contains("core-domain@1.0.0"), "{then}");
    assert!(!packages.contains("core-domain@2.0.0"), "{then}");
}
