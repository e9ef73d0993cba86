//! The OS backend: real files through rustix (and libc where rustix has no wrapper).
//!
//! `OsFile` is either a `SyscallFile` (pread/pwrite, optionally O_DIRECT) or a `MappedFile`
//! (the mmap and pmem methods). Namespace operations (rename, remove, directory sync) are plain
//! functions. Everything returns `crate::Error` with the path and operation.

pub(crate) mod fsinfo;
mod growth;
mod mapped;
mod syscall;

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};

use crate::{AccessMethod, Error, IoStats, Op, OpenOptions, PmemMode, Result};
use mapped::MappedFile;
use syscall::SyscallFile;

/// An open file of the OS backend.
#[derive(Debug)]
pub(crate) enum OsFile {
    Syscall(SyscallFile),
    Mapped(MappedFile),
}

macro_rules! dispatch {
    ($self:ident, $file:ident => $call:expr) => {
        match $self {
            OsFile::Syscall($file) => $call,
            OsFile::Mapped($file) => $call,
        }
    };
}

impl OsFile {
    pub(crate) fn open(path: &Path, options: &OpenOptions) -> Result<OsFile> {
        let stats = options.stats.clone().unwrap_or_default();
        let direct = options.method == AccessMethod::Direct;
        let fd = open_fd(path, options, direct)?;
        Ok(match options.method {
            AccessMethod::Syscall | AccessMethod::Direct => {
                OsFile::Syscall(SyscallFile::new(fd, path, options, stats)?)
            }
            AccessMethod::Mmap | AccessMethod::Pmem => {
                OsFile::Mapped(MappedFile::new(fd, path, options, stats)?)
            }
        })
    }

    pub(crate) fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        dispatch!(self, file => file.read_at(buf, offset))
    }
    pub(crate) fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        dispatch!(self, file => file.write_at(buf, offset))
    }
    pub(crate) fn write_vectored_at(&self, parts: &[&[u8]], offset: u64) -> Result<()> {
        match self {
            OsFile::Syscall(file) => file.write_vectored_at(parts, offset),
            // A mapped write is a copy: part after part is the same as the concatenation.
            OsFile::Mapped(file) => {
                let total: u64 = parts.iter().map(|p| p.len() as u64).sum();
                crate::checked_end(Op::Write, file.path(), offset, total)?;
                let mut at = offset;
                for part in parts.iter().filter(|p| !p.is_empty()) {
                    file.write_at(part, at)?;
                    at += part.len() as u64;
                }
                Ok(())
            }
        }
    }
    pub(crate) fn len(&self) -> u64 {
        dispatch!(self, file => file.len())
    }
    pub(crate) fn set_len(&self, len: u64) -> Result<()> {
        dispatch!(self, file => file.set_len(len))
    }
    pub(crate) fn reserve(&self, len: u64) -> Result<()> {
        dispatch!(self, file => file.reserve(len))
    }
    pub(crate) fn sync_data(&self) -> Result<()> {
        dispatch!(self, file => file.sync_data())
    }
    pub(crate) fn sync_all(&self) -> Result<()> {
        dispatch!(self, file => file.sync_all())
    }
    pub(crate) fn start_writeback(&self, offset: u64, len: u64) -> Result<()> {
        dispatch!(self, file => file.start_writeback(offset, len))
    }
    pub(crate) fn persist(&self, offset: u64, len: u64) -> Result<()> {
        dispatch!(self, file => file.persist(offset, len))
    }
    pub(crate) fn persist_ranges(&self, ranges: &[(u64, u64)]) -> Result<()> {
        dispatch!(self, file => file.persist_ranges(ranges))
    }
    pub(crate) fn store_u64(&self, offset: u64, value: u64) -> Result<()> {
        dispatch!(self, file => file.store_u64(offset, value))
    }
    pub(crate) fn advise_dontneed(&self) -> Result<()> {
        dispatch!(self, file => file.advise_dontneed())
    }
    pub(crate) fn write_at_syscall(&self, buf: &[u8], offset: u64) -> Result<()> {
        match self {
            OsFile::Mapped(file) => file.write_at_syscall(buf, offset),
            OsFile::Syscall(file) => file.write_at(buf, offset),
        }
    }
    pub(crate) fn release_pages(&self, offset: u64, len: u64) -> Result<()> {
        match self {
            OsFile::Mapped(file) => file.release_pages(offset, len),
            OsFile::Syscall(_) => Ok(()),
        }
    }
    pub(crate) fn method(&self) -> AccessMethod {
        dispatch!(self, file => file.method())
    }
    pub(crate) fn pmem_mode(&self) -> Option<PmemMode> {
        match self {
            OsFile::Syscall(_) => None,
            OsFile::Mapped(file) => file.pmem_mode(),
        }
    }
    pub(crate) fn direct_alignment(&self) -> Option<u64> {
        match self {
            OsFile::Syscall(file) => file.direct_alignment(),
            OsFile::Mapped(_) => None,
        }
    }
    pub(crate) fn path(&self) -> &Path {
        dispatch!(self, file => file.path())
    }
    pub(crate) fn stats_handle(&self) -> &Arc<IoStats> {
        dispatch!(self, file => file.stats_handle())
    }
}

fn open_fd(path: &Path, options: &OpenOptions, direct: bool) -> Result<OwnedFd> {
    let mut flags = OFlags::CLOEXEC;
    flags |= if options.read_only { OFlags::RDONLY } else { OFlags::RDWR };
    if options.create {
        flags |= OFlags::CREATE;
    }
    if options.create_new {
        flags |= OFlags::CREATE | OFlags::EXCL;
    }
    if direct {
        flags |= OFlags::DIRECT;
    }
    match rustix::fs::open(path, flags, Mode::from_raw_mode(options.mode)) {
        Ok(fd) => Ok(fd),
        Err(rustix::io::Errno::INVAL) if direct => {
            // The file system refused O_DIRECT. Name it, so the user knows what to change.
            let fs_type = fsinfo::file_system_info(path)
                .or_else(|_| fsinfo::file_system_info(path.parent().unwrap_or(Path::new("."))))
                .map_or_else(|_| "unknown".to_string(), |info| info.fs_type);
            Err(Error::DirectIoUnsupported { path: path.to_path_buf(), fs_type })
        }
        Err(rustix::io::Errno::EXIST) => Err(Error::Io {
            op: Op::Open,
            path: path.to_path_buf(),
            source: std::io::Error::from_raw_os_error(libc::EEXIST),
        }),
        Err(errno) => Err(Error::from_rustix(Op::Open, path, errno)),
    }
}

/// The current size of the file behind `fd`, from the kernel.
pub(crate) fn fstat_len(fd: &OwnedFd, path: &Path) -> Result<u64> {
    let stat = rustix::fs::fstat(fd).map_err(|e| Error::from_rustix(Op::Stat, path, e))?;
    u64::try_from(stat.st_size).map_err(|_| Error::Io {
        op: Op::Stat,
        path: path.to_path_buf(),
        source: std::io::Error::other(format!("negative file size {}", stat.st_size)),
    })
}

/// fdatasync, counted.
pub(crate) fn fdatasync(fd: &OwnedFd, path: &Path, stats: &IoStats) -> Result<()> {
    IoStats::bump(&stats.syncs);
    rustix::fs::fdatasync(fd).map_err(|e| Error::from_rustix(Op::Sync, path, e))
}

/// fsync, counted.
pub(crate) fn fsync(fd: &OwnedFd, path: &Path, stats: &IoStats) -> Result<()> {
    IoStats::bump(&stats.syncs);
    rustix::fs::fsync(fd).map_err(|e| Error::from_rustix(Op::Sync, path, e))
}

/// sync_file_range(SYNC_FILE_RANGE_WRITE): starts the write-back of the dirty pages in
/// `offset..offset + len` and returns without waiting for it, counted.
pub(crate) fn start_writeback(
    fd: &OwnedFd,
    path: &Path,
    stats: &IoStats,
    offset: u64,
    len: u64,
) -> Result<()> {
    crate::checked_end(Op::Writeback, path, offset, len)?;
    IoStats::bump(&stats.writeback_hints);
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Ok(());
    };
    // SAFETY: plain system call on a descriptor we own; no memory is passed.
    let rc =
        unsafe { libc::sync_file_range(fd.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE) };
    if rc == 0 {
        return Ok(());
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
    Err(Error::from_rustix(Op::Writeback, path, rustix::io::Errno::from_raw_os_error(errno)))
}

/// posix_fadvise(DONTNEED) over the whole file.
pub(crate) fn fadvise_dontneed(fd: &OwnedFd, path: &Path) -> Result<()> {
    rustix::fs::fadvise(fd, 0, None, rustix::fs::Advice::DontNeed)
        .map_err(|e| Error::from_rustix(Op::Advise, path, e))
}

/// pread until `buf` is full; a short read at end of file is `Error::ReadPastEnd`.
pub(crate) fn pread_exact(fd: &OwnedFd, path: &Path, buf: &mut [u8], offset: u64) -> Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        let at = offset + done as u64;
        match rustix::io::pread(fd, &mut buf[done..], at) {
            Ok(0) => {
                let file_len = fstat_len(fd, path).unwrap_or(at);
                return Err(Error::ReadPastEnd {
                    path: path.to_path_buf(),
                    offset,
                    len: buf.len() as u64,
                    file_len,
                });
            }
            Ok(count) => done += count,
            Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(Error::from_rustix(Op::Read, path, errno)),
        }
    }
    Ok(())
}

/// pwrite until all of `buf` is written.
pub(crate) fn pwrite_all(fd: &OwnedFd, path: &Path, buf: &[u8], offset: u64) -> Result<()> {
    let mut done = 0usize;
    while done < buf.len() {
        match rustix::io::pwrite(fd, &buf[done..], offset + done as u64) {
            Ok(0) => return Err(Error::from_errno(Op::Write, path, libc::EIO)),
            Ok(count) => done += count,
            Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(Error::from_rustix(Op::Write, path, errno)),
        }
    }
    Ok(())
}

/// The most buffers one pwritev takes (IOV_MAX on Linux).
const MAX_IOVECS: usize = 1024;

/// pwritev until every part is written, back to back from `offset`.
pub(crate) fn pwritev_all(fd: &OwnedFd, path: &Path, parts: &[&[u8]], offset: u64) -> Result<()> {
    // The part being written and how much of it is done.
    let (mut part, mut within) = (0usize, 0usize);
    let mut at = offset;
    let mut slices: Vec<std::io::IoSlice<'_>> = Vec::with_capacity(parts.len().min(MAX_IOVECS));
    while part < parts.len() {
        slices.clear();
        slices.push(std::io::IoSlice::new(&parts[part][within..]));
        slices.extend(
            parts[part + 1..]
                .iter()
                .filter(|p| !p.is_empty())
                .take(MAX_IOVECS - 1)
                .map(|p| std::io::IoSlice::new(p)),
        );
        let mut count = match rustix::io::pwritev(fd, &slices, at) {
            Ok(0) => return Err(Error::from_errno(Op::Write, path, libc::EIO)),
            Ok(count) => count,
            Err(rustix::io::Errno::INTR) => continue,
            Err(errno) => return Err(Error::from_rustix(Op::Write, path, errno)),
        };
        at += count as u64;
        // Move past what was written (and past empty parts).
        while part < parts.len() {
            let left = parts[part].len() - within;
            if count < left {
                within += count;
                break;
            }
            count -= left;
            part += 1;
            within = 0;
        }
    }
    Ok(())
}

/// Opens (creating it with `mode` when missing) and locks `path` with an exclusive
/// `flock`, without blocking. The lock is the open file description's: it holds until the
/// returned descriptor closes, and a second open of the same file, even in this process,
/// cannot take it (after `LOCK_RETRY`: see `flock_retrying`).
pub(crate) fn lock_file(path: &Path, mode: u32) -> Result<OwnedFd> {
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags, Mode::from_raw_mode(mode))
        .map_err(|e| Error::from_rustix(Op::Open, path, e))?;
    flock_retrying(fd, path, rustix::fs::FlockOperation::NonBlockingLockExclusive)
}

/// Opens the existing file at `path` read-only and takes a shared `flock` on it, without
/// blocking (`Error::Locked` while an exclusive lock is held). It creates nothing.
pub(crate) fn lock_file_shared(path: &Path) -> Result<OwnedFd> {
    let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| Error::from_rustix(Op::Open, path, e))?;
    flock_retrying(fd, path, rustix::fs::FlockOperation::NonBlockingLockShared)
}

/// How long a lock that looks held is tried again before `Error::Locked`.
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(200);

/// Takes `operation` (a non-blocking `flock`) on `fd`. A lock released a moment ago can
/// still look held: a child this process forked keeps a copy of every descriptor until its
/// `exec` closes the close-on-exec ones, and the copy holds the open file description's
/// lock. So a refusal is tried again, with growing pauses, for `LOCK_RETRY` before it is
/// reported; a lock another open really holds is reported after that wait.
fn flock_retrying(
    fd: OwnedFd,
    path: &Path,
    operation: rustix::fs::FlockOperation,
) -> Result<OwnedFd> {
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_micros(100);
    loop {
        match rustix::fs::flock(&fd, operation) {
            Ok(()) => return Ok(fd),
            Err(rustix::io::Errno::WOULDBLOCK) if started.elapsed() < LOCK_RETRY => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(20));
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(Error::Locked { path: path.to_path_buf() });
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(Error::from_rustix(Op::Lock, path, errno)),
        }
    }
}

pub(crate) fn create_dir_all(path: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| Error::from_std(Op::CreateDir, path, e))
}

pub(crate) fn remove_dir(path: &Path) -> Result<()> {
    rustix::fs::unlinkat(rustix::fs::CWD, path, rustix::fs::AtFlags::REMOVEDIR)
        .map_err(|e| Error::from_rustix(Op::RemoveDir, path, e))
}

pub(crate) fn remove_file(path: &Path) -> Result<()> {
    rustix::fs::unlink(path).map_err(|e| Error::from_rustix(Op::Remove, path, e))
}

pub(crate) fn rename(from: &Path, to: &Path) -> Result<()> {
    rustix::fs::rename(from, to).map_err(|e| {
        if e == rustix::io::Errno::NOENT && from.exists() {
            return Error::from_rustix(Op::Rename, to, e);
        }
        Error::from_rustix(Op::Rename, from, e)
    })
}

pub(crate) fn sync_dir(path: &Path) -> Result<()> {
    let fd =
        rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| Error::from_rustix(Op::SyncDir, path, e))?;
    rustix::fs::fsync(&fd).map_err(|e| Error::from_rustix(Op::SyncDir, path, e))
}

pub(crate) fn list_dir(path: &Path) -> Result<Vec<String>> {
    let entries = std::fs::read_dir(path).map_err(|e| Error::from_std(Op::ListDir, path, e))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::from_std(Op::ListDir, path, e))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names)
}

pub(crate) fn is_dir(path: &Path) -> Result<bool> {
    match std::fs::metadata(path) {
        Ok(metadata) => Ok(metadata.is_dir()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(Error::from_std(Op::Stat, path, error)),
    }
}

pub(crate) fn exists(path: &Path) -> Result<bool> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(Error::from_std(Op::Stat, path, error)),
    }
}
