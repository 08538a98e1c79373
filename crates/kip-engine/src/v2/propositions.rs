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
    if let Bound::Elem(id) = &object {
        existing_ref(w, *id)?;
    }
    check_object(w, &pred, &object)?;
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
    model::stamp(&mut payload);
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

/// The predicate's object constraint (Schema Packages: `object.concept_types`,
/// `literal_types`, `kinds`, `enum`; KIP2-SCHEMA-006): an object fits when it is a
/// concept of a listed type (or any concept when `kinds` has `Concept`), a
/// proposition when `kinds` has `Proposition`, or a literal of a listed literal type
/// (and of the `enum` when one is given). A predicate that constrains none of these
/// takes any object.
fn check_object(
    w: &dyn GraphWrite,
    pred: &super::schema_env::Definition,
    object: &Bound,
) -> V2Result<()> {
    let Some(spec) = pred.body.get("object").and_then(Value::as_object) else {
        return Ok(());
    };
    let list = |k: &str| -> Option<Vec<&str>> {
        spec.get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
    };
    let (types, literals, kinds) = (list("concept_types"), list("literal_types"), list("kinds"));
    if types.is_none() && literals.is_none() && kinds.is_none() {
        return Ok(());
    }
    let kind_ok = |k: &str| kinds.as_ref().is_some_and(|ks| ks.contains(&k));
    let (fits, actual) = match object {
        Bound::Elem(id) if id.kind == ElementKind::Concept => {
            let schema_ref = model::view(w, *id)?
                .and_then(|o| {
                    o.get("schema_ref")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .unwrap_or_default();
            let typed = types
                .as_ref()
                .is_some_and(|t| t.contains(&schema_ref.as_str()));
            (
                typed || kind_ok("Concept"),
                format!("{} (a {schema_ref})", id.id_string()),
            )
        }
        Bound::Elem(id) => (
            id.kind == ElementKind::Proposition && kind_ok("Proposition"),
            format!("{} (a {})", id.id_string(), model::kind_word(id.kind)),
        ),
        Bound::Val(v) => {
            let word = literal_type(v);
            let typed = literals
                .as_ref()
                .is_some_and(|l| l.contains(&word) || (word == "integer" && l.contains(&"number")));
            let in_enum = spec
                .get("enum")
                .and_then(Value::as_array)
                .is_none_or(|e| e.contains(v));
            (typed && in_enum, format!("the {word} {v}"))
        }
    };
    if fits {
        return Ok(());
    }
    let mut allowed: Vec<String> = Vec::new();
    allowed.extend(
        types
            .unwrap_or_default()
            .iter()
            .map(|t| format!("a concept of type {t}")),
    );
    allowed.extend(kinds.unwrap_or_default().iter().map(|k| format!("any {k}")));
    allowed.extend(
        literals
            .unwrap_or_default()
            .iter()
            .map(|l| format!("a {l} literal")),
    );
    Err(V2Error::new(
        Code::ConstraintViolation,
        format!(
            "\"{}\" takes as its object {}; the object given is {actual}",
            pred.local,
            if allowed.is_empty() { "nothing".to_string() } else { allowed.join(" or ") }
        ),
    )
    .with_hint("choose a predicate whose object fits, or give the object it declares (DESCRIBE PREDICATE shows it)")
    .with_detail("predicate", pred.exact.as_str()))
}

/// The literal type word of a JSON value (`string`, `boolean`, `integer`, `number`,
/// `array`, `object`, `null`).
fn literal_type(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
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
