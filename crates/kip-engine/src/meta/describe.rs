//! The six `DESCRIBE` forms (spec §5.1, DECISIONS.md item 20).
//!
//! - `PRIMER`: `{identity, domain_map, total_domains}`; bounded in size whatever the
//!   graph size (at most [`PRIMER_DOMAINS`] domains, [`KEY_ITEMS`] key concepts and key
//!   predicates each, computed from at most [`MEMBER_SAMPLE`] members per domain).
//! - `DOMAINS`: every domain `{name, description, member_count, ...}`; member counts are
//!   maintained statistics, not scans.
//! - `CONCEPT TYPES` / `PROPOSITION TYPES`: names in alphabetical order, paginated.
//! - `CONCEPT TYPE "X"` / `PROPOSITION TYPE "p"`: the definition node, or `KIP_2001`
//!   with a did-you-mean hint.

use crate::kml::text;
use crate::kql::result::{decode_cursor, encode_cursor, fnv1a, Anchor};
use crate::kql::QueryLimits;
use crate::outcome::Outcome;
use crate::schema::{self, CONCEPT_TYPE, PROPOSITION_TYPE};
use crate::store::{ElemRef, GraphRead, Stat, DOMAIN_PREDICATE};
use kip_lang::ast::{Describe, DescribeTarget, Slot, StrSlot};
use kip_lang::KipError;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// Domains listed in the primer's domain map.
pub const PRIMER_DOMAINS: usize = 50;
/// Key concepts and key predicates listed per domain.
pub const KEY_ITEMS: usize = 8;
/// Members examined per domain to find its key concepts and predicates.
pub const MEMBER_SAMPLE: usize = 100;
/// Links examined per member to measure its connectedness.
const DEGREE_CAP: usize = 100;

/// Executes a DESCRIBE command.
pub fn describe(
    g: &dyn GraphRead,
    d: &Describe,
    limits: &QueryLimits,
) -> Result<Outcome, KipError> {
    match &d.target {
        DescribeTarget::Primer => Ok(Outcome::ok(primer(g)?)),
        DescribeTarget::Domains => Ok(Outcome::ok(Value::Array(
            domains(g)?.into_iter().map(|d| d.summary).collect(),
        ))),
        DescribeTarget::ConceptTypes { limit, cursor } => {
            type_list(g, CONCEPT_TYPE, limit, cursor, limits)
        }
        DescribeTarget::PropositionTypes { limit, cursor } => {
            type_list(g, PROPOSITION_TYPE, limit, cursor, limits)
        }
        DescribeTarget::ConceptType(name) => definition(g, CONCEPT_TYPE, name),
        DescribeTarget::PropositionType(name) => definition(g, PROPOSITION_TYPE, name),
    }
}

fn element(id: u64, c: &crate::store::ConceptRecord) -> Value {
    json!({
        "id": ElemRef::Concept(id).id_string(),
        "type": c.concept_type,
        "name": c.name,
        "attributes": c.attributes,
        "metadata": c.metadata,
    })
}

fn definition(g: &dyn GraphRead, meta: &str, name: &StrSlot) -> Result<Outcome, KipError> {
    let name = text(name)?;
    let Some(id) = g.concept_by_key(meta, name)? else {
        if meta == CONCEPT_TYPE {
            schema::require_concept_type(g, name)?;
        } else {
            schema::require_predicate(g, name)?;
        }
        return Err(KipError::internal("definition vanished during DESCRIBE"));
    };
    let c = g
        .concept(id)?
        .ok_or_else(|| KipError::internal("definition vanished during DESCRIBE"))?;
    Ok(Outcome::ok(element(id, &c)))
}

fn type_list(
    g: &dyn GraphRead,
    meta: &str,
    limit: &Option<Slot<u64>>,
    cursor: &Option<StrSlot>,
    limits: &QueryLimits,
) -> Result<Outcome, KipError> {
    let mut names = schema::registered_names(g, meta)?;
    names.sort();
    let fingerprint = fnv1a(meta);
    // A keyset cursor: the next page starts after the last name of the previous one,
    // so a type added or removed in between shifts nothing.
    let start = match cursor {
        Some(c) => match decode_cursor(text(c)?, fingerprint)? {
            Anchor::Sorted { keys, .. } => {
                let last = keys
                    .first()
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                names.partition_point(|n| n.as_str() <= last.as_str())
            }
            Anchor::Root { .. } => {
                return Err(KipError::syntax(
                    "invalid CURSOR token: it was not issued for this DESCRIBE",
                )
                .with_hint("re-run the DESCRIBE without CURSOR"))
            }
        },
        None => 0,
    };
    let page = limits.page(limit.as_ref())?;
    let end = start.saturating_add(page).min(names.len());
    let slice = names
        .get(start..end)
        .map(<[String]>::to_vec)
        .unwrap_or_default();
    let next_cursor = (end < names.len())
        .then(|| slice.last())
        .flatten()
        .map(|last| {
            encode_cursor(
                &Anchor::Sorted {
                    keys: vec![json!(last)],
                    id: 0,
                    hash: 0,
                },
                fingerprint,
            )
        });
    Ok(Outcome::Ok {
        result: json!(slice),
        next_cursor,
    })
}

/// A domain with its summary.
pub struct DomainInfo {
    /// The domain's concept number.
    pub id: u64,
    /// `{name, description, member_count, ...}`
    pub summary: Value,
}

/// Every domain, in creation order, with maintained member counts.
pub fn domains(g: &dyn GraphRead) -> Result<Vec<DomainInfo>, KipError> {
    let mut ids = Vec::new();
    g.scan_type("Domain", &mut |id| {
        ids.push(id);
        Ok(true)
    })?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let Some(c) = g.concept(id)? else { continue };
        let mut m = Map::new();
        m.insert("name".into(), json!(c.name));
        m.insert(
            "description".into(),
            c.attributes
                .get("description")
                .cloned()
                .unwrap_or(Value::Null),
        );
        m.insert(
            "member_count".into(),
            json!(g.stat(Stat::Domain(ElemRef::Concept(id)))?),
        );
        for k in ["display_hint", "scope_note", "aliases"] {
            if let Some(v) = c.attributes.get(k) {
                m.insert(k.into(), v.clone());
            }
        }
        out.push(DomainInfo {
            id,
            summary: Value::Object(m),
        });
    }
    Ok(out)
}

/// A compact summary of `$self`.
fn identity(g: &dyn GraphRead) -> Result<Value, KipError> {
    let Some(id) = g.concept_by_key("Person", "$self")? else {
        return Ok(Value::Null);
    };
    let Some(c) = g.concept(id)? else {
        return Ok(Value::Null);
    };
    let a = &c.attributes;
    let mut m = Map::new();
    m.insert("id".into(), json!(ElemRef::Concept(id).id_string()));
    m.insert(
        "name".into(),
        a.get("name")
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or_else(|| json!(c.name)),
    );
    for k in [
        "handle",
        "person_class",
        "persona",
        "core_mission",
        "identity_narrative",
        "cognitive_state",
        "status",
    ] {
        if let Some(v) = a.get(k).filter(|v| !v.is_null()) {
            m.insert(k.into(), v.clone());
        }
    }
    let directives: Vec<Value> = a
        .get("core_directives")
        .and_then(Value::as_array)
        .map(|ds| {
            ds.iter()
                .filter_map(|d| {
                    d.get("name")
                        .cloned()
                        .or_else(|| d.as_str().map(|s| json!(s)))
                })
                .collect()
        })
        .unwrap_or_default();
    m.insert("core_directives".into(), Value::Array(directives));
    // The SEARCH modes this engine really runs (DECISIONS.md item 32): without an
    // embedding model, "semantic" and "hybrid" run as "keyword".
    m.insert("search_modes".into(), json!(["keyword"]));
    for k in ["capabilities", "values", "strengths"] {
        if let Some(v) = a
            .get(k)
            .filter(|v| v.as_array().is_some_and(|x| !x.is_empty()))
        {
            m.insert(k.into(), v.clone());
        }
    }
    Ok(Value::Object(m))
}

/// The Cognitive Primer.
pub fn primer(g: &dyn GraphRead) -> Result<Value, KipError> {
    let all = domains(g)?;
    let total = all.len();
    let mut map = Vec::new();
    for d in all.into_iter().take(PRIMER_DOMAINS) {
        let dom = ElemRef::Concept(d.id);
        let mut members = Vec::new();
        g.scan_in(dom, Some(DOMAIN_PREDICATE), &mut |_, m, _| {
            members.push(m);
            Ok(members.len() < MEMBER_SAMPLE)
        })?;
        let mut degrees: Vec<(usize, String, String)> = Vec::new();
        let mut preds: HashMap<String, usize> = HashMap::new();
        for m in members {
            let ElemRef::Concept(n) = m else { continue };
            let Some(c) = g.concept(n)? else { continue };
            let mut degree = 0usize;
            for outgoing in [true, false] {
                let mut cb = |p: &str, _: ElemRef, _: u64| {
                    degree += 1;
                    if p != DOMAIN_PREDICATE {
                        *preds.entry(p.to_string()).or_default() += 1;
                    }
                    Ok(degree < DEGREE_CAP)
                };
                if outgoing {
                    g.scan_out(m, None, &mut cb)?;
                } else {
                    g.scan_in(m, None, &mut cb)?;
                }
            }
            degrees.push((degree, c.concept_type.clone(), c.name.clone()));
        }
        degrees.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.2.cmp(&b.2)));
        let key_concepts: Vec<Value> = degrees
            .into_iter()
            .take(KEY_ITEMS)
            .map(|(_, t, n)| json!({"type": t, "name": n}))
            .collect();
        let mut preds: Vec<(String, usize)> = preds.into_iter().collect();
        preds.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let key_predicates: Vec<Value> = preds
            .into_iter()
            .take(KEY_ITEMS)
            .map(|(p, _)| json!(p))
            .collect();
        let mut entry = d.summary;
        if let Value::Object(m) = &mut entry {
            m.insert("key_concepts".into(), Value::Array(key_concepts));
            m.insert("key_predicates".into(), Value::Array(key_predicates));
        }
        map.push(entry);
    }
    Ok(json!({"identity": identity(g)?, "domain_map": map, "total_domains": total}))
}
