//! KIP 2.0 transactions through the wire: idempotency keys (§34), dry runs, and the
//! transaction lookup by key (§68). Named by the conformance document's case ids where
//! one applies.

mod common;
use common::*;
use kip_engine::{Access, Nexus};
use serde_json::{json, Value};

fn send(n: &Nexus, request: Value) -> Value {
    n.execute_json(&request, Access::ReadWrite).to_json()
}

fn count(n: &Nexus, name: &str) -> Value {
    let r = send(
        n,
        json!({"kip": "2.0", "operations": [{"command": format!("FIND(COUNT(?c)) WHERE {{ ?c CONCEPT {{name: \"{name}\"}} }}")}]}),
    );
    r["results"][0]["result"][0].clone()
}

fn create(name: &str, key: &str) -> Value {
    json!({"kip": "2.0", "execution": {"mode": "atomic", "idempotency_key": key}, "operations": [
        {"command": format!("CREATE CONCEPT ?x {{ TYPE \"Person\" NAME \"{name}\" }}")}
    ]})
}

#[test]
fn kip2_tx_same_idempotency_key_and_request_replays_the_outcome() {
    let n = nexus();
    let first = send(&n, create("Iris", "k-1"));
    assert_eq!(first["status"], "succeeded", "{first}");
    let mut retry = create("Iris", "k-1");
    retry["request_id"] = json!("another attempt");
    let second = send(&n, retry);
    assert_eq!(
        second["results"][0]["result"], first["results"][0]["result"],
        "the recorded outcome, not a second run"
    );
    assert_eq!(count(&n, "Iris"), json!(1));
}

#[test]
fn kip2_tx_same_idempotency_key_with_another_request_conflicts() {
    let n = nexus();
    send(&n, create("Iris", "k-2"));
    let other = send(&n, create("Ivan", "k-2"));
    assert_eq!(
        other["results"][0]["error"]["code"], "IdempotencyConflict",
        "{other}"
    );
    assert_eq!(count(&n, "Ivan"), json!(0));
}

#[test]
fn kip2_tx_a_failed_transaction_binds_no_key() {
    let n = nexus();
    let bad = json!({"kip": "2.0", "execution": {"mode": "atomic", "idempotency_key": "k-3"}, "operations": [
        {"command": "CREATE CONCEPT ?x { TYPE \"Spaceship\" NAME \"S\" }"}]});
    assert_eq!(send(&n, bad)["status"], "failed");
    assert_eq!(send(&n, create("Jo", "k-3"))["status"], "succeeded");
    assert_eq!(count(&n, "Jo"), json!(1));
}

#[test]
fn an_operation_idempotency_key_deduplicates_that_operation() {
    let n = nexus();
    let req = json!({"kip": "2.0", "operations": [
        {"command": "CREATE CONCEPT ?x { TYPE \"Person\" NAME \"Kim\" }", "idempotency_key": "op-1"}]});
    send(&n, req.clone());
    send(&n, req);
    assert_eq!(count(&n, "Kim"), json!(1));
    let looked = send(
        &n,
        json!({"kip": "2.0", "operations": [{"command": "DESCRIBE TRANSACTION BY IDEMPOTENCY KEY \"op-1\""}]}),
    );
    assert_eq!(
        looked["results"][0]["result"]["status"], "committed",
        "{looked}"
    );
    let unknown = send(
        &n,
        json!({"kip": "2.0", "operations": [{"command": "DESCRIBE TRANSACTION BY IDEMPOTENCY KEY \"nope\""}]}),
    );
    assert_eq!(unknown["results"][0]["error"]["code"], "TransactionUnknown");
}

#[test]
fn a_dry_run_reports_the_effect_and_commits_nothing() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "options": {"dry_run": true}, "execution": {"mode": "sequence"}, "operations": [
            {"command": "CREATE CONCEPT ?x { TYPE \"Person\" NAME \"Dry\" }"},
            {"command": "FIND(COUNT(?c)) WHERE { ?c CONCEPT {name: \"Dry\"} }"}]}),
    );
    assert_eq!(r["status"], "succeeded", "{r}");
    assert_eq!(r["results"][0]["result"]["dry_run"], true);
    assert_eq!(
        r["results"][1]["result"],
        json!([1]),
        "the preview sees its own writes"
    );
    assert_eq!(count(&n, "Dry"), json!(0));
}

#[test]
fn kip2_meta_validate_and_preview_commit_nothing() {
    let n = nexus();
    let v = send(
        &n,
        json!({"kip": "2.0", "operations": [
            {"command": "VALIDATE KML :t", "parameters": {"t": "CREATE CONCEPT ?x { TYPE \"Person\" NAME \"V\" }"}},
            {"command": "VALIDATE KML :t", "parameters": {"t": "CREATE CONCEPT ?x { TYPE \"Spaceship\" NAME \"V\" }"}},
            {"command": "VALIDATE KQL :t", "parameters": {"t": "FIND(?c) WHERE { ?c CONCEPT {type: \"Person\"} }"}},
            {"command": "PREVIEW KML :t", "parameters": {"t": "CREATE CONCEPT ?x { TYPE \"Person\" NAME \"V\" }"}}
        ], "execution": {"mode": "independent"}}),
    );
    assert_eq!(v["results"][0]["result"]["valid"], true, "{v}");
    assert_eq!(v["results"][1]["result"]["valid"], false);
    assert_eq!(
        v["results"][1]["result"]["errors"][0]["code"],
        "SchemaSymbolNotFound"
    );
    assert_eq!(v["results"][2]["result"]["valid"], true);
    assert_eq!(v["results"][3]["result"]["committed"], false);
    assert!(v["results"][3]["result"]["effect"]["handles"]["x"].is_string());
    assert_eq!(count(&n, "V"), json!(0));
}
