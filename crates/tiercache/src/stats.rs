//! The tier's counters: striped so that many readers counting lookups do not contend on one
//! cache line, summed when read.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

const STRIPES: usize = 16;

#[repr(align(128))]
#[derive(Default)]
struct Padded(AtomicU64);

/// A counter spread over `STRIPES` cache lines; each thread adds to its own.
#[derive(Default)]
pub(crate) struct Striped([Padded; STRIPES]);

static NEXT_STRIPE: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static STRIPE: usize = (NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) as usize) % STRIPES;
}

impl Striped {
    pub(crate) fn add(&self, n: u64) {
        let stripe = STRIPE.with(|s| *s);
        self.0[stripe].0.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.iter().map(|p| p.0.load(Ordering::Relaxed)).sum()
    }
}

/// Every counter of a tier.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) lookups: Striped,
    pub(crate) hits: Striped,
    pub(crate) bytes_read: Striped,
    pub(crate) inserts_read: Striped,
    pub(crate) inserts_evict: Striped,
    pub(crate) inserts_write: Striped,
    pub(crate) inserts_checkpoint: Striped,
    pub(crate) already_present: Striped,
    pub(crate) bytes_written: Striped,
    pub(crate) removals: Striped,
    pub(crate) taken: Striped,
    pub(crate) evictions: Striped,
    pub(crate) eviction_passes: Striped,
    pub(crate) bypassed_admissions: Striped,
    pub(crate) bypassed_evictions: Striped,
    pub(crate) skipped_full: Striped,
    pub(crate) skipped_size: Striped,
    pub(crate) skipped_source: Striped,
}

impl Counters {
    /// Inserts of every kind.
    pub(crate) fn inserts(&self) -> u64 {
        self.inserts_read.get()
            + self.inserts_evict.get()
            + self.inserts_write.get()
            + self.inserts_checkpoint.get()
    }

    /// Overhead Bypass's numerator: what changed the tier's contents (inserts, removals and
    /// evictions; NVCache counts an eviction as a removal).
    pub(crate) fn churn(&self) -> u64 {
        self.inserts() + self.removals.get() + self.evictions.get()
    }
}

/// When Overhead Bypass was in force: episodes and their total time.
#[derive(Default)]
pub(crate) struct BypassClock {
    on: AtomicBool,
    since_ns: AtomicU64,
    total_ns: AtomicU64,
    episodes: AtomicU64,
}

impl BypassClock {
    /// Records the state found at `now_ns` (nanoseconds since the tier opened).
    pub(crate) fn observe(&self, high: bool, now_ns: u64) {
        if self.on.load(Ordering::Relaxed) != high
            && self.on.compare_exchange(!high, high, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            if high {
                self.since_ns.store(now_ns, Ordering::Relaxed);
                self.episodes.fetch_add(1, Ordering::Relaxed);
            } else {
                let since = self.since_ns.load(Ordering::Relaxed);
                self.total_ns.fetch_add(now_ns.saturating_sub(since), Ordering::Relaxed);
            }
        }
    }

    /// (in force now, episodes, seconds in force up to `now_ns`).
    pub(crate) fn read(&self, now_ns: u64) -> (bool, u64, f64) {
        let on = self.on.load(Ordering::Relaxed);
        let mut total = self.total_ns.load(Ordering::Relaxed);
        if on {
            total += now_ns.saturating_sub(self.since_ns.load(Ordering::Relaxed));
        }
        (on, self.episodes.load(Ordering::Relaxed), total as f64 / 1e9)
    }
}

/// What a tier has done since it opened.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TierStats {
    /// What backs the tier ("anonymous memory", or the file and its file system).
    pub backing: String,
    /// The slow-tier emulation in force, in words, if any.
    pub emulation: Option<String>,
    /// Whether Overhead Bypass is on, and its threshold.
    pub overhead_bypass: bool,
    /// (inserts + removals) / lookups above which admissions and evictions are skipped.
    pub max_overhead: f64,
    /// Bytes of the tier's memory.
    pub capacity_bytes: u64,
    /// Bytes its blocks take (in whole allocation units).
    pub used_bytes: u64,
    /// Blocks it holds.
    pub blocks: u64,
    /// Lookups, and of them hits and misses.
    pub lookups: u64,
    /// Lookups that found their block.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Blocks admitted after a device read.
    pub inserts_read: u64,
    /// Blocks admitted as the layer above's cache let them go (demotions).
    #[serde(default)]
    pub inserts_evict: u64,
    /// Blocks admitted as the layer above wrote them, outside a checkpoint.
    pub inserts_write: u64,
    /// Blocks admitted as a checkpoint wrote them.
    pub inserts_checkpoint: u64,
    /// Admissions of a block the tier already held.
    pub already_present: u64,
    /// Blocks removed because the block store freed or replaced them, or (with `exclusive`)
    /// because a hit took them out.
    pub removals: u64,
    /// Of those, hits that took their block out (`exclusive`).
    #[serde(default)]
    pub taken: u64,
    /// Blocks evicted to make room.
    pub evictions: u64,
    /// Times the eviction thread woke.
    pub eviction_passes: u64,
    /// Admissions skipped by Overhead Bypass.
    pub bypassed_admissions: u64,
    /// Eviction passes skipped by Overhead Bypass (the tier was full, churn was high).
    pub bypassed_evictions: u64,
    /// Times Overhead Bypass came into force.
    pub bypass_episodes: u64,
    /// Seconds it was in force, in all.
    pub bypass_seconds: f64,
    /// Whether it is in force now.
    pub bypass_now: bool,
    /// Admissions skipped for want of a free extent.
    pub skipped_full: u64,
    /// Admissions skipped because the block was empty or larger than a quarter of the tier.
    pub skipped_size: u64,
    /// Admissions skipped because their source's `cache_on_*` option is off.
    pub skipped_source: u64,
    /// Bytes copied into the tier.
    pub bytes_written: u64,
    /// Bytes copied out of it by hits.
    pub bytes_read: u64,
}

impl TierStats {
    /// Hits per lookup (0 without lookups).
    pub fn hit_ratio(&self) -> f64 {
        if self.lookups == 0 {
            0.0
        } else {
            self.hits as f64 / self.lookups as f64
        }
    }

    /// (inserts + removals + evictions) / lookups, Overhead Bypass's measure.
    pub fn overhead(&self) -> f64 {
        let churn = self.inserts_read
            + self.inserts_evict
            + self.inserts_write
            + self.inserts_checkpoint
            + self.removals
            + self.evictions;
        if self.lookups == 0 {
            0.0
        } else {
            churn as f64 / self.lookups as f64
        }
    }
}

impl std::fmt::Display for TierStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |b: u64| b as f64 / 1048576.0;
        writeln!(
            f,
            "tier: {:.1} of {:.1} MiB used by {} blocks, {}",
            mib(self.used_bytes),
            mib(self.capacity_bytes),
            self.blocks,
            self.backing
        )?;
        if let Some(emulation) = &self.emulation {
            writeln!(f, "tier emulation: {emulation}")?;
        }
        writeln!(
            f,
            "tier lookups: {} ({} hits, {} misses, hit ratio {:.3}), {:.1} MiB read",
            self.lookups,
            self.hits,
            self.misses,
            self.hit_ratio(),
            mib(self.bytes_read)
        )?;
        writeln!(
            f,
            "tier inserts: {} on read, {} on eviction from DRAM, {} on write, {} on checkpoint \
             ({} already present), {:.1} MiB written; {} removals ({} taken out by hits), {} \
             evictions in {} passes",
            self.inserts_read,
            self.inserts_evict,
            self.inserts_write,
            self.inserts_checkpoint,
            self.already_present,
            mib(self.bytes_written),
            self.removals,
            self.taken,
            self.evictions,
            self.eviction_passes
        )?;
        let bypass = if self.overhead_bypass {
            format!(
                "overhead bypass (max {:.0}%): overhead now {:.1}%, in force {} time(s) for \
                 {:.1} s{}; skipped {} admissions and {} eviction passes",
                self.max_overhead * 100.0,
                self.overhead() * 100.0,
                self.bypass_episodes,
                self.bypass_seconds,
                if self.bypass_now { " (in force now)" } else { "" },
                self.bypassed_admissions,
                self.bypassed_evictions
            )
        } else {
            format!("overhead bypass off (overhead now {:.1}%)", self.overhead() * 100.0)
        };
        writeln!(f, "tier {bypass}")?;
        write!(
            f,
            "tier admissions skipped: {} for want of space, {} by size, {} by source",
            self.skipped_full, self.skipped_size, self.skipped_source
        )
    }
}
