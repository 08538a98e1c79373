//! The KIP 2.0 element records (`kip_storage::elements`) in redb: `elements` (space,
//! encoded id) -> record, and `element_refs` (space, target, role, source) -> (). Their
//! writes go into the write-ahead log like the graph records (`OP_PUT_ELEMENT`).

use super::oplog::OP_PUT_ELEMENT;
use super::*;
use kip_storage::elements::checked_number;
use kip_storage::{
    ElementId, ElementKind, ElementRead, ElementRecord, ElementRef, ElementWrite, SpaceId,
    StoreError,
};

/// (space, encoded element id) -> [`ElementRecord`] bytes.
pub(crate) const ELEMENTS: TableDefinition<(u32, u64), &[u8]> = TableDefinition::new("elements");
/// (space, target, role, source) -> (): the structural references, target first.
pub(crate) const ELEMENT_REFS: TableDefinition<(u32, u64, &str, u64), ()> =
    TableDefinition::new("element_refs");

/// The key of [`ELEMENT_REFS`]: (space, target, role, source).
pub(crate) type RefKey = (u32, u64, &'static str, u64);

pub(super) const NEXT_EVIDENCE: &str = "next_evidence_id";
pub(super) const NEXT_ACTIVITY: &str = "next_activity_id";

fn element(
    t: &impl ReadableTable<(u32, u64), &'static [u8]>,
    space: SpaceId,
    id: ElementId,
) -> StoreResult<Option<ElementRecord>> {
    match t.get((space.0, id.encode())).map_err(storage_error)? {
        Some(g) => Ok(Some(ElementRecord::decode(g.value())?)),
        None => Ok(None),
    }
}

fn scan_elements(
    t: &impl ReadableTable<(u32, u64), &'static [u8]>,
    space: SpaceId,
    kind: ElementKind,
    f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
) -> StoreResult<()> {
    let from = ElementId::new(kind, 0).encode();
    for item in t
        .range((space.0, from)..=(space.0, u64::MAX))
        .map_err(storage_error)?
    {
        let (k, _) = item.map_err(storage_error)?;
        match ElementId::decode(k.value().1) {
            Some(id) if id.kind == kind => {
                if !f(id.n)? {
                    break;
                }
            }
            _ => break,
        }
    }
    Ok(())
}

fn scan_referrers(
    t: &impl ReadableTable<(u32, u64, &'static str, u64), ()>,
    space: SpaceId,
    target: ElementId,
    f: &mut dyn FnMut(&str, ElementId) -> StoreResult<Continue>,
) -> StoreResult<()> {
    let tg = target.encode();
    for item in t.range((space.0, tg, "", 0)..).map_err(storage_error)? {
        let (k, _) = item.map_err(storage_error)?;
        let (sp, t2, role, source) = k.value();
        if sp != space.0 || t2 != tg {
            break;
        }
        let Some(source) = ElementId::decode(source) else {
            continue;
        };
        if !f(role, source)? {
            break;
        }
    }
    Ok(())
}

impl ElementRead for ReadTables {
    fn element(&self, space: SpaceId, id: ElementId) -> StoreResult<Option<ElementRecord>> {
        match &self.elements {
            Some(t) => element(t, space, id),
            None => Ok(None),
        }
    }

    fn scan_elements(
        &self,
        space: SpaceId,
        kind: ElementKind,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        match &self.elements {
            Some(t) => scan_elements(t, space, kind, f),
            None => Ok(()),
        }
    }

    fn scan_referrers(
        &self,
        space: SpaceId,
        target: ElementId,
        f: &mut dyn FnMut(&str, ElementId) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        match &self.element_refs {
            Some(t) => scan_referrers(t, space, target, f),
            None => Ok(()),
        }
    }
}

impl ElementRead for WriteTables<'_> {
    fn element(&self, space: SpaceId, id: ElementId) -> StoreResult<Option<ElementRecord>> {
        element(&self.elements, space, id)
    }

    fn scan_elements(
        &self,
        space: SpaceId,
        kind: ElementKind,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        scan_elements(&self.elements, space, kind, f)
    }

    fn scan_referrers(
        &self,
        space: SpaceId,
        target: ElementId,
        f: &mut dyn FnMut(&str, ElementId) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        scan_referrers(&self.element_refs, space, target, f)
    }
}

/// The operation log's `a` part of an element write: the space (u32 LE), then the new
/// references as MessagePack `[(role, encoded target)]`.
pub(super) fn encode_put(space: SpaceId, refs: &[ElementRef]) -> StoreResult<Vec<u8>> {
    let refs: Vec<(&str, u64)> = refs.iter().map(|(r, t)| (r.as_str(), t.encode())).collect();
    let mut out = space.0.to_le_bytes().to_vec();
    out.extend(encode(&refs)?);
    Ok(out)
}

/// Reads [`encode_put`].
pub(super) fn decode_put(a: &[u8]) -> StoreResult<(SpaceId, Vec<ElementRef>)> {
    let (sp, rest) = a.split_first_chunk::<4>().ok_or_else(|| {
        storage_error(StoreError::Corruption(
            "write-ahead log: an element write without its space".into(),
        ))
    })?;
    let refs: Vec<(String, u64)> = decode(rest)?;
    let mut out = Vec::with_capacity(refs.len());
    for (role, t) in refs {
        let target = ElementId::decode(t).ok_or_else(|| {
            storage_error(StoreError::Corruption(
                "write-ahead log: an element reference of no kind".into(),
            ))
        })?;
        out.push((role, target));
    }
    Ok((SpaceId(u32::from_le_bytes(*sp)), out))
}

impl ElementWrite for WriteTables<'_> {
    fn alloc_element_number(&mut self, kind: ElementKind) -> StoreResult<u64> {
        let n = match kind {
            ElementKind::Concept => self.alloc(NEXT_CONCEPT)?,
            ElementKind::Proposition | ElementKind::Assertion => self.alloc(NEXT_PROP)?,
            ElementKind::Evidence => self.alloc(NEXT_EVIDENCE)?,
            ElementKind::Activity => self.alloc(NEXT_ACTIVITY)?,
        };
        checked_number(n)
    }

    fn store_element(
        &mut self,
        space: SpaceId,
        id: ElementId,
        rec: &ElementRecord,
        new_refs: &[ElementRef],
    ) -> StoreResult<()> {
        kip_storage::upkeep::element_put(self, space, id, rec)?;
        let bytes = rec.encode()?;
        let a = encode_put(space, new_refs)?;
        self.log_op(OP_PUT_ELEMENT, id.encode(), &a, &bytes);
        self.elements
            .insert((space.0, id.encode()), bytes.as_slice())
            .map_err(storage_error)?;
        for (role, target) in new_refs {
            self.element_refs
                .insert((space.0, target.encode(), role.as_str(), id.encode()), ())
                .map_err(storage_error)?;
        }
        Ok(())
    }
}
