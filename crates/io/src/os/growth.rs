//! Growing a file ahead of its writes, in one size-changing system call per chunk.
//!
//! Order of attempts (as WiredTiger's `__wti_posix_file_extend`): `fallocate(mode 0)`, which
//! allocates blocks and extends the size in one metadata update; `posix_fallocate`, whose glibc
//! emulation writes one byte per block where fallocate is unsupported (ramfs, some network
//! file systems); and `ftruncate`, which only extends the size (a sparse hole). Every call made
//! is counted in `IoStats::resize_syscalls`, failed attempts included. `GrowthStrategy::Truncate`
//! goes straight to ftruncate.
//!
//! Must never shrink a file: callers pass `current` as read from the kernel under their resize
//! exclusion, and `target > current`.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use crate::{Error, GrowthStrategy, IoStats, Op, Result};

/// Which call finally grew the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GrowthCall {
    Fallocate,
    PosixFallocate,
    Ftruncate,
}

/// Grows the file behind `fd` from `current` to `target` bytes.
pub(crate) fn grow(
    fd: &OwnedFd,
    path: &Path,
    current: u64,
    target: u64,
    strategy: GrowthStrategy,
    stats: &IoStats,
) -> Result<GrowthCall> {
    assert!(target > current, "grow must extend: {current} -> {target}");
    let extra = target - current;
    if strategy == GrowthStrategy::Truncate {
        return extend_size(fd, path, target, stats);
    }

    IoStats::bump(&stats.resize_syscalls);
    IoStats::bump(&stats.fallocate_calls);
    match rustix::fs::fallocate(fd, rustix::fs::FallocateFlags::empty(), current, extra) {
        Ok(()) => return Ok(GrowthCall::Fallocate),
        Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::NOSYS) => {}
        Err(errno) => {
            // A failed fallocate may have allocated (and, without KEEP_SIZE, exposed) part of
            // the range, on ext4 up to a full disk: cut it back so a failed growth changes
            // nothing.
            undo_growth(fd, current, stats);
            return Err(Error::from_rustix(Op::Allocate, path, errno));
        }
    }

    IoStats::bump(&stats.resize_syscalls);
    IoStats::bump(&stats.posix_fallocate_calls);
    let (Ok(start), Ok(length)) = (libc::off_t::try_from(current), libc::off_t::try_from(extra))
    else {
        return Err(Error::FileTooLarge { op: Op::Allocate, path: path.to_path_buf() });
    };
    // SAFETY: the descriptor is open for the life of `fd`; posix_fallocate reads no memory.
    let rc = unsafe { libc::posix_fallocate(fd.as_raw_fd(), start, length) };
    match rc {
        0 => return Ok(GrowthCall::PosixFallocate),
        libc::EINVAL | libc::EOPNOTSUPP | libc::ENOSYS => {}
        errno => {
            undo_growth(fd, current, stats);
            return Err(Error::from_errno(Op::Allocate, path, errno));
        }
    }

    extend_size(fd, path, target, stats)
}

/// Best effort: the growth already failed, and the error reported is that failure.
fn undo_growth(fd: &OwnedFd, current: u64, stats: &IoStats) {
    IoStats::bump(&stats.resize_syscalls);
    IoStats::bump(&stats.ftruncate_calls);
    let _ = rustix::fs::ftruncate(fd, current);
}

fn extend_size(fd: &OwnedFd, path: &Path, target: u64, stats: &IoStats) -> Result<GrowthCall> {
    IoStats::bump(&stats.resize_syscalls);
    IoStats::bump(&stats.ftruncate_calls);
    rustix::fs::ftruncate(fd, target).map_err(|e| Error::from_rustix(Op::Allocate, path, e))?;
    Ok(GrowthCall::Ftruncate)
}

/// Sets the size exactly with ftruncate (truncation, or an exact extension).
pub(crate) fn truncate(fd: &OwnedFd, path: &Path, len: u64, stats: &IoStats) -> Result<()> {
    IoStats::bump(&stats.resize_syscalls);
    IoStats::bump(&stats.ftruncate_calls);
    rustix::fs::ftruncate(fd, len).map_err(|e| Error::from_rustix(Op::SetLen, path, e))
}
