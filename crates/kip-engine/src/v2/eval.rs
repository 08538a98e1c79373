//! Evaluating KIP 2.0 `WHERE` blocks (Specification §43-44): solutions are rows of
//! variable bindings, extended clause by clause. Concept, Proposition and record
//! patterns pick their candidates through the store's indexes (id, type + key, name,
//! type, an end of a tuple, a predicate, a proposition's assertions) and check the rest
//! against the element object. FILTER keeps a row only when its expression is `true`
//! (a comparison between unlike types is null and decides nothing), NOT keeps a row
//! the block cannot extend, OPTIONAL pads, UNION widens. KQL reads and the selection
//! blocks of KML run through it.

use super::error::{Code, V2Error, V2Result};
use super::model::{self, view, LITERAL_TYPE, SPACE};
use super::schema_env::{active, Definition, SymbolKind};
use crate::store::{ElemRef, ElementId, ElementKind, GraphRead};
use kip_lang::v2::ast::{ObjectPattern, Pattern, PredicateAtom, PropTuple, RecordKind};
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

/// One solution: variable name (without `?`) to binding.
pub type Row = BTreeMap<String, Bound>;

/// The read context of one statement.
pub struct Ctx<'a> {
    /// The snapshot read.
    pub g: &'a dyn GraphRead,
    params: &'a dyn Fn(&str) -> Option<Value>,
    views: RefCell<HashMap<ElementId, Option<Rc<Value>>>>,
    symbols: RefCell<HashMap<(SymbolKind, String), Definition>>,
    /// Clause orders the planner chose, by block and bound variables (`plan.rs`).
    pub(super) plans: RefCell<super::plan::Cache>,
    /// At most this many rows at any step (`ResourceExhausted` past it).
    pub max_rows: usize,
    /// The projection context BELIEF uses (`WITH EPISTEMIC`).
    pub policy: RefCell<super::belief::Policy>,
    /// When the statement must end (`ExecutionTimeout` past it).
    deadline: Option<Instant>,
    steps: Cell<u32>,
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
            plans: RefCell::new(super::plan::Cache::default()),
            max_rows,
            policy: RefCell::new(super::belief::Policy::baseline()),
            deadline: None,
            steps: Cell::new(0),
        }
    }

    /// The same context, ending at `deadline` (the query limits' timeout, the
    /// request's `deadline_ms`).
    pub fn with_deadline(mut self, deadline: Option<Instant>) -> Ctx<'a> {
        self.deadline = deadline;
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
        self.views.borrow_mut().insert(id, v.clone());
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

fn id_bound(_ctx: &Ctx, v: &Value) -> Bound {
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
fn match_value(
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
fn match_element(
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
pub fn concept_candidates(ctx: &Ctx, row: &Row, pattern: &ObjectPattern) -> V2Result<Vec<u64>> {
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
    } else if let Some(t) = &ty {
        g.scan_type(t, &mut push)?;
    } else {
        g.scan_concepts(&mut push)?;
    }
    // A purged concept has no graph row, only its record: a pattern that asks for a
    // state other than active also looks there.
    if str_member(ctx, row, pattern, "state")?.is_some_and(|s| s != model::ACTIVE) {
        g.scan_elements(SPACE, ElementKind::Concept, &mut |n| {
            out.insert(n);
            Ok(true)
        })?;
    }
    Ok(out.into_iter().collect())
}

/// The rows `?var {pattern}` extends `row` to, one at a time.
pub(super) fn concepts(
    ctx: &Ctx,
    row: &Row,
    var: &str,
    pattern: &ObjectPattern,
    emit: &mut Emit,
) -> V2Result<bool> {
    let candidates = match row.get(var) {
        Some(Bound::Elem(id)) if id.kind == ElementKind::Concept => vec![id.n],
        Some(_) => return Ok(true),
        None => concept_candidates(ctx, row, pattern)?,
    };
    for n in candidates {
        ctx.tick()?;
        let id = ElementId::new(ElementKind::Concept, n);
        let Some(obj) = ctx.view(id)? else { continue };
        let mut r = row.clone();
        if match_element(ctx, &mut r, pattern, &obj, ElementKind::Concept)? {
            r.insert(var.to_string(), Bound::Elem(id));
            if !emit(r)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

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
    let mut ids = Vec::new();
    match (s_ref, &pred, o_ref) {
        (Some(s), Some(p), Some(o)) => {
            if let Some(id) = g.prop_by_spo(s, p, o)? {
                ids.push(id);
            }
        }
        (Some(s), p, _) => g.scan_out(s, p.as_deref(), &mut |_, _, id| {
            ids.push(id);
            Ok(true)
        })?,
        (None, p, Some(o)) => g.scan_in(o, p.as_deref(), &mut |_, _, id| {
            ids.push(id);
            Ok(true)
        })?,
        (None, Some(p), None) => g.scan_predicate(p, &mut |_, _, id| {
            ids.push(id);
            Ok(true)
        })?,
        (None, None, None) => g.scan_props(&mut |id| {
            ids.push(id);
            Ok(true)
        })?,
    }
    for n in ids {
        ctx.tick()?;
        let id = ElementId::new(ElementKind::Proposition, n);
        let Some(obj) = ctx.view(id)? else { continue };
        if obj.pointer("/_system/state").and_then(Value::as_str) != Some(model::ACTIVE) {
            continue;
        }
        let Some(prow) = g.prop(n)? else { continue };
        if let Some(p) = &pred {
            if &prow.predicate != p {
                continue;
            }
        }
        let mut r = row.clone();
        let subject = obj.get("subject").cloned().unwrap_or(Value::Null);
        let object = obj.get("object").cloned().unwrap_or(Value::Null);
        if !end_matches(ctx, &mut r, s, &subject)? || !end_matches(ctx, &mut r, o, &object)? {
            continue;
        }
        if let PredicateAtom::Var(v) = atom {
            let exact = obj.get("predicate_ref").cloned().unwrap_or(Value::Null);
            match r.get(v) {
                Some(_) => {}
                None => {
                    r.insert(v.clone(), Bound::Val(exact));
                }
            }
        }
        if let Some(var) = var {
            match r.get(var) {
                Some(x) if *x != Bound::Elem(id) => continue,
                _ => {
                    r.insert(var.to_string(), Bound::Elem(id));
                }
            }
        }
        if !emit(r)? {
            return Ok(false);
        }
    }
    Ok(true)
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
