//! `PageCache`: decoded pages in DRAM under a byte budget, with an eviction policy that a
//! long scan cannot flush (S3-FIFO: Yang et al., "FIFO queues are all you need for cache
//! eviction", SOSP 2023).
//!
//! **Policy.** A page enters a small FIFO (a tenth of the budget). Leaving it, a page that
//! was read again meanwhile moves to the main FIFO; one that was not is evicted, and its id
//! kept in a ghost FIFO (ids only). A page that comes back while its id is a ghost enters
//! the main FIFO at once. Leaving the main FIFO, a page read since it last passed is put
//! back with one read less counted (at most 3 are); one not read is evicted. So pages read
//! once (a scan) pass through the small FIFO and leave, and pages read again stay. The ghost
//! FIFO remembers twice as many ids as there are pages cached.
//!
//! **What may not leave.** A page is evicted only when `Cached::evictable` says so (the
//! engine keeps dirty pages until they are written back) and nobody else holds it (its `Arc`
//! is not shared). Others are passed over. When nothing can leave, the cache stays over
//! budget and counts it (`CacheStats::over_budget`): the owner must write pages back.
//!
//! **Concurrency.** Pages are spread over shards by id, each with its own budget and lock;
//! a lock is held only for the map and queue operations, never across I/O.
//!
//! **Eviction hook.** A cache made `with_eviction_hook` hands every page it evicts to the
//! hook, after the shard's lock is let go (the engine offers clean pages to the tier cache
//! below it). Pages taken out with `remove` are not evicted: they are gone, not demoted.
//!
//! Must never: evict a page someone holds or that is not evictable; account a page's bytes
//! twice.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// What the cache needs of a page.
pub trait Cached: Send + Sync {
    /// Bytes the page takes in memory.
    fn weight(&self) -> usize;
    /// Whether the page may leave the cache now (a dirty page may not).
    fn evictable(&self) -> bool {
        true
    }
}

/// Bytes an allocation of `len` bytes takes from the heap, by the more costly of the two
/// kinds of allocator a process may have:
/// - glibc's: an 8-byte header, rounding to 16, at least 32;
/// - a size-class one (jemalloc, the `tierkv` binary's; tcmalloc and mimalloc alike): 16-byte
///   classes up to 128, then four classes to each doubling (160, 192, 224, 256, 320, …,
///   4096, 5120, 6144, 7168, 8192, 10240, …), so up to a quarter more than asked for.
///
/// Counting this rather than `len` keeps a budget honest: a 16-byte key costs 32 bytes, and a
/// page image of 4,500 bytes costs 5,120.
pub fn allocation_bytes(len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let header_rounded = (len + 8).next_multiple_of(16).max(32);
    let size_class = match len {
        ..=128 => len.next_multiple_of(16),
        // Four classes between each power of two and the next: steps of an eighth of the
        // upper one.
        _ => len.next_multiple_of(len.next_power_of_two() / 8),
    };
    header_rounded.max(size_class)
}

/// The shards' hasher: page ids are not chosen by anyone who could aim collisions at the
/// map, so a fast hash (foldhash) does instead of SipHash, which showed in read profiles.
type IdHasher = foldhash::fast::RandomState;

/// Reads done on a page, at most (S3-FIFO's frequency counter).
const MAX_FREQ: u8 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Queue {
    Small,
    Main,
}

struct Entry<V> {
    value: Arc<V>,
    weight: usize,
    freq: u8,
    queue: Queue,
}

struct Shard<V> {
    map: HashMap<u64, Entry<V>, IdHasher>,
    small: VecDeque<u64>,
    main: VecDeque<u64>,
    ghost: VecDeque<u64>,
    ghost_set: HashSet<u64, IdHasher>,
    small_bytes: usize,
    used: usize,
    budget: usize,
    /// Ids in the queues whose pages were removed; the queues are compacted when these
    /// outnumber the pages.
    stale: usize,
    /// `get`s that found a page and that did not, counted under the shard's lock rather
    /// than in one atomic every reader would write.
    hits: u64,
    misses: u64,
}

/// Counters since the cache was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// `get` calls that found the page.
    pub hits: u64,
    /// `get` calls that did not.
    pub misses: u64,
    /// Pages evicted.
    pub evictions: u64,
    /// Inserts after which a shard stayed over its budget because nothing could leave.
    pub over_budget: u64,
}

/// What a cache calls with each page it evicts (see the module header).
pub type EvictionHook<V> = Box<dyn Fn(u64, &V) + Send + Sync>;

/// The page cache (see the module header).
pub struct PageCache<V> {
    shards: Vec<Mutex<Shard<V>>>,
    evictions: AtomicU64,
    over_budget: AtomicU64,
    on_evict: Option<EvictionHook<V>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<V: Cached> PageCache<V> {
    /// A cache of `budget` bytes in `shards` shards (at least one).
    pub fn new(budget: usize, shards: usize) -> PageCache<V> {
        let shards = shards.max(1);
        let per_shard = budget / shards;
        PageCache {
            shards: (0..shards)
                .map(|_| {
                    Mutex::new(Shard {
                        map: HashMap::default(),
                        small: VecDeque::new(),
                        main: VecDeque::new(),
                        ghost: VecDeque::new(),
                        ghost_set: HashSet::default(),
                        small_bytes: 0,
                        used: 0,
                        budget: per_shard,
                        stale: 0,
                        hits: 0,
                        misses: 0,
                    })
                })
                .collect(),
            evictions: AtomicU64::new(0),
            over_budget: AtomicU64::new(0),
            on_evict: None,
        }
    }

    /// This cache, handing each page it evicts to `hook` (see the module header).
    pub fn with_eviction_hook(mut self, hook: EvictionHook<V>) -> PageCache<V> {
        self.on_evict = Some(hook);
        self
    }

    /// Counts `evicted` and hands them to the hook; called with no shard locked.
    fn evicted(&self, evicted: Vec<(u64, Arc<V>)>) {
        if evicted.is_empty() {
            return;
        }
        self.evictions.fetch_add(evicted.len() as u64, Ordering::Relaxed);
        if let Some(hook) = &self.on_evict {
            for (id, value) in &evicted {
                hook(*id, value);
            }
        }
    }

    fn shard(&self, id: u64) -> &Mutex<Shard<V>> {
        // Fibonacci hashing spreads consecutive ids over the shards.
        let at = (id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize % self.shards.len();
        &self.shards[at]
    }

    /// The page `id`, if cached; counts a hit or a miss.
    pub fn get(&self, id: u64) -> Option<Arc<V>> {
        let mut shard = lock(self.shard(id));
        match shard.map.get_mut(&id) {
            Some(entry) => {
                entry.freq = (entry.freq + 1).min(MAX_FREQ);
                let value = Arc::clone(&entry.value);
                shard.hits += 1;
                Some(value)
            }
            None => {
                shard.misses += 1;
                None
            }
        }
    }

    /// Caches `value` as page `id` and returns the cached page: `value`, or the page another
    /// thread cached first (which wins). Then evicts while the shard is over its budget.
    pub fn insert(&self, id: u64, value: Arc<V>) -> Arc<V> {
        let mut shard = lock(self.shard(id));
        if let Some(entry) = shard.map.get(&id) {
            return Arc::clone(&entry.value);
        }
        let weight = value.weight();
        let queue = if shard.ghost_set.remove(&id) { Queue::Main } else { Queue::Small };
        match queue {
            Queue::Small => {
                shard.small.push_back(id);
                shard.small_bytes += weight;
            }
            Queue::Main => shard.main.push_back(id),
        }
        shard.used += weight;
        shard.map.insert(id, Entry { value: Arc::clone(&value), weight, freq: 0, queue });
        let evicted = shard.evict();
        if shard.used > shard.budget {
            self.over_budget.fetch_add(1, Ordering::Relaxed);
        }
        drop(shard);
        self.evicted(evicted);
        value
    }

    /// Takes page `id` out of the cache (a page that is freed, or replaced under its id).
    pub fn remove(&self, id: u64) -> Option<Arc<V>> {
        let mut shard = lock(self.shard(id));
        let entry = shard.map.remove(&id)?;
        shard.used -= entry.weight;
        if entry.queue == Queue::Small {
            shard.small_bytes -= entry.weight;
        }
        // Its id stays in its queue, where `evict` skips it, until there are more such ids
        // than pages.
        shard.stale += 1;
        if shard.stale > shard.map.len() + 64 {
            shard.compact();
        }
        Some(entry.value)
    }

    /// Reads page `id`'s weight again (after it changed in place), and evicts if that put
    /// its shard over budget.
    #[cfg(test)]
    pub fn reweigh(&self, id: u64) {
        let mut shard = lock(self.shard(id));
        let Some(entry) = shard.map.get_mut(&id) else { return };
        let (old, new) = (entry.weight, entry.value.weight());
        entry.weight = new;
        let small = entry.queue == Queue::Small;
        shard.used = shard.used - old + new;
        if small {
            shard.small_bytes = shard.small_bytes - old + new;
        }
        let evicted = shard.evict();
        drop(shard);
        self.evicted(evicted);
    }

    /// Evicts in every shard that is over its budget, as far as pages can leave (after pages
    /// became evictable: dirty pages written back, held pages let go).
    pub fn trim(&self) {
        for shard in &self.shards {
            let evicted = lock(shard).evict();
            self.evicted(evicted);
        }
    }

    /// Sets the budget to `budget` bytes, split over the shards as `new` splits it, and
    /// evicts now in the shards that are over theirs.
    pub fn set_budget(&self, budget: usize) {
        let per_shard = budget / self.shards.len();
        for shard in &self.shards {
            let mut shard = lock(shard);
            shard.budget = per_shard;
            let evicted = shard.evict();
            drop(shard);
            self.evicted(evicted);
        }
    }

    /// The budget, bytes (the shards' together).
    pub fn budget(&self) -> usize {
        self.shards.iter().map(|shard| lock(shard).budget).sum()
    }

    /// Bytes of the cached pages.
    pub fn used_bytes(&self) -> usize {
        self.shards.iter().map(|shard| lock(shard).used).sum()
    }

    /// Pages cached.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.shards.iter().map(|shard| lock(shard).map.len()).sum()
    }

    /// The counters.
    pub fn stats(&self) -> CacheStats {
        let (hits, misses) = self.shards.iter().fold((0, 0), |(hits, misses), shard| {
            let shard = lock(shard);
            (hits + shard.hits, misses + shard.misses)
        });
        CacheStats {
            hits,
            misses,
            evictions: self.evictions.load(Ordering::Relaxed),
            over_budget: self.over_budget.load(Ordering::Relaxed),
        }
    }
}

impl<V: Cached> Shard<V> {
    /// Evicts until the shard is within its budget or nothing can leave; returns the pages
    /// that left.
    #[must_use]
    fn evict(&mut self) -> Vec<(u64, Arc<V>)> {
        let mut evicted = Vec::new();
        // Each page is passed over at most once per queue per call (freq counts down, and a
        // page that cannot leave is counted as passed), so this ends.
        let mut passes = self.small.len() + (MAX_FREQ as usize + 1) * self.main.len() + 1;
        while self.used > self.budget && passes > 0 {
            passes -= 1;
            let from_small = self.small_bytes > self.budget / 10 || self.main.is_empty();
            let popped = if from_small { self.small.pop_front() } else { self.main.pop_front() };
            let Some(id) = popped else {
                if from_small && !self.main.is_empty() {
                    continue;
                }
                break;
            };
            let expected = if from_small { Queue::Small } else { Queue::Main };
            let Some(entry) = self.map.get_mut(&id).filter(|entry| entry.queue == expected) else {
                self.stale = self.stale.saturating_sub(1);
                continue;
            };
            let held = Arc::strong_count(&entry.value) > 1 || !entry.value.evictable();
            match (from_small, entry.freq > 0 || held) {
                (true, true) => {
                    // Read again (or in use): to the main queue.
                    entry.queue = Queue::Main;
                    entry.freq = entry.freq.saturating_sub(1);
                    let weight = entry.weight;
                    self.small_bytes -= weight;
                    self.main.push_back(id);
                }
                (false, true) => {
                    entry.freq = entry.freq.saturating_sub(1);
                    self.main.push_back(id);
                }
                (_, false) => {
                    let weight = entry.weight;
                    let Some(entry) = self.map.remove(&id) else { continue };
                    self.used -= weight;
                    if from_small {
                        self.small_bytes -= weight;
                        self.remember(id);
                    }
                    evicted.push((id, entry.value));
                }
            }
        }
        evicted
    }

    /// Drops from the queues the ids whose pages are gone (or moved to the other queue).
    fn compact(&mut self) {
        let map = &self.map;
        self.small.retain(|id| map.get(id).is_some_and(|e| e.queue == Queue::Small));
        self.main.retain(|id| map.get(id).is_some_and(|e| e.queue == Queue::Main));
        self.stale = 0;
    }

    /// Keeps `id` as a ghost. The ghost FIFO holds twice as many ids as the shard holds
    /// pages (an id costs tens of bytes, a page thousands), so that a page read again after
    /// a whole cache's worth of other pages still comes back to the main queue.
    fn remember(&mut self, id: u64) {
        if self.ghost_set.insert(id) {
            self.ghost.push_back(id);
        }
        let limit = (2 * self.map.len()).max(64);
        while self.ghost.len() > limit {
            if let Some(old) = self.ghost.pop_front() {
                self.ghost_set.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests;
