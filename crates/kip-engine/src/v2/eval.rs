//! Evaluating KIP 2.0 `WHERE` blocks (Specification §43-44): solutions are rows of
//! variable bindings, extended clause by clause. Concept, Proposition and record
//! patterns pick their candidates through the store's indexes (id, type + key, name,
//! type, an end of a tuple, a predicate, a proposition's assertions) and check the rest
//! against the element object. FILTER keeps a row only when its expression is `true`
//! (a comparison between unlike types is null and decides nothing), NOT keeps a row
//! the block cannot extend, OPTIONAL pads, UNION widens. KQL reads and the selection
//! blocks of KML run through it.

use super::error::{Code, V2Error, V2Result};
use super::model::{self, view, SPACE};
use super::schema_env::{active, Definition, SymbolKind};
use crate::store::{ElementId, ElementKind, GraphRead};
use kip_lang::v2::ast::{Expr, ObjectPattern, Pattern, PropTuple, RecordKind};
use serde_json::{json, Value};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;
use std::time::Instant;

/// What a variable is bound to: an element, or a value.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    /// An element of the memory.
    Elem(ElementId),
    /// A literal value (null when OPTIONAL found nothing).
    Val(Value),
}

/// The most element objects a statement keeps built at once.
const VIEW_CACHE: usize = 20_000;

/// One solution: variable name (without `?`) to binding.
pub type Row = BTreeMap<String, Bound>;

/// The read context of one statement.
pub struct Ctx<'a> {
    /// The snapshot read.
    pub g: &'a dyn GraphRead,
    params: &'a dyn Fn(&str) -> Option<Value>,
    views: RefCell<HashMap<ElementId, Option<Rc<Value>>>>,
    symbols: RefCell<HashMap<(SymbolKind, String), Definition>>,
    /// What each proposition end reads as (`tuples::end_bound`).
    pub(super) ends: RefCell<HashMap<crate::store::ElemRef, Option<Bound>>>,
    /// Clause orders the planner chose, by block and bound variables (`plan.rs`).
    pub(super) plans: RefCell<super::plan::Cache>,
    /// At most this many rows at any step (`ResourceExhausted` past it).
    pub max_rows: usize,
    /// The projection context BELIEF uses (`WITH EPISTEMIC`).
    pub policy: RefCell<super::belief::Policy>,
    /// When the statement must end (`ExecutionTimeout` past it).
    deadline: Option<Instant>,
    steps: Cell<u32>,
    /// Whether `g` is the space as it was (`AS OF`, `history.rs`).
    pub(super) past: bool,
}

impl<'a> Ctx<'a> {
    /// A context over `g` with the request's parameters.
    pub fn new(
        g: &'a dyn GraphRead,
        params: &'a dyn Fn(&str) -> Option<Value>,
        max_rows: usize,
    ) -> Ctx<'a> {
        Ctx {
            g,
            params,
            views: RefCell::new(HashMap::new()),
            symbols: RefCell::new(HashMap::new()),
            ends: RefCell::new(HashMap::new()),
            plans: RefCell::new(super::plan::Cache::default()),
            max_rows,
            policy: RefCell::new(super::belief::Policy::baseline()),
            deadline: None,
            steps: Cell::new(0),
            past: false,
        }
    }

    /// The same context, ending at `deadline` (the query limits' timeout, the
    /// request's `deadline_ms`).
    pub fn with_deadline(mut self, deadline: Option<Instant>) -> Ctx<'a> {
        self.deadline = deadline;
        self
    }

    /// Marks `g` as a read of the past (`AS OF`): a query with `AS OF` runs only on
    /// such a context.
    pub fn reading_the_past(mut self, past: bool) -> Ctx<'a> {
        self.past = past;
        self
    }

    /// `ExecutionTimeout` once the deadline has passed (looked at every 256 steps of
    /// the search: the clock is not free).
    pub(super) fn tick(&self) -> V2Result<()> {
        let n = self.steps.get().wrapping_add(1);
        self.steps.set(n);
        if n % 256 == 1 && self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(V2Error::new(
                Code::ExecutionTimeout,
                "the query ran past its time budget; nothing was returned",
            )
            .with_hint("narrow the WHERE block (a key, a name, a type) or add a LIMIT"));
        }
        Ok(())
    }

    /// A parameter's value (checked present before the statement runs).
    pub fn param(&self, name: &str) -> V2Result<Value> {
        (self.params)(name).ok_or_else(|| {
            V2Error::new(
                Code::InvalidRequestEnvelope,
                format!("the command uses :{name}, which the request does not supply"),
            )
            .with_hint(format!("add \"{name}\" to \"parameters\""))
        })
    }

    /// The element object of `id` (cached for the statement, shared: a view is built
    /// once however many patterns and expressions read it).
    pub fn view(&self, id: ElementId) -> V2Result<Option<Rc<Value>>> {
        if let Some(v) = self.views.borrow().get(&id) {
            return Ok(v.clone());
        }
        let v = view(self.g, id)?.map(Rc::new);
        let mut views = self.views.borrow_mut();
        if views.len() >= VIEW_CACHE {
            // A scan over a large type must not keep every element it passed.
            views.clear();
        }
        views.insert(id, v.clone());
        Ok(v)
    }

    /// A schema symbol of the active environment, resolved once per statement (the
    /// installed packages are read from the store on each uncached resolution).
    pub fn resolve(&self, kind: SymbolKind, name: &str) -> V2Result<Definition> {
        let key = (kind, name.to_string());
        if let Some(d) = self.symbols.borrow().get(&key) {
            return Ok(d.clone());
        }
        let d = active().resolve(self.g, kind, name)?;
        self.symbols.borrow_mut().insert(key, d.clone());
        Ok(d)
    }

    /// `ResourceExhausted` when `n` rows pass the bound.
    pub(super) fn check_rows(&self, n: usize) -> V2Result<()> {
        if n > self.max_rows {
            return Err(V2Error::new(
                Code::ResourceExhausted,
                format!("the pattern matched more than {} solutions", self.max_rows),
            )
            .with_hint("narrow the WHERE block (a type, a name, a key) or add a FILTER"));
        }
        Ok(())
    }
}

/// An id string's element, if it is one (`C:12`).
pub fn parse_id(s: &str) -> Option<ElementId> {
    ElementId::parse_id(s)
}

/// The JSON a binding reads as (an element as its id string).
pub fn bound_json(b: &Bound) -> Value {
    match b {
        Bound::Elem(id) => json!(id.id_string()),
        Bound::Val(v) => v.clone(),
    }
}

/// Whether two JSON values are the same value (numbers by value: `1 == 1.0`).
pub fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        _ => a == b,
    }
}

/// Where a pattern sends each row it matches; `Ok(false)` asks it to stop (a LIMIT
/// is reached).
pub type Emit<'e> = dyn FnMut(Row) -> V2Result<bool> + 'e;

pub use super::solve::{each, solve};

/// A part of KIP 2.0 this runtime does not run yet.
pub fn unsupported(what: &str) -> V2Error {
    V2Error::new(
        Code::UnsupportedCapability,
        format!("{what} are valid KIP 2.0, but this runtime does not run them yet"),
    )
    .with_hint("DESCRIBE CAPABILITIES lists what runs")
}

/// What a pattern term stands for in `row`: `None` for an unbound variable.
pub(super) fn known(ctx: &Ctx, row: &Row, p: &Pattern) -> V2Result<Option<Bound>> {
    Ok(match p {
        Pattern::Var(v) => row.get(v).cloned(),
        Pattern::Param(name) => {
            let v = ctx.param(name)?;
            Some(match v.as_str().and_then(parse_id) {
                Some(id) => Bound::Elem(id),
                None => Bound::Val(v),
            })
        }
        Pattern::Literal(v) => Some(Bound::Val(v.clone())),
        Pattern::Tuple(t) => match t.as_ref() {
            PropTuple::Id(s) => Some(id_bound(ctx, &scalar(ctx, s)?)),
            PropTuple::Triple(..) => return Err(unsupported("nested proposition tuples")),
        },
        Pattern::Array(_) | Pattern::Object(_) => Some(Bound::Val(pattern_json(ctx, row, p)?)),
    })
}

pub(super) fn id_bound(_ctx: &Ctx, v: &Value) -> Bound {
    match v.as_str().and_then(parse_id) {
        Some(id) => Bound::Elem(id),
        None => Bound::Val(v.clone()),
    }
}

/// A scalar's value.
pub fn scalar(ctx: &Ctx, s: &kip_lang::v2::ast::Scalar) -> V2Result<Value> {
    match s {
        kip_lang::v2::ast::Scalar::Literal(v) => Ok(v.clone()),
        kip_lang::v2::ast::Scalar::Param(p) => ctx.param(p),
    }
}

fn pattern_json(ctx: &Ctx, row: &Row, p: &Pattern) -> V2Result<Value> {
    Ok(match p {
        Pattern::Var(v) => row.get(v).map(bound_json).unwrap_or(Value::Null),
        Pattern::Param(n) => ctx.param(n)?,
        Pattern::Literal(v) => v.clone(),
        Pattern::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| pattern_json(ctx, row, i))
                .collect::<V2Result<_>>()?,
        ),
        Pattern::Object(members) => {
            let mut o = serde_json::Map::new();
            for (k, v) in members {
                o.insert(k.clone(), pattern_json(ctx, row, v)?);
            }
            Value::Object(o)
        }
        Pattern::Tuple(_) => return Err(unsupported("proposition tuples inside values")),
    })
}

/// Matches `p` against `actual` (a field of an element whose kind is `kind`), binding
/// unbound variables in `row`.
pub(super) fn match_value(
    ctx: &Ctx,
    row: &mut Row,
    p: &Pattern,
    actual: &Value,
    reference: bool,
) -> V2Result<bool> {
    match p {
        Pattern::Var(v) => match row.get(v) {
            Some(b) => Ok(same(&bound_json(b), actual)),
            None => {
                let b = match actual.as_str().and_then(parse_id).filter(|_| reference) {
                    Some(id) => Bound::Elem(id),
                    None => Bound::Val(actual.clone()),
                };
                row.insert(v.clone(), b);
                Ok(true)
            }
        },
        Pattern::Object(members) => {
            let Some(obj) = actual.as_object() else {
                return Ok(false);
            };
            for (k, sub) in members {
                let a = obj.get(k).cloned().unwrap_or(Value::Null);
                if !match_value(ctx, row, sub, &a, false)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        _ => {
            let want = match known(ctx, row, p)? {
                Some(b) => bound_json(&b),
                None => Value::Null,
            };
            Ok(same(&want, actual))
        }
    }
}

/// Matches an object pattern against an element object. `state` selects the lifecycle
/// state (`active` unless the pattern names one, §19: archived elements are out of
/// recall by default); `type` is resolved to its exact symbol.
pub(super) fn match_element(
    ctx: &Ctx,
    row: &mut Row,
    pattern: &ObjectPattern,
    obj: &Value,
    kind: ElementKind,
) -> V2Result<bool> {
    let state = obj
        .pointer("/_system/state")
        .and_then(Value::as_str)
        .unwrap_or(model::ACTIVE);
    let mut state_given = false;
    for (k, p) in pattern {
        match k.as_str() {
            "state" => {
                state_given = true;
                if !match_value(ctx, row, p, &json!(state), false)? {
                    return Ok(false);
                }
            }
            "type" if kind == ElementKind::Concept => {
                let actual = obj.get("schema_ref").cloned().unwrap_or(Value::Null);
                match known(ctx, row, p)? {
                    Some(b) => {
                        let Value::String(t) = bound_json(&b) else {
                            return Err(type_mismatch("type", &bound_json(&b)));
                        };
                        let exact = ctx.resolve(SymbolKind::ConceptType, &t)?.exact;
                        if json!(exact) != actual {
                            return Ok(false);
                        }
                    }
                    None => {
                        let local = obj.get("type").cloned().unwrap_or(Value::Null);
                        if !match_value(ctx, row, p, &local, false)? {
                            return Ok(false);
                        }
                    }
                }
            }
            _ => {
                let actual = obj.get(k).cloned().unwrap_or(Value::Null);
                if !match_value(ctx, row, p, &actual, model::is_reference_field(kind, k))? {
                    return Ok(false);
                }
            }
        }
    }
    Ok(state_given || state == model::ACTIVE)
}

/// A member of the wrong JSON type in a selector.
pub fn type_mismatch(field: &str, v: &Value) -> V2Error {
    V2Error::new(
        Code::TypeMismatch,
        format!("\"{field}\" takes a string here, not {v}"),
    )
    .with_hint(format!("write {field}: \"...\""))
    .with_detail("field", field)
}

/// The value a pattern member gives when it is already known (a literal, a parameter,
/// a bound variable).
fn member(ctx: &Ctx, row: &Row, pattern: &ObjectPattern, key: &str) -> V2Result<Option<Value>> {
    match pattern.iter().find(|(k, _)| k == key) {
        Some((_, p)) => Ok(known(ctx, row, p)?.map(|b| bound_json(&b))),
        None => Ok(None),
    }
}

fn str_member(
    ctx: &Ctx,
    row: &Row,
    pattern: &ObjectPattern,
    key: &str,
) -> V2Result<Option<String>> {
    match member(ctx, row, pattern, key)? {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(type_mismatch(key, &other)),
    }
}

/// The concepts a pattern can match, by the best index its known members allow.
/// Where a concept pattern's candidates come from: a few ids an index gave, or a scan
/// streamed as the solutions are asked for (a LIMIT stops it).
pub(super) enum Source {
    /// These concepts, in id order.
    Ids(Vec<u64>),
    /// Every concept of this type (local name), in id order.
    Type(String),
    /// Every concept.
    All,
}

/// The concepts a pattern can match, by the best index its known members allow.
/// `filters` are the FILTERs of the pattern's block: a type scan narrows to the
/// attribute index's range when they allow (`access.rs`).
pub(super) fn concept_source(
    ctx: &Ctx,
    row: &Row,
    var: &str,
    pattern: &ObjectPattern,
    filters: &[&Expr],
) -> V2Result<Source> {
    let g = ctx.g;
    let mut out = BTreeSet::new();
    let ty = match str_member(ctx, row, pattern, "type")? {
        Some(t) => Some(ctx.resolve(SymbolKind::ConceptType, &t)?.local),
        None => None,
    };
    let mut push = |n: u64| {
        out.insert(n);
        Ok(true)
    };
    // A purged concept has no graph row, only its record: a pattern that asks for a
    // state other than active also looks there.
    let beyond_active = str_member(ctx, row, pattern, "state")?.is_some_and(|s| s != model::ACTIVE);
    if let Some(id) = member(ctx, row, pattern, "id")? {
        match id.as_str().and_then(parse_id) {
            Some(e) if e.kind == ElementKind::Concept => {
                out.insert(e.n);
            }
            _ => {}
        }
    } else if let Some(key) = str_member(ctx, row, pattern, "key")? {
        match &ty {
            Some(t) => {
                if let Some(n) = g.concept_by_key(t, &key)? {
                    out.insert(n);
                }
            }
            None => g.scan_name(&key, &mut push)?,
        }
    } else if let Some(name) = str_member(ctx, row, pattern, "name")? {
        g.scan_name(&name, &mut push)?;
        // Concepts whose display name differs from their row name (keyed ones).
        out.extend(super::names::lookup(g, &name)?);
    } else if let Some(t) = ty {
        match super::access::range(ctx, var, &t, filters)? {
            Some(ids) => out.extend(ids),
            None if !beyond_active => return Ok(Source::Type(t)),
            None => g.scan_type(&t, &mut push)?,
        }
    } else if !beyond_active {
        return Ok(Source::All);
    } else {
        g.scan_concepts(&mut push)?;
    }
    if beyond_active {
        g.scan_elements(SPACE, ElementKind::Concept, &mut |n| {
            out.insert(n);
            Ok(true)
        })?;
    }
    Ok(Source::Ids(out.into_iter().collect()))
}

/// Runs `f` on each id a store scan gives, stopping when it asks to; `Ok(false)` when
/// it did.
pub(super) fn stream(
    scan: impl FnOnce(
        &mut dyn FnMut(u64) -> crate::store::StoreResult<bool>,
    ) -> crate::store::StoreResult<()>,
    f: &mut dyn FnMut(u64) -> V2Result<bool>,
) -> V2Result<bool> {
    let mut failure = None;
    let mut go = true;
    scan(&mut |n| match f(n) {
        Ok(more) => {
            go = more;
            Ok(more)
        }
        Err(e) => {
            failure = Some(e);
            go = false;
            Ok(false)
        }
    })?;
    match failure {
        Some(e) => Err(e),
        None => Ok(go),
    }
}

/// The rows `?var {pattern}` extends `row` to, one at a time.
pub(super) fn concepts(
    ctx: &Ctx,
    row: &Row,
    var: &str,
    pattern: &ObjectPattern,
    filters: &[&Expr],
    emit: &mut Emit,
) -> V2Result<bool> {
    let source = match row.get(var) {
        Some(Bound::Elem(id)) if id.kind == ElementKind::Concept => Source::Ids(vec![id.n]),
        Some(_) => return Ok(true),
        None => concept_source(ctx, row, var, pattern, filters)?,
    };
    let mut candidate = |n: u64| -> V2Result<bool> {
        ctx.tick()?;
        let id = ElementId::new(ElementKind::Concept, n);
        let Some(obj) = ctx.view(id)? else {
            return Ok(true);
        };
        let mut r = row.clone();
        if match_element(ctx, &mut r, pattern, &obj, ElementKind::Concept)? {
            r.insert(var.to_string(), Bound::Elem(id));
            return emit(r);
        }
        Ok(true)
    };
    match source {
        Source::Ids(ids) => {
            for n in ids {
                if !candidate(n)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        Source::Type(t) => stream(|f| ctx.g.scan_type(&t, f), &mut candidate),
        Source::All => stream(|f| ctx.g.scan_concepts(f), &mut candidate),
    }
}

pub(super) use super::tuples::{
    emit_all, end_matches, end_ref, literal_concept, predicate_local, propositions,
};

fn record_kind(kind: RecordKind) -> ElementKind {
    match kind {
        RecordKind::Assertion => ElementKind::Assertion,
        RecordKind::Evidence => ElementKind::Evidence,
        RecordKind::Activity => ElementKind::Activity,
    }
}

/// Adds `A:n`, the founding assertion of a 1.x-written `P:n`, when it is not recorded
/// yet (a recorded one is found as a record).
pub fn founding_of(g: &dyn GraphRead, n: u64, ids: &mut Vec<ElementId>) -> V2Result<()> {
    let a = ElementId::new(ElementKind::Assertion, n);
    if g.element(SPACE, a)?.is_none() && model::written_by_1x(g, n)? {
        ids.push(a);
    }
    Ok(())
}

/// The rows a record pattern (ASSERTION, EVIDENCE, ACTIVITY) extends `row` to.
pub(super) fn records(
    ctx: &Ctx,
    row: &Row,
    var: &str,
    kind: RecordKind,
    pattern: &ObjectPattern,
    emit: &mut Emit,
) -> V2Result<bool> {
    let kind = record_kind(kind);
    let g = ctx.g;
    let mut ids = Vec::new();
    match row.get(var) {
        Some(Bound::Elem(id)) if id.kind == kind => ids.push(*id),
        Some(_) => return Ok(true),
        None => {
            let target = match pattern.iter().find(|(k, _)| k == "proposition") {
                Some((_, p)) => match known(ctx, row, p)? {
                    Some(Bound::Elem(id)) => Some(id),
                    Some(_) => return Ok(true),
                    None => None,
                },
                None => None,
            };
            match target {
                Some(t) => {
                    g.scan_referrers(SPACE, t, &mut |role, src| {
                        if role == "proposition" && src.kind == kind {
                            ids.push(src);
                        }
                        Ok(true)
                    })?;
                    if kind == ElementKind::Assertion && t.kind == ElementKind::Proposition {
                        founding_of(g, t.n, &mut ids)?;
                    }
                }
                None => {
                    g.scan_elements(SPACE, kind, &mut |n| {
                        ids.push(ElementId::new(kind, n));
                        Ok(true)
                    })?;
                    if kind == ElementKind::Assertion {
                        // The founding assertions of the links 1.x wrote (item 40).
                        let mut props = Vec::new();
                        g.scan_props(&mut |n| {
                            props.push(n);
                            Ok(true)
                        })?;
                        for n in props {
                            founding_of(g, n, &mut ids)?;
                        }
                        ids.sort_by_key(|id| id.n);
                        ids.dedup();
                    }
                }
            }
        }
    }
    for id in ids {
        ctx.tick()?;
        let Some(obj) = ctx.view(id)? else { continue };
        let mut r = row.clone();
        if match_element(ctx, &mut r, pattern, &obj, kind)? {
            r.insert(var.to_string(), Bound::Elem(id));
            if !emit(r)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

pub use super::expr::{compare, eval, value, write_value};
