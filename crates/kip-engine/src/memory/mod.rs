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
//! Every tool call is one transaction: a call that fails writes nothing. The tools
//! write through the same primitives as `UPSERT` and `DELETE` ([`Writer`], with
//! [`Privilege::MemoryTools`]), so every rule that guards a KIP write guards theirs.

use crate::kml::primitives::{Privilege, Writer};
use crate::schema::{CONCEPT_TYPE, PROPOSITION_TYPE};
use crate::store::{ConceptRecord, ElemRef, GraphRead, GraphWrite, PropRecord, DOMAIN_PREDICATE};
use kip_lang::{ErrorCode, KipError};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};

mod dispatch;
mod jsonl;
mod read;
mod tools;
mod write;

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
    Ok(g.concept_by_key("Domain", "Unsorted")?)
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
    w: &mut Writer,
    meta_type: &str,
    name: &str,
    attributes: Value,
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
    if let Some(d) = unsorted(w.graph())? {
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

/// Registers the concept type of an entityType if missing.
fn ensure_type(w: &mut Writer, t: &str, original: &str) -> Result<(), KipError> {
    let description =
        format!("Entities of type '{original}' (registered by the memory-server tools).");
    ensure_definition(w, CONCEPT_TYPE, t, json!({ "description": description }))
}

/// Registers the predicate of a relationType if missing.
fn ensure_predicate(w: &mut Writer, p: &str, original: &str) -> Result<(), KipError> {
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
