//! Solving a WHERE block (Specification §43-44), depth first: each row is extended
//! clause by clause, in the planner's order (`plan.rs`), and each solution is handed
//! on as soon as it is complete, so a reader that needs only some of them (a LIMIT
//! without ORDER BY, a NOT asking whether any exists) stops the search there instead
//! of materialising every solution first.
//!
//! FILTER keeps a row only when its expression is `true` (a comparison between unlike
//! types is null and decides nothing), NOT keeps a row the block cannot extend,
//! OPTIONAL pads what it would bind with null when it finds nothing (§44.4), UNION
//! widens: the solutions of the clauses before it and those of its block, each
//! continued by the clauses after it.

use super::error::V2Result;
use super::eval::{self, Bound, Ctx, Emit, Row};
use super::plan;
use kip_lang::v2::ast::{Expr, WhereClause};
use serde_json::Value;

/// Every solution of `clauses` from the `seed` rows (`ResourceExhausted` past the
/// statement's row bound).
pub fn solve(ctx: &Ctx, clauses: &[WhereClause], seed: Vec<Row>) -> V2Result<Vec<Row>> {
    let mut out = Vec::new();
    for row in seed {
        each(ctx, clauses, row, &mut |r| {
            out.push(r);
            ctx.check_rows(out.len())?;
            Ok(true)
        })?;
    }
    Ok(out)
}

/// Sends each solution of `clauses` extending `row` to `emit`; `Ok(false)` when `emit`
/// asked to stop.
pub fn each(ctx: &Ctx, clauses: &[WhereClause], row: Row, emit: &mut Emit) -> V2Result<bool> {
    let last_union = clauses
        .iter()
        .rposition(|c| matches!(c, WhereClause::Union(_)));
    let Some(u) = last_union else {
        let order = plan::order(ctx, clauses, &row);
        return step(ctx, clauses, &order, 0, row, emit);
    };
    let (before, alternative, after) = match &clauses[u] {
        WhereClause::Union(alt) => (&clauses[..u], alt, &clauses[u + 1..]),
        _ => return Ok(true),
    };
    let mut go = |r: Row| {
        let order = plan::order(ctx, after, &r);
        step(ctx, after, &order, 0, r, emit)
    };
    if !each(ctx, before, row.clone(), &mut go)? {
        return Ok(false);
    }
    each(ctx, alternative, row, &mut go)
}

/// Runs `clauses[order[i]]` and the ones after it on `row` (a block without UNION).
fn step(
    ctx: &Ctx,
    clauses: &[WhereClause],
    order: &[usize],
    i: usize,
    row: Row,
    emit: &mut Emit,
) -> V2Result<bool> {
    ctx.tick()?;
    let Some(clause) = order.get(i).and_then(|&k| clauses.get(k)) else {
        return emit(row);
    };
    let mut next = |r: Row| step(ctx, clauses, order, i + 1, r, emit);
    match clause {
        WhereClause::Concept { var, pattern } => {
            let filters: Vec<&Expr> = clauses
                .iter()
                .filter_map(|c| match c {
                    WhereClause::Filter(e) => Some(e),
                    _ => None,
                })
                .collect();
            eval::concepts(ctx, &row, var, pattern, &filters, &mut next)
        }
        WhereClause::Proposition { var, tuple } => {
            eval::propositions(ctx, &row, var.as_deref(), tuple, &mut next)
        }
        WhereClause::Record { var, kind, pattern } => {
            eval::records(ctx, &row, var, *kind, pattern, &mut next)
        }
        WhereClause::Filter(e) => {
            if eval::eval(ctx, &row, e)? == Value::Bool(true) {
                next(row)
            } else {
                Ok(true)
            }
        }
        WhereClause::Not(block) => {
            let mut found = false;
            each(ctx, block, row.clone(), &mut |_| {
                found = true;
                Ok(false)
            })?;
            if found {
                Ok(true)
            } else {
                next(row)
            }
        }
        WhereClause::Optional(block) => {
            let mut any = false;
            let go = each(ctx, block, row.clone(), &mut |r| {
                any = true;
                next(r)
            })?;
            if !go || any {
                return Ok(go);
            }
            // §44.4: padded, not dropped: what the block would bind is null.
            let mut padded = row;
            let mut vars = Vec::new();
            plan::binds(block, &mut vars);
            for v in vars {
                padded.entry(v).or_insert(Bound::Val(Value::Null));
            }
            next(padded)
        }
        WhereClause::Union(_) => each(ctx, std::slice::from_ref(clause), row, &mut next),
        WhereClause::Structural {
            var,
            from,
            field,
            to,
        } => {
            let mut out = Vec::new();
            super::structural::pattern(ctx, &row, var.as_deref(), from, field, to, &mut out)?;
            eval::emit_all(out, &mut next)
        }
        WhereClause::Belief { var, target } => {
            let mut out = Vec::new();
            super::belief::belief(ctx, &row, var, target, &mut out)?;
            eval::emit_all(out, &mut next)
        }
        WhereClause::BeliefSlot {
            var,
            subject,
            predicate,
        } => {
            let mut out = Vec::new();
            super::belief::slot(ctx, &row, var, subject, predicate, &mut out)?;
            eval::emit_all(out, &mut next)
        }
    }
}
