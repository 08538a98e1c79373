//! The Cognitive Nexus: a data directory holding one redb database and its write-ahead
//! log, opened once per process, executing KIP commands with one write transaction per
//! KML statement (concurrent statements are combined into one transaction).
//!
//! Durability: nothing is acknowledged before it is on disk. A write's operation log is
//! appended to the write-ahead log (`nexus.wal`) and synced, then the redb transaction is
//! committed in memory; checkpoints (redb durable commits) empty the log. A write too
//! large for the log commits durably in redb directly. A crash or kill at any point loses
//! no acknowledged write and never exposes part of one: on open, the log records after
//! the last checkpoint are applied again (see [`crate::store::wal`]).
//!
//! Secondary-index writes wait in an in-memory overlay ([`crate::store::Overlay`]) that
//! every read merges in; each checkpoint folds it into the tables within its durable
//! commit, so the log never holds less than the overlay does. Each commit records the
//! overlay version in its snapshot, so a reader merges in exactly what it may see.

use crate::bootstrap::{BOOTSTRAPPED_KEY, BOOTSTRAP_CAPSULES};
mod check;

use crate::cancel::Interrupt;
use crate::envelope::{self, Access, ExecuteRequest, Outcome, Response};
use crate::kml::{delete, upsert};
use crate::kql::{self, QueryLimits};
use crate::store::wal::Wal;
use crate::store::{
    meta_u64, storage_error, Finished, GraphRead, Overlay, ReadTables, Sealed, WriteTables,
    FORMAT_VERSION, WAL_SEQ,
};
use crate::throttle::Throttle;
use kip_lang::{Command, ErrorCode, KipError};
use redb::{Database, Durability, ReadableDatabase, WriteTransaction};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// The database file inside the data directory.
pub const DB_FILE: &str = "nexus.redb";
/// The write-ahead log inside the data directory.
pub const WAL_FILE: &str = "nexus.wal";
const FORMAT_KEY: &str = "format_version";
const TEXT_INDEX_KEY: &str = "text_index_version";
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

/// An open Cognitive Nexus.
pub struct Nexus {
    db: Database,
    path: Option<PathBuf>,
    limits: QueryLimits,
    /// The write-ahead log (none for an in-memory nexus). Lock order: redb's write
    /// transaction first, then this.
    wal: Option<Mutex<Wal>>,
    /// Committed secondary-index writes not yet folded into the tables.
    overlay: Arc<Overlay>,
    /// Held by a write transaction from its start to the end of its commit, including
    /// the overlay's bookkeeping after the redb commit: without it, the next writer
    /// could start between the two and see the overlay (and the writers' key cache) as
    /// they were before the commit. redb's own write lock ends with the redb commit.
    /// Lock order: this, then redb's write transaction, then the write-ahead log.
    gate: Mutex<()>,
    combiner: Combiner,
    /// How old the log's oldest record may get before a checkpoint (milliseconds):
    /// [`CHECKPOINT_AGE`] unless a test sets it.
    checkpoint_age_ms: std::sync::atomic::AtomicU64,
}

/// Write combining for KML statements: concurrent statements queue up; one caller at a
/// time (the leader) runs everything queued in one transaction and one log append.
/// If any statement of a batch fails, the batch is rolled back and its statements run
/// again one transaction each, so every statement stays atomic and the failing one
/// changes nothing. Statements see each other's effects in queue order, as if serial.
#[derive(Default)]
struct Combiner {
    state: Mutex<CombinerState>,
}

#[derive(Default)]
struct CombinerState {
    jobs: Vec<KmlJob>,
    leader: bool,
}

struct KmlJob {
    cmd: Command,
    reply: std::sync::Arc<Reply>,
}

/// Where the write leader puts a queued statement's result (a one-shot slot: a channel
/// per statement allocated a 4 KiB block).
#[derive(Default)]
struct Reply {
    result: Mutex<Option<Result<Value, KipError>>>,
    ready: std::sync::Condvar,
}

impl Reply {
    fn send(&self, r: Result<Value, KipError>) {
        let mut slot = lock(&self.result);
        if slot.is_none() {
            *slot = Some(r);
        }
        self.ready.notify_one();
    }

    fn wait(&self) -> Result<Value, KipError> {
        let mut slot = lock(&self.result);
        loop {
            if let Some(r) = slot.take() {
                return r;
            }
            slot = self.ready.wait(slot).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Drop for KmlJob {
    /// A job dropped unanswered (the leader panicked) still wakes its writer.
    fn drop(&mut self) {
        self.reply
            .send(Err(KipError::internal("the write leader stopped")));
    }
}

impl std::fmt::Debug for Nexus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nexus").field("path", &self.path).finish()
    }
}

/// The budget of one request: the interface that received it sets a deadline and keeps
/// the [`Interrupt`] to cancel it (on timeout, or when the client goes away).
#[derive(Debug, Clone, Default)]
pub struct Budget {
    /// When the request must end.
    pub deadline: Option<std::time::Instant>,
    /// Set to stop the request.
    pub interrupt: Option<Interrupt>,
}

impl Budget {
    /// A budget ending `timeout` from now, with a fresh interrupt flag.
    pub fn with_timeout(timeout: std::time::Duration) -> Budget {
        Budget {
            deadline: std::time::Instant::now().checked_add(timeout),
            interrupt: Some(Interrupt::new()),
        }
    }
}

/// How [`Nexus::open_with`] treats a damaged write-ahead log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Refuse to open a directory whose log is corrupt.
    Normal,
    /// Keep a copy of the log as `nexus.wal.damaged-<seconds>`, then open as of the
    /// last good record (the records after the damage are lost) and empty the log.
    /// What `kip recover --salvage-wal` does, on the user's explicit request.
    SalvageWal,
}

/// What the open found in the log, and whether to accept damage.
struct LogCheck {
    damage: crate::store::wal::Damage,
    salvage: bool,
}

fn corrupt_log(d: &crate::store::wal::Damage, kept: u64, newest: u64) -> KipError {
    KipError::new(
        kip_lang::ErrorCode::InternalError,
        format!(
            "the write-ahead log {WAL_FILE} is corrupt: the record at byte {} cannot be read, but valid records up to number {newest} follow it (the last readable one before it is {kept}); the nexus was not opened and nothing was changed",
            d.offset
        ),
    )
    .with_hint(format!("this is damage (a flipped byte, a bad sector), not a torn last write. Restore the data directory from a backup, or run `kip recover --salvage-wal` to open it as of record {kept}: a copy of the log is kept as nexus.wal.damaged-<time> and the writes after the damage are lost"))
}

fn missing_database(dir: &Path, records: usize) -> KipError {
    KipError::internal(format!(
        "the data directory {} has a write-ahead log ({WAL_FILE}, {records} records) but no database ({DB_FILE}); nothing was opened or changed",
        dir.display()
    ))
    .with_hint("put nexus.redb back if it was moved, or restore the whole data directory (both files) from a backup or a `kip export`. The log alone holds only the writes since the last checkpoint, which refer to elements it does not contain, so it cannot rebuild a memory; keep it until you are sure. To start an empty nexus instead, move nexus.wal out of the directory")
}

/// An open that failed for lack of disk space says how much to free: opening replays
/// the write-ahead log into the database and checkpoints it (the database grows by up
/// to about the log's size, pages being rewritten copy-on-write) and keeps the log's
/// preallocated space.
fn explain_no_space(dir: &Path, e: KipError) -> KipError {
    let text = format!("{} {}", e.message, e.hint.as_deref().unwrap_or(""));
    if !(text.contains("No space left on device") || text.contains("os error 28")) {
        return e;
    }
    let wal = std::fs::metadata(dir.join(WAL_FILE)).map_or(0, |m| m.len());
    let needed = (2 * wal + (16 << 20)).div_ceil(1 << 20);
    KipError::internal(format!(
        "no space left on device in {}: opening needs about {needed} MiB free (the write-ahead log of {} MiB is replayed into the database and checkpointed, and the log keeps 4 MiB preallocated); nothing was lost",
        dir.display(),
        wal.div_ceil(1 << 20)
    ))
    .with_hint(format!("free at least {needed} MiB on that file system (df -h {}), then start again", dir.display()))
}

/// Creates `dir` (and missing parents) readable by its owner only.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(dir)
}

/// Creates an empty `file` readable and writable by its owner only, unless it exists
/// (redb then initializes the empty file as a new database).
fn create_private_file(file: &Path) -> std::io::Result<()> {
    if file.exists() {
        return Ok(());
    }
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    match o.open(file) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// Why [`Nexus::try_open`] did not open a directory.
#[derive(Debug, Clone)]
pub enum OpenError {
    /// Another process has the directory open: the database file's lock is held. The
    /// directory was not changed.
    InUse(KipError),
    /// Any other failure (unreadable, corrupt, no space, ...), explained.
    Failed(KipError),
}

impl OpenError {
    /// The error as a KIP error (both kinds carry their message and hint).
    pub fn into_kip(self) -> KipError {
        match self {
            OpenError::InUse(e) | OpenError::Failed(e) => e,
        }
    }
}

impl From<KipError> for OpenError {
    fn from(e: KipError) -> Self {
        OpenError::Failed(e)
    }
}

fn in_use(dir: &Path) -> KipError {
    KipError::internal(format!(
        "the nexus at {} is in use by another kip process",
        dir.display()
    ))
    .with_hint("`kip serve` and `kip exec` share a directory with the process that has it open (through its kip.sock); other commands (import, export, check, recover, the REPL) need it to themselves: stop the other process, or run them while it is not running")
}

fn open_error(dir: &Path, e: impl std::fmt::Display) -> KipError {
    KipError::internal(format!("cannot open the nexus at {}: {e}", dir.display()))
        .with_hint("check that the directory is writable and not opened by another kip process")
}

impl Nexus {
    /// Opens the nexus in `dir` (created on first use, then bootstrapped). A new
    /// directory is created readable by its owner only (0700), and so are the files in
    /// it (0600). Refuses, changing nothing on disk, when the write-ahead log holds
    /// records but the database file is missing, or when the log is corrupt (a damaged
    /// record followed by newer valid ones).
    pub fn open(dir: impl AsRef<Path>) -> Result<Nexus, KipError> {
        Nexus::open_with(dir, OpenMode::Normal)
    }

    /// [`Nexus::open`] in a given [`OpenMode`].
    pub fn open_with(dir: impl AsRef<Path>, mode: OpenMode) -> Result<Nexus, KipError> {
        Nexus::try_open(dir, mode).map_err(OpenError::into_kip)
    }

    /// [`Nexus::open_with`], telling "another process has this directory open" apart
    /// from every other failure, so that a caller can share the directory with that
    /// process instead of failing (what `kip serve` and `kip exec` do).
    pub fn try_open(dir: impl AsRef<Path>, mode: OpenMode) -> Result<Nexus, OpenError> {
        let dir = dir.as_ref();
        Nexus::open_inner(dir, mode).map_err(|e| match e {
            OpenError::Failed(e) => OpenError::Failed(explain_no_space(dir, e)),
            in_use => in_use,
        })
    }

    fn open_inner(dir: &Path, mode: OpenMode) -> Result<Nexus, OpenError> {
        let file = dir.join(DB_FILE);
        let wal_path = dir.join(WAL_FILE);
        if !file.exists() && wal_path.exists() {
            // Decided before anything is created: a refusal leaves the directory as
            // it was, so a supervisor's restart cannot turn it into an empty store.
            let (records, _) = Wal::read(&wal_path).map_err(|e| open_error(dir, e))?;
            if !records.is_empty() {
                return Err(missing_database(dir, records.len()).into());
            }
        }
        create_private_dir(dir).map_err(|e| open_error(dir, e))?;
        create_private_file(&file).map_err(|e| open_error(dir, e))?;
        let db = match Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(&file)
        {
            Ok(db) => db,
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                return Err(OpenError::InUse(in_use(dir)));
            }
            Err(e) => return Err(open_error(dir, e).into()),
        };
        // Opened after the database, whose file lock keeps a second process out.
        let (wal, records) = Wal::open(&wal_path).map_err(|e| open_error(dir, e))?;
        if mode == OpenMode::SalvageWal {
            let kept = dir.join(format!(
                "{WAL_FILE}.damaged-{}",
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0)
            ));
            std::fs::copy(&wal_path, &kept).map_err(|e| {
                open_error(
                    dir,
                    format!("cannot keep a copy of the log as {}: {e}", kept.display()),
                )
            })?;
            tracing::warn!(copy = %kept.display(), "salvaging the write-ahead log: a copy of it is kept");
        }
        let damage = wal.damage().clone();
        Ok(Nexus::init(
            db,
            Some(dir.to_path_buf()),
            Some(wal),
            records,
            Some(LogCheck {
                damage,
                salvage: mode == OpenMode::SalvageWal,
            }),
        )?)
    }

    /// A nexus in memory (same engine, nothing on disk): for tests and experiments.
    pub fn in_memory() -> Result<Nexus, KipError> {
        let db = Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(storage_error)?;
        Nexus::init(db, None, None, Vec::new(), None)
    }

    fn init(
        db: Database,
        path: Option<PathBuf>,
        wal: Option<Wal>,
        records: Vec<crate::store::wal::Record>,
        log: Option<LogCheck>,
    ) -> Result<Nexus, KipError> {
        // The log joins the nexus only once the open has succeeded: a nexus dropped on
        // a failed open must not checkpoint and empty a log it has not replayed.
        let mut nexus = Nexus {
            db,
            path,
            limits: QueryLimits::default(),
            wal: None,
            overlay: Arc::new(Overlay::default()),
            gate: Mutex::new(()),
            combiner: Combiner::default(),
            checkpoint_age_ms: std::sync::atomic::AtomicU64::new(CHECKPOINT_AGE.as_millis() as u64),
        };
        nexus.overlay.start_merger();
        // Create the tables, check the format version, replay the write-ahead log,
        // bootstrap once: one durable transaction.
        let txn = nexus.db.begin_write().map_err(storage_error)?;
        {
            // Format 1 -> 2: the analysed text of each element is derived from its record
            // instead of stored (the postings are unchanged).
            txn.delete_table(crate::store::LEGACY_DOCS)
                .map_err(storage_error)?;
            // Text index version 4 -> 5: single postings -> blocks of postings. A store
            // with the old table has version 4 or older, so its index is rebuilt below,
            // in this transaction.
            txn.delete_table(crate::store::OLD_POSTINGS)
                .map_err(storage_error)?;
            let mut w = WriteTables::open(&txn, &nexus.overlay)?;
            let format = meta_u64(&w, FORMAT_KEY)?;
            if format.is_none() && !records.is_empty() {
                return Err(KipError::internal(
                    "the data directory has a write-ahead log (nexus.wal) but no database (nexus.redb)",
                )
                .with_hint("restore nexus.redb from a backup, or remove nexus.wal to start an empty nexus"));
            }
            match format {
                Some(v) if v > FORMAT_VERSION => {
                    return Err(KipError::internal(format!(
                        "this data directory was written by a newer kip-nexus (storage format {v}); this build reads format {FORMAT_VERSION} and older"
                    ))
                    .with_hint("upgrade kip-nexus to open this data directory"));
                }
                Some(v) if v < FORMAT_VERSION => crate::store::GraphWrite::set_meta(
                    &mut w,
                    FORMAT_KEY,
                    &FORMAT_VERSION.to_le_bytes(),
                )?,
                Some(_) => {}
                None => crate::store::GraphWrite::set_meta(
                    &mut w,
                    FORMAT_KEY,
                    &FORMAT_VERSION.to_le_bytes(),
                )?,
            }
            if let Some(log) = &log {
                let durable = meta_u64(&w, WAL_SEQ)?.unwrap_or(0);
                let kept = records.last().map_or(0, |r| r.seq).max(durable);
                if let Some(newest) = log.damage.newest().filter(|n| *n > kept) {
                    if !log.salvage {
                        return Err(corrupt_log(&log.damage, kept, newest));
                    }
                    tracing::warn!(
                        "salvage: opening as of write-ahead log record {kept}; records up to {newest} after the damage at byte {} are dropped",
                        log.damage.offset
                    );
                }
            }
            replay(&mut w, &records)?;
            if meta_u64(&w, TEXT_INDEX_KEY)? != Some(crate::meta::text::TEXT_INDEX_VERSION) {
                // A new store, or one indexed by another analysis version: (re)build.
                w.rebuild_text_index(&mut |_, _| {})?;
                crate::store::GraphWrite::set_meta(
                    &mut w,
                    TEXT_INDEX_KEY,
                    &crate::meta::text::TEXT_INDEX_VERSION.to_le_bytes(),
                )?;
            }
            if w.meta(BOOTSTRAPPED_KEY)?.is_none() {
                for (name, text) in BOOTSTRAP_CAPSULES {
                    let cmds = kip_lang::parse_script(text).map_err(|e| {
                        KipError::internal(format!("bootstrap capsule {name} does not parse: {e}"))
                    })?;
                    for cmd in &cmds {
                        let Command::Upsert(u) = cmd else {
                            return Err(KipError::internal(format!(
                                "bootstrap capsule {name} holds a non-UPSERT command"
                            )));
                        };
                        upsert::upsert(&mut w, u, upsert::Privilege::System).map_err(|e| {
                            KipError::internal(format!("bootstrap capsule {name} failed: {e}"))
                        })?;
                    }
                }
                crate::store::GraphWrite::set_meta(&mut w, BOOTSTRAPPED_KEY, b"1")?;
            }
            w.flush()?;
            // A durable commit: the index entries go into the tables with it, and the
            // overlay (new, empty) starts again at version 0.
            w.fold_all()?;
        }
        txn.commit().map_err(storage_error)?;
        nexus.overlay.keys().committed();
        // Everything replayed is durable now.
        if let Some(mut wal) = wal {
            if log.as_ref().is_some_and(|l| l.salvage) {
                // The records past the damage must never be read again.
                wal.wipe()?;
            } else if let Err(e) = wal.reset() {
                tracing::warn!("cannot empty the write-ahead log: {}", e.message);
            }
            nexus.wal = Some(Mutex::new(wal));
        }
        Ok(nexus)
    }

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

    /// The query limits in force.
    pub fn limits(&self) -> &QueryLimits {
        &self.limits
    }

    /// Replaces the query limits.
    pub fn set_limits(&mut self, limits: QueryLimits) {
        self.limits = limits;
    }

    /// Executes an `execute_kip` (or `execute_kip_readonly`) arguments object.
    pub fn execute_json(&self, args: &Value, access: Access) -> Response {
        self.execute_json_with(args, access, &Budget::default())
    }

    /// [`Nexus::execute_json`] within a request [`Budget`] (deadline, cancellation).
    pub fn execute_json_with(&self, args: &Value, access: Access, budget: &Budget) -> Response {
        match ExecuteRequest::from_json(args) {
            Ok(req) => self.execute_with(&req, access, budget),
            Err(e) => envelope::envelope_failure(e),
        }
    }

    /// Executes a parsed request with the spec's batch semantics.
    pub fn execute(&self, req: &ExecuteRequest, access: Access) -> Response {
        self.execute_with(req, access, &Budget::default())
    }

    /// Executes a parsed request within `budget`: a cancelled or late request starts
    /// no further command (`KIP_4001`), a running query stops at its next check; a
    /// write that has started runs to its end and is reported as it ended (committed or
    /// not), never the other way round. Batch size and response size are bounded by
    /// [`QueryLimits::max_batch`] and [`QueryLimits::max_response_bytes`].
    pub fn execute_with(&self, req: &ExecuteRequest, access: Access, budget: &Budget) -> Response {
        let mut limits = self.limits.clone();
        limits.deadline = budget.deadline;
        limits.interrupt = budget.interrupt.clone();
        let batch = envelope::BatchLimits {
            max_commands: limits.max_batch,
            max_response_bytes: limits.max_response_bytes,
            deadline: budget.deadline,
            interrupt: budget.interrupt.clone(),
        };
        if req.dry_run && req.batch {
            return self.validate_batch(req, access, &batch, &limits);
        }
        envelope::run_with(req, access, &batch, |cmd, dry_run| {
            self.execute_command_within(cmd, dry_run, &limits.for_command())
        })
    }

    /// Executes one bound command. KML runs in one write transaction, committed only on
    /// success and never under `dry_run`; reads run on a consistent snapshot.
    pub fn execute_command(&self, cmd: &Command, dry_run: bool) -> Outcome {
        self.execute_command_within(cmd, dry_run, &self.limits.for_command())
    }

    fn execute_command_within(
        &self,
        cmd: &Command,
        dry_run: bool,
        limits: &QueryLimits,
    ) -> Outcome {
        if dry_run {
            return match self.validate(cmd, limits) {
                Ok(v) => Outcome::ok(v),
                Err(e) => Outcome::Err(e),
            };
        }
        let r = match cmd {
            Command::Upsert(_) | Command::Delete(_) => self.write_kml(cmd).map(Outcome::ok),
            Command::Find(q) => self.read(|r| kql::find(r, q, limits)),
            Command::Describe(d) => self.read(|r| crate::meta::describe::describe(r, d, limits)),
            Command::Search(s) => self.read(|r| crate::meta::search::search(r, s, limits)),
        };
        match r {
            Ok(o) => o,
            Err(e) => Outcome::Err(e),
        }
    }

    /// `dry_run`: full validation, nothing written. KML runs in a transaction that is
    /// then aborted, so schema, reference and protection errors surface exactly as they
    /// would, and `effect` shows the result the command would have had. KQL is compiled
    /// (schema and id checks) without being run.
    fn validate(&self, cmd: &Command, limits: &QueryLimits) -> Result<Value, KipError> {
        match cmd {
            Command::Upsert(_) | Command::Delete(_) => {
                self.write(|w| validate_in(w, cmd, limits), true)
            }
            _ => self.read(|r| validate_in_read(r, cmd, limits)),
        }
    }

    /// A `dry_run` batch holding writes is validated cumulatively: every command runs in
    /// one write transaction that is aborted at the end, so a command sees the effects
    /// of the earlier ones (a concept created by command 1 can be linked by command 2)
    /// exactly as when the batch runs for real; nothing is written.
    fn validate_batch(
        &self,
        req: &ExecuteRequest,
        access: Access,
        batch: &envelope::BatchLimits,
        limits: &QueryLimits,
    ) -> Response {
        let out = self.write(
            |w| {
                Ok(envelope::run_with(
                    req,
                    access,
                    batch,
                    |cmd, _| match validate_in(w, cmd, &limits.for_command()) {
                        Ok(v) => Outcome::ok(v),
                        Err(e) => Outcome::Err(e),
                    },
                ))
            },
            true,
        );
        out.unwrap_or_else(envelope::envelope_failure)
    }

    /// Runs `f` in a write transaction: commits on `Ok` (unless `dry_run`), aborts on
    /// `Err`, so a failed statement leaves nothing behind. Durable on return.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&mut WriteTables<'_>) -> Result<T, KipError>,
        dry_run: bool,
    ) -> Result<T, KipError> {
        let _gate = lock(&self.gate);
        let txn = self.db.begin_write().map_err(storage_error)?;
        let out = {
            let mut w = WriteTables::open(&txn, &self.overlay)?;
            f(&mut w).and_then(|v| Ok((v, w.finish()?)))
        };
        match out {
            Ok((v, finished)) if !dry_run => {
                self.commit(txn, finished)?;
                Ok(v)
            }
            Ok((v, _)) => {
                txn.abort().map_err(storage_error)?;
                Ok(v)
            }
            Err(e) => {
                txn.abort().map_err(storage_error)?;
                Err(e)
            }
        }
    }

    /// Commits a write transaction durably: through the write-ahead log when the
    /// transaction sealed a log record, else with a redb durable commit (which is also a
    /// checkpoint: it persists every earlier commit, so the log is emptied). The
    /// transaction's index changes are published into the overlay with the commit.
    fn commit(&self, txn: WriteTransaction, finished: Finished) -> Result<(), KipError> {
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
                            "folding the overlay failed ({}); retried later",
                            e.message
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
                    tracing::warn!("cannot empty the write-ahead log: {}", e.message);
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
                        KipError::internal(format!(
                            "commit failed ({}) and the write-ahead log could not be cut back ({}): restart kip-nexus",
                            e.message, t.message
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
                                "checkpoint failed ({}); writes still go to the write-ahead log and the checkpoint is retried at later writes (repeats of this warning are counted, logged at most every 30 s)",
                                e.message
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
    pub fn checkpoint_if_due(&self) -> Result<bool, KipError> {
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

    /// Starts a thread that checkpoints the log of an idle nexus within the checkpoint
    /// age (30 s): commits check the age only when they run, so without it a server
    /// that stopped writing would keep its log (and a crash would replay it). The
    /// thread holds a weak reference and ends once the nexus is dropped.
    pub fn start_idle_checkpoints(self: &Arc<Self>) -> std::io::Result<()> {
        let weak = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("kip-checkpoint".into())
            .spawn(move || loop {
                let step = match weak.upgrade() {
                    None => return,
                    Some(nexus) => {
                        if let Err(e) = nexus.checkpoint_if_due() {
                            static WARN: Throttle =
                                Throttle::new(std::time::Duration::from_secs(30));
                            if let Some(suppressed) = WARN.allow() {
                                tracing::warn!(
                                    suppressed,
                                    "idle checkpoint failed ({}); the write-ahead log keeps every write and the checkpoint is retried",
                                    e.message
                                );
                            }
                        }
                        (nexus.checkpoint_age() / 4).clamp(
                            std::time::Duration::from_millis(10),
                            std::time::Duration::from_secs(5),
                        )
                    }
                };
                std::thread::sleep(step);
            })
            .map(|_| ())
    }

    /// Makes every commit durable in the database file (folding the overlay into the
    /// tables in the same commit) and empties the write-ahead log.
    pub fn checkpoint(&self) -> Result<(), KipError> {
        let _gate = lock(&self.gate);
        self.checkpoint_gated()
    }

    /// [`Nexus::checkpoint`] for a caller holding the write gate.
    fn checkpoint_gated(&self) -> Result<(), KipError> {
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

    /// Runs one KML statement through the write combiner (durable on return). A caller
    /// that finds no leader becomes it and runs its own statement (first, by reference)
    /// with whatever is queued; the others queue a copy and wait for their result.
    fn write_kml(&self, cmd: &Command) -> Result<Value, KipError> {
        {
            let mut st = self.lock_combiner();
            if st.leader {
                let reply = std::sync::Arc::new(Reply::default());
                st.jobs.push(KmlJob {
                    cmd: cmd.clone(),
                    reply: reply.clone(),
                });
                drop(st);
                return reply.wait();
            }
            st.leader = true;
        }
        // Hands leadership back even if a batch panics, so later writers never wait on
        // a leader that is gone.
        struct Resign<'a>(&'a Nexus);
        impl Drop for Resign<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.lock_combiner().leader = false;
                }
            }
        }
        let _resign = Resign(self);
        let queued = std::mem::take(&mut self.lock_combiner().jobs);
        let own = self.run_batch(Some(cmd), queued);
        loop {
            let batch = {
                let mut st = self.lock_combiner();
                if st.jobs.is_empty() {
                    st.leader = false;
                    break;
                }
                std::mem::take(&mut st.jobs)
            };
            self.run_batch(None, batch);
        }
        own.unwrap_or_else(|| Err(KipError::internal("the write leader lost its statement")))
    }

    fn lock_combiner(&self) -> MutexGuard<'_, CombinerState> {
        lock(&self.combiner.state)
    }

    fn run_kml(&self, w: &mut WriteTables<'_>, cmd: &Command) -> Result<Value, KipError> {
        match cmd {
            Command::Upsert(u) => upsert::upsert(w, u, upsert::Privilege::Agent),
            Command::Delete(d) => delete::delete(w, d, &self.limits),
            _ => Err(KipError::internal("not a KML statement")),
        }
    }

    /// One statement, one durable transaction.
    fn run_single(&self, cmd: &Command) -> Result<Value, KipError> {
        self.write(|w| self.run_kml(w, cmd), false)
    }

    /// Runs `own` (the leader's statement, if any) and the queued jobs: all in one
    /// transaction when there are several, else (or when one of them fails) each in its
    /// own. Replies to the jobs; returns the result of `own`.
    fn run_batch(
        &self,
        own: Option<&Command>,
        jobs: Vec<KmlJob>,
    ) -> Option<Result<Value, KipError>> {
        let results: Vec<Result<Value, KipError>> = {
            let cmds: Vec<&Command> = own.into_iter().chain(jobs.iter().map(|j| &j.cmd)).collect();
            let combined = if cmds.len() > 1 {
                self.run_combined(&cmds).ok().flatten()
            } else {
                None
            };
            match combined {
                Some(values) => values.into_iter().map(Ok).collect(),
                // One statement, or a batch with a failure: each on its own.
                None => cmds.iter().map(|c| self.run_single(c)).collect(),
            }
        };
        let mut results = results.into_iter();
        let own_result = if own.is_some() { results.next() } else { None };
        for (job, r) in jobs.into_iter().zip(results) {
            job.reply.send(r);
        }
        own_result
    }

    /// Runs statements in one transaction; `None` (rolled back) if any of them fails.
    fn run_combined(&self, cmds: &[&Command]) -> Result<Option<Vec<Value>>, KipError> {
        let _gate = lock(&self.gate);
        let txn = self.db.begin_write().map_err(storage_error)?;
        let results = {
            let mut w = WriteTables::open(&txn, &self.overlay)?;
            let mut out = Vec::with_capacity(cmds.len());
            let mut failed = false;
            for cmd in cmds {
                match self.run_kml(&mut w, cmd) {
                    Ok(v) => out.push(v),
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
            if failed {
                None
            } else {
                Some((out, w.finish()?))
            }
        };
        match results {
            Some((out, finished)) => {
                self.commit(txn, finished)?;
                Ok(Some(out))
            }
            None => {
                txn.abort().map_err(storage_error)?;
                Ok(None)
            }
        }
    }

    /// Runs `f` on a consistent read snapshot.
    pub fn read<T>(
        &self,
        f: impl FnOnce(&ReadTables) -> Result<T, KipError>,
    ) -> Result<T, KipError> {
        // The token first, then the snapshot (see `store/overlay.rs`).
        let token = self.overlay.reader_token();
        let txn = self.db.begin_read().map_err(storage_error)?;
        let r = ReadTables::open(&txn, self.overlay.clone(), token)?;
        f(&r)
    }

    /// Loads a capsule (one or more UPSERTs) in one transaction with agent privileges:
    /// every statement or none. Returns each statement's result.
    ///
    /// The capsule may be of any size (an export of a large graph is hundreds of MiB):
    /// its commands are found with the lexer, then parsed and run one at a time, each
    /// within the usual per-command size limit. A syntax error anywhere is reported
    /// before anything is written.
    pub fn load_capsule(&self, text: &str) -> Result<Vec<Value>, KipError> {
        let mut out = Vec::new();
        self.load_capsule_each(text, &mut |v| out.push(v))?;
        Ok(out)
    }

    /// [`Nexus::load_capsule`], handing each statement's result to `each` instead of
    /// collecting them (a large import need not hold millions of ids). The results
    /// describe the transaction only if this returns `Ok` (it committed).
    pub fn load_capsule_each(
        &self,
        text: &str,
        each: &mut dyn FnMut(Value),
    ) -> Result<(), KipError> {
        let ranges = kip_lang::script_ranges(text)?;
        if ranges.is_empty() {
            // Nothing but whitespace and comments: the parser's own error.
            kip_lang::parse_script(text)?;
        }
        // Syntax first (one command at a time, nothing kept), so a capsule with a typo
        // near its end fails at once rather than after loading everything before it.
        for r in &ranges {
            kip_lang::parse_script_part(text, r.clone(), kip_lang::ParseOptions::capsule())?;
        }
        self.write(
            |w| {
                for r in &ranges {
                    let cmd = kip_lang::parse_script_part(
                        text,
                        r.clone(),
                        kip_lang::ParseOptions::capsule(),
                    )?;
                    let bound = kip_lang::bind_owned(cmd, &serde_json::Map::new())?;
                    match &bound {
                        Command::Upsert(u) => {
                            each(upsert::upsert(w, u, upsert::Privilege::Capsule)?)
                        }
                        Command::Delete(d) => each(delete::delete(w, d, &self.limits)?),
                        _ => {
                            return Err(KipError::new(
                                ErrorCode::InvalidSyntax,
                                "a capsule holds UPSERT and DELETE statements only",
                            ))
                        }
                    }
                }
                Ok(())
            },
            false,
        )
    }

    /// Every concept and proposition as JSON objects, in id order:
    /// `{"concepts": [...], "propositions": [...]}`.
    pub fn dump(&self) -> Result<Value, KipError> {
        self.read(|r| {
            let mut concepts = Vec::new();
            r.scan_concepts(&mut |n| {
                if let Some(c) = r.concept(n)? {
                    concepts.push(serde_json::json!({
                        "id": crate::store::ElemRef::Concept(n).id_string(),
                        "type": c.concept_type, "name": c.name,
                        "attributes": c.attributes, "metadata": c.metadata,
                    }));
                }
                Ok(true)
            })?;
            let mut props = Vec::new();
            r.scan_props(&mut |n| {
                if let Some(p) = r.prop(n)? {
                    props.push(serde_json::json!({
                        "id": crate::store::ElemRef::Prop(n).id_string(),
                        "subject": p.subject.id_string(), "predicate": p.predicate,
                        "object": p.object.id_string(),
                        "attributes": p.attributes, "metadata": p.metadata,
                    }));
                }
                Ok(true)
            })?;
            Ok(serde_json::json!({"concepts": concepts, "propositions": props}))
        })
    }

    /// The plan chosen for a FIND query, one line per step.
    pub fn explain(&self, query: &str) -> Result<Vec<String>, KipError> {
        let cmd = kip_lang::parse_command(query)?;
        let Command::Find(q) = kip_lang::bind(&cmd, &serde_json::Map::new())? else {
            return Err(KipError::syntax("explain takes a FIND query")
                .with_hint("write FIND(...) WHERE { ... }"));
        };
        self.read(|r| kql::explain(r, &q, &self.limits))
    }

    /// Rebuilds the text index from the graph in one transaction; `progress(done, total)`.
    pub fn reindex(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<(), KipError> {
        self.write(
            |w| {
                w.rebuild_text_index(progress)?;
                crate::store::GraphWrite::set_meta(
                    w,
                    TEXT_INDEX_KEY,
                    &crate::meta::text::TEXT_INDEX_VERSION.to_le_bytes(),
                )
            },
            false,
        )
    }

    /// The whole graph as a KIP capsule that re-imports to the same graph.
    pub fn export_capsule(&self) -> Result<String, KipError> {
        self.read(|r| crate::export::export_capsule(r))
    }

    /// Writes the export capsule to `out` as it is rendered (one read snapshot; memory
    /// for the sort keys only, not the whole text).
    pub fn export_capsule_to(&self, out: &mut dyn std::io::Write) -> Result<(), KipError> {
        self.read(|r| crate::export::export_capsule_to(r, out))
    }

    /// Runs a Knowledge Graph Memory Server tool (see [`crate::memory`]).
    pub fn memory_tool(&self, name: &str, args: &Value) -> Result<Value, KipError> {
        crate::memory::call(self, name, args)
    }

    /// Imports a memory-server JSONL file in one transaction. A malformed line fails the
    /// whole import, naming its line number, unless `skip_bad_lines`. Returns what was
    /// imported and the malformed lines left out.
    pub fn import_memory_jsonl(
        &self,
        text: &str,
        skip_bad_lines: bool,
    ) -> Result<(crate::memory::ImportReport, Vec<(usize, String)>), KipError> {
        self.import_memory_jsonl_with(text, skip_bad_lines, &mut |_, _| {})
    }

    /// [`Nexus::import_memory_jsonl`] telling `progress` (items done, items in all) as
    /// it goes. Returns what was imported and the malformed lines left out (line
    /// number, reason; only with `skip_bad_lines`, else the first one is the error).
    pub fn import_memory_jsonl_with(
        &self,
        text: &str,
        skip_bad_lines: bool,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(crate::memory::ImportReport, Vec<(usize, String)>), KipError> {
        let (items, bad) = crate::memory::parse_jsonl(text);
        if let Some((line, why)) = bad.first() {
            if !skip_bad_lines {
                return Err(KipError::new(
                    ErrorCode::InvalidSyntax,
                    format!(
                        "line {line}: {why} ({} malformed line(s) in all{}); nothing was imported",
                        bad.len(),
                        if bad.len() > 1 {
                            format!(", lines {}", line_list(&bad))
                        } else {
                            String::new()
                        }
                    ),
                )
                .with_hint("fix the lines, or import with --skip-bad-lines to leave malformed lines out (each is reported)"));
            }
        }
        let now = crate::memory::now();
        let total = items.len();
        let report = self.write(
            |w| crate::memory::import_items(w, &items, &now, &mut |done| progress(done, total)),
            false,
        )?;
        Ok((report, bad))
    }

    /// The memory graph as JSONL (entities, then relations; with createdAt/version).
    pub fn export_memory_jsonl(&self) -> Result<String, KipError> {
        self.read(|r| crate::memory::export_jsonl(r))
    }

    /// Number of concepts and propositions.
    pub fn totals(&self) -> Result<(u64, u64), KipError> {
        self.read(|r| r.totals())
    }
}

impl Drop for Nexus {
    /// A clean close leaves an empty write-ahead log (nothing to replay on the next open).
    fn drop(&mut self) {
        if let Err(e) = self.checkpoint() {
            tracing::warn!(
                "checkpoint on close failed ({}); the write-ahead log is replayed on the next open",
                e.message
            );
        }
    }
}

/// Locks a mutex, also after a panic in another holder (the guarded state stays valid:
/// the log is cut back on every failed append).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `3, 7, 12, ...` (at most 20 line numbers).
fn line_list(bad: &[(usize, String)]) -> String {
    let mut s = bad
        .iter()
        .take(20)
        .map(|(l, _)| l.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if bad.len() > 20 {
        s.push_str(", ...");
    }
    s
}

fn validation_shape(cmd: &Command) -> Value {
    let kind = match cmd.kind() {
        kip_lang::CommandKind::Kql => "KQL",
        kip_lang::CommandKind::Kml => "KML",
        kip_lang::CommandKind::Meta => "META",
    };
    serde_json::json!({"dry_run": true, "valid": true, "kind": kind})
}

/// `dry_run` of one command inside a write transaction (aborted by the caller): KML
/// runs for real there, so schema, reference and protection errors surface exactly as
/// they would, and `effect` shows the result; KQL is compiled against the
/// transaction's view.
fn validate_in(
    w: &mut WriteTables<'_>,
    cmd: &Command,
    limits: &QueryLimits,
) -> Result<Value, KipError> {
    let mut out = validation_shape(cmd);
    match cmd {
        Command::Upsert(u) => out["effect"] = upsert::upsert(w, u, upsert::Privilege::Agent)?,
        Command::Delete(d) => out["effect"] = delete::delete(w, d, limits)?,
        _ => return validate_in_read(&*w, cmd, limits),
    }
    Ok(out)
}

/// `dry_run` of a read: FIND is compiled (schema and id checks) without being run.
fn validate_in_read(
    r: &dyn crate::store::GraphRead,
    cmd: &Command,
    limits: &QueryLimits,
) -> Result<Value, KipError> {
    if let Command::Find(q) = cmd {
        kql::validate(r, q, limits)?;
    }
    Ok(validation_shape(cmd))
}

/// Applies the write-ahead log records after the last checkpoint, in order.
fn replay(w: &mut WriteTables<'_>, records: &[crate::store::wal::Record]) -> Result<(), KipError> {
    let mut applied = meta_u64(w, WAL_SEQ)?.unwrap_or(0);
    let start = applied;
    for rec in records {
        if rec.seq <= applied {
            continue;
        }
        if rec.seq != applied + 1 {
            return Err(KipError::internal(format!(
                "the write-ahead log jumps from record {applied} to {}: records are missing",
                rec.seq
            ))
            .with_hint("nexus.wal is damaged: restore the data directory from a backup, or move nexus.wal away to open the database as of its last checkpoint (the writes logged after it are then lost)"));
        }
        w.apply_log(&rec.payload).map_err(|e| {
            KipError::internal(format!(
                "write-ahead log record {} cannot be applied: {}",
                rec.seq, e.message
            ))
            .with_hint("nexus.wal is damaged: restore the data directory from a backup, or move nexus.wal away to open the database as of its last checkpoint (the writes logged after it are then lost)")
        })?;
        applied = rec.seq;
    }
    if applied > start {
        tracing::info!("replayed {} write-ahead log records", applied - start);
        w.set_wal_seq(applied)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_that_runs_out_of_space_says_how_much_to_free() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(WAL_FILE), vec![0u8; 10 << 20]).expect("log");
        let e = explain_no_space(
            dir.path(),
            KipError::internal("storage error: I/O error: No space left on device (os error 28)"),
        );
        assert!(
            e.message.contains("needs about 36 MiB free"),
            "{}",
            e.message
        );
        assert!(e
            .hint
            .as_deref()
            .unwrap_or("")
            .contains("free at least 36 MiB"));
        let other = explain_no_space(dir.path(), KipError::internal("permission denied"));
        assert_eq!(other.message, "permission denied");
    }
}
