//! The writing half of [`PgTx`]: index upkeep (text postings, attribute entries,
//! embedding marks, counts) buffered per transaction, the index rebuild, the audit
//! log, and [`GraphWrite`].

use super::*;
use kip_storage::upkeep::{self, IndexTarget};

impl PgTx<'_> {
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
                &kip_storage::TEXT_DOCS.as_bytes(),
                &kip_storage::TEXT_LEN.as_bytes(),
                &b"a:".as_slice(),
            ],
        )?;
        self.stats.retain(|k, _| {
            !k.starts_with("a:") && k != kip_storage::TEXT_DOCS && k != kip_storage::TEXT_LEN
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
                upkeep::index_text(self, ElemRef::Concept(n).encode(), &text::concept_doc(&c))?;
                upkeep::file_attrs(self, n, None, Some(&c))?;
                self.grew()?;
                done += 1;
            }
            progress(done, total);
            if rows.len() < 1000 {
                break;
            }
        }
        self.set_meta(
            kip_storage::TEXT_INDEX_KEY,
            &text::TEXT_INDEX_VERSION.to_le_bytes(),
        )?;
        self.set_meta(
            kip_storage::attrs::ATTR_INDEX_KEY,
            &kip_storage::attrs::ATTR_INDEX_VERSION.to_le_bytes(),
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

    /// Replaces the audit records numbered `seqs` that exist with `recs`.
    pub(crate) fn audit_rewrite(&mut self, seqs: &[i64], recs: &[&[u8]]) -> StoreResult<()> {
        if !seqs.is_empty() {
            self.execute(
                "UPDATE kip_audit SET rec = d.rec FROM unnest($1::bigint[], $2::bytea[]) AS d(seq, rec) \
                 WHERE kip_audit.seq = d.seq",
                &[&seqs, &recs],
            )?;
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
                "SELECT seq, rec FROM kip_audit WHERE seq >= $1 AND seq < LEAST($2::bigint, $3::bigint) ORDER BY seq DESC LIMIT $4",
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
        upkeep::concept_put(self, id, rec, old)?;
        let row = ConceptRow {
            ty: rec.concept_type.clone(),
            name: rec.name.clone(),
            rec: encode(rec)?,
        };
        self.records
            .get_mut()
            .remove(&ElemRef::Concept(id).encode());
        self.buf.get_mut().concepts.insert(num(id)?, Some(row));
        if old.is_none() {
            self.bump_key(CONCEPTS, 1);
        }
        self.grew()
    }

    fn delete_concept(&mut self, id: u64, rec: &ConceptRecord) -> StoreResult<()> {
        upkeep::concept_delete(self, id, rec)?;
        self.records
            .get_mut()
            .remove(&ElemRef::Concept(id).encode());
        self.buf.get_mut().concepts.insert(num(id)?, None);
        self.bump_key(CONCEPTS, -1);
        self.grew()
    }

    fn put_prop(&mut self, id: u64, rec: &PropRecord, old: Option<&PropRecord>) -> StoreResult<()> {
        let row = PropRow {
            s: ek(rec.subject.encode()),
            p: rec.predicate.clone(),
            o: ek(rec.object.encode()),
            rec: encode(rec)?,
        };
        self.records.get_mut().remove(&ElemRef::Prop(id).encode());
        self.buf.get_mut().props.insert(num(id)?, Some(row));
        upkeep::prop_put(self, id, rec, old)?;
        if old.is_none() {
            self.bump_key(PROPS, 1);
        }
        self.grew()
    }

    fn delete_prop(&mut self, id: u64, rec: &PropRecord) -> StoreResult<()> {
        upkeep::prop_delete(self, id, rec)?;
        self.records.get_mut().remove(&ElemRef::Prop(id).encode());
        self.buf.get_mut().props.insert(num(id)?, None);
        self.bump_key(PROPS, -1);
        self.grew()
    }

    fn set_meta(&mut self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.execute(
            "INSERT INTO kip_meta (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[&key.as_bytes(), &value],
        )?;
        if key == kip_storage::VECTORS_ON {
            self.vectors_on = true;
        }
        Ok(())
    }

    fn enable_vectors(&mut self) -> StoreResult<bool> {
        if self.vectors_on {
            return Ok(false);
        }
        self.set_meta(kip_storage::VECTORS_ON, &[1])?;
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

/// How this backend files each kind of derived data; what to file is decided by the
/// contract's driver ([`upkeep`]). Index rows are buffered per transaction and written
/// in batches; the key caches remember what this transaction filed.
impl IndexTarget for PgTx<'_> {
    fn vectors_on(&self) -> bool {
        self.vectors_on
    }

    fn set_posting(&mut self, term: &str, key: u64, entry: Option<(u32, u32)>) -> StoreResult<()> {
        let entry = entry.map(|(tf, len)| (i64::from(tf), i64::from(len)));
        self.buf
            .get_mut()
            .postings
            .insert((term.to_owned(), ek(key)), entry);
        Ok(())
    }

    fn set_attr_entry(
        &mut self,
        concept_type: &str,
        attr: &str,
        value: &str,
        id: u64,
        present: bool,
    ) -> StoreResult<()> {
        let n = num(id)?;
        self.buf.get_mut().attrs.insert(
            (
                concept_type.to_owned(),
                attr.to_owned(),
                value.to_owned(),
                n,
            ),
            present,
        );
        Ok(())
    }

    /// The concept row carries its `{type, name}` (the table's unique index is the key
    /// index): only the writers' key cache changes here.
    fn set_concept_key(
        &mut self,
        id: u64,
        concept_type: &str,
        name: &str,
        present: bool,
    ) -> StoreResult<()> {
        self.known_keys
            .get_mut()
            .insert(concept_type, name, present.then_some(id));
        if !present {
            self.removed_keys += 1;
        }
        Ok(())
    }

    /// The link row carries its `(s, p, o)` (the table's unique index is the key
    /// index): only the writers' key cache changes here.
    fn set_link_key(
        &mut self,
        id: u64,
        s: ElemRef,
        p: &str,
        o: ElemRef,
        present: bool,
    ) -> StoreResult<()> {
        let k = (ek(s.encode()), p.to_owned(), ek(o.encode()));
        self.known_spo.get_mut().insert(k, present.then_some(id));
        Ok(())
    }

    fn bump(&mut self, stat: Stat<'_>, delta: i64) -> StoreResult<()> {
        self.bump_key(&Self::stat_key(stat), delta);
        Ok(())
    }

    fn mark(&mut self, key: u64) -> StoreResult<()> {
        self.buf.get_mut().marks.insert(ek(key), true);
        Ok(())
    }

    fn drop_vector(&mut self, key: u64) -> StoreResult<()> {
        self.execute("DELETE FROM kip_vectors WHERE elem = $1", &[&ek(key)])?;
        Ok(())
    }
}

impl kip_storage::RequestLogWrite for PgTx<'_> {
    fn put_request_record(&mut self, key: &str, at_ms: u64, outcome: &[u8]) -> StoreResult<()> {
        let at = i64::try_from(at_ms).unwrap_or(i64::MAX);
        self.execute(
            "INSERT INTO kip_requests (key, at, outcome) VALUES ($1, $2, $3) \
             ON CONFLICT (key) DO UPDATE SET at = excluded.at, outcome = excluded.outcome",
            &[&key.as_bytes(), &at, &outcome],
        )?;
        Ok(())
    }

    fn prune_request_records(&mut self, before_ms: u64, max: usize) -> StoreResult<u64> {
        let before = i64::try_from(before_ms).unwrap_or(i64::MAX);
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        self.execute(
            "DELETE FROM kip_requests WHERE key IN \
             (SELECT key FROM kip_requests WHERE at < $1 ORDER BY at, key LIMIT $2)",
            &[&before, &max],
        )
    }
}
