//! The KIP 2.0 element records (`kip_storage::elements`) in PostgreSQL: `kip_elements`
//! (space, id) -> record and `kip_element_refs` (space, target, role, source), ids
//! stored with [`ek`] so their order is the encoded ids' order. Written directly (not
//! through the row buffer): a transaction reads its own writes from the tables.

use super::{ek, uk, PgTx};
use crate::conn::get;
use kip_storage::elements::checked_number;
use kip_storage::{
    Continue, ElementId, ElementKind, ElementRead, ElementRecord, ElementRef, ElementWrite,
    SpaceId, StoreError, StoreResult,
};

/// `kip_stats` keys of the counters of the kinds that have their own.
fn counter_key(kind: ElementKind) -> Option<&'static str> {
    match kind {
        ElementKind::Evidence => Some("last_evidence_id"),
        ElementKind::Activity => Some("last_activity_id"),
        _ => None,
    }
}

fn space(s: SpaceId) -> i32 {
    i32::try_from(s.0).unwrap_or(i32::MAX)
}

impl ElementRead for PgTx<'_> {
    fn element(&self, sp: SpaceId, id: ElementId) -> StoreResult<Option<ElementRecord>> {
        let row = self.query_opt(
            "SELECT rec FROM kip_elements WHERE space = $1 AND id = $2",
            &[&space(sp), &ek(id.encode())],
        )?;
        match row {
            Some(r) => Ok(Some(ElementRecord::decode(&get::<Vec<u8>>(&r, 0)?)?)),
            None => Ok(None),
        }
    }

    fn scan_elements(
        &self,
        sp: SpaceId,
        kind: ElementKind,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let from = ElementId::new(kind, 0).encode();
        let to = ElementId::new(kind, u64::MAX).encode();
        let rows = self.query(
            "SELECT id FROM kip_elements WHERE space = $1 AND id BETWEEN $2 AND $3 ORDER BY id",
            &[&space(sp), &ek(from), &ek(to)],
        )?;
        for r in rows {
            match ElementId::decode(uk(get::<i64>(&r, 0)?)) {
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
        sp: SpaceId,
        target: ElementId,
        f: &mut dyn FnMut(&str, ElementId) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let rows = self.query(
            "SELECT role, source FROM kip_element_refs WHERE space = $1 AND target = $2 \
             ORDER BY role, source",
            &[&space(sp), &ek(target.encode())],
        )?;
        for r in rows {
            let role = String::from_utf8(get::<Vec<u8>>(&r, 0)?).map_err(|_| {
                StoreError::Corruption("an element reference role is not UTF-8".into())
            })?;
            let Some(source) = ElementId::decode(uk(get::<i64>(&r, 1)?)) else {
                continue;
            };
            if !f(&role, source)? {
                break;
            }
        }
        Ok(())
    }
}

impl ElementWrite for PgTx<'_> {
    fn alloc_element_number(&mut self, kind: ElementKind) -> StoreResult<u64> {
        let n = match kind {
            ElementKind::Concept => self.alloc(0)?,
            ElementKind::Proposition | ElementKind::Assertion => self.alloc(1)?,
            ElementKind::Evidence | ElementKind::Activity => {
                let key = counter_key(kind).unwrap_or("last_element_id");
                let row = self.query_opt(
                    "INSERT INTO kip_stats (key, n) VALUES ($1, 1) \
                     ON CONFLICT (key) DO UPDATE SET n = kip_stats.n + 1 RETURNING n",
                    &[&key.as_bytes()],
                )?;
                let n = row.map(|r| get::<i64>(&r, 0)).transpose()?.unwrap_or(0);
                u64::try_from(n)
                    .map_err(|_| StoreError::Corruption(format!("the counter {key} is negative")))?
            }
        };
        checked_number(n)
    }

    fn store_element(
        &mut self,
        sp: SpaceId,
        id: ElementId,
        rec: &ElementRecord,
        new_refs: &[ElementRef],
    ) -> StoreResult<()> {
        kip_storage::upkeep::element_put(self, sp, id, rec)?;
        let bytes = rec.encode()?;
        self.execute(
            "INSERT INTO kip_elements (space, id, rec) VALUES ($1, $2, $3) \
             ON CONFLICT (space, id) DO UPDATE SET rec = excluded.rec",
            &[&space(sp), &ek(id.encode()), &bytes],
        )?;
        for (role, target) in new_refs {
            self.execute(
                "INSERT INTO kip_element_refs (space, target, role, source) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT DO NOTHING",
                &[&space(sp), &ek(target.encode()), &role.as_bytes(), &ek(id.encode())],
            )?;
        }
        Ok(())
    }
}
