//! The `syscall` and `direct` methods: pread/pwrite, optionally with O_DIRECT.
//!
//! With O_DIRECT the buffer address must be a multiple of the file system's memory alignment,
//! and the offset and length multiples of its offset alignment (statx `STATX_DIOALIGN`; 4096
//! where the file system does not report them). Violations return `Error::Unaligned` before any
//! system call, even where the kernel would accept them, so code that works here also works on
//! a device with 4 KiB sectors.
//!
//! Invariant: `size` only grows through `grow_to`, under `growth_lock`, from the size the kernel
//! reports; it never shrinks except by `set_len`.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{fdatasync, fsinfo, fstat_len, fsync, growth, pread_exact, pwrite_all, pwritev_all};
use crate::{
    checked_end, checked_size, checked_u64_slot, chunk_target, AccessMethod, AlignedItem, Error,
    GrowthStrategy, IoStats, Op, OpenOptions, Result,
};

/// O_DIRECT alignment where the file system does not report one.
const DEFAULT_DIRECT_ALIGN: u64 = 4096;

#[derive(Debug)]
pub(crate) struct SyscallFile {
    fd: OwnedFd,
    path: PathBuf,
    method: AccessMethod,
    read_only: bool,
    /// (memory alignment, offset alignment) for O_DIRECT; `None` without O_DIRECT.
    direct: Option<(u64, u64)>,
    chunk_bytes: u64,
    growth: GrowthStrategy,
    size: AtomicU64,
    growth_lock: Mutex<()>,
    stats: Arc<IoStats>,
}

impl SyscallFile {
    pub(crate) fn new(
        fd: OwnedFd,
        path: &Path,
        options: &OpenOptions,
        stats: Arc<IoStats>,
    ) -> Result<SyscallFile> {
        let size = fstat_len(&fd, path)?;
        let direct = if options.method == AccessMethod::Direct {
            let info = fsinfo::describe_fd(&fd, path)?;
            Some(match info.direct_alignment {
                Some((memory, offset)) => (u64::from(memory).max(1), u64::from(offset).max(1)),
                None => (DEFAULT_DIRECT_ALIGN, DEFAULT_DIRECT_ALIGN),
            })
        } else {
            None
        };
        Ok(SyscallFile {
            fd,
            path: path.to_path_buf(),
            method: options.method,
            read_only: options.read_only,
            direct,
            chunk_bytes: options.chunk_bytes,
            growth: options.growth,
            size: AtomicU64::new(size),
            growth_lock: Mutex::new(()),
            stats,
        })
    }

    fn check_direct(&self, op: Op, address: usize, offset: u64, len: u64) -> Result<()> {
        let Some((memory, offset_align)) = self.direct else { return Ok(()) };
        let unaligned = |item, value, required| Error::Unaligned {
            op,
            path: self.path.clone(),
            item,
            value,
            required,
            reason: "O_DIRECT on this file",
        };
        if !(address as u64).is_multiple_of(memory) {
            return Err(unaligned(AlignedItem::BufferAddress, address as u64, memory));
        }
        if !offset.is_multiple_of(offset_align) {
            return Err(unaligned(AlignedItem::Offset, offset, offset_align));
        }
        if !len.is_multiple_of(offset_align) {
            return Err(unaligned(AlignedItem::Length, len, offset_align));
        }
        Ok(())
    }

    fn check_writable(&self, op: Op) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnlyHandle { op, path: self.path.clone() });
        }
        Ok(())
    }

    pub(crate) fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        checked_end(Op::Read, &self.path, offset, buf.len() as u64)?;
        self.check_direct(Op::Read, buf.as_ptr() as usize, offset, buf.len() as u64)?;
        pread_exact(&self.fd, &self.path, buf, offset)?;
        IoStats::bump(&self.stats.reads);
        IoStats::add(&self.stats.read_bytes_syscall, buf.len() as u64);
        Ok(())
    }

    pub(crate) fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.check_writable(Op::Write)?;
        let end = checked_end(Op::Write, &self.path, offset, buf.len() as u64)?;
        self.check_direct(Op::Write, buf.as_ptr() as usize, offset, buf.len() as u64)?;
        if end > self.size.load(Ordering::Acquire) {
            self.grow_to(end)?;
        }
        pwrite_all(&self.fd, &self.path, buf, offset)?;
        IoStats::bump(&self.stats.writes);
        IoStats::add(&self.stats.write_bytes_syscall, buf.len() as u64);
        Ok(())
    }

    pub(crate) fn write_vectored_at(&self, parts: &[&[u8]], offset: u64) -> Result<()> {
        if self.direct.is_some() {
            // O_DIRECT needs one aligned buffer.
            let total: usize = parts.iter().map(|p| p.len()).sum();
            let mut joined = crate::AlignedBuf::new(total);
            let mut at = 0;
            for part in parts {
                joined[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
            return self.write_at(&joined, offset);
        }
        self.check_writable(Op::Write)?;
        let total: u64 = parts.iter().map(|p| p.len() as u64).sum();
        let end = checked_end(Op::Write, &self.path, offset, total)?;
        if end > self.size.load(Ordering::Acquire) {
            self.grow_to(end)?;
        }
        pwritev_all(&self.fd, &self.path, parts, offset)?;
        IoStats::bump(&self.stats.writes);
        IoStats::add(&self.stats.write_bytes_syscall, total);
        Ok(())
    }

    /// Grows the file to the chunk boundary past `end`, unless it is already long enough.
    fn grow_to(&self, end: u64) -> Result<()> {
        let _growth = self.growth_lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = fstat_len(&self.fd, &self.path)?;
        if current >= end {
            self.size.store(current, Ordering::Release);
            return Ok(());
        }
        let target = chunk_target(end, self.chunk_bytes);
        growth::grow(&self.fd, &self.path, current, target, self.growth, &self.stats)?;
        self.size.store(target, Ordering::Release);
        Ok(())
    }

    pub(crate) fn len(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    pub(crate) fn set_len(&self, len: u64) -> Result<()> {
        self.check_writable(Op::SetLen)?;
        checked_size(Op::SetLen, &self.path, len)?;
        let _growth = self.growth_lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        growth::truncate(&self.fd, &self.path, len, &self.stats)?;
        self.size.store(len, Ordering::Release);
        Ok(())
    }

    pub(crate) fn reserve(&self, len: u64) -> Result<()> {
        self.check_writable(Op::Allocate)?;
        checked_size(Op::Allocate, &self.path, len)?;
        if len > self.size.load(Ordering::Acquire) {
            self.grow_to(len)?;
        }
        Ok(())
    }

    pub(crate) fn sync_data(&self) -> Result<()> {
        fdatasync(&self.fd, &self.path, &self.stats)
    }

    pub(crate) fn sync_all(&self) -> Result<()> {
        fsync(&self.fd, &self.path, &self.stats)
    }

    pub(crate) fn start_writeback(&self, offset: u64, len: u64) -> Result<()> {
        super::start_writeback(&self.fd, &self.path, &self.stats, offset, len)
    }

    /// There is no cheaper durable primitive for a range than fdatasync of the whole file
    /// (sync_file_range gives no durability), so persist is fdatasync.
    pub(crate) fn persist(&self, offset: u64, len: u64) -> Result<()> {
        checked_end(Op::Persist, &self.path, offset, len)?;
        IoStats::bump(&self.stats.persists);
        fdatasync(&self.fd, &self.path, &self.stats)
    }

    pub(crate) fn persist_ranges(&self, ranges: &[(u64, u64)]) -> Result<()> {
        for &(offset, len) in ranges {
            checked_end(Op::Persist, &self.path, offset, len)?;
        }
        if ranges.is_empty() {
            return Ok(());
        }
        IoStats::bump(&self.stats.persists);
        fdatasync(&self.fd, &self.path, &self.stats)
    }

    /// A pwrite of 8 bytes: not atomic against a crash on a block device (the crash model
    /// assumes nothing is), but a single call that no concurrent reader sees half-done.
    pub(crate) fn store_u64(&self, offset: u64, value: u64) -> Result<()> {
        self.check_writable(Op::StoreU64)?;
        checked_u64_slot(Op::StoreU64, &self.path, offset)?;
        if self.direct.is_some() {
            self.check_direct(Op::StoreU64, 0, offset, 8)?;
        }
        self.write_at(&value.to_le_bytes(), offset)?;
        IoStats::bump(&self.stats.atomic_stores);
        Ok(())
    }

    pub(crate) fn advise_dontneed(&self) -> Result<()> {
        super::fadvise_dontneed(&self.fd, &self.path)
    }

    pub(crate) fn method(&self) -> AccessMethod {
        self.method
    }

    pub(crate) fn direct_alignment(&self) -> Option<u64> {
        self.direct.map(|(memory, offset)| memory.max(offset))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn stats_handle(&self) -> &Arc<IoStats> {
        &self.stats
    }
}
