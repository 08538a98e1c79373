//! The redb backend: one data directory holding the database file (`nexus.redb`) and
//! its write-ahead log (`nexus.wal`), opened by one process at a time.
//!
//! [`Store`] is what the engine holds: it opens (creating, migrating and replaying),
//! runs read snapshots and write transactions over [`ReadTables`]/[`WriteTables`], and
//! owns the commit protocol and checkpoints.
//!
//! Durability: nothing is acknowledged before it is on disk. A write's operation log is
//! appended to the write-ahead log and synced, then the redb transaction is committed in
//! memory; checkpoints (redb durable commits) empty the log. A write too large for the
//! log commits durably in redb directly. A crash or kill at any point loses no
//! acknowledged write and never exposes part of one: on open, the log records after the
//! last checkpoint are applied again (see [`crate::wal`]).
//!
//! Secondary-index writes wait in an in-memory overlay ([`Overlay`]) that every read
//! merges in; each checkpoint folds it into the tables within its durable commit, so the
//! log never holds less than the overlay does. Each commit records the overlay version
//! in its snapshot, so a reader merges in exactly what it may see.

use crate::throttle::Throttle;
use crate::wal::Wal;
use crate::{
    meta_u64, storage_error, Finished, GraphWrite, Overlay, ReadTables, Sealed, StoreError,
    StoreResult, WriteTables, FORMAT_VERSION, WAL_SEQ,
};
use redb::{Database, Durability, ReadableDatabase, WriteTransaction};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The database file inside the data directory.
pub const DB_FILE: &str = "nexus.redb";
/// The write-ahead log inside the data directory.
pub const WAL_FILE: &str = "nexus.wal";
/// Meta key: the storage format version.
pub const FORMAT_KEY: &str = "format_version";
pub use kip_storage::TEXT_INDEX_KEY;
/// redb page cache: grows with use up to this size (reads and dirty write pages).
const CACHE_BYTES: usize = 768 * 1024 * 1024;
/// A checkpoint runs once the write-ahead log holds this much (bounds replay time after
/// a crash and the dirty pages redb holds between durable commits)...
const CHECKPOINT_BYTES: u64 = 64 << 20;
/// ... or once its oldest record is this old (a server that writes a little at a time
/// keeps a short log, so a restart after a crash replays little).
const CHECKPOINT_AGE: std::time::Duration = std::time::Duration::from_secs(30);
/// ... or once the overlay holds this many index entries not yet folded into the redb
/// tables (about 60 bytes each in the sorted runs, so up to about 130 MiB during a bulk
/// load, plus the copy a merge of the largest runs makes).
/// Fewer, larger folds cost less per entry (more new keys share each leaf and each
/// durable commit): 2M instead of 512k loaded 1M concepts 1.10-1.18x faster, at the price
/// of a longer pause (0.6-1.7 s at 1M) for the write that triggers the checkpoint.
const OVERLAY_LIMIT: usize = 1 << 21;

/// An open store: the database, its write-ahead log and the index overlay.
pub struct Store {
    db: Database,
    path: Option<PathBuf>,
    /// The write-ahead log (none in memory). Lock order: redb's write transaction first,
    /// then this.
    wal: Option<Mutex<Wal>>,
    /// Committed secondary-index writes not yet folded into the tables.
    overlay: Arc<Overlay>,
    /// Held by a write transaction from its start to the end of its commit, including
    /// the overlay's bookkeeping after the redb commit: without it, the next writer
    /// could start between the two and see the overlay (and the writers' key cache) as
    /// they were before the commit. redb's own write lock ends with the redb commit.
    /// Lock order: this, then redb's write transaction, then the write-ahead log.
    gate: Mutex<()>,
    /// How old the log's oldest record may get before a checkpoint (milliseconds):
    /// [`CHECKPOINT_AGE`] unless a test sets it.
    checkpoint_age_ms: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}
mod open;
mod usage;

pub use open::{InitFn, OpenError, OpenMode};

impl Store {
    /// Reads the database file once, sequentially, so the kernel's page cache holds it
    /// and the first queries after a start do not each wait for the disk (at 1M concepts
    /// a point lookup on a cold cache took 130 us, on a warm one 15-20 us). Reads at most
    /// `max_bytes`; returns the bytes read. Uses no memory of the process beyond a 1 MiB
    /// buffer (the page cache is the kernel's to reclaim). `kip serve` runs it in the
    /// background at start. (`posix_fadvise(WILLNEED)` was tried first: on the project's
    /// VM kernel it read nothing.)
    pub fn prewarm(&self, max_bytes: u64) -> std::io::Result<u64> {
        use std::io::Read;
        let Some(dir) = &self.path else { return Ok(0) };
        let mut f = std::fs::File::open(dir.join(DB_FILE))?.take(max_bytes);
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            match f.read(&mut buf) {
                Ok(0) => return Ok(total),
                Ok(n) => total += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Bytes of write-ahead log written since the last checkpoint (0 in memory).
    pub fn wal_len(&self) -> u64 {
        self.wal.as_ref().map(|w| lock(w).len()).unwrap_or(0)
    }

    /// The data directory, for an on-disk nexus.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Runs `f` in a write transaction: commits on `Ok` (unless `dry_run`), aborts on
    /// `Err`, so a failed statement leaves nothing behind. Durable on return.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&mut WriteTables<'_>) -> StoreResult<T>,
        dry_run: bool,
    ) -> StoreResult<T> {
        self.write_with(|w| f(w).map(|v| (v, !dry_run)))
    }

    /// Runs `f` in a write transaction; commits when it returns `(value, true)` (durable
    /// on return), aborts when it returns `(value, false)` or fails.
    pub fn write_with<T>(
        &self,
        f: impl FnOnce(&mut WriteTables<'_>) -> StoreResult<(T, bool)>,
    ) -> StoreResult<T> {
        let _gate = lock(&self.gate);
        let txn = self.db.begin_write().map_err(storage_error)?;
        let out = {
            let mut w = WriteTables::open(&txn, &self.overlay)?;
            f(&mut w)
                .and_then(|(v, keep)| Ok((v, keep, if keep { Some(w.finish()?) } else { None })))
        };
        match out {
            Ok((v, true, Some(finished))) => {
                self.commit(txn, finished)?;
                Ok(v)
            }
            Ok((v, _, _)) => {
                txn.abort().map_err(storage_error)?;
                Ok(v)
            }
            Err(e) => {
                txn.abort().map_err(storage_error)?;
                Err(e)
            }
        }
    }

    /// Appends audit records (`seq -> bytes`) and drops those below `drop_below`, in one
    /// transaction, durable (a checkpoint) when `durable`, else durable at the next
    /// checkpoint.
    pub fn audit_append(
        &self,
        records: &[(u64, Vec<u8>)],
        drop_below: u64,
        durable: bool,
    ) -> StoreResult<()> {
        self.write_with(|w| {
            w.audit_append(records, drop_below, durable)?;
            Ok(((), true))
        })
    }

    /// Audit records with `lo <= seq < hi`, ascending (descending when `rev`):
    /// `f(seq, bytes)` until it returns false.
    pub fn audit_range(
        &self,
        lo: u64,
        hi: u64,
        rev: bool,
        f: &mut dyn FnMut(u64, &[u8]) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        if lo >= hi {
            return Ok(());
        }
        let txn = self.db.begin_read().map_err(storage_error)?;
        let table = match txn.open_table(crate::tables::AUDIT) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
            Err(e) => return Err(storage_error(e)),
        };
        let range = table.range(lo..hi).map_err(storage_error)?;
        let items: Box<dyn Iterator<Item = _>> = if rev {
            Box::new(range.rev())
        } else {
            Box::new(range)
        };
        for item in items {
            let (k, v) = item.map_err(storage_error)?;
            if !f(k.value(), v.value())? {
                break;
            }
        }
        Ok(())
    }

    /// Rebuilds the text index and the attribute value index from the graph in one
    /// transaction; `progress(done, total)` (each index counts its own pass).
    pub fn reindex(&self, progress: &mut dyn FnMut(u64, u64)) -> StoreResult<()> {
        self.write(
            |w| {
                w.rebuild_text_index(progress)?;
                GraphWrite::set_meta(
                    w,
                    TEXT_INDEX_KEY,
                    &crate::text::TEXT_INDEX_VERSION.to_le_bytes(),
                )?;
                w.rebuild_attr_index(progress)?;
                GraphWrite::set_meta(
                    w,
                    crate::attrs::ATTR_INDEX_KEY,
                    &crate::attrs::ATTR_INDEX_VERSION.to_le_bytes(),
                )
            },
            false,
        )
    }

    /// Commits a write transaction durably: through the write-ahead log when the
    /// transaction sealed a log record, else with a redb durable commit (which is also a
    /// checkpoint: it persists every earlier commit, so the log is emptied). The
    /// transaction's index changes are published into the overlay with the commit.
    fn commit(&self, txn: WriteTransaction, finished: Finished) -> StoreResult<()> {
        let Finished {
            sealed,
            changes,
            version,
            folded,
        } = finished;
        let published = changes.len();
        let publish = |changes| version.and_then(|v| self.overlay.publish(changes, v));
        let Some(wal) = &self.wal else {
            // In memory: nothing to make durable.
            let ver = publish(changes);
            self.overlay.commit(ver, published, folded, || {
                txn.commit().map_err(storage_error)
            })?;
            if self.overlay.unfolded() >= OVERLAY_LIMIT {
                if let Err(e) = self.checkpoint_gated() {
                    static WARN: Throttle = Throttle::new(std::time::Duration::from_secs(30));
                    if let Some(suppressed) = WARN.allow() {
                        tracing::warn!(
                            suppressed,
                            "folding the overlay failed ({e}); retried later"
                        );
                    }
                }
            }
            return Ok(());
        };
        let non_durable = move |mut txn: WriteTransaction| {
            txn.set_durability(Durability::None)
                .map_err(storage_error)?;
            txn.commit().map_err(storage_error)
        };
        match sealed {
            Sealed::Nothing => {
                let ver = publish(changes);
                self.overlay
                    .commit(ver, published, folded, || non_durable(txn))
            }
            Sealed::Durable => {
                let mut wal = lock(wal);
                let ver = publish(changes);
                self.overlay.commit(ver, published, folded, || {
                    txn.commit().map_err(storage_error)
                })?;
                // Committed and durable: a log that cannot be emptied now only holds
                // records the next open skips, so this is not the write's failure.
                if let Err(e) = wal.reset() {
                    tracing::warn!("cannot empty the write-ahead log: {e}");
                }
                Ok(())
            }
            Sealed::Record { seq, payload } => {
                let mut log = lock(wal);
                let start = log.len();
                if let Err(e) = log.append(seq, &payload) {
                    drop(log);
                    let _ = txn.abort();
                    return Err(e);
                }
                let ver = publish(changes);
                let committed = self
                    .overlay
                    .commit(ver, published, folded, || non_durable(txn));
                if let Err(e) = committed {
                    // The record must not outlive a transaction that did not commit.
                    log.cut_back(start).map_err(|t| {
                        StoreError::Other(format!(
                            "commit failed ({e}) and the write-ahead log could not be cut back ({t}): restart kip-nexus"
                        ))
                    })?;
                    return Err(e);
                }
                let full = log.len() >= CHECKPOINT_BYTES
                    || log.age().is_some_and(|a| a >= self.checkpoint_age())
                    || self.overlay.unfolded() >= OVERLAY_LIMIT;
                drop(log);
                // The write is durable (logged) and committed whatever the checkpoint does.
                if full {
                    if let Err(e) = self.checkpoint_gated() {
                        static WARN: Throttle = Throttle::new(std::time::Duration::from_secs(30));
                        if let Some(suppressed) = WARN.allow() {
                            tracing::warn!(
                                suppressed,
                                "checkpoint failed ({e}); the write itself is committed and in the write-ahead log. If the database file could not be written, further writes are refused until kip-nexus restarts (the log is replayed then); otherwise the checkpoint is retried at later writes (repeats of this warning are counted, logged at most every 30 s)"
                            );
                        }
                    }
                }
                Ok(())
            }
        }
    }

    fn checkpoint_age(&self) -> std::time::Duration {
        std::time::Duration::from_millis(
            self.checkpoint_age_ms
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// Sets how old the log's oldest record may get before a checkpoint (default 30 s).
    /// For tests.
    #[doc(hidden)]
    pub fn set_checkpoint_age(&self, age: std::time::Duration) {
        self.checkpoint_age_ms.store(
            u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Checkpoints when the log's oldest record is older than the checkpoint age and no
    /// write is under way (a writer checks the age itself when it commits). Returns
    /// whether a checkpoint ran.
    pub fn checkpoint_if_due(&self) -> StoreResult<bool> {
        let Some(wal) = &self.wal else {
            return Ok(false);
        };
        let Ok(_gate) = self.gate.try_lock() else {
            return Ok(false); // a writer holds it, and checks the age at its commit
        };
        let due = lock(wal).age().is_some_and(|a| a >= self.checkpoint_age());
        if !due {
            return Ok(false);
        }
        self.checkpoint_gated().map(|()| true)
    }

    /// Makes every commit durable in the database file (folding the overlay into the
    /// tables in the same commit) and empties the write-ahead log.
    pub fn checkpoint(&self) -> StoreResult<()> {
        let _gate = lock(&self.gate);
        self.checkpoint_gated()
    }

    /// [`Store::checkpoint`] for a caller holding the write gate.
    fn checkpoint_gated(&self) -> StoreResult<()> {
        let txn = self.db.begin_write().map_err(storage_error)?;
        let mut wal = self.wal.as_ref().map(lock);
        if wal.as_ref().is_none_or(|w| w.is_empty()) && self.overlay.unfolded() == 0 {
            drop(wal);
            return txn.abort().map_err(storage_error);
        }
        let started = std::time::Instant::now();
        let unfolded = self.overlay.unfolded();
        let folded = {
            let mut w = WriteTables::open(&txn, &self.overlay)?;
            w.fold_all()?
        };
        let fold_time = started.elapsed();
        self.overlay
            .commit(None, 0, folded, || txn.commit().map_err(storage_error))?;
        tracing::debug!(
            "checkpoint: folded {unfolded} index entries in {fold_time:?}, committed in {:?}",
            started.elapsed() - fold_time
        );
        match wal.as_mut() {
            Some(wal) => wal.reset(),
            None => Ok(()),
        }
    }

    /// Checkpoints, then empties the write-ahead log file entirely (a checkpoint only
    /// zeroes its first header, so older records stay in the file until overwritten):
    /// after a purge, the records that carried the purged content leave the file.
    pub fn erase_log(&self) -> StoreResult<()> {
        let _gate = lock(&self.gate);
        self.checkpoint_gated()?;
        match &self.wal {
            Some(wal) => lock(wal).wipe(),
            None => Ok(()),
        }
    }

    /// Makes a write transaction fold its index changes into the tables once it holds
    /// `n` of them (default 524,288). For tests, which use a small value to exercise
    /// folds inside transactions.
    #[doc(hidden)]
    pub fn set_max_txn_index_changes(&self, n: usize) {
        self.overlay.set_max_txn_changes(n);
    }

    /// Index entries held in the in-memory overlay (not yet folded into the tables, or
    /// folded but still needed by an older reader).
    pub fn overlay_entries(&self) -> usize {
        self.overlay.entries()
    }

    /// The write-ahead log on disk against what this store has written to it: every
    /// record since the last checkpoint must read back whole, and no damaged record
    /// may hide newer ones.
    pub fn check_log(&self) -> StoreResult<Vec<String>> {
        let Some(wal) = &self.wal else {
            return Ok(Vec::new());
        };
        // The gate keeps writers (and checkpoints) out while the file is read.
        let _gate = lock(&self.gate);
        let mut wal = lock(wal);
        let written = wal.len();
        let (records, damage) = wal.read_back()?;
        drop(wal);
        let mut problems = Vec::new();
        if damage.offset < written {
            problems.push(format!(
                "write-ahead log: the record at byte {} does not read back ({} records readable, {written} bytes written since the last checkpoint)",
                damage.offset,
                records.len()
            ));
        }
        let last = records.last().map_or(0, |r| r.seq);
        if let Some(newest) = damage
            .newest()
            .filter(|n| *n > last && damage.offset < written)
        {
            problems.push(format!(
                "write-ahead log: valid records up to number {newest} lie after the damage"
            ));
        }
        Ok(problems)
    }

    /// Runs `f` on a consistent read snapshot.
    pub fn read<T>(&self, f: impl FnOnce(&ReadTables) -> StoreResult<T>) -> StoreResult<T> {
        // The token first, then the snapshot (see `store/overlay.rs`).
        let token = self.overlay.reader_token();
        let txn = self.db.begin_read().map_err(storage_error)?;
        let r = ReadTables::open(&txn, self.overlay.clone(), token)?;
        f(&r)
    }
}

impl Drop for Store {
    /// A clean close leaves an empty write-ahead log (nothing to replay on the next open).
    fn drop(&mut self) {
        if let Err(e) = self.checkpoint() {
            tracing::warn!(
                "checkpoint on close failed ({e}); the write-ahead log is replayed on the next open"
            );
        }
    }
}

/// Locks a mutex, also after a panic in another holder (the guarded state stays valid:
/// the log is cut back on every failed append).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl crate::backend::Backend for Store {
    fn read_with(
        &self,
        f: &mut dyn FnMut(&dyn crate::GraphRead) -> StoreResult<()>,
    ) -> StoreResult<()> {
        self.read(|r| f(r))
    }

    fn write_with(
        &self,
        f: &mut dyn FnMut(&mut dyn GraphWrite) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        Store::write_with(self, |w| f(w).map(|keep| ((), keep)))
    }

    fn audit_append(
        &self,
        records: &[(u64, Vec<u8>)],
        keep: crate::backend::AuditKeep,
        durable: bool,
    ) -> StoreResult<()> {
        // One process writes this log: the records keep their numbers.
        let last = records.last().map_or(0, |r| r.0);
        Store::audit_append(self, records, keep.cut(last), durable)
    }

    fn audit_rewrite(&self, records: &[(u64, Vec<u8>)]) -> StoreResult<()> {
        self.write_with(|w| {
            w.audit_rewrite(records)?;
            Ok(((), true))
        })
    }

    fn audit_range(
        &self,
        lo: u64,
        hi: u64,
        rev: bool,
        f: &mut dyn FnMut(u64, &[u8]) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        Store::audit_range(self, lo, hi, rev, f)
    }

    fn reindex(&self, progress: &mut dyn FnMut(u64, u64)) -> StoreResult<()> {
        Store::reindex(self, progress)
    }

    fn check_storage(&self) -> StoreResult<Vec<String>> {
        self.check_log()
    }

    fn path(&self) -> Option<&Path> {
        Store::path(self)
    }

    fn storage_usage(&self) -> StoreResult<kip_storage::usage::StorageUsage> {
        Store::storage_usage(self)
    }

    fn local_log(&self) -> Option<&dyn crate::backend::LocalLog> {
        Some(self)
    }
}

impl crate::backend::LocalLog for Store {
    fn checkpoint(&self) -> StoreResult<()> {
        Store::checkpoint(self)
    }

    fn checkpoint_if_due(&self) -> StoreResult<bool> {
        Store::checkpoint_if_due(self)
    }

    fn checkpoint_interval(&self) -> Option<std::time::Duration> {
        self.wal.as_ref().map(|_| {
            (self.checkpoint_age() / 4).clamp(
                std::time::Duration::from_millis(10),
                std::time::Duration::from_secs(5),
            )
        })
    }

    fn log_len(&self) -> u64 {
        self.wal_len()
    }

    fn erase_log(&self) -> StoreResult<()> {
        Store::erase_log(self)
    }

    fn prewarm(&self, max_bytes: u64) -> std::io::Result<u64> {
        Store::prewarm(self, max_bytes)
    }

    fn overlay_entries(&self) -> usize {
        Store::overlay_entries(self)
    }

    fn set_checkpoint_age(&self, age: std::time::Duration) {
        Store::set_checkpoint_age(self, age);
    }

    fn set_max_txn_index_changes(&self, n: usize) {
        Store::set_max_txn_index_changes(self, n);
    }
}
