//! The frames of fresh page ids faulted in ahead of the writers, on a thread of the store's
//! own (`BufferPool::populate_ahead`).
//!
//! A new page (a split's) lands in a frame nothing has touched yet: its first touch faults
//! in and zeroes a huge page, 2 MiB, under the structure lock that holds every other
//! writer. The writers used to fault them in ahead themselves, before latching anything;
//! with one writer inserting random keys that was 12% of its time (a `perf record` of
//! `bench engine` fillrandom, most of it the kernel zeroing memory the VM had not backed
//! yet). Now a writer that finds fewer than a huge page's worth ahead wakes this thread
//! and goes on; it faults them in itself only when almost none are left (the thread is
//! behind, or was not started). The thread runs at nice 19, on the cores the clients leave
//! idle, and without the writers' lock: descheduled anywhere, it never keeps a writer from
//! doing the work itself.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::{JoinHandle, Thread};

use super::Inner;
use crate::buffer::{Ahead, By};

/// The populator thread's nice value: the lowest, for the cores the clients leave idle.
/// Where clients keep every core busy it seldom runs, and they fault the frames in
/// themselves (`Ahead::Now`) before latching anything, as before it. Not `SCHED_IDLE`:
/// starved there, it may hold the clock's lock or the kernel's memory-map lock while
/// clients wait; in the one YCSB run with it, a load's slowest insert took 154 ms (26–36
/// ms with the writers doing it all; the cause was not shown). With both cores busy the
/// load's insert p99.9 was 1.3–3.4 ms in YCSB rounds with the thread at any of these
/// priorities, against 0.5–0.8 ms without it.
const POPULATE_NICE: i32 = 19;

/// The thread's side of it, in `Inner`.
#[derive(Default)]
pub(super) struct Populator {
    /// The thread, for the writers to wake; unset while there is none.
    pub(super) thread: OnceLock<Thread>,
    /// Set by the writer that wakes the thread, cleared by the thread before it works, so
    /// that writers wake it once per need rather than at every write.
    asked: AtomicBool,
    pub(super) stop: AtomicBool,
    pub(super) handle: Mutex<Option<JoinHandle<()>>>,
}

impl Populator {
    /// Starts the thread for `inner`'s writers. Best effort: if it cannot start, the
    /// writers fault the frames in themselves, as before it.
    pub(super) fn start(inner: &Arc<Inner>) {
        let populator = &inner.populator;
        assert!(populator.thread.get().is_none(), "a second populator thread");
        let background = Arc::clone(inner);
        let started = std::thread::Builder::new().name("tierkv-populate".into()).spawn(move || {
            // Best effort: refused, the thread shares cores evenly.
            tierkv_io::priority::lower_this_thread(POPULATE_NICE);
            background.populate_loop()
        });
        if let Ok(handle) = started {
            let _ = populator.thread.set(handle.thread().clone());
            *populator.handle.lock().unwrap_or_else(PoisonError::into_inner) = Some(handle);
        }
    }

    /// Stops the thread and waits for it (`Inner::shut`); nothing when there is none. A
    /// request made before the stop is served first. A thread that panicked has nothing
    /// left to clean up.
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let handle = self.handle.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(handle) = handle {
            handle.thread().unpark();
            let _ = handle.join();
        }
    }
}

impl Inner {
    /// Before a write latches anything: sees that frames for the pages it may add are
    /// faulted in, or soon will be.
    #[inline]
    pub(super) fn populate_before_write(&self) {
        let pool = self.pages.pool();
        let next = self.next_page.load(Ordering::Relaxed);
        match pool.populate_due(next) {
            Ahead::Enough => {}
            Ahead::Soon => match self.populator.thread.get() {
                Some(thread) => {
                    let populator = &self.populator;
                    if !populator.asked.load(Ordering::Relaxed)
                        && !populator.asked.swap(true, Ordering::AcqRel)
                    {
                        thread.unpark();
                    }
                }
                None => pool.populate_ahead(next, By::Writer),
            },
            Ahead::Now => pool.populate_ahead(next, By::Writer),
        }
    }

    /// The populator thread: waits to be woken, then faults in the frames ahead of the next
    /// page id, until the store stops it.
    fn populate_loop(&self) {
        let populator = &self.populator;
        loop {
            std::thread::park();
            let stopping = populator.stop.load(Ordering::Acquire);
            // Cleared first: a writer that asks while this runs wakes it for another pass.
            if populator.asked.swap(false, Ordering::AcqRel) {
                let next = self.next_page.load(Ordering::Relaxed);
                self.pages.pool().populate_ahead(next, By::Thread);
            }
            if stopping {
                return;
            }
        }
    }
}
