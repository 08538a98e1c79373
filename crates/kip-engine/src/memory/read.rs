//! The tools that read (`read_graph`, `search_nodes`, `open_nodes`), bounded by the
//! response size ([`Budget`]).

use super::*;

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

    /// An entity as listed (its JSON: name, entityType, observations).
    fn entity(&mut self, e: &Value) -> Result<(), KipError> {
        let text = |k: &str| e[k].as_str().map_or(0, str::len);
        let obs: usize = e[OBSERVATIONS]
            .as_array()
            .into_iter()
            .flatten()
            .map(|o| o.as_str().map_or(0, str::len) + 3)
            .sum();
        self.spend(64 + text("name") + text("entityType") + obs)
    }

    /// A relation as listed.
    fn relation(&mut self, r: &Value) -> Result<(), KipError> {
        let text = |k: &str| r[k].as_str().map_or(0, str::len);
        self.spend(96 + text("from") + text("to") + text("relationType"))
    }
}

/// Entities or relations in the order the tools list them (creation order: see
/// [`copies`](super::copies) for the positions of copies).
fn in_order(mut listed: Vec<Listed>) -> Vec<Value> {
    listed.sort_by_key(|(at, _)| *at);
    listed.into_iter().map(|(_, v)| v).collect()
}

/// The names of every relation end (entities and placeholders), by concept id.
type Names = HashMap<u64, String>;

/// Every entity the tools list (copies included), in creation order, and the names of
/// every relation end (placeholders included).
fn all_entities_within(
    g: &dyn GraphRead,
    budget: &mut Budget,
) -> Result<(Vec<Value>, Names), KipError> {
    let mut ids = Vec::new();
    g.scan_concepts(&mut |id| {
        ids.push(id);
        Ok(true)
    })?;
    let mut listed = Vec::new();
    let mut names = HashMap::new();
    for id in ids {
        if let Some(c) = g.concept(id)? {
            if is_entity(&c) {
                names.insert(id, c.name.clone());
                if !is_placeholder(&c) {
                    for (at, e) in entity_entries(id, &c) {
                        budget.entity(&e)?;
                        listed.push((at, e));
                    }
                }
            }
        }
    }
    Ok((in_order(listed), names))
}

/// Relations between entities where `keep(from_id, to_id)` (copies included), in
/// creation order.
fn relations_where(
    g: &dyn GraphRead,
    names: &Names,
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
            for (at, r) in relation_entries(id, from, to, &p) {
                budget.relation(&r)?;
                out.push((at, r));
            }
        }
    }
    Ok(in_order(out))
}

/// `read_graph`: every entity and every relation (placeholders are not listed; their
/// relations are).
pub fn read_graph(g: &dyn GraphRead) -> Result<Value, KipError> {
    read_graph_within(g, usize::MAX)
}

/// [`read_graph`] answering at most about `max_bytes` of JSON (`KIP_4002` beyond).
pub fn read_graph_within(g: &dyn GraphRead, max_bytes: usize) -> Result<Value, KipError> {
    let mut budget = Budget::new("read_graph", max_bytes);
    let (entities, names) = all_entities_within(g, &mut budget)?;
    let relations = relations_where(g, &names, &|_, _| true, &mut budget)?;
    Ok(json!({"entities": entities, "relations": relations}))
}

/// The entities (copies included) whose listed JSON satisfies `keep`, and every
/// relation touching the name of one of them (in creation order), found through the
/// links of the concepts that carry them. Placeholders are never selected; a relation
/// from a selected entity to one is answered.
fn subgraph(
    g: &dyn GraphRead,
    keep: &dyn Fn(&Value) -> bool,
    budget: &mut Budget,
) -> Result<Value, KipError> {
    let mut ids = Vec::new();
    g.scan_concepts(&mut |id| {
        ids.push(id);
        Ok(true)
    })?;
    let mut selected: Vec<Listed> = Vec::new();
    let mut names: HashMap<u64, Option<String>> = HashMap::new();
    for id in ids {
        if let Some(c) = g.concept(id)? {
            if !is_listed(&c) {
                continue;
            }
            let mut any = false;
            for (at, e) in entity_entries(id, &c) {
                if keep(&e) {
                    budget.entity(&e)?;
                    selected.push((at, e));
                    any = true;
                }
            }
            if any {
                names.insert(id, Some(c.name.clone()));
            }
        }
    }
    let mut links: Vec<u64> = Vec::new();
    for id in names.keys() {
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
        for (at, r) in relation_entries(l, &from, &to, &p) {
            budget.relation(&r)?;
            relations.push((at, r));
        }
    }
    Ok(json!({
        "entities": in_order(selected),
        "relations": in_order(relations),
    }))
}

/// `search_nodes`: a case-insensitive substring match of the whole query on name,
/// entityType and observations (as [`entity_json`] shows them); relations touching a
/// match.
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
        &|e| {
            let has = |v: &Value| v.as_str().is_some_and(|t| t.to_lowercase().contains(&q));
            has(&e["name"])
                || has(&e["entityType"])
                || e[OBSERVATIONS].as_array().into_iter().flatten().any(has)
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
        &|e| e["name"].as_str().is_some_and(|n| set.contains(n)),
        &mut Budget::new("open_nodes", max_bytes),
    )
}
