//! MERGE CONCEPT (Specification §11, §61): identity consolidation that destroys
//! nothing. The source stays addressable and resolves to the target from then on.

use super::error::{Code, V2Error, V2Result};
use super::eval;
use super::model::{self, SPACE};
use crate::store::{ElementId, ElementKind, GraphRead, GraphWrite};
use serde_json::{json, Value};

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
