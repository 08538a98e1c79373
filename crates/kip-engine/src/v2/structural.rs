//! Structural References (Specification §17, §43.7): record topology, not semantic
//! Propositions. A concept's references live in its record's state
//! (`structural: {field: [{id, ...options}]}`, in order for an ordered field); a
//! record's (an assertion's `evidence`, evidence's `source` / `generated_by`, an
//! activity's `inputs` / `outputs` / `associated_actors`) in its own fields. The
//! `STRUCTURAL (from, field, to)` pattern reads both; `?edge.index` is the position on
//! an ordered field.

use super::error::{Code, V2Error, V2Result};
use super::eval::{bound_json, parse_id, Bound, Ctx, Row};
use super::model::SPACE;
use super::schema_env::{active, SymbolKind};
use crate::store::{ElementId, ElementKind, GraphRead};
use kip_lang::v2::ast::{Pattern, Symbol};
use serde_json::{json, Map, Value};

/// The Core's structural fields (§20.13), with the kind of element that holds them.
const CORE: &[(&str, ElementKind)] = &[
    ("evidence", ElementKind::Assertion),
    ("source", ElementKind::Evidence),
    ("generated_by", ElementKind::Evidence),
    ("inputs", ElementKind::Activity),
    ("outputs", ElementKind::Activity),
    ("associated_actors", ElementKind::Activity),
];

/// A structural field as the schema defines it.
#[derive(Debug, Clone)]
pub struct Field {
    /// The local name (the state key).
    pub local: String,
    /// The exact symbol.
    pub exact: String,
    /// The element kind that holds it when it is a Core field; `None` for concepts.
    pub core: Option<ElementKind>,
    ordered: bool,
    unique: bool,
    max: Option<u64>,
    min: u64,
    source_types: Option<Vec<Value>>,
    target_types: Option<Vec<Value>>,
    target_kinds: Option<Vec<Value>>,
}

/// Resolves a structural field: a Core one, or one of the Schema Environment.
pub fn field(g: &dyn GraphRead, name: &str) -> V2Result<Field> {
    let bare = name
        .strip_prefix(super::schema_env::CORE_REF)
        .and_then(|r| r.strip_prefix('/'))
        .unwrap_or(name);
    if let Some((local, kind)) = CORE.iter().find(|(n, _)| *n == bare) {
        return Ok(Field {
            local: local.to_string(),
            exact: format!("{}/{local}", super::schema_env::CORE_REF),
            core: Some(*kind),
            ordered: false,
            unique: false,
            max: None,
            min: 0,
            source_types: None,
            target_types: None,
            target_kinds: None,
        });
    }
    let d = active().resolve(g, SymbolKind::StructuralField, name)?;
    let list = |a: &str, b: &str| {
        d.body
            .get(a)
            .and_then(|v| v.get(b))
            .and_then(Value::as_array)
            .cloned()
    };
    Ok(Field {
        local: d.local.clone(),
        exact: d.exact.clone(),
        core: None,
        ordered: d
            .body
            .get("ordered")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        unique: d
            .body
            .get("unique")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        max: d
            .body
            .get("cardinality")
            .and_then(|c| c.get("max"))
            .and_then(Value::as_u64),
        min: d
            .body
            .get("cardinality")
            .and_then(|c| c.get("min"))
            .and_then(Value::as_u64)
            .unwrap_or(0),
        source_types: list("source", "concept_types"),
        target_types: list("target", "concept_types"),
        target_kinds: list("target", "kinds"),
    })
}

fn invalid(message: String) -> V2Error {
    V2Error::new(Code::StructuralReferenceInvalid, message)
        .with_hint("DESCRIBE SCHEMA ENVIRONMENT lists the structural fields; the profile's definitions say their source and target types")
}

/// Checks a reference `source --field--> target` against the field's definition.
pub fn check(
    g: &dyn GraphRead,
    f: &Field,
    source_schema_ref: &str,
    target: ElementId,
) -> V2Result<()> {
    if f.core.is_some() {
        return Err(invalid(format!(
            "\"{}\" is a Core field of {} records, not of concepts",
            f.local,
            f.core.map(super::model::kind_word).unwrap_or("")
        )));
    }
    if let Some(types) = &f.source_types {
        if !types.contains(&json!(source_schema_ref)) {
            return Err(invalid(format!(
                "\"{}\" is not a field of {source_schema_ref}",
                f.local
            )));
        }
    }
    let Some(t) = super::model::view(g, target)? else {
        return Err(invalid(format!(
            "{} is not a visible element",
            target.id_string()
        )));
    };
    if let Some(types) = &f.target_types {
        if !t.get("schema_ref").is_some_and(|s| types.contains(s)) {
            return Err(invalid(format!(
                "\"{}\" points at {}; {} is not one of them",
                f.local,
                Value::Array(types.clone()),
                target.id_string()
            )));
        }
    }
    if let Some(kinds) = &f.target_kinds {
        let word = super::model::kind_word(target.kind);
        if !kinds
            .iter()
            .any(|k| k.as_str().is_some_and(|k| k.eq_ignore_ascii_case(word)))
        {
            return Err(invalid(format!(
                "\"{}\" points at {}; {} is a {word}",
                f.local,
                Value::Array(kinds.clone()),
                target.id_string()
            )));
        }
    }
    Ok(())
}

/// Applies SET / UNSET STRUCTURAL to a concept's `structural` state (§17.4-17.5).
pub fn apply(
    state: &mut Map<String, Value>,
    f: &Field,
    set: &[(ElementId, Map<String, Value>)],
    unset: &[ElementId],
) -> V2Result<()> {
    let mut all = state
        .get("structural")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut refs: Vec<Value> = all
        .get(&f.local)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let id_of = |v: &Value| v.get("id").and_then(Value::as_str).map(str::to_string);
    for target in unset {
        refs.retain(|r| id_of(r).as_deref() != Some(target.id_string().as_str()));
    }
    let mut explicit = std::collections::BTreeSet::new();
    for (target, opts) in set {
        let tid = target.id_string();
        let mut entry = opts.clone();
        let index = entry.remove("index");
        entry.insert("id".into(), json!(tid));
        if f.unique
            && refs
                .iter()
                .any(|r| id_of(r).as_deref() == Some(tid.as_str()))
        {
            continue;
        }
        if f.max == Some(1) {
            refs.clear();
        }
        match index {
            Some(i) if f.ordered => {
                let Some(i) = i.as_u64().map(|i| i as usize).filter(|i| *i <= refs.len()) else {
                    return Err(invalid(format!(
                        "index {i} is outside 0..={} of \"{}\" (positions are dense, §17.4)",
                        refs.len(),
                        f.local
                    )));
                };
                if !explicit.insert(i) {
                    return Err(invalid(format!(
                        "two references claim index {i} of \"{}\"",
                        f.local
                    )));
                }
                refs.insert(i, Value::Object(entry));
            }
            Some(_) => {
                return Err(invalid(format!(
                    "\"{}\" is not ordered: it takes no index",
                    f.local
                )))
            }
            None => refs.push(Value::Object(entry)),
        }
        if let Some(max) = f.max {
            if refs.len() as u64 > max {
                return Err(V2Error::new(
                    Code::ConstraintViolation,
                    format!("\"{}\" holds at most {max} reference(s)", f.local),
                ));
            }
        }
    }
    if (refs.len() as u64) < f.min && !unset.is_empty() {
        return Err(V2Error::new(
            Code::ConstraintViolation,
            format!("\"{}\" needs at least {} reference(s)", f.local, f.min),
        ));
    }
    if refs.is_empty() {
        all.remove(&f.local);
    } else {
        all.insert(f.local.clone(), Value::Array(refs));
    }
    if all.is_empty() {
        state.remove("structural");
    } else {
        state.insert("structural".into(), Value::Object(all));
    }
    Ok(())
}

/// The references `field` of the element object `obj` holds, as (target, entry).
fn refs_of(obj: &Value, f: &Field) -> Vec<(ElementId, Value)> {
    let list = match f.core {
        Some(_) => obj.get(&f.local),
        None => obj.get("structural").and_then(|s| s.get(&f.local)),
    };
    let items: Vec<Value> = match list {
        Some(Value::Array(a)) => a.clone(),
        Some(one) if !one.is_null() => vec![one.clone()],
        _ => Vec::new(),
    };
    items
        .into_iter()
        .filter_map(|v| {
            let id = v
                .as_str()
                .or_else(|| v.get("id").and_then(Value::as_str))
                .and_then(parse_id)?;
            Some((id, v))
        })
        .collect()
}

fn known(ctx: &Ctx, row: &Row, p: &Pattern) -> V2Result<Option<Option<ElementId>>> {
    Ok(match p {
        Pattern::Var(v) => row.get(v).map(|b| match b {
            Bound::Elem(id) => Some(*id),
            Bound::Val(_) => None,
        }),
        Pattern::Param(n) => Some(ctx.param(n)?.as_str().and_then(parse_id)),
        Pattern::Literal(v) => Some(v.as_str().and_then(parse_id)),
        _ => Some(None),
    })
}

/// `[?edge] STRUCTURAL (from, field, to)`.
pub fn pattern(
    ctx: &Ctx,
    row: &Row,
    var: Option<&str>,
    from: &Pattern,
    sym: &Symbol,
    to: &Pattern,
    out: &mut Vec<Row>,
) -> V2Result<()> {
    let name = match sym {
        Symbol::Name(n) => n.clone(),
        Symbol::Param(p) => match ctx.param(p)? {
            Value::String(s) => s,
            other => return Err(super::eval::type_mismatch("structural field", &other)),
        },
    };
    let f = field(ctx.g, &name)?;
    let sources: Vec<ElementId> = match known(ctx, row, from)? {
        Some(Some(id)) => vec![id],
        Some(None) => return Ok(()),
        None => {
            let mut ids = Vec::new();
            let kind = f.core.unwrap_or(ElementKind::Concept);
            ctx.g.scan_elements(SPACE, kind, &mut |n| {
                ids.push(ElementId::new(kind, n));
                Ok(true)
            })?;
            ids
        }
    };
    let want = known(ctx, row, to)?;
    if let Some(None) = want {
        return Ok(());
    }
    for s in sources {
        let Some(obj) = ctx.view(s)? else { continue };
        if obj.pointer("/_system/state").and_then(Value::as_str) != Some(super::model::ACTIVE) {
            continue;
        }
        for (i, (t, entry)) in refs_of(&obj, &f).into_iter().enumerate() {
            if let Some(Some(w)) = want {
                if w != t {
                    continue;
                }
            }
            let mut r = row.clone();
            if let Pattern::Var(v) = from {
                r.insert(v.clone(), Bound::Elem(s));
            }
            if let Pattern::Var(v) = to {
                r.insert(v.clone(), Bound::Elem(t));
            }
            if let Some(var) = var {
                let mut edge =
                    json!({"source": s.id_string(), "field": f.exact, "target": t.id_string()});
                if f.ordered {
                    edge["index"] = json!(i);
                }
                if let Value::Object(m) = &entry {
                    for (k, v) in m {
                        if k != "id" {
                            edge[k] = v.clone();
                        }
                    }
                }
                if let Some(b) = r.get(var) {
                    if bound_json(b) != edge {
                        continue;
                    }
                }
                r.insert(var.to_string(), Bound::Val(edge));
            }
            out.push(r);
        }
    }
    Ok(())
}
