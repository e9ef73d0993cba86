//! Write-back: the pages changed in place (`tree::write`) go to the block store in atomic
//! groups, each of which leaves the tree on disk whole. The engine's checkpoints use it
//! with groups of at most `Inner::group_bytes` (`db/checkpoint.rs`), each with a meta block.
//!
//! [`write_back`] takes the pages dirty when it starts, in id order, a group's worth at a
//! time (`group_bytes`). For each group it adds every page of each split not yet durable
//! that touched a page of the group, until no split adds more (`Writer::closure`), and
//! copies the dirty ones (`copy_dirty`, each under its shared latch, so it is one state of
//! the page). Splits run while it copies, and while it makes the first search (which
//! counts the splits made meanwhile as made after it: `Closure::looked_to`; a search over
//! 98,000 pages held every writer up for 165 ms when it held splits off). It holds them off
//! (`BufferPool::hold_structure`) only to take stock, between passes, of the splits made
//! since the last stock-taking
//! (`Writer::changed_since`); their pages in the group are copied again, and what they
//! add to the closure is copied, in the next pass, until a stock-taking finds nothing to
//! copy. So every page in a group is copied after the last split that changed it, and
//! the group holds every page of those splits. After a few passes, one holds splits off
//! while it copies (a group under a steady stream of splits still ends). Holding splits
//! off for the whole copy made them wait tens of milliseconds on a group of thousands of
//! pages (in a two-level tree every leaf split changes the root, and the closure takes
//! them all). A stock-taking looks only at the splits made since the last one (the
//! writer keeps each page's pending splits; `Closure` remembers what a group took): with
//! a search from every page each time, one held splits off for 20 to 160 ms in a YCSB
//! load with 15,000 splits pending. The first closure of a group is still a search from
//! every page of it, with no split held off. The pages stay dirty, and resident,
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
//! an image whose structure agrees with the rest. A split holds the structure alone (no
//! stock-taking runs) and changes its pages under their exclusive latches, so a copy sees
//! each split's change of its page whole or not at all, and a stock-taking sees every
//! split made before it, recorded and numbered.
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

use std::collections::{BTreeMap, BTreeSet};

use tierkv_blockstore::{BlockError, BlockId, BlockStore, BlockWrite};

use crate::buffer::{BufferError, BufferPool, PageSource};
use crate::page::slotted::Slotted;
use crate::tree::write::{Closure, Writer};

/// What one write-back did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Pages written.
    pub pages: u64,
    /// Groups written.
    pub groups: u64,
    /// Splits whose pages went into a group together.
    pub splits: u64,
    /// Pages copied again because a split changed them while their group was copied.
    pub recopies: u64,
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
    before_group: impl FnMut(u64) -> Result<(), L>,
    extra: impl FnMut(&[&[u8]], bool) -> Vec<Extra>,
) -> Result<Written, WriteBackError<S::Error, L>> {
    write_back_racing(pool, writer, store, group_bytes, before_group, extra, &mut || {})
}

/// `write_back`, calling `racing` after each page copied with splits running (the tests
/// split pages there, where another thread's split could land).
fn write_back_racing<S: PageSource, L>(
    pool: &BufferPool<S>,
    writer: &Writer,
    store: &dyn BlockStore,
    group_bytes: usize,
    mut before_group: impl FnMut(u64) -> Result<(), L>,
    mut extra: impl FnMut(&[&[u8]], bool) -> Vec<Extra>,
    racing: &mut dyn FnMut(),
) -> Result<Written, WriteBackError<S::Error, L>> {
    let mut last_extra = 0;
    let page_bytes = pool.page_bytes();
    let per_group = (group_bytes / page_bytes).max(1);
    let wanted = pool.dirty_pages();
    let mut written = Written::default();
    let mut chunks = wanted.chunks(per_group).peekable();
    // Image buffers of the last group, reused by the next: fresh ones would be fresh memory
    // (the allocator gives freed pages back within a second), each a page fault and a page
    // zeroed; the checkpoint thread spent about a tenth of a YCSB load's samples there.
    let mut spare: Vec<Vec<u8>> = Vec::new();
    loop {
        let chunk = chunks.next().unwrap_or(&[]);
        let last_group = chunks.peek().is_none();
        let (images, splits, recopies) =
            copy_group(pool, writer, chunk, &mut spare, racing).map_err(WriteBackError::Page)?;
        written.recopies += recopies;
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
        spare.extend(images.into_iter().map(|(_, image, _)| image));
        if last_group {
            break;
        }
    }
    assert!(last_extra == 0 || written.groups > 0, "the last blocks were not written");
    Ok(written)
}

/// Passes that copy a group's pages with splits running, before one that holds them off.
const OPTIMISTIC_PASSES: usize = 3;

/// A group's images (page id, image, the frame's version copied), the splits whose pages
/// they hold (for `forget_splits`) and the pages copied again.
type Copied = (Vec<(u64, Vec<u8>, u64)>, Vec<u64>, u64);

/// Copies the dirty pages among `chunk` and every page of each split not yet durable
/// that touched them (to a fixed point), all as of one state of the tree's structure
/// (see the module header). Splits are held off only to take stock, not while pages are
/// copied: each pass copies what the last stock-taking found missing or changed by a
/// split since, and the next takes stock again, until a pass finds nothing; the passes
/// after `OPTIMISTIC_PASSES` hold splits off while they copy, so the next one finds
/// nothing (no split ran).
fn copy_group<S: PageSource>(
    pool: &BufferPool<S>,
    writer: &Writer,
    chunk: &[u64],
    spare: &mut Vec<Vec<u8>>,
    racing: &mut dyn FnMut(),
) -> Result<Copied, BufferError<S::Error>> {
    let page_bytes = pool.page_bytes();
    let mut pids: BTreeSet<u64> = chunk.iter().copied().collect();
    // Each page copied, with its image and version (none: it was clean, its block is its
    // image).
    let mut copies: BTreeMap<u64, Option<(Vec<u8>, u64)>> = BTreeMap::new();
    let mut found = Closure::default();
    // The first search holds no split off: the splits made while it runs count as made
    // after it (numbered from `looked_to` on), so the stock-taking below finds them.
    writer.closure(&mut pids, &mut found);
    found.take_added();
    let mut todo: BTreeSet<u64> = pids.clone();
    let mut recopies = 0;
    // Pages a split changed since the last stock-taking may have been copied before it,
    // and the splits may reach pages not in the group yet: those are copied (again). Its
    // cost follows the splits made since, not the group's size.
    let take_stock = |pids: &mut BTreeSet<u64>, found: &mut Closure, todo: &mut BTreeSet<u64>| {
        let changed = writer.changed_since(found.looked_to().expect("invariant: after a call"));
        writer.closure(pids, found);
        todo.extend(changed.into_iter().filter(|pid| pids.contains(pid)));
        todo.extend(found.take_added());
    };
    // Bounded: the pass after the optimistic ones holds splits off throughout.
    for pass in 0.. {
        let held = (pass >= OPTIMISTIC_PASSES).then(|| pool.hold_structure());
        if held.is_some() {
            take_stock(&mut pids, &mut found, &mut todo);
        }
        for pid in std::mem::take(&mut todo) {
            recopies += u64::from(copies.contains_key(&pid));
            let mut image = spare.pop().unwrap_or_else(|| Vec::with_capacity(page_bytes));
            match pool.copy_dirty(pid, &mut image)? {
                Some(version) => {
                    if let Some(Some((old, _))) = copies.insert(pid, Some((image, version))) {
                        spare.push(old);
                    }
                }
                None => {
                    spare.push(image);
                    if let Some(Some((old, _))) = copies.insert(pid, None) {
                        spare.push(old);
                    }
                }
            }
            if held.is_none() {
                racing();
            }
        }
        if held.is_some() {
            // No split ran since the stock was taken: every copy is of its state.
            break;
        }
        let _held = pool.hold_structure();
        take_stock(&mut pids, &mut found, &mut todo);
        if todo.is_empty() {
            break;
        }
    }
    debug_assert!(pids.iter().all(|pid| copies.contains_key(pid)));
    let images = copies
        .into_iter()
        .filter_map(|(pid, copy)| copy.map(|(image, version)| (pid, image, version)))
        .collect();
    Ok((images, found.taken(), recopies))
}

#[cfg(test)]
mod tests;
