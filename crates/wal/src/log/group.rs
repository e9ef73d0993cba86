//! The file backend's group commit (see `log.rs`'s header): an appender marks its record
//! written and, for `Sync`, waits for a round that covers it or leads one (`gather`, then
//! `sync_round`: one fdatasync of every segment that may hold unsynced records); the
//! flusher runs the same round for `Buffered` records every `flush_interval`, and lets go
//! of the mapped pages appends are done with (`release_written`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use super::{Shared, State, GATHER_DIVISOR, GATHER_MAX, MAX_SYNC_ROUNDS, PEAK_DECAY_ROUNDS};
use crate::segment::Segment;
use crate::stats::Counters;
use crate::{Durability, Lsn, WalError};

impl Shared {
    /// file: marks `lsn` written and waits as `durability` asks.
    pub(super) fn finish_file(
        &self,
        lsn: Lsn,
        written: Result<(), WalError>,
        durability: Durability,
    ) -> Result<Lsn, WalError> {
        let mut state = self.lock();
        if let Err(error) = written {
            self.poison(&mut state, &error);
            return Err(error);
        }
        if lsn == state.written.next() {
            state.written = lsn;
            while {
                let next = state.written.next();
                state.completed.remove(&next)
            } {
                state.written = state.written.next();
            }
            if state.written_waiters > 0 {
                self.written_cv.notify_all();
            }
        } else {
            state.completed.insert(lsn);
        }
        match durability {
            Durability::None => Ok(lsn),
            Durability::Buffered => {
                state.buffered = state.buffered.max(lsn);
                Ok(lsn)
            }
            Durability::Sync => self.wait_durable(state, lsn).map(|()| lsn),
        }
    }

    /// file: returns once `lsn` is durable, leading sync rounds as needed.
    pub(super) fn wait_durable<'a>(
        &'a self,
        state: MutexGuard<'a, State>,
        lsn: Lsn,
    ) -> Result<(), WalError> {
        self.sync_waiting.fetch_add(1, Ordering::Relaxed);
        let result = self.wait_durable_counted(state, lsn);
        self.sync_waiting.fetch_sub(1, Ordering::Relaxed);
        result
    }

    fn wait_durable_counted<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        lsn: Lsn,
    ) -> Result<(), WalError> {
        loop {
            if state.durable >= lsn {
                return Ok(());
            }
            self.check_open(&state)?;
            if self.may_lead(&state, lsn) {
                state.gathering = true;
                state = self.gather(state);
                state.gathering = false;
                if self.may_lead(&state, lsn) {
                    state = self.sync_round(state);
                } else {
                    // Appenders that went to sleep because this one was gathering must look
                    // again: no round of this appender's will wake them.
                    self.end_round();
                }
            } else if state.written < lsn {
                // An earlier record is still being copied in.
                state.written_waiters += 1;
                state = self.written_cv.wait(state).unwrap_or_else(PoisonError::into_inner);
                state.written_waiters -= 1;
            } else {
                // A running round covers this record, or the next must wait for it to end.
                // Parks without the lock; the round's end wakes it, and a woken appender
                // whose record is durable returns without taking the lock again.
                let round = self.round_end.load(Ordering::Acquire);
                self.round_sleepers.fetch_add(1, Ordering::Relaxed);
                drop(state);
                while self.round_end.load(Ordering::Acquire) == round {
                    tierkv_io::futex::wait(&self.round_end, round);
                }
                self.round_sleepers.fetch_sub(1, Ordering::Relaxed);
                if self.durable_now.load(Ordering::Acquire) >= lsn.0 {
                    return Ok(());
                }
                state = self.lock();
            }
        }
    }

    /// file: before leading a round, waits briefly (the recent fdatasync time, at most
    /// `GATHER_MAX`) until the appenders inside `append` have written and the recent peak of
    /// `Sync` waiters is back: typically the appenders the last round woke, which return and
    /// append again. Without it appenders split into groups that alternate rounds. It yields
    /// the processor instead of sleeping on a timer, whose slack (50 µs by default) would be
    /// longer than the wait.
    fn gather<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        let budget = Duration::from_nanos(state.sync_ns_ema / GATHER_DIVISOR).min(GATHER_MAX);
        if budget.is_zero() {
            return state;
        }
        let deadline = Instant::now() + budget;
        loop {
            let reserved = state.next_lsn.0 - 1;
            let pending = reserved - state.durable.0;
            let active = self.active.load(Ordering::Relaxed) as u64;
            let waiting = self.sync_waiting.load(Ordering::Relaxed) as u64;
            if active <= pending && waiting >= state.peak_batch && state.written.0 == reserved {
                return state;
            }
            let now = Instant::now();
            if now >= deadline {
                return state;
            }
            drop(state);
            thread::yield_now();
            state = self.lock();
        }
    }

    /// file: `lsn` is written, no running round covers it, and another round may start.
    fn may_lead(&self, state: &State, lsn: Lsn) -> bool {
        !state.gathering
            && state.durable < lsn
            && state.written >= lsn
            && state.round_target < lsn
            && state.rounds < MAX_SYNC_ROUNDS
    }

    /// file: one group-commit round (see the module header).
    fn sync_round<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        debug_assert!(state.rounds < MAX_SYNC_ROUNDS);
        let target = state.written;
        let batch = self.sync_waiting.load(Ordering::Relaxed) as u64;
        if batch >= state.peak_batch {
            state.peak_batch = batch;
            state.peak_misses = 0;
        } else {
            state.peak_misses += 1;
            if state.peak_misses >= PEAK_DECAY_ROUNDS {
                state.peak_batch -= 1;
                state.peak_misses = 0;
            }
        }
        state.rounds += 1;
        state.round_target = state.round_target.max(target);
        // Whoever leads the round (an appender, a checkpoint's `sync_to`, the flusher) lets
        // go of the mapped pages first: a mapped dirty page that fdatasync writes back is
        // made read-only with a TLB shootdown each, where one `madvise` clears the range
        // (the checkpoint thread's syncs showed those shootdowns). Counted in `rounds`
        // already, so no other round starts while this drops the lock.
        state = self.release_written(state);
        let mut files: Vec<Arc<Segment>> =
            state.unsynced_sealed.iter().map(|(segment, _)| Arc::clone(segment)).collect();
        files.push(Arc::clone(&state.active().segment));
        drop(state);
        let started = Instant::now();
        // CRASH: until this completes, records after `durable` may or may not survive.
        let result = files.iter().try_for_each(|segment| segment.file.sync_data());
        let took_ns = started.elapsed().as_nanos() as u64;
        Counters::add(&self.counters.sync_ns, took_ns);
        let mut state = self.lock();
        state.rounds -= 1;
        state.sync_ns_ema =
            if state.sync_ns_ema == 0 { took_ns } else { (state.sync_ns_ema * 7 + took_ns) / 8 };
        match result {
            Ok(()) => {
                if target > state.durable {
                    Counters::add(&self.counters.sync_rounds, 1);
                    Counters::add(&self.counters.synced_records, target.0 - state.durable.0);
                    state.durable = target;
                    self.durable_now.store(target.0, Ordering::Release);
                }
                state.unsynced_sealed.retain(|(_, last)| *last > target);
            }
            Err(error) => self.poison(&mut state, &WalError::from(error)),
        }
        // Wake the sleepers with the lock released: waking several threads takes tens of
        // microseconds on a small VM, and writers finishing their copies need the lock.
        self.round_end.fetch_add(1, Ordering::Release);
        drop(state);
        self.wake_round_sleepers();
        self.lock()
    }

    /// file: the flusher makes `Buffered` records durable every `flush_interval`.
    pub(super) fn flush_loop(&self) {
        let mut state = self.lock();
        loop {
            if state.closed {
                return;
            }
            let (next, _) = self
                .work
                .wait_timeout(state, self.options.flush_interval)
                .unwrap_or_else(PoisonError::into_inner);
            state = next;
            if state.closed {
                return;
            }
            // Pages let go before the sync: fdatasync then writes them back with no
            // mapping to clean. A mapped page written back is made read-only first, one
            // TLB shootdown each (an interrupt of the other cores, costly in a VM: about
            // a sixth of a 2-core YCSB load's samples when this came after the sync), where
            // one `madvise` clears the whole range at once. (A round lets go again of
            // what was written meanwhile; here also when no round is due, for `None`
            // appends, so that the process's resident memory does not grow with the log.)
            state = self.release_written(state);
            let pending = state.buffered > state.durable && state.written > state.durable;
            let covered = state.round_target >= state.written;
            if pending && state.poison.is_none() && !covered && state.rounds < MAX_SYNC_ROUNDS {
                Counters::add(&self.counters.flusher_rounds, 1);
                state = self.sync_round(state);
            }
        }
    }
}

/// file: the written pages of the active segment are let go once this many bytes lie
/// below its tail since the last time: every whole page.
const RELEASE_BYTES: u64 = 4096;

impl Shared {
    /// file: lets go of the mapped pages appends are done with (`File::release_pages`):
    /// sealed segments whole, the active one below its tail page (`RELEASE_BYTES`). The
    /// records stay in the page cache and the file; the process's resident memory does not
    /// grow with the log. Appenders copy while this runs: one still copying
    /// below the tail maps its page again.
    fn release_written<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        let tail_page = state.tail / 4096 * 4096;
        let last = state.segments.len() - 1;
        let mut ranges = Vec::new();
        for (index, live) in state.segments.iter_mut().enumerate() {
            let end = if index == last { tail_page } else { live.segment.capacity };
            let due = if index == last { RELEASE_BYTES } else { 1 };
            if end >= live.released + due {
                ranges.push((Arc::clone(&live.segment), live.released, end));
                live.released = end;
            }
        }
        if ranges.is_empty() {
            return state;
        }
        drop(state);
        for (segment, from, to) in ranges {
            debug_assert!(from < to && to <= segment.capacity);
            // A hint: a failure leaves the pages mapped and loses nothing.
            let _ = segment.file.release_pages(from, to - from);
        }
        self.lock()
    }
}
