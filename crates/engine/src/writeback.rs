//! Write-back: the pages changed in place (`tree::write`) go to the block store in atomic
//! groups, each of which leaves the tree on disk whole. The engine's checkpoints use it
//! with groups of at most `Inner::group_bytes` (`db/checkpoint.rs`), each with a meta block.
//!
//! [`write_back`] takes the pages dirty when it starts, in id order, a group's worth at a
//! time (`group_bytes`). For each group it adds every page of each split not yet durable
//! that touched a page of the group, until no split adds more (`Writer::closure`), and
//! copies the dirty ones (`copy_dirty`, each under its shared latch, so it is one state of
//! the page). Splits run while it copies, while it makes the first search (which counts
//! the splits made meanwhile as made after it: `Closure::looked_to`; a search over 98,000
//! pages held every writer up for 165 ms when it held splits off), and while it takes
//! stock, between passes, of the splits made since the last stock-taking
//! (`Writer::changed_between`): their pages in the group are copied again, and what they
//! add to the closure is copied, in the next pass. Only a stock-taking that finds nothing
//! is taken again with splits held off (`BufferPool::hold_structure`), where it looks at
//! the few splits made during the last one; when that finds nothing too, every page in
//! the group was copied after the last split that changed it, and the group holds every
//! page of those splits. Once a pass leaves few pages, or after a dozen passes, one holds
//! splits off while it copies (a group under a steady stream of splits still ends).
//! Holding splits off for the whole copy made them wait tens of milliseconds on a group of
//! thousands of pages (in a two-level tree every leaf split changes the root, and the
//! closure takes them all), and a stock-taking held for splits made during a pass of
//! 139,000 pages held writers up for 115 ms. A stock-taking looks only at the splits made
//! since the last one (the writer keeps each page's pending splits; `Closure` remembers
//! what a group took): with a search from every page each time, one held splits off for
//! 20 to 160 ms in a YCSB load with 15,000 splits pending.
//!
//! A group is a chain of the block store (`BlockStore::begin_chain`): its copies go out a
//! piece (`group_bytes` of pages) at a time, so the copies held at once stay within a piece
//! however far the closure reaches (the first group of a YCSB load's first checkpoint held
//! the whole tree, 196,553 pages, copied at once), and a page copied again goes again in a
//! later piece, which wins. The last piece goes with the group's end (a group of one
//! piece's pages is one group of the block store). None of it counts until the group
//! commits. The pages stay dirty, and resident, while the group is written. Before it
//! commits, `before_group` hears the highest LSN of its pages: the log must be durable up
//! to it first (the write-ahead rule). Once the group is durable, each page no writer
//! changed since its last copy turns clean, and the splits it held are forgotten. Every
//! group carries the blocks `extra` gives it (see `Part`); the caller's meta block in each
//! says where recovery replays the log from.
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
//! Must never: commit a group whose pages' changes the log has not made durable; mark a
//! page clean that changed after its last copy, or before its group is durable; split one
//! split's pages between two groups.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use tierkv_blockstore::{BlockError, BlockId, BlockStore, BlockWrite, Chain};

use crate::buffer::{BufferError, BufferPool, PageSource};
use crate::page::slotted::Slotted;
use crate::tree::write::{Closure, Writer};

/// What one write-back did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Pages written (a page written twice in one group counts once).
    pub pages: u64,
    /// Groups written.
    pub groups: u64,
    /// Pieces the groups were written in.
    pub pieces: u64,
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

/// A block a group writes besides the pages: its bytes, or `None` to delete it.
pub type Extra = (BlockId, Option<std::sync::Arc<Vec<u8>>>);

/// What the caller's `extra` hears while a group is written: each piece's page images
/// before the piece is written (it may add the blocks they refer to), then the group's end
/// before the group commits (with whether it is the last group, which carries the caller's
/// meta block).
#[derive(Clone, Copy, Debug)]
pub enum Part<'a> {
    /// A piece's page images.
    Pages(&'a [&'a [u8]]),
    /// The group's end.
    End {
        /// Whether this is the write-back's last group.
        last: bool,
    },
}

/// Writes every page dirty now to `store` (see the module header), each group with the
/// blocks `extra` returns for it (see `Part`).
pub fn write_back<S: PageSource, L>(
    pool: &BufferPool<S>,
    writer: &Writer,
    store: &dyn BlockStore,
    group_bytes: usize,
    before_group: impl FnMut(u64) -> Result<(), L>,
    extra: impl FnMut(Part<'_>) -> Vec<Extra>,
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
    mut extra: impl FnMut(Part<'_>) -> Vec<Extra>,
    racing: &mut dyn FnMut(),
) -> Result<Written, WriteBackError<S::Error, L>> {
    let page_bytes = pool.page_bytes();
    let per_group = (group_bytes / page_bytes).max(1);
    let wanted = pool.dirty_pages();
    let mut written = Written::default();
    let mut chunks = wanted.chunks(per_group).peekable();
    // Image buffers of the last piece, reused by the next: fresh ones would be fresh memory
    // (the allocator gives freed pages back within 30 ms), each a page fault and a page
    // zeroed; the checkpoint thread spent about a tenth of a YCSB load's samples there.
    let mut spare: Vec<Vec<u8>> = Vec::new();
    loop {
        let chunk = chunks.next().unwrap_or(&[]);
        let last_group = chunks.peek().is_none();
        let mut group = GroupWriter {
            chain: store.begin_chain(),
            page_bytes,
            piece_pages: per_group,
            piece: Vec::new(),
            in_piece: HashMap::new(),
            spare: std::mem::take(&mut spare),
            sent: BTreeMap::new(),
            highest: 0,
            pieces: 0,
            writing: true,
        };
        let (splits, recopies) = copy_group(pool, writer, chunk, &mut group, &mut extra, racing)?;
        written.recopies += recopies;
        // The last piece goes with the group's end, so that a group of one piece's pages is
        // one group of the block store, as before chains.
        let GroupWriter { chain, piece, mut sent, mut highest, pieces, spare: kept, .. } = group;
        spare = kept;
        let pages: Vec<&[u8]> = piece.iter().map(|(_, image, _)| &image[..]).collect();
        let added = if pages.is_empty() { Vec::new() } else { extra(Part::Pages(&pages)) };
        for (pid, image, version) in &piece {
            highest = highest.max(sent_page(&mut sent, *pid, image, *version));
        }
        if !sent.is_empty() {
            before_group(highest).map_err(WriteBackError::Log)?;
        }
        let end = extra(Part::End { last: last_group });
        let changes = block_writes(&piece, added.iter().chain(&end));
        if pieces > 0 || !changes.is_empty() {
            // CRASH: once the group commits, its pages are the tree on disk: whole, as
            // every split in it is complete. Until then none of its pieces counts.
            chain.commit(&changes).map_err(WriteBackError::Blocks)?;
            written.groups += 1;
            written.pieces += pieces + 1;
        } else {
            drop(chain);
        }
        drop(changes);
        spare.extend(piece.into_iter().map(|(_, image, _)| image));
        for (&pid, &version) in &sent {
            pool.clean_if_unchanged(pid, version);
        }
        written.pages += sent.len() as u64;
        written.splits += splits.len() as u64;
        writer.forget_splits(&splits);
        if last_group {
            break;
        }
    }
    Ok(written)
}

/// A group being written: the chain its pieces go to, the piece being filled, and what
/// was sent.
struct GroupWriter<'s> {
    chain: Box<dyn Chain + 's>,
    page_bytes: usize,
    /// Pages a piece holds at most.
    piece_pages: usize,
    /// Images copied and not yet written: page id, image, the frame's version copied.
    piece: Vec<(u64, Vec<u8>, u64)>,
    /// Where each page of `piece` is in it (a page copied again replaces its image).
    in_piece: HashMap<u64, usize>,
    spare: Vec<Vec<u8>>,
    /// The version of each page's last copy written to the chain.
    sent: BTreeMap<u64, u64>,
    /// The highest LSN of the pages written.
    highest: u64,
    pieces: u64,
    /// Whether a full piece is written at once (not while splits are held off).
    writing: bool,
}

impl GroupWriter<'_> {
    fn buffer(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_else(|| Vec::with_capacity(self.page_bytes))
    }

    /// Takes a page's copy into the piece, writing the piece once it is full.
    fn add(
        &mut self,
        pid: u64,
        image: Vec<u8>,
        version: u64,
        extra: &mut dyn FnMut(Part<'_>) -> Vec<Extra>,
    ) -> Result<(), BlockError> {
        match self.in_piece.get(&pid) {
            Some(&at) => {
                let old = std::mem::replace(&mut self.piece[at], (pid, image, version));
                self.spare.push(old.1);
            }
            None => {
                self.in_piece.insert(pid, self.piece.len());
                self.piece.push((pid, image, version));
            }
        }
        if self.writing && self.piece.len() >= self.piece_pages {
            self.flush(extra)?;
        }
        Ok(())
    }

    /// Writes the piece, if it holds anything, with the blocks `extra` adds for it.
    fn flush(&mut self, extra: &mut dyn FnMut(Part<'_>) -> Vec<Extra>) -> Result<(), BlockError> {
        if self.piece.is_empty() {
            return Ok(());
        }
        assert_eq!(self.in_piece.len(), self.piece.len(), "a page twice in one piece");
        let pages: Vec<&[u8]> = self.piece.iter().map(|(_, image, _)| &image[..]).collect();
        let added = extra(Part::Pages(&pages));
        self.chain.put(&block_writes(&self.piece, added.iter()))?;
        self.pieces += 1;
        for (pid, image, version) in self.piece.drain(..) {
            self.highest = self.highest.max(sent_page(&mut self.sent, pid, &image, version));
            self.spare.push(image);
        }
        self.in_piece.clear();
        debug_assert!(self.sent.len() as u64 >= self.pieces.min(1));
        Ok(())
    }
}

/// A piece's page images and the blocks added to them, as block-store writes.
fn block_writes<'a>(
    piece: &'a [(u64, Vec<u8>, u64)],
    added: impl Iterator<Item = &'a Extra>,
) -> Vec<BlockWrite<'a>> {
    let pages = piece.iter().map(|(pid, image, _)| BlockWrite::Put(BlockId(*pid), &image[..]));
    let added = added.map(|(id, bytes)| match bytes {
        Some(bytes) => BlockWrite::Put(*id, &bytes[..]),
        None => BlockWrite::Delete(*id),
    });
    pages.chain(added).collect()
}

/// Records page `pid`'s copy at `version` as sent in its group; returns the copy's LSN.
fn sent_page(sent: &mut BTreeMap<u64, u64>, pid: u64, image: &[u8], version: u64) -> u64 {
    sent.insert(pid, version);
    Slotted::new(image).lsn().expect("invariant: a checked page")
}

/// Passes that copy a group's pages with splits running, at most, before one that holds
/// them off.
const OPTIMISTIC_PASSES: usize = 12;

/// Pages a pass may have to copy for the next to hold splits off while it copies them.
const HELD_PASS_PAGES: usize = 64;

/// Copies the dirty pages among `chunk` and every page of each split not yet durable
/// that touched them (to a fixed point), all as of one state of the tree's structure
/// (see the module header), into `group`'s pieces. Splits are not held off while pages are
/// copied, nor while stock is taken of the splits made since the last stock-taking: each
/// pass copies what the last one found missing or changed by a split since, until a
/// stock-taking that holds splits off (short: it looks only at the splits made since the
/// last) finds nothing. Once a pass leaves few pages to copy (`HELD_PASS_PAGES`), or
/// after `OPTIMISTIC_PASSES`, the next holds splits off while it copies (writing no piece
/// meanwhile), so the one after finds nothing (no split ran). Returns the splits the group
/// holds (for `forget_splits`) and the pages copied again.
fn copy_group<S: PageSource, L>(
    pool: &BufferPool<S>,
    writer: &Writer,
    chunk: &[u64],
    group: &mut GroupWriter<'_>,
    extra: &mut dyn FnMut(Part<'_>) -> Vec<Extra>,
    racing: &mut dyn FnMut(),
) -> Result<(Vec<u64>, u64), WriteBackError<S::Error, L>> {
    let mut pids: BTreeSet<u64> = chunk.iter().copied().collect();
    // Each page copied (or found clean).
    let mut copied: BTreeSet<u64> = BTreeSet::new();
    let mut found = Closure::default();
    // The first search holds no split off: the splits made while it runs count as made
    // after it (numbered from `looked_to` on), so the stock-taking below finds them.
    writer.closure(&mut pids, &mut found);
    found.take_added();
    let mut todo: BTreeSet<u64> = pids.clone();
    let mut recopies = 0;
    // The splits made since the last stock-taking may have changed pages copied before
    // them, and may reach pages not in the group yet: those are copied (again). Its cost
    // follows the splits made since, not the group's size. Splits made while it runs are
    // left to the next one.
    let take_stock = |pids: &mut BTreeSet<u64>, found: &mut Closure, todo: &mut BTreeSet<u64>| {
        let from = found.looked_to().expect("invariant: after a call");
        writer.closure(pids, found);
        let to = found.looked_to().expect("invariant: after a call");
        let changed = writer.changed_between(from, to);
        todo.extend(changed.into_iter().filter(|pid| pids.contains(pid)));
        todo.extend(found.take_added());
    };
    // Bounded: after `OPTIMISTIC_PASSES` a pass holds splits off throughout.
    for pass in 0.. {
        let hold = pass >= OPTIMISTIC_PASSES || (pass > 0 && todo.len() <= HELD_PASS_PAGES);
        let held = hold.then(|| pool.hold_structure());
        if held.is_some() {
            take_stock(&mut pids, &mut found, &mut todo);
        }
        group.writing = held.is_none();
        for pid in std::mem::take(&mut todo) {
            recopies += u64::from(!copied.insert(pid));
            let mut image = group.buffer();
            match pool.copy_dirty(pid, &mut image).map_err(WriteBackError::Page)? {
                Some(version) => {
                    group.add(pid, image, version, extra).map_err(WriteBackError::Blocks)?;
                }
                None => {
                    // Clean: its block is its image. (A copy of it sent earlier in this
                    // group was of a state since written by another group: impossible,
                    // as one write-back runs at a time.)
                    group.spare.push(image);
                }
            }
            if held.is_none() {
                racing();
            }
        }
        group.writing = true;
        if held.is_some() {
            // No split ran since the stock was taken: every copy is of its state.
            break;
        }
        take_stock(&mut pids, &mut found, &mut todo);
        if todo.is_empty() {
            // Splits made during that stock-taking, with none running now.
            let _held = pool.hold_structure();
            take_stock(&mut pids, &mut found, &mut todo);
            if todo.is_empty() {
                break;
            }
        }
    }
    debug_assert!(pids.iter().all(|pid| copied.contains(pid)));
    Ok((found.taken(), recopies))
}

#[cfg(test)]
mod tests;
