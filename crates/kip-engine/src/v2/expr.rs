//! KIP 2.0 expressions (Specification §44.1-44.2, §59): field access on bound
//! elements (a missing field reads as null), values, three-valued `&&` / `||` / `!`,
//! and comparisons that are null between unlike types.

use super::error::{Code, V2Error, V2Result};
use super::eval::{bound_json, same, unsupported, Bound, Ctx, Row};
use kip_lang::v2::ast::{BinOp, Expr, Value as AstValue};
use serde_json::{json, Value};

/// The value of `?var.steps` in `row` (null when absent: a missing attribute reads as
/// null, not as an error).
pub fn field(ctx: &Ctx, row: &Row, var: &str, steps: &[String]) -> V2Result<Value> {
    let base = match row.get(var) {
        None => {
            return Err(V2Error::new(
                Code::InvalidSyntax,
                format!("?{var} is not bound by the WHERE block"),
            )
            .with_hint(format!("bind ?{var} in a pattern before using it")))
        }
        Some(Bound::Val(v)) => std::rc::Rc::new(v.clone()),
        Some(Bound::Elem(id)) => match ctx.view(*id)? {
            Some(v) => v,
            None => return Ok(Value::Null),
        },
    };
    if steps.first().map(String::as_str) == Some("governance")
        && steps.get(1).map(String::as_str) == Some("authority_lineage")
    {
        return Err(unsupported("derived governance fields (authority_lineage)"));
    }
    let mut cur: &Value = &base;
    for s in steps {
        cur = match cur {
            Value::Object(m) => match m.get(s) {
                Some(v) => v,
                None => return Ok(Value::Null),
            },
            Value::Array(a) => match s.parse::<usize>().ok().and_then(|i| a.get(i)) {
                Some(v) => v,
                None => return Ok(Value::Null),
            },
            _ => return Ok(Value::Null),
        };
    }
    Ok(cur.clone())
}

/// A value expression's value in `row`.
pub fn value(ctx: &Ctx, row: &Row, v: &AstValue) -> V2Result<Value> {
    Ok(match v {
        AstValue::Param(p) => ctx.param(p)?,
        AstValue::Literal(l) => l.clone(),
        AstValue::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| value(ctx, row, i))
                .collect::<V2Result<_>>()?,
        ),
        AstValue::Object(members) => {
            let mut o = serde_json::Map::new();
            for (k, x) in members {
                o.insert(k.clone(), value(ctx, row, x)?);
            }
            Value::Object(o)
        }
        AstValue::Field(fa) => field(ctx, row, &fa.var, &fa.steps)?,
        AstValue::Call(c) => {
            let args = c
                .args
                .iter()
                .map(|a| eval(ctx, row, a))
                .collect::<V2Result<Vec<_>>>()?;
            super::functions::call(&c.name, &args)?
        }
    })
}

/// A value written by a mutation: as [`value`], except that a bare handle or variable
/// (`proposition: ?p`) is a reference to its element (its id), not the element's object.
pub fn write_value(ctx: &Ctx, row: &Row, v: &AstValue) -> V2Result<Value> {
    Ok(match v {
        AstValue::Field(fa) if fa.steps.is_empty() => match row.get(&fa.var) {
            Some(b) => bound_json(b),
            None => field(ctx, row, &fa.var, &[])?,
        },
        AstValue::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| write_value(ctx, row, i))
                .collect::<V2Result<_>>()?,
        ),
        AstValue::Object(members) => {
            let mut o = serde_json::Map::new();
            for (k, x) in members {
                o.insert(k.clone(), write_value(ctx, row, x)?);
            }
            Value::Object(o)
        }
        other => value(ctx, row, other)?,
    })
}

/// Orders two values of one comparable type; `None` for unlike types (or nulls).
pub fn compare(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64()?.partial_cmp(&y.as_f64()?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// An expression's value in `row`: comparisons between unlike types are null (they
/// decide nothing), `&&` / `||` / `!` are three-valued.
pub fn eval(ctx: &Ctx, row: &Row, e: &Expr) -> V2Result<Value> {
    Ok(match e {
        Expr::Value(v) => value(ctx, row, v)?,
        Expr::Group(inner) => eval(ctx, row, inner)?,
        Expr::Not(inner) => match eval(ctx, row, inner)? {
            Value::Bool(b) => Value::Bool(!b),
            _ => Value::Null,
        },
        Expr::Neg(inner) => match eval(ctx, row, inner)?.as_f64() {
            Some(x) => json!(-x),
            None => Value::Null,
        },
        Expr::Binary(op, l, r) => {
            let a = eval(ctx, row, l)?;
            match op {
                BinOp::And => {
                    if a == Value::Bool(false) {
                        return Ok(Value::Bool(false));
                    }
                    let b = eval(ctx, row, r)?;
                    match (a, b) {
                        (_, Value::Bool(false)) => Value::Bool(false),
                        (Value::Bool(true), Value::Bool(true)) => Value::Bool(true),
                        _ => Value::Null,
                    }
                }
                BinOp::Or => {
                    if a == Value::Bool(true) {
                        return Ok(Value::Bool(true));
                    }
                    let b = eval(ctx, row, r)?;
                    match (a, b) {
                        (_, Value::Bool(true)) => Value::Bool(true),
                        (Value::Bool(false), Value::Bool(false)) => Value::Bool(false),
                        _ => Value::Null,
                    }
                }
                _ => {
                    let b = eval(ctx, row, r)?;
                    comparison(*op, &a, &b)
                }
            }
        }
    })
}

fn comparison(op: BinOp, a: &Value, b: &Value) -> Value {
    use std::cmp::Ordering::*;
    match op {
        BinOp::Eq | BinOp::Ne => {
            let like = std::mem::discriminant(a) == std::mem::discriminant(b);
            if a.is_null() || b.is_null() {
                // Comparing with null asks whether the value is absent.
                let eq = a.is_null() && b.is_null();
                return Value::Bool(if op == BinOp::Eq { eq } else { !eq });
            }
            if !like {
                return Value::Null;
            }
            let eq = same(a, b);
            Value::Bool(if op == BinOp::Eq { eq } else { !eq })
        }
        _ => match compare(a, b) {
            None => Value::Null,
            Some(o) => Value::Bool(match op {
                BinOp::Lt => o == Less,
                BinOp::Gt => o == Greater,
                BinOp::Le => o != Greater,
                BinOp::Ge => o != Less,
                _ => false,
            }),
        },
    }
}
