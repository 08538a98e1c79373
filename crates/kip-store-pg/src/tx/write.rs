//! The writing half of [`PgTx`]: index upkeep (text postings, attribute entries,
//! embedding marks, counts) buffered per transaction, the index rebuild, the audit
//! log, and [`GraphWrite`].

use super::*;

impl PgTx<'_> {
    /// Adds a document to the text index.
    fn index(&mut self, key: u64, doc: &Doc) -> StoreResult<()> {
        if doc.terms.is_empty() {
            return Ok(());
        }
        {
            let mut buf = self.buf.borrow_mut();
            for (t, tf) in &doc.terms {
                buf.postings.insert(
                    (t.clone(), ek(key)),
                    Some((i64::from(*tf), i64::from(doc.len))),
                );
            }
        }
        self.bump(kip_store::TEXT_DOCS, 1);
        self.bump(kip_store::TEXT_LEN, i64::from(doc.len));
        Ok(())
    }

    /// Removes a document from the text index (`doc` as it was indexed).
    fn unindex(&mut self, key: u64, doc: &Doc) -> StoreResult<()> {
        if doc.terms.is_empty() {
            return Ok(());
        }
        {
            let mut buf = self.buf.borrow_mut();
            for t in doc.terms.keys() {
                buf.postings.insert((t.clone(), ek(key)), None);
            }
        }
        self.bump(kip_store::TEXT_DOCS, -1);
        self.bump(kip_store::TEXT_LEN, -i64::from(doc.len));
        Ok(())
    }

    /// Moves concept `id` in the attribute value index from `old` to `new`.
    fn file_attrs(
        &mut self,
        id: u64,
        old: Option<&ConceptRecord>,
        new: Option<&ConceptRecord>,
    ) -> StoreResult<()> {
        let (removed, added) = kip_store::attrs::diff(old, new);
        let n = num(id)?;
        for (list, sign) in [(removed, -1i64), (added, 1)] {
            for (t, a, v) in list {
                let key = Self::stat_key(Stat::Attr(t, a));
                self.bump(&key, sign);
                self.buf
                    .get_mut()
                    .attrs
                    .insert((t.to_owned(), a.to_owned(), v, n), sign > 0);
            }
        }
        Ok(())
    }

    fn mark(&mut self, key: u64) {
        self.buf.get_mut().marks.insert(ek(key), true);
    }

    fn drop_vector(&self, key: u64) -> StoreResult<()> {
        self.execute("DELETE FROM kip_vectors WHERE elem = $1", &[&ek(key)])?;
        Ok(())
    }

    fn prop_index_bumps(&mut self, rec: &PropRecord, sign: i64) {
        self.bump(&Self::stat_key(Stat::Predicate(&rec.predicate)), sign);
        if rec.predicate == kip_store::DOMAIN_PREDICATE {
            self.bump(&Self::stat_key(Stat::Domain(rec.object)), sign);
        }
    }

    /// Drops and rebuilds the text and attribute indexes from the concept records.
    pub(crate) fn rebuild_indexes(
        &mut self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> StoreResult<()> {
        self.sync()?;
        let conn = self.conn.get_mut();
        conn.batch("DELETE FROM kip_postings; DELETE FROM kip_attrs")?;
        conn.execute(
            "DELETE FROM kip_stats WHERE key = $1 OR key = $2 OR substring(key from 1 for 2) = $3",
            &[
                &kip_store::TEXT_DOCS.as_bytes(),
                &kip_store::TEXT_LEN.as_bytes(),
                &b"a:".as_slice(),
            ],
        )?;
        self.stats.retain(|k, _| {
            !k.starts_with("a:") && k != kip_store::TEXT_DOCS && k != kip_store::TEXT_LEN
        });
        let total = self.totals()?.0;
        let mut done = 0u64;
        let mut after = 0i64;
        loop {
            let rows = self.query(
                "SELECT id, rec FROM kip_concepts WHERE id > $1 ORDER BY id LIMIT 1000",
                &[&after],
            )?;
            for r in &rows {
                let id = get::<i64>(r, 0)?;
                after = id;
                let c: ConceptRecord = decode(&get::<Vec<u8>>(r, 1)?)?;
                let n = unum(id)?;
                self.index(ElemRef::Concept(n).encode(), &text::concept_doc(&c))?;
                self.file_attrs(n, None, Some(&c))?;
                self.grew()?;
                done += 1;
            }
            progress(done, total);
            if rows.len() < 1000 {
                break;
            }
        }
        self.set_meta(
            kip_store::db::TEXT_INDEX_KEY,
            &text::TEXT_INDEX_VERSION.to_le_bytes(),
        )?;
        self.set_meta(
            kip_store::attrs::ATTR_INDEX_KEY,
            &kip_store::attrs::ATTR_INDEX_VERSION.to_le_bytes(),
        )
    }

    /// Appends audit records and drops those numbered below `drop_below`.
    pub(crate) fn audit_append(
        &mut self,
        records: &[(u64, Vec<u8>)],
        drop_below: u64,
    ) -> StoreResult<()> {
        let mut seqs = Vec::with_capacity(records.len());
        let mut recs: Vec<&[u8]> = Vec::with_capacity(records.len());
        for (seq, bytes) in records {
            seqs.push(num(*seq)?);
            recs.push(bytes);
        }
        if !seqs.is_empty() {
            self.execute(
                "INSERT INTO kip_audit (seq, rec) SELECT * FROM unnest($1::bigint[], $2::bytea[]) \
                 ON CONFLICT (seq) DO UPDATE SET rec = excluded.rec",
                &[&seqs, &recs],
            )?;
        }
        if drop_below > 0 {
            let below = i64::try_from(drop_below).unwrap_or(i64::MAX);
            self.execute("DELETE FROM kip_audit WHERE seq < $1", &[&below])?;
        }
        Ok(())
    }

    /// Audit records with `lo <= seq < hi`.
    pub(crate) fn audit_range(
        &self,
        lo: u64,
        hi: u64,
        rev: bool,
        f: &mut dyn FnMut(u64, &[u8]) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        let lo = i64::try_from(lo).unwrap_or(i64::MAX);
        let hi = i64::try_from(hi).unwrap_or(i64::MAX);
        let (first, next) = if rev {
            (
                "SELECT seq, rec FROM kip_audit WHERE seq >= $1 AND seq < $2 ORDER BY seq DESC LIMIT $3",
                "SELECT seq, rec FROM kip_audit WHERE seq >= $1 AND seq < LEAST($2, $3) ORDER BY seq DESC LIMIT $4",
            )
        } else {
            (
                "SELECT seq, rec FROM kip_audit WHERE seq >= $1 AND seq < $2 ORDER BY seq LIMIT $3",
                "SELECT seq, rec FROM kip_audit WHERE seq > $3 AND seq < $2 AND seq >= $1 ORDER BY seq LIMIT $4",
            )
        };
        self.paged(
            first,
            next,
            &[&lo, &hi],
            &|r| Ok(vec![Box::new(get::<i64>(r, 0)?)]),
            &mut |r| {
                let seq = unum(get(r, 0)?)?;
                f(seq, get::<&[u8]>(r, 1)?)
            },
        )
    }
}

impl GraphWrite for PgTx<'_> {
    fn alloc_concept_id(&mut self) -> StoreResult<u64> {
        self.alloc(0)
    }

    fn alloc_prop_id(&mut self) -> StoreResult<u64> {
        self.alloc(1)
    }

    fn put_concept(
        &mut self,
        id: u64,
        rec: &ConceptRecord,
        old: Option<&ConceptRecord>,
    ) -> StoreResult<()> {
        let key = ElemRef::Concept(id).encode();
        if old.is_none_or(|o| text::concept_text_changed(o, rec)) {
            if let Some(o) = old {
                self.unindex(key, &text::concept_doc(o))?;
            }
            self.index(key, &text::concept_doc(rec))?;
            if self.vectors_on {
                self.mark(key);
                if let Some(o) = old {
                    for p in kip_store::dependent_links(self, id, o, rec)? {
                        self.mark(ElemRef::Prop(p).encode());
                    }
                }
            }
        }
        self.file_attrs(id, old, Some(rec))?;
        let row = ConceptRow {
            ty: rec.concept_type.clone(),
            name: rec.name.clone(),
            rec: encode(rec)?,
        };
        self.records.get_mut().remove(&key);
        self.buf.get_mut().concepts.insert(num(id)?, Some(row));
        let same_key =
            old.is_some_and(|o| o.concept_type == rec.concept_type && o.name == rec.name);
        if !same_key {
            let known = self.known_keys.get_mut();
            if let Some(o) = old {
                known.insert(&o.concept_type, &o.name, None);
                self.removed_keys += 1;
            }
            known.insert(&rec.concept_type, &rec.name, Some(id));
            if let Some(o) = old {
                self.bump(&Self::stat_key(Stat::Type(&o.concept_type)), -1);
            }
            self.bump(&Self::stat_key(Stat::Type(&rec.concept_type)), 1);
        }
        if old.is_none() {
            self.bump(CONCEPTS, 1);
        }
        self.grew()
    }

    fn delete_concept(&mut self, id: u64, rec: &ConceptRecord) -> StoreResult<()> {
        let key = ElemRef::Concept(id).encode();
        self.unindex(key, &text::concept_doc(rec))?;
        if self.vectors_on {
            // Marked, not unmarked: the embedding worker then drops its copy.
            self.mark(key);
            self.drop_vector(key)?;
        }
        self.file_attrs(id, Some(rec), None)?;
        self.records.get_mut().remove(&key);
        self.buf.get_mut().concepts.insert(num(id)?, None);
        self.known_keys
            .get_mut()
            .insert(&rec.concept_type, &rec.name, None);
        self.removed_keys += 1;
        self.bump(&Self::stat_key(Stat::Type(&rec.concept_type)), -1);
        self.bump(CONCEPTS, -1);
        self.grew()
    }

    fn put_prop(&mut self, id: u64, rec: &PropRecord, old: Option<&PropRecord>) -> StoreResult<()> {
        let (s, o) = (ek(rec.subject.encode()), ek(rec.object.encode()));
        let row = PropRow {
            s,
            p: rec.predicate.clone(),
            o,
            rec: encode(rec)?,
        };
        let same_key = old.is_some_and(|o| {
            o.subject == rec.subject && o.predicate == rec.predicate && o.object == rec.object
        });
        self.records.get_mut().remove(&ElemRef::Prop(id).encode());
        self.buf.get_mut().props.insert(num(id)?, Some(row));
        if !same_key {
            let known = self.known_spo.get_mut();
            if let Some(old) = old {
                let k = (
                    ek(old.subject.encode()),
                    old.predicate.clone(),
                    ek(old.object.encode()),
                );
                known.insert(k, None);
            }
            known.insert((s, rec.predicate.clone(), o), Some(id));
            if self.vectors_on {
                self.mark(ElemRef::Prop(id).encode());
            }
            if let Some(o) = old {
                self.prop_index_bumps(o, -1);
            }
            self.prop_index_bumps(rec, 1);
        }
        if old.is_none() {
            self.bump(PROPS, 1);
        }
        self.grew()
    }

    fn delete_prop(&mut self, id: u64, rec: &PropRecord) -> StoreResult<()> {
        if self.vectors_on {
            let key = ElemRef::Prop(id).encode();
            self.mark(key);
            self.drop_vector(key)?;
        }
        self.records.get_mut().remove(&ElemRef::Prop(id).encode());
        self.buf.get_mut().props.insert(num(id)?, None);
        let k = (
            ek(rec.subject.encode()),
            rec.predicate.clone(),
            ek(rec.object.encode()),
        );
        self.known_spo.get_mut().insert(k, None);
        self.prop_index_bumps(rec, -1);
        self.bump(PROPS, -1);
        self.grew()
    }

    fn set_meta(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.execute(
            "INSERT INTO kip_meta (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[&key.as_bytes(), &value],
        )?;
        if key == kip_store::VECTORS_ON {
            self.vectors_on = true;
        }
        Ok(())
    }

    fn enable_vectors(&mut self) -> StoreResult<bool> {
        if self.vectors_on {
            return Ok(false);
        }
        self.set_meta(kip_store::VECTORS_ON, &[1])?;
        Ok(true)
    }

    fn mark_for_embedding(&mut self, ids: Option<&[u64]>) -> StoreResult<u64> {
        // Counted by the database (marks already there are not added): written first.
        self.sync()?;
        match ids {
            Some(ids) => {
                let keys: Vec<i64> = ids.iter().map(|&k| ek(k)).collect();
                self.execute(
                    "INSERT INTO kip_embed_marks (elem) SELECT * FROM unnest($1::bigint[]) \
                     ON CONFLICT DO NOTHING",
                    &[&keys],
                )
            }
            None => {
                // Concept n is stored as n + i64::MIN, proposition n as n (see `ek`).
                let a = self.execute(
                    "INSERT INTO kip_embed_marks (elem) \
                     SELECT id + (-9223372036854775807 - 1) FROM kip_concepts ON CONFLICT DO NOTHING",
                    &[],
                )?;
                let b = self.execute(
                    "INSERT INTO kip_embed_marks (elem) SELECT id FROM kip_props ON CONFLICT DO NOTHING",
                    &[],
                )?;
                Ok(a + b)
            }
        }
    }

    fn put_vector(&mut self, id: u64, bytes: Option<&[u8]>) -> StoreResult<()> {
        self.buf.get_mut().marks.insert(ek(id), false);
        if let Some(b) = bytes {
            self.execute(
                "INSERT INTO kip_vectors (elem, v) VALUES ($1, $2) \
                 ON CONFLICT (elem) DO UPDATE SET v = excluded.v",
                &[&ek(id), &b],
            )?;
        }
        Ok(())
    }

    fn clear_vectors(&mut self) -> StoreResult<()> {
        self.execute("DELETE FROM kip_vectors", &[])?;
        Ok(())
    }
}
