//! The KIP 2.0 element kinds the 1.x graph does not hold — Assertions, Evidence and
//! Activities (Specification §13, §15, §16) — stored beside the concepts and links, in
//! a memory space, as an immutable payload and a mutable state (docs/storage.md §2).
//!
//! The contract:
//! - [`ElementId`] names any element of any kind (`C:`, `P:`, `A:`, `E:`, `X:`,
//!   DECISIONS.md item 46), encoded in one `u64` with the kind in bits 61-63 (concept
//!   `000` and proposition `100` as [`ElemRef::encode`] has them, assertion `101`,
//!   evidence `110`, activity `111`). An Assertion's number comes from the proposition
//!   counter, so `A:n` may be the founding assertion of `P:n` (storage.md §2).
//! - An [`ElementRecord`] is `payload` (written once, at creation) + `state`
//!   (lifecycle, retention, ...; replaced by [`ElementWrite::set_element_state`]) +
//!   `version`. No backend replaces a payload: [`ElementWrite::create_element`] refuses
//!   an id that exists, [`ElementWrite::set_element_state`] keeps the payload. Both
//!   rules are written once, here, over the backend primitive
//!   [`ElementWrite::store_element`].
//! - Structural references (an Assertion's proposition, the evidence it cites, ...) are
//!   given at creation and indexed target-first ([`ElementRead::scan_referrers`]), so
//!   "the assertions of `P:n`" is one range scan on every backend.
//! - Keys lead with the [`SpaceId`] (docs/storage.md §1); space 1 is `default`.

use crate::{decode, encode, Continue, ElemRef, StoreError, StoreResult};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A memory space (docs/storage.md §1.4): 0 the control plane, 1 `default`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpaceId(pub u32);

impl SpaceId {
    /// The space 1.x data lives in and every request uses unless it names another.
    pub const DEFAULT: SpaceId = SpaceId(1);
}

/// The kind of an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ElementKind {
    /// A concept (`C:`).
    Concept,
    /// A proposition (`P:`).
    Proposition,
    /// An assertion (`A:`).
    Assertion,
    /// Evidence (`E:`).
    Evidence,
    /// An activity (`X:`).
    Activity,
}

impl ElementKind {
    /// The kind's three tag bits (bits 61-63 of an encoded id).
    fn tag(self) -> u64 {
        match self {
            ElementKind::Concept => 0b000,
            ElementKind::Proposition => 0b100,
            ElementKind::Assertion => 0b101,
            ElementKind::Evidence => 0b110,
            ElementKind::Activity => 0b111,
        }
    }

    /// The id prefix (`"A"` for `A:12`).
    pub fn prefix(self) -> &'static str {
        match self {
            ElementKind::Concept => "C",
            ElementKind::Proposition => "P",
            ElementKind::Assertion => "A",
            ElementKind::Evidence => "E",
            ElementKind::Activity => "X",
        }
    }

    /// Whether records of this kind live in the element tables (the kinds 2.0 adds);
    /// concepts and propositions live in the graph tables.
    pub fn is_record_kind(self) -> bool {
        matches!(
            self,
            ElementKind::Assertion | ElementKind::Evidence | ElementKind::Activity
        )
    }
}

/// Numbers stay below this (the top three bits hold the kind).
const NUMBER_LIMIT: u64 = 1 << 61;

/// `n` when it can number an element (below 2^61: the top three bits of an encoded id
/// hold the kind); backends check every number they hand out with it.
pub fn checked_number(n: u64) -> StoreResult<u64> {
    if n < NUMBER_LIMIT {
        Ok(n)
    } else {
        Err(StoreError::Other("element numbers exhausted".into()))
    }
}

/// Any element, by kind and number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ElementId {
    /// Its kind.
    pub kind: ElementKind,
    /// Its number within the kind's counter.
    pub n: u64,
}

impl ElementId {
    /// An id of `kind` numbered `n`.
    pub fn new(kind: ElementKind, n: u64) -> ElementId {
        ElementId { kind, n }
    }

    /// The one-`u64` key encoding (the kind in bits 61-63).
    pub fn encode(self) -> u64 {
        (self.kind.tag() << 61) | (self.n & (NUMBER_LIMIT - 1))
    }

    /// Decodes [`ElementId::encode`]; `None` for a tag no kind has.
    pub fn decode(v: u64) -> Option<ElementId> {
        let n = v & (NUMBER_LIMIT - 1);
        let kind = match v >> 61 {
            0b000 => ElementKind::Concept,
            0b100 => ElementKind::Proposition,
            0b101 => ElementKind::Assertion,
            0b110 => ElementKind::Evidence,
            0b111 => ElementKind::Activity,
            _ => return None,
        };
        Some(ElementId { kind, n })
    }

    /// The public id (`A:12`).
    pub fn id_string(self) -> String {
        format!("{}:{}", self.kind.prefix(), self.n)
    }

    /// Parses a public id of any kind.
    pub fn parse_id(s: &str) -> Option<ElementId> {
        let (kind, num) = s.split_once(':')?;
        let kind = match kind {
            "C" => ElementKind::Concept,
            "P" => ElementKind::Proposition,
            "A" => ElementKind::Assertion,
            "E" => ElementKind::Evidence,
            "X" => ElementKind::Activity,
            _ => return None,
        };
        if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: u64 = num.parse().ok()?;
        (n < NUMBER_LIMIT).then_some(ElementId { kind, n })
    }
}

impl From<ElemRef> for ElementId {
    fn from(r: ElemRef) -> ElementId {
        match r {
            ElemRef::Concept(n) => ElementId::new(ElementKind::Concept, n),
            ElemRef::Prop(n) => ElementId::new(ElementKind::Proposition, n),
        }
    }
}

/// A stored element of a record kind: its write-once payload, its mutable state and
/// its version (1 at creation, one more per state change).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ElementRecord {
    /// Written once, at creation (an Assertion's proposition, actor, stance, mode,
    /// confidence, valid time; Evidence's content; an Activity's class and times).
    #[serde(rename = "p", default)]
    pub payload: Map<String, Value>,
    /// Replaced by state changes (lifecycle, retention, governance, facets).
    #[serde(rename = "s", default)]
    pub state: Map<String, Value>,
    /// 1 when created, one more per state change.
    #[serde(rename = "v", default)]
    pub version: u64,
}

impl ElementRecord {
    /// The stored bytes.
    pub fn encode(&self) -> StoreResult<Vec<u8>> {
        encode(self)
    }

    /// Reads stored bytes.
    pub fn decode(bytes: &[u8]) -> StoreResult<ElementRecord> {
        decode(bytes)
    }
}

/// A structural reference an element makes at creation: `role` (e.g. `proposition`,
/// `evidence`) and its target.
pub type ElementRef = (String, ElementId);

/// Reading elements of the record kinds.
pub trait ElementRead {
    /// The record of `id` in `space` (`None`: no such element; for a concept or a
    /// proposition, none of the KIP 2.0 fields beyond its graph row were written).
    fn element(&self, space: SpaceId, id: ElementId) -> StoreResult<Option<ElementRecord>>;

    /// The numbers of the elements of `kind` in `space`, in number order.
    fn scan_elements(
        &self,
        space: SpaceId,
        kind: ElementKind,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()>;

    /// The elements that reference `target` in `space`: `f(role, source)`, by role then
    /// source.
    fn scan_referrers(
        &self,
        space: SpaceId,
        target: ElementId,
        f: &mut dyn FnMut(&str, ElementId) -> StoreResult<Continue>,
    ) -> StoreResult<()>;
}

/// Writing elements of the record kinds, inside one write transaction. Backends with a
/// write-ahead log log these writes like record writes.
pub trait ElementWrite: ElementRead + crate::GraphRead {
    /// The next number of `kind` (never reused). Assertions take theirs from the
    /// proposition counter.
    fn alloc_element_number(&mut self, kind: ElementKind) -> StoreResult<u64>;

    /// The backend primitive: stores `rec` under `id` (inserting or replacing) and adds
    /// `new_refs` to the reference index. Callers use [`ElementWrite::create_element`]
    /// and [`ElementWrite::set_element_state`], which hold the write-once rule.
    fn store_element(
        &mut self,
        space: SpaceId,
        id: ElementId,
        rec: &ElementRecord,
        new_refs: &[ElementRef],
    ) -> StoreResult<()>;

    /// Creates element `id` with `payload`, `state` (version 1) and its structural
    /// references. An id that exists is refused: a payload is never replaced.
    fn create_element(
        &mut self,
        space: SpaceId,
        id: ElementId,
        payload: Map<String, Value>,
        state: Map<String, Value>,
        refs: &[ElementRef],
    ) -> StoreResult<ElementRecord> {
        // A concept or proposition keeps its 1.x shape in the graph tables; its record
        // holds the KIP 2.0 fields those rows have no column for (`schema_ref`, `key`,
        // facets, lifecycle, version), so it extends a row that exists.
        let has_row = match (id.kind, id.kind.is_record_kind()) {
            (_, true) => true,
            (ElementKind::Concept, false) => self.concept(id.n)?.is_some(),
            (_, false) => self.prop(id.n)?.is_some(),
        };
        if !has_row {
            return Err(StoreError::Constraint(format!(
                "{} has no row in the graph tables: the record of a concept or proposition extends its row",
                id.id_string()
            )));
        }
        if self.element(space, id)?.is_some() {
            return Err(StoreError::Constraint(format!(
                "element {} exists: its payload is written once",
                id.id_string()
            )));
        }
        let rec = ElementRecord {
            payload,
            state,
            version: 1,
        };
        self.store_element(space, id, &rec, refs)?;
        Ok(rec)
    }

    /// Purges element `id` (Specification §60.3): the one write that removes a payload.
    /// What stays is a stub: no payload, `stub` as the state, one version more. The
    /// caller has removed the element's graph row, if it had one. `None` when there is
    /// no record of `id`.
    fn purge_element(
        &mut self,
        space: SpaceId,
        id: ElementId,
        stub: Map<String, Value>,
    ) -> StoreResult<Option<ElementRecord>> {
        let version = match self.element(space, id)? {
            Some(old) => old.version + 1,
            None => return Ok(None),
        };
        let rec = ElementRecord {
            payload: Map::new(),
            state: stub,
            version,
        };
        self.store_element(space, id, &rec, &[])?;
        Ok(Some(rec))
    }

    /// Replaces the state of element `id` (its payload untouched), one version more.
    /// Returns the new record; `None` when there is no such element.
    fn set_element_state(
        &mut self,
        space: SpaceId,
        id: ElementId,
        state: Map<String, Value>,
    ) -> StoreResult<Option<ElementRecord>> {
        let Some(old) = self.element(space, id)? else {
            return Ok(None);
        };
        let rec = ElementRecord {
            payload: old.payload,
            state,
            version: old.version + 1,
        };
        self.store_element(space, id, &rec, &[])?;
        Ok(Some(rec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_ids_encode_with_their_kind_and_parse_back() {
        for kind in [
            ElementKind::Concept,
            ElementKind::Proposition,
            ElementKind::Assertion,
            ElementKind::Evidence,
            ElementKind::Activity,
        ] {
            let id = ElementId::new(kind, 12345);
            assert_eq!(ElementId::decode(id.encode()), Some(id));
            assert_eq!(ElementId::parse_id(&id.id_string()), Some(id));
        }
        // Concepts and propositions encode as ElemRef does.
        assert_eq!(
            ElementId::from(ElemRef::Prop(7)).encode(),
            ElemRef::Prop(7).encode()
        );
        assert_eq!(
            ElementId::from(ElemRef::Concept(7)).encode(),
            ElemRef::Concept(7).encode()
        );
        assert_eq!(ElementId::decode(0b001 << 61), None);
        assert_eq!(ElementId::parse_id("A:"), None);
        assert_eq!(ElementId::parse_id("Q:1"), None);
        assert_eq!(ElementId::parse_id("A:-1"), None);
        assert_eq!(
            ElementId::parse_id("E:3").map(|e| e.kind),
            Some(ElementKind::Evidence)
        );
    }

    #[test]
    fn element_records_round_trip_through_the_encoding() {
        let mut rec = ElementRecord::default();
        rec.payload.insert("stance".into(), Value::from("support"));
        rec.state.insert("status".into(), Value::from("active"));
        rec.version = 3;
        let bytes = rec.encode().expect("encode");
        assert_eq!(ElementRecord::decode(&bytes).expect("decode"), rec);
    }
}
