//! The Knowledge Graph Memory Server tool set over the KIP graph (drop-in for the
//! official MCP memory server, plus the fork's `update_entities` / `update_relations`
//! and `createdAt` / `version`).
//!
//! Mapping (docs/memory-server.md):
//! - An entity is a concept whose type is the entityType as an UpperCamelCase
//!   identifier (registered on first use as a `$ConceptType` in the `Unsorted` domain),
//!   whose name is the entity name and whose `observations` attribute holds the
//!   observations. Metadata keeps the original `entity_type`, `created_at` and `version`.
//!   Concepts written through KIP are entities too: [`entity_type`] and
//!   [`observations`] are the one mapping rule every reading tool applies (the
//!   descriptive attributes SEARCH reads are the observations).
//! - A relation end that names no entity is a placeholder ([`is_placeholder`]): its
//!   relations are kept, as the official server keeps them, and it is in no entity list.
//! - A relation is a link whose predicate is the relationType in `snake_case`
//!   (registered on first use), with the original `relation_type`, `created_at` and
//!   `version` in metadata.
//! - Entity names are unique for these tools, as in the original; a name or relation
//!   the official server would hold twice (sent twice in one call) is a copy carried
//!   by the concept or link ([`copies`]).
//!
//! Every tool call is one transaction: a call that fails writes nothing. The tools
//! write through the same primitives as `UPSERT` and `DELETE` (the KML `Writer`, with
//! the `MemoryTools` privilege), so every rule that guards a KIP write guards theirs.

use crate::kml::primitives::{Privilege, Writer};
use crate::schema::{CONCEPT_TYPE, PROPOSITION_TYPE};
use crate::store::{ConceptRecord, ElemRef, GraphRead, GraphWrite, PropRecord, DOMAIN_PREDICATE};
use kip_lang::{ErrorCode, KipError};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};

pub mod copies;
mod dispatch;
mod jsonl;
mod read;
mod tools;
mod write;

pub use copies::COPIES;
use copies::*;
pub use dispatch::*;
pub use jsonl::*;
pub use read::*;
pub use tools::*;
pub use write::*;

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
    crate::time::now_text()
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
    Ok(g.concept_by_key("Domain", "Unsorted")?)
}

fn system_meta() -> Map<String, Value> {
    json!({"source": "memory-server-tools", "author": "$system"})
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// Registers a type definition (`$ConceptType` or `$PropositionType`) if missing, and
/// files it in `domain` (the `Unsorted` domain when `None`).
fn ensure_definition(
    w: &mut Writer,
    meta_type: &str,
    name: &str,
    attributes: Value,
    domain: Option<u64>,
) -> Result<(), KipError> {
    if w.graph().concept_by_key(meta_type, name)?.is_some() {
        return Ok(());
    }
    let mut rec = ConceptRecord {
        concept_type: meta_type.into(),
        name: name.into(),
        attributes: attributes.as_object().cloned().unwrap_or_default(),
        metadata: system_meta(),
    };
    let id = w.create_concept(&mut rec)?;
    let domain = match domain {
        Some(d) => Some(d),
        None => unsorted(w.graph())?,
    };
    if let Some(d) = domain {
        w.upsert_link(
            ElemRef::Concept(id),
            DOMAIN_PREDICATE,
            ElemRef::Concept(d),
            &Map::new(),
            &system_meta(),
        )?;
    }
    Ok(())
}

/// Registers the concept type of an entityType if missing (filed in `domain`, else
/// `Unsorted`).
fn ensure_type(
    w: &mut Writer,
    t: &str,
    original: &str,
    domain: Option<u64>,
) -> Result<(), KipError> {
    let description =
        format!("Entities of type '{original}' (registered by the memory-server tools).");
    ensure_definition(
        w,
        CONCEPT_TYPE,
        t,
        json!({ "description": description }),
        domain,
    )
}

/// Registers the predicate of a relationType if missing (filed in `domain`, else
/// `Unsorted`).
fn ensure_predicate(
    w: &mut Writer,
    p: &str,
    original: &str,
    domain: Option<u64>,
) -> Result<(), KipError> {
    let description =
        format!("Relations of type '{original}' (registered by the memory-server tools).");
    ensure_definition(
        w,
        PROPOSITION_TYPE,
        p,
        json!({ "description": description, "subject_types": ["*"], "object_types": ["*"] }),
        domain,
    )
}

/// Whether the memory-server tools see a concept as an entity: every concept of the
/// graph except the system's own structure (type and predicate definitions, domains,
/// the `$`-named actors). Concepts written through KIP are entities too, so an agent
/// using both tool sets sees one memory. Placeholders are entities that are not
/// listed (see [`is_placeholder`]).
fn is_entity(c: &ConceptRecord) -> bool {
    if matches!(c.attributes.get(OBSERVATIONS), Some(Value::Array(_))) {
        return true;
    }
    !(c.concept_type == CONCEPT_TYPE
        || c.concept_type == PROPOSITION_TYPE
        || c.concept_type == "Domain"
        || c.name.starts_with('$'))
}

/// The metadata key that marks a placeholder entity.
pub const PLACEHOLDER: &str = "placeholder";

/// Whether a concept is a placeholder: the stand-in `create_relations` or the JSONL
/// import creates for a relation end that names no entity (the official server stores
/// such a relation as it is). Its relations are answered like any other; the
/// placeholder itself is in no entity list, is not found by `add_observations`,
/// `delete_observations` or `update_entities` (as in the official server, where the
/// entity does not exist), is not exported, and becomes an ordinary entity when an
/// entity of its name is created.
pub fn is_placeholder(c: &ConceptRecord) -> bool {
    c.metadata.get(PLACEHOLDER) == Some(&Value::Bool(true))
}

/// Whether the tools list a concept as an entity (an entity, not a placeholder).
fn is_listed(c: &ConceptRecord) -> bool {
    is_entity(c) && !is_placeholder(c)
}

/// The entity with this name: the one concept the tools see with that name. Names are
/// unique per type in KIP, so two concepts of different types may share one: the name
/// is then ambiguous, and the tools say so (KIP_3003) instead of guessing or creating
/// a third. Placeholders are not entities here (see [`find_end`]).
pub fn find_entity(
    g: &dyn GraphRead,
    name: &str,
) -> Result<Option<(u64, ConceptRecord)>, KipError> {
    lookup(g, name, false)
}

/// The concept a relation end with this name refers to: the entity, or else the
/// placeholder of that name.
pub fn find_end(g: &dyn GraphRead, name: &str) -> Result<Option<(u64, ConceptRecord)>, KipError> {
    lookup(g, name, true)
}

fn lookup(
    g: &dyn GraphRead,
    name: &str,
    placeholders: bool,
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
    // An entity wins over a placeholder of the same name.
    if !placeholders || found.iter().any(|(_, c)| !is_placeholder(c)) {
        found.retain(|(_, c)| !is_placeholder(c));
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

/// The attributes whose values an entity shows as observations: the descriptive
/// attributes KIP's SEARCH indexes, in that order (`description`, `observations`,
/// `aliases`, ...).
pub use crate::meta::text::DESCRIPTIVE_ATTRIBUTES;

/// Attributes whose values are shown as they are; the other descriptive attributes'
/// values are shown as `attribute: value`.
const SHOWN_BARE: [&str; 2] = ["description", OBSERVATIONS];

fn strings(v: Option<&Value>) -> Vec<&str> {
    match v {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn shown(attribute: &str, value: &str) -> String {
    if SHOWN_BARE.contains(&attribute) {
        value.to_string()
    } else {
        format!("{attribute}: {value}")
    }
}

/// The observations an entity shows: the string values (and strings of array values)
/// of the concept's descriptive attributes ([`DESCRIPTIVE_ATTRIBUTES`], the text KIP's
/// SEARCH reads), in that order, `description` and `observations` as they are, the
/// others as `attribute: value`. The `observations` attribute is shown as stored
/// (repeats included, as the official server keeps them); a value of another attribute
/// is left out when the same text is shown already. An entity the tools wrote has only
/// its `observations`; a concept written through KIP shows its description. This is
/// the one mapping `read_graph`, `open_nodes`, `search_nodes` and the export read.
pub fn observations(c: &ConceptRecord) -> Vec<String> {
    let stored = stored_observations(c);
    let mut out: Vec<String> = Vec::new();
    for k in DESCRIPTIVE_ATTRIBUTES {
        if k == OBSERVATIONS {
            out.extend(stored.iter().cloned());
            continue;
        }
        for v in strings(c.attributes.get(k)) {
            let o = shown(k, v);
            if !out.contains(&o) && !stored.contains(&o) {
                out.push(o);
            }
        }
    }
    out
}

/// The `observations` attribute itself (what `add_observations` appends to).
fn stored_observations(c: &ConceptRecord) -> Vec<String> {
    strings(c.attributes.get(OBSERVATIONS))
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// Removes from the concept's descriptive attributes every value shown as one of
/// `remove` (an observation shown from `description` removes the description; one
/// shown as `aliases: X` removes `X` from `aliases`). True when something changed.
fn remove_observations(c: &mut ConceptRecord, remove: &dyn Fn(&str) -> bool) -> bool {
    let mut changed = false;
    for k in DESCRIPTIVE_ATTRIBUTES {
        let Some(v) = c.attributes.get_mut(k) else {
            continue;
        };
        match v {
            Value::String(s) if remove(&shown(k, s)) => {
                c.attributes.remove(k);
                changed = true;
            }
            Value::String(_) => {}
            Value::Array(a) => {
                let before = a.len();
                a.retain(|x| !x.as_str().is_some_and(|s| remove(&shown(k, s))));
                changed |= a.len() != before;
            }
            _ => {}
        }
    }
    changed
}

/// The entityType an entity shows: the `entity_type` metadata the tools keep (the
/// original string), else the concept's KIP type.
pub fn entity_type(c: &ConceptRecord) -> &str {
    c.metadata
        .get("entity_type")
        .and_then(Value::as_str)
        .unwrap_or(&c.concept_type)
}

/// The tool-facing JSON of an entity: name, [`entity_type`], [`observations`], and
/// `createdAt` / `version` when the tools wrote them.
pub fn entity_json(c: &ConceptRecord) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(c.name));
    m.insert("entityType".into(), json!(entity_type(c)));
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
