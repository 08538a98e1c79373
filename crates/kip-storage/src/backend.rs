//! The storage backend trait: what the engine holds and calls, so that any backend
//! (redb, PostgreSQL, memory) serves the engine without touching it. What only a
//! backend with a log and files of its own does (checkpoints, log size, prewarming the
//! page cache, its in-memory index layer) is the extension trait [`LocalLog`], reached
//! through [`Backend::local_log`].
//!
//! A backend must guarantee (ARCHITECTURE.md, "What a backend must guarantee"):
//! atomicity per `write` call (all of it or nothing; an error or a `false` from the
//! closure leaves nothing behind), snapshot reads (a `read` sees one committed state,
//! and a write sees its own changes), uniqueness of a concept's `{type, name}` and of a
//! link's `(subject, predicate, object)` enforced by the store, durability before
//! `write` returns, write transactions that behave as if run one at a time, and ids
//! that are never reused. Opening (and the engine's bootstrap) is the backend's own
//! constructor: it is not part of the trait.

use crate::throttle::Throttle;
use crate::{GraphRead, GraphWrite, StoreError, StoreResult};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Which audit records an append keeps: the newest `newest` by sequence number (counted
/// after the append, in the numbering the log ends up with: a backend shared by several
/// processes may renumber what it appends) and none below `from` (a number already in
/// the log's numbering, e.g. the first record young enough to keep).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuditKeep {
    /// How many of the newest records to keep at most (`u64::MAX`: all).
    pub newest: u64,
    /// The lowest sequence number kept (0: no such bound).
    pub from: u64,
}

impl AuditKeep {
    /// The lowest sequence number kept when the log's newest record is `last`.
    pub fn cut(&self, last: u64) -> u64 {
        self.from
            .max(last.saturating_add(1).saturating_sub(self.newest))
    }
}

/// A store the engine reads and writes through [`GraphRead`] and [`GraphWrite`].
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Runs `f` on a consistent snapshot.
    fn read_with(&self, f: &mut dyn FnMut(&dyn GraphRead) -> StoreResult<()>) -> StoreResult<()>;

    /// Runs `f` in one write transaction: commits when it returns `Ok(true)` (durable
    /// when this returns), aborts when it returns `Ok(false)` or fails.
    fn write_with(
        &self,
        f: &mut dyn FnMut(&mut dyn GraphWrite) -> StoreResult<bool>,
    ) -> StoreResult<()>;

    /// Rebuilds the text index from the records, in one transaction.
    fn reindex(&self, progress: &mut dyn FnMut(u64, u64)) -> StoreResult<()>;

    /// The backend's own integrity check (its log, its files); the graph's invariants
    /// are checked by the engine over [`GraphRead`].
    fn check_storage(&self) -> StoreResult<Vec<String>>;

    /// The data directory, for a backend on local files.
    fn path(&self) -> Option<&Path>;

    /// The backend's log and files, for a backend that keeps them (`None`: nothing to
    /// checkpoint, prewarm or fold; every write is in the main storage when it commits).
    fn local_log(&self) -> Option<&dyn LocalLog> {
        None
    }

    /// Appends audit records (`seq -> bytes`, the engine's call log) and applies
    /// `keep` (drops the records it no longer keeps); durably when `durable`, else by
    /// the next checkpoint at the latest. The default keeps no audit log.
    fn audit_append(
        &self,
        _records: &[(u64, Vec<u8>)],
        _keep: AuditKeep,
        _durable: bool,
    ) -> StoreResult<()> {
        Err(StoreError::Other("this backend keeps no audit log".into()))
    }

    /// Replaces the bytes of the audit records among `records` that the log still
    /// holds (a record already dropped is not written again): how the engine drops the
    /// parameters of old records.
    fn audit_rewrite(&self, _records: &[(u64, Vec<u8>)]) -> StoreResult<()> {
        Err(StoreError::Other("this backend keeps no audit log".into()))
    }

    /// Audit records with `lo <= seq < hi`, ascending (descending when `rev`):
    /// `f(seq, bytes)` until it returns false.
    fn audit_range(
        &self,
        _lo: u64,
        _hi: u64,
        _rev: bool,
        _f: &mut dyn FnMut(u64, &[u8]) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        Ok(())
    }

    /// What the store takes, by table and by file (`kip storage stats`). The default
    /// says the backend does not measure itself.
    fn storage_usage(&self) -> StoreResult<crate::usage::StorageUsage> {
        Err(StoreError::Other(
            "this storage backend does not report its size".into(),
        ))
    }

    /// What kind of storage this is, for reports (`"embedded"`, `"postgresql"`).
    fn kind(&self) -> &'static str {
        "embedded"
    }

    /// Where the data lives, for reports and logs (never a password): the data
    /// directory, or the database.
    fn location(&self) -> String {
        match self.path() {
            Some(p) => p.display().to_string(),
            None => "in memory".into(),
        }
    }
}

/// What a backend with a log of its own and local files offers besides [`Backend`]:
/// the embedded redb store keeps a write-ahead log that checkpoints fold into the
/// database file, and an in-memory layer of index entries.
pub trait LocalLog: Send + Sync {
    /// Makes everything committed durable in the main storage and empties the log.
    fn checkpoint(&self) -> StoreResult<()>;

    /// Checkpoints when the log has waited long enough and no write is under way;
    /// returns whether it did.
    fn checkpoint_if_due(&self) -> StoreResult<bool>;

    /// How often an idle process should call [`LocalLog::checkpoint_if_due`] (`None`:
    /// the log is not kept at the moment, e.g. a store in memory).
    fn checkpoint_interval(&self) -> Option<Duration>;

    /// Bytes in the log not yet checkpointed.
    fn log_len(&self) -> u64;

    /// Checkpoints and then empties the log file entirely (not only its first header):
    /// after a purge, the records that carried the purged content must leave the file.
    fn erase_log(&self) -> StoreResult<()>;

    /// Reads the backend's files into the OS page cache (at most `max_bytes`); returns
    /// the bytes read.
    fn prewarm(&self, max_bytes: u64) -> std::io::Result<u64>;

    /// Index entries held in memory outside the main storage.
    fn overlay_entries(&self) -> usize;

    /// Tuning for tests: how old the log may get before a checkpoint.
    fn set_checkpoint_age(&self, age: Duration);

    /// Tuning for tests: index changes a transaction holds before folding them.
    fn set_max_txn_index_changes(&self, n: usize);
}

impl dyn Backend {
    /// [`Backend::read_with`] returning what `f` returns. `f` may fail with its own
    /// error type (the engine's `KipError`), which is returned unchanged; a storage
    /// failure is converted into it.
    pub fn read<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&dyn GraphRead) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut f = Some(f);
        let mut out = None;
        self.read_with(&mut |r| {
            if let Some(f) = f.take() {
                out = Some(f(r));
            }
            Ok(())
        })?;
        out.unwrap_or_else(|| {
            Err(StoreError::Other("the storage backend did not run the read".into()).into())
        })
    }

    /// [`Backend::write_with`] returning what `f` returns: commits on `Ok` unless
    /// `dry_run`, aborts on an error (returned unchanged, as for `read`).
    pub fn write<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&mut dyn GraphWrite) -> Result<T, E>,
        dry_run: bool,
    ) -> Result<T, E> {
        self.write_keep(|w| f(w).map(|v| (v, !dry_run)))
    }

    /// [`Backend::write_with`] where `f` decides: `(value, true)` commits,
    /// `(value, false)` aborts; an error aborts and is returned unchanged.
    pub fn write_keep<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&mut dyn GraphWrite) -> Result<(T, bool), E>,
    ) -> Result<T, E> {
        let mut f = Some(f);
        let mut out = None;
        self.write_with(&mut |w| {
            let Some(f) = f.take() else { return Ok(false) };
            match f(w) {
                Ok((v, keep)) => {
                    out = Some(Ok(v));
                    Ok(keep)
                }
                Err(e) => {
                    out = Some(Err(e));
                    Ok(false)
                }
            }
        })?;
        out.unwrap_or_else(|| {
            Err(StoreError::Other("the storage backend did not run the write".into()).into())
        })
    }
}

/// Starts a thread that checkpoints an idle backend's log within its checkpoint age:
/// commits check the age only when they run, so without it a server that stopped
/// writing would keep its log (and a crash would replay it). The thread holds a weak
/// reference and ends once the backend is dropped; none is started for a backend
/// without a log.
pub fn start_idle_checkpoints(backend: &Arc<dyn Backend>) -> std::io::Result<()> {
    if backend
        .local_log()
        .and_then(|l| l.checkpoint_interval())
        .is_none()
    {
        return Ok(());
    }
    let weak = Arc::downgrade(backend);
    std::thread::Builder::new()
        .name("kip-checkpoint".into())
        .spawn(move || loop {
            let step = match weak.upgrade() {
                None => return,
                Some(backend) => {
                    let Some(log) = backend.local_log() else {
                        return;
                    };
                    if let Err(e) = log.checkpoint_if_due() {
                        static WARN: Throttle = Throttle::new(Duration::from_secs(30));
                        if let Some(suppressed) = WARN.allow() {
                            tracing::warn!(
                                suppressed,
                                "idle checkpoint failed ({e}); the write-ahead log keeps every write and the checkpoint is retried"
                            );
                        }
                    }
                    match log.checkpoint_interval() {
                        Some(i) => i,
                        None => return,
                    }
                }
            };
            std::thread::sleep(step);
        })
        .map(|_| ())
}
