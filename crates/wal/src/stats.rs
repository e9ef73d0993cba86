//! Counters of a log.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a log has done since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalStats {
    /// Records appended.
    pub appends: u64,
    /// Bytes appended, headers and padding included.
    pub append_bytes: u64,
    /// fdatasync rounds (each may sync several segments) that made records durable.
    pub sync_rounds: u64,
    /// Records made durable by those rounds: `synced_records / sync_rounds` is the mean
    /// group-commit size.
    pub synced_records: u64,
    /// Sync rounds run by the background flusher (for `Buffered` appends).
    pub flusher_rounds: u64,
    /// Nanoseconds spent in the fdatasync calls of sync rounds (the device's busy time, as
    /// the log sees it).
    pub sync_ns: u64,
    /// Segments the log moved to.
    pub rotations: u64,
    /// Rotations that had to wait because no prepared segment was ready.
    pub rotation_waits: u64,
    /// Segments prepared (allocated, zeroed, named and synced), recycled ones included.
    pub segments_prepared: u64,
    /// Segments prepared from the file of a truncated one, with no zero-fill.
    pub segments_recycled: u64,
    /// Segments removed by `truncate_below`.
    pub segments_removed: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub appends: AtomicU64,
    pub append_bytes: AtomicU64,
    pub sync_rounds: AtomicU64,
    pub synced_records: AtomicU64,
    pub flusher_rounds: AtomicU64,
    pub sync_ns: AtomicU64,
    pub rotations: AtomicU64,
    pub rotation_waits: AtomicU64,
    pub segments_prepared: AtomicU64,
    pub segments_recycled: AtomicU64,
    pub segments_removed: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, amount: u64) {
        counter.fetch_add(amount, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> WalStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        WalStats {
            appends: get(&self.appends),
            append_bytes: get(&self.append_bytes),
            sync_rounds: get(&self.sync_rounds),
            synced_records: get(&self.synced_records),
            flusher_rounds: get(&self.flusher_rounds),
            sync_ns: get(&self.sync_ns),
            rotations: get(&self.rotations),
            rotation_waits: get(&self.rotation_waits),
            segments_prepared: get(&self.segments_prepared),
            segments_recycled: get(&self.segments_recycled),
            segments_removed: get(&self.segments_removed),
        }
    }
}
