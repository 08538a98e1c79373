//! The registered functions of KIP 2.0 expressions: the FILTER baseline (§44.2) and
//! the deterministic update expressions (§59). A function of nulls is null where the
//! answer would otherwise be a guess.

use super::error::{Code, V2Error, V2Result};
use super::model::kind_word;
use crate::store::ElementId;
use serde_json::{json, Value};

/// The function names, for hints.
pub const NAMES: &[&str] = &[
    "IN",
    "CONTAINS",
    "STARTS_WITH",
    "ENDS_WITH",
    "REGEX",
    "IS_NULL",
    "IS_NOT_NULL",
    "IS_LITERAL",
    "IS_ELEMENT",
    "IS_KIND",
    "LITERAL_TYPE",
    "ADD",
    "SUB",
    "MUL",
    "DIV",
    "CLAMP",
    "COALESCE",
    "MIN",
    "MAX",
];

fn arity(name: &str, args: &[Value], n: usize) -> V2Result<()> {
    if args.len() != n {
        return Err(V2Error::new(
            Code::InvalidSyntax,
            format!("{name} takes {n} argument(s), not {}", args.len()),
        )
        .with_hint(format!("write {name}({})", vec!["x"; n].join(", "))));
    }
    Ok(())
}

fn element(v: &Value) -> Option<ElementId> {
    v.as_str().and_then(ElementId::parse_id)
}

fn number(v: &Value) -> Option<f64> {
    v.as_f64()
}

fn num(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

fn arith(name: &str, args: &[Value], f: impl Fn(f64, f64) -> Option<f64>) -> V2Result<Value> {
    if args.len() < 2 {
        return Err(V2Error::new(
            Code::InvalidSyntax,
            format!("{name} takes at least 2 arguments"),
        )
        .with_hint(format!("write {name}(a, b)")));
    }
    let mut acc = match number(&args[0]) {
        Some(x) => x,
        None => return Ok(Value::Null),
    };
    for a in &args[1..] {
        let Some(x) = number(a) else {
            return Ok(Value::Null);
        };
        acc = match f(acc, x) {
            Some(v) if v.is_finite() => v,
            _ => return Ok(Value::Null),
        };
    }
    Ok(num(acc))
}

/// Calls the function `name` (case-insensitive) on evaluated arguments.
pub fn call(name: &str, args: &[Value]) -> V2Result<Value> {
    let upper = name.to_ascii_uppercase();
    let s = |v: &Value| v.as_str().map(str::to_string);
    Ok(match upper.as_str() {
        "IN" => {
            arity(&upper, args, 2)?;
            match &args[1] {
                Value::Array(items) => json!(items.iter().any(|i| super::eval::same(i, &args[0]))),
                _ => Value::Null,
            }
        }
        "CONTAINS" => {
            arity(&upper, args, 2)?;
            match (&args[0], &args[1]) {
                (Value::String(a), Value::String(b)) => json!(a.contains(b.as_str())),
                (Value::Array(items), x) => json!(items.iter().any(|i| super::eval::same(i, x))),
                _ => Value::Null,
            }
        }
        "STARTS_WITH" | "ENDS_WITH" => {
            arity(&upper, args, 2)?;
            match (s(&args[0]), s(&args[1])) {
                (Some(a), Some(b)) if upper == "STARTS_WITH" => json!(a.starts_with(&b)),
                (Some(a), Some(b)) => json!(a.ends_with(&b)),
                _ => Value::Null,
            }
        }
        "REGEX" => {
            arity(&upper, args, 2)?;
            match (s(&args[0]), s(&args[1])) {
                (Some(a), Some(p)) => {
                    let re = regex::RegexBuilder::new(&p)
                        .size_limit(1 << 20)
                        .build()
                        .map_err(|e| {
                            V2Error::new(Code::TypeMismatch, format!("REGEX pattern: {e}"))
                                .with_hint("give a valid regular expression (Rust regex syntax)")
                        })?;
                    json!(re.is_match(&a))
                }
                _ => Value::Null,
            }
        }
        "IS_NULL" => {
            arity(&upper, args, 1)?;
            json!(args[0].is_null())
        }
        "IS_NOT_NULL" => {
            arity(&upper, args, 1)?;
            json!(!args[0].is_null())
        }
        "IS_ELEMENT" => {
            arity(&upper, args, 1)?;
            json!(element(&args[0]).is_some())
        }
        "IS_LITERAL" => {
            arity(&upper, args, 1)?;
            json!(!args[0].is_null() && element(&args[0]).is_none())
        }
        "IS_KIND" => {
            arity(&upper, args, 2)?;
            match (element(&args[0]), s(&args[1])) {
                (Some(id), Some(k)) => json!(kind_word(id.kind).eq_ignore_ascii_case(&k)),
                (None, Some(_)) => json!(false),
                _ => Value::Null,
            }
        }
        "LITERAL_TYPE" => {
            arity(&upper, args, 1)?;
            match &args[0] {
                Value::Null => Value::Null,
                v if element(v).is_some() => Value::Null,
                Value::String(_) => json!("string"),
                Value::Number(n) if n.is_i64() || n.is_u64() => json!("integer"),
                Value::Number(_) => json!("number"),
                Value::Bool(_) => json!("boolean"),
                Value::Array(_) => json!("array"),
                Value::Object(_) => json!("object"),
            }
        }
        "ADD" => arith(&upper, args, |a, b| Some(a + b))?,
        "SUB" => arith(&upper, args, |a, b| Some(a - b))?,
        "MUL" => arith(&upper, args, |a, b| Some(a * b))?,
        "DIV" => arith(
            &upper,
            args,
            |a, b| if b == 0.0 { None } else { Some(a / b) },
        )?,
        "MIN" => arith(&upper, args, |a, b| Some(a.min(b)))?,
        "MAX" => arith(&upper, args, |a, b| Some(a.max(b)))?,
        "CLAMP" => {
            arity(&upper, args, 3)?;
            match (number(&args[0]), number(&args[1]), number(&args[2])) {
                (Some(x), Some(lo), Some(hi)) if lo <= hi => num(x.clamp(lo, hi)),
                _ => Value::Null,
            }
        }
        "COALESCE" => args
            .iter()
            .find(|a| !a.is_null())
            .cloned()
            .unwrap_or(Value::Null),
        _ => {
            return Err(V2Error::new(
                Code::InvalidSyntax,
                format!("{name} is not a registered function"),
            )
            .with_hint(format!("the functions are {}", NAMES.join(", ")))
            .with_detail("function", name))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_answer_null_rather_than_guess() {
        assert_eq!(call("MUL", &[json!(0.8), json!(0.5)]).unwrap(), json!(0.4));
        assert_eq!(
            call("mul", &[json!(null), json!(0.5)]).unwrap(),
            Value::Null
        );
        assert_eq!(
            call("IN", &[json!(1), json!([1.0, 2])]).unwrap(),
            json!(true)
        );
        assert_eq!(
            call("IS_KIND", &[json!("A:3"), json!("assertion")]).unwrap(),
            json!(true)
        );
        assert_eq!(call("LITERAL_TYPE", &[json!(2)]).unwrap(), json!("integer"));
        assert_eq!(
            call("CLAMP", &[json!(1.5), json!(0), json!(1)]).unwrap(),
            json!(1)
        );
        assert_eq!(call("NOPE", &[]).unwrap_err().code, Code::InvalidSyntax);
    }
}
