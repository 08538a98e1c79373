//! The KIP 2.0 core model over the one memory (Specification §6-17, DECISIONS.md item
//! 40): how a Concept, a Proposition and the record kinds are read from the store, as
//! the element objects queries see (`?c.name`, `?a.lifecycle.status`,
//! `?c._system.version`).
//!
//! Where each part lives (docs/semantics.md "KIP 2.0 on the one memory"):
//! - a **Concept** is a graph row (type, identity, attributes, 1.x metadata) plus,
//!   once KIP 2.0 has written it, its element record `C:n`: payload `schema_ref` and
//!   `key`, state `name` (when it differs from the row's), `facets`, `state`. The row's
//!   name is the concept's identity within its type (§7.3): its key, or for a keyless
//!   concept its name (`name~C:n` when another concept of the type holds that name);
//!   a 1.x concept's key and name are its row name;
//! - a **Proposition** is a graph link plus its record `P:n` (payload `predicate_ref`,
//!   state `state`); a literal object is kept as a concept of the internal type
//!   [`LITERAL_TYPE`] named by the literal's JSON, so the tuple stays unique (§12.4);
//! - **Assertions, Evidence, Activities** are element records only.

use super::error::V2Result;
use super::schema_env::{active, SymbolKind};
use crate::store::{
    ConceptRecord, ElemRef, ElementId, ElementKind, ElementRecord, GraphRead, PropRecord, SpaceId,
};
use serde_json::{json, Map, Value};

/// The space every request uses until memory spaces land (issue 49).
pub const SPACE: SpaceId = SpaceId::DEFAULT;

/// The internal concept type that carries a Proposition's literal object.
pub const LITERAL_TYPE: &str = "$Literal";

/// Lifecycle state of an element (`_system.state`) when none is recorded.
pub const ACTIVE: &str = "active";

/// The id of a graph reference.
pub fn elem_id(r: ElemRef) -> ElementId {
    ElementId::from(r)
}

/// The graph reference of a concept or proposition id.
pub fn graph_ref(id: ElementId) -> Option<ElemRef> {
    match id.kind {
        ElementKind::Concept => Some(ElemRef::Concept(id.n)),
        ElementKind::Proposition => Some(ElemRef::Prop(id.n)),
        _ => None,
    }
}

/// The key a concept is known by: its record's `key` (which may be null: keyless), or
/// for a concept 2.0 never wrote, its row name.
pub fn concept_key(row: &ConceptRecord, rec: Option<&ElementRecord>) -> Value {
    match rec {
        Some(r) => r.payload.get("key").cloned().unwrap_or(Value::Null),
        None => json!(row.name),
    }
}

/// A concept's display name: its record's `name`, else its row name.
pub fn concept_name(row: &ConceptRecord, rec: Option<&ElementRecord>) -> String {
    rec.and_then(|r| r.state.get("name"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| row.name.clone())
}

/// The lifecycle state recorded in a state map.
pub fn state_of(rec: Option<&ElementRecord>) -> String {
    rec.and_then(|r| r.state.get("state"))
        .and_then(Value::as_str)
        .unwrap_or(ACTIVE)
        .to_string()
}

fn system(version: u64, state: &str) -> Value {
    json!({"version": version, "state": state})
}

/// Whether a graph concept is outside the 2.0 element space: the 1.x schema's
/// control plane (the meta-types' definitions, the protected concepts: core domains,
/// `$self`, `$system`; DECISIONS.md items 7, 33) and the literal holders. KIP 2.0 keeps
/// its schema in packages (§20) and its control plane apart from memory content
/// (§28.1), so its patterns, reads and writes do not see them.
pub fn hidden(row: &ConceptRecord) -> bool {
    hidden_head(&row.concept_type, &row.name)
}

/// [`hidden`] from a concept's type and name alone (`GraphRead::concept_head`).
pub fn hidden_head(concept_type: &str, name: &str) -> bool {
    concept_type == LITERAL_TYPE
        || concept_type == "$ConceptType"
        || concept_type == kip_storage::PROPOSITION_TYPE
        || crate::schema::is_protected_name(concept_type, name)
}

/// The element object of `id`, as queries see it; `None` when there is none.
pub fn view(g: &dyn GraphRead, id: ElementId) -> V2Result<Option<Value>> {
    match id.kind {
        ElementKind::Concept => {
            let Some(row) = g.concept(id.n)? else {
                return stub(g, id);
            };
            if hidden(&row) {
                return Ok(None);
            }
            let rec = g.element(SPACE, id)?;
            Ok(Some(concept_view(id, &row, rec.as_ref())))
        }
        ElementKind::Proposition => {
            let Some(row) = g.prop(id.n)? else {
                return stub(g, id);
            };
            // A link of the 1.x control plane (a meta-type in its domain) is not one.
            for end in [row.subject, row.object] {
                if let ElemRef::Concept(n) = end {
                    if g.concept(n)?
                        .is_some_and(|c| hidden(&c) && c.concept_type != LITERAL_TYPE)
                    {
                        return Ok(None);
                    }
                }
            }
            let rec = g.element(SPACE, id)?;
            Ok(Some(prop_view(g, id, &row, rec.as_ref())?))
        }
        ElementKind::Assertion => match g.element(SPACE, id)? {
            Some(r) => Ok(Some(record_view(id, &r))),
            None => founding(g, id.n),
        },
        _ => Ok(g.element(SPACE, id)?.map(|r| record_view(id, &r))),
    }
}

/// What a purge left of a concept or proposition whose graph row is gone: its stub
/// (§60.3), or nothing.
fn stub(g: &dyn GraphRead, id: ElementId) -> V2Result<Option<Value>> {
    Ok(g.element(SPACE, id)?
        .filter(|r| r.state.get("state").and_then(Value::as_str) == Some("purged"))
        .map(|r| record_view(id, &r)))
}

/// Whether proposition `n` was written through KIP 1.x: its record, if any, has no
/// `predicate_ref` (2.0's ENSURE always writes one).
pub fn written_by_1x(g: &dyn GraphRead, n: u64) -> V2Result<bool> {
    let id = ElementId::new(ElementKind::Proposition, n);
    Ok(g.element(SPACE, id)?
        .is_none_or(|r| !r.payload.contains_key("predicate_ref")))
}

/// The founding Assertion `A:n` of a proposition `P:n` written through KIP 1.x
/// (DECISIONS.md item 40, Migration §11): a 1.x fact is a Proposition plus a supporting
/// Assertion by the writing actor. It is read from the link until a 2.0 write (RETRACT,
/// SUPERSEDE) records it. The actor is the concept the link's `author` names (`$self`
/// when none: the agent wrote it); `confidence` is the 1.x `confidence` when it is a
/// number from 0 to 1 (Migration §13); the rest of the 1.x metadata is kept as the
/// `kip1` facet (§6.4).
pub fn founding(g: &dyn GraphRead, n: u64) -> V2Result<Option<Value>> {
    let pid = ElementId::new(ElementKind::Proposition, n);
    let Some(row) = g.prop(n)? else {
        return Ok(None);
    };
    if !written_by_1x(g, n)? || view(g, pid)?.is_none() {
        return Ok(None);
    }
    let author = row
        .metadata
        .get("author")
        .and_then(Value::as_str)
        .unwrap_or("$self");
    let actor = g.concept_by_key("Person", author)?;
    let confidence = row
        .metadata
        .get("confidence")
        .and_then(Value::as_f64)
        .filter(|c| (0.0..=1.0).contains(c));
    let at = row
        .metadata
        .get("created_at")
        .or_else(|| row.metadata.get("_updated_at"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut o = Map::new();
    o.insert(
        "id".into(),
        json!(ElementId::new(ElementKind::Assertion, n).id_string()),
    );
    o.insert("kind".into(), json!("assertion"));
    o.insert("proposition".into(), json!(pid.id_string()));
    o.insert(
        "asserted_by".into(),
        actor.map_or(Value::Null, |c| {
            json!(ElementId::new(ElementKind::Concept, c).id_string())
        }),
    );
    o.insert("stance".into(), json!("support"));
    o.insert("mode".into(), json!("stated"));
    o.insert(
        "confidence".into(),
        confidence.map_or(Value::Null, |c| json!(c)),
    );
    o.insert("asserted_at".into(), at);
    o.insert("lifecycle".into(), json!({"status": "active"}));
    if !row.metadata.is_empty() {
        o.insert("facets".into(), json!({"kip1": row.metadata}));
    }
    o.insert("_system".into(), system(1, ACTIVE));
    Ok(Some(Value::Object(o)))
}

/// A Concept's element object (§10.2 and the common envelope).
pub fn concept_view(id: ElementId, row: &ConceptRecord, rec: Option<&ElementRecord>) -> Value {
    let schema_ref = rec
        .and_then(|r| r.payload.get("schema_ref"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| active().exact_of(SymbolKind::ConceptType, &row.concept_type));
    let facets = rec
        .and_then(|r| r.state.get("facets"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let mut o = Map::new();
    o.insert("id".into(), json!(id.id_string()));
    o.insert("kind".into(), json!("concept"));
    o.insert("type".into(), json!(row.concept_type));
    o.insert("schema_ref".into(), json!(schema_ref));
    o.insert("key".into(), concept_key(row, rec));
    o.insert("name".into(), json!(concept_name(row, rec)));
    o.insert("attributes".into(), Value::Object(row.attributes.clone()));
    o.insert("facets".into(), facets);
    for part in ["merged_into", "structural"] {
        if let Some(m) = rec.and_then(|r| r.state.get(part)) {
            o.insert(part.into(), m.clone());
        }
    }
    insert_envelope(&mut o, rec);
    Value::Object(o)
}

fn insert_envelope(o: &mut Map<String, Value>, rec: Option<&ElementRecord>) {
    for part in ["governance", "retention", "client_key"] {
        if let Some(v) = rec.and_then(|r| r.state.get(part).or_else(|| r.payload.get(part))) {
            o.insert(part.into(), v.clone());
        }
    }
    let version = rec.map_or(1, |r| r.version);
    let mut sys = system(version, &state_of(rec));
    if let (Some(stamp), Value::Object(s)) = (
        rec.and_then(|r| r.payload.get(SYSTEM))
            .and_then(Value::as_object),
        &mut sys,
    ) {
        for (k, v) in stamp {
            s.insert(k.clone(), v.clone());
        }
    }
    o.insert("_system".into(), sys);
}

/// The payload member holding what the engine records of an element's creation
/// (`_system.created_at`, `_system.origin`: §6.2-6.3), written once with the payload.
pub const SYSTEM: &str = "_system";

/// Stamps a new element's payload with its creation time and origin (§6.2, §13.3,
/// KIP2-KML-005): the execution origin (the interface caller; principals arrive with
/// issue 49), never the semantic actor (`asserted_by`), which the caller writes.
pub fn stamp(payload: &mut Map<String, Value>) {
    payload.insert(
        SYSTEM.into(),
        json!({
            "created_at": crate::time::format(crate::time::now()),
            "origin": {"principal_id": "interface_caller", "channel": "kip", "import_id": null},
        }),
    );
}

/// The value a proposition end stands for: an element id, or a literal.
pub fn end_value(g: &dyn GraphRead, r: ElemRef) -> V2Result<Value> {
    if let ElemRef::Concept(n) = r {
        if let Some(c) = g.concept(n)? {
            if c.concept_type == LITERAL_TYPE {
                return Ok(serde_json::from_str(&c.name).unwrap_or(Value::String(c.name)));
            }
        }
    }
    Ok(json!(elem_id(r).id_string()))
}

/// A Proposition's element object (§12.2 and the common envelope).
pub fn prop_view(
    g: &dyn GraphRead,
    id: ElementId,
    row: &PropRecord,
    rec: Option<&ElementRecord>,
) -> V2Result<Value> {
    let predicate_ref = rec
        .and_then(|r| r.payload.get("predicate_ref"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| active().exact_of(SymbolKind::Predicate, &row.predicate));
    let mut o = Map::new();
    o.insert("id".into(), json!(id.id_string()));
    o.insert("kind".into(), json!("proposition"));
    o.insert("subject".into(), end_value(g, row.subject)?);
    o.insert("predicate".into(), json!(row.predicate));
    o.insert("predicate_ref".into(), json!(predicate_ref));
    o.insert("object".into(), end_value(g, row.object)?);
    insert_envelope(&mut o, rec);
    Ok(Value::Object(o))
}

/// The kind word of an element (`"assertion"`).
pub fn kind_word(kind: ElementKind) -> &'static str {
    match kind {
        ElementKind::Concept => "concept",
        ElementKind::Proposition => "proposition",
        ElementKind::Assertion => "assertion",
        ElementKind::Evidence => "evidence",
        ElementKind::Activity => "activity",
    }
}

/// An Assertion's, Evidence's or Activity's element object: its payload, its state
/// (lifecycle, status) and the envelope.
pub fn record_view(id: ElementId, rec: &ElementRecord) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(id.id_string()));
    o.insert("kind".into(), json!(kind_word(id.kind)));
    for (k, v) in rec.payload.iter().chain(rec.state.iter()) {
        if k != "state" && k != SYSTEM {
            o.insert(k.clone(), v.clone());
        }
    }
    insert_envelope(&mut o, Some(rec));
    Value::Object(o)
}

/// The fields of each record kind whose value is a reference to another element.
pub fn is_reference_field(kind: ElementKind, field: &str) -> bool {
    match kind {
        ElementKind::Assertion => matches!(field, "proposition" | "asserted_by"),
        ElementKind::Proposition => matches!(field, "subject" | "object"),
        ElementKind::Evidence => matches!(field, "source" | "generated_by"),
        ElementKind::Activity => false,
        ElementKind::Concept => false,
    }
}
