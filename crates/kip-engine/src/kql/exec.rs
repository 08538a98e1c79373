//! Runs compiled steps: nested index lookups that stream rows to a callback.
//!
//! Every candidate examined counts against [`QueryLimits::max_work`] and the clock is
//! checked regularly against [`QueryLimits::timeout`], so a runaway query ends in
//! `KIP_4002` / `KIP_4001` instead of a hang.
//!
//! One file because its parts recurse into each other: steps run patterns, patterns
//! accept endpoints that may be nested propositions matched by the same code, and
//! OPTIONAL/NOT/UNION run groups of steps. The merge join of a scan with the links
//! into it lives in `join.rs`, index ranges in `index.rs`.

use super::plan::{
    ConceptMatch, ConceptStep, EndpointC, Group, PredC, PropKind, PropStep, Step, Vars,
};
use super::QueryLimits;
use crate::store::{ConceptRecord, ElemRef, GraphRead, PropRecord, StoreResult};
use kip_lang::{ErrorCode, KipError};
use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// A concept's type and name.
pub type Head = (String, String);

/// A hash map with a fast hasher, for maps keyed by element ids in the query loops.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
use std::time::Instant;

/// A bound value: an element, or a predicate name (from a predicate variable).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Val {
    /// A concept or proposition.
    Elem(ElemRef),
    /// A predicate name.
    Pred(Rc<str>),
}

/// One solution under construction: a value (or nothing) per variable slot.
pub type Row = Vec<Option<Val>>;

/// What a row callback answers: `true` for more rows, `false` to stop.
pub type More = bool;

/// Receives a matched row and, for single-hop matches, the link that matched.
pub type LinkSink<'a> = dyn FnMut(&Row, Option<ElemRef>) -> Result<More, KipError> + 'a;

const CACHE_LIMIT: usize = 200_000;

/// Per-query execution state: the snapshot, limits, work counter and record caches.
pub struct Ctx<'g> {
    /// The snapshot.
    pub g: &'g dyn GraphRead,
    /// The limits.
    pub limits: &'g QueryLimits,
    /// Variable slots.
    pub vars: &'g Vars,
    work: Cell<u64>,
    start: Instant,
    concepts: RefCell<FastMap<u64, Option<Rc<ConceptRecord>>>>,
    heads: RefCell<FastMap<u64, Option<Rc<Head>>>>,
    props: RefCell<FastMap<u64, Option<Rc<PropRecord>>>>,
    pub(crate) regexes: RefCell<HashMap<String, Rc<regex::Regex>>>,
}

impl<'g> Ctx<'g> {
    /// A fresh context.
    pub fn new(g: &'g dyn GraphRead, limits: &'g QueryLimits, vars: &'g Vars) -> Ctx<'g> {
        Ctx {
            g,
            limits,
            vars,
            work: Cell::new(0),
            start: Instant::now(),
            concepts: RefCell::new(FastMap::default()),
            heads: RefCell::new(FastMap::default()),
            props: RefCell::new(FastMap::default()),
            regexes: RefCell::new(HashMap::new()),
        }
    }

    /// Counts one unit of work; errors when a limit is passed, the deadline is past or
    /// the request was cancelled (checked every 1,024 units).
    pub fn tick(&self) -> Result<(), KipError> {
        let w = self.work.get() + 1;
        self.work.set(w);
        if w > self.limits.max_work {
            return Err(KipError::new(
                ErrorCode::ResourceExhausted,
                format!("the query examined more than {} candidate rows", self.limits.max_work),
            )
            .with_hint("make the patterns more selective (exact {type, name}, fewer hops) or split the query; use LIMIT and CURSOR to page"));
        }
        if w.is_multiple_of(1024) {
            self.check_time()?;
        }
        Ok(())
    }

    /// Counts `n` units of work at once (what a store counted for the query), with
    /// the checks of [`Ctx::tick`].
    pub fn tick_by(&self, n: u64) -> Result<(), KipError> {
        let before = self.work.get();
        if n > 0 {
            self.work.set(before.saturating_add(n - 1));
            self.tick()?;
        }
        if before / 1024 != self.work.get() / 1024 {
            self.check_time()?;
        }
        Ok(())
    }

    /// `KIP_4001` when the query's deadline has passed or its request was cancelled.
    pub fn check_time(&self) -> Result<(), KipError> {
        if self.limits.interrupt.is_some() || self.limits.deadline.is_some() {
            return self.limits.check_time();
        }
        if self.start.elapsed() > self.limits.timeout {
            return Err(KipError::new(
                ErrorCode::ExecutionTimeout,
                format!(
                    "the query ran longer than its time limit ({})",
                    super::show_duration(self.limits.timeout)
                ),
            )
            .with_hint("optimize the query: bind exact {type, name} first, reduce UNION branches, hops and REGEX, lower LIMIT"));
        }
        Ok(())
    }

    /// A concept record (cached).
    pub fn concept(&self, n: u64) -> Result<Option<Rc<ConceptRecord>>, KipError> {
        if let Some(c) = self.concepts.borrow().get(&n) {
            return Ok(c.clone());
        }
        let rec = self.g.concept(n)?.map(Rc::new);
        let mut cache = self.concepts.borrow_mut();
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(n, rec.clone());
        Ok(rec)
    }

    /// The whole record of a concept if it is cached (`Some(None)`: known missing).
    pub fn cached_concept(&self, n: u64) -> Option<Option<Rc<ConceptRecord>>> {
        self.concepts.borrow().get(&n).cloned()
    }

    /// A concept's type and name (cached), decoded without its attributes and metadata.
    pub fn concept_head(&self, n: u64) -> Result<Option<Rc<Head>>, KipError> {
        if let Some(h) = self.heads.borrow().get(&n) {
            return Ok(h.clone());
        }
        let head = self.g.concept_head(n)?.map(Rc::new);
        let mut cache = self.heads.borrow_mut();
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(n, head.clone());
        Ok(head)
    }

    /// A proposition record (cached).
    pub fn prop(&self, n: u64) -> Result<Option<Rc<PropRecord>>, KipError> {
        if let Some(p) = self.props.borrow().get(&n) {
            return Ok(p.clone());
        }
        let rec = self.g.prop(n)?.map(Rc::new);
        let mut cache = self.props.borrow_mut();
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(n, rec.clone());
        Ok(rec)
    }
}

pub(crate) fn bind(row: &Row, slot: usize, v: Val) -> Option<Row> {
    match &row[slot] {
        Some(x) if *x == v => Some(row.clone()),
        Some(_) => None,
        None => {
            let mut r = row.clone();
            r[slot] = Some(v);
            Some(r)
        }
    }
}

/// Runs a group (its steps, then its UNION branches) for one input row.
pub fn run_group(
    ctx: &Ctx,
    g: &Group,
    row: &Row,
    emit: &mut dyn FnMut(&Row) -> Result<More, KipError>,
) -> Result<More, KipError> {
    if !run_steps(ctx, &g.steps, 0, row, emit)? {
        return Ok(false);
    }
    for u in &g.unions {
        let empty: Row = vec![None; row.len()];
        let more = run_group(ctx, u, &empty, &mut |r| {
            // A branch's rows join the input row where they agree.
            let mut merged = row.clone();
            for (i, v) in r.iter().enumerate() {
                if let Some(v) = v {
                    match &merged[i] {
                        Some(x) if x != v => return Ok(true),
                        _ => merged[i] = Some(v.clone()),
                    }
                }
            }
            emit(&merged)
        })?;
        if !more {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Runs `steps[i..]` for one input row (no UNION branches): the rest of a group once
/// its first steps are bound by the caller (a keyset page resuming at a concept).
pub fn run_steps(
    ctx: &Ctx,
    steps: &[Step],
    i: usize,
    row: &Row,
    emit: &mut dyn FnMut(&Row) -> Result<More, KipError>,
) -> Result<More, KipError> {
    let Some(step) = steps.get(i) else {
        return emit(row);
    };
    match step {
        Step::Concept(c) => {
            if row[c.var].is_none() {
                if let Some((p, pred)) = steps
                    .get(i + 1)
                    .and_then(|s| super::join::in_links_of(c, s))
                {
                    return super::join::merge_join(ctx, c, p, pred, steps, i, row, emit);
                }
            }
            match_concept(ctx, c, row, &mut |r| run_steps(ctx, steps, i + 1, r, emit))
        }
        Step::Prop(p) => match_prop(ctx, p, row, &mut |r, _| {
            run_steps(ctx, steps, i + 1, r, emit)
        }),
        Step::Filter(e) => {
            ctx.tick()?;
            if super::eval::truthy(&super::eval::eval(ctx, e, row)?) {
                run_steps(ctx, steps, i + 1, row, emit)
            } else {
                Ok(true)
            }
        }
        Step::Optional(g) => {
            let mut any = false;
            let more = run_group(ctx, g, row, &mut |r| {
                any = true;
                run_steps(ctx, steps, i + 1, r, emit)
            })?;
            if !more {
                return Ok(false);
            }
            if any {
                Ok(true)
            } else {
                run_steps(ctx, steps, i + 1, row, emit)
            }
        }
        Step::Not(g) => {
            let mut found = false;
            run_group(ctx, g, row, &mut |_| {
                found = true;
                Ok(false)
            })?;
            if found {
                Ok(true)
            } else {
                run_steps(ctx, steps, i + 1, row, emit)
            }
        }
    }
}

/// True when concept `n` satisfies the matcher.
fn concept_ok(ctx: &Ctx, m: &ConceptMatch, n: u64) -> Result<bool, KipError> {
    if let Some(id) = m.id {
        if id != Some(n) {
            return Ok(false);
        }
    }
    let ok = |concept_type: &String, name: &String| {
        m.concept_type.as_ref().is_none_or(|t| t == concept_type)
            && m.name.as_ref().is_none_or(|x| x == name)
    };
    if let Some(cached) = ctx.cached_concept(n) {
        return Ok(cached.is_some_and(|c| ok(&c.concept_type, &c.name)));
    }
    Ok(ctx.concept_head(n)?.is_some_and(|h| ok(&h.0, &h.1)))
}

/// Concepts satisfying a matcher, streamed to `f`, from concept number `start` on: the concepts come in ascending
/// number (the type, name and record tables are keyed by it), and those below `start`
/// are passed over without reading their records (a keyset cursor resuming a page).
pub fn scan_matcher_from(
    ctx: &Ctx,
    m: &ConceptMatch,
    start: u64,
    f: &mut dyn FnMut(u64) -> Result<More, KipError>,
) -> Result<More, KipError> {
    let mut more = true;
    // A scan of the type index alone (no name) needs no record to check the matcher.
    let by_type = m.id.is_none() && m.name.is_none() && m.concept_type.is_some();
    let mut check = |n: u64| -> StoreResult<More> {
        // Passing over an index entry below the cursor is not counted as work: a page
        // deep in a result costs what the first one does.
        if n < start {
            return Ok(true);
        }
        ctx.tick()?;
        if by_type || concept_ok(ctx, m, n)? {
            more = f(n)?;
            Ok(more)
        } else {
            Ok(true)
        }
    };
    match (&m.id, &m.concept_type, &m.name) {
        (Some(None), _, _) => return Ok(true),
        (Some(Some(n)), _, _) => {
            check(*n)?;
        }
        (None, Some(t), Some(name)) => {
            if let Some(n) = ctx.g.concept_by_key(t, name)? {
                check(n)?;
            }
        }
        (None, None, Some(name)) => ctx.g.scan_name(name, &mut check)?,
        (None, Some(t), None) => ctx.g.scan_type(t, &mut check)?,
        (None, None, None) => ctx.g.scan_concepts(&mut check)?,
    }
    Ok(more)
}

/// The concepts a concept step scans (its variable unbound), from concept number
/// `start` on, in ascending number: through its attribute index range when it has one
/// (the range's concepts are gathered and sorted first), else as [`scan_matcher_from`].
pub fn scan_step_from(
    ctx: &Ctx,
    c: &ConceptStep,
    start: u64,
    f: &mut dyn FnMut(u64) -> Result<More, KipError>,
) -> Result<More, KipError> {
    let (Some(range), Some(t)) = (&c.index, &c.matcher.concept_type) else {
        return scan_matcher_from(ctx, &c.matcher, start, f);
    };
    let mut ids = Vec::new();
    range.scan(ctx.g, t, &mut |_, n| {
        ctx.tick()?;
        if n >= start {
            ids.push(n);
        }
        Ok(true)
    })?;
    ids.sort_unstable();
    for n in ids {
        // The index files a concept under its type: no record to read for the matcher.
        if !f(n)? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn match_concept(
    ctx: &Ctx,
    c: &ConceptStep,
    row: &Row,
    f: &mut dyn FnMut(&Row) -> Result<More, KipError>,
) -> Result<More, KipError> {
    match &row[c.var] {
        Some(Val::Elem(ElemRef::Concept(n))) => {
            if concept_ok(ctx, &c.matcher, *n)? {
                f(row)
            } else {
                Ok(true)
            }
        }
        Some(_) => Ok(true),
        None => scan_step_from(ctx, c, 0, &mut |n| {
            let mut r = row.clone();
            r[c.var] = Some(Val::Elem(ElemRef::Concept(n)));
            f(&r)
        }),
    }
}

/// Binds or checks an endpoint against a concrete element.
pub(crate) fn accept(
    ctx: &Ctx,
    e: &EndpointC,
    v: ElemRef,
    row: &Row,
) -> Result<Option<Row>, KipError> {
    match e {
        EndpointC::Var(s) => Ok(bind(row, *s, Val::Elem(v))),
        EndpointC::Concept(var, m) => {
            let ElemRef::Concept(n) = v else {
                return Ok(None);
            };
            if !concept_ok(ctx, m, n)? {
                return Ok(None);
            }
            Ok(match var {
                Some(s) => bind(row, *s, Val::Elem(v)),
                None => Some(row.clone()),
            })
        }
        EndpointC::Prop(p) => {
            let ElemRef::Prop(n) = v else { return Ok(None) };
            let Some(rec) = ctx.prop(n)? else {
                return Ok(None);
            };
            check_prop(ctx, p, n, &rec, row)
        }
    }
}

fn accept_pred(pred: &PredC, name: &str, row: &Row) -> Option<Row> {
    accept_pred_ref(pred, name, row).map(Cow::into_owned)
}

/// [`accept_pred`] without copying the row when nothing is bound (literal predicates).
fn accept_pred_ref<'r>(pred: &PredC, name: &str, row: &'r Row) -> Option<Cow<'r, Row>> {
    match pred {
        PredC::Var(s) => bind(row, *s, Val::Pred(Rc::from(name))).map(Cow::Owned),
        PredC::Lits(names, _) => names
            .iter()
            .any(|n| n == name)
            .then_some(Cow::Borrowed(row)),
    }
}

/// Checks a stored link against a (non-path) pattern, binding its variables.
fn check_prop(
    ctx: &Ctx,
    p: &PropStep,
    n: u64,
    rec: &PropRecord,
    row: &Row,
) -> Result<Option<Row>, KipError> {
    let row = match p.var {
        Some(s) => match bind(row, s, Val::Elem(ElemRef::Prop(n))) {
            Some(r) => r,
            None => return Ok(None),
        },
        None => row.clone(),
    };
    match &p.kind {
        PropKind::Id(id) => Ok((*id == Some(n)).then_some(row)),
        PropKind::Triple(s, pred, o) => {
            if matches!(pred, PredC::Lits(_, Some(_))) {
                return Ok(None);
            }
            let Some(row) = accept_pred(pred, &rec.predicate, &row) else {
                return Ok(None);
            };
            let Some(row) = accept(ctx, s, rec.subject, &row)? else {
                return Ok(None);
            };
            accept(ctx, o, rec.object, &row)
        }
    }
}

/// Candidates of an endpoint that needs no scan: a bound variable, an exact concept,
/// a nested link with a bound variable or an id. `None` when it must be enumerated.
fn determined(
    ctx: &Ctx,
    e: &EndpointC,
    row: &Row,
) -> Result<Option<Vec<(ElemRef, Row)>>, KipError> {
    match e {
        EndpointC::Var(s) => Ok(match &row[*s] {
            Some(Val::Elem(v)) => Some(vec![(*v, row.clone())]),
            Some(Val::Pred(_)) => Some(vec![]),
            None => None,
        }),
        EndpointC::Concept(var, m) => {
            if let Some(Some(Val::Elem(v))) = var.map(|s| &row[s]) {
                return Ok(Some(
                    accept(ctx, e, *v, row)?
                        .map(|r| vec![(*v, r)])
                        .unwrap_or_default(),
                ));
            }
            let exact = match (&m.id, &m.concept_type, &m.name) {
                (Some(id), _, _) => Some(*id),
                (None, Some(t), Some(n)) => Some(ctx.g.concept_by_key(t, n)?),
                _ => None,
            };
            match exact {
                None => Ok(None),
                Some(None) => Ok(Some(vec![])),
                Some(Some(n)) => {
                    let v = ElemRef::Concept(n);
                    Ok(Some(
                        accept(ctx, e, v, row)?
                            .map(|r| vec![(v, r)])
                            .unwrap_or_default(),
                    ))
                }
            }
        }
        EndpointC::Prop(p) => {
            let known = match (p.var.map(|s| &row[s]), &p.kind) {
                (Some(Some(Val::Elem(v))), _) => Some(Some(*v)),
                (Some(Some(Val::Pred(_))), _) => Some(None),
                (_, PropKind::Id(id)) => Some(id.map(ElemRef::Prop)),
                _ => None,
            };
            match known {
                None => Ok(None),
                Some(None) => Ok(Some(vec![])),
                Some(Some(v)) => Ok(Some(
                    accept(ctx, e, v, row)?
                        .map(|r| vec![(v, r)])
                        .unwrap_or_default(),
                )),
            }
        }
    }
}

/// Matches a proposition pattern; `f(row, link)` gets the link for single-hop matches.
pub fn match_prop(
    ctx: &Ctx,
    p: &PropStep,
    row: &Row,
    f: &mut LinkSink<'_>,
) -> Result<More, KipError> {
    // A bound link variable: check it.
    if let Some(Some(v)) = p.var.map(|s| &row[s]) {
        let Val::Elem(ElemRef::Prop(n)) = v else {
            return Ok(true);
        };
        let n = *n;
        ctx.tick()?;
        let Some(rec) = ctx.prop(n)? else {
            return Ok(true);
        };
        return match check_prop(ctx, p, n, &rec, row)? {
            Some(r) => f(&r, Some(ElemRef::Prop(n))),
            None => Ok(true),
        };
    }
    let (s, pred, o) = match &p.kind {
        PropKind::Id(None) => return Ok(true),
        PropKind::Id(Some(n)) => {
            ctx.tick()?;
            let Some(rec) = ctx.prop(*n)? else {
                return Ok(true);
            };
            return match check_prop(ctx, p, *n, &rec, row)? {
                Some(r) => f(&r, Some(ElemRef::Prop(*n))),
                None => Ok(true),
            };
        }
        PropKind::Triple(s, pred, o) => (s, pred, o),
    };
    if let PredC::Lits(names, Some((min, max))) = pred {
        return match_path(ctx, s, names, *min, *max, o, row, f);
    }
    // The predicates to scan with, when known.
    let preds: Option<Vec<Rc<str>>> = match pred {
        PredC::Lits(names, _) => Some(names.iter().map(|n| Rc::from(n.as_str())).collect()),
        PredC::Var(v) => match &row[*v] {
            Some(Val::Pred(name)) => Some(vec![name.clone()]),
            Some(Val::Elem(_)) => return Ok(true),
            None => None,
        },
    };
    let mut found = |link: u64, r: Row| -> Result<More, KipError> {
        match p.var {
            Some(slot) => match bind(&r, slot, Val::Elem(ElemRef::Prop(link))) {
                Some(r) => f(&r, Some(ElemRef::Prop(link))),
                None => Ok(true),
            },
            None => f(&r, Some(ElemRef::Prop(link))),
        }
    };
    // Access path: a known subject, a known object, a nested subject/object, a
    // predicate, or every link.
    if let Some(cands) = determined(ctx, s, row)? {
        for (sv, r1) in cands {
            if !scan_side(ctx, true, sv, &preds, &mut |pname, ov, id| {
                ctx.tick()?;
                let Some(r2) = accept_pred_ref(pred, pname, &r1) else {
                    return Ok(true);
                };
                match accept(ctx, o, ov, &r2)? {
                    Some(r3) => found(id, r3),
                    None => Ok(true),
                }
            })? {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    if let Some(cands) = determined(ctx, o, row)? {
        for (ov, r1) in cands {
            if !scan_side(ctx, false, ov, &preds, &mut |pname, sv, id| {
                ctx.tick()?;
                let Some(r2) = accept_pred_ref(pred, pname, &r1) else {
                    return Ok(true);
                };
                match accept(ctx, s, sv, &r2)? {
                    Some(r3) => found(id, r3),
                    None => Ok(true),
                }
            })? {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    for (outgoing, nested, other) in [(true, s, o), (false, o, s)] {
        if let EndpointC::Prop(inner) = nested {
            return match_prop(ctx, inner, row, &mut |r1, link| {
                let Some(link) = link else { return Ok(true) };
                scan_side(ctx, outgoing, link, &preds, &mut |pname, v, id| {
                    ctx.tick()?;
                    let Some(r2) = accept_pred(pred, pname, r1) else {
                        return Ok(true);
                    };
                    match accept(ctx, other, v, &r2)? {
                        Some(r3) => found(id, r3),
                        None => Ok(true),
                    }
                })
            });
        }
    }
    let mut each = |sv: ElemRef, pname: &str, ov: ElemRef, id: u64| -> Result<More, KipError> {
        ctx.tick()?;
        let Some(r1) = accept_pred_ref(pred, pname, row) else {
            return Ok(true);
        };
        let Some(r2) = accept(ctx, s, sv, &r1)? else {
            return Ok(true);
        };
        match accept(ctx, o, ov, &r2)? {
            Some(r3) => found(id, r3),
            None => Ok(true),
        }
    };
    match &preds {
        Some(names) => {
            for name in names {
                let mut more = true;
                ctx.g.scan_predicate(name, &mut |sv, ov, id| {
                    more = each(sv, name, ov, id)?;
                    Ok(more)
                })?;
                if !more {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        None => {
            let mut more = true;
            ctx.g.scan_props(&mut |id| {
                let Some(rec) = ctx.prop(id)? else {
                    return Ok(true);
                };
                more = each(rec.subject, &rec.predicate, rec.object, id)?;
                Ok(more)
            })?;
            Ok(more)
        }
    }
}

/// Scans the links leaving (`outgoing`) or entering `at`, for each known predicate or
/// for all: `f(predicate, other end, link id)`.
fn scan_side(
    ctx: &Ctx,
    outgoing: bool,
    at: ElemRef,
    preds: &Option<Vec<Rc<str>>>,
    f: &mut dyn FnMut(&str, ElemRef, u64) -> Result<More, KipError>,
) -> Result<More, KipError> {
    let more = Cell::new(true);
    let mut cb = |p: &str, v: ElemRef, id: u64| -> StoreResult<More> {
        let m = f(p, v, id)?;
        more.set(m);
        Ok(m)
    };
    match preds {
        Some(names) => {
            for n in names {
                if outgoing {
                    ctx.g.scan_out(at, Some(n), &mut cb)?;
                } else {
                    ctx.g.scan_in(at, Some(n), &mut cb)?;
                }
                if !more.get() {
                    return Ok(false);
                }
            }
        }
        None => {
            if outgoing {
                ctx.g.scan_out(at, None, &mut cb)?;
            } else {
                ctx.g.scan_in(at, None, &mut cb)?;
            }
        }
    }
    Ok(more.get())
}

/// Elements reachable from `start` in `min..=max` hops over `names` (forward or
/// backward), each once, in discovery order. Level by level: at most `max` levels.
/// Zero hops reach only a concept itself.
fn reach(
    ctx: &Ctx,
    start: ElemRef,
    names: &[String],
    min: u32,
    max: u32,
    forward: bool,
) -> Result<Vec<ElemRef>, KipError> {
    let mut ends = Vec::new();
    let mut seen_end = HashSet::new();
    // The zero-hop reflexive match pairs a concept node with itself (spec 3.4.2).
    if min == 0 && matches!(start, ElemRef::Concept(_)) {
        seen_end.insert(start);
        ends.push(start);
    }
    let mut frontier = vec![start];
    let mut visited_levels: HashMap<Vec<ElemRef>, u32> = HashMap::new();
    for depth in 1..=max {
        let mut next = Vec::new();
        let mut next_set = HashSet::new();
        // One call per level: a store whose scans are round trips reads the level at
        // once (GraphRead::scan_many).
        ctx.g
            .scan_many(&frontier, names, forward, &mut |_, _, v, _| {
                ctx.tick()?;
                if next_set.insert(v) {
                    next.push(v);
                }
                Ok(true)
            })?;
        if depth >= min {
            for v in &next {
                if seen_end.insert(*v) {
                    ends.push(*v);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        // A frontier seen before at depth d' means the levels from here repeat those
        // after d'; once those were all recorded (d' + 1 >= min), nothing new can come.
        let mut key = next.clone();
        key.sort();
        if let Some(&earlier) = visited_levels.get(&key) {
            if earlier + 1 >= min {
                break;
            }
        } else {
            visited_levels.insert(key, depth);
        }
        frontier = next;
    }
    // The rows that follow read these elements (their names, attributes) one by one:
    // a store whose reads are round trips reads the first ones at once.
    if ends.len() > 1 {
        ctx.g
            .prefetch_elements(&ends[..ends.len().min(PREFETCH_ENDS)])?;
    }
    Ok(ends)
}

/// Path ends whose records a walk announces to the store ([`reach`]).
const PREFETCH_ENDS: usize = 512;

#[allow(clippy::too_many_arguments)]
fn match_path(
    ctx: &Ctx,
    s: &EndpointC,
    names: &[String],
    min: u32,
    max: u32,
    o: &EndpointC,
    row: &Row,
    f: &mut LinkSink<'_>,
) -> Result<More, KipError> {
    let (forward, starts) = if let Some(c) = determined(ctx, s, row)? {
        (true, c)
    } else if let Some(c) = determined(ctx, o, row)? {
        (false, c)
    } else {
        // Both ends free: start from every subject of the predicates (and, for zero
        // hops, every concept, each of which reaches itself).
        let mut set = HashSet::new();
        let mut list = Vec::new();
        for n in names {
            ctx.g.scan_predicate(n, &mut |sv, _, _| {
                ctx.tick()?;
                if set.insert(sv) {
                    list.push(sv);
                }
                Ok(true)
            })?;
        }
        if min == 0 {
            ctx.g.scan_concepts(&mut |n| {
                ctx.tick()?;
                let v = ElemRef::Concept(n);
                if set.insert(v) {
                    list.push(v);
                }
                Ok(true)
            })?;
        }
        let mut cands = Vec::new();
        for v in list {
            if let Some(r) = accept(ctx, s, v, row)? {
                cands.push((v, r));
            }
        }
        (true, cands)
    };
    for (start, r1) in starts {
        for end in reach(ctx, start, names, min, max, forward)? {
            let other = if forward { o } else { s };
            if let Some(r2) = accept(ctx, other, end, &r1)? {
                if !f(&r2, None)? {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}
