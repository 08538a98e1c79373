//! The history primitives (`kip_storage::history`) in redb: `hist_versions` (space,
//! element key, part, valid_to) -> state, `hist_change_sets` (space, seq) -> the keys
//! that commit changed ([`kip_storage::history::pack_keys`]) and `hist_commits`
//! (space, seq) -> commit record. Versions and changes are
//! derived (the upkeep driver re-makes them when the write-ahead log is replayed);
//! commit records (their time) and purges of the chain are logged (`OP_PUT_COMMIT`,
//! `OP_PURGE_VERSIONS`).

use super::oplog::{OP_PRUNE_HISTORY, OP_PURGE_VERSIONS, OP_PUT_COMMIT};
use super::*;
use kip_storage::history::{HistoryRead, HistoryWrite, TxnHistory, Watermarks};
use kip_storage::SpaceId;

/// (space, element key, part, valid_to) -> the state valid before `valid_to`.
pub(crate) const HIST_VERSIONS: TableDefinition<(u32, u64, u8, u64), &[u8]> =
    TableDefinition::new("hist_versions");
/// (space, seq) -> the element keys that commit changed or ended, packed.
pub(crate) const HIST_CHANGES: TableDefinition<(u32, u64), &[u8]> =
    TableDefinition::new("hist_change_sets");
/// The layout of the first history build (one entry per change), converted by
/// [`convert_old_changes`] when such a store opens.
const OLD_HIST_CHANGES: TableDefinition<(u32, u64, u64), ()> = TableDefinition::new("hist_changes");
/// (space, seq) -> commit record.
pub(crate) const HIST_COMMITS: TableDefinition<(u32, u64), &[u8]> =
    TableDefinition::new("hist_commits");

/// The key of [`HIST_VERSIONS`].
pub(crate) type VersionKey = (u32, u64, u8, u64);
/// The key of [`HIST_CHANGES`].
pub(crate) type ChangeKey = (u32, u64);

/// Converts a store's changes index from one entry per change (`hist_changes`, the
/// first history build's) to one list per commit, in the open's transaction.
pub(crate) fn convert_old_changes(txn: &WriteTransaction) -> StoreResult<()> {
    use redb::TableHandle;
    let old = txn
        .list_tables()
        .map_err(storage_error)?
        .any(|t| t.name() == OLD_HIST_CHANGES.name());
    if !old {
        return Ok(());
    }
    let mut lists: std::collections::BTreeMap<(u32, u64), Vec<u64>> = Default::default();
    {
        let t = txn.open_table(OLD_HIST_CHANGES).map_err(storage_error)?;
        for item in t.iter().map_err(storage_error)? {
            let (sp, seq, key) = item.map_err(storage_error)?.0.value();
            lists.entry((sp, seq)).or_default().push(key);
        }
    }
    {
        let mut t = txn.open_table(HIST_CHANGES).map_err(storage_error)?;
        for (k, keys) in lists {
            let packed = kip_storage::history::pack_keys(&keys);
            t.insert(k, packed.as_slice()).map_err(storage_error)?;
        }
    }
    txn.delete_table(OLD_HIST_CHANGES).map_err(storage_error)?;
    Ok(())
}

fn last_commit(
    t: &impl ReadableTable<(u32, u64), &'static [u8]>,
    space: SpaceId,
) -> StoreResult<Option<(u64, Vec<u8>)>> {
    let mut range = t
        .range((space.0, 0)..=(space.0, u64::MAX))
        .map_err(storage_error)?;
    match range.next_back() {
        Some(item) => {
            let (k, v) = item.map_err(storage_error)?;
            Ok(Some((k.value().1, v.value().to_vec())))
        }
        None => Ok(None),
    }
}

fn commit_record(
    t: &impl ReadableTable<(u32, u64), &'static [u8]>,
    space: SpaceId,
    seq: u64,
) -> StoreResult<Option<Vec<u8>>> {
    Ok(t.get((space.0, seq))
        .map_err(storage_error)?
        .map(|g| g.value().to_vec()))
}

fn version_after(
    t: &impl ReadableTable<VersionKey, &'static [u8]>,
    space: SpaceId,
    key: u64,
    part: u8,
    seq: u64,
) -> StoreResult<Option<(u64, Vec<u8>)>> {
    if seq == u64::MAX {
        return Ok(None);
    }
    let mut range = t
        .range((space.0, key, part, seq + 1)..=(space.0, key, part, u64::MAX))
        .map_err(storage_error)?;
    match range.next() {
        Some(item) => {
            let (k, v) = item.map_err(storage_error)?;
            Ok(Some((k.value().3, v.value().to_vec())))
        }
        None => Ok(None),
    }
}

fn scan_changes(
    t: &impl ReadableTable<ChangeKey, &'static [u8]>,
    space: SpaceId,
    after: u64,
    f: &mut dyn FnMut(u64, u64) -> StoreResult<Continue>,
) -> StoreResult<()> {
    if after == u64::MAX {
        return Ok(());
    }
    for item in t
        .range((space.0, after + 1)..=(space.0, u64::MAX))
        .map_err(storage_error)?
    {
        let (k, v) = item.map_err(storage_error)?;
        let seq = k.value().1;
        for key in kip_storage::history::unpack_keys(v.value())? {
            if !f(seq, key)? {
                return Ok(());
            }
        }
    }
    Ok(())
}

impl HistoryRead for ReadTables {
    fn last_commit(&self, space: SpaceId) -> StoreResult<Option<(u64, Vec<u8>)>> {
        match &self.hist_commits {
            Some(t) => last_commit(t, space),
            None => Ok(None),
        }
    }

    fn commit_record(&self, space: SpaceId, seq: u64) -> StoreResult<Option<Vec<u8>>> {
        match &self.hist_commits {
            Some(t) => commit_record(t, space, seq),
            None => Ok(None),
        }
    }

    fn version_after(
        &self,
        space: SpaceId,
        key: u64,
        part: u8,
        seq: u64,
    ) -> StoreResult<Option<(u64, Vec<u8>)>> {
        match &self.hist_versions {
            Some(t) => version_after(t, space, key, part, seq),
            None => Ok(None),
        }
    }

    fn scan_changes(
        &self,
        space: SpaceId,
        after: u64,
        f: &mut dyn FnMut(u64, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        match &self.hist_changes {
            Some(t) => scan_changes(t, space, after, f),
            None => Ok(()),
        }
    }
}

impl HistoryRead for WriteTables<'_> {
    fn last_commit(&self, space: SpaceId) -> StoreResult<Option<(u64, Vec<u8>)>> {
        last_commit(&self.hist_commits, space)
    }

    fn commit_record(&self, space: SpaceId, seq: u64) -> StoreResult<Option<Vec<u8>>> {
        commit_record(&self.hist_commits, space, seq)
    }

    fn version_after(
        &self,
        space: SpaceId,
        key: u64,
        part: u8,
        seq: u64,
    ) -> StoreResult<Option<(u64, Vec<u8>)>> {
        version_after(&self.hist_versions, space, key, part, seq)
    }

    fn scan_changes(
        &self,
        space: SpaceId,
        after: u64,
        f: &mut dyn FnMut(u64, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        kip_storage::history::scan_with_pending(&self.txn_history, space, after, f, |f| {
            scan_changes(&self.hist_changes, space, after, f)
        })
    }
}

impl HistoryWrite for WriteTables<'_> {
    fn txn_history(&mut self) -> &mut TxnHistory {
        &mut self.txn_history
    }

    fn id_watermarks(&self) -> StoreResult<Watermarks> {
        Ok(Watermarks {
            concept: self.counter(NEXT_CONCEPT)?,
            prop: self.counter(NEXT_PROP)?,
            evidence: self.counter(super::elements::NEXT_EVIDENCE)?,
            activity: self.counter(super::elements::NEXT_ACTIVITY)?,
        })
    }

    fn put_version(
        &mut self,
        space: SpaceId,
        key: u64,
        part: u8,
        valid_to: u64,
        state: &[u8],
    ) -> StoreResult<()> {
        self.hist_versions
            .insert((space.0, key, part, valid_to), state)
            .map_err(storage_error)?;
        Ok(())
    }

    fn put_changes(&mut self, space: SpaceId, seq: u64, keys: &[u64]) -> StoreResult<()> {
        let packed = kip_storage::history::pack_keys(keys);
        self.hist_changes
            .insert((space.0, seq), packed.as_slice())
            .map_err(storage_error)?;
        Ok(())
    }

    fn put_commit(&mut self, space: SpaceId, seq: u64, record: &[u8]) -> StoreResult<()> {
        self.log_op(OP_PUT_COMMIT, seq, &space.0.to_le_bytes(), record);
        self.hist_commits
            .insert((space.0, seq), record)
            .map_err(storage_error)?;
        Ok(())
    }

    fn prune_history(&mut self, space: SpaceId, horizon: u64, max: usize) -> StoreResult<u64> {
        self.log_op(
            OP_PRUNE_HISTORY,
            horizon,
            &space.0.to_le_bytes(),
            &(max as u64).to_le_bytes(),
        );
        let mut commits = Vec::new();
        for item in self
            .hist_commits
            .range((space.0, 0)..(space.0, horizon))
            .map_err(storage_error)?
        {
            commits.push(item.map_err(storage_error)?.0.value());
        }
        for k in commits {
            self.hist_commits.remove(k).map_err(storage_error)?;
        }
        // Whole commits' lists, oldest first, until `max` changes went.
        let mut lists = Vec::new();
        let mut n = 0usize;
        for item in self
            .hist_changes
            .range((space.0, 0)..=(space.0, horizon))
            .map_err(storage_error)?
        {
            if n >= max {
                break;
            }
            let (k, v) = item.map_err(storage_error)?;
            let keys = kip_storage::history::unpack_keys(v.value())?;
            n += keys.len();
            lists.push((k.value().1, keys));
        }
        for (seq, keys) in &lists {
            for key in keys {
                for part in [0u8, 1] {
                    self.hist_versions
                        .remove((space.0, *key, part, *seq))
                        .map_err(storage_error)?;
                }
            }
            self.hist_changes
                .remove((space.0, *seq))
                .map_err(storage_error)?;
        }
        Ok(n as u64)
    }

    fn purge_versions(&mut self, space: SpaceId, key: u64) -> StoreResult<()> {
        self.log_op(OP_PURGE_VERSIONS, key, &space.0.to_le_bytes(), &[]);
        let mut keys = Vec::new();
        for item in self
            .hist_versions
            .range((space.0, key, 0, 0)..=(space.0, key, u8::MAX, u64::MAX))
            .map_err(storage_error)?
        {
            let (k, _) = item.map_err(storage_error)?;
            keys.push(k.value());
        }
        for k in keys {
            self.hist_versions.remove(k).map_err(storage_error)?;
        }
        Ok(())
    }
}

/// The space of a logged history operation (`a` part: u32 LE).
pub(super) fn logged_space(a: &[u8]) -> StoreResult<SpaceId> {
    let sp = <[u8; 4]>::try_from(a).map_err(|_| {
        storage_error(kip_storage::StoreError::Corruption(
            "write-ahead log: a history operation without its space".into(),
        ))
    })?;
    Ok(SpaceId(u32::from_le_bytes(sp)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_builds_changes_index_converts_to_one_list_per_commit() {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("t.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut t = txn.open_table(OLD_HIST_CHANGES).unwrap();
            for (seq, key) in [(1, 7), (1, 3), (2, 9), (4, 1 << 40)] {
                t.insert((SpaceId::DEFAULT.0, seq, key), ()).unwrap();
            }
        }
        txn.commit().unwrap();
        let txn = db.begin_write().unwrap();
        convert_old_changes(&txn).unwrap();
        {
            let t = txn.open_table(HIST_CHANGES).unwrap();
            let mut seen = Vec::new();
            scan_changes(&t, SpaceId::DEFAULT, 0, &mut |seq, key| {
                seen.push((seq, key));
                Ok(true)
            })
            .unwrap();
            assert_eq!(seen, vec![(1, 3), (1, 7), (2, 9), (4, 1 << 40)]);
        }
        use redb::TableHandle;
        assert!(
            !txn.list_tables()
                .unwrap()
                .any(|t| t.name() == OLD_HIST_CHANGES.name()),
            "the old table is gone"
        );
        // A store without the old table: nothing to do.
        convert_old_changes(&txn).unwrap();
        txn.commit().unwrap();
    }
}
