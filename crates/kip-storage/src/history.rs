//! History: the space sequence, commit records and the version chain (docs/storage.md
//! §3), decided once for every backend.
//!
//! - Every write transaction that changes something in a space, once history is on
//!   ([`start`]), gets the next `space_seq` of that space and leaves one commit record
//!   ([`CommitRecord`]: when, and the id watermarks at its end). A transaction that
//!   changes nothing takes no seq (Specification §32.8).
//! - Each change of an element that existed before the transaction keeps the state it
//!   replaces in the version chain, keyed `(space, element key, part, valid_to)`: the
//!   state that was current up to and including seq `valid_to - 1`. `part` tells the
//!   graph row of a concept or link ([`PART_ROW`]) from its KIP 2.0 record
//!   ([`PART_RECORD`]); an empty value means "absent" (a record added later to an
//!   element that existed). The keys a commit changed or ended are listed once per
//!   commit, under its seq, when it commits ([`HistoryWrite::put_changes`]: one write
//!   per transaction, not one per change; the per-change entry cost 1.3-1.6x on bulk
//!   updates, docs/performance.md "History"). Creations write no chain entry: the
//!   watermarks of a commit say which ids existed.
//! - What a read `AS OF SEQ k` sees is computed from those by [`crate::asof::AsOf`].
//!
//! Backends store the entries ([`HistoryRead`] / [`HistoryWrite`] primitives); the
//! upkeep driver ([`crate::upkeep`]) calls [`record`] for every row or record it puts or
//! deletes, from inside the backend's write primitives, so a backend that replays a log
//! re-derives the chain like any index. Only the commit record carries something a
//! replay cannot recompute (its time): backends with a log log [`HistoryWrite::put_commit`]
//! and apply it on replay with [`apply_commit`].

use crate::{decode, encode, Continue, ElementId, ElementKind, GraphRead, SpaceId};
use crate::{GraphWrite, StoreResult};
use serde::{Deserialize, Serialize};

/// `meta` key: present once history is recorded (set by [`start`], with commit 0).
pub const HISTORY_ON: &str = "history_on";

/// Version chain part: the graph row of a concept or link (the 1.x record).
pub const PART_ROW: u8 = 0;
/// Version chain part: the KIP 2.0 element record ([`crate::ElementRecord`]).
pub const PART_RECORD: u8 = 1;

/// The next number each id counter would give at a point in time: which elements
/// existed then ([`Watermarks::existed`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Watermarks {
    /// Next concept number.
    #[serde(rename = "c")]
    pub concept: u64,
    /// Next proposition (and assertion) number.
    #[serde(rename = "p")]
    pub prop: u64,
    /// Next evidence number.
    #[serde(rename = "e")]
    pub evidence: u64,
    /// Next activity number.
    #[serde(rename = "x")]
    pub activity: u64,
}

impl Watermarks {
    /// Whether the element with this key ([`ElementId::encode`], which is
    /// [`crate::ElemRef::encode`] for concepts and links) had been created by then.
    pub fn existed(&self, key: u64) -> bool {
        let Some(id) = ElementId::decode(key) else {
            return false;
        };
        let next = match id.kind {
            ElementKind::Concept => self.concept,
            ElementKind::Proposition | ElementKind::Assertion => self.prop,
            ElementKind::Evidence => self.evidence,
            ElementKind::Activity => self.activity,
        };
        id.n < next
    }
}

/// One committed transaction of a space (Specification §33.1), as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitRecord {
    /// Its `space_seq` (0: the state history started from).
    #[serde(rename = "s")]
    pub seq: u64,
    /// When it committed, in milliseconds since the Unix epoch (never less than the
    /// previous commit's).
    #[serde(rename = "t")]
    pub at_ms: u64,
    /// The id counters when it committed.
    #[serde(rename = "w")]
    pub watermarks: Watermarks,
}

impl CommitRecord {
    /// The stored bytes.
    pub fn encode(&self) -> StoreResult<Vec<u8>> {
        encode(self)
    }

    /// Reads stored bytes.
    pub fn decode(bytes: &[u8]) -> StoreResult<CommitRecord> {
        decode(bytes)
    }
}

/// What a write transaction knows about its place in history; held by the backend's
/// transaction, managed only by this module.
#[derive(Debug, Clone, Default)]
pub struct TxnHistory {
    /// Whether history is recorded (read from `meta` at the first change).
    recording: Option<bool>,
    /// The seq this transaction takes, once it changed something.
    seq: Option<u64>,
    /// When it commits (taken at its first change).
    at_ms: u64,
    /// The watermarks when it began (those of the previous commit).
    start: Watermarks,
    /// The (element key, part) pairs whose replaced state it has kept already.
    kept: std::collections::HashSet<(u64, u8)>,
}

impl TxnHistory {
    /// The element keys this transaction changed or ended (sorted, distinct): what
    /// its commit lists.
    fn changed_keys(&self) -> Vec<u64> {
        let mut keys: Vec<u64> = self.kept.iter().map(|(k, _)| *k).collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

/// For a backend's `scan_changes` inside a write transaction: the stored changes
/// (`stored`, which scans them with the callback it is given), then the changes of the
/// transaction itself (`h`), which its commit will list under its seq (above every
/// stored one). So a read `AS OF` an earlier seq inside a write sees the transaction's
/// own changes as changes.
pub fn scan_with_pending(
    h: &TxnHistory,
    space: SpaceId,
    after: u64,
    f: &mut dyn FnMut(u64, u64) -> StoreResult<Continue>,
    stored: impl FnOnce(&mut dyn FnMut(u64, u64) -> StoreResult<Continue>) -> StoreResult<()>,
) -> StoreResult<()> {
    let mut go = true;
    stored(&mut |seq, key| {
        go = f(seq, key)?;
        Ok(go)
    })?;
    let Some(seq) = h
        .seq
        .filter(|s| *s > after && go && space == SpaceId::DEFAULT)
    else {
        return Ok(());
    };
    for key in h.changed_keys() {
        if !f(seq, key)? {
            break;
        }
    }
    Ok(())
}

/// The stored form of a commit's changed keys (for backends that keep them as one
/// value): ascending keys as LEB128 varints of their differences.
pub fn pack_keys(keys: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(keys.len() * 2);
    let mut prev = 0u64;
    for &k in keys {
        let mut d = k.wrapping_sub(prev);
        prev = k;
        loop {
            let byte = (d & 0x7f) as u8;
            d >>= 7;
            if d == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
    }
    out
}

/// Reads [`pack_keys`]' bytes.
pub fn unpack_keys(bytes: &[u8]) -> StoreResult<Vec<u64>> {
    let bad = || crate::StoreError::Corruption("history: a malformed list of changed keys".into());
    let mut keys = Vec::new();
    let (mut prev, mut d, mut shift) = (0u64, 0u64, 0u32);
    for &b in bytes {
        if shift > 63 {
            return Err(bad());
        }
        d |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            prev = prev.wrapping_add(d);
            keys.push(prev);
            (d, shift) = (0, 0);
        } else {
            shift += 7;
        }
    }
    if shift != 0 {
        return Err(bad());
    }
    Ok(keys)
}

impl TxnHistory {
    /// The seq this transaction commits as, if it changed something under history.
    pub fn seq(&self) -> Option<u64> {
        self.seq
    }

    /// When it commits (milliseconds), once it has a seq.
    pub fn at_ms(&self) -> Option<u64> {
        self.seq.map(|_| self.at_ms)
    }
}

/// Reading the history primitives of a backend.
pub trait HistoryRead {
    /// The newest commit record of `space`: `(seq, bytes)`.
    fn last_commit(&self, space: SpaceId) -> StoreResult<Option<(u64, Vec<u8>)>>;
    /// The commit record of `seq`.
    fn commit_record(&self, space: SpaceId, seq: u64) -> StoreResult<Option<Vec<u8>>>;
    /// The first version chain entry of `(key, part)` with `valid_to > seq`:
    /// `(valid_to, state bytes)` (empty bytes: absent).
    fn version_after(
        &self,
        space: SpaceId,
        key: u64,
        part: u8,
        seq: u64,
    ) -> StoreResult<Option<(u64, Vec<u8>)>>;
    /// The changes index from `after + 1` on, in seq then key order: `f(seq, key)`
    /// (inside a write transaction, its own changes too: [`scan_with_pending`]).
    fn scan_changes(
        &self,
        space: SpaceId,
        after: u64,
        f: &mut dyn FnMut(u64, u64) -> StoreResult<Continue>,
    ) -> StoreResult<()>;
}

/// Writing the history primitives, inside a write transaction. Backends with a log
/// log [`HistoryWrite::put_commit`] and [`HistoryWrite::purge_versions`]; the version
/// and change entries are derived (re-made by a replay through the upkeep driver and
/// [`apply_commit`]).
pub trait HistoryWrite: HistoryRead {
    /// The transaction's history state (see [`TxnHistory`]).
    fn txn_history(&mut self) -> &mut TxnHistory;
    /// The id counters as this transaction sees them.
    fn id_watermarks(&self) -> StoreResult<Watermarks>;
    /// Stores a version chain entry (a backend may buffer it until commit, as long as
    /// its own reads and purges see the buffer).
    fn put_version(
        &mut self,
        space: SpaceId,
        key: u64,
        part: u8,
        valid_to: u64,
        state: &[u8],
    ) -> StoreResult<()>;
    /// Lists `keys` (sorted, distinct) as what commit `seq` changed or ended; called
    /// once per commit, before [`HistoryWrite::put_commit`].
    fn put_changes(&mut self, space: SpaceId, seq: u64, keys: &[u64]) -> StoreResult<()>;
    /// Stores a commit record.
    fn put_commit(&mut self, space: SpaceId, seq: u64, record: &[u8]) -> StoreResult<()>;
    /// Removes every version chain entry of `key` (all parts): a purge.
    fn purge_versions(&mut self, space: SpaceId, key: u64) -> StoreResult<()>;
    /// The history horizon (docs/storage.md §4): removes the commit records below
    /// `horizon` (so reads below it are unavailable at once), then, oldest first, the
    /// change lists of commits at or below `horizon` together with the version chain
    /// entries they list (`valid_to` = that seq), until about `max` changes went (a
    /// backend may finish the commit it is in). Returns how many changes it removed. Reads `AS OF` a seq at or above `horizon`
    /// are unaffected. Backends with a log log it.
    fn prune_history(&mut self, space: SpaceId, horizon: u64, max: usize) -> StoreResult<u64>;
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The commit record of `seq` in `space`.
pub fn commit(
    g: &(impl HistoryRead + ?Sized),
    space: SpaceId,
    seq: u64,
) -> StoreResult<Option<CommitRecord>> {
    g.commit_record(space, seq)?
        .map(|b| CommitRecord::decode(&b))
        .transpose()
}

/// The newest commit record of `space` (`None`: history is not recorded).
pub fn last(g: &(impl HistoryRead + ?Sized), space: SpaceId) -> StoreResult<Option<CommitRecord>> {
    g.last_commit(space)?
        .map(|(_, b)| CommitRecord::decode(&b))
        .transpose()
}

/// The last commit of `space` at or before `at_ms` (commit times never decrease with
/// the seq, so a binary search over the seqs): `None` when history had not started.
pub fn commit_at_or_before(
    g: &(impl HistoryRead + ?Sized),
    space: SpaceId,
    at_ms: u64,
) -> StoreResult<Option<CommitRecord>> {
    let Some(newest) = last(g, space)? else {
        return Ok(None);
    };
    if newest.at_ms <= at_ms {
        return Ok(Some(newest));
    }
    // The first commit present (history may start above 0 after a horizon cut).
    let (mut lo, mut hi) = (0u64, newest.seq);
    let mut best = None;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match commit(g, space, mid)? {
            Some(c) if c.at_ms <= at_ms => {
                best = Some(c);
                lo = mid + 1;
            }
            Some(_) => hi = mid,
            None => lo = mid + 1,
        }
    }
    Ok(best)
}

/// The seq this write transaction takes, allocating it at its first change once
/// history is on (`None`: history is off, nothing is recorded).
pub fn touch<T: GraphRead + HistoryWrite + ?Sized>(t: &mut T) -> StoreResult<Option<u64>> {
    if let Some(seq) = t.txn_history().seq {
        return Ok(Some(seq));
    }
    let recording = match t.txn_history().recording {
        Some(r) => r,
        None => {
            let r = t.meta(HISTORY_ON)?.is_some();
            t.txn_history().recording = Some(r);
            r
        }
    };
    if !recording {
        return Ok(None);
    }
    let space = SpaceId::DEFAULT;
    let prev = last(t, space)?;
    let (seq, at_ms, start) = match prev {
        Some(p) => (p.seq + 1, now_ms().max(p.at_ms), p.watermarks),
        // History is on but commit 0 is gone (cannot happen through `start`): begin
        // with what exists now.
        None => (1, now_ms(), t.id_watermarks()?),
    };
    let h = t.txn_history();
    h.seq = Some(seq);
    h.at_ms = at_ms;
    h.start = start;
    Ok(Some(seq))
}

/// Element `key`'s `part` is about to be written or removed; `old` gives the state it
/// replaces (`None`: there was none). Keeps that state in the version chain when the
/// element existed before this transaction and this transaction has not kept one yet.
pub fn record<T: GraphRead + HistoryWrite + ?Sized>(
    t: &mut T,
    space: SpaceId,
    key: u64,
    part: u8,
    old: impl FnOnce(&T) -> StoreResult<Option<Vec<u8>>>,
) -> StoreResult<()> {
    let Some(seq) = touch(t)? else {
        return Ok(());
    };
    if !t.txn_history().start.existed(key) {
        // Created by this transaction: no earlier state to keep.
        return Ok(());
    }
    if !t.txn_history().kept.insert((key, part)) {
        // Kept at this transaction's first change of it.
        return Ok(());
    }
    let bytes = old(t)?.unwrap_or_default();
    t.put_version(space, key, part, seq, &bytes)
}

/// Writes what a transaction's commit lists: its changed keys, then its record.
fn put_commit_with_changes<T: HistoryWrite + ?Sized>(
    t: &mut T,
    space: SpaceId,
    seq: u64,
    h: &TxnHistory,
    record: &[u8],
) -> StoreResult<()> {
    let keys = h.changed_keys();
    if !keys.is_empty() {
        t.put_changes(space, seq, &keys)?;
    }
    t.put_commit(space, seq, record)
}

/// Ends a write transaction that commits: stores its commit record when it changed
/// something under history (returned), and resets the state for the next one. Every
/// backend calls it from its commit path, before it makes the commit durable.
pub fn finish<T: GraphRead + HistoryWrite + ?Sized>(
    t: &mut T,
) -> StoreResult<Option<CommitRecord>> {
    let h = std::mem::take(t.txn_history());
    let Some(seq) = h.seq else {
        return Ok(None);
    };
    let rec = CommitRecord {
        seq,
        at_ms: h.at_ms,
        watermarks: t.id_watermarks()?,
    };
    put_commit_with_changes(t, SpaceId::DEFAULT, seq, &h, &rec.encode()?)?;
    Ok(Some(rec))
}

/// A logged commit record, applied on replay: stored as logged (its time is the
/// original one) with the changes the replayed transaction re-derived, ending its
/// history state.
pub fn apply_commit<T: GraphRead + HistoryWrite + ?Sized>(
    t: &mut T,
    space: SpaceId,
    seq: u64,
    record: &[u8],
) -> StoreResult<()> {
    CommitRecord::decode(record)?;
    let h = std::mem::take(t.txn_history());
    put_commit_with_changes(t, space, seq, &h, record)
}

/// Turns history on (idempotent): the state now is commit 0 of the default space,
/// and every later change is recorded. The engine calls it once the bootstrap of a new
/// or upgraded memory is written, so the bootstrap is the state history starts from.
pub fn start<T: GraphWrite + ?Sized>(t: &mut T) -> StoreResult<bool> {
    if t.meta(HISTORY_ON)?.is_some() {
        return Ok(false);
    }
    let rec = CommitRecord {
        seq: 0,
        at_ms: now_ms(),
        watermarks: t.id_watermarks()?,
    };
    t.put_commit(SpaceId::DEFAULT, 0, &rec.encode()?)?;
    t.set_meta(HISTORY_ON, &[1])?;
    *t.txn_history() = TxnHistory {
        recording: Some(false),
        ..TxnHistory::default()
    };
    Ok(true)
}

/// Whether history is recorded in this store.
pub fn is_on(g: &(impl GraphRead + ?Sized)) -> StoreResult<bool> {
    Ok(g.meta(HISTORY_ON)?.is_some())
}

/// Purges the version chain of `key` (every part): the bytes of its past states are
/// gone; its entries in the changes index stay (ids only: the chronology survives).
pub fn purge<T: GraphWrite + ?Sized>(t: &mut T, space: SpaceId, key: u64) -> StoreResult<()> {
    t.purge_versions(space, key)
}

/// Cuts the history of `space` below the last commit made at or before `before_ms`
/// (the horizon; the newest commit always stays), at most `max` changes in this
/// transaction. Returns the horizon's seq and how many changes went (`None`: nothing
/// to cut).
pub fn prune_before<T: GraphWrite + ?Sized>(
    t: &mut T,
    space: SpaceId,
    before_ms: u64,
    max: usize,
) -> StoreResult<Option<(u64, u64)>> {
    let Some(h) = commit_at_or_before(t, space, before_ms)? else {
        return Ok(None);
    };
    if h.seq == 0 {
        return Ok(None);
    }
    let n = t.prune_history(space, h.seq, max)?;
    Ok(Some((h.seq, n)))
}

/// The oldest commit of `space` still kept (history may start above 0 after a cut).
pub fn oldest(
    g: &(impl HistoryRead + ?Sized),
    space: SpaceId,
) -> StoreResult<Option<CommitRecord>> {
    let Some(newest) = last(g, space)? else {
        return Ok(None);
    };
    // Kept commits are contiguous up to the newest: the first present one.
    let (mut lo, mut hi) = (0u64, newest.seq);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if g.commit_record(space, mid)?.is_some() {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    commit(g, space, lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_keys_pack_and_unpack_exactly() {
        for keys in [
            vec![],
            vec![0],
            vec![1, 2, 3, 130, 16_384, 1 << 40, u64::MAX - 1, u64::MAX],
            (0..1000).map(|i| i * 4 + 1).collect::<Vec<_>>(),
        ] {
            let bytes = pack_keys(&keys);
            assert_eq!(unpack_keys(&bytes).unwrap(), keys);
        }
        // Close keys take a byte each.
        assert_eq!(pack_keys(&(10..110).collect::<Vec<_>>()).len(), 100);
    }

    #[test]
    fn a_malformed_key_list_is_corruption_not_a_panic() {
        assert!(unpack_keys(&[0x80]).is_err(), "unterminated");
        assert!(unpack_keys(&[0xff; 11]).is_err(), "too long");
    }
}
