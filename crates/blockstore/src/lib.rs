//! `tierkv-blockstore`: blocks addressed by logical id, written in atomic groups, on
//! `tierkv-io`.
//!
//! Seed 003 ("Beyond Block I/O") moved write atomicity into a log-structured flash translation
//! layer: a flag bit in each block header marks the last block of a group, the id→location
//! map changes only once the whole group is durable, and recovery scans the log and discards
//! an incomplete trailing group. A database on top no longer needs InnoDB's doublewrite
//! buffer. This crate does the same in user space over ordinary files:
//!
//! - [`LogStore`] appends blocks to segment files (`format`), makes each group durable with one
//!   fdatasync shared by concurrent writers, and only then points the map at the new copies.
//!   It checkpoints the map, cleans mostly-dead segments in the background, and recovers by
//!   loading the last map checkpoint and scanning the log written after it.
//! - [`DoublewriteStore`] is the baseline: fixed slots updated in place, each group written
//!   first to a doublewrite file, synced, then in place, and synced again.
//!
//! Both implement [`BlockStore`], so a layer above can run on either and the comparison is
//! honest. [`scan_segments`] reads a log store's segment files without its map, for
//! salvaging a store whose map or log is damaged: every block whose checksum holds.
//!
//! ```
//! use tierkv_blockstore::{BlockId, BlockStore, LogStore, StoreOptions};
//! use tierkv_io::Storage;
//!
//! # fn main() -> Result<(), tierkv_blockstore::BlockError> {
//! # let dir = tempfile::tempdir().expect("a temporary directory");
//! let store = LogStore::open(&Storage::Os, dir.path(), StoreOptions::default())?;
//! // Both blocks become visible together, and only once both are durable.
//! store.write_group(&[(BlockId(1), b"left page"), (BlockId(2), b"right page")])?;
//! assert_eq!(store.read(BlockId(2))?.as_deref(), Some(&b"right page"[..]));
//! store.close()?;
//! # Ok(())
//! # }
//! ```

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![warn(missing_docs)]

use std::collections::BTreeMap;

mod doublewrite;
mod error;
pub mod format;
mod log_store;
mod options;
mod parts;
mod read;
mod scan;
mod stats;
mod writeback;

pub use doublewrite::DoublewriteStore;
pub use error::BlockError;
pub use format::Codec;
pub use log_store::LogStore;
pub use options::{DoublewriteOptions, StoreOptions};
pub use scan::{
    scan_segments, scan_segments_with, Doubt, ScanDamage, ScanOptions, ScannedBlock, SegmentScan,
};
pub use stats::{RecoveryReport, StoreStats, VerifyReport};

/// A block's logical id, chosen by the layer above.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockId(pub u64);

impl std::fmt::Display for BlockId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A write group's id: groups are numbered from 1 in the order they are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupId(pub u64);

impl std::fmt::Display for GroupId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One change in a write group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockWrite<'a> {
    /// Store these bytes as the block's content.
    Put(BlockId, &'a [u8]),
    /// Delete the block.
    Delete(BlockId),
}

impl BlockWrite<'_> {
    /// The block the change is for.
    pub fn id(&self) -> BlockId {
        match self {
            BlockWrite::Put(id, _) | BlockWrite::Delete(id) => *id,
        }
    }
}

/// Which implementation a store is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreKind {
    /// `LogStore`: log-structured, atomic groups.
    Log,
    /// `DoublewriteStore`: in place, behind a doublewrite buffer.
    Doublewrite,
}

impl StoreKind {
    /// The name used in options and output.
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Log => "atomic-group",
            StoreKind::Doublewrite => "doublewrite",
        }
    }
}

/// A block's content and, when the store keeps one, its version (`read_versioned`).
pub type Versioned = (Vec<u8>, Option<GroupId>);

/// What a block store offers the layer above. Implementations are `Send + Sync`: many
/// threads read and write at once.
///
/// Must hold for every implementation:
/// 1. `apply_group` is atomic: after a crash, every change of a group is visible or none is.
/// 2. It is durable: once it returns `Ok`, the group survives a crash.
/// 3. A read returns the content of the last group that returned `Ok` for that id (or a
///    concurrent one), never a mix, never bytes that fail their checksum: those are
///    `BlockError::Corruption`.
/// 4. After a failed write or sync, writes fail with `BlockError::Poisoned` until reopen.
pub trait BlockStore: Send + Sync {
    /// Applies `changes` atomically and durably; returns the group's id.
    fn apply_group(&self, changes: &[BlockWrite<'_>]) -> Result<GroupId, BlockError>;

    /// Writes `blocks` as one atomic, durable group.
    fn write_group(&self, blocks: &[(BlockId, &[u8])]) -> Result<GroupId, BlockError> {
        let changes: Vec<BlockWrite<'_>> =
            blocks.iter().map(|&(id, bytes)| BlockWrite::Put(id, bytes)).collect();
        self.apply_group(&changes)
    }

    /// Starts a chain: one atomic group written in pieces (`Chain::put`, then
    /// `Chain::commit`), so that its writer need not hold all of it at once. Nothing of it
    /// is visible until `commit` returns `Ok`, and then all of it is, durably, as with
    /// `apply_group`; a chain dropped without `commit`, or cut by a crash, leaves nothing.
    /// An id may be in several pieces: the last piece that names it wins. Other groups must
    /// not write the chain's ids while it is open. `LogStore` writes each piece as it comes;
    /// the default (`DoublewriteStore`) keeps the pieces in memory and applies them as one
    /// group at `commit`.
    fn begin_chain(&self) -> Box<dyn Chain + '_> {
        Box::new(BufferedChain { store: self, changes: BTreeMap::new() })
    }

    /// The block's content, or `None` if it was never written or was deleted.
    fn read(&self, id: BlockId) -> Result<Option<Vec<u8>>, BlockError>;

    /// Makes recovery cheap: `LogStore` writes a map checkpoint; `DoublewriteStore` has
    /// nothing to do.
    fn checkpoint(&self) -> Result<(), BlockError>;

    /// Gives back space that writes freed all at once (a compaction of the layer above):
    /// cleans sealed segments, emptiest first, past the space target the background
    /// cleaner keeps, until the files hold at most `file_bytes` or no segment is worth
    /// cleaning. Returns the files' bytes after. `DoublewriteStore` has fixed slots and does
    /// nothing.
    fn shrink_to(&self, file_bytes: u64) -> Result<u64, BlockError> {
        let _ = file_bytes;
        Ok(self.stats().file_bytes)
    }

    /// Counters since open.
    fn stats(&self) -> StoreStats;

    /// Reads and checks every live block.
    fn verify(&self) -> Result<VerifyReport, BlockError>;

    /// The ids of every live block, ascending (for the layer above to find the ids it can
    /// give out again: those below its highest that no block holds).
    fn live_ids(&self) -> Result<Vec<BlockId>, BlockError>;

    /// The largest block this store accepts.
    fn max_block_bytes(&self) -> usize;

    /// Which implementation this is.
    fn kind(&self) -> StoreKind;

    /// Stops background work and syncs. Later calls fail with `BlockError::Closed`.
    fn close(&self) -> Result<(), BlockError>;
}

/// A group written in pieces: see `BlockStore::begin_chain`.
pub trait Chain: Send {
    /// Writes `changes` as the chain's next piece (no id twice in one piece): not visible
    /// and not durable until `commit`.
    fn put(&mut self, changes: &[BlockWrite<'_>]) -> Result<(), BlockError>;

    /// Writes `changes` (possibly none) as the last piece, and applies the whole chain
    /// atomically and durably; returns the group that made it count.
    fn commit(self: Box<Self>, changes: &[BlockWrite<'_>]) -> Result<GroupId, BlockError>;
}

/// `BlockStore::begin_chain`'s default: the pieces' changes kept in memory (a later one
/// replacing an earlier one of the same id) and applied as one group at `commit`.
struct BufferedChain<'a, S: BlockStore + ?Sized> {
    store: &'a S,
    changes: BTreeMap<BlockId, Option<Vec<u8>>>,
}

impl<S: BlockStore + ?Sized> BufferedChain<'_, S> {
    fn keep(&mut self, changes: &[BlockWrite<'_>]) {
        for change in changes {
            let bytes = match change {
                BlockWrite::Put(_, bytes) => Some(bytes.to_vec()),
                BlockWrite::Delete(_) => None,
            };
            self.changes.insert(change.id(), bytes);
        }
    }
}

impl<S: BlockStore + ?Sized> Chain for BufferedChain<'_, S> {
    fn put(&mut self, changes: &[BlockWrite<'_>]) -> Result<(), BlockError> {
        self.keep(changes);
        Ok(())
    }

    fn commit(mut self: Box<Self>, changes: &[BlockWrite<'_>]) -> Result<GroupId, BlockError> {
        self.keep(changes);
        let group: Vec<BlockWrite<'_>> = self
            .changes
            .iter()
            .map(|(&id, bytes)| match bytes {
                Some(bytes) => BlockWrite::Put(id, bytes),
                None => BlockWrite::Delete(id),
            })
            .collect();
        self.store.apply_group(&group)
    }
}

/// Bytes a `HashMap<K, V>` (hashbrown) of `capacity` takes: its buckets (a capacity of `n`
/// has about `n × 8 / 7` of them, rounded up to a power of two), one entry and one control
/// byte each.
pub(crate) fn hash_table_bytes<K, V>(capacity: usize) -> u64 {
    if capacity == 0 {
        return 0;
    }
    let buckets = (capacity * 8 / 7).next_power_of_two();
    (buckets * (size_of::<(K, V)>() + 1)) as u64
}
