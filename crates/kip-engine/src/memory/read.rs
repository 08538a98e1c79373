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

    fn entity(&mut self, c: &ConceptRecord) -> Result<(), KipError> {
        let obs: usize = observations(c).iter().map(|o| o.len() + 3).sum();
        self.spend(64 + c.name.len() + entity_type(c).len() + obs)
    }
}

/// The entities of the graph, in creation order.
struct Entities {
    /// The entities the tools list, with their ids.
    listed: Vec<(u64, ConceptRecord)>,
    /// The name of every relation end (placeholders included), by id.
    names: HashMap<u64, String>,
}

/// Every entity, in creation order (see [`Entities`]).
fn all_entities_within(g: &dyn GraphRead, budget: &mut Budget) -> Result<Entities, KipError> {
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
                    budget.entity(&c)?;
                    listed.push((id, c));
                }
            }
        }
    }
    Ok(Entities { listed, names })
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

/// `read_graph`: every entity and every relation (placeholders are not listed; their
/// relations are).
pub fn read_graph(g: &dyn GraphRead) -> Result<Value, KipError> {
    read_graph_within(g, usize::MAX)
}

/// [`read_graph`] answering at most about `max_bytes` of JSON (`KIP_4002` beyond).
pub fn read_graph_within(g: &dyn GraphRead, max_bytes: usize) -> Result<Value, KipError> {
    let mut budget = Budget::new("read_graph", max_bytes);
    let Entities {
        listed: entities,
        names,
    } = all_entities_within(g, &mut budget)?;
    let relations = relations_where(g, &names, &|_, _| true, &mut budget)?;
    Ok(
        json!({"entities": entities.iter().map(|(_, c)| entity_json(c)).collect::<Vec<_>>(), "relations": relations}),
    )
}

/// The entities that satisfy `keep` and every relation touching one of them (in
/// creation order), found through the selected entities' own links. Placeholders are
/// never selected; a relation from a selected entity to one is answered.
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
            if is_listed(&c) && keep(&c) {
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
        &|c| {
            c.name.to_lowercase().contains(&q)
                || entity_type(c).to_lowercase().contains(&q)
                || observations(c)
                    .iter()
                    .any(|o| o.to_lowercase().contains(&q))
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
