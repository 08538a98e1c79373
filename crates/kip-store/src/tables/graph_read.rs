//! [`GraphRead`] for both views, through the same generic helpers, so reads inside a
//! write transaction see exactly what a snapshot would (staged records and the overlay
//! merged in).

use super::*;

/// Generic read helpers shared by both views.
pub(super) mod read {
    use super::*;

    /// A concept or proposition record: the transaction's staged write if there is one,
    /// else the table's.
    pub fn record<T: serde::de::DeserializeOwned>(
        t: &impl ReadableTable<u64, &'static [u8]>,
        staged: Option<&Staging<u64, Vec<u8>>>,
        id: u64,
    ) -> StoreResult<Option<T>> {
        if let Some(s) = staged.and_then(|s| s.get(&id)) {
            return s.as_deref().map(decode).transpose();
        }
        match t.get(id).map_err(storage_error)? {
            Some(g) => Ok(Some(decode(g.value())?)),
            None => Ok(None),
        }
    }

    /// Entries in a record table, counting the transaction's staged writes.
    pub fn count(
        t: &impl ReadableTable<u64, &'static [u8]>,
        staged: Option<&Staging<u64, Vec<u8>>>,
    ) -> StoreResult<u64> {
        let mut n = t.len().map_err(storage_error)?;
        for (id, v) in staged.into_iter().flatten() {
            let present = t.get(*id).map_err(storage_error)?.is_some();
            match (present, v.is_some()) {
                (false, true) => n += 1,
                (true, false) => n = n.saturating_sub(1),
                _ => {}
            }
        }
        Ok(n)
    }

    pub fn concept_by_key(
        t: &impl ReadableTable<(&'static str, &'static str), u64>,
        ty: &str,
        name: &str,
    ) -> StoreResult<Option<u64>> {
        Ok(t.get((ty, name)).map_err(storage_error)?.map(|g| g.value()))
    }

    /// `concept_type` / `concept_name`: the ids filed under `key`, in id order.
    pub fn scan_index(
        t: &impl ReadableTable<(&'static str, u64), ()>,
        view: View<'_>,
        which: &Which<StrKey, ()>,
        key: &str,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        // Open-ended, stopping at the first key of another text: cheaper per entry than
        // a bounded range, which compares every key with the end bound.
        let base = t.range((key, 0u64)..).map_err(storage_error)?;
        let over = view.stream(which, || {
            (
                Bound::Included((Text::from(key), 0)),
                Bound::Included((Text::from(key), u64::MAX)),
            )
        });
        merge(
            base,
            over,
            |(k, _), ok: &StrKey| k.value().cmp(&(ok.0.as_str(), ok.1)),
            |item| match item {
                Item::Base((k, _)) => {
                    let (kk, id) = k.value();
                    if kk != key {
                        return Ok(false);
                    }
                    f(id)
                }
                Item::Over(ok, ()) => f(ok.1),
            },
        )
    }

    /// Every id of a record table (with the transaction's staged writes), in order.
    pub fn scan_ids(
        t: &impl ReadableTable<u64, &'static [u8]>,
        staged: Option<&Staging<u64, Vec<u8>>>,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let over = staged
            .filter(|s| !s.is_empty())
            .map(|s| s.iter().map(|(id, v)| (*id, v.as_ref().map(|_| ()))));
        merge(
            t.iter().map_err(storage_error)?,
            over,
            |(k, _), id: &u64| k.value().cmp(id),
            |item| match item {
                Item::Base((k, _)) => f(k.value()),
                Item::Over(id, ()) => f(*id),
            },
        )
    }

    /// Scans a `(u64, &str, u64) -> id` table for a fixed first component and optional
    /// second component: `f(second, third, id)`.
    pub fn scan_triple(
        t: &impl ReadableTable<(u64, &'static str, u64), u64>,
        staged: Option<&Staging<SpoKey, u64>>,
        first: u64,
        second: Option<&str>,
        f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let start = second.unwrap_or("");
        let base = t.range((first, start, 0u64)..).map_err(storage_error)?;
        let over = staged.filter(|s| !s.is_empty()).map(|s| {
            let lo = Bound::Included((first, Text::from(start), 0));
            let hi = match second {
                Some(p) => Bound::Included((first, Text::from(p), u64::MAX)),
                None if first < u64::MAX => Bound::Excluded((first + 1, Text::default(), 0)),
                None => Bound::Unbounded,
            };
            s.range((lo, hi)).map(|(k, v)| (k.clone(), *v))
        });
        merge(
            base,
            over,
            |(k, _), ok: &SpoKey| {
                let (a, b, c) = k.value();
                (a, b, c).cmp(&(ok.0, ok.1.as_str(), ok.2))
            },
            |item| match item {
                Item::Base((k, v)) => {
                    let (a, b, c) = k.value();
                    if a != first || second.is_some_and(|s| s != b) {
                        return Ok(false);
                    }
                    f(b, ElemRef::decode(c), v.value())
                }
                Item::Over(ok, id) => f(&ok.1, ElemRef::decode(ok.2), *id),
            },
        )
    }

    /// `osp`: the links into `object` (with predicate `pred` if given), merged with the
    /// overlay: `f(predicate, subject, link id)` in key order.
    pub fn scan_osp(
        t: &impl ReadableTable<(u64, &'static str, u64), u64>,
        view: View<'_>,
        object: u64,
        pred: Option<&str>,
        f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let start = pred.unwrap_or("");
        let base = t.range((object, start, 0u64)..).map_err(storage_error)?;
        let over = view.stream(&overlay::OSP, || {
            let lo = Bound::Included((object, Text::from(start), 0));
            let hi = match pred {
                Some(p) => Bound::Included((object, Text::from(p), u64::MAX)),
                None if object < u64::MAX => Bound::Excluded((object + 1, Text::default(), 0)),
                None => Bound::Unbounded,
            };
            (lo, hi)
        });
        merge(
            base,
            over,
            |(k, _), ok: &OspKey| {
                let (a, b, c) = k.value();
                (a, b, c).cmp(&(ok.0, ok.1.as_str(), ok.2))
            },
            |item| match item {
                Item::Base((k, v)) => {
                    let (a, b, c) = k.value();
                    if a != object || pred.is_some_and(|p| p != b) {
                        return Ok(false);
                    }
                    f(b, ElemRef::decode(c), v.value())
                }
                Item::Over(ok, id) => f(&ok.1, ElemRef::decode(ok.2), *id),
            },
        )
    }

    /// `pos`: every link with predicate `p`: `f(subject, object, link id)`.
    pub fn scan_pos(
        t: &impl ReadableTable<(&'static str, u64, u64), u64>,
        view: View<'_>,
        p: &str,
        f: &mut dyn FnMut(ElemRef, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let base = t.range((p, 0u64, 0u64)..).map_err(storage_error)?;
        let over = view.stream(&overlay::POS, || {
            (
                Bound::Included((Text::from(p), 0, 0)),
                Bound::Included((Text::from(p), u64::MAX, u64::MAX)),
            )
        });
        merge(
            base,
            over,
            |(k, _), ok: &PosKey| k.value().cmp(&(ok.0.as_str(), ok.1, ok.2)),
            |item| match item {
                Item::Base((k, v)) => {
                    let (pp, o, s) = k.value();
                    if pp != p {
                        return Ok(false);
                    }
                    f(ElemRef::decode(s), ElemRef::decode(o), v.value())
                }
                Item::Over(ok, id) => f(ElemRef::decode(ok.2), ElemRef::decode(ok.1), *id),
            },
        )
    }

    /// Text postings from `from` on, in term order: `f(term, key, tf, doc length)`.
    pub fn scan_postings(
        t: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
        view: View<'_>,
        from: &str,
        f: &mut dyn FnMut(&str, u64, u32, u32) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let base = postings::BlockPostings::from_term(t, from)?;
        let over = view.stream(&overlay::POSTINGS, || {
            (Bound::Included((Text::from(from), 0)), Bound::Unbounded)
        });
        merge(
            base,
            over,
            |(term, key, _), ok: &StrKey| (&**term, *key).cmp(&(ok.0.as_str(), ok.1)),
            |item| match item {
                Item::Base((term, key, packed)) => {
                    f(term, *key, (packed >> 32) as u32, *packed as u32)
                }
                Item::Over(ok, packed) => f(&ok.0, ok.1, (packed >> 32) as u32, *packed as u32),
            },
        )
    }

    /// One posting: (weighted tf, document length).
    pub fn posting(
        t: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
        view: View<'_>,
        term: &str,
        key: u64,
    ) -> StoreResult<Option<(u32, u32)>> {
        let over = view
            .stream(&overlay::POSTINGS, || {
                let exact = (Text::from(term), key);
                (Bound::Included(exact.clone()), Bound::Included(exact))
            })
            .and_then(|mut s| s.next());
        let packed = match over {
            Some((_, v)) => v,
            None => postings::lookup(t, term, key)?,
        };
        Ok(packed.map(|p| ((p >> 32) as u32, p as u32)))
    }

    /// `attr_values`: the concepts of type `ty` by the value key of attribute `attr`
    /// within `(lo, hi)`, ascending (descending with `rev`): `f(value key, concept)`.
    #[allow(clippy::too_many_arguments)]
    pub fn scan_attr(
        t: &impl ReadableTable<AttrTableKey, ()>,
        view: View<'_>,
        ty: &str,
        attr: &str,
        lo: Bound<&str>,
        hi: Bound<&str>,
        rev: bool,
        f: &mut dyn FnMut(&str, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        // Every value key starts with a kind tag below "4" (see `crate::attrs`).
        let klo = match lo {
            Bound::Included(v) => Bound::Included((ty, attr, v, 0u64)),
            Bound::Excluded(v) => Bound::Excluded((ty, attr, v, u64::MAX)),
            Bound::Unbounded => Bound::Included((ty, attr, "", 0u64)),
        };
        let khi = match hi {
            Bound::Included(v) => Bound::Included((ty, attr, v, u64::MAX)),
            Bound::Excluded(v) => Bound::Excluded((ty, attr, v, 0u64)),
            Bound::Unbounded => Bound::Excluded((ty, attr, "4", 0u64)),
        };
        if overlay::empty_range(&klo, &khi) {
            return Ok(());
        }
        let owned = |b: &Bound<(&str, &str, &str, u64)>| -> Bound<AttrKey> {
            b.map(|(a, b, c, d)| (Text::from(a), Text::from(b), Text::from(c), d))
        };
        let over = view.stream(&overlay::ATTRS, || (owned(&klo), owned(&khi)));
        let base = t.range((klo, khi)).map_err(storage_error)?;
        let cmp = |(k, _): &Base<'_>, ok: &AttrKey| {
            k.value()
                .cmp(&(ok.0.as_str(), ok.1.as_str(), ok.2.as_str(), ok.3))
        };
        type Base<'g> = (
            redb::AccessGuard<'g, AttrTableKey>,
            redb::AccessGuard<'g, ()>,
        );
        let mut emit = |item: Item<'_, Base<'_>, AttrKey, ()>| match item {
            Item::Base((k, _)) => {
                let (_, _, v, id) = k.value();
                f(v, id)
            }
            Item::Over(ok, ()) => f(&ok.2, ok.3),
        };
        if rev {
            // The overlay's part of the range, newest state per key, walked backwards
            // (a stream only goes forwards; this range is at most what one fold holds).
            let over = over.map(|s| s.collect::<Vec<_>>().into_iter().rev());
            merge(base.rev(), over, |b, k| cmp(b, k).reverse(), &mut emit)
        } else {
            merge(base, over, cmp, &mut emit)
        }
    }

    pub fn stat(t: &impl ReadableTable<&'static str, u64>, key: &str) -> StoreResult<u64> {
        Ok(t.get(key)
            .map_err(storage_error)?
            .map(|g| g.value())
            .unwrap_or(0))
    }

    pub fn meta(
        t: &impl ReadableTable<&'static str, &'static [u8]>,
        key: &str,
    ) -> StoreResult<Option<Vec<u8>>> {
        Ok(t.get(key)
            .map_err(storage_error)?
            .map(|g| g.value().to_vec()))
    }
}

macro_rules! impl_graph_read {
    ($ty:ty) => {
        impl GraphRead for $ty {
            fn concept(&self, id: u64) -> StoreResult<Option<ConceptRecord>> {
                read::record(&self.concepts, self.staged().map(|s| &s.concepts), id)
            }
            fn concept_head(&self, id: u64) -> StoreResult<Option<(String, String)>> {
                Ok(read::record::<crate::ConceptHead>(
                    &self.concepts,
                    self.staged().map(|s| &s.concepts),
                    id,
                )?
                .map(|h| (h.concept_type, h.name)))
            }
            fn concept_by_key(&self, concept_type: &str, name: &str) -> StoreResult<Option<u64>> {
                self.key_lookup(concept_type, name)
            }
            fn scan_type(
                &self,
                concept_type: &str,
                f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_index(
                    &self.concept_type,
                    self.view(),
                    &overlay::CONCEPT_TYPE,
                    concept_type,
                    f,
                )
            }
            fn scan_name(
                &self,
                name: &str,
                f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_index(
                    &self.concept_name,
                    self.view(),
                    &overlay::CONCEPT_NAME,
                    name,
                    f,
                )
            }
            fn scan_concepts(
                &self,
                f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_ids(&self.concepts, self.staged().map(|s| &s.concepts), f)
            }
            fn prop(&self, id: u64) -> StoreResult<Option<PropRecord>> {
                read::record(&self.props, self.staged().map(|s| &s.props), id)
            }
            fn prop_by_spo(&self, s: ElemRef, p: &str, o: ElemRef) -> StoreResult<Option<u64>> {
                let key = (s.encode(), p, o.encode());
                if let Some(staged) = self.staged().filter(|st| !st.spo.is_empty()) {
                    if let Some(id) = staged.spo.get(&(key.0, Text::from(p), key.2)) {
                        return Ok(*id);
                    }
                }
                let found = self.spo.get(key).map_err(storage_error)?.map(|g| g.value());
                if found.is_none() {
                    self.note_absent(key);
                }
                Ok(found)
            }
            fn scan_out(
                &self,
                s: ElemRef,
                p: Option<&str>,
                f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_triple(&self.spo, self.staged().map(|s| &s.spo), s.encode(), p, f)
            }
            fn scan_in(
                &self,
                o: ElemRef,
                p: Option<&str>,
                f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_osp(&self.osp, self.view(), o.encode(), p, f)
            }
            fn scan_predicate(
                &self,
                p: &str,
                f: &mut dyn FnMut(ElemRef, ElemRef, u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_pos(&self.pos, self.view(), p, f)
            }
            fn scan_props(
                &self,
                f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_ids(&self.props, self.staged().map(|s| &s.props), f)
            }
            fn stat(&self, key: crate::Stat<'_>) -> StoreResult<u64> {
                let key = key.key();
                let base = read::stat(&self.stats, &key)?;
                let delta = self.pending_delta(&key);
                Ok(if delta >= 0 {
                    base.saturating_add(delta.unsigned_abs())
                } else {
                    base.saturating_sub(delta.unsigned_abs())
                })
            }
            fn totals(&self) -> StoreResult<(u64, u64)> {
                Ok((
                    read::count(&self.concepts, self.staged().map(|s| &s.concepts))?,
                    read::count(&self.props, self.staged().map(|s| &s.props))?,
                ))
            }
            fn meta(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
                read::meta(&self.meta, key)
            }
            fn scan_postings(
                &self,
                from: &str,
                f: &mut dyn FnMut(&str, u64, u32, u32) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_postings(&self.postings, self.view(), from, f)
            }
            fn posting(&self, term: &str, key: u64) -> StoreResult<Option<(u32, u32)>> {
                read::posting(&self.postings, self.view(), term, key)
            }
            fn scan_attr(
                &self,
                concept_type: &str,
                attr: &str,
                lo: Bound<&str>,
                hi: Bound<&str>,
                rev: bool,
                f: &mut dyn FnMut(&str, u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                read::scan_attr(&self.attrs, self.view(), concept_type, attr, lo, hi, rev, f)
            }

            fn scan_embedding_marks(
                &self,
                from: u64,
                f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                for item in self.embed_pending.range(from..).map_err(storage_error)? {
                    let (k, _) = item.map_err(storage_error)?;
                    if !f(k.value())? {
                        break;
                    }
                }
                Ok(())
            }

            fn embedding_marks(&self) -> StoreResult<u64> {
                self.embed_pending.len().map_err(storage_error)
            }

            fn vector(&self, id: u64) -> StoreResult<Option<Vec<u8>>> {
                Ok(self
                    .vectors
                    .get(id)
                    .map_err(storage_error)?
                    .map(|g| g.value().to_vec()))
            }

            fn scan_vectors(
                &self,
                f: &mut dyn FnMut(u64, &[u8]) -> StoreResult<Continue>,
            ) -> StoreResult<()> {
                for item in self.vectors.iter().map_err(storage_error)? {
                    let (k, v) = item.map_err(storage_error)?;
                    if !f(k.value(), v.value())? {
                        break;
                    }
                }
                Ok(())
            }
        }
    };
}

impl_graph_read!(ReadTables);
impl_graph_read!(WriteTables<'_>);

/// The recorded outcome under `key` in the request log table (value: made-at, then the
/// outcome).
fn request_record(
    t: &impl ReadableTable<&'static str, &'static [u8]>,
    key: &str,
) -> StoreResult<Option<Vec<u8>>> {
    Ok(t.get(key)
        .map_err(storage_error)?
        .and_then(|g| g.value().get(8..).map(<[u8]>::to_vec)))
}

impl kip_storage::RequestLog for ReadTables {
    fn request_record(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        match &self.requests {
            Some(t) => request_record(t, key),
            None => Ok(None),
        }
    }
}

impl kip_storage::RequestLog for WriteTables<'_> {
    fn request_record(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        request_record(&self.requests, key)
    }
}
