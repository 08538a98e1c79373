//! The ingestion context (Specification §71.1, KIP2-RT-031): `ingest.evidence` entries
//! of a request are minted into Evidence inside the request's one transaction, from the
//! transport-supplied payload as it came (never re-typed by a model), and each `key`
//! is bound as a request parameter naming the minted Evidence. A `client_key` makes
//! the minting retry-safe (the same key and content resolve to the first Evidence).

use super::error::{Code, V2Error, V2Result};
use super::request::Request;
use crate::store::{ElementKind, GraphWrite};
use serde_json::{json, Map, Value};

fn invalid(message: String) -> V2Error {
    V2Error::new(Code::InvalidRequestEnvelope, message)
        .with_hint("ingest.evidence: [{\"key\": \"msg\", \"evidence_class\": \"user_statement\", \"payload\": \"...\"}]")
}

/// The entries, checked before anything runs: keys are parameter names used once and
/// not also given as request parameters; an artifact handle is not supported yet.
pub fn entries(req: &Request) -> V2Result<Vec<&Map<String, Value>>> {
    let Some(ingest) = &req.ingest else {
        return Ok(Vec::new());
    };
    let list = ingest
        .get("evidence")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("ingest carries no evidence list".into()))?;
    let mut out = Vec::with_capacity(list.len());
    let mut keys: Vec<&str> = Vec::new();
    for e in list {
        let e = e
            .as_object()
            .ok_or_else(|| invalid("an ingest.evidence entry is an object".into()))?;
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        if keys.contains(&key) {
            return Err(invalid(format!("ingest key \"{key}\" is given twice")));
        }
        if req.parameters.contains_key(key)
            || req
                .operations
                .iter()
                .any(|o| o.parameters.contains_key(key))
        {
            return Err(invalid(format!(
                "ingest key \"{key}\" is also a parameter: the minted Evidence is bound under it"
            )));
        }
        if e.contains_key("payload_artifact") {
            return Err(V2Error::new(
                Code::UnsupportedCapability,
                "ingest.evidence payload_artifact: artifact handles are not supported by this runtime yet",
            )
            .with_hint("send the content inline as payload"));
        }
        keys.push(key);
        out.push(e);
    }
    Ok(out)
}

/// The digest of a transport-supplied payload: of its bytes for a string, else of its
/// canonical JSON.
fn payload_digest(p: &Value) -> String {
    use sha2::{Digest, Sha256};
    let hex = |d: &[u8]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    match p {
        Value::String(s) => format!("sha256:{}", hex(&Sha256::digest(s.as_bytes()))),
        other => format!("sha256:{}", super::request::digest(other)),
    }
}

/// Mints the request's ingested Evidence in `w`; returns the parameters they bind
/// (key -> Evidence id).
pub fn mint(w: &mut dyn GraphWrite, req: &Request) -> V2Result<Map<String, Value>> {
    let mut bound = Map::new();
    for e in entries(req)? {
        let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
        let mut fields = Map::new();
        for f in ["evidence_class", "payload", "media_type", "observed_at"] {
            if let Some(v) = e.get(f) {
                fields.insert(f.into(), v.clone());
            }
        }
        if let Some(p) = e.get("payload") {
            fields.insert("content_digest".into(), json!(payload_digest(p)));
        }
        if let Some(a) = e.get("source_actor") {
            // A semantic source, never the principal (§71.1).
            fields.insert("source".into(), json!([a]));
        }
        fields.insert("ingested".into(), json!(true));
        // A retried request (same idempotency key) mints nothing twice even when the
        // entry names no client key of its own.
        let client_key = e.get("client_key").cloned().or_else(|| {
            req.execution
                .as_ref()
                .and_then(|x| x.idempotency_key.as_ref())
                .map(|k| json!(format!("kip:ingest:{k}#{key}")))
        });
        let id = super::records::create_other(
            w,
            ElementKind::Evidence,
            fields,
            Vec::new(),
            client_key,
            None,
        )?;
        bound.insert(key.to_string(), json!(id.id_string()));
    }
    Ok(bound)
}
