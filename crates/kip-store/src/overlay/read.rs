//! The read side: a [`View`] of the overlay for one reader or the writer, the merged
//! [`Stream`] of its entries in a key range, and [`merge`] of that stream into a redb
//! range.

use super::*;

/// How one reader or the writer sees the overlay: the shared layers between `floor` and
/// `at`, then (for the writer) its own changes on top.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub overlay: &'a Overlay,
    pub floor: u64,
    pub at: u64,
    pub private: Option<&'a IndexChanges>,
}

impl<'a> View<'a> {
    pub fn of_snapshot(overlay: &'a Overlay, s: &Snapshot) -> View<'a> {
        View {
            overlay,
            floor: s.floor,
            at: s.at,
            private: None,
        }
    }

    /// The overlay entries of one index with keys in `bounds()`, in key order; `None`
    /// (without calling `bounds`) when the index has no overlay entries at all.
    pub fn stream<K: Ord + Clone, V: Clone>(
        &self,
        which: &Which<K, V>,
        bounds: impl FnOnce() -> (Bound<K>, Bound<K>),
    ) -> Option<Stream<'a, K, V>> {
        let own = self.private.map(which.changes).filter(|c| !c.is_empty());
        if own.is_none() && self.overlay.counts[which.slot].load(Ordering::SeqCst) == 0 {
            return None;
        }
        let (lo, hi) = bounds();
        let empty = empty_range(&lo, &hi);
        let private = match own {
            Some(c) if !empty => {
                let entries = c.sorted();
                let start = match &lo {
                    Bound::Included(k) => entries.partition_point(|e| e.0 < *k),
                    Bound::Excluded(k) => entries.partition_point(|e| e.0 <= *k),
                    Bound::Unbounded => 0,
                };
                let end = match &hi {
                    Bound::Included(k) => entries.partition_point(|e| e.0 <= *k),
                    Bound::Excluded(k) => entries.partition_point(|e| e.0 < *k),
                    Bound::Unbounded => entries.len(),
                };
                Some(Private {
                    entries,
                    next: start,
                    end: end.max(start),
                })
            }
            _ => None,
        };
        Some(Stream {
            overlay: self.overlay,
            layer: which.layer,
            floor: self.floor,
            at: self.at,
            lo,
            hi,
            buf: VecDeque::new(),
            shared_done: empty,
            private,
        })
    }
}

/// Iterator over the overlay entries of a key range (see [`View::stream`]); a removal is
/// `(key, None)`.
pub(crate) struct Stream<'a, K, V> {
    pub(super) overlay: &'a Overlay,
    pub(super) layer: fn(&Layers) -> &Layer<K, V>,
    pub(super) floor: u64,
    pub(super) at: u64,
    pub(super) lo: Bound<K>,
    pub(super) hi: Bound<K>,
    pub(super) buf: VecDeque<(K, Option<V>)>,
    pub(super) shared_done: bool,
    pub(super) private: Option<Private<'a, K, V>>,
}

/// The writing transaction's own changes in a stream's range.
pub(super) struct Private<'a, K, V> {
    pub(super) entries: Ref<'a, [(K, Option<V>)]>,
    pub(super) next: usize,
    pub(super) end: usize,
}

impl<K: Clone, V: Clone> Private<'_, K, V> {
    pub(super) fn peek(&self) -> Option<&(K, Option<V>)> {
        if self.next < self.end {
            self.entries.get(self.next)
        } else {
            None
        }
    }

    pub(super) fn take(&mut self) -> Option<(K, Option<V>)> {
        let e = self.peek().cloned();
        self.next += 1;
        e
    }
}

impl<K: Ord + Clone, V: Clone> Stream<'_, K, V> {
    pub(super) fn fill(&mut self) {
        while self.buf.is_empty() && !self.shared_done {
            let resume = {
                let layers = self.overlay.layers();
                (self.layer)(&layers).chunk(
                    &self.lo,
                    &self.hi,
                    self.floor,
                    self.at,
                    CHUNK,
                    &mut self.buf,
                )
            };
            match resume {
                Some(k) => self.lo = Bound::Excluded(k),
                None => self.shared_done = true,
            }
        }
    }
}

impl<K: Ord + Clone, V: Clone> Iterator for Stream<'_, K, V> {
    type Item = (K, Option<V>);

    fn next(&mut self) -> Option<Self::Item> {
        self.fill();
        let own = self.private.as_ref().and_then(|p| p.peek());
        // (take the transaction's own change, drop the shared entry it replaces)
        let (take_own, replaces) = match (self.buf.front(), own) {
            (None, None) => return None,
            (Some(_), None) => (false, false),
            (None, Some(_)) => (true, false),
            (Some((shared, _)), Some((own, _))) => match shared.cmp(own) {
                std::cmp::Ordering::Less => (false, false),
                // The transaction's own change replaces the committed one.
                std::cmp::Ordering::Equal => (true, true),
                std::cmp::Ordering::Greater => (true, false),
            },
        };
        if replaces {
            self.buf.pop_front();
        }
        if take_own {
            self.private.as_mut().and_then(|p| p.take())
        } else {
            self.buf.pop_front()
        }
    }
}

/// One entry of a merged scan: from the redb table, or from the overlay.
pub(crate) enum Item<'x, B, K, V> {
    Base(&'x B),
    Over(&'x K, &'x V),
}

/// Merges a redb range (`base`, in key order) with overlay entries of the same range:
/// `cmp(base entry, overlay key)`; an overlay entry replaces a base entry with the same
/// key, and a removal hides it. Stops when `emit` returns `false`. Without overlay
/// entries (`None`, the common case) the base range is passed through as it is.
pub(crate) fn merge<B, E: crate::error::IntoStoreError, K, V>(
    base: impl Iterator<Item = Result<B, E>>,
    over: Option<impl Iterator<Item = (K, Option<V>)>>,
    cmp: impl Fn(&B, &K) -> std::cmp::Ordering,
    mut emit: impl FnMut(Item<'_, B, K, V>) -> StoreResult<bool>,
) -> StoreResult<()> {
    use std::cmp::Ordering;
    let Some(over) = over else {
        for b in base {
            // By reference: moving redb's entry guards out of the `Result` costs a copy
            // per entry on this hot path.
            let keep = match &b {
                Ok(entry) => emit(Item::Base(entry))?,
                Err(_) => true,
            };
            if let Err(e) = b {
                return Err(storage_error(e));
            }
            if !keep {
                break;
            }
        }
        return Ok(());
    };
    let mut base = base.peekable();
    let mut over = over.peekable();
    loop {
        let order = match (base.peek(), over.peek()) {
            (None, None) => return Ok(()),
            (Some(Err(_)), _) => {
                return match base.next() {
                    Some(Err(e)) => Err(storage_error(e)),
                    _ => Ok(()),
                }
            }
            (Some(Ok(_)), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(Ok(b)), Some((k, _))) => cmp(b, k),
        };
        let go_on = match order {
            Ordering::Less => match base.next() {
                Some(Ok(b)) => emit(Item::Base(&b))?,
                _ => true,
            },
            Ordering::Equal | Ordering::Greater => {
                if order == Ordering::Equal {
                    base.next();
                }
                match over.next() {
                    Some((k, Some(v))) => emit(Item::Over(&k, &v))?,
                    _ => true,
                }
            }
        };
        if !go_on {
            return Ok(());
        }
    }
}
