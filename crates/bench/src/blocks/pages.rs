//! The page-update workload: what a buffer pool's checkpoints cost on the log store's atomic
//! groups and on the doublewrite baseline, and the sustained-overwrite test of the log store's
//! space bound.
//!
//! **Page updates.** Per page size, each mode gets a fresh store in its own directory (A:
//! `atomic-group`, a `LogStore` with default options; B: `doublewrite`, a `DoublewriteStore`
//! whose slots are one page). The data set is loaded in groups of `load_group_pages` (not
//! measured). The measured phase then repeats: pick a page (uniform, or scrambled Zipfian),
//! give it new content, mark it dirty (the latest content wins); after every
//! `checkpoint_every` updates, write the whole dirty set in page order as atomic groups of at
//! most `group_pages_max` pages, and clear it. When the run ends (a time limit or a number of
//! updates) the dirty set is flushed once more, inside the measured phase.
//!
//! The pages live in memory as a buffer pool holds them (`PagePool`: the whole data set, so
//! the bench needs that much memory): a page's content is its number and the update counter
//! of its last update (its first 16 bytes), then a pseudo-random fill made once. A flush
//! writes the pages from there, so both stores write from the caller's memory, as under a
//! buffer pool, and the time measured is theirs, not that of making up contents. Both modes
//! draw the same pages from the same seed, so they flush exactly the same groups for as many
//! updates as they both ran (all of them under `RunLength::Updates`).
//!
//! Each payload is the page size minus the 64-byte block header, so an encoded block is
//! exactly one page in both stores.
//!
//! **Sustained overwrite.** Uniform random rewrites of `overwrite_group_pages` distinct pages
//! per group on a `LogStore` with default options (background cleaning on) for a given time,
//! sampling `stats()` once a second: the maximum and final `file_bytes / live_bytes`.
//!
//! Must never: count a page as written before its group returned `Ok`, or compare the two
//! modes on different update streams.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::machine::{device_writes, process_cpu_seconds, process_write_bytes};
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use tierkv_blockstore::format::BLOCK_HEADER_BYTES;
use tierkv_blockstore::{
    BlockId, BlockStore, DoublewriteOptions, DoublewriteStore, LogStore, RecoveryReport,
    StoreOptions, StoreStats,
};
use tierkv_io::Storage;

use super::scramble::PageChooser;
use super::{finite, one, remove_tree, BlocksBenchConfig, RunLength};
use crate::device::BenchError;
use crate::summary::median_of_present;

/// The note the report carries about how the ratios are formed.
pub const PAGE_UPDATE_NOTE: &str = "page update: both modes replay the same update stream (one \
    seed), so they flush the same groups for as many updates as both made (all of them with \
    --updates; with --duration the faster mode makes more); the byte ratios compare bytes per \
    page flushed, which with --updates equals the ratio of raw bytes; \
    /proc/self/io write_bytes is charged in whole pages when the process dirties them and \
    includes the log store's background cleaning";

/// Mixed into the seed of the overwrite test, so its stream differs from the page updates'.
const OVERWRITE_SEED_SALT: u64 = 0x6f76_6572_7772_6974;

/// The two stores the workload compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `LogStore`: each group appended and made durable with one fdatasync.
    AtomicGroup,
    /// `DoublewriteStore`: each group to the doublewrite file, sync, in place, sync.
    Doublewrite,
}

impl Mode {
    /// The name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Mode::AtomicGroup => "atomic-group",
            Mode::Doublewrite => "doublewrite",
        }
    }
}

/// One measured page-update run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PageUpdatePoint {
    /// Wall time of reopening the store after the run (recovery), milliseconds.
    pub recovery_ms: f64,
    /// Log bytes recovery scanned after the map checkpoint (log store; 0 for doublewrite).
    pub recovery_bytes_scanned: u64,
    /// Segments it scanned.
    pub recovery_segments_scanned: u64,
    /// Page size, bytes (one encoded block).
    pub page_bytes: usize,
    /// `atomic-group` or `doublewrite`.
    pub mode: String,
    /// Position in the alternation for this page size and trial (0: ran first).
    pub order: usize,
    /// The trial, from 0.
    #[serde(default)]
    pub trial: usize,
    /// How pages were picked.
    pub distribution: String,
    /// Pages in the data set.
    pub pages_total: u64,
    /// Wall time of the (unmeasured) load, seconds.
    pub load_s: f64,
    /// Updates made in the measured phase.
    pub updates: u64,
    /// Pages written by the flushes (each dirty page once per flush).
    pub pages_flushed: u64,
    /// Atomic groups written.
    pub groups: u64,
    /// Flushes of the dirty set (the last one included).
    pub flushes: u64,
    /// Wall time of the measured phase, seconds.
    pub elapsed_s: f64,
    /// CPU seconds of the process (all threads, user and system) in the measured phase.
    #[serde(default)]
    pub cpu_s: f64,
    /// Updates per second of the measured phase.
    pub updates_per_s: f64,
    /// Pages flushed per second of the measured phase.
    pub pages_per_s: f64,
    /// Bytes written to the device in the measured phase, by the store's own counter.
    pub device_bytes_written: u64,
    /// `device_bytes_written / pages_flushed`.
    pub device_bytes_per_page: f64,
    /// Log store: bytes written by cleaning copies.
    pub relocated_bytes: u64,
    /// Log store: bytes written by map checkpoints.
    pub checkpoint_bytes: u64,
    /// Doublewrite store: bytes written to the doublewrite file.
    pub doublewrite_bytes: u64,
    /// Doublewrite store: bytes written in place.
    pub in_place_bytes: u64,
    /// fdatasync and fsync calls of the store.
    pub syncs: u64,
    /// `write_bytes` of `/proc/self/io` over the measured phase; `None` where unreadable.
    pub proc_write_bytes: Option<u64>,
    /// `proc_write_bytes / pages_flushed`.
    pub proc_write_bytes_per_page: Option<f64>,
    /// Bytes the block device under the path wrote over the measured phase (sectors
    /// written in sysfs × 512: journal included, and any other process's writes to that
    /// device); `None` on a memory file system or where sysfs is unreadable.
    pub block_device_write_bytes: Option<u64>,
    /// `block_device_write_bytes / pages_flushed`.
    pub block_device_write_bytes_per_page: Option<f64>,
    /// Write requests the block device completed over the measured phase (after the block
    /// layer merged adjacent writes), from the same sysfs file.
    #[serde(default)]
    pub block_device_write_requests: Option<u64>,
    /// `block_device_write_requests / pages_flushed`.
    #[serde(default)]
    pub block_device_write_requests_per_page: Option<f64>,
    /// Log store: blocks written into reused space of older segments.
    #[serde(default)]
    pub reused_blocks: u64,
    /// Log store: the writes they took (adjacent blocks of a group are one write).
    #[serde(default)]
    pub reused_runs: u64,
    /// Live bytes at the end.
    pub live_bytes: u64,
    /// File bytes at the end.
    pub file_bytes: u64,
    /// `file_bytes / live_bytes` at the end.
    pub space_amplification: f64,
}

/// Atomic group ÷ doublewrite for one page size: each ratio is the median of the trials'
/// ratios (each trial runs both modes back to back).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PageUpdateRatio {
    /// Page size.
    pub page_bytes: usize,
    /// Trials the medians are over.
    #[serde(default = "one")]
    pub trials: usize,
    /// Each trial's pages/s ratio, in trial order.
    #[serde(default)]
    pub trial_pages_per_s_ratios: Vec<Option<f64>>,
    /// Each trial's device-bytes ratio (store counters), in trial order.
    #[serde(default)]
    pub trial_device_bytes_ratios: Vec<Option<f64>>,
    /// Median pages/s of the atomic-group runs.
    #[serde(default)]
    pub atomic_pages_per_s_median: f64,
    /// Median pages/s of the doublewrite runs.
    #[serde(default)]
    pub doublewrite_pages_per_s_median: f64,
    /// Device bytes per page flushed (store counters), atomic ÷ doublewrite.
    pub device_bytes_ratio: Option<f64>,
    /// `/proc/self/io` write bytes per page flushed, atomic ÷ doublewrite; `None` when
    /// unreadable or zero (a memory file system).
    pub proc_write_bytes_ratio: Option<f64>,
    /// Block-device write bytes per page flushed, atomic ÷ doublewrite; `None` when
    /// unreadable or zero.
    pub block_device_write_bytes_ratio: Option<f64>,
    /// Pages flushed per second, atomic ÷ doublewrite.
    pub pages_per_s_ratio: Option<f64>,
    /// In every trial both runs flushed the same pages in the same groups.
    pub same_groups: bool,
}

/// One sample of the overwrite test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpaceSample {
    /// Seconds since the overwrites began.
    pub elapsed_s: f64,
    /// Bytes of the store's files.
    pub file_bytes: u64,
    /// Bytes of its live blocks.
    pub live_bytes: u64,
    /// `file_bytes / live_bytes`.
    pub space_amplification: f64,
    /// Device bytes written since the overwrites began.
    pub device_bytes_written: u64,
}

/// The sustained-overwrite test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverwriteReport {
    /// Page size.
    pub page_bytes: usize,
    /// Pages in the data set.
    pub pages_total: u64,
    /// Pages per group.
    pub group_pages: usize,
    /// Wall time of the overwrites, seconds.
    pub elapsed_s: f64,
    /// Groups written.
    pub groups: u64,
    /// Pages written.
    pub pages_written: u64,
    /// Pages per second.
    pub pages_per_s: f64,
    /// Largest sampled space amplification.
    pub space_amplification_max: f64,
    /// Space amplification at the end.
    pub space_amplification_final: f64,
    /// Device bytes written (store counter) over the overwrites.
    pub device_bytes_written: u64,
    /// Of which cleaning copies.
    pub relocated_bytes: u64,
    /// Segments deleted by cleaning.
    pub segments_cleaned: u64,
    /// An error of the background cleaner, if it met one.
    pub background_error: Option<String>,
    /// One sample a second.
    pub samples: Vec<SpaceSample>,
}

/// Reopens a closed store of `mode` in `dir` and returns what its recovery found and took:
/// for the log store, the map checkpoint and the scan of the log after it.
fn reopen_report(
    storage: &Storage,
    mode: Mode,
    dir: &Path,
    page_bytes: usize,
) -> Result<RecoveryReport, BenchError> {
    let report = match mode {
        Mode::AtomicGroup => {
            let store = LogStore::open(storage, dir, StoreOptions::default())?;
            let report = store.recovery_report().clone();
            store.close()?;
            report
        }
        Mode::Doublewrite => {
            let options = DoublewriteOptions {
                slot_bytes: page_bytes as u64,
                ..DoublewriteOptions::default()
            };
            let store = DoublewriteStore::open(storage, dir, options)?;
            let report = store.recovery_report().clone();
            store.close()?;
            report
        }
    };
    Ok(report)
}

fn open_store(
    storage: &Storage,
    mode: Mode,
    dir: &Path,
    page_bytes: usize,
) -> Result<Box<dyn BlockStore>, BenchError> {
    remove_tree(storage, dir)?;
    Ok(match mode {
        Mode::AtomicGroup => Box::new(LogStore::open(storage, dir, StoreOptions::default())?),
        Mode::Doublewrite => {
            let options = DoublewriteOptions {
                slot_bytes: page_bytes as u64,
                ..DoublewriteOptions::default()
            };
            Box::new(DoublewriteStore::open(storage, dir, options)?)
        }
    })
}

/// Fills a payload: page number, update counter, then a splitmix64 stream of both.
fn fill_page(payload: &mut [u8], page: u64, counter: u64) {
    debug_assert!(payload.len() >= 16 && payload.len().is_multiple_of(8));
    let mut state = page.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ counter.rotate_left(32);
    for (index, word) in payload.chunks_exact_mut(8).enumerate() {
        let value = match index {
            0 => page,
            1 => counter,
            _ => {
                state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                z ^ (z >> 31)
            }
        };
        word.copy_from_slice(&value.to_le_bytes());
    }
}

/// The data set as a buffer pool holds it: every page's payload in memory (`fill_page` with
/// counter 0 at first). An update stores its counter in the page (bytes 8..16) and a flush
/// writes the pages from here, as a buffer pool's checkpoint would, so the time measured is
/// the stores' and not that of making up page contents.
struct PagePool {
    bytes: Vec<u8>,
    payload_bytes: usize,
}

impl PagePool {
    fn new(pages_total: u64, payload_bytes: usize) -> PagePool {
        let mut bytes = vec![0u8; pages_total as usize * payload_bytes];
        for (page, payload) in (0u64..).zip(bytes.chunks_exact_mut(payload_bytes)) {
            fill_page(payload, page, 0);
        }
        PagePool { bytes, payload_bytes }
    }

    fn range(&self, page: u64) -> std::ops::Range<usize> {
        let start = page as usize * self.payload_bytes;
        start..start + self.payload_bytes
    }

    /// Records update `counter` in `page`.
    fn update(&mut self, page: u64, counter: u64) {
        let start = self.range(page).start;
        self.bytes[start + 8..start + 16].copy_from_slice(&counter.to_le_bytes());
    }

    fn page(&self, page: u64) -> &[u8] {
        &self.bytes[self.range(page)]
    }
}

/// Writes `pages` (page, counter), in order, as groups of at most `group_max`, after
/// recording each counter in the pool; returns the number of groups.
fn write_pages(
    store: &dyn BlockStore,
    pool: &mut PagePool,
    pages: &[(u64, u64)],
    group_max: usize,
) -> Result<u64, BenchError> {
    let mut groups = 0u64;
    for chunk in pages.chunks(group_max) {
        for &(page, counter) in chunk {
            pool.update(page, counter);
        }
        let group: Vec<(BlockId, &[u8])> =
            chunk.iter().map(|&(page, _)| (BlockId(page), pool.page(page))).collect();
        store.write_group(&group)?;
        groups += 1;
    }
    Ok(groups)
}

/// Loads every page of the pool with counter 0; returns the wall time.
fn load(
    store: &dyn BlockStore,
    pool: &mut PagePool,
    pages_total: u64,
    group_pages: usize,
) -> Result<f64, BenchError> {
    let started = Instant::now();
    let mut batch = Vec::with_capacity(group_pages);
    let mut first = 0u64;
    while first < pages_total {
        let end = (first + group_pages as u64).min(pages_total);
        batch.clear();
        batch.extend((first..end).map(|page| (page, 0u64)));
        write_pages(store, pool, &batch, group_pages)?;
        first = end;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// The page chooser of `config` over `pages_total` pages (its theta checked by `validate`).
fn chooser(config: &BlocksBenchConfig, pages_total: u64) -> PageChooser {
    PageChooser::new(config.distribution, pages_total, config.zipf_theta)
}

/// The difference of two readings of a counter (write bytes, write requests), when both exist.
fn counter_delta(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    Some(after?.saturating_sub(before?))
}

/// One mode's run for one page size.
fn run_mode(
    storage: &Storage,
    config: &BlocksBenchConfig,
    scratch: &Path,
    mode: Mode,
    order: usize,
    page_bytes: usize,
    chooser: &PageChooser,
) -> Result<PageUpdatePoint, BenchError> {
    let pages_total = config.data_set_bytes / page_bytes as u64;
    let payload_bytes = page_bytes - BLOCK_HEADER_BYTES;
    let dir = scratch.join(format!("pages-{}-{page_bytes}", mode.name()));
    let store = open_store(storage, mode, &dir, page_bytes)?;
    let mut pool = PagePool::new(pages_total, payload_bytes);
    let load_s = load(&*store, &mut pool, pages_total, config.load_group_pages)?;

    // The same stream for both modes: the seed depends on the page size only.
    let mut rng = fastrand::Rng::with_seed(config.seed ^ (page_bytes as u64).rotate_left(40));
    let mut chooser = chooser.clone();
    let mut dirty: HashMap<u64, u64> = HashMap::with_capacity(config.checkpoint_every as usize);
    let mut flush_list: Vec<(u64, u64)> = Vec::with_capacity(config.checkpoint_every as usize);
    let (mut updates, mut pages_flushed, mut groups, mut flushes) = (0u64, 0u64, 0u64, 0u64);
    let mut flush = |dirty: &mut HashMap<u64, u64>| -> Result<(), BenchError> {
        if dirty.is_empty() {
            return Ok(());
        }
        flush_list.clear();
        flush_list.extend(dirty.drain());
        flush_list.sort_unstable();
        groups += write_pages(&*store, &mut pool, &flush_list, config.group_pages_max)?;
        pages_flushed += flush_list.len() as u64;
        flushes += 1;
        Ok(())
    };

    let before = store.stats();
    let proc_before = process_write_bytes();
    let device_before = device_writes(&dir);
    let cpu_before = process_cpu_seconds();
    let started = Instant::now();
    let deadline = match config.run_length {
        RunLength::Seconds(seconds) => Some(started + Duration::from_secs_f64(seconds)),
        RunLength::Updates(_) => None,
    };
    loop {
        let done = match (config.run_length, deadline) {
            (RunLength::Updates(limit), _) => updates >= limit,
            (_, Some(deadline)) => Instant::now() >= deadline,
            (_, None) => true,
        };
        if done {
            break;
        }
        let page = chooser.next(&mut rng);
        updates += 1;
        dirty.insert(page, updates);
        if updates.is_multiple_of(config.checkpoint_every) {
            flush(&mut dirty)?;
        }
    }
    flush(&mut dirty)?;
    let elapsed_s = started.elapsed().as_secs_f64();
    let cpu_s = process_cpu_seconds() - cpu_before;
    let proc_after = process_write_bytes();
    let device_after = device_writes(&dir);
    let after = store.stats();
    store.close()?;
    drop(store);
    let recovery = reopen_report(storage, mode, &dir, page_bytes)?;
    remove_tree(storage, &dir)?;

    let delta = |f: fn(&StoreStats) -> u64| f(&after).saturating_sub(f(&before));
    let device_bytes_written = delta(|s| s.device_bytes_written);
    let proc_write_bytes = counter_delta(proc_before, proc_after);
    let block_device_write_bytes =
        counter_delta(device_before.map(|d| d.bytes), device_after.map(|d| d.bytes));
    let block_device_write_requests =
        counter_delta(device_before.map(|d| d.requests), device_after.map(|d| d.requests));
    let per_page = |bytes: u64| bytes as f64 / pages_flushed.max(1) as f64;
    Ok(PageUpdatePoint {
        page_bytes,
        mode: mode.name().to_string(),
        order,
        trial: 0,
        distribution: config.distribution.name().to_string(),
        pages_total,
        load_s,
        updates,
        pages_flushed,
        groups,
        flushes,
        elapsed_s,
        cpu_s,
        updates_per_s: updates as f64 / elapsed_s,
        pages_per_s: pages_flushed as f64 / elapsed_s,
        device_bytes_written,
        device_bytes_per_page: per_page(device_bytes_written),
        relocated_bytes: delta(|s| s.relocated_bytes),
        checkpoint_bytes: delta(|s| s.checkpoint_bytes),
        doublewrite_bytes: delta(|s| s.doublewrite_bytes),
        in_place_bytes: delta(|s| s.in_place_bytes),
        syncs: delta(|s| s.syncs),
        proc_write_bytes,
        proc_write_bytes_per_page: proc_write_bytes.map(per_page),
        block_device_write_bytes,
        block_device_write_bytes_per_page: block_device_write_bytes.map(per_page),
        block_device_write_requests,
        block_device_write_requests_per_page: block_device_write_requests.map(per_page),
        reused_blocks: delta(|s| s.reused_blocks),
        reused_runs: delta(|s| s.reused_runs),
        live_bytes: after.live_bytes,
        file_bytes: after.file_bytes,
        space_amplification: after.space_amplification(),
        recovery_ms: recovery.elapsed.as_secs_f64() * 1e3,
        recovery_bytes_scanned: recovery.bytes_scanned,
        recovery_segments_scanned: recovery.segments_scanned,
    })
}

/// `a / b` when both are positive and finite.
fn ratio(a: f64, b: f64) -> Option<f64> {
    if a > 0.0 && b > 0.0 {
        finite(a / b)
    } else {
        None
    }
}

/// The ratios of the trials of one page size: `pairs` holds (atomic, doublewrite) per trial.
fn compare(pairs: &[(&PageUpdatePoint, &PageUpdatePoint)]) -> PageUpdateRatio {
    let both = |a: Option<f64>, d: Option<f64>| match (a, d) {
        (Some(a), Some(d)) => ratio(a, d),
        _ => None,
    };
    let pages_per_s: Vec<Option<f64>> =
        pairs.iter().map(|(a, d)| ratio(a.pages_per_s, d.pages_per_s)).collect();
    let device_bytes: Vec<Option<f64>> = pairs
        .iter()
        .map(|(a, d)| ratio(a.device_bytes_per_page, d.device_bytes_per_page))
        .collect();
    PageUpdateRatio {
        page_bytes: pairs.first().map_or(0, |(a, _)| a.page_bytes),
        trials: pairs.len(),
        trial_pages_per_s_ratios: pages_per_s.clone(),
        trial_device_bytes_ratios: device_bytes.clone(),
        atomic_pages_per_s_median: median_of_present(
            pairs.iter().map(|(a, _)| Some(a.pages_per_s)),
        )
        .unwrap_or(0.0),
        doublewrite_pages_per_s_median: median_of_present(
            pairs.iter().map(|(_, d)| Some(d.pages_per_s)),
        )
        .unwrap_or(0.0),
        device_bytes_ratio: median_of_present(device_bytes),
        proc_write_bytes_ratio: median_of_present(
            pairs
                .iter()
                .map(|(a, d)| both(a.proc_write_bytes_per_page, d.proc_write_bytes_per_page)),
        ),
        block_device_write_bytes_ratio: median_of_present(pairs.iter().map(|(a, d)| {
            both(a.block_device_write_bytes_per_page, d.block_device_write_bytes_per_page)
        })),
        pages_per_s_ratio: median_of_present(pages_per_s),
        same_groups: pairs.iter().all(|(a, d)| a.updates == d.updates),
    }
}

/// Runs both modes for every page size, `trials` times each, alternately: which mode goes
/// first swaps from one trial to the next, so that neither always inherits the other's
/// dirty page cache.
pub fn run(
    storage: &Storage,
    config: &BlocksBenchConfig,
    scratch: &Path,
    progress: &ProgressBar,
) -> Result<(Vec<PageUpdatePoint>, Vec<PageUpdateRatio>), BenchError> {
    let mut points = Vec::new();
    let mut ratios = Vec::new();
    for &page_bytes in &config.page_sizes {
        let pages_total = config.data_set_bytes / page_bytes as u64;
        let chooser = chooser(config, pages_total);
        let mut trials = Vec::with_capacity(config.trials);
        for trial in 0..config.trials {
            let mut modes = [Mode::AtomicGroup, Mode::Doublewrite];
            if trial % 2 == 1 {
                modes.reverse();
            }
            let mut pair = Vec::with_capacity(2);
            for (order, mode) in modes.into_iter().enumerate() {
                progress.set_message(format!(
                    "page updates, {} KiB pages, trial {} of {}, {}",
                    page_bytes / 1024,
                    trial + 1,
                    config.trials,
                    mode.name()
                ));
                let mut point =
                    run_mode(storage, config, scratch, mode, order, page_bytes, &chooser)?;
                point.trial = trial;
                pair.push(point);
                progress.inc(1);
            }
            if trial % 2 == 1 {
                pair.reverse();
            }
            trials.push(pair);
        }
        let pairs: Vec<(&PageUpdatePoint, &PageUpdatePoint)> =
            trials.iter().map(|pair| (&pair[0], &pair[1])).collect();
        ratios.push(compare(&pairs));
        points.extend(trials.into_iter().flatten());
    }
    Ok((points, ratios))
}

/// `count` distinct pages below `pages_total` (`count <= pages_total`).
fn distinct_pages(rng: &mut fastrand::Rng, pages_total: u64, count: usize, out: &mut Vec<u64>) {
    debug_assert!(count as u64 <= pages_total);
    out.clear();
    if pages_total <= 4 * count as u64 {
        let mut all: Vec<u64> = (0..pages_total).collect();
        rng.shuffle(&mut all);
        out.extend_from_slice(&all[..count]);
        return;
    }
    // pages_total > 4 × count: fewer than 1.34 draws per page on average.
    let mut draws = 0usize;
    while out.len() < count {
        draws += 1;
        assert!(draws < 1_000 * count, "invariant: rejection sampling ends");
        let page = rng.u64(0..pages_total);
        if !out.contains(&page) {
            out.push(page);
        }
    }
}

/// The sustained-overwrite test.
pub fn run_overwrite(
    storage: &Storage,
    config: &BlocksBenchConfig,
    scratch: &Path,
    length: Duration,
    progress: &ProgressBar,
) -> Result<OverwriteReport, BenchError> {
    progress.set_message(format!("sustained overwrite, {:.0} s", length.as_secs_f64()));
    let page_bytes = config.overwrite_page_bytes;
    let payload_bytes = page_bytes - BLOCK_HEADER_BYTES;
    let pages_total = config.data_set_bytes / page_bytes as u64;
    let group_pages = config.overwrite_group_pages.min(pages_total as usize).max(1);
    let dir = scratch.join("overwrite");
    remove_tree(storage, &dir)?;
    let store = LogStore::open(storage, &dir, StoreOptions::default())?;
    let mut pool = PagePool::new(pages_total, payload_bytes);
    load(&store, &mut pool, pages_total, group_pages)?;

    let mut rng = fastrand::Rng::with_seed(config.seed ^ OVERWRITE_SEED_SALT);
    let mut picked = Vec::with_capacity(group_pages);
    let mut batch = Vec::with_capacity(group_pages);
    let before = store.stats();
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut next_sample = Duration::from_secs(1);
    let (mut groups, mut counter) = (0u64, 0u64);
    let sample = |store: &LogStore, elapsed: Duration| {
        let stats = store.stats();
        SpaceSample {
            elapsed_s: elapsed.as_secs_f64(),
            file_bytes: stats.file_bytes,
            live_bytes: stats.live_bytes,
            space_amplification: stats.space_amplification(),
            device_bytes_written: stats
                .device_bytes_written
                .saturating_sub(before.device_bytes_written),
        }
    };
    loop {
        let elapsed = started.elapsed();
        if elapsed >= next_sample {
            samples.push(sample(&store, elapsed));
            next_sample += Duration::from_secs(1);
        }
        if elapsed >= length {
            break;
        }
        distinct_pages(&mut rng, pages_total, group_pages, &mut picked);
        batch.clear();
        for &page in &picked {
            counter += 1;
            batch.push((page, counter));
        }
        batch.sort_unstable();
        write_pages(&store, &mut pool, &batch, group_pages)?;
        groups += 1;
    }
    let elapsed = started.elapsed();
    let last = sample(&store, elapsed);
    samples.push(last.clone());
    let after = store.stats();
    let background_error = store.background_error();
    store.close()?;
    drop(store);
    remove_tree(storage, &dir)?;
    let space_amplification_max = samples.iter().map(|s| s.space_amplification).fold(0.0, f64::max);
    let pages_written = groups * group_pages as u64;
    Ok(OverwriteReport {
        page_bytes,
        pages_total,
        group_pages,
        elapsed_s: elapsed.as_secs_f64(),
        groups,
        pages_written,
        pages_per_s: pages_written as f64 / elapsed.as_secs_f64(),
        space_amplification_max,
        space_amplification_final: last.space_amplification,
        device_bytes_written: after.device_bytes_written - before.device_bytes_written,
        relocated_bytes: after.relocated_bytes - before.relocated_bytes,
        segments_cleaned: after.segments_cleaned - before.segments_cleaned,
        background_error,
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_content_carries_page_and_counter() {
        let mut a = vec![0u8; 4096 - 64];
        let mut b = vec![0u8; 4096 - 64];
        fill_page(&mut a, 42, 7);
        fill_page(&mut b, 42, 8);
        assert_eq!(u64::from_le_bytes(a[..8].try_into().unwrap()), 42);
        assert_eq!(u64::from_le_bytes(a[8..16].try_into().unwrap()), 7);
        assert_ne!(a[16..], b[16..]);
        let mut c = vec![0u8; 4096 - 64];
        fill_page(&mut c, 42, 7);
        assert_eq!(a, c);
    }

    #[test]
    fn the_pool_records_updates_in_the_page_and_keeps_the_rest() {
        let payload = 4096 - 64;
        let mut pool = PagePool::new(3, payload);
        let mut fresh = vec![0u8; payload];
        fill_page(&mut fresh, 1, 0);
        assert_eq!(pool.page(1), &fresh[..]);
        pool.update(1, 77);
        assert_eq!(u64::from_le_bytes(pool.page(1)[8..16].try_into().unwrap()), 77);
        assert_eq!(pool.page(1)[..8], fresh[..8]);
        assert_eq!(pool.page(1)[16..], fresh[16..]);
        let mut other = vec![0u8; payload];
        fill_page(&mut other, 2, 0);
        assert_eq!(pool.page(2), &other[..], "an update touches its page only");
    }

    #[test]
    fn distinct_pages_are_distinct_and_in_range() {
        let mut rng = fastrand::Rng::with_seed(9);
        let mut out = Vec::new();
        for (total, count) in [(64u64, 64usize), (100, 64), (10_000, 64), (1, 1)] {
            distinct_pages(&mut rng, total, count, &mut out);
            let mut sorted = out.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), count);
            assert!(out.iter().all(|&page| page < total));
        }
    }

    #[test]
    fn ratios_of_nothing_are_none() {
        assert_eq!(ratio(1.0, 0.0), None);
        assert_eq!(ratio(0.0, 1.0), None);
        assert_eq!(ratio(1.0, 2.0), Some(0.5));
        assert_eq!(counter_delta(Some(5), Some(9)), Some(4));
        assert_eq!(counter_delta(None, Some(9)), None);
    }
}
