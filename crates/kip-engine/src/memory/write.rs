//! The tools that write: create, add, delete and update entities, relations and
//! observations. Each runs inside the caller's write transaction.

use super::*;

/// `create_entities`: new names are created; names that exist (or repeat within the
/// call) are skipped. Returns the created entities.
pub fn create_entities(
    w: &mut dyn GraphWrite,
    entities: &[EntityInput],
    now: &str,
) -> Result<Value, KipError> {
    let mut w = Writer::new(w, Privilege::MemoryTools);
    // Every name is looked up before anything is written: a read of the name index
    // after a write re-sorts the transaction's pending index changes, which made one
    // call with many entities quadratic.
    let mut existing = HashSet::new();
    for e in entities {
        if !existing.contains(&e.name) && find_entity(w.graph(), &e.name)?.is_some() {
            existing.insert(e.name.clone());
        }
    }
    let mut seen = HashSet::new();
    let mut created = Vec::new();
    for e in entities {
        if !seen.insert(e.name.clone()) || existing.contains(&e.name) {
            continue;
        }
        ensure_type(&mut w, &type_name(&e.entity_type), &e.entity_type)?;
        let (_, rec) = write_entity(&mut w, e, now, false)?;
        created.push(entity_json(&rec));
    }
    Ok(json!({ "entities": created }))
}

/// Writes one new entity (its type registered by the caller): the concept
/// `{type_name(entityType), name}` with its observations and the entity metadata
/// (`entity_type`, `created_at`, `version`, and `placeholder: true` for an import's
/// stand-in for an undefined relation end). A concept of the same type and name
/// written through KIP gets the observations.
pub(super) fn write_entity(
    w: &mut Writer,
    e: &EntityInput,
    now: &str,
    placeholder: bool,
) -> Result<(u64, ConceptRecord), KipError> {
    let t = type_name(&e.entity_type);
    let mut meta = Map::new();
    meta.insert("entity_type".into(), json!(e.entity_type));
    meta.insert(
        "created_at".into(),
        json!(e.created_at.clone().unwrap_or_else(|| now.to_string())),
    );
    meta.insert("version".into(), json!(e.version.unwrap_or(1)));
    if placeholder {
        meta.insert("placeholder".into(), json!(true));
    }
    let (id, old) = match w.graph().concept_by_key(&t, &e.name)? {
        Some(id) => (id, w.graph().concept(id)?),
        None => (w.graph().alloc_concept_id()?, None),
    };
    let mut rec = old.clone().unwrap_or(ConceptRecord {
        concept_type: t,
        name: e.name.clone(),
        attributes: Map::new(),
        metadata: Map::new(),
    });
    rec.attributes
        .insert(OBSERVATIONS.into(), json!(e.observations));
    rec.metadata.extend(meta);
    w.put_concept(id, old.as_ref(), &mut rec)?;
    Ok((id, rec))
}

/// `create_relations`: both ends must be entities (else nothing is saved); existing
/// relations are skipped. Returns the created relations.
pub fn create_relations(
    w: &mut dyn GraphWrite,
    relations: &[RelationInput],
    now: &str,
) -> Result<Value, KipError> {
    let mut w = Writer::new(w, Privilege::MemoryTools);
    let mut ends: HashMap<String, u64> = HashMap::new();
    for r in relations {
        for n in [&r.from, &r.to] {
            if !ends.contains_key(n) {
                let (id, _) = find_entity(w.graph(), n)?.ok_or_else(|| not_found_entity(n))?;
                ends.insert(n.clone(), id);
            }
        }
    }
    let mut created = Vec::new();
    for r in relations {
        let p = predicate_name(&r.relation_type);
        ensure_predicate(&mut w, &p, &r.relation_type)?;
        let (s, o) = (
            ElemRef::Concept(ends[&r.from]),
            ElemRef::Concept(ends[&r.to]),
        );
        if w.graph().prop_by_spo(s, &p, o)?.is_some() {
            continue;
        }
        let mut meta = Map::new();
        meta.insert("relation_type".into(), json!(r.relation_type));
        meta.insert(
            "created_at".into(),
            json!(r.created_at.clone().unwrap_or_else(|| now.to_string())),
        );
        meta.insert("version".into(), json!(r.version.unwrap_or(1)));
        let (id, _) = w.upsert_link(s, &p, o, &Map::new(), &meta)?;
        if let Some(rec) = w.graph().prop(id)? {
            created.push(relation_json(&r.from, &r.to, &rec));
        }
    }
    Ok(json!({ "relations": created }))
}

/// `add_observations`: every entity must exist (else nothing is saved); observations
/// already present are dropped. Returns `{entityName, addedObservations}` per item.
pub fn add_observations(
    w: &mut dyn GraphWrite,
    items: &[(String, Vec<String>)],
    now: &str,
) -> Result<Value, KipError> {
    let mut w = Writer::new(w, Privilege::MemoryTools);
    // Names resolved before anything is written (see create_entities); the records are
    // read again by id, so a name given twice sees its first update.
    let mut ids: HashMap<&str, u64> = HashMap::new();
    for (name, _) in items {
        if !ids.contains_key(name.as_str()) {
            let (id, _) = find_entity(w.graph(), name)?.ok_or_else(|| not_found_entity(name))?;
            ids.insert(name.as_str(), id);
        }
    }
    let mut results = Vec::new();
    for (name, contents) in items {
        let id = ids
            .get(name.as_str())
            .copied()
            .ok_or_else(|| not_found_entity(name))?;
        let old = w
            .graph()
            .concept(id)?
            .ok_or_else(|| not_found_entity(name))?;
        let mut obs = observations(&old);
        let added: Vec<String> = contents
            .iter()
            .filter(|c| !obs.contains(c))
            .cloned()
            .collect();
        obs.extend(added.iter().cloned());
        if !added.is_empty() {
            let mut rec = old.clone();
            rec.attributes.insert(OBSERVATIONS.into(), json!(obs));
            rec.metadata
                .insert("version".into(), json!(version_of(&old.metadata) + 1));
            rec.metadata.insert("created_at".into(), json!(now));
            w.put_concept(id, Some(&old), &mut rec)?;
        }
        results.push(json!({"entityName": name, "addedObservations": added}));
    }
    Ok(json!({ "results": results }))
}

/// `delete_entities`: deletes the entities and every relation touching them; reports
/// the names that did not exist.
pub fn delete_entities(w: &mut dyn GraphWrite, names: &[String]) -> Result<Value, KipError> {
    let mut w = Writer::new(w, Privilege::MemoryTools);
    let mut not_found = Vec::new();
    for name in names {
        match find_entity(w.graph(), name)? {
            Some((id, _)) => {
                w.delete_concepts(&[id])?;
            }
            None => not_found.push(name.clone()),
        }
    }
    Ok(json!({"success": true, "message": "Entities deleted successfully", "notFound": not_found}))
}

/// `delete_observations`: removes the listed observations; reports unknown entities.
pub fn delete_observations(
    w: &mut dyn GraphWrite,
    items: &[(String, Vec<String>)],
    now: &str,
) -> Result<Value, KipError> {
    let mut w = Writer::new(w, Privilege::MemoryTools);
    let mut not_found = Vec::new();
    for (name, remove) in items {
        let Some((id, old)) = find_entity(w.graph(), name)? else {
            not_found.push(name.clone());
            continue;
        };
        let obs = observations(&old);
        let kept: Vec<String> = obs
            .iter()
            .filter(|o| !remove.contains(o))
            .cloned()
            .collect();
        if kept.len() != obs.len() {
            let mut rec = old.clone();
            rec.attributes.insert(OBSERVATIONS.into(), json!(kept));
            rec.metadata
                .insert("version".into(), json!(version_of(&old.metadata) + 1));
            rec.metadata.insert("created_at".into(), json!(now));
            w.put_concept(id, Some(&old), &mut rec)?;
        }
    }
    Ok(
        json!({"success": true, "message": "Observations deleted successfully", "notFound": not_found}),
    )
}

fn find_relation(g: &dyn GraphRead, r: &RelationInput) -> Result<Option<u64>, KipError> {
    let (Some((s, _)), Some((o, _))) = (find_entity(g, &r.from)?, find_entity(g, &r.to)?) else {
        return Ok(None);
    };
    Ok(g.prop_by_spo(
        ElemRef::Concept(s),
        &predicate_name(&r.relation_type),
        ElemRef::Concept(o),
    )?)
}

/// `delete_relations`: deletes the listed relations; reports the ones that did not exist.
pub fn delete_relations(
    w: &mut dyn GraphWrite,
    relations: &[RelationInput],
) -> Result<Value, KipError> {
    let mut w = Writer::new(w, Privilege::MemoryTools);
    let mut not_found = Vec::new();
    for r in relations {
        match find_relation(w.graph(), r)? {
            Some(id) => {
                w.delete_links(vec![id])?;
            }
            None => {
                not_found.push(json!({"from": r.from, "to": r.to, "relationType": r.relation_type}))
            }
        }
    }
    Ok(json!({"success": true, "message": "Relations deleted successfully", "notFound": not_found}))
}

/// `update_entities`: each entity must exist (else nothing is saved); the given fields
/// replace the stored ones, `version` increases and `createdAt` is refreshed.
pub fn update_entities(
    w: &mut dyn GraphWrite,
    items: &[EntityUpdate],
    now: &str,
) -> Result<Value, KipError> {
    let mut w = Writer::new(w, Privilege::MemoryTools);
    let mut out = Vec::new();
    for u in items {
        let (id, old) =
            find_entity(w.graph(), &u.name)?.ok_or_else(|| not_found_entity(&u.name))?;
        let mut rec = old.clone();
        if let Some(et) = &u.entity_type {
            let t = type_name(et);
            if t != rec.concept_type {
                ensure_type(&mut w, &t, et)?;
                rec.concept_type = t;
            }
            rec.metadata.insert("entity_type".into(), json!(et));
        }
        if let Some(obs) = &u.observations {
            rec.attributes.insert(OBSERVATIONS.into(), json!(obs));
        }
        rec.metadata
            .insert("version".into(), json!(version_of(&old.metadata) + 1));
        rec.metadata.insert("created_at".into(), json!(now));
        // The protected core, the type and the `{type, name}` uniqueness are checked
        // by the primitive, as for an UPSERT.
        w.put_concept(id, Some(&old), &mut rec)?;
        out.push(entity_json(&rec));
    }
    Ok(json!({ "entities": out }))
}

/// `update_relations`: each relation must exist (else nothing is saved); `version`
/// increases and `createdAt` is refreshed.
pub fn update_relations(
    w: &mut dyn GraphWrite,
    relations: &[RelationInput],
    now: &str,
) -> Result<Value, KipError> {
    let mut w = Writer::new(w, Privilege::MemoryTools);
    let mut out = Vec::new();
    for r in relations {
        let id = find_relation(w.graph(), r)?.ok_or_else(|| {
            KipError::new(
                ErrorCode::NotFound,
                format!(
                    "Relation from {} to {} of type {} not found",
                    r.from, r.to, r.relation_type
                ),
            )
            .with_hint("create it first with create_relations")
        })?;
        let old = w
            .graph()
            .prop(id)?
            .ok_or_else(|| KipError::internal("relation vanished"))?;
        let mut rec = old.clone();
        rec.metadata
            .insert("relation_type".into(), json!(r.relation_type));
        rec.metadata
            .insert("version".into(), json!(version_of(&old.metadata) + 1));
        rec.metadata.insert("created_at".into(), json!(now));
        w.put_link(id, &old, &mut rec)?;
        out.push(relation_json(&r.from, &r.to, &rec));
    }
    Ok(json!({ "relations": out }))
}
