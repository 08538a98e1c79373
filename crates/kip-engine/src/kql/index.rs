//! Use of the attribute value index (`kip_storage::attrs`) by queries.
//!
//! - A FILTER over one variable that compares `?x.attributes.k` with a literal narrows
//!   the scan of `?x {type: T}` to a range of the index ([`AttrRange`]), when that range
//!   is selective. The FILTER itself still runs on every candidate: the index only
//!   chooses which concepts are read, so its `f64` keys (shared by integers beyond 2^53)
//!   can never change a result.
//! - `ORDER BY ?x.attributes.k` over such a scan walks the index in order and stops once
//!   the page is full and the next value cannot make it ([`ordered_walk`]); only when
//!   every concept of the type has an indexed value of `k` (the statistics say so), since
//!   concepts without one sort after (ASC) or before (DESC) all values.

use super::exec::Ctx;
use super::plan::{ConceptStep, Plan};
use crate::store::{attrs, GraphRead, Stat};
use kip_lang::ast::{BinaryOp, Direction, Expr, FindQuery, Projection};
use serde_json::Value;
use std::ops::Bound;

/// Index entries counted at most when estimating a range (planning stays cheap).
const COUNT_CAP: u64 = 50_000;

/// A range of the attribute value index that narrows a concept scan.
#[derive(Debug, Clone)]
pub struct AttrRange {
    /// The attribute.
    pub attr: String,
    /// Lowest value key (see `kip_storage::attrs`).
    pub lo: Bound<String>,
    /// Highest value key.
    pub hi: Bound<String>,
    /// Concepts in the range (counted, up to a cap).
    pub estimate: u64,
    /// The conditions it comes from, for `kip explain`.
    pub text: String,
}

impl AttrRange {
    /// Scans the range in value order: `f(value key, concept)`.
    pub fn scan(
        &self,
        g: &dyn GraphRead,
        concept_type: &str,
        f: &mut dyn FnMut(&str, u64) -> crate::store::StoreResult<bool>,
    ) -> crate::store::StoreResult<()> {
        g.scan_attr(
            concept_type,
            &self.attr,
            self.lo.as_ref().map(String::as_str),
            self.hi.as_ref().map(String::as_str),
            false,
            f,
        )
    }
}

/// Whether every concept of `concept_type` has an indexed value of `attr`.
pub fn covered(g: &dyn GraphRead, concept_type: &str, attr: &str) -> bool {
    let all = g.stat(Stat::Type(concept_type)).unwrap_or(0);
    let indexed = g.stat(Stat::Attr(concept_type, attr)).unwrap_or(u64::MAX);
    all == indexed
}

/// The attribute a path names when it is exactly `?var.attributes.k`.
pub fn attr_of<'e>(e: &'e Expr, var: &str) -> Option<&'e str> {
    match e {
        Expr::Path(p) if p.var.name == var => match p.path.as_slice() {
            [a, k] if a == "attributes" => Some(k.as_str()),
            _ => None,
        },
        _ => None,
    }
}

/// One condition of a FILTER as a range: `(attribute, lo, hi)`.
type Cond = (String, Bound<String>, Bound<String>);

/// The conjuncts of a FILTER expression (its `&&` spine, walked without recursion).
fn conjuncts(e: &Expr) -> Vec<&Expr> {
    let mut out = Vec::new();
    let mut stack = vec![e];
    while let Some(x) = stack.pop() {
        match x {
            Expr::Binary {
                op: BinaryOp::And,
                left,
                right,
                ..
            } => {
                stack.push(right);
                stack.push(left);
            }
            other => out.push(other),
        }
    }
    out
}

fn flip(op: BinaryOp) -> BinaryOp {
    match op {
        BinaryOp::Lt => BinaryOp::Gt,
        BinaryOp::Le => BinaryOp::Ge,
        BinaryOp::Gt => BinaryOp::Lt,
        BinaryOp::Ge => BinaryOp::Le,
        other => other,
    }
}

/// The range of one comparison `?var.attributes.k OP literal` (either way round), if the
/// index can answer it without missing a match.
fn condition(g: &dyn GraphRead, concept_type: &str, var: &str, e: &Expr) -> Option<Cond> {
    let Expr::Binary {
        op, left, right, ..
    } = e
    else {
        return None;
    };
    let (attr, lit, op) = match (attr_of(left, var), attr_of(right, var)) {
        (Some(a), None) => (a, &**right, *op),
        (None, Some(a)) => (a, &**left, flip(*op)),
        _ => return None,
    };
    let Expr::Value(v) = lit else {
        return None;
    };
    let value = crate::kml::json(v).ok()?;
    let inc = |s: String| Bound::Included(s);
    let (lo, hi) = match (&value, op) {
        (Value::Number(_) | Value::Bool(_), BinaryOp::Eq) => {
            let k = attrs::value_key(&value)?;
            (inc(k.clone()), inc(k))
        }
        // A string longer than the indexed ones equals no indexed value, but may equal
        // a long one the index leaves out.
        (Value::String(s), BinaryOp::Eq) if s.len() <= attrs::MAX_INDEXED_STRING => {
            let k = attrs::string_key(s);
            (inc(k.clone()), inc(k))
        }
        // A strict comparison excludes the literal's key only when no other number
        // shares it: beyond 2^53, `x > L` holds for integers whose f64 key equals L's.
        (Value::Number(n), BinaryOp::Gt | BinaryOp::Ge) => (
            edge(n, op == BinaryOp::Gt)?,
            Bound::Excluded(attrs::STRING.to_string()),
        ),
        (Value::Number(n), BinaryOp::Lt | BinaryOp::Le) => {
            (inc(attrs::NUMBER.to_string()), edge(n, op == BinaryOp::Lt)?)
        }
        // String ranges may match long strings, which are not indexed: only when every
        // concept of the type has an indexed value of the attribute.
        (Value::String(s), BinaryOp::Gt | BinaryOp::Ge) if covered(g, concept_type, attr) => (
            inc(attrs::string_key(s)),
            Bound::Excluded(attrs::BOOL.to_string()),
        ),
        (Value::String(s), BinaryOp::Lt | BinaryOp::Le) if covered(g, concept_type, attr) => {
            (inc(attrs::STRING.to_string()), inc(attrs::string_key(s)))
        }
        _ => return None,
    };
    Some((attr.to_string(), lo, hi))
}

/// The bound at a number literal: exclusive for a strict comparison when the literal's
/// key belongs to it alone (|L| below 2^53, where every integer has its own `f64`).
fn edge(n: &serde_json::Number, strict: bool) -> Option<Bound<String>> {
    let f = n.as_f64()?;
    let key = attrs::number_key(f);
    Some(if strict && f.abs() < 9_007_199_254_740_992.0 {
        Bound::Excluded(key)
    } else {
        Bound::Included(key)
    })
}

/// The tighter of two lower bounds.
pub fn max_lo(a: Bound<String>, b: Bound<String>) -> Bound<String> {
    match (&a, &b) {
        (Bound::Unbounded, _) => b,
        (_, Bound::Unbounded) => a,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            if x > y || (x == y && matches!(a, Bound::Excluded(_))) {
                a
            } else {
                b
            }
        }
    }
}

/// The tighter of two upper bounds.
pub fn min_hi(a: Bound<String>, b: Bound<String>) -> Bound<String> {
    match (&a, &b) {
        (Bound::Unbounded, _) => b,
        (_, Bound::Unbounded) => a,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            if x < y || (x == y && matches!(a, Bound::Excluded(_))) {
                a
            } else {
                b
            }
        }
    }
}

/// The best index range for scanning `step` under `filters` (the FILTERs that read only
/// its variable), when the step is a scan of one type and a range is selective enough to
/// beat reading the type (at most half of it).
pub fn choose(
    g: &dyn GraphRead,
    step: &ConceptStep,
    var: &str,
    filters: &[&Expr],
) -> Option<AttrRange> {
    let m = &step.matcher;
    let concept_type = m.concept_type.as_deref()?;
    if m.id.is_some() || m.name.is_some() {
        return None;
    }
    // Every condition, intersected per attribute.
    let mut by_attr: Vec<(Cond, Vec<String>)> = Vec::new();
    for f in filters {
        for c in conjuncts(f) {
            let Some((attr, lo, hi)) = condition(g, concept_type, var, c) else {
                continue;
            };
            let text = kip_lang::printer::expr(c);
            match by_attr.iter_mut().find(|(x, _)| x.0 == attr) {
                Some(((_, l, h), texts)) => {
                    *l = max_lo(std::mem::replace(l, Bound::Unbounded), lo);
                    *h = min_hi(std::mem::replace(h, Bound::Unbounded), hi);
                    texts.push(text);
                }
                None => by_attr.push(((attr, lo, hi), vec![text])),
            }
        }
    }
    let all = g.stat(Stat::Type(concept_type)).ok()?;
    let mut best: Option<AttrRange> = None;
    for ((attr, lo, hi), texts) in by_attr {
        let mut range = AttrRange {
            attr,
            lo,
            hi,
            estimate: 0,
            text: texts.join(" && "),
        };
        // Counted up to just past half the type (or the cap): beyond half, reading the
        // type is as cheap.
        let cap = (all / 2 + 1).min(COUNT_CAP);
        let mut n = 0u64;
        range
            .scan(g, concept_type, &mut |_, _| {
                n += 1;
                Ok(n < cap)
            })
            .ok()?;
        range.estimate = n;
        if n.saturating_mul(2) > all {
            continue;
        }
        if best.as_ref().is_none_or(|b| n < b.estimate) {
            best = Some(range);
        }
    }
    best
}

/// An ORDER BY answered by walking the attribute value index.
pub struct Walk<'p> {
    /// The scanned variable.
    pub var: usize,
    /// Its type.
    pub concept_type: &'p str,
    /// The ORDER BY attribute.
    pub attr: &'p str,
    /// Lowest value key walked.
    pub lo: std::ops::Bound<String>,
    /// Highest value key walked.
    pub hi: std::ops::Bound<String>,
    /// Descending.
    pub rev: bool,
}

impl Walk<'_> {
    /// Walks the index: `f(value key, concept)`.
    pub fn scan(
        &self,
        g: &dyn GraphRead,
        f: &mut dyn FnMut(&str, u64) -> crate::store::StoreResult<bool>,
    ) -> crate::store::StoreResult<()> {
        g.scan_attr(
            self.concept_type,
            self.attr,
            self.lo.as_ref().map(String::as_str),
            self.hi.as_ref().map(String::as_str),
            self.rev,
            f,
        )
    }
}

/// When the first ORDER BY key is `?x.attributes.k` of the concept the plan starts by
/// scanning (`?x {type: T}`, no UNION) and every concept of `T` has an indexed value of
/// `k`: the walk of the index in that order (from the cursor's value on, within the
/// scan's own index range when it is on `k`). A scan narrowed by a range on another
/// attribute is left as it is (that range is the selective part).
pub fn ordered_walk<'p>(
    ctx: &Ctx,
    plan: &'p Plan,
    q: &'p FindQuery,
    after: Option<&Vec<Value>>,
) -> Option<Walk<'p>> {
    use std::ops::Bound;
    if !plan.root.unions.is_empty() || !ctx.limits.attr_index {
        return None;
    }
    let first = q.order_by.first()?;
    let Some(super::plan::Step::Concept(c)) = plan.root.steps.first() else {
        return None;
    };
    let m = &c.matcher;
    let concept_type = m.concept_type.as_deref()?;
    if m.id.is_some() || m.name.is_some() {
        return None;
    }
    let Projection::Path(d) = &first.expr else {
        return None;
    };
    let var = plan.vars.name(c.var)?;
    let attr = match d.path.as_slice() {
        [a, k] if a == "attributes" && d.var.name == var => k.as_str(),
        _ => return None,
    };
    let (mut lo, mut hi) = match &c.index {
        Some(r) if r.attr == attr => (r.lo.clone(), r.hi.clone()),
        Some(_) => return None,
        None => (Bound::Unbounded, Bound::Unbounded),
    };
    if !covered(ctx.g, concept_type, attr) {
        return None;
    }
    let rev = first.direction == Direction::Desc;
    if let Some(k) = after
        .and_then(|keys| keys.first())
        .and_then(crate::store::attrs::value_key)
    {
        if rev {
            hi = min_hi(hi, Bound::Included(k));
        } else {
            lo = max_lo(lo, Bound::Included(k));
        }
    }
    Some(Walk {
        var: c.var,
        concept_type,
        attr,
        lo,
        hi,
        rev,
    })
}
