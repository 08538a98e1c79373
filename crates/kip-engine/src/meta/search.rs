//! `SEARCH CONCEPT|PROPOSITION "term" [WITH TYPE "T"] [LIMIT n]` (spec §5.2,
//! DECISIONS.md item 21): BM25 ranking over the text index kept in the store.
//!
//! Each query term matches the same term (weight 1) and, from two characters on, the
//! terms it is a prefix of (weight 0.7, at most [`PREFIX_EXPANSION`] of them), so
//! "aspir" finds "Aspirin". A name equal to the whole query earns a bonus over any
//! description mention. Results are element objects with `metadata._score`, best first.

use super::text;
use crate::envelope::Outcome;
use crate::kml::text as lit;
use crate::kql::QueryLimits;
use crate::schema;
use crate::store::{ElemRef, GraphRead, TEXT_DOCS, TEXT_LEN};
use kip_lang::ast::{Search, SearchTarget, Slot};
use kip_lang::{ErrorCode, KipError};
use serde_json::{json, Value};
use std::collections::HashMap;

/// Default number of results.
pub const DEFAULT_LIMIT: usize = 10;
/// Most results one SEARCH returns.
pub const MAX_LIMIT: usize = 1000;
/// Most index terms one query term expands to as a prefix.
pub const PREFIX_EXPANSION: usize = 64;
const K1: f64 = 1.2;
const B: f64 = 0.75;
const PREFIX_WEIGHT: f64 = 0.7;
const EXACT_NAME_BONUS: f64 = 10.0;
const NAME_PREFIX_BONUS: f64 = 1.0;

/// Executes a SEARCH.
pub fn search(g: &dyn GraphRead, s: &Search, limits: &QueryLimits) -> Result<Outcome, KipError> {
    let term = lit(&s.term)?;
    let limit = match &s.limit {
        Some(Slot::Literal(n, _)) => usize::try_from(*n).unwrap_or(MAX_LIMIT).min(MAX_LIMIT),
        Some(Slot::Param(p)) => return Err(crate::kml::unbound(&p.name)),
        None => DEFAULT_LIMIT,
    };
    let with_type = match &s.with_type {
        Some(t) => {
            let t = lit(t)?;
            match s.target {
                SearchTarget::Concept => schema::require_concept_type(g, t)?,
                SearchTarget::Proposition => schema::require_predicate(g, t)?,
            }
            Some(t.to_string())
        }
        None => None,
    };
    let want_prop = s.target == SearchTarget::Proposition;
    let mut qterms = text::terms(term);
    qterms.sort();
    qterms.dedup();
    if qterms.is_empty() {
        return Ok(Outcome::ok(json!([])));
    }
    let docs = g.stat(TEXT_DOCS)?.max(1) as f64;
    let avgdl = (g.stat(TEXT_LEN)? as f64 / docs).max(1.0);
    let mut lens: HashMap<u64, f64> = HashMap::new();
    let mut scores: HashMap<u64, f64> = HashMap::new();
    let mut work = 0u64;
    for qt in &qterms {
        let prefix_ok = qt.chars().count() >= 2;
        let mut best: HashMap<u64, f64> = HashMap::new();
        let mut expanded = 0usize;
        let mut current = String::new();
        let mut matches: Vec<(String, u64, u32)> = Vec::new();
        g.scan_postings(qt, &mut |t, key, tf| {
            if !t.starts_with(qt.as_str()) || (!prefix_ok && t != qt) {
                return Ok(false);
            }
            if t != current {
                expanded += 1;
                current = t.to_string();
                if expanded > PREFIX_EXPANSION + 1 {
                    return Ok(false);
                }
            }
            work += 1;
            if work > limits.max_work {
                return Err(KipError::new(
                    ErrorCode::ResourceExhausted,
                    "the search matched too many index entries",
                )
                .with_hint("use a longer or more specific search term, or WITH TYPE"));
            }
            if (ElemRef::decode(key).encode() == key)
                && matches!(ElemRef::decode(key), ElemRef::Prop(_)) == want_prop
            {
                matches.push((t.to_string(), key, tf));
            }
            Ok(true)
        })?;
        let mut df_cache: HashMap<String, f64> = HashMap::new();
        for (t, key, tf) in matches {
            let df = match df_cache.get(&t) {
                Some(d) => *d,
                None => {
                    let d = g.stat(&format!("df:{t}"))?.max(1) as f64;
                    df_cache.insert(t.clone(), d);
                    d
                }
            };
            let idf = ((docs - df + 0.5) / (df + 0.5) + 1.0).ln();
            let dl = match lens.get(&key) {
                Some(l) => *l,
                None => {
                    let l = f64::from(g.doc_len(key)?.unwrap_or(1));
                    lens.insert(key, l);
                    l
                }
            };
            let tf = f64::from(tf);
            let weight = if t == *qt { 1.0 } else { PREFIX_WEIGHT };
            let sc = weight * idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl / avgdl));
            let e = best.entry(key).or_insert(0.0);
            if sc > *e {
                *e = sc;
            }
        }
        for (k, sc) in best {
            *scores.entry(k).or_insert(0.0) += sc;
        }
    }
    let query_norm = text::normalize(term.trim());
    let mut ranked: Vec<(u64, f64)> = scores.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    // Name bonuses and type filtering on the best candidates.
    let mut out: Vec<(f64, u64, Value)> = Vec::new();
    let window = (limit * 20).max(200);
    for (key, score) in ranked.into_iter().take(window.max(limit)) {
        let r = ElemRef::decode(key);
        let (obj, name, kind_type) = match r {
            ElemRef::Concept(n) => {
                let Some(c) = g.concept(n)? else { continue };
                let obj = json!({"id": r.id_string(), "type": c.concept_type, "name": c.name, "attributes": c.attributes, "metadata": c.metadata});
                (obj, c.name.clone(), c.concept_type.clone())
            }
            ElemRef::Prop(n) => {
                let Some(p) = g.prop(n)? else { continue };
                let obj = json!({"id": r.id_string(), "subject": p.subject.id_string(), "predicate": p.predicate, "object": p.object.id_string(), "attributes": p.attributes, "metadata": p.metadata});
                (obj, p.predicate.clone(), p.predicate.clone())
            }
        };
        if with_type.as_ref().is_some_and(|t| *t != kind_type) {
            continue;
        }
        let name_norm = text::normalize(&name);
        let bonus = if name_norm == query_norm {
            EXACT_NAME_BONUS
        } else if name_norm.starts_with(&query_norm) {
            NAME_PREFIX_BONUS
        } else {
            0.0
        };
        out.push((score + bonus, key, obj));
    }
    out.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let results: Vec<Value> = out
        .into_iter()
        .take(limit)
        .map(|(score, _, mut obj)| {
            if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                m.insert(
                    "_score".into(),
                    json!((score * 10_000.0).round() / 10_000.0),
                );
            }
            obj
        })
        .collect();
    Ok(Outcome::ok(Value::Array(results)))
}
