//! `TierCache`: the lookup table, admission with Overhead Bypass, invalidation and the
//! eviction thread. The protocol is in the crate's header.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use tierkv_io::MemoryRegion;

use crate::emulate::Emulator;
use crate::extents::{units_for, Extents, UNIT};
use crate::stats::{BypassClock, Counters};
use crate::{TierError, TierOptions, TierStats};

/// What a block is cached under: the block's id and the version of its content. A version's
/// content never changes, so an entry is either exactly that content or absent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TierKey {
    /// The block's id.
    pub id: u64,
    /// The version of its content (the block store's group that wrote it).
    pub version: u64,
}

/// Which path offers a block to the tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdmitSource {
    /// A read that missed the tier and went to the device (`cache_on_read`).
    Read,
    /// A clean block the layer above's cache let go of (`cache_on_evict`).
    Evict,
    /// A write by the layer above outside a checkpoint (`cache_on_write`).
    Write,
    /// A write by a checkpoint (`cache_on_checkpoint`).
    Checkpoint,
}

/// What `admit` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The block is in the tier now.
    Admitted,
    /// The tier held it already.
    AlreadyPresent,
    /// Overhead Bypass is in force.
    Bypassed,
    /// No free extent holds it; the eviction thread makes room once the tier is full.
    Full,
    /// Empty, or larger than a quarter of the tier.
    Size,
    /// `cache_on_read`, `cache_on_evict`, `cache_on_write` or `cache_on_checkpoint` is off
    /// for its source.
    Source,
}

/// One cached block.
struct Entry {
    key: TierKey,
    /// First unit of its extent.
    unit: u64,
    len: u32,
    hits: u32,
    /// The eviction pass during which it was last admitted or hit.
    last_pass: u32,
}

impl Entry {
    /// Eviction order, lowest first: the pass of its last use, plus up to 8 passes of grace
    /// for a block hit often (log2 of its hits).
    fn priority(&self) -> u64 {
        self.last_pass as u64 + (self.hits + 1).ilog2().min(8) as u64
    }
}

type Bucket = Mutex<Vec<Entry>>;

struct Inner {
    options: TierOptions,
    region: MemoryRegion,
    buckets: Box<[Bucket]>,
    mask: u64,
    extents: Mutex<Extents>,
    total_units: u64,
    used_units: AtomicU64,
    blocks: AtomicU64,
    max_block: usize,
    pass: AtomicU32,
    counters: Counters,
    bypass: BypassClock,
    emulator: Option<Emulator>,
    epoch: Instant,
    /// Set to stop the eviction thread, which waits on `wake`.
    stop: Mutex<bool>,
    wake: Condvar,
}

/// A secondary block cache on a memory tier. See the crate's header.
pub struct TierCache {
    inner: Arc<Inner>,
    evictor: Mutex<Option<JoinHandle<()>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// splitmix64's finalizer: spreads a key over the buckets.
fn mix(key: TierKey) -> u64 {
    let mut z = key.id ^ key.version.rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl TierCache {
    /// Makes the tier's memory and starts its eviction thread.
    pub fn open(options: TierOptions) -> Result<TierCache, TierError> {
        options.validate()?;
        let region =
            MemoryRegion::new(&options.backing, options.capacity_bytes, options.numa_node)?;
        let total_units = region.len() / UNIT;
        let buckets: Box<[Bucket]> =
            (0..options.bucket_count()).map(|_| Mutex::new(Vec::new())).collect();
        let inner = Arc::new(Inner {
            mask: buckets.len() as u64 - 1,
            buckets,
            extents: Mutex::new(Extents::new(total_units)),
            total_units,
            used_units: AtomicU64::new(0),
            blocks: AtomicU64::new(0),
            max_block: (region.len() / 4).min(u32::MAX as u64) as usize,
            region,
            pass: AtomicU32::new(0),
            counters: Counters::default(),
            bypass: BypassClock::default(),
            emulator: options.emulation.clone().map(Emulator::new),
            epoch: Instant::now(),
            stop: Mutex::new(false),
            wake: Condvar::new(),
            options,
        });
        let evictor = {
            let inner = Arc::clone(&inner);
            std::thread::Builder::new()
                .name("tierkv-tier-evict".into())
                .spawn(move || inner.eviction_loop())
                .map_err(|e| TierError::Thread(e.to_string()))?
        };
        Ok(TierCache { inner, evictor: Mutex::new(Some(evictor)) })
    }

    /// Copies the block cached under `key` into `out` (replacing its contents) and returns
    /// true, or returns false when the tier does not hold it. Counts a lookup either way.
    /// With `exclusive`, a hit also takes the block out of the tier.
    pub fn get(&self, key: TierKey, out: &mut Vec<u8>) -> bool {
        let inner = &*self.inner;
        inner.counters.lookups.add(1);
        let pass = inner.pass.load(Ordering::Relaxed);
        let (copied, taken) = {
            let mut bucket = lock(inner.bucket(key));
            match bucket.iter().position(|entry| entry.key == key) {
                None => (None, None),
                Some(at) => {
                    let entry = &mut bucket[at];
                    entry.hits = entry.hits.saturating_add(1);
                    entry.last_pass = pass;
                    out.clear();
                    out.resize(entry.len as usize, 0);
                    // SAFETY: the extent belongs to this entry while the entry is in the
                    // bucket, and the bucket's lock is held: whatever frees the extent (and so
                    // any later write into it) takes this lock first.
                    let read = unsafe { inner.region.read(entry.unit * UNIT, out) };
                    debug_assert!(read.is_ok(), "{read:?}");
                    let copied = read.ok().map(|()| entry.len as usize);
                    // Taken out under the lock, its extent freed after (the protocol's 3).
                    let taken = inner.options.exclusive.then(|| bucket.swap_remove(at));
                    (copied, taken)
                }
            }
        };
        if let Some(entry) = taken {
            inner.release(&entry);
            inner.counters.removals.add(1);
            inner.counters.taken.add(1);
        }
        match copied {
            Some(len) => {
                inner.counters.hits.add(1);
                inner.counters.bytes_read.add(len as u64);
                if let Some(emulator) = &inner.emulator {
                    emulator.access(len, false);
                }
                true
            }
            None => false,
        }
    }

    /// Whether the tier would take a block of `len` bytes under `key` from `source` now,
    /// before its bytes are made: `None` when it would, or what `admit` would answer,
    /// counted as `admit` counts it (`Full` when the free units do not add up to it; `admit`
    /// may still find no extent). A caller that has to build a block's bytes (a demotion)
    /// asks first, so that a refusal saves that work too.
    pub fn admission(&self, key: TierKey, len: usize, source: AdmitSource) -> Option<Admission> {
        let inner = &*self.inner;
        let counters = &inner.counters;
        if len == 0 || len > inner.max_block {
            counters.skipped_size.add(1);
            return Some(Admission::Size);
        }
        let allowed = match source {
            AdmitSource::Read => inner.options.cache_on_read,
            AdmitSource::Evict => inner.options.cache_on_evict,
            AdmitSource::Write => inner.options.cache_on_write,
            AdmitSource::Checkpoint => inner.options.cache_on_checkpoint,
        };
        if !allowed {
            counters.skipped_source.add(1);
            return Some(Admission::Source);
        }
        if inner.overhead_high() {
            counters.bypassed_admissions.add(1);
            return Some(Admission::Bypassed);
        }
        if lock(inner.bucket(key)).iter().any(|entry| entry.key == key) {
            counters.already_present.add(1);
            return Some(Admission::AlreadyPresent);
        }
        let free = inner.total_units.saturating_sub(inner.used_units.load(Ordering::Relaxed));
        if units_for(len as u64) > free {
            counters.skipped_full.add(1);
            return Some(Admission::Full);
        }
        None
    }

    /// Offers a block, whose bytes are `parts` back to back, to the tier.
    pub fn admit(&self, key: TierKey, parts: &[&[u8]], source: AdmitSource) -> Admission {
        let inner = &*self.inner;
        let counters = &inner.counters;
        let len: usize = parts.iter().map(|part| part.len()).sum();
        if let Some(refused) = self.admission(key, len, source) {
            return refused;
        }
        let units = units_for(len as u64);
        let Some(unit) = lock(&inner.extents).allocate(units) else {
            counters.skipped_full.add(1);
            return Admission::Full;
        };
        let mut at = unit * UNIT;
        for part in parts.iter().filter(|part| !part.is_empty()) {
            // SAFETY: the extent was just allocated and is in no bucket: no other thread can
            // reach it until the entry is published below, under the bucket's lock.
            let written = unsafe { inner.region.write(at, part) };
            debug_assert!(written.is_ok(), "{written:?}");
            at += part.len() as u64;
        }
        if let Some(emulator) = &inner.emulator {
            emulator.access(len, true);
        }
        {
            let mut bucket = lock(inner.bucket(key));
            if bucket.iter().any(|entry| entry.key == key) {
                // Another thread admitted it meanwhile.
                drop(bucket);
                lock(&inner.extents).free(unit, units);
                counters.already_present.add(1);
                return Admission::AlreadyPresent;
            }
            let pass = inner.pass.load(Ordering::Relaxed);
            bucket.push(Entry { key, unit, len: len as u32, hits: 0, last_pass: pass });
        }
        inner.used_units.fetch_add(units, Ordering::Relaxed);
        inner.blocks.fetch_add(1, Ordering::Relaxed);
        counters.bytes_written.add(len as u64);
        match source {
            AdmitSource::Read => counters.inserts_read.add(1),
            AdmitSource::Evict => counters.inserts_evict.add(1),
            AdmitSource::Write => counters.inserts_write.add(1),
            AdmitSource::Checkpoint => counters.inserts_checkpoint.add(1),
        }
        Admission::Admitted
    }

    /// Drops the block cached under `key`, if the tier holds it (the block store freed or
    /// replaced that version). Returns whether it did.
    pub fn invalidate(&self, key: TierKey) -> bool {
        let inner = &*self.inner;
        let removed = {
            let mut bucket = lock(inner.bucket(key));
            let at = bucket.iter().position(|entry| entry.key == key);
            at.map(|at| bucket.swap_remove(at))
        };
        match removed {
            Some(entry) => {
                inner.release(&entry);
                inner.counters.removals.add(1);
                true
            }
            None => false,
        }
    }

    /// Whether the tier holds a block under `key` (counts nothing).
    pub fn contains(&self, key: TierKey) -> bool {
        lock(self.inner.bucket(key)).iter().any(|entry| entry.key == key)
    }

    /// Runs one eviction pass now, as the eviction thread does each interval; returns the
    /// blocks evicted.
    pub fn evict_now(&self) -> u64 {
        self.inner.evict_pass()
    }

    /// The counters and the state of the tier.
    pub fn stats(&self) -> TierStats {
        let inner = &*self.inner;
        let c = &inner.counters;
        let lookups = c.lookups.get();
        let hits = c.hits.get();
        let (bypass_now, bypass_episodes, bypass_seconds) = inner.bypass.read(inner.now_ns());
        TierStats {
            backing: inner.region.description().to_string(),
            emulation: inner.emulator.as_ref().map(|e| e.tier().describe()),
            overhead_bypass: inner.options.overhead_bypass,
            max_overhead: inner.options.max_overhead,
            capacity_bytes: inner.region.len(),
            used_bytes: inner.used_units.load(Ordering::Relaxed) * UNIT,
            blocks: inner.blocks.load(Ordering::Relaxed),
            lookups,
            hits,
            misses: lookups.saturating_sub(hits),
            inserts_read: c.inserts_read.get(),
            inserts_evict: c.inserts_evict.get(),
            inserts_write: c.inserts_write.get(),
            inserts_checkpoint: c.inserts_checkpoint.get(),
            already_present: c.already_present.get(),
            removals: c.removals.get(),
            taken: c.taken.get(),
            evictions: c.evictions.get(),
            eviction_passes: c.eviction_passes.get(),
            bypassed_admissions: c.bypassed_admissions.get(),
            bypassed_evictions: c.bypassed_evictions.get(),
            bypass_episodes,
            bypass_seconds,
            bypass_now,
            skipped_full: c.skipped_full.get(),
            skipped_size: c.skipped_size.get(),
            skipped_source: c.skipped_source.get(),
            bytes_written: c.bytes_written.get(),
            bytes_read: c.bytes_read.get(),
        }
    }

    /// The tier in one line, for reports: its size, backing, bypass and emulation.
    pub fn describe(&self) -> String {
        let inner = &*self.inner;
        let bypass = if inner.options.overhead_bypass {
            format!("overhead bypass at {:.0}%", inner.options.max_overhead * 100.0)
        } else {
            "no overhead bypass".into()
        };
        let emulation =
            inner.emulator.as_ref().map_or(String::new(), |e| format!(", {}", e.tier().describe()));
        format!(
            "tier of {} MiB on {}, {bypass}{emulation}",
            inner.region.len() >> 20,
            inner.region.description()
        )
    }

    /// Stops the eviction thread (also done on drop).
    pub fn close(&self) {
        *lock(&self.inner.stop) = true;
        self.inner.wake.notify_all();
        if let Some(handle) = lock(&self.evictor).take() {
            // A panicked eviction thread has nothing to clean up.
            let _ = handle.join();
        }
    }
}

impl Drop for TierCache {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for TierCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Inner {
    fn bucket(&self, key: TierKey) -> &Bucket {
        &self.buckets[(mix(key) & self.mask) as usize]
    }

    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Overhead Bypass: true while (inserts + removals + evictions) / lookups is over the
    /// threshold, or nothing was looked up yet (NVCache's rule); never with the bypass off.
    fn overhead_high(&self) -> bool {
        if !self.options.overhead_bypass {
            return false;
        }
        let lookups = self.counters.lookups.get();
        let churn = self.counters.churn();
        let high = lookups == 0 || churn as f64 > self.options.max_overhead * lookups as f64;
        self.bypass.observe(high, self.now_ns());
        high
    }

    /// Gives an entry's extent back; the entry is out of its bucket already.
    fn release(&self, entry: &Entry) {
        let units = units_for(entry.len as u64);
        lock(&self.extents).free(entry.unit, units);
        self.used_units.fetch_sub(units, Ordering::Relaxed);
        self.blocks.fetch_sub(1, Ordering::Relaxed);
    }

    fn eviction_loop(&self) {
        let mut stop = lock(&self.stop);
        // A close that came before this thread first took the lock is seen here.
        while !*stop {
            let (guard, _) = self
                .wake
                .wait_timeout(stop, self.options.eviction_interval)
                .unwrap_or_else(PoisonError::into_inner);
            stop = guard;
            if *stop {
                return;
            }
            drop(stop);
            self.evict_pass();
            stop = lock(&self.stop);
        }
    }

    /// Once the blocks fill `full_target` of the tier, and unless Overhead Bypass is in
    /// force, evicts the blocks with the lowest priority until they fill `full_target -
    /// evict_share`.
    fn evict_pass(&self) -> u64 {
        // Blocks used from now on are younger than every block used before.
        self.pass.fetch_add(1, Ordering::Relaxed);
        self.counters.eviction_passes.add(1);
        let used = self.used_units.load(Ordering::Relaxed);
        if (used as f64) < self.options.full_target * self.total_units as f64 {
            return 0;
        }
        if self.overhead_high() {
            self.counters.bypassed_evictions.add(1);
            return 0;
        }
        let goal = ((self.options.full_target - self.options.evict_share) * self.total_units as f64)
            as u64;
        let mut candidates: Vec<(u64, TierKey, u64, u64)> = Vec::new();
        for bucket in self.buckets.iter() {
            for entry in lock(bucket).iter() {
                let units = units_for(entry.len as u64);
                candidates.push((entry.priority(), entry.key, entry.unit, units));
            }
        }
        candidates.sort_unstable_by_key(|&(priority, key, _, _)| (priority, key.version, key.id));
        let mut to_free = used.saturating_sub(goal);
        let mut evicted = 0;
        for (_, key, unit, units) in candidates {
            if to_free == 0 {
                break;
            }
            let removed = {
                let mut bucket = lock(self.bucket(key));
                // The same admission of the block (it may have been invalidated meanwhile).
                let at = bucket.iter().position(|e| e.key == key && e.unit == unit);
                at.map(|at| bucket.swap_remove(at))
            };
            if let Some(entry) = removed {
                self.release(&entry);
                self.counters.evictions.add(1);
                to_free = to_free.saturating_sub(units);
                evicted += 1;
            }
        }
        evicted
    }
}
