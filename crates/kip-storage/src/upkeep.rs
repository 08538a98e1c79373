//! The index upkeep of every change, decided once for every backend.
//!
//! A record write changes derived data: the `{type, name}` key and the type and name
//! indexes of a concept, the `(s, p, o)` key and its other orderings of a link, the text
//! postings, the attribute value index, the statistics counters and the embedding marks.
//! Which of them change, and how, is the same rule on every backend; only how an entry
//! is stored differs. So each backend implements [`IndexTarget`] (how to file one entry
//! of each kind) and calls the four drivers here from its [`crate::GraphWrite`]
//! methods ([`concept_put`], [`concept_delete`], [`prop_put`], [`prop_delete`], and
//! [`element_put`] from `store_element`) and the two building blocks from its index
//! rebuilds ([`index_text`], [`file_attrs`]). The same drivers keep the version chain
//! of history ([`crate::history::record`]), so a backend that replays its log through
//! these methods re-derives it like an index.
//!
//! Architecture invariant: no backend decides index upkeep on its own; a new kind of
//! derived data is added here and to [`IndexTarget`], and every backend then has to
//! file it (the compiler says where).

use crate::history::{self, HistoryWrite, PART_RECORD, PART_ROW};
use crate::text::{self, Doc};
use crate::{
    attrs, dependent_links, encode, ConceptRecord, ElemRef, ElementId, GraphRead, PropRecord,
    SpaceId, Stat, StoreResult, DOMAIN_PREDICATE,
};

/// How a backend files one entry of each kind of derived data, inside the write
/// transaction it is (reads through [`GraphRead`] see the transaction's own changes).
pub trait IndexTarget: GraphRead + HistoryWrite {
    /// Whether embedding marks are kept ([`crate::VECTORS_ON`]).
    fn vectors_on(&self) -> bool;

    /// Files (`Some((weighted tf, document length))`) or removes (`None`) the text
    /// posting of `term` for element `key` ([`ElemRef::encode`]).
    fn set_posting(&mut self, term: &str, key: u64, entry: Option<(u32, u32)>) -> StoreResult<()>;

    /// Files (`present`) or removes the attribute value index entry `(concept_type,
    /// attr, value key, id)` ([`attrs`]).
    fn set_attr_entry(
        &mut self,
        concept_type: &str,
        attr: &str,
        value: &str,
        id: u64,
        present: bool,
    ) -> StoreResult<()>;

    /// Files (`present`) or removes concept `id` under its `{type, name}`: the key
    /// index and the type and name indexes (the per-type count is bumped by the
    /// driver). Filing a key that another concept holds fails with
    /// [`crate::StoreError::Constraint`] (at the latest when the transaction commits).
    fn set_concept_key(
        &mut self,
        id: u64,
        concept_type: &str,
        name: &str,
        present: bool,
    ) -> StoreResult<()>;

    /// Files (`present`) or removes link `id` under `(s, p, o)` and its other orderings
    /// (the per-predicate and per-domain counts are bumped by the driver). Filing a key
    /// that another link holds fails with [`crate::StoreError::Constraint`] (at the
    /// latest when the transaction commits).
    fn set_link_key(
        &mut self,
        id: u64,
        s: ElemRef,
        p: &str,
        o: ElemRef,
        present: bool,
    ) -> StoreResult<()>;

    /// Adds `delta` to a statistics counter.
    fn bump(&mut self, stat: Stat<'_>, delta: i64) -> StoreResult<()>;

    /// Marks an element ([`ElemRef::encode`] key) as needing an embedding.
    fn mark(&mut self, key: u64) -> StoreResult<()>;

    /// Drops an element's stored embedding (the element is being deleted).
    fn drop_vector(&mut self, key: u64) -> StoreResult<()>;
}

/// Concept `id` is written as `rec`, replacing `old` when it existed.
pub fn concept_put<T: IndexTarget>(
    t: &mut T,
    id: u64,
    rec: &ConceptRecord,
    old: Option<&ConceptRecord>,
) -> StoreResult<()> {
    let key = ElemRef::Concept(id).encode();
    record_row(t, key, old, Some(rec))?;
    if old.is_none_or(|o| text::concept_text_changed(o, rec)) {
        if let Some(o) = old {
            unindex_text(t, key, &text::concept_doc(o))?;
        }
        index_text(t, key, &text::concept_doc(rec))?;
        if t.vectors_on() {
            t.mark(key)?;
            if let Some(o) = old {
                for p in dependent_links(t, id, o, rec)? {
                    t.mark(ElemRef::Prop(p).encode())?;
                }
            }
        }
    }
    file_attrs(t, id, old, Some(rec))?;
    let same_key = old.is_some_and(|o| o.concept_type == rec.concept_type && o.name == rec.name);
    if !same_key {
        if let Some(o) = old {
            file_concept_key(t, id, o, false)?;
        }
        file_concept_key(t, id, rec, true)?;
    }
    Ok(())
}

/// Concept `id`, stored as `rec`, is deleted (its links are already gone).
pub fn concept_delete<T: IndexTarget>(t: &mut T, id: u64, rec: &ConceptRecord) -> StoreResult<()> {
    let key = ElemRef::Concept(id).encode();
    record_row(t, key, Some(rec), None)?;
    unindex_text(t, key, &text::concept_doc(rec))?;
    if t.vectors_on() {
        // Marked, not unmarked: the embedding worker then drops its copy of the vector.
        t.mark(key)?;
        t.drop_vector(key)?;
    }
    file_attrs(t, id, Some(rec), None)?;
    file_concept_key(t, id, rec, false)
}

/// Link `id` is written as `rec`, replacing `old` when it existed.
pub fn prop_put<T: IndexTarget>(
    t: &mut T,
    id: u64,
    rec: &PropRecord,
    old: Option<&PropRecord>,
) -> StoreResult<()> {
    let key = ElemRef::Prop(id).encode();
    record_row(t, key, old, Some(rec))?;
    let same_key = old.is_some_and(|o| {
        o.subject == rec.subject && o.predicate == rec.predicate && o.object == rec.object
    });
    if same_key {
        return Ok(());
    }
    if t.vectors_on() {
        t.mark(key)?;
    }
    if let Some(o) = old {
        file_link_key(t, id, o, false)?;
    }
    file_link_key(t, id, rec, true)
}

/// Link `id`, stored as `rec`, is deleted.
pub fn prop_delete<T: IndexTarget>(t: &mut T, id: u64, rec: &PropRecord) -> StoreResult<()> {
    let key = ElemRef::Prop(id).encode();
    record_row(t, key, Some(rec), None)?;
    if t.vectors_on() {
        t.mark(key)?;
        t.drop_vector(key)?;
    }
    file_link_key(t, id, rec, false)
}

/// The graph row of element `key` goes from `old` to `new` (`None`: none): its history.
fn record_row<T: IndexTarget, R: serde::Serialize>(
    t: &mut T,
    key: u64,
    old: Option<&R>,
    new: Option<&R>,
) -> StoreResult<()> {
    history::record(
        t,
        SpaceId::DEFAULT,
        key,
        PART_ROW,
        |_| old.map(encode).transpose(),
        || new.map(encode).transpose(),
    )
}

/// Element record `id` of `space` is about to be stored as `rec` (created, its state
/// replaced, or purged to a stub): keeps the record it replaces in the version chain.
/// Every backend calls it from `store_element`, before writing.
pub fn element_put<T: IndexTarget>(
    t: &mut T,
    space: SpaceId,
    id: ElementId,
    rec: &crate::ElementRecord,
) -> StoreResult<()> {
    history::record(
        t,
        space,
        id.encode(),
        PART_RECORD,
        |t| t.element(space, id)?.map(|r| r.encode()).transpose(),
        || rec.encode().map(Some),
    )
}

/// Adds a document to the text index (a document without terms is not indexed, and
/// not counted).
pub fn index_text<T: IndexTarget>(t: &mut T, key: u64, doc: &Doc) -> StoreResult<()> {
    if doc.terms.is_empty() {
        return Ok(());
    }
    for (term, tf) in &doc.terms {
        t.set_posting(term, key, Some((*tf, doc.len)))?;
    }
    t.bump(Stat::TextDocs, 1)?;
    t.bump(Stat::TextLen, i64::from(doc.len))
}

/// Removes a document from the text index. `doc` is the analysed text of the element
/// as it was indexed: the text index is always updated in the transaction that changes
/// the record, with the analysis of [`text::TEXT_INDEX_VERSION`] (a store indexed by
/// another version is rebuilt when it is opened).
pub fn unindex_text<T: IndexTarget>(t: &mut T, key: u64, doc: &Doc) -> StoreResult<()> {
    if doc.terms.is_empty() {
        // Never indexed (see `index_text`).
        return Ok(());
    }
    for term in doc.terms.keys() {
        t.set_posting(term, key, None)?;
    }
    t.bump(Stat::TextDocs, -1)?;
    t.bump(Stat::TextLen, -i64::from(doc.len))
}

/// Moves concept `id` in the attribute value index from what `old` filed (if any) to
/// what `new` files (if any): only the entries that differ change, with the
/// per-`(type, attribute)` counts.
pub fn file_attrs<T: IndexTarget>(
    t: &mut T,
    id: u64,
    old: Option<&ConceptRecord>,
    new: Option<&ConceptRecord>,
) -> StoreResult<()> {
    let (removed, added) = attrs::diff(old, new);
    for (ty, a, v) in removed {
        t.set_attr_entry(ty, a, &v, id, false)?;
        t.bump(Stat::Attr(ty, a), -1)?;
    }
    for (ty, a, v) in added {
        t.set_attr_entry(ty, a, &v, id, true)?;
        t.bump(Stat::Attr(ty, a), 1)?;
    }
    Ok(())
}

fn file_concept_key<T: IndexTarget>(
    t: &mut T,
    id: u64,
    rec: &ConceptRecord,
    add: bool,
) -> StoreResult<()> {
    t.set_concept_key(id, &rec.concept_type, &rec.name, add)?;
    t.bump(Stat::Type(&rec.concept_type), if add { 1 } else { -1 })
}

fn file_link_key<T: IndexTarget>(
    t: &mut T,
    id: u64,
    rec: &PropRecord,
    add: bool,
) -> StoreResult<()> {
    t.set_link_key(id, rec.subject, &rec.predicate, rec.object, add)?;
    let sign = if add { 1 } else { -1 };
    t.bump(Stat::Predicate(&rec.predicate), sign)?;
    if rec.predicate == DOMAIN_PREDICATE {
        t.bump(Stat::Domain(rec.object), sign)?;
    }
    Ok(())
}
