//! KML execution: `UPSERT` ([`upsert`]) and `DELETE` ([`delete`]), each run inside one
//! write transaction by the caller, so any error leaves the graph untouched.

pub mod delete;
pub mod merge;
pub mod primitives;
pub mod update;
pub mod upsert;

use kip_lang::ast::{ObjectExpr, Slot, StrSlot, ValueExpr};
use kip_lang::{ErrorCode, KipError};
use serde_json::{Map, Value};

/// The literal of a bound slot (binding has replaced every placeholder).
pub(crate) fn text(s: &StrSlot) -> Result<&str, KipError> {
    match s {
        Slot::Literal(v, _) => Ok(v.as_str()),
        Slot::Param(p) => Err(unbound(&p.name)),
    }
}

pub(crate) fn unbound(name: &str) -> KipError {
    KipError::new(
        ErrorCode::ReferenceError,
        format!("missing parameter :{name}"),
    )
    .with_hint(format!("add \"{name}\" to the `parameters` object"))
}

/// The JSON of a bound value.
pub(crate) fn json(v: &ValueExpr) -> Result<Value, KipError> {
    v.to_json().map_err(|p| unbound(&p.name))
}

/// The JSON object of an optional object literal (empty when absent).
pub(crate) fn object(o: &Option<ObjectExpr>) -> Result<Map<String, Value>, KipError> {
    let mut m = Map::new();
    if let Some(o) = o {
        for (k, v) in &o.entries {
            m.insert(k.clone(), json(v)?);
        }
    }
    Ok(m)
}

/// Shallow merge: every key of `over` replaces the key in `base` (null included).
pub(crate) fn merge(base: &Map<String, Value>, over: &Map<String, Value>) -> Map<String, Value> {
    let mut out = base.clone();
    for (k, v) in over {
        out.insert(k.clone(), v.clone());
    }
    out
}
