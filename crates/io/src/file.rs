//! `Storage` (where files live) and `File` (one open file), the seam every upper layer uses.
//!
//! Both dispatch by enum to the OS backend (`os`) or the simulated one (`sim`). The contract
//! below holds for every backend; the property tests check that all methods leave
//! byte-identical files for the same operations.
//!
//! Contract of `File`:
//! 1. `read_at` fills the whole buffer or fails; a read reaching past the end of the file is
//!    `Error::ReadPastEnd`, never a short read.
//! 2. `write_at` writes the whole buffer. A write past the end first grows the file to the next
//!    multiple of the growth chunk, so the file's size changes in large steps.
//! 3. `len` is the file size as this handle last set or observed it, including preallocated
//!    space: upper layers keep their own logical end (a log tail, a segment's write point).
//! 4. `sync_data` makes every completed write durable (fdatasync). `persist(range)` makes the
//!    range durable by the cheapest means the mode allows (flush + fence on persistent memory,
//!    msync on a mapping, fdatasync otherwise).
//! 5. `store_u64` is a single aligned 8-byte store on the mapped methods (atomic on persistent
//!    memory); it is not durable until `persist` covers it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::os::{self, OsFile};
use crate::sim::{SimFile, SimFs};
use crate::{AccessMethod, IoStats, IoStatsSnapshot, OpenOptions, PmemMode, Result};

/// Where files live: the real operating system, or an in-memory simulation for tests.
#[derive(Clone, Debug, Default)]
pub enum Storage {
    /// Real files through the OS.
    #[default]
    Os,
    /// The simulated backend; clones share one simulated file system.
    Sim(SimFs),
}

impl Storage {
    /// Opens (or creates, per the options) a file.
    pub fn open(&self, path: impl AsRef<Path>, options: &OpenOptions) -> Result<File> {
        let path = path.as_ref();
        options.validate(path)?;
        let inner = match self {
            Storage::Os => FileInner::Os(OsFile::open(path, options)?),
            Storage::Sim(sim) => FileInner::Sim(sim.open(path, options)?),
        };
        Ok(File { inner })
    }

    /// Creates a directory and its missing parents (mode 0700 on the OS backend).
    pub fn create_dir_all(&self, path: impl AsRef<Path>) -> Result<()> {
        match self {
            Storage::Os => os::create_dir_all(path.as_ref()),
            Storage::Sim(sim) => sim.create_dir_all(path.as_ref()),
        }
    }

    /// Removes a file. Durable only after `sync_dir` on its directory.
    pub fn remove_file(&self, path: impl AsRef<Path>) -> Result<()> {
        match self {
            Storage::Os => os::remove_file(path.as_ref()),
            Storage::Sim(sim) => sim.remove_file(path.as_ref()),
        }
    }

    /// Removes an empty directory. Durable only after `sync_dir` on its parent.
    pub fn remove_dir(&self, path: impl AsRef<Path>) -> Result<()> {
        match self {
            Storage::Os => os::remove_dir(path.as_ref()),
            Storage::Sim(sim) => sim.remove_dir(path.as_ref()),
        }
    }

    /// Renames a file, replacing any file at `to`. Durable only after `sync_dir`.
    pub fn rename(&self, from: impl AsRef<Path>, to: impl AsRef<Path>) -> Result<()> {
        match self {
            Storage::Os => os::rename(from.as_ref(), to.as_ref()),
            Storage::Sim(sim) => sim.rename(from.as_ref(), to.as_ref()),
        }
    }

    /// fsyncs a directory, making the creates, renames and removals in it durable.
    pub fn sync_dir(&self, path: impl AsRef<Path>) -> Result<()> {
        match self {
            Storage::Os => os::sync_dir(path.as_ref()),
            Storage::Sim(sim) => sim.sync_dir(path.as_ref()),
        }
    }

    /// The names of the entries of a directory, sorted.
    pub fn list_dir(&self, path: impl AsRef<Path>) -> Result<Vec<String>> {
        match self {
            Storage::Os => os::list_dir(path.as_ref()),
            Storage::Sim(sim) => sim.list_dir(path.as_ref()),
        }
    }

    /// Takes the exclusive lock on the file at `path` (created with `mode` when missing),
    /// without waiting: `Error::Locked` while another `FileLock` holds it, in this process
    /// or another. The lock holds until the `FileLock` drops (or the process ends).
    pub fn lock_file(&self, path: impl AsRef<Path>, mode: u32) -> Result<FileLock> {
        let path = path.as_ref();
        let held = match self {
            Storage::Os => LockInner::Os(os::lock_file(path, mode)?),
            Storage::Sim(sim) => {
                sim.lock_file(path, false)?;
                LockInner::Sim(sim.clone(), false)
            }
        };
        Ok(FileLock { path: path.to_path_buf(), held })
    }

    /// Takes a shared lock on the existing file at `path`, opened read-only, without
    /// waiting: any number of shared locks hold at once, and `Error::Locked` answers while
    /// an exclusive `lock_file` lock is held (and keeps one from being taken meanwhile).
    /// Nothing is created: a missing file is `Error::NotFound`.
    pub fn lock_file_shared(&self, path: impl AsRef<Path>) -> Result<FileLock> {
        let path = path.as_ref();
        let held = match self {
            Storage::Os => LockInner::Os(os::lock_file_shared(path)?),
            Storage::Sim(sim) => {
                sim.lock_file(path, true)?;
                LockInner::Sim(sim.clone(), true)
            }
        };
        Ok(FileLock { path: path.to_path_buf(), held })
    }

    /// Whether `path` is a directory (following symbolic links); false when nothing is there.
    pub fn is_dir(&self, path: impl AsRef<Path>) -> Result<bool> {
        match self {
            Storage::Os => os::is_dir(path.as_ref()),
            Storage::Sim(sim) => sim.is_dir(path.as_ref()),
        }
    }

    /// Whether a file or directory exists at `path`.
    pub fn exists(&self, path: impl AsRef<Path>) -> Result<bool> {
        match self {
            Storage::Os => os::exists(path.as_ref()),
            Storage::Sim(sim) => sim.exists(path.as_ref()),
        }
    }
}

/// A lock on a file (`Storage::lock_file`, exclusive, or `Storage::lock_file_shared`),
/// released on drop.
#[derive(Debug)]
pub struct FileLock {
    path: PathBuf,
    held: LockInner,
}

#[derive(Debug)]
enum LockInner {
    /// The locked descriptor: closing it (on drop) releases the lock; never read.
    Os(#[allow(dead_code)] std::os::fd::OwnedFd),
    /// The simulated file system, and whether the lock is shared.
    Sim(SimFs, bool),
}

impl FileLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        if let LockInner::Sim(sim, shared) = &self.held {
            sim.unlock_file(&self.path, *shared);
        }
    }
}

/// One open file. `Send + Sync`: any number of threads may read and write it at once.
#[derive(Debug)]
pub struct File {
    inner: FileInner,
}

#[derive(Debug)]
enum FileInner {
    Os(OsFile),
    Sim(SimFile),
}

macro_rules! dispatch {
    ($self:ident, $file:ident => $call:expr) => {
        match &$self.inner {
            FileInner::Os($file) => $call,
            FileInner::Sim($file) => $call,
        }
    };
}

impl File {
    /// Reads exactly `buf.len()` bytes at `offset`.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        dispatch!(self, file => file.read_at(buf, offset))
    }

    /// Writes all of `buf` at `offset`, growing the file by whole chunks if it ends past the end.
    pub fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        dispatch!(self, file => file.write_at(buf, offset))
    }

    /// `write_at` by a system call (pwrite) even on the `mmap` method, whose next store to a
    /// page after a sync takes a write-protect fault that costs more than the pwrite (a log
    /// appending and syncing one record at a time ran at 0.7 of the fdatasync limit through
    /// the mapping and 0.96 with pwrite). The `pmem` method writes as `write_at` does: its
    /// durability is flushing the mapping. In the simulation, `write_at`.
    pub fn write_at_syscall(&self, buf: &[u8], offset: u64) -> Result<()> {
        match &self.inner {
            FileInner::Os(file) => file.write_at_syscall(buf, offset),
            FileInner::Sim(file) => file.write_at(buf, offset),
        }
    }

    /// Writes `parts` back to back from `offset`, as `write_at` of their concatenation
    /// would, without joining them first: one pwritev (per 1024 parts) on the syscall
    /// method, a copy per part on the mapped ones, one joined write (and one I/O point) in
    /// the simulation.
    pub fn write_vectored_at(&self, parts: &[&[u8]], offset: u64) -> Result<()> {
        match &self.inner {
            FileInner::Os(file) => file.write_vectored_at(parts, offset),
            FileInner::Sim(file) => file.write_at(&parts.concat(), offset),
        }
    }

    /// The file size as this handle last set or observed it.
    pub fn len(&self) -> u64 {
        dispatch!(self, file => file.len())
    }

    /// True when the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets the file size exactly: truncates, or extends with zeros.
    pub fn set_len(&self, len: u64) -> Result<()> {
        dispatch!(self, file => file.set_len(len))
    }

    /// Makes the file at least `len` bytes long, growing it to a multiple of the chunk.
    /// Use it to preallocate off the hot path.
    pub fn reserve(&self, len: u64) -> Result<()> {
        dispatch!(self, file => file.reserve(len))
    }

    /// fdatasync: every completed write, and the size, become durable.
    pub fn sync_data(&self) -> Result<()> {
        dispatch!(self, file => file.sync_data())
    }

    /// Starts writing back the dirty cached pages of `offset..offset + len` and returns
    /// without waiting (sync_file_range with SYNC_FILE_RANGE_WRITE). It makes nothing
    /// durable: it only lets the device work while the caller goes on, so that the
    /// `sync_data` that follows has less left to do. A write-back that fails is reported by
    /// that `sync_data` (the kernel keeps the error for it). No-op on persistent memory and
    /// in the simulation, where it is not an I/O point.
    pub fn start_writeback(&self, offset: u64, len: u64) -> Result<()> {
        dispatch!(self, file => file.start_writeback(offset, len))
    }

    /// fsync: like `sync_data`, plus all metadata.
    pub fn sync_all(&self) -> Result<()> {
        dispatch!(self, file => file.sync_all())
    }

    /// Makes `len` bytes at `offset` durable: flush + fence on persistent memory (no system
    /// call), msync on other mappings, fdatasync on the syscall methods.
    pub fn persist(&self, offset: u64, len: u64) -> Result<()> {
        dispatch!(self, file => file.persist(offset, len))
    }

    /// Makes several ranges durable together: on persistent memory every line of every range
    /// is flushed and one fence follows, so the ranges become durable in no particular order
    /// relative to each other, and all of them before this returns. Other methods persist
    /// each range (msync) or sync once (fdatasync). An empty list does nothing.
    pub fn persist_ranges(&self, ranges: &[(u64, u64)]) -> Result<()> {
        dispatch!(self, file => file.persist_ranges(ranges))
    }

    /// Stores `value` (little-endian) at the 8-byte aligned `offset` with one store on the
    /// mapped methods. Not durable until a `persist` covers it.
    pub fn store_u64(&self, offset: u64, value: u64) -> Result<()> {
        dispatch!(self, file => file.store_u64(offset, value))
    }

    /// Asks the kernel to drop this file's cached pages (posix_fadvise DONTNEED). Dirty pages
    /// are not dropped; sync first.
    pub fn advise_dontneed(&self) -> Result<()> {
        dispatch!(self, file => file.advise_dontneed())
    }

    /// Lets go of the mapped pages wholly inside `offset..offset + len`: the process's
    /// resident memory drops, and the bytes stay in the file and the page cache (dirty ones
    /// are written back as before; nothing is lost or made durable). The next access to
    /// such a page maps it again. A no-op on the syscall methods, which map nothing, and in
    /// the simulation, where it is not an I/O point.
    pub fn release_pages(&self, offset: u64, len: u64) -> Result<()> {
        match &self.inner {
            FileInner::Os(file) => file.release_pages(offset, len),
            FileInner::Sim(file) => file.release_pages(offset, len),
        }
    }

    /// The access method in force.
    pub fn method(&self) -> AccessMethod {
        dispatch!(self, file => file.method())
    }

    /// The pmem mode in force (`None` unless the method is `pmem`).
    pub fn pmem_mode(&self) -> Option<PmemMode> {
        dispatch!(self, file => file.pmem_mode())
    }

    /// The alignment O_DIRECT transfers need (`None` unless the method is `direct`).
    pub fn direct_alignment(&self) -> Option<u64> {
        dispatch!(self, file => file.direct_alignment())
    }

    /// The path the file was opened with.
    pub fn path(&self) -> &Path {
        dispatch!(self, file => file.path())
    }

    /// A copy of the counters this file updates.
    pub fn stats(&self) -> IoStatsSnapshot {
        self.stats_handle().snapshot()
    }

    /// The counters this file updates (shared if `OpenOptions::stats` was given).
    pub fn stats_handle(&self) -> &Arc<IoStats> {
        dispatch!(self, file => file.stats_handle())
    }

    /// The path as an owned value, for error messages built by callers.
    pub fn path_buf(&self) -> PathBuf {
        self.path().to_path_buf()
    }
}
