//! Schema rules: type and predicate registration (`KIP_2001` with did-you-mean hints),
//! the required attributes of type definitions (`KIP_2003`) and the protected core
//! (`KIP_3004`, DECISIONS.md item 7).

use crate::store::{ConceptRecord, GraphRead, StoreResult, DOMAIN_PREDICATE};
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

/// The naming rules of KIP §2.8 for a concept an agent creates: concept type names
/// are UpperCamelCase identifiers, predicates snake_case identifiers, names starting
/// with `$` are reserved for the system's meta-types and actors, and no concept has an
/// empty name. `KIP_1002` (`KIP_2002` for an empty name) with the corrected spelling
/// as a hint. Only new concepts are checked: a store that already holds other names
/// keeps reading, updating and deleting them.
pub fn check_new_name(concept_type: &str, name: &str) -> Result<(), KipError> {
    if name.trim().is_empty() {
        return Err(KipError::new(
            ErrorCode::ConstraintViolation,
            format!("a {concept_type} concept needs a non-empty name"),
        )
        .with_hint("give the concept a name: {type: \"...\", name: \"a short, unique, human-readable name\"}"));
    }
    let (rule, ok, suggestion) = match concept_type {
        CONCEPT_TYPE => (
            "concept type names are UpperCamelCase identifiers (letters and digits, starting with an uppercase letter)",
            name.starts_with(|c: char| c.is_ascii_uppercase())
                && name.chars().all(|c| c.is_ascii_alphanumeric()),
            type_name(name),
        ),
        PROPOSITION_TYPE => (
            "predicate names are snake_case identifiers (lowercase letters, digits and underscores, starting with a letter)",
            name.starts_with(|c: char| c.is_ascii_lowercase())
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            predicate_name(name),
        ),
        _ => {
            if name.starts_with('$') {
                return Err(KipError::new(
                    ErrorCode::InvalidIdentifier,
                    format!("the name '{name}' is reserved: names starting with $ belong to the system"),
                )
                .with_hint(format!("name it '{}'", name.trim_start_matches('$'))));
            }
            return Ok(());
        }
    };
    if name.starts_with('$') {
        return Err(KipError::new(
            ErrorCode::InvalidIdentifier,
            format!("'{name}': names starting with $ are reserved for the system's meta-types"),
        )
        .with_hint(format!("{rule}; register it as '{suggestion}'")));
    }
    if ok {
        return Ok(());
    }
    let hint = if suggestion.is_empty() {
        rule.to_string()
    } else {
        format!("{rule}: did you mean '{suggestion}'?")
    };
    Err(KipError::new(
        ErrorCode::InvalidIdentifier,
        format!(
            "'{name}' is not a valid {} name",
            if concept_type == CONCEPT_TYPE {
                "concept type"
            } else {
                "predicate"
            }
        ),
    )
    .with_hint(hint))
}

/// The words of a name: split at anything that is not a letter or digit, and at
/// lower-to-upper case steps.
fn words(s: &str) -> Vec<String> {
    // Split on anything that is not a letter or digit, and at lower->upper case steps.
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in s.chars() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_lowercase() || c.is_numeric();
        cur.push(c);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// `"software project"` -> `"SoftwareProject"`: the KIP concept type of an entityType.
pub fn type_name(entity_type: &str) -> String {
    let mut out = String::new();
    for w in words(entity_type) {
        let mut cs = w.chars();
        if let Some(f) = cs.next() {
            out.extend(f.to_uppercase());
            out.push_str(cs.as_str());
        }
    }
    if out.is_empty() {
        return "Entity".to_string();
    }
    if out.starts_with(|c: char| c.is_numeric()) {
        out.insert_str(0, "Type");
    }
    out
}

/// `"works at"` / `"worksAt"` -> `"works_at"`: the KIP predicate of a relationType.
pub fn predicate_name(relation_type: &str) -> String {
    let joined = words(relation_type)
        .iter()
        .map(|w| w.to_lowercase())
        .collect::<Vec<_>>()
        .join("_");
    if joined.is_empty() {
        return "related_to".to_string();
    }
    if joined.starts_with(|c: char| c.is_numeric()) {
        return format!("rel_{joined}");
    }
    joined
}

/// Protected concepts: `(type, name)` pairs of DECISIONS.md items 7 and 33.
const PROTECTED: [(&str, &str); 10] = [
    (CONCEPT_TYPE, CONCEPT_TYPE),
    (CONCEPT_TYPE, PROPOSITION_TYPE),
    (CONCEPT_TYPE, "Domain"),
    (PROPOSITION_TYPE, "belongs_to_domain"),
    ("Domain", "CoreSchema"),
    ("Domain", "Unsorted"),
    ("Domain", "Archived"),
    ("Domain", "System"),
    ("Person", "$self"),
    ("Person", "$system"),
];

/// True for a protected concept.
pub fn is_protected(c: &ConceptRecord) -> bool {
    is_protected_name(&c.concept_type, &c.name)
}

/// [`is_protected`] from a concept's type and name.
pub fn is_protected_name(concept_type: &str, name: &str) -> bool {
    PROTECTED
        .iter()
        .any(|(t, n)| *t == concept_type && *n == name)
}

/// True for the system structures an untyped SEARCH leaves out (docs/semantics.md,
/// "META"): the meta-types' definitions (`$ConceptType`, `$PropositionType`), the
/// protected concepts (core domains, `$self`, `$system`) and the sleep cycle's
/// `SleepTask`s. `WITH TYPE` finds them.
pub fn is_system_structure(concept_type: &str, name: &str) -> bool {
    concept_type == CONCEPT_TYPE
        || concept_type == PROPOSITION_TYPE
        || concept_type == "SleepTask"
        || PROTECTED
            .iter()
            .any(|(t, n)| *t == concept_type && *n == name)
}

/// True for the persons whose `core_directives` are immutable.
pub fn is_system_actor(c: &ConceptRecord) -> bool {
    c.concept_type == "Person" && (c.name == "$self" || c.name == "$system")
}

/// True for a protected system *structure* as a whole (RC11 §4, `KIP_3004`): the
/// protected concepts except the system actors, of which only the identity tuple
/// (`type` + `name`) and `core_directives` are protected; their other attributes
/// (`persona`, `strengths`, ...) are designed to evolve.
fn is_protected_structure(c: &ConceptRecord) -> bool {
    is_protected(c) && !is_system_actor(c)
}

/// True for a Genesis link: `belongs_to_domain` between two protected concepts (every
/// link the Genesis capsule makes is one). A link an agent draws between protected
/// concepts with another predicate (`$self prefers $system`) is an ordinary link.
pub fn is_genesis_link(subject: &ConceptRecord, predicate: &str, object: &ConceptRecord) -> bool {
    predicate == DOMAIN_PREDICATE && is_protected(subject) && is_protected(object)
}

/// A change to the graph, as the protection rules see it.
#[derive(Debug, Clone, Copy)]
pub enum Mutation<'a> {
    /// Deleting a concept.
    DeleteConcept(&'a ConceptRecord),
    /// Setting (`Some`) or removing (`None`) one attribute of a concept.
    SetAttribute {
        /// The concept as stored.
        concept: &'a ConceptRecord,
        /// The attribute.
        key: &'a str,
        /// Its new value, or `None` when it is removed.
        value: Option<&'a serde_json::Value>,
    },
    /// Changing a concept's type (the memory tools' `update_entities`).
    Retype {
        /// The concept as stored.
        concept: &'a ConceptRecord,
        /// The new type.
        new_type: &'a str,
    },
    /// Deleting a link between two concepts.
    DeleteLink {
        /// The subject.
        subject: &'a ConceptRecord,
        /// The predicate.
        predicate: &'a str,
        /// The object.
        object: &'a ConceptRecord,
    },
    /// An UPDATE matched this concept (RC11 §4.3: matching a protected structure fails
    /// the statement; each attribute it changes is then checked as a
    /// [`Mutation::SetAttribute`]).
    UpdateConcept(&'a ConceptRecord),
    /// An UPDATE matched a link between two concepts.
    UpdateLink {
        /// The subject.
        subject: &'a ConceptRecord,
        /// The predicate.
        predicate: &'a str,
        /// The object.
        object: &'a ConceptRecord,
    },
    /// A MERGE names this concept as its source or target (DECISIONS.md item 36:
    /// either position; a merge deletes or rewrites an identity).
    Merge(&'a ConceptRecord),
}

/// The one place the protected core is enforced (`KIP_3004`): KML (UPSERT, DELETE) and
/// the memory tools call it before each change they make to an existing element, so
/// a rule added here holds on every path. (The bootstrap, with system privilege, does
/// not call it.)
pub fn check_mutation(m: Mutation<'_>) -> Result<(), KipError> {
    match m {
        Mutation::DeleteConcept(c) if is_protected(c) => Err(immutable(format!(
            "ImmutableTarget: {{type: \"{}\", name: \"{}\"}} is a protected system concept and cannot be deleted",
            c.concept_type, c.name
        ))),
        Mutation::SetAttribute {
            concept,
            key: "core_directives",
            value,
        } if is_system_actor(concept) && concept.attributes.get("core_directives") != value => {
            Err(immutable(format!(
                "ImmutableTarget: the core_directives of {} cannot be {}",
                concept.name,
                if value.is_some() { "changed" } else { "deleted" }
            )))
        }
        Mutation::Retype { concept, new_type }
            if is_protected(concept) && concept.concept_type != new_type =>
        {
            Err(immutable(format!(
                "ImmutableTarget: {{type: \"{}\", name: \"{}\"}} is a protected system concept and its type cannot be changed",
                concept.concept_type, concept.name
            )))
        }
        Mutation::DeleteLink {
            subject,
            predicate,
            object,
        } if is_genesis_link(subject, predicate, object) => Err(immutable(format!(
            "ImmutableTarget: the link ({}, \"{predicate}\", {}) between protected system concepts cannot be deleted",
            subject.name, object.name
        ))),
        Mutation::UpdateConcept(c) if is_protected_structure(c) => Err(immutable(format!(
            "ImmutableTarget: the UPDATE matches {{type: \"{}\", name: \"{}\"}}, a protected system structure",
            c.concept_type, c.name
        ))
        .with_hint(UPDATE_HINT)),
        Mutation::UpdateLink {
            subject,
            predicate,
            object,
        } if is_genesis_link(subject, predicate, object) => Err(immutable(format!(
            "ImmutableTarget: the UPDATE matches the link ({}, \"{predicate}\", {}), a protected system structure",
            subject.name, object.name
        ))
        .with_hint(UPDATE_HINT)),
        Mutation::Merge(c) if is_protected(c) => Err(immutable(format!(
            "ImmutableTarget: {{type: \"{}\", name: \"{}\"}} is a protected system concept and cannot be merged",
            c.concept_type, c.name
        ))),
        Mutation::DeleteConcept(_)
        | Mutation::SetAttribute { .. }
        | Mutation::Retype { .. }
        | Mutation::DeleteLink { .. }
        | Mutation::UpdateConcept(_)
        | Mutation::UpdateLink { .. }
        | Mutation::Merge(_) => Ok(()),
    }
}

const UPDATE_HINT: &str = "narrow the WHERE pattern so that it leaves out the protected system structures (meta-types, the Domain type, belongs_to_domain, core domains, and the Genesis links between them); $self's and $system's ordinary attributes may be updated, their core_directives never";

/// The `KIP_3004` error for a protected target.
pub fn immutable(what: impl Into<String>) -> KipError {
    KipError::new(ErrorCode::ImmutableTarget, what.into()).with_hint(
        "protected system structures (meta-types, core domains, $self/$system identity and core_directives, and the Genesis links between them) cannot be deleted or changed; ordinary attributes such as a type's description or $self's persona may evolve",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn concept(t: &str, n: &str) -> ConceptRecord {
        ConceptRecord {
            concept_type: t.into(),
            name: n.into(),
            attributes: Default::default(),
            metadata: Default::default(),
        }
    }

    #[test]
    fn every_protected_mutation_is_refused_in_one_place() {
        let me = {
            let mut c = concept("Person", "$self");
            c.attributes
                .insert("core_directives".into(), serde_json::json!(["a"]));
            c
        };
        let core = concept("Domain", "CoreSchema");
        let someone = concept("Person", "Ada");
        let code = |m| check_mutation(m).map_err(|e| e.code.as_str());
        assert_eq!(code(Mutation::DeleteConcept(&core)), Err("KIP_3004"));
        assert_eq!(code(Mutation::DeleteConcept(&someone)), Ok(()));
        let other = serde_json::json!(["b"]);
        let same = serde_json::json!(["a"]);
        for (value, expected) in [
            (Some(&other), Err("KIP_3004")),
            (None, Err("KIP_3004")),
            (Some(&same), Ok(())),
        ] {
            let m = Mutation::SetAttribute {
                concept: &me,
                key: "core_directives",
                value,
            };
            assert_eq!(code(m), expected);
        }
        let persona = serde_json::json!("curious");
        let m = Mutation::SetAttribute {
            concept: &me,
            key: "persona",
            value: Some(&persona),
        };
        assert_eq!(code(m), Ok(()));
        let m = Mutation::Retype {
            concept: &core,
            new_type: "Topic",
        };
        assert_eq!(code(m), Err("KIP_3004"));
        let m = Mutation::Retype {
            concept: &someone,
            new_type: "Scientist",
        };
        assert_eq!(code(m), Ok(()));
        let m = Mutation::DeleteLink {
            subject: &me,
            predicate: "belongs_to_domain",
            object: &core,
        };
        assert_eq!(code(m), Err("KIP_3004"));
        let m = Mutation::DeleteLink {
            subject: &someone,
            predicate: "belongs_to_domain",
            object: &core,
        };
        assert_eq!(code(m), Ok(()));
        // An agent's own link between protected concepts is not a Genesis link.
        let system = concept("Person", "$system");
        let m = Mutation::DeleteLink {
            subject: &me,
            predicate: "prefers",
            object: &system,
        };
        assert_eq!(code(m), Ok(()));
        let m = Mutation::UpdateLink {
            subject: &me,
            predicate: "prefers",
            object: &system,
        };
        assert_eq!(code(m), Ok(()));
        let m = Mutation::UpdateLink {
            subject: &me,
            predicate: "belongs_to_domain",
            object: &core,
        };
        assert_eq!(code(m), Err("KIP_3004"));
        // UPDATE: $self is matched (its attributes are checked one by one), a core
        // domain is not; MERGE refuses every protected concept.
        assert_eq!(code(Mutation::UpdateConcept(&me)), Ok(()));
        assert_eq!(code(Mutation::UpdateConcept(&core)), Err("KIP_3004"));
        assert_eq!(code(Mutation::UpdateConcept(&someone)), Ok(()));
        assert_eq!(code(Mutation::Merge(&me)), Err("KIP_3004"));
        assert_eq!(code(Mutation::Merge(&someone)), Ok(()));
    }

    #[test]
    fn new_names_follow_the_naming_rules() {
        for ok in ["Drug", "MedicalDevice", "HTTPServer", "Type2"] {
            check_new_name(CONCEPT_TYPE, ok).expect(ok);
        }
        for ok in ["treats", "has_side_effect", "is_part_of_2"] {
            check_new_name(PROPOSITION_TYPE, ok).expect(ok);
        }
        check_new_name("Person", "Ada Lovelace").expect("any text names an instance");
        let cases = [
            (CONCEPT_TYPE, "bad type!", "KIP_1002", "BadType"),
            (CONCEPT_TYPE, "drug", "KIP_1002", "Drug"),
            (CONCEPT_TYPE, "medical_device", "KIP_1002", "MedicalDevice"),
            (CONCEPT_TYPE, "$Foo", "KIP_1002", "Foo"),
            (
                PROPOSITION_TYPE,
                "HasSideEffect",
                "KIP_1002",
                "has_side_effect",
            ),
            (
                PROPOSITION_TYPE,
                "has side-effect",
                "KIP_1002",
                "has_side_effect",
            ),
            ("Person", "$root", "KIP_1002", "root"),
            ("Person", "", "KIP_2002", "name"),
            (CONCEPT_TYPE, "  ", "KIP_2002", "name"),
        ];
        for (t, n, code, hint) in cases {
            let e = check_new_name(t, n).expect_err(n);
            assert_eq!(e.code.as_str(), code, "{t} {n}");
            assert!(
                e.hint.as_deref().unwrap_or("").contains(hint),
                "{t} {n}: {e:?}"
            );
        }
    }

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
