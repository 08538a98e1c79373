//! Secondary indexes whose writes wait until they are needed.
//!
//! Inside a write transaction, inserts and removals for the pure secondary indexes
//! (`pos`, `osp`, `concept_type`, `concept_name`, `text_postings2`) are queued instead of
//! applied one by one. The queue goes into the table in key order (a stable sort, so two
//! operations on one key keep their order) when the transaction flushes, when the queue
//! grows past [`MAX_QUEUED`], or just before anything reads the table. A read therefore
//! always sees every earlier write of its own transaction.
//!
//! Why: the keys of these indexes arrive in random order (a link's object, a word of a
//! description), and redb copies a leaf page the first time a transaction touches it and
//! walks the tree from the root for every operation. In key order, consecutive
//! operations land on the same (already copied) leaf with the path to it hot in the CPU
//! cache: bulk loads ran 1.2-1.4x faster (see `docs/performance.md`).
//!
//! Borrowing: operations are queued only through `&mut self`, which cannot coexist with
//! a `Ref` handed out by [`Deferred::read`]; `read` applies the queue (a mutable borrow
//! of the cell) only when it is non-empty, which means no such `Ref` is alive. Nested
//! reads of one index (a scan whose callback reads it again) find the queue empty and
//! only share the borrow. A conflict would still be a `KIP_4003`, never a panic.

use super::{storage_error, StoreResult};
use redb::Table;
use std::cell::{Ref, RefCell};

/// Queued operations per index before they are applied anyway (bounds the memory a huge
/// transaction uses; about 50-60 bytes each).
const MAX_QUEUED: usize = 1 << 19;

/// One queued operation on a table `T`: a key and the value to insert, or `None` to
/// remove the key.
pub(crate) trait IndexOp<T> {
    /// The order operations are applied in (the table's key order).
    fn cmp_key(&self, other: &Self) -> std::cmp::Ordering;
    /// Applies the operation.
    fn apply(&self, table: &mut T) -> StoreResult<()>;
}

/// A table with its queue of pending operations.
pub(crate) struct Deferred<T, O> {
    inner: RefCell<(T, Vec<O>)>,
}

impl<T, O: IndexOp<T>> Deferred<T, O> {
    pub fn new(table: T) -> Self {
        Deferred {
            inner: RefCell::new((table, Vec::new())),
        }
    }

    /// Queues an operation (applying the queue first if it is full).
    pub fn push(&mut self, op: O) -> StoreResult<()> {
        let inner = self.inner.get_mut();
        if inner.1.len() >= MAX_QUEUED {
            apply_all(inner)?;
        }
        inner.1.push(op);
        Ok(())
    }

    /// Applies the queue.
    pub fn flush(&mut self) -> StoreResult<()> {
        apply_all(self.inner.get_mut())
    }

    /// The table for writing directly, with the queue applied.
    pub fn table_mut(&mut self) -> StoreResult<&mut T> {
        let inner = self.inner.get_mut();
        apply_all(inner)?;
        Ok(&mut inner.0)
    }

    /// The table for reading, with the queue applied.
    pub fn read(&self) -> StoreResult<Ref<'_, T>> {
        let pending = {
            let inner = self
                .inner
                .try_borrow()
                .map_err(|_| storage_error("an index is being updated while it is read"))?;
            !inner.1.is_empty()
        };
        if pending {
            let mut inner = self
                .inner
                .try_borrow_mut()
                .map_err(|_| storage_error("an index is being read while it is updated"))?;
            apply_all(&mut inner)?;
        }
        let inner = self
            .inner
            .try_borrow()
            .map_err(|_| storage_error("an index is being updated while it is read"))?;
        Ok(Ref::map(inner, |(t, _)| t))
    }
}

fn apply_all<T, O: IndexOp<T>>(inner: &mut (T, Vec<O>)) -> StoreResult<()> {
    let (table, ops) = inner;
    if ops.is_empty() {
        return Ok(());
    }
    // Stable: a removal and a re-insertion of one key stay in the order they were made.
    ops.sort_by(|a, b| a.cmp_key(b));
    let result = ops.iter().try_for_each(|op| op.apply(table));
    ops.clear();
    result
}

/// `(predicate, object, subject) -> proposition id` (the `pos` index).
pub(crate) type PosOp = ((String, u64, u64), Option<u64>);
/// `(object, predicate, subject) -> proposition id` (the `osp` index).
pub(crate) type OspOp = ((u64, String, u64), Option<u64>);
/// `(text, element) -> value`: `concept_type` / `concept_name` (`()`), postings (`u64`).
pub(crate) type PairOp<V> = ((String, u64), Option<V>);

impl IndexOp<Table<'_, (&'static str, u64, u64), u64>> for PosOp {
    fn cmp_key(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
    fn apply(&self, table: &mut Table<'_, (&'static str, u64, u64), u64>) -> StoreResult<()> {
        let ((p, o, s), v) = self;
        let key = (p.as_str(), *o, *s);
        match v {
            Some(id) => table.insert(key, id).map(drop),
            None => table.remove(key).map(drop),
        }
        .map_err(storage_error)
    }
}

impl IndexOp<Table<'_, (u64, &'static str, u64), u64>> for OspOp {
    fn cmp_key(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
    fn apply(&self, table: &mut Table<'_, (u64, &'static str, u64), u64>) -> StoreResult<()> {
        let ((o, p, s), v) = self;
        let key = (*o, p.as_str(), *s);
        match v {
            Some(id) => table.insert(key, id).map(drop),
            None => table.remove(key).map(drop),
        }
        .map_err(storage_error)
    }
}

impl IndexOp<Table<'_, (&'static str, u64), u64>> for PairOp<u64> {
    fn cmp_key(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
    fn apply(&self, table: &mut Table<'_, (&'static str, u64), u64>) -> StoreResult<()> {
        let ((text, id), v) = self;
        let key = (text.as_str(), *id);
        match v {
            Some(value) => table.insert(key, value).map(drop),
            None => table.remove(key).map(drop),
        }
        .map_err(storage_error)
    }
}

impl IndexOp<Table<'_, (&'static str, u64), ()>> for PairOp<()> {
    fn cmp_key(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
    fn apply(&self, table: &mut Table<'_, (&'static str, u64), ()>) -> StoreResult<()> {
        let ((text, id), v) = self;
        let key = (text.as_str(), *id);
        match v {
            Some(()) => table.insert(key, ()).map(drop),
            None => table.remove(key).map(drop),
        }
        .map_err(storage_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use redb::{ReadableTable, ReadableTableMetadata, TableDefinition};
    use std::collections::BTreeMap;

    const T: TableDefinition<(&str, u64), u64> = TableDefinition::new("t");

    fn db() -> redb::Database {
        redb::Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .expect("in-memory database")
    }

    fn contents(t: &Table<'_, (&'static str, u64), u64>) -> BTreeMap<(String, u64), u64> {
        t.iter()
            .expect("iter")
            .map(|e| {
                let (k, v) = e.expect("entry");
                let (a, b) = k.value();
                ((a.to_string(), b), v.value())
            })
            .collect()
    }

    #[test]
    fn reads_see_queued_writes_in_the_order_they_were_made() {
        let db = db();
        let txn = db.begin_write().expect("txn");
        {
            let mut d: Deferred<_, PairOp<u64>> = Deferred::new(txn.open_table(T).expect("t"));
            d.push((("b".into(), 1), Some(10))).expect("push");
            d.push((("a".into(), 2), Some(20))).expect("push");
            // Removed, then inserted again: present. Inserted, then removed: absent.
            d.push((("b".into(), 1), None)).expect("push");
            d.push((("b".into(), 1), Some(11))).expect("push");
            d.push((("a".into(), 2), None)).expect("push");
            let seen = contents(&d.read().expect("read"));
            assert_eq!(seen, BTreeMap::from([(("b".to_string(), 1), 11)]));
            // Later writes are queued again and seen by the next read.
            d.push((("c".into(), 3), Some(30))).expect("push");
            assert_eq!(d.read().expect("read").len().expect("len"), 2);
            // A shared borrow may be held while another read finds nothing queued.
            let first = d.read().expect("read");
            let second = d.read().expect("read");
            assert_eq!(contents(&first), contents(&second));
        }
        txn.commit().expect("commit");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, rng_seed: proptest::test_runner::RngSeed::Fixed(7), ..ProptestConfig::default() })]
        /// Any interleaving of inserts, removals, reads and flushes ends as if every
        /// operation had been applied at once, in order.
        #[test]
        fn same_result_as_applying_in_order(ops in prop::collection::vec((0u8..4, 0u8..3, 0u64..4, 0u64..100), 0..80)) {
            let db = db();
            let txn = db.begin_write().expect("txn");
            let mut model: BTreeMap<(String, u64), u64> = BTreeMap::new();
            {
                let mut d: Deferred<_, PairOp<u64>> = Deferred::new(txn.open_table(T).expect("t"));
                for (kind, text, id, value) in ops {
                    let key = (["x", "y", "z"][usize::from(text)].to_string(), id);
                    match kind {
                        0 | 1 => {
                            model.insert(key.clone(), value);
                            d.push((key, Some(value))).expect("push");
                        }
                        2 => {
                            model.remove(&key);
                            d.push((key, None)).expect("push");
                        }
                        _ => prop_assert_eq!(&contents(&d.read().expect("read")), &model),
                    }
                }
                d.flush().expect("flush");
                prop_assert_eq!(&contents(d.table_mut().expect("table")), &model);
            }
            txn.commit().expect("commit");
        }
    }
}
