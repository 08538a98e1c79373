//! `Backend::storage_usage` for the embedded store: redb's own statistics per table,
//! and the two files of the data directory.

use super::{lock, Store, DB_FILE, WAL_FILE};
use crate::{storage_error, StoreResult};
use kip_storage::usage::{FileUsage, StorageUsage, TableUsage};
use redb::{ReadableDatabase, ReadableTableMetadata};
use std::os::unix::fs::MetadataExt;

impl Store {
    /// What the store takes, by table (stored, branch and fragmented bytes as redb
    /// counts them) and by file (the database file with the bytes of its allocated
    /// pages, the write-ahead log with the bytes not yet checkpointed).
    pub fn storage_usage(&self) -> StoreResult<StorageUsage> {
        let mut tables = Vec::new();
        let txn = self.db.begin_read().map_err(storage_error)?;
        for handle in txn.list_tables().map_err(storage_error)? {
            let table = txn.open_untyped_table(handle).map_err(storage_error)?;
            let stats = table.stats().map_err(storage_error)?;
            tables.push(TableUsage {
                name: redb::TableHandle::name(&table).to_string(),
                entries: table.len().map_err(storage_error)?,
                stored_bytes: stats.stored_bytes(),
                metadata_bytes: stats.metadata_bytes(),
                fragmented_bytes: stats.fragmented_bytes(),
            });
        }
        drop(txn);
        tables.sort_by_key(|t| std::cmp::Reverse(t.total_bytes()));
        // The allocated pages: a write transaction that changes nothing, taken as
        // every writer takes one (the gate first), then aborted.
        let allocated = self.allocated_bytes()?;
        let mut files = Vec::new();
        if let Some(dir) = &self.path {
            // The length, and the blocks the file system gave it (holes take none).
            let size = |name: &str| {
                std::fs::metadata(dir.join(name))
                    .map_or((0, 0), |m| (m.len(), m.blocks().saturating_mul(512)))
            };
            let (bytes, disk_bytes) = size(DB_FILE);
            files.push(FileUsage {
                name: DB_FILE.into(),
                bytes,
                disk_bytes,
                used_bytes: allocated,
            });
            if self.wal.is_some() {
                let (bytes, disk_bytes) = size(WAL_FILE);
                files.push(FileUsage {
                    name: WAL_FILE.into(),
                    bytes,
                    disk_bytes,
                    used_bytes: self.wal_len(),
                });
            }
        }
        let total_bytes = if files.is_empty() {
            allocated
        } else {
            files.iter().map(|f| f.bytes).sum()
        };
        Ok(StorageUsage {
            tables,
            files,
            total_bytes,
        })
    }
}

impl Store {
    /// The bytes of the database file's allocated pages: read in a write transaction
    /// that changes nothing, taken as every writer takes one (the gate first), then
    /// aborted.
    fn allocated_bytes(&self) -> StoreResult<u64> {
        let _gate = lock(&self.gate);
        let txn = self.db.begin_write().map_err(storage_error)?;
        let stats = txn.stats().map_err(storage_error);
        txn.abort().map_err(storage_error)?;
        let stats = stats?;
        Ok(stats
            .allocated_pages()
            .saturating_mul(stats.page_size() as u64))
    }

    /// The database file's size on disk (0 for a store without files).
    fn file_bytes(&self) -> u64 {
        self.path
            .as_ref()
            .and_then(|d| std::fs::metadata(d.join(DB_FILE)).ok())
            .map_or(0, |m| m.len())
    }

    /// Gives the database file's free pages back to the file system: checkpoints (so
    /// the log is empty and every index entry is in its table), then lets redb move
    /// the pages in use to the front of the file and cut it. Needs the store to
    /// itself (`&mut`: no read or write under way). Returns the file's size before and
    /// after, in bytes.
    ///
    /// Not done on its own: below 4 GiB redb doubles the file whenever it needs a page
    /// more (the new half is sparse: it takes no disk blocks until written), so the
    /// first write after a compaction doubles the file again. Worth it after a mass
    /// delete, or before copying the file somewhere that does not keep holes.
    pub fn compact(&mut self) -> StoreResult<(u64, u64)> {
        self.checkpoint()?;
        let before = self.file_bytes();
        self.db.compact().map_err(storage_error)?;
        Ok((before, self.file_bytes()))
    }
}
