//! KIP 2.0 history (Specification §5.4, §32-33, §48.1, §68; the Historical suite
//! KIP2-HIST-*, KIP2-RT-012/014): every commit takes the next `space_seq` and answers
//! with a receipt; `AS OF` reads the space as it was; `HISTORY` and `CHANGES` list the
//! chronology; a purge leaves no past content behind. On whichever backend the test
//! matrix selects (`KIP_TEST_BACKEND`).

mod common;
use common::kip2::*;
use common::nexus;
use serde_json::{json, Value};

fn seed(n: &kip_engine::Nexus) -> Value {
    ok(
        n,
        r#"MUTATE {
  CREATE CONCEPT ?alpha { TYPE "Person" NAME "Alpha" SET FIELDS {key: "p1"} }
  CREATE CONCEPT ?dark { TYPE "Preference" NAME "Dark" }
  ENSURE PROPOSITION ?p (?alpha, "prefers", ?dark)
  CREATE EVIDENCE ?e1 { SET FIELDS { evidence_class: "tool_result", payload: "42 ms" } }
  CREATE ASSERTION ?a { SET FIELDS { proposition: ?p, asserted_by: ?alpha, stance: "support", mode: "stated", confidence: 0.9 } }
}"#,
    )["handles"]
        .clone()
}

fn error_of(r: &Value) -> String {
    r["results"][0]["error"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn a_commit_answers_with_its_receipt_and_seqs_increase() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "request_id": "client-req-1", "operations": [
            {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "One" }"#}]}),
    );
    let receipt = &r["receipt"];
    assert_eq!(receipt["status"], "committed", "{r}");
    assert_eq!(receipt["space_seq"], 1, "{r}");
    assert_eq!(receipt["snapshot_seq"], 0, "{r}");
    assert_eq!(receipt["tx_id"], "kip:space:default#1", "{r}");
    assert!(receipt["committed_at"].is_string(), "{r}");
    let r = run(&n, r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Two" }"#);
    assert_eq!(r["receipt"]["space_seq"], 2, "{r}");
    assert_eq!(ok(&n, "SNAPSHOT")["snapshot_seq"], 2);
}

#[test]
fn kip2_rt_014_request_id_differs_from_tx_id() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "request_id": "kip:space:default#7", "operations": [
            {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Corr" }"#}]}),
    );
    assert_eq!(r["request_id"], "kip:space:default#7");
    // The engine chooses the transaction id; the client's correlation id is not it.
    assert_eq!(r["receipt"]["tx_id"], "kip:space:default#1", "{r}");
}

#[test]
fn kip2_rt_012_atomic_has_one_transaction_identity() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "atomic"}, "operations": [
            {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "A1" }"#},
            {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "A2" }"#},
            {"command": r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {type: "Person"} }"#}
        ]}),
    );
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["receipt"]["status"], "committed", "{r}");
    assert_eq!(r["receipt"]["space_seq"], 1, "{r}");
    assert_eq!(r["snapshot"]["snapshot_seq"], 0, "{r}");
    // One transaction: the next commit is seq 2, and HISTORY SPACE shows one commit.
    assert_eq!(
        ok(&n, "HISTORY SPACE")["commits"].as_array().map(Vec::len),
        Some(1)
    );
}

#[test]
fn a_sequence_of_writes_gives_each_its_receipt() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "sequence"}, "operations": [
            {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "S1" }"#},
            {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "S2" }"#}
        ]}),
    );
    let seqs: Vec<&Value> = r["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| &o["extensions"]["kip-nexus/receipt"]["space_seq"])
        .collect();
    assert_eq!(seqs, [&json!(1), &json!(2)], "{r}");
    // Two transactions: no single top-level receipt stands for both.
    assert!(r["receipt"].is_null(), "{r}");
}

#[test]
fn a_write_that_changes_nothing_takes_no_seq() {
    let n = nexus();
    ok(
        &n,
        r#"UPSERT CONCEPT ?x { MATCH {type: "Person", key: "same"} SET FIELDS {name: "Same"} }"#,
    );
    let r = run(
        &n,
        r#"UPSERT CONCEPT ?x { MATCH {type: "Person", key: "same"} SET FIELDS {name: "Same"} }"#,
    );
    assert_eq!(r["receipt"]["status"], "no_effect", "{r}");
    assert_eq!(r["receipt"]["snapshot_seq"], 1, "{r}");
    assert_eq!(ok(&n, "SNAPSHOT")["snapshot_seq"], 1);
}

#[test]
fn kip2_hist_001_historical_mutable_concept_reconstruction() {
    let n = nexus();
    seed(&n);
    ok(
        &n,
        r#"UPSERT CONCEPT ?c { MATCH {type: "Person", key: "p1"} SET FIELDS {name: "Beta"} }"#,
    );
    let q = r#"FIND(?c.name) WHERE { ?c CONCEPT {type: "Person", key: "p1"} }"#;
    assert_eq!(ok(&n, &format!("{q} AS OF SEQ 1")), json!(["Alpha"]));
    assert_eq!(ok(&n, q), json!(["Beta"]));
    // The old name finds it in the past only.
    let by_name = r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {type: "Person", name: "Alpha"} }"#;
    assert_eq!(ok(&n, &format!("{by_name} AS OF SEQ 1")), json!([1]));
    assert_eq!(ok(&n, by_name), json!([0]));
}

#[test]
fn kip2_hist_002_historical_assertion_lifecycle_reconstruction() {
    let n = nexus();
    let h = seed(&n);
    ok_with(&n, "RETRACT ASSERTION :a", json!({"a": h["a"]}));
    let q = "FIND(?a.lifecycle.status) WHERE { ?a ASSERTION {} }";
    assert_eq!(ok(&n, &format!("{q} AS OF SEQ 1")), json!(["active"]));
    assert_eq!(ok(&n, q), json!(["retracted"]));
}

#[test]
fn kip2_hist_003_historical_evidence_correction_reconstruction() {
    let n = nexus();
    let h = seed(&n);
    let e2 = ok(
        &n,
        r#"CREATE EVIDENCE ?e2 { SET FIELDS { evidence_class: "tool_result", payload: "24 ms" } }"#,
    )["handles"]["e2"]
        .clone();
    ok_with(
        &n,
        "CORRECT EVIDENCE :a BY :b",
        json!({"a": h["e1"], "b": e2}),
    );
    let q = r#"FIND(?e.payload, ?e.correction.status) WHERE { ?e EVIDENCE {} }"#;
    let by = "ORDER BY ?e.payload";
    // At seq 2 the correction had not happened: no lineage, same payload.
    assert_eq!(
        ok(&n, &format!("{q} AS OF SEQ 2 {by}")),
        json!([["24 ms", null], ["42 ms", null]])
    );
    assert_eq!(
        ok(&n, &format!("{q} {by}")),
        json!([["24 ms", "current"], ["42 ms", "corrected"]])
    );
}

#[test]
fn kip2_hist_009_purged_history_is_unavailable_not_fabricated() {
    let n = nexus();
    ok(
        &n,
        r#"CREATE EVIDENCE ?lone { SET FIELDS { evidence_class: "user_statement", payload: "my secret" } }"#,
    );
    let q = "FIND(?e.payload) WHERE { ?e EVIDENCE {} }";
    assert_eq!(ok(&n, &format!("{q} AS OF SEQ 1")), json!(["my secret"]));
    let id = ok(&n, "FIND(?e) WHERE { ?e EVIDENCE {} }")[0]["id"].clone();
    ok_with(&n, r#"PURGE :e CONFIRM "PURGE""#, json!({"e": id}));
    // Before the purge, the past no longer holds the content.
    let past = ok(&n, &format!("{q} AS OF SEQ 1"));
    assert!(!past.to_string().contains("my secret"), "{past}");
    let h = ok_with(&n, "HISTORY ELEMENT :e", json!({"e": id}));
    assert!(!h.to_string().contains("my secret"), "{h}");
}

#[test]
fn kip2_hist_010_transaction_chronology_ordered_by_space_seq() {
    let n = nexus();
    for name in ["T1", "T2", "T3", "T4"] {
        ok(
            &n,
            &format!(r#"CREATE CONCEPT ?x {{ TYPE "Person" NAME "{name}" }}"#),
        );
    }
    let s = ok(&n, "HISTORY SPACE FROM SEQ 2 TO SEQ 4");
    let seqs: Vec<u64> = s["commits"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["space_seq"].as_u64())
        .collect();
    assert_eq!(seqs, [2, 3, 4], "{s}");
    let times: Vec<&str> = s["commits"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["committed_at"].as_str())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{s}");
    let c = ok(&n, "CHANGES AFTER SEQ 3");
    assert_eq!(c["commits"].as_array().map(Vec::len), Some(1), "{c}");
}

#[test]
fn a_coordinate_not_reached_or_unknown_is_refused() {
    let n = nexus();
    seed(&n);
    let r = run(&n, "SNAPSHOT AS OF SEQ 9");
    assert_eq!(error_of(&r), "HistoricalSnapshotUnavailable", "{r}");
    let r = run(
        &n,
        r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {} } AS OF TX "kip:space:default#9""#,
    );
    assert_eq!(error_of(&r), "TransactionUnknown", "{r}");
    let r = run(
        &n,
        r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {} } AS OF TX "tx-1""#,
    );
    assert_eq!(error_of(&r), "TransactionUnknown", "{r}");
    assert_eq!(
        ok(&n, "FIND(COUNT(?c)) WHERE { ?c CONCEPT {} } AS OF SEQ 0"),
        json!([0])
    );
    assert_eq!(
        ok(&n, "DESCRIBE SNAPSHOT AS OF SEQ 1")["tx_id"],
        "kip:space:default#1"
    );
}

#[test]
fn a_past_read_sees_links_as_they_were() {
    let n = nexus();
    let h = seed(&n);
    ok_with(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?l { TYPE "Preference" NAME "Light" }
  ENSURE PROPOSITION ?q (:a, "prefers", ?l)
}"#,
        json!({"a": h["alpha"]}),
    );
    let q = r#"FIND(?o.name) WHERE { ?p PROPOSITION (?s, "prefers", ?o) ?s CONCEPT {key: "p1"} }"#;
    let by = "ORDER BY ?o.name";
    assert_eq!(ok(&n, &format!("{q} {by}")), json!(["Dark", "Light"]));
    assert_eq!(ok(&n, &format!("{q} AS OF SEQ 1 {by}")), json!(["Dark"]));
}

#[test]
fn a_kip_1x_write_is_a_transaction_of_the_same_history() {
    let n = nexus();
    seed(&n);
    let r = n
        .execute_json(
            &json!({"command": r#"UPSERT { CONCEPT ?x { {type: "Person", name: "Legacy"} } }"#}),
            kip_engine::Access::ReadWrite,
        )
        .to_json();
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(ok(&n, "SNAPSHOT")["snapshot_seq"], 2);
    let q = r#"FIND(COUNT(?c)) WHERE { ?c CONCEPT {type: "Person", name: "Legacy"} }"#;
    assert_eq!(ok(&n, q), json!([1]));
    assert_eq!(ok(&n, &format!("{q} AS OF SEQ 1")), json!([0]));
}

#[test]
fn kip2_hist_004_historical_schema_environment_reconstruction() {
    let n = nexus();
    seed(&n);
    n.admin()
        .install_schema_package(
            &json!({
                "format": "KIP-Schema-Package",
                "manifest": {"package_id": "kip://test/history-env", "version": "1.0.0"},
                "definitions": {"predicates": {
                    "mentors": {"kind": "PredicateType",
                                "subject": {"concept_types": ["kip://profiles/cognitive-memory@2.0.0/Person"]},
                                "object": {"concept_types": ["kip://profiles/cognitive-memory@2.0.0/Person"]}}
                }}
            }),
            true,
        )
        .expect("the package installs");
    // The install is a transaction of its own (seq 2), changing only the environment.
    assert_eq!(ok(&n, "SNAPSHOT")["snapshot_seq"], 2);
    let pkg = json!("kip://test/history-env@1.0.0");
    let then = ok(&n, "DESCRIBE SCHEMA ENVIRONMENT AS OF SEQ 1");
    let now = ok(&n, "DESCRIBE SCHEMA ENVIRONMENT");
    let has = |v: &Value| v["packages"].as_array().is_some_and(|a| a.contains(&pkg));
    assert!(!has(&then), "{then}");
    assert!(has(&now), "{now}");
    assert!(has(&ok(&n, "DESCRIBE SCHEMA ENVIRONMENT AS OF SEQ 2")));
    assert_eq!(then["snapshot_seq"], 1);
}

#[test]
fn a_space_seq_precondition_guards_a_write() {
    let n = nexus();
    seed(&n);
    let write = |seq: u64, name: &str| {
        send(
            &n,
            json!({"kip": "2.0", "preconditions": {"space_seq": seq}, "operations": [
                {"command": format!(r#"CREATE CONCEPT ?x {{ TYPE "Person" NAME "{name}" }}"#)}]}),
        )
    };
    let stale = write(0, "Stale");
    assert_eq!(error_of(&stale), "PreconditionFailed", "{stale}");
    assert_eq!(stale["results"][0]["error"]["details"]["actual"], 1);
    assert_eq!(ok(&n, "SNAPSHOT")["snapshot_seq"], 1, "nothing committed");
    let fresh = write(1, "Fresh");
    assert_eq!(fresh["receipt"]["space_seq"], 2, "{fresh}");
    // Several transactions cannot share one precondition.
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "sequence"}, "preconditions": {"space_seq": 2},
               "operations": [{"command": "SNAPSHOT"}, {"command": "SNAPSHOT"}]}),
    );
    assert_eq!(r["error"]["code"], "InvalidRequestEnvelope", "{r}");
    // In an atomic request it is checked once, in its transaction.
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "atomic"}, "preconditions": {"space_seq": 1},
               "operations": [{"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "A" }"#},
                              {"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "B" }"#}]}),
    );
    assert_eq!(error_of(&r), "PreconditionFailed", "{r}");
    assert_eq!(r["results"][1]["status"], "skipped", "{r}");
}

#[test]
fn a_read_response_carries_its_snapshot_and_token() {
    let n = nexus();
    seed(&n);
    let r = run(&n, "FIND(COUNT(?c)) WHERE { ?c CONCEPT {} }");
    assert_eq!(r["snapshot"]["snapshot_seq"], 1, "{r}");
    let token = r["snapshot"]["snapshot_token"]
        .as_str()
        .expect("token")
        .to_string();
    assert!(token.starts_with("kips_"), "{token}");
    ok(&n, r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Later" }"#);
    let again = send(
        &n,
        json!({"kip": "2.0", "read": {"snapshot_token": token}, "operations": [
            {"command": "FIND(COUNT(?c)) WHERE { ?c CONCEPT {} }"}]}),
    );
    assert_eq!(
        again["results"][0]["result"], r["results"][0]["result"],
        "{again}"
    );
}

#[test]
fn a_history_horizon_cuts_the_past_and_keeps_the_present() {
    let n = nexus();
    let h = seed(&n);
    for mood in ["calm", "busy", "tired"] {
        ok_with(
            &n,
            &format!(r#"UPDATE :a SET ATTRIBUTES {{mood: "{mood}"}}"#),
            json!({"a": h["alpha"]}),
        );
    }
    let q = r#"FIND(?c.attributes.mood) WHERE { ?c CONCEPT {key: "p1"} }"#;
    assert_eq!(ok(&n, &format!("{q} AS OF SEQ 2")), json!(["calm"]));
    // Keep nothing older than now: the newest commit (seq 4) becomes the horizon.
    let (horizon, cut) = n
        .admin()
        .prune_history(std::time::Duration::ZERO)
        .expect("prune");
    assert_eq!(horizon, Some(4));
    assert_eq!(cut, 3, "the three updates' changes");
    let r = run(&n, &format!("{q} AS OF SEQ 2"));
    assert_eq!(error_of(&r), "HistoricalSnapshotUnavailable", "{r}");
    assert_eq!(ok(&n, &format!("{q} AS OF SEQ 4")), json!(["tired"]));
    assert_eq!(ok(&n, q), json!(["tired"]));
    // Later changes are kept and read back as before.
    ok_with(
        &n,
        r#"UPDATE :a SET ATTRIBUTES {mood: "rested"}"#,
        json!({"a": h["alpha"]}),
    );
    assert_eq!(ok(&n, &format!("{q} AS OF SEQ 4")), json!(["tired"]));
    let r = run(&n, "CHANGES AFTER SEQ 1");
    assert_eq!(error_of(&r), "HistoricalSnapshotUnavailable", "{r}");
    let c = ok(&n, "CHANGES AFTER SEQ 4");
    assert_eq!(c["commits"].as_array().map(Vec::len), Some(1), "{c}");
    let s = ok(&n, "HISTORY SPACE");
    let seqs: Vec<u64> = s["commits"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["space_seq"].as_u64())
        .collect();
    assert_eq!(seqs, [5], "{s}");
}

/// A HISTORY cursor whose next page the history horizon cut is `CursorExpired`: a
/// traversal never skips what it has not shown.
#[test]
fn a_history_cursor_past_the_horizon_is_expired_not_skipped() {
    let n = nexus();
    let h = seed(&n);
    for mood in ["calm", "busy", "tired"] {
        ok_with(
            &n,
            &format!(r#"UPDATE :a SET ATTRIBUTES {{mood: "{mood}"}}"#),
            json!({"a": h["alpha"]}),
        );
    }
    let first = ok(&n, "HISTORY SPACE LIMIT 1");
    let c = first["next_cursor"].clone();
    assert!(c.is_string(), "{first}");
    n.admin()
        .prune_history(std::time::Duration::ZERO)
        .expect("prune");
    let r = run_with(&n, "HISTORY SPACE LIMIT 1 CURSOR :c", json!({"c": c}));
    assert_eq!(error_of(&r), "CursorExpired", "{r}");
}

#[test]
fn kip2_hist_007_belief_then_differs_from_current_belief_about_then() {
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
    // Later the memory learns the claim was wrong: retracted at seq 2.
    ok_with(&n, "RETRACT ASSERTION :a", json!({"a": h["a"]}));
    let belief = |tail: &str| {
        ok_with(
            &n,
            &format!("FIND(?b.status) WHERE {{ ?p PROPOSITION (id: :p) ?b BELIEF (?p) }}{tail}"),
            json!({"p": h["p"]}),
        )
    };
    let about_2020 = r#" FOR TIME "2020-06-01T00:00:00Z""#;
    // What the memory believed then about mid-2020 ...
    assert_eq!(
        belief(&format!(" AS OF SEQ 1{about_2020}")),
        json!(["accepted"])
    );
    // ... and what it believes now about mid-2020: separately expressible, different.
    assert_ne!(belief(about_2020), json!(["accepted"]));
}

#[test]
fn kip2_hist_008_merge_preserves_historical_raw_endpoint() {
    let n = nexus();
    let h = ok(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?a { TYPE "Person" NAME "Alice" SET FIELDS {key: "alice"} }
  CREATE CONCEPT ?b { TYPE "Person" NAME "Alice B" SET FIELDS {key: "alice-2"} }
  CREATE CONCEPT ?dark { TYPE "Preference" NAME "Dark" }
  ENSURE PROPOSITION ?q (?b, "prefers", ?dark)
}"#,
    )["handles"]
        .clone();
    ok_with(
        &n,
        "MERGE CONCEPT :s INTO :t",
        json!({"s": h["b"], "t": h["a"]}),
    );
    let q = "FIND(?p.subject) WHERE { ?p PROPOSITION (id: :q) }";
    // Before the merge and after it, the raw endpoint is the merged source.
    assert_eq!(
        ok_with(&n, &format!("{q} AS OF SEQ 1"), json!({"q": h["q"]})),
        json!([h["b"]])
    );
    assert_eq!(ok_with(&n, q, json!({"q": h["q"]})), json!([h["b"]]));
    // The source's own state then had no merge; now it has.
    let merged = "FIND(?c.merged_into) WHERE { ?c CONCEPT {id: :b, state: \"merged\"} }";
    assert_eq!(ok_with(&n, merged, json!({"b": h["b"]})), json!([h["a"]]));
    assert_eq!(
        ok_with(&n, &format!("{merged} AS OF SEQ 1"), json!({"b": h["b"]})),
        json!([])
    );
}

#[test]
fn a_retry_is_answered_with_its_original_receipt_and_preconditions_are_not_rechecked() {
    let n = nexus();
    seed(&n);
    let request = json!({"kip": "2.0", "execution": {"mode": "atomic", "idempotency_key": "retry-1"},
        "preconditions": {"space_seq": 1},
        "operations": [{"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Once" }"#}]});
    let first = send(&n, request.clone());
    assert_eq!(first["receipt"]["space_seq"], 2, "{first}");
    // The response was lost; the same request again: the recorded outcome, the same
    // receipt, not PreconditionFailed for the write it made itself.
    let again = send(&n, request);
    assert_eq!(again["status"], "succeeded", "{again}");
    assert_eq!(again["receipt"]["space_seq"], 2, "{again}");
    assert_eq!(again["receipt"]["tx_id"], first["receipt"]["tx_id"]);
    assert_eq!(again["results"][0]["result"], first["results"][0]["result"]);
    assert_eq!(
        ok(&n, "SNAPSHOT")["snapshot_seq"],
        2,
        "nothing applied twice"
    );
    // The same with one operation outside an atomic request.
    let single = json!({"kip": "2.0", "preconditions": {"space_seq": 2},
        "operations": [{"command": r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Single" }"#,
                        "idempotency_key": "retry-2"}]});
    let first = send(&n, single.clone());
    let again = send(&n, single);
    assert_eq!(again["receipt"], first["receipt"], "{again}");
}

#[test]
fn an_ordered_read_of_the_past_does_not_trust_todays_counts() {
    let n = nexus();
    let h = ok(
        &n,
        r#"MUTATE {
  CREATE CONCEPT ?a { TYPE "Person" NAME "Ann" SET FIELDS {key: "ann"} SET ATTRIBUTES { age: 30 } }
  CREATE CONCEPT ?b { TYPE "Person" NAME "Bo" SET FIELDS {key: "bo"} }
}"#,
    )["handles"]
        .clone();
    // Later every Person has an age: today the attribute index covers the type.
    ok_with(
        &n,
        "UPDATE :b SET ATTRIBUTES { age: 40 }",
        json!({"b": h["b"]}),
    );
    let q = r#"FIND(?p.name) WHERE { ?p CONCEPT {type: "Person"} }"#;
    let by = "ORDER BY ?p.attributes.age LIMIT 10";
    assert_eq!(ok(&n, &format!("{q} {by}")), json!(["Ann", "Bo"]));
    // At seq 1 Bo had no age: still a row (nulls sort last), never dropped.
    assert_eq!(
        ok(&n, &format!("{q} AS OF SEQ 1 {by}")),
        json!(["Ann", "Bo"])
    );
}

#[test]
fn a_package_install_that_changes_nothing_takes_no_seq() {
    let n = nexus();
    seed(&n);
    let pkg = json!({
        "format": "KIP-Schema-Package",
        "manifest": {"package_id": "kip://test/noop", "version": "1.0.0"},
        "definitions": {"predicates": {"likes_tea": {"kind": "PredicateType"}}}
    });
    n.admin()
        .install_schema_package(&pkg, true)
        .expect("install");
    let after_install = ok(&n, "SNAPSHOT")["snapshot_seq"].clone();
    assert_eq!(after_install, 2);
    n.admin().install_schema_package(&pkg, true).expect("again");
    assert_eq!(ok(&n, "SNAPSHOT")["snapshot_seq"], after_install);
}

/// `HISTORY ... CURSOR` (§68): a page that stops before the end gives a `next_cursor`;
/// the next page continues exactly where it stopped, pinned to the commits of the
/// first page (later commits do not extend it); `CURSOR null` is the first page; a
/// cursor of another traversal or of another family is refused.
#[test]
fn history_pages_continue_with_their_cursor() {
    let n = nexus();
    for i in 0..5 {
        ok(
            &n,
            &format!(r#"CREATE CONCEPT ?x {{ TYPE "Person" NAME "P{i}" }}"#),
        );
    }
    let id = ok(&n, r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Busy" }"#)["handles"]["x"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    for i in 0..3 {
        ok(
            &n,
            &format!(r#"UPDATE "{id}" SET ATTRIBUTES {{ rank: {i} }}"#),
        );
    }
    let seqs = |v: &Value, list: &str| -> Vec<u64> {
        v[list]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["space_seq"].as_u64())
            .collect()
    };
    let first = ok_with(&n, "HISTORY SPACE LIMIT 4 CURSOR :c", json!({"c": null}));
    assert_eq!(seqs(&first, "commits"), [1, 2, 3, 4], "{first}");
    let c = first["next_cursor"].clone();
    assert!(
        c.as_str().is_some_and(|c| c.starts_with("kiphc_")),
        "{first}"
    );
    // A commit after the first page does not extend the traversal.
    ok(&n, r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Later" }"#);
    let second = ok_with(&n, "HISTORY SPACE LIMIT 4 CURSOR :c", json!({"c": c}));
    assert_eq!(seqs(&second, "commits"), [5, 6, 7, 8], "{second}");
    let third = ok_with(
        &n,
        "HISTORY SPACE LIMIT 4 CURSOR :c",
        json!({"c": second["next_cursor"]}),
    );
    assert_eq!(seqs(&third, "commits"), [9], "{third}");
    assert!(third.get("next_cursor").is_none(), "the end: {third}");
    // An element's changes, a page of one at a time.
    let e1 = ok(&n, &format!(r#"HISTORY ELEMENT "{id}" LIMIT 1"#));
    assert_eq!(seqs(&e1, "changes"), [7], "{e1}");
    let e2 = ok_with(
        &n,
        &format!(r#"HISTORY ELEMENT "{id}" LIMIT 1 CURSOR :c"#),
        json!({"c": e1["next_cursor"]}),
    );
    assert_eq!(seqs(&e2, "changes"), [8], "{e2}");
    // Another traversal's cursor, an edited one, another family's: refused.
    let r = run_with(
        &n,
        r#"HISTORY ELEMENT "C:1" LIMIT 1 CURSOR :c"#,
        json!({"c": e1["next_cursor"]}),
    );
    assert_eq!(error_of(&r), "CursorMismatch", "{r}");
    let edited = c
        .as_str()
        .unwrap_or_default()
        .replacen("kiphc_5_", "kiphc_2_", 1);
    let r = run_with(&n, "HISTORY SPACE LIMIT 4 CURSOR :c", json!({"c": edited}));
    assert_eq!(error_of(&r), "CursorMismatch", "{r}");
    let changes = ok(&n, "CHANGES AFTER SEQ 0 LIMIT 1");
    let r = run_with(
        &n,
        "HISTORY SPACE LIMIT 4 CURSOR :c",
        json!({"c": changes["cursor"]}),
    );
    assert_eq!(error_of(&r), "CursorTypeMismatch", "{r}");
}
