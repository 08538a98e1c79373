//! The write primitives. Every change KML (`UPSERT`, `DELETE`) and the memory-server
//! tools make to the graph goes through a [`Writer`]: writing a concept, creating or
//! updating a link, deleting concepts and deleting links. Each primitive applies every
//! rule that guards that kind of change (the protected core, registered types and
//! predicates, the naming rules, the required attributes of type definitions,
//! `{type, name}` and `(subject, predicate, object)` uniqueness, the in-use checks of
//! type definitions, the cascade through higher-order links), so a rule added here
//! holds for both tool sets: neither can bypass it.
//!
//! The caller owns the write transaction and commits only when its whole command
//! returned `Ok`, so a refused change leaves the graph untouched.

use crate::schema::{self, CONCEPT_TYPE, PROPOSITION_TYPE};
use crate::store::{ConceptRecord, ElemRef, GraphWrite, PropRecord, Stat};
use foldhash::fast::RandomState;
use kip_lang::{ErrorCode, KipError};
use serde_json::{Map, Value};
use std::collections::{BTreeSet, HashMap, HashSet};

/// Who is writing. Agents go through every check; the bootstrap loader is privileged
/// (it may write the protected core).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Privilege {
    /// An agent command: every check, and new type and predicate names must follow
    /// the naming rules.
    Agent,
    /// A capsule loaded by the user (`kip capsule load`, `kip import`): an agent's
    /// checks, except that names already accepted by an older store (a backup being
    /// restored) are not refused.
    Capsule,
    /// The memory-server tools: an agent's checks, except the KIP naming rules. The
    /// tools map entity and relation types onto type and predicate names themselves
    /// ([`schema::type_name`], [`schema::predicate_name`]; a type in another script
    /// stays in it) and keep entity names exactly as given, as the official server does.
    MemoryTools,
    /// The bootstrap / system loader: no protection checks.
    System,
}

/// The engine's mutation counter of every element (RC11 §2.11.1): 1 when created, one
/// more for each statement that changes the element.
pub const VERSION_KEY: &str = "_version";
/// The engine's time of an element's last change (ISO 8601 UTC, milliseconds).
pub const UPDATED_AT_KEY: &str = "_updated_at";
/// The `MERGE` provenance trail on the surviving concept.
pub const MERGED_FROM_KEY: &str = "_merged_from";

/// True for a reserved metadata key (`_` prefix): maintained by the engine only.
pub fn is_reserved(key: &str) -> bool {
    key.starts_with('_')
}

/// `KIP_2002` when an agent's metadata object holds a reserved `_` key.
pub fn refuse_reserved<'a>(keys: impl IntoIterator<Item = &'a String>) -> Result<(), KipError> {
    for k in keys {
        if is_reserved(k) {
            return Err(KipError::new(
                ErrorCode::ConstraintViolation,
                format!("the metadata key '{k}' is reserved: keys starting with _ are maintained by the engine"),
            )
            .with_hint("drop it from the command: _version and _updated_at are kept by the engine (read them with ?x.metadata._version; guard a read-modify-write with EXPECT VERSION)"));
        }
    }
    Ok(())
}

/// The `_version` of a stored element (1 for an element written before versions
/// existed).
pub fn version_of(meta: &Map<String, Value>) -> u64 {
    meta.get(VERSION_KEY).and_then(Value::as_u64).unwrap_or(1)
}

/// The attributes a type definition must carry (DECISIONS.md item 6).
const DEFINITION_KEYS: [&str; 3] = ["description", "subject_types", "object_types"];

/// Applies changes to the graph with every rule checked (see the module docs).
pub struct Writer<'g> {
    g: &'g mut dyn GraphWrite,
    privilege: Privilege,
    /// Types and predicates already checked in this command (capsules repeat them).
    checked_types: HashSet<String, RandomState>,
    checked_preds: HashSet<String, RandomState>,
    /// The engine time of this statement (`_updated_at`).
    now: String,
    /// The elements this statement changed, with their `_version` before it (0 for
    /// the ones it created): each gets exactly one more, however often it changes.
    changed: HashMap<ElemRef, u64>,
}

impl<'g> Writer<'g> {
    /// A writer over the caller's write transaction.
    pub fn new(g: &'g mut dyn GraphWrite, privilege: Privilege) -> Writer<'g> {
        Writer {
            g,
            privilege,
            checked_types: HashSet::default(),
            checked_preds: HashSet::default(),
            now: crate::memory::now(),
            changed: HashMap::new(),
        }
    }

    /// The `_version` element `r` had before this statement (0: it did not exist),
    /// given its current metadata (`None`: it does not exist now). What `EXPECT
    /// VERSION` compares with (DECISIONS.md item 29).
    pub fn version_before(&self, r: ElemRef, current: Option<&Map<String, Value>>) -> u64 {
        match self.changed.get(&r) {
            Some(v) => *v,
            None => current.map_or(0, version_of),
        }
    }

    /// Sets `_version` and `_updated_at` on a changed element's metadata.
    fn stamp(
        &mut self,
        r: ElemRef,
        old: Option<&Map<String, Value>>,
        meta: &mut Map<String, Value>,
    ) {
        let before = *self
            .changed
            .entry(r)
            .or_insert_with(|| old.map_or(0, version_of));
        meta.insert(VERSION_KEY.into(), Value::from(before + 1));
        meta.insert(UPDATED_AT_KEY.into(), Value::from(self.now.clone()));
    }

    /// The transaction, for reads (and the writes that are not graph changes, such as
    /// metadata keys of the store).
    pub fn graph(&mut self) -> &mut dyn GraphWrite {
        &mut *self.g
    }

    /// `KIP_2001` unless `t` is a registered concept type (checked once per command).
    pub fn require_type(&mut self, t: &str) -> Result<(), KipError> {
        if self.checked_types.contains(t) {
            return Ok(());
        }
        schema::require_concept_type(&*self.g, t)?;
        self.checked_types.insert(t.to_string());
        Ok(())
    }

    /// `KIP_2001` unless `p` is a registered predicate (checked once per command).
    pub fn require_pred(&mut self, p: &str) -> Result<(), KipError> {
        if self.checked_preds.contains(p) {
            return Ok(());
        }
        schema::require_predicate(&*self.g, p)?;
        self.checked_preds.insert(p.to_string());
        Ok(())
    }

    /// Writes `new` as concept `id`; `old` is the concept as stored (`None` when `id`
    /// was just allocated). Checks, in order: the protected core for every attribute
    /// that changes and for a change of type; that a type definition whose own type
    /// changes is not in use (as if it were deleted); that the type is registered (the
    /// `$ConceptType` definition of `$ConceptType` defines itself); the naming rules
    /// for a new concept written by an agent; that no other concept has the same
    /// `{type, name}` (`KIP_3003`); the required attributes of a type definition when
    /// it is new or they change. Writes nothing when `new` equals `old`; returns
    /// whether it wrote. Sets `_version` and `_updated_at` in `new`'s metadata.
    pub fn put_concept(
        &mut self,
        id: u64,
        old: Option<&ConceptRecord>,
        new: &mut ConceptRecord,
    ) -> Result<bool, KipError> {
        if old == Some(&*new) {
            return Ok(false);
        }
        if let Some(old) = old {
            if self.privilege != Privilege::System {
                let changed = new
                    .attributes
                    .iter()
                    .filter(|(k, v)| old.attributes.get(*k) != Some(*v))
                    .map(|(k, _)| k)
                    .chain(
                        old.attributes
                            .keys()
                            .filter(|k| !new.attributes.contains_key(*k)),
                    );
                for key in changed {
                    schema::check_mutation(schema::Mutation::SetAttribute {
                        concept: old,
                        key,
                        value: new.attributes.get(key),
                    })?;
                }
                schema::check_mutation(schema::Mutation::Retype {
                    concept: old,
                    new_type: &new.concept_type,
                })?;
            }
            // A type definition that stops being one is deleted as a definition.
            if old.concept_type != new.concept_type {
                self.check_definition_unused(old, &[])?;
            }
        }
        let key_changed =
            old.is_none_or(|o| o.concept_type != new.concept_type || o.name != new.name);
        if key_changed {
            if !(new.concept_type == CONCEPT_TYPE && new.name == CONCEPT_TYPE) {
                self.require_type(&new.concept_type)?;
            }
            if old.is_none() && self.privilege == Privilege::Agent {
                schema::check_new_name(&new.concept_type, &new.name)?;
            }
            if let Some(other) = self.g.concept_by_key(&new.concept_type, &new.name)? {
                if other != id {
                    return Err(KipError::new(
                        ErrorCode::DuplicateExists,
                        format!(
                            "a concept {{type: \"{}\", name: \"{}\"}} already exists",
                            new.concept_type, new.name
                        ),
                    )
                    .with_hint("rename or delete the other concept first"));
                }
            }
        }
        let definition_changed = DEFINITION_KEYS
            .iter()
            .any(|k| old.is_none_or(|o| o.attributes.get(*k) != new.attributes.get(*k)));
        if key_changed || definition_changed {
            schema::check_type_definition(&new.concept_type, &new.name, &new.attributes)?;
        }
        self.stamp(
            ElemRef::Concept(id),
            old.map(|o| &o.metadata),
            &mut new.metadata,
        );
        self.g.put_concept(id, new, old)?;
        Ok(true)
    }

    /// Creates the concept `rec` (see [`Writer::put_concept`]) and returns its id.
    pub fn create_concept(&mut self, rec: &mut ConceptRecord) -> Result<u64, KipError> {
        let id = self.g.alloc_concept_id()?;
        self.put_concept(id, None, rec)?;
        Ok(id)
    }

    /// Matches the link `(s, p, o)` or creates it: the predicate must be registered;
    /// `attrs` and `meta` are shallow-merged into an existing link's (each key given
    /// replaces the stored one). Returns the link's id and whether it was created.
    pub fn upsert_link(
        &mut self,
        s: ElemRef,
        p: &str,
        o: ElemRef,
        attrs: &Map<String, Value>,
        meta: &Map<String, Value>,
    ) -> Result<(u64, bool), KipError> {
        self.require_pred(p)?;
        match self.g.prop_by_spo(s, p, o)? {
            Some(id) => {
                let old = self
                    .g
                    .prop(id)?
                    .ok_or_else(|| KipError::internal(format!("link P:{id} vanished")))?;
                let mut rec = PropRecord {
                    attributes: super::merge(&old.attributes, attrs),
                    metadata: super::merge(&old.metadata, meta),
                    ..old.clone()
                };
                self.put_link(id, &old, &mut rec)?;
                Ok((id, false))
            }
            None => {
                let id = self.g.alloc_prop_id()?;
                let mut rec = PropRecord {
                    subject: s,
                    predicate: p.to_string(),
                    object: o,
                    attributes: attrs.clone(),
                    metadata: meta.clone(),
                };
                self.stamp(ElemRef::Prop(id), None, &mut rec.metadata);
                self.g.put_prop(id, &rec, None)?;
                Ok((id, true))
            }
        }
    }

    /// Replaces the attributes and metadata of the stored link `id` (`old`). A link's
    /// `(subject, predicate, object)` is its identity and never changes: delete it and
    /// create another. Writes nothing when `new` equals `old`; returns whether it wrote.
    pub fn put_link(
        &mut self,
        id: u64,
        old: &PropRecord,
        new: &mut PropRecord,
    ) -> Result<bool, KipError> {
        if old == &*new {
            return Ok(false);
        }
        if (old.subject, &old.predicate, old.object) != (new.subject, &new.predicate, new.object) {
            return Err(KipError::internal(format!(
                "the identity of link P:{id} cannot change"
            )));
        }
        self.stamp(ElemRef::Prop(id), Some(&old.metadata), &mut new.metadata);
        self.g.put_prop(id, new, Some(old))?;
        Ok(true)
    }

    /// `MERGE`: moves link `id` to the endpoints of `new` (same predicate), keeping its
    /// id, so links about it stay valid. `KIP_3003` if another link already has that
    /// `(subject, predicate, object)` (the merge resolves such collisions first).
    pub fn repoint_link(
        &mut self,
        id: u64,
        old: &PropRecord,
        new: &mut PropRecord,
    ) -> Result<(), KipError> {
        if new.predicate != old.predicate {
            return Err(KipError::internal("a repointed link keeps its predicate"));
        }
        if let Some(other) = self
            .g
            .prop_by_spo(new.subject, &new.predicate, new.object)?
        {
            if other != id {
                return Err(KipError::new(
                    ErrorCode::DuplicateExists,
                    format!(
                        "the link ({}, \"{}\", {}) already exists",
                        new.subject.id_string(),
                        new.predicate,
                        new.object.id_string()
                    ),
                )
                .with_hint("links are unique by (subject, predicate, object)"));
            }
        }
        self.stamp(ElemRef::Prop(id), Some(&old.metadata), &mut new.metadata);
        self.g.put_prop(id, new, Some(old))?;
        Ok(())
    }

    /// `MERGE`: removes link `id`, a duplicate whose content and whose links were
    /// moved to the surviving link.
    pub fn drop_moved_link(&mut self, id: u64, old: &PropRecord) -> Result<(), KipError> {
        let mut still = false;
        self.g.scan_out(ElemRef::Prop(id), None, &mut |_, _, _| {
            still = true;
            Ok(false)
        })?;
        self.g.scan_in(ElemRef::Prop(id), None, &mut |_, _, _| {
            still = true;
            Ok(false)
        })?;
        if still {
            return Err(KipError::internal(format!(
                "link P:{id} is still referenced after its links were moved"
            )));
        }
        self.g.delete_prop(id, old)?;
        Ok(())
    }

    /// Deletes the concepts `ids` (ids that no longer exist are skipped) and every link
    /// touching them, with the cascade of [`Writer::delete_links`]. Everything is
    /// checked before anything changes: protected concepts refuse (`KIP_3004`), a
    /// concept type with instances not deleted by the same call and a predicate still
    /// used by links refuse (`KIP_2002`). Returns the numbers of concepts and links
    /// deleted.
    pub fn delete_concepts(&mut self, ids: &[u64]) -> Result<(u64, u64), KipError> {
        let mut recs = Vec::new();
        let mut seen = HashSet::new();
        for n in ids {
            if !seen.insert(*n) {
                continue;
            }
            let Some(rec) = self.g.concept(*n)? else {
                continue;
            };
            if self.privilege != Privilege::System {
                schema::check_mutation(schema::Mutation::DeleteConcept(&rec))?;
            }
            self.check_definition_unused(&rec, ids)?;
            recs.push((*n, rec));
        }
        // The links touching the concepts, then the cascade through higher-order links.
        let mut links = Vec::new();
        for (n, _) in &recs {
            let r = ElemRef::Concept(*n);
            self.g.scan_out(r, None, &mut |_, _, id| {
                links.push(id);
                Ok(true)
            })?;
            self.g.scan_in(r, None, &mut |_, _, id| {
                links.push(id);
                Ok(true)
            })?;
        }
        let deleted_links = self.delete_links(links)?;
        for (n, rec) in &recs {
            self.g.delete_concept(*n, rec)?;
        }
        Ok((recs.len() as u64, deleted_links))
    }

    /// A type definition may be deleted only when nothing uses it: a concept type
    /// whose instances are all deleted by the same call (`deleting`), a predicate no
    /// link uses.
    fn check_definition_unused(
        &mut self,
        rec: &ConceptRecord,
        deleting: &[u64],
    ) -> Result<(), KipError> {
        if rec.concept_type == CONCEPT_TYPE {
            let in_use = self.g.stat(Stat::Type(&rec.name))?;
            if in_use == 0 {
                return Ok(());
            }
            let mut own = 0u64;
            let distinct: BTreeSet<u64> = deleting.iter().copied().collect();
            for m in distinct {
                if self
                    .g
                    .concept(m)?
                    .is_some_and(|c| c.concept_type == rec.name)
                {
                    own += 1;
                }
            }
            if in_use > own {
                return Err(KipError::new(
                    ErrorCode::ConstraintViolation,
                    format!("the concept type '{}' still has {} instance(s)", rec.name, in_use - own),
                )
                .with_hint(format!("delete or re-type its instances first: DELETE CONCEPT ?x DETACH WHERE {{ ?x {{type: \"{}\"}} }}", rec.name)));
            }
        } else if rec.concept_type == PROPOSITION_TYPE {
            let in_use = self.g.stat(Stat::Predicate(&rec.name))?;
            if in_use > 0 {
                return Err(KipError::new(
                    ErrorCode::ConstraintViolation,
                    format!("the predicate '{}' is still used by {} link(s)", rec.name, in_use),
                )
                .with_hint(format!("delete those links first: DELETE PROPOSITIONS ?l WHERE {{ ?l (?s, \"{}\", ?o) }}", rec.name)));
            }
        }
        Ok(())
    }

    /// Deletes `links` and, transitively, every link whose subject or object is a
    /// deleted link, so no reference ever dangles. A link between two protected
    /// concepts (the Genesis structure) refuses with `KIP_3004` before anything is
    /// deleted. Returns the number of links deleted.
    pub fn delete_links(&mut self, links: Vec<u64>) -> Result<u64, KipError> {
        let mut all: BTreeSet<u64> = BTreeSet::new();
        let mut queue: Vec<u64> = links;
        while let Some(id) = queue.pop() {
            if !all.insert(id) {
                continue;
            }
            let r = ElemRef::Prop(id);
            self.g.scan_out(r, None, &mut |_, _, l| {
                queue.push(l);
                Ok(true)
            })?;
            self.g.scan_in(r, None, &mut |_, _, l| {
                queue.push(l);
                Ok(true)
            })?;
        }
        let mut recs = Vec::with_capacity(all.len());
        for id in &all {
            let Some(rec) = self.g.prop(*id)? else {
                continue;
            };
            if self.privilege != Privilege::System {
                if let (ElemRef::Concept(s), ElemRef::Concept(o)) = (rec.subject, rec.object) {
                    if let (Some(sc), Some(oc)) = (self.g.concept(s)?, self.g.concept(o)?) {
                        schema::check_mutation(schema::Mutation::DeleteLink {
                            subject: &sc,
                            predicate: &rec.predicate,
                            object: &oc,
                        })?;
                    }
                }
            }
            recs.push((*id, rec));
        }
        for (id, rec) in &recs {
            self.g.delete_prop(*id, rec)?;
        }
        Ok(recs.len() as u64)
    }
}
