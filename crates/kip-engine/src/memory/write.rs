//! The tools that write: create, add, delete and update entities, relations and
//! observations. Each runs inside the caller's write transaction.

use super::*;

/// `create_entities`: new names are created; names the graph had before the call are
/// skipped (every time they are sent). A name sent again within the call is stored
/// again, as the official server stores it: a copy on the entity (see
/// [`copies`](super::copies)). A name that only a placeholder has (a relation end
/// named before its entity) becomes that entity, its relations kept. Returns the
/// created entities.
pub fn create_entities(
    w: &mut dyn GraphWrite,
    entities: &[EntityInput],
    now: &str,
) -> Result<Value, KipError> {
    let mut w = Writer::new(w, Privilege::MemoryTools);
    // Every name is looked up before anything is written: a read of the name index
    // after a write re-sorts the transaction's pending index changes, which made one
    // call with many entities quadratic.
    let mut known: HashMap<&str, Option<(u64, ConceptRecord)>> = HashMap::new();
    for e in entities {
        if !known.contains_key(e.name.as_str()) {
            known.insert(&e.name, find_end(w.graph(), &e.name)?);
        }
    }
    let mut made: HashMap<&str, u64> = HashMap::new();
    let mut created = Vec::new();
    for e in entities {
        if let Some(&id) = made.get(e.name.as_str()) {
            created.push(add_entity_copy(&mut w, id, e, now)?);
            continue;
        }
        if matches!(known.get(e.name.as_str()), Some(Some((_, c))) if !is_placeholder(c)) {
            continue;
        }
        let placeholder = known.remove(e.name.as_str()).flatten();
        ensure_type(&mut w, &type_name(&e.entity_type), &e.entity_type, None)?;
        let (id, rec) = write_entity(&mut w, e, now, false, placeholder)?;
        made.insert(&e.name, id);
        created.push(entity_json(&rec));
    }
    Ok(json!({ "entities": created }))
}

/// Writes one entity (its type registered by the caller): the concept
/// `{type_name(entityType), name}` with its observations and the entity metadata
/// (`entity_type`, `created_at`, `version`, and `placeholder: true` for a stand-in for
/// a relation end that names no entity). `replacing`: the placeholder this entity
/// takes the place of (see [`promote`]). A concept of the same type and name written
/// through KIP gets the observations.
pub(super) fn write_entity(
    w: &mut Writer,
    e: &EntityInput,
    now: &str,
    placeholder: bool,
    replacing: Option<(u64, ConceptRecord)>,
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
        meta.insert(PLACEHOLDER.into(), json!(true));
    }
    if let Some((pid, placeholder)) = replacing {
        let mut attributes = Map::new();
        attributes.insert(OBSERVATIONS.into(), json!(e.observations));
        let mut rec = ConceptRecord {
            concept_type: t,
            name: e.name.clone(),
            attributes,
            metadata: meta,
        };
        let id = promote(w, pid, placeholder, &mut rec)?;
        return Ok((id, rec));
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

/// An entity takes the place of the placeholder `pid`: it is created as a new concept
/// (so the tools list it where the official server does, after the entities created
/// before it), the placeholder's links are moved to it keeping their ids (so the
/// relations keep their order), and the placeholder is deleted.
fn promote(
    w: &mut Writer,
    pid: u64,
    placeholder: ConceptRecord,
    rec: &mut ConceptRecord,
) -> Result<u64, KipError> {
    if placeholder.concept_type == rec.concept_type && placeholder.name == rec.name {
        // The same `{type, name}`: the placeholder gives up its key first (a `$` name,
        // which no entity has, for the rest of this transaction).
        let mut moved = placeholder.clone();
        moved.name = format!("$placeholder C:{pid}");
        w.put_concept(pid, Some(&placeholder), &mut moved)?;
    }
    let id = w.create_concept(rec)?;
    let at = ElemRef::Concept(pid);
    let mut links = Vec::new();
    w.graph().scan_out(at, None, &mut |_, _, l| {
        links.push(l);
        Ok(true)
    })?;
    w.graph().scan_in(at, None, &mut |_, _, l| {
        links.push(l);
        Ok(true)
    })?;
    links.sort_unstable();
    links.dedup();
    for l in links {
        let Some(p) = w.graph().prop(l)? else {
            continue;
        };
        let mut moved = p.clone();
        for end in [&mut moved.subject, &mut moved.object] {
            if *end == at {
                *end = ElemRef::Concept(id);
            }
        }
        w.repoint_link(l, &p, &mut moved)?;
    }
    w.delete_concepts(&[pid])?;
    Ok(id)
}

/// Creates the placeholder for a relation end that names no entity: entityType
/// [`PLACEHOLDER_TYPE`], no observations, metadata `placeholder: true` (its type
/// registered and filed in `domain`, else `Unsorted`).
pub(super) fn create_placeholder(
    w: &mut Writer,
    name: &str,
    created_at: Option<String>,
    now: &str,
    domain: Option<u64>,
) -> Result<u64, KipError> {
    let e = EntityInput {
        name: name.to_string(),
        entity_type: PLACEHOLDER_TYPE.into(),
        observations: Vec::new(),
        created_at,
        version: None,
    };
    ensure_type(w, &type_name(&e.entity_type), &e.entity_type, domain)?;
    Ok(write_entity(w, &e, now, true, None)?.0)
}

/// The metadata of a relation the tools or the import write: the original
/// `relation_type`, `created_at` (the file's `createdAt`, else `now`), `version`, and
/// `observed_at` equal to `created_at`: the relation's last use, which the sleep
/// cycle's decay counts from (a link observed within the reinforcement window does
/// not decay), so a relation moved over from a file decays from when it was last
/// written there, not from the import.
pub(super) fn relation_meta(r: &RelationInput, now: &str) -> Map<String, Value> {
    let at = r.created_at.clone().unwrap_or_else(|| now.to_string());
    let mut meta = Map::new();
    meta.insert("relation_type".into(), json!(r.relation_type));
    meta.insert("created_at".into(), json!(at));
    meta.insert("observed_at".into(), json!(at));
    meta.insert("version".into(), json!(r.version.unwrap_or(1)));
    meta
}

/// `create_relations`: relations the graph had before the call are skipped (every time
/// they are sent); an end that names no entity gets a placeholder (see
/// [`is_placeholder`]), so the relation is stored as the official server stores it. A
/// relation sent again within the call, or whose relationType differs from a stored
/// one's only in how it folds into the predicate (`"works at"`, `"works_at"`), is a
/// further entry of the link (see [`copies`](super::copies)). Returns the created
/// relations.
pub fn create_relations(
    w: &mut dyn GraphWrite,
    relations: &[RelationInput],
    now: &str,
) -> Result<Value, KipError> {
    let mut w = Writer::new(w, Privilege::MemoryTools);
    // Every end resolved before anything is written (see create_entities).
    let mut ends: HashMap<String, Option<u64>> = HashMap::new();
    for r in relations {
        for n in [&r.from, &r.to] {
            if !ends.contains_key(n) {
                let found = find_end(w.graph(), n)?.map(|(id, _)| id);
                ends.insert(n.clone(), found);
            }
        }
    }
    let mut made = HashSet::new();
    let mut created = Vec::new();
    for r in relations {
        let mut ids = [0u64; 2];
        for (slot, n) in [&r.from, &r.to].into_iter().enumerate() {
            ids[slot] = match ends.get(n).copied().flatten() {
                Some(id) => id,
                None => {
                    let id = create_placeholder(&mut w, n, None, now, None)?;
                    ends.insert(n.clone(), Some(id));
                    id
                }
            };
        }
        let p = predicate_name(&r.relation_type);
        ensure_predicate(&mut w, &p, &r.relation_type, None)?;
        let (s, o) = (ElemRef::Concept(ids[0]), ElemRef::Concept(ids[1]));
        if let Some(listed) = store_relation(&mut w, s, &p, o, r, now, &mut made)? {
            created.push(listed);
        }
    }
    Ok(json!({ "relations": created }))
}

/// Stores relation `r` as the link `(s, p, o)` unless the graph held it before this
/// call or import (`made`: the `(link, relationType)` entries this call added): a new
/// link, or a further entry of the existing one. Returns it as listed, `None` when it
/// was there before.
pub(super) fn store_relation(
    w: &mut Writer,
    s: ElemRef,
    p: &str,
    o: ElemRef,
    r: &RelationInput,
    now: &str,
    made: &mut HashSet<(u64, String)>,
) -> Result<Option<Value>, KipError> {
    let Some(id) = w.graph().prop_by_spo(s, p, o)? else {
        let (id, _) = w.upsert_link(s, p, o, &Map::new(), &relation_meta(r, now))?;
        made.insert((id, r.relation_type.clone()));
        return Ok(w
            .graph()
            .prop(id)?
            .map(|rec| relation_json(&r.from, &r.to, &rec)));
    };
    let key = (id, r.relation_type.clone());
    let held = w
        .graph()
        .prop(id)?
        .is_some_and(|rec| has_relation_type(&rec, &r.relation_type));
    if held && !made.contains(&key) {
        return Ok(None);
    }
    made.insert(key);
    Ok(Some(add_relation_copy(w, id, r, now)?))
}

/// Deletes the placeholders among `ids` that no relation names any more (a link to a
/// domain does not count), so a placeholder lives exactly as long as a relation
/// needs it.
fn drop_unused_placeholders(w: &mut Writer, ids: &[u64]) -> Result<(), KipError> {
    let mut unused = Vec::new();
    for &id in ids {
        let Some(c) = w.graph().concept(id)? else {
            continue;
        };
        if !is_placeholder(&c) {
            continue;
        }
        let at = ElemRef::Concept(id);
        let mut used = false;
        w.graph().scan_out(at, None, &mut |p, _, _| {
            used = p != DOMAIN_PREDICATE;
            Ok(!used)
        })?;
        if !used {
            w.graph().scan_in(at, None, &mut |_, _, _| {
                used = true;
                Ok(false)
            })?;
        }
        if !used {
            unused.push(id);
        }
    }
    if !unused.is_empty() {
        w.delete_concepts(&unused)?;
    }
    Ok(())
}

/// The placeholders at the other end of `id`'s links.
fn placeholder_neighbours(w: &mut Writer, id: u64) -> Result<Vec<u64>, KipError> {
    let at = ElemRef::Concept(id);
    let mut others = Vec::new();
    w.graph().scan_out(at, None, &mut |_, o, _| {
        others.push(o);
        Ok(true)
    })?;
    w.graph().scan_in(at, None, &mut |_, s, _| {
        others.push(s);
        Ok(true)
    })?;
    let mut out = Vec::new();
    for o in others {
        if let ElemRef::Concept(n) = o {
            if n != id && w.graph().concept(n)?.is_some_and(|c| is_placeholder(&c)) {
                out.push(n);
            }
        }
    }
    Ok(out)
}

/// `add_observations`: every entity must exist (else nothing is saved); observations
/// the entity already shows are dropped, the others appended to its `observations`.
/// Returns `{entityName, addedObservations}` per item.
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
        let shown = observations(&old);
        let added: Vec<String> = contents
            .iter()
            .filter(|c| !shown.contains(c))
            .cloned()
            .collect();
        if !added.is_empty() {
            let mut stored = stored_observations(&old);
            stored.extend(added.iter().cloned());
            let mut rec = old.clone();
            rec.attributes.insert(OBSERVATIONS.into(), json!(stored));
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
/// the names that are no entity. As in the official server, the relations naming a
/// name that is no entity are deleted too (here: its placeholder).
pub fn delete_entities(w: &mut dyn GraphWrite, names: &[String]) -> Result<Value, KipError> {
    let mut w = Writer::new(w, Privilege::MemoryTools);
    let mut not_found = Vec::new();
    let mut neighbours = Vec::new();
    for name in names {
        match find_end(w.graph(), name)? {
            Some((id, c)) => {
                neighbours.extend(placeholder_neighbours(&mut w, id)?);
                w.delete_concepts(&[id])?;
                if is_placeholder(&c) {
                    not_found.push(name.clone());
                }
            }
            None => not_found.push(name.clone()),
        }
    }
    drop_unused_placeholders(&mut w, &neighbours)?;
    Ok(json!({"success": true, "message": "Entities deleted successfully", "notFound": not_found}))
}

/// `delete_observations`: removes the listed observations from whichever descriptive
/// attribute shows them (see [`observations`]); reports unknown entities.
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
        let mut rec = old.clone();
        if remove_observations(&mut rec, &|o| remove.iter().any(|r| r == o)) {
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

/// The link holding an entry of relation `r` (its exact relationType), with its ends
/// (entities or placeholders) and record.
fn find_relation(
    g: &dyn GraphRead,
    r: &RelationInput,
) -> Result<Option<(u64, [u64; 2], PropRecord)>, KipError> {
    let (Some((s, _)), Some((o, _))) = (find_end(g, &r.from)?, find_end(g, &r.to)?) else {
        return Ok(None);
    };
    let Some(id) = g.prop_by_spo(
        ElemRef::Concept(s),
        &predicate_name(&r.relation_type),
        ElemRef::Concept(o),
    )?
    else {
        return Ok(None);
    };
    Ok(g.prop(id)?
        .filter(|p| has_relation_type(p, &r.relation_type))
        .map(|p| (id, [s, o], p)))
}

/// `delete_relations`: deletes the listed relations, every entry of that exact
/// relationType (and the link with its last entry; and the placeholders no relation
/// names any more); reports the ones that did not exist.
pub fn delete_relations(
    w: &mut dyn GraphWrite,
    relations: &[RelationInput],
) -> Result<Value, KipError> {
    let mut w = Writer::new(w, Privilege::MemoryTools);
    let mut not_found = Vec::new();
    let mut ends = Vec::new();
    for r in relations {
        match find_relation(w.graph(), r)? {
            Some((id, both, p)) => {
                match without_relation_type(&p, &r.relation_type) {
                    None => {
                        w.delete_links(vec![id])?;
                    }
                    Some(mut rest) => {
                        w.put_link(id, &p, &mut rest)?;
                    }
                }
                ends.extend(both);
            }
            None => {
                not_found.push(json!({"from": r.from, "to": r.to, "relationType": r.relation_type}))
            }
        }
    }
    drop_unused_placeholders(&mut w, &ends)?;
    Ok(json!({"success": true, "message": "Relations deleted successfully", "notFound": not_found}))
}

/// `update_entities`: each entity must exist (else nothing is saved); the given fields
/// replace the stored ones, `version` increases and `createdAt` is refreshed. New
/// observations replace the ones shown: values of other descriptive attributes that
/// are not among them are removed, and the rest is the `observations` attribute.
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
                ensure_type(&mut w, &t, et, None)?;
                rec.concept_type = t;
            }
            rec.metadata.insert("entity_type".into(), json!(et));
        }
        if let Some(obs) = &u.observations {
            rec.attributes.remove(OBSERVATIONS);
            remove_observations(&mut rec, &|o| !obs.iter().any(|x| x == o));
            let kept = observations(&rec);
            let rest: Vec<&String> = obs.iter().filter(|o| !kept.contains(o)).collect();
            rec.attributes.insert(OBSERVATIONS.into(), json!(rest));
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
/// increases and `createdAt` (with `observed_at`, its last use) is refreshed.
pub fn update_relations(
    w: &mut dyn GraphWrite,
    relations: &[RelationInput],
    now: &str,
) -> Result<Value, KipError> {
    let mut w = Writer::new(w, Privilege::MemoryTools);
    let mut out = Vec::new();
    for r in relations {
        let not_found = || {
            KipError::new(
                ErrorCode::NotFound,
                format!(
                    "Relation from {} to {} of type {} not found",
                    r.from, r.to, r.relation_type
                ),
            )
            .with_hint("create it first with create_relations")
        };
        let (id, _, old) = find_relation(w.graph(), r)?.ok_or_else(not_found)?;
        let mut rec = touch_relation_type(&old, &r.relation_type, now).ok_or_else(not_found)?;
        w.put_link(id, &old, &mut rec)?;
        out.push(
            listed_relation(id, &r.from, &r.to, &rec, &r.relation_type).ok_or_else(not_found)?,
        );
    }
    Ok(json!({ "relations": out }))
}
