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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    pub(crate) fn section(self) -> &'static str {
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

/// A Schema Environment: the definitions of its packages by kind and local name (a
/// local name two packages define is ambiguous, §20.7) and by exact symbol.
#[derive(Debug, Default)]
pub struct Environment {
    by_kind: BTreeMap<&'static str, BTreeMap<String, Vec<Definition>>>,
    exact: BTreeMap<String, Definition>,
    packages: Vec<String>,
}

/// The built-in environment of every memory: Core and the Cognitive Memory Profile.
pub fn active() -> &'static Environment {
    static ENV: OnceLock<Environment> = OnceLock::new();
    ENV.get_or_init(|| {
        // The artifact is part of this build; a malformed one leaves an empty
        // environment, which every write then reports as SchemaSymbolNotFound.
        let doc: Value = serde_json::from_str(PROFILE).unwrap_or(Value::Null);
        let mut env = Environment::default();
        env.add(&doc, PROFILE_REF);
        env
    })
}

/// The symbol kinds, in the order packages list them.
pub const KINDS: [SymbolKind; 4] = [
    SymbolKind::ConceptType,
    SymbolKind::Predicate,
    SymbolKind::Facet,
    SymbolKind::StructuralField,
];

impl Environment {
    /// Adds a package artifact's definitions under `package_ref` (a definition without
    /// `ref` gets `<package_ref>/<local>`).
    pub fn add(&mut self, doc: &Value, package_ref: &str) {
        self.packages.push(package_ref.to_string());
        for kind in KINDS {
            let Some(m) = doc
                .pointer(&format!("/definitions/{}", kind.section()))
                .and_then(Value::as_object)
            else {
                continue;
            };
            for (local, body) in m {
                let body = body.as_object().cloned().unwrap_or_default();
                let exact = body
                    .get("ref")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{package_ref}/{local}"));
                let d = Definition {
                    exact: exact.clone(),
                    local: local.clone(),
                    body,
                };
                self.exact.insert(exact, d.clone());
                self.by_kind
                    .entry(kind.section())
                    .or_default()
                    .entry(local.clone())
                    .or_default()
                    .push(d);
            }
        }
    }

    /// The package references of this environment.
    pub fn package_refs(&self) -> &[String] {
        &self.packages
    }

    /// The local names of `kind`.
    pub fn locals(&self, kind: SymbolKind) -> Vec<&str> {
        self.by_kind
            .get(kind.section())
            .map(|d| d.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// The definitions `name` (a local name or an exact symbol) may mean.
    fn candidates(&self, kind: SymbolKind, name: &str) -> Vec<&Definition> {
        if let Some(d) = self.exact.get(name) {
            let same_kind = self
                .by_kind
                .get(kind.section())
                .and_then(|m| m.get(&d.local))
                .is_some_and(|v| v.iter().any(|x| x.exact == d.exact));
            return if same_kind { vec![d] } else { Vec::new() };
        }
        self.by_kind
            .get(kind.section())
            .and_then(|m| m.get(name))
            .map(|v| v.iter().collect())
            .unwrap_or_default()
    }

    /// The one definition of `name` (a local name or an exact symbol), if exactly one.
    pub fn definition(&self, kind: SymbolKind, name: &str) -> Option<&Definition> {
        match self.candidates(kind, name).as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }

    /// Resolves `name` of `kind` in the memory `g`: the exact symbol and the local name
    /// the graph stores. The built-in profile, then the packages installed and active
    /// in the memory, then the memory's 1.x schema; a local name two of them define is
    /// `SchemaSymbolAmbiguous` (§20.7), an unknown one `SchemaSymbolNotFound`.
    pub fn resolve(
        &self,
        g: &dyn GraphRead,
        kind: SymbolKind,
        name: &str,
    ) -> Result<Definition, V2Error> {
        let installed = super::packages::environment(g)?;
        let mut found: Vec<&Definition> = self.candidates(kind, name);
        found.extend(installed.candidates(kind, name));
        match found.as_slice() {
            [one] => return Ok((*one).clone()),
            [] => {}
            many => {
                return Err(V2Error::new(
                    Code::SchemaSymbolAmbiguous,
                    format!(
                        "\"{name}\" is a {} of several active packages: {}",
                        kind.noun(),
                        many.iter()
                            .map(|d| d.exact.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
                .with_hint(
                    "write the exact symbol (kip://...@version/Name) instead of the local name",
                )
                .with_detail("symbol", name))
            }
        }
        let local = name
            .strip_prefix(LEGACY_REF)
            .and_then(|r| r.strip_prefix('/'))
            .unwrap_or(name);
        if local.starts_with('$') {
            // KIP2-SCHEMA-010: the 1.x schema's meta-types and internal types are schema
            // state, not something ordinary cognition can instantiate or redefine.
            return Err(V2Error::new(
                Code::ProtectedSchemaState,
                format!(
                    "\"{name}\" is the memory's schema state, not a {} memory content can use",
                    kind.noun()
                ),
            )
            .with_hint(
                "schema changes come in Schema Packages (kip schema install FILE --activate)",
            )
            .with_detail("symbol", name));
        }
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
        let mut known = self.locals(kind);
        known.extend(installed.locals(kind));
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
