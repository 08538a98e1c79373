//! What a store takes on disk, table by table: the measurement behind the footprint
//! figures (`kip storage stats`, docs/storage.md §6). Each backend reports in its own
//! terms (redb: the bytes its B-trees store, their branch pages and their fragmented
//! space; PostgreSQL: the relations' sizes with their indexes); the engine adds the
//! element counts that turn them into bytes per concept and per link.

use serde::Serialize;

/// One table (or index) of a store.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TableUsage {
    /// The table's name in the backend (`concepts`, `kip_props`, `kip_props_pkey`, ...).
    pub name: String,
    /// Entries (rows, keys) it holds; an estimate where the backend keeps no count.
    pub entries: u64,
    /// Bytes of the keys and values themselves (redb), or of the relation (PostgreSQL).
    pub stored_bytes: u64,
    /// Bytes of the structure around them: branch pages and page headers (redb),
    /// TOAST and free-space maps (PostgreSQL).
    pub metadata_bytes: u64,
    /// Bytes of pages the table holds but does not fill.
    pub fragmented_bytes: u64,
}

impl TableUsage {
    /// Everything the table takes: stored, metadata and fragmented bytes.
    pub fn total_bytes(&self) -> u64 {
        self.stored_bytes
            .saturating_add(self.metadata_bytes)
            .saturating_add(self.fragmented_bytes)
    }
}

/// One file of a store on local files.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FileUsage {
    /// The file's name in the data directory.
    pub name: String,
    /// Its length, in bytes (what `ls -l` and `du -b` show).
    pub bytes: u64,
    /// The disk blocks the file system gave it, in bytes (what `du` shows): less than
    /// its length when it has holes (redb grows its file ahead of use, sparsely).
    pub disk_bytes: u64,
    /// Of those, the bytes in use (a write-ahead log is preallocated and cut back at
    /// checkpoints; a database file keeps the pages it freed).
    pub used_bytes: u64,
}

/// What a store takes, by table and by file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StorageUsage {
    /// Its tables and indexes, in the backend's order.
    pub tables: Vec<TableUsage>,
    /// Its files (empty for a database server or memory).
    pub files: Vec<FileUsage>,
    /// Bytes in all: the files' lengths, or the schema's relations.
    pub total_bytes: u64,
}
