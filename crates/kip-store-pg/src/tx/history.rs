//! The history primitives (`kip_storage::history`) in PostgreSQL: `kip_hist_versions`
//! (space, key, part, valid_to) -> state, `kip_hist_changes` (space, seq, key) and
//! `kip_hist_commits` (space, seq) -> record (schema migration 5), element keys stored
//! with [`ek`]. Version entries go through the row buffer (written with the
//! transaction's other rows, in one statement); a commit's changes are one statement;
//! commit records are written directly.

use super::{ek, uk, PgTx, LAST_IDS};
use crate::conn::get;
use kip_storage::history::{HistoryRead, HistoryWrite, TxnHistory, Watermarks};
use kip_storage::{Continue, SpaceId, StoreResult};

fn space(s: SpaceId) -> i32 {
    i32::try_from(s.0).unwrap_or(i32::MAX)
}

/// A seq as stored (seqs stay far below 2^63).
fn sq(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

fn unsq(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl HistoryRead for PgTx<'_> {
    fn last_commit(&self, sp: SpaceId) -> StoreResult<Option<(u64, Vec<u8>)>> {
        let row = self.query_opt(
            "SELECT seq, rec FROM kip_hist_commits WHERE space = $1 ORDER BY seq DESC LIMIT 1",
            &[&space(sp)],
        )?;
        match row {
            Some(r) => Ok(Some((unsq(get::<i64>(&r, 0)?), get::<Vec<u8>>(&r, 1)?))),
            None => Ok(None),
        }
    }

    fn commit_record(&self, sp: SpaceId, seq: u64) -> StoreResult<Option<Vec<u8>>> {
        let row = self.query_opt(
            "SELECT rec FROM kip_hist_commits WHERE space = $1 AND seq = $2",
            &[&space(sp), &sq(seq)],
        )?;
        row.map(|r| get::<Vec<u8>>(&r, 0)).transpose()
    }

    fn version_after(
        &self,
        sp: SpaceId,
        key: u64,
        part: u8,
        seq: u64,
    ) -> StoreResult<Option<(u64, Vec<u8>)>> {
        // This transaction's own entries (valid_to = its seq, above every stored one):
        // what the driver asks for when an element changes again in the transaction,
        // answered from the buffer without a round trip.
        let from = (
            space(sp),
            ek(key),
            i16::from(part),
            sq(seq.saturating_add(1)),
        );
        let to = (space(sp), ek(key), i16::from(part), i64::MAX);
        let own = |buf: &crate::buffer::Buffer| {
            buf.versions
                .range(from..=to)
                .next()
                .map(|((_, _, _, t), v)| (unsq(*t), v.clone()))
        };
        let newest = self
            .txn_history
            .seq()
            .is_some_and(|s| seq.saturating_add(1) >= s);
        if newest {
            if let Some(hit) = own(&self.buf.borrow()) {
                return Ok(Some(hit));
            }
        }
        let row = self.query_opt(
            "SELECT valid_to, state FROM kip_hist_versions \
             WHERE space = $1 AND key = $2 AND part = $3 AND valid_to > $4 \
             ORDER BY valid_to LIMIT 1",
            &[&space(sp), &ek(key), &i16::from(part), &sq(seq)],
        )?;
        if let Some(r) = row {
            return Ok(Some((unsq(get::<i64>(&r, 0)?), get::<Vec<u8>>(&r, 1)?)));
        }
        // This transaction's own (not yet written) entries come after every stored one.
        Ok(own(&self.buf.borrow()))
    }

    fn scan_changes(
        &self,
        sp: SpaceId,
        after: u64,
        f: &mut dyn FnMut(u64, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        kip_storage::history::scan_with_pending(&self.txn_history, sp, after, f, |f| {
            self.scan_stored_changes(sp, after, f)
        })
    }
}

impl PgTx<'_> {
    fn scan_stored_changes(
        &self,
        sp: SpaceId,
        after: u64,
        f: &mut dyn FnMut(u64, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()> {
        // Keyset pages, so a caller that stops early reads little.
        const PAGE: i64 = 1_000;
        let (mut seq, mut key) = (sq(after), i64::MAX);
        loop {
            let rows = self.query(
                "SELECT seq, key FROM kip_hist_changes WHERE space = $1 AND (seq, key) > ($2, $3) \
                 ORDER BY seq, key LIMIT $4",
                &[&space(sp), &seq, &key, &PAGE],
            )?;
            let n = rows.len();
            for r in rows {
                seq = get::<i64>(&r, 0)?;
                key = get::<i64>(&r, 1)?;
                if !f(unsq(seq), uk(key))? {
                    return Ok(());
                }
            }
            if (n as i64) < PAGE {
                return Ok(());
            }
        }
    }
}

impl HistoryWrite for PgTx<'_> {
    fn txn_history(&mut self) -> &mut TxnHistory {
        &mut self.txn_history
    }

    fn id_watermarks(&self) -> StoreResult<Watermarks> {
        let next = |kind: usize| -> StoreResult<u64> {
            let last = match self.last_ids[kind] {
                Some(l) => l,
                None => u64::try_from(self.stored_stat(LAST_IDS[kind])?).unwrap_or(0),
            };
            Ok(last + self.allocated[kind] + 1)
        };
        let stored = |key: &str| -> StoreResult<u64> {
            Ok(u64::try_from(self.stored_stat(key)?).unwrap_or(0) + 1)
        };
        Ok(Watermarks {
            concept: next(0)?,
            prop: next(1)?,
            evidence: stored("last_evidence_id")?,
            activity: stored("last_activity_id")?,
        })
    }

    fn put_version(
        &mut self,
        sp: SpaceId,
        key: u64,
        part: u8,
        valid_to: u64,
        state: &[u8],
    ) -> StoreResult<()> {
        self.buf.get_mut().versions.insert(
            (space(sp), ek(key), i16::from(part), sq(valid_to)),
            state.to_vec(),
        );
        self.grew()
    }

    fn put_changes(&mut self, sp: SpaceId, seq: u64, keys: &[u64]) -> StoreResult<()> {
        let keys: Vec<i64> = keys.iter().map(|k| ek(*k)).collect();
        self.execute(
            "INSERT INTO kip_hist_changes (space, seq, key) \
             SELECT $1, $2, k FROM unnest($3::bigint[]) AS k ON CONFLICT DO NOTHING",
            &[&space(sp), &sq(seq), &keys],
        )?;
        Ok(())
    }

    fn put_commit(&mut self, sp: SpaceId, seq: u64, record: &[u8]) -> StoreResult<()> {
        self.execute(
            "INSERT INTO kip_hist_commits (space, seq, rec) VALUES ($1, $2, $3) \
             ON CONFLICT (space, seq) DO UPDATE SET rec = excluded.rec",
            &[&space(sp), &sq(seq), &record],
        )?;
        Ok(())
    }

    fn prune_history(&mut self, sp: SpaceId, horizon: u64, max: usize) -> StoreResult<u64> {
        self.execute(
            "DELETE FROM kip_hist_commits WHERE space = $1 AND seq < $2",
            &[&space(sp), &sq(horizon)],
        )?;
        let limit = i64::try_from(max).unwrap_or(i64::MAX);
        let rows = self.query(
            "WITH c AS (SELECT seq, key FROM kip_hist_changes                         WHERE space = $1 AND seq <= $2 ORDER BY seq, key LIMIT $3),                   v AS (DELETE FROM kip_hist_versions h USING c                         WHERE h.space = $1 AND h.key = c.key AND h.valid_to = c.seq)              DELETE FROM kip_hist_changes h USING c              WHERE h.space = $1 AND h.seq = c.seq AND h.key = c.key RETURNING h.seq",
            &[&space(sp), &sq(horizon), &limit],
        )?;
        Ok(rows.len() as u64)
    }

    fn purge_versions(&mut self, sp: SpaceId, key: u64) -> StoreResult<()> {
        let (s, k) = (space(sp), ek(key));
        self.buf
            .get_mut()
            .versions
            .retain(|(vs, vk, _, _), _| (*vs, *vk) != (s, k));
        self.execute(
            "DELETE FROM kip_hist_versions WHERE space = $1 AND key = $2",
            &[&space(sp), &ek(key)],
        )?;
        Ok(())
    }
}
