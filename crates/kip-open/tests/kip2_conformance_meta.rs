//! KIP 2.0 conformance cases of the META suite
//! (`spec/kip2/conformance/KIP-2.0-Conformance-Tests.md` §21) that had no test of their
//! own, through the wire (`Nexus::execute_json` with `"kip": "2.0"`), on whichever
//! backend the test matrix selects. Each test is named after its case and asserts the
//! case's normative outcome as docs/semantics.md ("KIP 2.0 on the one memory") maps it
//! onto this store. A case for a feature that is not built yet (capsules, VERIFY)
//! asserts the honest `UnsupportedCapability` (`..._unsupported_for_now`).

mod common;
use common::kip2::*;
use common::nexus;
use kip_engine::Nexus;
use serde_json::{json, Value};

/// Alice (key `alice`) prefers Dark, asserted by Alice with a user statement as
/// evidence; the handles.
fn seed(n: &Nexus) -> Value {
    ok(
        n,
        r#"MUTATE {
  CREATE CONCEPT ?alice { TYPE "Person" NAME "Alice" SET FIELDS {key: "alice"} }
  CREATE CONCEPT ?dark { TYPE "Preference" NAME "Dark" }
  ENSURE PROPOSITION ?p (?alice, "prefers", ?dark)
  CREATE EVIDENCE ?msg { SET FIELDS { evidence_class: "user_statement", payload: "I like dark mode" } }
  CREATE ASSERTION ?a1 { SET FIELDS { proposition: ?p, asserted_by: ?alice, stance: "support", mode: "stated", confidence: 0.6 }
                         SET STRUCTURAL { ("evidence", ?msg) {role: "support"} } }
}"#,
    )["handles"]
        .clone()
}

/// What the memory holds, element by element with its version: what a request that
/// must not change state is compared against (there is no space sequence to record).
fn state(n: &Nexus) -> Value {
    json!([
        ok(
            n,
            "FIND(?c.id, ?c._system.version) WHERE { ?c CONCEPT {} } ORDER BY ?c.id"
        ),
        ok(
            n,
            "FIND(?p.id, ?p._system.version) WHERE { ?p PROPOSITION (?s, ?r, ?o) } ORDER BY ?p.id"
        ),
        ok(
            n,
            "FIND(?a.id, ?a._system.version) WHERE { ?a ASSERTION {} } ORDER BY ?a.id"
        ),
        ok(
            n,
            "FIND(?e.id, ?e._system.version) WHERE { ?e EVIDENCE {} } ORDER BY ?e.id"
        ),
        ok(
            n,
            "FIND(?x.id, ?x._system.version) WHERE { ?x ACTIVITY {} } ORDER BY ?x.id"
        ),
        ok(n, "LIST SCHEMA PACKAGES"),
    ])
}

#[test]
fn kip2_meta_002_primer_distinguishes_principal_and_self() {
    let n = nexus();
    let p = send_ro(
        &n,
        json!({"kip": "2.0", "operations": [{"command": "DESCRIBE PRIMER"}]}),
    )["results"][0]["result"]
        .clone();
    let principal = &p["execution_context"]["principal"];
    let me = &p["execution_context"]["self"];
    assert_eq!(principal["class"], "interface_caller", "{p}");
    assert_eq!(principal["access"], "read_only");
    assert_eq!(me["concept"]["name"], "$self");
    assert_ne!(principal.get("name"), Some(&json!("$self")));
    assert_ne!(principal, me, "the caller is not the semantic self");
}

#[test]
fn kip2_meta_009_search_miss_is_not_absence() {
    let n = nexus();
    // A keyed concept's display name is not in the text index (docs/semantics.md,
    // SEARCH): a word of it alone misses, while the exact read finds it.
    let id = ok(
        &n,
        r#"CREATE CONCEPT ?z { TYPE "Person" NAME "Zebra Crossing" SET FIELDS {key: "person:zc"} }"#,
    )["handles"]["z"]
        .clone();
    let miss = run(&n, r#"SEARCH CONCEPT "Crossing""#);
    assert_eq!(miss["status"], "succeeded", "{miss}");
    assert_eq!(miss["results"][0]["result"], json!([]));
    assert_eq!(
        miss["results"][0]["context"]["search"]["score_semantics"],
        "retrieval_score_not_confidence"
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.id) WHERE { ?c CONCEPT {name: "Zebra Crossing"} }"#
        ),
        json!([id])
    );
    // A kind the index does not hold is said to be unsupported, never an empty list.
    unsupported(&run(&n, r#"SEARCH EVIDENCE "Crossing""#));
}

#[test]
fn kip2_meta_010_search_freshness_disclosed() {
    let n = nexus();
    seed(&n);
    let r = run(&n, r#"SEARCH CONCEPT "Alice""#);
    let search = &r["results"][0]["context"]["search"];
    assert_eq!(search["mode"], "keyword", "{r}");
    assert_eq!(search["consistency"], "snapshot", "{r}");
}

#[test]
fn kip2_meta_012_capability_enumeration_does_not_leak_hidden_space() {
    let n = nexus();
    let ro = |command: &str| {
        send_ro(
            &n,
            json!({"kip": "2.0", "operations": [{"command": command}]}),
        )
    };
    let caps = ro("DESCRIBE CAPABILITIES")["results"][0]["result"].clone();
    assert_eq!(caps["spaces"], json!(["default"]), "{caps}");
    assert_eq!(
        ro("DESCRIBE EXECUTION CONTEXT")["results"][0]["result"]["space"]["id"],
        "default"
    );
    // Another space is not visible, and the answer does not tell whether it exists.
    let other = |space: &str| {
        send_ro(
            &n,
            json!({"kip": "2.0", "space": {"id": space}, "operations": [{"command": "DESCRIBE CAPABILITIES"}]}),
        )
    };
    let a = other("secret");
    let b = other("no-such-space-at-all");
    assert_eq!(code(&a), "NotFoundOrNotVisible", "{a}");
    assert_eq!(code(&b), "NotFoundOrNotVisible", "{b}");
    assert_eq!(a["results"], json!([]));
}

#[test]
fn kip2_meta_013_verify_signature_is_not_trust() {
    let n = nexus();
    seed(&n);
    let mut capsule = ok(
        &n,
        r#"EXPORT CAPSULE ?c WHERE { ?c CONCEPT {type: "Person"} }"#,
    );
    // A proof from a signer this memory does not know: outside the digested payload.
    capsule["integrity"]["proofs"] = json!([{"key_id": "unknown-signer", "sig": "AAAA"}]);
    let before = state(&n);
    let v = ok_with(&n, "VERIFY CAPSULE :a", json!({"a": capsule}));
    assert_eq!(v["verified"], true, "{v}");
    assert_eq!(v["trust_granted"], false, "{v}");
    assert_eq!(v["authority_granted"], false, "{v}");
    assert_eq!(v["proofs"]["present"], 1, "{v}");
    assert_eq!(state(&n), before, "a verification changes nothing");
    // Schema packages are not verified by this runtime yet.
    let artifact = json!({"format": "KIP-Schema-Package",
        "manifest": {"package_id": "kip://test/signed", "version": "1.0.0"},
        "definitions": {}, "integrity": {"signatures": [{"key_id": "unknown-signer", "sig": "AAAA"}]}});
    unsupported(&run_with(
        &n,
        "VERIFY SCHEMA PACKAGE :a",
        json!({"a": artifact}),
    ));
}

#[test]
fn kip2_meta_014_validate_kml_has_no_state_change() {
    let n = nexus();
    let h = seed(&n);
    let before = state(&n);
    let r = ok_with(
        &n,
        "VALIDATE KML :t",
        json!({"t": r#"MUTATE {
  CREATE CONCEPT ?b { TYPE "Person" NAME "Bob" }
  UPDATE :alice SET ATTRIBUTES {mood: "calm"}
  RETRACT ASSERTION :a1
}"#, "alice": h["alice"], "a1": h["a1"]}),
    );
    assert_eq!(r, json!({"valid": true, "errors": []}));
    assert_eq!(state(&n), before);
    assert_eq!(
        count(&n, r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {name: "Bob"} }"#),
        json!(0)
    );
}

#[test]
fn kip2_meta_015_preview_kml_has_no_state_or_reservation() {
    let n = nexus();
    seed(&n);
    let before = state(&n);
    let p = ok_with(
        &n,
        "PREVIEW KML :t",
        json!({"t": r#"CREATE CONCEPT ?x { TYPE "Person" CLIENT KEY "turn:1" NAME "Previewed" }"#}),
    );
    assert_eq!(p["committed"], false, "{p}");
    assert_eq!(state(&n), before, "nothing committed");
    // The client key was not reserved: another content may claim it.
    let real = ok(
        &n,
        r#"CREATE CONCEPT ?y { TYPE "Person" CLIENT KEY "turn:1" NAME "Committed" }"#,
    );
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.name, ?c.client_key) WHERE { ?c CONCEPT {type: "Person", name: "Committed"} }"#
        ),
        json!([["Committed", "turn:1"]]),
        "{real}"
    );
}

#[test]
fn kip2_meta_016_preview_is_not_future_commit_guarantee() {
    let n = nexus();
    let h = seed(&n);
    let guarded = r#"UPDATE :a EXPECT VERSION 1 SET ATTRIBUTES {mood: "previewed"}"#;
    let p = ok_with(&n, "PREVIEW KML :t", json!({"t": guarded, "a": h["alice"]}));
    assert_eq!(p["committed"], false);
    assert_eq!(p["effect"]["changed"], json!([h["alice"]]));
    ok_with(
        &n,
        r#"UPDATE :a SET ATTRIBUTES {mood: "changed meanwhile"}"#,
        json!({"a": h["alice"]}),
    );
    let r = run_with(&n, guarded, json!({"a": h["alice"]}));
    assert_eq!(code(&r), "VersionConflict", "{r}");
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.attributes.mood) WHERE { ?c CONCEPT {key: "alice"} }"#
        ),
        json!(["changed meanwhile"])
    );
}

#[test]
fn kip2_meta_017_transaction_lookup_by_idempotency_returns_original() {
    let n = nexus();
    let request = json!({"kip": "2.0", "request_id": "attempt-1",
        "execution": {"mode": "atomic", "idempotency_key": "meta-017"}, "operations": [
        {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Iris" }"#}]});
    let first = send(&n, request);
    assert_eq!(first["status"], "succeeded", "{first}");
    let tx = ok(&n, r#"DESCRIBE TRANSACTION BY IDEMPOTENCY KEY "meta-017""#);
    assert_eq!(tx["status"], "committed", "{tx}");
    assert_eq!(tx["idempotency_key"], "meta-017");
    assert_eq!(tx["result"], first["results"][0]["result"]);
}

#[test]
fn kip2_meta_018_unknown_transaction_is_not_aborted() {
    let n = nexus();
    let r = run(
        &n,
        r#"DESCRIBE TRANSACTION BY IDEMPOTENCY KEY "never-sent-4711""#,
    );
    assert_eq!(code(&r), "TransactionUnknown", "{r}");
    assert!(!r.to_string().contains("aborted"), "{r}");
    // By transaction id the lookup does not run yet: it says so, it does not guess.
    unsupported(&run(&n, r#"DESCRIBE TRANSACTION "tx-0000-unknown""#));
}

#[test]
fn kip2_meta_019_history_reports_chronology() {
    let n = nexus();
    let h = seed(&n);
    for mood in ["calm", "busy"] {
        ok_with(
            &n,
            &format!(r#"UPDATE :a SET ATTRIBUTES {{mood: "{mood}"}}"#),
            json!({"a": h["alice"]}),
        );
    }
    let e = ok_with(&n, "HISTORY ELEMENT :a", json!({"a": h["alice"]}));
    let changes = e["changes"].as_array().expect("changes");
    let seqs: Vec<&Value> = changes.iter().map(|c| &c["space_seq"]).collect();
    assert_eq!(seqs, [&json!(2), &json!(3)], "{e}");
    // Each change keeps the state it replaced: none, then calm.
    assert_eq!(
        changes[0]["replaced"]["row"]["attributes"],
        json!({}),
        "{e}"
    );
    assert_eq!(
        changes[1]["replaced"]["row"]["attributes"]["mood"], "calm",
        "{e}"
    );
    // HISTORY SPACE: every commit, in seq order (KIP2-HIST-010).
    let s = ok(&n, "HISTORY SPACE LIMIT 10");
    let seqs: Vec<u64> = s["commits"]
        .as_array()
        .expect("commits")
        .iter()
        .filter_map(|c| c["space_seq"].as_u64())
        .collect();
    assert_eq!(seqs, [1, 2, 3], "{s}");
}

#[test]
fn kip2_meta_020_kql_as_of_reconstructs_content() {
    let n = nexus();
    let h = seed(&n);
    ok_with(
        &n,
        r#"UPDATE :a SET ATTRIBUTES {mood: "calm"}"#,
        json!({"a": h["alice"]}),
    );
    assert_eq!(
        ok_with(
            &n,
            "FIND(?c.attributes) WHERE { ?c CONCEPT {id: :a} } AS OF SEQ 1",
            json!({"a": h["alice"]}),
        ),
        json!([{}])
    );
}

#[test]
fn kip2_meta_021_changes_preserves_transaction_envelope() {
    let n = nexus();
    seed(&n);
    let c = ok(&n, "CHANGES AFTER SEQ 0 LIMIT 10");
    let commits = c["commits"].as_array().expect("commits");
    assert_eq!(commits.len(), 1, "{c}");
    // The seed's transaction as one envelope: its id, seq, time and what it created.
    assert_eq!(commits[0]["tx_id"], "kip:space:default#1", "{c}");
    assert_eq!(commits[0]["space_seq"], 1, "{c}");
    assert!(commits[0]["committed_at"].is_string(), "{c}");
    assert!(commits[0]["created_ranges"]["C"].is_array(), "{c}");
    // Past the newest commit: refused, not an empty page from "now".
    let r = run(&n, "CHANGES AFTER SEQ 99 LIMIT 10");
    assert_eq!(
        r["results"][0]["error"]["code"], "HistoricalSnapshotUnavailable",
        "{r}"
    );
}

#[test]
fn kip2_meta_022_expired_change_cursor_is_explicit() {
    let n = nexus();
    seed(&n);
    let r = run(&n, r#"CHANGES SINCE "expired-change-cursor""#);
    assert_ne!(r["status"], "succeeded", "never a silent restart from now");
    let e = &r["results"][0]["error"];
    assert_eq!(e["code"], "ChangeCursorExpired", "{r}");
    assert_eq!(e["retry"]["class"], "requires_new_snapshot", "{r}");
    // A malformed cursor of this memory's form is ChangeCursorInvalid.
    let r = run(&n, r#"CHANGES SINCE "kipchg_default_99""#);
    assert_eq!(
        r["results"][0]["error"]["code"], "ChangeCursorInvalid",
        "{r}"
    );
    // A cursor from CHANGES continues where it stopped.
    let first = ok(&n, "CHANGES AFTER SEQ 0 LIMIT 10");
    let cursor = first["cursor"].as_str().unwrap_or_default();
    assert!(cursor.starts_with("kipchg_default_1_"), "{first}");
    // An edited cursor of this memory (another seq under the same tag) is not read.
    let edited = cursor.replacen("kipchg_default_1_", "kipchg_default_0_", 1);
    let r = run_with(&n, "CHANGES SINCE :c", json!({"c": edited}));
    assert_eq!(
        r["results"][0]["error"]["code"], "ChangeCursorExpired",
        "{r}"
    );
    // Another memory's cursor, at a seq this one has reached too, is not a position
    // in this memory's history.
    let other = nexus();
    seed(&other);
    let theirs = ok(&other, "CHANGES AFTER SEQ 0 LIMIT 10");
    let r = run_with(&n, "CHANGES SINCE :c", json!({"c": theirs["cursor"]}));
    assert_eq!(
        r["results"][0]["error"]["code"], "ChangeCursorExpired",
        "{r}"
    );
    ok(&n, r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Later" }"#);
    let next = ok_with(&n, "CHANGES SINCE :c", json!({"c": first["cursor"]}));
    let seqs: Vec<&Value> = next["commits"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| &c["space_seq"])
        .collect();
    assert_eq!(seqs, [&json!(2)], "{next}");
}

#[test]
fn kip2_meta_023_export_capsule_is_cognitively_read_only() {
    let n = nexus();
    seed(&n);
    let before = state(&n);
    let seq = ok(&n, "SNAPSHOT")["snapshot_seq"].clone();
    let c = ok(
        &n,
        r#"EXPORT CAPSULE ?c WHERE { ?c CONCEPT {type: "Person"} }"#,
    );
    assert_eq!(c["format"], "KIP-Cognitive-Capsule", "{c}");
    assert_eq!(
        c["payload"]["records"].as_array().map(Vec::len),
        Some(1),
        "{c}"
    );
    assert_eq!(state(&n), before);
    assert_eq!(
        ok(&n, "SNAPSHOT")["snapshot_seq"],
        seq,
        "an export takes no seq"
    );
}

#[test]
fn kip2_meta_011_supported_and_available_are_distinct() {
    let n = nexus();
    let request = json!({"kip": "2.0", "operations": [{"command": "DESCRIBE CAPABILITIES"}]});
    let rw = send(&n, request.clone());
    let ro = send_ro(&n, request);
    let caps = |r: &Value| r["results"][0]["result"].clone();
    let (rw, ro) = (caps(&rw), caps(&ro));
    // The runtime supports retention and PURGE for both callers...
    assert!(rw["supported"].get("retention").is_some(), "{rw:#}");
    assert!(ro["supported"].get("retention").is_some(), "{ro:#}");
    // ...but a readonly caller cannot use them, and is not told it can.
    assert_eq!(rw["available"]["retention"], json!(true), "{rw:#}");
    for write in ["retention", "kml"] {
        assert!(ro["available"].get(write).is_none(), "{write}: {ro:#}");
    }
    let purge = send_ro(
        &n,
        json!({"kip": "2.0", "operations": [{"command": "PURGE :c CONFIRM \"PURGE\"", "parameters": {"c": "C:1"}}]}),
    );
    assert_eq!(code(&purge), "ReadonlyViolation", "{purge:#}");
}

#[test]
fn describe_space_of_another_name_is_not_found_or_not_visible() {
    let n = nexus();
    assert_eq!(ok(&n, "DESCRIBE SPACE")["space_id"], "default");
    assert_eq!(
        ok_with(&n, "DESCRIBE SPACE :s", json!({"s": "default"}))["space_id"],
        "default"
    );
    let other = run_with(&n, "DESCRIBE SPACE :s", json!({"s": "other"}));
    assert_eq!(code(&other), "NotFoundOrNotVisible", "{other:#}");
}
