//! I/O counters, shared by every handle that is given the same `Arc<IoStats>`.
//!
//! Counters are relaxed atomics: they are observations, never used for synchronisation.
//! `resize_syscalls` counts every size-changing system call (fallocate, posix_fallocate,
//! ftruncate) so that the effect of growing files in chunks can be shown.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! io_stats {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Live counters. Cheap to update from many threads.
        #[derive(Debug, Default)]
        pub struct IoStats {
            $($(#[$doc])* pub(crate) $name: AtomicU64,)*
        }

        /// A point-in-time copy of `IoStats`.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
        pub struct IoStatsSnapshot {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl IoStats {
            /// Copies every counter.
            pub fn snapshot(&self) -> IoStatsSnapshot {
                IoStatsSnapshot { $($name: self.$name.load(Ordering::Relaxed),)* }
            }
        }

        impl IoStatsSnapshot {
            /// Counter-wise difference `self - earlier`, for measuring one phase.
            pub fn since(&self, earlier: &IoStatsSnapshot) -> IoStatsSnapshot {
                IoStatsSnapshot { $($name: self.$name.saturating_sub(earlier.$name),)* }
            }

            /// (name, value) pairs in declaration order, for printing.
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }
    };
}

io_stats! {
    /// Read calls that completed.
    reads,
    /// Bytes read by copying out of a mapping.
    read_bytes_mapped,
    /// Bytes read with pread.
    read_bytes_syscall,
    /// Write calls that completed.
    writes,
    /// Bytes written by copying into a mapping.
    write_bytes_mapped,
    /// Bytes written with pwrite.
    write_bytes_syscall,
    /// Of the mapped bytes written, those written with non-temporal stores.
    write_bytes_nontemporal,
    /// Mapped accesses that used a system call because a resize was running.
    fallbacks_resizing,
    /// Mapped accesses that used a system call because the range was outside the mapping.
    fallbacks_outside_map,
    /// Size-changing system calls of every kind (the sum of the next three).
    resize_syscalls,
    /// fallocate calls.
    fallocate_calls,
    /// posix_fallocate calls (used where fallocate is not supported).
    posix_fallocate_calls,
    /// ftruncate calls (exact size changes, and the last growth fallback).
    ftruncate_calls,
    /// Times a mapping was replaced after a size change.
    remaps,
    /// fdatasync and fsync calls.
    syncs,
    /// Write-back hints (sync_file_range with SYNC_FILE_RANGE_WRITE).
    writeback_hints,
    /// Bytes of mapped pages let go (`File::release_pages`).
    released_bytes,
    /// msync calls.
    msyncs,
    /// persist calls.
    persists,
    /// Cache lines flushed (clwb, clflushopt or clflush).
    lines_flushed,
    /// Store fences (sfence).
    fences,
    /// 8-byte atomic stores.
    atomic_stores,
    /// SIGBUS faults caught in a mapping (file shrunk elsewhere, or a media error).
    sigbus_faults,
}

impl IoStats {
    pub(crate) fn add(counter: &AtomicU64, amount: u64) {
        counter.fetch_add(amount, Ordering::Relaxed);
    }

    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}
