//! # kip-open
//!
//! The composition root of the storage layer: the one place that knows every backend
//! and decides, from a location, which one a [`Nexus`] runs on. A `postgres://` or
//! `postgresql://` URL (or a libpq `key=value` string) names a PostgreSQL database
//! (`kip-store-pg`); anything else is a data directory of the embedded redb store
//! (`kip-store`); [`Open::in_memory`] keeps everything in memory (redb's in-memory
//! backend), [`Open::in_memory_contract`] on the contract-only memory backend
//! (`kip-store-mem`). The engine sees only
//! the contract (`kip-storage`'s `Backend`).
//!
//! The opening functions are associated functions of [`Nexus`] through the [`Open`]
//! trait: with `use kip_open::Open;` in scope, `Nexus::open(dir)` reads as before.
//!
//! Architecture invariant: only this crate (and the backends' own tests) names a
//! backend crate; the CLI, the server and the benchmark open a nexus through it.

pub mod testing;

use kip_engine::bootstrap::{bootstrap, bootstrap_with, BOOTSTRAP_CAPSULES};
use kip_engine::Nexus;
use kip_lang::KipError;
use std::path::Path;
use std::sync::Arc;

pub use kip_store as embedded;
pub use kip_store::crashsim;
pub use kip_store::db::{OpenError, OpenMode, DB_FILE, WAL_FILE};
pub use kip_store_pg as postgres;

/// Whether a `--data` value names a PostgreSQL database (a `postgres://` or
/// `postgresql://` URL) rather than a directory.
pub fn is_database_url(location: &str) -> bool {
    kip_store_pg::is_url(location)
}

/// A `--data` value for messages and logs: a database URL's password replaced by `***`
/// (a directory as it is).
pub fn shown_location(location: &Path) -> String {
    let s = location.display().to_string();
    if is_database_url(&s) {
        kip_store_pg::redact(&s)
    } else {
        s
    }
}

/// Opening a [`Nexus`] over the backend a location names.
pub trait Open: Sized {
    /// Opens the nexus in `dir` (created on first use, then bootstrapped). A new
    /// directory is created readable by its owner only (0700), and so are the files in
    /// it (0600). Refuses, changing nothing on disk, when the write-ahead log holds
    /// records but the database file is missing, or when the log is corrupt (a damaged
    /// record followed by newer valid ones).
    fn open(dir: impl AsRef<Path>) -> Result<Self, KipError> {
        Self::open_with(dir, OpenMode::Normal)
    }

    /// [`Open::open`] in a given [`OpenMode`].
    fn open_with(dir: impl AsRef<Path>, mode: OpenMode) -> Result<Self, KipError> {
        Self::try_open(dir, mode).map_err(OpenError::into_kip)
    }

    /// [`Open::open_with`], telling "another process has this directory open" apart
    /// from every other failure, so that a caller can share the directory with that
    /// process instead of failing (what `kip serve` and `kip exec` do).
    ///
    /// A `postgres://` or `postgresql://` URL in place of the directory opens the nexus
    /// in that PostgreSQL database instead ([`Open::open_postgres`]); any number of
    /// processes open the same database at once, so that never fails as "in use".
    fn try_open(dir: impl AsRef<Path>, mode: OpenMode) -> Result<Self, OpenError>;

    /// Opens the nexus in a PostgreSQL database (a `postgres://` URL or a libpq
    /// `key=value` string; what the URL leaves out comes from the `PG*` environment
    /// variables): the schema is created or migrated, then bootstrapped on first use.
    /// See the `kip-store-pg` crate for the guarantees.
    fn open_postgres(url: &str) -> Result<Self, KipError>;

    /// [`Open::open_postgres`] bootstrapped with the genesis capsule only, like
    /// [`Open::in_memory_genesis_only`] (for the differential tests on PostgreSQL).
    #[doc(hidden)]
    fn open_postgres_genesis_only(url: &str) -> Result<Self, KipError>;

    /// A nexus on simulated disks (the database on `db`, the write-ahead log on `log`):
    /// for the power-loss and fault-injection tests ([`crashsim`]).
    fn open_simulated(db: crashsim::SimFile, log: crashsim::SimFile) -> Result<Self, KipError>;

    /// A nexus in memory (same engine, nothing on disk): for tests and experiments.
    fn in_memory() -> Result<Self, KipError>;

    /// An in-memory nexus with the Genesis capsule only (no standard types, no
    /// persons). For tests that compare the engine with a naive evaluator over every
    /// element of the graph, which the standard capsules would multiply.
    #[doc(hidden)]
    fn in_memory_genesis_only() -> Result<Self, KipError>;

    /// A nexus on the contract-only in-memory backend (`kip-store-mem`: persistent maps,
    /// no log, no files), for throwaway agents and for tests that need no redb.
    fn in_memory_contract() -> Result<Self, KipError>;
}

impl Open for Nexus {
    fn try_open(dir: impl AsRef<Path>, mode: OpenMode) -> Result<Nexus, OpenError> {
        if let Some(url) = dir.as_ref().to_str().filter(|s| is_database_url(s)) {
            return Nexus::open_postgres(url).map_err(OpenError::Failed);
        }
        let store = kip_store::db::Store::open(dir, mode, &mut |w| bootstrap(w))?;
        Ok(Nexus::with_backend(Arc::new(store))?)
    }

    fn open_postgres(url: &str) -> Result<Nexus, KipError> {
        let store = kip_store_pg::PgStore::open(url)?;
        Nexus::with_backend(Arc::new(store))
    }

    fn open_postgres_genesis_only(url: &str) -> Result<Nexus, KipError> {
        let store = kip_store_pg::PgStore::open(url)?;
        Nexus::with_backend_booted(Arc::new(store), &mut |w| {
            bootstrap_with(w, &BOOTSTRAP_CAPSULES[..1])
        })
    }

    fn open_simulated(db: crashsim::SimFile, log: crashsim::SimFile) -> Result<Nexus, KipError> {
        let store = kip_store::db::Store::open_simulated(db, log, &mut |w| bootstrap(w))?;
        Nexus::with_backend(Arc::new(store))
    }

    fn in_memory() -> Result<Nexus, KipError> {
        let store = kip_store::db::Store::in_memory(&mut |w| bootstrap(w))?;
        Nexus::with_backend(Arc::new(store))
    }

    fn in_memory_contract() -> Result<Nexus, KipError> {
        Nexus::with_backend(Arc::new(kip_store_mem::MemStore::new()))
    }

    fn in_memory_genesis_only() -> Result<Nexus, KipError> {
        let store =
            kip_store::db::Store::in_memory(&mut |w| bootstrap_with(w, &BOOTSTRAP_CAPSULES[..1]))?;
        Nexus::with_backend(Arc::new(store))
    }
}

/// Compacts the embedded store in `dir` (`kip storage compact`): opens it (another
/// process using it makes this fail as "in use"), checkpoints, and gives the database
/// file's free pages back to the file system. Returns the file's size before and after.
/// Only for a data directory: a PostgreSQL database is compacted by its server.
pub fn compact(dir: &Path) -> Result<(u64, u64), KipError> {
    let mut store = kip_store::db::Store::open(dir, OpenMode::Normal, &mut |w| bootstrap(w))
        .map_err(OpenError::into_kip)?;
    Ok(store.compact()?)
}
