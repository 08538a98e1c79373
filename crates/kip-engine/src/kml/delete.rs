//! `DELETE ATTRIBUTES | METADATA | PROPOSITIONS | CONCEPT ... DETACH`, with targets found
//! by the KQL matcher. Deleting a link also deletes every link whose subject or object
//! it is, transitively, so no reference ever dangles; the counts include that cascade.

use super::primitives::{Privilege, Writer};
use super::text;
use crate::kql::exec::Val;
use crate::kql::result::solutions;
use crate::kql::QueryLimits;
use crate::store::{ElemRef, GraphWrite};
use kip_lang::ast::{Delete, DeleteTarget};
use kip_lang::{ErrorCode, KipError};
use serde_json::{json, Value};

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
            if !attrs {
                super::primitives::refuse_reserved(&keys)?;
            }
            let mut w = Writer::new(g, Privilege::Agent);
            let (mut concepts, mut props) = (0u64, 0u64);
            for t in targets {
                match t {
                    Val::Elem(ElemRef::Concept(n)) => {
                        let Some(old) = w.graph().concept(n)? else {
                            continue;
                        };
                        let mut rec = old.clone();
                        let map = if attrs {
                            &mut rec.attributes
                        } else {
                            &mut rec.metadata
                        };
                        if remove_keys(map, &keys) && w.put_concept(n, Some(&old), &mut rec)? {
                            concepts += 1;
                        }
                    }
                    Val::Elem(ElemRef::Prop(n)) => {
                        let Some(old) = w.graph().prop(n)? else {
                            continue;
                        };
                        let mut rec = old.clone();
                        let map = if attrs {
                            &mut rec.attributes
                        } else {
                            &mut rec.metadata
                        };
                        if remove_keys(map, &keys) && w.put_link(n, &old, &mut rec)? {
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
            let deleted = Writer::new(g, Privilege::Agent).delete_links(links)?;
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
            let (deleted, deleted_links) =
                Writer::new(g, Privilege::Agent).delete_concepts(&concepts)?;
            Ok(json!({"deleted_concepts": deleted, "deleted_propositions": deleted_links}))
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
