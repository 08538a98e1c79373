//! Proposition patterns (Specification §43.2, §45): `(s, p, o)` tuples found through
//! the store's link indexes (both ends, one end, the predicate), literal objects,
//! predicate alternatives and variables, quantified paths (`paths.rs`), and the
//! matching of their ends against the row. A proposition matched here is read from
//! its graph link and its record's state only: its element object is built when
//! something reads a field of it.

use super::error::{Code, V2Error, V2Result};
use super::eval::{
    bound_json, id_bound, known, match_element, match_value, parse_id, same, scalar, type_mismatch,
    Bound, Ctx, Emit, Row,
};
use super::model::{self, LITERAL_TYPE, SPACE};
use super::schema_env::{active, SymbolKind};
use crate::store::{ElemRef, ElementId, ElementKind, GraphRead};
use kip_lang::v2::ast::{Pattern, PredicateAtom, PropTuple};
use serde_json::Value;

/// A predicate atom's local name (as the graph stores it), `None` for an unbound
/// variable.
pub(super) fn predicate_local(
    ctx: &Ctx,
    row: &Row,
    atom: &PredicateAtom,
) -> V2Result<Option<String>> {
    let name = match atom {
        PredicateAtom::Name(n) => n.clone(),
        PredicateAtom::Param(p) => match ctx.param(p)? {
            Value::String(s) => s,
            other => return Err(type_mismatch("predicate", &other)),
        },
        PredicateAtom::Var(v) => match row.get(v) {
            Some(b) => match bound_json(b) {
                Value::String(s) => s,
                _ => return Ok(Some(String::new())),
            },
            None => return Ok(None),
        },
    };
    Ok(Some(ctx.resolve(SymbolKind::Predicate, &name)?.local))
}

/// The graph end a known term stands for (`Ok(None)`: a literal no proposition has).
pub(super) fn end_ref(ctx: &Ctx, b: &Bound) -> V2Result<Option<ElemRef>> {
    match b {
        Bound::Elem(id) => Ok(model::graph_ref(*id)),
        Bound::Val(v) => Ok(literal_concept(ctx.g, v)?.map(ElemRef::Concept)),
    }
}

/// The concept holding literal `v` as a proposition object, if any.
pub fn literal_concept(g: &dyn GraphRead, v: &Value) -> V2Result<Option<u64>> {
    let text = serde_json::to_string(v).unwrap_or_default();
    Ok(g.concept_by_key(LITERAL_TYPE, &text)?)
}

/// The rows a proposition pattern extends `row` to, one at a time.
pub(super) fn propositions(
    ctx: &Ctx,
    row: &Row,
    var: Option<&str>,
    tuple: &PropTuple,
    emit: &mut Emit,
) -> V2Result<bool> {
    let (s, path, o) = match tuple {
        PropTuple::Id(v) => {
            let b = id_bound(ctx, &scalar(ctx, v)?);
            if let Bound::Elem(id) = b {
                if id.kind == ElementKind::Proposition && ctx.view(id)?.is_some() {
                    let mut r = row.clone();
                    if let Some(var) = var {
                        match r.get(var) {
                            Some(x) if *x != Bound::Elem(id) => return Ok(true),
                            _ => {
                                r.insert(var.to_string(), Bound::Elem(id));
                            }
                        }
                    }
                    return emit(r);
                }
            }
            return Ok(true);
        }
        PropTuple::Triple(s, path, o) => (s, path, o),
    };
    if path.len() > 1 || path.iter().any(|a| a.quantifier.is_some()) {
        if var.is_some() {
            return Err(V2Error::new(
                Code::InvalidSyntax,
                "a predicate path or alternative matches chains of propositions; it binds no single proposition variable",
            )
            .with_hint("drop the proposition variable, or match one exact predicate"));
        }
        for a in path {
            let go = match a.quantifier {
                None => one_hop(ctx, row, None, s, &a.atom, o, emit)?,
                Some(q) => {
                    let mut out = Vec::new();
                    super::paths::walk(ctx, row, s, &a.atom, q, o, &mut out)?;
                    emit_all(out, emit)?
                }
            };
            if !go {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    match path.first() {
        Some(a) => one_hop(ctx, row, var, s, &a.atom, o, emit),
        None => Err(V2Error::new(
            Code::InvalidSyntax,
            "a proposition tuple names its predicate",
        )),
    }
}

/// Sends each of `rows` to `emit`; `Ok(false)` when it asked to stop.
pub(super) fn emit_all(rows: Vec<Row>, emit: &mut Emit) -> V2Result<bool> {
    for r in rows {
        if !emit(r)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// One proposition `(s, atom, o)`, bound to `var` when given.
fn one_hop(
    ctx: &Ctx,
    row: &Row,
    var: Option<&str>,
    s: &Pattern,
    atom: &PredicateAtom,
    o: &Pattern,
    emit: &mut Emit,
) -> V2Result<bool> {
    let pred = predicate_local(ctx, row, atom)?;
    let sk = known(ctx, row, s)?;
    let ok = known(ctx, row, o)?;
    let s_ref = match &sk {
        Some(b) => match end_ref(ctx, b)? {
            Some(r) => Some(r),
            None => return Ok(true),
        },
        None => None,
    };
    let o_ref = match &ok {
        Some(b) => match end_ref(ctx, b)? {
            Some(r) => Some(r),
            None => return Ok(true),
        },
        None => None,
    };
    let g = ctx.g;
    // Each link (id, subject, predicate, object) the index that answers the pattern
    // gives, handed on as it is read (a LIMIT stops the scan).
    let mut link = |n: u64, s_end: ElemRef, predicate: &str, o_end: ElemRef| -> V2Result<bool> {
        ctx.tick()?;
        let id = ElementId::new(ElementKind::Proposition, n);
        if pred.as_deref().is_some_and(|p| predicate != p) {
            return Ok(true);
        }
        let (Some(subject), Some(object)) = (end_bound(ctx, s_end)?, end_bound(ctx, o_end)?) else {
            return Ok(true); // a link of the 1.x control plane
        };
        let rec = g.element(SPACE, id)?;
        if model::state_of(rec.as_ref()) != model::ACTIVE {
            return Ok(true);
        }
        let mut r = row.clone();
        if !bound_matches(ctx, &mut r, s, &subject)? || !bound_matches(ctx, &mut r, o, &object)? {
            return Ok(true);
        }
        if let PredicateAtom::Var(v) = atom {
            if !r.contains_key(v) {
                let exact = rec
                    .as_ref()
                    .and_then(|r| r.payload.get("predicate_ref"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| active().exact_of(SymbolKind::Predicate, predicate));
                r.insert(v.clone(), Bound::Val(Value::String(exact)));
            }
        }
        if let Some(var) = var {
            match r.get(var) {
                Some(x) if *x != Bound::Elem(id) => return Ok(true),
                _ => {
                    r.insert(var.to_string(), Bound::Elem(id));
                }
            }
        }
        emit(r)
    };
    let mut failure = None;
    let mut go = true;
    let mut guard = |more: V2Result<bool>| -> crate::store::StoreResult<bool> {
        match more {
            Ok(m) => {
                go = m;
                Ok(m)
            }
            Err(e) => {
                failure = Some(e);
                go = false;
                Ok(false)
            }
        }
    };
    match (s_ref, &pred, o_ref) {
        (Some(s), Some(p), Some(o)) => {
            if let Some(id) = g.prop_by_spo(s, p, o)? {
                let more = link(id, s, p, o);
                guard(more)?;
            }
        }
        (Some(s), p, _) => g.scan_out(s, p.as_deref(), &mut |pr, o, id| {
            let more = link(id, s, pr, o);
            guard(more)
        })?,
        (None, p, Some(o)) => g.scan_in(o, p.as_deref(), &mut |pr, s, id| {
            let more = link(id, s, pr, o);
            guard(more)
        })?,
        (None, Some(p), None) => g.scan_predicate(p, &mut |s, o, id| {
            let more = link(id, s, p, o);
            guard(more)
        })?,
        (None, None, None) => g.scan_props(&mut |id| match g.prop(id)? {
            Some(r) => {
                let more = link(id, r.subject, &r.predicate, r.object);
                guard(more)
            }
            None => Ok(true),
        })?,
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(go),
    }
}

/// What a proposition end reads as (cached for the statement): a literal object's
/// value, an element, or `None` for a concept of the 1.x control plane (a link to one
/// is not a 2.0 proposition, as `model::view` says).
fn end_bound(ctx: &Ctx, end: ElemRef) -> V2Result<Option<Bound>> {
    if let Some(b) = ctx.ends.borrow().get(&end) {
        return Ok(b.clone());
    }
    let b = match end {
        ElemRef::Concept(n) => match ctx.g.concept_head(n)? {
            Some((t, name)) if t == LITERAL_TYPE => Some(Bound::Val(
                serde_json::from_str(&name).unwrap_or(Value::String(name)),
            )),
            Some((t, name)) if model::hidden_head(&t, &name) => None,
            _ => Some(Bound::Elem(ElementId::new(ElementKind::Concept, n))),
        },
        ElemRef::Prop(n) => Some(Bound::Elem(ElementId::new(ElementKind::Proposition, n))),
    };
    let mut ends = ctx.ends.borrow_mut();
    if ends.len() >= 100_000 {
        ends.clear();
    }
    ends.insert(end, b.clone());
    Ok(b)
}

/// Matches a tuple term against what a proposition end reads as, binding an unbound
/// variable.
fn bound_matches(ctx: &Ctx, row: &mut Row, p: &Pattern, actual: &Bound) -> V2Result<bool> {
    match p {
        Pattern::Var(v) => match row.get(v) {
            Some(b) => Ok(b == actual || same(&bound_json(b), &bound_json(actual))),
            None => {
                row.insert(v.clone(), actual.clone());
                Ok(true)
            }
        },
        Pattern::Object(members) => {
            let Bound::Elem(id) = actual else {
                return Ok(false);
            };
            let Some(obj) = ctx.view(*id)? else {
                return Ok(false);
            };
            match_element(ctx, row, members, &obj, id.kind)
        }
        _ => match known(ctx, row, p)? {
            Some(b) => Ok(same(&bound_json(&b), &bound_json(actual))),
            None => Ok(false),
        },
    }
}

pub(super) fn end_matches(ctx: &Ctx, row: &mut Row, p: &Pattern, actual: &Value) -> V2Result<bool> {
    match p {
        Pattern::Object(members) => {
            // An inline concept pattern at an end.
            let Some(id) = actual.as_str().and_then(parse_id) else {
                return Ok(false);
            };
            let Some(obj) = ctx.view(id)? else {
                return Ok(false);
            };
            match_element(ctx, row, members, &obj, id.kind)
        }
        _ => match_value(ctx, row, p, actual, true),
    }
}
