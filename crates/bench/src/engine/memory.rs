//! The memory trace of a `bench engine` run (see `mod.rs`'s header): resident memory, its
//! anonymous part, the allocator's bytes in use and what the engine counts, sampled through
//! the run.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tierkv::Db;

use super::Workload;
use crate::machine::process_memory;

/// Memory at one moment of the run (see `MemoryTrace`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemorySample {
    /// Seconds since the run began.
    pub seconds: f64,
    /// The workload running; `None` between workloads (opening, closing, checkpointing).
    pub workload: Option<Workload>,
    /// The process's resident memory (`VmRSS`), bytes.
    pub rss_bytes: u64,
    /// Of it, anonymous memory (`RssAnon`): the heap, stacks and anonymous maps.
    pub anon_bytes: Option<u64>,
    /// Bytes the allocator has handed out and not had back (`heap_in_use`); resident heap
    /// above this is memory the allocator keeps free, or its size-class rounding.
    pub heap_in_use_bytes: Option<u64>,
    /// What the engine counts against its budget, as last read during a workload: its page
    /// cache's bytes.
    pub engine_cache_bytes: Option<usize>,
    /// And what it holds outside its frames: before-images (undo) and overflow values not
    /// yet written.
    pub engine_memtable_bytes: Option<usize>,
}

/// Memory through the run: a thread samples the process every `MEMORY_SAMPLE_INTERVAL`,
/// workloads or not (a store's opening and closing count too), and the workload loops note
/// what the engine counts (`Db::stats`) each 1,000 operations, at most as often. A
/// transient peak can then be placed, and set against what the engine holds.
pub(super) struct MemoryTrace {
    pub(super) started: Instant,
    /// 1 + the index in `config.workloads` of the workload running; 0 between workloads.
    running: AtomicUsize,
    /// Nanoseconds after `started` when the engine's figures are next read.
    engine_due: AtomicU64,
    /// The engine's figures last read (`usize::MAX`: none yet, or between workloads).
    engine_cache: AtomicUsize,
    engine_memtables: AtomicUsize,
    pub(super) stop: AtomicBool,
}

/// How often `MemoryTrace` samples. glibc's `mallinfo2` walks malloc's free lists under its
/// locks, so not much more often.
const MEMORY_SAMPLE_INTERVAL: Duration = Duration::from_millis(50);

impl MemoryTrace {
    pub(super) fn new() -> MemoryTrace {
        MemoryTrace {
            started: Instant::now(),
            running: AtomicUsize::new(0),
            engine_due: AtomicU64::new(0),
            engine_cache: AtomicUsize::new(usize::MAX),
            engine_memtables: AtomicUsize::new(usize::MAX),
            stop: AtomicBool::new(false),
        }
    }

    pub(super) fn elapsed_nanos(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Marks workload `index` of the run as running, or none (`None`).
    pub(super) fn set_running(&self, index: Option<usize>) {
        self.running.store(index.map_or(0, |i| i + 1), Ordering::Relaxed);
        if index.is_none() {
            self.engine_cache.store(usize::MAX, Ordering::Relaxed);
            self.engine_memtables.store(usize::MAX, Ordering::Relaxed);
        }
        self.engine_due.store(0, Ordering::Relaxed);
    }

    /// Reads the engine's figures when they are due.
    pub(super) fn note_engine(&self, store: &Db) {
        let now = self.elapsed_nanos();
        if now < self.engine_due.load(Ordering::Relaxed) {
            return;
        }
        let interval = u64::try_from(MEMORY_SAMPLE_INTERVAL.as_nanos()).unwrap_or(u64::MAX);
        self.engine_due.store(now.saturating_add(interval), Ordering::Relaxed);
        if let Ok(stats) = store.stats() {
            // What the engine holds outside its frames: before-images and unwritten
            // overflow values (the memtables' place before updates in place).
            let memtables = stats.undo_bytes + stats.pending_overflow_bytes;
            self.engine_cache.store(stats.cache_bytes, Ordering::Relaxed);
            self.engine_memtables.store(memtables, Ordering::Relaxed);
        }
    }

    /// The sampler thread's loop, until `stop`.
    pub(super) fn sample_until_stopped(
        &self,
        workloads: &[Workload],
        heap_in_use: fn() -> Option<u64>,
    ) -> Vec<MemorySample> {
        let engine = |figure: &AtomicUsize| {
            Some(figure.load(Ordering::Relaxed)).filter(|&bytes| bytes != usize::MAX)
        };
        let mut samples = Vec::new();
        loop {
            let stopping = self.stop.load(Ordering::Relaxed);
            if let Some(memory) = process_memory() {
                let running = self.running.load(Ordering::Relaxed);
                samples.push(MemorySample {
                    seconds: self.started.elapsed().as_secs_f64(),
                    workload: running.checked_sub(1).and_then(|i| workloads.get(i).copied()),
                    rss_bytes: memory.rss_bytes,
                    anon_bytes: memory.anon_bytes,
                    heap_in_use_bytes: heap_in_use(),
                    engine_cache_bytes: engine(&self.engine_cache),
                    engine_memtable_bytes: engine(&self.engine_memtables),
                });
            }
            if stopping {
                return samples;
            }
            std::thread::sleep(MEMORY_SAMPLE_INTERVAL);
        }
    }
}
