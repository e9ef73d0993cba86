//! The pmem backend's commit (FLEX, seed 001; see `log.rs`'s header): commits happen in
//! LSN order under the commit lock (`CommitChain`); an appender whose predecessor is
//! committed stores the segment's commit word and persists its record and the word behind
//! one fence; one whose predecessor is still copying persists its own record and leaves
//! the commit to it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard, PoisonError};

use super::{CommitChain, Shared, COMMIT_SPINS_BEFORE_PARK};
use crate::format::COMMIT_WORD_OFFSET;
use crate::segment::Segment;
use crate::{Lsn, WalError};

impl Shared {
    /// pmem: commits the record in LSN order (see the module header).
    pub(super) fn finish_pmem(
        &self,
        lsn: Lsn,
        segment: &Arc<Segment>,
        offset: u64,
        size: u64,
        written: Result<(), WalError>,
    ) -> Result<Lsn, WalError> {
        if let Err(error) = written {
            self.poison(&mut self.lock(), &error);
            self.wake_chain();
            return Err(error);
        }
        let end = offset + size;
        let mut chain = self.chain_lock();
        if self.committed.load(Ordering::Acquire) + 1 == lsn.0 {
            // The common case: commit word and record behind one fence.
            return self.advance(chain, lsn, segment, end, Some((offset, size))).map(|()| lsn);
        }
        drop(chain);
        // A predecessor is still copying: make this record durable on its own, then leave it
        // for whoever commits the predecessor.
        if let Err(error) = segment.file.persist(offset, size) {
            let error = WalError::from(error);
            self.poison(&mut self.lock(), &error);
            self.wake_chain();
            return Err(error);
        }
        chain = self.chain_lock();
        if self.committed.load(Ordering::Acquire) + 1 == lsn.0 {
            return self.advance(chain, lsn, segment, end, None).map(|()| lsn);
        }
        chain.done.insert(lsn, (Arc::clone(segment), end));
        let mut spins = 0u32;
        loop {
            if self.committed.load(Ordering::Acquire) >= lsn.0 {
                return Ok(lsn);
            }
            if self.poisoned.load(Ordering::Acquire) {
                drop(chain);
                return Err(self
                    .check_open(&self.lock())
                    .err()
                    .unwrap_or(WalError::Closed { dir: self.dir.clone() }));
            }
            if spins < COMMIT_SPINS_BEFORE_PARK {
                // Spin without the lock: the predecessor needs it to commit.
                drop(chain);
                spins += 1;
                std::hint::spin_loop();
                chain = self.chain_lock();
            } else {
                chain.waiters += 1;
                chain = self.chain_progress.wait(chain).unwrap_or_else(PoisonError::into_inner);
                chain.waiters -= 1;
            }
        }
    }

    fn chain_lock(&self) -> MutexGuard<'_, CommitChain> {
        self.chain.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wake_chain(&self) {
        let _chain = self.chain_lock();
        self.chain_progress.notify_all();
    }

    /// pmem: commits `lsn` (whose predecessor is committed) and every durable successor waiting
    /// in the chain. `unfenced` is the caller's record when it is not yet durable: it is
    /// flushed behind the same fence as the commit word.
    fn advance(
        &self,
        mut chain: MutexGuard<'_, CommitChain>,
        lsn: Lsn,
        segment: &Arc<Segment>,
        end: u64,
        unfenced: Option<(u64, u64)>,
    ) -> Result<(), WalError> {
        let mut last = lsn;
        let mut current: (Arc<Segment>, u64) = (Arc::clone(segment), end);
        let mut unfenced = unfenced;
        let mut result = Ok(());
        while let Some((next_segment, next_end)) = chain.done.remove(&last.next()) {
            if !Arc::ptr_eq(&next_segment, &current.0) {
                // The chain crosses into the next segment: the old one's word goes first.
                result = commit_word(&current.0, current.1, unfenced.take());
                if result.is_err() {
                    break;
                }
                current.0 = next_segment;
            }
            current.1 = next_end;
            last = last.next();
        }
        if result.is_ok() {
            result = commit_word(&current.0, current.1, unfenced);
        }
        match result {
            Ok(()) => {
                self.committed.store(last.0, Ordering::Release);
                if chain.waiters > 0 {
                    self.chain_progress.notify_all();
                }
                Ok(())
            }
            Err(error) => {
                drop(chain);
                self.poison(&mut self.lock(), &error);
                self.wake_chain();
                Err(error)
            }
        }
    }
}

/// Stores a segment's commit word and makes it durable, together with `record` (a range of
/// the same segment not yet durable) behind the same fence.
fn commit_word(segment: &Segment, end: u64, record: Option<(u64, u64)>) -> Result<(), WalError> {
    // CRASH: from this store until the fence below, the word may become durable before the
    // record's lines; recovery's checksum then stops at the record, which is unacknowledged.
    segment.file.store_u64(COMMIT_WORD_OFFSET, end)?;
    match record {
        Some(range) => segment.file.persist_ranges(&[range, (COMMIT_WORD_OFFSET, 8)])?,
        None => segment.file.persist(COMMIT_WORD_OFFSET, 8)?,
    }
    Ok(())
}
