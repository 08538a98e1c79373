//! `FIND` (Specification §42-44): the WHERE block's solutions, projected; aggregates
//! group by the projected expressions that are not aggregates (§44.6, which the
//! reference engine lacks); ORDER BY applies its keys left to right with nulls last
//! (§44.7), ties keep the solutions' order (index order, deterministic); LIMIT cuts.
//! One projected expression answers a list of values, several a list of rows.

use super::error::{Code, V2Error, V2Result};
use super::eval::{self, compare, each, eval, unsupported, Ctx, Row};
use kip_lang::v2::ast::{Expr, Projection, Query, Value as AstValue};
use serde_json::{json, Value};
use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

/// Runs a query; the operation's result. A CURSOR traversal is run by `cursors.rs`.
pub fn find(ctx: &Ctx, q: &Query) -> V2Result<Value> {
    if q.cursor.is_some() {
        return Err(unsupported("CURSOR pagination outside a request's FIND"));
    }
    let limit = limit_of(ctx, q)?;
    Ok(Value::Array(rows(ctx, q, limit)?))
}

/// The query's LIMIT.
pub fn limit_of(ctx: &Ctx, q: &Query) -> V2Result<Option<usize>> {
    match &q.limit {
        None => Ok(None),
        Some(s) => match eval::scalar(ctx, s)?.as_u64() {
            Some(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
            None => Err(
                V2Error::new(Code::TypeMismatch, "LIMIT takes a whole number")
                    .with_hint("LIMIT 10"),
            ),
        },
    }
}

/// The query's result rows, at most `limit` of them.
pub fn rows(ctx: &Ctx, q: &Query, limit: Option<usize>) -> V2Result<Vec<Value>> {
    if q.as_of.is_some() && !ctx.past {
        return Err(unsupported("AS OF reads in this position"));
    }
    if let Some(members) = &q.epistemic {
        let mut m = serde_json::Map::new();
        for (k, v) in members {
            m.insert(k.clone(), eval::value(ctx, &Row::new(), v)?);
        }
        *ctx.policy.borrow_mut() = super::belief::Policy::read(&m)?;
    }
    if let Some(t) = &q.for_time {
        // FOR TIME decides the world-valid time over a WITH EPISTEMIC valid_at.
        let at = eval::scalar(ctx, t)?;
        ctx.policy.borrow_mut().for_time(&at)?;
    }
    let aggregated = q
        .projection
        .iter()
        .any(|p| matches!(p, Projection::Aggregate { .. }));
    let desc: Vec<bool> = q.order_by.iter().map(|o| o.descending).collect();
    let mut out: Vec<(Vec<Value>, Vec<Value>)> = if aggregated {
        let mut out = aggregate(ctx, q)?;
        if !q.order_by.is_empty() {
            out.sort_by(|a, b| order(&a.1, &b.1, &desc));
        }
        out
    } else if q.order_by.is_empty() {
        // Solutions stream: the search stops at the LIMIT.
        let mut out = Vec::new();
        if limit != Some(0) {
            each(ctx, &q.where_clauses, Row::new(), &mut |row| {
                out.push((columns(ctx, q, &row)?, Vec::new()));
                ctx.check_rows(out.len())?;
                Ok(limit.is_none_or(|n| out.len() < n))
            })?;
        }
        out
    } else {
        // Sorted: with a LIMIT only the best `n` so far are kept (a stable sort of
        // the kept ones followed by the newer ones keeps ties in solution order), or
        // the attribute index is walked in order when it holds the whole order.
        let mut kept: Vec<(Vec<Value>, Row)> = Vec::new();
        let walk = limit.and_then(|n| super::access::walk(ctx, q).map(|w| (w, n)));
        if let Some((w, n)) = walk {
            let mut found = Vec::new();
            w.run(ctx, q, n, &mut found)?;
            // Solution order is concept order, as a type scan gives it.
            found.sort_by_key(|(id, _)| *id);
            for (_, row) in found {
                kept.push((keys(ctx, q, &row)?, row));
            }
        } else {
            let mut seen = 0usize;
            each(ctx, &q.where_clauses, Row::new(), &mut |row| {
                kept.push((keys(ctx, q, &row)?, row));
                seen += 1;
                if limit.is_none() {
                    // With a LIMIT what is kept stays small; the time budget bounds it.
                    ctx.check_rows(seen)?;
                }
                if let Some(n) = limit {
                    if kept.len() >= n.max(16).saturating_mul(2) {
                        kept.sort_by(|a, b| order(&a.0, &b.0, &desc));
                        kept.truncate(n);
                    }
                }
                Ok(true)
            })?;
        }
        kept.sort_by(|a, b| order(&a.0, &b.0, &desc));
        if let Some(n) = limit {
            kept.truncate(n);
        }
        kept.into_iter()
            .map(|(keys, row)| Ok((columns(ctx, q, &row)?, keys)))
            .collect::<V2Result<Vec<_>>>()?
    };
    if let Some(n) = limit {
        out.truncate(n);
    }
    let single = q.projection.len() == 1;
    Ok(out
        .into_iter()
        .map(|(mut cols, _)| {
            if single {
                cols.pop().unwrap_or(Value::Null)
            } else {
                Value::Array(cols)
            }
        })
        .collect())
}

/// Compares two sort keys: left to right, nulls last, unlike kinds by [`type_rank`].
fn order(a: &[Value], b: &[Value], desc: &[bool]) -> Ordering {
    for ((x, y), d) in a.iter().zip(b).zip(desc) {
        let o = match (x.is_null(), y.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            _ => {
                let o = compare(x, y).unwrap_or_else(|| type_rank(x).cmp(&type_rank(y)));
                if *d {
                    o.reverse()
                } else {
                    o
                }
            }
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// Values of unlike kinds sort numbers, strings, booleans (as 1.x and the attribute
/// index do), then arrays and objects; DESC reverses the whole order, nulls stay last.
fn type_rank(v: &Value) -> u8 {
    match v {
        Value::Number(_) => 0,
        Value::String(_) => 1,
        Value::Bool(_) => 2,
        Value::Array(_) => 3,
        Value::Object(_) => 4,
        Value::Null => 5,
    }
}

/// The ORDER BY keys of one solution.
fn keys(ctx: &Ctx, q: &Query, row: &Row) -> V2Result<Vec<Value>> {
    q.order_by
        .iter()
        .map(|o| project(ctx, row, &o.key))
        .collect()
}

/// The projected columns of one solution.
fn columns(ctx: &Ctx, q: &Query, row: &Row) -> V2Result<Vec<Value>> {
    q.projection.iter().map(|p| project(ctx, row, p)).collect()
}

fn project(ctx: &Ctx, row: &Row, p: &Projection) -> V2Result<Value> {
    match p {
        Projection::Expr(e) => eval(ctx, row, e),
        Projection::Aggregate { func, .. } => Err(V2Error::new(
            Code::InvalidSyntax,
            format!("{func}(...) is an aggregate; it cannot be ordered by outside the FIND list"),
        )
        .with_hint("put the aggregate in the FIND list and ORDER BY the same expression")),
    }
}

/// One group of a grouped FIND: its key and, per aggregate, the values it collected.
struct Group {
    key: Vec<Value>,
    values: Vec<Vec<Value>>,
    seen: Vec<HashSet<String>>,
    /// What a COUNT without DISTINCT counted (its values are not kept).
    counts: Vec<u64>,
}

/// Whether COUNT counts this solution: its argument is not null (a bare variable
/// bound to an element always counts, without building the element's object).
fn counts(ctx: &Ctx, row: &Row, arg: &Expr) -> V2Result<bool> {
    if let Expr::Value(AstValue::Field(f)) = arg {
        if f.steps.is_empty() {
            if let Some(b) = row.get(&f.var) {
                return Ok(!matches!(b, eval::Bound::Val(Value::Null)));
            }
        }
    }
    Ok(!eval(ctx, row, arg)?.is_null())
}

/// The value an aggregate collects from a solution. COUNT of a bare variable bound to
/// an element counts the element by its id: its object is never built.
fn aggregate_value(ctx: &Ctx, row: &Row, func: &str, arg: &Expr) -> V2Result<Value> {
    if func == "COUNT" {
        if let Expr::Value(AstValue::Field(f)) = arg {
            if f.steps.is_empty() {
                if let Some(b) = row.get(&f.var) {
                    return Ok(eval::bound_json(b));
                }
            }
        }
    }
    eval(ctx, row, arg)
}

/// Groups the solutions by the non-aggregate projections and computes the aggregates,
/// as the solutions are found (none is kept).
fn aggregate(ctx: &Ctx, q: &Query) -> V2Result<Vec<(Vec<Value>, Vec<Value>)>> {
    let aggregates: Vec<(&str, bool, &Expr)> = q
        .projection
        .iter()
        .filter_map(|p| match p {
            Projection::Aggregate {
                func,
                distinct,
                arg,
            } => Some((func.as_str(), *distinct, arg)),
            Projection::Expr(_) => None,
        })
        .collect();
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    each(ctx, &q.where_clauses, Row::new(), &mut |row| {
        let mut key = Vec::new();
        for p in &q.projection {
            if let Projection::Expr(e) = p {
                key.push(eval(ctx, &row, e)?);
            }
        }
        // Groups in order of first appearance, found by the key's JSON text.
        let text = serde_json::to_string(&key).unwrap_or_default();
        let g = match index.get(&text) {
            Some(&i) => i,
            None => {
                index.insert(text, groups.len());
                groups.push(Group {
                    key,
                    values: vec![Vec::new(); aggregates.len()],
                    seen: vec![HashSet::new(); aggregates.len()],
                    counts: vec![0; aggregates.len()],
                });
                ctx.check_rows(groups.len())?;
                groups.len() - 1
            }
        };
        for (i, (func, distinct, arg)) in aggregates.iter().enumerate() {
            if *func == "COUNT" && !*distinct {
                // A count needs only whether there is a value.
                if counts(ctx, &row, arg)? {
                    if let Some(c) = groups.get_mut(g).and_then(|x| x.counts.get_mut(i)) {
                        *c += 1;
                    }
                }
                continue;
            }
            let v = aggregate_value(ctx, &row, func, arg)?;
            if v.is_null() {
                continue;
            }
            // DISTINCT by value (numbers by value: 1 and 1.0 are one).
            if *distinct {
                let text = match v.as_f64() {
                    Some(f) => format!("#{f}"),
                    None => super::request::canonical(&v).to_string(),
                };
                let fresh = groups
                    .get_mut(g)
                    .and_then(|x| x.seen.get_mut(i))
                    .is_some_and(|seen| seen.insert(text));
                if !fresh {
                    continue;
                }
            }
            if let Some(values) = groups.get_mut(g).and_then(|x| x.values.get_mut(i)) {
                values.push(v);
            }
        }
        Ok(true)
    })?;
    let grouped = q
        .projection
        .iter()
        .any(|p| matches!(p, Projection::Expr(_)));
    if groups.is_empty() && !grouped {
        // Aggregates over nothing: one row (COUNT 0 is not a falsehood, §44.6).
        groups.push(Group {
            key: Vec::new(),
            values: vec![Vec::new(); aggregates.len()],
            seen: Vec::new(),
            counts: vec![0; aggregates.len()],
        });
    }
    let mut out = Vec::with_capacity(groups.len());
    for group in groups {
        let mut key = group.key.into_iter();
        let mut i = 0;
        let mut cols = Vec::with_capacity(q.projection.len());
        for p in &q.projection {
            cols.push(match p {
                Projection::Expr(_) => key.next().unwrap_or(Value::Null),
                Projection::Aggregate { func, distinct, .. } => {
                    let v = if func == "COUNT" && !*distinct {
                        json!(group.counts.get(i).copied().unwrap_or(0))
                    } else {
                        fold(func, group.values.get(i).map_or(&[][..], Vec::as_slice))?
                    };
                    i += 1;
                    v
                }
            });
        }
        let keys = q
            .order_by
            .iter()
            .map(|o| {
                q.projection
                    .iter()
                    .position(|p| p == &o.key)
                    .map(|i| cols[i].clone())
                    .ok_or_else(|| {
                        V2Error::new(
                            Code::InvalidSyntax,
                            "a grouped FIND orders by the expressions it projects",
                        )
                        .with_hint(
                            "ORDER BY one of the FIND list's expressions, written the same way",
                        )
                    })
            })
            .collect::<V2Result<Vec<_>>>()?;
        out.push((cols, keys));
    }
    Ok(out)
}

fn fold(func: &str, vals: &[Value]) -> V2Result<Value> {
    let nums = || vals.iter().filter_map(Value::as_f64);
    Ok(match func {
        "COUNT" => json!(vals.len()),
        "SUM" => {
            let s: f64 = nums().sum();
            if vals.iter().all(|v| v.is_i64() || v.is_u64()) {
                json!(s as i64)
            } else {
                json!(s)
            }
        }
        "AVG" => {
            let n: Vec<f64> = nums().collect();
            if n.is_empty() {
                Value::Null
            } else {
                json!(n.iter().sum::<f64>() / n.len() as f64)
            }
        }
        "MIN" | "MAX" => {
            let mut best: Option<&Value> = None;
            for v in vals {
                best = match best {
                    None => Some(v),
                    Some(b) => match compare(v, b) {
                        Some(Ordering::Less) if func == "MIN" => Some(v),
                        Some(Ordering::Greater) if func == "MAX" => Some(v),
                        _ => Some(b),
                    },
                };
            }
            best.cloned().unwrap_or(Value::Null)
        }
        other => {
            return Err(
                V2Error::new(Code::InvalidSyntax, format!("{other} is not an aggregate"))
                    .with_hint("COUNT, SUM, AVG, MIN, MAX"),
            )
        }
    })
}
