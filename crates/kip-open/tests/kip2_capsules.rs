//! KIP 2.0 Cognitive Capsules (Specification §37-41, the Capsule suite KIP2-CAP-*):
//! EXPORT CAPSULE reads one snapshot into an artifact with a canonical digest; VERIFY,
//! VALIDATE, DESCRIBE and PREVIEW IMPORT answer different questions about it and
//! change nothing. On whichever backend the test matrix selects (`KIP_TEST_BACKEND`).

mod common;
use common::kip2::*;
use common::nexus;
use serde_json::{json, Value};

fn seed(n: &kip_engine::Nexus) -> Value {
    ok(
        n,
        r#"MUTATE {
  CREATE CONCEPT ?alice { TYPE "Person" NAME "Alice" SET FIELDS {key: "alice"} }
  CREATE CONCEPT ?dark { TYPE "Preference" NAME "Dark" }
  ENSURE PROPOSITION ?p (?alice, "prefers", ?dark)
}"#,
    )["handles"]
        .clone()
}

fn export_people(n: &kip_engine::Nexus) -> Value {
    ok(
        n,
        r#"EXPORT CAPSULE ?c WHERE { ?c CONCEPT {type: "Person"} }"#,
    )
}

fn error_of(r: &Value) -> String {
    r["results"][0]["error"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn names(c: &Value) -> Vec<String> {
    c["payload"]["records"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["element"]["name"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn kip2_cap_001_snapshot_capsule_binds_one_source_snapshot() {
    let n = nexus();
    let h = seed(&n);
    let at = ok(&n, "SNAPSHOT")["snapshot_seq"].as_u64().unwrap_or(0);
    ok_with(
        &n,
        r#"UPSERT CONCEPT ?x { MATCH {type: "Person", key: "alice"} SET FIELDS {name: "Alicia"} }"#,
        json!({}),
    );
    let now = export_people(&n);
    assert_eq!(now["payload"]["source"]["snapshot_seq"], at + 1, "{now}");
    assert_eq!(names(&now), ["Alicia"]);
    // The same selection as of the earlier snapshot: the state of then, whole.
    let then = ok_with(
        &n,
        r#"EXPORT CAPSULE ?c WHERE { ?c CONCEPT {type: "Person"} } AS OF SEQ :s"#,
        json!({"s": at}),
    );
    assert_eq!(then["payload"]["source"]["snapshot_seq"], at, "{then}");
    assert_eq!(names(&then), ["Alice"]);
    assert_eq!(
        then["payload"]["records"][0]["source_ref"], h["alice"],
        "records keep their source identity as provenance"
    );
}

#[test]
fn kip2_cap_002_and_004_a_changed_payload_changes_the_digest_and_fails_verify() {
    let n = nexus();
    seed(&n);
    let c = export_people(&n);
    let mut tampered = c.clone();
    tampered["payload"]["records"][0]["element"]["name"] = json!("Mallory");
    let r = run_with(&n, "VERIFY CAPSULE :c", json!({"c": tampered}));
    assert_eq!(error_of(&r), "DigestMismatch", "{r}");
    // Exporting the changed memory gives another digest.
    ok(
        &n,
        r#"UPSERT CONCEPT ?x { MATCH {type: "Person", key: "alice"} SET FIELDS {name: "Alicia"} }"#,
    );
    let other = export_people(&n);
    assert_ne!(
        other["integrity"]["content_digest"],
        c["integrity"]["content_digest"]
    );
}

#[test]
fn kip2_cap_003_formatting_only_change_preserves_canonical_digest() {
    let n = nexus();
    seed(&n);
    let c = export_people(&n);
    // Pretty-printed text with the keys in another order: the same canonical payload.
    let mut payload: Vec<(String, Value)> = c["payload"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    payload.reverse();
    let reordered = serde_json::Map::from_iter(payload);
    let text = serde_json::to_string_pretty(&json!({
        "integrity": c["integrity"],
        "payload": reordered,
        "version": c["version"],
        "format": c["format"],
    }))
    .unwrap_or_default();
    let v = ok_with(&n, "VERIFY CAPSULE :c", json!({ "c": text }));
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["content_digest"], c["integrity"]["content_digest"]);
}

#[test]
fn kip2_cap_005_valid_signature_does_not_imply_trust() {
    let n = nexus();
    seed(&n);
    let mut c = export_people(&n);
    c["integrity"]["proofs"] = json!([{"key_id": "did:example:untrusted", "sig": "AAAA"}]);
    let v = ok_with(&n, "VERIFY CAPSULE :c", json!({ "c": c }));
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["trust_granted"], false);
    assert_eq!(v["authority_granted"], false);
}

#[test]
fn kip2_cap_006_007_and_018_preview_maps_nothing_by_name_and_changes_nothing() {
    let source = nexus();
    seed(&source);
    let c = export_people(&source);
    // The destination has its own, different Alice.
    let dest = nexus();
    ok(
        &dest,
        r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Alice" SET FIELDS {key: "someone-else"} }"#,
    );
    let seq = ok(&dest, "SNAPSHOT")["snapshot_seq"].clone();
    let count = |n: &kip_engine::Nexus| {
        ok(
            n,
            r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {type: "Person"} }"#,
        )
    };
    let before = count(&dest);
    let p = ok_with(
        &dest,
        r#"PREVIEW IMPORT CAPSULE :c INTO "default""#,
        json!({ "c": c }),
    );
    assert_eq!(p["committed"], false, "{p}");
    assert_eq!(p["would_create"]["concept"], 1, "{p}");
    assert_eq!(
        p["would_resolve"],
        json!([]),
        "same name is not identity: {p}"
    );
    assert_eq!(p["collisions"].as_array().map(Vec::len), Some(1), "{p}");
    assert_eq!(p["plan"][0]["action"], "create", "{p}");
    assert_eq!(count(&dest), before, "a preview creates nothing");
    assert_eq!(
        ok(&dest, "SNAPSHOT")["snapshot_seq"],
        seq,
        "nor takes a seq"
    );
    // Another space than this memory's one is not visible.
    let r = run_with(
        &dest,
        r#"PREVIEW IMPORT CAPSULE :c INTO "elsewhere""#,
        json!({ "c": c }),
    );
    assert_eq!(error_of(&r), "NotFoundOrNotVisible", "{r}");
}

#[test]
fn kip2_cap_014_redacted_and_unavailable_external_refs_remain_distinguishable() {
    let n = nexus();
    seed(&n);
    let mut c = export_people(&n);
    c["payload"]["external_refs"] = json!([
        {"kind": "redacted", "source_ref": "C:90"},
        {"kind": "unavailable", "source_ref": "C:91"},
    ]);
    let d = ok_with(&n, "DESCRIBE CAPSULE :c", json!({ "c": c }));
    assert_eq!(
        d["external_refs"]["redacted"][0]["source_ref"], "C:90",
        "{d}"
    );
    assert_eq!(
        d["external_refs"]["unavailable"][0]["source_ref"], "C:91",
        "{d}"
    );
}

#[test]
fn kip2_cap_015_closure_declaration_is_inspectable() {
    let n = nexus();
    seed(&n);
    // A proposition alone: its ends are outside, listed as references.
    let links = ok(
        &n,
        r#"EXPORT CAPSULE ?p WHERE { ?p PROPOSITION (?s, "prefers", ?o) }"#,
    );
    assert_eq!(
        links["payload"]["manifest"]["closure"], "selective",
        "{links}"
    );
    let refs = links["payload"]["external_refs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(refs.len(), 2, "subject and object: {links}");
    assert!(refs.iter().all(|r| r["kind"] == "source_element"));
    let d = ok_with(&n, "DESCRIBE CAPSULE :c", json!({ "c": links }));
    assert_eq!(d["closure"], "selective", "{d}");
    assert_eq!(d["capsule_kind"], "snapshot");
    // The proposition with its ends: closed.
    let all = ok(
        &n,
        r#"EXPORT CAPSULE ?x WHERE { ?x CONCEPT {} UNION { ?x PROPOSITION (?s, "prefers", ?o) } }"#,
    );
    assert_eq!(all["payload"]["manifest"]["closure"], "closed", "{all}");
}

#[test]
fn kip2_cap_016_verify_and_validate_differ() {
    let source = nexus();
    // A type of this memory's KIP 1.x schema.
    common::ok(
        &source,
        r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Starship"} SET ATTRIBUTES { description: "a vessel" } } }"#,
    );
    ok(
        &source,
        r#"CREATE CONCEPT ?x { TYPE "Starship" NAME "Endurance" }"#,
    );
    let c = ok(
        &source,
        r#"EXPORT CAPSULE ?c WHERE { ?c CONCEPT {type: "Starship"} }"#,
    );
    assert_eq!(
        ok_with(&source, "VALIDATE CAPSULE :c", json!({ "c": c }))["valid"],
        true
    );
    // A memory without that type: the capsule verifies but does not validate there.
    let dest = nexus();
    let v = ok_with(&dest, "VERIFY CAPSULE :c", json!({ "c": c }));
    assert_eq!(v["verified"], true, "{v}");
    let checked = ok_with(&dest, "VALIDATE CAPSULE :c", json!({ "c": c }));
    assert_eq!(checked["valid"], false, "{checked}");
    assert_eq!(checked["errors"][0]["code"], "CapsuleValidationFailed");
    let r = run_with(
        &dest,
        r#"PREVIEW IMPORT CAPSULE :c INTO "default""#,
        json!({ "c": c }),
    );
    assert_eq!(error_of(&r), "CapsuleValidationFailed", "{r}");
}

#[test]
fn kip2_cap_020_capsule_url_is_not_auto_fetched() {
    let n = nexus();
    for cmd in [
        "VERIFY CAPSULE :c",
        "VALIDATE CAPSULE :c",
        r#"PREVIEW IMPORT CAPSULE :c INTO "default""#,
    ] {
        let r = run_with(
            &n,
            cmd,
            json!({"c": "https://example.invalid/capsule.json"}),
        );
        assert_eq!(error_of(&r), "ArtifactUnavailable", "{cmd}: {r}");
    }
    let r = run_with(&n, "VERIFY CAPSULE :c", json!({"c": "{not json"}));
    assert_eq!(error_of(&r), "ArtifactParseError", "{r}");
}

/// An export is a read: the read-only tool runs it, and the checks of an artifact.
#[test]
fn a_readonly_caller_exports_and_checks_capsules() {
    let n = nexus();
    seed(&n);
    let r = send_ro(
        &n,
        json!({"kip": "2.0", "operations": [
            {"command": r#"EXPORT CAPSULE ?c WHERE { ?c CONCEPT {type: "Person"} }"#}]}),
    );
    assert_eq!(r["status"], "succeeded", "{r}");
    let c = r["results"][0]["result"].clone();
    let r = send_ro(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "independent"}, "operations": [
            {"command": "VERIFY CAPSULE :c", "parameters": {"c": c}},
            {"command": r#"PREVIEW IMPORT CAPSULE :c INTO "default""#, "parameters": {"c": c}}]}),
    );
    assert_eq!(r["status"], "succeeded", "{r}");
}

#[test]
fn kip2_cap_017_validate_and_preview_differ() {
    let source = nexus();
    seed(&source);
    let c = export_people(&source);
    let dest = nexus();
    ok(&dest, r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Alice" }"#);
    // Well-formed for this memory...
    let v = ok_with(&dest, "VALIDATE CAPSULE :c", json!({ "c": c }));
    assert_eq!(v, json!({"valid": true, "errors": []}));
    // ...and still in conflict with its identities: the preview says so.
    let p = ok_with(
        &dest,
        r#"PREVIEW IMPORT CAPSULE :c INTO "default""#,
        json!({ "c": c }),
    );
    let collisions = p["collisions"].as_array().cloned().unwrap_or_default();
    assert_eq!(collisions.len(), 1, "{p}");
    assert_eq!(
        collisions[0]["source_ref"],
        c["payload"]["records"][0]["source_ref"]
    );
}
