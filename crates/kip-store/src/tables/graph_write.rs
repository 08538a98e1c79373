//! [`GraphWrite`] for [`WriteTables`]: record writes with their index, statistics and
//! text-index upkeep, and the text index rebuild.

use super::*;

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
        if old.is_none_or(|o| text::concept_text_changed(o, rec)) {
            let key = ElemRef::Concept(id).encode();
            if let Some(o) = old {
                self.unindex(key, &text::concept_doc(o))?;
            }
            self.index(key, &text::concept_doc(rec))?;
            if self.vectors_on {
                self.embed_pending.insert(key, ()).map_err(storage_error)?;
                if let Some(o) = old {
                    self.mark_dependent_links(id, o, rec)?;
                }
            }
        }
        self.file_attrs(id, old, Some(rec))?;
        let bytes = encode(rec)?;
        self.log_op(OP_PUT_CONCEPT, id, &bytes, &[]);
        self.staged.concepts.insert(id, Some(bytes));
        let same_key =
            old.is_some_and(|o| o.concept_type == rec.concept_type && o.name == rec.name);
        if !same_key {
            if let Some(o) = old {
                self.file_key(id, o, false)?;
            }
            self.file_key(id, rec, true)?;
        }
        self.staged_grew()
    }

    fn delete_concept(&mut self, id: u64, rec: &ConceptRecord) -> StoreResult<()> {
        self.log_op(OP_DEL_CONCEPT, id, &[], &[]);
        self.unindex(ElemRef::Concept(id).encode(), &text::concept_doc(rec))?;
        if self.vectors_on {
            // Marked, not unmarked: the embedding worker then drops its copy of the vector.
            self.embed_pending.insert(id, ()).map_err(storage_error)?;
            self.vectors.remove(id).map_err(storage_error)?;
        }
        self.file_attrs(id, Some(rec), None)?;
        self.staged.concepts.insert(id, None);
        self.file_key(id, rec, false)?;
        self.staged_grew()
    }

    fn put_prop(&mut self, id: u64, rec: &PropRecord, old: Option<&PropRecord>) -> StoreResult<()> {
        let bytes = encode(rec)?;
        self.log_op(OP_PUT_PROP, id, &bytes, &[]);
        self.staged.props.insert(id, Some(bytes));
        let same_key = old.is_some_and(|o| {
            o.subject == rec.subject && o.predicate == rec.predicate && o.object == rec.object
        });
        if !same_key {
            if self.vectors_on {
                let key = ElemRef::Prop(id).encode();
                self.embed_pending.insert(key, ()).map_err(storage_error)?;
            }
            if let Some(o) = old {
                self.remove_prop_index(o)?;
            }
            let (s, p, o) = (
                rec.subject.encode(),
                rec.predicate.as_str(),
                rec.object.encode(),
            );
            self.staged.spo.insert((s, Text::from(p), o), Some(id));
            self.change(|c| &mut c.pos, (Text::from(p), o, s), Some(id))?;
            self.change(|c| &mut c.osp, (o, Text::from(p), s), Some(id))?;
            self.bump(crate::Stat::Predicate(p), 1)?;
            if p == crate::DOMAIN_PREDICATE {
                self.bump(crate::Stat::Domain(rec.object), 1)?;
            }
        }
        self.staged_grew()
    }

    fn delete_prop(&mut self, id: u64, rec: &PropRecord) -> StoreResult<()> {
        self.log_op(OP_DEL_PROP, id, &[], &[]);
        self.staged.props.insert(id, None);
        if self.vectors_on {
            let key = ElemRef::Prop(id).encode();
            self.embed_pending.insert(key, ()).map_err(storage_error)?;
            self.vectors.remove(key).map_err(storage_error)?;
        }
        self.remove_prop_index(rec)?;
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

impl WriteTables<'_> {
    /// Files concept `id` under its `{type, name}` (or, with `add` false, removes it):
    /// the `concept_key` table, the writers' key cache, the type and name indexes and
    /// the per-type count.
    fn file_key(&mut self, id: u64, rec: &ConceptRecord, add: bool) -> StoreResult<()> {
        let (ty, name) = (rec.concept_type.as_str(), rec.name.as_str());
        if add {
            self.concept_key
                .insert((ty, name), id)
                .map_err(storage_error)?;
            self.overlay.keys().insert(ty, name, id);
        } else {
            self.concept_key.remove((ty, name)).map_err(storage_error)?;
            self.overlay.keys().remove(ty, name);
        }
        let present = add.then_some(());
        self.change(|c| &mut c.concept_type, (Text::from(ty), id), present)?;
        self.change(|c| &mut c.concept_name, (Text::from(name), id), present)?;
        self.bump(crate::Stat::Type(ty), if add { 1 } else { -1 })
    }

    /// Moves concept `id` in the attribute value index from what `old` filed (if any)
    /// to what `new` files (if any): only the entries that differ change, with the
    /// per-`(type, attribute)` counts.
    fn file_attrs(
        &mut self,
        id: u64,
        old: Option<&ConceptRecord>,
        new: Option<&ConceptRecord>,
    ) -> StoreResult<()> {
        let (removed, added) = crate::attrs::diff(old, new);
        for (ty, a, v) in removed {
            let key = (Text::from(ty), Text::from(a), Text::from(v.as_str()), id);
            self.change(|c| &mut c.attrs, key, None)?;
            self.bump(crate::Stat::Attr(ty, a), -1)?;
        }
        for (ty, a, v) in added {
            let key = (Text::from(ty), Text::from(a), Text::from(v.as_str()), id);
            self.change(|c| &mut c.attrs, key, Some(()))?;
            self.bump(crate::Stat::Attr(ty, a), 1)?;
        }
        Ok(())
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
        self.each_concept(progress, &mut |w, n, c| w.file_attrs(n, None, Some(c)))
    }

    /// Adds a document to the text index.
    fn index(&mut self, key: u64, doc: &text::Doc) -> StoreResult<()> {
        if doc.terms.is_empty() {
            return Ok(());
        }
        for (t, tf) in &doc.terms {
            let packed = (u64::from(*tf) << 32) | u64::from(doc.len);
            self.change(
                |c| &mut c.postings,
                (Text::from(t.as_str()), key),
                Some(packed),
            )?;
        }
        self.bump_stat(TEXT_DOCS, 1)?;
        self.bump_stat(TEXT_LEN, i64::from(doc.len))
    }

    /// Removes a document from the text index. `doc` is the analysed text of the
    /// element as it was indexed: the text index is always updated in the transaction
    /// that changes the record, with the analysis of `TEXT_INDEX_VERSION` (a store
    /// indexed by another version is rebuilt when it is opened).
    fn unindex(&mut self, key: u64, doc: &text::Doc) -> StoreResult<()> {
        if doc.terms.is_empty() {
            // Never indexed (see `index`).
            return Ok(());
        }
        for t in doc.terms.keys() {
            self.change(|c| &mut c.postings, (Text::from(t.as_str()), key), None)?;
        }
        self.bump_stat(TEXT_DOCS, -1)?;
        self.bump_stat(TEXT_LEN, -i64::from(doc.len))
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
            w.index(ElemRef::Concept(n).encode(), &text::concept_doc(c))
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

    fn remove_prop_index(&mut self, rec: &PropRecord) -> StoreResult<()> {
        let (s, p, o) = (
            rec.subject.encode(),
            rec.predicate.as_str(),
            rec.object.encode(),
        );
        self.staged.spo.insert((s, Text::from(p), o), None);
        self.change(|c| &mut c.pos, (Text::from(p), o, s), None)?;
        self.change(|c| &mut c.osp, (o, Text::from(p), s), None)?;
        if p == crate::DOMAIN_PREDICATE {
            self.bump(crate::Stat::Domain(rec.object), -1)?;
        }
        self.bump(crate::Stat::Predicate(p), -1)
    }
}

impl WriteTables<'_> {
    /// Marks the links whose embedded text names concept `id` (see the engine's
    /// `semantic::prop_embedding_text`) after its record changed from `old` to `rec`: its
    /// own links when it was renamed, and every link of the predicate when `rec` is a
    /// `$PropositionType` whose name or description changed.
    fn mark_dependent_links(
        &mut self,
        id: u64,
        old: &ConceptRecord,
        rec: &ConceptRecord,
    ) -> StoreResult<()> {
        let links = crate::dependent_links(self, id, old, rec)?;
        for p in links {
            let key = ElemRef::Prop(p).encode();
            self.embed_pending.insert(key, ()).map_err(storage_error)?;
        }
        Ok(())
    }
}

impl WriteTables<'_> {
    /// Appends audit records and drops those with a sequence number below `drop_below`.
    /// They are not in the write-ahead log: `durable` makes the transaction commit
    /// durably (a checkpoint); otherwise it commits like a logged write without a log
    /// record, and the records become durable at the next checkpoint.
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
