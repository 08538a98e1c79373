//! KIP 2.0 conformance cases of the Runtime suite
//! (`spec/kip2/conformance/KIP-2.0-Conformance-Tests.md` §22) that had no test of their
//! own, through the wire (`Nexus::execute_json` with `"kip": "2.0"`), on whichever
//! backend the test matrix selects. Each test is named after its case and asserts the
//! case's normative outcome as docs/semantics.md ("KIP 2.0 on the one memory") maps it
//! onto this store. A case for a feature that is not built yet (streaming, artifact
//! handles, ingestion context) asserts the honest `UnsupportedCapability`
//! (`..._unsupported_for_now`).

mod common;
use common::kip2::*;
use common::nexus;
use serde_json::{json, Value};

/// A request refused as a whole, before any operation ran.
fn refused_before_running(r: &Value, expected: &str) {
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(r["error"]["code"], expected, "{r}");
    assert_eq!(r["results"], json!([]), "{r}");
}

#[test]
fn kip2_rt_001_utf8_round_trip() {
    let n = nexus();
    let text = "Zoë 李雷 🚀 Ångström — e\u{301} ﷺ";
    let h = ok_with(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?p { TYPE "Person" NAME :name SET ATTRIBUTES { motto: :text, literal: "naïve café 日本語" } }
  CREATE EVIDENCE ?e { SET FIELDS { evidence_class: "user_statement", payload: :text } }
}"#,
        json!({"name": text, "text": text}),
    );
    assert_eq!(
        ok_with(
            &n,
            "FIND(?c.name, ?c.attributes.motto, ?c.attributes.literal) WHERE { ?c CONCEPT {name: :name} }",
            json!({"name": text})
        ),
        json!([[text, text, "naïve café 日本語"]])
    );
    assert_eq!(
        ok_with(
            &n,
            "FIND(?e.payload) WHERE { ?e EVIDENCE {id: :e} }",
            json!({"e": h["handles"]["e"]})
        ),
        json!([text])
    );
}

#[test]
fn kip2_rt_005_embedded_placeholder_template_is_not_code() {
    let n = nexus();
    // The request supplies no :name: a literal's text is never expanded.
    let id = ok(
        &n,
        r#"CREATE CONCEPT ?p { TYPE "Person" NAME "Hello :name" }"#,
    )["handles"]["p"]
        .clone();
    assert_eq!(
        ok(
            &n,
            r#"FIND(?c.id, ?c.name) WHERE { ?c CONCEPT {name: "Hello :name"} }"#
        ),
        json!([[id, "Hello :name"]])
    );
    // Given a :name, the literal still does not take it.
    let r = ok_with(
        &n,
        r#"FIND(?c.name) WHERE { ?c CONCEPT {name: "Hello :name"} }"#,
        json!({"name": "World"}),
    );
    assert_eq!(r, json!(["Hello :name"]));
}

#[test]
fn kip2_rt_006_non_finite_number_rejected() {
    let n = nexus();
    let id = ok(&n, r#"CREATE CONCEPT ?p { TYPE "Person" NAME "Num" }"#)["handles"]["p"].clone();
    for number in ["1e999", "-1e999", "NaN", "Infinity"] {
        let r = run_with(
            &n,
            &format!("UPDATE :p SET ATTRIBUTES {{ x: {number} }}"),
            json!({"p": id}),
        );
        assert_eq!(code(&r), "InvalidSyntax", "{number}: {r}");
    }
    assert_eq!(
        ok_with(
            &n,
            "FIND(?c.attributes, ?c._system.version) WHERE { ?c CONCEPT {id: :p} }",
            json!({"p": id})
        ),
        json!([[{}, 1]]),
        "no durable mutation"
    );
}

#[test]
fn kip2_rt_010_sequence_observes_prior_commit() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "sequence"}, "operations": [
            {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Seq" }"#},
            {"command": r#"FIND(?c.id) WHERE { ?c CONCEPT {name: "Seq"} }"#}
        ]}),
    );
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(
        r["results"][1]["result"],
        json!([r["results"][0]["result"]["handles"]["x"]])
    );
}

#[test]
fn kip2_rt_013_atomic_readonly_batch_has_no_write_receipt() {
    let n = nexus();
    ok(&n, r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Reader" }"#);
    let r = send_ro(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "atomic"}, "operations": [
            {"command": "FIND(COUNT(?c)) WHERE { ?c CONCEPT {} }"},
            {"command": "FIND(COUNT(?c)) WHERE { ?c CONCEPT {} }"}
        ]}),
    );
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["results"][0]["result"], r["results"][1]["result"]);
    assert!(r["receipt"].is_null(), "{r}");
    // One shared snapshot, named at the top and in each operation's context.
    assert_eq!(r["snapshot"]["snapshot_seq"], 1, "{r}");
    for op in r["results"].as_array().into_iter().flatten() {
        assert_eq!(op["context"]["snapshot_seq"], 1, "{r}");
    }
    for op in r["results"].as_array().into_iter().flatten() {
        assert!(
            op.get("receipt").is_none() && op["result"].get("tx_id").is_none(),
            "{r}"
        );
    }
}

#[test]
fn kip2_rt_015_retry_may_change_request_id_but_preserve_logical_tx() {
    let n = nexus();
    let attempt = |id: &str| {
        send(
            &n,
            json!({"kip": "2.0", "request_id": id,
                "execution": {"mode": "atomic", "idempotency_key": "rt-015"}, "operations": [
                {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Retried" }"#}]}),
        )
    };
    let first = attempt("attempt-1");
    let second = attempt("attempt-2");
    assert_eq!(second["request_id"], "attempt-2");
    assert_eq!(second["status"], "succeeded", "{second}");
    assert_eq!(
        second["results"][0]["result"],
        first["results"][0]["result"]
    );
    assert_eq!(
        count(
            &n,
            r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {name: "Retried"} }"#
        ),
        json!(1)
    );
}

#[test]
fn kip2_rt_016_snapshot_token_is_opaque() {
    let n = nexus();
    ok(&n, r#"CREATE CONCEPT ?x { TYPE "Person" NAME "First" }"#);
    let token = ok(&n, "SNAPSHOT")["snapshot_token"]
        .as_str()
        .expect("a token")
        .to_string();
    ok(&n, r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Second" }"#);
    let at = |t: &str| {
        send(
            &n,
            json!({"kip": "2.0", "read": {"snapshot_token": t}, "operations": [
                {"command": r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {type: "Person"} }"#}]}),
        )
    };
    // The token reads the coordinate it was issued for.
    let r = at(&token);
    assert_eq!(r["results"][0]["result"], json!([1]), "{r}");
    assert_eq!(r["results"][0]["context"]["snapshot_seq"], 1, "{r}");
    // An edited coordinate (seq 1 -> 2, the MAC kept) is refused, not read.
    let edited = token.replacen("0000000000000001", "0000000000000002", 1);
    assert_ne!(edited, token);
    let r = at(&edited);
    assert_eq!(
        r["results"][0]["error"]["code"], "InvalidRequestEnvelope",
        "{r}"
    );
    let r = at("snap:seq=17;edited=true");
    assert_eq!(
        r["results"][0]["error"]["code"], "InvalidRequestEnvelope",
        "{r}"
    );
}

#[test]
fn kip2_rt_017_snapshot_token_is_not_authorization() {
    let n = nexus();
    ok(&n, r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Reader" }"#);
    let token = ok(&n, "SNAPSHOT")["snapshot_token"].clone();
    // A token binds a coordinate only: it grants nothing. The read-only endpoint stays
    // read-only with it, and a write with it is authorized as without it.
    let r = send_ro(
        &n,
        json!({"kip": "2.0", "read": {"snapshot_token": token}, "operations": [
            {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Intruder" }"#}]}),
    );
    assert_eq!(r["results"][0]["error"]["code"], "ReadonlyViolation", "{r}");
    let r = send_ro(
        &n,
        json!({"kip": "2.0", "read": {"snapshot_token": token}, "operations": [
            {"command": r#"FIND(?c.name) WHERE { ?c CONCEPT {type: "Person"} }"#}]}),
    );
    assert_eq!(r["results"][0]["result"], json!(["Reader"]), "{r}");
}

#[test]
fn kip2_rt_018_lagging_search_cannot_fake_atomic_consistency() {
    let n = nexus();
    // Keyword search inside the transaction sees its writes (genuinely aligned) ...
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "atomic", "isolation": "serializable"}, "operations": [
            {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Quokka" }"#},
            {"command": r#"SEARCH CONCEPT "Quokka" MODE "keyword""#}
        ]}),
    );
    assert_eq!(r["status"], "succeeded", "{r}");
    let id = &r["results"][0]["result"]["handles"]["x"];
    assert_eq!(r["results"][1]["result"][0]["id"], *id);
    assert_eq!(
        r["results"][1]["context"]["search"]["consistency"],
        "snapshot"
    );
    // ... and a vector search it cannot align (no embedder here) is refused, not
    // answered as keyword search.
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "atomic", "isolation": "serializable"}, "operations": [
            {"command": r#"SEARCH CONCEPT "Quokka" MODE "semantic""#}
        ]}),
    );
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(code(&r), "SearchModeUnsupported", "{r}");
}

#[test]
fn kip2_rt_023_outcome_unknown_differs_from_transaction_state() {
    let n = nexus();
    let request = json!({"kip": "2.0", "request_id": "lost-response",
        "execution": {"mode": "atomic", "idempotency_key": "rt-023"}, "operations": [
        {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Committed Anyway" }"#}]});
    // The write commits; its response is lost, and the client's call answers as a
    // cancelled one (§80.3).
    let committed = send(&n, request.clone());
    assert_eq!(committed["status"], "succeeded", "{committed}");
    let client = kip_engine::v2::cancelled(&request);
    assert_eq!(client["status"], "outcome_unknown", "{client}");
    assert_eq!(client["error"]["code"], "OutcomeUnknown");
    assert_eq!(client["error"]["retry"]["class"], "outcome_lookup_required");
    // The lookup tells the transaction's own state.
    let tx = ok(&n, r#"DESCRIBE TRANSACTION BY IDEMPOTENCY KEY "rt-023""#);
    assert_eq!(tx["status"], "committed", "{tx}");
    assert_eq!(tx["result"], committed["results"][0]["result"]);
}

#[test]
fn kip2_rt_024_progress_does_not_claim_commit_unsupported_for_now() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "requires": {"streaming": true}, "operations": [
            {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Streamed" }"#}]}),
    );
    refused_before_running(&r, "UnsupportedCapability");
    assert_eq!(
        count(
            &n,
            r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {name: "Streamed"} }"#
        ),
        json!(0)
    );
}

#[test]
fn kip2_rt_025_final_frame_establishes_terminal_write_outcome_unsupported_for_now() {
    let n = nexus();
    let caps = ok(&n, "DESCRIBE CAPABILITIES");
    assert!(caps["not_supported"].get("streaming").is_some(), "{caps}");
    let r = send(
        &n,
        json!({"kip": "2.0", "requires": {"streaming": true}, "operations": [
            {"command": "FIND(COUNT(?c)) WHERE { ?c CONCEPT {} }"}]}),
    );
    refused_before_running(&r, "UnsupportedCapability");
}

/// A request that mints evidence from an artifact handle.
fn ingest_artifact(handle: &str) -> Value {
    json!({"kip": "2.0", "ingest": {"evidence": [
        {"key": "doc", "evidence_class": "document", "payload_artifact": handle}]},
        "operations": [{"command": "FIND(?e.payload) WHERE { ?e EVIDENCE {id: :doc} }"}]})
}

#[test]
fn kip2_rt_026_artifact_handle_is_not_filesystem_path_unsupported_for_now() {
    let n = nexus();
    for handle in [
        "../../../../etc/passwd",
        "/etc/hostname",
        "file:///etc/passwd",
    ] {
        let r = send(&n, ingest_artifact(handle));
        refused_before_running(&r, "UnsupportedCapability");
        assert!(!r.to_string().contains("root:"), "{r}");
    }
    assert_eq!(
        count(&n, "FIND(COUNT(?e)) WHERE { ?e EVIDENCE {} }"),
        json!(0)
    );
}

#[test]
fn kip2_rt_027_artifact_handle_is_not_url_unsupported_for_now() {
    let n = nexus();
    for handle in [
        "http://169.254.169.254/latest/meta-data/",
        "https://example.invalid/payload",
    ] {
        refused_before_running(&send(&n, ingest_artifact(handle)), "UnsupportedCapability");
    }
    assert_eq!(
        count(&n, "FIND(COUNT(?e)) WHERE { ?e EVIDENCE {} }"),
        json!(0)
    );
}

#[test]
fn kip2_rt_028_expected_artifact_digest_is_checked_unsupported_for_now() {
    let n = nexus();
    unsupported(&run_with(
        &n,
        "VERIFY BLOB :b",
        json!({"b": {"handle": "artifact:7", "digest": "sha256:0000000000000000000000000000000000000000000000000000000000000000"}}),
    ));
}

#[test]
fn kip2_rt_029_expired_artifact_fails_safely_unsupported_for_now() {
    let n = nexus();
    let mut r = ingest_artifact("artifact:expired-1");
    r["operations"] = json!([{"command": r#"CREATE ASSERTION ?a { SET FIELDS { proposition: :p, asserted_by: :w, stance: "support", mode: "stated" } SET STRUCTURAL { ("evidence", :doc) } }"#,
        "parameters": {"p": "P:1", "w": "C:1"}}]);
    refused_before_running(&send(&n, r), "UnsupportedCapability");
    assert_eq!(
        count(&n, "FIND(COUNT(?a)) WHERE { ?a ASSERTION {} }"),
        json!(0),
        "no cognitive commit"
    );
}

#[test]
fn kip2_rt_030_cursor_families_are_non_interchangeable() {
    let n = nexus();
    ok(&n, r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Alice" }"#);
    ok(&n, r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Bob" }"#);
    let first = run_with(
        &n,
        r#"FIND(?c.name) WHERE { ?c CONCEPT {type: "Person"} } ORDER BY ?c.name LIMIT 1 CURSOR :c"#,
        json!({"c": null}),
    );
    let kql = first["results"][0]["next_cursor"].clone();
    assert!(kql.is_string(), "{first:#}");
    // A KQL cursor is not a SEARCH position; a string of no family is not a KQL cursor.
    let search = run_with(&n, r#"SEARCH CONCEPT "Alice" CURSOR :c"#, json!({"c": kql}));
    assert_eq!(
        search["results"][0]["error"]["code"], "CursorTypeMismatch",
        "{search:#}"
    );
    let forged = run_with(
        &n,
        r#"FIND(?c.name) WHERE { ?c CONCEPT {} } LIMIT 1 CURSOR :c"#,
        json!({"c": "kql:cursor:1"}),
    );
    assert_eq!(
        forged["results"][0]["error"]["code"], "CursorTypeMismatch",
        "{forged:#}"
    );
    // A KQL cursor is not a change cursor, nor a change cursor a KQL one.
    let changes = run_with(&n, "CHANGES SINCE :c", json!({"c": kql}));
    assert_eq!(
        changes["results"][0]["error"]["code"], "CursorTypeMismatch",
        "{changes:#}"
    );
    let change_cursor = ok(&n, "CHANGES AFTER SEQ 0")["cursor"].clone();
    let crossed = run_with(
        &n,
        r#"FIND(?c.name) WHERE { ?c CONCEPT {} } LIMIT 1 CURSOR :c"#,
        json!({"c": change_cursor}),
    );
    assert_eq!(
        crossed["results"][0]["error"]["code"], "CursorTypeMismatch",
        "{crossed:#}"
    );
}

#[test]
fn kip2_rt_031_ingestion_context_mints_faithful_evidence() {
    use sha2::{Digest, Sha256};
    let n = nexus();
    let payload = "I moved to Singapore. \"Finally\" \u{1F680}";
    let request = json!({"kip": "2.0", "execution": {"mode": "atomic", "idempotency_key": "rt-031"},
        "ingest": {"evidence": [{"key": "msg", "evidence_class": "user_statement",
            "payload": payload, "client_key": "message:9", "source_actor": "alice",
            "observed_at": "2026-08-14T01:00:00Z"}]},
        "operations": [
            {"command": r#"CREATE CONCEPT ?a { TYPE "Person" NAME "Alice" SET FIELDS {key: "alice"} }"#},
            {"command": "FIND(?e.payload, ?e.content_digest) WHERE { ?e EVIDENCE {id: :msg} }"}]});
    let r = send(&n, request.clone());
    assert_eq!(r["status"], "succeeded", "{r}");
    let digest: String = Sha256::digest(payload.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    // The payload byte for byte, its digest that of the transport's bytes.
    assert_eq!(
        r["results"][1]["result"],
        json!([[payload, format!("sha256:{digest}")]]),
        "{r}"
    );
    // One logical write: one commit.
    assert_eq!(r["receipt"]["space_seq"], 1, "{r}");
    // A retry (same keys) mints no second Evidence.
    let again = send(&n, request);
    assert_eq!(again["status"], "succeeded", "{again}");
    assert_eq!(
        count(&n, "FIND(COUNT(?e)) WHERE { ?e EVIDENCE {} }"),
        json!(1)
    );
    // An aborted transaction mints nothing.
    let aborted = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "atomic"},
            "ingest": {"evidence": [{"key": "m2", "evidence_class": "user_statement", "payload": "lost"}]},
            "operations": [{"command": "RETRACT ASSERTION :m2"}]}),
    );
    assert_ne!(aborted["status"], "succeeded", "{aborted}");
    assert_eq!(
        count(&n, "FIND(COUNT(?e)) WHERE { ?e EVIDENCE {} }"),
        json!(1)
    );
    // A read-only endpoint does not mint.
    let ro = send_ro(
        &n,
        json!({"kip": "2.0",
            "ingest": {"evidence": [{"key": "m3", "evidence_class": "user_statement", "payload": "no"}]},
            "operations": [{"command": "FIND(?e) WHERE { ?e EVIDENCE {id: :m3} }"}]}),
    );
    assert_eq!(
        ro["results"][0]["error"]["code"], "ReadonlyViolation",
        "{ro}"
    );
}

#[test]
fn kip2_rt_009_independent_may_use_separate_snapshots_and_contexts_identify_them() {
    let n = nexus();
    ok(&n, r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Before" }"#);
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "independent"}, "operations": [
            {"command": r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {type: "Person"} }"#},
            {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Between" }"#},
            {"command": r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {type: "Person"} }"#}
        ]}),
    );
    assert_eq!(r["status"], "succeeded", "{r}");
    // Each read names the snapshot it saw; the write between them is a commit of its own.
    assert_eq!(r["results"][0]["context"]["snapshot_seq"], 1, "{r}");
    assert_eq!(
        r["results"][1]["extensions"]["kip-nexus/receipt"]["space_seq"], 2,
        "{r}"
    );
    assert_eq!(r["results"][2]["context"]["snapshot_seq"], 2, "{r}");
    assert_eq!(r["results"][0]["result"], json!([1]));
    assert_eq!(r["results"][2]["result"], json!([2]));
    // Two snapshots: no single top-level snapshot stands for the request.
    assert!(r["snapshot"].is_null(), "{r}");
}

#[test]
fn kip2_rt_011_sequence_is_not_shared_snapshot() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "sequence"}, "operations": [
            {"command": "SNAPSHOT"},
            {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Mid" }"#},
            {"command": r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {type: "Person"} }"#}
        ]}),
    );
    assert_eq!(r["status"], "succeeded", "{r}");
    // The sequence is not advertised as one transaction: no atomic receipt for all,
    // and the last read reports the snapshot it actually read (after the write).
    assert_eq!(r["results"][0]["result"]["snapshot_seq"], 0, "{r}");
    assert_eq!(r["results"][2]["context"]["snapshot_seq"], 1, "{r}");
    assert!(r["execution"]["mode"] == "sequence", "{r}");
}
