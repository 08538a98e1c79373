//! MERGE CONCEPT (Specification §11, §61): identity consolidation that destroys
//! nothing. The source stays addressable and resolves to the target from then on.

use super::error::{Code, V2Error, V2Result};
use super::eval::{self, solve, Bound, Ctx, Row};
use super::model::{self, SPACE};
use crate::store::{ElementId, ElementKind, GraphRead, GraphWrite};
use kip_lang::v2::ast::TargetRef;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// MERGE CONCEPT source INTO target (§11): non-destructive. The source stays
/// addressable by id, is `merged` (out of default recall) with `merged_into`, and
/// resolves to the target from then on; nothing that referenced it is rewritten. A
/// merge that would make `merged_into` cycle is refused.
pub fn merge(
    w: &mut dyn GraphWrite,
    source: ElementId,
    target: ElementId,
    expect: Option<&Value>,
) -> V2Result<()> {
    for id in [source, target] {
        if id.kind != ElementKind::Concept {
            return Err(V2Error::new(
                Code::TypeMismatch,
                format!(
                    "{} is not a concept; MERGE CONCEPT merges concepts",
                    id.id_string()
                ),
            ));
        }
    }
    if source == target {
        return Err(V2Error::new(
            Code::IdentityMergeConflict,
            format!("{} cannot be merged into itself", source.id_string()),
        ));
    }
    super::concepts::check_version(w, source, expect)?;
    // Follow the target's merged_into chain: reaching the source is a cycle.
    let mut at = target;
    for _ in 0..64 {
        if at == source {
            return Err(V2Error::new(
                Code::IdentityMergeConflict,
                format!(
                    "{} already resolves to {}: the merge would cycle",
                    target.id_string(),
                    source.id_string()
                ),
            ));
        }
        match w.element(SPACE, at)?.and_then(|r| {
            r.state
                .get("merged_into")
                .and_then(Value::as_str)
                .and_then(eval::parse_id)
        }) {
            Some(next) => at = next,
            None => break,
        }
    }
    let Some(row) = w.concept(source.n)?.filter(|r| !model::hidden(r)) else {
        return Err(super::mutate::not_found(source));
    };
    let rec = super::concepts::ensure_record(w, source, &row)?;
    let mut state = rec.state.clone();
    state.insert("state".into(), json!("merged"));
    state.insert("merged_into".into(), json!(target.id_string()));
    w.set_element_state(SPACE, source, state)?;
    Ok(())
}

/// The concept a merged one resolves to (§11.1: `merged_into` to its fixpoint).
pub(super) fn canonical(g: &dyn GraphRead, id: ElementId) -> V2Result<ElementId> {
    let mut at = id;
    for _ in 0..64 {
        match g.element(SPACE, at)?.and_then(|r| {
            r.state
                .get("merged_into")
                .and_then(Value::as_str)
                .and_then(eval::parse_id)
        }) {
            Some(next) => at = next,
            None => break,
        }
    }
    Ok(at)
}

/// MERGE CONCEPT's source and target (§61): each named by a stable identity (an id, or
/// a key in its WHERE pattern; never by a description such as a name, §2.6), each one
/// concept.
pub(super) fn pair(
    ctx: &Ctx,
    source: &TargetRef,
    into: &TargetRef,
    block: Option<&[kip_lang::v2::ast::WhereClause]>,
) -> V2Result<Vec<ElementId>> {
    let rows = match block {
        Some(b) => solve(ctx, b, vec![Row::new()])?,
        None => vec![Row::new()],
    };
    let pick = |t: &TargetRef, role: &str| -> V2Result<ElementId> {
        if let TargetRef::Var(v) = t {
            let by_identity = block.into_iter().flatten().any(|c| match c {
                kip_lang::v2::ast::WhereClause::Concept { var, pattern } if var == v => {
                    pattern.iter().any(|(k, _)| k == "id" || k == "key")
                }
                _ => false,
            });
            if !by_identity {
                return Err(V2Error::new(
                    Code::IdentitySelectorRequired,
                    format!("MERGE CONCEPT names its {role} ?{v} by a description; a merge needs a stable identity"),
                )
                .with_hint(format!("select ?{v} by id or key: ?{v} CONCEPT {{key: \"...\"}}")));
            }
            let ids: BTreeSet<ElementId> = rows
                .iter()
                .filter_map(|r| match r.get(v) {
                    Some(Bound::Elem(id)) => Some(*id),
                    _ => None,
                })
                .collect();
            let n = ids.len();
            let mut it = ids.into_iter();
            return match (it.next(), n) {
                (Some(id), 1) => Ok(id),
                (None, _) => Err(V2Error::new(
                    Code::NotFoundOrNotVisible,
                    format!("no visible concept for the merge {role} ?{v}"),
                )),
                _ => Err(V2Error::new(
                    Code::IdentityConflict,
                    format!("the merge {role} ?{v} matches {n} concepts"),
                )
                .with_hint("name exactly one concept by id or key")),
            };
        }
        if rows.is_empty() {
            return Err(V2Error::new(
                Code::PreconditionFailed,
                "the merge's WHERE guard does not hold",
            ));
        }
        match super::mutate::direct_id(ctx, t)? {
            Some(id) if ctx.view(id)?.is_some() => Ok(id),
            Some(id) => Err(super::mutate::not_found(id)),
            None => Err(V2Error::new(Code::ReferenceError, "no merge target")),
        }
    };
    let s = pick(source, "source")?;
    let t = pick(into, "target")?;
    Ok(vec![s, t])
}
