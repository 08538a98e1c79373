//! Cognitive Capsules (Specification §37-41, design/KIP-2.0-Capsule.md): EXPORT
//! CAPSULE, VERIFY CAPSULE, VALIDATE CAPSULE, DESCRIBE CAPSULE and PREVIEW IMPORT
//! CAPSULE. None of them changes the memory: an export is a read (META-023), and the
//! three checks a destination makes before an import are different questions
//! (CAP-016/017): VERIFY (are these the bytes that were digested?), VALIDATE (is it a
//! well-formed capsule this memory could read?), PREVIEW (what would an import
//! create or resolve here, and what conflicts?). A capsule is an artifact, never
//! mutation authority: nothing in it grants trust, authority or `$self` (§37.2, §38.4,
//! CAP-005/009/012/013).
//!
//! The artifact (§37.6): `{format, version, payload: {manifest, source, schema,
//! records, external_refs, blobs, handling, extensions}, integrity: {content_digest,
//! proofs}}`. `content_digest` is `sha256:` + the SHA-256 of the payload's canonical
//! JSON ([`canonical`]: RFC 8785 style, keys sorted by UTF-16 code units, no
//! insignificant whitespace, ECMAScript number forms), so a reformatted artifact keeps
//! its digest and a changed record changes it (CAP-002/003). A snapshot capsule binds
//! the one snapshot it was read from (`source.snapshot_seq`, CAP-001); omitted
//! dependencies are listed as external references (`source_element`), never left as
//! dangling ids (§40.1), and the closure says so (`closed` / `selective`, CAP-015).
//! Import itself (isolate / merge / restore) is not built yet: PREVIEW reports what
//! it would do.

use super::error::{Code, V2Error, V2Result};
use super::eval::{self, Bound, Ctx, Row};
use super::runtime::scalar;
use super::{history, model, packages};
use crate::nexus::Nexus;
use crate::store::GraphRead;
use kip_lang::v2::ast::{Describe, Meta, Scalar, TargetRef};
use kip_storage::{ElementId, ElementKind};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};

/// The artifact family (§6 of the capsule design).
pub const FORMAT: &str = "KIP-Cognitive-Capsule";
/// The capsule format version (§7: separate from Core and Profile versions).
pub const VERSION: &str = "2.0";
/// The most records one export carries (the response bound applies too).
const MAX_RECORDS: usize = 100_000;

/// Whether `m` is one of the statements this module answers.
pub(super) fn handles(m: &Meta) -> bool {
    match m {
        Meta::ExportCapsule { .. } | Meta::PreviewImportCapsule { .. } => true,
        Meta::Verify { target, .. } | Meta::Validate { target, .. } => target == "CAPSULE",
        Meta::Describe(Describe::Named { what, .. }) => what == "CAPSULE",
        _ => false,
    }
}

/// Answers `m` (one [`handles`] accepts); `on` runs a read on the operation's
/// snapshot.
pub(super) fn run(
    nexus: &Nexus,
    m: &Meta,
    param: &dyn Fn(&Scalar) -> Option<Value>,
    on: &super::chronology::On<'_>,
) -> V2Result<Value> {
    match m {
        Meta::ExportCapsule {
            target,
            where_clauses,
            as_of,
            ..
        } => on(&|g| {
            let named = |n: &str| param(&Scalar::Param(n.to_string()));
            let max_rows = nexus.limits().max_rows;
            match as_of {
                Some(clause) => {
                    let commit = history::resolve(g, clause, &|s| scalar(param, s))?;
                    let past = history::view(g, &commit)?;
                    let ctx = Ctx::new(&past, &named, max_rows).reading_the_past(true);
                    // The Schema Environment as of then, like the records.
                    let env = packages::describe_at(g, commit.seq)?;
                    export(&ctx, target, where_clauses, commit.seq, &env)
                }
                None => {
                    let seq = history::snapshot_seq(g)?;
                    let ctx = Ctx::new(g, &named, max_rows);
                    export(&ctx, target, where_clauses, seq, &packages::describe(g)?)
                }
            }
        }),
        Meta::Verify { value, .. } => verify(&artifact(param, value)?),
        Meta::Validate { value, .. } => {
            let a = artifact(param, value)?;
            on(&|g| Ok(validate(g, &a)))
        }
        Meta::Describe(Describe::Named { value, .. }) => {
            let value = value.as_ref().ok_or_else(|| {
                V2Error::new(Code::TypeMismatch, "DESCRIBE CAPSULE takes the capsule")
                    .with_hint("DESCRIBE CAPSULE :capsule")
            })?;
            describe(&artifact(param, value)?)
        }
        Meta::PreviewImportCapsule { capsule, into } => {
            let a = artifact(param, capsule)?;
            let into = scalar(param, into)?;
            if into.as_str() != Some(super::request::DEFAULT_SPACE) {
                return Err(V2Error::new(
                    Code::NotFoundOrNotVisible,
                    format!("no space {into} is visible here"),
                )
                .with_hint("PREVIEW IMPORT CAPSULE :c INTO \"default\""));
            }
            on(&|g| preview(g, &a))
        }
        _ => Err(V2Error::new(
            Code::InternalError,
            "capsule::run was given a statement it does not answer",
        )),
    }
}

// ---------------------------------------------------------------------------------
// Canonical JSON and the digest

/// The canonical JSON of `v` (RFC 8785 style): object keys sorted by their UTF-16
/// code units, no insignificant whitespace, strings escaped minimally, numbers in
/// their ECMAScript form (integers without a fraction, `1e+21` from 10^21 on).
pub fn canonical(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null | Value::Bool(_) | Value::String(_) => {
            out.push_str(&serde_json::to_string(v).unwrap_or_default())
        }
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => out.push_str(&i.to_string()),
            (_, Some(u), _) => out.push_str(&u.to_string()),
            (_, _, Some(f)) => out.push_str(&number(f)),
            _ => out.push_str("null"),
        },
        Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push(':');
                if let Some(x) = m.get(k) {
                    write_canonical(x, out);
                }
            }
            out.push('}');
        }
    }
}

/// A float as ECMAScript's `Number.prototype.toString` writes it.
fn number(f: f64) -> String {
    if !f.is_finite() {
        return "null".into();
    }
    if f == 0.0 {
        return "0".into();
    }
    let a = f.abs();
    if (1e-6..1e21).contains(&a) {
        if f.fract() == 0.0 {
            return format!("{f:.0}");
        }
        return format!("{f}");
    }
    // Exponent form: Rust's shortest digits, with the sign ECMAScript writes.
    let s = format!("{f:e}");
    match s.split_once('e') {
        Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
        _ => s,
    }
}

/// `sha256:` + the hex SHA-256 of the canonical JSON of `payload`.
pub fn digest(payload: &Value) -> String {
    let hash = Sha256::digest(canonical(payload).as_bytes());
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

// ---------------------------------------------------------------------------------
// EXPORT

/// `EXPORT CAPSULE target WHERE {...} [AS OF ...]`: a snapshot capsule of the
/// elements the target binds, read on the one snapshot `ctx` reads (seq `seq`, whose
/// Schema Environment `env` describes).
fn export(
    ctx: &Ctx,
    target: &TargetRef,
    clauses: &[kip_lang::v2::ast::WhereClause],
    seq: u64,
    env: &Value,
) -> V2Result<Value> {
    let mut ids: BTreeSet<ElementId> = BTreeSet::new();
    let mut add = |b: &Bound| -> V2Result<()> {
        match b {
            Bound::Elem(id) => {
                ids.insert(*id);
            }
            Bound::Val(Value::String(s)) => {
                if let Some(id) = eval::parse_id(s) {
                    ids.insert(id);
                }
            }
            Bound::Val(_) => {}
        }
        if ids.len() > MAX_RECORDS {
            return Err(V2Error::new(
                Code::ResourceExhausted,
                format!("an export carries at most {MAX_RECORDS} records"),
            )
            .with_hint("narrow the WHERE block, or export in several capsules"));
        }
        Ok(())
    };
    match target {
        TargetRef::Var(var) => {
            eval::each(ctx, clauses, Row::new(), &mut |row| {
                if let Some(b) = row.get(var) {
                    add(b)?;
                }
                Ok(true)
            })?;
        }
        TargetRef::Id(id) => add(&Bound::Val(json!(id)))?,
        TargetRef::Param(p) => add(&Bound::Val(ctx.param(p)?))?,
    }
    let mut records = Vec::new();
    let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut mentioned: BTreeSet<String> = BTreeSet::new();
    // The ids the capsule carries a record of (an id bound but hidden or gone is not).
    let mut included: BTreeSet<String> = BTreeSet::new();
    for id in &ids {
        let Some(view) = model::view(ctx.g, *id)? else {
            continue;
        };
        mentions(&view, &mut mentioned);
        included.insert(id.id_string());
        *counts.entry(model::kind_word(id.kind)).or_insert(0) += 1;
        records.push(json!({
            "ref": format!("r{}", records.len() + 1),
            "source_ref": id.id_string(),
            "kind": model::kind_word(id.kind),
            "element": view,
        }));
    }
    let external: Vec<Value> = mentioned
        .difference(&included)
        .map(|id| json!({"kind": "source_element", "source_ref": id}))
        .collect();
    let closure = if external.is_empty() {
        "closed"
    } else {
        "selective"
    };
    let payload = json!({
        "manifest": {
            "capsule_kind": "snapshot",
            "closure": closure,
            "completeness": "selection_complete",
            "record_counts": counts,
            "exported_at": crate::time::now_text(),
        },
        "source": {
            "nexus": "kip-nexus",
            "implementation_version": env!("CARGO_PKG_VERSION"),
            "space_id": super::request::DEFAULT_SPACE,
            "snapshot_seq": seq,
            "tx_id": history::tx_id(seq),
        },
        "schema": env["packages"].clone(),
        "records": records,
        "external_refs": external,
        "blobs": [],
        "handling": {},
        "extensions": {},
    });
    let content_digest = digest(&payload);
    Ok(json!({
        "format": FORMAT,
        "version": VERSION,
        "payload": payload,
        "integrity": {"content_digest": content_digest, "proofs": []},
    }))
}

/// The element ids a record refers to (its own `id` aside): the ends of a
/// proposition, an assertion's proposition, actor and evidence, ...
fn mentions(view: &Value, out: &mut BTreeSet<String>) {
    fn walk(v: &Value, top: bool, out: &mut BTreeSet<String>) {
        match v {
            Value::String(s) if eval::parse_id(s).is_some() => {
                out.insert(s.clone());
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, false, out)),
            Value::Object(m) => {
                for (k, x) in m {
                    if !(top && k == "id") {
                        walk(x, false, out);
                    }
                }
            }
            _ => {}
        }
    }
    walk(view, true, out);
}

// ---------------------------------------------------------------------------------
// Reading an artifact

/// The artifact a statement names: a capsule object, or its JSON text. A URL is never
/// fetched (§41.5, CAP-020).
fn artifact(param: &dyn Fn(&Scalar) -> Option<Value>, s: &Scalar) -> V2Result<Value> {
    let v = scalar(param, s)?;
    let v = match v {
        Value::String(t) => {
            let t = t.trim();
            if t.starts_with("http://") || t.starts_with("https://") || t.starts_with("file:") {
                return Err(V2Error::new(
                    Code::ArtifactUnavailable,
                    "a capsule is given as its bytes, never fetched from a location: this runtime has no network authority for artifacts",
                )
                .with_hint("pass the capsule object (or its JSON text) as a parameter"));
            }
            serde_json::from_str(t).map_err(|e| {
                V2Error::new(
                    Code::ArtifactParseError,
                    format!("the capsule is not JSON: {e}"),
                )
            })?
        }
        v => v,
    };
    if !v.is_object() {
        return Err(V2Error::new(
            Code::ArtifactParseError,
            "a capsule is a JSON object {format, version, payload, integrity}",
        ));
    }
    Ok(v)
}

fn parse_error(what: &str) -> V2Error {
    V2Error::new(
        Code::ArtifactParseError,
        format!("not a Cognitive Capsule: {what}"),
    )
    .with_hint("a capsule is {\"format\": \"KIP-Cognitive-Capsule\", \"version\", \"payload\", \"integrity\": {\"content_digest\"}}")
}

/// The payload and the digest it claims, once the envelope is a capsule's.
fn envelope(a: &Value) -> V2Result<(&Map<String, Value>, &str)> {
    if a["format"] != FORMAT {
        return Err(parse_error("\"format\" is not \"KIP-Cognitive-Capsule\""));
    }
    let payload = a["payload"]
        .as_object()
        .ok_or_else(|| parse_error("no \"payload\" object"))?;
    let claimed = a["integrity"]["content_digest"]
        .as_str()
        .ok_or_else(|| parse_error("no \"integrity.content_digest\""))?;
    Ok((payload, claimed))
}

// ---------------------------------------------------------------------------------
// VERIFY, VALIDATE, DESCRIBE, PREVIEW

/// `VERIFY CAPSULE`: whether the payload is what its digest names. Proofs are listed,
/// not checked (this runtime knows no signers), and nothing is granted either way.
fn verify(a: &Value) -> V2Result<Value> {
    let (payload, claimed) = envelope(a)?;
    if !claimed.starts_with("sha256:") {
        return Err(V2Error::new(
            Code::DigestMismatch,
            format!("content_digest \"{claimed}\" is not a sha256 digest this runtime computes"),
        ));
    }
    let actual = digest(&Value::Object(payload.clone()));
    if actual != claimed {
        return Err(V2Error::new(
            Code::DigestMismatch,
            "the capsule's payload is not the one its content_digest names: it was changed after export",
        )
        .with_detail("claimed", claimed)
        .with_detail("actual", actual.as_str())
        .with_hint("export the capsule again from its source; a changed capsule is never read"));
    }
    let proofs = a["integrity"]["proofs"].as_array().map_or(0, Vec::len);
    Ok(json!({
        "verified": true,
        "content_digest": actual,
        "proofs": {"present": proofs, "checked": 0, "note": "signatures attest a digest, never truth, trust or authority (§37.8): none are granted"},
        "trust_granted": false,
        "authority_granted": false,
    }))
}

/// `VALIDATE CAPSULE`: the structure this memory can read (`valid`, with every
/// problem found). A capsule may verify and still not validate (CAP-016).
fn validate(g: &dyn GraphRead, a: &Value) -> Value {
    let mut errors = Vec::new();
    let mut problem = |msg: String| {
        errors.push(V2Error::new(Code::CapsuleValidationFailed, msg).to_json());
    };
    match envelope(a) {
        Err(e) => return json!({"valid": false, "errors": [e.to_json()]}),
        Ok((payload, _)) => {
            if a["version"] != VERSION {
                problem(format!(
                    "capsule format version {} is not {VERSION}",
                    a["version"]
                ));
            }
            let kind = payload
                .get("manifest")
                .and_then(|m| m.get("capsule_kind"))
                .and_then(Value::as_str);
            if !matches!(kind, Some("snapshot" | "delta")) {
                problem("manifest.capsule_kind is neither \"snapshot\" nor \"delta\"".into());
            }
            match payload.get("records").and_then(Value::as_array) {
                None => problem("payload.records is not a list".into()),
                Some(records) => {
                    for (i, r) in records.iter().enumerate() {
                        if let Some(msg) = record_problem(g, r) {
                            problem(format!("record {i}: {msg}"));
                        }
                    }
                }
            }
            if let Some(refs) = payload.get("external_refs") {
                for (i, r) in refs.as_array().into_iter().flatten().enumerate() {
                    let known = [
                        "source_element",
                        "canonical_identity",
                        "semantic_locator",
                        "external_artifact",
                        "redacted",
                        "unavailable",
                    ];
                    if !r["kind"].as_str().is_some_and(|k| known.contains(&k)) {
                        problem(format!("external reference {i} has no known kind"));
                    }
                }
            }
        }
    }
    json!({"valid": errors.is_empty(), "errors": errors})
}

/// What is wrong with a record for this memory, if anything: its shape, its kind, a
/// concept type the destination's Schema Environment does not define.
fn record_problem(g: &dyn GraphRead, r: &Value) -> Option<String> {
    let kind = r["kind"].as_str()?;
    if !matches!(
        kind,
        "concept" | "proposition" | "assertion" | "evidence" | "activity"
    ) {
        return Some(format!("kind \"{kind}\" is not a KIP 2.0 element kind"));
    }
    if !r["element"].is_object() {
        return Some("no element object".into());
    }
    if kind == "concept" {
        let ty = r["element"]["type"].as_str()?;
        let known = super::schema_env::active()
            .resolve(g, super::schema_env::SymbolKind::ConceptType, ty)
            .is_ok();
        if !known {
            return Some(format!(
                "concept type \"{ty}\" is not defined in this memory's Schema Environment"
            ));
        }
    }
    None
}

/// `DESCRIBE CAPSULE`: what the capsule says of itself (not verified): kind,
/// closure, completeness, source, counts, schema dependencies, external references
/// by kind (redacted and unavailable apart, CAP-014).
fn describe(a: &Value) -> V2Result<Value> {
    let (payload, claimed) = envelope(a)?;
    let mut by_kind: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for r in payload
        .get("external_refs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let k = r["kind"].as_str().unwrap_or("unknown").to_string();
        by_kind.entry(k).or_default().push(r.clone());
    }
    let manifest = payload.get("manifest").cloned().unwrap_or(Value::Null);
    Ok(json!({
        "format": a["format"],
        "version": a["version"],
        "capsule_kind": manifest["capsule_kind"],
        "closure": manifest["closure"],
        "completeness": manifest["completeness"],
        "record_counts": manifest["record_counts"],
        "source": payload.get("source").cloned().unwrap_or(Value::Null),
        "schema": payload.get("schema").cloned().unwrap_or(Value::Null),
        "external_refs": by_kind,
        "content_digest": claimed,
        "verified": false,
        "note": "DESCRIBE reads what the capsule declares; VERIFY CAPSULE checks its digest",
    }))
}

/// A concept of this memory with type `ty` and display name `name`, if any.
fn same_named(g: &dyn GraphRead, ty: &str, name: &str) -> V2Result<Option<String>> {
    let mut candidates = super::names::lookup(g, name)?;
    candidates.extend(g.concept_by_key(ty, name)?);
    for n in candidates {
        let id = ElementId::new(ElementKind::Concept, n);
        if let Some(v) = model::view(g, id)? {
            if v["type"] == ty && v["name"] == name {
                return Ok(Some(id.id_string()));
            }
        }
    }
    Ok(None)
}

/// `PREVIEW IMPORT CAPSULE c INTO space`: what an import would do here, with no side
/// effect (CAP-018): each record is new to this memory (source ids are never reused as
/// local ids, CAP-006; a same-named concept is a collision to review, never a merge,
/// CAP-007; the source's `$self` stays the source agent, CAP-009), nothing of the
/// source's trust or authority carries over (CAP-012/013).
fn preview(g: &dyn GraphRead, a: &Value) -> V2Result<Value> {
    verify(a)?;
    let checked = validate(g, a);
    if checked["valid"] != true {
        return Err(V2Error::new(
            Code::CapsuleValidationFailed,
            "the capsule does not validate here; nothing would be imported",
        )
        .with_detail("errors", checked["errors"].clone()));
    }
    let (payload, _) = envelope(a)?;
    let mut plan = Vec::new();
    let mut collisions = Vec::new();
    let mut creates: BTreeMap<String, u64> = BTreeMap::new();
    for r in payload
        .get("records")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = r["kind"].as_str().unwrap_or_default().to_string();
        *creates.entry(kind.clone()).or_insert(0) += 1;
        let mut step = json!({
            "ref": r["ref"],
            "source_ref": r["source_ref"],
            "kind": kind,
            "action": "create",
        });
        if kind == "concept" {
            let e = &r["element"];
            let (ty, name) = (e["type"].as_str(), e["name"].as_str());
            if let (Some(ty), Some(name)) = (ty, name) {
                if name == "$self" {
                    step["action"] = json!("create");
                    step["note"] = json!(
                        "the source's $self is the source agent here, never this memory's $self (§38.4)"
                    );
                } else if let Some(local) = same_named(g, ty, name)? {
                    step["collision"] = json!({"local": local, "by": "name"});
                    collisions.push(json!({
                        "ref": r["ref"],
                        "source_ref": r["source_ref"],
                        "local": local,
                        "reason": "same type and name: a name is not an identity, so this is not merged (§38.3)",
                    }));
                }
            }
        }
        plan.push(step);
    }
    Ok(json!({
        "committed": false,
        "destination": super::request::DEFAULT_SPACE,
        "would_create": creates,
        "would_resolve": [],
        "collisions": collisions,
        "plan": plan,
        "trust_granted": false,
        "authority_granted": false,
        "note": "a preview changes nothing; importing is not supported by this runtime yet",
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_and_writes_numbers_as_ecmascript_does() {
        let v = json!({"b": 1, "a": [true, null, "x"], "c": {"z": 1.5, "y": 2.0}});
        assert_eq!(
            canonical(&v),
            r#"{"a":[true,null,"x"],"b":1,"c":{"y":2,"z":1.5}}"#
        );
        assert_eq!(number(1e21), "1e+21");
        assert_eq!(number(1e-7), "1e-7");
        assert_eq!(number(0.1), "0.1");
        assert_eq!(number(-0.0), "0");
        // UTF-16 order: U+E000 sorts after a surrogate pair (U+1F600).
        let v = json!({"\u{e000}": 1, "\u{1f600}": 2});
        assert_eq!(canonical(&v), "{\"\u{1f600}\":2,\"\u{e000}\":1}");
    }

    #[test]
    fn a_reformatted_payload_keeps_its_digest_and_a_changed_one_does_not() {
        let a: Value = serde_json::from_str(r#"{"x": 1, "y": [1, 2]}"#).unwrap();
        let b: Value = serde_json::from_str("{\n  \"y\" : [1,2],\n  \"x\":1.0\n}").unwrap();
        assert_eq!(digest(&a), digest(&b));
        let c = json!({"x": 2, "y": [1, 2]});
        assert_ne!(digest(&a), digest(&c));
    }
}
