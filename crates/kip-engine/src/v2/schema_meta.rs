//! Schema META (Specification §65, §20): `DESCRIBE TYPE | PREDICATE | FACET |
//! STRUCTURAL FIELD | PACKAGE v`, `LIST TYPES | PREDICATES | FACETS | STRUCTURAL
//! FIELDS`, `DESCRIBE SPACE`, and the projection's own description (`DESCRIBE
//! EPISTEMIC POLICY`, `DESCRIBE PROJECTION CAPABILITY`, §27). A local name resolves
//! exactly as in KQL and KML: the answer names the exact symbol and its package
//! version; an ambiguous local name is `SchemaSymbolAmbiguous`.

use super::belief::{POLICY_ID, POLICY_VERSION};
use super::error::{Code, V2Error, V2Result};
use super::schema_env::{active, SymbolKind, KINDS, LEGACY_REF};
use crate::store::GraphRead;
use serde_json::{json, Value};

fn kind_of(what: &str) -> Option<SymbolKind> {
    Some(match what {
        "TYPE" | "TYPES" => SymbolKind::ConceptType,
        "PREDICATE" | "PREDICATES" => SymbolKind::Predicate,
        "FACET" | "FACETS" => SymbolKind::Facet,
        "STRUCTURAL FIELD" | "STRUCTURAL FIELDS" => SymbolKind::StructuralField,
        _ => return None,
    })
}

fn package_of(exact: &str) -> &str {
    exact.rsplit_once('/').map_or(exact, |(p, _)| p)
}

/// Whether this module answers `DESCRIBE <what>`.
pub fn describes(what: &str) -> bool {
    kind_of(what).is_some()
        || matches!(
            what,
            "PACKAGE" | "SPACE" | "EPISTEMIC POLICY" | "PROJECTION CAPABILITY"
        )
}

/// Whether this module answers `LIST <what>`.
pub fn lists(what: &str) -> bool {
    kind_of(what).is_some()
}

/// A `DESCRIBE <what> v` this module answers (`None`: not one of its forms).
pub fn describe(g: &dyn GraphRead, what: &str, value: Option<&Value>) -> Option<V2Result<Value>> {
    if let Some(kind) = kind_of(what) {
        return Some(symbol(g, kind, value));
    }
    Some(match what {
        "PACKAGE" => package(g, value),
        "SPACE"
            if value.is_some_and(|v| {
                !v.is_null()
                    && v.as_str() != Some(super::request::DEFAULT_SPACE)
                    && v.as_str() != Some(&format!("kip:space:{}", super::request::DEFAULT_SPACE))
            }) =>
        {
            Err(V2Error::new(
                Code::NotFoundOrNotVisible,
                "no such memory space is visible to this caller",
            )
            .with_hint("DESCRIBE SPACE without a name describes the space of the request"))
        }
        "SPACE" => Ok(json!({
            "space_id": super::request::DEFAULT_SPACE,
            "uri": format!("kip:space:{}", super::request::DEFAULT_SPACE),
            "state": "active",
            "note": "one space until memory spaces land; it holds what KIP 1.x writes too",
        })),
        "EPISTEMIC POLICY" => Ok(policy()),
        "PROJECTION CAPABILITY" => Ok(json!({
            "policies": [policy()],
            "statuses": ["accepted", "rejected", "contested", "uncertain", "insufficient"],
            "score_semantics": "normalized_support_not_probability",
            "belief_slot": true,
            "materialized": false,
        })),
        _ => return None,
    })
}

fn policy() -> Value {
    json!({
        "id": POLICY_ID,
        "version": POLICY_VERSION,
        "eligible_modes": ["observed", "stated", "inferred", "imported"],
        "opt_in_modes": ["hypothetical", "predicted"],
        "independence": "one root per asserting actor (its strongest confidence)",
        "score": "1 - product(1 - root strength), normalized_support_not_probability",
        "thresholds": {"accepted": "support >= 0.5 and opposition < 0.5", "rejected": "opposition >= 0.5 and support < 0.5", "contested": "both >= 0.5"},
        "insufficient": "no eligible material: unknown, never rejected",
        "options": ["policy", "valid_at", "include_hypothetical", "explanation", "purpose", "risk"],
    })
}

fn name_of(value: Option<&Value>, what: &str) -> V2Result<String> {
    match value {
        Some(Value::String(s)) => Ok(s.clone()),
        other => Err(V2Error::new(
            Code::TypeMismatch,
            format!(
                "DESCRIBE {what} takes a name as a string, not {}",
                other.cloned().unwrap_or(Value::Null)
            ),
        )
        .with_hint(format!("DESCRIBE {what} \"Person\""))),
    }
}

fn symbol(g: &dyn GraphRead, kind: SymbolKind, value: Option<&Value>) -> V2Result<Value> {
    let name = name_of(value, "TYPE")?;
    let d = active().resolve(g, kind, &name)?;
    Ok(json!({
        "symbol": d.exact,
        "local_name": d.local,
        "kind": kind.section(),
        "package_ref": package_of(&d.exact),
        "definition": d.body,
    }))
}

fn package(g: &dyn GraphRead, value: Option<&Value>) -> V2Result<Value> {
    let name = name_of(value, "PACKAGE")?;
    let builtin = [super::schema_env::CORE_REF, super::schema_env::PROFILE_REF];
    if builtin.contains(&name.as_str()) || name == "kip://profiles/cognitive-memory" {
        let reference = if name.starts_with("kip://core") {
            super::schema_env::CORE_REF
        } else {
            super::schema_env::PROFILE_REF
        };
        let mut symbols = serde_json::Map::new();
        if reference == super::schema_env::PROFILE_REF {
            for kind in KINDS {
                symbols.insert(kind.section().into(), json!(active().locals(kind)));
            }
        }
        return Ok(
            json!({"package_ref": reference, "status": "active", "built_in": true, "symbols": symbols}),
        );
    }
    for p in super::packages::list(g)? {
        let id = p.package_ref.split('@').next().unwrap_or("");
        if p.package_ref == name || id == name {
            return Ok(json!({
                "package_ref": p.package_ref,
                "status": if p.active { "active" } else { "installed" },
                "installed_at": p.installed_at,
                "manifest": p.artifact.get("manifest").cloned().unwrap_or(Value::Null),
                "definitions": p.artifact.get("definitions").cloned().unwrap_or(Value::Null),
            }));
        }
    }
    Err(V2Error::new(
        Code::SchemaPackageUnavailable,
        format!("no schema package \"{name}\" is installed"),
    )
    .with_hint("LIST SCHEMA PACKAGES shows what is installed"))
}

/// `LIST TYPES | PREDICATES | FACETS | STRUCTURAL FIELDS` (`None`: another LIST).
pub fn list(g: &dyn GraphRead, what: &str) -> Option<V2Result<Value>> {
    let kind = kind_of(what)?;
    Some((|| {
        let installed = super::packages::environment(g)?;
        let mut out = Vec::new();
        for env in [active(), installed.as_ref()] {
            for local in env.locals(kind) {
                if let Some(d) = env.definition(kind, local) {
                    out.push(json!({"local_name": local, "symbol": d.exact, "package_ref": package_of(&d.exact)}));
                } else {
                    out.push(json!({"local_name": local, "ambiguous": true}));
                }
            }
        }
        let meta = match kind {
            SymbolKind::ConceptType => Some("$ConceptType"),
            SymbolKind::Predicate => Some(kip_storage::PROPOSITION_TYPE),
            _ => None,
        };
        if let Some(meta) = meta {
            let mut legacy = Vec::new();
            g.scan_type(meta, &mut |n| {
                legacy.push(n);
                Ok(true)
            })?;
            for n in legacy {
                if let Some(c) = g.concept(n)? {
                    if !c.name.starts_with('$') && active().definition(kind, &c.name).is_none() {
                        out.push(json!({"local_name": c.name, "symbol": format!("{LEGACY_REF}/{}", c.name), "package_ref": LEGACY_REF}));
                    }
                }
            }
        }
        Ok(Value::Array(out))
    })())
}
