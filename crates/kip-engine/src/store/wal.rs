//! The write-ahead log: what makes a small write durable with one sequential append and
//! one `fdatasync` instead of a redb durable commit (which writes every dirty B-tree
//! page of every table the write touched, scattered over the file, then syncs).
//!
//! Protocol (driven by the nexus, which holds redb's single write transaction while it
//! appends, so the log order is the commit order):
//!
//! 1. A write transaction records its changes as an operation log (see
//!    [`super::WriteTables`]) and stores its sequence number in `meta` (`wal_seq`).
//! 2. The log record is appended here and synced; only then is the redb transaction
//!    committed, without durability (in memory; redb keeps the dirty pages buffered).
//! 3. A checkpoint (a durable redb commit) makes everything before it durable; the log is
//!    then emptied. Checkpoints run when the log grows past a bound and on close.
//! 4. On open, records with a sequence number above the `wal_seq` of the last durable
//!    state are applied again, in order, in one transaction, then checkpointed.
//!
//! A record is `magic (4) | payload length (4) | sequence (8) | crc32 of sequence and
//! payload (4) | payload`. A torn or corrupt record can only be the last one (each append
//! is synced before the next starts), so reading stops there and the tail is cut off.

use super::{storage_error, StoreResult};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const MAGIC: u32 = 0x4c41_574b; // "KWAL" little-endian
const HEADER: usize = 20;

/// One record read back from the log.
#[derive(Debug)]
pub struct Record {
    /// Its sequence number (consecutive, starting after the last checkpoint).
    pub seq: u64,
    /// The operation log of one transaction.
    pub payload: Vec<u8>,
}

/// An open write-ahead log file.
#[derive(Debug)]
pub struct Wal {
    file: File,
    path: PathBuf,
    len: u64,
}

fn crc(seq: u64, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(payload);
    h.finalize()
}

impl Wal {
    /// Opens (creating if needed) the log at `path` and returns its valid records; a torn
    /// tail is cut off.
    pub fn open(path: &Path) -> StoreResult<(Wal, Vec<Record>)> {
        let existed = path.exists();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| storage_error(format!("write-ahead log {}: {e}", path.display())))?;
        if !existed {
            // The new file's directory entry must survive a crash too.
            if let Some(dir) = path.parent() {
                if let Ok(d) = File::open(dir) {
                    d.sync_all().map_err(storage_error)?;
                }
            }
        }
        let size = file.metadata().map_err(storage_error)?.len();
        let mut records = Vec::new();
        let mut pos = 0u64;
        let mut header = [0u8; HEADER];
        let mut reader = std::io::BufReader::new(&file);
        while pos + HEADER as u64 <= size {
            if reader.read_exact(&mut header).is_err() {
                break;
            }
            let word = |i: usize| {
                u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]])
            };
            let (magic, len, sum) = (word(0), word(4), word(16));
            let mut seq_bytes = [0u8; 8];
            seq_bytes.copy_from_slice(&header[8..16]);
            let seq = u64::from_le_bytes(seq_bytes);
            let end = pos + HEADER as u64 + u64::from(len);
            if magic != MAGIC || end > size {
                break;
            }
            let mut payload = vec![0u8; len as usize];
            if reader.read_exact(&mut payload).is_err() || crc(seq, &payload) != sum {
                break;
            }
            records.push(Record { seq, payload });
            pos = end;
        }
        drop(reader);
        let mut wal = Wal {
            file,
            path: path.to_path_buf(),
            len: size,
        };
        if pos < size {
            tracing::warn!(
                "write-ahead log {}: cutting off {} bytes of an unfinished record",
                path.display(),
                size - pos
            );
            wal.truncate(pos)?;
        }
        Ok((wal, records))
    }

    /// Bytes in the log.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the log holds no record.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends one record and syncs it to disk. On failure the log is cut back to where it
    /// was (the record is not part of the log).
    pub fn append(&mut self, seq: u64, payload: &[u8]) -> StoreResult<()> {
        let len = u32::try_from(payload.len())
            .map_err(|_| storage_error("a write-ahead log record over 4 GiB"))?;
        let mut buf = Vec::with_capacity(HEADER + payload.len());
        buf.extend_from_slice(&MAGIC.to_le_bytes());
        buf.extend_from_slice(&len.to_le_bytes());
        buf.extend_from_slice(&seq.to_le_bytes());
        buf.extend_from_slice(&crc(seq, payload).to_le_bytes());
        buf.extend_from_slice(payload);
        let start = self.len;
        let written = self
            .file
            .seek(SeekFrom::Start(start))
            .and_then(|_| self.file.write_all(&buf))
            .and_then(|()| self.file.sync_data());
        match written {
            Ok(()) => {
                self.len = start + buf.len() as u64;
                Ok(())
            }
            Err(e) => {
                let _ = self.truncate(start);
                Err(storage_error(format!(
                    "write-ahead log {}: {e}",
                    self.path.display()
                )))
            }
        }
    }

    /// Cuts the log back to `len` bytes (durably).
    pub fn truncate(&mut self, len: u64) -> StoreResult<()> {
        self.file.set_len(len).map_err(storage_error)?;
        self.file.sync_all().map_err(storage_error)?;
        self.len = len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        {
            let (mut wal, recs) = Wal::open(&path).expect("open");
            assert!(recs.is_empty());
            wal.append(1, b"first").expect("append");
            wal.append(2, b"").expect("append");
            wal.append(3, &[7u8; 1000]).expect("append");
        }
        let full = std::fs::metadata(&path).expect("meta").len();
        // A torn last record: cut a few bytes off its end.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        f.set_len(full - 3).expect("set_len");
        drop(f);
        let (wal, recs) = Wal::open(&path).expect("reopen");
        assert_eq!(recs.len(), 2);
        assert_eq!(
            (recs[0].seq, recs[0].payload.as_slice()),
            (1, &b"first"[..])
        );
        assert_eq!((recs[1].seq, recs[1].payload.len()), (2, 0));
        assert_eq!(wal.len(), std::fs::metadata(&path).expect("meta").len());
    }

    #[test]
    fn a_corrupt_record_ends_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        {
            let (mut wal, _) = Wal::open(&path).expect("open");
            wal.append(1, b"one").expect("append");
            wal.append(2, b"two").expect("append");
        }
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).expect("write");
        let (_, recs) = Wal::open(&path).expect("reopen");
        assert_eq!(recs.len(), 1);
        assert_eq!(recs[0].payload, b"one");
    }
}
