//! A simulated disk for power-loss and fault-injection tests, in the spirit of redb's
//! own crash-consistency tests.
//!
//! Killing a process keeps the operating system's page cache, so writes that were never
//! synced survive a `kill -9` and a crash test with real files never loses them. A
//! [`Disk`] models what a power loss does instead: each file keeps the bytes made
//! durable by its last successful sync, and every write or length change since then is
//! pending. [`Disk::power_loss`] builds the disk as it could be found after the power
//! came back: the durable bytes plus an arbitrary subset of the pending changes (a disk
//! may reorder writes between syncs), some of them torn at a 512-byte sector boundary.
//!
//! A [`SimFile`] is one file on the disk; it serves as redb's storage backend
//! ([`redb::StorageBackend`]) and as the write-ahead log's file ([`LogFile`]), and
//! [`crate::db::Store::open_simulated`] opens a store on two of them. Faults: the power
//! can be cut after a given number of I/O operations ([`Disk::crash_after`]: that one
//! and every later one fail, as if the machine stopped there), and writes and syncs of
//! one file can be made to fail with EIO or ENOSPC ([`Disk::inject`]).

use crate::wal::LogFile;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

/// A fault to inject into one file's writes and syncs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// An I/O error (EIO).
    Io,
    /// No space left on the device (ENOSPC).
    NoSpace,
}

#[derive(Debug, Clone)]
enum Change {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Debug, Clone, Default)]
struct FileState {
    /// What survives a power loss for sure (shared with `current` and with other disks
    /// until one of them is written: the images are copied on write).
    durable: Arc<Vec<u8>>,
    /// What the running process sees.
    current: Arc<Vec<u8>>,
    /// Changes since the last successful sync, in order.
    pending: Vec<Change>,
    /// Writes and syncs fail with this while it is set.
    fault: Option<Fault>,
}

#[derive(Debug, Default)]
struct DiskState {
    files: Vec<FileState>,
    /// Write, length and sync operations done so far.
    ops: u64,
    /// The operations that succeed before the power fails.
    crash_at: Option<u64>,
    /// The power has failed: every operation fails from then on.
    dead: bool,
}

/// A simulated disk holding any number of files. Cloning shares the disk.
#[derive(Debug, Clone, Default)]
pub struct Disk {
    state: Arc<Mutex<DiskState>>,
}

/// One file on a [`Disk`].
#[derive(Debug, Clone)]
pub struct SimFile {
    disk: Disk,
    index: usize,
}

/// A small deterministic generator (SplitMix64) for the choices of a power loss.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

const SECTOR: usize = 512;

fn apply(bytes: &mut Vec<u8>, change: &Change) {
    match change {
        Change::Write(offset, data) => {
            let start = usize::try_from(*offset).unwrap_or(usize::MAX);
            let end = start.saturating_add(data.len());
            if bytes.len() < end {
                bytes.resize(end, 0);
            }
            bytes[start..end].copy_from_slice(data);
        }
        Change::SetLen(len) => bytes.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
    }
}

fn error(fault: Fault) -> io::Error {
    match fault {
        Fault::Io => io::Error::from_raw_os_error(5),
        Fault::NoSpace => io::Error::from_raw_os_error(28),
    }
}

fn power_is_off() -> io::Error {
    io::Error::other("simulated power loss: the disk is gone")
}

impl Disk {
    /// An empty disk.
    pub fn new() -> Disk {
        Disk::default()
    }

    fn lock(&self) -> MutexGuard<'_, DiskState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new empty file on this disk.
    pub fn file(&self) -> SimFile {
        let mut s = self.lock();
        s.files.push(FileState::default());
        SimFile {
            disk: self.clone(),
            index: s.files.len() - 1,
        }
    }

    /// The `index`th file created on this disk.
    pub fn existing(&self, index: usize) -> Option<SimFile> {
        (index < self.lock().files.len()).then(|| SimFile {
            disk: self.clone(),
            index,
        })
    }

    /// The write, length and sync operations done so far.
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// Cuts the power after `ops` more operations: the next `ops` succeed, every one
    /// after them fails (reads too: the machine has stopped).
    pub fn crash_after(&self, ops: u64) {
        let mut s = self.lock();
        s.crash_at = Some(s.ops.saturating_add(ops));
    }

    /// Makes the writes and syncs of `file` fail with `fault` (or succeed again).
    pub fn inject(&self, file: &SimFile, fault: Option<Fault>) {
        if let Some(f) = self.lock().files.get_mut(file.index) {
            f.fault = fault;
        }
    }

    /// The disk as found after a power loss at this moment: each file holds its durable
    /// bytes plus a subset of its pending changes chosen by `seed` (in their order,
    /// each kept or lost, a kept write sometimes torn to a prefix of its sectors).
    pub fn power_loss(&self, seed: u64) -> Disk {
        let s = self.lock();
        let mut mix = Mix(seed);
        let files = s
            .files
            .iter()
            .map(|f| {
                let mut bytes = Arc::clone(&f.durable);
                // Some losses keep nothing, some everything, most a random subset.
                let keep_one_in = match mix.below(4) {
                    0 => u64::MAX,
                    1 => 1,
                    _ => 2,
                };
                for change in &f.pending {
                    let kept = keep_one_in != u64::MAX && mix.below(keep_one_in) == 0;
                    if !kept {
                        continue;
                    }
                    match change {
                        Change::Write(offset, data) if data.len() > SECTOR && mix.below(4) == 0 => {
                            let sectors = data.len().div_ceil(SECTOR) as u64;
                            let upto = (mix.below(sectors) as usize) * SECTOR;
                            apply(
                                Arc::make_mut(&mut bytes),
                                &Change::Write(*offset, data[..upto].to_vec()),
                            );
                        }
                        other => apply(Arc::make_mut(&mut bytes), other),
                    }
                }
                FileState {
                    durable: Arc::clone(&bytes),
                    current: bytes,
                    pending: Vec::new(),
                    fault: None,
                }
            })
            .collect();
        Disk {
            state: Arc::new(Mutex::new(DiskState {
                files,
                ops: 0,
                crash_at: None,
                dead: false,
            })),
        }
    }
}

impl SimFile {
    /// Runs a mutating operation: counted, refused once the power is off or while a
    /// fault is injected.
    fn mutate<T>(&self, op: impl FnOnce(&mut FileState) -> io::Result<T>) -> io::Result<T> {
        let mut s = self.disk.lock();
        s.ops += 1;
        if s.dead || s.crash_at.is_some_and(|c| s.ops > c) {
            s.dead = true;
            return Err(power_is_off());
        }
        let f = s
            .files
            .get_mut(self.index)
            .ok_or_else(|| io::Error::other("no such simulated file"))?;
        if let Some(fault) = f.fault {
            return Err(error(fault));
        }
        op(f)
    }

    fn look<T>(&self, op: impl FnOnce(&FileState) -> io::Result<T>) -> io::Result<T> {
        let s = self.disk.lock();
        if s.dead {
            return Err(power_is_off());
        }
        let f = s
            .files
            .get(self.index)
            .ok_or_else(|| io::Error::other("no such simulated file"))?;
        op(f)
    }

    fn write_change(&self, change: Change) -> io::Result<()> {
        self.mutate(|f| {
            apply(Arc::make_mut(&mut f.current), &change);
            f.pending.push(change);
            Ok(())
        })
    }

    fn sync_now(&self) -> io::Result<()> {
        self.mutate(|f| {
            if !f.pending.is_empty() {
                let durable = Arc::make_mut(&mut f.durable);
                for change in f.pending.drain(..) {
                    apply(durable, &change);
                }
            }
            Ok(())
        })
    }
}

impl redb::StorageBackend for SimFile {
    fn len(&self) -> io::Result<u64> {
        self.look(|f| Ok(f.current.len() as u64))
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        self.look(|f| {
            let start = usize::try_from(offset).map_err(io::Error::other)?;
            let end = start
                .checked_add(out.len())
                .filter(|e| *e <= f.current.len())
                .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
            out.copy_from_slice(&f.current[start..end]);
            Ok(())
        })
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.write_change(Change::SetLen(len))
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync_now()
    }

    fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_change(Change::Write(offset, data.to_vec()))
    }
}

impl LogFile for SimFile {
    fn read_all(&mut self) -> io::Result<Vec<u8>> {
        self.look(|f| Ok(f.current.to_vec()))
    }

    fn write_at(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_change(Change::Write(offset, data.to_vec()))
    }

    fn sync(&mut self) -> io::Result<()> {
        self.sync_now()
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.write_change(Change::SetLen(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::StorageBackend;

    #[test]
    fn only_synced_bytes_survive_for_sure() {
        let disk = Disk::new();
        let f = disk.file();
        f.write(0, b"durable").expect("write");
        f.sync_data().expect("sync");
        f.write(0, b"pending").expect("write");
        let mut out = [0u8; 7];
        f.read(0, &mut out).expect("read");
        assert_eq!(&out, b"pending", "the process sees its writes");
        let mut outcomes = std::collections::HashSet::new();
        for seed in 0..64 {
            let after = disk.power_loss(seed);
            let g = after.existing(0).expect("file");
            g.read(0, &mut out).expect("read");
            outcomes.insert(out);
        }
        assert!(outcomes.contains(b"durable"), "a pending write can be lost");
        assert!(outcomes.contains(b"pending"), "or kept");
        assert_eq!(
            outcomes.len(),
            2,
            "nothing else: a 7-byte write is not torn"
        );
    }

    #[test]
    fn the_power_goes_off_at_the_chosen_operation_and_faults_fail_writes() {
        let disk = Disk::new();
        let f = disk.file();
        disk.crash_after(2);
        f.write(0, b"a").expect("first");
        f.sync_data().expect("second");
        assert!(f.write(1, b"b").is_err(), "the third fails");
        assert!(f.len().is_err(), "and reads after it");
        let after = disk.power_loss(1);
        let g = after.existing(0).expect("file");
        assert_eq!(g.len().expect("len"), 1);
        after.inject(&g, Some(Fault::NoSpace));
        let e = g.write(0, b"x").expect_err("no space");
        assert_eq!(e.raw_os_error(), Some(28));
        after.inject(&g, None);
        g.write(0, b"x").expect("writes again");
    }
}
