//! The KIP 2.0 request envelope (Specification §71-75, `kip-request.schema.json`):
//! checked against the normative schema, then read into typed fields, then held to
//! the runtime rules the schema leaves to the runtime (unique `op_id`s, critical
//! extensions, the space, isolation, capability requirements).

use super::error::{Code, V2Error};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::sync::OnceLock;

/// The request schema, as published with the Specification.
const REQUEST_SCHEMA: &str = include_str!("../../../../spec/kip2/schemas/kip-request.schema.json");

/// The one space this runtime serves today (1.x data lives in it, D 40; Migration §5).
pub const DEFAULT_SPACE: &str = "default";

fn validator() -> Result<&'static jsonschema::Validator, V2Error> {
    static V: OnceLock<Result<jsonschema::Validator, String>> = OnceLock::new();
    V.get_or_init(|| {
        let schema: Value = serde_json::from_str(REQUEST_SCHEMA).map_err(|e| e.to_string())?;
        jsonschema::draft202012::new(&schema).map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| {
        V2Error::new(
            Code::InternalError,
            format!("the request schema does not load: {e}"),
        )
    })
}

/// `execution` of a request.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Execution {
    /// `independent`, `sequence` or `atomic`.
    pub mode: Option<String>,
    /// `stop` (default) or `continue`, for `sequence`.
    pub on_error: Option<String>,
    /// Requested isolation.
    pub isolation: Option<String>,
    /// The transaction's idempotency key (§34).
    pub idempotency_key: Option<String>,
}

/// One operation.
#[derive(Debug, Clone, Deserialize)]
pub struct Operation {
    /// Request-local correlation id.
    pub op_id: Option<String>,
    /// The declared language (`KQL`, `KML`, `META`): checked against the parsed command.
    pub language: Option<String>,
    /// The command text (`None`: the operation is a structured `ast`, which the schema
    /// allows in its place).
    pub command: Option<String>,
    /// Parameters of this operation (over the request's).
    #[serde(default)]
    pub parameters: Map<String, Value>,
    /// This operation's idempotency key (§34).
    pub idempotency_key: Option<String>,
    /// A digest of what the operation asks (its object and the request's parameters):
    /// what an operation idempotency key is bound to.
    #[serde(skip)]
    pub digest: String,
}

/// `options` of a request.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Options {
    /// The client's execution window.
    pub deadline_ms: Option<u64>,
    /// Validation and preview: everything runs in one transaction that is then
    /// aborted; nothing is committed.
    #[serde(default)]
    pub dry_run: bool,
}

/// A request, read from its JSON once the schema accepted it.
#[derive(Debug, Clone, Deserialize)]
pub struct Request {
    /// The client's attempt id (echoed).
    pub request_id: Option<String>,
    /// The space selector.
    pub space: Option<Map<String, Value>>,
    /// An explicit compatibility profile.
    pub compatibility_profile: Option<String>,
    /// How the operations run.
    pub execution: Option<Execution>,
    /// The snapshot binding.
    pub read: Option<Map<String, Value>>,
    /// Source material to mint into Evidence.
    pub ingest: Option<Value>,
    /// Commit preconditions.
    pub preconditions: Option<Map<String, Value>>,
    /// The operations.
    pub operations: Vec<Operation>,
    /// Request-wide parameters.
    #[serde(default)]
    pub parameters: Map<String, Value>,
    /// Capability requirements (fail fast).
    #[serde(default)]
    pub requires: Map<String, Value>,
    /// Request options.
    #[serde(default)]
    pub options: Options,
    /// A digest of the request without its `request_id` (an attempt id): what the
    /// transaction's idempotency key is bound to.
    #[serde(skip)]
    pub digest: String,
}

/// A value with every object's keys in sorted order (this build keeps insertion order).
pub(super) fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), canonical(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The SHA-256 of a value's canonical JSON (object keys sorted), in hex.
pub fn digest(v: &Value) -> String {
    use sha2::{Digest, Sha256};
    let text = serde_json::to_string(&canonical(v)).unwrap_or_default();
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Request {
    /// `read.snapshot_token`, when the request reads at one (§78).
    pub fn snapshot_token(&self) -> Option<&str> {
        self.read
            .as_ref()
            .and_then(|r| r.get("snapshot_token"))
            .and_then(Value::as_str)
    }

    /// The execution mode: the declared one, else `independent` (only a single
    /// operation may leave it out, and then the modes do not differ).
    pub fn mode(&self) -> &str {
        self.execution
            .as_ref()
            .and_then(|e| e.mode.as_deref())
            .unwrap_or("independent")
    }
}

/// The first schema violation as an `InvalidRequestEnvelope` naming where it is.
fn envelope_error(v: &jsonschema::Validator, raw: &Value) -> Option<V2Error> {
    let e = v.iter_errors(raw).next()?;
    let at = e.instance_path().to_string();
    let at = if at.is_empty() { "/".to_string() } else { at };
    Some(
        V2Error::new(
            Code::InvalidRequestEnvelope,
            format!("the request envelope is not valid at {at}: {e}"),
        )
        .with_hint("a KIP 2.0 request is {\"kip\": \"2.0\", \"operations\": [{\"command\": \"...\"}]}, with execution.mode when there are several operations (kip-request.schema.json)")
        .with_detail("instance_path", at),
    )
}

/// Reads and checks a request: the protocol version, the schema, then the rules the
/// runtime owns. Nothing has run when this fails.
pub fn read(raw: &Value) -> Result<Request, V2Error> {
    match raw.get("kip") {
        Some(Value::String(v)) if v != "2.0" => {
            return Err(V2Error::new(
                Code::UnsupportedProtocolVersion,
                format!(
                    "this runtime speaks KIP \"2.0\" (and KIP 1.x without \"kip\"), not \"{v}\""
                ),
            )
            .with_hint("send \"kip\": \"2.0\", or leave \"kip\" out for a KIP 1.x request"))
        }
        _ => {}
    }
    if let Some(e) = envelope_error(validator()?, raw) {
        return Err(e);
    }
    let mut req: Request = serde_json::from_value(raw.clone()).map_err(|e| {
        V2Error::new(
            Code::InvalidRequestEnvelope,
            format!("the request envelope: {e}"),
        )
    })?;
    let mut bare = raw.clone();
    if let Some(o) = bare.as_object_mut() {
        o.remove("request_id");
    }
    req.digest = digest(&bare);
    for (i, op) in req.operations.iter_mut().enumerate() {
        op.digest = digest(&serde_json::json!([
            raw["operations"][i],
            raw["parameters"]
        ]));
    }
    let mut ids = HashSet::new();
    for op in &req.operations {
        if let Some(id) = &op.op_id {
            if !ids.insert(id.as_str()) {
                return Err(V2Error::new(
                    Code::InvalidRequestEnvelope,
                    format!("op_id \"{id}\" is used by two operations"),
                )
                .with_hint("give every operation of a request its own op_id"));
            }
        }
    }
    critical_extensions(raw)?;
    check_space(&req)?;
    check_isolation(&req)?;
    check_unsupported(&req)?;
    Ok(req)
}

/// An extension marked `critical` that the runtime does not implement fails the request
/// instead of being ignored (`ExtensionValue` of the request schema). This runtime
/// implements none.
fn critical_extensions(raw: &Value) -> Result<(), V2Error> {
    let mut places: Vec<(String, &Value)> = Vec::new();
    places.push(("/extensions".into(), &raw["extensions"]));
    for k in [
        "execution",
        "read",
        "ingest",
        "preconditions",
        "context",
        "options",
    ] {
        places.push((format!("/{k}/extensions"), &raw[k]["extensions"]));
    }
    for (i, op) in raw["operations"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        places.push((format!("/operations/{i}/extensions"), &op["extensions"]));
        places.push((
            format!("/operations/{i}/options/extensions"),
            &op["options"]["extensions"],
        ));
    }
    for (at, ext) in places {
        for (name, v) in ext.as_object().into_iter().flatten() {
            if v["critical"] == Value::Bool(true) {
                return Err(V2Error::new(
                    Code::UnsupportedCapability,
                    format!("the critical extension \"{name}\" (at {at}) is not supported by this runtime"),
                )
                .with_hint("drop the extension, or mark it critical: false if it may be ignored")
                .with_detail("extension", name.as_str()));
            }
        }
    }
    Ok(())
}

/// The space: `default` by id or as `kip:space:default`; any other is not visible
/// (existence-neutral, §86.4).
fn check_space(req: &Request) -> Result<(), V2Error> {
    let Some(sel) = &req.space else {
        return Ok(());
    };
    let names = [
        sel.get("id").and_then(Value::as_str),
        sel.get("uri")
            .and_then(Value::as_str)
            .map(|u| u.strip_prefix("kip:space:").unwrap_or(u)),
    ];
    for n in names.into_iter().flatten() {
        if n != DEFAULT_SPACE {
            return Err(V2Error::new(
                Code::NotFoundOrNotVisible,
                format!("no memory space \"{n}\" is visible to this caller"),
            )
            .with_hint("leave \"space\" out, or name the space \"default\" (DESCRIBE EXECUTION CONTEXT shows the one in use)"));
        }
    }
    Ok(())
}

/// §75, KIP2-RT-019: a requested isolation this runtime cannot give fails; it is never
/// silently weakened. Writes commit one at a time (serializable); reads see one
/// committed snapshot.
fn check_isolation(req: &Request) -> Result<(), V2Error> {
    let Some(iso) = req.execution.as_ref().and_then(|e| e.isolation.as_deref()) else {
        return Ok(());
    };
    if matches!(iso, "serializable" | "snapshot") {
        return Ok(());
    }
    Err(V2Error::new(
        Code::UnsupportedIsolation,
        format!("isolation \"{iso}\" is not offered; this runtime gives \"serializable\" (writes commit one at a time) and \"snapshot\" (each read sees one committed state)"),
    )
    .with_hint("ask for \"serializable\" or leave isolation out"))
}

/// Request features this runtime does not implement yet fail explicitly (KIP2-RT-020:
/// no silent capability downgrade), before anything runs.
fn check_unsupported(req: &Request) -> Result<(), V2Error> {
    let refuse = |what: &str, hint: &str| {
        Err(V2Error::new(
            Code::UnsupportedCapability,
            format!("{what} is not supported by this runtime yet"),
        )
        .with_hint(hint.to_string()))
    };
    if let Some(p) = &req.compatibility_profile {
        return refuse(
            &format!("the compatibility profile \"{p}\""),
            "leave compatibility_profile out; KIP 1.x requests (without \"kip\") are served as they are",
        );
    }
    if req.ingest.is_some() {
        super::ingest::entries(req)?;
        if req.mode() != "atomic" && req.operations.len() > 1 {
            // §71.1: the Evidence is minted inside the request's one transaction.
            return Err(V2Error::new(
                Code::InvalidRequestEnvelope,
                "an ingestion context is minted in one transaction: this request runs its operations as several",
            )
            .with_hint("send the operations with execution.mode \"atomic\", or one per request"));
        }
    }
    if req
        .preconditions
        .as_ref()
        .is_some_and(|p| p.keys().any(|k| k != "extensions"))
        && req.mode() != "atomic"
        && req.operations.len() > 1
    {
        // §35.4: a precondition binds one transaction; several operations outside
        // an atomic request are several transactions.
        return Err(V2Error::new(
            Code::InvalidRequestEnvelope,
            "preconditions bind one transaction: this request runs its operations as several",
        )
        .with_hint("send the operations with execution.mode \"atomic\", or one per request"));
    }
    let missing: Vec<&str> = req
        .requires
        .iter()
        .filter(|(k, v)| {
            !matches!(v, Value::Bool(false) | Value::Null) && !super::describe::provides(k)
        })
        .map(|(k, _)| k.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(V2Error::new(
            Code::UnsupportedCapability,
            format!(
                "required capabilities not available: {}",
                missing.join(", ")
            ),
        )
        .with_hint("DESCRIBE CAPABILITIES lists what this runtime offers")
        .with_detail("capabilities", missing));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(raw: Value) -> &'static str {
        read(&raw).map(|_| "ok").unwrap_or_else(|e| e.code.name())
    }

    #[test]
    fn kip2_rt_008_several_operations_need_an_execution_mode() {
        let ops = json!([{"command": "DESCRIBE PROTOCOL"}, {"command": "DESCRIBE CAPABILITIES"}]);
        assert_eq!(
            code(json!({"kip": "2.0", "operations": ops})),
            "InvalidRequestEnvelope"
        );
        assert_eq!(
            code(json!({"kip": "2.0", "execution": {"mode": "sequence"}, "operations": ops})),
            "ok"
        );
    }

    #[test]
    fn a_request_is_checked_against_the_schema() {
        assert_eq!(
            code(json!({"kip": "2.0", "operations": []})),
            "InvalidRequestEnvelope"
        );
        assert_eq!(
            code(json!({"kip": "2.0", "operations": [{"command": "x"}], "bogus": 1})),
            "InvalidRequestEnvelope"
        );
        assert_eq!(
            code(json!({"kip": "2.0", "operations": [{"command": "x", "ast": {}}]})),
            "InvalidRequestEnvelope"
        );
        assert_eq!(
            code(
                json!({"kip": "2.0", "operations": [{"command": "x"}], "parameters": {"1bad": 1}})
            ),
            "InvalidRequestEnvelope"
        );
        assert_eq!(
            code(
                json!({"kip": "2.0", "execution": {"mode": "atomic", "on_error": "continue"}, "operations": [{"command": "x"}]})
            ),
            "InvalidRequestEnvelope"
        );
        let e = read(&json!({"kip": "2.0", "operations": [{"command": 5}]})).unwrap_err();
        assert_eq!(e.details["instance_path"], "/operations/0/command");
    }

    #[test]
    fn another_protocol_version_is_unsupported() {
        assert_eq!(
            code(json!({"kip": "3.0", "operations": [{"command": "x"}]})),
            "UnsupportedProtocolVersion"
        );
    }

    #[test]
    fn op_ids_are_unique_within_a_request() {
        let ops = json!([{"op_id": "a", "command": "x"}, {"op_id": "a", "command": "y"}]);
        assert_eq!(
            code(json!({"kip": "2.0", "execution": {"mode": "independent"}, "operations": ops})),
            "InvalidRequestEnvelope"
        );
    }

    #[test]
    fn kip2_rt_019_an_isolation_not_offered_is_refused_not_weakened() {
        let r = |iso: &str| {
            code(
                json!({"kip": "2.0", "execution": {"mode": "sequence", "isolation": iso}, "operations": [{"command": "x"}]}),
            )
        };
        assert_eq!(r("serializable"), "ok");
        assert_eq!(r("strict-serializable-global"), "UnsupportedIsolation");
    }

    #[test]
    fn kip2_rt_020_a_required_capability_not_offered_fails_fast() {
        assert_eq!(
            code(
                json!({"kip": "2.0", "operations": [{"command": "x"}], "requires": {"belief_slot": true}})
            ),
            "UnsupportedCapability"
        );
        assert_eq!(
            code(
                json!({"kip": "2.0", "operations": [{"command": "x"}], "requires": {"belief_slot": false}})
            ),
            "ok"
        );
        assert_eq!(
            code(
                json!({"kip": "2.0", "operations": [{"command": "x"}], "extensions": {"acme.io/x": {"critical": true}}})
            ),
            "UnsupportedCapability"
        );
        assert_eq!(
            code(
                json!({"kip": "2.0", "operations": [{"command": "x"}], "extensions": {"acme.io/x": {"critical": false}}})
            ),
            "ok"
        );
    }

    #[test]
    fn only_the_default_space_is_visible() {
        assert_eq!(
            code(
                json!({"kip": "2.0", "space": {"id": "default"}, "operations": [{"command": "x"}]})
            ),
            "ok"
        );
        assert_eq!(
            code(
                json!({"kip": "2.0", "space": {"uri": "kip:space:default"}, "operations": [{"command": "x"}]})
            ),
            "ok"
        );
        assert_eq!(
            code(
                json!({"kip": "2.0", "space": {"id": "secret"}, "operations": [{"command": "x"}]})
            ),
            "NotFoundOrNotVisible"
        );
    }
}
