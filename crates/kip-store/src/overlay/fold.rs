//! Folding the overlay into the redb tables in key order, through cursors where new
//! keys share a gap ([`write_sorted`], [`fold_index`]).

use super::*;

/// One resolved overlay entry: a key and its value, or `None` for a removal.
pub(crate) type Entry<'a, K, V> = (&'a K, &'a Option<V>);

/// Writes overlay entries into their redb table (a fold).
pub(crate) trait Apply<K, V> {
    /// Writes `items` (in key order, each key once) into the table.
    fn apply_sorted(&mut self, items: &[Entry<'_, K, V>]) -> StoreResult<()>;
}

/// A run of cursor inserts shorter than this is not worth its set-up (a descent, the
/// neighbour keys, a leaf rewrite): the next [`PLAIN_STRETCH`] entries use plain inserts.
pub(super) const MIN_RUN: usize = 4;
pub(super) const PLAIN_STRETCH: usize = 64;

/// Writes sorted entries into `table`. New keys that fall into the same gap between the
/// table's existing keys (new ids appended under one term, predicate or type: the usual
/// shape of a fold) go in through one redb cursor, which buffers them and splices them
/// into the tree leaf by leaf instead of descending from the root once per key; where
/// gaps hold only a key or two (incoming links spread over many objects), plain inserts
/// are cheaper, so the writer switches between the two by the length of its last run.
/// Replaced values and removals always use plain operations. Either way the table ends
/// up with exactly the same entries.
pub(crate) fn write_sorted<'i, TK, TV, K: 'i, V: 'i>(
    table: &mut Table<'_, TK, TV>,
    items: &[Entry<'i, K, V>],
    key: impl Fn(&'i K) -> TK::SelfType<'i>,
    value: impl Fn(&'i V) -> TV::SelfType<'i>,
) -> StoreResult<()>
where
    TK: redb::Key + 'static,
    TV: redb::Value + 'static,
{
    let mut i = 0;
    let mut plain = 0usize;
    while let Some(&(k, v)) = items.get(i) {
        let Some(v) = v else {
            table.remove(key(k)).map_err(storage_error)?;
            i += 1;
            continue;
        };
        if plain > 0 {
            table.insert(key(k), value(v)).map_err(storage_error)?;
            plain -= 1;
            i += 1;
            continue;
        }
        // The gap before the first existing key >= k; inserts go in while they sort
        // strictly before that key (an equal key is a replacement: plain insert).
        let mut run = 0usize;
        {
            let mut cursor = table
                .lower_bound_mut(Bound::Included(key(k)))
                .map_err(storage_error)?;
            while let Some(&(k, Some(v))) = items.get(i) {
                match cursor.insert_before(key(k), value(v)) {
                    Ok(()) => {
                        run += 1;
                        i += 1;
                    }
                    Err(redb::CursorError::UnorderedKey) => break,
                    Err(e) => return Err(storage_error(redb::Error::from(e))),
                }
            }
            cursor.close().map_err(storage_error)?;
        }
        if run == 0 {
            table.insert(key(k), value(v)).map_err(storage_error)?;
            i += 1;
        }
        if run < MIN_RUN {
            plain = PLAIN_STRETCH;
        }
    }
    Ok(())
}

impl Apply<StrKey, ()> for Table<'_, (&'static str, u64), ()> {
    fn apply_sorted(&mut self, items: &[Entry<'_, StrKey, ()>]) -> StoreResult<()> {
        write_sorted(self, items, |(t, id)| (t.as_str(), *id), |_| ())
    }
}

impl Apply<StrKey, u64> for Table<'_, (&'static str, u64), u64> {
    fn apply_sorted(&mut self, items: &[Entry<'_, StrKey, u64>]) -> StoreResult<()> {
        write_sorted(self, items, |(t, id)| (t.as_str(), *id), |v| *v)
    }
}

impl Apply<PosKey, u64> for Table<'_, (&'static str, u64, u64), u64> {
    fn apply_sorted(&mut self, items: &[Entry<'_, PosKey, u64>]) -> StoreResult<()> {
        write_sorted(self, items, |(p, o, s)| (p.as_str(), *o, *s), |v| *v)
    }
}

impl Apply<OspKey, u64> for Table<'_, (u64, &'static str, u64), u64> {
    fn apply_sorted(&mut self, items: &[Entry<'_, OspKey, u64>]) -> StoreResult<()> {
        write_sorted(self, items, |(o, p, s)| (*o, p.as_str(), *s), |v| *v)
    }
}

impl Apply<AttrKey, ()> for Table<'_, (&'static str, &'static str, &'static str, u64), ()> {
    fn apply_sorted(&mut self, items: &[Entry<'_, AttrKey, ()>]) -> StoreResult<()> {
        write_sorted(
            self,
            items,
            |(t, a, v, id)| (t.as_str(), a.as_str(), v.as_str(), *id),
            |_| (),
        )
    }
}

/// Folds one index: the shared entries above `floor` (when `shared` is given), then the
/// transaction's own changes, each in key order.
pub(crate) fn fold_index<K: Ord + Clone, V: Clone, T: Apply<K, V>>(
    table: &mut T,
    shared: Option<(&Layer<K, V>, u64)>,
    own: &mut Changes<K, V>,
) -> StoreResult<()> {
    if let Some((layer, floor)) = shared {
        let mut items = Vec::new();
        layer.for_each_latest(floor, &mut |k, v| {
            items.push((k, v));
            Ok(())
        })?;
        table.apply_sorted(&items)?;
    }
    let own = own.take_sorted();
    let items: Vec<Entry<'_, K, V>> = own.iter().map(|(k, v)| (k, v)).collect();
    table.apply_sorted(&items)
}
