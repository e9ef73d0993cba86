//! `Db::stats`: counters and sizes, read from atomics and from the summary each checkpoint
//! copies out, never under the checkpointer's lock.

use std::sync::atomic::{AtomicU64, Ordering};

use tierkv_blockstore::StoreStats;
use tierkv_tiercache::TierStats;
use tierkv_wal::{Wal, WalStats};

use super::{lock, Inner};
use crate::Result;

/// The buffer pool's counters (the frames that hold the tree's pages).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Page reads that found the page in its frame.
    pub hits: u64,
    /// Page reads that loaded it from the block store (or the tier).
    pub misses: u64,
    /// Pages the clock evicted.
    pub evictions: u64,
    /// Times the frames needed room and no page could leave.
    pub over_budget: u64,
    /// Pages in frames now.
    pub resident: u64,
    /// Frames of deleted pages that keep their memory, counted, for the next page given the
    /// same id (given back first when room is needed).
    pub kept: u64,
    /// Optimistic reads run again because a writer changed the frame meanwhile.
    pub restarts: u64,
    /// Tier hits whose image failed its checksum, read from the block store instead. Always
    /// 0 unless something is wrong with the tier's memory.
    pub tier_rejected: u64,
}

/// What `Db::stats` reports.
#[derive(Clone, Debug)]
pub struct Stats {
    /// The newest visible sequence number (log LSN).
    pub sequence: u64,
    /// The sequence number the last checkpoint covers.
    pub checkpoint_sequence: u64,
    /// Levels of the B+tree.
    pub tree_height: usize,
    /// The next new page id (every page and overflow block has a smaller one).
    pub next_page: u64,
    /// Page ids below `next_page` that no block holds, given out before new ones.
    pub reusable_page_ids: usize,
    /// Bytes of before-images kept for snapshots (the undo), outside the buffer pool.
    pub undo_bytes: usize,
    /// Snapshots alive (each iterator and transaction holds one); while any is, writes
    /// keep their before-images in the undo.
    pub snapshots: u64,
    /// Pages changed in place and not yet written by a checkpoint.
    pub dirty_pages: usize,
    /// Bytes of overflow values written and not yet in the block store (counted in the
    /// buffer pool's budget).
    pub pending_overflow_bytes: usize,
    /// The buffer pool's counters.
    pub cache: CacheStats,
    /// Bytes the buffer pool counts: its resident and kept frames (each at least the
    /// kernel's page), its clock's records, and the pages a checkpoint holds before writing
    /// them.
    pub cache_bytes: usize,
    /// The buffer pool's budget now: `cache_size` less what the undo is set aside.
    pub cache_budget: usize,
    /// `get` calls.
    pub gets: u64,
    /// Writes (batches, and single puts and deletes).
    pub writes: u64,
    /// Operations in those writes.
    pub write_ops: u64,
    /// Writes slowed down because dirty pages passed halfway from what a checkpoint is due
    /// at to three quarters of the pool's room for pages, with the pool near its budget.
    pub stalls: u64,
    /// Checkpoints completed.
    pub checkpoints: u64,
    /// Atomic groups of pages the checkpoints wrote (a checkpoint writes at least one).
    pub checkpoint_groups: u64,
    /// Groups of pages a checkpoint wrote early to bound its dirty pages.
    pub early_flushes: u64,
    /// Pages and overflow blocks written by checkpoints.
    pub pages_written: u64,
    /// Old blocks deleted once no reader needed them.
    pub blocks_reclaimed: u64,
    /// Blocks retired and not yet deleted (kept for snapshots).
    pub blocks_retired: usize,
    /// Bytes of the log's live segment files (preallocated: most may be zeros).
    pub log_file_bytes: u64,
    /// Bytes of the log's records since the last checkpoint began (what the log holds that
    /// the tree may not).
    pub log_live_bytes: u64,
    /// The log's counters.
    pub log: WalStats,
    /// The block store's counters (sizes, bytes written, cleaning).
    pub blocks: StoreStats,
    /// The tier cache's counters, when the store has one.
    pub tier: Option<TierStats>,
}

impl Inner {
    pub(super) fn stats(&self) -> Result<Stats> {
        let pool = self.pages.pool();
        // The budget before the undo's size: undo freed in between grows the budget
        // after it shrinks, and read the other way round the two would count its room twice.
        let cache_budget = pool.budget();
        let version = self.current.load_full();
        let summary = *lock(&self.summary);
        let frames = pool.stats();
        let counters = &self.counters;
        let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Ok(Stats {
            sequence: self.visible.get(),
            checkpoint_sequence: summary.sequence,
            tree_height: version.tree.height(&self.pages)?,
            next_page: summary.next_page,
            reusable_page_ids: self.pages.reusable_count(),
            undo_bytes: self.undo.bytes(),
            snapshots: self.live.count(),
            dirty_pages: pool.dirty_count(),
            pending_overflow_bytes: self.pages.pending_bytes(),
            cache: CacheStats {
                hits: frames.lookups.saturating_sub(frames.misses),
                misses: frames.misses,
                evictions: frames.evictions,
                over_budget: frames.over_budget,
                resident: frames.resident,
                kept: frames.kept,
                restarts: frames.restarts,
                tier_rejected: self.pages.tier_rejected(),
            },
            cache_bytes: pool.used_bytes(),
            cache_budget,
            gets: counters.gets.get(),
            writes: count(&counters.writes),
            write_ops: count(&counters.write_ops),
            stalls: count(&counters.stalls),
            checkpoints: count(&counters.checkpoints),
            checkpoint_groups: count(&counters.checkpoint_groups),
            early_flushes: count(&counters.early_flushes),
            pages_written: count(&counters.pages_written),
            blocks_reclaimed: count(&counters.blocks_reclaimed),
            blocks_retired: summary.blocks_retired,
            log_file_bytes: self.wal.as_ref().map_or(0, Wal::file_bytes),
            log_live_bytes: self.log_bytes.load(Ordering::Relaxed),
            log: self.wal.as_ref().map(Wal::stats).unwrap_or_default(),
            blocks: self.pages.blocks().stats(),
            tier: self.pages.tier_stats(),
        })
    }
}
