//! KML (Specification §51-61): a mutation plan run in one write transaction, all or
//! nothing. A `MUTATE` block is declarative (§53): every selection block reads the
//! state the transaction started from (§53.4), and its clauses run by dependency —
//! concepts, then evidence, then propositions, assertions and activities, then the
//! changes to existing elements — so a handle may be used before the clause that binds
//! it (§53.3). Concept writes go through [`super::concepts`]; records are written once
//! (§13.7, §15.5) and only their lifecycle changes afterwards.

use super::concepts;
use super::error::{Code, V2Error, V2Result};
use super::eval::{self, bound_json, solve, Bound, Ctx, Row};
use super::propositions::ensure;
use super::records::{
    correct, create_assertion, create_other, desugar_assert, record_clauses, reserve, retract,
    supersede, transition,
};
use crate::store::{ElementId, ElementKind, GraphWrite};
use kip_lang::v2::ast::{
    Clause, Mutation, RecordKind, Scalar, Symbol, TargetRef, Value as AstValue,
};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// What a mutation did: the handles it bound and the elements it changed.
#[derive(Default)]
struct Effect {
    handles: Row,
    created: Vec<ElementId>,
    changed: BTreeSet<ElementId>,
    /// What this plan has set on existing elements, by element and field path: a second
    /// clause setting one of them otherwise is `DuplicateMutationTarget` (§53.4).
    set: BTreeMap<(ElementId, String), Value>,
    /// Ids given ahead to created evidence and activities that refer to each other
    /// (KIP2-KML-008): bound to their handles before their clauses run.
    reserved: BTreeMap<String, ElementId>,
}

impl Effect {
    fn claim(&mut self, id: ElementId, paths: Vec<(String, Value)>) -> V2Result<()> {
        for (path, v) in paths {
            match self.set.get(&(id, path.clone())) {
                Some(old) if *old != v => {
                    return Err(V2Error::new(
                        Code::DuplicateMutationTarget,
                        format!(
                            "two clauses of this MUTATE set {path} of {} to different values ({old} and {v})",
                            id.id_string()
                        ),
                    )
                    .with_hint("a MUTATE block is one declarative plan: give each field of an element one final value")
                    .with_detail("id", id.id_string()));
                }
                _ => {
                    self.set.insert((id, path), v);
                }
            }
        }
        Ok(())
    }
}

/// The request's parameters, as the evaluator reads them.
pub type Params<'a> = &'a dyn Fn(&str) -> Option<Value>;

/// Runs one KML statement in `w`; the operation's result.
pub fn run(
    w: &mut dyn GraphWrite,
    params: Params,
    m: &Mutation,
    max_rows: usize,
) -> V2Result<Value> {
    let clauses: Vec<&Mutation> = match m {
        Mutation::Mutate(cs) => cs.iter().collect(),
        one => vec![one],
    };
    check_handles(&clauses)?;
    // Selection blocks read the state the transaction started from (§53.4).
    let mut selected: BTreeMap<usize, Vec<ElementId>> = BTreeMap::new();
    {
        let ctx = Ctx::new(&*w, params, max_rows);
        for (i, c) in clauses.iter().enumerate() {
            if let Some(ids) = select(&ctx, c)? {
                selected.insert(i, ids);
            }
        }
    }
    let mut fx = Effect::default();
    let mut order: Vec<usize> = (0..clauses.len()).collect();
    order.sort_by_key(|&i| rank(clauses[i]));
    let mut pending: Vec<usize> = order;
    // Forward references: a clause whose handle is not bound yet waits for the next
    // round; a round that binds nothing new ends with the unbound handle's error.
    loop {
        let mut waiting = Vec::new();
        let mut last_err = None;
        let before = pending.len();
        for i in pending {
            match apply(w, params, max_rows, clauses[i], selected.get(&i), &mut fx) {
                Ok(()) => {}
                Err(Unbound(e)) if before > 1 => {
                    waiting.push(i);
                    last_err = Some(e);
                }
                Err(Unbound(e)) | Err(Failed(e)) => return Err(e),
            }
        }
        if waiting.is_empty() {
            break;
        }
        if waiting.len() == before
            && !reserve(w, &clauses, &waiting, &mut fx.handles, &mut fx.reserved)?
        {
            return Err(
                last_err.unwrap_or_else(|| V2Error::new(Code::ReferenceError, "unbound handle"))
            );
        }
        pending = waiting;
    }
    for (h, id) in &fx.reserved {
        if w.element(super::model::SPACE, *id)?.is_none() {
            return Err(V2Error::new(
                Code::ReferenceError,
                format!("?{h} was referred to but its clause created nothing"),
            )
            .with_hint(format!("check the CREATE clause that binds ?{h}")));
        }
    }
    let handles: Map<String, Value> = fx
        .handles
        .iter()
        .map(|(k, b)| (k.clone(), bound_json(b)))
        .collect();
    Ok(json!({
        "handles": handles,
        "created": fx.created.iter().map(|id| id.id_string()).collect::<Vec<_>>(),
        "changed": fx.changed.iter().map(|id| id.id_string()).collect::<Vec<_>>(),
    }))
}

/// Why a clause did not apply.
pub(super) enum Stop {
    /// It uses a handle no clause has bound yet (it may be bound later in the plan).
    Unbound(V2Error),
    /// It failed.
    Failed(V2Error),
}
pub(super) use Stop::{Failed, Unbound};

impl From<V2Error> for Stop {
    fn from(e: V2Error) -> Stop {
        Failed(e)
    }
}

impl From<crate::store::StoreError> for Stop {
    fn from(e: crate::store::StoreError) -> Stop {
        Failed(e.into())
    }
}

fn rank(m: &Mutation) -> u8 {
    match m {
        Mutation::CreateConcept { .. } | Mutation::UpsertConcept { .. } => 0,
        Mutation::CreateRecord {
            kind: RecordKind::Evidence,
            ..
        } => 1,
        Mutation::EnsureProposition { .. } => 2,
        Mutation::Assert { .. }
        | Mutation::CreateRecord {
            kind: RecordKind::Assertion,
            ..
        } => 3,
        Mutation::CreateRecord { .. } => 4,
        _ => 5,
    }
}

fn handle_of(m: &Mutation) -> Option<&str> {
    match m {
        Mutation::CreateConcept { handle, .. }
        | Mutation::UpsertConcept { handle, .. }
        | Mutation::CreateRecord { handle, .. } => Some(handle),
        Mutation::EnsureProposition { handle, .. } | Mutation::Assert { handle, .. } => {
            handle.as_deref()
        }
        _ => None,
    }
}

fn check_handles(clauses: &[&Mutation]) -> V2Result<()> {
    let mut seen = BTreeSet::new();
    for c in clauses {
        if let Some(h) = handle_of(c) {
            if !seen.insert(h) {
                return Err(V2Error::new(
                    Code::DuplicateLocalHandle,
                    format!("?{h} is bound by two clauses of one MUTATE block"),
                )
                .with_hint("give each created or resolved element its own handle")
                .with_detail("handle", h));
            }
        }
    }
    Ok(())
}

/// The targets a clause's selection picks, in ascending element id (§52.7: a LIMIT
/// cuts there, so the same sweep twice takes the same elements). `None` for clauses
/// without a selection, and for targets named directly without WHERE.
fn select(ctx: &Ctx, m: &Mutation) -> V2Result<Option<Vec<ElementId>>> {
    let (target, sel) = match m {
        Mutation::Update {
            target, selection, ..
        }
        | Mutation::Retract {
            target, selection, ..
        }
        | Mutation::SetRetention {
            target, selection, ..
        }
        | Mutation::Lifecycle {
            target, selection, ..
        }
        | Mutation::Purge {
            target, selection, ..
        } => (target, selection.clone()),
        Mutation::MergeConcept {
            source,
            into,
            where_clauses,
            ..
        } => return super::merge::pair(ctx, source, into, where_clauses.as_deref()).map(Some),
        _ => return Ok(None),
    };
    let Some(block) = &sel.where_clauses else {
        return Ok(None);
    };
    let rows = solve(ctx, block, vec![Row::new()])?;
    let mut ids = BTreeSet::new();
    match target {
        TargetRef::Var(v) => {
            for r in &rows {
                match r.get(v) {
                    Some(Bound::Elem(id)) => {
                        ids.insert(*id);
                    }
                    Some(_) => {}
                    None => {
                        return Err(V2Error::new(
                            Code::ReferenceError,
                            format!("?{v} is not bound by the WHERE block"),
                        )
                        .with_hint(format!("bind ?{v} in a pattern of the WHERE block")))
                    }
                }
            }
        }
        direct => {
            // A WHERE given with a direct target only guards it.
            if !rows.is_empty() {
                if let Some(id) = direct_id(ctx, direct)? {
                    ids.insert(id);
                }
            }
        }
    }
    let mut ids: Vec<ElementId> = ids.into_iter().collect();
    ids.sort_by_key(|id| (id.n, id.kind));
    if let Some(l) = &sel.limit {
        match eval::scalar(ctx, l)?.as_u64() {
            Some(n) => ids.truncate(n as usize),
            None => {
                return Err(
                    V2Error::new(Code::TypeMismatch, "LIMIT takes a whole number")
                        .with_hint("LIMIT 100"),
                )
            }
        }
    }
    Ok(Some(ids))
}

pub(super) fn direct_id(ctx: &Ctx, t: &TargetRef) -> V2Result<Option<ElementId>> {
    let v = match t {
        TargetRef::Var(_) => return Ok(None),
        TargetRef::Param(p) => ctx.param(p)?,
        TargetRef::Id(s) => json!(s),
    };
    match v.as_str().and_then(eval::parse_id) {
        Some(id) => Ok(Some(id)),
        None => Err(
            V2Error::new(Code::TypeMismatch, format!("{v} is not an element id"))
                .with_hint("name an element by its id, e.g. \"C:12\", or select it with WHERE"),
        ),
    }
}

/// A value of a clause, evaluated with the handles (and, for UPDATE, the target).
pub(super) fn value_of(ctx: &Ctx, row: &Row, v: &AstValue) -> Result<Value, Stop> {
    if let AstValue::Field(fa) = v {
        if !row.contains_key(&fa.var) {
            return Err(Unbound(
                V2Error::new(
                    Code::ReferenceError,
                    format!("?{} is not bound by any clause of this mutation", fa.var),
                )
                .with_hint(
                    "bind the handle with CREATE, UPSERT or ENSURE in the same MUTATE block",
                ),
            ));
        }
    }
    Ok(eval::write_value(ctx, row, v)?)
}

pub(super) fn members(
    ctx: &Ctx,
    row: &Row,
    ms: &[(String, AstValue)],
) -> Result<Map<String, Value>, Stop> {
    let mut out = Map::new();
    for (k, v) in ms {
        out.insert(k.clone(), value_of(ctx, row, v)?);
    }
    Ok(out)
}

pub(super) fn symbol(ctx: &Ctx, s: &Symbol) -> V2Result<String> {
    match s {
        Symbol::Name(n) => Ok(n.clone()),
        Symbol::Param(p) => match ctx.param(p)? {
            Value::String(s) => Ok(s),
            other => Err(eval::type_mismatch("symbol", &other)),
        },
    }
}

fn apply(
    w: &mut dyn GraphWrite,
    params: Params,
    max_rows: usize,
    m: &Mutation,
    selected: Option<&Vec<ElementId>>,
    fx: &mut Effect,
) -> Result<(), Stop> {
    match m {
        Mutation::Mutate(_) => Err(Failed(V2Error::new(
            Code::InvalidSyntax,
            "a MUTATE block does not nest",
        ))),
        Mutation::CreateConcept { handle, clauses } => {
            waits_for_handle(clauses, &fx.handles)?;
            let spec = {
                let ctx = Ctx::new(&*w, params, max_rows);
                concepts::Spec::read(&ctx, &fx.handles, clauses, false)?
            };
            let id = concepts::create(w, &spec)?;
            bind(fx, handle, id, true);
            Ok(())
        }
        Mutation::UpsertConcept { handle, clauses } => {
            waits_for_handle(clauses, &fx.handles)?;
            let (spec, found) = {
                let ctx = Ctx::new(&*w, params, max_rows);
                let spec = concepts::Spec::read(&ctx, &fx.handles, clauses, true)?;
                let found = concepts::resolve(&ctx, &spec)?;
                (spec, found)
            };
            if let Some(id) = found {
                fx.claim(id, spec.change_paths())?;
            }
            let (id, created, changed) = concepts::upsert(w, &spec, found)?;
            bind(fx, handle, id, created);
            if !created && changed {
                fx.changed.insert(id);
            }
            Ok(())
        }
        Mutation::EnsureProposition {
            handle,
            tuple,
            expect_version,
        } => {
            let (id, created) = ensure(
                w,
                params,
                max_rows,
                &fx.handles,
                tuple,
                expect_version.as_ref(),
            )?;
            if let Some(h) = handle {
                bind(fx, h, id, created);
            } else if created {
                fx.created.push(id);
            }
            Ok(())
        }
        Mutation::Assert {
            handle,
            tuple,
            members: ms,
            superseding,
        } => {
            let (p, created) = ensure(w, params, max_rows, &fx.handles, tuple, None)?;
            if created {
                fx.created.push(p);
            }
            let (fields, evidence, old) = {
                let ctx = Ctx::new(&*w, params, max_rows);
                let given = members(&ctx, &fx.handles, ms)?;
                let old = match superseding {
                    Some(t) => Some(target_id(&ctx, &fx.handles, t)?),
                    None => None,
                };
                let (fields, evidence) = desugar_assert(p, given)?;
                (fields, evidence, old)
            };
            let a = create_assertion(w, fields, evidence)?;
            match handle {
                Some(h) => bind(fx, h, a, true),
                None => fx.created.push(a),
            }
            if let Some(old) = old {
                supersede(w, old, a, None)?;
                fx.changed.insert(old);
            }
            Ok(())
        }
        Mutation::CreateRecord {
            kind,
            handle,
            clauses,
        } => {
            let (fields, structural, client_key) = {
                let ctx = Ctx::new(&*w, params, max_rows);
                let ahead: Vec<ElementId> = fx.reserved.values().copied().collect();
                record_clauses(&ctx, &fx.handles, clauses, &ahead)?
            };
            let id = match kind {
                RecordKind::Assertion => {
                    let evidence = structural
                        .iter()
                        .filter(|(f, _, _)| f == "evidence")
                        .map(|(_, id, role)| (*id, role.clone()))
                        .collect();
                    if let Some((f, _, _)) = structural.iter().find(|(f, _, _)| f != "evidence") {
                        return Err(Failed(field_not_found("assertion structural field", f)));
                    }
                    let mut fields = fields;
                    if let Some(k) = client_key {
                        fields.insert("client_key".into(), k);
                    }
                    create_assertion(w, fields, evidence)?
                }
                RecordKind::Evidence | RecordKind::Activity => {
                    let kind = match kind {
                        RecordKind::Evidence => ElementKind::Evidence,
                        _ => ElementKind::Activity,
                    };
                    let preset = fx.reserved.get(handle.as_str()).copied();
                    create_other(w, kind, fields, structural, client_key, preset)?
                }
            };
            bind(fx, handle, id, true);
            Ok(())
        }
        Mutation::Update {
            target,
            expect_version,
            actions,
            ..
        } => {
            let targets = targets(w, params, max_rows, &fx.handles, target, selected)?;
            for id in targets {
                let ctx = Ctx::new(&*w, params, max_rows);
                let mut row = fx.handles.clone();
                if let TargetRef::Var(v) = target {
                    row.insert(v.clone(), Bound::Elem(id));
                }
                let expect = match expect_version {
                    Some(s) => Some(eval::scalar(&ctx, s)?),
                    None => None,
                };
                let change = concepts::Change::read(&ctx, &row, id, actions)?;
                drop(ctx);
                fx.claim(id, change.paths())?;
                if concepts::update(w, id, &change, expect.as_ref())? {
                    fx.changed.insert(id);
                }
            }
            Ok(())
        }
        Mutation::Retract {
            target,
            expect_state,
            ..
        } => {
            let targets = targets(w, params, max_rows, &fx.handles, target, selected)?;
            let expect = expected_state(w, params, max_rows, expect_state.as_ref())?;
            for id in targets {
                retract(w, id, expect.as_deref())?;
                fx.changed.insert(id);
            }
            Ok(())
        }
        Mutation::Replace {
            kind: RecordKind::Assertion,
            target,
            by,
            expect_state,
        } => {
            let (old, new) = {
                let ctx = Ctx::new(&*w, params, max_rows);
                (
                    target_id(&ctx, &fx.handles, target)?,
                    target_id(&ctx, &fx.handles, by)?,
                )
            };
            let expect = expected_state(w, params, max_rows, expect_state.as_ref())?;
            supersede(w, old, new, expect.as_deref())?;
            fx.changed.insert(old);
            Ok(())
        }
        Mutation::Lifecycle {
            tombstone: false,
            target,
            expect_state,
            ..
        } => {
            let targets = targets(w, params, max_rows, &fx.handles, target, selected)?;
            let expect = expected_state(w, params, max_rows, expect_state.as_ref())?;
            for id in targets {
                super::retention::set_lifecycle(w, id, "archived", expect.as_deref())?;
                fx.changed.insert(id);
            }
            Ok(())
        }
        Mutation::Replace {
            target,
            by,
            expect_state,
            ..
        } => {
            let (old, new) = {
                let ctx = Ctx::new(&*w, params, max_rows);
                (
                    target_id(&ctx, &fx.handles, target)?,
                    target_id(&ctx, &fx.handles, by)?,
                )
            };
            let expect = expected_state(w, params, max_rows, expect_state.as_ref())?;
            correct(w, old, new, expect.as_deref())?;
            fx.changed.insert(old);
            Ok(())
        }
        Mutation::Transition {
            target,
            to,
            finalize,
            expect_state,
        } => {
            let (id, to, parts) = {
                let ctx = Ctx::new(&*w, params, max_rows);
                let id = target_id(&ctx, &fx.handles, target)?;
                let to = match eval::scalar(&ctx, to)? {
                    Value::String(s) => s,
                    other => return Err(Failed(eval::type_mismatch("TO", &other))),
                };
                (id, to, record_clauses(&ctx, &fx.handles, finalize, &[])?)
            };
            let expect = expected_state(w, params, max_rows, expect_state.as_ref())?;
            transition(w, id, &to, parts, expect.as_deref())?;
            fx.changed.insert(id);
            Ok(())
        }
        Mutation::SetRetention {
            target,
            policy,
            expect_version,
            ..
        } => {
            let targets = targets(w, params, max_rows, &fx.handles, target, selected)?;
            let (policy, expect) = {
                let ctx = Ctx::new(&*w, params, max_rows);
                let expect = match expect_version {
                    Some(v) => Some(eval::scalar(&ctx, v)?),
                    None => None,
                };
                (members(&ctx, &fx.handles, policy)?, expect)
            };
            for id in targets {
                super::retention::set_retention(w, id, policy.clone(), expect.as_ref())?;
                fx.changed.insert(id);
            }
            Ok(())
        }
        Mutation::Lifecycle {
            tombstone: true,
            target,
            expect_state,
            ..
        } => {
            let targets = targets(w, params, max_rows, &fx.handles, target, selected)?;
            let expect = expected_state(w, params, max_rows, expect_state.as_ref())?;
            for id in targets {
                super::retention::set_lifecycle(w, id, "tombstoned", expect.as_deref())?;
                fx.changed.insert(id);
            }
            Ok(())
        }
        Mutation::Purge {
            target,
            reference_policy,
            ..
        } => {
            let targets = targets(w, params, max_rows, &fx.handles, target, selected)?;
            let policy = match reference_policy {
                Some(p) => {
                    let ctx = Ctx::new(&*w, params, max_rows);
                    match eval::scalar(&ctx, p)? {
                        Value::String(s) => s,
                        other => {
                            return Err(Failed(eval::type_mismatch("REFERENCE POLICY", &other)))
                        }
                    }
                }
                None => "deny_if_referenced".to_string(),
            };
            for id in targets {
                super::retention::purge(w, id, &policy)?;
                fx.changed.insert(id);
            }
            Ok(())
        }
        Mutation::MergeConcept { expect_version, .. } => {
            let pair = match selected {
                Some(p) if p.len() == 2 => (p[0], p[1]),
                _ => {
                    return Err(Failed(V2Error::new(
                        Code::InternalError,
                        "merge pair not selected",
                    )))
                }
            };
            let expect = {
                let ctx = Ctx::new(&*w, params, max_rows);
                match expect_version {
                    Some(v) => Some(eval::scalar(&ctx, v)?),
                    None => None,
                }
            };
            super::merge::merge(w, pair.0, pair.1, expect.as_ref())?;
            fx.changed.insert(pair.0);
            Ok(())
        }
    }
}

/// A concept block whose structural reference names a handle no clause has bound yet
/// waits for the round that binds it (§53.3).
fn waits_for_handle(clauses: &[Clause], handles: &Row) -> Result<(), Stop> {
    for c in clauses {
        if let Clause::SetStructural(entries) | Clause::UnsetStructural(entries) = c {
            for e in entries {
                if let AstValue::Field(fa) = &e.target {
                    if fa.steps.is_empty() && !handles.contains_key(&fa.var) {
                        return Err(Unbound(
                            V2Error::new(
                                Code::ReferenceError,
                                format!("?{} is not bound by any clause of this mutation", fa.var),
                            )
                            .with_hint(
                                "bind it with CREATE, UPSERT or ENSURE in the same MUTATE block",
                            ),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

fn bind(fx: &mut Effect, handle: &str, id: ElementId, created: bool) {
    fx.handles.insert(handle.to_string(), Bound::Elem(id));
    if created {
        fx.created.push(id);
    }
}

fn expected_state(
    w: &mut dyn GraphWrite,
    params: Params,
    max_rows: usize,
    s: Option<&Scalar>,
) -> V2Result<Option<String>> {
    let Some(s) = s else { return Ok(None) };
    let ctx = Ctx::new(&*w, params, max_rows);
    match eval::scalar(&ctx, s)? {
        Value::String(s) => Ok(Some(s)),
        other => Err(eval::type_mismatch("EXPECT STATE", &other)),
    }
}

fn target_id(ctx: &Ctx, handles: &Row, t: &TargetRef) -> Result<ElementId, Stop> {
    match t {
        TargetRef::Var(v) => match handles.get(v) {
            Some(Bound::Elem(id)) => Ok(*id),
            _ => Err(Unbound(
                V2Error::new(
                    Code::ReferenceError,
                    format!("?{v} is not bound by a WHERE block or a clause of this mutation"),
                )
                .with_hint(format!(
                    "add WHERE {{ ... ?{v} ... }}, or bind ?{v} in the same MUTATE block"
                )),
            )),
        },
        direct => match direct_id(ctx, direct)? {
            Some(id) => Ok(id),
            None => Err(Failed(V2Error::new(Code::ReferenceError, "no target"))),
        },
    }
}

/// The elements a clause acts on: its selection, or the element it names.
fn targets(
    w: &mut dyn GraphWrite,
    params: Params,
    max_rows: usize,
    handles: &Row,
    target: &TargetRef,
    selected: Option<&Vec<ElementId>>,
) -> Result<Vec<ElementId>, Stop> {
    if let Some(ids) = selected {
        return Ok(ids.clone());
    }
    let ctx = Ctx::new(&*w, params, max_rows);
    let id = target_id(&ctx, handles, target)?;
    if ctx.view(id)?.is_none() {
        return Err(Failed(not_found(id)));
    }
    Ok(vec![id])
}

/// An element that is not there, said without telling whether it ever was (§30.4).
pub fn not_found(id: ElementId) -> V2Error {
    V2Error::new(
        Code::NotFoundOrNotVisible,
        format!("no visible element {}", id.id_string()),
    )
    .with_hint("find the element first (FIND ... WHERE { ... }) and use the id it returns")
    .with_detail("id", id.id_string())
}

/// A value that names no visible element.
pub(super) fn not_found_value(v: &Value) -> V2Error {
    V2Error::new(
        Code::NotFoundOrNotVisible,
        format!("{v} names no visible element"),
    )
    .with_hint("find the element first (FIND ... WHERE { ... }) and use the id it returns")
}

pub(super) fn field_not_found(what: &str, f: &str) -> V2Error {
    V2Error::new(
        Code::SchemaFieldNotFound,
        format!("\"{f}\" is not a {what}"),
    )
    .with_detail("field", f)
}
