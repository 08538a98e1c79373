//! Raw path queries (Specification §45): `(?x, "p"{min,max}, ?y)` follows stored
//! propositions of one predicate between `min` and `max` hops (an open `{min,}` up to
//! the query limits' `max_hops`). Paths traverse raw structure only: they never
//! propagate belief or confidence. One end must be known (bound, a parameter or a
//! literal); the other is bound to each element (or literal) reached, once.

use super::error::{Code, V2Error, V2Result};
use super::eval::{end_matches, end_ref, known, predicate_local, Ctx, Row};
use super::model;
use crate::store::ElemRef;
use kip_lang::v2::ast::{Pattern, PredicateAtom, Quantifier};
use std::collections::BTreeSet;

/// The most hops an open quantifier follows.
const MAX_HOPS: u64 = 16;

/// Every `(s, atom{q}, o)` path from the known end.
pub fn walk(
    ctx: &Ctx,
    row: &Row,
    s: &Pattern,
    atom: &PredicateAtom,
    q: Quantifier,
    o: &Pattern,
    out: &mut Vec<Row>,
) -> V2Result<()> {
    let Some(pred) = predicate_local(ctx, row, atom)? else {
        return Err(V2Error::new(
            Code::InvalidSyntax,
            "a quantified path names its predicate; a predicate variable cannot repeat",
        ));
    };
    let max = q.max.unwrap_or(MAX_HOPS).min(MAX_HOPS);
    if q.min > max {
        return Ok(());
    }
    // Walk from the known end: forward from the subject, backward from the object.
    let (start, forward, far) = match (known(ctx, row, s)?, known(ctx, row, o)?) {
        (Some(b), _) => (b, true, o),
        (None, Some(b)) => (b, false, s),
        (None, None) => {
            return Err(V2Error::new(
                Code::ResourceExhausted,
                "a quantified path needs one end bound; from every element it would walk the whole memory",
            )
            .with_hint("bind the subject or the object first, e.g. ?x CONCEPT {name: \"...\"}"))
        }
    };
    let Some(start_ref) = end_ref(ctx, &start)? else {
        return Ok(());
    };
    let mut seen: BTreeSet<ElemRef> = BTreeSet::new();
    let mut reached: Vec<ElemRef> = Vec::new();
    let mut frontier = vec![start_ref];
    if q.min == 0 {
        reached.push(start_ref);
    }
    seen.insert(start_ref);
    for depth in 1..=max {
        let mut next = Vec::new();
        for node in &frontier {
            let mut step = |_: &str, other: ElemRef, _: u64| {
                next.push(other);
                Ok(true)
            };
            if forward {
                ctx.g.scan_out(*node, Some(&pred), &mut step)?;
            } else {
                ctx.g.scan_in(*node, Some(&pred), &mut step)?;
            }
        }
        next.retain(|n| seen.insert(*n));
        if depth >= q.min {
            reached.extend(next.iter().copied());
        }
        ctx.check_rows(reached.len())?;
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    for end in reached {
        let value = model::end_value(ctx.g, end)?;
        if value
            .as_str()
            .and_then(super::eval::parse_id)
            .is_some_and(|id| ctx.view(id).ok().flatten().is_none())
        {
            continue;
        }
        let mut r = row.clone();
        if end_matches(ctx, &mut r, far, &value)? {
            out.push(r);
        }
    }
    Ok(())
}
