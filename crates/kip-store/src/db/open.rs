//! Opening a data directory: the private directory and files, the lock, the refusals
//! (a log without its database, a corrupt log), the migrations, the log replay, the
//! text index (re)build and the engine's `init`, all in one durable transaction.

use super::*;
use kip_lang::KipError;

/// How [`Store::open`] treats a damaged write-ahead log.
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
    damage: crate::wal::Damage,
    salvage: bool,
}

fn corrupt_log(d: &crate::wal::Damage, kept: u64, newest: u64) -> KipError {
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

/// Why [`Store::open`] did not open a directory.
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

/// Work the engine does in the open's transaction, after the migrations and the log
/// replay (the bootstrap of a new store).
pub type InitFn<'a> = &'a mut dyn FnMut(&mut WriteTables<'_>) -> Result<(), KipError>;

impl Store {
    /// Opens the store in `dir` (created on first use; `init` then bootstraps it). A
    /// new directory is created readable by its owner only (0700), and so are the files
    /// in it (0600). Tells "another process has this directory open" ([`OpenError::InUse`])
    /// apart from every other failure. Refuses, changing nothing on disk, when the
    /// write-ahead log holds records but the database file is missing, or when the log is
    /// corrupt (a damaged record followed by newer valid ones), unless `mode` salvages.
    pub fn open(
        dir: impl AsRef<Path>,
        mode: OpenMode,
        init: InitFn<'_>,
    ) -> Result<Store, OpenError> {
        let dir = dir.as_ref();
        Store::open_inner(dir, mode, init).map_err(|e| match e {
            OpenError::Failed(e) => OpenError::Failed(explain_no_space(dir, e)),
            in_use => in_use,
        })
    }

    fn open_inner(dir: &Path, mode: OpenMode, init: InitFn<'_>) -> Result<Store, OpenError> {
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
        Ok(Store::init(
            db,
            Some(dir.to_path_buf()),
            Some(wal),
            records,
            Some(LogCheck {
                damage,
                salvage: mode == OpenMode::SalvageWal,
            }),
            init,
        )?)
    }

    /// A store on simulated disks ([`crate::crashsim`]): the database on `db`, the
    /// write-ahead log on `log`. For the power-loss and fault-injection tests, which
    /// crash the disks at chosen points and open what survived.
    pub fn open_simulated(
        db: crate::crashsim::SimFile,
        log: crate::crashsim::SimFile,
        init: InitFn<'_>,
    ) -> Result<Store, KipError> {
        let db = Database::builder()
            .set_cache_size(16 << 20)
            .create_with_backend(db)
            .map_err(storage_error)?;
        let (wal, records) = Wal::open_on(Box::new(log), Path::new("<simulated nexus.wal>"))?;
        let damage = wal.damage().clone();
        Store::init(
            db,
            None,
            Some(wal),
            records,
            Some(LogCheck {
                damage,
                salvage: false,
            }),
            init,
        )
    }

    /// A store in memory (same engine, nothing on disk): for tests and experiments.
    pub fn in_memory(init: InitFn<'_>) -> Result<Store, KipError> {
        let db = Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(storage_error)?;
        Store::init(db, None, None, Vec::new(), None, init)
    }

    fn init(
        db: Database,
        path: Option<PathBuf>,
        wal: Option<Wal>,
        records: Vec<crate::wal::Record>,
        log: Option<LogCheck>,
        init: InitFn<'_>,
    ) -> Result<Store, KipError> {
        // The log joins the store only once the open has succeeded: a store dropped on
        // a failed open must not checkpoint and empty a log it has not replayed.
        let mut store = Store {
            db,
            path,
            wal: None,
            overlay: Arc::new(Overlay::default()),
            gate: Mutex::new(()),
            checkpoint_age_ms: std::sync::atomic::AtomicU64::new(CHECKPOINT_AGE.as_millis() as u64),
        };
        store.overlay.start_merger();
        // Create the tables, check the format version, replay the write-ahead log,
        // run the engine's `init` (its bootstrap): one durable transaction.
        let txn = store.db.begin_write().map_err(storage_error)?;
        {
            // Format 1 -> 2: the analysed text of each element is derived from its record
            // instead of stored (the postings are unchanged).
            txn.delete_table(crate::LEGACY_DOCS)
                .map_err(storage_error)?;
            // Text index version 4 -> 5: single postings -> blocks of postings. A store
            // with the old table has version 4 or older, so its index is rebuilt below,
            // in this transaction.
            txn.delete_table(crate::OLD_POSTINGS)
                .map_err(storage_error)?;
            // History's changes index: one entry per change -> one list per commit.
            crate::tables::convert_old_changes(&txn)?;
            let mut w = WriteTables::open(&txn, &store.overlay)?;
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
                Some(v) if v < FORMAT_VERSION => {
                    crate::GraphWrite::set_meta(&mut w, FORMAT_KEY, &FORMAT_VERSION.to_le_bytes())?
                }
                Some(_) => {}
                None => {
                    crate::GraphWrite::set_meta(&mut w, FORMAT_KEY, &FORMAT_VERSION.to_le_bytes())?
                }
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
            if meta_u64(&w, TEXT_INDEX_KEY)? != Some(crate::text::TEXT_INDEX_VERSION) {
                // A new store, or one indexed by another analysis version: (re)build.
                w.rebuild_text_index(&mut |_, _| {})?;
                crate::GraphWrite::set_meta(
                    &mut w,
                    TEXT_INDEX_KEY,
                    &crate::text::TEXT_INDEX_VERSION.to_le_bytes(),
                )?;
            }
            if meta_u64(&w, crate::attrs::ATTR_INDEX_KEY)? != Some(crate::attrs::ATTR_INDEX_VERSION)
            {
                // A store from before the attribute value index (or another layout).
                w.rebuild_attr_index(&mut |_, _| {})?;
                crate::GraphWrite::set_meta(
                    &mut w,
                    crate::attrs::ATTR_INDEX_KEY,
                    &crate::attrs::ATTR_INDEX_VERSION.to_le_bytes(),
                )?;
            }
            init(&mut w)?;
            // What the replay or `init` changed under history ends as a commit.
            kip_storage::history::finish(&mut w)?;
            w.flush()?;
            // A durable commit: the index entries go into the tables with it, and the
            // overlay (new, empty) starts again at version 0.
            w.fold_all()?;
        }
        txn.commit().map_err(storage_error)?;
        store.overlay.keys().committed();
        // Everything replayed is durable now.
        if let Some(mut wal) = wal {
            if log.as_ref().is_some_and(|l| l.salvage) {
                // The records past the damage must never be read again.
                wal.wipe()?;
            } else if let Err(e) = wal.reset() {
                tracing::warn!("cannot empty the write-ahead log: {e}");
            }
            store.wal = Some(Mutex::new(wal));
        }
        Ok(store)
    }
}

/// Applies the write-ahead log records after the last checkpoint, in order.
fn replay(w: &mut WriteTables<'_>, records: &[crate::wal::Record]) -> Result<(), KipError> {
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
                "write-ahead log record {} cannot be applied: {e}",
                rec.seq
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
