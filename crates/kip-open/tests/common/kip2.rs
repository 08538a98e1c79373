//! Requests of the KIP 2.0 conformance suites (`kip2_conformance_*.rs`): one
//! operation through the wire (`Nexus::execute_json` with `"kip": "2.0"`), its result
//! or its error code.
#![allow(dead_code)]

use kip_engine::{Access, Nexus};
use serde_json::{json, Value};

fn response_schema() -> &'static jsonschema::Validator {
    static V: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let text = include_str!("../../../../spec/kip2/schemas/kip-response.schema.json");
        let schema: Value = serde_json::from_str(text).expect("response schema is JSON");
        jsonschema::draft202012::new(&schema).expect("response schema compiles")
    })
}

/// Every response of the suites is checked against `kip-response.schema.json`.
fn checked(r: Value) -> Value {
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

/// Sends a KIP 2.0 request with read-write access; the response.
pub fn send(n: &Nexus, request: Value) -> Value {
    checked(n.execute_json(&request, Access::ReadWrite).to_json())
}

/// One operation with its parameters.
pub fn run_with(n: &Nexus, command: &str, params: Value) -> Value {
    send(
        n,
        json!({"kip": "2.0", "operations": [{"command": command, "parameters": params}]}),
    )
}

/// One operation without parameters.
pub fn run(n: &Nexus, command: &str) -> Value {
    run_with(n, command, json!({}))
}

/// The result of a command that must succeed.
pub fn ok_with(n: &Nexus, command: &str, params: Value) -> Value {
    let r = run_with(n, command, params);
    assert_eq!(r["status"], "succeeded", "{command}\n{r:#}");
    r["results"][0]["result"].clone()
}

/// [`ok_with`] without parameters.
pub fn ok(n: &Nexus, command: &str) -> Value {
    ok_with(n, command, json!({}))
}

/// The error code of a failed request or of its first operation.
pub fn code(r: &Value) -> String {
    r["results"][0]["error"]["code"]
        .as_str()
        .or_else(|| r["error"]["code"].as_str())
        .unwrap_or("")
        .to_string()
}

/// Sends a KIP 2.0 request with read-only access (`execute_kip_readonly`).
pub fn send_ro(n: &Nexus, request: Value) -> Value {
    checked(n.execute_json(&request, Access::ReadOnly).to_json())
}

/// The first value a (COUNT) query answers.
pub fn count(n: &Nexus, query: &str) -> Value {
    ok(n, query)[0].clone()
}

/// A failed operation that says the feature is not built (`UnsupportedCapability`).
pub fn unsupported(r: &Value) {
    assert_eq!(r["status"], "failed", "{r}");
    assert_eq!(code(r), "UnsupportedCapability", "{r}");
}
