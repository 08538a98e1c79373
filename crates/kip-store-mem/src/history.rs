//! The history primitives (`kip_storage::history`) over the in-memory tables.

use crate::Tables;
use kip_storage::history::{HistoryRead, HistoryWrite, TxnHistory, Watermarks};
use kip_storage::{Continue, SpaceId, StoreResult};
use std::ops::Bound;
use std::sync::Arc;

impl HistoryRead for Tables {
    fn last_commit(&self, space: SpaceId) -> StoreResult<Option<(u64, Vec<u8>)>> {
        Ok(self
            .hist_commits
            .range((space.0, 0)..=(space.0, u64::MAX))
            .next_back()
            .map(|((_, seq), v)| (*seq, v.to_vec())))
    }

    fn commit_record(&self, space: SpaceId, seq: u64) -> StoreResult<Option<Vec<u8>>> {
        Ok(self.hist_commits.get(&(space.0, seq)).map(|v| v.to_vec()))
    }

    fn version_after(
        &self,
        space: SpaceId,
        key: u64,
        part: u8,
        seq: u64,
    ) -> StoreResult<Option<(u64, Vec<u8>)>> {
        Ok(self
            .hist_versions
            .range((
                Bound::Excluded((space.0, key, part, seq)),
                Bound::Included((space.0, key, part, u64::MAX)),
            ))
            .next()
            .map(|((_, _, _, valid_to), v)| (*valid_to, v.to_vec())))
    }

    fn scan_changes(
        &self,
        space: SpaceId,
        after: u64,
        f: &mut dyn FnMut(u64, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        if after == u64::MAX {
            return Ok(());
        }
        kip_storage::history::scan_with_pending(&self.txn_history, space, after, f, |f| {
            for ((_, seq), keys) in self
                .hist_changes
                .range((space.0, after + 1)..=(space.0, u64::MAX))
            {
                for key in keys.iter() {
                    if !f(*seq, *key)? {
                        return Ok(());
                    }
                }
            }
            Ok(())
        })
    }
}

impl HistoryWrite for Tables {
    fn txn_history(&mut self) -> &mut TxnHistory {
        &mut self.txn_history
    }

    fn id_watermarks(&self) -> StoreResult<Watermarks> {
        Ok(Watermarks {
            concept: self.next_concept,
            prop: self.next_prop,
            evidence: self.next_evidence,
            activity: self.next_activity,
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
            .insert((space.0, key, part, valid_to), Arc::new(state.to_vec()));
        Ok(())
    }

    fn put_changes(&mut self, space: SpaceId, seq: u64, keys: &[u64]) -> StoreResult<()> {
        self.hist_changes
            .insert((space.0, seq), Arc::new(keys.to_vec()));
        Ok(())
    }

    fn put_commit(&mut self, space: SpaceId, seq: u64, record: &[u8]) -> StoreResult<()> {
        self.hist_commits
            .insert((space.0, seq), Arc::new(record.to_vec()));
        Ok(())
    }

    fn prune_history(&mut self, space: SpaceId, horizon: u64, max: usize) -> StoreResult<u64> {
        let commits: Vec<_> = self
            .hist_commits
            .range((space.0, 0)..(space.0, horizon))
            .map(|(k, _)| *k)
            .collect();
        for k in commits {
            self.hist_commits.remove(&k);
        }
        // Whole commits' lists, oldest first, until `max` changes went.
        let mut lists = Vec::new();
        let mut n = 0usize;
        for ((_, seq), keys) in self.hist_changes.range((space.0, 0)..=(space.0, horizon)) {
            if n >= max {
                break;
            }
            n += keys.len();
            lists.push((*seq, keys.clone()));
        }
        for (seq, keys) in &lists {
            for key in keys.iter() {
                for part in [0u8, 1] {
                    self.hist_versions.remove(&(space.0, *key, part, *seq));
                }
            }
            self.hist_changes.remove(&(space.0, *seq));
        }
        Ok(n as u64)
    }

    fn purge_versions(&mut self, space: SpaceId, key: u64) -> StoreResult<()> {
        let keys: Vec<_> = self
            .hist_versions
            .range((space.0, key, 0, 0)..=(space.0, key, u8::MAX, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            self.hist_versions.remove(&k);
        }
        Ok(())
    }
}
