//! The text index's postings as stored in redb: blocks of up to [`BLOCK_ENTRIES`]
//! postings of one term, keyed by `(term, smallest element key in the block)`.
//!
//! One entry per `(term, element)` made a bulk load's checkpoints rewrite one B-tree entry
//! of about 35 bytes per posting (eight to ten per concept with a description): most of
//! the folds of a concept load. A block holds the postings of an element range in about
//! 3-5 bytes each (varint deltas), and a checkpoint appends a term's new elements (new ids
//! are the largest) to the term's last block with one read and one write.
//!
//! Block invariants (checked when a block is decoded, so a damaged block is a storage
//! error, never a panic): within a term the blocks cover disjoint element ranges in key
//! order; a block is never empty; its elements are strictly ascending and the first one
//! is its key. The overlay still holds single postings (`(term, element) -> packed`);
//! reads merge them with the blocks' postings in the same `(term, element)` order.

use super::overlay::{write_sorted, Apply, Entry, StrKey, Text};
use super::{storage_error, StoreResult};
use redb::{ReadableTable, Table, TableDefinition};
use std::rc::Rc;

/// `(term, first element) -> block`: the postings of one term in an element range.
pub(crate) const POSTING_BLOCKS: TableDefinition<(&str, u64), &[u8]> =
    TableDefinition::new("text_postings3");

/// The single-posting table of text index version 4 and earlier, deleted when a store
/// is opened (its text index is rebuilt into [`POSTING_BLOCKS`] in the same transaction).
pub(crate) const OLD_POSTINGS: TableDefinition<(&str, u64), u64> =
    TableDefinition::new("text_postings2");

/// Postings per block at most: small enough that rewriting a block to add a posting is
/// cheap (about half a KiB), large enough that a term's postings take few B-tree entries.
pub(crate) const BLOCK_ENTRIES: usize = 128;

/// One posting: the element key and its packed value (weighted tf in the high 32 bits,
/// document length in the low 32).
pub(crate) type Posting = (u64, u64);

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*pos)?;
        *pos += 1;
        let bits = u64::from(b & 0x7f);
        if shift == 63 && bits > 1 {
            return None;
        }
        v |= bits << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Encodes postings (ascending elements, the first one `first`): per posting the element's
/// distance from the previous one (from `first` for the first), the weighted tf and the
/// document length, as varints.
pub(crate) fn encode_block(first: u64, postings: &[Posting]) -> Vec<u8> {
    let mut out = Vec::with_capacity(postings.len() * 5);
    let mut prev = first;
    for &(elem, packed) in postings {
        put_varint(&mut out, elem.wrapping_sub(prev));
        put_varint(&mut out, packed >> 32);
        put_varint(&mut out, packed & u64::from(u32::MAX));
        prev = elem;
    }
    out
}

/// Decodes a block keyed `first` into `out` (appended), checking the block invariants.
pub(crate) fn decode_block(first: u64, bytes: &[u8], out: &mut Vec<Posting>) -> StoreResult<()> {
    let damaged = || {
        storage_error(crate::StoreError::Corruption(
            "a text index block is damaged (run `kip reindex`)".into(),
        ))
    };
    if bytes.is_empty() {
        return Err(damaged());
    }
    let mut pos = 0;
    let mut prev = first;
    let mut n = 0usize;
    while pos < bytes.len() {
        let delta = get_varint(bytes, &mut pos).ok_or_else(damaged)?;
        let tf = get_varint(bytes, &mut pos).ok_or_else(damaged)?;
        let len = get_varint(bytes, &mut pos).ok_or_else(damaged)?;
        if (n == 0 && delta != 0) || (n > 0 && delta == 0) || tf > u64::from(u32::MAX) {
            return Err(damaged());
        }
        let len = u32::try_from(len).map_err(|_| damaged())?;
        let elem = prev.checked_add(delta).ok_or_else(damaged)?;
        out.push((elem, (tf << 32) | u64::from(len)));
        prev = elem;
        n += 1;
    }
    Ok(())
}

/// The postings of the blocks of a redb range, one at a time: `(term, element, packed)`.
pub(crate) struct BlockPostings<'a> {
    range: redb::Range<'a, (&'static str, u64), &'static [u8]>,
    term: Rc<str>,
    block: Vec<Posting>,
    next: usize,
}

impl<'a> BlockPostings<'a> {
    /// The postings of every block from term `from` on.
    pub(crate) fn from_term(
        t: &'a impl ReadableTable<(&'static str, u64), &'static [u8]>,
        from: &str,
    ) -> StoreResult<BlockPostings<'a>> {
        Ok(BlockPostings {
            range: t.range((from, 0u64)..).map_err(storage_error)?,
            term: Rc::from(""),
            block: Vec::new(),
            next: 0,
        })
    }
}

impl Iterator for BlockPostings<'_> {
    type Item = Result<(Rc<str>, u64, u64), String>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(&(elem, packed)) = self.block.get(self.next) {
                self.next += 1;
                return Some(Ok((self.term.clone(), elem, packed)));
            }
            let (key, value) = match self.range.next()? {
                Ok(kv) => kv,
                Err(e) => return Some(Err(e.to_string())),
            };
            let (term, first) = key.value();
            if *self.term != *term {
                self.term = Rc::from(term);
            }
            self.block.clear();
            self.next = 0;
            if let Err(e) = decode_block(first, value.value(), &mut self.block) {
                return Some(Err(e.to_string()));
            }
        }
    }
}

/// The packed value of the posting `(term, elem)` in the blocks, if any.
pub(crate) fn lookup(
    t: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    term: &str,
    elem: u64,
) -> StoreResult<Option<u64>> {
    let mut range = t
        .range((term, 0u64)..=(term, elem))
        .map_err(storage_error)?;
    let Some(found) = range.next_back() else {
        return Ok(None);
    };
    let (key, value) = found.map_err(storage_error)?;
    let mut block = Vec::new();
    decode_block(key.value().1, value.value(), &mut block)?;
    Ok(block
        .binary_search_by_key(&elem, |p| p.0)
        .ok()
        .map(|i| block[i].1))
}

/// A term's block read for a fold: its key and postings.
struct Target {
    first: u64,
    postings: Vec<Posting>,
}

/// A block as a redb range yields it.
type Found<'a> = Option<
    Result<
        (
            redb::AccessGuard<'a, (&'static str, u64)>,
            redb::AccessGuard<'a, &'static [u8]>,
        ),
        redb::StorageError,
    >,
>;

fn read_block(found: Found<'_>) -> StoreResult<Option<Target>> {
    let Some(found) = found else {
        return Ok(None);
    };
    let (key, value) = found.map_err(storage_error)?;
    let first = key.value().1;
    let mut postings = Vec::new();
    decode_block(first, value.value(), &mut postings)?;
    Ok(Some(Target { first, postings }))
}

type BlockTable<'t> = Table<'t, (&'static str, u64), &'static [u8]>;

/// The block of `term` that the posting `elem` belongs in, and the first element of the
/// term's next block (the end of the target's range). The usual case, an element larger
/// than every one of the term (new ids are), costs one descent.
fn find_target(
    table: &BlockTable<'_>,
    term: &str,
    elem: u64,
) -> StoreResult<(Option<Target>, Option<u64>)> {
    {
        let mut all = table
            .range((term, 0u64)..=(term, u64::MAX))
            .map_err(storage_error)?;
        match all.next_back() {
            None => return Ok((None, None)),
            Some(Ok((key, _))) if key.value().1 > elem => {}
            last => return Ok((read_block(last)?, None)),
        }
    }
    let first_after = |from: u64| -> StoreResult<Option<u64>> {
        let Some(from) = from.checked_add(1) else {
            return Ok(None);
        };
        match table
            .range((term, from)..=(term, u64::MAX))
            .map_err(storage_error)?
            .next()
        {
            Some(found) => Ok(Some(found.map_err(storage_error)?.0.value().1)),
            None => Ok(None),
        }
    };
    let before = read_block(
        table
            .range((term, 0u64)..=(term, elem))
            .map_err(storage_error)?
            .next_back(),
    )?;
    match before {
        Some(target) => {
            let bound = first_after(target.first)?;
            Ok((Some(target), bound))
        }
        None => {
            // `elem` precedes every block of the term: it joins the first one.
            let target = read_block(
                table
                    .range((term, 0u64)..=(term, u64::MAX))
                    .map_err(storage_error)?
                    .next(),
            )?;
            let bound = match &target {
                Some(t) => first_after(t.first)?,
                None => None,
            };
            Ok((target, bound))
        }
    }
}

/// Keys a fold's forward scan steps over before it seeks instead (a descent costs about
/// as much as this many steps).
const SKIP_STEPS: usize = 48;
/// Blocks of one term the scan collects before the term is looked up by descents.
const TERM_BLOCKS: usize = 32;

type BlockRange<'a> = std::iter::Peekable<redb::Range<'a, (&'static str, u64), &'static [u8]>>;

/// A fold's forward walk over the block keys, in step with the sorted changes: the
/// changes of consecutive terms usually sit close together in the table (or belong to new
/// terms), so stepping to the next term's blocks is cheaper than a descent from the root.
struct Walk<'a> {
    table: &'a BlockTable<'a>,
    range: Option<BlockRange<'a>>,
}

impl<'a> Walk<'a> {
    /// The blocks of `term` as `(first, postings)` in key order, or `None` when it has
    /// more than [`TERM_BLOCKS`] (the caller then finds its target by descents).
    fn term_blocks(&mut self, term: &str) -> StoreResult<Option<Vec<(u64, Found<'a>)>>> {
        let mut steps = 0;
        loop {
            if self.range.is_none() || steps >= SKIP_STEPS {
                let r = self.table.range((term, 0u64)..).map_err(storage_error)?;
                self.range = Some(r.peekable());
                steps = 0;
            }
            let Some(range) = self.range.as_mut() else {
                return Ok(Some(Vec::new()));
            };
            match range.peek() {
                Some(Ok((key, _))) if key.value().0 < term => {
                    range.next();
                    steps += 1;
                }
                Some(Err(_)) => {
                    return Err(match range.next() {
                        Some(Err(e)) => storage_error(e),
                        _ => storage_error("text index scan failed"),
                    })
                }
                _ => break,
            }
        }
        let mut blocks = Vec::new();
        let Some(range) = self.range.as_mut() else {
            return Ok(Some(blocks));
        };
        while let Some(Ok((key, _))) = range.peek() {
            let (t, first) = key.value();
            if t != term {
                break;
            }
            if blocks.len() == TERM_BLOCKS {
                // A long posting list: the caller seeks; so does the next term.
                self.range = None;
                return Ok(None);
            }
            blocks.push((first, range.next()));
        }
        Ok(Some(blocks))
    }
}

/// One block's rewrite: the old block (if any) and the changes that fall in its range.
fn plan_target(
    term: &Text,
    target: Option<Target>,
    mine: &[Entry<'_, StrKey, u64>],
    writes: &mut Vec<(StrKey, Option<Vec<u8>>)>,
) {
    let (old_first, old) = match target {
        Some(t) => (Some(t.first), t.postings),
        None => (None, Vec::new()),
    };
    let mut merged: Vec<Posting> = Vec::with_capacity(old.len() + mine.len());
    let mut old = old.into_iter().peekable();
    for &((_, e), v) in mine {
        while let Some(&p) = old.peek() {
            if p.0 >= *e {
                break;
            }
            merged.push(p);
            old.next();
        }
        if old.peek().is_some_and(|p| p.0 == *e) {
            old.next();
        }
        if let Some(v) = v {
            merged.push((*e, *v));
        }
    }
    merged.extend(old);
    let mut kept_old_key = false;
    for chunk in merged.chunks(BLOCK_ENTRIES) {
        let first = chunk[0].0;
        kept_old_key |= Some(first) == old_first;
        writes.push(((term.clone(), first), Some(encode_block(first, chunk))));
    }
    if let (Some(first), false) = (old_first, kept_old_key) {
        writes.push(((term.clone(), first), None));
    }
}

/// Plans one term's changes (ascending elements, each once) as block writes.
fn plan_term(
    walk: &mut Walk<'_>,
    term: &Text,
    items: &[Entry<'_, StrKey, u64>],
    writes: &mut Vec<(StrKey, Option<Vec<u8>>)>,
) -> StoreResult<()> {
    let mut rest = items;
    // The first target from the walk when the term has few blocks.
    if let (Some(&((_, elem), _)), Some(blocks)) = (rest.first(), walk.term_blocks(term)?) {
        let at = blocks.partition_point(|(first, _)| first <= elem);
        let idx = at.saturating_sub(1);
        let bound = blocks.get(idx + 1).map(|(first, _)| *first);
        let target = match blocks.into_iter().nth(idx) {
            Some((_, found)) => read_block(found)?,
            None => None,
        };
        rest = plan_upto(term, target, bound, rest, writes);
    }
    while let Some(&((_, elem), _)) = rest.first() {
        let (target, bound) = find_target(walk.table, term, *elem)?;
        rest = plan_upto(term, target, bound, rest, writes);
    }
    Ok(())
}

/// Plans the changes of `items` that fall in `target`'s range (below `bound`, the next
/// block's first element; at least the first change) and returns the rest.
fn plan_upto<'i, 'e>(
    term: &Text,
    target: Option<Target>,
    bound: Option<u64>,
    items: &'i [Entry<'e, StrKey, u64>],
    writes: &mut Vec<(StrKey, Option<Vec<u8>>)>,
) -> &'i [Entry<'e, StrKey, u64>] {
    let take = match bound {
        Some(b) => items.partition_point(|((_, e), _)| *e < b).max(1),
        None => items.len(),
    };
    let (mine, later) = items.split_at(take.min(items.len()));
    plan_target(term, target, mine, writes);
    later
}

impl Apply<StrKey, u64> for BlockTable<'_> {
    /// Reads the blocks the changes fall into and plans their new contents first, then
    /// writes them in key order through [`write_sorted`] (new blocks of new terms enter
    /// in cursor runs, like single postings did).
    fn apply_sorted(&mut self, items: &[Entry<'_, StrKey, u64>]) -> StoreResult<()> {
        let mut writes = Vec::new();
        {
            let mut walk = Walk {
                table: self,
                range: None,
            };
            let mut rest = items;
            while let Some(((term, _), _)) = rest.first() {
                // Groups are short (most terms of a fold gain a posting or two): a linear
                // scan, not a binary search over everything left.
                let n = rest
                    .iter()
                    .position(|((t, _), _)| t != term)
                    .unwrap_or(rest.len());
                let (group, later) = rest.split_at(n.max(1));
                plan_term(&mut walk, term, group, &mut writes)?;
                rest = later;
            }
        }
        writes.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let entries: Vec<Entry<'_, StrKey, Vec<u8>>> = writes.iter().map(|(k, v)| (k, v)).collect();
        write_sorted(
            self,
            &entries,
            |(t, first)| (t.as_str(), *first),
            |b| b.as_slice(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn varints_round_trip_and_reject_overlong_input() {
        for v in [
            0,
            1,
            127,
            128,
            300,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut pos = 0;
            assert_eq!(get_varint(&out, &mut pos), Some(v));
            assert_eq!(pos, out.len());
        }
        let mut pos = 0;
        assert_eq!(get_varint(&[0xff; 11], &mut pos), None);
        let mut pos = 0;
        assert_eq!(get_varint(&[0x80], &mut pos), None);
    }

    #[test]
    fn damaged_blocks_are_errors() {
        let mut out = Vec::new();
        // Empty; first element not the key; repeated element; tf too large; truncated.
        for bytes in [
            &[][..],
            &[1, 1, 1][..],
            &[0, 1, 1, 0, 1, 1][..],
            &[0, 0x80, 0x80, 0x80, 0x80, 0x10, 1][..],
            &[0, 1][..],
        ] {
            assert!(decode_block(5, bytes, &mut out).is_err(), "{bytes:?}");
        }
    }

    type Model = std::collections::BTreeMap<(String, u64), u64>;

    /// Applies batches of changes to a block table and checks after each that the blocks
    /// hold exactly the model's postings, within the block invariants.
    fn check_batches(batches: &[Vec<(u8, u64, Option<u32>)>]) -> Result<(), TestCaseError> {
        const TERMS: [&str; 4] = ["a", "b", "ba", "c"];
        let named: Vec<Vec<(String, u64, Option<u32>)>> = batches
            .iter()
            .map(|b| {
                b.iter()
                    .map(|&(t, e, v)| (TERMS[usize::from(t % 4)].to_string(), e, v))
                    .collect()
            })
            .collect();
        check_named_batches(&named)
    }

    fn check_named_batches(
        batches: &[Vec<(String, u64, Option<u32>)>],
    ) -> Result<(), TestCaseError> {
        let db = redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .expect("db");
        let txn = db.begin_write().expect("txn");
        let mut table = txn.open_table(POSTING_BLOCKS).expect("table");
        let mut model = Model::new();
        for batch in batches {
            let changes: std::collections::BTreeMap<StrKey, Option<u64>> = batch
                .iter()
                .map(|(t, e, v)| ((t.as_str().into(), *e), v.map(u64::from)))
                .collect();
            for ((t, e), v) in &changes {
                match v {
                    Some(v) => model.insert((t.to_string(), *e), *v),
                    None => model.remove(&(t.to_string(), *e)),
                };
            }
            let items: Vec<Entry<'_, StrKey, u64>> = changes.iter().collect();
            table.apply_sorted(&items).expect("apply");
            let stored: Vec<((String, u64), u64)> = BlockPostings::from_term(&table, "")
                .expect("range")
                .map(|r| r.map(|(t, e, v)| ((t.to_string(), e), v)))
                .collect::<Result<_, _>>()
                .expect("decode");
            let expected: Vec<((String, u64), u64)> =
                model.iter().map(|(k, v)| (k.clone(), *v)).collect();
            prop_assert_eq!(&stored, &expected);
            for entry in table.iter().expect("iter") {
                let (k, v) = entry.expect("entry");
                let mut block = Vec::new();
                decode_block(k.value().1, v.value(), &mut block).expect("block");
                prop_assert!(!block.is_empty() && block.len() <= BLOCK_ENTRIES);
            }
            for (term, e, _) in batch {
                let (term, e) = (term.as_str(), *e);
                for probe in [e, e.wrapping_add(1), e.wrapping_sub(1)] {
                    prop_assert_eq!(
                        lookup(&table, term, probe).expect("lookup"),
                        model.get(&(term.to_string(), probe)).copied()
                    );
                }
            }
            let from_b: Vec<String> = BlockPostings::from_term(&table, "b")
                .expect("range")
                .map(|r| r.expect("decode").0.to_string())
                .collect();
            let expected_b: Vec<String> = model
                .keys()
                .filter(|(t, _)| t.as_str() >= "b")
                .map(|(t, _)| t.clone())
                .collect();
            prop_assert_eq!(from_b, expected_b);
        }
        Ok(())
    }

    #[test]
    fn appends_fill_blocks_and_split_them() {
        // Three folds appending 300 ids each to one term, as a bulk load does, then
        // removals and inserts in the middle and before the first block.
        let append = |from: u64| -> Vec<(u8, u64, Option<u32>)> {
            (from..from + 300).map(|e| (0, e * 2, Some(7))).collect()
        };
        let mut edits: Vec<(u8, u64, Option<u32>)> = (0..200).map(|e| (0, e * 2, None)).collect();
        edits.extend((0..50).map(|e| (0, 2 * e + 1, Some(1))));
        edits.push((0, 1_000, Some(9)));
        check_batches(&[append(100), append(400), append(700), edits]).expect("blocks");
    }

    /// Many terms (the walk steps over some and seeks past long stretches of others)
    /// and a term with more blocks than the walk collects (found by descents instead).
    #[test]
    fn folds_over_many_terms_and_long_posting_lists() {
        let t = |i: u32| format!("t{i:04}");
        let mut first = Vec::new();
        for i in 0..2_000u32 {
            first.push((t(i), u64::from(i), Some(1)));
        }
        for e in 0..(BLOCK_ENTRIES as u64 * 40) {
            first.push(("big".to_string(), e * 3, Some(2)));
        }
        let mut second = Vec::new();
        for i in (0..2_000u32).step_by(7) {
            second.push((t(i), u64::from(i) + 10_000, Some(3)));
        }
        for i in (0..2_000u32).step_by(500) {
            second.push((t(i), u64::from(i), None));
            second.push((format!("{}x", t(i)), 5, Some(4)));
        }
        // The long list: an append, a change in the middle, one before its first block.
        second.push(("big".to_string(), 1_000_000, Some(5)));
        second.push(("big".to_string(), 3 * 2_000, None));
        second.push(("big".to_string(), 3 * 2_000 + 1, Some(6)));
        second.push(("a".to_string(), 1, Some(7)));
        let mut third = second.clone();
        for (_, e, v) in &mut third {
            *e += 1;
            *v = None;
        }
        // Far apart: the walk seeks instead of stepping over hundreds of terms.
        let fourth = vec![
            (t(3), 20_000, Some(8)),
            (t(900), 20_000, Some(8)),
            (t(1_800), 3, None),
            (t(1_801), 1_801, None),
        ];
        check_named_batches(&[first, second, third, fourth]).expect("blocks");
    }

    #[test]
    fn extreme_element_keys() {
        let top = u64::MAX;
        check_batches(&[
            vec![(1, top, Some(1)), (1, 0, Some(2))],
            vec![(1, top - 1, Some(3)), (1, top, None)],
            vec![(1, 0, None), (1, top - 1, None)],
        ])
        .expect("blocks");
    }

    proptest! {
        #[test]
        fn folds_keep_exactly_the_model(batches in proptest::collection::vec(
            proptest::collection::vec((0u8..4, 0u64..700, proptest::option::weighted(0.8, 0u32..5)), 0..300),
            1..5,
        )) {
            check_batches(&batches)?;
        }

        #[test]
        fn blocks_round_trip(first in 0u64..u64::MAX / 2, deltas in proptest::collection::vec((1u64..1_000_000, any::<u32>(), any::<u32>()), 0..200)) {
            let mut postings = vec![(first, 7u64 << 32 | 3)];
            let mut e = first;
            for (d, tf, len) in deltas {
                e += d;
                postings.push((e, (u64::from(tf) << 32) | u64::from(len)));
            }
            let bytes = encode_block(first, &postings);
            let mut back = Vec::new();
            decode_block(first, &bytes, &mut back).expect("decode");
            prop_assert_eq!(back, postings);
        }

        /// Any bytes decode to an error or to postings that satisfy the invariants; never a
        /// panic.
        #[test]
        fn arbitrary_bytes_never_panic(first in any::<u64>(), bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut out = Vec::new();
            if decode_block(first, &bytes, &mut out).is_ok() {
                prop_assert_eq!(out[0].0, first);
                prop_assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
            }
        }
    }
}
