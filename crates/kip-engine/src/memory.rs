//! The Knowledge Graph Memory Server tool set over the KIP graph (drop-in for the
//! official MCP memory server, plus the fork's `update_entities` / `update_relations`
//! and `createdAt` / `version`).
//!
//! Mapping (docs/memory-server.md):
//! - An entity is a concept whose type is the entityType as an UpperCamelCase
//!   identifier (registered on first use as a `$ConceptType` in the `Unsorted` domain),
//!   whose name is the entity name and whose `observations` attribute holds the
//!   observations. Metadata keeps the original `entity_type`, `created_at` and `version`.
//!   Any concept with an `observations` array is an entity for these tools.
//! - A relation is a link whose predicate is the relationType in `snake_case`
//!   (registered on first use), with the original `relation_type`, `created_at` and
//!   `version` in metadata.
//! - Entity names are unique for these tools, as in the original.
//!
//! Every tool call is one transaction: a call that fails writes nothing.

use crate::kml::delete::delete_links;
use crate::schema::{self, CONCEPT_TYPE, PROPOSITION_TYPE};
use crate::store::{ConceptRecord, ElemRef, GraphRead, GraphWrite, PropRecord, DOMAIN_PREDICATE};
use kip_lang::{ErrorCode, KipError};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};

/// The attribute holding an entity's observations.
pub const OBSERVATIONS: &str = "observations";

/// An entity as the tools take it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EntityInput {
    /// Unique name.
    pub name: String,
    /// Free-form type.
    pub entity_type: String,
    /// Observations.
    #[serde(default)]
    pub observations: Vec<String>,
    /// Kept from an imported file.
    #[serde(default)]
    pub created_at: Option<String>,
    /// Kept from an imported file.
    #[serde(default)]
    pub version: Option<u64>,
}

/// A relation as the tools take it.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub struct RelationInput {
    /// Source entity name.
    pub from: String,
    /// Target entity name.
    pub to: String,
    /// Free-form relation type.
    pub relation_type: String,
    /// Kept from an imported file.
    #[serde(default)]
    pub created_at: Option<String>,
    /// Kept from an imported file.
    #[serde(default)]
    pub version: Option<u64>,
}

/// An `update_entities` item: the given fields replace the stored ones.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EntityUpdate {
    /// The entity.
    pub name: String,
    /// New type.
    #[serde(default)]
    pub entity_type: Option<String>,
    /// New observations.
    #[serde(default)]
    pub observations: Option<Vec<String>>,
}

/// The current time as ISO-8601 with milliseconds (`2026-01-02T03:04:05.678Z`).
pub fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

pub use crate::schema::{predicate_name, type_name};

fn not_found_entity(name: &str) -> KipError {
    KipError::new(
        ErrorCode::NotFound,
        format!("Entity with name {name} not found"),
    )
    .with_hint(
        "create the entity first with create_entities, or check the exact name with search_nodes",
    )
}

fn unsorted(g: &dyn GraphRead) -> Result<Option<u64>, KipError> {
    g.concept_by_key("Domain", "Unsorted")
}

fn add_concept(w: &mut dyn GraphWrite, rec: &ConceptRecord) -> Result<u64, KipError> {
    let id = w.alloc_concept_id()?;
    w.put_concept(id, rec, None)?;
    Ok(id)
}

fn add_link(
    w: &mut dyn GraphWrite,
    s: ElemRef,
    p: &str,
    o: ElemRef,
    meta: Map<String, Value>,
) -> Result<u64, KipError> {
    if let Some(id) = w.prop_by_spo(s, p, o)? {
        return Ok(id);
    }
    let id = w.alloc_prop_id()?;
    w.put_prop(
        id,
        &PropRecord {
            subject: s,
            predicate: p.to_string(),
            object: o,
            attributes: Map::new(),
            metadata: meta,
        },
        None,
    )?;
    Ok(id)
}

fn system_meta() -> Map<String, Value> {
    json!({"source": "memory-server-tools", "author": "$system"})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// Registers a type definition (`$ConceptType` or `$PropositionType`) if missing, and
/// files it in the `Unsorted` domain.
fn ensure_definition(
    w: &mut dyn GraphWrite,
    meta_type: &str,
    name: &str,
    attributes: Value,
) -> Result<(), KipError> {
    if w.concept_by_key(meta_type, name)?.is_some() {
        return Ok(());
    }
    let rec = ConceptRecord {
        concept_type: meta_type.into(),
        name: name.into(),
        attributes: attributes.as_object().cloned().unwrap_or_default(),
        metadata: system_meta(),
    };
    let id = add_concept(w, &rec)?;
    if let Some(d) = unsorted(&*w)? {
        add_link(
            w,
            ElemRef::Concept(id),
            DOMAIN_PREDICATE,
            ElemRef::Concept(d),
            system_meta(),
        )?;
    }
    Ok(())
}

/// Registers the concept type of an entityType if missing.
fn ensure_type(w: &mut dyn GraphWrite, t: &str, original: &str) -> Result<(), KipError> {
    let description =
        format!("Entities of type '{original}' (registered by the memory-server tools).");
    ensure_definition(w, CONCEPT_TYPE, t, json!({ "description": description }))
}

/// Registers the predicate of a relationType if missing.
fn ensure_predicate(w: &mut dyn GraphWrite, p: &str, original: &str) -> Result<(), KipError> {
    let description =
        format!("Relations of type '{original}' (registered by the memory-server tools).");
    ensure_definition(
        w,
        PROPOSITION_TYPE,
        p,
        json!({ "description": description, "subject_types": ["*"], "object_types": ["*"] }),
    )
}

/// Whether the memory-server tools see a concept as an entity: every concept of the
/// graph except the system's own structure (type and predicate definitions, domains,
/// the `$`-named actors). Concepts written through KIP are entities too, so an agent
/// using both tool sets sees one memory.
fn is_entity(c: &ConceptRecord) -> bool {
    if matches!(c.attributes.get(OBSERVATIONS), Some(Value::Array(_))) {
        return true;
    }
    !(c.concept_type == CONCEPT_TYPE
        || c.concept_type == PROPOSITION_TYPE
        || c.concept_type == "Domain"
        || c.name.starts_with('$'))
}

/// The entity with this name: the one concept the tools see with that name. Names are
/// unique per type in KIP, so two concepts of different types may share one: the name
/// is then ambiguous, and the tools say so (KIP_3003) instead of guessing or creating
/// a third.
pub fn find_entity(
    g: &dyn GraphRead,
    name: &str,
) -> Result<Option<(u64, ConceptRecord)>, KipError> {
    let mut ids = Vec::new();
    g.scan_name(name, &mut |id| {
        ids.push(id);
        Ok(true)
    })?;
    let mut found: Vec<(u64, ConceptRecord)> = Vec::new();
    for id in ids {
        if let Some(c) = g.concept(id)? {
            if is_entity(&c) {
                found.push((id, c));
            }
        }
    }
    if found.len() > 1 {
        let which = found
            .iter()
            .map(|(id, c)| format!("{} C:{id}", c.concept_type))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(KipError::new(
            ErrorCode::DuplicateExists,
            format!("the name {name} is ambiguous: {} concepts have it ({which})", found.len()),
        )
        .with_hint("address one of them with execute_kip and {type, name} (or its id), or rename one so that the memory tools can tell them apart"));
    }
    Ok(found.pop())
}

fn observations(c: &ConceptRecord) -> Vec<String> {
    c.attributes
        .get(OBSERVATIONS)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The tool-facing JSON of an entity.
pub fn entity_json(c: &ConceptRecord) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(c.name));
    let et = c
        .metadata
        .get("entity_type")
        .and_then(Value::as_str)
        .unwrap_or(&c.concept_type)
        .to_string();
    m.insert("entityType".into(), json!(et));
    m.insert("observations".into(), json!(observations(c)));
    if let Some(v) = c.metadata.get("created_at").filter(|v| v.is_string()) {
        m.insert("createdAt".into(), v.clone());
    }
    if let Some(v) = c.metadata.get("version").filter(|v| v.is_u64()) {
        m.insert("version".into(), v.clone());
    }
    Value::Object(m)
}

fn relation_json(from: &str, to: &str, p: &PropRecord) -> Value {
    let mut m = Map::new();
    m.insert("from".into(), json!(from));
    m.insert("to".into(), json!(to));
    let rt = p
        .metadata
        .get("relation_type")
        .and_then(Value::as_str)
        .unwrap_or(&p.predicate)
        .to_string();
    m.insert("relationType".into(), json!(rt));
    if let Some(v) = p.metadata.get("created_at").filter(|v| v.is_string()) {
        m.insert("createdAt".into(), v.clone());
    }
    if let Some(v) = p.metadata.get("version").filter(|v| v.is_u64()) {
        m.insert("version".into(), v.clone());
    }
    Value::Object(m)
}

fn version_of(meta: &Map<String, Value>) -> u64 {
    meta.get("version").and_then(Value::as_u64).unwrap_or(1)
}

/// `create_entities`: new names are created; names that exist (or repeat within the
/// call) are skipped. Returns the created entities.
pub fn create_entities(
    w: &mut dyn GraphWrite,
    entities: &[EntityInput],
    now: &str,
) -> Result<Value, KipError> {
    // Every name is looked up before anything is written: a read of the name index
    // after a write re-sorts the transaction's pending index changes, which made one
    // call with many entities quadratic.
    let mut existing = HashSet::new();
    for e in entities {
        if !existing.contains(&e.name) && find_entity(&*w, &e.name)?.is_some() {
            existing.insert(e.name.clone());
        }
    }
    let mut seen = HashSet::new();
    let mut created = Vec::new();
    for e in entities {
        if !seen.insert(e.name.clone()) || existing.contains(&e.name) {
            continue;
        }
        ensure_type(w, &type_name(&e.entity_type), &e.entity_type)?;
        let (_, rec) = write_entity(w, e, now, false)?;
        created.push(entity_json(&rec));
    }
    Ok(json!({ "entities": created }))
}

/// Writes one new entity (its type registered by the caller): the concept
/// `{type_name(entityType), name}` with its observations and the entity metadata
/// (`entity_type`, `created_at`, `version`, and `placeholder: true` for an import's
/// stand-in for an undefined relation end). A concept of the same type and name
/// written through KIP gets the observations.
fn write_entity(
    w: &mut dyn GraphWrite,
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
    let (id, old) = match w.concept_by_key(&t, &e.name)? {
        Some(id) => (id, w.concept(id)?),
        None => (w.alloc_concept_id()?, None),
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
    w.put_concept(id, &rec, old.as_ref())?;
    Ok((id, rec))
}

/// `create_relations`: both ends must be entities (else nothing is saved); existing
/// relations are skipped. Returns the created relations.
pub fn create_relations(
    w: &mut dyn GraphWrite,
    relations: &[RelationInput],
    now: &str,
) -> Result<Value, KipError> {
    let mut ends: HashMap<String, u64> = HashMap::new();
    for r in relations {
        for n in [&r.from, &r.to] {
            if !ends.contains_key(n) {
                let (id, _) = find_entity(&*w, n)?.ok_or_else(|| not_found_entity(n))?;
                ends.insert(n.clone(), id);
            }
        }
    }
    let mut created = Vec::new();
    for r in relations {
        let p = predicate_name(&r.relation_type);
        ensure_predicate(w, &p, &r.relation_type)?;
        let (s, o) = (
            ElemRef::Concept(ends[&r.from]),
            ElemRef::Concept(ends[&r.to]),
        );
        if w.prop_by_spo(s, &p, o)?.is_some() {
            continue;
        }
        let mut meta = Map::new();
        meta.insert("relation_type".into(), json!(r.relation_type));
        meta.insert(
            "created_at".into(),
            json!(r.created_at.clone().unwrap_or_else(|| now.to_string())),
        );
        meta.insert("version".into(), json!(r.version.unwrap_or(1)));
        let id = add_link(w, s, &p, o, meta)?;
        if let Some(rec) = w.prop(id)? {
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
    // Names resolved before anything is written (see create_entities); the records are
    // read again by id, so a name given twice sees its first update.
    let mut ids: HashMap<&str, u64> = HashMap::new();
    for (name, _) in items {
        if !ids.contains_key(name.as_str()) {
            let (id, _) = find_entity(&*w, name)?.ok_or_else(|| not_found_entity(name))?;
            ids.insert(name.as_str(), id);
        }
    }
    let mut results = Vec::new();
    for (name, contents) in items {
        let id = ids
            .get(name.as_str())
            .copied()
            .ok_or_else(|| not_found_entity(name))?;
        let old = w.concept(id)?.ok_or_else(|| not_found_entity(name))?;
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
            w.put_concept(id, &rec, Some(&old))?;
        }
        results.push(json!({"entityName": name, "addedObservations": added}));
    }
    Ok(json!({ "results": results }))
}

/// `delete_entities`: deletes the entities and every relation touching them; reports
/// the names that did not exist.
pub fn delete_entities(w: &mut dyn GraphWrite, names: &[String]) -> Result<Value, KipError> {
    let mut not_found = Vec::new();
    for name in names {
        let Some((id, rec)) = find_entity(&*w, name)? else {
            not_found.push(name.clone());
            continue;
        };
        schema::check_mutation(schema::Mutation::DeleteConcept(&rec))?;
        let r = ElemRef::Concept(id);
        let mut links = Vec::new();
        w.scan_out(r, None, &mut |_, _, l| {
            links.push(l);
            Ok(true)
        })?;
        w.scan_in(r, None, &mut |_, _, l| {
            links.push(l);
            Ok(true)
        })?;
        delete_links(w, links)?;
        w.delete_concept(id, &rec)?;
    }
    Ok(json!({"success": true, "message": "Entities deleted successfully", "notFound": not_found}))
}

/// `delete_observations`: removes the listed observations; reports unknown entities.
pub fn delete_observations(
    w: &mut dyn GraphWrite,
    items: &[(String, Vec<String>)],
    now: &str,
) -> Result<Value, KipError> {
    let mut not_found = Vec::new();
    for (name, remove) in items {
        let Some((id, old)) = find_entity(&*w, name)? else {
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
            w.put_concept(id, &rec, Some(&old))?;
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
    g.prop_by_spo(
        ElemRef::Concept(s),
        &predicate_name(&r.relation_type),
        ElemRef::Concept(o),
    )
}

/// `delete_relations`: deletes the listed relations; reports the ones that did not exist.
pub fn delete_relations(
    w: &mut dyn GraphWrite,
    relations: &[RelationInput],
) -> Result<Value, KipError> {
    let mut not_found = Vec::new();
    for r in relations {
        match find_relation(&*w, r)? {
            Some(id) => {
                delete_links(w, vec![id])?;
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
    let mut out = Vec::new();
    for u in items {
        let (id, old) = find_entity(&*w, &u.name)?.ok_or_else(|| not_found_entity(&u.name))?;
        let mut rec = old.clone();
        if let Some(et) = &u.entity_type {
            let t = type_name(et);
            schema::check_mutation(schema::Mutation::Retype {
                concept: &old,
                new_type: &t,
            })?;
            ensure_type(w, &t, et)?;
            if t != rec.concept_type {
                if w.concept_by_key(&t, &rec.name)?.is_some() {
                    return Err(KipError::new(
                        ErrorCode::DuplicateExists,
                        format!(
                            "a concept {{type: \"{t}\", name: \"{}\"}} already exists",
                            rec.name
                        ),
                    )
                    .with_hint("rename or delete the other concept first"));
                }
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
        w.put_concept(id, &rec, Some(&old))?;
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
    let mut out = Vec::new();
    for r in relations {
        let id = find_relation(&*w, r)?.ok_or_else(|| {
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
            .prop(id)?
            .ok_or_else(|| KipError::internal("relation vanished"))?;
        let mut rec = old.clone();
        rec.metadata
            .insert("relation_type".into(), json!(r.relation_type));
        rec.metadata
            .insert("version".into(), json!(version_of(&old.metadata) + 1));
        rec.metadata.insert("created_at".into(), json!(now));
        w.put_prop(id, &rec, Some(&old))?;
        out.push(relation_json(&r.from, &r.to, &rec));
    }
    Ok(json!({ "relations": out }))
}

/// What a reading tool may answer: the JSON size of its result is counted (roughly,
/// from the lengths of what goes in) as entities and relations are collected, and the
/// call fails with `KIP_4002` once past the limit, before the whole answer is built
/// (the official tools have no paging, and a memory of a million concepts would
/// answer gigabytes).
struct Budget {
    left: usize,
    limit: usize,
    tool: &'static str,
}

impl Budget {
    fn new(tool: &'static str, limit: usize) -> Budget {
        Budget {
            left: limit,
            limit,
            tool,
        }
    }

    fn spend(&mut self, bytes: usize) -> Result<(), KipError> {
        match self.left.checked_sub(bytes) {
            Some(l) => {
                self.left = l;
                Ok(())
            }
            None => Err(KipError::new(
                ErrorCode::ResourceExhausted,
                format!(
                    "{} would answer more than {} bytes: the memory holds more than this tool can return at once",
                    self.tool, self.limit
                ),
            )
            .with_hint("read a part of it with search_nodes or open_nodes, or page through it with execute_kip: FIND(?e) WHERE { ?e {type: \"...\"} } LIMIT 100, then CURSOR")),
        }
    }

    fn entity(&mut self, c: &ConceptRecord) -> Result<(), KipError> {
        let obs: usize = observations(c).iter().map(|o| o.len() + 3).sum();
        self.spend(64 + c.name.len() + entity_type_of(c).len() + obs)
    }
}

/// Every entity, in creation order, with their ids.
fn all_entities(g: &dyn GraphRead) -> Result<Vec<(u64, ConceptRecord)>, KipError> {
    all_entities_within(g, &mut Budget::new("export", usize::MAX))
}

fn all_entities_within(
    g: &dyn GraphRead,
    budget: &mut Budget,
) -> Result<Vec<(u64, ConceptRecord)>, KipError> {
    let mut ids = Vec::new();
    g.scan_concepts(&mut |id| {
        ids.push(id);
        Ok(true)
    })?;
    let mut out = Vec::new();
    for id in ids {
        if let Some(c) = g.concept(id)? {
            if is_entity(&c) {
                budget.entity(&c)?;
                out.push((id, c));
            }
        }
    }
    Ok(out)
}

/// Relations between entities where `keep(from_id, to_id)`, in creation order.
fn relations_where(
    g: &dyn GraphRead,
    names: &HashMap<u64, String>,
    keep: &dyn Fn(u64, u64) -> bool,
    budget: &mut Budget,
) -> Result<Vec<Value>, KipError> {
    let mut ids = Vec::new();
    g.scan_props(&mut |id| {
        ids.push(id);
        Ok(true)
    })?;
    let mut out = Vec::new();
    for id in ids {
        let Some(p) = g.prop(id)? else { continue };
        let (ElemRef::Concept(s), ElemRef::Concept(o)) = (p.subject, p.object) else {
            continue;
        };
        let (Some(from), Some(to)) = (names.get(&s), names.get(&o)) else {
            continue;
        };
        if keep(s, o) {
            budget.spend(96 + from.len() + to.len() + p.predicate.len())?;
            out.push(relation_json(from, to, &p));
        }
    }
    Ok(out)
}

/// `read_graph`: every entity and every relation between entities.
pub fn read_graph(g: &dyn GraphRead) -> Result<Value, KipError> {
    read_graph_within(g, usize::MAX)
}

/// [`read_graph`] answering at most about `max_bytes` of JSON (`KIP_4002` beyond).
pub fn read_graph_within(g: &dyn GraphRead, max_bytes: usize) -> Result<Value, KipError> {
    let mut budget = Budget::new("read_graph", max_bytes);
    let entities = all_entities_within(g, &mut budget)?;
    let names: HashMap<u64, String> = entities
        .iter()
        .map(|(id, c)| (*id, c.name.clone()))
        .collect();
    let relations = relations_where(g, &names, &|_, _| true, &mut budget)?;
    Ok(
        json!({"entities": entities.iter().map(|(_, c)| entity_json(c)).collect::<Vec<_>>(), "relations": relations}),
    )
}

/// The entities that satisfy `keep` and every relation touching one of them (in
/// creation order), found through the selected entities' own links.
fn subgraph(
    g: &dyn GraphRead,
    keep: &dyn Fn(&ConceptRecord) -> bool,
    budget: &mut Budget,
) -> Result<Value, KipError> {
    let mut ids = Vec::new();
    g.scan_concepts(&mut |id| {
        ids.push(id);
        Ok(true)
    })?;
    let mut selected: Vec<(u64, ConceptRecord)> = Vec::new();
    for id in ids {
        if let Some(c) = g.concept(id)? {
            if is_entity(&c) && keep(&c) {
                budget.entity(&c)?;
                selected.push((id, c));
            }
        }
    }
    let mut names: HashMap<u64, Option<String>> = selected
        .iter()
        .map(|(id, c)| (*id, Some(c.name.clone())))
        .collect();
    let mut links: Vec<u64> = Vec::new();
    for (id, _) in &selected {
        let at = ElemRef::Concept(*id);
        g.scan_out(at, None, &mut |_, _, l| {
            links.push(l);
            Ok(true)
        })?;
        g.scan_in(at, None, &mut |_, _, l| {
            links.push(l);
            Ok(true)
        })?;
    }
    links.sort_unstable();
    links.dedup();
    let mut relations = Vec::new();
    for l in links {
        let Some(p) = g.prop(l)? else { continue };
        let (ElemRef::Concept(s), ElemRef::Concept(o)) = (p.subject, p.object) else {
            continue;
        };
        let mut name_of = |n: u64| -> Result<Option<String>, KipError> {
            if let Some(v) = names.get(&n) {
                return Ok(v.clone());
            }
            let v = g.concept(n)?.filter(is_entity).map(|c| c.name);
            names.insert(n, v.clone());
            Ok(v)
        };
        let (Some(from), Some(to)) = (name_of(s)?, name_of(o)?) else {
            continue;
        };
        budget.spend(96 + from.len() + to.len() + p.predicate.len())?;
        relations.push(relation_json(&from, &to, &p));
    }
    Ok(json!({
        "entities": selected.iter().map(|(_, c)| entity_json(c)).collect::<Vec<_>>(),
        "relations": relations,
    }))
}

fn entity_type_of(c: &ConceptRecord) -> &str {
    c.metadata
        .get("entity_type")
        .and_then(Value::as_str)
        .unwrap_or(&c.concept_type)
}

/// `search_nodes`: a case-insensitive substring match of the whole query on name,
/// entityType and observations; relations touching a match.
pub fn search_nodes(g: &dyn GraphRead, query: &str) -> Result<Value, KipError> {
    search_nodes_within(g, query, usize::MAX)
}

/// [`search_nodes`] answering at most about `max_bytes` of JSON (`KIP_4002` beyond).
pub fn search_nodes_within(
    g: &dyn GraphRead,
    query: &str,
    max_bytes: usize,
) -> Result<Value, KipError> {
    let q = query.to_lowercase();
    let mut budget = Budget::new("search_nodes", max_bytes);
    subgraph(
        g,
        &|c| {
            c.name.to_lowercase().contains(&q)
                || entity_type_of(c).to_lowercase().contains(&q)
                || c.attributes
                    .get(OBSERVATIONS)
                    .and_then(Value::as_array)
                    .is_some_and(|a| {
                        a.iter()
                            .any(|o| o.as_str().is_some_and(|o| o.to_lowercase().contains(&q)))
                    })
        },
        &mut budget,
    )
}

/// `open_nodes`: the named entities and the relations touching them.
pub fn open_nodes(g: &dyn GraphRead, names: &[String]) -> Result<Value, KipError> {
    open_nodes_within(g, names, usize::MAX)
}

/// [`open_nodes`] answering at most about `max_bytes` of JSON (`KIP_4002` beyond).
pub fn open_nodes_within(
    g: &dyn GraphRead,
    names: &[String],
    max_bytes: usize,
) -> Result<Value, KipError> {
    let set: HashSet<&str> = names.iter().map(String::as_str).collect();
    subgraph(
        g,
        &|c| set.contains(c.name.as_str()),
        &mut Budget::new("open_nodes", max_bytes),
    )
}

/// One parsed line of a memory-server JSONL file.
pub enum JsonlItem {
    /// `{"type": "entity", ...}`
    Entity(EntityInput),
    /// `{"type": "relation", ...}`
    Relation(RelationInput),
}

/// Parses a memory-server JSONL file (official or fork format; a missing trailing
/// newline is fine). Returns the items and the bad lines `(line number, reason)`.
pub fn parse_jsonl(text: &str) -> (Vec<JsonlItem>, Vec<(usize, String)>) {
    let mut items = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let v: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                bad.push((i + 1, format!("not JSON: {e}")));
                continue;
            }
        };
        let parsed = match v.get("type").and_then(Value::as_str) {
            Some("entity") => serde_json::from_value::<EntityInput>(v)
                .map(JsonlItem::Entity)
                .map_err(|e| e.to_string()),
            Some("relation") => serde_json::from_value::<RelationInput>(v)
                .map(JsonlItem::Relation)
                .map_err(|e| e.to_string()),
            _ => Err("\"type\" must be \"entity\" or \"relation\"".to_string()),
        };
        match parsed {
            Ok(item) => items.push(item),
            Err(e) => bad.push((i + 1, e)),
        }
    }
    (items, bad)
}

/// Writes the memory graph as JSONL (fork format: with createdAt and version). The
/// placeholder entities an import created for relation ends its file did not define
/// are left out (their relations are written), so a file moved over and exported
/// again holds what it held.
pub fn export_jsonl(g: &dyn GraphRead) -> Result<String, KipError> {
    let placeholders: HashSet<String> = all_entities(g)?
        .into_iter()
        .filter(|(_, c)| {
            c.metadata.get("placeholder") == Some(&Value::Bool(true)) && observations(c).is_empty()
        })
        .map(|(_, c)| c.name)
        .collect();
    let graph = read_graph(g)?;
    let mut out = String::new();
    for e in graph["entities"].as_array().into_iter().flatten() {
        if e["name"].as_str().is_some_and(|n| placeholders.contains(n)) {
            continue;
        }
        let mut m = Map::new();
        m.insert("type".into(), json!("entity"));
        if let Some(o) = e.as_object() {
            m.extend(o.clone());
        }
        out.push_str(&Value::Object(m).to_string());
        out.push('\n');
    }
    for r in graph["relations"].as_array().into_iter().flatten() {
        let mut m = Map::new();
        m.insert("type".into(), json!("relation"));
        if let Some(o) = r.as_object() {
            m.extend(o.clone());
        }
        out.push_str(&Value::Object(m).to_string());
        out.push('\n');
    }
    Ok(out)
}

/// The `entityType` of an entity created by an import for a relation end that the file
/// never defines (the official server accepts and stores such relations).
pub const PLACEHOLDER_TYPE: &str = "unknown";

/// What an import brought over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Entities created (placeholders included).
    pub entities: usize,
    /// Relations created.
    pub relations: usize,
    /// Names of the placeholder entities created for relation ends the file does not
    /// define (metadata `placeholder: true`, entityType `unknown`, no observations).
    pub placeholders: Vec<String>,
    /// Entities and relations of the file that were already in the graph.
    pub already_present: usize,
}

/// Imports parsed JSONL items in the caller's transaction: entities first, then
/// relations. Lossless: a relation whose end is neither an entity of the file nor of
/// the graph (the official server writes such relations) gets a placeholder entity for
/// that end (see [`PLACEHOLDER_TYPE`]), so no line of the file is dropped.
///
/// Linear in the file: every name is resolved against the graph once, before anything
/// is written (a read of the name index after each write re-sorted the transaction's
/// pending index changes: 40,000 entities took 18 s), and `progress` is told the
/// number of items done every 1,000 items.
pub fn import_items(
    w: &mut dyn GraphWrite,
    items: &[JsonlItem],
    now: &str,
    progress: &mut dyn FnMut(usize),
) -> Result<ImportReport, KipError> {
    let mut report = ImportReport::default();
    // Every name the file mentions, resolved once against the graph.
    let mut known: HashMap<String, Option<u64>> = HashMap::new();
    for item in items {
        let names: [&str; 2] = match item {
            JsonlItem::Entity(e) => [&e.name, &e.name],
            JsonlItem::Relation(r) => [&r.from, &r.to],
        };
        for n in names {
            if !known.contains_key(n) {
                let found = find_entity(&*w, n)?.map(|(id, _)| id);
                known.insert(n.to_string(), found);
            }
        }
    }
    let mut types_done: HashSet<String> = HashSet::new();
    let create = |w: &mut dyn GraphWrite,
                  e: &EntityInput,
                  placeholder: bool,
                  types_done: &mut HashSet<String>|
     -> Result<u64, KipError> {
        let t = type_name(&e.entity_type);
        if types_done.insert(t.clone()) {
            ensure_type(w, &t, &e.entity_type)?;
        }
        Ok(write_entity(w, e, now, placeholder)?.0)
    };
    let mut done = 0usize;
    for item in items {
        if let JsonlItem::Entity(e) = item {
            match known.get(&e.name).copied().flatten() {
                Some(_) => report.already_present += 1,
                None => {
                    let id = create(w, e, false, &mut types_done)?;
                    known.insert(e.name.clone(), Some(id));
                    report.entities += 1;
                }
            }
            done += 1;
            if done.is_multiple_of(1000) {
                progress(done);
            }
        }
    }
    let mut preds_done: HashSet<String> = HashSet::new();
    for item in items {
        let JsonlItem::Relation(r) = item else {
            continue;
        };
        let mut ends = [0u64; 2];
        for (slot, n) in [&r.from, &r.to].into_iter().enumerate() {
            ends[slot] = match known.get(n).copied().flatten() {
                Some(id) => id,
                None => {
                    let ghost = EntityInput {
                        name: n.clone(),
                        entity_type: PLACEHOLDER_TYPE.into(),
                        observations: Vec::new(),
                        created_at: r.created_at.clone(),
                        version: None,
                    };
                    let id = create(w, &ghost, true, &mut types_done)?;
                    known.insert(n.clone(), Some(id));
                    report.entities += 1;
                    report.placeholders.push(n.clone());
                    id
                }
            };
        }
        let p = predicate_name(&r.relation_type);
        if preds_done.insert(p.clone()) {
            ensure_predicate(w, &p, &r.relation_type)?;
        }
        let (s, o) = (ElemRef::Concept(ends[0]), ElemRef::Concept(ends[1]));
        if w.prop_by_spo(s, &p, o)?.is_some() {
            report.already_present += 1;
        } else {
            let mut meta = Map::new();
            meta.insert("relation_type".into(), json!(r.relation_type));
            meta.insert(
                "created_at".into(),
                json!(r.created_at.clone().unwrap_or_else(|| now.to_string())),
            );
            meta.insert("version".into(), json!(r.version.unwrap_or(1)));
            add_link(w, s, &p, o, meta)?;
            report.relations += 1;
        }
        done += 1;
        if done.is_multiple_of(1000) {
            progress(done);
        }
    }
    progress(done);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_types_become_upper_camel_case() {
        assert_eq!(type_name("person"), "Person");
        assert_eq!(type_name("software project"), "SoftwareProject");
        assert_eq!(type_name("e-mail address"), "EMailAddress");
        assert_eq!(type_name("camelCase thing"), "CamelCaseThing");
        assert_eq!(type_name("3d model"), "Type3dModel");
        assert_eq!(type_name("  "), "Entity");
        assert_eq!(type_name("人物"), "人物");
    }

    #[test]
    fn relation_types_become_snake_case() {
        assert_eq!(predicate_name("works at"), "works_at");
        assert_eq!(predicate_name("worksAt"), "works_at");
        assert_eq!(predicate_name("Is-Part-Of"), "is_part_of");
        assert_eq!(predicate_name("knows"), "knows");
        assert_eq!(predicate_name(""), "related_to");
    }
}

/// The names of the memory tools that only read.
pub const READ_ONLY_TOOLS: [&str; 3] = ["read_graph", "search_nodes", "open_nodes"];

/// The names of every memory tool.
pub const TOOLS: [&str; 11] = [
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
    "update_entities",
    "update_relations",
];

fn arg<T: serde::de::DeserializeOwned>(args: &Value, key: &str) -> Result<T, KipError> {
    let v = args.get(key).cloned().ok_or_else(|| {
        KipError::new(
            ErrorCode::InvalidSyntax,
            format!("missing argument `{key}`"),
        )
        .with_hint("check the tool's input schema")
    })?;
    serde_json::from_value(v).map_err(|e| {
        KipError::new(
            ErrorCode::InvalidValueType,
            format!("invalid argument `{key}`: {e}"),
        )
        .with_hint("check the tool's input schema")
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObservationItem {
    entity_name: String,
    #[serde(default)]
    contents: Vec<String>,
    #[serde(default)]
    observations: Vec<String>,
}

/// Runs a memory tool by name against a nexus: writes in one transaction, reads on a
/// snapshot. Returns the structured result.
pub fn call(nexus: &crate::Nexus, name: &str, args: &Value) -> Result<Value, KipError> {
    let now = now();
    // The reading tools answer at most the response limit of a KIP request.
    let max = nexus.limits().max_response_bytes;
    match name {
        "read_graph" => nexus.read(|r| read_graph_within(r, max)),
        "search_nodes" => {
            let q: String = arg(args, "query")?;
            nexus.read(|r| search_nodes_within(r, &q, max))
        }
        "open_nodes" => {
            let names: Vec<String> = arg(args, "names")?;
            nexus.read(|r| open_nodes_within(r, &names, max))
        }
        "create_entities" => {
            let v: Vec<EntityInput> = arg(args, "entities")?;
            nexus.write(|w| create_entities(w, &v, &now), false)
        }
        "create_relations" => {
            let v: Vec<RelationInput> = arg(args, "relations")?;
            nexus.write(|w| create_relations(w, &v, &now), false)
        }
        "add_observations" => {
            let v: Vec<ObservationItem> = arg(args, "observations")?;
            let items: Vec<(String, Vec<String>)> =
                v.into_iter().map(|o| (o.entity_name, o.contents)).collect();
            nexus.write(|w| add_observations(w, &items, &now), false)
        }
        "delete_entities" => {
            let v: Vec<String> = arg(args, "entityNames")?;
            nexus.write(|w| delete_entities(w, &v), false)
        }
        "delete_observations" => {
            let v: Vec<ObservationItem> = arg(args, "deletions")?;
            let items: Vec<(String, Vec<String>)> = v
                .into_iter()
                .map(|o| (o.entity_name, o.observations))
                .collect();
            nexus.write(|w| delete_observations(w, &items, &now), false)
        }
        "delete_relations" => {
            let v: Vec<RelationInput> = arg(args, "relations")?;
            nexus.write(|w| delete_relations(w, &v), false)
        }
        "update_entities" => {
            let v: Vec<EntityUpdate> = arg(args, "entities")?;
            nexus.write(|w| update_entities(w, &v, &now), false)
        }
        "update_relations" => {
            let v: Vec<RelationInput> = arg(args, "relations")?;
            nexus.write(|w| update_relations(w, &v, &now), false)
        }
        other => Err(KipError::new(
            ErrorCode::InvalidSyntax,
            format!("unknown memory tool {other}"),
        )),
    }
}

/// The text content the official server returns for a tool's result.
pub fn result_text(name: &str, result: &Value) -> String {
    let inner = match name {
        "create_entities" | "update_entities" => &result["entities"],
        "create_relations" | "update_relations" => &result["relations"],
        "add_observations" => &result["results"],
        "delete_entities" | "delete_observations" | "delete_relations" => {
            return result["message"].as_str().unwrap_or_default().to_string();
        }
        _ => result,
    };
    serde_json::to_string_pretty(inner).unwrap_or_default()
}
