//! ENSURE PROPOSITION (Specification §55): the canonical tuple resolved or created,
//! its ends elements or literals, its predicate an exact symbol of the environment.

use super::error::{Code, V2Error, V2Result};
use super::eval::unsupported;
use super::eval::{self, Bound, Ctx, Row};
use super::model::LITERAL_TYPE;
use super::model::{self, SPACE};
use super::mutate::{not_found, Failed, Params, Stop, Unbound};
use super::schema_env::SymbolKind;
use crate::store::ConceptRecord;
use crate::store::{ElemRef, ElementId, ElementKind, GraphWrite, PropRecord};
use kip_lang::v2::ast::{Pattern, PropTuple, Scalar};
use serde_json::{json, Map, Value};

/// The element or literal a tuple term names, for a write.
fn term(ctx: &Ctx, handles: &Row, p: &Pattern) -> Result<Bound, Stop> {
    match p {
        Pattern::Var(v) => match handles.get(v) {
            Some(b) => Ok(b.clone()),
            None => Err(Unbound(
                V2Error::new(
                    Code::ReferenceError,
                    format!("?{v} is not bound by any clause of this mutation"),
                )
                .with_hint("bind it with CREATE, UPSERT or ENSURE in the same MUTATE block"),
            )),
        },
        Pattern::Param(name) => {
            let v = ctx.param(name)?;
            Ok(match v.as_str().and_then(eval::parse_id) {
                Some(id) => Bound::Elem(id),
                None => Bound::Val(v),
            })
        }
        Pattern::Literal(v) => Ok(Bound::Val(v.clone())),
        Pattern::Tuple(t) => match t.as_ref() {
            PropTuple::Id(s) => match eval::scalar(ctx, s)?.as_str().and_then(eval::parse_id) {
                Some(id) if id.kind == ElementKind::Proposition => Ok(Bound::Elem(id)),
                _ => Err(Failed(V2Error::new(
                    Code::TypeMismatch,
                    "(id: ...) names a proposition by its id",
                ))),
            },
            PropTuple::Triple(..) => {
                Err(Failed(unsupported("nested proposition tuples in writes")))
            }
        },
        Pattern::Array(_) | Pattern::Object(_) => Err(Failed(
            V2Error::new(
                Code::TypeMismatch,
                "a proposition's subject and object are elements or scalar literals",
            )
            .with_hint("name an element by a handle, a parameter holding its id, or (id: ...)"),
        )),
    }
}

/// ENSURE PROPOSITION (§55): resolves the canonical tuple or creates it; no Assertion.
pub(super) fn ensure(
    w: &mut dyn GraphWrite,
    params: Params,
    max_rows: usize,
    handles: &Row,
    tuple: &PropTuple,
    expect_version: Option<&Scalar>,
) -> Result<(ElementId, bool), Stop> {
    let PropTuple::Triple(s, path, o) = tuple else {
        return Err(Failed(
            V2Error::new(
                Code::InvalidSyntax,
                "ENSURE resolves or creates by structure; the (id: ...) form only matches (§43.2)",
            )
            .with_hint("write the tuple (subject, \"predicate\", object)"),
        ));
    };
    let (subject, object, pred, expect) = {
        let ctx = Ctx::new(&*w, params, max_rows);
        let subject = term(&ctx, handles, s)?;
        let object = term(&ctx, handles, o)?;
        if path.len() != 1 || path[0].quantifier.is_some() {
            return Err(Failed(V2Error::new(
                Code::InvalidSyntax,
                "a proposition is written with one exact predicate",
            )));
        }
        let name = match &path[0].atom {
            kip_lang::v2::ast::PredicateAtom::Name(n) => n.clone(),
            kip_lang::v2::ast::PredicateAtom::Param(p) => match ctx.param(p)? {
                Value::String(s) => s,
                other => return Err(Failed(eval::type_mismatch("predicate", &other))),
            },
            kip_lang::v2::ast::PredicateAtom::Var(v) => {
                return Err(Failed(V2Error::new(
                    Code::InvalidSyntax,
                    format!("a written proposition names its predicate; ?{v} is a query variable"),
                )))
            }
        };
        let pred = ctx.resolve(SymbolKind::Predicate, &name)?;
        let expect = match expect_version {
            Some(v) => Some(eval::scalar(&ctx, v)?),
            None => None,
        };
        (subject, object, pred, expect)
    };
    let Bound::Elem(sid) = subject else {
        return Err(Failed(
            V2Error::new(
                Code::TypeMismatch,
                "a proposition's subject is an element, not a literal",
            )
            .with_hint("name the subject by a handle or a parameter holding its id"),
        ));
    };
    let s_ref = existing_ref(w, sid)?;
    check_subject(w, &pred, sid)?;
    let o_ref = match object {
        Bound::Elem(id) => existing_ref(w, id)?,
        Bound::Val(v) => ElemRef::Concept(literal(w, &v)?),
    };
    if let Some(n) = w.prop_by_spo(s_ref, &pred.local, o_ref)? {
        let id = ElementId::new(ElementKind::Proposition, n);
        if let Some(v) = expect {
            let version = w.element(SPACE, id)?.map_or(1, |r| r.version);
            if v.as_u64() != Some(version) {
                return Err(Failed(
                    V2Error::new(
                        Code::VersionConflict,
                        format!("{} exists at version {version}", id.id_string()),
                    )
                    .with_hint("EXPECT VERSION 0 creates only; leave it out to resolve the existing proposition"),
                ));
            }
        }
        return Ok((id, false));
    }
    if let Some(v) = expect {
        if v.as_u64() != Some(0) {
            return Err(Failed(V2Error::new(
                Code::VersionConflict,
                "the proposition does not exist yet; only EXPECT VERSION 0 creates",
            )));
        }
    }
    let n = w.alloc_prop_id()?;
    let rec = PropRecord {
        subject: s_ref,
        predicate: pred.local.clone(),
        object: o_ref,
        attributes: Map::new(),
        metadata: Map::new(),
    };
    w.put_prop(n, &rec, None)?;
    let id = ElementId::new(ElementKind::Proposition, n);
    let mut payload = Map::new();
    payload.insert("predicate_ref".into(), json!(pred.exact));
    w.create_element(SPACE, id, payload, Map::new(), &[])?;
    Ok((id, true))
}

fn existing_ref(w: &dyn GraphWrite, id: ElementId) -> Result<ElemRef, Stop> {
    let r = model::graph_ref(id).ok_or_else(|| {
        Failed(
            V2Error::new(
                Code::TypeMismatch,
                format!("{} is not a concept or a proposition", id.id_string()),
            )
            .with_hint("a proposition relates concepts, propositions and literals"),
        )
    })?;
    let exists = match r {
        ElemRef::Concept(n) => w.concept(n)?.is_some(),
        ElemRef::Prop(n) => w.prop(n)?.is_some(),
    };
    if !exists {
        return Err(Failed(not_found(id)));
    }
    Ok(r)
}

/// The predicate's subject constraint (a profile predicate names the concept types it
/// applies to).
fn check_subject(
    w: &dyn GraphWrite,
    pred: &super::schema_env::Definition,
    sid: ElementId,
) -> V2Result<()> {
    let Some(types) = pred
        .body
        .get("subject")
        .and_then(|s| s.get("concept_types"))
        .and_then(Value::as_array)
    else {
        return Ok(());
    };
    let Some(obj) = model::view(w, sid)? else {
        return Err(not_found(sid));
    };
    let actual = obj.get("schema_ref").cloned().unwrap_or(Value::Null);
    if sid.kind != ElementKind::Concept || !types.contains(&actual) {
        return Err(V2Error::new(
            Code::ConstraintViolation,
            format!(
                "\"{}\" takes a subject of type {}; {} is {}",
                pred.local,
                types
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" or "),
                sid.id_string(),
                actual
            ),
        )
        .with_hint("choose a predicate whose subject type fits, or the right subject"));
    }
    Ok(())
}

/// The concept holding a literal proposition object, created on first use.
pub fn literal(w: &mut dyn GraphWrite, v: &Value) -> V2Result<u64> {
    if let Some(n) = eval::literal_concept(w, v)? {
        return Ok(n);
    }
    let n = w.alloc_concept_id()?;
    let row = ConceptRecord {
        concept_type: LITERAL_TYPE.to_string(),
        name: serde_json::to_string(v).unwrap_or_default(),
        attributes: Map::new(),
        metadata: Map::new(),
    };
    w.put_concept(n, &row, None)?;
    Ok(n)
}
