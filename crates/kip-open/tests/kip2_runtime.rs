//! The KIP 2.0 runtime through the JSON entry point every interface uses
//! (`Nexus::execute_json`, DECISIONS.md item 38): request envelope, execution modes,
//! readonly and language rules, DESCRIBE. Every response is checked against
//! `spec/kip2/schemas/kip-response.schema.json`. Tests are named by the conformance
//! document's case ids where one applies.

mod common;
use common::*;
use kip_engine::{Access, Nexus};
use serde_json::{json, Value};
use std::sync::OnceLock;

fn response_schema() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let text = include_str!("../../../spec/kip2/schemas/kip-response.schema.json");
        let schema: Value = serde_json::from_str(text).expect("response schema is JSON");
        jsonschema::draft202012::new(&schema).expect("response schema compiles")
    })
}

/// Sends a 2.0 request; the response, checked against the response schema.
fn send(n: &Nexus, request: Value, access: Access) -> Value {
    let r = n.execute_json(&request, access).to_json();
    let errors: Vec<String> = response_schema()
        .iter_errors(&r)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "response breaks the schema: {errors:?}\n{r:#}"
    );
    r
}

fn one(n: &Nexus, command: &str) -> Value {
    send(
        n,
        json!({"kip": "2.0", "operations": [{"command": command}]}),
        Access::ReadWrite,
    )
}

fn error_code(r: &Value) -> &str {
    r["error"]["code"]
        .as_str()
        .or_else(|| r["results"][0]["error"]["code"].as_str())
        .unwrap_or("")
}

#[test]
fn kip2_meta_003_describe_protocol_reports_actual_version() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "request_id": "req-1", "operations": [{"op_id": "p", "command": "DESCRIBE PROTOCOL"}]}),
        Access::ReadWrite,
    );
    assert_eq!(r["status"], "succeeded");
    assert_eq!(r["request_id"], "req-1");
    assert_eq!(r["results"][0]["op_id"], "p");
    assert_eq!(r["results"][0]["result"]["kip"], "2.0");
    assert_eq!(
        r["results"][0]["result"]["implementation"]["name"],
        "kip-nexus"
    );
}

#[test]
fn kip2_meta_004_describe_execution_context_reports_resolved_space() {
    let n = nexus();
    let r = one(&n, "DESCRIBE EXECUTION CONTEXT");
    assert_eq!(r["results"][0]["result"]["space"]["id"], "default");
    assert_eq!(r["results"][0]["context"]["space_id"], "default");
}

/// KIP2-META-001 and KIP2-META-002: the primer names protocol, space, schema and
/// safety context, and keeps the principal apart from `$self`.
#[test]
fn kip2_meta_001_and_002_describe_primer_exposes_coordinates_and_keeps_principal_apart_from_self() {
    let n = nexus();
    ok(
        &n,
        r#"UPSERT { CONCEPT ?t { {type: "$ConceptType", name: "Gadget"} SET ATTRIBUTES { description: "a thing" } } }"#,
    );
    let p = one(&n, "DESCRIBE PRIMER")["results"][0]["result"].clone();
    assert_eq!(p["mode"], "compact");
    assert_eq!(p["protocol"]["kip"], "2.0");
    assert_eq!(p["execution_context"]["space"]["id"], "default");
    assert_eq!(p["cognitive_identity"]["name"], "$self");
    assert_eq!(
        p["execution_context"]["principal"]["class"],
        "interface_caller"
    );
    assert!(p["schema_map"]["concept_types"]["names"]
        .as_array()
        .is_some_and(|a| a.contains(&json!("Gadget"))));
    assert!(p["safety"]
        .as_array()
        .is_some_and(|a| a.contains(&json!("SEARCH score != confidence"))));
    let full = send(
        &n,
        json!({"kip": "2.0", "operations": [{"command": "DESCRIBE PRIMER MODE :m", "parameters": {"m": "full"}}]}),
        Access::ReadWrite,
    );
    assert_eq!(full["results"][0]["result"]["mode"], "full");
}

#[test]
fn describe_error_reads_the_registry() {
    let n = nexus();
    let r = one(&n, r#"DESCRIBE ERROR "VersionConflict""#);
    assert_eq!(
        r["results"][0]["result"],
        json!({"code": "VersionConflict", "category": "transaction", "registry_section": "87.6", "retry": {"class": "requires_refresh"}})
    );
    assert_eq!(
        error_code(&one(&n, r#"DESCRIBE ERROR "KIP_3002""#)),
        "NotFoundOrNotVisible"
    );
}

#[test]
fn describe_capabilities_declares_what_runs_and_what_does_not() {
    let n = nexus();
    let c = one(&n, "DESCRIBE CAPABILITIES")["results"][0]["result"].clone();
    assert_eq!(c["conformance_profiles"], json!([]));
    assert!(c["supported"].get("describe_primer").is_some());
    assert!(c["supported"].get("kql").is_some());
    assert!(c["available"].get("kml").is_some());
    assert!(c["available"].get("historical_reads").is_some());
    assert!(c["not_supported"].get("historical_reads").is_none());
    let ro = send(
        &n,
        json!({"kip": "2.0", "operations": [{"command": "DESCRIBE CAPABILITIES"}]}),
        Access::ReadOnly,
    );
    assert!(
        ro["results"][0]["result"]["available"].get("kml").is_none(),
        "{ro}"
    );
}

#[test]
fn a_valid_statement_that_does_not_run_yet_is_unsupported_capability() {
    let n = nexus();
    let r = one(&n, r#"VERIFY RECEIPT "a-receipt""#);
    assert_eq!(r["status"], "failed");
    assert_eq!(error_code(&r), "UnsupportedCapability");
    assert_eq!(r["results"][0]["error"]["details"]["language"], "META");
    assert!(
        r["results"][0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("VERIFY is valid KIP 2.0 META")),
        "{r}"
    );
    let b = one(&n, r#"SEARCH ASSERTION "dark mode""#);
    assert_eq!(error_code(&b), "UnsupportedCapability");
}

#[test]
fn a_syntax_error_is_invalid_syntax_with_its_place() {
    let n = nexus();
    let r = one(&n, "FIND(?x) WHERE { ?x CONCEPT }");
    assert_eq!(error_code(&r), "InvalidSyntax");
    let e = &r["results"][0]["error"];
    assert_eq!(
        (e["details"]["line"].clone(), e["details"]["column"].clone()),
        (json!(1), json!(29))
    );
    assert_eq!(e["category"], "syntax");
}

#[test]
fn kip2_rt_007_language_label_cannot_downgrade_write() {
    let n = nexus();
    let kml = r#"CREATE CONCEPT ?x { TYPE "Person" NAME "Eve" }"#;
    let req = json!({"kip": "2.0", "operations": [{"language": "META", "command": kml}]});
    assert_eq!(
        error_code(&send(&n, req.clone(), Access::ReadOnly)),
        "ReadonlyViolation"
    );
    assert_eq!(
        error_code(&send(&n, req, Access::ReadWrite)),
        "LanguageMismatch"
    );
    assert_eq!(
        ok(&n, r#"FIND(COUNT(?p)) WHERE { ?p {name: "Eve"} }"#),
        json!(0)
    );
}

#[test]
fn kip2_rt_008_multi_operation_native_request_declares_execution_mode() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "operations": [{"command": "DESCRIBE PROTOCOL"}, {"command": "DESCRIBE PROTOCOL"}]}),
        Access::ReadWrite,
    );
    assert_eq!(r["status"], "failed");
    assert_eq!(r["error"]["code"], "InvalidRequestEnvelope");
    assert_eq!(r["results"], json!([]));
}

fn three(n: &Nexus, execution: Value) -> Value {
    send(
        n,
        json!({"kip": "2.0", "execution": execution, "operations": [
            {"op_id": "a", "command": "DESCRIBE PROTOCOL"},
            {"op_id": "b", "command": "FIND(?x) WHERE {"},
            {"op_id": "c", "command": "DESCRIBE CAPABILITIES"}
        ]}),
        Access::ReadWrite,
    )
}

fn statuses(r: &Value) -> Vec<&str> {
    r["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|x| x["status"].as_str().unwrap_or(""))
        .collect()
}

#[test]
fn kip2_rt_021_sequence_partial_status_is_explicit() {
    let n = nexus();
    let r = three(&n, json!({"mode": "sequence"}));
    assert_eq!(r["status"], "partial");
    assert_eq!(statuses(&r), ["succeeded", "failed", "skipped"]);
    assert_eq!(r["execution"]["mode"], "sequence");
    let r = three(&n, json!({"mode": "sequence", "on_error": "continue"}));
    assert_eq!(statuses(&r), ["succeeded", "failed", "succeeded"]);
}

#[test]
fn kip2_rt_022_atomic_abort_is_not_partial_commit() {
    let n = nexus();
    let r = three(&n, json!({"mode": "atomic"}));
    assert_eq!(r["status"], "failed");
    assert_eq!(statuses(&r), ["rolled_back", "failed", "skipped"]);
}

#[test]
fn independent_operations_fail_on_their_own() {
    let n = nexus();
    let r = three(&n, json!({"mode": "independent"}));
    assert_eq!(r["status"], "partial");
    assert_eq!(statuses(&r), ["succeeded", "failed", "succeeded"]);
}

#[test]
fn kip2_rt_019_no_silent_isolation_downgrade() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "sequence", "isolation": "linearizable-global"}, "operations": [{"command": "DESCRIBE PROTOCOL"}]}),
        Access::ReadWrite,
    );
    assert_eq!(error_code(&r), "UnsupportedIsolation");
}

#[test]
fn kip2_rt_020_no_silent_capability_downgrade() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "requires": {"belief_slot": true}, "operations": [{"command": "DESCRIBE PROTOCOL"}]}),
        Access::ReadWrite,
    );
    assert_eq!(error_code(&r), "UnsupportedCapability");
    assert_eq!(
        r["error"]["details"]["capabilities"],
        json!(["belief_slot"])
    );
    let ok = send(
        &n,
        json!({"kip": "2.0", "requires": {"describe_primer": true}, "operations": [{"command": "DESCRIBE PROTOCOL"}]}),
        Access::ReadWrite,
    );
    assert_eq!(ok["status"], "succeeded");
}

/// KIP2-RT-004 and KIP2-RT-005: a parameter holding KIP text is a value, and a
/// `:name` inside a string literal is text, never expanded.
#[test]
fn kip2_rt_004_and_005_parameters_are_values_and_templates_are_not_code() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "2.0", "operations": [{"command": "DESCRIBE PRIMER MODE :m", "parameters": {"m": "full\" } DELETE CONCEPT ?x"}}]}),
        Access::ReadWrite,
    );
    assert_eq!(error_code(&r), "TypeMismatch");
    // The literal is text: no parameter :name is asked for (that would be
    // InvalidRequestEnvelope); the grammar refuses the mode word itself.
    let r = one(&n, r#"DESCRIBE PRIMER MODE "Hello :name""#);
    assert_eq!(error_code(&r), "InvalidSyntax");
}

#[test]
fn a_parameter_the_command_uses_must_be_supplied() {
    let n = nexus();
    let r = one(&n, "DESCRIBE PRIMER MODE :m");
    assert_eq!(error_code(&r), "InvalidRequestEnvelope");
    assert_eq!(r["results"][0]["error"]["details"]["parameter"], "m");
    // The request's parameters serve every operation.
    let r = send(
        &n,
        json!({"kip": "2.0", "parameters": {"m": "compact"}, "operations": [{"command": "DESCRIBE PRIMER MODE :m"}]}),
        Access::ReadWrite,
    );
    assert_eq!(r["status"], "succeeded");
}

#[test]
fn another_protocol_version_and_a_broken_envelope_are_refused_before_running() {
    let n = nexus();
    let r = send(
        &n,
        json!({"kip": "1.9", "operations": [{"command": "DESCRIBE PROTOCOL"}]}),
        Access::ReadWrite,
    );
    assert_eq!(r["error"]["code"], "UnsupportedProtocolVersion");
    let r = send(
        &n,
        json!({"kip": "2.0", "command": "DESCRIBE PROTOCOL"}),
        Access::ReadWrite,
    );
    assert_eq!(r["error"]["code"], "InvalidRequestEnvelope");
    let r = send(
        &n,
        json!({"kip": "2.0", "space": {"id": "elsewhere"}, "operations": [{"command": "DESCRIBE PROTOCOL"}]}),
        Access::ReadWrite,
    );
    assert_eq!(r["error"]["code"], "NotFoundOrNotVisible");
}

/// A hostile request is bounded as a 1.x batch is: operations per request and response
/// size (`QueryLimits`).
#[test]
fn a_request_is_bounded_in_operations_and_response_size() {
    let mut n = nexus();
    let mut limits = n.limits().clone();
    limits.max_batch = 3;
    limits.max_response_bytes = 6_000;
    n.set_limits(limits);
    let ops: Vec<Value> = (0..4)
        .map(|_| json!({"command": "DESCRIBE PROTOCOL"}))
        .collect();
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "independent"}, "operations": ops}),
        Access::ReadWrite,
    );
    assert_eq!(r["error"]["code"], "ResourceExhausted");
    let ops: Vec<Value> = (0..3)
        .map(|_| json!({"command": "DESCRIBE CAPABILITIES"}))
        .collect();
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "sequence"}, "operations": ops}),
        Access::ReadWrite,
    );
    assert_eq!(statuses(&r)[0], "succeeded", "{r}");
    assert!(
        r["results"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|x| x["error"]["code"] == "ResultLimitExceeded"),
        "{r}"
    );
}

/// DECISIONS.md item 38: without `kip` a request is KIP 1.x, answered as before.
#[test]
fn a_request_without_kip_is_kip_1x() {
    let n = nexus();
    let r = n
        .execute_json(&json!({"command": "DESCRIBE PRIMER"}), Access::ReadWrite)
        .to_json();
    assert!(r.get("kip").is_none());
    assert!(r["result"].is_object());
}

/// A write that committed in its own transaction and whose result then passes the
/// response bound is reported with its receipt: the failure says the write stands, so
/// an agent does not send it again.
#[test]
fn a_committed_write_over_the_response_bound_keeps_its_receipt() {
    let mut n = nexus();
    let mut limits = n.limits().clone();
    limits.max_response_bytes = 20;
    n.set_limits(limits);
    let r = send(
        &n,
        json!({"kip": "2.0", "execution": {"mode": "independent"}, "operations": [
            {"command": "CREATE CONCEPT ?x { TYPE \"Person\" NAME \"Bounded\" }"}
        ]}),
        Access::ReadWrite,
    );
    let e = &r["results"][0]["error"];
    assert_eq!(e["code"], "ResultLimitExceeded", "{r}");
    assert_eq!(e["details"]["receipt"]["status"], "committed", "{r}");
    assert!(
        e["details"]["receipt"]["space_seq"].as_u64().is_some(),
        "{r}"
    );
    assert!(
        e["message"]
            .as_str()
            .unwrap_or_default()
            .contains("committed"),
        "{r}"
    );
    let mut limits = n.limits().clone();
    limits.max_response_bytes = 1 << 20;
    n.set_limits(limits);
    let found = send(
        &n,
        json!({"kip": "2.0", "operations": [
            {"command": "FIND(?p) WHERE { ?p CONCEPT {type: \"Person\", name: \"Bounded\"} }"}
        ]}),
        Access::ReadWrite,
    );
    assert_eq!(found["status"], "succeeded", "{found}");
    assert_eq!(
        found["results"][0]["result"].as_array().map(Vec::len),
        Some(1),
        "the write stands: {found}"
    );
}
