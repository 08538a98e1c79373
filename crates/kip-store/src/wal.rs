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
//!    then emptied: the next record is written at offset 0 again. Checkpoints run when
//!    the log grows past a bound and on close.
//! 4. On open, records with a sequence number above the `wal_seq` of the last durable
//!    state are applied again, in order, in one transaction, then checkpointed.
//!
//! A record is `magic (4) | payload length (4) | sequence (8) | crc32 of sequence and
//! payload (4) | payload`. The log is read from offset 0 and ends at the first record that
//! is torn, corrupt, zero (preallocated space) or not numbered one after the previous
//! (left from before the last checkpoint: every such record is at most the checkpoint's
//! number, so it is never taken for a newer one). A torn or corrupt record can only be
//! the last one written, since each append is synced before the next starts.
//!
//! So a bad record followed by a valid *newer* one (a flipped byte mid-log, a damaged
//! sector) is corruption, not a torn tail: the rest of the file is searched for valid
//! records after the point where reading stopped ([`Wal::damage`]), and the nexus
//! refuses to open when one of them is newer than everything it would keep, instead of
//! silently dropping acknowledged writes. `kip recover --salvage-wal` opens it anyway
//! as of the last good record, after keeping a copy of the damaged log.
//!
//! The file is kept and grown in zero-filled steps ahead of the records, so an append
//! overwrites allocated space and its `fdatasync` does not also journal a new file size
//! (about 130 us instead of 170 us per write on the project's VM).

use super::{storage_error, StoreError, StoreResult};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

const MAGIC: u32 = 0x4c41_574b; // "KWAL" little-endian
const HEADER: usize = 20;
/// The file is grown by this many zero bytes when less than half of it is left free.
const GROW: u64 = 4 << 20;

/// One record read back from the log.
#[derive(Debug)]
pub struct Record {
    /// Its sequence number (consecutive, starting after the last checkpoint).
    pub seq: u64,
    /// The operation log of one transaction.
    pub payload: Vec<u8>,
}

/// Where reading the log stopped, and the valid records found beyond that point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Byte offset of the first record that could not be read.
    pub offset: u64,
    /// Sequence numbers of the valid records found after it (by their checksums),
    /// highest first; empty for a clean end.
    pub later: Vec<u64>,
}

impl Damage {
    /// The highest sequence number found after the stop.
    pub fn newest(&self) -> Option<u64> {
        self.later.first().copied()
    }
}

/// An open write-ahead log file.
#[derive(Debug)]
pub struct Wal {
    file: Box<dyn LogFile>,
    path: PathBuf,
    /// End of the records (where the next one goes).
    len: u64,
    /// Size of the file (records, then zeros or records from before a checkpoint).
    size: u64,
    /// Set by a failed append: after a failed write or sync the file's state on disk is
    /// not known (the kernel may have dropped the pages), so no later record may be
    /// appended behind it; writes are refused until a restart replays what is valid.
    failed: Option<String>,
    /// When the first record after the last reset was appended.
    first_append: Option<std::time::Instant>,
    /// What lies after the last record read at open.
    damage: Damage,
}

/// The storage under a write-ahead log: its file, or a simulated disk
/// ([`crate::crashsim`]) in the power-loss tests.
pub trait LogFile: Send + std::fmt::Debug {
    /// The whole contents.
    fn read_all(&mut self) -> std::io::Result<Vec<u8>>;
    /// Writes `data` at `offset` (durable only after [`LogFile::sync`]).
    fn write_at(&mut self, offset: u64, data: &[u8]) -> std::io::Result<()>;
    /// Makes every write so far durable (data and the file's length).
    fn sync(&mut self) -> std::io::Result<()>;
    /// Sets the length (durable after [`LogFile::sync`]).
    fn set_len(&mut self, len: u64) -> std::io::Result<()>;
}

impl LogFile for File {
    fn read_all(&mut self) -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.seek(SeekFrom::Start(0))?;
        self.read_to_end(&mut bytes)?;
        Ok(bytes)
    }
    fn write_at(&mut self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.seek(SeekFrom::Start(offset))?;
        self.write_all(data)
    }
    fn sync(&mut self) -> std::io::Result<()> {
        // fdatasync also persists a changed file length.
        self.sync_data()
    }
    fn set_len(&mut self, len: u64) -> std::io::Result<()> {
        File::set_len(self, len)
    }
}

/// The records of a log's bytes, up to the first one that is not whole, valid and
/// next in sequence; and what lies after it.
fn parse(bytes: &[u8]) -> (Vec<Record>, Damage) {
    let mut records = Vec::new();
    let mut pos = 0usize;
    while let Some((seq, end)) = record_at(bytes, pos) {
        if records
            .last()
            .is_some_and(|r: &Record| r.seq.checked_add(1) != Some(seq))
        {
            break;
        }
        records.push(Record {
            seq,
            payload: bytes[pos + HEADER..end].to_vec(),
        });
        pos = end;
    }
    let later = scan_after(bytes, pos);
    (
        records,
        Damage {
            offset: pos as u64,
            later,
        },
    )
}

fn crc(seq: u64, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(payload);
    h.finalize()
}

/// The record starting at `pos` of `buf`, if it is whole and its checksum holds:
/// its sequence number and where it ends.
fn record_at(buf: &[u8], pos: usize) -> Option<(u64, usize)> {
    let header = buf.get(pos..pos.checked_add(HEADER)?)?;
    let word =
        |i: usize| u32::from_le_bytes([header[i], header[i + 1], header[i + 2], header[i + 3]]);
    if word(0) != MAGIC {
        return None;
    }
    let len = usize::try_from(word(4)).ok()?;
    let mut seq_bytes = [0u8; 8];
    seq_bytes.copy_from_slice(&header[8..16]);
    let seq = u64::from_le_bytes(seq_bytes);
    let end = pos.checked_add(HEADER)?.checked_add(len)?;
    let payload = buf.get(pos + HEADER..end)?;
    (crc(seq, payload) == word(16)).then_some((seq, end))
}

/// Sequence numbers of the valid records that start after `stop` in `buf` (at any byte
/// offset: the record at `stop` may have a damaged length), highest first.
fn scan_after(buf: &[u8], stop: usize) -> Vec<u64> {
    let magic = MAGIC.to_le_bytes();
    let mut found = Vec::new();
    let mut at = stop.saturating_add(1);
    while at + HEADER <= buf.len() {
        // Skip quickly to the next possible magic (the preallocated tail is zeros).
        match buf[at..].iter().position(|b| *b == magic[0]) {
            Some(i) => at += i,
            None => break,
        }
        if buf.get(at..at + 4) == Some(&magic[..]) {
            if let Some((seq, end)) = record_at(buf, at) {
                found.push(seq);
                at = end;
                continue;
            }
        }
        at += 1;
    }
    found.sort_unstable_by(|a, b| b.cmp(a));
    found
}

impl Wal {
    /// Opens (creating if needed) the log at `path` and returns its records (see the
    /// module documentation for where the log ends).
    pub fn open(path: &Path) -> StoreResult<(Wal, Vec<Record>)> {
        let existed = path.exists();
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            // The log holds the memory's contents: readable by its owner only.
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options
            .open(path)
            .map_err(|e| storage_error(StoreError::io(Some(path), e)))?;
        if !existed {
            // The new file's directory entry must survive a crash too.
            if let Some(dir) = path.parent() {
                if let Ok(d) = File::open(dir) {
                    d.sync_all().map_err(storage_error)?;
                }
            }
        }
        Wal::open_on(Box::new(file), path)
    }

    /// Opens a log on `file` (its records are read back first); `path` names it in
    /// messages. [`Wal::open`] for a file on disk.
    pub fn open_on(mut file: Box<dyn LogFile>, path: &Path) -> StoreResult<(Wal, Vec<Record>)> {
        let bytes = file
            .read_all()
            .map_err(|e| storage_error(StoreError::io(Some(path), e)))?;
        let (records, damage) = parse(&bytes);
        let wal = Wal {
            file,
            path: path.to_path_buf(),
            len: damage.offset,
            size: bytes.len() as u64,
            failed: None,
            first_append: None,
            damage,
        };
        Ok((wal, records))
    }

    /// Reads the log back through its file, as an open would (for the integrity
    /// check of a live log).
    pub fn read_back(&mut self) -> StoreResult<(Vec<Record>, Damage)> {
        let bytes = self
            .file
            .read_all()
            .map_err(|e| storage_error(StoreError::io(Some(&self.path), e)))?;
        Ok(parse(&bytes))
    }

    /// Reads the records of the log at `path` without opening it for writing or
    /// creating it: what [`Wal::open`] would return (for checks of a live log and for
    /// the open-time decision on a directory whose database is missing).
    pub fn read(path: &Path) -> StoreResult<(Vec<Record>, Damage)> {
        let file = File::open(path).map_err(|e| storage_error(StoreError::io(Some(path), e)))?;
        let size = file.metadata().map_err(storage_error)?.len();
        let mut bytes = Vec::new();
        (&file)
            .take(size)
            .read_to_end(&mut bytes)
            .map_err(|e| storage_error(StoreError::io(Some(path), e)))?;
        Ok(parse(&bytes))
    }

    /// Where reading stopped at open and what valid records lie beyond.
    pub fn damage(&self) -> &Damage {
        &self.damage
    }

    /// Bytes in the log.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// How long ago the oldest record in the log was appended (`None` when empty).
    pub fn age(&self) -> Option<std::time::Duration> {
        self.first_append.map(|t| t.elapsed())
    }

    /// Whether the log holds no record.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends one record and syncs it to disk. On failure the log is cut back to where it
    /// was (the record is not part of the log).
    pub fn append(&mut self, seq: u64, payload: &[u8]) -> StoreResult<()> {
        if let Some(why) = &self.failed {
            return Err(StoreError::LogFailed {
                cause: Box::new(StoreError::Other(why.clone())),
                earlier: true,
            });
        }
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
            .write_at(start, &buf)
            .and_then(|()| self.file.sync());
        match written {
            Ok(()) => {
                self.len = start + buf.len() as u64;
                self.first_append
                    .get_or_insert_with(std::time::Instant::now);
                self.size = self.size.max(self.len);
                if self.size - self.len < GROW / 2 {
                    // Not the write's failure: the record is on disk already.
                    if let Err(e) = self.grow() {
                        static WARN: crate::throttle::Throttle =
                            crate::throttle::Throttle::new(std::time::Duration::from_secs(30));
                        if let Some(suppressed) = WARN.allow() {
                            tracing::warn!(
                                suppressed,
                                "write-ahead log {}: cannot preallocate: {e} (logged at most every 30 s)",
                                self.path.display()
                            );
                        }
                    }
                }
                Ok(())
            }
            Err(e) => {
                let _ = self.cut_back(start);
                let cause = StoreError::io(Some(&self.path), e);
                self.failed = Some(cause.to_string());
                Err(StoreError::LogFailed {
                    cause: Box::new(cause),
                    earlier: false,
                })
            }
        }
    }

    /// Appends zeros to the file (durably), so later appends overwrite allocated space.
    fn grow(&mut self) -> std::io::Result<()> {
        let zeros = vec![0u8; 1 << 20];
        let mut at = self.size;
        let mut left = GROW;
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            self.file.write_at(at, &zeros[..n])?;
            at += n as u64;
            left -= n as u64;
        }
        self.file.sync()?;
        self.size += GROW;
        Ok(())
    }

    /// Cuts the log back to `len` bytes, durably: the record that started there is
    /// overwritten with zeros, so it can never be read back.
    pub fn cut_back(&mut self, len: u64) -> StoreResult<()> {
        if len < self.size {
            let n = (self.size - len).min(HEADER as u64) as usize;
            let zeroed = self
                .file
                .write_at(len, &[0u8; HEADER][..n])
                .and_then(|()| self.file.sync());
            if let Err(e) = zeroed {
                self.failed = Some(e.to_string());
                return Err(storage_error(format!(
                    "write-ahead log {}: {e}",
                    self.path.display()
                )));
            }
        }
        self.len = len;
        Ok(())
    }

    /// Empties the log file entirely, durably (after a salvage: records that lay past
    /// the damage must never be read again).
    pub fn wipe(&mut self) -> StoreResult<()> {
        self.file
            .set_len(0)
            .and_then(|()| self.file.sync())
            .map_err(|e| storage_error(StoreError::io(Some(&self.path), e)))?;
        self.len = 0;
        self.size = 0;
        self.first_append = None;
        self.damage = Damage {
            offset: 0,
            later: Vec::new(),
        };
        Ok(())
    }

    /// Empties the log after a checkpoint: the first header is zeroed (so the next open
    /// reads nothing) and the next record goes to offset 0. Should this fail, the records
    /// left are all covered by the checkpoint and the next open skips them.
    ///
    /// A file that grew past one preallocation step (a burst of writes between two
    /// checkpoints, up to the 64 MiB that forces one) is cut back to that step: the
    /// space is the disk's again, and the old records beyond it (data the graph may no
    /// longer hold) are gone from the file. Failing to cut it only keeps the space.
    pub fn reset(&mut self) -> StoreResult<()> {
        if self.len == 0 {
            return Ok(());
        }
        self.cut_back(0)?;
        self.first_append = None;
        if self.size > GROW {
            match self.file.set_len(GROW).and_then(|()| self.file.sync()) {
                Ok(()) => self.size = GROW,
                Err(e) => tracing::warn!(
                    "write-ahead log {}: cannot give back its space after a checkpoint: {e}",
                    self.path.display()
                ),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seqs(path: &Path) -> Vec<u64> {
        let (_, recs) = Wal::open(path).expect("open");
        recs.iter().map(|r| r.seq).collect()
    }

    #[test]
    fn a_reset_gives_back_the_space_of_a_burst_and_the_log_goes_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let (mut wal, _) = Wal::open(&path).expect("open");
        let big = vec![7u8; 1 << 20];
        for seq in 1..=12 {
            wal.append(seq, &big).expect("append");
        }
        let grown = std::fs::metadata(&path).expect("meta").len();
        assert!(grown > 3 * GROW, "the burst grew the file ({grown} bytes)");
        wal.reset().expect("reset");
        assert_eq!(std::fs::metadata(&path).expect("meta").len(), GROW);
        wal.append(13, b"after").expect("append");
        drop(wal);
        assert_eq!(seqs(&path), vec![13]);
    }

    #[test]
    fn records_round_trip_and_a_torn_tail_ends_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let end_of_two;
        {
            let (mut wal, recs) = Wal::open(&path).expect("open");
            assert!(recs.is_empty());
            wal.append(1, b"first").expect("append");
            wal.append(2, b"").expect("append");
            end_of_two = wal.len();
            wal.append(3, &[7u8; 1000]).expect("append");
        }
        assert!(
            std::fs::metadata(&path).expect("meta").len() >= GROW,
            "the file is preallocated"
        );
        // A torn last record: zero a few bytes of its payload.
        let mut bytes = std::fs::read(&path).expect("read");
        let end = end_of_two as usize + HEADER + 1000;
        bytes[end - 3..end].fill(0);
        std::fs::write(&path, &bytes).expect("write");
        let (wal, recs) = Wal::open(&path).expect("reopen");
        assert_eq!(recs.len(), 2);
        assert_eq!(
            (recs[0].seq, recs[0].payload.as_slice()),
            (1, &b"first"[..])
        );
        assert_eq!((recs[1].seq, recs[1].payload.len()), (2, 0));
        assert_eq!(
            wal.len(),
            end_of_two,
            "the next record overwrites the torn one"
        );
    }

    #[test]
    fn a_corrupt_record_ends_the_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let second;
        {
            let (mut wal, _) = Wal::open(&path).expect("open");
            wal.append(1, b"one").expect("append");
            second = wal.len() as usize;
            wal.append(2, b"two").expect("append");
        }
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[second + HEADER] ^= 0xff;
        std::fs::write(&path, &bytes).expect("write");
        assert_eq!(seqs(&path), vec![1]);
    }

    #[test]
    fn after_a_reset_old_records_are_not_read_as_new_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        {
            let (mut wal, _) = Wal::open(&path).expect("open");
            for seq in 1..=3 {
                wal.append(seq, b"same size").expect("append");
            }
            assert!(wal.age().is_some(), "a log with records has an age");
            wal.reset().expect("reset");
            assert!(wal.is_empty());
            assert_eq!(wal.age(), None, "an emptied log has none");
            assert!(seqs(&path).is_empty(), "an empty log reads as empty");
            // Same size as the old records: the next header read is old record 2.
            wal.append(4, b"new record").expect("append");
        }
        assert_eq!(
            seqs(&path),
            vec![4],
            "old record 2 does not follow record 4"
        );
    }

    #[test]
    fn after_a_failed_append_writes_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let (wal, _) = Wal::open(&path).expect("open");
        // The same log on a read-only handle: every write fails.
        let mut wal = Wal {
            file: Box::new(File::open(&path).expect("read-only")),
            ..wal
        };
        let e = wal.append(1, b"x").expect_err("write fails");
        assert!(
            matches!(&e, StoreError::LogFailed { cause, earlier: false } if matches!(**cause, StoreError::Io { .. })),
            "{e:?}"
        );
        assert!(e.to_string().contains("refused until"), "{e}");
        assert_eq!(wal.len(), 0);
        let e = kip_lang::KipError::from(wal.append(1, b"x").expect_err("refused"));
        assert!(e.message.contains("writes are refused"), "{}", e.message);
        assert!(e.hint.as_deref().unwrap_or("").contains("restart"));
    }

    #[test]
    fn a_cut_back_record_is_gone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        {
            let (mut wal, _) = Wal::open(&path).expect("open");
            wal.append(1, b"kept").expect("append");
            let start = wal.len();
            wal.append(2, b"failed commit").expect("append");
            wal.cut_back(start).expect("cut back");
            assert_eq!(wal.len(), start);
        }
        assert_eq!(seqs(&path), vec![1]);
    }
}
