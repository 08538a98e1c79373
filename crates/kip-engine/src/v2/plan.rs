//! The order a WHERE block's clauses run in. KQL is declarative (KQL §291: clause
//! order is for readability; an engine may reorder index lookups, joins and FILTERs
//! when the observable semantics stay the same), so the planner starts from the most
//! selective pattern, as the 1.x planner does:
//!
//! - the block is cut into segments at the clauses whose meaning depends on what is
//!   bound before them (OPTIONAL, UNION) or that read a bound input (STRUCTURAL,
//!   BELIEF, BELIEF SLOT); those keep their place and each segment is ordered alone;
//! - in a segment, patterns run cheapest first, the cost estimated from what is known
//!   when they run (a bound variable, a parameter, a literal) and the store's counters
//!   (concepts per type, propositions per predicate); ties keep the written order;
//! - a FILTER runs as soon as every variable it reads is bound, a NOT as soon as every
//!   variable it shares with the rest of the block is; one that never is keeps its
//!   place at the segment's end.
//!
//! A plan depends only on the block and on which variables are bound when it starts,
//! so it is made once per statement and reused for every row (`Cache`).

use super::eval::{Ctx, Row};
use super::schema_env::SymbolKind;
use crate::store::Stat;
use kip_lang::v2::ast::{
    BeliefTarget, Expr, ObjectPattern, Pattern, PredicateAtom, PropTuple, Value as AstValue,
    WhereClause,
};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

/// Plans made in one statement: by block (address and length) and bound variables.
pub type Cache = HashMap<(usize, usize, Vec<String>), Rc<[usize]>>;

/// The cost of a pattern nothing narrows: a scan of every element of its kind.
const SCAN_ALL: u64 = 10_000_000;
/// A scan of one type or predicate whose count the store does not tell.
const SCAN_ONE: u64 = 100_000;
/// The propositions at one known end (a typical fan-out).
const FAN_OUT: u64 = 30;

/// The order (indexes into `clauses`) in which the block runs from `row`.
pub fn order(ctx: &Ctx, clauses: &[WhereClause], row: &Row) -> Rc<[usize]> {
    let key = (
        clauses.as_ptr() as usize,
        clauses.len(),
        row.keys().cloned().collect::<Vec<_>>(),
    );
    if let Some(o) = ctx.plans.borrow().get(&key) {
        return o.clone();
    }
    let mut bound: BTreeSet<String> = row.keys().cloned().collect();
    let mut out = Vec::with_capacity(clauses.len());
    let mut start = 0;
    for (i, c) in clauses.iter().enumerate() {
        if keeps_place(c) {
            segment(ctx, clauses, start, i, &mut bound, &mut out);
            out.push(i);
            let mut vars = Vec::new();
            binds(std::slice::from_ref(c), &mut vars);
            bound.extend(vars);
            start = i + 1;
        }
    }
    segment(ctx, clauses, start, clauses.len(), &mut bound, &mut out);
    let plan: Rc<[usize]> = out.into();
    ctx.plans.borrow_mut().insert(key, plan.clone());
    plan
}

fn keeps_place(c: &WhereClause) -> bool {
    matches!(
        c,
        WhereClause::Optional(_)
            | WhereClause::Union(_)
            | WhereClause::Structural { .. }
            | WhereClause::Belief { .. }
            | WhereClause::BeliefSlot { .. }
    )
}

fn is_pattern(c: &WhereClause) -> bool {
    matches!(
        c,
        WhereClause::Concept { .. } | WhereClause::Proposition { .. } | WhereClause::Record { .. }
    )
}

/// Orders `clauses[from..to]` (no clause there keeps its place) onto `out`.
fn segment(
    ctx: &Ctx,
    clauses: &[WhereClause],
    from: usize,
    to: usize,
    bound: &mut BTreeSet<String>,
    out: &mut Vec<usize>,
) {
    let mut pending: Vec<usize> = (from..to).collect();
    // What the segment's patterns will have bound by its end.
    let mut eventually = bound.clone();
    for &i in &pending {
        if is_pattern(&clauses[i]) {
            let mut vars = Vec::new();
            binds(std::slice::from_ref(&clauses[i]), &mut vars);
            eventually.extend(vars);
        }
    }
    loop {
        // FILTERs and NOTs whose inputs are bound run first: they only remove rows.
        pending.retain(|&i| {
            let ready = match &clauses[i] {
                WhereClause::Filter(e) => {
                    let mut vars = BTreeSet::new();
                    expr_vars(e, &mut vars);
                    vars.iter().all(|v| bound.contains(v))
                }
                WhereClause::Not(block) => {
                    let mut vars = BTreeSet::new();
                    mentions(block, &mut vars);
                    vars.iter()
                        .filter(|v| eventually.contains(*v))
                        .all(|v| bound.contains(v))
                }
                _ => false,
            };
            if ready {
                out.push(i);
            }
            !ready
        });
        let best = pending
            .iter()
            .copied()
            .filter(|&i| is_pattern(&clauses[i]))
            .min_by_key(|&i| (cost(ctx, &clauses[i], bound), i));
        let Some(best) = best else { break };
        out.push(best);
        pending.retain(|&i| i != best);
        let mut vars = Vec::new();
        binds(std::slice::from_ref(&clauses[best]), &mut vars);
        bound.extend(vars);
    }
    out.extend(pending);
}

/// Whether a term's value is known when the pattern runs.
fn known(p: &Pattern, bound: &BTreeSet<String>) -> bool {
    match p {
        Pattern::Var(v) => bound.contains(v),
        Pattern::Param(_) | Pattern::Literal(_) => true,
        Pattern::Tuple(t) => matches!(t.as_ref(), PropTuple::Id(_)),
        Pattern::Array(_) | Pattern::Object(_) => false,
    }
}

fn member<'p>(pattern: &'p ObjectPattern, key: &str) -> Option<&'p Pattern> {
    pattern.iter().find(|(k, _)| k == key).map(|(_, p)| p)
}

/// A constant string term's value (a literal or a parameter).
fn constant(ctx: &Ctx, p: &Pattern) -> Option<String> {
    let v = match p {
        Pattern::Literal(v) => v.clone(),
        Pattern::Param(n) => ctx.param(n).ok()?,
        _ => return None,
    };
    match v {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// How many rows a counter says a scan visits (`SCAN_ONE` when it cannot tell).
fn counted(ctx: &Ctx, kind: SymbolKind, name: Option<String>) -> u64 {
    let Some(local) = name
        .and_then(|n| ctx.resolve(kind, &n).ok())
        .map(|d| d.local)
    else {
        return SCAN_ONE;
    };
    let stat = match kind {
        SymbolKind::ConceptType => Stat::Type(&local),
        _ => Stat::Predicate(&local),
    };
    ctx.g.stat(stat).map_or(SCAN_ONE, |n| n.max(1))
}

/// The rows a pattern is expected to visit when `bound` is bound.
fn cost(ctx: &Ctx, c: &WhereClause, bound: &BTreeSet<String>) -> u64 {
    let knows =
        |pattern: &ObjectPattern, key: &str| member(pattern, key).is_some_and(|p| known(p, bound));
    match c {
        WhereClause::Concept { var, pattern } => {
            if bound.contains(var) || knows(pattern, "id") {
                1
            } else if knows(pattern, "key") {
                if knows(pattern, "type") {
                    1
                } else {
                    4
                }
            } else if knows(pattern, "name") {
                4
            } else if knows(pattern, "type") {
                let t = member(pattern, "type").and_then(|p| constant(ctx, p));
                counted(ctx, SymbolKind::ConceptType, t)
            } else {
                SCAN_ALL
            }
        }
        WhereClause::Proposition { tuple, .. } => match tuple {
            PropTuple::Id(_) => 1,
            PropTuple::Triple(s, path, o) => {
                let (sk, ok) = (known(s, bound), known(o, bound));
                let single = path.len() == 1 && path[0].quantifier.is_none();
                match (sk, ok) {
                    (true, true) if single => 1,
                    (true, _) | (_, true) if single => FAN_OUT,
                    (true, _) | (_, true) => FAN_OUT * FAN_OUT,
                    _ if !single => SCAN_ALL * 10,
                    _ => match &path[0].atom {
                        PredicateAtom::Name(n) => {
                            counted(ctx, SymbolKind::Predicate, Some(n.clone()))
                        }
                        PredicateAtom::Param(p) => counted(
                            ctx,
                            SymbolKind::Predicate,
                            constant(ctx, &Pattern::Param(p.clone())),
                        ),
                        PredicateAtom::Var(v) if bound.contains(v) => SCAN_ONE,
                        PredicateAtom::Var(_) => SCAN_ALL,
                    },
                }
            }
        },
        WhereClause::Record { var, pattern, .. } => {
            if bound.contains(var) {
                1
            } else if knows(pattern, "proposition") {
                5
            } else {
                SCAN_ALL
            }
        }
        _ => SCAN_ALL,
    }
}

/// The variables a WHERE block binds (what an unmatched OPTIONAL pads with null).
pub fn binds(block: &[WhereClause], out: &mut Vec<String>) {
    for c in block {
        match c {
            WhereClause::Concept { var, pattern } | WhereClause::Record { var, pattern, .. } => {
                out.push(var.clone());
                pattern.iter().for_each(|(_, p)| pattern_vars(p, out));
            }
            WhereClause::Proposition { var, tuple } => {
                out.extend(var.clone());
                pattern_vars(&Pattern::Tuple(Box::new(tuple.clone())), out);
            }
            WhereClause::Structural { var, from, to, .. } => {
                out.extend(var.clone());
                pattern_vars(from, out);
                pattern_vars(to, out);
            }
            WhereClause::Belief { var, .. } | WhereClause::BeliefSlot { var, .. } => {
                out.push(var.clone())
            }
            WhereClause::Optional(b) | WhereClause::Union(b) => binds(b, out),
            WhereClause::Filter(_) | WhereClause::Not(_) => {}
        }
    }
}

fn pattern_vars(p: &Pattern, out: &mut Vec<String>) {
    match p {
        Pattern::Var(v) => out.push(v.clone()),
        Pattern::Array(items) => items.iter().for_each(|i| pattern_vars(i, out)),
        Pattern::Object(members) => members.iter().for_each(|(_, m)| pattern_vars(m, out)),
        Pattern::Tuple(t) => {
            if let PropTuple::Triple(s, path, o) = t.as_ref() {
                pattern_vars(s, out);
                pattern_vars(o, out);
                for a in path {
                    if let PredicateAtom::Var(v) = &a.atom {
                        out.push(v.clone());
                    }
                }
            }
        }
        Pattern::Param(_) | Pattern::Literal(_) => {}
    }
}

/// Every variable a block mentions: those it binds and those its FILTERs and inputs
/// read.
fn mentions(block: &[WhereClause], out: &mut BTreeSet<String>) {
    let mut vars = Vec::new();
    binds(block, &mut vars);
    out.extend(vars);
    for c in block {
        match c {
            WhereClause::Filter(e) => expr_vars(e, out),
            WhereClause::Not(b) | WhereClause::Optional(b) | WhereClause::Union(b) => {
                mentions(b, out)
            }
            WhereClause::Belief { target, .. } => match target {
                BeliefTarget::Var(v) => {
                    out.insert(v.clone());
                }
                BeliefTarget::Triple(s, atom, o) => {
                    let mut vars = Vec::new();
                    pattern_vars(s, &mut vars);
                    pattern_vars(o, &mut vars);
                    if let PredicateAtom::Var(v) = atom {
                        vars.push(v.clone());
                    }
                    out.extend(vars);
                }
                BeliefTarget::Id(_) => {}
            },
            WhereClause::BeliefSlot { subject, .. } => {
                let mut vars = Vec::new();
                pattern_vars(subject, &mut vars);
                out.extend(vars);
            }
            _ => {}
        }
    }
}

/// The variables an expression reads.
fn expr_vars(e: &Expr, out: &mut BTreeSet<String>) {
    match e {
        Expr::Value(v) => value_vars(v, out),
        Expr::Not(x) | Expr::Neg(x) | Expr::Group(x) => expr_vars(x, out),
        Expr::Binary(_, l, r) => {
            expr_vars(l, out);
            expr_vars(r, out);
        }
    }
}

fn value_vars(v: &AstValue, out: &mut BTreeSet<String>) {
    match v {
        AstValue::Field(f) => {
            out.insert(f.var.clone());
        }
        AstValue::Array(items) => items.iter().for_each(|i| value_vars(i, out)),
        AstValue::Object(members) => members.iter().for_each(|(_, m)| value_vars(m, out)),
        AstValue::Call(c) => c.args.iter().for_each(|a| expr_vars(a, out)),
        AstValue::Param(_) | AstValue::Literal(_) => {}
    }
}
