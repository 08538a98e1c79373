//! # kip-storage
//!
//! The storage contract of the Cognitive Nexus: what every backend implements and the
//! engine calls, with no database in it. Its parts:
//!
//! - the records ([`ConceptRecord`], [`PropRecord`]), element references
//!   ([`ElemRef`]) and their MessagePack encoding ([`encode`], [`decode`]);
//! - the KIP 2.0 element kinds beside them ([`elements`]: [`ElementId`],
//!   [`ElementRecord`], [`ElementRead`] / [`ElementWrite`], keyed by [`SpaceId`]);
//! - history ([`history`]: the space sequence, commit records and the version chain,
//!   recorded by the upkeep driver) and reads of the past ([`asof::AsOf`], a
//!   [`GraphRead`] over any backend's current snapshot and history primitives);
//! - the narrow interface the executors use: [`GraphRead`] (a consistent snapshot)
//!   and [`GraphWrite`] (one write transaction);
//! - [`backend::Backend`], what the engine holds, and [`backend::LocalLog`], the
//!   extension a backend with a log and files of its own (redb) offers;
//! - the typed [`StoreError`];
//! - the derived data every backend keeps the same way: text analysis ([`text`]), the
//!   attribute value index ([`attrs`]), statistics keys ([`Stat`]) and ONE index-upkeep
//!   driver ([`upkeep`]) that each backend's writer calls, so the indexes, counts and
//!   embedding marks of a change are decided in one place.
//!
//! The backends are siblings that depend on this crate: `kip-store` (redb, embedded),
//! `kip-store-pg` (PostgreSQL) and `kip-store-mem` (in memory). The engine depends on
//! this crate only; which backend a location names is decided by the composition root
//! (`kip-open`). What a backend must guarantee is written in ARCHITECTURE.md ("What a
//! backend must guarantee") and checked by the conformance kit (`conformance`, behind
//! the feature of that name), which every backend's own tests run.
//!
//! Architecture invariant: this crate depends on no database (`cargo tree -p
//! kip-storage` lists neither redb nor a PostgreSQL driver).

pub mod asof;
pub mod attrs;
pub mod backend;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod elements;
pub mod error;
pub mod history;
pub mod text;
pub mod throttle;
pub mod upkeep;
pub mod usage;

pub use elements::{
    ElementId, ElementKind, ElementRead, ElementRecord, ElementRef, ElementWrite, SpaceId,
};
pub use error::StoreError;
pub use history::{HistoryRead, HistoryWrite};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `meta` key: the version of the text analysis the text index was built with
/// ([`text::TEXT_INDEX_VERSION`]); a store indexed by another version is rebuilt on open.
pub const TEXT_INDEX_KEY: &str = "text_index_version";

/// Statistics key: number of documents in the text index.
pub const TEXT_DOCS: &str = "ft:docs";
/// Statistics key: total weighted length of the indexed documents.
pub const TEXT_LEN: &str = "ft:len";

/// A counter of the `stats` table, by what it counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat<'a> {
    /// Concepts of a type.
    Type(&'a str),
    /// Links with a predicate.
    Predicate(&'a str),
    /// Members of a domain (links `belongs_to_domain` to it).
    Domain(ElemRef),
    /// Documents in the text index.
    TextDocs,
    /// Total weighted length of the documents in the text index.
    TextLen,
    /// Concepts of a type (first) with an indexed value of an attribute (second):
    /// see [`attrs`].
    Attr(&'a str, &'a str),
}

impl Stat<'_> {
    /// The counter's key in the `stats` table.
    pub fn key(&self) -> std::borrow::Cow<'static, str> {
        match self {
            Stat::Type(t) => format!("t:{t}").into(),
            Stat::Predicate(p) => format!("p:{p}").into(),
            Stat::Domain(d) => format!("dm:{}", d.id_string()).into(),
            Stat::TextDocs => TEXT_DOCS.into(),
            Stat::TextLen => TEXT_LEN.into(),
            Stat::Attr(t, a) => attrs::stat_key(t, a).into(),
        }
    }
}

/// The predicate whose links define domain membership (counted per domain in `stats`).
pub const DOMAIN_PREDICATE: &str = "belongs_to_domain";
/// The meta-type of predicate definitions (the engine's schema names it too).
pub const PROPOSITION_TYPE: &str = "$PropositionType";

/// Classifies an error (of I/O, of record encoding, or a message) as a
/// [`StoreError`]: `.map_err(storage_error)`.
pub fn storage_error(e: impl Into<StoreError>) -> StoreError {
    e.into()
}

/// The result type of storage operations: a typed [`StoreError`], turned into a KIP
/// error (`KIP_4003` with a precise message and hint) only where the engine's `?`
/// meets it ([`From<StoreError> for KipError`](StoreError)).
pub type StoreResult<T> = Result<T, StoreError>;

const PROP_BIT: u64 = 1 << 63;

/// A reference to a concept or a proposition (a subject or object of a link).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ElemRef {
    /// A concept node, by number.
    Concept(u64),
    /// A proposition link, by number.
    Prop(u64),
}

impl ElemRef {
    /// The single-`u64` key encoding.
    pub fn encode(self) -> u64 {
        match self {
            ElemRef::Concept(n) => n,
            ElemRef::Prop(n) => n | PROP_BIT,
        }
    }

    /// Decodes [`ElemRef::encode`].
    pub fn decode(v: u64) -> ElemRef {
        if v & PROP_BIT != 0 {
            ElemRef::Prop(v & !PROP_BIT)
        } else {
            ElemRef::Concept(v)
        }
    }

    /// The public ID string (`C:12`, `P:7`).
    pub fn id_string(self) -> String {
        match self {
            ElemRef::Concept(n) => format!("C:{n}"),
            ElemRef::Prop(n) => format!("P:{n}"),
        }
    }

    /// Parses a public ID; `None` for anything that is not one of ours.
    pub fn parse_id(s: &str) -> Option<ElemRef> {
        let (kind, num) = s.split_once(':')?;
        if num.is_empty()
            || !num.bytes().all(|b| b.is_ascii_digit())
            || (num.len() > 1 && num.starts_with('0'))
        {
            return None;
        }
        let n: u64 = num.parse().ok()?;
        if n == 0 || n & PROP_BIT != 0 {
            return None;
        }
        match kind {
            "C" => Some(ElemRef::Concept(n)),
            "P" => Some(ElemRef::Prop(n)),
            _ => None,
        }
    }
}

/// A stored concept node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConceptRecord {
    /// Its type (a registered `$ConceptType` name).
    #[serde(rename = "t")]
    pub concept_type: String,
    /// Its name.
    #[serde(rename = "n")]
    pub name: String,
    /// Attributes.
    #[serde(rename = "a")]
    pub attributes: Map<String, Value>,
    /// Metadata.
    #[serde(rename = "m")]
    pub metadata: Map<String, Value>,
}

/// A stored proposition link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PropRecord {
    /// Subject.
    #[serde(rename = "s", with = "elem_ref_serde")]
    pub subject: ElemRef,
    /// Predicate (a registered `$PropositionType` name).
    #[serde(rename = "p")]
    pub predicate: String,
    /// Object.
    #[serde(rename = "o", with = "elem_ref_serde")]
    pub object: ElemRef,
    /// Attributes.
    #[serde(rename = "a")]
    pub attributes: Map<String, Value>,
    /// Metadata.
    #[serde(rename = "m")]
    pub metadata: Map<String, Value>,
}

mod elem_ref_serde {
    use super::ElemRef;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(r: &ElemRef, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(r.encode())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ElemRef, D::Error> {
        Ok(ElemRef::decode(u64::deserialize(d)?))
    }
}

/// Encodes a record as MessagePack.
pub fn encode<T: Serialize>(rec: &T) -> StoreResult<Vec<u8>> {
    rmp_serde::to_vec_named(rec).map_err(storage_error)
}

/// Decodes a MessagePack record.
pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> StoreResult<T> {
    rmp_serde::from_slice(bytes).map_err(storage_error)
}

/// Whether a scan callback wants more rows.
pub type Continue = bool;

/// Read access to the graph; implemented by read snapshots and by write transactions
/// (which see their own uncommitted writes).
pub trait GraphRead: RequestLog + ElementRead + HistoryRead {
    /// A concept by number.
    fn concept(&self, id: u64) -> StoreResult<Option<ConceptRecord>>;
    /// A concept's type and name, without decoding its attributes and metadata.
    fn concept_head(&self, id: u64) -> StoreResult<Option<(String, String)>> {
        Ok(self.concept(id)?.map(|c| (c.concept_type, c.name)))
    }
    /// The concept with this `(type, name)`.
    fn concept_by_key(&self, concept_type: &str, name: &str) -> StoreResult<Option<u64>>;
    /// Concepts of a type, in id order.
    fn scan_type(
        &self,
        concept_type: &str,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()>;
    /// Concepts with a name (any type), in id order.
    fn scan_name(
        &self,
        name: &str,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()>;
    /// Every concept, in id order.
    fn scan_concepts(&self, f: &mut dyn FnMut(u64) -> StoreResult<Continue>) -> StoreResult<()>;
    /// A proposition by number.
    fn prop(&self, id: u64) -> StoreResult<Option<PropRecord>>;
    /// The proposition `(s, p, o)`, if it exists.
    fn prop_by_spo(&self, s: ElemRef, p: &str, o: ElemRef) -> StoreResult<Option<u64>>;
    /// Links with subject `s` (and predicate `p` if given): `f(predicate, object, id)`.
    fn scan_out(
        &self,
        s: ElemRef,
        p: Option<&str>,
        f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()>;
    /// Links with object `o` (and predicate `p` if given): `f(predicate, subject, id)`.
    fn scan_in(
        &self,
        o: ElemRef,
        p: Option<&str>,
        f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()>;
    /// The links of many elements at once: for each of `nodes` in the order given,
    /// its links (as subject when `forward`, else as object) with each predicate of
    /// `names` in that order, in the other end's order: `f(node, predicate, other end,
    /// id)` until it returns false. The same calls, in the same order, as
    /// [`GraphRead::scan_out`]/[`GraphRead::scan_in`] per node and per predicate (the
    /// default); a backend whose scans are round trips answers it in one query.
    fn scan_many(
        &self,
        nodes: &[ElemRef],
        names: &[String],
        forward: bool,
        f: &mut dyn FnMut(ElemRef, &str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let mut more = true;
        for node in nodes {
            for n in names {
                let mut cb = |p: &str, v: ElemRef, id: u64| -> StoreResult<Continue> {
                    more = f(*node, p, v, id)?;
                    Ok(more)
                };
                if forward {
                    self.scan_out(*node, Some(n), &mut cb)?;
                } else {
                    self.scan_in(*node, Some(n), &mut cb)?;
                }
                if !more {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
    /// Links with predicate `p`: `f(subject, object, id)`.
    fn scan_predicate(
        &self,
        p: &str,
        f: &mut dyn FnMut(ElemRef, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()>;
    /// Every link, in id order.
    fn scan_props(&self, f: &mut dyn FnMut(u64) -> StoreResult<Continue>) -> StoreResult<()>;
    /// A statistics counter.
    fn stat(&self, key: Stat<'_>) -> StoreResult<u64>;
    /// Total numbers of concepts and propositions.
    fn totals(&self) -> StoreResult<(u64, u64)>;
    /// A raw `meta` value.
    fn meta(&self, key: &str) -> StoreResult<Option<Vec<u8>>>;
    /// Text postings in term order from `from`:
    /// `f(term, element key, weighted tf, document length)`.
    fn scan_postings(
        &self,
        from: &str,
        f: &mut dyn FnMut(&str, u64, u32, u32) -> StoreResult<Continue>,
    ) -> StoreResult<()>;
    /// The weighted frequency of `term` in an indexed document and the document's
    /// weighted length.
    fn posting(&self, term: &str, key: u64) -> StoreResult<Option<(u32, u32)>>;
    /// Concepts of `concept_type` by the indexed value of their attribute `attr`
    /// ([`attrs`]), in value order (descending when `rev`), with value keys within
    /// `(lo, hi)` (keys made by [`attrs::value_key`], [`attrs::number_key`],
    /// [`attrs::string_key`] or a kind tag): `f(value key, concept)`. Concepts with the
    /// same value come in id order (reversed when `rev`).
    fn scan_attr(
        &self,
        concept_type: &str,
        attr: &str,
        lo: std::ops::Bound<&str>,
        hi: std::ops::Bound<&str>,
        rev: bool,
        f: &mut dyn FnMut(&str, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()>;
    /// Whether [`GraphRead::prefetch`] is worth the caller's effort (false: the default
    /// does nothing, so a caller need not gather keys for it).
    fn wants_prefetch(&self) -> bool {
        false
    }
    /// A hint before a statement that will look up many concept keys (`{type, name}`)
    /// and link keys (`(subject, predicate, object)`): a backend whose lookups are
    /// round trips to a server reads them all at once and answers the lookups that
    /// follow from memory. Never needed for correctness; the default does nothing.
    fn prefetch(
        &self,
        _concepts: &[(&str, &str)],
        _links: &[(ElemRef, &str, ElemRef)],
    ) -> StoreResult<()> {
        Ok(())
    }
    /// A hint that the records of `elems` (concepts and propositions) are about to be
    /// read, one by one: a backend whose reads are round trips reads them at once.
    /// Never needed for correctness; the default does nothing.
    fn prefetch_elements(&self, _elems: &[ElemRef]) -> StoreResult<()> {
        Ok(())
    }
    /// The number of links into each of `nodes` with predicate `p`, in the order of
    /// `nodes`. The default counts what [`GraphRead::scan_in`] visits; a backend whose
    /// scans are round trips counts where the links are.
    fn count_in_many(&self, nodes: &[ElemRef], p: &str) -> StoreResult<Vec<u64>> {
        let mut out = Vec::with_capacity(nodes.len());
        for n in nodes {
            let mut k = 0u64;
            self.scan_in(*n, Some(p), &mut |_, _, _| {
                k += 1;
                Ok(true)
            })?;
            out.push(k);
        }
        Ok(out)
    }
    /// The concepts named each of `names`, as [`GraphRead::scan_name`] gives them for
    /// one name: `f(name, concept number)`, the names in the order given, each one's
    /// numbers ascending; `f` returning `false` stops the whole scan. The default scans
    /// one name after the other; a backend whose scans are round trips reads many names
    /// per query (`kip check` compares the whole name index this way).
    fn scan_names(
        &self,
        names: &[&str],
        f: &mut dyn FnMut(&str, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        for name in names {
            let mut go = true;
            self.scan_name(name, &mut |n| {
                go = f(name, n)?;
                Ok(go)
            })?;
            if !go {
                break;
            }
        }
        Ok(())
    }
    /// A hint that [`GraphRead::posting`] is about to be asked for each of `postings`
    /// (`(term, element key)`), one by one: a backend whose reads are round trips reads
    /// them at once. Never needed for correctness; the default does nothing.
    fn prefetch_postings(&self, _postings: &[(&str, u64)]) -> StoreResult<()> {
        Ok(())
    }
    /// Elements marked as needing an embedding (new, deleted, or their embedded text
    /// changed since their vector was made), as [`ElemRef::encode`] keys in key order from
    /// `from` (concepts first). Empty in a store that never enabled vectors
    /// ([`GraphWrite::enable_vectors`]).
    fn scan_embedding_marks(
        &self,
        _from: u64,
        _f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        Ok(())
    }
    /// How many elements are marked as needing an embedding.
    fn embedding_marks(&self) -> StoreResult<u64> {
        Ok(0)
    }
    /// An element's stored embedding, by [`ElemRef::encode`] key (see
    /// [`GraphWrite::put_vector`]).
    fn vector(&self, _id: u64) -> StoreResult<Option<Vec<u8>>> {
        Ok(None)
    }
    /// In a read of the past ([`asof::AsOf`]), the element keys changed or ended
    /// after its coordinate; `None` for a read of the present. An index the engine
    /// keeps outside the graph tables (in `meta`, which is not versioned) answers as
    /// now, so its lookups take these elements as candidates too and check them.
    fn past_changed(&self) -> Option<&std::collections::BTreeSet<u64>> {
        None
    }
    /// Every stored embedding, in key order: `f(element key, bytes)`.
    fn scan_vectors(
        &self,
        _f: &mut dyn FnMut(u64, &[u8]) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        Ok(())
    }
}

/// The request log: the outcome of each write statement of a request that carries an
/// id, recorded in the statement's own transaction, so a request re-sent after a
/// failover (or a retry by the client) is answered from the record instead of being
/// applied twice. Keys are the engine's (`<request id>#<statement index>`); `at_ms` is
/// when the record was made (milliseconds since the Unix epoch), for pruning.
pub trait RequestLog {
    /// The recorded outcome under `key`.
    fn request_record(&self, key: &str) -> StoreResult<Option<Vec<u8>>>;
}

/// Writing the request log, inside a write transaction (see [`RequestLog`]). Backends
/// with a write-ahead log must log these writes like record writes: a record lost in a
/// crash while its statement's writes are replayed would let a re-sent request apply
/// twice.
pub trait RequestLogWrite {
    /// Records `outcome` under `key`, made at `at_ms`.
    fn put_request_record(&mut self, key: &str, at_ms: u64, outcome: &[u8]) -> StoreResult<()>;
    /// Drops up to `max` records made before `before_ms`, oldest first; returns how
    /// many were dropped.
    fn prune_request_records(&mut self, before_ms: u64, max: usize) -> StoreResult<u64>;
}

/// `meta` key: present once vectors are enabled; from then on every write that changes
/// the embedded text of an element (a concept's searchable text; a link's endpoints, or
/// the names and predicate description it is embedded with) or deletes one marks it for
/// embedding in the same transaction.
pub const VECTORS_ON: &str = "vectors_on";

/// Write access inside one transaction. Index maintenance is the implementation's job:
/// callers pass the old record so stale index entries can be removed.
pub trait GraphWrite: GraphRead + RequestLogWrite + ElementWrite + HistoryWrite {
    /// Allocates a new concept number (never reused).
    fn alloc_concept_id(&mut self) -> StoreResult<u64>;
    /// Allocates a new proposition number (never reused).
    fn alloc_prop_id(&mut self) -> StoreResult<u64>;
    /// Inserts or replaces a concept; `old` is the stored record when replacing.
    fn put_concept(
        &mut self,
        id: u64,
        rec: &ConceptRecord,
        old: Option<&ConceptRecord>,
    ) -> StoreResult<()>;
    /// Removes a concept (its links must already be gone).
    fn delete_concept(&mut self, id: u64, rec: &ConceptRecord) -> StoreResult<()>;
    /// Inserts or replaces a link; `old` is the stored record when replacing.
    fn put_prop(&mut self, id: u64, rec: &PropRecord, old: Option<&PropRecord>) -> StoreResult<()>;
    /// Removes a link.
    fn delete_prop(&mut self, id: u64, rec: &PropRecord) -> StoreResult<()>;
    /// Sets a raw `meta` value.
    fn set_meta(&mut self, key: &str, value: &[u8]) -> StoreResult<()>;
    /// Turns on embedding marks (idempotent): from this transaction on, elements whose
    /// embedded text changes are marked ([`VECTORS_ON`]). Returns whether they were off
    /// before.
    fn enable_vectors(&mut self) -> StoreResult<bool> {
        Err(StoreError::Other("this backend keeps no vectors".into()))
    }
    /// Marks elements ([`ElemRef::encode`] keys) for embedding (every concept and link
    /// when `ids` is `None`); returns how many marks were added.
    fn mark_for_embedding(&mut self, _ids: Option<&[u64]>) -> StoreResult<u64> {
        Err(StoreError::Other("this backend keeps no vectors".into()))
    }
    /// Stores an element's embedding (`bytes` as [`GraphRead::vector`] returns them) and
    /// clears its mark; `None` only clears the mark. Not logged: see `tables::VECTORS`.
    fn put_vector(&mut self, _id: u64, _bytes: Option<&[u8]>) -> StoreResult<()> {
        Err(StoreError::Other("this backend keeps no vectors".into()))
    }
    /// Removes every stored embedding (the model changed).
    fn clear_vectors(&mut self) -> StoreResult<()> {
        Err(StoreError::Other("this backend keeps no vectors".into()))
    }
}

/// The links whose embedded text names concept `id` (see the engine's
/// `semantic::prop_embedding_text`), to be marked for embedding after its record changed
/// from `old` to `rec`: its own links when it was renamed, and every link of the
/// predicate when `rec` is a `$PropositionType` whose name or description changed. Every
/// backend marks through this.
pub fn dependent_links(
    g: &dyn GraphRead,
    id: u64,
    old: &ConceptRecord,
    rec: &ConceptRecord,
) -> StoreResult<Vec<u64>> {
    let mut links = Vec::new();
    if old.name != rec.name {
        let at = ElemRef::Concept(id);
        g.scan_out(at, None, &mut |_, _, p| {
            links.push(p);
            Ok(true)
        })?;
        g.scan_in(at, None, &mut |_, _, p| {
            links.push(p);
            Ok(true)
        })?;
    }
    if rec.concept_type == PROPOSITION_TYPE
        && (old.name != rec.name
            || old.attributes.get("description") != rec.attributes.get("description"))
    {
        for name in [&old.name, &rec.name] {
            g.scan_predicate(name, &mut |_, _, p| {
                links.push(p);
                Ok(true)
            })?;
        }
    }
    Ok(links)
}

/// Reads a `u64` stored in `meta`.
pub fn meta_u64(g: &dyn GraphRead, key: &str) -> StoreResult<Option<u64>> {
    Ok(g.meta(key)?
        .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
        .map(u64::from_le_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elem_refs_encode_and_parse() {
        for r in [
            ElemRef::Concept(1),
            ElemRef::Prop(1),
            ElemRef::Concept(u64::MAX >> 1),
            ElemRef::Prop(42),
        ] {
            assert_eq!(ElemRef::decode(r.encode()), r);
            assert_eq!(ElemRef::parse_id(&r.id_string()), Some(r));
        }
        for bad in [
            "",
            "C:",
            "C:0",
            "C:01",
            "X:1",
            "C:-1",
            "c:1",
            "C:1a",
            "P:99999999999999999999",
            "C:9223372036854775808",
        ] {
            assert_eq!(ElemRef::parse_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn records_round_trip_through_the_encoding() {
        let rec = PropRecord {
            subject: ElemRef::Concept(3),
            predicate: "treats".into(),
            object: ElemRef::Prop(9),
            attributes: serde_json::json!({"a": [1, 2.5, "x", null, {"k": true}], "big": u64::MAX, "neg": -5})
                .as_object()
                .cloned()
                .expect("obj"),
            metadata: Map::new(),
        };
        let bytes = encode(&rec).expect("encode");
        assert_eq!(decode::<PropRecord>(&bytes).expect("decode"), rec);
    }
}
