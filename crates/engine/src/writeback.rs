//! Write-back: the pages changed in place (`tree::write`) go to the block store in atomic
//! groups, each of which leaves the tree on disk whole. The engine's checkpoints use it
//! with groups of at most `Inner::group_bytes` (`db/checkpoint.rs`), each with a meta block.
//!
//! [`write_back`] takes the pages dirty when it starts, in id order, a group's worth at a
//! time (`group_bytes`). For each group it holds off splits (`BufferPool::hold_structure`),
//! adds every page of each split not yet durable that touched a page of the group, until no
//! split adds more (`Writer::closure`), and copies the dirty ones (`copy_dirty`, each under
//! its shared latch, so it is one state of the page). The pages stay dirty, and resident,
//! while the group is written. Before it is written, `before_group` hears the highest LSN
//! of its pages: the log must be durable up to it first (the write-ahead rule). Once the
//! group is durable, each page no writer changed since its copy turns clean, and the splits
//! it held are forgotten. Every group carries the blocks `extra` gives it; the caller's
//! meta block in each says where recovery replays the log from.
//!
//! Why the tree on disk is whole after every group: a page's structure (its key range, a
//! leaf's next link, an internal page's separators) changes only in a split, and a group
//! holds either every page a split changed, as of after the split, or, for pages that
//! turned clean since, those images were written already; pages a group does not hold keep
//! an image whose structure agrees with the rest. A group copied while splits were held off
//! holds no page in the middle of one.
//!
//! Why the log replays onto it: every change the log numbered at or below the sequence the
//! caller's meta block names was in its page when write-back began (the caller takes that
//! sequence as the visible one, every change at or below it made), every page dirty then
//! is in some group, and a page changed after its copy is still dirty, so the next
//! write-back takes it. Pages may hold later changes too; replaying the log after the
//! meta block's sequence puts every key's last change back over whatever a page held, as
//! every change is a whole new value or a removal.
//!
//! Must never: write a page whose changes the log has not made durable; mark a page clean
//! that changed after its copy, or before its group is durable; split one split's pages
//! between two groups.

use std::collections::BTreeSet;

use tierkv_blockstore::{BlockError, BlockId, BlockStore, BlockWrite};

use crate::buffer::{BufferError, BufferPool, PageSource};
use crate::page::slotted::Slotted;
use crate::tree::write::Writer;

/// What one write-back did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Pages written.
    pub pages: u64,
    /// Groups written.
    pub groups: u64,
    /// Splits whose pages went into a group together.
    pub splits: u64,
}

/// Why a write-back stopped. The pages it had not written stay dirty.
#[derive(Debug, thiserror::Error)]
pub enum WriteBackError<E, L> {
    /// A page could not be copied.
    #[error("{0}")]
    Page(BufferError<E>),
    /// The log could not be made durable up to a group's pages.
    #[error("{0}")]
    Log(L),
    /// The block store failed to write a group.
    #[error("{0}")]
    Blocks(BlockError),
}

/// A block the last group writes besides the pages: its bytes, or `None` to delete it.
pub type Extra = (BlockId, Option<std::sync::Arc<Vec<u8>>>);

/// Writes every page dirty now to `store` (see the module header), each group with the
/// blocks `extra` returns for it: called with the group's page images once they are copied
/// (so it may add what they refer to) and whether the group is the last (which carries the
/// caller's meta block).
pub fn write_back<S: PageSource, L>(
    pool: &BufferPool<S>,
    writer: &Writer,
    store: &dyn BlockStore,
    group_bytes: usize,
    mut before_group: impl FnMut(u64) -> Result<(), L>,
    mut extra: impl FnMut(&[&[u8]], bool) -> Vec<Extra>,
) -> Result<Written, WriteBackError<S::Error, L>> {
    let mut last_extra = 0;
    let page_bytes = pool.page_bytes();
    let per_group = (group_bytes / page_bytes).max(1);
    let wanted = pool.dirty_pages();
    let mut written = Written::default();
    let mut chunks = wanted.chunks(per_group).peekable();
    loop {
        let chunk = chunks.next().unwrap_or(&[]);
        let last_group = chunks.peek().is_none();
        let mut images: Vec<(u64, Vec<u8>, u64)> = Vec::new();
        let splits = {
            let _held = pool.hold_structure();
            let mut pids: BTreeSet<u64> = chunk.iter().copied().collect();
            let splits = writer.closure(&mut pids);
            for pid in pids {
                let mut image = Vec::with_capacity(page_bytes);
                if let Some(version) =
                    pool.copy_dirty(pid, &mut image).map_err(WriteBackError::Page)?
                {
                    images.push((pid, image, version));
                }
            }
            splits
        };
        let highest = images
            .iter()
            .map(|(_, image, _)| Slotted::new(&image[..]).lsn().expect("invariant: a checked page"))
            .max()
            .unwrap_or(0);
        let pages: Vec<&[u8]> = images.iter().map(|(_, image, _)| &image[..]).collect();
        let extra = extra(&pages, last_group);
        if last_group {
            last_extra = extra.len();
        }
        if !images.is_empty() {
            before_group(highest).map_err(WriteBackError::Log)?;
        }
        let mut group: Vec<BlockWrite<'_>> = images
            .iter()
            .map(|(pid, image, _)| BlockWrite::Put(BlockId(*pid), &image[..]))
            .collect();
        group.extend(extra.iter().map(|(id, bytes)| match bytes {
            Some(bytes) => BlockWrite::Put(*id, &bytes[..]),
            None => BlockWrite::Delete(*id),
        }));
        if !group.is_empty() {
            // CRASH: once the group is durable, its pages are the tree on disk: whole, as
            // every split in it is complete.
            store.apply_group(&group).map_err(WriteBackError::Blocks)?;
            written.groups += 1;
        }
        for (pid, image, version) in &images {
            pool.clean_if_unchanged(*pid, *version, image);
        }
        written.pages += images.len() as u64;
        written.splits += splits.len() as u64;
        writer.forget_splits(&splits);
        if last_group {
            break;
        }
    }
    assert!(last_extra == 0 || written.groups > 0, "the last blocks were not written");
    Ok(written)
}

#[cfg(test)]
mod tests;
