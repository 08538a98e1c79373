//! The migration preview (Migration guide §3, DECISIONS.md item 40): what a memory
//! written in KIP 1.x is when read in KIP 2.0. This build migrates nothing by
//! rewriting: 1.x rows are read as 2.0 elements in place (docs/semantics.md "KIP 2.0
//! on the one memory"), so the report is the inventory the guide asks for before a
//! cutover and the list of what the 2.0 reading maps lossily, with counts.

use super::error::V2Result;
use super::model;
use super::schema_env::{active, SymbolKind, LEGACY_REF};
use crate::store::{ElementId, ElementKind, GraphRead};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

fn bump(m: &mut BTreeMap<String, u64>, k: &str) {
    *m.entry(k.to_string()).or_default() += 1;
}

/// The inventory and the 2.0 reading of a memory.
pub fn report(g: &dyn GraphRead) -> V2Result<Value> {
    let env = active();
    let mut types: BTreeMap<String, u64> = BTreeMap::new();
    let mut concept_meta: BTreeMap<String, u64> = BTreeMap::new();
    let mut hidden = 0u64;
    let mut concepts = 0u64;
    let mut written_by_2 = 0u64;
    let mut ttl = 0u64;
    let mut ids = Vec::new();
    g.scan_concepts(&mut |n| {
        ids.push(n);
        Ok(true)
    })?;
    for n in ids {
        let Some(c) = g.concept(n)? else { continue };
        if model::hidden(&c) {
            hidden += 1;
            continue;
        }
        concepts += 1;
        bump(&mut types, &c.concept_type);
        if g.element(model::SPACE, ElementId::new(ElementKind::Concept, n))?
            .is_some()
        {
            written_by_2 += 1;
        }
        for k in c.metadata.keys() {
            bump(&mut concept_meta, k);
        }
        if c.metadata.contains_key("expires_at") {
            ttl += 1;
        }
    }
    let mut predicates: BTreeMap<String, u64> = BTreeMap::new();
    let mut link_meta: BTreeMap<String, u64> = BTreeMap::new();
    let mut authors: BTreeMap<String, u64> = BTreeMap::new();
    let (mut links, mut founding, mut conf_ok, mut conf_bad, mut unresolved_author) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut props = Vec::new();
    g.scan_props(&mut |n| {
        props.push(n);
        Ok(true)
    })?;
    for n in props {
        let pid = ElementId::new(ElementKind::Proposition, n);
        let Some(p) = g.prop(n)? else { continue };
        if model::view(g, pid)?.is_none() {
            continue;
        }
        links += 1;
        bump(&mut predicates, &p.predicate);
        for k in p.metadata.keys() {
            bump(&mut link_meta, k);
        }
        if model::written_by_1x(g, n)? {
            founding += 1;
            match p.metadata.get("confidence") {
                Some(Value::Number(x)) if x.as_f64().is_some_and(|c| (0.0..=1.0).contains(&c)) => {
                    conf_ok += 1
                }
                Some(_) => conf_bad += 1,
                None => {}
            }
            let author = p
                .metadata
                .get("author")
                .and_then(Value::as_str)
                .unwrap_or("$self");
            bump(&mut authors, author);
            if g.concept_by_key("Person", author)?.is_none() {
                unresolved_author += 1;
            }
        }
    }
    let resolve = |kind: SymbolKind, m: &BTreeMap<String, u64>| -> Value {
        let mut out = Map::new();
        for (name, count) in m {
            let symbol = match env.definition(kind, name) {
                Some(d) => d.exact.clone(),
                None => format!("{LEGACY_REF}/{name}"),
            };
            out.insert(name.clone(), json!({"count": count, "symbol": symbol}));
        }
        Value::Object(out)
    };
    let mut warnings = Vec::new();
    if conf_bad > 0 {
        warnings.push(json!({"code": "confidence_out_of_range", "count": conf_bad,
            "meaning": "a 1.x confidence that is not a number from 0 to 1 is kept in the kip1 facet, not as assertion confidence (Migration §13)"}));
    }
    if unresolved_author > 0 {
        warnings.push(json!({"code": "author_not_a_person", "count": unresolved_author,
            "meaning": "a link whose author names no Person has a founding assertion with no asserted_by; the author stays in the kip1 facet (Migration §12: never invent an actor)"}));
    }
    let legacy_types = types
        .keys()
        .filter(|t| env.definition(SymbolKind::ConceptType, t).is_none())
        .count();
    if legacy_types > 0 {
        warnings.push(json!({"code": "legacy_symbols", "count": legacy_types,
            "meaning": format!("concept types the Cognitive Memory Profile does not define resolve in {LEGACY_REF} (Migration §8)")}));
    }
    if ttl > 0 {
        warnings.push(json!({"code": "ttl_metadata", "count": ttl,
            "meaning": "1.x expires_at stays 1.x metadata; 2.0 retention (SET RETENTION) is separate (§19)"}));
    }
    Ok(json!({
        "migration": "in place: this build reads KIP 1.x data as KIP 2.0 without rewriting it (DECISIONS.md item 40); nothing is changed by this report",
        "space": super::request::DEFAULT_SPACE,
        "concepts": {"count": concepts, "with_2_0_record": written_by_2, "control_plane_hidden_from_2_0": hidden, "types": resolve(SymbolKind::ConceptType, &types), "metadata_keys": concept_meta},
        "propositions": {"count": links, "predicates": resolve(SymbolKind::Predicate, &predicates), "metadata_keys": link_meta},
        "assertions": {"founding_from_1x_links": founding, "confidence_mapped": conf_ok, "confidence_kept_in_facet": conf_bad, "authors": authors},
        "warnings": warnings,
    }))
}
