//! Retention and forgetting (Specification §19, §60): SET RETENTION, TOMBSTONE and
//! PURGE. None of them is a retraction (§19): an element keeps its identity.
//!
//! - SET RETENTION writes `retention` (`retention_class`, `expires_at`); a legal hold
//!   is governance state, not KML (`ProtectedGovernanceField`).
//! - TOMBSTONE takes the element out of active state (`_system.state: tombstoned`);
//!   until history reads land (issue 48) its content stays in place, so a tombstone
//!   never loses what PURGE alone may destroy (KIP2-KML-026).
//! - PURGE erases: under a legal hold it is `LegalHoldConflict`; under the default
//!   reference policy `deny_if_referenced` an element something still references is
//!   `PurgeDenied`; otherwise its graph row goes (with its text, attribute and vector
//!   index entries) and a stub stays: kind, `governance.purged`, the content digest,
//!   and when (§60.3).

use super::concepts::ensure_record;
use super::error::{Code, V2Error, V2Result};
use super::model::{self, SPACE};
use crate::store::{ElemRef, ElementId, ElementKind, GraphWrite};
use serde_json::{json, Map, Value};

/// SET RETENTION (§19.1).
pub fn set_retention(
    w: &mut dyn GraphWrite,
    id: ElementId,
    policy: Map<String, Value>,
    expect_version: Option<&Value>,
) -> V2Result<()> {
    for (k, v) in &policy {
        match k.as_str() {
            "retention_class" if v.is_string() || v.is_null() => {}
            "expires_at" if v.is_null() || v.as_str().and_then(crate::time::parse).is_some() => {}
            "legal_hold" => {
                return Err(V2Error::new(
                    Code::ProtectedGovernanceField,
                    "a legal hold is governance state, set by the owner, not by KML (§19.1, §28)",
                )
                .with_hint("leave legal_hold out; retention_class and expires_at are writable"))
            }
            other => {
                return Err(V2Error::new(
                    Code::TypeMismatch,
                    format!("SET RETENTION takes retention_class (a string) and expires_at (an RFC 3339 time); \"{other}\": {v} is not one of them"),
                )
                .with_detail("field", other))
            }
        }
    }
    let rec = record(w, id)?;
    if let Some(e) = expect_version {
        if e.as_u64() != Some(rec.version) {
            return Err(V2Error::new(
                Code::VersionConflict,
                format!("{} is at version {}, not {e}", id.id_string(), rec.version),
            ));
        }
    }
    let mut state = rec.state.clone();
    let mut retention = state
        .get("retention")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (k, v) in policy {
        retention.insert(k, v);
    }
    state.insert("retention".into(), Value::Object(retention));
    w.set_element_state(SPACE, id, state)?;
    Ok(())
}

/// The record of `id` (created for a concept or proposition 2.0 never wrote).
fn record(w: &mut dyn GraphWrite, id: ElementId) -> V2Result<crate::store::ElementRecord> {
    match id.kind {
        ElementKind::Concept => {
            let Some(row) = w.concept(id.n)?.filter(|r| !model::hidden(r)) else {
                return Err(super::mutate::not_found(id));
            };
            ensure_record(w, id, &row)
        }
        ElementKind::Proposition => match w.element(SPACE, id)? {
            Some(r) => Ok(r),
            None if w.prop(id.n)?.is_some() => {
                Ok(w.create_element(SPACE, id, Map::new(), Map::new(), &[])?)
            }
            None => Err(super::mutate::not_found(id)),
        },
        _ => w
            .element(SPACE, id)?
            .ok_or_else(|| super::mutate::not_found(id)),
    }
}

/// What still references `id` (the first few, for the error).
fn referrers(w: &dyn GraphWrite, id: ElementId) -> V2Result<Vec<String>> {
    let mut out = Vec::new();
    if let Some(r) = model::graph_ref(id) {
        let mut add = |_: &str, _: ElemRef, p: u64| {
            out.push(ElementId::new(ElementKind::Proposition, p).id_string());
            Ok(out.len() < 5)
        };
        w.scan_out(r, None, &mut add)?;
        w.scan_in(r, None, &mut add)?;
    }
    w.scan_referrers(SPACE, id, &mut |_, src| {
        out.push(src.id_string());
        Ok(out.len() < 10)
    })?;
    if id.kind == ElementKind::Proposition && model::written_by_1x(w, id.n)? {
        // A 1.x link's founding assertion is about it.
        out.push(ElementId::new(ElementKind::Assertion, id.n).id_string());
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The strings of an element's content (its name, key, payload, attributes, facets:
/// 4 characters or more) as they may appear in an audit record's JSON: as written,
/// JSON-escaped once (a parameter), and twice (a string literal inside a command text).
fn needles(view: &Value) -> Vec<String> {
    fn strings(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) if s.chars().count() >= 4 => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
            Value::Object(o) => o.values().for_each(|x| strings(x, out)),
            _ => {}
        }
    }
    let mut raw = Vec::new();
    for k in [
        "name",
        "key",
        "payload",
        "content",
        "attributes",
        "facets",
        "metadata",
    ] {
        if let Some(v) = view.get(k) {
            strings(v, &mut raw);
        }
    }
    let escape = |s: &str| {
        let j = Value::String(s.to_string()).to_string();
        j[1..j.len() - 1].to_string()
    };
    let mut out = Vec::new();
    for s in raw {
        let once = escape(&s);
        let twice = escape(&once);
        for n in [s, once, twice] {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// The content strings of the element's past states (the version chain), which a
/// purge also destroys: an earlier name or description must leave the audit log too.
fn past_needles(w: &dyn GraphWrite, id: ElementId) -> V2Result<Vec<String>> {
    use kip_storage::history::{PART_RECORD, PART_ROW};
    let key = id.encode();
    let mut out = Vec::new();
    for part in [PART_ROW, PART_RECORD] {
        for (_, bytes) in kip_storage::history::past_states(w, SPACE, key, part)? {
            if bytes.is_empty() {
                continue;
            }
            let past = match (part, id.kind) {
                (PART_ROW, ElementKind::Concept) => {
                    let c: kip_storage::ConceptRecord = kip_storage::decode(&bytes)?;
                    json!({"name": c.name, "attributes": c.attributes, "metadata": c.metadata})
                }
                (PART_ROW, _) => {
                    let p: kip_storage::PropRecord = kip_storage::decode(&bytes)?;
                    json!({"attributes": p.attributes, "metadata": p.metadata})
                }
                _ => {
                    let r = kip_storage::ElementRecord::decode(&bytes)?;
                    json!({
                        "payload": r.payload.get("payload"),
                        "key": r.payload.get("key"),
                        "name": r.state.get("name"),
                        "facets": r.state.get("facets"),
                    })
                }
            };
            out.extend(needles(&past));
        }
    }
    Ok(out)
}

/// PURGE of one element (§60.3).
pub fn purge(w: &mut dyn GraphWrite, id: ElementId, policy: &str) -> V2Result<()> {
    match policy {
        "deny_if_referenced" => {}
        "tombstone_reference" | "authorized_cascade" => {
            return Err(V2Error::new(
                Code::UnsupportedCapability,
                format!("REFERENCE POLICY \"{policy}\" is not supported by this runtime yet"),
            )
            .with_hint("purge what references the element first, or leave REFERENCE POLICY out (deny_if_referenced)"))
        }
        other => {
            return Err(V2Error::new(
                Code::ConstraintViolation,
                format!("\"{other}\" is not a reference policy"),
            )
            .with_hint("REFERENCE POLICY is \"deny_if_referenced\" (the default), \"tombstone_reference\" or \"authorized_cascade\""))
        }
    }
    let view = model::view(w, id)?.ok_or_else(|| super::mutate::not_found(id))?;
    if view.pointer("/retention/legal_hold") == Some(&json!(true)) {
        return Err(V2Error::new(
            Code::LegalHoldConflict,
            format!("{} is under a legal hold", id.id_string()),
        ));
    }
    let refs = referrers(w, id)?;
    if !refs.is_empty() {
        return Err(V2Error::new(
            Code::PurgeDenied,
            format!(
                "{} is still referenced (by {}): purging it would break them",
                id.id_string(),
                refs.join(", ")
            ),
        )
        .with_hint("purge or retract what references it first; TOMBSTONE takes it out of active state without erasing")
        .with_detail("referenced_by", refs));
    }
    let digest = super::request::digest(&view);
    // The content's strings, to scrub from the audit log once this commits.
    let mut strings = needles(&view);
    for n in past_needles(w, id)? {
        if !strings.contains(&n) {
            strings.push(n);
        }
    }
    crate::nexus::scrub::defer(w, strings)?;
    let rec = record(w, id)?;
    match id.kind {
        ElementKind::Concept => {
            if let Some(row) = w.concept(id.n)? {
                if let Some(name) = rec.state.get("name").and_then(Value::as_str) {
                    super::names::change(w, id.n, Some(name), None)?;
                }
                w.delete_concept(id.n, &row)?;
            }
        }
        ElementKind::Proposition => {
            if let Some(row) = w.prop(id.n)? {
                w.delete_prop(id.n, &row)?;
            }
        }
        _ => {}
    }
    let mut stub = Map::new();
    stub.insert("state".into(), json!("purged"));
    stub.insert(
        "governance".into(),
        json!({"purged": true, "purged_at": crate::time::now_text()}),
    );
    stub.insert("content_digest".into(), json!(format!("sha256:{digest}")));
    for k in [
        "type",
        "schema_ref",
        "evidence_class",
        "activity_class",
        "observed_at",
    ] {
        if let Some(v) = view.get(k) {
            stub.insert(k.to_string(), v.clone());
        }
    }
    w.purge_element(SPACE, id, stub)?;
    // The past states go too (§60.3, KIP2-HIST-009): an AS OF read before the purge
    // finds the stub, never the content; the changes index keeps the ids only.
    kip_storage::history::purge(w, SPACE, id.encode())?;
    Ok(())
}

/// ARCHIVE (and the lifecycle states of part 2): the element leaves default recall.
pub fn set_lifecycle(
    w: &mut dyn GraphWrite,
    id: ElementId,
    to: &str,
    expect: Option<&str>,
) -> V2Result<()> {
    let rec = match id.kind {
        ElementKind::Concept => {
            let Some(row) = w.concept(id.n)?.filter(|r| !model::hidden(r)) else {
                return Err(super::mutate::not_found(id));
            };
            ensure_record(w, id, &row)?
        }
        ElementKind::Proposition => match w.element(SPACE, id)? {
            Some(r) => r,
            None => {
                if w.prop(id.n)?.is_none() {
                    return Err(super::mutate::not_found(id));
                }
                w.create_element(SPACE, id, Map::new(), Map::new(), &[])?
            }
        },
        _ => w
            .element(SPACE, id)?
            .ok_or_else(|| super::mutate::not_found(id))?,
    };
    let current = model::state_of(Some(&rec));
    if let Some(e) = expect {
        if e != current {
            return Err(V2Error::new(
                Code::PreconditionFailed,
                format!("{} is {current}, not {e}", id.id_string()),
            )
            .with_detail("actual", current));
        }
    }
    if current == to {
        return Ok(());
    }
    let mut state = rec.state.clone();
    state.insert("state".into(), json!(to));
    w.set_element_state(SPACE, id, state)?;
    Ok(())
}
