//! Checking a concept's attributes and facets against the active Schema Environment
//! (Specification §10.4, §18.2, §20): declared fields typed and in range, enums held,
//! required attributes present at creation, closed facets taking only their members.

use super::error::{Code, V2Error, V2Result};
use super::schema_env::Definition;
use serde_json::{Map, Value};

fn type_ok(spec: &Value, v: &Value) -> bool {
    let one = |t: &str| match t {
        "string" | "timestamp" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "null" => v.is_null(),
        _ => true,
    };
    match spec {
        Value::String(t) => one(t),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(one),
        _ => true,
    }
}

fn check_value(what: &str, field: &str, spec: &Value, v: &Value) -> V2Result<()> {
    if v.is_null() {
        return Ok(());
    }
    if let Some(t) = spec.get("type") {
        if !type_ok(t, v) {
            return Err(V2Error::new(
                Code::TypeMismatch,
                format!("{what} \"{field}\" takes {t}, not {v}"),
            )
            .with_detail("field", field));
        }
    }
    if let Some(allowed) = spec.get("enum").and_then(Value::as_array) {
        if !allowed.contains(v) {
            return Err(V2Error::new(
                Code::ConstraintViolation,
                format!(
                    "{what} \"{field}\" is one of {}, not {v}",
                    Value::Array(allowed.clone())
                ),
            )
            .with_detail("field", field));
        }
    }
    let x = v.as_f64();
    let below = spec
        .get("minimum")
        .and_then(Value::as_f64)
        .zip(x)
        .is_some_and(|(m, x)| x < m);
    let above = spec
        .get("maximum")
        .and_then(Value::as_f64)
        .zip(x)
        .is_some_and(|(m, x)| x > m);
    if below || above {
        return Err(V2Error::new(
            Code::ConstraintViolation,
            format!(
                "{what} \"{field}\" is out of its range [{}, {}]: {v}",
                spec.get("minimum").cloned().unwrap_or(Value::Null),
                spec.get("maximum").cloned().unwrap_or(Value::Null)
            ),
        )
        .with_detail("field", field));
    }
    Ok(())
}

/// Attributes against the type's definition: declared ones typed and in range, required
/// ones present at creation; an open type takes others too.
pub(super) fn check_attributes(
    ty: &Definition,
    attrs: &Map<String, Value>,
    creating: bool,
) -> V2Result<()> {
    let Some(decl) = ty.body.get("attributes") else {
        return Ok(());
    };
    let fields = decl.get("fields").and_then(Value::as_object);
    let open = decl.get("open").and_then(Value::as_bool).unwrap_or(true);
    for (k, v) in attrs {
        match fields.and_then(|f| f.get(k)) {
            Some(spec) => check_value("attribute", k, spec, v)?,
            None if open => {}
            None => {
                return Err(V2Error::new(
                    Code::SchemaFieldNotFound,
                    format!("{} declares no attribute \"{k}\"", ty.local),
                )
                .with_detail("field", k.as_str()))
            }
        }
    }
    if creating {
        for (k, spec) in fields.into_iter().flatten() {
            let required = spec
                .get("required")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if required && attrs.get(k).is_none_or(Value::is_null) {
                return Err(V2Error::new(
                    Code::ConstraintViolation,
                    format!("a {} requires the attribute \"{k}\"", ty.local),
                )
                .with_hint(format!("SET ATTRIBUTES {{ {k}: ... }}"))
                .with_detail("field", k.as_str()));
            }
        }
    }
    Ok(())
}

/// Facet members against the facet's definition (a closed facet takes only its fields).
pub(super) fn check_facet(def: &Definition, m: &Map<String, Value>) -> V2Result<()> {
    let fields = def.body.get("fields").and_then(Value::as_object);
    let closed = def
        .body
        .get("closed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    for (k, v) in m {
        match fields.and_then(|f| f.get(k)) {
            Some(spec) => check_value("facet member", k, spec, v)?,
            None if closed => {
                return Err(V2Error::new(
                    Code::SchemaFieldNotFound,
                    format!("the facet {} has no member \"{k}\"", def.local),
                )
                .with_hint(format!(
                    "its members are {}",
                    fields
                        .map(|f| f.keys().cloned().collect::<Vec<_>>().join(", "))
                        .unwrap_or_default()
                ))
                .with_detail("field", k.as_str()))
            }
            None => {}
        }
    }
    Ok(())
}
