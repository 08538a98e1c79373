//! The KIP 2.0 element records (`kip_storage::elements`) in memory: (space, encoded id)
//! -> record, and the references target first.

use super::Tables;
use kip_storage::{
    Continue, ElementId, ElementKind, ElementRead, ElementRecord, ElementRef, ElementWrite,
    SpaceId, StoreResult,
};
use std::sync::Arc;

impl ElementRead for Tables {
    fn element(&self, space: SpaceId, id: ElementId) -> StoreResult<Option<ElementRecord>> {
        Ok(self
            .elements
            .get(&(space.0, id.encode()))
            .map(|r| r.as_ref().clone()))
    }

    fn scan_elements(
        &self,
        space: SpaceId,
        kind: ElementKind,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let from = ElementId::new(kind, 0).encode();
        for ((_, key), _) in self.elements.range((space.0, from)..=(space.0, u64::MAX)) {
            match ElementId::decode(*key) {
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
        &self,
        space: SpaceId,
        target: ElementId,
        f: &mut dyn FnMut(&str, ElementId) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let t = target.encode();
        for (_, _, role, source) in self
            .element_refs
            .range((space.0, t, String::new(), 0)..)
            .take_while(|(sp, tg, _, _)| *sp == space.0 && *tg == t)
        {
            let Some(source) = ElementId::decode(*source) else {
                continue;
            };
            if !f(role, source)? {
                break;
            }
        }
        Ok(())
    }
}

impl ElementWrite for Tables {
    fn alloc_element_number(&mut self, kind: ElementKind) -> StoreResult<u64> {
        let counter = match kind {
            ElementKind::Concept => &mut self.next_concept,
            ElementKind::Proposition | ElementKind::Assertion => &mut self.next_prop,
            ElementKind::Evidence => &mut self.next_evidence,
            ElementKind::Activity => &mut self.next_activity,
        };
        let n = kip_storage::elements::checked_number(*counter)?;
        *counter += 1;
        Ok(n)
    }

    fn store_element(
        &mut self,
        space: SpaceId,
        id: ElementId,
        rec: &ElementRecord,
        new_refs: &[ElementRef],
    ) -> StoreResult<()> {
        kip_storage::upkeep::element_put(self, space, id, rec)?;
        self.elements
            .insert((space.0, id.encode()), Arc::new(rec.clone()));
        for (role, target) in new_refs {
            self.element_refs
                .insert((space.0, target.encode(), role.clone(), id.encode()));
        }
        Ok(())
    }
}
