//! Schema rules: type and predicate registration (`KIP_2001` with did-you-mean hints),
//! the required attributes of type definitions (`KIP_2003`) and the protected core
//! (`KIP_3004`, DECISIONS.md item 7).

use crate::store::{ConceptRecord, GraphRead, StoreResult};
use kip_lang::{ErrorCode, KipError};
use serde_json::{Map, Value};

/// The meta-type of concept types.
pub const CONCEPT_TYPE: &str = "$ConceptType";
/// The meta-type of predicates.
pub const PROPOSITION_TYPE: &str = "$PropositionType";

/// True when `name` is a registered concept type.
pub fn is_concept_type(g: &dyn GraphRead, name: &str) -> StoreResult<bool> {
    Ok(g.concept_by_key(CONCEPT_TYPE, name)?.is_some())
}

/// True when `name` is a registered predicate.
pub fn is_predicate(g: &dyn GraphRead, name: &str) -> StoreResult<bool> {
    Ok(g.concept_by_key(PROPOSITION_TYPE, name)?.is_some())
}

/// The names of all instances of a meta-type (the registered types or predicates).
pub fn registered_names(g: &dyn GraphRead, meta_type: &str) -> StoreResult<Vec<String>> {
    let mut ids = Vec::new();
    g.scan_type(meta_type, &mut |id| {
        ids.push(id);
        Ok(true)
    })?;
    let mut names = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(c) = g.concept(id)? {
            names.push(c.name);
        }
    }
    Ok(names)
}

/// Registered names close to `wanted`: same up to case, or within a small edit distance.
pub fn did_you_mean(candidates: &[String], wanted: &str) -> Vec<String> {
    let lower = wanted.to_lowercase();
    let limit = (wanted.chars().count() / 3).clamp(1, 3);
    let mut scored: Vec<(usize, &String)> = candidates
        .iter()
        .filter_map(|c| {
            if c.to_lowercase() == lower {
                Some((0, c))
            } else {
                let d = strsim::levenshtein(&c.to_lowercase(), &lower);
                (d <= limit).then_some((d, c))
            }
        })
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, c)| c.clone()).collect()
}

fn unknown(
    g: &dyn GraphRead,
    kind: &str,
    meta: &str,
    name: &str,
    describe: &str,
) -> StoreResult<KipError> {
    let names = registered_names(g, meta)?;
    let close = did_you_mean(&names, name);
    let message = if close.is_empty() {
        format!("TypeMismatch: '{name}' is not a registered {kind}")
    } else {
        format!(
            "TypeMismatch: '{name}' is not a registered {kind}. Did you mean {}?",
            close
                .iter()
                .map(|c| format!("'{c}'"))
                .collect::<Vec<_>>()
                .join(" or ")
        )
    };
    let hint = format!(
        "names are case-sensitive; list them with {describe}, or register '{name}' first with UPSERT {{ CONCEPT ?t {{ {{type: \"{meta}\", name: \"{name}\"}} SET ATTRIBUTES {{ description: \"...\"{extra} }} }} }}",
        extra = if meta == PROPOSITION_TYPE { ", subject_types: [\"*\"], object_types: [\"*\"]" } else { "" }
    );
    Ok(KipError::new(ErrorCode::TypeMismatch, message).with_hint(hint))
}

/// `KIP_2001` unless `name` is a registered concept type.
pub fn require_concept_type(g: &dyn GraphRead, name: &str) -> Result<(), KipError> {
    if is_concept_type(g, name)? {
        return Ok(());
    }
    Err(unknown(
        g,
        "concept type",
        CONCEPT_TYPE,
        name,
        "DESCRIBE CONCEPT TYPES",
    )?)
}

/// `KIP_2001` unless `name` is a registered predicate.
pub fn require_predicate(g: &dyn GraphRead, name: &str) -> Result<(), KipError> {
    if is_predicate(g, name)? {
        return Ok(());
    }
    Err(unknown(
        g,
        "predicate (proposition type)",
        PROPOSITION_TYPE,
        name,
        "DESCRIBE PROPOSITION TYPES",
    )?)
}

/// Checks the `is_required` attributes of a `$ConceptType` / `$PropositionType`
/// definition (DECISIONS.md item 6): `KIP_2003` naming what is missing or mistyped.
pub fn check_type_definition(
    concept_type: &str,
    name: &str,
    attrs: &Map<String, Value>,
) -> Result<(), KipError> {
    let required: &[(&str, &str)] = match concept_type {
        CONCEPT_TYPE => &[("description", "string")],
        PROPOSITION_TYPE => &[
            ("description", "string"),
            ("subject_types", "array"),
            ("object_types", "array"),
        ],
        _ => return Ok(()),
    };
    for (key, ty) in required {
        let ok = match attrs.get(*key) {
            Some(Value::String(_)) => *ty == "string",
            Some(Value::Array(items)) => *ty == "array" && items.iter().all(Value::is_string),
            _ => false,
        };
        if !ok {
            let what = if attrs.contains_key(*key) {
                "must be"
            } else {
                "is required and must be"
            };
            let example = if *ty == "string" {
                "\"...\""
            } else {
                "[\"*\"]"
            };
            return Err(KipError::new(
                ErrorCode::InvalidValueType,
                format!(
                    "the {concept_type} definition '{name}': attribute '{key}' {what} a{} {ty}{}",
                    if *ty == "array" { "n" } else { "" },
                    if *ty == "array" { " of strings" } else { "" }
                ),
            )
            .with_hint(format!(
                "add SET ATTRIBUTES {{ {key}: {example} }} to the definition"
            )));
        }
    }
    Ok(())
}

/// Protected concepts: `(type, name)` pairs of DECISIONS.md item 7.
const PROTECTED: [(&str, &str); 9] = [
    (CONCEPT_TYPE, CONCEPT_TYPE),
    (CONCEPT_TYPE, PROPOSITION_TYPE),
    (CONCEPT_TYPE, "Domain"),
    (PROPOSITION_TYPE, "belongs_to_domain"),
    ("Domain", "CoreSchema"),
    ("Domain", "Unsorted"),
    ("Domain", "Archived"),
    ("Person", "$self"),
    ("Person", "$system"),
];

/// True for a protected concept.
pub fn is_protected(c: &ConceptRecord) -> bool {
    PROTECTED
        .iter()
        .any(|(t, n)| *t == c.concept_type && *n == c.name)
}

/// True for the persons whose `core_directives` are immutable.
pub fn is_system_actor(c: &ConceptRecord) -> bool {
    c.concept_type == "Person" && (c.name == "$self" || c.name == "$system")
}

/// The `KIP_3004` error for a protected target.
pub fn immutable(what: impl Into<String>) -> KipError {
    KipError::new(ErrorCode::ImmutableTarget, what.into()).with_hint(
        "protected system structures (meta-types, core domains, $self/$system identity and core_directives, and the Genesis links between them) cannot be deleted or changed; ordinary attributes such as a type's description or $self's persona may evolve",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn did_you_mean_prefers_case_then_small_edits() {
        let names: Vec<String> = ["Drug", "Person", "Domain", "Event"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(did_you_mean(&names, "drug"), vec!["Drug"]);
        assert_eq!(did_you_mean(&names, "Persn"), vec!["Person"]);
        assert!(did_you_mean(&names, "Spaceship").is_empty());
    }

    #[test]
    fn type_definitions_need_their_required_attributes() {
        let ok = serde_json::json!({"description": "d", "subject_types": ["*"], "object_types": ["Person"]});
        check_type_definition(PROPOSITION_TYPE, "p", ok.as_object().expect("obj")).expect("valid");
        let missing = serde_json::json!({"description": "d"});
        let e = check_type_definition(PROPOSITION_TYPE, "p", missing.as_object().expect("obj"))
            .expect_err("missing");
        assert_eq!(e.code, ErrorCode::InvalidValueType);
        assert!(e.message.contains("subject_types"));
        let wrong = serde_json::json!({"description": 5});
        let e = check_type_definition(CONCEPT_TYPE, "T", wrong.as_object().expect("obj"))
            .expect_err("wrong type");
        assert!(e.message.contains("must be a string"));
        check_type_definition("Drug", "x", &Map::new()).expect("not a type definition");
    }
}
