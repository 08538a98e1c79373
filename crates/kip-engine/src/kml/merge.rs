//! `MERGE CONCEPT ?source INTO ?target WHERE {...}` (RC11 §4.4, DECISIONS.md item 31):
//! one transaction that repoints every link of the source to the target (ids kept),
//! resolves `(subject, predicate, object)` collisions in favour of the target's link,
//! fills the target's missing attributes (with `aliases` unioned and the source's name
//! added to them), records `_merged_from`, and deletes the source.

use super::primitives::{Privilege, Writer, MERGED_FROM_KEY};
use crate::kql::exec::Val;
use crate::kql::result::solutions;
use crate::kql::QueryLimits;
use crate::schema;
use crate::store::{ConceptRecord, ElemRef, GraphWrite};
use kip_lang::ast::{Merge, Slot, WhereClause};
use kip_lang::{ErrorCode, KipError};
use serde_json::{json, Map, Value};

/// How deep links about links about links may go before a merge gives up.
const MAX_DEPTH: usize = 1_000;

#[derive(Default)]
struct Counts {
    repointed: u64,
    deduplicated: u64,
}

/// Executes a MERGE inside the caller's write transaction.
pub fn merge(g: &mut dyn GraphWrite, m: &Merge, limits: &QueryLimits) -> Result<Value, KipError> {
    let source = exactly_one(&*g, m, &m.source.name, limits, true)?;
    let target = exactly_one(&*g, m, &m.target.name, limits, false)?;
    let (Some(src), Some(tgt)) = (g.concept(source)?, g.concept(target)?) else {
        return Err(KipError::internal("a matched concept vanished"));
    };
    // Protection first (DECISIONS.md item 36: either position), even for a merge of a
    // node into itself.
    for c in [&src, &tgt] {
        schema::check_mutation(schema::Mutation::Merge(c))?;
    }
    if source == target {
        return Ok(
            json!({"merged": true, "links_repointed": 0, "links_deduplicated": 0, "attributes_filled": 0}),
        );
    }
    if src.concept_type != tgt.concept_type {
        return Err(KipError::new(
            ErrorCode::ConstraintViolation,
            format!(
                "MERGE needs two concepts of the same type: ?{} is a {}, ?{} is a {}",
                m.source.name, src.concept_type, m.target.name, tgt.concept_type
            ),
        )
        .with_hint("only duplicates of one type are merged; re-type one of them first, or link them instead"));
    }
    let mut w = Writer::new(g, Privilege::Agent);
    let mut counts = Counts::default();
    move_links(
        &mut w,
        ElemRef::Concept(source),
        ElemRef::Concept(target),
        &mut counts,
        0,
    )?;

    // The target, re-read (repointed self-links do not change it), gains what it lacks.
    let tgt = w
        .graph()
        .concept(target)?
        .ok_or_else(|| KipError::internal("the merge target vanished"))?;
    let mut rec = tgt.clone();
    let mut filled = 0u64;
    for (k, v) in &src.attributes {
        if k == "aliases" {
            continue;
        }
        if !rec.attributes.contains_key(k) {
            rec.attributes.insert(k.clone(), v.clone());
            filled += 1;
        }
    }
    // `aliases` follows the fill rule too (a key the target lacks counts as filled),
    // with the union as its one special case.
    if src.attributes.contains_key("aliases") && !rec.attributes.contains_key("aliases") {
        filled += 1;
    }
    let mut aliases: Vec<Value> = match rec.attributes.get("aliases") {
        Some(Value::Array(a)) => a.clone(),
        Some(other) => vec![other.clone()],
        None => Vec::new(),
    };
    let mut add_alias = |v: &Value| {
        if !aliases.contains(v) {
            aliases.push(v.clone());
        }
    };
    match src.attributes.get("aliases") {
        Some(Value::Array(a)) => a.iter().for_each(&mut add_alias),
        Some(other) => add_alias(other),
        None => {}
    }
    add_alias(&Value::from(src.name.clone()));
    rec.attributes
        .insert("aliases".into(), Value::Array(aliases));
    let mut trail: Vec<Value> = match rec.metadata.get(MERGED_FROM_KEY) {
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    };
    let carried = match src.metadata.get(MERGED_FROM_KEY) {
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    };
    for v in carried
        .into_iter()
        .chain([Value::from(format!("{}:{}", src.concept_type, src.name))])
    {
        if !trail.contains(&v) {
            trail.push(v);
        }
    }
    rec.metadata
        .insert(MERGED_FROM_KEY.into(), Value::Array(trail));
    w.put_concept(target, Some(&tgt), &mut rec)?;
    // Every link has moved: deleting the source cascades to nothing.
    w.delete_concepts(&[source])?;
    Ok(json!({
        "merged": true,
        "links_repointed": counts.repointed,
        "links_deduplicated": counts.deduplicated,
        "attributes_filled": filled,
    }))
}

/// Moves every link touching `from` onto `to`. A link that would then duplicate an
/// existing one is dropped: the survivor gains the keys it lacks, and the links about
/// the dropped one move to the survivor (recursively).
fn move_links(
    w: &mut Writer,
    from: ElemRef,
    to: ElemRef,
    counts: &mut Counts,
    depth: usize,
) -> Result<(), KipError> {
    if depth > MAX_DEPTH {
        return Err(KipError::new(
            ErrorCode::ResourceExhausted,
            format!("MERGE: links about links nest more than {MAX_DEPTH} levels deep"),
        )
        .with_hint("merge the concepts by hand in smaller steps"));
    }
    let mut links = Vec::new();
    w.graph().scan_out(from, None, &mut |_, _, id| {
        links.push(id);
        Ok(true)
    })?;
    w.graph().scan_in(from, None, &mut |_, _, id| {
        links.push(id);
        Ok(true)
    })?;
    links.sort_unstable();
    links.dedup();
    for id in links {
        let Some(old) = w.graph().prop(id)? else {
            continue;
        };
        let mut moved = old.clone();
        if moved.subject == from {
            moved.subject = to;
        }
        if moved.object == from {
            moved.object = to;
        }
        match w
            .graph()
            .prop_by_spo(moved.subject, &moved.predicate, moved.object)?
        {
            Some(survivor) if survivor != id => {
                let kept = w
                    .graph()
                    .prop(survivor)?
                    .ok_or_else(|| KipError::internal("a link vanished during MERGE"))?;
                let mut rec = kept.clone();
                fill_missing(&mut rec.attributes, &old.attributes);
                fill_missing(&mut rec.metadata, &old.metadata);
                w.put_link(survivor, &kept, &mut rec)?;
                move_links(
                    w,
                    ElemRef::Prop(id),
                    ElemRef::Prop(survivor),
                    counts,
                    depth + 1,
                )?;
                w.drop_moved_link(id, &old)?;
                counts.deduplicated += 1;
            }
            _ => {
                w.repoint_link(id, &old, &mut moved)?;
                counts.repointed += 1;
            }
        }
    }
    Ok(())
}

/// Copies the keys of `from` that `into` lacks (reserved `_` keys stay the
/// survivor's own).
fn fill_missing(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (k, v) in from {
        if !k.starts_with('_') && !into.contains_key(k) {
            into.insert(k.clone(), v.clone());
        }
    }
}

/// The one concept bound to `var`: `KIP_3002` for none (with the "already merged"
/// hint when the target's `_merged_from` names the source), `KIP_3003` for several.
fn exactly_one(
    g: &dyn GraphWrite,
    m: &Merge,
    var: &str,
    limits: &QueryLimits,
    is_source: bool,
) -> Result<u64, KipError> {
    let found = solutions(g, &m.where_clauses, var, limits)?;
    let mut ids = Vec::new();
    for v in found {
        match v {
            Val::Elem(ElemRef::Concept(n)) => ids.push(n),
            _ => {
                return Err(KipError::new(
                    ErrorCode::TypeMismatch,
                    format!("?{var} must be bound to a concept"),
                )
                .with_hint(format!(
                    "bind it with a concept clause: ?{var} {{type: \"T\", name: \"N\"}}"
                )))
            }
        }
    }
    match ids.len() {
        1 => Ok(ids[0]),
        0 => {
            let mut e = KipError::new(
                ErrorCode::NotFound,
                format!("NotFound: no concept matches ?{var}"),
            )
            .with_hint("check the {type, name} with SEARCH or FIND before merging");
            if is_source {
                if let Some(into) = already_merged_into(g, m)? {
                    e = e.with_hint(format!(
                        "already merged into {into}: the source no longer exists, and this MERGE has nothing left to do"
                    ));
                }
            }
            Err(e)
        }
        n => Err(KipError::new(
            ErrorCode::DuplicateExists,
            format!("?{var} matches {n} concepts; MERGE needs exactly one on each side"),
        )
        .with_hint(format!(
            "name ?{var} by {{type, name}} (or {{id}}) so that it matches one concept"
        ))),
    }
}

/// When the source is gone: the target, if its `_merged_from` names the source's
/// `{type, name}` as written in WHERE.
fn already_merged_into(g: &dyn GraphWrite, m: &Merge) -> Result<Option<String>, KipError> {
    let literal = |s: &Option<Slot<String>>| s.as_ref().and_then(|s| s.literal().cloned());
    let source = m.where_clauses.iter().find_map(|c| match c {
        WhereClause::Concept(p) if p.var.name == m.source.name => {
            Some((literal(&p.matcher.concept_type)?, literal(&p.matcher.name)?))
        }
        _ => None,
    });
    let Some((t, n)) = source else {
        return Ok(None);
    };
    let entry = Value::from(format!("{t}:{n}"));
    // The target's own clause (the join with the missing source matches nothing).
    let target = m.where_clauses.iter().find_map(|c| match c {
        WhereClause::Concept(p) if p.var.name == m.target.name => {
            Some((literal(&p.matcher.concept_type)?, literal(&p.matcher.name)?))
        }
        _ => None,
    });
    if let Some((tt, tn)) = target {
        if let Some(id) = g.concept_by_key(&tt, &tn)? {
            if let Some(c) = g.concept(id)? {
                if trail_names(&c).contains(&entry) {
                    return Ok(Some(format!("{{type: \"{tt}\", name: \"{tn}\"}}")));
                }
            }
        }
    }
    // Else any concept of the source's type whose trail names it (DECISIONS.md item
    // 31); an error path, so a bounded scan.
    let mut found = None;
    let mut seen = 0usize;
    g.scan_type(&t, &mut |id| {
        seen += 1;
        if let Some(c) = g.concept(id)? {
            if trail_names(&c).contains(&entry) {
                found = Some(format!(
                    "{{type: \"{}\", name: \"{}\"}}",
                    c.concept_type, c.name
                ));
                return Ok(false);
            }
        }
        Ok(seen < MAX_TRAIL_SCAN)
    })?;
    Ok(found)
}

/// Concepts of the source's type looked at for the "already merged" hint.
const MAX_TRAIL_SCAN: usize = 100_000;

fn trail_names(c: &ConceptRecord) -> Vec<Value> {
    match c.metadata.get(MERGED_FROM_KEY) {
        Some(Value::Array(a)) => a.clone(),
        _ => Vec::new(),
    }
}
