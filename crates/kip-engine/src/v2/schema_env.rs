//! The Schema Environment of the default space (Specification §20, DECISIONS.md item
//! 41): the Core package (virtual, §20.13) and the Cognitive Memory Profile 2.0.0,
//! installed and active in every memory. Local names (`Person`, `prefers`,
//! `MnemonicState`) resolve to exact, versioned symbols
//! (`kip://profiles/cognitive-memory@2.0.0/Person`); an exact symbol resolves to
//! itself; anything else is `SchemaSymbolNotFound`, never invented (§10.3).
//!
//! One memory, two dialects (item 40): a type or predicate the memory's 1.x schema
//! defines (a `$ConceptType` / `$PropositionType` concept) and the profile does not
//! resolves through the memory's legacy compatibility package
//! `kip://legacy/default@1.0.0/<name>` (Migration §8), so 1.x data reads in 2.0
//! without being re-typed.

use super::error::{Code, V2Error};
use crate::store::GraphRead;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The profile's package artifact, as published.
const PROFILE: &str =
    include_str!("../../../../spec/kip2/profiles/cognitive-memory-2.0.0.schema.json");

/// The exact reference of the active profile.
pub const PROFILE_REF: &str = "kip://profiles/cognitive-memory@2.0.0";
/// The memory's compatibility package for 1.x-defined symbols (Migration §8).
pub const LEGACY_REF: &str = "kip://legacy/default@1.0.0";
/// The Core package (§20.13).
pub const CORE_REF: &str = "kip://core@2.0.0";

/// A symbol kind of a package (§20.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolKind {
    /// A Concept Type.
    ConceptType,
    /// A Predicate.
    Predicate,
    /// A Facet.
    Facet,
    /// A Structural Field.
    StructuralField,
}

impl SymbolKind {
    fn section(self) -> &'static str {
        match self {
            SymbolKind::ConceptType => "concept_types",
            SymbolKind::Predicate => "predicates",
            SymbolKind::Facet => "facets",
            SymbolKind::StructuralField => "structural_fields",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            SymbolKind::ConceptType => "concept type",
            SymbolKind::Predicate => "predicate",
            SymbolKind::Facet => "facet",
            SymbolKind::StructuralField => "structural field",
        }
    }

    /// The 1.x meta-type whose concepts define symbols of this kind, if any.
    fn legacy_meta_type(self) -> Option<&'static str> {
        match self {
            SymbolKind::ConceptType => Some("$ConceptType"),
            SymbolKind::Predicate => Some(kip_storage::PROPOSITION_TYPE),
            _ => None,
        }
    }
}

/// One definition of the active environment.
#[derive(Debug, Clone)]
pub struct Definition {
    /// The exact symbol.
    pub exact: String,
    /// The local name.
    pub local: String,
    /// The artifact's definition object (empty for legacy symbols).
    pub body: Map<String, Value>,
}

/// The active Schema Environment (Core + the Cognitive Memory Profile).
#[derive(Debug)]
pub struct Environment {
    by_kind: BTreeMap<&'static str, BTreeMap<String, Definition>>,
}

/// The environment of every memory (the profile is built in).
pub fn active() -> &'static Environment {
    static ENV: OnceLock<Environment> = OnceLock::new();
    ENV.get_or_init(|| Environment::from_artifact(PROFILE))
}

impl Environment {
    fn from_artifact(text: &str) -> Environment {
        // The artifact is part of this build; a malformed one leaves an empty
        // environment, which every write then reports as SchemaSymbolNotFound.
        let doc: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let mut by_kind = BTreeMap::new();
        for kind in [
            SymbolKind::ConceptType,
            SymbolKind::Predicate,
            SymbolKind::Facet,
            SymbolKind::StructuralField,
        ] {
            let mut defs = BTreeMap::new();
            if let Some(m) = doc
                .pointer(&format!("/definitions/{}", kind.section()))
                .and_then(Value::as_object)
            {
                for (local, body) in m {
                    let body = body.as_object().cloned().unwrap_or_default();
                    let exact = body
                        .get("ref")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("{PROFILE_REF}/{local}"));
                    defs.insert(
                        local.clone(),
                        Definition {
                            exact,
                            local: local.clone(),
                            body,
                        },
                    );
                }
            }
            by_kind.insert(kind.section(), defs);
        }
        Environment { by_kind }
    }

    fn defs(&self, kind: SymbolKind) -> Option<&BTreeMap<String, Definition>> {
        self.by_kind.get(kind.section())
    }

    /// The profile's definition of `name` (a local name or an exact symbol).
    pub fn definition(&self, kind: SymbolKind, name: &str) -> Option<&Definition> {
        let defs = self.defs(kind)?;
        if let Some(local) = name
            .strip_prefix(PROFILE_REF)
            .and_then(|r| r.strip_prefix('/'))
        {
            return defs.get(local);
        }
        defs.get(name)
    }

    /// Resolves `name` of `kind` in the memory `g`: the exact symbol and the local name
    /// the graph stores. `SchemaSymbolNotFound` when neither the profile nor the
    /// memory's 1.x schema defines it.
    pub fn resolve(
        &self,
        g: &dyn GraphRead,
        kind: SymbolKind,
        name: &str,
    ) -> Result<Definition, V2Error> {
        if let Some(d) = self.definition(kind, name) {
            return Ok(d.clone());
        }
        let local = name
            .strip_prefix(LEGACY_REF)
            .and_then(|r| r.strip_prefix('/'))
            .unwrap_or(name);
        if !local.contains("://") {
            if let Some(meta) = kind.legacy_meta_type() {
                if g.concept_by_key(meta, local)?.is_some() {
                    return Ok(Definition {
                        exact: format!("{LEGACY_REF}/{local}"),
                        local: local.to_string(),
                        body: Map::new(),
                    });
                }
            }
        }
        let known: Vec<&str> = self
            .defs(kind)
            .map(|d| d.keys().map(String::as_str).collect())
            .unwrap_or_default();
        Err(V2Error::new(
            Code::SchemaSymbolNotFound,
            format!(
                "\"{name}\" is not a {} of the active schema environment",
                kind.noun()
            ),
        )
        .with_hint(format!(
            "the active {}s are {} (and those the memory's 1.x schema defines); DESCRIBE SCHEMA ENVIRONMENT lists them",
            kind.noun(),
            known.join(", ")
        ))
        .with_detail("symbol", name))
    }

    /// The exact symbol of a local name the graph stores (a type or predicate written
    /// by either dialect): the profile's when it defines it, else the legacy package's.
    pub fn exact_of(&self, kind: SymbolKind, local: &str) -> String {
        match self.definition(kind, local) {
            Some(d) => d.exact.clone(),
            None => format!("{LEGACY_REF}/{local}"),
        }
    }

    /// The packages active in every space, for DESCRIBE SCHEMA ENVIRONMENT.
    pub fn packages(&self) -> Vec<&'static str> {
        vec![CORE_REF, PROFILE_REF, LEGACY_REF]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_defines_its_types_predicates_and_facets() {
        let env = active();
        let p = env.definition(SymbolKind::ConceptType, "Person").unwrap();
        assert_eq!(p.exact, "kip://profiles/cognitive-memory@2.0.0/Person");
        assert!(env
            .definition(
                SymbolKind::ConceptType,
                "kip://profiles/cognitive-memory@2.0.0/Experience"
            )
            .is_some());
        assert!(env.definition(SymbolKind::Predicate, "prefers").is_some());
        assert!(env.definition(SymbolKind::Facet, "MnemonicState").is_some());
        assert!(env
            .definition(SymbolKind::ConceptType, "Spaceship")
            .is_none());
    }
}
