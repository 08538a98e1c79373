//! A write transaction's operation log: the record puts and deletes and meta values it
//! made, encoded as the payload of one write-ahead log record (`seal`), and applied
//! again on replay (`apply_log`). Indexes, statistics and the text index are derived,
//! so they are not logged.

use super::*;
use kip_storage::{ElementId, ElementRecord, ElementWrite, RequestLogWrite};

/// Operation log tags (see [`WriteTables::apply_log`]).
pub(super) const OP_PUT_CONCEPT: u8 = 1;
pub(super) const OP_DEL_CONCEPT: u8 = 2;
pub(super) const OP_PUT_PROP: u8 = 3;
pub(super) const OP_DEL_PROP: u8 = 4;
pub(super) const OP_META: u8 = 5;
/// A request log record: id = made at (ms), a = key, b = outcome.
pub(super) const OP_PUT_REQUEST: u8 = 6;
/// A prune of the request log: id = before (ms), a = the most records (u64 LE).
pub(super) const OP_PRUNE_REQUESTS: u8 = 7;
/// A KIP 2.0 element record written (`tables/elements.rs`): id = the encoded element
/// id, a = the space and the new references, b = the record.
pub(super) const OP_PUT_ELEMENT: u8 = 8;
/// A commit record of history (`tables/history.rs`): id = seq, a = the space, b = the
/// record (its time is the original one on replay).
pub(super) const OP_PUT_COMMIT: u8 = 9;
/// The version chain of an element purged: id = the element key, a = the space.
pub(super) const OP_PURGE_VERSIONS: u8 = 10;
/// A cut of history below a horizon: id = the horizon, a = the space, b = the most
/// changes (u64 LE).
pub(super) const OP_PRUNE_HISTORY: u8 = 11;

impl WriteTables<'_> {
    pub(super) fn log_op(&mut self, tag: u8, id: u64, a: &[u8], b: &[u8]) {
        let Some(log) = self.log.as_mut() else { return };
        if log.len() + a.len() + b.len() + 17 > LOG_LIMIT {
            self.log = None;
            return;
        }
        log.push(tag);
        log.extend_from_slice(&id.to_le_bytes());
        for part in [a, b] {
            // Parts are records and meta values, far below 4 GiB (LOG_LIMIT).
            log.extend_from_slice(&(part.len() as u32).to_le_bytes());
            log.extend_from_slice(part);
        }
    }

    /// Ends the transaction's operation log: stores its sequence number in `meta` and
    /// returns what to append to the write-ahead log. Call after [`WriteTables::flush`].
    pub fn seal(&mut self) -> StoreResult<Sealed> {
        let Some(log) = self.log.take() else {
            return Ok(Sealed::Durable);
        };
        if log.is_empty() {
            return Ok(Sealed::Nothing);
        }
        let seq = crate::meta_u64(self, WAL_SEQ)?.unwrap_or(0) + 1;
        self.set_wal_seq(seq)?;
        Ok(Sealed::Record { seq, payload: log })
    }

    /// Sets the sequence number of the last applied log record (after a replay).
    pub fn set_wal_seq(&mut self, seq: u64) -> StoreResult<()> {
        self.meta
            .insert(WAL_SEQ, &seq.to_le_bytes()[..])
            .map_err(storage_error)?;
        Ok(())
    }

    /// Applies an operation log recorded by [`WriteTables::seal`] (write-ahead log replay).
    pub fn apply_log(&mut self, mut payload: &[u8]) -> StoreResult<()> {
        fn take<'a>(p: &mut &'a [u8], n: usize) -> StoreResult<&'a [u8]> {
            if p.len() < n {
                return Err(storage_error(crate::StoreError::Corruption(
                    "write-ahead log record is cut short".into(),
                )));
            }
            let (head, rest) = p.split_at(n);
            *p = rest;
            Ok(head)
        }
        fn part<'a>(p: &mut &'a [u8]) -> StoreResult<&'a [u8]> {
            let mut len = [0u8; 4];
            len.copy_from_slice(take(p, 4)?);
            take(p, u32::from_le_bytes(len) as usize)
        }
        while !payload.is_empty() {
            let tag = take(&mut payload, 1)?[0];
            let mut idb = [0u8; 8];
            idb.copy_from_slice(take(&mut payload, 8)?);
            let id = u64::from_le_bytes(idb);
            let a = part(&mut payload)?;
            let b = part(&mut payload)?;
            match tag {
                OP_PUT_CONCEPT => {
                    let rec: ConceptRecord = decode(a)?;
                    let old = self.concept(id)?;
                    self.put_concept(id, &rec, old.as_ref())?;
                }
                OP_DEL_CONCEPT => {
                    if let Some(old) = self.concept(id)? {
                        self.delete_concept(id, &old)?;
                    }
                }
                OP_PUT_PROP => {
                    let rec: PropRecord = decode(a)?;
                    let old = self.prop(id)?;
                    self.put_prop(id, &rec, old.as_ref())?;
                }
                OP_DEL_PROP => {
                    if let Some(old) = self.prop(id)? {
                        self.delete_prop(id, &old)?;
                    }
                }
                OP_META => {
                    let key = std::str::from_utf8(a).map_err(|_| {
                        storage_error(crate::StoreError::Corruption(
                            "write-ahead log: a meta key is not UTF-8".into(),
                        ))
                    })?;
                    self.set_meta(key, b)?;
                }
                OP_PUT_REQUEST => {
                    let key = std::str::from_utf8(a).map_err(|_| {
                        storage_error(crate::StoreError::Corruption(
                            "write-ahead log: a request key is not UTF-8".into(),
                        ))
                    })?;
                    self.put_request_record(key, id, b)?;
                }
                OP_PRUNE_REQUESTS => {
                    let max = <[u8; 8]>::try_from(a)
                        .map(u64::from_le_bytes)
                        .map_err(|_| {
                            storage_error(crate::StoreError::Corruption(
                                "write-ahead log: a request log prune without its bound".into(),
                            ))
                        })?;
                    self.prune_request_records(id, usize::try_from(max).unwrap_or(usize::MAX))?;
                }
                OP_PUT_ELEMENT => {
                    let element = ElementId::decode(id).ok_or_else(|| {
                        storage_error(crate::StoreError::Corruption(
                            "write-ahead log: an element id of no kind".into(),
                        ))
                    })?;
                    let (space, refs) = super::elements::decode_put(a)?;
                    self.store_element(space, element, &ElementRecord::decode(b)?, &refs)?;
                }
                OP_PUT_COMMIT => {
                    let space = super::history::logged_space(a)?;
                    kip_storage::history::apply_commit(self, space, id, b)?;
                }
                OP_PRUNE_HISTORY => {
                    let space = super::history::logged_space(a)?;
                    let max = <[u8; 8]>::try_from(b)
                        .map(u64::from_le_bytes)
                        .map_err(|_| {
                            storage_error(crate::StoreError::Corruption(
                                "write-ahead log: a history cut without its bound".into(),
                            ))
                        })?;
                    kip_storage::HistoryWrite::prune_history(
                        self,
                        space,
                        id,
                        usize::try_from(max).unwrap_or(usize::MAX),
                    )?;
                }
                OP_PURGE_VERSIONS => {
                    let space = super::history::logged_space(a)?;
                    kip_storage::HistoryWrite::purge_versions(self, space, id)?;
                }
                other => {
                    return Err(storage_error(format!(
                        "write-ahead log: unknown operation {other}"
                    )))
                }
            }
        }
        Ok(())
    }
}
