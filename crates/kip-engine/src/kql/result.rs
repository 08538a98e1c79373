//! From solutions to the FIND response (DECISIONS.md items 13, 14, 16, 18): projection,
//! implicit grouping and aggregation, set semantics, ordering (`null` last ascending,
//! first descending, stable), pagination with opaque cursors bound to the query, and the
//! columnar result shape.

use super::eval::{element_json, path_value, sort_cmp};
use super::exec::{run_group, Ctx, Row, Val};
use super::plan::{bound_names, compile, Plan, Vars};
use super::QueryLimits;
use crate::envelope::Outcome;
use crate::store::GraphRead;
use kip_lang::ast::{
    Aggregate, AggregateFunc, Command, Direction, DotPath, FindQuery, Projection, Slot, WhereClause,
};
use kip_lang::{ErrorCode, KipError};
use serde_json::{json, Value};
use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, HashSet};

fn unbound_var(name: &str) -> KipError {
    KipError::new(
        ErrorCode::ReferenceError,
        format!("?{name} is not bound by any pattern in WHERE"),
    )
    .with_hint(format!(
        "bind ?{name} with a pattern such as ?{name} {{type: \"...\"}} or (?{name}, \"predicate\", ?o); variables inside NOT are private to it"
    ))
}

/// Checks that every variable in `names` is bound in `clauses`; allocates slots.
pub fn prepare_vars<'a>(
    clauses: &[WhereClause],
    names: impl Iterator<Item = &'a str>,
) -> Result<Vars, KipError> {
    let mut bound = BTreeSet::new();
    bound_names(clauses, &mut bound);
    let mut vars = Vars::default();
    for n in names {
        if !bound.contains(n) {
            return Err(unbound_var(n));
        }
        vars.slot(n);
    }
    Ok(vars)
}

/// Runs `clauses` and returns the distinct values of `target` (in solution order).
pub fn solutions(
    g: &dyn GraphRead,
    clauses: &[WhereClause],
    target: &str,
    limits: &QueryLimits,
) -> Result<Vec<Val>, KipError> {
    let vars = prepare_vars(clauses, std::iter::once(target))?;
    let plan = compile(g, clauses, vars, limits.max_hops)?;
    let slot = plan.vars.get(target).ok_or_else(|| unbound_var(target))?;
    let ctx = Ctx::new(g, limits, &plan.vars);
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let empty: Row = vec![None; plan.vars.len()];
    run_group(&ctx, &plan.root, &empty, &mut |r| {
        if let Some(v) = &r[slot] {
            if seen.insert(v.clone()) {
                out.push(v.clone());
                if out.len() > limits.max_rows {
                    return Err(too_many(limits));
                }
            }
        }
        Ok(true)
    })?;
    Ok(out)
}

fn too_many(limits: &QueryLimits) -> KipError {
    KipError::new(
        ErrorCode::ResourceExhausted,
        format!("the query produced more than {} solutions", limits.max_rows),
    )
    .with_hint("add LIMIT (and page with CURSOR), or make the patterns and FILTERs more selective")
}

fn projection_vars(q: &FindQuery) -> Vec<&str> {
    let mut out = Vec::new();
    for p in q
        .projections
        .iter()
        .chain(q.order_by.iter().map(|k| &k.expr))
    {
        let path = match p {
            Projection::Path(d) => d,
            Projection::Aggregate(a) => &a.arg,
        };
        out.push(path.var.name.as_str());
    }
    out
}

/// FNV-1a, 64 bits: a stable hash for binding cursors to their query.
pub fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The identity of a query for its cursors: its canonical text without LIMIT/CURSOR.
pub fn query_fingerprint(q: &FindQuery) -> u64 {
    let mut q = q.clone();
    q.limit = None;
    q.cursor = None;
    fnv1a(&Command::Find(q).to_string())
}

/// Encodes a cursor: the offset of the next row and the query's fingerprint.
pub fn encode_cursor(offset: usize, fingerprint: u64) -> String {
    format!("kc1_{offset:x}_{fingerprint:016x}")
}

/// Decodes a cursor made for the query with `fingerprint`.
pub fn decode_cursor(token: &str, fingerprint: u64) -> Result<usize, KipError> {
    let bad = || {
        KipError::syntax(format!("invalid CURSOR token {token:?}: it was not issued for this query"))
            .with_hint("pass the next_cursor of the previous response to the same query unchanged, or re-run the query without CURSOR")
    };
    let rest = token.strip_prefix("kc1_").ok_or_else(bad)?;
    let (off, fp) = rest.split_once('_').ok_or_else(bad)?;
    let offset = usize::from_str_radix(off, 16).map_err(|_| bad())?;
    let fp = u64::from_str_radix(fp, 16).map_err(|_| bad())?;
    if fp != fingerprint {
        return Err(bad());
    }
    Ok(offset)
}

fn project(ctx: &Ctx, p: &DotPath, row: &Row) -> Result<Value, KipError> {
    path_value(ctx, p, row, true)
}

/// The FIND expressions that are dot paths (not aggregations), in order.
fn path_projections(q: &FindQuery) -> Vec<&DotPath> {
    q.projections
        .iter()
        .filter_map(|p| match p {
            Projection::Path(d) => Some(d),
            _ => None,
        })
        .collect()
}

fn project_all(ctx: &Ctx, paths: &[&DotPath], row: &Row) -> Result<Vec<Value>, KipError> {
    paths.iter().map(|d| project(ctx, d, row)).collect()
}

/// One aggregate's running state.
#[derive(Debug, Clone)]
enum Acc {
    Count(u64),
    Distinct(HashSet<String>),
    Sum {
        int: i128,
        float: f64,
        any_float: bool,
        n: u64,
    },
    Extreme(Option<Value>),
}

impl Acc {
    fn new(a: &Aggregate) -> Acc {
        match (a.func, a.distinct) {
            (AggregateFunc::Count, false) => Acc::Count(0),
            (AggregateFunc::Count, true) => Acc::Distinct(HashSet::new()),
            (AggregateFunc::Sum | AggregateFunc::Avg, _) => Acc::Sum {
                int: 0,
                float: 0.0,
                any_float: false,
                n: 0,
            },
            (AggregateFunc::Min | AggregateFunc::Max, _) => Acc::Extreme(None),
        }
    }

    fn add(&mut self, func: AggregateFunc, v: Value) {
        if v.is_null() {
            return;
        }
        match self {
            Acc::Count(n) => *n += 1,
            Acc::Distinct(set) => {
                set.insert(v.to_string());
            }
            Acc::Sum {
                int,
                float,
                any_float,
                n,
            } => {
                if let Value::Number(num) = &v {
                    *n += 1;
                    match num.as_i64() {
                        Some(i) if !*any_float => *int += i128::from(i),
                        _ => {
                            if !*any_float {
                                *float = *int as f64;
                                *any_float = true;
                            }
                            *float += num.as_f64().unwrap_or(0.0);
                        }
                    }
                }
            }
            Acc::Extreme(best) => {
                let replace = match best {
                    None => true,
                    Some(b) => {
                        let ord = sort_cmp(&v, b);
                        if func == AggregateFunc::Min {
                            ord == Ordering::Less
                        } else {
                            ord == Ordering::Greater
                        }
                    }
                };
                if replace {
                    *best = Some(v);
                }
            }
        }
    }

    fn finish(&self, func: AggregateFunc) -> Value {
        match self {
            Acc::Count(n) => json!(n),
            Acc::Distinct(set) => json!(set.len()),
            Acc::Sum {
                int,
                float,
                any_float,
                n,
            } => {
                if *n == 0 {
                    return Value::Null;
                }
                let total = if *any_float { *float } else { *int as f64 };
                if func == AggregateFunc::Avg {
                    json!(total / *n as f64)
                } else if !*any_float {
                    i64::try_from(*int)
                        .map(|i| json!(i))
                        .unwrap_or_else(|_| json!(total))
                } else {
                    json!(total)
                }
            }
            Acc::Extreme(v) => v.clone().unwrap_or(Value::Null),
        }
    }
}

fn agg_key(a: &Aggregate) -> String {
    kip_lang::printer::projection(&Projection::Aggregate(a.clone()))
}

fn cmp_keys(a: &[Value], b: &[Value], dirs: &[Direction]) -> Ordering {
    for ((x, y), d) in a.iter().zip(b).zip(dirs) {
        // ASC: values ascending, null last; DESC: the exact reverse (null first).
        let ord = sort_cmp(x, y);
        let ord = if *d == Direction::Desc {
            ord.reverse()
        } else {
            ord
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

fn compile_find(g: &dyn GraphRead, q: &FindQuery, limits: &QueryLimits) -> Result<Plan, KipError> {
    let vars = prepare_vars(&q.where_clauses, projection_vars(q).into_iter())?;
    compile(g, &q.where_clauses, vars, limits.max_hops)
}

/// Compiles a FIND and checks its cursor without running it.
pub fn validate_find(
    g: &dyn GraphRead,
    q: &FindQuery,
    limits: &QueryLimits,
) -> Result<(), KipError> {
    compile_find(g, q, limits)?;
    if let Some(Slot::Literal(t, _)) = &q.cursor {
        decode_cursor(t, query_fingerprint(q))?;
    }
    Ok(())
}

/// The plan of a FIND as text lines.
pub fn explain_find(
    g: &dyn GraphRead,
    q: &FindQuery,
    limits: &QueryLimits,
) -> Result<Vec<String>, KipError> {
    Ok(super::plan::explain(&compile_find(g, q, limits)?))
}

/// Runs a FIND query.
pub fn run_find(
    g: &dyn GraphRead,
    q: &FindQuery,
    limits: &QueryLimits,
) -> Result<Outcome, KipError> {
    let plan = compile_find(g, q, limits)?;
    let ctx = Ctx::new(g, limits, &plan.vars);
    let fingerprint = query_fingerprint(q);
    let offset = match &q.cursor {
        Some(Slot::Literal(t, _)) => decode_cursor(t, fingerprint)?,
        Some(Slot::Param(p)) => return Err(crate::kml::unbound(&p.name)),
        None => 0,
    };
    let page = limits.page(q.limit.as_ref())?;
    let has_agg = q
        .projections
        .iter()
        .chain(q.order_by.iter().map(|k| &k.expr))
        .any(|p| matches!(p, Projection::Aggregate(_)));
    let empty: Row = vec![None; plan.vars.len()];

    if !has_agg {
        return plain(&ctx, &plan, q, &empty, offset, page, fingerprint);
    }

    // Implicit GROUP BY: the non-aggregate projections form the key.
    let mut aggs: Vec<&Aggregate> = Vec::new();
    for p in q
        .projections
        .iter()
        .chain(q.order_by.iter().map(|k| &k.expr))
    {
        if let Projection::Aggregate(a) = p {
            if !aggs.iter().any(|x| agg_key(x) == agg_key(a)) {
                aggs.push(a);
            }
        }
    }
    struct GroupState {
        key_values: Vec<Value>,
        first: Row,
        accs: Vec<Acc>,
    }
    let mut groups: Vec<GroupState> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let key_paths = path_projections(q);
    run_group(&ctx, &plan.root, &empty, &mut |r| {
        let kv = key_paths
            .iter()
            .map(|d| project(&ctx, d, r))
            .collect::<Result<Vec<_>, _>>()?;
        let k = serde_json::to_string(&kv).unwrap_or_default();
        let gi = match index.get(&k) {
            Some(i) => *i,
            None => {
                if groups.len() >= limits.max_rows {
                    return Err(too_many(limits));
                }
                groups.push(GroupState {
                    key_values: kv,
                    first: r.clone(),
                    accs: aggs.iter().map(|a| Acc::new(a)).collect(),
                });
                index.insert(k, groups.len() - 1);
                groups.len() - 1
            }
        };
        for (acc, a) in groups[gi].accs.iter_mut().zip(&aggs) {
            let v = if a.func == AggregateFunc::Count && !a.distinct && a.arg.path.is_empty() {
                // COUNT(?x) counts solutions with ?x bound.
                let slot = ctx.vars.get(&a.arg.var.name);
                match slot.and_then(|s| r[s].as_ref()) {
                    Some(_) => Value::Bool(true),
                    None => Value::Null,
                }
            } else {
                project(&ctx, &a.arg, r)?
            };
            acc.add(a.func, v);
        }
        Ok(true)
    })?;
    let only_aggs = key_paths.is_empty();
    if only_aggs && groups.is_empty() {
        groups.push(GroupState {
            key_values: vec![],
            first: empty.clone(),
            accs: aggs.iter().map(|a| Acc::new(a)).collect(),
        });
    }
    let value_of = |gs: &GroupState, p: &Projection| -> Result<Value, KipError> {
        match p {
            Projection::Aggregate(a) => {
                let i = aggs
                    .iter()
                    .position(|x| agg_key(x) == agg_key(a))
                    .unwrap_or(0);
                Ok(gs
                    .accs
                    .get(i)
                    .map(|acc| acc.finish(a.func))
                    .unwrap_or(Value::Null))
            }
            Projection::Path(d) => {
                match key_paths
                    .iter()
                    .position(|k| kip_lang::printer::dot_path(k) == kip_lang::printer::dot_path(d))
                {
                    Some(i) => Ok(gs.key_values[i].clone()),
                    None => project(&ctx, d, &gs.first),
                }
            }
        }
    };
    let mut rows: Vec<(Vec<Value>, Vec<Value>)> = Vec::with_capacity(groups.len());
    for gs in &groups {
        let proj = q
            .projections
            .iter()
            .map(|p| value_of(gs, p))
            .collect::<Result<Vec<_>, _>>()?;
        let keys = q
            .order_by
            .iter()
            .map(|k| value_of(gs, &k.expr))
            .collect::<Result<Vec<_>, _>>()?;
        rows.push((proj, keys));
    }
    if only_aggs {
        let vals = rows.into_iter().next().map(|r| r.0).unwrap_or_default();
        let result = if vals.len() == 1 {
            vals.into_iter().next().unwrap_or(Value::Null)
        } else {
            Value::Array(vals)
        };
        return Ok(Outcome::ok(result));
    }
    let dirs: Vec<Direction> = q.order_by.iter().map(|k| k.direction).collect();
    rows.sort_by(|a, b| cmp_keys(&a.1, &b.1, &dirs));
    let projected: Vec<Vec<Value>> = rows.into_iter().map(|r| r.0).collect();
    Ok(paged(q, projected, offset, page, fingerprint))
}

/// Non-aggregate queries: dedupe on the projection, order, page. Without ORDER BY the
/// rows stream and matching stops once the page (plus one row, to know whether more
/// exist) is filled.
fn plain(
    ctx: &Ctx,
    plan: &Plan,
    q: &FindQuery,
    empty: &Row,
    offset: usize,
    page: usize,
    fingerprint: u64,
) -> Result<Outcome, KipError> {
    let limits = ctx.limits;
    let paths = path_projections(q);
    let order_paths: Vec<&DotPath> = q
        .order_by
        .iter()
        .filter_map(|k| match &k.expr {
            Projection::Path(d) => Some(d),
            _ => None,
        })
        .collect();
    let stop_at = offset.saturating_add(page).saturating_add(1);
    let mut out: Vec<Vec<Value>> = Vec::new();
    let mut seen = HashSet::new();
    if q.order_by.is_empty() {
        // Stream: project, dedupe, stop once the page and one more row are known.
        run_group(ctx, &plan.root, empty, &mut |r| {
            let proj = project_all(ctx, &paths, r)?;
            if seen.insert(serde_json::to_string(&proj).unwrap_or_default()) {
                out.push(proj);
                if out.len() > limits.max_rows {
                    return Err(too_many(limits));
                }
            }
            Ok(out.len() < stop_at)
        })?;
    } else {
        // Top-k: keep the best `stop_at` distinct solutions seen so far (by keys, ties in
        // solution order). The buffer is cut back whenever it doubles, so memory and
        // sorting stay proportional to the page, not to the number of solutions.
        let dirs: Vec<Direction> = q.order_by.iter().map(|k| k.direction).collect();
        let mut rows: Vec<(Vec<Value>, u64, Row)> = Vec::new();
        let mut seq = 0u64;
        let mut solutions = 0usize;
        let cut = |rows: &mut Vec<(Vec<Value>, u64, Row)>| -> Result<(), KipError> {
            rows.sort_by(|a, b| cmp_keys(&a.0, &b.0, &dirs).then(a.1.cmp(&b.1)));
            let mut distinct = HashSet::new();
            let mut kept = Vec::with_capacity(stop_at);
            for entry in rows.drain(..) {
                if kept.len() >= stop_at {
                    break;
                }
                let proj = project_all(ctx, &paths, &entry.2)?;
                if distinct.insert(serde_json::to_string(&proj).unwrap_or_default()) {
                    kept.push(entry);
                }
            }
            *rows = kept;
            Ok(())
        };
        run_group(ctx, &plan.root, empty, &mut |r| {
            let keys = project_all(ctx, &order_paths, r)?;
            rows.push((keys, seq, r.clone()));
            seq += 1;
            solutions += 1;
            if solutions > limits.max_rows {
                return Err(too_many(limits));
            }
            if rows.len() >= stop_at.saturating_mul(2).max(1024) {
                cut(&mut rows)?;
            }
            Ok(true)
        })?;
        rows.sort_by(|a, b| cmp_keys(&a.0, &b.0, &dirs).then(a.1.cmp(&b.1)));
        for (_, _, r) in &rows {
            let proj = project_all(ctx, &paths, r)?;
            if seen.insert(serde_json::to_string(&proj).unwrap_or_default()) {
                out.push(proj);
                if out.len() >= stop_at {
                    break;
                }
            }
        }
    }
    Ok(paged(q, out, offset, page, fingerprint))
}

fn paged(
    q: &FindQuery,
    rows: Vec<Vec<Value>>,
    offset: usize,
    page: usize,
    fingerprint: u64,
) -> Outcome {
    let total = rows.len();
    let end = offset.saturating_add(page).min(total);
    let slice: Vec<Vec<Value>> = if offset < total {
        rows[offset..end].to_vec()
    } else {
        Vec::new()
    };
    let next_cursor = (end < total).then(|| encode_cursor(end, fingerprint));
    let ncols = q.projections.len();
    let mut cols: Vec<Vec<Value>> = vec![Vec::with_capacity(slice.len()); ncols];
    for row in slice {
        for (i, v) in row.into_iter().enumerate() {
            if let Some(c) = cols.get_mut(i) {
                c.push(v);
            }
        }
    }
    let result = if ncols == 1 {
        Value::Array(cols.pop().unwrap_or_default())
    } else {
        Value::Array(cols.into_iter().map(Value::Array).collect())
    };
    Outcome::Ok {
        result,
        next_cursor,
    }
}

/// The whole element JSON of a value (used by DELETE reporting and tools).
pub fn val_json(ctx: &Ctx, v: &Val) -> Result<Value, KipError> {
    element_json(ctx, v)
}
