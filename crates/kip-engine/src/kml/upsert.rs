//! `UPSERT`: sequential blocks, handles defined before use, concepts matched or created
//! by `{type, name}` (or matched by `{id}`), propositions matched or created by their
//! `(subject, predicate, object)` (or matched by `(id: ...)`), shallow-merged attributes
//! and metadata with UPSERT < block < entry precedence, schema and protection checks.
//!
//! The function only reads and writes through [`GraphWrite`]; the caller owns the
//! transaction and commits it only when this returns `Ok`.

use super::{merge, object, text};
use crate::schema::{CONCEPT_TYPE, PROPOSITION_TYPE};
use crate::store::{ConceptRecord, ElemRef, GraphWrite, PropRecord};
use kip_lang::ast::{
    ConceptBlock, ConceptMatcher, Endpoint, PredicatePattern, PropositionBlock, PropositionMatcher,
    PropositionPattern, Slot, Upsert, UpsertBlock, Variable,
};
use kip_lang::{ErrorCode, KipError};
use serde_json::{json, Map, Value};
use std::collections::HashMap;

pub use super::primitives::Privilege;
use super::primitives::{refuse_reserved, Writer};

struct Ctx<'g> {
    w: Writer<'g>,
    handles: HashMap<String, ElemRef>,
    stmt_meta: Map<String, Value>,
    /// Only create what is missing; leave every existing element as it is.
    create_only: bool,
}

/// Executes an UPSERT; returns `{"blocks", "upsert_concept_nodes", "upsert_proposition_links"}`.
pub fn upsert(g: &mut dyn GraphWrite, u: &Upsert, privilege: Privilege) -> Result<Value, KipError> {
    run(g, u, privilege, false)
}

/// The system loader's upgrade of an older store: creates the concepts and links of
/// `u` that do not exist yet; an existing concept (with its `SET PROPOSITIONS`) or link
/// is left exactly as it is, but its handle is bound for the blocks after it.
pub fn upsert_missing(g: &mut dyn GraphWrite, u: &Upsert) -> Result<Value, KipError> {
    run(g, u, Privilege::System, true)
}

fn run(
    g: &mut dyn GraphWrite,
    u: &Upsert,
    privilege: Privilege,
    create_only: bool,
) -> Result<Value, KipError> {
    check_handles(u)?;
    if privilege != Privilege::System {
        refuse_reserved_metadata(u)?;
    }
    let mut ctx = Ctx {
        w: Writer::new(g, privilege),
        handles: HashMap::new(),
        stmt_meta: object(&u.metadata)?,
        create_only,
    };
    let mut concept_ids = Vec::new();
    let mut prop_ids = Vec::new();
    // For a store whose lookups are round trips (PostgreSQL): the keys of the
    // statement at once, instead of one round trip per block.
    let prefetch = u.blocks.len() > 1 && ctx.w.graph().wants_prefetch();
    if prefetch {
        ctx.prefetch_concepts(u)?;
    }
    let mut links_prefetched = !prefetch;
    for (i, block) in u.blocks.iter().enumerate() {
        match block {
            UpsertBlock::Concept(c) => {
                let id = ctx.concept_block(c)?;
                concept_ids.push(ElemRef::Concept(id).id_string());
            }
            UpsertBlock::Proposition(p) => {
                if !links_prefetched {
                    // The handles of the blocks before this one are bound now.
                    ctx.prefetch_links(&u.blocks[i..])?;
                    links_prefetched = true;
                }
                let id = ctx.proposition_block(p)?;
                prop_ids.push(ElemRef::Prop(id).id_string());
            }
        }
    }
    Ok(json!({
        "blocks": u.blocks.len(),
        "upsert_concept_nodes": concept_ids,
        "upsert_proposition_links": prop_ids,
    }))
}

/// `KIP_2002` for a reserved `_` key in any `WITH METADATA` of the statement.
fn refuse_reserved_metadata(u: &Upsert) -> Result<(), KipError> {
    let keys = |o: &Option<kip_lang::ast::ObjectExpr>| -> Vec<String> {
        o.as_ref()
            .map(|o| o.entries.iter().map(|(k, _)| k.clone()).collect())
            .unwrap_or_default()
    };
    refuse_reserved(&keys(&u.metadata))?;
    for b in &u.blocks {
        match b {
            UpsertBlock::Concept(c) => {
                refuse_reserved(&keys(&c.metadata))?;
                for p in c.set_propositions.iter().flatten() {
                    refuse_reserved(&keys(&p.metadata))?;
                }
            }
            UpsertBlock::Proposition(p) => refuse_reserved(&keys(&p.metadata))?,
        }
    }
    Ok(())
}

/// A handle may be defined once per UPSERT.
fn check_handles(u: &Upsert) -> Result<(), KipError> {
    let mut seen = HashMap::new();
    for b in &u.blocks {
        let h = match b {
            UpsertBlock::Concept(c) => c.handle.as_ref(),
            UpsertBlock::Proposition(p) => p.handle.as_ref(),
        };
        if let Some(h) = h {
            if seen.insert(h.name.clone(), ()).is_some() {
                return Err(KipError::syntax(format!(
                    "handle ?{} is defined by two blocks of the same UPSERT",
                    h.name
                ))
                .with_hint("give every CONCEPT/PROPOSITION block its own handle"));
            }
        }
    }
    Ok(())
}

fn not_found(what: String) -> KipError {
    KipError::new(ErrorCode::NotFound, format!("NotFound: {what} does not exist"))
        .with_hint("it may have been deleted or never created; use SEARCH or FIND to get the exact type, name or id, or create it first in a CONCEPT block")
}

impl Ctx<'_> {
    /// `{type, name}` -> id (write transactions cache these across statements, so a
    /// capsule naming the same endpoints again does not go back to the store).
    fn lookup_key(&mut self, t: &str, n: &str) -> Result<Option<u64>, KipError> {
        Ok(self.w.graph().concept_by_key(t, n)?)
    }

    /// Tells the store every `{type, name}` the statement names (blocks, link
    /// endpoints, `SET PROPOSITIONS` targets), so that a store with costly lookups
    /// reads them at once ([`GraphRead::prefetch`]).
    fn prefetch_concepts(&mut self, u: &Upsert) -> Result<(), KipError> {
        fn add<'a>(keys: &mut Vec<(&'a str, &'a str)>, m: &'a ConceptMatcher) {
            if let (Some(t), Some(n)) = (&m.concept_type, &m.name) {
                if let (Ok(t), Ok(n)) = (text(t), text(n)) {
                    keys.push((t, n));
                }
            }
        }
        // The concepts' types and the links' predicates are checked against their
        // definitions ({"$ConceptType", T}, {"$PropositionType", P}): asked for too.
        fn add_type<'a>(keys: &mut Vec<(&'a str, &'a str)>, m: &'a ConceptMatcher) {
            if let Some(Ok(t)) = m.concept_type.as_ref().map(text) {
                keys.push((CONCEPT_TYPE, t));
            }
        }
        let mut keys: Vec<(&str, &str)> = Vec::new();
        for b in &u.blocks {
            match b {
                UpsertBlock::Concept(c) => {
                    add(&mut keys, &c.identity);
                    add_type(&mut keys, &c.identity);
                    for e in c.set_propositions.iter().flatten() {
                        if let Ok(p) = text(&e.predicate) {
                            keys.push((PROPOSITION_TYPE, p));
                        }
                        if let Endpoint::Concept { matcher, .. } = &e.target {
                            add(&mut keys, matcher);
                        }
                    }
                }
                UpsertBlock::Proposition(p) => {
                    if let PropositionMatcher::Triple(t) = &p.identity.matcher {
                        if let PredicatePattern::Literal { alternatives, .. } = &t.predicate {
                            for a in alternatives {
                                if let Ok(p) = text(a) {
                                    keys.push((PROPOSITION_TYPE, p));
                                }
                            }
                        }
                        for e in [&t.subject, &t.object] {
                            if let Endpoint::Concept { matcher, .. } = e {
                                add(&mut keys, matcher);
                            }
                        }
                    }
                }
            }
        }
        Ok(self.w.graph().prefetch(&keys, &[])?)
    }

    /// Tells the store the `(subject, predicate, object)` of the link blocks in
    /// `blocks` whose endpoints are known already (bound handles, `{type, name}` of
    /// existing concepts); the others are looked up one by one as they run.
    fn prefetch_links(&mut self, blocks: &[UpsertBlock]) -> Result<(), KipError> {
        let mut triples: Vec<(ElemRef, &str, ElemRef)> = Vec::new();
        for b in blocks {
            let UpsertBlock::Proposition(p) = b else {
                continue;
            };
            let PropositionMatcher::Triple(t) = &p.identity.matcher else {
                continue;
            };
            let PredicatePattern::Literal {
                alternatives,
                hops: None,
                ..
            } = &t.predicate
            else {
                continue;
            };
            let [pred] = alternatives.as_slice() else {
                continue;
            };
            let (Some(s), Some(o), Ok(pred)) = (
                self.known_endpoint(&t.subject)?,
                self.known_endpoint(&t.object)?,
                text(pred),
            ) else {
                continue;
            };
            triples.push((s, pred, o));
        }
        if triples.len() > 1 {
            self.w.graph().prefetch(&[], &triples)?;
        }
        Ok(())
    }

    /// An endpoint's element if it can be known without creating anything: a bound
    /// handle, or an existing concept's `{type, name}`.
    fn known_endpoint(&mut self, e: &Endpoint) -> Result<Option<ElemRef>, KipError> {
        Ok(match e {
            Endpoint::Var(v) => self.handles.get(&v.name).copied(),
            Endpoint::Concept { matcher, .. } => match (&matcher.concept_type, &matcher.name) {
                (Some(t), Some(n)) => match (text(t), text(n)) {
                    (Ok(t), Ok(n)) => self.lookup_key(t, n)?.map(ElemRef::Concept),
                    _ => None,
                },
                _ => None,
            },
            Endpoint::Proposition(_) => None,
        })
    }

    fn handle(&self, v: &Variable) -> Result<ElemRef, KipError> {
        self.handles.get(&v.name).copied().ok_or_else(|| {
            KipError::new(
                ErrorCode::ReferenceError,
                format!("handle ?{} is not defined before it is used", v.name),
            )
            .with_hint("define the CONCEPT or PROPOSITION block with this handle earlier in the same UPSERT (blocks run top to bottom)")
        })
    }

    /// Resolves an existing concept named by `{type, name}` or `{id}`.
    fn existing_concept(&mut self, m: &ConceptMatcher) -> Result<u64, KipError> {
        if let Some(id) = &m.id {
            let id = text(id)?;
            return match ElemRef::parse_id(id) {
                Some(ElemRef::Concept(n)) if self.w.graph().concept(n)?.is_some() => Ok(n),
                _ => Err(not_found(format!("concept {{id: \"{id}\"}}"))),
            };
        }
        let (Some(t), Some(n)) = (&m.concept_type, &m.name) else {
            return Err(KipError::syntax(
                "a concept reference must be {type, name} or {id}",
            ));
        };
        let (t, n) = (text(t)?, text(n)?);
        self.w.require_type(t)?;
        self.lookup_key(t, n)?
            .ok_or_else(|| not_found(format!("concept {{type: \"{t}\", name: \"{n}\"}}")))
    }

    fn endpoint(&mut self, e: &Endpoint) -> Result<ElemRef, KipError> {
        match e {
            Endpoint::Var(v) => self.handle(v),
            Endpoint::Concept { matcher, .. } => {
                Ok(ElemRef::Concept(self.existing_concept(matcher)?))
            }
            Endpoint::Proposition(p) => Ok(ElemRef::Prop(self.existing_prop(p)?)),
        }
    }

    fn predicate(&mut self, p: &PredicatePattern) -> Result<String, KipError> {
        match p {
            PredicatePattern::Literal {
                alternatives,
                hops: None,
                ..
            } if alternatives.len() == 1 => {
                let name = text(&alternatives[0])?;
                self.w.require_pred(name)?;
                Ok(name.to_string())
            }
            _ => Err(KipError::syntax("UPSERT needs one literal predicate")
                .with_hint("write the predicate as a quoted string")),
        }
    }

    /// Resolves an existing proposition named by `(id: ...)` or a structural pattern.
    fn existing_prop(&mut self, p: &PropositionPattern) -> Result<u64, KipError> {
        match &p.matcher {
            PropositionMatcher::Id(id) => {
                let id = text(id)?;
                match ElemRef::parse_id(id) {
                    Some(ElemRef::Prop(n)) if self.w.graph().prop(n)?.is_some() => Ok(n),
                    _ => Err(not_found(format!("proposition (id: \"{id}\")"))),
                }
            }
            PropositionMatcher::Triple(t) => {
                let s = self.endpoint(&t.subject)?;
                let pred = self.predicate(&t.predicate)?;
                let o = self.endpoint(&t.object)?;
                self.w.graph().prop_by_spo(s, &pred, o)?.ok_or_else(|| {
                    not_found(format!(
                        "proposition ({}, \"{pred}\", {})",
                        s.id_string(),
                        o.id_string()
                    ))
                })
            }
        }
    }

    /// `EXPECT VERSION n`: `KIP_3005` unless the element's `_version` before this
    /// statement is `n` (0: it did not exist).
    fn check_version(
        &self,
        expected: &Option<Slot<u64>>,
        r: ElemRef,
        current: Option<&Map<String, Value>>,
        what: impl FnOnce() -> String,
    ) -> Result<(), KipError> {
        let Some(slot) = expected else {
            return Ok(());
        };
        let Some(&want) = slot.literal() else {
            return Err(super::unbound("EXPECT VERSION"));
        };
        let have = self.w.version_before(r, current);
        if have == want {
            return Ok(());
        }
        let what = what();
        let message = match (want, have) {
            (0, _) => format!("VersionConflict: {what} already exists (at _version {have}); EXPECT VERSION 0 only creates"),
            (_, 0) => format!("VersionConflict: {what} does not exist; the block expected _version {want}"),
            _ => format!("VersionConflict: {what} is at _version {have}; the block expected {want}"),
        };
        Err(KipError::new(ErrorCode::VersionConflict, message).with_hint(
            "nothing was written: re-read the element (FIND(?x, ?x.metadata._version) ...), re-apply your change to what you read, and retry with EXPECT VERSION set to the fresh _version",
        ))
    }

    fn bind(&mut self, h: &Option<Variable>, r: ElemRef) {
        if let Some(h) = h {
            self.handles.insert(h.name.clone(), r);
        }
    }

    fn concept_block(&mut self, c: &ConceptBlock) -> Result<u64, KipError> {
        let set_attrs = object(&c.set_attributes)?;
        let block_meta = merge(&self.stmt_meta, &object(&c.metadata)?);
        let (id, existing, ty, name) = if c.identity.id.is_some() {
            let id = self.existing_concept(&c.identity)?;
            let rec = self
                .w
                .graph()
                .concept(id)?
                .ok_or_else(|| not_found(format!("concept C:{id}")))?;
            let (t, n) = (rec.concept_type.clone(), rec.name.clone());
            (id, Some(rec), t, n)
        } else {
            let (Some(t), Some(n)) = (&c.identity.concept_type, &c.identity.name) else {
                return Err(KipError::syntax(
                    "a CONCEPT block is identified by {type, name} or {id}",
                ));
            };
            let (t, n) = (text(t)?.to_string(), text(n)?.to_string());
            // `$ConceptType` defines itself (Genesis); every other type must be registered,
            // possibly by an earlier block of this UPSERT.
            if !(t == CONCEPT_TYPE && n == CONCEPT_TYPE) {
                self.w.require_type(&t)?;
            }
            match self.lookup_key(&t, &n)? {
                Some(id) => {
                    let rec = self
                        .w
                        .graph()
                        .concept(id)?
                        .ok_or_else(|| not_found(format!("concept C:{id}")))?;
                    (id, Some(rec), t, n)
                }
                None => (self.w.graph().alloc_concept_id()?, None, t, n),
            }
        };
        if self.create_only && existing.is_some() {
            self.bind(&c.handle, ElemRef::Concept(id));
            return Ok(id);
        }
        self.check_version(
            &c.expect_version,
            ElemRef::Concept(id),
            existing.as_ref().map(|r| &r.metadata),
            || format!("{{type: \"{ty}\", name: \"{name}\"}}"),
        )?;

        let base = existing.clone().unwrap_or_else(|| ConceptRecord {
            concept_type: ty.clone(),
            name: name.clone(),
            attributes: Map::new(),
            metadata: Map::new(),
        });
        let mut rec = ConceptRecord {
            concept_type: ty,
            name,
            attributes: merge(&base.attributes, &set_attrs),
            metadata: merge(&base.metadata, &block_meta),
        };
        self.w.put_concept(id, existing.as_ref(), &mut rec)?;
        self.bind(&c.handle, ElemRef::Concept(id));

        if let Some(entries) = &c.set_propositions {
            for e in entries {
                let pred = text(&e.predicate)?;
                self.w.require_pred(pred)?;
                let target = self.endpoint(&e.target)?;
                let meta = merge(&block_meta, &object(&e.metadata)?);
                self.w
                    .upsert_link(ElemRef::Concept(id), pred, target, &Map::new(), &meta)?;
            }
        }
        Ok(id)
    }

    fn proposition_block(&mut self, p: &PropositionBlock) -> Result<u64, KipError> {
        let set_attrs = object(&p.set_attributes)?;
        let meta = merge(&self.stmt_meta, &object(&p.metadata)?);
        let id = match &p.identity.matcher {
            PropositionMatcher::Id(_) if self.create_only => self.existing_prop(&p.identity)?,
            PropositionMatcher::Id(_) => {
                let id = self.existing_prop(&p.identity)?;
                let old = self
                    .w
                    .graph()
                    .prop(id)?
                    .ok_or_else(|| not_found(format!("proposition P:{id}")))?;
                self.check_version(
                    &p.expect_version,
                    ElemRef::Prop(id),
                    Some(&old.metadata),
                    || format!("the proposition P:{id}"),
                )?;
                let mut rec = PropRecord {
                    attributes: merge(&old.attributes, &set_attrs),
                    metadata: merge(&old.metadata, &meta),
                    ..old.clone()
                };
                self.w.put_link(id, &old, &mut rec)?;
                id
            }
            PropositionMatcher::Triple(t) => {
                let s = self.endpoint(&t.subject)?;
                let pred = self.predicate(&t.predicate)?;
                let o = self.endpoint(&t.object)?;
                if self.create_only {
                    if let Some(id) = self.w.graph().prop_by_spo(s, &pred, o)? {
                        self.bind(&p.handle, ElemRef::Prop(id));
                        return Ok(id);
                    }
                }
                if p.expect_version.is_some() {
                    let current = match self.w.graph().prop_by_spo(s, &pred, o)? {
                        Some(id) => self.w.graph().prop(id)?.map(|r| (id, r.metadata)),
                        None => None,
                    };
                    let r = current
                        .as_ref()
                        .map_or(ElemRef::Prop(u64::MAX), |(id, _)| ElemRef::Prop(*id));
                    self.check_version(
                        &p.expect_version,
                        r,
                        current.as_ref().map(|(_, m)| m),
                        || {
                            format!(
                                "the proposition ({}, \"{pred}\", {})",
                                s.id_string(),
                                o.id_string()
                            )
                        },
                    )?;
                }
                self.w.upsert_link(s, &pred, o, &set_attrs, &meta)?.0
            }
        };
        self.bind(&p.handle, ElemRef::Prop(id));
        Ok(id)
    }
}
