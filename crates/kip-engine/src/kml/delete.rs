//! `DELETE ATTRIBUTES | METADATA | PROPOSITIONS | CONCEPT ... DETACH`, with targets found
//! by the KQL matcher. Deleting a link also deletes every link whose subject or object
//! it is, transitively, so no reference ever dangles; the counts include that cascade.

use super::text;
use crate::kql::exec::Val;
use crate::kql::result::solutions;
use crate::kql::QueryLimits;
use crate::schema::{self, CONCEPT_TYPE, PROPOSITION_TYPE};
use crate::store::{ElemRef, GraphWrite, Stat};
use kip_lang::ast::{Delete, DeleteTarget};
use kip_lang::{ErrorCode, KipError};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashSet};

/// Executes a DELETE inside the caller's write transaction.
pub fn delete(g: &mut dyn GraphWrite, d: &Delete, limits: &QueryLimits) -> Result<Value, KipError> {
    let var = d.target.var();
    let targets = solutions(&*g, &d.where_clauses, &var.name, limits)?;
    match &d.target {
        DeleteTarget::Attributes { keys, .. } | DeleteTarget::Metadata { keys, .. } => {
            let attrs = matches!(d.target, DeleteTarget::Attributes { .. });
            let keys = keys
                .iter()
                .map(|k| text(k).map(str::to_string))
                .collect::<Result<Vec<_>, _>>()?;
            let (mut concepts, mut props) = (0u64, 0u64);
            for t in targets {
                match t {
                    Val::Elem(ElemRef::Concept(n)) => {
                        let Some(old) = g.concept(n)? else { continue };
                        if attrs {
                            for key in &keys {
                                if old.attributes.contains_key(key) {
                                    schema::check_mutation(schema::Mutation::SetAttribute {
                                        concept: &old,
                                        key,
                                        value: None,
                                    })?;
                                }
                            }
                        }
                        let mut rec = old.clone();
                        let map = if attrs {
                            &mut rec.attributes
                        } else {
                            &mut rec.metadata
                        };
                        if remove_keys(map, &keys) {
                            if attrs {
                                schema::check_type_definition(
                                    &rec.concept_type,
                                    &rec.name,
                                    &rec.attributes,
                                )?;
                            }
                            g.put_concept(n, &rec, Some(&old))?;
                            concepts += 1;
                        }
                    }
                    Val::Elem(ElemRef::Prop(n)) => {
                        let Some(old) = g.prop(n)? else { continue };
                        let mut rec = old.clone();
                        let map = if attrs {
                            &mut rec.attributes
                        } else {
                            &mut rec.metadata
                        };
                        if remove_keys(map, &keys) {
                            g.put_prop(n, &rec, Some(&old))?;
                            props += 1;
                        }
                    }
                    Val::Pred(_) => return Err(not_an_element(&var.name)),
                }
            }
            Ok(json!({"updated_concepts": concepts, "updated_propositions": props}))
        }
        DeleteTarget::Propositions { .. } => {
            let mut links = Vec::new();
            for t in targets {
                match t {
                    Val::Elem(ElemRef::Prop(n)) => links.push(n),
                    Val::Elem(ElemRef::Concept(_)) => {
                        return Err(KipError::new(ErrorCode::TypeMismatch, format!("?{} is bound to concepts; DELETE PROPOSITIONS deletes links", var.name))
                            .with_hint("bind the variable to a proposition clause, e.g. ?link (?s, \"pred\", ?o), or use DELETE CONCEPT ... DETACH"))
                    }
                    Val::Pred(_) => return Err(not_an_element(&var.name)),
                }
            }
            let deleted = delete_links(g, links)?;
            Ok(json!({"deleted_propositions": deleted}))
        }
        DeleteTarget::Concept { .. } => {
            let mut concepts = Vec::new();
            for t in targets {
                match t {
                    Val::Elem(ElemRef::Concept(n)) => concepts.push(n),
                    Val::Elem(ElemRef::Prop(_)) => {
                        return Err(KipError::new(
                            ErrorCode::TypeMismatch,
                            format!(
                                "?{} is bound to propositions; DELETE CONCEPT deletes concepts",
                                var.name
                            ),
                        )
                        .with_hint("use DELETE PROPOSITIONS ?link WHERE { ... } for links"))
                    }
                    Val::Pred(_) => return Err(not_an_element(&var.name)),
                }
            }
            // Check everything before changing anything.
            let mut recs = Vec::new();
            for n in &concepts {
                let Some(rec) = g.concept(*n)? else { continue };
                schema::check_mutation(schema::Mutation::DeleteConcept(&rec))?;
                if rec.concept_type == CONCEPT_TYPE || rec.concept_type == PROPOSITION_TYPE {
                    let in_use = if rec.concept_type == CONCEPT_TYPE {
                        g.stat(Stat::Type(&rec.name))?
                    } else {
                        g.stat(Stat::Predicate(&rec.name))?
                    };
                    // Instances that are deleted by this same statement do not count.
                    let deleting_own = if rec.concept_type == CONCEPT_TYPE {
                        let mut k = 0u64;
                        for m in &concepts {
                            if g.concept(*m)?.is_some_and(|c| c.concept_type == rec.name) {
                                k += 1;
                            }
                        }
                        k
                    } else {
                        0
                    };
                    if in_use > deleting_own && rec.concept_type == CONCEPT_TYPE {
                        return Err(KipError::new(
                            ErrorCode::ConstraintViolation,
                            format!("the concept type '{}' still has {} instance(s)", rec.name, in_use - deleting_own),
                        )
                        .with_hint(format!("delete or re-type its instances first: DELETE CONCEPT ?x DETACH WHERE {{ ?x {{type: \"{}\"}} }}", rec.name)));
                    }
                    if in_use > 0 && rec.concept_type == PROPOSITION_TYPE {
                        return Err(KipError::new(
                            ErrorCode::ConstraintViolation,
                            format!("the predicate '{}' is still used by {} link(s)", rec.name, in_use),
                        )
                        .with_hint(format!("delete those links first: DELETE PROPOSITIONS ?l WHERE {{ ?l (?s, \"{}\", ?o) }}", rec.name)));
                    }
                }
                recs.push((*n, rec));
            }
            // The links touching the concepts, then the cascade through higher-order links.
            let mut links = Vec::new();
            for (n, _) in &recs {
                let r = ElemRef::Concept(*n);
                g.scan_out(r, None, &mut |_, _, id| {
                    links.push(id);
                    Ok(true)
                })?;
                g.scan_in(r, None, &mut |_, _, id| {
                    links.push(id);
                    Ok(true)
                })?;
            }
            let deleted_links = delete_links(g, links)?;
            for (n, rec) in &recs {
                g.delete_concept(*n, rec)?;
            }
            Ok(json!({"deleted_concepts": recs.len(), "deleted_propositions": deleted_links}))
        }
    }
}

/// Removes `keys` from `map`; true when anything was removed.
fn remove_keys(map: &mut serde_json::Map<String, Value>, keys: &[String]) -> bool {
    let before = map.len();
    for k in keys {
        map.shift_remove(k);
    }
    map.len() != before
}

fn not_an_element(name: &str) -> KipError {
    KipError::new(
        ErrorCode::TypeMismatch,
        format!("?{name} is bound to a predicate name, not to an element"),
    )
    .with_hint("the DELETE target must be bound to concepts or propositions")
}

/// Deletes `links` and, transitively, every link whose subject or object is a deleted
/// link. Protected Genesis links refuse with `KIP_3004`. Returns the number deleted.
pub fn delete_links(g: &mut dyn GraphWrite, links: Vec<u64>) -> Result<u64, KipError> {
    let mut all: BTreeSet<u64> = BTreeSet::new();
    let mut queue: Vec<u64> = links;
    let mut seen = HashSet::new();
    while let Some(id) = queue.pop() {
        if !seen.insert(id) {
            continue;
        }
        all.insert(id);
        let r = ElemRef::Prop(id);
        g.scan_out(r, None, &mut |_, _, l| {
            queue.push(l);
            Ok(true)
        })?;
        g.scan_in(r, None, &mut |_, _, l| {
            queue.push(l);
            Ok(true)
        })?;
    }
    let mut recs = Vec::with_capacity(all.len());
    for id in &all {
        let Some(rec) = g.prop(*id)? else { continue };
        if let (ElemRef::Concept(s), ElemRef::Concept(o)) = (rec.subject, rec.object) {
            let (Some(sc), Some(oc)) = (g.concept(s)?, g.concept(o)?) else {
                recs.push((*id, rec));
                continue;
            };
            schema::check_mutation(schema::Mutation::DeleteLink {
                subject: &sc,
                predicate: &rec.predicate,
                object: &oc,
            })?;
        }
        recs.push((*id, rec));
    }
    for (id, rec) in &recs {
        g.delete_prop(*id, rec)?;
    }
    Ok(recs.len() as u64)
}
