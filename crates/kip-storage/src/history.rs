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
//!   per transaction, not one per change: 1.7 bytes per change on redb instead of a
//!   20-byte entry, one statement per commit on PostgreSQL instead of a round trip per
//!   change; docs/performance.md "History"). Creations write no chain entry: the
//!   watermarks of a commit say which ids existed.
//! - A kept state is stored as a reverse delta when that is smaller: the bytes that
//!   differ from the state that replaced it (common prefix and suffix cut, a hash of
//!   the whole to check the splice), except for about one version in
//!   [`WHOLE_EVERY`], stored whole (chosen by a hash of key and seq, so a log replay
//!   makes the same choice), which bounds the walk a read makes (expected at most
//!   [`WHOLE_EVERY`] entries). [`state_after`] reads a state back whole; only it and
//!   the backends see the stored form. (A benchmark `Document` changed in two fields
//!   keeps ~70 bytes instead of ~230.) **Invariant**: the newest delta of a chain is
//!   spliced onto the element's current state re-encoded ([`crate::encode`] of the
//!   record read back), so that encoding must give back the bytes it wrote, and every
//!   change of a row or record goes through [`record`] (the upkeep driver). A change
//!   of the records' encoding (a storage format change) must first rewrite each
//!   chain's newest version whole; a mismatch is detected (the delta's check) and
//!   reported as corruption, never read as a wrong past.
//! - What a read `AS OF SEQ k` sees is computed from those by [`crate::asof::AsOf`].
//!
//! Backends store the entries ([`HistoryRead`] / [`HistoryWrite`] primitives); the
//! upkeep driver ([`crate::upkeep`]) calls [`record`] for every row or record it puts or
//! deletes, from inside the backend's write primitives, so a backend that replays a log
//! re-derives the chain like any index. Only the commit record carries something a
//! replay cannot recompute (its time): backends with a log log [`HistoryWrite::put_commit`]
//! and apply it on replay with [`apply_commit`].
//!
//! Why one file of about 840 lines (a sixth of them tests): the chain's stored form
//! (reverse deltas, packed key lists) and the driver that writes and reads it are one
//! rule a replay must reproduce byte for byte; splitting the encoding out (a
//! `history/delta.rs`) is the next step when it grows.

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
        put_varint(&mut out, k.wrapping_sub(prev));
        prev = k;
    }
    out
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A varint at the start of `b`: (value, bytes read).
fn get_varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i as u32);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// The first byte of a version stored as a reverse delta. A whole state never starts
/// with it: states are MessagePack maps, and MessagePack leaves 0xc1 unused.
const DELTA: u8 = 0xc1;

/// About one kept version in this many is stored whole (see the module's docs).
pub const WHOLE_EVERY: u64 = 8;

fn whole_here(key: u64, part: u8, valid_to: u64) -> bool {
    // splitmix64's finalizer over the coordinates.
    let mut z = key ^ valid_to.rotate_left(29) ^ (u64::from(part) << 59);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    z.is_multiple_of(WHOLE_EVERY)
}

/// FNV-1a: checks that a delta was spliced onto the state it was made against.
fn fnv32(b: &[u8]) -> u32 {
    b.iter().fold(0x811c_9dc5u32, |h, x| {
        (h ^ u32::from(*x)).wrapping_mul(0x0100_0193)
    })
}

/// How `old` (the state kept for `(key, part)` until `valid_to`) is stored, given the
/// state `new` that replaced it (`None`: removed, or not known).
fn stored_version(key: u64, part: u8, valid_to: u64, old: &[u8], new: Option<&[u8]>) -> Vec<u8> {
    let Some(new) = new else {
        return old.to_vec();
    };
    if old.is_empty() || whole_here(key, part, valid_to) {
        return old.to_vec();
    }
    let prefix = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let room = old.len().min(new.len()) - prefix;
    let suffix = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    let middle = &old[prefix..old.len() - suffix];
    let mut out = Vec::with_capacity(middle.len() + 12);
    out.push(DELTA);
    out.extend_from_slice(&fnv32(old).to_le_bytes());
    put_varint(&mut out, prefix as u64);
    put_varint(&mut out, suffix as u64);
    out.extend_from_slice(middle);
    if out.len() >= old.len() {
        return old.to_vec();
    }
    out
}

fn is_delta(stored: &[u8]) -> bool {
    stored.first() == Some(&DELTA)
}

/// The state a delta stands for, spliced onto `newer` (the state that replaced it).
fn splice(delta: &[u8], newer: &[u8]) -> StoreResult<Vec<u8>> {
    let bad = |what: &str| crate::StoreError::Corruption(format!("history: {what}"));
    let hash = delta
        .get(1..5)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| bad("a version delta without its header"))?;
    let rest = &delta[5..];
    let (prefix, a) = get_varint(rest).ok_or_else(|| bad("a version delta without its header"))?;
    let (suffix, b) =
        get_varint(&rest[a..]).ok_or_else(|| bad("a version delta without its header"))?;
    let middle = &rest[a + b..];
    let (prefix, suffix) = (usize::try_from(prefix), usize::try_from(suffix));
    let (Ok(prefix), Ok(suffix)) = (prefix, suffix) else {
        return Err(bad("a version delta longer than its state"));
    };
    if prefix.checked_add(suffix).is_none_or(|n| n > newer.len()) {
        return Err(bad("a version delta longer than the state after it"));
    }
    let mut old = Vec::with_capacity(prefix + middle.len() + suffix);
    old.extend_from_slice(&newer[..prefix]);
    old.extend_from_slice(middle);
    old.extend_from_slice(&newer[newer.len() - suffix..]);
    if fnv32(&old) != hash {
        return Err(bad(
            "a version delta does not fit the state after it (its check failed)",
        ));
    }
    Ok(old)
}

/// The current state of `(key, part)` as stored bytes (`None`: absent).
fn current_state(
    g: &(impl GraphRead + ?Sized),
    space: SpaceId,
    key: u64,
    part: u8,
) -> StoreResult<Option<Vec<u8>>> {
    let Some(id) = ElementId::decode(key) else {
        return Ok(None);
    };
    if part == PART_RECORD {
        return g.element(space, id)?.map(|r| r.encode()).transpose();
    }
    match id.kind {
        ElementKind::Concept => g.concept(id.n)?.map(|c| encode(&c)).transpose(),
        ElementKind::Proposition => g.prop(id.n)?.map(|p| encode(&p)).transpose(),
        _ => Ok(None),
    }
}

/// The first version chain entry of `(key, part)` with `valid_to > seq`, whole:
/// `(valid_to, state)` (empty: absent). Walks a delta up the chain to a whole state
/// or to the current one.
pub fn state_after(
    g: &(impl GraphRead + ?Sized),
    space: SpaceId,
    key: u64,
    part: u8,
    seq: u64,
) -> StoreResult<Option<(u64, Vec<u8>)>> {
    let Some((to, first)) = g.version_after(space, key, part, seq)? else {
        return Ok(None);
    };
    if !is_delta(&first) {
        return Ok(Some((to, first)));
    }
    let mut deltas = vec![first];
    let mut at = to;
    let mut state = loop {
        match g.version_after(space, key, part, at)? {
            Some((next, b)) if is_delta(&b) => {
                deltas.push(b);
                at = next;
            }
            Some((_, b)) if !b.is_empty() => break b,
            Some(_) => {
                return Err(crate::StoreError::Corruption(
                    "history: a version delta followed by an absent state".into(),
                ))
            }
            None => {
                break current_state(g, space, key, part)?.ok_or_else(|| {
                    crate::StoreError::Corruption(
                        "history: a version delta of an element that is gone".into(),
                    )
                })?
            }
        }
    };
    for d in deltas.iter().rev() {
        state = splice(d, &state)?;
    }
    Ok(Some((to, state)))
}

/// Every kept state of `(key, part)`, whole, oldest first: `(valid_to, state)`
/// (empty: absent). One pass down the chain (for reads of the whole past, such as a
/// purge's scrub).
pub fn past_states(
    g: &(impl GraphRead + ?Sized),
    space: SpaceId,
    key: u64,
    part: u8,
) -> StoreResult<Vec<(u64, Vec<u8>)>> {
    let mut stored = Vec::new();
    let mut at = 0u64;
    while let Some((to, b)) = g.version_after(space, key, part, at)? {
        stored.push((to, b));
        at = to;
    }
    let mut newer: Option<Vec<u8>> = None;
    for i in (0..stored.len()).rev() {
        if is_delta(&stored[i].1) {
            let base = match newer.take() {
                Some(n) => n,
                None => current_state(g, space, key, part)?.ok_or_else(|| {
                    crate::StoreError::Corruption(
                        "history: a version delta of an element that is gone".into(),
                    )
                })?,
            };
            stored[i].1 = splice(&stored[i].1, &base)?;
        }
        newer = Some(stored[i].1.clone());
    }
    Ok(stored)
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
/// replaces (`None`: there was none), `new` the state it becomes (`None`: removed).
/// Keeps the state the element had before this transaction in the version chain when
/// the element existed then; a later change in the same transaction re-bases a delta
/// kept at the first one on the newest state.
pub fn record<T: GraphRead + HistoryWrite + ?Sized>(
    t: &mut T,
    space: SpaceId,
    key: u64,
    part: u8,
    old: impl FnOnce(&T) -> StoreResult<Option<Vec<u8>>>,
    new: impl FnOnce() -> StoreResult<Option<Vec<u8>>>,
) -> StoreResult<()> {
    let Some(seq) = touch(t)? else {
        return Ok(());
    };
    if !t.txn_history().start.existed(key) {
        // Created by this transaction: no earlier state to keep.
        return Ok(());
    }
    if !t.txn_history().kept.insert((key, part)) {
        // Kept at this transaction's first change of it. A delta was made against the
        // state this change replaces: make it again against the new one.
        let Some((to, stored)) = t.version_after(space, key, part, seq - 1)? else {
            return Ok(());
        };
        if to != seq || !is_delta(&stored) {
            return Ok(());
        }
        let base = old(t)?.unwrap_or_default();
        let before = splice(&stored, &base)?;
        let v = stored_version(key, part, seq, &before, new()?.as_deref());
        return t.put_version(space, key, part, seq, &v);
    }
    let bytes = old(t)?.unwrap_or_default();
    let v = stored_version(key, part, seq, &bytes, new()?.as_deref());
    t.put_version(space, key, part, seq, &v)
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

    /// A `(key, seq)` stored as a delta (not picked for a whole state).
    fn delta_coordinates() -> (u64, u64) {
        (1..)
            .map(|seq| (7u64, seq))
            .find(|(k, s)| !whole_here(*k, PART_ROW, *s))
            .unwrap()
    }

    #[test]
    fn a_kept_state_is_a_reverse_delta_that_splices_back_exactly() {
        let (key, seq) = delta_coordinates();
        let old = br#"{"t":"Doc","n":"busy","a":{"description":"long text here","rank":1}}"#;
        let new = br#"{"t":"Doc","n":"busy","a":{"description":"long text here","rank":22}}"#;
        let v = stored_version(key, PART_ROW, seq, old, Some(new));
        assert!(is_delta(&v));
        assert!(v.len() < 16, "{} bytes for a one-byte change", v.len());
        assert_eq!(splice(&v, new).unwrap(), old.to_vec());
        // Against another state the check fails: corruption, not a wrong state.
        assert!(splice(
            &v,
            br#"{"t":"Doc","n":"busy","a":{"description":"other text here","rank":22}}"#
        )
        .is_err());
        // Removed, absent, or not smaller: whole.
        assert_eq!(stored_version(key, PART_ROW, seq, old, None), old.to_vec());
        assert_eq!(
            stored_version(key, PART_ROW, seq, b"", Some(new)),
            Vec::<u8>::new()
        );
        assert_eq!(
            stored_version(key, PART_ROW, seq, b"\x81\x01\x02", Some(b"\x90")),
            b"\x81\x01\x02".to_vec()
        );
    }

    #[test]
    fn about_one_kept_state_in_whole_every_is_whole() {
        let whole = (0..80_000u64)
            .filter(|s| whole_here(s * 31 + 5, PART_ROW, *s))
            .count();
        let share = whole as f64 / 80_000.0;
        assert!((share - 1.0 / WHOLE_EVERY as f64).abs() < 0.01, "{share}");
    }

    proptest::proptest! {
        #[test]
        fn any_delta_splices_back_or_is_whole(
            old in proptest::collection::vec(0u8..4, 0..200),
            new in proptest::collection::vec(0u8..4, 0..200),
            seq in 0u64..1000,
        ) {
            let mut old = old;
            if let Some(b) = old.first_mut() { *b = 0x80; }
            let v = stored_version(3, PART_RECORD, seq, &old, Some(&new));
            if is_delta(&v) {
                proptest::prop_assert!(v.len() < old.len());
                proptest::prop_assert_eq!(splice(&v, &new).unwrap(), old);
            } else {
                proptest::prop_assert_eq!(v, old);
            }
        }

        #[test]
        fn a_damaged_delta_is_an_error_not_a_panic(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
            newer in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
        ) {
            let mut d = bytes;
            d.insert(0, DELTA);
            let _ = splice(&d, &newer);
        }
    }

    #[test]
    fn a_malformed_key_list_is_corruption_not_a_panic() {
        assert!(unpack_keys(&[0x80]).is_err(), "unterminated");
        assert!(unpack_keys(&[0xff; 11]).is_err(), "too long");
    }
}
