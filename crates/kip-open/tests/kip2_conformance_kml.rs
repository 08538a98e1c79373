//! KIP 2.0 conformance cases of the KML suite
//! (`spec/kip2/conformance/KIP-2.0-Conformance-Tests.md` §20) that had no test of their
//! own, through the wire (`Nexus::execute_json` with `"kip": "2.0"`), on whichever
//! backend the test matrix selects. Each test is named after its case and asserts the
//! case's normative outcome as docs/semantics.md ("KIP 2.0 on the one memory") maps it
//! onto this store. Principals and Governance are not built: a case that needs one
//! declares it in `requires` and asserts the honest `UnsupportedCapability`
//! (`..._unsupported_for_now`).

mod common;
use common::kip2::*;
use common::nexus;
use kip_engine::store::{ElementId, SpaceId};
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

fn assertion(n: &Nexus, id: &Value) -> Value {
    ok_with(
        n,
        "FIND(?a) WHERE { ?a ASSERTION {id: :a} }",
        json!({"a": id}),
    )[0]
    .clone()
}

#[test]
fn kip2_kml_001_create_concept_creates_distinct_event_like_identity() {
    let n = nexus();
    let create = |key: &str| {
        ok(
            &n,
            &format!(
                r#"CREATE CONCEPT ?x {{ TYPE "Experience" CLIENT KEY "{key}" NAME "Deploy" SET ATTRIBUTES {{goal: "ship", outcome_status: "success"}} }}"#
            ),
        )["handles"]["x"]
            .clone()
    };
    let first = create("session:1:experience");
    assert_eq!(
        ok_with(
            &n,
            "FIND(?c.schema_ref, ?c.client_key) WHERE { ?c CONCEPT {id: :x} }",
            json!({"x": first})
        ),
        json!([[
            "kip://profiles/cognitive-memory@2.0.0/Experience",
            "session:1:experience"
        ]])
    );
    // The same name is another event under another client key; a retry is not.
    let second = create("session:2:experience");
    assert_ne!(first, second);
    assert_eq!(create("session:1:experience"), first);
    assert_eq!(
        count(
            &n,
            r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {type: "Experience", name: "Deploy"} }"#
        ),
        json!(2)
    );
}

#[test]
fn kip2_kml_011_update_never_creates() {
    let n = nexus();
    seed(&n);
    let r = ok(
        &n,
        r#"UPDATE ?c SET ATTRIBUTES {mood: "calm"} WHERE { ?c CONCEPT {type: "Person", key: "nobody"} }"#,
    );
    assert_eq!(r, json!({"handles": {}, "created": [], "changed": []}));
    assert_eq!(
        count(
            &n,
            r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {type: "Person"} }"#
        ),
        json!(2)
    );
}

#[test]
fn kip2_kml_012_update_legal_mnemonic_facet() {
    let n = nexus();
    let h = seed(&n);
    let r = ok_with(
        &n,
        r#"UPDATE :a SET FACET "MnemonicState" { memory_strength: 0.3 }"#,
        json!({"a": h["alice"]}),
    );
    assert_eq!(r["changed"], json!([h["alice"]]));
    assert_eq!(
        ok_with(
            &n,
            r#"FIND(?c.name, ?c.key, ?c.attributes, ?c.facets, ?c._system.version) WHERE { ?c CONCEPT {id: :a} }"#,
            json!({"a": h["alice"]})
        ),
        json!([["Alice", "alice", {}, {"MnemonicState": {"memory_strength": 0.3}}, 2]])
    );
    let r = run_with(
        &n,
        r#"UPDATE :a SET FACET "MnemonicState" { memory_strength: 1.5 }"#,
        json!({"a": h["alice"]}),
    );
    assert_eq!(code(&r), "ConstraintViolation", "{r}");
}

#[test]
fn kip2_kml_013_update_cannot_write_system() {
    let n = nexus();
    let h = seed(&n);
    for set in [
        r#"{ _system: {origin: "forged"} }"#,
        r#"{ _system: {version: 99} }"#,
    ] {
        let r = run_with(
            &n,
            &format!("UPDATE :a SET FIELDS {set}"),
            json!({"a": h["alice"]}),
        );
        assert_eq!(code(&r), "ProtectedSystemField", "{set}: {r}");
    }
    assert_eq!(
        ok_with(
            &n,
            "FIND({version: ?c._system.version, state: ?c._system.state, origin: ?c._system.origin.principal_id}) WHERE { ?c CONCEPT {id: :a} }",
            json!({"a": h["alice"]})
        ),
        json!([{"version": 1, "state": "active", "origin": "interface_caller"}])
    );
}

#[test]
fn kip2_kml_005_create_assertion_preserves_actor_origin_distinction() {
    let n = nexus();
    let h = seed(&n);
    let r = ok_with(
        &n,
        r#"MUTATE {
  ENSURE PROPOSITION ?p (:a, "prefers", :d)
  CREATE ASSERTION ?x { SET FIELDS { proposition: ?p, asserted_by: :a, stance: "support", mode: "stated" } }
}"#,
        json!({"a": h["alice"], "d": h["dark"]}),
    );
    let got = ok_with(
        &n,
        "FIND(?x.asserted_by, ?x._system.origin, ?x._system.created_at) WHERE { ?x ASSERTION {id: :x} }",
        json!({"x": r["handles"]["x"]}),
    );
    // The semantic actor is Alice; the execution origin is the caller that recorded
    // it, kept by the engine apart from anything the caller writes.
    assert_eq!(got[0][0], h["alice"]);
    assert_eq!(got[0][1]["principal_id"], "interface_caller", "{got}");
    assert_ne!(got[0][1]["principal_id"], got[0][0]);
    assert!(
        got[0][2].as_str().is_some_and(|t| t.ends_with('Z')),
        "{got}"
    );
    // A caller cannot write the origin.
    let forged = run_with(
        &n,
        r#"CREATE ASSERTION ?y { SET FIELDS { proposition: :p, asserted_by: :a, stance: "support", mode: "stated", _system: {origin: {principal_id: "alice"}} } }"#,
        json!({"p": r["handles"]["p"], "a": h["alice"]}),
    );
    assert_eq!(code(&forged), "ProtectedSystemField", "{forged}");
}

#[test]
fn kip2_kml_014_update_cannot_write_governance() {
    let n = nexus();
    let h = seed(&n);
    for set in [
        r#"{ governance: {classification: "public"} }"#,
        r#"{ governance: {policy_refs: ["kip:policy:open"]} }"#,
        r#"{ governance: {authority: "administrator"} }"#,
    ] {
        for target in ["alice", "a1", "msg"] {
            let r = run_with(
                &n,
                &format!("UPDATE :x SET FIELDS {set}"),
                json!({"x": h[target]}),
            );
            // A concept names the protected field; an assertion or evidence refuses
            // every UPDATE of its record (the case allows any denial).
            if target == "alice" {
                assert_eq!(code(&r), "ProtectedGovernanceField", "{set}: {r}");
            } else {
                assert_eq!(r["status"], "failed", "{target} {set}: {r}");
            }
        }
    }
    assert_eq!(
        ok_with(
            &n,
            "FIND(?c.governance, ?c._system.version) WHERE { ?c CONCEPT {id: :a} }",
            json!({"a": h["alice"]})
        ),
        json!([[null, 1]])
    );
    assert_eq!(
        ok(
            &n,
            "FIND(?a.governance, ?a._system.version) WHERE { ?a ASSERTION {} }"
        ),
        json!([[null, 1]])
    );
    assert_eq!(
        ok(
            &n,
            "FIND(?e.governance, ?e._system.version) WHERE { ?e EVIDENCE {} }"
        ),
        json!([[null, 1]])
    );
}

#[test]
fn kip2_kml_015_assertion_confidence_rewrite_rejected() {
    let n = nexus();
    let h = seed(&n);
    let before = assertion(&n, &h["a1"]);
    let r = run_with(
        &n,
        "UPDATE :a SET FIELDS { confidence: 0.95 }",
        json!({"a": h["a1"]}),
    );
    assert!(
        ["EpistemicRevisionRequired", "ImmutableField"].contains(&code(&r).as_str()),
        "{r}"
    );
    assert_eq!(assertion(&n, &h["a1"]), before);
}

#[test]
fn kip2_kml_016_evidence_payload_rewrite_rejected() {
    let n = nexus();
    let h = seed(&n);
    let r = run_with(
        &n,
        r#"UPDATE :e SET FIELDS { payload: "I like light mode" }"#,
        json!({"e": h["msg"]}),
    );
    assert!(
        ["EvidenceCorrectionRequired", "ImmutableField"].contains(&code(&r).as_str()),
        "{r}"
    );
    assert_eq!(
        ok_with(
            &n,
            "FIND(?e.payload, ?e._system.version) WHERE { ?e EVIDENCE {id: :e} }",
            json!({"e": h["msg"]})
        ),
        json!([["I like dark mode", 1]])
    );
}

#[test]
fn kip2_kml_017_belief_revision_uses_new_assertion() {
    let n = nexus();
    let h = seed(&n);
    let before = assertion(&n, &h["a1"]);
    let r = ok_with(
        &n,
        r#"MUTATE {
  CREATE EVIDENCE ?m2 { SET FIELDS { evidence_class: "user_statement", payload: "I really do like dark mode" } }
  ASSERT ?a2 (:alice, "prefers", :dark) { by: :alice, mode: "stated", confidence: 0.9, evidence: ?m2 } SUPERSEDING :a1
}"#,
        json!({"alice": h["alice"], "dark": h["dark"], "a1": h["a1"]}),
    );
    let (a2, m2) = (r["handles"]["a2"].clone(), r["handles"]["m2"].clone());
    let old = assertion(&n, &h["a1"]);
    for field in [
        "proposition",
        "asserted_by",
        "stance",
        "mode",
        "confidence",
        "evidence",
        "asserted_at",
    ] {
        assert_eq!(old[field], before[field], "{field}");
    }
    let new = assertion(&n, &a2);
    assert_eq!(new["confidence"], 0.9);
    assert_eq!(new["proposition"], h["p"]);
    assert_eq!(new["evidence"], json!([{"id": m2, "role": "support"}]));
}

#[test]
fn kip2_kml_018_own_supersession_succeeds() {
    let n = nexus();
    let h = seed(&n);
    let a2 = ok_with(
        &n,
        r#"ASSERT ?a2 (:alice, "prefers", :dark) { by: :alice, mode: "stated", confidence: 0.8 } SUPERSEDING :a1"#,
        json!({"alice": h["alice"], "dark": h["dark"], "a1": h["a1"]}),
    )["handles"]["a2"]
        .clone();
    assert_eq!(
        assertion(&n, &h["a1"])["lifecycle"],
        json!({"status": "superseded", "superseded_by": [a2]})
    );
    assert_eq!(
        assertion(&n, &a2)["lifecycle"],
        json!({"status": "active", "supersedes": [h["a1"]]})
    );
    // The explicit statement links the same way.
    let a3 = ok_with(
        &n,
        r#"CREATE ASSERTION ?a3 { SET FIELDS { proposition: :p, asserted_by: :alice, stance: "support", mode: "stated", confidence: 0.7 } }"#,
        json!({"p": h["p"], "alice": h["alice"]}),
    )["handles"]["a3"]
        .clone();
    ok_with(
        &n,
        "SUPERSEDE ASSERTION :old BY :new",
        json!({"old": a2, "new": a3}),
    );
    assert_eq!(
        assertion(&n, &a2)["lifecycle"],
        json!({"status": "superseded", "supersedes": [h["a1"]], "superseded_by": [a3]})
    );
}

#[test]
fn kip2_kml_020_retraction_preserves_payload() {
    let n = nexus();
    let h = seed(&n);
    let before = assertion(&n, &h["a1"]);
    ok_with(&n, "RETRACT ASSERTION :a", json!({"a": h["a1"]}));
    let after = assertion(&n, &h["a1"]);
    assert_eq!(after["lifecycle"]["status"], "retracted");
    assert!(after["lifecycle"]["retracted_at"].is_string(), "{after}");
    for field in [
        "proposition",
        "asserted_by",
        "stance",
        "mode",
        "confidence",
        "evidence",
        "asserted_at",
    ] {
        assert_eq!(after[field], before[field], "{field}");
    }
    assert_eq!(
        count(&n, "FIND(COUNT(?a)) WHERE { ?a ASSERTION {} }"),
        json!(1),
        "still queryable"
    );
}

/// Principals are not built: the harness cannot act as an unbound recorder, so it
/// asks for Governance enforcement, which is refused up front.
#[test]
fn kip2_kml_021_retraction_requires_representation_authority_unsupported_for_now() {
    let n = nexus();
    let h = seed(&n);
    let r = send(
        &n,
        json!({"kip": "2.0", "requires": {"policy_enforcement": true}, "operations": [
            {"command": "RETRACT ASSERTION :a", "parameters": {"a": h["a1"]}}]}),
    );
    assert_eq!(code(&r), "UnsupportedCapability", "{r}");
    assert_eq!(r["results"], json!([]), "nothing ran");
    assert_eq!(assertion(&n, &h["a1"])["lifecycle"]["status"], "active");
}

#[test]
fn kip2_kml_022_evidence_correction_can_be_transaction_atomic() {
    let n = nexus();
    let h = seed(&n);
    let r = run_with(
        &n,
        r#"MUTATE {
  CREATE EVIDENCE ?e2 { SET FIELDS { evidence_class: "user_statement", payload: "I like light mode" } }
  CORRECT EVIDENCE :msg BY ?e2
  CREATE ASSERTION ?bad { SET FIELDS { proposition: :p, asserted_by: :alice, stance: "perhaps", mode: "stated" } }
}"#,
        json!({"msg": h["msg"], "p": h["p"], "alice": h["alice"]}),
    );
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(
        ok(&n, "FIND(?e.id, ?e.correction) WHERE { ?e EVIDENCE {} }"),
        json!([[h["msg"], null]]),
        "no new evidence and no correction"
    );
    assert_eq!(
        count(&n, "FIND(COUNT(?a)) WHERE { ?a ASSERTION {} }"),
        json!(1)
    );
}

#[test]
fn kip2_kml_023_maintenance_cannot_decay_assertion_confidence() {
    let n = nexus();
    let h = seed(&n);
    ok_with(
        &n,
        r#"CREATE ASSERTION ?b { SET FIELDS { proposition: :p, asserted_by: :bob, stance: "support", mode: "observed", confidence: 0.8 } }"#,
        json!({"p": h["p"], "bob": h["bob"]}),
    );
    let r = run(
        &n,
        "UPDATE ?a SET FIELDS { confidence: 0.1 } WHERE { ?a ASSERTION {} FILTER(?a.confidence > 0.5) }",
    );
    assert!(
        ["EpistemicRevisionRequired", "ImmutableField"].contains(&code(&r).as_str()),
        "{r}"
    );
    assert_eq!(
        ok(
            &n,
            "FIND(?a.confidence) WHERE { ?a ASSERTION {} } ORDER BY ?a.confidence"
        ),
        json!([0.6, 0.8])
    );
}

#[test]
fn kip2_kml_024_maintenance_can_decay_memory_strength() {
    let n = nexus();
    seed(&n);
    let r = ok(
        &n,
        r#"UPDATE ?c SET FACET "MnemonicState" { memory_strength: 0.2, last_metabolized_at: "2026-11-28T03:00:00Z" } WHERE { ?c CONCEPT {type: "Person"} }"#,
    );
    assert_eq!(r["changed"].as_array().map(Vec::len), Some(2), "{r}");
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.facets["MnemonicState"].memory_strength) WHERE { ?c CONCEPT {type: "Person"} }"#
        ),
        json!([0.2, 0.2])
    );
    assert_eq!(
        ok(&n, "FIND(?a.confidence) WHERE { ?a ASSERTION {} }"),
        json!([0.6])
    );
}

/// Places a legal hold on element `id` out of band (§5 of the conformance document:
/// fixtures are not loaded through the feature under test). KML refuses to set one
/// (`ProtectedGovernanceField`) and the owner's operation has no interface yet, so the
/// fixture writes the element's retention state in the store directly.
fn legal_hold(n: &Nexus, id: &Value) {
    let id = ElementId::parse_id(id.as_str().expect("an id")).expect("an element id");
    n.write(
        |w| {
            let rec = w
                .element(SpaceId::DEFAULT, id)?
                .expect("the element exists");
            let mut state = rec.state;
            state.insert("retention".into(), json!({"legal_hold": true}));
            w.set_element_state(SpaceId::DEFAULT, id, state)?;
            Ok(())
        },
        false,
    )
    .expect("the fixture is written");
}

#[test]
fn kip2_kml_027_legal_hold_blocks_purge() {
    let n = nexus();
    let e = ok(
        &n,
        r#"CREATE EVIDENCE ?e { SET FIELDS { evidence_class: "document", payload: "contract v1" } }"#,
    )["handles"]["e"]
        .clone();
    legal_hold(&n, &e);
    let r = run_with(&n, r#"PURGE :e CONFIRM "PURGE""#, json!({"e": e}));
    assert!(
        ["LegalHoldConflict", "PurgeDenied"].contains(&code(&r).as_str()),
        "{r}"
    );
    assert_eq!(
        ok_with(
            &n,
            "FIND(?e.payload, ?e._system.state) WHERE { ?e EVIDENCE {id: :e} }",
            json!({"e": e})
        ),
        json!([["contract v1", "active"]])
    );
}

#[test]
fn kip2_kml_029_merge_is_non_destructive() {
    let n = nexus();
    let h = ok(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?t { TYPE "Person" NAME "Alice" SET FIELDS {key: "alice"} }
  CREATE CONCEPT ?s { TYPE "Person" NAME "Alice Duplicate" SET FIELDS {key: "alice-dup"} SET ATTRIBUTES {note: "met at a conference"} }
  CREATE CONCEPT ?dark { TYPE "Preference" NAME "Dark" }
  ENSURE PROPOSITION ?p (?s, "prefers", ?dark)
}"#,
    )["handles"]
        .clone();
    ok_with(
        &n,
        "MERGE CONCEPT :s INTO :t",
        json!({"s": h["s"], "t": h["t"]}),
    );
    assert_eq!(
        ok_with(
            &n,
            r#"FIND(?c.key, ?c.name, ?c.attributes.note, ?c._system.state, ?c.merged_into) WHERE { ?c CONCEPT {id: :s, state: "merged"} }"#,
            json!({"s": h["s"]})
        ),
        json!([[
            "alice-dup",
            "Alice Duplicate",
            "met at a conference",
            "merged",
            h["t"]
        ]])
    );
    assert_eq!(
        ok_with(
            &n,
            "FIND(?p.subject) WHERE { ?p PROPOSITION (id: :p) }",
            json!({"p": h["p"]})
        ),
        json!([h["s"]])
    );
}

#[test]
fn kip2_kml_030_merge_requires_identity_authority_unsupported_for_now() {
    let n = nexus();
    let h = ok(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?t { TYPE "Person" NAME "Alice" SET FIELDS {key: "alice"} }
  CREATE CONCEPT ?s { TYPE "Person" NAME "Alice Duplicate" SET FIELDS {key: "alice-dup"} }
}"#,
    )["handles"]
        .clone();
    let r = send(
        &n,
        json!({"kip": "2.0", "requires": {"policy_enforcement": true}, "operations": [
            {"command": "MERGE CONCEPT :s INTO :t", "parameters": {"s": h["s"], "t": h["t"]}}]}),
    );
    assert_eq!(code(&r), "UnsupportedCapability", "{r}");
    assert_eq!(
        ok_with(
            &n,
            "FIND(?c._system.state) WHERE { ?c CONCEPT {id: :s} }",
            json!({"s": h["s"]})
        ),
        json!(["active"])
    );
}

/// A package with the functional predicate `timezone` (Person → string).
fn timezone(n: &Nexus) {
    n.admin()
        .install_schema_package(
            &json!({
                "format": "KIP-Schema-Package",
                "manifest": {"package_id": "kip://test/core-domain", "version": "1.0.0"},
                "definitions": {"predicates": {"timezone": {"kind": "PredicateType",
                    "subject": {"concept_types": ["kip://profiles/cognitive-memory@2.0.0/Person"]},
                    "object": {"literal_types": ["string"]}, "functional": true}}}
            }),
            true,
        )
        .expect("the package installs");
}

/// The memory after `write`, every element without the engine-set `asserted_at`.
fn after(write: &str) -> (Value, Value) {
    let n = nexus();
    timezone(&n);
    let h = seed(&n);
    let r = ok_with(
        &n,
        write,
        json!({"alice": h["alice"], "dark": h["dark"], "msg": h["msg"], "a1": h["a1"]}),
    );
    let mut all = json!([
        ok(
            &n,
            r#"FIND(?p) WHERE { ?p PROPOSITION (?s, "timezone", ?o) }"#
        ),
        ok(&n, "FIND(?a) WHERE { ?a ASSERTION {} }"),
        ok(&n, "FIND(?e) WHERE { ?e EVIDENCE {} }"),
        ok(&n, "FIND(?x) WHERE { ?x ACTIVITY {} }"),
        ok(&n, "FIND(?c) WHERE { ?c CONCEPT {} }"),
    ]);
    for a in all[1].as_array_mut().into_iter().flatten() {
        a.as_object_mut().map(|o| o.remove("asserted_at"));
    }
    // Creation times differ between the two runs; the rest of _system must not.
    for kind in all.as_array_mut().into_iter().flatten() {
        for e in kind.as_array_mut().into_iter().flatten() {
            if let Some(sys) = e.get_mut("_system").and_then(Value::as_object_mut) {
                sys.remove("created_at");
            }
        }
    }
    (all, r["handles"].clone())
}

#[test]
fn kip2_kml_031_assert_sugar_desugars_exactly() {
    let (sugar, h) = after(
        r#"ASSERT ?a (:alice, "timezone", "+08:00") {by: :alice, mode: "stated", confidence: 0.9, evidence: :msg}"#,
    );
    let (plain, _) = after(
        r#"MUTATE {
  ENSURE PROPOSITION ?p (:alice, "timezone", "+08:00")
  CREATE ASSERTION ?a { SET FIELDS { proposition: ?p, asserted_by: :alice, stance: "support", mode: "stated", confidence: 0.9 }
                        SET STRUCTURAL { ("evidence", :msg) {role: "support"} } }
}"#,
    );
    assert_eq!(sugar, plain, "element for element the desugared form");
    let [props, asserts, evidence, activities, _] = [0, 1, 2, 3, 4].map(|i| sugar[i].clone());
    assert_eq!(props.as_array().map(Vec::len), Some(1));
    assert_eq!(
        evidence.as_array().map(Vec::len),
        Some(1),
        "none fabricated"
    );
    assert_eq!(activities, json!([]));
    let new = asserts
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["id"] == h["a"])
        .cloned()
        .expect("the new assertion");
    assert_eq!(new["stance"], "support", "the default stance");
    assert_eq!(new["proposition"], props[0]["id"]);
    assert_eq!(new["evidence"][0]["role"], "support");
    // SUPERSEDING: the old one is superseded by the new one in the same transaction.
    let (sup, h) = after(
        r#"ASSERT ?b (:alice, "prefers", :dark) {by: :alice, mode: "stated", confidence: 0.9} SUPERSEDING :a1"#,
    );
    let old = sup[1]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["id"] != h["b"])
        .cloned()
        .expect("the old assertion");
    assert_eq!(
        old["lifecycle"],
        json!({"status": "superseded", "superseded_by": [h["b"]]})
    );
}

#[test]
fn kip2_kml_032_upsert_creates_the_type_its_match_declares() {
    let n = nexus();
    let p = ok(
        &n,
        r#"UPSERT CONCEPT ?p { MATCH {type: "Person", key: "alice"} SET FIELDS {name: "Alice"} }"#,
    )["handles"]["p"]
        .clone();
    assert_eq!(
        ok(
            &n,
            r#"FIND(?p.id, ?p.schema_ref) WHERE { ?p CONCEPT {type: "Person", key: "alice"} }"#
        ),
        json!([[p, "kip://profiles/cognitive-memory@2.0.0/Person"]])
    );
    let r = run(
        &n,
        r#"UPSERT CONCEPT ?q { MATCH {key: "nobody"} SET FIELDS {name: "Nobody"} }"#,
    );
    assert_eq!(code(&r), "SchemaSymbolNotFound", "{r}");
    assert_eq!(
        count(
            &n,
            r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {name: "Nobody"} }"#
        ),
        json!(0)
    );
}

#[test]
fn kip2_kml_033_a_logical_key_is_identity_within_its_type() {
    let n = nexus();
    let person = ok(
        &n,
        r#"UPSERT CONCEPT ?p { MATCH {type: "Person", key: "alice"} SET FIELDS {name: "Alice"} }"#,
    )["handles"]["p"]
        .clone();
    let again = run(
        &n,
        r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Other Alice" SET FIELDS {key: "alice"} }"#,
    );
    assert_eq!(code(&again), "IdentityConflict", "{again}");
    let pref = ok(
        &n,
        r#"UPSERT CONCEPT ?q { MATCH {type: "Preference", key: "alice"} SET FIELDS {name: "Alice's theme"} }"#,
    )["handles"]["q"]
        .clone();
    assert_ne!(person, pref);
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.id, ?c.schema_ref) WHERE { ?c CONCEPT {key: "alice"} } ORDER BY ?c.schema_ref"#
        ),
        json!([
            [person, "kip://profiles/cognitive-memory@2.0.0/Person"],
            [pref, "kip://profiles/cognitive-memory@2.0.0/Preference"]
        ])
    );
    let r = run(
        &n,
        r#"UPSERT CONCEPT ?x { MATCH {key: "alice"} SET ATTRIBUTES {picked: true} }"#,
    );
    assert_eq!(code(&r), "IdentityConflict", "{r}");
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.attributes.picked) WHERE { ?c CONCEPT {key: "alice"} }"#
        ),
        json!([null, null]),
        "neither was chosen"
    );
}
