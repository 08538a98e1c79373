//! The test matrix's choice of storage, for this workspace's test suites (not a
//! public API).
//!
//! `scripts/test.sh` runs the suites on the embedded store, then with
//! `KIP_TEST_BACKEND=postgres`, where every memory a test makes lives in a schema of its
//! own in the database at `KIP_TEST_PG_URL` (a throwaway cluster started by
//! `scripts/pg-test-cluster.sh`), and the statement suites once more with
//! `KIP_TEST_BACKEND=memory`, on the contract-only in-memory backend (`kip-store-mem`):
//! the proof that a backend needs no engine change.

use crate::Open;
use kip_engine::Nexus;
use kip_lang::KipError;
use std::path::{Path, PathBuf};

/// True on the test matrix's PostgreSQL leg.
pub fn on_postgres() -> bool {
    std::env::var("KIP_TEST_BACKEND").as_deref() == Ok("postgres")
}

/// True on the test matrix's leg on the contract-only in-memory backend.
pub fn on_memory_backend() -> bool {
    std::env::var("KIP_TEST_BACKEND").as_deref() == Ok("memory")
}

/// The URL of a new, empty schema of the test database (its name starts with
/// `prefix`).
pub fn scratch_url(prefix: &str) -> Result<String, KipError> {
    let url = std::env::var("KIP_TEST_PG_URL").map_err(|_| {
        KipError::internal(
            "KIP_TEST_BACKEND=postgres needs KIP_TEST_PG_URL (scripts/pg-test-cluster.sh start prints one)",
        )
    })?;
    Ok(kip_store_pg::scratch_schema(&url, prefix)?)
}

/// A fresh, bootstrapped nexus: in memory (redb's in-memory store; on the memory leg
/// the contract-only backend), or on the PostgreSQL leg in a new schema.
pub fn nexus() -> Result<Nexus, KipError> {
    if on_postgres() {
        blocking(|| Nexus::open_postgres(&scratch_url("t")?))
    } else if on_memory_backend() {
        Nexus::in_memory_contract()
    } else {
        Nexus::in_memory()
    }
}

/// Where a test's memory goes when it would be the data directory `dir`: `dir`
/// itself, or on the PostgreSQL leg the URL of a schema named after `dir` (created
/// when missing, so the same directory names the same memory across the commands of
/// a test; `--data` takes either).
pub fn location(dir: &Path) -> Result<PathBuf, KipError> {
    if !on_postgres() {
        return Ok(dir.to_path_buf());
    }
    let url = std::env::var("KIP_TEST_PG_URL")
        .map_err(|_| KipError::internal("KIP_TEST_BACKEND=postgres needs KIP_TEST_PG_URL"))?;
    // FNV-1a of the path: stable across the test's processes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in dir.to_string_lossy().bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let name = format!("dir_{h:016x}");
    Ok(PathBuf::from(blocking(|| {
        kip_store_pg::ensure_schema(&url, &name)
    })?))
}

/// Runs `f` on a thread of its own and returns what it returns (a panic in `f` goes
/// on here). For tests that use a nexus from inside an async runtime: the PostgreSQL
/// backend's client blocks, which panics on a runtime's thread (the server itself
/// calls the nexus through `spawn_blocking`).
pub fn blocking<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| match s.spawn(f).join() {
        Ok(v) => v,
        Err(p) => std::panic::resume_unwind(p),
    })
}
