//! `Backend::storage_usage` for PostgreSQL: every table of the schema and each of its
//! indexes, as the server sizes them (`pg_relation_size`), with exact row counts.

use crate::{conn, PgStore};
use kip_storage::usage::{StorageUsage, TableUsage};
use kip_storage::StoreResult;

/// The schema's relations: a table's main fork (stored), its free-space and
/// visibility maps and TOAST (metadata); an index's pages (stored), with the name of
/// its table (whose exact row count is its number of entries: kip's indexes are
/// neither partial nor expression indexes). Tables come first.
const RELATIONS: &str = "SELECT c.relname::text, c.relkind::text, \
       pg_relation_size(c.oid, 'main'), \
       pg_relation_size(c.oid, 'fsm') + pg_relation_size(c.oid, 'vm') \
         + coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0), \
       coalesce((SELECT t.relname::text FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid \
                 WHERE i.indexrelid = c.oid), c.relname::text) \
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
     WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i') \
     ORDER BY c.relkind DESC, c.relname";

impl PgStore {
    /// What the schema takes: each table and index, biggest first; the total is the
    /// sum of the tables' `pg_total_relation_size` (indexes and TOAST included).
    pub(crate) fn usage(&self) -> StoreResult<StorageUsage> {
        let mut t = self.begin("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")?;
        let mut tables = Vec::new();
        let mut rows_of: std::collections::HashMap<String, i64> = Default::default();
        for row in t.conn.query(RELATIONS, &[])? {
            let name: String = conn::get(&row, 0)?;
            let kind: String = conn::get(&row, 1)?;
            let main: i64 = conn::get(&row, 2)?;
            let around: i64 = conn::get(&row, 3)?;
            let table: String = conn::get(&row, 4)?;
            let entries = if kind == "r" {
                // The name comes from the catalogue of this schema; quoted as an
                // identifier all the same.
                let quoted = format!("\"{}\"", name.replace('"', "\"\""));
                let counted = t
                    .conn
                    .query_opt(&format!("SELECT count(*) FROM {quoted}"), &[])?;
                let rows = match counted {
                    Some(r) => conn::get::<i64>(&r, 0)?,
                    None => 0,
                };
                rows_of.insert(name.clone(), rows);
                rows
            } else {
                rows_of.get(&table).copied().unwrap_or(0)
            };
            tables.push(TableUsage {
                name,
                entries: u64::try_from(entries).unwrap_or(0),
                stored_bytes: u64::try_from(main).unwrap_or(0),
                metadata_bytes: u64::try_from(around).unwrap_or(0),
                fragmented_bytes: 0,
            });
        }
        t.finish(true)?;
        tables.sort_by_key(|t| std::cmp::Reverse(t.total_bytes()));
        let total_bytes = tables.iter().map(TableUsage::total_bytes).sum();
        Ok(StorageUsage {
            tables,
            files: Vec::new(),
            total_bytes,
        })
    }
}
