//! The history primitives (`kip_storage::history`) in redb: `hist_versions` (space,
//! element key, part, valid_to) -> state, `hist_changes` (space, seq, element key) ->
//! () and `hist_commits` (space, seq) -> commit record. Versions and changes are
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
/// (space, seq, element key) -> (): what each commit changed or ended.
pub(crate) const HIST_CHANGES: TableDefinition<(u32, u64, u64), ()> =
    TableDefinition::new("hist_changes");
/// (space, seq) -> commit record.
pub(crate) const HIST_COMMITS: TableDefinition<(u32, u64), &[u8]> =
    TableDefinition::new("hist_commits");

/// The key of [`HIST_VERSIONS`].
pub(crate) type VersionKey = (u32, u64, u8, u64);
/// The key of [`HIST_CHANGES`].
pub(crate) type ChangeKey = (u32, u64, u64);

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
    t: &impl ReadableTable<ChangeKey, ()>,
    space: SpaceId,
    after: u64,
    f: &mut dyn FnMut(u64, u64) -> StoreResult<Continue>,
) -> StoreResult<()> {
    if after == u64::MAX {
        return Ok(());
    }
    for item in t
        .range((space.0, after + 1, 0)..=(space.0, u64::MAX, u64::MAX))
        .map_err(storage_error)?
    {
        let (k, _) = item.map_err(storage_error)?;
        let (_, seq, key) = k.value();
        if !f(seq, key)? {
            break;
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
        scan_changes(&self.hist_changes, space, after, f)
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

    fn put_change(&mut self, space: SpaceId, seq: u64, key: u64) -> StoreResult<()> {
        self.hist_changes
            .insert((space.0, seq, key), ())
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
        let mut changes = Vec::new();
        for item in self
            .hist_changes
            .range((space.0, 0, 0)..=(space.0, horizon, u64::MAX))
            .map_err(storage_error)?
            .take(max)
        {
            changes.push(item.map_err(storage_error)?.0.value());
        }
        for (sp, seq, key) in &changes {
            for part in [0u8, 1] {
                self.hist_versions
                    .remove((*sp, *key, part, *seq))
                    .map_err(storage_error)?;
            }
            self.hist_changes
                .remove((*sp, *seq, *key))
                .map_err(storage_error)?;
        }
        Ok(changes.len() as u64)
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
