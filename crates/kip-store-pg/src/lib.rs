//! # kip-store-pg
//!
//! The Cognitive Nexus in a PostgreSQL database: a [`Backend`] that any number of kip
//! processes, on any number of machines, open at once.
//!
//! - **Tables** mirror the embedded store's (module `schema`): records by id, with the
//!   `{type, name}` and `(subject, predicate, object)` keys as unique constraints, the
//!   link indexes (`pos`, `osp`), statistics, text postings, the attribute value index,
//!   embedding marks and vectors, and the audit log. Records are the same MessagePack
//!   bytes as in the embedded store, so `kip export`/`import` and every executor work
//!   unchanged.
//! - **Transactions**: a read runs in one `REPEATABLE READ, READ ONLY` transaction (a
//!   consistent snapshot). A write runs in one transaction that first takes a
//!   transaction-level advisory lock (one per schema): writers are serialized across
//!   every process, so the engine's read-then-write steps (does `{type, name}` exist?
//!   allocate an id, insert) behave exactly as on the embedded store, with no
//!   serialization failure to retry; the unique constraints (checked at commit) are the
//!   last line of defence. `COMMIT` returns once PostgreSQL has made the transaction
//!   durable (`synchronous_commit`, on by default). Reads never wait for writers; a
//!   write waits for another process's at most `KIP_PG_WRITE_WAIT` seconds (60).
//! - **Connections** come from an r2d2 pool (`KIP_PG_POOL` connections, 16 by default);
//!   each keeps its prepared statements, so a query is one round trip. Opening a
//!   transaction is retried on a fresh connection when the pooled one was lost (a
//!   server restart), before any of the caller's work runs.
//!
//! - **Writes** are buffered per transaction and written set-based (`unnest` arrays) at
//!   commit or before a read that needs them; the new rows of elements the transaction
//!   created go through `COPY ... (FORMAT binary)` when a table has 256 or more of them
//!   (a bulk load). UPSERT announces its keys, the types and predicates it checks
//!   included ([`kip_storage::GraphRead::prefetch`]), so they are looked up in one query,
//!   an index probe per key (`LATERAL ... LIMIT 1`: a hash join over a whole table is
//!   what the planner picks for a big key list otherwise).
//! - **Keys across transactions**: which concept holds a `{type, name}` key is
//!   remembered by the process (module `keys`), valid while no transaction of any
//!   process has deleted or renamed a concept since (a counter every such commit
//!   raises, read with each `BEGIN`).
//! - **TLS** with rustls, with libpq's `sslmode` meanings (see `conn::tls`).
//!
//! - **Reads** are one round trip per index lookup, except where the engine announces
//!   what it will read ([`kip_storage::GraphRead::scan_many`],
//!   [`kip_storage::GraphRead::prefetch_elements`]: a path walk's levels and ends;
//!   [`kip_storage::GraphRead::count_in_many`], [`kip_storage::GraphRead::scan_names`])
//!   and where a read-only transaction's read-ahead (`tx/ahead.rs`) sees a nested loop
//!   reading the members of one scanned page one by one: it then reads the records, or
//!   the links at one end, of the page's members in one query.
//! - **TLS client certificates** (`sslcert`/`sslkey`) for `cert` authentication.
//!
//! Calls block (the `postgres` client runs its own runtime): use a nexus on PostgreSQL
//! from blocking threads (`spawn_blocking` in async code), as `kip serve` does; a
//! connection dropped inside an async runtime closes on a thread of its own. What is
//! not done yet is listed in docs/deployment.md and docs/performance.md.

mod buffer;
mod conn;
mod keys;
mod schema;
mod tx;
mod url;
mod usage;

use conn::{Conn, Manager};
use kip_storage::backend::Backend;
use kip_storage::{GraphRead, GraphWrite, StoreError, StoreResult};
use std::path::Path;
use std::time::Duration;
use tx::PgTx;
use url::{manager, shown};
pub use url::{redact, url_with_schema};

/// Whether `location` (a `--data` value) names a PostgreSQL database rather than a
/// directory: a `postgres://` or `postgresql://` URL.
pub fn is_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// The nexus in a PostgreSQL database.
pub struct PgStore {
    pool: r2d2::Pool<Manager>,
    /// The advisory lock every write transaction takes (per schema).
    write_lock: i64,
    /// The advisory lock of audit log appends (per schema).
    audit_lock: i64,
    /// Seconds a write waits for the writers' lock.
    write_wait: u32,
    /// The schema holding the tables.
    schema: String,
    /// Where, for messages (no password).
    shown: String,
    /// `{type, name}` -> concept, shared by this process's transactions (`keys.rs`).
    keys: keys::KeyCache,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("database", &self.shown)
            .field("schema", &self.schema)
            .finish()
    }
}

/// A pooled connection inside a transaction; rolled back if dropped before
/// [`Txn::finish`] (an error or a panic on the way).
struct Txn {
    conn: r2d2::PooledConnection<Manager>,
    open: bool,
}

impl Txn {
    fn finish(mut self, commit: bool) -> StoreResult<()> {
        self.open = false;
        self.conn.batch(if commit { "COMMIT" } else { "ROLLBACK" })
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        if self.open {
            let _ = self.conn.batch("ROLLBACK");
        }
    }
}

/// How long a write waits for the writers' lock held by another process (a long
/// import, a process stopped while writing) before failing with a retryable conflict,
/// in seconds (`KIP_PG_WRITE_WAIT` overrides it).
const WRITE_LOCK_WAIT_SECS: u32 = 60;

/// The advisory lock key of the writers of the memory in `schema` (what every write
/// transaction takes): for operators (`pg_locks`) and tests.
#[doc(hidden)]
pub fn write_lock_key(schema: &str) -> i64 {
    lock_key("kip-write", schema)
}

/// An audit record (a JSON object) with its `id` set to `seq`; other bytes unchanged.
fn with_id(bytes: &[u8], seq: u64) -> Vec<u8> {
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(serde_json::Value::Object(mut m)) => {
            if let Some(id) = m.get_mut("id") {
                *id = serde_json::Value::String(seq.to_string());
            }
            serde_json::Value::Object(m).to_string().into_bytes()
        }
        _ => bytes.to_vec(),
    }
}

/// The statement a transaction's `BEGIN` runs to use the key cache: the last concept
/// number, the key epoch and the concept table's identity (see `keys.rs`).
fn key_view_sql() -> String {
    format!(
        "SELECT convert_from(key, 'UTF8'), n::text FROM kip_stats \
         WHERE key IN (convert_to('{}', 'UTF8'), convert_to('{}', 'UTF8')) \
         UNION ALL SELECT '#table', 'kip_concepts'::regclass::oid::bigint::text",
        tx::LAST_IDS[0],
        keys::KEY_EPOCH
    )
}

/// The key cache's view of a snapshot, from the rows of [`key_view_sql`] (`None`
/// when they are not there).
fn key_view(rows: &conn::TextRows) -> Option<keys::View> {
    let n = |k: &str| -> Option<i64> {
        rows.iter()
            .find(|(key, _)| key == k)
            .and_then(|(_, v)| v.as_deref()?.parse().ok())
    };
    Some(keys::View {
        token: keys::Token {
            table: n("#table")?,
            epoch: n(keys::KEY_EPOCH).unwrap_or(0),
        },
        last_concept: u64::try_from(n(tx::LAST_IDS[0]).unwrap_or(0)).unwrap_or(0),
    })
}

/// A stable 64-bit hash (FNV-1a) naming an advisory lock.
fn lock_key(what: &str, schema: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in what.bytes().chain([0]).chain(schema.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}

impl PgStore {
    /// Connects to the database at `url` (a `postgres://` URL or a libpq
    /// `key=value` string), applies the schema migrations this build knows (once, under
    /// an advisory lock), and rebuilds the text and attribute indexes when they were
    /// made by another version of their analysis. The engine bootstraps the standard
    /// capsules on top (`Nexus::with_backend`).
    pub fn open(url: &str) -> StoreResult<PgStore> {
        let manager = manager(url)?;
        let shown = shown(&manager.config);
        // One connection first, for a prompt and precise error (the pool would retry
        // for its whole timeout).
        let mut first = r2d2::ManageConnection::connect(&manager).map_err(|e| {
            StoreError::Other(format!(
                "cannot connect to PostgreSQL at {shown}: {}",
                conn::chain(&e)
            ))
        })?;
        let schema = migrate(&mut first)?;
        let size = std::env::var("KIP_PG_POOL")
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(16);
        let pool = r2d2::Pool::builder()
            .max_size(size)
            .min_idle(Some(0))
            .test_on_check_out(false)
            .connection_timeout(Duration::from_secs(30))
            .build_unchecked(manager);
        let store = PgStore {
            pool,
            write_lock: write_lock_key(&schema),
            write_wait: std::env::var("KIP_PG_WRITE_WAIT")
                .ok()
                .and_then(|s| s.parse::<u32>().ok())
                .filter(|n| *n > 0)
                .unwrap_or(WRITE_LOCK_WAIT_SECS),
            audit_lock: lock_key("kip-audit", &schema),
            schema,
            shown,
            keys: keys::KeyCache::from_env(),
        };
        let current = store.read_meta_u64(kip_storage::TEXT_INDEX_KEY)?
            == Some(kip_storage::text::TEXT_INDEX_VERSION)
            && store.read_meta_u64(kip_storage::attrs::ATTR_INDEX_KEY)?
                == Some(kip_storage::attrs::ATTR_INDEX_VERSION);
        if !current {
            store.reindex(&mut |_, _| {})?;
        }
        Ok(store)
    }

    /// The database (`user@host:port/dbname`) and schema, without the password.
    pub fn describe(&self) -> String {
        format!("{} (schema {})", self.shown, self.schema)
    }

    fn read_meta_u64(&self, key: &str) -> StoreResult<Option<u64>> {
        let mut out = None;
        self.read_with(&mut |r| {
            out = kip_storage::meta_u64(r, key)?;
            Ok(())
        })?;
        Ok(out)
    }

    /// A pooled connection with a transaction begun by `begin` (statements without
    /// parameters; the two-column rows they return come back as text), retried on a
    /// new connection when the pooled one turns out to be lost.
    fn begin_rows(&self, begin: &str) -> StoreResult<(Txn, conn::TextRows)> {
        let mut last = None;
        for _ in 0..3 {
            let mut conn = self.pool.get().map_err(|e| {
                StoreError::Other(format!("no PostgreSQL connection to {}: {e}", self.shown))
            })?;
            match conn.batch_rows(begin) {
                Ok(rows) => return Ok((Txn { conn, open: true }, rows)),
                Err(e) if conn.client.is_closed() => last = Some(e),
                Err(e) => {
                    // Whatever state the session is in, it is not reused.
                    let _ = conn.batch("ROLLBACK");
                    return Err(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| StoreError::Other("no PostgreSQL connection".into())))
    }

    fn begin(&self, begin: &str) -> StoreResult<Txn> {
        self.begin_rows(begin).map(|(t, _)| t)
    }

    /// Runs `f` on a read-only snapshot (`REPEATABLE READ, READ ONLY`).
    /// The key cache's [`keys::View`] is read in the `BEGIN` round trip (it takes the
    /// snapshot).
    fn read_tx(&self, f: impl FnOnce(&PgTx<'_>) -> StoreResult<()>) -> StoreResult<()> {
        let (mut t, rows) = if self.keys.is_on() {
            self.begin_rows(&format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; {}",
                key_view_sql()
            ))?
        } else {
            (
                self.begin("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")?,
                Vec::new(),
            )
        };
        let mut tx = PgTx::new(&mut t.conn);
        tx.ahead.on = true;
        if let Some(view) = key_view(&rows) {
            tx.share_keys(&self.keys, view);
        }
        let r = f(&tx);
        let end = t.finish(r.is_ok());
        r.and(end)
    }

    /// Runs `f` on a write transaction's [`PgTx`] and commits when it returns true.
    /// The `BEGIN` round trip also takes the writers' lock and reads what every write
    /// needs first (whether embedding marks are on, the id counters).
    fn write_tx(&self, f: &mut dyn FnMut(&mut PgTx<'_>) -> StoreResult<bool>) -> StoreResult<()> {
        let [c, p] = tx::LAST_IDS;
        let (mut t, rows) = self.begin_rows(&format!(
            "BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = '{}s'; \
             SELECT pg_advisory_xact_lock({}); \
             SELECT 'vectors_on', NULL FROM kip_meta WHERE key = convert_to('{}', 'UTF8') \
             UNION ALL SELECT convert_from(key, 'UTF8'), n::text FROM kip_stats \
             WHERE key IN (convert_to('{p}', 'UTF8')); {}",
            self.write_wait,
            self.write_lock,
            kip_storage::VECTORS_ON,
            key_view_sql(),
        ))?;
        let view = key_view(&rows);
        let mut vectors_on = false;
        let mut last = [0u64; 2];
        for (k, v) in rows {
            let n = || {
                v.as_deref()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            if k == kip_storage::VECTORS_ON {
                vectors_on = true;
            } else if k == c {
                last[0] = n();
            } else if k == p {
                last[1] = n();
            }
        }
        let (keep, epoch_after, known) = {
            let mut tx = PgTx::new(&mut t.conn);
            tx.preloaded(vectors_on, last);
            if let Some(view) = view {
                tx.share_keys(&self.keys, view);
            }
            let keep = f(&mut tx)?;
            let mut epoch_after = None;
            if keep {
                kip_storage::history::finish(&mut tx)?;
                tx.flush()?;
                // Keys removed: the triggers raised the epoch; what the commit leaves.
                if tx.removed_keys > 0 && view.is_some() {
                    epoch_after = Some(tx.stored_stat(keys::KEY_EPOCH)?);
                }
            }
            (keep, epoch_after, tx.take_keys())
        };
        t.finish(keep)?;
        // Committed: what the transaction knows of keys holds under the epoch its
        // commit produced.
        if let (true, Some(view)) = (keep, view) {
            let after = keys::Token {
                epoch: epoch_after.unwrap_or(view.token.epoch),
                ..view.token
            };
            self.keys.committed(after, known.iter());
        }
        Ok(())
    }
}

/// Creates or upgrades the tables in the connection's current schema; returns the
/// schema's name.
fn migrate(conn: &mut Conn) -> StoreResult<String> {
    let row = conn.query_opt("SELECT current_schema()", &[])?;
    let schema: Option<String> = match row {
        Some(r) => conn::get(&r, 0)?,
        None => None,
    };
    let Some(schema) = schema else {
        return Err(StoreError::Other(
            "the connection's search_path names no existing schema: create it, or set options=-csearch_path=<schema> in the URL".into(),
        ));
    };
    conn.batch(&format!(
        "BEGIN; SELECT pg_advisory_xact_lock({}); \
         CREATE TABLE IF NOT EXISTS kip_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
        lock_key("kip-migrate", &schema)
    ))?;
    let result = (|| {
        let row = conn.query_opt("SELECT coalesce(max(version), 0) FROM kip_migrations", &[])?;
        let have: i32 = match row {
            Some(r) => conn::get(&r, 0)?,
            None => 0,
        };
        if have > schema::latest() {
            return Err(StoreError::Other(format!(
                "the database's kip schema is at version {have}, newer than this kip knows ({}): upgrade kip",
                schema::latest()
            )));
        }
        for (version, sql) in schema::MIGRATIONS.iter().filter(|m| m.0 > have) {
            conn.batch(sql)?;
            conn.execute(
                "INSERT INTO kip_migrations (version) VALUES ($1)",
                &[version],
            )?;
            tracing::info!(version, schema = %schema, "applied kip schema migration");
        }
        Ok(())
    })();
    match result {
        Ok(()) => conn.batch("COMMIT")?,
        Err(e) => {
            let _ = conn.batch("ROLLBACK");
            return Err(e);
        }
    }
    Ok(schema)
}

impl Backend for PgStore {
    fn read_with(&self, f: &mut dyn FnMut(&dyn GraphRead) -> StoreResult<()>) -> StoreResult<()> {
        self.read_tx(|tx| f(tx))
    }

    fn write_with(
        &self,
        f: &mut dyn FnMut(&mut dyn GraphWrite) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        self.write_tx(&mut |tx| f(tx))
    }

    fn kind(&self) -> &'static str {
        "postgresql"
    }

    fn location(&self) -> String {
        self.describe()
    }

    fn reindex(&self, progress: &mut dyn FnMut(u64, u64)) -> StoreResult<()> {
        self.write_tx(&mut |tx| {
            tx.rebuild_indexes(progress)?;
            Ok(true)
        })
    }

    fn check_storage(&self) -> StoreResult<Vec<String>> {
        let mut problems = Vec::new();
        let mut t = self.begin("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")?;
        let row = t
            .conn
            .query_opt("SELECT coalesce(max(version), 0) FROM kip_migrations", &[])?;
        let have: i32 = match row {
            Some(r) => conn::get(&r, 0)?,
            None => 0,
        };
        if have != schema::latest() {
            problems.push(format!(
                "the kip schema is at version {have}, this kip expects {}",
                schema::latest()
            ));
        }
        for (table, key) in [("kip_concepts", tx::CONCEPTS), ("kip_props", tx::PROPS)] {
            let row = t.conn.query_opt(
                &format!(
                    "SELECT (SELECT count(*) FROM {table}), \
                     coalesce((SELECT n FROM kip_stats WHERE key = $1), 0)"
                ),
                &[&key.as_bytes()],
            )?;
            if let Some(r) = row {
                let (rows, counted): (i64, i64) = (conn::get(&r, 0)?, conn::get(&r, 1)?);
                if rows != counted {
                    problems.push(format!(
                        "{table} holds {rows} rows but its count says {counted}"
                    ));
                }
            }
        }
        t.finish(true)?;
        Ok(problems)
    }

    fn path(&self) -> Option<&Path> {
        None
    }

    fn storage_usage(&self) -> StoreResult<kip_storage::usage::StorageUsage> {
        self.usage()
    }

    fn audit_append(
        &self,
        records: &[(u64, Vec<u8>)],
        keep: kip_storage::backend::AuditKeep,
        _durable: bool,
    ) -> StoreResult<()> {
        // Several processes append to one log, each numbering its records from what it
        // read at start: under the log's own lock, a record whose number is taken
        // already gets the next free one (and its `id` says so).
        let (mut t, rows) = self.begin_rows(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock({}); \
             SELECT 'max', coalesce(max(seq), 0)::text FROM kip_audit",
            self.audit_lock
        ))?;
        let mut top: u64 = rows
            .iter()
            .find(|(k, _)| k == "max")
            .and_then(|(_, v)| v.as_deref()?.parse().ok())
            .unwrap_or(0);
        let mut renumbered = Vec::with_capacity(records.len());
        for (seq, bytes) in records {
            if *seq > top {
                top = *seq;
                renumbered.push((*seq, bytes.clone()));
            } else {
                top += 1;
                renumbered.push((top, with_id(bytes, top)));
            }
        }
        // The count kept is counted in the log's numbering (after renumbering), so a
        // process whose own numbering lags behind does not keep more than asked.
        let drop_below = keep.cut(top);
        {
            let mut tx = PgTx::new(&mut t.conn);
            tx.audit_append(&renumbered, drop_below)?;
        }
        t.finish(true)
    }

    fn audit_rewrite(&self, records: &[(u64, Vec<u8>)]) -> StoreResult<()> {
        let mut seqs = Vec::with_capacity(records.len());
        let mut recs: Vec<&[u8]> = Vec::with_capacity(records.len());
        for (seq, bytes) in records {
            seqs.push(i64::try_from(*seq).unwrap_or(i64::MAX));
            recs.push(bytes);
        }
        self.write_tx(&mut |tx| {
            tx.audit_rewrite(&seqs, &recs)?;
            Ok(true)
        })
    }

    fn audit_range(
        &self,
        lo: u64,
        hi: u64,
        rev: bool,
        f: &mut dyn FnMut(u64, &[u8]) -> StoreResult<bool>,
    ) -> StoreResult<()> {
        self.read_tx(|tx| tx.audit_range(lo, hi, rev, f))
    }
}

/// Creates a new, empty schema named `<prefix>_<process>_<n>` in the database at `url`
/// and returns the URL of a nexus in it: for tests (each gets a memory of its own in
/// one database).
#[doc(hidden)]
pub fn scratch_schema(url: &str, prefix: &str) -> StoreResult<String> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    fresh_schema(url, &format!("{prefix}_{}_{n}", std::process::id()))
}

/// Whether the database at `url` holds a kip memory: the tables of one in the
/// connection's current schema. (A command that only reads or maintains a memory
/// refuses a database without one, as it refuses a directory without a database file:
/// a mistyped schema or database name must not look like an empty memory.)
pub fn memory_exists(url: &str) -> StoreResult<bool> {
    let mut conn = r2d2::ManageConnection::connect(&manager(url)?).map_err(|e| {
        StoreError::Other(format!("cannot connect to PostgreSQL: {}", conn::chain(&e)))
    })?;
    let rows = conn.batch_rows("SELECT 'm', (to_regclass('kip_migrations') IS NOT NULL)::text")?;
    Ok(rows.first().and_then(|r| r.1.as_deref()) == Some("true"))
}

/// Creates the schema `name` unless it exists and returns the URL of a nexus in it:
/// for tests. `name` must be a plain identifier (letters, digits, `_`).
#[doc(hidden)]
pub fn ensure_schema(url: &str, name: &str) -> StoreResult<String> {
    schema_sql(url, name, &format!("CREATE SCHEMA IF NOT EXISTS {name}"))
}

/// Drops the schema `name` (with everything in it) if it exists, creates it empty and
/// returns the URL of a nexus in it: for benchmarks and tests. `name` must be a plain
/// identifier (letters, digits, `_`).
#[doc(hidden)]
pub fn fresh_schema(url: &str, name: &str) -> StoreResult<String> {
    schema_sql(
        url,
        name,
        &format!("DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}"),
    )
}

/// Runs `sql` about the schema `name` (checked to be a plain identifier) and returns
/// the URL of a nexus in it.
/// Creates the schema `name` afresh and runs `sql` (the `pg_dump` of a schema written
/// by an earlier release, its objects qualified by `name`: for the old-format tests).
/// Returns the URL of the memory in it.
#[doc(hidden)]
pub fn restore_schema(url: &str, name: &str, sql: &str) -> StoreResult<String> {
    fresh_schema(url, name)?;
    schema_sql(url, name, sql)
}

fn schema_sql(url: &str, name: &str, sql: &str) -> StoreResult<String> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(StoreError::Other(format!(
            "not a plain schema name: {name}"
        )));
    }
    let mut conn = r2d2::ManageConnection::connect(&manager(url)?).map_err(|e| {
        StoreError::Other(format!("cannot connect to PostgreSQL: {}", conn::chain(&e)))
    })?;
    conn.batch(sql)?;
    Ok(url_with_schema(url, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_keys_keep_their_order_in_a_signed_column() {
        use kip_storage::ElemRef;
        let keys = [
            ElemRef::Concept(1),
            ElemRef::Concept(2),
            ElemRef::Concept(u64::MAX >> 1),
            ElemRef::Prop(1),
            ElemRef::Prop(7),
            ElemRef::Prop(u64::MAX >> 1),
        ];
        for w in keys.windows(2) {
            let (a, b) = (w[0].encode(), w[1].encode());
            assert!(a < b && tx::ek(a) < tx::ek(b), "{:?} {:?}", w[0], w[1]);
            assert_eq!(tx::uk(tx::ek(a)), a);
        }
        // Concept n is stored as n + i64::MIN, proposition n as n (the SQL that marks
        // every element relies on it).
        assert_eq!(tx::ek(ElemRef::Concept(5).encode()), i64::MIN + 5);
        assert_eq!(tx::ek(ElemRef::Prop(5).encode()), 5);
    }

    #[test]
    fn advisory_lock_keys_differ_per_schema_and_purpose() {
        assert_eq!(lock_key("kip-write", "a"), lock_key("kip-write", "a"));
        assert_ne!(lock_key("kip-write", "a"), lock_key("kip-write", "b"));
        assert_ne!(lock_key("kip-write", "a"), lock_key("kip-migrate", "a"));
    }
}
