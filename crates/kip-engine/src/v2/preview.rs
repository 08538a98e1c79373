//! `VALIDATE` and `PREVIEW` (Specification §69): a command or artifact checked, or a
//! write's effect shown, without committing anything. A KML text runs in a write
//! transaction that is always aborted, so every check (schema, references,
//! identities, preconditions) answers as the real write would.

use super::error::{Code, V2Error, V2Result};
use super::eval::Ctx;
use super::{mutate, packages, query};
use crate::nexus::Nexus;
use kip_lang::v2::ast::StatementKind;
use serde_json::{json, Value};

type Params<'a> = &'a dyn Fn(&str) -> Option<Value>;

fn text(v: &Value, what: &str) -> V2Result<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        other => Err(V2Error::new(
            Code::TypeMismatch,
            format!("{what} takes the command text as a string, not {other}"),
        )
        .with_hint(format!("{what} :text with the text in \"parameters\""))),
    }
}

/// Runs `text` (KQL or KML, as `want` says) without committing: its result, or the
/// error the real run would give.
fn dry(nexus: &Nexus, text: &str, want: &str, params: Params) -> V2Result<Value> {
    let st = kip_lang::v2::parse(text).map_err(|e| V2Error::from_kip(&e))?;
    let max_rows = nexus.limits().max_rows;
    let mut failure = None;
    match (&st.kind, want) {
        (StatementKind::Query(q), "KQL") => {
            let r = nexus.read(|g| {
                query::find(&Ctx::new(g, params, max_rows), q).map_err(|e| {
                    failure = Some(e);
                    kip_lang::KipError::internal("invalid")
                })
            });
            r.map_err(|e| failure.unwrap_or_else(|| V2Error::from_kip(&e)))
        }
        (StatementKind::Mutation(m), "KML") => {
            // A read-only caller may preview: the transaction is always aborted
            // (KIP2-META-024).
            let r = nexus.write(
                |w| {
                    mutate::run(w, params, m, max_rows).map_err(|e| {
                        failure = Some(e);
                        kip_lang::KipError::internal("invalid")
                    })
                },
                true,
            );
            r.map_err(|e| failure.unwrap_or_else(|| V2Error::from_kip(&e)))
        }
        (kind, _) => Err(V2Error::new(
            Code::LanguageMismatch,
            format!("the text is {}, not {want}", kind.language()),
        )),
    }
}

/// `VALIDATE KQL|KML|SCHEMA PACKAGE v`: `{valid, errors}` (the operation succeeds; the
/// verdict is the result).
pub fn validate(nexus: &Nexus, target: &str, v: &Value, params: Params) -> V2Result<Value> {
    let outcome = match target {
        "KQL" | "KML" => dry(nexus, &text(v, "VALIDATE")?, target, params).map(|_| ()),
        "SCHEMA PACKAGE" => packages::check(v).map(|_| ()),
        other => {
            return Err(V2Error::new(
                Code::UnsupportedCapability,
                format!("VALIDATE {other} is not supported by this runtime yet"),
            )
            .with_hint("VALIDATE KQL, KML and SCHEMA PACKAGE run"))
        }
    };
    Ok(match outcome {
        Ok(()) => json!({"valid": true, "errors": []}),
        Err(e) => json!({"valid": false, "errors": [e.to_json()]}),
    })
}

/// `PREVIEW KML v`: the effect the write would have (`committed: false`), or its error.
pub fn preview_kml(nexus: &Nexus, v: &Value, params: Params) -> V2Result<Value> {
    let effect = dry(nexus, &text(v, "PREVIEW KML")?, "KML", params)?;
    Ok(json!({"committed": false, "effect": effect}))
}
