//! Access paths through the attribute value index (`kip_storage::attrs`) for KIP 2.0
//! reads, as the 1.x engine has them (`kql/index.rs`):
//!
//! - a FILTER of the block comparing `?x.attributes.k` with a number narrows the scan
//!   of `?x {type: T}` to a range of the index when the range holds fewer than half
//!   the type's concepts ([`range`]). The FILTER still runs on every candidate: the
//!   index only chooses which concepts are read (its keys are `f64`s, and the bounds
//!   are inclusive), so it never changes a result;
//! - `ORDER BY ?x.attributes.k [DESC] LIMIT n` (that one key) over a block of one such pattern (and
//!   FILTERs) walks the index in order and stops once `n` solutions and their ties are
//!   found ([`Walk`]), when every concept of the type has an indexed value of `k` (the
//!   statistics say so): the index then holds the whole order, which is the order
//!   `query.rs` sorts in (numbers, strings, booleans; reversed by DESC).

use super::error::V2Result;
use super::eval::{self, Ctx, Row};
use crate::store::{attrs, Stat};
use kip_lang::v2::ast::Value as AstValue;
use kip_lang::v2::ast::{BinOp, Expr, ObjectPattern, Pattern, Projection, Query, WhereClause};
use serde_json::Value;
use std::ops::Bound;

/// The attribute `k` when `e` is exactly `?var.attributes.k`.
fn attr_of<'e>(e: &'e Expr, var: &str) -> Option<&'e str> {
    match e {
        Expr::Value(AstValue::Field(f)) if f.var == var => match f.steps.as_slice() {
            [a, k] if a == "attributes" => Some(k.as_str()),
            _ => None,
        },
        Expr::Group(inner) => attr_of(inner, var),
        _ => None,
    }
}

/// A number an expression is without reading any row (a literal, a parameter).
fn constant(ctx: &Ctx, e: &Expr) -> Option<f64> {
    let v = match e {
        Expr::Value(AstValue::Literal(v)) => v.clone(),
        Expr::Value(AstValue::Param(p)) => ctx.param(p).ok()?,
        Expr::Group(inner) => return constant(ctx, inner),
        _ => return None,
    };
    v.as_f64().filter(|f| f.is_finite())
}

/// The `&&` conjuncts of the block's FILTERs.
fn conjuncts<'e>(filters: &[&'e Expr]) -> Vec<&'e Expr> {
    let mut out = Vec::new();
    let mut stack: Vec<&Expr> = filters.iter().rev().copied().collect();
    while let Some(e) = stack.pop() {
        match e {
            Expr::Binary(BinOp::And, l, r) => {
                stack.push(r);
                stack.push(l);
            }
            Expr::Group(inner) => stack.push(inner),
            other => out.push(other),
        }
    }
    out
}

/// The index range (inclusive value keys, numbers only) the conditions on `var` allow,
/// for the first attribute they constrain.
fn bounds(ctx: &Ctx, var: &str, filters: &[&Expr]) -> Option<(String, String, String)> {
    let mut found: Option<(String, String, String)> = None;
    let end_of_numbers = attrs::STRING.to_string();
    for c in conjuncts(filters) {
        let Expr::Binary(op, l, r) = c else { continue };
        let (attr, x, op) = match (attr_of(l, var), attr_of(r, var)) {
            (Some(a), None) => (a, constant(ctx, r), *op),
            (None, Some(a)) => (a, constant(ctx, l), flip(*op)),
            _ => continue,
        };
        let Some(x) = x else { continue };
        let key = attrs::number_key(x);
        let (lo, hi) = match op {
            BinOp::Eq => (key.clone(), key),
            BinOp::Gt | BinOp::Ge => (key, end_of_numbers.clone()),
            BinOp::Lt | BinOp::Le => (attrs::NUMBER.to_string(), key),
            _ => continue,
        };
        match &mut found {
            None => found = Some((attr.to_string(), lo, hi)),
            Some((a, flo, fhi)) if a == attr => {
                if lo > *flo {
                    *flo = lo;
                }
                if hi < *fhi {
                    *fhi = hi;
                }
            }
            Some(_) => {}
        }
    }
    found
}

fn flip(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::Le => BinOp::Ge,
        BinOp::Gt => BinOp::Lt,
        BinOp::Ge => BinOp::Le,
        other => other,
    }
}

/// The concepts of `concept_type` the block's FILTERs on `var` can keep, read from the
/// attribute index, when that is fewer than half the type; `None`: scan the type.
pub fn range(
    ctx: &Ctx,
    var: &str,
    concept_type: &str,
    filters: &[&Expr],
) -> V2Result<Option<Vec<u64>>> {
    let Some((attr, lo, hi)) = bounds(ctx, var, filters) else {
        return Ok(None);
    };
    if lo > hi {
        return Ok(Some(Vec::new()));
    }
    let all = ctx.g.stat(Stat::Type(concept_type))?;
    let cap = (all / 2) as usize;
    let mut ids = Vec::new();
    let mut over = false;
    ctx.g.scan_attr(
        concept_type,
        &attr,
        Bound::Included(lo.as_str()),
        Bound::Included(hi.as_str()),
        false,
        &mut |_, n| {
            ids.push(n);
            over = ids.len() > cap;
            Ok(!over)
        },
    )?;
    if over {
        return Ok(None);
    }
    ids.sort_unstable();
    Ok(Some(ids))
}

/// An ORDER BY answered by walking the attribute index.
pub struct Walk<'q> {
    /// The pattern's variable.
    pub var: &'q str,
    /// The concept type's local name.
    pub concept_type: String,
    /// The attribute ordered by.
    pub attr: &'q str,
    /// Descending.
    pub rev: bool,
}

/// The walk that answers `q`'s ORDER BY, when the index holds its whole order.
pub fn walk<'q>(ctx: &Ctx, q: &'q Query) -> Option<Walk<'q>> {
    // One key only: with a second key, ties of the first are ordered by it, which the
    // index does not hold.
    let [first] = q.order_by.as_slice() else {
        return None;
    };
    let mut pattern: Option<(&str, &ObjectPattern)> = None;
    for c in &q.where_clauses {
        match c {
            WhereClause::Concept { var, pattern: p } if pattern.is_none() => {
                pattern = Some((var, p))
            }
            WhereClause::Filter(_) => {}
            _ => return None,
        }
    }
    let (var, p) = pattern?;
    let [(k, term)] = p.as_slice() else {
        return None;
    };
    let t = match term {
        Pattern::Literal(Value::String(t)) if k == "type" => t.clone(),
        Pattern::Param(name) if k == "type" => ctx.param(name).ok()?.as_str()?.to_string(),
        _ => return None,
    };
    let concept_type = ctx
        .resolve(super::schema_env::SymbolKind::ConceptType, &t)
        .ok()?
        .local;
    let Projection::Expr(e) = &first.key else {
        return None;
    };
    let attr = attr_of(e, var)?;
    // The counts are today's: in a read of the past they cannot say that every
    // concept of the type had a value then.
    if ctx.past {
        return None;
    }
    let all = ctx.g.stat(Stat::Type(&concept_type)).ok()?;
    let indexed = ctx.g.stat(Stat::Attr(&concept_type, attr)).ok()?;
    if all != indexed {
        return None;
    }
    Some(Walk {
        var,
        concept_type,
        attr,
        rev: first.descending,
    })
}

impl Walk<'_> {
    /// The solutions in the index's order until `limit` of them are found. Ties (one
    /// value) are taken in concept order whichever the direction, as a sorted type scan
    /// gives them: the index's entries of a value are read (cheap: no record is
    /// decoded), then evaluated in id order.
    pub fn run(
        &self,
        ctx: &Ctx,
        q: &Query,
        limit: usize,
        out: &mut Vec<(u64, Row)>,
    ) -> V2Result<()> {
        let mut failure = None;
        let mut group: Vec<u64> = Vec::new();
        let mut group_key = String::new();
        // Evaluates one value's concepts; false once `limit` solutions are found.
        let flush = |group: &mut Vec<u64>, out: &mut Vec<(u64, Row)>| -> V2Result<bool> {
            group.sort_unstable();
            for n in group.drain(..) {
                if out.len() >= limit {
                    return Ok(false);
                }
                let mut seed = Row::new();
                let id = crate::store::ElementId::new(crate::store::ElementKind::Concept, n);
                seed.insert(self.var.to_string(), eval::Bound::Elem(id));
                eval::each(ctx, &q.where_clauses, seed, &mut |r| {
                    out.push((n, r));
                    Ok(true)
                })?;
                ctx.check_rows(out.len())?;
            }
            Ok(out.len() < limit)
        };
        ctx.g.scan_attr(
            &self.concept_type,
            self.attr,
            Bound::Unbounded,
            Bound::Unbounded,
            self.rev,
            &mut |key, n| {
                if key != group_key {
                    match flush(&mut group, out) {
                        Ok(true) => {}
                        Ok(false) => return Ok(false),
                        Err(e) => {
                            failure = Some(e);
                            return Ok(false);
                        }
                    }
                    group_key = key.to_string();
                }
                group.push(n);
                Ok(true)
            },
        )?;
        if let Some(e) = failure {
            return Err(e);
        }
        flush(&mut group, out)?;
        out.truncate(limit);
        Ok(())
    }
}
