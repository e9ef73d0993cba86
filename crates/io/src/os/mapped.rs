//! The `mmap` and `pmem` methods: reads and writes copy through a `MAP_SHARED` mapping.
//!
//! Resizes follow the remap protocol (`remap_gate`): growth, truncation and remapping happen
//! under a `ResizeGuard`, while users copy under a `UseGuard` or, if a resize runs, use
//! pread/pwrite. A SIGBUS in the mapping (the file shrunk behind our back, or a media error) is
//! caught by the `sigbus` module and becomes `Error::FileShrunk` or a redone system call.
//!
//! The `pmem` method adds, per `PmemMode`:
//! - `DaxMapSync` (`MAP_SHARED_VALIDATE | MAP_SYNC` accepted) and `FlushOnly` (memory file
//!   systems): writes are non-temporal copies for 256 B and more, otherwise plain stores;
//!   `persist` flushes the range's lines and fences, with no system call.
//! - `Msync`: writes are plain copies; `persist` is `msync(MS_SYNC)` of the range's pages.
//!
//! Invariants:
//! 1. `map_len` equals the file size as of the last remap, so a bounds check against it keeps
//!    every access inside the file; `map_ptr` and `map_len` change only under a `ResizeGuard`.
//! 2. `size` (the file size this handle knows) is updated only under a `ResizeGuard`.
//! 3. No thread waits for a resize while holding a `UseGuard`: growth happens before entering.
//! 4. A copy counts only if the mapping's fault counter is unchanged since the mapping was made.
//!
//! Concurrent overlapping accesses to the same bytes by different threads give unspecified
//! bytes, as they would through pread/pwrite races; tierkv's layers never issue them.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use rustix::mm::{MapFlags, MsyncFlags, ProtFlags};

use super::{fdatasync, fsinfo, fstat_len, fsync, growth, pread_exact, pwrite_all};
use crate::pmem::{self, FlushInstruction};
use crate::remap_gate::{RemapGate, ResizeGuard};
use crate::sigbus::FaultSlot;
use crate::{
    checked_end, checked_size, checked_u64_slot, chunk_target, AccessMethod, Error, GrowthStrategy,
    IoStats, Op, OpenOptions, PmemMode, PmemModeRequest, Result,
};

#[derive(Debug)]
pub(crate) struct MappedFile {
    fd: OwnedFd,
    path: PathBuf,
    method: AccessMethod,
    pmem_mode: Option<PmemMode>,
    read_only: bool,
    chunk_bytes: u64,
    growth: GrowthStrategy,
    page_bytes: u64,
    gate: RemapGate,
    map_ptr: AtomicPtr<u8>,
    map_len: AtomicUsize,
    /// The fault counter of `slot` when the current mapping was made.
    faults_at_map: AtomicU64,
    size: AtomicU64,
    /// `None` when every registry slot is taken: the file is then never mapped.
    slot: Option<FaultSlot>,
    stats: Arc<IoStats>,
}

impl MappedFile {
    pub(crate) fn new(
        fd: OwnedFd,
        path: &Path,
        options: &OpenOptions,
        stats: Arc<IoStats>,
    ) -> Result<MappedFile> {
        let size = fstat_len(&fd, path)?;
        let pmem_mode = match options.method {
            AccessMethod::Pmem => Some(choose_pmem_mode(&fd, path, options)?),
            _ => None,
        };
        let file = MappedFile {
            fd,
            path: path.to_path_buf(),
            method: options.method,
            pmem_mode,
            read_only: options.read_only,
            chunk_bytes: options.chunk_bytes,
            growth: options.growth,
            page_bytes: rustix::param::page_size() as u64,
            gate: RemapGate::new(),
            map_ptr: AtomicPtr::new(ptr::null_mut()),
            map_len: AtomicUsize::new(0),
            faults_at_map: AtomicU64::new(0),
            size: AtomicU64::new(size),
            slot: FaultSlot::acquire(),
            stats,
        };
        {
            let guard = file.gate.begin_resize();
            file.remap(&guard, size)?;
        }
        Ok(file)
    }

    fn map_flags(&self) -> MapFlags {
        match self.pmem_mode {
            Some(PmemMode::DaxMapSync) => MapFlags::SHARED_VALIDATE | MapFlags::SYNC,
            _ => MapFlags::SHARED,
        }
    }

    /// Replaces the mapping with one of `len` bytes (none if 0). Exclusive by `_guard`.
    fn remap(&self, guard: &ResizeGuard<'_>, len: u64) -> Result<()> {
        guard.assert_exclusive();
        let old = self.map_ptr.load(Ordering::Relaxed);
        if !old.is_null() {
            let old_len = self.map_len.load(Ordering::Relaxed);
            if let Some(slot) = &self.slot {
                slot.clear_range();
            }
            self.map_ptr.store(ptr::null_mut(), Ordering::Relaxed);
            self.map_len.store(0, Ordering::Relaxed);
            // SAFETY: old/old_len is our mapping, no user is inside it (guard), and the fault
            // slot no longer describes it.
            unsafe { rustix::mm::munmap(old.cast(), old_len) }
                .map_err(|e| Error::from_rustix(Op::Map, &self.path, e))?;
        }
        let Some(slot) = &self.slot else { return Ok(()) };
        if len == 0 {
            return Ok(());
        }
        let len_bytes = usize::try_from(len)
            .map_err(|_| Error::FileTooLarge { op: Op::Map, path: self.path.clone() })?;
        let mut prot = ProtFlags::READ;
        if !self.read_only {
            prot |= ProtFlags::WRITE;
        }
        // SAFETY: a fresh mapping chosen by the kernel; it aliases no Rust object.
        let new = unsafe {
            rustix::mm::mmap(ptr::null_mut(), len_bytes, prot, self.map_flags(), &self.fd, 0)
        }
        .map_err(|e| Error::from_rustix(Op::Map, &self.path, e))?;
        self.faults_at_map.store(slot.faults(), Ordering::Relaxed);
        self.map_ptr.store(new.cast(), Ordering::Relaxed);
        self.map_len.store(len_bytes, Ordering::Relaxed);
        slot.set_range(new as usize, len_bytes);
        IoStats::bump(&self.stats.remaps);
        Ok(())
    }

    /// The mapping if `[offset, end)` lies inside it. Call only while holding a `UseGuard`.
    fn mapped_range(&self, offset: u64, end: u64) -> Option<*mut u8> {
        let base = self.map_ptr.load(Ordering::Relaxed);
        let len = self.map_len.load(Ordering::Relaxed) as u64;
        if base.is_null() || end > len {
            return None;
        }
        // SAFETY: offset < end <= len, so the pointer stays inside the mapping.
        Some(unsafe { base.add(offset as usize) })
    }

    /// True if no SIGBUS hit this mapping since it was made (invariant 4).
    fn fault_free(&self) -> bool {
        match &self.slot {
            Some(slot) => slot.faults() == self.faults_at_map.load(Ordering::Relaxed),
            None => true,
        }
    }

    /// After a SIGBUS: learn the real size, remap to it, then report a shrink or redo the
    /// access with a system call.
    fn after_fault(
        &self,
        op: Op,
        offset: u64,
        len: u64,
        redo: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        IoStats::bump(&self.stats.sigbus_faults);
        let (expected_len, actual_len) = {
            let guard = self.gate.begin_resize();
            let expected = self.map_len.load(Ordering::Relaxed) as u64;
            let actual = fstat_len(&self.fd, &self.path)?;
            self.remap(&guard, actual)?;
            self.size.store(actual, Ordering::Release);
            (expected, actual)
        };
        if offset + len > actual_len {
            return Err(Error::FileShrunk {
                op,
                path: self.path.clone(),
                offset,
                len,
                expected_len,
                actual_len,
            });
        }
        redo()
    }

    fn check_writable(&self, op: Op) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnlyHandle { op, path: self.path.clone() });
        }
        Ok(())
    }

    pub(crate) fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let len = buf.len() as u64;
        let end = checked_end(Op::Read, &self.path, offset, len)?;
        match self.gate.enter() {
            Some(guard) => {
                if let Some(source) = self.mapped_range(offset, end) {
                    // SAFETY: source..source+len is inside the live mapping, which no resizer
                    // can unmap while `guard` lives; buf is a distinct Rust allocation.
                    unsafe { ptr::copy_nonoverlapping(source, buf.as_mut_ptr(), buf.len()) };
                    let clean = self.fault_free();
                    drop(guard);
                    if !clean {
                        return self
                            .after_fault(Op::Read, offset, len, || self.read_syscall(buf, offset));
                    }
                    IoStats::bump(&self.stats.reads);
                    IoStats::add(&self.stats.read_bytes_mapped, len);
                    return Ok(());
                }
                drop(guard);
                IoStats::bump(&self.stats.fallbacks_outside_map);
            }
            None => IoStats::bump(&self.stats.fallbacks_resizing),
        }
        self.read_syscall(buf, offset)
    }

    fn read_syscall(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        pread_exact(&self.fd, &self.path, buf, offset)?;
        IoStats::bump(&self.stats.reads);
        IoStats::add(&self.stats.read_bytes_syscall, buf.len() as u64);
        Ok(())
    }

    pub(crate) fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.check_writable(Op::Write)?;
        let len = buf.len() as u64;
        let end = checked_end(Op::Write, &self.path, offset, len)?;
        if end > self.size.load(Ordering::Acquire) {
            self.grow_to(end)?;
        }
        match self.gate.enter() {
            Some(guard) => {
                if let Some(target) = self.mapped_range(offset, end) {
                    // SAFETY: target..target+len is inside the live, writable mapping, held by
                    // `guard`; buf is a distinct Rust allocation.
                    unsafe { self.copy_in(target, buf) };
                    let clean = self.fault_free();
                    drop(guard);
                    if !clean {
                        return self.after_fault(Op::Write, offset, len, || {
                            self.write_syscall(buf, offset)
                        });
                    }
                    IoStats::bump(&self.stats.writes);
                    IoStats::add(&self.stats.write_bytes_mapped, len);
                    return Ok(());
                }
                drop(guard);
                IoStats::bump(&self.stats.fallbacks_outside_map);
            }
            None => IoStats::bump(&self.stats.fallbacks_resizing),
        }
        self.write_syscall(buf, offset)
    }

    /// `write_at` with pwrite instead of a copy into the mapping, on the `mmap` method; the
    /// `pmem` method, whose durability is flushing the mapping, writes as `write_at` does.
    pub(crate) fn write_at_syscall(&self, buf: &[u8], offset: u64) -> Result<()> {
        if self.method != AccessMethod::Mmap {
            return self.write_at(buf, offset);
        }
        self.check_writable(Op::Write)?;
        let end = checked_end(Op::Write, &self.path, offset, buf.len() as u64)?;
        if end > self.size.load(Ordering::Acquire) {
            self.grow_to(end)?;
        }
        self.write_syscall(buf, offset)
    }

    /// Copies into the mapping: pmem copies (non-temporal for 256 B and more) where flushing is
    /// how data becomes durable, plain copies otherwise.
    ///
    /// # Safety
    /// `target` must be valid for `buf.len()` bytes of writes inside the mapping, held by a
    /// `UseGuard`.
    unsafe fn copy_in(&self, target: *mut u8, buf: &[u8]) {
        match self.pmem_mode {
            Some(PmemMode::DaxMapSync | PmemMode::FlushOnly) => {
                // SAFETY: guaranteed by the caller.
                let report = unsafe { pmem::copy_to_pmem(target, buf.as_ptr(), buf.len()) };
                IoStats::add(&self.stats.write_bytes_nontemporal, report.nontemporal_bytes);
                IoStats::add(&self.stats.lines_flushed, report.lines_flushed);
                IoStats::add(&self.stats.fences, report.fences);
            }
            // SAFETY: guaranteed by the caller.
            _ => unsafe { ptr::copy_nonoverlapping(buf.as_ptr(), target, buf.len()) },
        }
    }

    fn write_syscall(&self, buf: &[u8], offset: u64) -> Result<()> {
        pwrite_all(&self.fd, &self.path, buf, offset)?;
        IoStats::bump(&self.stats.writes);
        IoStats::add(&self.stats.write_bytes_syscall, buf.len() as u64);
        Ok(())
    }

    /// Grows the file to the chunk boundary past `end` and remaps, unless it is long enough.
    fn grow_to(&self, end: u64) -> Result<()> {
        let guard = self.gate.begin_resize();
        let current = fstat_len(&self.fd, &self.path)?;
        if current >= end {
            // Someone (another thread, or another process) grew it already.
            if current != self.map_len.load(Ordering::Relaxed) as u64 {
                self.remap(&guard, current)?;
            }
            self.size.store(current, Ordering::Release);
            return Ok(());
        }
        let target = chunk_target(end, self.chunk_bytes);
        // CRASH: the file may now be longer than any data in it; upper layers keep their own
        // logical end and treat the zero tail as unwritten.
        growth::grow(&self.fd, &self.path, current, target, self.growth, &self.stats)?;
        self.size.store(target, Ordering::Release);
        self.remap(&guard, target)
    }

    pub(crate) fn len(&self) -> u64 {
        self.size.load(Ordering::Acquire)
    }

    pub(crate) fn set_len(&self, len: u64) -> Result<()> {
        self.check_writable(Op::SetLen)?;
        checked_size(Op::SetLen, &self.path, len)?;
        let guard = self.gate.begin_resize();
        growth::truncate(&self.fd, &self.path, len, &self.stats)?;
        self.size.store(len, Ordering::Release);
        self.remap(&guard, len)
    }

    pub(crate) fn reserve(&self, len: u64) -> Result<()> {
        self.check_writable(Op::Allocate)?;
        checked_size(Op::Allocate, &self.path, len)?;
        if len > self.size.load(Ordering::Acquire) {
            self.grow_to(len)?;
        }
        Ok(())
    }

    /// fdatasync writes back pages dirtied through the mapping too (one page cache).
    pub(crate) fn sync_data(&self) -> Result<()> {
        fdatasync(&self.fd, &self.path, &self.stats)
    }

    pub(crate) fn sync_all(&self) -> Result<()> {
        fsync(&self.fd, &self.path, &self.stats)
    }

    /// Stores through a mapping dirty the same page-cache pages as pwrite, so the hint is
    /// the same system call. On persistent memory there is no write-back to start: the
    /// range is checked and nothing else happens.
    pub(crate) fn start_writeback(&self, offset: u64, len: u64) -> Result<()> {
        if self.pmem_mode.is_some() {
            crate::checked_end(Op::Writeback, &self.path, offset, len)?;
            return Ok(());
        }
        super::start_writeback(&self.fd, &self.path, &self.stats, offset, len)
    }

    pub(crate) fn persist(&self, offset: u64, len: u64) -> Result<()> {
        let end = checked_end(Op::Persist, &self.path, offset, len)?;
        IoStats::bump(&self.stats.persists);
        let flush = pmem::cpu().flush;
        let flushing = matches!(self.pmem_mode, Some(PmemMode::DaxMapSync | PmemMode::FlushOnly))
            && flush != FlushInstruction::None;
        let Some(guard) = self.gate.enter() else {
            // A resize runs: the system call is the durable fallback in every mode.
            IoStats::bump(&self.stats.fallbacks_resizing);
            return fdatasync(&self.fd, &self.path, &self.stats);
        };
        let Some(start) = self.mapped_range(offset, end) else {
            drop(guard);
            IoStats::bump(&self.stats.fallbacks_outside_map);
            return fdatasync(&self.fd, &self.path, &self.stats);
        };
        let result = if flushing {
            // SAFETY: start..start+len is inside the live mapping, held by `guard`.
            let lines = unsafe { pmem::flush_range(flush, start, len as usize) };
            pmem::sfence();
            IoStats::add(&self.stats.lines_flushed, lines);
            IoStats::bump(&self.stats.fences);
            Ok(())
        } else {
            let misalignment = start as usize % self.page_bytes as usize;
            // SAFETY: the page-aligned start is inside the same mapping (mappings start on a
            // page), and the range ends inside it; msync reads no Rust memory.
            let synced = unsafe {
                rustix::mm::msync(
                    start.sub(misalignment).cast(),
                    len as usize + misalignment,
                    MsyncFlags::SYNC,
                )
            };
            IoStats::bump(&self.stats.msyncs);
            synced.map_err(|e| Error::from_rustix(Op::Persist, &self.path, e))
        };
        let clean = self.fault_free();
        drop(guard);
        if !clean {
            return self.after_fault(Op::Persist, offset, len, || {
                fdatasync(&self.fd, &self.path, &self.stats)
            });
        }
        result
    }

    pub(crate) fn persist_ranges(&self, ranges: &[(u64, u64)]) -> Result<()> {
        let flush = pmem::cpu().flush;
        let flushing = matches!(self.pmem_mode, Some(PmemMode::DaxMapSync | PmemMode::FlushOnly))
            && flush != FlushInstruction::None;
        if !flushing || ranges.len() < 2 {
            // msync works range by range; a single range is a plain persist.
            return ranges.iter().try_for_each(|&(offset, len)| self.persist(offset, len));
        }
        let mut ends = [0u64; 8];
        if ranges.len() > ends.len() {
            return ranges.chunks(ends.len()).try_for_each(|chunk| self.persist_ranges(chunk));
        }
        for (end, &(offset, len)) in ends.iter_mut().zip(ranges) {
            *end = checked_end(Op::Persist, &self.path, offset, len)?;
        }
        IoStats::bump(&self.stats.persists);
        let Some(guard) = self.gate.enter() else {
            IoStats::bump(&self.stats.fallbacks_resizing);
            return fdatasync(&self.fd, &self.path, &self.stats);
        };
        let mut starts = [std::ptr::null_mut::<u8>(); 8];
        for ((start, end), &(offset, _)) in starts.iter_mut().zip(&ends).zip(ranges) {
            match self.mapped_range(offset, *end) {
                Some(pointer) => *start = pointer,
                None => {
                    drop(guard);
                    IoStats::bump(&self.stats.fallbacks_outside_map);
                    return fdatasync(&self.fd, &self.path, &self.stats);
                }
            }
        }
        let mut lines = 0;
        for (start, &(_, len)) in starts.iter().zip(ranges) {
            // SAFETY: each range is inside the live mapping, held by `guard`.
            lines += unsafe { pmem::flush_range(flush, *start, len as usize) };
        }
        pmem::sfence();
        IoStats::add(&self.stats.lines_flushed, lines);
        IoStats::bump(&self.stats.fences);
        let clean = self.fault_free();
        drop(guard);
        if !clean {
            return self.after_fault(Op::Persist, ranges[0].0, ranges[0].1, || {
                fdatasync(&self.fd, &self.path, &self.stats)
            });
        }
        Ok(())
    }

    pub(crate) fn store_u64(&self, offset: u64, value: u64) -> Result<()> {
        self.check_writable(Op::StoreU64)?;
        let end = checked_u64_slot(Op::StoreU64, &self.path, offset)?;
        if end > self.size.load(Ordering::Acquire) {
            self.grow_to(end)?;
        }
        if let Some(guard) = self.gate.enter() {
            if let Some(target) = self.mapped_range(offset, end) {
                // SAFETY: the mapping starts on a page boundary and offset is a multiple of 8,
                // so target is 8-byte aligned and inside the live mapping held by `guard`.
                // Other threads touch these bytes only through this same atomic store.
                let word = unsafe { AtomicU64::from_ptr(target.cast::<u64>()) };
                word.store(value.to_le(), Ordering::Release);
                let clean = self.fault_free();
                drop(guard);
                if !clean {
                    return self.after_fault(Op::StoreU64, offset, 8, || {
                        self.write_syscall(&value.to_le_bytes(), offset)
                    });
                }
                IoStats::bump(&self.stats.atomic_stores);
                return Ok(());
            }
        }
        self.write_syscall(&value.to_le_bytes(), offset)?;
        IoStats::bump(&self.stats.atomic_stores);
        Ok(())
    }

    /// Drops the page-table entries of the pages wholly inside `offset..offset + len`
    /// (MADV_DONTNEED on the shared mapping): resident memory drops, while the bytes stay
    /// in the page cache and the file, dirty ones written back as before. A hint: skipped
    /// while the mapping is being resized.
    pub(crate) fn release_pages(&self, offset: u64, len: u64) -> Result<()> {
        let end = checked_end(Op::Advise, &self.path, offset, len)?;
        let Some(_guard) = self.gate.enter() else {
            return Ok(());
        };
        let from = offset.next_multiple_of(self.page_bytes);
        let to = end.min(self.map_len.load(Ordering::Relaxed) as u64) / self.page_bytes
            * self.page_bytes;
        if from < to {
            if let Some(start) = self.mapped_range(from, to) {
                // SAFETY: from..to is page-aligned and inside the live mapping, held by the
                // guard; for a shared file mapping MADV_DONTNEED drops only page-table
                // entries: a copy racing it faults the same page-cache page back in.
                unsafe {
                    rustix::mm::madvise(
                        start.cast(),
                        (to - from) as usize,
                        rustix::mm::Advice::LinuxDontNeed,
                    )
                }
                .map_err(|e| Error::from_rustix(Op::Advise, &self.path, e))?;
                IoStats::add(&self.stats.released_bytes, to - from);
            }
        }
        Ok(())
    }

    /// Drops the mapping's page-table entries (MADV_DONTNEED) and the file's cached pages
    /// (posix_fadvise DONTNEED), so the next access is cold. Runs as a resize, alone.
    pub(crate) fn advise_dontneed(&self) -> Result<()> {
        {
            let _guard = self.gate.begin_resize();
            let base = self.map_ptr.load(Ordering::Relaxed);
            let len = self.map_len.load(Ordering::Relaxed);
            if !base.is_null() {
                // SAFETY: base/len is our mapping and nobody is inside it; for a shared file
                // mapping MADV_DONTNEED only drops page-table entries (dirty state is kept).
                unsafe { rustix::mm::madvise(base.cast(), len, rustix::mm::Advice::LinuxDontNeed) }
                    .map_err(|e| Error::from_rustix(Op::Advise, &self.path, e))?;
            }
        }
        super::fadvise_dontneed(&self.fd, &self.path)
    }

    pub(crate) fn method(&self) -> AccessMethod {
        self.method
    }

    pub(crate) fn pmem_mode(&self) -> Option<PmemMode> {
        self.pmem_mode
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn stats_handle(&self) -> &Arc<IoStats> {
        &self.stats
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        let base = *self.map_ptr.get_mut();
        if base.is_null() {
            return;
        }
        if let Some(slot) = &self.slot {
            slot.clear_range();
        }
        // SAFETY: we own the mapping and, being dropped, have no users; the slot no longer
        // describes it. A failure here leaves only address space behind, so it is ignored.
        let _ = unsafe { rustix::mm::munmap(base.cast(), *self.map_len.get_mut()) };
    }
}

/// Picks the pmem mode: `MAP_SYNC` if the file system accepts it, else flush-only on memory
/// file systems and msync elsewhere; or exactly what was asked, if it can work.
fn choose_pmem_mode(fd: &OwnedFd, path: &Path, options: &OpenOptions) -> Result<PmemMode> {
    let invalid = |detail: String| Error::InvalidOptions { path: path.to_path_buf(), detail };
    let can_flush = pmem::cpu().flush != FlushInstruction::None;
    match options.pmem_mode {
        PmemModeRequest::Exactly(PmemMode::DaxMapSync) => {
            if map_sync_supported(fd, path, options.read_only)? {
                Ok(PmemMode::DaxMapSync)
            } else {
                let fs = fsinfo::describe_fd(fd, path)?.fs_type;
                Err(invalid(format!(
                    "pmem mode dax_map_sync needs a DAX file system; this {fs} file system \
                     refuses MAP_SYNC (use pmem mode auto, flush_only or msync)"
                )))
            }
        }
        PmemModeRequest::Exactly(PmemMode::FlushOnly) if !can_flush => {
            Err(invalid("pmem mode flush_only needs a cache-line flush instruction".into()))
        }
        PmemModeRequest::Exactly(mode) => Ok(mode),
        PmemModeRequest::Auto => {
            if can_flush && map_sync_supported(fd, path, options.read_only)? {
                return Ok(PmemMode::DaxMapSync);
            }
            let info = fsinfo::describe_fd(fd, path)?;
            Ok(if info.is_memory && can_flush { PmemMode::FlushOnly } else { PmemMode::Msync })
        }
    }
}

/// Probes `MAP_SHARED_VALIDATE | MAP_SYNC` with a one-page mapping (valid even past the end
/// of the file, as long as it is not touched).
fn map_sync_supported(fd: &OwnedFd, path: &Path, read_only: bool) -> Result<bool> {
    let page = rustix::param::page_size();
    let prot = if read_only { ProtFlags::READ } else { ProtFlags::READ | ProtFlags::WRITE };
    // SAFETY: a fresh mapping that is never accessed and is unmapped below.
    let probe = unsafe {
        rustix::mm::mmap(
            ptr::null_mut(),
            page,
            prot,
            MapFlags::SHARED_VALIDATE | MapFlags::SYNC,
            fd,
            0,
        )
    };
    match probe {
        Ok(address) => {
            // SAFETY: unmapping the probe we just made.
            let _ = unsafe { rustix::mm::munmap(address, page) };
            Ok(true)
        }
        Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::INVAL) => Ok(false),
        Err(errno) => Err(Error::from_rustix(Op::Map, path, errno)),
    }
}
