//! Dot paths and FILTER expressions (DECISIONS.md item 15).
//!
//! - Missing keys, unbound variables and paths that do not apply read as `null`.
//! - `==` / `!=` compare JSON values (numbers numerically); `<`, `<=`, `>`, `>=` compare
//!   two numbers numerically or two strings by code point (so ISO-8601 strings compare
//!   chronologically) and are false otherwise.
//! - String functions are case-sensitive; `REGEX` uses the Rust `regex` syntax, which
//!   runs in linear time. A FILTER on an array or object is false except `IS_NULL`,
//!   `IS_NOT_NULL`, `==` and `!=`.

use super::exec::{Ctx, Row, Val};
use crate::store::ElemRef;
use kip_lang::ast::{BinaryOp, DotPath, Expr, Function};
use kip_lang::{ErrorCode, KipError};
use serde_json::{json, Map, Value};
use std::cmp::Ordering;
use std::rc::Rc;

/// The whole element as its JSON object (DECISIONS.md item 2).
pub fn element_json(ctx: &Ctx, v: &Val) -> Result<Value, KipError> {
    Ok(match v {
        Val::Pred(p) => Value::String(p.to_string()),
        Val::Elem(r @ ElemRef::Concept(n)) => match ctx.concept(*n)? {
            Some(c) => json!({
                "id": r.id_string(),
                "type": c.concept_type,
                "name": c.name,
                "attributes": c.attributes,
                "metadata": c.metadata,
            }),
            None => Value::Null,
        },
        Val::Elem(r @ ElemRef::Prop(n)) => match ctx.prop(*n)? {
            Some(p) => json!({
                "id": r.id_string(),
                "subject": p.subject.id_string(),
                "predicate": p.predicate,
                "object": p.object.id_string(),
                "attributes": p.attributes,
                "metadata": p.metadata,
            }),
            None => Value::Null,
        },
    })
}

fn nested(map: &Map<String, Value>, keys: &[String]) -> Value {
    let Some((first, rest)) = keys.split_first() else {
        return Value::Object(map.clone());
    };
    let mut cur = match map.get(first) {
        Some(v) => v,
        None => return Value::Null,
    };
    for k in rest {
        cur = match cur.get(k) {
            Some(v) => v,
            None => return Value::Null,
        };
    }
    cur.clone()
}

/// The value of a dot path. `whole` decides what a bare element variable yields: its
/// JSON object (projections) or its id (FILTER comparisons).
pub fn path_value(ctx: &Ctx, p: &DotPath, row: &Row, whole: bool) -> Result<Value, KipError> {
    let Some(slot) = ctx.vars.get(&p.var.name) else {
        return Ok(Value::Null);
    };
    let Some(v) = &row[slot] else {
        return Ok(Value::Null);
    };
    if p.path.is_empty() {
        return match v {
            Val::Elem(r) if !whole => Ok(Value::String(r.id_string())),
            _ => element_json(ctx, v),
        };
    }
    let field = p.path[0].as_str();
    let rest = &p.path[1..];
    Ok(match v {
        Val::Pred(_) => Value::Null,
        Val::Elem(r @ ElemRef::Concept(n)) => {
            if matches!(field, "id" | "type" | "name") && ctx.cached_concept(*n).is_none() {
                // The record's head is enough (no attributes or metadata decoded).
                let Some(head) = ctx.concept_head(*n)? else {
                    return Ok(Value::Null);
                };
                return Ok(match field {
                    "id" => Value::String(r.id_string()),
                    "type" => Value::String(head.0.clone()),
                    _ => Value::String(head.1.clone()),
                });
            }
            let Some(c) = ctx.concept(*n)? else {
                return Ok(Value::Null);
            };
            match field {
                "id" => Value::String(r.id_string()),
                "type" => Value::String(c.concept_type.clone()),
                "name" => Value::String(c.name.clone()),
                "attributes" => nested(&c.attributes, rest),
                "metadata" => nested(&c.metadata, rest),
                _ => Value::Null,
            }
        }
        Val::Elem(r @ ElemRef::Prop(n)) => {
            let Some(l) = ctx.prop(*n)? else {
                return Ok(Value::Null);
            };
            match field {
                "id" => Value::String(r.id_string()),
                "subject" => Value::String(l.subject.id_string()),
                "predicate" => Value::String(l.predicate.clone()),
                "object" => Value::String(l.object.id_string()),
                "attributes" => nested(&l.attributes, rest),
                "metadata" => nested(&l.metadata, rest),
                _ => Value::Null,
            }
        }
    })
}

/// Only `true` passes a FILTER.
pub fn truthy(v: &Value) -> bool {
    matches!(v, Value::Bool(true))
}

/// JSON equality, with numbers compared numerically (`1 == 1.0`).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => num_cmp(x, y) == Some(Ordering::Equal),
        _ => a == b,
    }
}

fn num_cmp(x: &serde_json::Number, y: &serde_json::Number) -> Option<Ordering> {
    if let (Some(a), Some(b)) = (x.as_i64(), y.as_i64()) {
        return Some(a.cmp(&b));
    }
    if let (Some(a), Some(b)) = (x.as_u64(), y.as_u64()) {
        return Some(a.cmp(&b));
    }
    x.as_f64()?.partial_cmp(&y.as_f64()?)
}

/// `<`-family comparison: numbers or strings only.
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => num_cmp(x, y),
        (Value::String(x), Value::String(y)) => Some(x.as_str().cmp(y.as_str())),
        _ => None,
    }
}

fn type_rank(v: &Value) -> u8 {
    match v {
        Value::Number(_) => 0,
        Value::String(_) => 1,
        Value::Bool(_) => 2,
        Value::Array(_) => 3,
        Value::Object(_) => 4,
        Value::Null => 5,
    }
}

/// A total order for sorting: numbers, then strings, booleans, arrays, objects; `null`
/// last. Values of one kind compare naturally (arrays/objects by their JSON text).
pub fn sort_cmp(a: &Value, b: &Value) -> Ordering {
    let (ra, rb) = (type_rank(a), type_rank(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => num_cmp(x, y).unwrap_or(Ordering::Equal),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Null, Value::Null) => Ordering::Equal,
        _ => a.to_string().cmp(&b.to_string()),
    }
}

fn regex(ctx: &Ctx, pattern: &str) -> Result<Rc<regex::Regex>, KipError> {
    if let Some(r) = ctx.regexes.borrow().get(pattern) {
        return Ok(r.clone());
    }
    let r = regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .dfa_size_limit(1 << 20)
        .build()
        .map_err(|e| {
            KipError::new(ErrorCode::InvalidSyntax, format!("invalid REGEX pattern {pattern:?}: {e}"))
                .with_hint("REGEX uses Rust regex syntax (no look-around or backreferences); escape special characters with \\\\")
        })?;
    let r = Rc::new(r);
    ctx.regexes
        .borrow_mut()
        .insert(pattern.to_string(), r.clone());
    Ok(r)
}

/// Evaluates a FILTER expression to a JSON value.
pub fn eval(ctx: &Ctx, e: &Expr, row: &Row) -> Result<Value, KipError> {
    Ok(match e {
        Expr::Value(v) => crate::kml::json(v)?,
        Expr::Path(p) => path_value(ctx, p, row, false)?,
        Expr::Not(inner, _) => Value::Bool(!truthy(&eval(ctx, inner, row)?)),
        Expr::Binary {
            op: op @ (BinaryOp::And | BinaryOp::Or),
            ..
        } => {
            // `a || b || c` parses left-deep: walk its spine in a loop, not by recursion,
            // so a long flat chain costs no stack. Operands still run left to right
            // with short-circuit.
            let decisive = *op == BinaryOp::Or;
            let mut rights = Vec::new();
            let mut leftmost = e;
            while let Expr::Binary {
                op: o, left, right, ..
            } = leftmost
            {
                if o != op {
                    break;
                }
                rights.push(&**right);
                leftmost = left;
            }
            if truthy(&eval(ctx, leftmost, row)?) == decisive {
                return Ok(Value::Bool(decisive));
            }
            for r in rights.iter().rev() {
                if truthy(&eval(ctx, r, row)?) == decisive {
                    return Ok(Value::Bool(decisive));
                }
            }
            Value::Bool(!decisive)
        }
        Expr::Binary {
            op, left, right, ..
        } => {
            let l = eval(ctx, left, row)?;
            let r = eval(ctx, right, row)?;
            Value::Bool(match op {
                BinaryOp::Eq => json_eq(&l, &r),
                BinaryOp::Ne => !json_eq(&l, &r),
                BinaryOp::Lt => compare(&l, &r) == Some(Ordering::Less),
                BinaryOp::Le => {
                    matches!(compare(&l, &r), Some(Ordering::Less | Ordering::Equal))
                }
                BinaryOp::Gt => compare(&l, &r) == Some(Ordering::Greater),
                BinaryOp::Ge => {
                    matches!(compare(&l, &r), Some(Ordering::Greater | Ordering::Equal))
                }
                BinaryOp::And | BinaryOp::Or => false,
            })
        }
        Expr::Call { func, args, .. } => {
            let vals = args
                .iter()
                .map(|a| eval(ctx, a, row))
                .collect::<Result<Vec<_>, _>>()?;
            let arg = |i: usize| vals.get(i).cloned().unwrap_or(Value::Null);
            Value::Bool(match func {
                Function::IsNull => arg(0).is_null(),
                Function::IsNotNull => !arg(0).is_null(),
                Function::In => match arg(1) {
                    Value::Array(items) => {
                        let x = arg(0);
                        !matches!(x, Value::Array(_) | Value::Object(_))
                            && items.iter().any(|i| json_eq(&x, i))
                    }
                    _ => false,
                },
                Function::Contains
                | Function::StartsWith
                | Function::EndsWith
                | Function::Regex => {
                    match (arg(0), arg(1)) {
                        (Value::String(s), Value::String(t)) => match func {
                            Function::Contains => s.contains(t.as_str()),
                            Function::StartsWith => s.starts_with(t.as_str()),
                            Function::EndsWith => s.ends_with(t.as_str()),
                            _ => regex(ctx, &t)?.is_match(&s),
                        },
                        (_, Value::String(t)) if *func == Function::Regex => {
                            // Validate the pattern even when the value is not a string.
                            regex(ctx, &t)?;
                            false
                        }
                        _ => false,
                    }
                }
            })
        }
    })
}
