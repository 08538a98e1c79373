//! From solutions to the FIND response (DECISIONS.md items 13, 14, 16, 18): projection,
//! implicit grouping and aggregation, set semantics, ordering (`null` last ascending,
//! first descending, stable), pagination with opaque cursors bound to the query, and the
//! columnar result shape.
//!
//! One file on purpose (about 1,050 lines): projection, grouping, ordering and paging
//! and the target solutions of DELETE/UPDATE/EXPORT share the row representation, and a
//! cursor must resume exactly where the plain or the grouped path left off; they change
//! together. The cursor tokens themselves (anchors, tie order, encoding) are in
//! `cursor.rs`, the attribute index walk in `index.rs`, link counting in `join.rs`.

use super::cursor::stale_cursor;
pub use super::cursor::{
    decode_cursor, encode_cursor, fnv1a, query_fingerprint, row_hash, Anchor, Tie,
};
use super::eval::{path_value, sort_cmp};
use super::exec::{run_group, Ctx, More, Row, Val};
use super::plan::{bound_names, compile, Plan, Vars};
use super::QueryLimits;
use crate::outcome::Outcome;
use crate::store::GraphRead;
use kip_lang::ast::{
    Aggregate, AggregateFunc, Direction, DotPath, FindQuery, Projection, Slot, WhereClause,
};
use kip_lang::{ErrorCode, KipError};
use serde_json::{json, Value};
use std::cell::RefCell;
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
    solutions_up_to(g, clauses, target, limits, usize::MAX)
}

/// [`solutions`], stopping once `max` distinct values are found (the first `max` in
/// solution order): an UPDATE with LIMIT does not match more than it changes.
pub fn solutions_up_to(
    g: &dyn GraphRead,
    clauses: &[WhereClause],
    target: &str,
    limits: &QueryLimits,
    max: usize,
) -> Result<Vec<Val>, KipError> {
    let vars = prepare_vars(clauses, std::iter::once(target))?;
    let plan = compile(g, clauses, vars, limits)?;
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
                if out.len() >= max {
                    return Ok(false);
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

    /// Adds the state of the same aggregate over other rows.
    fn merge(&mut self, func: AggregateFunc, other: Acc) {
        match (self, other) {
            (Acc::Count(a), Acc::Count(b)) => *a += b,
            (Acc::Distinct(a), Acc::Distinct(b)) => a.extend(b),
            (
                Acc::Sum {
                    int,
                    float,
                    any_float,
                    n,
                },
                Acc::Sum {
                    int: i2,
                    float: f2,
                    any_float: af2,
                    n: n2,
                },
            ) => {
                *n += n2;
                match (*any_float, af2) {
                    (false, false) => *int += i2,
                    (true, false) => *float += i2 as f64,
                    (false, true) => {
                        *float = *int as f64 + f2;
                        *any_float = true;
                    }
                    (true, true) => *float += f2,
                }
            }
            // MIN and MAX: the other's extreme competes like one more value.
            (me @ Acc::Extreme(_), Acc::Extreme(Some(v))) => me.add(func, v),
            _ => {}
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
    compile(g, &q.where_clauses, vars, limits)
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
    let plan = compile_find(g, q, limits)?;
    let mut lines = super::plan::explain(&plan);
    let has_agg = q
        .projections
        .iter()
        .chain(q.order_by.iter().map(|k| &k.expr))
        .any(|p| matches!(p, Projection::Aggregate(_)));
    if has_agg {
        let aggs: Vec<&Aggregate> = q
            .projections
            .iter()
            .chain(q.order_by.iter().map(|k| &k.expr))
            .filter_map(|p| match p {
                Projection::Aggregate(a) => Some(a),
                Projection::Path(_) => None,
            })
            .collect();
        let counted = has_only_link_counts(&aggs)
            && super::join::counted_shape(&plan.root, &read_slots(q, &plan.vars)).is_some();
        lines.push(if counted {
            "group: COUNT of the links into each scanned concept read from the index (no row per link), keys projected once per concept".to_string()
        } else {
            "group: rows grouped by the bindings of the key's variables (no per-row projection), keys projected once per group".to_string()
        });
    }
    if let Some(first) = q.order_by.first() {
        let key = match &first.expr {
            Projection::Path(d) => kip_lang::printer::dot_path(d),
            p @ Projection::Aggregate(_) => kip_lang::printer::projection(p),
        };
        let dir = if first.direction == Direction::Desc {
            "DESC"
        } else {
            "ASC"
        };
        let ctx = Ctx::new(g, limits, &plan.vars);
        let how = match super::index::ordered_walk(&ctx, &plan, q, None).filter(|_| !has_agg) {
            Some(w) => format!(
                "walk of the attribute index {}.{} in order, stopping once the page is full",
                w.concept_type, w.attr
            ),
            None => "every solution read, the best page kept (bounded buffer)".to_string(),
        };
        lines.push(format!("order by {key} {dir}: {how}"));
    }
    Ok(lines)
}

/// Runs a FIND query.
///
/// Long (about 220 lines): the dispatch between the plain, grouped and aggregate paths
/// reads the same compiled plan, cursor and page once; the paths themselves are
/// functions of their own.
pub fn run_find(
    g: &dyn GraphRead,
    q: &FindQuery,
    limits: &QueryLimits,
) -> Result<Outcome, KipError> {
    let plan = compile_find(g, q, limits)?;
    let ctx = Ctx::new(g, limits, &plan.vars);
    let fingerprint = query_fingerprint(q);
    let anchor = match &q.cursor {
        Some(Slot::Literal(t, _)) => Some(decode_cursor(t, fingerprint)?),
        Some(Slot::Param(p)) => return Err(crate::kml::unbound(&p.name)),
        None => None,
    };
    let page = limits.page(q.limit.as_ref())?;
    let has_agg = q
        .projections
        .iter()
        .chain(q.order_by.iter().map(|k| &k.expr))
        .any(|p| matches!(p, Projection::Aggregate(_)));
    let empty: Row = vec![None; plan.vars.len()];

    if !has_agg {
        return plain(&ctx, &plan, q, &empty, anchor, page, fingerprint);
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
    let key_paths = path_projections(q);
    // Rows are grouped first by what the key's variables are bound to (hashing a few
    // ids, no allocation per row), and the key values are projected once per such
    // binding; bindings whose keys come out equal (two concepts of one name) are merged
    // after the scan.
    let mut key_slots: Vec<usize> = Vec::new();
    for d in &key_paths {
        if let Some(s) = ctx.vars.get(&d.var.name) {
            if !key_slots.contains(&s) {
                key_slots.push(s);
            }
        }
    }
    let mut bindings: Vec<GroupState> = Vec::new();
    let mut by_binding: super::exec::FastMap<Vec<Option<Val>>, usize> = Default::default();
    let mut scratch: Vec<Option<Val>> = Vec::with_capacity(key_slots.len());
    let counted = if has_only_link_counts(&aggs) {
        super::join::count_in_links(&ctx, &plan.root, &read_slots(q, &plan.vars))?
    } else {
        None
    };
    if let Some(counts) = counted {
        // COUNT per concept of the links into it, read from the index without making
        // a row per link.
        let Some(super::plan::Step::Concept(c)) = plan.root.steps.first() else {
            return Err(KipError::internal(
                "a counted plan starts with a concept scan",
            ));
        };
        for (n, links) in counts {
            if bindings.len() >= limits.max_rows {
                return Err(too_many(limits));
            }
            let mut r = empty.clone();
            r[c.var] = Some(Val::Elem(crate::store::ElemRef::Concept(n)));
            let kv = key_paths
                .iter()
                .map(|d| project(&ctx, d, &r))
                .collect::<Result<Vec<_>, _>>()?;
            bindings.push(GroupState {
                key_values: kv,
                first: r,
                accs: aggs.iter().map(|_| Acc::Count(links)).collect(),
            });
        }
    } else {
        run_group(&ctx, &plan.root, &empty, &mut |r| {
            scratch.clear();
            scratch.extend(key_slots.iter().map(|s| r[*s].clone()));
            let gi = match by_binding.get(&scratch) {
                Some(i) => *i,
                None => {
                    if bindings.len() >= limits.max_rows {
                        return Err(too_many(limits));
                    }
                    let kv = key_paths
                        .iter()
                        .map(|d| project(&ctx, d, r))
                        .collect::<Result<Vec<_>, _>>()?;
                    bindings.push(GroupState {
                        key_values: kv,
                        first: r.clone(),
                        accs: aggs.iter().map(|a| Acc::new(a)).collect(),
                    });
                    by_binding.insert(scratch.clone(), bindings.len() - 1);
                    bindings.len() - 1
                }
            };
            for (acc, a) in bindings[gi].accs.iter_mut().zip(&aggs) {
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
    }
    drop(by_binding);
    let mut groups: Vec<GroupState> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for b in bindings {
        let k = serde_json::to_string(&b.key_values).unwrap_or_default();
        match index.get(&k) {
            Some(i) => {
                for ((acc, other), a) in groups[*i].accs.iter_mut().zip(b.accs).zip(&aggs) {
                    acc.merge(a.func, other);
                }
            }
            None => {
                index.insert(k, groups.len());
                groups.push(b);
            }
        }
    }
    let only_aggs = key_paths.is_empty();
    if only_aggs && groups.is_empty() {
        groups.push(GroupState {
            key_values: vec![],
            first: empty.clone(),
            accs: aggs.iter().map(|a| Acc::new(a)).collect(),
        });
    }
    let agg_keys: Vec<String> = aggs.iter().map(|a| agg_key(a)).collect();
    let value_of = |gs: &GroupState, p: &Projection| -> Result<Value, KipError> {
        match p {
            Projection::Aggregate(a) => {
                let key = agg_key(a);
                let i = agg_keys.iter().position(|x| *x == key).unwrap_or(0);
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
    let mut keyed: Vec<(Vec<Value>, Tie, Vec<Value>)> = rows
        .into_iter()
        .map(|(proj, keys)| {
            let hash = row_hash(&proj);
            (keys, Tie { rank: 0, hash }, proj)
        })
        .collect();
    keyed.sort_by(|a, b| cmp_keys(&a.0, &b.0, &dirs).then(a.1.cmp(&b.1)));
    let (mut keep, after) = match anchor {
        None => (keyed, None),
        Some(Anchor::Sorted { id: 1.., .. }) => return Err(stale_cursor()),
        Some(Anchor::Sorted { keys, id, hash }) => (keyed, Some((keys, Tie { rank: id, hash }))),
        Some(Anchor::Root { .. }) => return Err(stale_cursor()),
    };
    if let Some((k, h)) = &after {
        keep.retain(|r| cmp_keys(&r.0, k, &dirs).then(r.1.cmp(h)) == Ordering::Greater);
    }
    Ok(sorted_page(q, keep, page, |rank| rank, fingerprint))
}

/// The slots of the variables the group keys and the ORDER BY paths read (all of a
/// group's rows share them); a variable the query does not bind counts as `usize::MAX`.
fn read_slots(q: &FindQuery, vars: &Vars) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    for d in path_projections(q)
        .into_iter()
        .chain(q.order_by.iter().filter_map(|k| match &k.expr {
            Projection::Path(d) => Some(d),
            Projection::Aggregate(_) => None,
        }))
    {
        let s = vars.get(&d.var.name).unwrap_or(usize::MAX);
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// Whether every aggregate is a plain `COUNT(?x)` (solutions with `?x` bound).
fn has_only_link_counts(aggs: &[&Aggregate]) -> bool {
    !aggs.is_empty()
        && aggs
            .iter()
            .all(|a| a.func == AggregateFunc::Count && !a.distinct && a.arg.path.is_empty())
}

/// The first matched concept of a plan whose rows it determines: the plan starts with
/// a concept pattern `?x {...}` (no UNION at the top) and the projection holds `?x`
/// itself, `?x.id`, or `?x.name` with the type fixed (names are unique per type). Rows
/// of different concepts then always differ, so pages can follow the concepts in
/// ascending number and resume at the last one: linear paging with early stop.
fn root_concept<'p>(plan: &'p Plan, q: &FindQuery) -> Option<&'p super::plan::ConceptStep> {
    if !q.order_by.is_empty() {
        return None;
    }
    determining_concept(plan, q)
}

/// The slot of the concept that orders rows with equal ORDER BY keys: the plan's first
/// matched concept when it determines the rows (as for [`root_concept`]). Ties are then
/// ordered by that concept's number before the row hash, which an index walk in value
/// order yields for free (each value's concepts come in ascending number), so a page
/// ends after its last row instead of after every row tied with it. `None` without
/// ORDER BY or without such a concept: ties go by row hash alone.
fn tie_concept(plan: &Plan, q: &FindQuery) -> Option<usize> {
    if q.order_by.is_empty() {
        return None;
    }
    determining_concept(plan, q).map(|c| c.var)
}

/// The plan's first matched concept when its rows are determined by it (see
/// [`root_concept`]).
fn determining_concept<'p>(plan: &'p Plan, q: &FindQuery) -> Option<&'p super::plan::ConceptStep> {
    if !plan.root.unions.is_empty() {
        return None;
    }
    let Some(super::plan::Step::Concept(c)) = plan.root.steps.first() else {
        return None;
    };
    let name = plan.vars.name(c.var)?;
    let determines = q.projections.iter().any(|p| match p {
        Projection::Path(d) if d.var.name == name => match d.path.as_slice() {
            [] => true,
            [k] if k == "id" => true,
            [k] if k == "name" => c.matcher.concept_type.is_some(),
            _ => false,
        },
        _ => false,
    });
    determines.then_some(c)
}

/// Non-aggregate queries: dedupe on the projection, order, page with a keyset cursor.
/// With a determining first concept and no ORDER BY the rows stream and matching stops
/// once the page (plus one row, to know whether more exist) is filled; otherwise every
/// solution is read and the best page after the cursor kept (memory bounded by the
/// page, not by the position).
///
/// Long (about 290 lines) on purpose: the streaming and the buffered paths share the
/// dedupe set, the cursor anchor and the page bookkeeping, and a cursor must resume
/// exactly where either path stopped; kept side by side so they cannot drift.
fn plain(
    ctx: &Ctx,
    plan: &Plan,
    q: &FindQuery,
    empty: &Row,
    anchor: Option<Anchor>,
    page: usize,
    fingerprint: u64,
) -> Result<Outcome, KipError> {
    let limits = ctx.limits;
    let paths = path_projections(q);
    if let Some(root) = root_concept(plan, q) {
        let (start, after) = match anchor {
            None => (0, None),
            Some(Anchor::Root { id, hash }) => (id, Some((id, hash))),
            Some(Anchor::Sorted { .. }) => return Err(stale_cursor()),
        };
        let mut out: Vec<Vec<Value>> = Vec::new();
        let mut bytes = 0usize;
        let mut last: Option<(u64, u64)> = None;
        let mut more = false;
        super::exec::scan_step_from(ctx, root, start, &mut |n| {
            let mut row = empty.clone();
            row[root.var] = Some(Val::Elem(crate::store::ElemRef::Concept(n)));
            // This concept's rows, distinct, in hash order.
            let mut rows: Vec<(u64, String, Vec<Value>)> = Vec::new();
            let mut seen = HashSet::new();
            super::exec::run_steps(ctx, &plan.root.steps, 1, &row, &mut |r| {
                let proj = project_all(ctx, &paths, r)?;
                let text = serde_json::to_string(&proj).unwrap_or_default();
                if seen.insert(text.clone()) {
                    if rows.len() >= limits.max_rows {
                        return Err(too_many(limits));
                    }
                    rows.push((fnv1a(&text), text, proj));
                }
                Ok(true)
            })?;
            rows.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
            for (h, _, proj) in rows {
                if after.is_some_and(|(id, ah)| n == id && h <= ah) {
                    continue;
                }
                if out.len() >= page {
                    more = true;
                    return Ok(false);
                }
                bytes =
                    bytes.saturating_add(proj.iter().map(crate::outcome::json_size).sum::<usize>());
                if bytes > limits.max_response_bytes {
                    return Err(page_too_large(limits));
                }
                out.push(proj);
                last = Some((n, h));
            }
            Ok(true)
        })?;
        let next = if more {
            last.map(|(id, hash)| encode_cursor(&Anchor::Root { id, hash }, fingerprint))
        } else {
            None
        };
        return Ok(columns(q, out, next));
    }
    // Ties of the ORDER BY keys go by the determining concept when there is one (in
    // the direction of the first key, so an index walk meets them in order), then by
    // row hash.
    let tie_var = tie_concept(plan, q);
    let desc = q
        .order_by
        .first()
        .is_some_and(|k| k.direction == Direction::Desc);
    let tie_rank = |id: u64| if desc { !id } else { id };
    let after = match anchor {
        None => None,
        // A cursor made when ties went another way (the plan changed between pages, or
        // a cursor from before ties went by concept number): resuming it could skip rows.
        Some(Anchor::Sorted { id, .. }) if (id != 0) != tie_var.is_some() => {
            return Err(stale_cursor())
        }
        Some(Anchor::Sorted { keys, id, hash }) => Some((
            keys,
            Tie {
                rank: tie_rank(id),
                hash,
            },
        )),
        Some(Anchor::Root { .. }) => return Err(stale_cursor()),
    };
    let rank_of = |r: &Row| -> u64 {
        tie_rank(match tie_var.and_then(|v| r.get(v)) {
            Some(Some(Val::Elem(crate::store::ElemRef::Concept(n)))) => *n,
            _ => 0,
        })
    };
    let order_paths: Vec<&DotPath> = q
        .order_by
        .iter()
        .filter_map(|k| match &k.expr {
            Projection::Path(d) => Some(d),
            _ => None,
        })
        .collect();
    // Without ORDER BY the rows are ordered by their projected values (an element by
    // its id), ascending: a natural order that a cursor can hold in a few bytes.
    let by_values = q.order_by.is_empty();
    let dirs: Vec<Direction> = if by_values {
        vec![Direction::Asc; q.projections.len()]
    } else {
        q.order_by.iter().map(|k| k.direction).collect()
    };
    let cmp = |a: &(Vec<Value>, Tie, Vec<Value>), b: &(Vec<Value>, Tie, Vec<Value>)| {
        cmp_keys(&a.0, &b.0, &dirs).then(a.1.cmp(&b.1))
    };
    // Top-k: the best `page + 1` distinct rows after the anchor seen so far. The buffer
    // is cut back whenever it doubles, so memory and sorting stay proportional to the
    // page, whatever the position.
    let keep = page.saturating_add(1);
    let mut rows: Vec<(Vec<Value>, Tie, Vec<Value>)> = Vec::new();
    let mut solutions = 0usize;
    // The sort keys and tie of the worst row of a full page after the last cut: a
    // solution that sorts after it can never make the page, so it is dropped before it
    // is projected.
    let threshold: RefCell<Option<(Vec<Value>, Tie)>> = RefCell::new(None);
    // Sorted, each distinct row at its first place in the order (set semantics), cut
    // to `keep` rows.
    // A page whose rows alone pass the response limit fails at the cut, before more of
    // them are gathered.
    let cut = |rows: &mut Vec<(Vec<Value>, Tie, Vec<Value>)>,
               threshold: &RefCell<Option<(Vec<Value>, Tie)>>|
     -> Result<(), KipError> {
        rows.sort_by(cmp);
        // The first `keep` distinct projections in order; equal projections have equal
        // row hashes, so a duplicate is looked for among the rows of its hash only.
        let sorted = std::mem::take(rows);
        let mut by_hash: super::exec::FastMap<u64, Vec<usize>> = Default::default();
        let mut bytes = 0usize;
        for r in sorted {
            if rows.len() >= keep {
                break;
            }
            let seen = by_hash.entry(r.1.hash).or_default();
            if seen
                .iter()
                .any(|&i| rows.get(i).is_some_and(|k| k.2 == r.2))
            {
                continue;
            }
            seen.push(rows.len());
            bytes = bytes.saturating_add(r.2.iter().map(crate::outcome::json_size).sum::<usize>());
            rows.push(r);
        }
        if bytes > limits.max_response_bytes {
            return Err(page_too_large(limits));
        }
        if rows.len() == keep {
            *threshold.borrow_mut() = rows.last().map(|r| (r.0.clone(), r.1));
        }
        Ok(())
    };
    let walk = super::index::ordered_walk(ctx, plan, q, after.as_ref().map(|a| &a.0));
    let eager = walk.is_some();
    let mut last_cut = 0usize;
    let mut on_row = |r: &Row| -> Result<More, KipError> {
        solutions += 1;
        if solutions > limits.max_rows {
            return Err(too_many(limits));
        }
        let (keys, mut proj) = if by_values {
            let proj = project_all(ctx, &paths, r)?;
            (proj.iter().map(value_key).collect(), Some(proj))
        } else {
            (project_all(ctx, &order_paths, r)?, None)
        };
        let rank = rank_of(r);
        if let Some((t, tt)) = threshold.borrow().as_ref() {
            match cmp_keys(&keys, t, &dirs) {
                Ordering::Greater => return Ok(true),
                Ordering::Equal if rank > tt.rank => return Ok(true),
                _ => {}
            }
        }
        let mut hash = None;
        if let Some((k, at)) = &after {
            match cmp_keys(&keys, k, &dirs) {
                Ordering::Less => return Ok(true),
                Ordering::Equal if rank < at.rank => return Ok(true),
                Ordering::Equal if rank == at.rank => {
                    let p = match proj.take() {
                        Some(p) => p,
                        None => project_all(ctx, &paths, r)?,
                    };
                    let rh = row_hash(&p);
                    if rh <= at.hash {
                        return Ok(true);
                    }
                    hash = Some(rh);
                    proj = Some(p);
                }
                _ => {}
            }
        }
        let proj = match proj {
            Some(p) => p,
            None => project_all(ctx, &paths, r)?,
        };
        let hash = hash.unwrap_or_else(|| row_hash(&proj));
        rows.push((keys, Tie { rank, hash }, proj));
        // In an ordered walk the page is cut as soon as it is full (then whenever the
        // buffer doubles), so the threshold that stops the walk is known early.
        let due = if eager {
            rows.len() >= keep && (last_cut == 0 || rows.len() >= last_cut.saturating_mul(2))
        } else {
            rows.len() >= keep.saturating_mul(2).max(1024)
        };
        if due {
            cut(&mut rows, &threshold)?;
            last_cut = rows.len().max(1);
        }
        Ok(true)
    };
    match walk {
        Some(w) => {
            let root = &plan.root.steps;
            let mut row = empty.clone();
            let mut group: Option<String> = None;
            // Within one value the walk meets the concepts in tie order: once the page
            // is full, a concept after its worst row's (same value) cannot make it, nor
            // can any later one, when that value is the only sort key.
            let ties_in_walk_order = tie_var == Some(w.var) && q.order_by.len() == 1;
            // The cursor's value and tie: the concepts of that value before the
            // cursor's own were on earlier pages, and are passed over unread.
            let resume = after
                .as_ref()
                .filter(|_| ties_in_walk_order)
                .and_then(|(k, at)| {
                    let v = k.first().filter(|v| exact_key(v))?;
                    Some((crate::store::attrs::value_key(v)?, at.rank))
                });
            w.scan(ctx.g, &mut |vk, n| {
                ctx.tick()?;
                if resume
                    .as_ref()
                    .is_some_and(|(rk, rank)| tie_rank(n) < *rank && rk.as_str() == vk)
                {
                    return Ok(true);
                }
                if group.as_deref() != Some(vk) {
                    // A new value: when the page is full and this value sorts strictly
                    // after its worst row's, no later concept can make the page.
                    let past = threshold
                        .borrow()
                        .as_ref()
                        .and_then(|t| t.0.first())
                        .and_then(crate::store::attrs::value_key)
                        .is_some_and(|tk| {
                            if w.rev {
                                vk < tk.as_str()
                            } else {
                                vk > tk.as_str()
                            }
                        });
                    if past {
                        return Ok(false);
                    }
                    group = Some(vk.to_string());
                } else if ties_in_walk_order {
                    let done = threshold.borrow().as_ref().is_some_and(|(t, tt)| {
                        tie_rank(n) > tt.rank
                            && t.first().is_some_and(|v| {
                                exact_key(v)
                                    && crate::store::attrs::value_key(v).as_deref() == Some(vk)
                            })
                    });
                    if done {
                        return Ok(false);
                    }
                }
                row[w.var] = Some(Val::Elem(crate::store::ElemRef::Concept(n)));
                Ok(super::exec::run_steps(ctx, root, 1, &row, &mut on_row)?)
            })?;
        }
        None => {
            run_group(ctx, &plan.root, empty, &mut on_row)?;
        }
    }
    cut(&mut rows, &threshold)?;
    Ok(sorted_page(q, rows, page, tie_rank, fingerprint))
}

/// Whether every value filed under the same index key as `v` equals it in the query
/// engine's order (numbers share a key by their `f64` value, so integers from 2^53 on
/// may share one without being equal).
fn exact_key(v: &Value) -> bool {
    match v {
        Value::Number(n) => n
            .as_f64()
            .is_some_and(|f| f.abs() < 9_007_199_254_740_992.0),
        _ => true,
    }
}

fn page_too_large(limits: &QueryLimits) -> KipError {
    KipError::new(
        ErrorCode::ResourceExhausted,
        format!(
            "this page of results is larger than the response limit of {} bytes",
            limits.max_response_bytes
        ),
    )
    .with_hint("lower LIMIT and page with CURSOR, or project fields (?x.name, ?x.attributes.k) instead of whole elements")
}

/// The sort key of a projected value: a whole element by its id, anything else as is.
fn value_key(v: &Value) -> Value {
    match v {
        Value::Object(m) if m.contains_key("subject") || m.contains_key("type") => {
            m.get("id").cloned().unwrap_or(Value::Null)
        }
        other => other.clone(),
    }
}

/// A page of sorted rows `(keys, hash, projection)` after the anchor (at most one more
/// than the page): the page and, when more rows follow, the cursor after its last row.
fn sorted_page(
    q: &FindQuery,
    mut rows: Vec<(Vec<Value>, Tie, Vec<Value>)>,
    page: usize,
    id_of_rank: impl Fn(u64) -> u64,
    fingerprint: u64,
) -> Outcome {
    let more = rows.len() > page;
    rows.truncate(page);
    let next = if more {
        rows.last().map(|(keys, tie, _)| {
            encode_cursor(
                &Anchor::Sorted {
                    keys: keys.clone(),
                    id: id_of_rank(tie.rank),
                    hash: tie.hash,
                },
                fingerprint,
            )
        })
    } else {
        None
    };
    columns(q, rows.into_iter().map(|r| r.2).collect(), next)
}

/// The columnar result of a page of rows.
fn columns(q: &FindQuery, rows: Vec<Vec<Value>>, next_cursor: Option<String>) -> Outcome {
    let ncols = q.projections.len();
    let mut cols: Vec<Vec<Value>> = vec![Vec::with_capacity(rows.len()); ncols];
    for row in rows {
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
