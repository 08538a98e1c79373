//! `UPDATE ?x SET ATTRIBUTES {...} SET METADATA {...} WHERE {...} [LIMIT n]` (RC11
//! §4.3): every element bound to `?x` is changed once, in one transaction, with values
//! or update expressions (`ADD`, `MUL`, `CLAMP`, `COALESCE`) computed from that
//! element's own state. It never creates anything.
//!
//! Choices (docs/semantics.md): the elements are taken in the matcher's natural order
//! (the order FIND returns them without ORDER BY; deterministic for a given store
//! state), the first `LIMIT` of them; an UPDATE that would change more than
//! [`MAX_UPDATE`] elements is refused (`KIP_4002`) before anything is written; a
//! protected structure among the targets (a meta-type, core domain or Genesis link:
//! [`schema::check_mutation`]) refuses the whole statement (`KIP_3004`); `$self` and
//! `$system` may be matched, and each attribute the statement changes is checked
//! (their `core_directives` never change). Arithmetic stays in integers while both operands are integers (and
//! the result fits), otherwise it is done in 64-bit floating point; a result that is
//! not a finite number is `null`, and an expression that yields `null` leaves its key
//! as it was.

use super::primitives::{refuse_reserved, Privilege, Writer};
use crate::kql::exec::Val;
use crate::kql::result::solutions_up_to;
use crate::kql::QueryLimits;
use crate::schema;
use crate::store::{ElemRef, GraphWrite};
use kip_lang::ast::{Update, UpdateFunc, UpdateObject, UpdateValue, ValueKind};
use kip_lang::{ErrorCode, KipError};
use serde_json::{json, Map, Number, Value};

/// The most elements one UPDATE may change (DECISIONS.md item 30).
pub const MAX_UPDATE: usize = 100_000;

/// Executes an UPDATE inside the caller's write transaction; returns
/// `{"updated": n, "matched": m}`.
pub fn update(g: &mut dyn GraphWrite, u: &Update, limits: &QueryLimits) -> Result<Value, KipError> {
    if let Some(m) = &u.set_metadata {
        refuse_reserved(m.entries.iter().map(|(k, _)| k))?;
    }
    let var = &u.target.name;
    // The first LIMIT targets; without LIMIT, one more than the cap shows an overflow.
    let max = match u.limit.as_ref().and_then(|l| l.literal()) {
        Some(n) => usize::try_from(*n).unwrap_or(usize::MAX),
        None => MAX_UPDATE + 1,
    };
    let targets = solutions_up_to(&*g, &u.where_clauses, var, limits, max)?;
    if targets.len() > MAX_UPDATE {
        return Err(KipError::new(
            ErrorCode::ResourceExhausted,
            format!(
                "the UPDATE matches {} elements, more than the {MAX_UPDATE} one statement may change",
                targets.len()
            ),
        )
        .with_hint("add LIMIT and a marker: SET METADATA { swept_at: :cycle } with FILTER(IS_NULL(?x.metadata.swept_at) || ?x.metadata.swept_at < :cycle) in WHERE, then repeat until updated < LIMIT"));
    }
    let matched = targets.len();
    let mut w = Writer::new(g, Privilege::Agent);
    // Every target is checked before anything changes.
    let mut elems = Vec::with_capacity(targets.len());
    for t in targets {
        match t {
            Val::Elem(r) => {
                check_not_protected(&mut w, r)?;
                elems.push(r);
            }
            Val::Pred(_) => {
                return Err(KipError::new(
                    ErrorCode::TypeMismatch,
                    format!("?{var} is bound to a predicate name, not to an element"),
                )
                .with_hint("UPDATE a variable bound to concepts ({type: ...}) or to links (?l (?s, \"p\", ?o))"))
            }
        }
    }
    let mut updated = 0u64;
    for r in elems {
        let changed = match r {
            ElemRef::Concept(n) => {
                let Some(old) = w.graph().concept(n)? else {
                    continue;
                };
                let mut rec = old.clone();
                (rec.attributes, rec.metadata) = apply_both(u, &old.attributes, &old.metadata)?;
                w.put_concept(n, Some(&old), &mut rec)?
            }
            ElemRef::Prop(n) => {
                let Some(old) = w.graph().prop(n)? else {
                    continue;
                };
                let mut rec = old.clone();
                (rec.attributes, rec.metadata) = apply_both(u, &old.attributes, &old.metadata)?;
                w.put_link(n, &old, &mut rec)?
            }
        };
        if changed {
            updated += 1;
        }
    }
    Ok(json!({"updated": updated, "matched": matched}))
}

/// `KIP_3004` when `r` is a protected structure (the one rule: [`schema::check_mutation`]).
fn check_not_protected(w: &mut Writer, r: ElemRef) -> Result<(), KipError> {
    match r {
        ElemRef::Concept(n) => {
            if let Some(c) = w.graph().concept(n)? {
                schema::check_mutation(schema::Mutation::UpdateConcept(&c))?;
            }
        }
        ElemRef::Prop(n) => {
            if let Some(p) = w.graph().prop(n)? {
                if let (ElemRef::Concept(s), ElemRef::Concept(o)) = (p.subject, p.object) {
                    if let (Some(s), Some(o)) = (w.graph().concept(s)?, w.graph().concept(o)?) {
                        schema::check_mutation(schema::Mutation::UpdateLink {
                            subject: &s,
                            predicate: &p.predicate,
                            object: &o,
                        })?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// An element's attributes or metadata.
type Fields = Map<String, Value>;

/// Both SET objects of `u` applied to an element's attributes and metadata: the new
/// attributes and metadata, every value computed from the state before the statement.
fn apply_both(
    u: &Update,
    attrs: &Map<String, Value>,
    meta: &Map<String, Value>,
) -> Result<(Fields, Fields), KipError> {
    let (mut new_attrs, mut new_meta) = (attrs.clone(), meta.clone());
    apply(&u.set_attributes, attrs, meta, &mut new_attrs)?;
    apply(&u.set_metadata, attrs, meta, &mut new_meta)?;
    Ok((new_attrs, new_meta))
}

/// Applies one SET object to `out` (shallow merge), each value computed from the
/// element's state before the statement.
fn apply(
    set: &Option<UpdateObject>,
    attrs: &Map<String, Value>,
    meta: &Map<String, Value>,
    out: &mut Map<String, Value>,
) -> Result<(), KipError> {
    let Some(set) = set else { return Ok(()) };
    for (key, v) in &set.entries {
        let value = match v {
            // A plain value is written as it is (null included), as in UPSERT.
            UpdateValue::Value(x) => x.to_json().map_err(|p| super::unbound(&p.name))?,
            _ => match eval(v, attrs, meta) {
                Some(x) => x,
                None => continue, // null: this key is skipped for this element
            },
        };
        out.insert(key.clone(), value);
    }
    Ok(())
}

/// The value of an operand or expression; `None` is `null`.
fn eval(v: &UpdateValue, attrs: &Map<String, Value>, meta: &Map<String, Value>) -> Option<Value> {
    match v {
        UpdateValue::Value(x) => match &x.kind {
            ValueKind::Null => None,
            _ => x.to_json().ok().filter(|j| !j.is_null()),
        },
        UpdateValue::Path(p) => {
            let map = match p.path.first().map(String::as_str) {
                Some("attributes") => attrs,
                Some("metadata") => meta,
                _ => return None,
            };
            p.path
                .get(1)
                .and_then(|k| map.get(k))
                .filter(|j| !j.is_null())
                .cloned()
        }
        UpdateValue::Call { func, args, .. } => {
            let arg = |i: usize| args.get(i).and_then(|a| eval(a, attrs, meta));
            match func {
                UpdateFunc::Coalesce => arg(0).or_else(|| arg(1)),
                UpdateFunc::Add => arith(arg(0)?, arg(1)?, i64::checked_add, |a, b| a + b),
                UpdateFunc::Mul => arith(arg(0)?, arg(1)?, i64::checked_mul, |a, b| a * b),
                UpdateFunc::Clamp => {
                    let (x, lo, hi) = (arg(0)?, arg(1)?, arg(2)?);
                    let (xf, lof, hif) = (x.as_f64()?, lo.as_f64()?, hi.as_f64()?);
                    if lof > hif {
                        return None;
                    }
                    if xf < lof {
                        Some(lo)
                    } else if xf > hif {
                        Some(hi)
                    } else {
                        Some(x)
                    }
                }
            }
        }
    }
}

fn arith(
    a: Value,
    b: Value,
    int: fn(i64, i64) -> Option<i64>,
    float: fn(f64, f64) -> f64,
) -> Option<Value> {
    let (Value::Number(a), Value::Number(b)) = (a, b) else {
        return None;
    };
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        if let Some(r) = int(x, y) {
            return Some(Value::from(r));
        }
    }
    Number::from_f64(float(a.as_f64()?, b.as_f64()?)).map(Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kip_lang::ast::Command;

    fn set_of(src: &str) -> UpdateObject {
        let cmd = kip_lang::parse_command(&format!(
            "UPDATE ?x SET ATTRIBUTES {src} WHERE {{ ?x {{type: \"T\"}} }}"
        ))
        .expect("parses");
        let Command::Update(u) = cmd else {
            panic!("not an UPDATE")
        };
        u.set_attributes.expect("SET ATTRIBUTES")
    }

    fn run(src: &str, attrs: Value) -> Map<String, Value> {
        let attrs = attrs.as_object().cloned().unwrap_or_default();
        let mut out = attrs.clone();
        apply(&Some(set_of(src)), &attrs, &Map::new(), &mut out).expect("bound");
        out
    }

    #[test]
    fn expressions_follow_the_spec() {
        let r = run("{ n: ADD(COALESCE(?x.attributes.n, 0), 1) }", json!({}));
        assert_eq!(
            r["n"],
            json!(1),
            "a missing counter starts from the default"
        );
        let r = run(
            "{ n: ADD(COALESCE(?x.attributes.n, 0), 1) }",
            json!({"n": 4}),
        );
        assert_eq!(r["n"], json!(5), "integers stay integers");
        let r = run(
            "{ s: CLAMP(MUL(COALESCE(?x.attributes.s, 0.7), 0.5), 0.0, 1.0) }",
            json!({}),
        );
        assert_eq!(r["s"], json!(0.35));
        let r = run(
            "{ s: CLAMP(ADD(?x.attributes.s, 1), 0, 1) }",
            json!({"s": 0.5}),
        );
        assert_eq!(r["s"], json!(1), "clamped to the upper bound");
        let r = run(
            "{ s: CLAMP(ADD(?x.attributes.s, -1), 0, 1) }",
            json!({"s": 0.5}),
        );
        assert_eq!(r["s"], json!(0), "clamped to the lower bound");
        // A null operand outside COALESCE, or a non-number, skips the key.
        let r = run("{ n: ADD(?x.attributes.n, 1), m: 2 }", json!({}));
        assert!(!r.contains_key("n"), "{r:?}");
        assert_eq!(r["m"], json!(2), "the other keys still update");
        let r = run("{ n: MUL(?x.attributes.n, 2) }", json!({"n": "three"}));
        assert_eq!(
            r["n"],
            json!("three"),
            "a non-number leaves the key as it was"
        );
        // Overflowing integers fall back to floating point.
        let r = run("{ n: MUL(?x.attributes.n, 4) }", json!({"n": i64::MAX}));
        assert!(r["n"].as_f64().is_some_and(|f| f > 3.0e19), "{r:?}");
        // A plain null is written, as in UPSERT.
        let r = run("{ n: null }", json!({"n": 1}));
        assert_eq!(r["n"], Value::Null);
    }
}
