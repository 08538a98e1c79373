//! Copies: the entities and relations the official server holds more than once.
//!
//! The official server filters a `create_entities` / `create_relations` call against
//! the graph as it was *before* the call, so a name (or a relation) repeated within
//! one call is stored as often as it is sent, and every reading tool lists each copy
//! where it was added. It also tells relations apart by their exact `relationType`
//! string, where KIP's link `(from, predicate, to)` folds `"works at"` and
//! `"works_at"` into one predicate. KIP keeps one concept per entity name and one link
//! per `(from, predicate, to)`, so the further entries ride on that concept or link:
//! its metadata key [`COPIES`] holds one object per copy.
//!
//! - An entity copy: `{entity_type, observations, created_at, version, position}`.
//! - A relation entry beyond the link's own: `{relation_type, created_at, version,
//!   position}`; when the link's own entry is deleted while others remain, the first
//!   of them takes its place in the link's metadata, keeping its `position` there.
//!
//! `position` orders the lists: the tools list entities by concept id and relations
//! by link id (creation order), and a copy is given a fresh id of that kind when it is
//! made (an id no element will have), so it is listed exactly where the official
//! server lists it.
//!
//! The tools that change an entity (`add_observations`, `delete_observations`,
//! `update_entities`) change the concept's own entry, the first one, as the official
//! server changes the first entity of that name; `delete_entities` deletes the concept
//! and so every copy; `delete_relations` deletes the entries of that exact
//! `relationType`, and the link with the last of them.

use super::*;

/// The metadata key holding the further copies of an entity or relation.
pub const COPIES: &str = "copies";
/// The metadata key of a link's own listing position, once its first entry was
/// deleted and a copy took its place.
const POSITION: &str = "position";

/// An entity or relation as listed: its position in creation order, its JSON.
pub(super) type Listed = (u64, Value);

fn copies_of(meta: &Map<String, Value>) -> impl Iterator<Item = &Map<String, Value>> {
    meta.get(COPIES)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

fn position(m: &Map<String, Value>) -> Option<u64> {
    m.get(POSITION).and_then(Value::as_u64)
}

/// Copies `createdAt` and `version` of an entry into its listed JSON.
fn stamps(m: &Map<String, Value>, out: &mut Map<String, Value>) {
    if let Some(v) = m.get("created_at").filter(|v| v.is_string()) {
        out.insert("createdAt".into(), v.clone());
    }
    if let Some(v) = m.get("version").filter(|v| v.is_u64()) {
        out.insert("version".into(), v.clone());
    }
}

/// The entities concept `id` lists as: its own entry, then its copies.
pub(super) fn entity_entries(id: u64, c: &ConceptRecord) -> Vec<Listed> {
    let mut out = vec![(id, entity_json(c))];
    for copy in copies_of(&c.metadata) {
        let mut m = Map::new();
        m.insert("name".into(), json!(c.name));
        m.insert(
            "entityType".into(),
            copy.get("entity_type").cloned().unwrap_or(json!("")),
        );
        m.insert(
            "observations".into(),
            copy.get(OBSERVATIONS).cloned().unwrap_or(json!([])),
        );
        stamps(copy, &mut m);
        out.push((position(copy).unwrap_or(id), Value::Object(m)));
    }
    out
}

/// The relationType of a link's own entry: the `relation_type` the tools keep, else
/// the predicate.
fn own_relation_type(p: &PropRecord) -> &str {
    p.metadata
        .get("relation_type")
        .and_then(Value::as_str)
        .unwrap_or(&p.predicate)
}

/// The relations link `id` lists as, with their relationTypes: its own entry, then
/// the further entries.
pub(super) fn relation_entries(id: u64, from: &str, to: &str, p: &PropRecord) -> Vec<Listed> {
    let mut out = vec![(
        position(&p.metadata).unwrap_or(id),
        relation_json(from, to, p),
    )];
    for copy in copies_of(&p.metadata) {
        let mut m = Map::new();
        m.insert("from".into(), json!(from));
        m.insert("to".into(), json!(to));
        m.insert(
            "relationType".into(),
            copy.get("relation_type").cloned().unwrap_or(json!("")),
        );
        stamps(copy, &mut m);
        out.push((position(copy).unwrap_or(id), Value::Object(m)));
    }
    out
}

/// Whether link `p` holds an entry of exactly this relationType.
pub(super) fn has_relation_type(p: &PropRecord, relation_type: &str) -> bool {
    own_relation_type(p) == relation_type
        || copies_of(&p.metadata)
            .any(|c| c.get("relation_type").and_then(Value::as_str) == Some(relation_type))
}

fn push_copy(meta: &mut Map<String, Value>, copy: Map<String, Value>) {
    match meta.get_mut(COPIES) {
        Some(Value::Array(a)) => a.push(Value::Object(copy)),
        _ => {
            meta.insert(COPIES.into(), json!([copy]));
        }
    }
}

/// Adds a copy of entity `e` to concept `id` (the entity of that name created earlier
/// in the same call or import). Returns the copy as listed.
pub(super) fn add_entity_copy(
    w: &mut Writer,
    id: u64,
    e: &EntityInput,
    now: &str,
) -> Result<Value, KipError> {
    let old = w
        .graph()
        .concept(id)?
        .ok_or_else(|| KipError::internal("the entity to copy vanished"))?;
    let at = w.graph().alloc_concept_id()?;
    let mut copy = Map::new();
    copy.insert("entity_type".into(), json!(e.entity_type));
    copy.insert(OBSERVATIONS.into(), json!(e.observations));
    copy.insert(
        "created_at".into(),
        json!(e.created_at.clone().unwrap_or_else(|| now.to_string())),
    );
    copy.insert("version".into(), json!(e.version.unwrap_or(1)));
    copy.insert(POSITION.into(), json!(at));
    let mut rec = old.clone();
    push_copy(&mut rec.metadata, copy);
    w.put_concept(id, Some(&old), &mut rec)?;
    let listed = entity_entries(id, &rec);
    Ok(listed.last().map(|(_, v)| v.clone()).unwrap_or(Value::Null))
}

/// Adds an entry for relation `r` to link `id` (a copy sent twice in one call, or a
/// relationType that folds into the link's predicate). Returns it as listed.
pub(super) fn add_relation_copy(
    w: &mut Writer,
    id: u64,
    r: &RelationInput,
    now: &str,
) -> Result<Value, KipError> {
    let old = w
        .graph()
        .prop(id)?
        .ok_or_else(|| KipError::internal("the relation to copy vanished"))?;
    let at = w.graph().alloc_prop_id()?;
    let mut copy = Map::new();
    copy.insert("relation_type".into(), json!(r.relation_type));
    copy.insert(
        "created_at".into(),
        json!(r.created_at.clone().unwrap_or_else(|| now.to_string())),
    );
    copy.insert("version".into(), json!(r.version.unwrap_or(1)));
    copy.insert(POSITION.into(), json!(at));
    let mut rec = old.clone();
    push_copy(&mut rec.metadata, copy);
    w.put_link(id, &old, &mut rec)?;
    let listed = relation_entries(id, &r.from, &r.to, &rec);
    Ok(listed.last().map(|(_, v)| v.clone()).unwrap_or(Value::Null))
}

/// What is left of link `p` once its entries of `relation_type` are deleted: `None`
/// when none is left (delete the link), else its new metadata (the first remaining
/// copy taking the place of the link's own entry when that one went).
pub(super) fn without_relation_type(p: &PropRecord, relation_type: &str) -> Option<PropRecord> {
    let mut rest: Vec<Map<String, Value>> = copies_of(&p.metadata)
        .filter(|c| c.get("relation_type").and_then(Value::as_str) != Some(relation_type))
        .cloned()
        .collect();
    let mut rec = p.clone();
    if own_relation_type(p) == relation_type {
        if rest.is_empty() {
            return None;
        }
        let first = rest.remove(0);
        for k in ["relation_type", "created_at", "version", POSITION] {
            match first.get(k) {
                Some(v) => rec.metadata.insert(k.into(), v.clone()),
                None => rec.metadata.remove(k),
            };
        }
        if let Some(at) = first.get("created_at") {
            rec.metadata.insert("observed_at".into(), at.clone());
        }
    }
    if rest.is_empty() {
        rec.metadata.remove(COPIES);
    } else {
        rec.metadata.insert(
            COPIES.into(),
            Value::Array(rest.into_iter().map(Value::Object).collect()),
        );
    }
    Some(rec)
}

/// Refreshes the entry of `relation_type` on link `p` (`update_relations`): `version`
/// one more, `createdAt` (and, for the link's own entry, `observed_at`: its last use)
/// now. `None` when the link has no such entry.
pub(super) fn touch_relation_type(
    p: &PropRecord,
    relation_type: &str,
    now: &str,
) -> Option<PropRecord> {
    let mut rec = p.clone();
    if own_relation_type(p) == relation_type {
        let v = version_of(&p.metadata) + 1;
        rec.metadata
            .insert("relation_type".into(), json!(relation_type));
        rec.metadata.insert("version".into(), json!(v));
        rec.metadata.insert("created_at".into(), json!(now));
        rec.metadata.insert("observed_at".into(), json!(now));
        return Some(rec);
    }
    let Some(Value::Array(copies)) = rec.metadata.get_mut(COPIES) else {
        return None;
    };
    let copy = copies
        .iter_mut()
        .filter_map(Value::as_object_mut)
        .find(|c| c.get("relation_type").and_then(Value::as_str) == Some(relation_type))?;
    let v = version_of(copy) + 1;
    copy.insert("version".into(), json!(v));
    copy.insert("created_at".into(), json!(now));
    Some(rec)
}

/// The listed JSON of link `id`'s first entry of `relation_type`.
pub(super) fn listed_relation(
    id: u64,
    from: &str,
    to: &str,
    p: &PropRecord,
    relation_type: &str,
) -> Option<Value> {
    relation_entries(id, from, to, p)
        .into_iter()
        .map(|(_, v)| v)
        .find(|v| v["relationType"].as_str() == Some(relation_type))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(meta: Value) -> PropRecord {
        PropRecord {
            subject: ElemRef::Concept(1),
            predicate: "works_at".into(),
            object: ElemRef::Concept(2),
            attributes: Map::new(),
            metadata: meta.as_object().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn a_relation_lists_its_own_entry_then_its_copies_at_their_positions() {
        let p = link(json!({"relation_type": "works at", "copies": [
            {"relation_type": "works at", "position": 9},
            {"relation_type": "works_at", "position": 12}
        ]}));
        let listed = relation_entries(5, "A", "B", &p);
        let got: Vec<(u64, &str)> = listed
            .iter()
            .map(|(at, v)| (*at, v["relationType"].as_str().unwrap_or("")))
            .collect();
        assert_eq!(got, [(5, "works at"), (9, "works at"), (12, "works_at")]);
        assert!(has_relation_type(&p, "works_at"));
        assert!(!has_relation_type(&p, "worksAt"));
    }

    #[test]
    fn deleting_the_own_entry_promotes_the_first_copy_in_its_place() {
        let p = link(
            json!({"relation_type": "works at", "created_at": "t0", "copies": [
                {"relation_type": "works_at", "created_at": "t1", "version": 1, "position": 12}
            ]}),
        );
        let rest = without_relation_type(&p, "works at").expect("a copy is left");
        assert_eq!(rest.metadata["relation_type"], "works_at");
        assert_eq!(rest.metadata["created_at"], "t1");
        assert_eq!(rest.metadata["observed_at"], "t1");
        assert!(rest.metadata.get(COPIES).is_none());
        assert_eq!(relation_entries(5, "A", "B", &rest)[0].0, 12);
        assert!(without_relation_type(&rest, "works_at").is_none());
    }

    #[test]
    fn deleting_a_relation_type_removes_every_copy_of_it() {
        let p = link(json!({"relation_type": "knows", "copies": [
            {"relation_type": "works at", "position": 9},
            {"relation_type": "works at", "position": 11}
        ]}));
        let rest = without_relation_type(&p, "works at").expect("own entry left");
        assert_eq!(rest.metadata["relation_type"], "knows");
        assert!(rest.metadata.get(COPIES).is_none());
    }
}
