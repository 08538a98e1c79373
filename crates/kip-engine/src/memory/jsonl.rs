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
    let mut w = Writer::new(w, Privilege::MemoryTools);
    let w = &mut w;
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
                let found = find_entity(w.graph(), n)?.map(|(id, _)| id);
                known.insert(n.to_string(), found);
            }
        }
    }
    let mut types_done: HashSet<String> = HashSet::new();
    let create = |w: &mut Writer,
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
        if w.graph().prop_by_spo(s, &p, o)?.is_some() {
            report.already_present += 1;
        } else {
            let mut meta = Map::new();
            meta.insert("relation_type".into(), json!(r.relation_type));
            meta.insert(
                "created_at".into(),
                json!(r.created_at.clone().unwrap_or_else(|| now.to_string())),
            );
            meta.insert("version".into(), json!(r.version.unwrap_or(1)));
            w.upsert_link(s, &p, o, &Map::new(), &meta)?;
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
