//! Checkpoints (see `db.rs`'s header): the checkpoint thread and its triggers, callers'
//! checkpoints run on that thread, and one checkpoint: take the visible sequence number
//! `S`, sync the log to it, and write back every dirty page (`writeback`) in atomic groups
//! of at most `group_bytes`, each with the overflow blocks its pages name that are not yet
//! written and a meta block, the log made durable up to the group's highest LSN first. A
//! group before the last keeps the last checkpoint's sequence number (replay from there is
//! idempotent on the pages written since) and lists for deletion at a restart everything
//! the last checkpoint listed, what this one will delete, and the values replaced by
//! changes the log holds durably. The last group also holds the deletions no reader needs
//! any more, and its meta block covers `S`; then the log is truncated below `S`. Writers go
//! on meanwhile, and wait for one group's copy at most when they split.
//! Also the end of a copy-on-write session (`finish`: a compaction, a backup's load), the
//! empty tree a new store starts with, and the free list's encoding.
//!
//! Must never: let the meta block cover a sequence number the log has not made durable, or
//! a change its pages lack; write a page before the log holds its changes durably; delete a
//! block a live snapshot can reach.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError, Weak};
use std::time::{Duration, Instant};

use tierkv_blockstore::BlockId;
use tierkv_wal::Lsn;

use super::{lock, Checkpointer, Epoch, Inner, Version};
use crate::block_pages::{BlockPages, Pages, OVERFLOW_BLOCK_BYTES};
use crate::meta::{Meta, FIRST_PAGE, META_BLOCK};
use crate::page::slotted::{Kind, Slotted, ValueAt};
use crate::page::OverflowRef;
use crate::tree::Tree;
use crate::writeback::{write_back, Extra, Part, WriteBackError};
use crate::{Error, Result};

/// The overflow blocks the leaves among `images` name.
fn overflow_ids(images: &[&[u8]]) -> BTreeSet<u64> {
    let mut ids = BTreeSet::new();
    for image in images {
        let page = Slotted::new(*image);
        if page.kind() != Some(Kind::Leaf) {
            continue;
        }
        let count = page.count().expect("invariant: a checked page");
        for at in 0..count {
            if let Some(ValueAt::Overflow(overflow)) = page.value(at) {
                ids.extend(overflow.first..overflow.first + u64::from(overflow.blocks));
            }
        }
    }
    ids
}

/// Creates an empty tree and its first checkpoint.
pub(super) fn create_tree(pages: &Pages, max_page_bytes: usize) -> Result<Meta> {
    let mut session = BlockPages::new(pages, FIRST_PAGE);
    let tree = Tree::create(&mut session, max_page_bytes);
    let meta = Meta {
        root: tree.root,
        next_page: session.next_id(),
        max_page_bytes: max_page_bytes as u32,
        sequence: 0,
        orphans_from: session.next_id(),
        free_list: None,
    };
    session.flush(Some(&meta))?;
    Ok(meta)
}

fn encode_ids(ids: &[u64]) -> Vec<u8> {
    ids.iter().flat_map(|id| id.to_le_bytes()).collect()
}

pub(super) fn decode_ids(bytes: &[u8]) -> Result<Vec<u64>> {
    if !bytes.len().is_multiple_of(8) {
        return Err(Error::Corruption(format!("a free list of {} bytes", bytes.len())));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|word| u64::from_le_bytes(word.try_into().expect("invariant: chunks of 8")))
        .collect())
}

impl Inner {
    pub(super) fn checkpoint_loop(&self) {
        /// Marks the thread stopped however it returns, and wakes callers waiting on it.
        struct Exit<'a>(&'a Inner);
        impl Drop for Exit<'_> {
            fn drop(&mut self) {
                lock(&self.0.trigger).running = false;
                self.0.trigger_cv.notify_all();
            }
        }
        let _exit = Exit(self);
        loop {
            let serves;
            {
                let mut trigger = lock(&self.trigger);
                let deadline = lock(&self.checkpointer).last + self.options.checkpoint_interval;
                loop {
                    if trigger.stop {
                        return;
                    }
                    let now = Instant::now();
                    if trigger.kicked || now >= deadline {
                        break;
                    }
                    trigger = self
                        .trigger_cv
                        .wait_timeout(trigger, deadline - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                trigger.kicked = false;
                serves = trigger.requested;
            }
            if self.failed.load(Ordering::Acquire) {
                // Nothing to do until reopen; callers waiting see the failure. Wait for the
                // stop.
                let mut trigger = lock(&self.trigger);
                trigger.served = trigger.requested;
                self.trigger_cv.notify_all();
                while !trigger.stop {
                    trigger = self.trigger_cv.wait(trigger).unwrap_or_else(PoisonError::into_inner);
                }
                return;
            }
            // An error poisons the store; writers and `checkpoint` callers report it. The
            // checkpoint sets `last`, the start of the next interval.
            let result = self.checkpoint();
            let mut trigger = lock(&self.trigger);
            if serves > trigger.served {
                trigger.served = serves;
                trigger.error = result.err();
            }
            self.trigger_cv.notify_all();
        }
    }

    /// Has the checkpoint thread take a checkpoint that begins after this call, and waits
    /// for it; checkpoints here when the thread has stopped. Every checkpoint runs on the
    /// one thread, so the pages it makes come from that thread's malloc arena: glibc gives
    /// freed memory back only to the arena it came from, and pages made by one thread and
    /// freed into another's would leave the process holding both.
    pub(super) fn checkpoint_on_thread(&self) -> Result<()> {
        self.check_writable()?;
        let mut trigger = lock(&self.trigger);
        if !trigger.running || trigger.stop {
            drop(trigger);
            return self.checkpoint();
        }
        trigger.requested += 1;
        let ticket = trigger.requested;
        trigger.kicked = true;
        self.trigger_cv.notify_all();
        while trigger.served < ticket {
            if !trigger.running {
                drop(trigger);
                return self.checkpoint();
            }
            // Bounded: the thread serves every request (or, failed, marks them served),
            // and its exit clears `running`; the timeout covers a wakeup sent before this
            // wait began.
            trigger = self
                .trigger_cv
                .wait_timeout(trigger, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        match trigger.error.take() {
            Some(error) => Err(error),
            None => {
                drop(trigger);
                self.check_writable()
            }
        }
    }

    fn checkpoint(&self) -> Result<()> {
        self.check_writable()?;
        let mut checkpointer = lock(&self.checkpointer);
        self.check_writable()?;
        let result = self.checkpoint_locked(&mut checkpointer);
        checkpointer.last = Instant::now();
        drop(checkpointer);
        // Writers waiting for room look again (and see a failure, if there was one).
        self.trigger_cv.notify_all();
        result.map_err(|error| self.fail(error))
    }

    /// A checkpoint (see the module header): every page dirty now, the overflow blocks
    /// they name, the deletions no reader needs any more and the meta record (covering the
    /// log up to the visible sequence number) in one atomic group; then the log truncated
    /// below it.
    pub(super) fn checkpoint_locked(&self, cp: &mut Checkpointer) -> Result<()> {
        // What the log holds past this checkpoint, for the trigger: counted from here.
        self.log_bytes.store(0, Ordering::Relaxed);
        // Every change at or below it is in its page (a write is published after its
        // pages changed).
        let sequence = self.visible.get();
        let pool = self.pages.pool();
        let retired_now: Vec<u64> = {
            let mut freed = lock(&self.freed);
            let mut ids = Vec::new();
            freed.retain(|(lsn, overflow)| {
                let covered = *lsn <= sequence;
                if covered {
                    ids.extend(overflow.first..overflow.first + u64::from(overflow.blocks));
                }
                !covered
            });
            ids
        };
        let deletable = cp.retired.front().is_some_and(|(epoch, _)| epoch.strong_count() == 0);
        if sequence == cp.meta.sequence
            && pool.dirty_count() == 0
            && retired_now.is_empty()
            && cp.reclaim_now.is_empty()
            && !deletable
        {
            return Ok(());
        }
        let log = self.log()?;
        // CRASH: the meta record claims every record up to `sequence`; they must be
        // durable in the log first, or a crash could leave the log behind the tree.
        if sequence > 0 {
            log.sync_to(Lsn(sequence))?;
        }
        let (reclaim, unwritten) = self.reclaimable(cp);
        let listed = cp.still_retired(&retired_now);
        let root = self.current.load().tree.root;
        let max_page_bytes = cp.meta.max_page_bytes;
        let last_sequence = cp.meta.sequence;
        let mut meta: Option<Meta> = None;
        let mut overflow_written: Vec<u64> = Vec::new();
        // The log is durable up to here before each meta record is written (`sequence`,
        // then each group's pages' highest LSN).
        let mut durable_to = sequence.max(cp.durable_to);
        // The free lists of the groups before the last, each superseded by the next.
        let mut group_lists: Vec<u64> = Vec::new();
        let written = write_back(
            pool,
            &self.writer,
            self.pages.blocks(),
            self.group_bytes(),
            |highest| log.sync_to(Lsn(highest)),
            |part| {
                let last = match part {
                    Part::Pages(images) => {
                        durable_to = images
                            .iter()
                            .map(|image| {
                                Slotted::new(*image).lsn().expect("invariant: a checked page")
                            })
                            .fold(durable_to, u64::max);
                        // The overflow blocks not yet written that the pages name go with
                        // them.
                        let mut extra: Vec<Extra> = Vec::new();
                        for id in overflow_ids(images) {
                            if let Some(chunk) = self.pages.pending_chunk(id) {
                                extra.push((BlockId(id), Some(chunk)));
                                overflow_written.push(id);
                            }
                        }
                        return extra;
                    }
                    Part::End { last } => last,
                };
                let mut extra: Vec<Extra> = Vec::new();
                // Values replaced by changes the log holds durably: a page written by now may
                // name the new value, and then only a free list names the old one's blocks
                // after a crash (replay replaces the new value again). A restart deletes
                // them; replay drops them from its own list. (Those replaced at or below
                // `sequence` are in `listed`.)
                let mut ids = listed.clone();
                ids.extend(lock(&self.freed).iter().flat_map(|(lsn, overflow)| {
                    let replaced = *lsn <= durable_to;
                    let ids = overflow.first..overflow.first + u64::from(overflow.blocks);
                    ids.filter(move |_| replaced)
                }));
                let sequence = match last {
                    // CRASH: a group before the last leaves the last checkpoint's sequence
                    // number in force (replay from there is idempotent on pages written
                    // since), with what it would have deleted still listed, and the ids its
                    // pages took out of the orphans.
                    false => {
                        ids.extend(&reclaim);
                        ids.extend(&group_lists);
                        last_sequence
                    }
                    true => {
                        extra.extend(reclaim.iter().map(|id| (BlockId(*id), None)));
                        extra.extend(group_lists.iter().map(|id| (BlockId(*id), None)));
                        sequence
                    }
                };
                let free_list = (!ids.is_empty()).then(|| {
                    let bytes = encode_ids(&ids);
                    let blocks = bytes.len().div_ceil(OVERFLOW_BLOCK_BYTES).max(1);
                    let first = self.next_page.fetch_add(blocks as u64, Ordering::Relaxed);
                    for (id, chunk) in (first..).zip(bytes.chunks(OVERFLOW_BLOCK_BYTES)) {
                        extra.push((BlockId(id), Some(Arc::new(chunk.to_vec()))));
                    }
                    OverflowRef { len: bytes.len() as u64, first, blocks: blocks as u32 }
                });
                if let (false, Some(list)) = (last, free_list) {
                    group_lists.extend(list.first..list.first + u64::from(list.blocks));
                }
                // Every page id the group's pages name was given out before this load.
                let next_page = self.next_page.load(Ordering::Relaxed);
                let made = Meta {
                    root,
                    next_page,
                    max_page_bytes,
                    sequence,
                    orphans_from: next_page,
                    free_list,
                };
                extra.push((META_BLOCK, Some(Arc::new(made.encode()))));
                if last {
                    meta = Some(made);
                }
                extra
            },
        )
        .map_err(|error| match error {
            WriteBackError::Page(error) => Error::Pages(error.into()),
            WriteBackError::Log(error) => Error::Log(error),
            WriteBackError::Blocks(error) => Error::Blocks(error),
        })?;
        let meta = meta.expect("invariant: the last group carries the meta record");
        cp.durable_to = durable_to;
        // Durable: readers find these blocks in the block store from now on.
        self.pages.drop_pending(overflow_written);
        self.pages.drop_pending(unwritten.iter().copied());
        for id in &reclaim {
            pool.discard(*id);
        }
        self.pages.give_back(reclaim.iter().chain(&unwritten).copied());
        self.pages.count_index();
        if let Some(old) = cp.meta.free_list {
            debug_assert!(reclaim.contains(&old.first));
        }
        cp.meta = meta;
        self.counters.pages_written.fetch_add(written.pages, Ordering::Relaxed);
        self.counters.checkpoint_groups.fetch_add(written.groups, Ordering::Relaxed);
        self.counters.blocks_reclaimed.fetch_add(reclaim.len() as u64, Ordering::Relaxed);
        if !retired_now.is_empty() {
            // Readers from now on see no value these blocks held (their sequence is at or
            // past every change that let go of one): a new epoch.
            let old_epoch = self.publish(|current| Version {
                tree: current.tree.clone(),
                undo: current.undo.clone(),
                epoch: Arc::new(Epoch),
            });
            cp.retired.push_back((old_epoch, retired_now));
        }
        *lock(&self.summary) = cp.summary();
        self.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
        self.rebudget();
        log.truncate_below(Lsn(sequence + 1))?;
        Ok(())
    }

    /// Publishes the version `make` makes of the current one; returns the current one's
    /// epoch.
    pub(super) fn publish(&self, make: impl FnOnce(&Version) -> Version) -> Weak<Epoch> {
        let _held = lock(&self.publishing);
        let current = self.current.load_full();
        let next = make(&current);
        let old_epoch = Arc::downgrade(&current.epoch);
        self.current.store(Arc::new(next));
        old_epoch
    }

    /// The blocks deletable now: those a restart found retired or orphaned, those retired
    /// by checkpoints whose epochs are gone, and the last meta record's free list. Returned
    /// as the ones written (deleted by the next group) and the overflow blocks never written
    /// (only dropped from memory).
    fn reclaimable(&self, cp: &mut Checkpointer) -> (Vec<u64>, Vec<u64>) {
        let mut reclaim = std::mem::take(&mut cp.reclaim_now);
        while cp.retired.front().is_some_and(|(epoch, _)| epoch.strong_count() == 0) {
            if let Some((_, ids)) = cp.retired.pop_front() {
                reclaim.extend(ids);
            }
        }
        if let Some(list) = cp.meta.free_list {
            reclaim.extend(list.first..list.first + u64::from(list.blocks));
        }
        reclaim.sort_unstable();
        reclaim.dedup();
        reclaim.into_iter().partition(|id| !self.pages.is_pending(*id))
    }

    /// Ends a session that built `tree` (a compaction, a backup's load): deletes what no
    /// reader can reach any more, writes the pages with the meta record (covering the log
    /// up to `sequence`) in one group, and publishes the tree.
    pub(super) fn finish(
        &self,
        cp: &mut Checkpointer,
        mut session: BlockPages<'_>,
        tree: Tree,
        sequence: u64,
    ) -> Result<()> {
        let (reclaim, unwritten) = self.reclaimable(cp);
        // The early flushes' list goes: this record names the tree.
        if let Some(list) = cp.early_list.take() {
            session.free_overflow(&list);
        }
        let reclaimed = reclaim.len() as u64;
        session.reclaim(reclaim);
        self.pages.drop_pending(unwritten.iter().copied());
        self.pages.give_back(unwritten);
        let retired_now = session.take_retired();
        let pending = cp.still_retired(&retired_now);
        let free_list: Option<OverflowRef> =
            (!pending.is_empty()).then(|| session.write_overflow(&encode_ids(&pending)));
        let meta = Meta {
            root: tree.root,
            next_page: session.next_id(),
            max_page_bytes: tree.max_page_bytes as u32,
            sequence,
            orphans_from: session.next_id(),
            free_list,
        };
        self.counters.pages_written.fetch_add(session.dirty_count() as u64, Ordering::Relaxed);
        session.flush(Some(&meta))?;
        cp.meta = meta;
        self.next_page.fetch_max(meta.next_page, Ordering::Relaxed);
        self.counters.blocks_reclaimed.fetch_add(reclaimed, Ordering::Relaxed);
        // Publish: readers from now on use the new tree.
        let old_epoch =
            self.publish(|_| Version { tree, undo: self.undo.view(), epoch: Arc::new(Epoch) });
        self.rebudget();
        cp.retired.push_back((old_epoch, retired_now));
        *lock(&self.summary) = cp.summary();
        Ok(())
    }

    /// Writes early the pages of a session that outgrew its share of the cache. They are
    /// orphans (from `orphans_from`) until the meta record of the session's end names the
    /// tree they belong to.
    pub(super) fn flush_early(
        &self,
        cp: &mut Checkpointer,
        session: &mut BlockPages<'_>,
    ) -> Result<()> {
        let reused = session.reused_ids();
        if !reused.is_empty() {
            // The pages at reused ids belong to no tree a meta record names until the
            // session's end: this record's free list names them, besides what the last
            // record's list names (and that list's own blocks), for an open to delete.
            let mut ids = Vec::new();
            if let Some(list) = cp.meta.free_list {
                ids = decode_ids(&self.pages.read_overflow(&list)?)?;
                ids.extend(list.first..list.first + u64::from(list.blocks));
            }
            ids.extend(reused);
            if let Some(old) = cp.early_list.take() {
                session.free_overflow(&old);
            }
            cp.early_list = Some(session.write_overflow(&encode_ids(&ids)));
        }
        let meta = Meta {
            next_page: session.next_id(),
            free_list: cp.early_list.or(cp.meta.free_list),
            ..cp.meta
        };
        let before = session.dirty_count();
        session.flush_early(&meta)?;
        let written = before - session.dirty_count();
        self.counters.pages_written.fetch_add(written as u64, Ordering::Relaxed);
        cp.meta.next_page = meta.next_page;
        *lock(&self.summary) = cp.summary();
        self.counters.early_flushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
