//! The memory server's JSONL file: parsing, export, and the lossless import
//! (relations to entities the file never defines get placeholder entities).

use super::*;

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

/// Writes the memory graph as JSONL (fork format: with createdAt and version): what
/// `read_graph` answers, so placeholders (relation ends no entity has) are left out
/// and their relations written, and a file moved over and exported again holds what
/// it held.
pub fn export_jsonl(g: &dyn GraphRead) -> Result<String, KipError> {
    let graph = read_graph(g)?;
    let mut out = String::new();
    for e in graph["entities"].as_array().into_iter().flatten() {
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

/// The `entityType` of a placeholder: the entity `create_relations` or an import
/// creates for a relation end that names no entity (the official server accepts and
/// stores such relations).
pub const PLACEHOLDER_TYPE: &str = "unknown";

/// The domain the JSONL import files the entities it creates in (and the types and
/// predicates it registers), so that a memory moved over starts healthy: the health
/// report counts a concept without a domain as an orphan, and `Unsorted` members as a
/// backlog for the sleep cycle. The domain itself is filed in `CoreSchema`, as
/// `Unsorted` and `Archived` are.
pub const IMPORT_DOMAIN: &str = "MemoryServerImport";

/// The import's domain, created (and filed in `CoreSchema`) on first use.
fn import_domain(w: &mut Writer) -> Result<u64, KipError> {
    if let Some(id) = w.graph().concept_by_key("Domain", IMPORT_DOMAIN)? {
        return Ok(id);
    }
    let mut rec = ConceptRecord {
        concept_type: "Domain".into(),
        name: IMPORT_DOMAIN.into(),
        attributes: json!({"description": "Entities, types and relation types moved over from a Knowledge Graph Memory Server JSONL file (kip import --memory-jsonl, MEMORY_FILE_PATH); a sleep cycle may refile them into topic domains."})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        metadata: system_meta(),
    };
    let id = w.create_concept(&mut rec)?;
    if let Some(core) = w.graph().concept_by_key("Domain", "CoreSchema")? {
        file_in(w, id, core)?;
    }
    Ok(id)
}

/// Files a concept in a domain (`belongs_to_domain`).
fn file_in(w: &mut Writer, id: u64, domain: u64) -> Result<(), KipError> {
    w.upsert_link(
        ElemRef::Concept(id),
        DOMAIN_PREDICATE,
        ElemRef::Concept(domain),
        &Map::new(),
        &system_meta(),
    )?;
    Ok(())
}

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
/// that end (see [`PLACEHOLDER_TYPE`]), so no line of the file is dropped; an entity
/// of the file whose name only a placeholder has takes the placeholder's place.
///
/// The memory starts healthy: every entity the import creates, and every type and
/// predicate it registers, is filed in the [`IMPORT_DOMAIN`], and every relation has
/// `observed_at` set to its `createdAt` (see `relation_meta`), so the sleep cycle's
/// decay counts from the relation's last use, not from the import.
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
    let mut w = Writer::new(w, Privilege::MemoryTools);
    let w = &mut w;
    let mut report = ImportReport::default();
    // Every name the file mentions, resolved once against the graph: `Some((id,
    // placeholder))` for an entity or a placeholder.
    let mut known: HashMap<String, Option<(u64, bool)>> = HashMap::new();
    for item in items {
        let names: [&str; 2] = match item {
            JsonlItem::Entity(e) => [&e.name, &e.name],
            JsonlItem::Relation(r) => [&r.from, &r.to],
        };
        for n in names {
            if !known.contains_key(n) {
                let found = find_end(w.graph(), n)?.map(|(id, c)| (id, is_placeholder(&c)));
                known.insert(n.to_string(), found);
            }
        }
    }
    if items.is_empty() {
        progress(0);
        return Ok(report);
    }
    let domain = import_domain(w)?;
    let mut types_done: HashSet<String> = HashSet::new();
    // Names this import created: a name on two lines is two entities, as the
    // official server holds them (a copy on the first, see `copies`).
    let mut made: HashMap<String, u64> = HashMap::new();
    let mut done = 0usize;
    for item in items {
        if let JsonlItem::Entity(e) = item {
            if let Some(&id) = made.get(&e.name) {
                add_entity_copy(w, id, e, now)?;
                report.entities += 1;
                done += 1;
                continue;
            }
            match known.get(&e.name).copied().flatten() {
                Some((_, false)) => report.already_present += 1,
                found => {
                    let t = type_name(&e.entity_type);
                    if types_done.insert(t.clone()) {
                        ensure_type(w, &t, &e.entity_type, Some(domain))?;
                    }
                    let replacing = match found {
                        Some((id, _)) => w.graph().concept(id)?.map(|c| (id, c)),
                        None => None,
                    };
                    let (id, _) = write_entity(w, e, now, false, replacing)?;
                    file_in(w, id, domain)?;
                    known.insert(e.name.clone(), Some((id, false)));
                    made.insert(e.name.clone(), id);
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
    let mut relations_made = HashSet::new();
    for item in items {
        let JsonlItem::Relation(r) = item else {
            continue;
        };
        let mut ends = [0u64; 2];
        for (slot, n) in [&r.from, &r.to].into_iter().enumerate() {
            ends[slot] = match known.get(n).copied().flatten() {
                Some((id, _)) => id,
                None => {
                    let id = create_placeholder(w, n, r.created_at.clone(), now, Some(domain))?;
                    file_in(w, id, domain)?;
                    known.insert(n.clone(), Some((id, true)));
                    report.entities += 1;
                    report.placeholders.push(n.clone());
                    id
                }
            };
        }
        let p = predicate_name(&r.relation_type);
        if preds_done.insert(p.clone()) {
            ensure_predicate(w, &p, &r.relation_type, Some(domain))?;
        }
        let (s, o) = (ElemRef::Concept(ends[0]), ElemRef::Concept(ends[1]));
        match store_relation(w, s, &p, o, r, now, &mut relations_made)? {
            Some(_) => report.relations += 1,
            None => report.already_present += 1,
        }
        done += 1;
        if done.is_multiple_of(1000) {
            progress(done);
        }
    }
    progress(done);
    Ok(report)
}
