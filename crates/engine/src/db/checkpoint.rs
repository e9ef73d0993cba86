//! Checkpoints (see `db.rs`'s header): the checkpoint thread and its triggers, callers'
//! checkpoints run on that thread, and one checkpoint: freeze the memtable, sync the log to
//! the freeze point, apply the frozen memtable's newest versions to a copy-on-write tree in
//! chunks (writing dirty pages early, as orphans, when they outgrow their budget), then the
//! pages, the deletions no reader needs any more and the meta block in one atomic group,
//! the new version published and the log truncated. Also the empty tree a new store starts
//! with, and the free list's encoding.
//!
//! Must never: let the meta block cover a sequence number the log has not made durable;
//! delete a block a live snapshot can reach.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use tierkv_wal::Lsn;

use super::{lock, write, Checkpointer, Epoch, Inner, Version};
use crate::block_pages::{BlockPages, Pages};
use crate::memtable::Memtable;
use crate::meta::{Meta, FIRST_PAGE};
use crate::page::{OverflowRef, Value};
use crate::tree::{Change, Tree};
use crate::{Error, Result};

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

    pub(super) fn checkpoint_locked(&self, cp: &mut Checkpointer) -> Result<()> {
        // Freeze: every write up to `sequence` is in `frozen`, every later one goes to the
        // new memtable.
        let (frozen, sequence) = {
            let _switch = write(&self.switch);
            // Versions change only here and in `finish`, both under the checkpointer lock
            // (`cp`), so a load and a store cannot lose another's version.
            let current = self.current.load_full();
            let nothing_to_delete = cp.reclaim_now.is_empty()
                && cp.retired.front().is_none_or(|(epoch, _)| epoch.strong_count() > 0);
            if current.mutable.is_empty() && nothing_to_delete {
                return Ok(());
            }
            let frozen = Arc::clone(&current.mutable);
            let sequence = self.log()?.next_lsn().0 - 1;
            self.current.store(Arc::new(Version {
                mutable: Arc::new(Memtable::with_capacity(self.options.memtable_max_bytes())),
                frozen: Some(Arc::clone(&frozen)),
                tree: current.tree.clone(),
                epoch: Arc::clone(&current.epoch),
            }));
            self.log_bytes.store(0, Ordering::Relaxed);
            (frozen, sequence)
        };
        // CRASH: the meta record below claims every record up to `sequence`; they must be
        // durable in the log first, or a crash could leave the log behind the tree.
        self.log()?.sync_to(Lsn(sequence))?;
        if !self.visible.wait(sequence, &self.failed) {
            return Err(self.check_writable().err().unwrap_or(Error::Closed));
        }
        let base = self.current.load_full();
        let mut tree = base.tree.clone();
        let mut session = BlockPages::new(&self.pages, cp.meta.next_page);
        let inline_max = self.options.max_inline_value();
        let dirty_budget = self.options.dirty_budget();
        // Changes go to the tree a chunk at a time, each leaf rewritten once per chunk. A
        // change dirties at most one leaf (and the pages above it), so a chunk of this many
        // dirties at most an eighth of the dirty budget before the check below.
        let chunk_len = (dirty_budget / 8 / (2 * self.options.page_bytes())).clamp(16, 4096);
        let mut latest = frozen.latest();
        let mut chunk: Vec<Change> = Vec::with_capacity(chunk_len);
        let mut freed: Vec<OverflowRef> = Vec::new();
        loop {
            let mut value_bytes = 0;
            while chunk.len() < chunk_len && value_bytes < dirty_budget / 8 {
                let Some((key, value)) = latest.next() else { break };
                let value = value.map(|value| {
                    value_bytes += value.len();
                    match value.len() > inline_max {
                        true => Value::Overflow(session.write_overflow(&value)),
                        false => Value::inline(value),
                    }
                });
                chunk.push((key, value));
            }
            if chunk.is_empty() {
                break;
            }
            tree.apply(&mut session, &mut chunk, &mut |old| {
                if let Value::Overflow(overflow) = old {
                    freed.push(*overflow);
                }
            })?;
            chunk.clear();
            for overflow in freed.drain(..) {
                session.free_overflow(&overflow);
            }
            if session.needs_early_flush(dirty_budget) {
                // Early: these blocks are orphans (from `orphans_from`) until the meta
                // record below names the tree they belong to.
                self.flush_early(cp, &mut session)?;
            }
        }
        self.finish(cp, session, tree, sequence)?;
        self.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
        self.log()?.truncate_below(Lsn(sequence + 1))?;
        Ok(())
    }

    /// Ends a session that built `tree`: deletes what no reader can reach any more, writes
    /// the pages with the meta record (covering the log up to `sequence`) in one group, and
    /// publishes the tree.
    pub(super) fn finish(
        &self,
        cp: &mut Checkpointer,
        mut session: BlockPages<'_>,
        tree: Tree,
        sequence: u64,
    ) -> Result<()> {
        let mut reclaim = std::mem::take(&mut cp.reclaim_now);
        while cp.retired.front().is_some_and(|(epoch, _)| epoch.strong_count() == 0) {
            if let Some((_, ids)) = cp.retired.pop_front() {
                reclaim.extend(ids);
            }
        }
        if let Some(list) = cp.meta.free_list {
            reclaim.extend(list.first..list.first + u64::from(list.blocks));
        }
        // The early flushes' list goes: this record names the tree.
        if let Some(list) = cp.early_list.take() {
            session.free_overflow(&list);
        }
        let reclaimed = reclaim.len() as u64;
        session.reclaim(reclaim);
        let retired_now = session.take_retired();
        // What is retired but not deleted, for a restart to delete.
        let pending: Vec<u64> = cp
            .retired
            .iter()
            .flat_map(|(_, ids)| ids.iter())
            .chain(&retired_now)
            .copied()
            .collect();
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
        self.counters.blocks_reclaimed.fetch_add(reclaimed, Ordering::Relaxed);
        // Publish: readers from now on use the new tree (and no longer need a frozen
        // memtable, which the tree now holds).
        let current = self.current.load_full();
        let old_epoch = Arc::downgrade(&current.epoch);
        self.current.store(Arc::new(Version {
            mutable: Arc::clone(&current.mutable),
            frozen: None,
            tree,
            epoch: Arc::new(Epoch),
        }));
        drop(current);
        // The frozen memtable's room goes back to the buffer pool.
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
