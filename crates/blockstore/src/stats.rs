//! What the stores count and report.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counters of a store since it was opened.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StoreStats {
    /// Groups made durable.
    pub groups: u64,
    /// Blocks written by the layer above (puts and deletes), not counting cleaning copies.
    pub blocks: u64,
    /// Payload bytes the layer above asked to write (before compression).
    pub payload_bytes: u64,
    /// Bytes written to files by this store: blocks, headers, padding, doublewrite copies,
    /// cleaning copies and map checkpoints. What the device was asked to take.
    pub device_bytes_written: u64,
    /// fdatasync and fsync calls.
    pub syncs: u64,
    /// Blocks read from the files for the layer above.
    pub reads: u64,
    /// Bytes read from files for them.
    pub read_bytes: u64,
    /// Bytes the live blocks take in their files (headers and padding included).
    pub live_bytes: u64,
    /// Bytes of the store's files on disk (segments as allocated, or slots and the
    /// doublewrite file).
    pub file_bytes: u64,
    /// log store: segments deleted by cleaning.
    pub segments_cleaned: u64,
    /// log store: the cold stream's segments `shrink_to` sealed once nothing in them was
    /// live (each then deleted like a cleaned one).
    pub cold_segments_sealed: u64,
    /// log store: live blocks copied by cleaning.
    pub blocks_relocated: u64,
    /// log store: bytes written by those copies.
    pub relocated_bytes: u64,
    /// log store: map checkpoints written.
    pub checkpoints: u64,
    /// log store: bytes written by them.
    pub checkpoint_bytes: u64,
    /// log store: blocks written into reused free space of older segments (each with a
    /// pointer in the log).
    pub reused_blocks: u64,
    /// log store: bytes written by them (pointers not counted).
    pub reused_bytes: u64,
    /// log store: the writes those blocks took (adjacent blocks of a group go in one).
    pub reused_runs: u64,
    /// log store: bytes freed that went to the pool without waiting for a map checkpoint
    /// (recovery from the last one already skips them).
    pub reusable_at_once_bytes: u64,
    /// doublewrite store: bytes written to the doublewrite file.
    pub doublewrite_bytes: u64,
    /// doublewrite store: bytes written in place.
    pub in_place_bytes: u64,
    /// Bytes of memory the store's records of its blocks take (the id → location map at its
    /// capacity, and the tombstones it keeps), estimated from the tables' sizes: memory that
    /// grows with the data, which its owner counts against its budget.
    pub index_bytes: u64,
}

impl StoreStats {
    /// `file_bytes / live_bytes`, or 0 with nothing live.
    pub fn space_amplification(&self) -> f64 {
        if self.live_bytes == 0 {
            0.0
        } else {
            self.file_bytes as f64 / self.live_bytes as f64
        }
    }
}

/// What opening a store found and did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecoveryReport {
    /// The map checkpoint loaded (its sequence number), if any.
    pub checkpoint: Option<u64>,
    /// Entries it held.
    pub checkpoint_entries: u64,
    /// Segments scanned after it.
    pub segments_scanned: u64,
    /// Bytes of blocks read while scanning.
    pub bytes_scanned: u64,
    /// Complete groups applied.
    pub groups_applied: u64,
    /// Blocks in them.
    pub blocks_applied: u64,
    /// Where the scan stopped before the end of the last segment, and why, if it did.
    pub stop: Option<(PathBuf, u64, String)>,
    /// Blocks of the incomplete trailing group that were discarded.
    pub discarded_blocks: u64,
    /// Bytes cut from the tail.
    pub discarded_bytes: u64,
    /// Chains (`BlockStore::begin_chain`) whose pieces the scan met without their ending
    /// piece: left out, as never acknowledged.
    pub chains_dropped: u64,
    /// doublewrite store: a complete batch was found and written in place again.
    pub doublewrite_redone: bool,
    /// Wall time of the recovery.
    pub elapsed: Duration,
}

/// What `verify` checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Live blocks read and checked.
    pub blocks: u64,
    /// Their bytes on disk.
    pub bytes: u64,
}

/// Lock-free counters behind `StoreStats`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub groups: AtomicU64,
    pub blocks: AtomicU64,
    pub payload_bytes: AtomicU64,
    pub device_bytes_written: AtomicU64,
    pub syncs: AtomicU64,
    pub reads: AtomicU64,
    pub read_bytes: AtomicU64,
    pub segments_cleaned: AtomicU64,
    pub cold_segments_sealed: AtomicU64,
    pub blocks_relocated: AtomicU64,
    pub relocated_bytes: AtomicU64,
    pub checkpoints: AtomicU64,
    pub checkpoint_bytes: AtomicU64,
    pub reused_blocks: AtomicU64,
    pub reused_bytes: AtomicU64,
    pub reused_runs: AtomicU64,
    pub reusable_at_once_bytes: AtomicU64,
    pub doublewrite_bytes: AtomicU64,
    pub in_place_bytes: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The counters, with the two space figures the caller knows.
    pub fn snapshot(&self, live_bytes: u64, file_bytes: u64, index_bytes: u64) -> StoreStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StoreStats {
            groups: get(&self.groups),
            blocks: get(&self.blocks),
            payload_bytes: get(&self.payload_bytes),
            device_bytes_written: get(&self.device_bytes_written),
            syncs: get(&self.syncs),
            reads: get(&self.reads),
            read_bytes: get(&self.read_bytes),
            live_bytes,
            file_bytes,
            segments_cleaned: get(&self.segments_cleaned),
            cold_segments_sealed: get(&self.cold_segments_sealed),
            blocks_relocated: get(&self.blocks_relocated),
            relocated_bytes: get(&self.relocated_bytes),
            checkpoints: get(&self.checkpoints),
            checkpoint_bytes: get(&self.checkpoint_bytes),
            reused_blocks: get(&self.reused_blocks),
            reused_bytes: get(&self.reused_bytes),
            reused_runs: get(&self.reused_runs),
            reusable_at_once_bytes: get(&self.reusable_at_once_bytes),
            doublewrite_bytes: get(&self.doublewrite_bytes),
            in_place_bytes: get(&self.in_place_bytes),
            index_bytes,
        }
    }
}
