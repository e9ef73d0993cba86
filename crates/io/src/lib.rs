//! `tierkv-io`: the only crate of tierkv that makes system calls or flushes cache lines.
//!
//! Every byte the engine stores moves through one of four access methods, chosen when a file is
//! opened (`AccessMethod`):
//!
//! - `syscall`: `pread`/`pwrite`; `direct` adds O_DIRECT with aligned buffers (`AlignedBuf`).
//! - `mmap`: a `MAP_SHARED` mapping used for reads and writes. Resizes follow the lock-free
//!   protocol of seed 000 (`remap_gate`): a resizer claims a `resizing` flag by compare-and-swap
//!   and waits for the `use_count` to drain; users fall back to `pread`/`pwrite` meanwhile.
//! - `pmem`: a mapping treated as persistent memory (`pmem` module): non-temporal copies for
//!   256 B and more, `persist` = clwb/clflushopt/clflush + sfence, an 8-byte atomic store for
//!   commit words, and `msync` where the file is not on persistent memory.
//! - `sim`: the in-memory backend of tests (`sim` module). It records every write, flush and
//!   sync, and produces crash images and injected faults from a seed.
//!
//! Files grow in chunks (`OpenOptions::chunk_bytes`, 64 MiB by default) with fallocate, then
//! posix_fallocate, then ftruncate; `IoStats::resize_syscalls` counts the calls.
//!
//! ```
//! use tierkv_io::{AccessMethod, OpenOptions, Storage};
//!
//! # fn main() -> tierkv_io::Result<()> {
//! # let dir = std::env::temp_dir().join(format!("tierkv-doc-{}", std::process::id()));
//! let storage = Storage::Os;
//! storage.create_dir_all(&dir)?;
//! let path = dir.join("demo.log");
//! let log = storage.open(&path, &OpenOptions::new(AccessMethod::Pmem).create(true))?;
//! println!("pmem mode: {:?}", log.pmem_mode()); // FlushOnly on tmpfs, Msync on disk
//! log.write_at(b"record payload", 8)?;         // copy (non-temporal for >= 256 B)
//! log.persist(8, 14)?;                          // flush each line + sfence (or msync)
//! log.store_u64(0, 22)?;                        // 8-byte atomic commit word
//! log.persist(0, 8)?;
//! let mut back = [0u8; 14];
//! log.read_at(&mut back, 8)?;
//! assert_eq!(&back, b"record payload");
//! assert_eq!(log.stats().resize_syscalls, 1);   // one 64 MiB chunk
//! # drop(log);
//! # storage.remove_file(&path)?;
//! # std::fs::remove_dir(&dir).ok();
//! # Ok(())
//! # }
//! ```
//!
//! Invariants:
//! 1. A mapped access never touches a byte past the end of the mapping, and the mapping never
//!    extends past the end of the file as this handle last set or observed it.
//! 2. If the file shrinks behind our back, the access returns `Error::FileShrunk` instead of
//!    killing the process with SIGBUS (`sigbus` module).
//! 3. Nothing here claims durability it did not get: `sync_data` is fdatasync, `persist` is a
//!    flush and fence only where that is what the mode in force (`PmemMode`) makes durable.

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod aligned;
mod backoff;
mod crc;
mod error;
mod file;
#[cfg(all(test, loom))]
#[path = "frames/loom_tests.rs"]
mod frame_loom_tests;
#[cfg(loom)]
#[path = "frames/word.rs"]
mod frame_word;
#[cfg(not(loom))]
pub mod frames;
pub mod futex;
pub mod heap;
pub mod interrupt;
pub mod measure;
mod options;
mod os;
pub mod pmem;
pub mod priority;
mod region;
mod remap_gate;
mod sigbus;
pub mod sim;
mod sizing;
mod stats;

pub use aligned::AlignedBuf;
pub use backoff::Backoff;
pub use crc::{crc32c, crc32c_parts};
pub use error::{AlignedItem, Error, FaultErrno, Op, Result};
pub use file::{File, FileLock, Storage};
pub use options::{
    AccessMethod, GrowthStrategy, OpenOptions, PmemMode, PmemModeRequest, DEFAULT_CHUNK_BYTES,
    DEFAULT_FILE_MODE,
};
pub use os::fsinfo::{file_system_info, FileSystemInfo};
pub use region::{MemoryRegion, RegionBacking};
pub use sizing::{RateSizing, DEFAULT_FILL_TARGET};
pub use stats::{IoStats, IoStatsSnapshot};

/// The largest end offset (`offset + len`) accepted: the largest `off_t`.
pub const MAX_FILE_END: u64 = i64::MAX as u64;

/// Checks a request's range and returns its end offset.
///
/// Zero-length requests are rejected: tierkv never issues them on purpose, so one is a bug in
/// the caller, and silently doing nothing would hide it.
pub(crate) fn checked_end(op: Op, path: &std::path::Path, offset: u64, len: u64) -> Result<u64> {
    if len == 0 {
        return Err(Error::ZeroLength { op, path: path.to_path_buf(), offset });
    }
    match offset.checked_add(len) {
        Some(end) if end <= MAX_FILE_END => Ok(end),
        _ => Err(Error::OffsetTooLarge {
            op,
            path: path.to_path_buf(),
            offset,
            len,
            max: MAX_FILE_END,
        }),
    }
}

/// Checks a file size given to `set_len` or `reserve`.
pub(crate) fn checked_size(op: Op, path: &std::path::Path, size: u64) -> Result<()> {
    if size > MAX_FILE_END {
        return Err(Error::OffsetTooLarge {
            op,
            path: path.to_path_buf(),
            offset: size,
            len: 0,
            max: MAX_FILE_END,
        });
    }
    Ok(())
}

/// Rounds `end` up to the growth chunk, saturating at `MAX_FILE_END`.
pub(crate) fn chunk_target(end: u64, chunk_bytes: u64) -> u64 {
    debug_assert!(chunk_bytes > 0);
    let rounded = end.div_ceil(chunk_bytes).saturating_mul(chunk_bytes);
    rounded.clamp(end, MAX_FILE_END.max(end))
}

/// Checks that an atomic 8-byte store is 8-byte aligned and returns its end offset.
pub(crate) fn checked_u64_slot(op: Op, path: &std::path::Path, offset: u64) -> Result<u64> {
    if !offset.is_multiple_of(8) {
        return Err(Error::Unaligned {
            op,
            path: path.to_path_buf(),
            item: AlignedItem::Offset,
            value: offset,
            required: 8,
            reason: "an atomic 8-byte store",
        });
    }
    checked_end(op, path, offset, 8)
}
