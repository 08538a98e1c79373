//! [`GraphWrite`] for [`WriteTables`]: record writes with their index, statistics and
//! text-index upkeep, and the text index rebuild.

use super::*;
use crate::StoreError;
use kip_storage::upkeep::{self, IndexTarget};
use kip_storage::RequestLogWrite;

impl GraphWrite for WriteTables<'_> {
    fn alloc_concept_id(&mut self) -> StoreResult<u64> {
        self.alloc(NEXT_CONCEPT)
    }

    fn alloc_prop_id(&mut self) -> StoreResult<u64> {
        self.alloc(NEXT_PROP)
    }

    fn put_concept(
        &mut self,
        id: u64,
        rec: &ConceptRecord,
        old: Option<&ConceptRecord>,
    ) -> StoreResult<()> {
        upkeep::concept_put(self, id, rec, old)?;
        let bytes = encode(rec)?;
        self.log_op(OP_PUT_CONCEPT, id, &bytes, &[]);
        self.staged.concepts.insert(id, Some(bytes));
        self.staged_grew()
    }

    fn delete_concept(&mut self, id: u64, rec: &ConceptRecord) -> StoreResult<()> {
        self.log_op(OP_DEL_CONCEPT, id, &[], &[]);
        upkeep::concept_delete(self, id, rec)?;
        self.staged.concepts.insert(id, None);
        self.staged_grew()
    }

    fn put_prop(&mut self, id: u64, rec: &PropRecord, old: Option<&PropRecord>) -> StoreResult<()> {
        let bytes = encode(rec)?;
        self.log_op(OP_PUT_PROP, id, &bytes, &[]);
        self.staged.props.insert(id, Some(bytes));
        upkeep::prop_put(self, id, rec, old)?;
        self.staged_grew()
    }

    fn delete_prop(&mut self, id: u64, rec: &PropRecord) -> StoreResult<()> {
        self.log_op(OP_DEL_PROP, id, &[], &[]);
        self.staged.props.insert(id, None);
        upkeep::prop_delete(self, id, rec)?;
        self.staged_grew()
    }

    fn enable_vectors(&mut self) -> StoreResult<bool> {
        if self.vectors_on {
            return Ok(false);
        }
        self.set_meta(crate::VECTORS_ON, &[1])?;
        self.vectors_on = true;
        Ok(true)
    }

    fn mark_for_embedding(&mut self, ids: Option<&[u64]>) -> StoreResult<u64> {
        // Not expressible in the log: the transaction commits durably instead.
        self.log = None;
        let mut n = 0u64;
        let mut mark = |t: &mut Self, id: u64| -> StoreResult<()> {
            if t.embed_pending
                .insert(id, ())
                .map_err(storage_error)?
                .is_none()
            {
                n += 1;
            }
            Ok(())
        };
        match ids {
            Some(ids) => {
                for &id in ids {
                    mark(self, id)?;
                }
            }
            None => {
                let mut all = Vec::new();
                self.scan_concepts(&mut |id| {
                    all.push(id);
                    Ok(true)
                })?;
                self.scan_props(&mut |id| {
                    all.push(ElemRef::Prop(id).encode());
                    Ok(true)
                })?;
                for id in all {
                    mark(self, id)?;
                }
            }
        }
        Ok(n)
    }

    fn put_vector(&mut self, id: u64, bytes: Option<&[u8]>) -> StoreResult<()> {
        self.embed_pending.remove(id).map_err(storage_error)?;
        if let Some(b) = bytes {
            self.vectors.insert(id, b).map_err(storage_error)?;
        }
        Ok(())
    }

    fn clear_vectors(&mut self) -> StoreResult<()> {
        self.log = None;
        self.vectors.retain(|_, _| false).map_err(storage_error)?;
        Ok(())
    }

    fn set_meta(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.log_op(OP_META, 0, key.as_bytes(), value);
        self.meta.insert(key, value).map_err(storage_error)?;
        if key == crate::VECTORS_ON {
            // Also on write-ahead log replay: the records after it are marked again.
            self.vectors_on = true;
        }
        Ok(())
    }
}

/// How this backend files each kind of derived data; what to file is decided by the
/// contract's driver ([`upkeep`]).
impl IndexTarget for WriteTables<'_> {
    fn vectors_on(&self) -> bool {
        self.vectors_on
    }

    fn set_posting(&mut self, term: &str, key: u64, entry: Option<(u32, u32)>) -> StoreResult<()> {
        let packed = entry.map(|(tf, len)| (u64::from(tf) << 32) | u64::from(len));
        self.change(|c| &mut c.postings, (Text::from(term), key), packed)
    }

    fn set_attr_entry(
        &mut self,
        concept_type: &str,
        attr: &str,
        value: &str,
        id: u64,
        present: bool,
    ) -> StoreResult<()> {
        let key = (
            Text::from(concept_type),
            Text::from(attr),
            Text::from(value),
            id,
        );
        self.change(|c| &mut c.attrs, key, present.then_some(()))
    }

    /// The `concept_key` table, the writers' key cache, the type and name indexes.
    fn set_concept_key(&mut self, id: u64, ty: &str, name: &str, present: bool) -> StoreResult<()> {
        if present {
            let other = self
                .concept_key
                .insert((ty, name), id)
                .map_err(storage_error)?
                .map(|g| g.value())
                .filter(|o| *o != id);
            if let Some(other) = other {
                return Err(StoreError::Constraint(format!(
                    "{{type: {ty:?}, name: {name:?}}} is C:{other}'s already"
                )));
            }
            self.overlay.keys().insert(ty, name, id);
        } else {
            self.concept_key.remove((ty, name)).map_err(storage_error)?;
            self.overlay.keys().remove(ty, name);
        }
        let present = present.then_some(());
        self.change(|c| &mut c.concept_type, (Text::from(ty), id), present)?;
        self.change(|c| &mut c.concept_name, (Text::from(name), id), present)
    }

    /// `spo` (staged with the records), `pos` and `osp` (through the overlay).
    fn set_link_key(
        &mut self,
        id: u64,
        s: ElemRef,
        p: &str,
        o: ElemRef,
        present: bool,
    ) -> StoreResult<()> {
        let (s, o) = (s.encode(), o.encode());
        if present {
            self.check_spo_free((s, p, o), id)?;
        }
        let id = present.then_some(id);
        self.staged.spo.insert((s, Text::from(p), o), id);
        self.change(|c| &mut c.pos, (Text::from(p), o, s), id)?;
        self.change(|c| &mut c.osp, (o, Text::from(p), s), id)
    }

    fn bump(&mut self, stat: crate::Stat<'_>, delta: i64) -> StoreResult<()> {
        self.bump_counter(stat, delta)
    }

    fn mark(&mut self, key: u64) -> StoreResult<()> {
        self.embed_pending.insert(key, ()).map_err(storage_error)?;
        Ok(())
    }

    fn drop_vector(&mut self, key: u64) -> StoreResult<()> {
        self.vectors.remove(key).map_err(storage_error)?;
        Ok(())
    }
}

impl WriteTables<'_> {
    /// Fails when another link than `id` holds `(s, p, o)`: what this transaction
    /// staged, else the probe [`GraphRead::prop_by_spo`] just made for this key (the
    /// engine looks a link up before creating it), else the table.
    fn check_spo_free(&self, key: (u64, &str, u64), id: u64) -> StoreResult<()> {
        let (s, p, o) = key;
        let other = match self.staged.spo.get(&(s, Text::from(p), o)) {
            Some(staged) => *staged,
            None if self.probed_absent(key) => None,
            None => self.spo.get(key).map_err(storage_error)?.map(|g| g.value()),
        };
        match other {
            Some(other) if other != id => Err(StoreError::Constraint(format!(
                "the link ({}, {p:?}, {}) is P:{other}'s already",
                ElemRef::decode(s).id_string(),
                ElemRef::decode(o).id_string()
            ))),
            _ => Ok(()),
        }
    }

    /// Drops and rebuilds the attribute value index and its counts from the records.
    pub fn rebuild_attr_index(&mut self, progress: &mut dyn FnMut(u64, u64)) -> StoreResult<()> {
        // Not expressible as an operation log: this transaction commits durably.
        self.log = None;
        self.pending.retain(|k, _| !k.starts_with("a:"));
        self.fold()?;
        self.write_staged()?;
        self.attrs.retain(|_, _| false).map_err(storage_error)?;
        self.stats
            .retain(|k, _| !k.starts_with("a:"))
            .map_err(storage_error)?;
        self.each_concept(progress, &mut |w, n, c| {
            upkeep::file_attrs(w, n, None, Some(c))
        })
    }

    /// Drops and rebuilds the whole text index (every concept) from the graph;
    /// `progress(done, total)`. (`df:` statistics of older formats are dropped too.)
    pub fn rebuild_text_index(&mut self, progress: &mut dyn FnMut(u64, u64)) -> StoreResult<()> {
        // Not expressible as an operation log: this transaction commits durably.
        self.log = None;
        self.pending.remove(TEXT_DOCS);
        self.pending.remove(TEXT_LEN);
        // Everything in the overlay goes to redb first, so the cleared table is the
        // whole index (the fold moves this transaction's floor above every version).
        self.fold()?;
        self.write_staged()?;
        self.postings.retain(|_, _| false).map_err(storage_error)?;
        self.stats
            .retain(|k, _| !k.starts_with("df:") && k != TEXT_DOCS && k != TEXT_LEN)
            .map_err(storage_error)?;
        self.each_concept(progress, &mut |w, n, c| {
            upkeep::index_text(w, ElemRef::Concept(n).encode(), &text::concept_doc(c))
        })
    }

    /// Calls `f` with every concept record (from the tables: staged writes must have
    /// been written first), reporting `progress(done, total)` every 1,000.
    fn each_concept(
        &mut self,
        progress: &mut dyn FnMut(u64, u64),
        f: &mut dyn FnMut(&mut Self, u64, &ConceptRecord) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let total = self.concepts.len().map_err(storage_error)?;
        let mut done = 0u64;
        let mut ids = Vec::new();
        read::scan_ids(&self.concepts, None, &mut |n| {
            ids.push(n);
            Ok(true)
        })?;
        for n in ids {
            if let Some(c) = read::record::<ConceptRecord>(&self.concepts, None, n)? {
                f(self, n, &c)?;
            }
            done += 1;
            if done.is_multiple_of(1000) {
                progress(done, total);
            }
        }
        progress(total, total);
        Ok(())
    }
}

impl WriteTables<'_> {
    /// Appends audit records and drops those with a sequence number below `drop_below`.
    /// They are not in the write-ahead log: `durable` makes the transaction commit
    /// durably (a checkpoint); otherwise it commits like a logged write without a log
    /// record, and the records become durable at the next checkpoint.
    /// Replaces the audit records of `records` that exist (not logged, like appends:
    /// durable at the next checkpoint).
    pub(crate) fn audit_rewrite(&mut self, records: &[(u64, Vec<u8>)]) -> StoreResult<()> {
        for (seq, bytes) in records {
            let exists = self.audit.get(*seq).map_err(storage_error)?.is_some();
            if exists {
                self.audit
                    .insert(*seq, bytes.as_slice())
                    .map_err(storage_error)?;
            }
        }
        Ok(())
    }

    pub(crate) fn audit_append(
        &mut self,
        records: &[(u64, Vec<u8>)],
        drop_below: u64,
        durable: bool,
    ) -> StoreResult<()> {
        if durable {
            self.log = None;
        }
        for (seq, bytes) in records {
            self.audit
                .insert(*seq, bytes.as_slice())
                .map_err(storage_error)?;
        }
        if drop_below > 0 {
            self.audit
                .retain_in(..drop_below, |_, _| false)
                .map_err(storage_error)?;
        }
        Ok(())
    }
}

impl RequestLogWrite for WriteTables<'_> {
    fn put_request_record(&mut self, key: &str, at_ms: u64, outcome: &[u8]) -> StoreResult<()> {
        self.log_op(OP_PUT_REQUEST, at_ms, key.as_bytes(), outcome);
        let mut value = Vec::with_capacity(8 + outcome.len());
        value.extend_from_slice(&at_ms.to_le_bytes());
        value.extend_from_slice(outcome);
        let old = self
            .requests
            .insert(key, value.as_slice())
            .map_err(storage_error)?
            .and_then(|g| g.value().get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()))
            .map(u64::from_le_bytes);
        if let Some(old) = old {
            self.requests_by_time
                .remove((old, key))
                .map_err(storage_error)?;
        }
        self.requests_by_time
            .insert((at_ms, key), ())
            .map_err(storage_error)?;
        Ok(())
    }

    fn prune_request_records(&mut self, before_ms: u64, max: usize) -> StoreResult<u64> {
        self.log_op(
            OP_PRUNE_REQUESTS,
            before_ms,
            &(max as u64).to_le_bytes(),
            &[],
        );
        let mut old: Vec<(u64, String)> = Vec::new();
        for item in self
            .requests_by_time
            .range(..(before_ms, ""))
            .map_err(storage_error)?
            .take(max)
        {
            let (k, _) = item.map_err(storage_error)?;
            let (at, key) = k.value();
            old.push((at, key.to_owned()));
        }
        for (at, key) in &old {
            self.requests_by_time
                .remove((*at, key.as_str()))
                .map_err(storage_error)?;
            self.requests.remove(key.as_str()).map_err(storage_error)?;
        }
        Ok(old.len() as u64)
    }
}
