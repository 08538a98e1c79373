//! Reads `AS OF SEQ k` (docs/storage.md §3.3), for every backend: a [`GraphRead`]
//! over the current snapshot and the history primitives ([`crate::history`]), so the
//! executors read the past through the interface they read the present with.
//!
//! At `k`: an element whose id is at or above the watermarks of commit `k` did not
//! exist yet; an element listed in the changes index after `k` reads the version chain
//! (the first entry whose `valid_to` is above `k`), every other element reads its
//! current row. Index scans run over the current indexes, drop the elements created or
//! changed after `k`, and add those changed ones whose state at `k` matches (computed
//! from that state, as the upkeep driver would have filed it). Not versioned: text
//! postings, vectors and statistics (estimates; SEARCH has no `AS OF`), `meta` and the
//! request log, which answer as now.

use crate::history::{self, HistoryRead, Watermarks, PART_RECORD, PART_ROW};
use crate::{
    attrs, decode, ConceptRecord, Continue, ElemRef, ElementId, ElementKind, ElementRead,
    ElementRecord, GraphRead, PropRecord, RequestLog, SpaceId, Stat, StoreResult,
};
use std::collections::BTreeSet;
use std::ops::Bound;

/// A read of the graph as it was after commit `seq` of `space`.
pub struct AsOf<'a> {
    g: &'a dyn GraphRead,
    space: SpaceId,
    seq: u64,
    at_ms: u64,
    wm: Watermarks,
    /// Element keys changed or ended after `seq`.
    changed: BTreeSet<u64>,
}

/// A scan of ids the view filters: it runs the current scan with the callback given.
type IdScan<'s> = dyn FnMut(&mut dyn FnMut(u64) -> StoreResult<Continue>) -> StoreResult<()> + 's;
/// A link callback: `(predicate, other end, link)`.
type LinkFn<'s> = dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue> + 's;

/// What an element's part was at the coordinate.
enum At {
    /// As it is now.
    Current,
    /// It did not exist.
    Absent,
    /// This stored state.
    Bytes(Vec<u8>),
}

impl<'a> AsOf<'a> {
    /// The view after commit `seq`; `None` when there is no such commit (history not
    /// recorded then, a seq not reached yet, or cut by a horizon).
    pub fn new(g: &'a dyn GraphRead, space: SpaceId, seq: u64) -> StoreResult<Option<AsOf<'a>>> {
        let Some(c) = history::commit(g, space, seq)? else {
            return Ok(None);
        };
        let mut changed = BTreeSet::new();
        g.scan_changes(space, seq, &mut |_, key| {
            changed.insert(key);
            Ok(true)
        })?;
        Ok(Some(AsOf {
            g,
            space,
            seq,
            at_ms: c.at_ms,
            wm: c.watermarks,
            changed,
        }))
    }

    /// The coordinate read.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// When that commit was made (milliseconds since the Unix epoch).
    pub fn committed_at_ms(&self) -> u64 {
        self.at_ms
    }

    fn at(&self, key: u64, part: u8) -> StoreResult<At> {
        if !self.wm.existed(key) {
            return Ok(At::Absent);
        }
        if !self.changed.contains(&key) {
            return Ok(At::Current);
        }
        Ok(
            match history::state_after(self.g, self.space, key, part, self.seq)? {
                Some((_, b)) if b.is_empty() => At::Absent,
                Some((_, b)) => At::Bytes(b),
                None => At::Current,
            },
        )
    }

    /// Whether the current index entry of `key` may be used as it is.
    fn unchanged(&self, key: u64) -> bool {
        self.wm.existed(key) && !self.changed.contains(&key)
    }

    fn changed_of(&self, kind: ElementKind) -> impl Iterator<Item = ElementId> + '_ {
        self.changed
            .iter()
            .filter_map(|k| ElementId::decode(*k))
            .filter(move |id| id.kind == kind)
    }

    /// The concepts changed after the coordinate whose state then satisfies `keep`.
    fn changed_concepts(
        &self,
        keep: &mut dyn FnMut(u64, &ConceptRecord) -> bool,
    ) -> StoreResult<Vec<u64>> {
        let mut out = Vec::new();
        for id in self.changed_of(ElementKind::Concept).collect::<Vec<_>>() {
            if let Some(c) = self.concept(id.n)? {
                if keep(id.n, &c) {
                    out.push(id.n);
                }
            }
        }
        Ok(out)
    }

    /// The links changed after the coordinate, with their state then.
    fn changed_props(&self) -> StoreResult<Vec<(u64, PropRecord)>> {
        let mut out = Vec::new();
        for id in self
            .changed_of(ElementKind::Proposition)
            .collect::<Vec<_>>()
        {
            if let Some(p) = self.prop(id.n)? {
                out.push((id.n, p));
            }
        }
        Ok(out)
    }

    /// A scan of ids: the current scan's unchanged ids merged with `extra`, in id order.
    fn ids(
        &self,
        to_key: &dyn Fn(u64) -> u64,
        mut extra: Vec<u64>,
        scan: &mut IdScan<'_>,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        extra.sort_unstable();
        extra.dedup();
        let mut next = 0usize;
        let mut go = true;
        scan(&mut |id| {
            if !self.unchanged(to_key(id)) {
                return Ok(true);
            }
            while next < extra.len() && extra[next] < id {
                go = f(extra[next])?;
                next += 1;
                if !go {
                    return Ok(false);
                }
            }
            go = f(id)?;
            Ok(go)
        })?;
        while go && next < extra.len() {
            go = f(extra[next])?;
            next += 1;
        }
        Ok(())
    }

    /// The links of `node` (as subject when `forward`, else as object), with
    /// predicate `p` if given: the current scan's unchanged links merged with the
    /// changed ones as they were, in the index's order (predicate, other end).
    fn links(
        &self,
        (node, p, forward): (ElemRef, Option<&str>, bool),
        f: &mut LinkFn<'_>,
    ) -> StoreResult<()> {
        let mut extra: Vec<(String, ElemRef, u64)> = Vec::new();
        for (id, r) in self.changed_props()? {
            let (end, other) = if forward {
                (r.subject, r.object)
            } else {
                (r.object, r.subject)
            };
            if end == node && p.is_none_or(|p| r.predicate == p) {
                extra.push((r.predicate, other, id));
            }
        }
        let scan = |cb: &mut LinkFn<'_>| {
            if forward {
                self.g.scan_out(node, p, cb)
            } else {
                self.g.scan_in(node, p, cb)
            }
        };
        if extra.is_empty() {
            return scan(&mut |p, v, id| {
                if self.unchanged(ElemRef::Prop(id).encode()) {
                    f(p, v, id)
                } else {
                    Ok(true)
                }
            });
        }
        scan(&mut |p, v, id| {
            if self.unchanged(ElemRef::Prop(id).encode()) {
                extra.push((p.to_string(), v, id));
            }
            Ok(true)
        })?;
        extra.sort_by(|a, b| (&a.0, a.1.encode(), a.2).cmp(&(&b.0, b.1.encode(), b.2)));
        for (p, v, id) in extra {
            if !f(&p, v, id)? {
                break;
            }
        }
        Ok(())
    }
}

fn concept_key(id: u64) -> u64 {
    ElemRef::Concept(id).encode()
}

fn prop_key(id: u64) -> u64 {
    ElemRef::Prop(id).encode()
}

impl RequestLog for AsOf<'_> {
    fn request_record(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        self.g.request_record(key)
    }
}

impl HistoryRead for AsOf<'_> {
    fn last_commit(&self, space: SpaceId) -> StoreResult<Option<(u64, Vec<u8>)>> {
        self.g.last_commit(space)
    }
    fn commit_record(&self, space: SpaceId, seq: u64) -> StoreResult<Option<Vec<u8>>> {
        self.g.commit_record(space, seq)
    }
    fn version_after(
        &self,
        space: SpaceId,
        key: u64,
        part: u8,
        seq: u64,
    ) -> StoreResult<Option<(u64, Vec<u8>)>> {
        self.g.version_after(space, key, part, seq)
    }
    fn scan_changes(
        &self,
        space: SpaceId,
        after: u64,
        f: &mut dyn FnMut(u64, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.g.scan_changes(space, after, f)
    }
}

impl ElementRead for AsOf<'_> {
    fn element(&self, space: SpaceId, id: ElementId) -> StoreResult<Option<ElementRecord>> {
        if space != self.space {
            return self.g.element(space, id);
        }
        match self.at(id.encode(), PART_RECORD)? {
            At::Current => self.g.element(space, id),
            At::Absent => Ok(None),
            At::Bytes(b) => ElementRecord::decode(&b).map(Some),
        }
    }

    fn scan_elements(
        &self,
        space: SpaceId,
        kind: ElementKind,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        if space != self.space {
            return self.g.scan_elements(space, kind, f);
        }
        let mut extra = Vec::new();
        for id in self.changed_of(kind).collect::<Vec<_>>() {
            if self.element(space, id)?.is_some() {
                extra.push(id.n);
            }
        }
        let to_key = move |n: u64| ElementId::new(kind, n).encode();
        let g = self.g;
        self.ids(
            &to_key,
            extra,
            &mut |cb| g.scan_elements(space, kind, cb),
            f,
        )
    }

    fn scan_referrers(
        &self,
        space: SpaceId,
        target: ElementId,
        f: &mut dyn FnMut(&str, ElementId) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        // References are written once, with their source's record: a source whose
        // record existed at the coordinate made them by then (a record added later to
        // an older element did not).
        if space != self.space {
            return self.g.scan_referrers(space, target, f);
        }
        let mut found = Vec::new();
        self.g.scan_referrers(space, target, &mut |role, source| {
            found.push((role.to_string(), source));
            Ok(true)
        })?;
        for (role, source) in found {
            if self.element(space, source)?.is_some() && !f(&role, source)? {
                break;
            }
        }
        Ok(())
    }
}

impl GraphRead for AsOf<'_> {
    fn concept(&self, id: u64) -> StoreResult<Option<ConceptRecord>> {
        match self.at(concept_key(id), PART_ROW)? {
            At::Current => self.g.concept(id),
            At::Absent => Ok(None),
            At::Bytes(b) => decode(&b).map(Some),
        }
    }

    fn concept_by_key(&self, concept_type: &str, name: &str) -> StoreResult<Option<u64>> {
        if let Some(id) = self.g.concept_by_key(concept_type, name)? {
            if self.unchanged(concept_key(id)) {
                return Ok(Some(id));
            }
        }
        let found =
            self.changed_concepts(&mut |_, c| c.concept_type == concept_type && c.name == name)?;
        Ok(found.into_iter().next())
    }

    fn scan_type(
        &self,
        concept_type: &str,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let extra = self.changed_concepts(&mut |_, c| c.concept_type == concept_type)?;
        let g = self.g;
        self.ids(
            &concept_key,
            extra,
            &mut |cb| g.scan_type(concept_type, cb),
            f,
        )
    }

    fn scan_name(
        &self,
        name: &str,
        f: &mut dyn FnMut(u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let extra = self.changed_concepts(&mut |_, c| c.name == name)?;
        let g = self.g;
        self.ids(&concept_key, extra, &mut |cb| g.scan_name(name, cb), f)
    }

    fn scan_concepts(&self, f: &mut dyn FnMut(u64) -> StoreResult<Continue>) -> StoreResult<()> {
        let extra = self.changed_concepts(&mut |_, _| true)?;
        let g = self.g;
        self.ids(&concept_key, extra, &mut |cb| g.scan_concepts(cb), f)
    }

    fn prop(&self, id: u64) -> StoreResult<Option<PropRecord>> {
        match self.at(prop_key(id), PART_ROW)? {
            At::Current => self.g.prop(id),
            At::Absent => Ok(None),
            At::Bytes(b) => decode(&b).map(Some),
        }
    }

    fn prop_by_spo(&self, s: ElemRef, p: &str, o: ElemRef) -> StoreResult<Option<u64>> {
        if let Some(id) = self.g.prop_by_spo(s, p, o)? {
            if self.unchanged(prop_key(id)) {
                return Ok(Some(id));
            }
        }
        Ok(self
            .changed_props()?
            .into_iter()
            .find(|(_, r)| r.subject == s && r.predicate == p && r.object == o)
            .map(|(id, _)| id))
    }

    fn scan_out(
        &self,
        s: ElemRef,
        p: Option<&str>,
        f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.links((s, p, true), f)
    }

    fn scan_in(
        &self,
        o: ElemRef,
        p: Option<&str>,
        f: &mut dyn FnMut(&str, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.links((o, p, false), f)
    }

    fn scan_predicate(
        &self,
        p: &str,
        f: &mut dyn FnMut(ElemRef, ElemRef, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        let mut extra: Vec<(ElemRef, ElemRef, u64)> = self
            .changed_props()?
            .into_iter()
            .filter(|(_, r)| r.predicate == p)
            .map(|(id, r)| (r.subject, r.object, id))
            .collect();
        if extra.is_empty() {
            return self.g.scan_predicate(p, &mut |s, o, id| {
                if self.unchanged(prop_key(id)) {
                    f(s, o, id)
                } else {
                    Ok(true)
                }
            });
        }
        self.g.scan_predicate(p, &mut |s, o, id| {
            if self.unchanged(prop_key(id)) {
                extra.push((s, o, id));
            }
            Ok(true)
        })?;
        extra.sort_by_key(|(s, o, id)| (o.encode(), s.encode(), *id));
        for (s, o, id) in extra {
            if !f(s, o, id)? {
                break;
            }
        }
        Ok(())
    }

    fn scan_props(&self, f: &mut dyn FnMut(u64) -> StoreResult<Continue>) -> StoreResult<()> {
        let extra = self
            .changed_props()?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        let g = self.g;
        self.ids(&prop_key, extra, &mut |cb| g.scan_props(cb), f)
    }

    fn stat(&self, key: Stat<'_>) -> StoreResult<u64> {
        self.g.stat(key)
    }

    fn totals(&self) -> StoreResult<(u64, u64)> {
        self.g.totals()
    }

    fn meta(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        self.g.meta(key)
    }

    fn scan_postings(
        &self,
        from: &str,
        f: &mut dyn FnMut(&str, u64, u32, u32) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        self.g.scan_postings(from, f)
    }

    fn posting(&self, term: &str, key: u64) -> StoreResult<Option<(u32, u32)>> {
        self.g.posting(term, key)
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
        let within = |v: &str| {
            let above = match lo {
                Bound::Included(l) => v >= l,
                Bound::Excluded(l) => v > l,
                Bound::Unbounded => true,
            };
            let below = match hi {
                Bound::Included(h) => v <= h,
                Bound::Excluded(h) => v < h,
                Bound::Unbounded => true,
            };
            above && below
        };
        let mut extra: Vec<(String, u64)> = Vec::new();
        for id in self.changed_of(ElementKind::Concept).collect::<Vec<_>>() {
            if let Some(c) = self.concept(id.n)? {
                if c.concept_type != concept_type {
                    continue;
                }
                for (a, v) in attrs::entries(&c) {
                    if a == attr && within(&v) {
                        extra.push((v, id.n));
                    }
                }
            }
        }
        if extra.is_empty() {
            return self
                .g
                .scan_attr(concept_type, attr, lo, hi, rev, &mut |v, id| {
                    if self.unchanged(concept_key(id)) {
                        f(v, id)
                    } else {
                        Ok(true)
                    }
                });
        }
        self.g
            .scan_attr(concept_type, attr, lo, hi, rev, &mut |v, id| {
                if self.unchanged(concept_key(id)) {
                    extra.push((v.to_string(), id));
                }
                Ok(true)
            })?;
        extra.sort();
        if rev {
            extra.reverse();
        }
        for (v, id) in extra {
            if !f(&v, id)? {
                break;
            }
        }
        Ok(())
    }

    fn vector(&self, id: u64) -> StoreResult<Option<Vec<u8>>> {
        self.g.vector(id)
    }

    fn past_changed(&self) -> Option<&BTreeSet<u64>> {
        Some(&self.changed)
    }
}
