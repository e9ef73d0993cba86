//! The engine benchmark (`tierkv bench engine`): db_bench's workloads on a `tierkv::Db`.
//!
//! Keys are 16 bytes (the key number in decimal, zero-padded) and values `value_size` random
//! bytes (100 by default), as db_bench's defaults. The workloads, in the order given:
//!
//! - `fillseq`, `fillrandom`: a fresh store, `num` puts in key order or in random order
//!   (random keys in `0..num`, with repeats, as db_bench does);
//! - `overwrite`: `num` puts of random existing keys;
//! - `readrandom`: `reads` lookups of random keys in `0..num` (reports how many were found);
//! - `readseq`: one pass of an iterator over the whole store;
//! - `seekrandom`: `reads` iterators opened at random keys, each reading one entry;
//! - `readwhilewriting`: `reads` random lookups by one thread while another puts random
//!   keys without pause; the reader's rate is reported.
//!
//! Each workload reports ops/s, MB/s of keys and values, latency percentiles (HdrHistogram)
//! and what the engine did meanwhile (checkpoints, cache hit ratio). The store lives in a
//! fresh directory under `path`, removed at the end. Memory is sampled every 50 ms through
//! the run (`MemorySample`: resident, anonymous, the allocator's live bytes, and what the
//! engine counts in its page cache and its older values (undo) with pending overflow values), and the peak is set against the bound of
//! `cache_size` + 64 MiB.
//!
//! **Read methods** (`read_method_trials`): after the workloads, the store is reopened with
//! the `syscall` and the `mmap` read method in turn, alternating which goes first, and each
//! runs `reads` random lookups on a cold engine cache; the medians and their ratio are
//! reported. Seed 000 measures this case (data in the OS page cache, not in the engine's)
//! at +63% for mmap.
//!
//! Must never: count an operation that failed, or assert on speed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use tierkv::{Backend, Db, Durability, Options};
use tierkv_io::{file_system_info, Storage};

use crate::device::{BenchError, Machine};
use crate::machine::{machine_info, malloc_in_use_bytes, process_memory};
use crate::scratch::ScratchDir;
use crate::wal::{measure_sync_limit, SyncLimit, SyncLimitAround};

mod memory;
mod plot;
mod read_methods;

pub use memory::MemorySample;
use memory::MemoryTrace;
pub use plot::write_plots;
use read_methods::compare_read_methods;
pub use read_methods::{ReadMethodTrial, ReadMethodsReport};

/// Bytes of a key.
pub const KEY_BYTES: usize = 16;

/// Resident memory allowed beyond `cache_size` (issue 6's bound).
pub const MEMORY_HEADROOM_BYTES: usize = 64 << 20;

/// One of db_bench's workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Puts in key order into a fresh store.
    FillSeq,
    /// Puts in random order into a fresh store.
    FillRandom,
    /// Puts of random existing keys.
    Overwrite,
    /// Random lookups.
    ReadRandom,
    /// One pass of an iterator.
    ReadSeq,
    /// One pass of an iterator from the last key to the first.
    ReadReverse,
    /// Iterators opened at random keys.
    SeekRandom,
    /// Random lookups while another thread writes.
    ReadWhileWriting,
}

impl Workload {
    /// Every workload, in the order `--workloads all` runs them.
    pub const ALL: [Workload; 8] = [
        Workload::FillSeq,
        Workload::FillRandom,
        Workload::ReadRandom,
        Workload::ReadSeq,
        Workload::ReadReverse,
        Workload::SeekRandom,
        Workload::Overwrite,
        Workload::ReadWhileWriting,
    ];

    /// The quick run of the main job.
    pub const QUICK: [Workload; 4] =
        [Workload::FillRandom, Workload::ReadRandom, Workload::SeekRandom, Workload::Overwrite];

    /// db_bench's name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::FillSeq => "fillseq",
            Workload::FillRandom => "fillrandom",
            Workload::Overwrite => "overwrite",
            Workload::ReadRandom => "readrandom",
            Workload::ReadSeq => "readseq",
            Workload::ReadReverse => "readreverse",
            Workload::SeekRandom => "seekrandom",
            Workload::ReadWhileWriting => "readwhilewriting",
        }
    }
}

impl std::str::FromStr for Workload {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        Workload::ALL.into_iter().find(|w| w.name() == text).ok_or_else(|| {
            let names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
            format!("unknown workload {text:?}; expected one of {}", names.join(", "))
        })
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct EngineBenchConfig {
    /// Directory under which the store is made (a fresh subdirectory, removed after).
    pub path: PathBuf,
    /// Keys in the store (and puts of each fill and of overwrite).
    pub num: u64,
    /// Lookups of readrandom, seekrandom and readwhilewriting.
    pub reads: u64,
    /// Bytes of each value.
    pub value_size: usize,
    /// The workloads, in order.
    pub workloads: Vec<Workload>,
    /// Durability of every put.
    pub durability: Durability,
    /// The engine's options.
    pub options: Options,
    /// Seed of the key and value choices.
    pub seed: u64,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// Trials of the read-method comparison (0: none; see the module header).
    pub read_method_trials: usize,
    /// The process's allocator, as the binary names it.
    pub allocator: String,
    /// Bytes that allocator has handed out and not had back, for the memory trace (the
    /// default asks glibc's malloc).
    pub heap_in_use: fn() -> Option<u64>,
    /// The command line, for the report.
    pub command: String,
    /// How long the fdatasync limit is measured, before the workloads and after them, when
    /// the puts are `Sync` on the file log (zero: not measured).
    pub sync_limit_time: Duration,
}

impl EngineBenchConfig {
    /// The defaults: 1,000,000 keys, as many reads, 100-byte values, the quick workloads,
    /// the engine's default options and durability.
    pub fn new(path: impl AsRef<Path>) -> EngineBenchConfig {
        EngineBenchConfig {
            path: path.as_ref().to_path_buf(),
            num: 1_000_000,
            reads: 1_000_000,
            value_size: 100,
            workloads: Workload::QUICK.to_vec(),
            durability: Options::default().durability,
            options: Options::default(),
            seed: 0x7e57_0001,
            progress: true,
            read_method_trials: 0,
            allocator: "system".into(),
            heap_in_use: malloc_in_use_bytes,
            command: String::new(),
            sync_limit_time: Duration::from_secs(2),
        }
    }
}

/// One workload's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkloadResult {
    /// db_bench's name.
    pub workload: Workload,
    /// Operations completed.
    pub ops: u64,
    /// When it began, seconds since the run began (0 in reports older than the field).
    #[serde(default)]
    pub started_s: f64,
    /// Seconds they took.
    pub seconds: f64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// MB/s (10^6 bytes) of keys and values moved.
    pub mb_per_sec: f64,
    /// Latency percentiles, microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// The slowest.
    pub max_us: f64,
    /// Reads that found their key (reads only).
    pub found: Option<u64>,
    /// Writes by the background writer (readwhilewriting only).
    pub background_writes: Option<u64>,
    /// Checkpoints during the workload.
    pub checkpoints: u64,
    /// Page cache hits ÷ lookups during the workload.
    pub cache_hit_ratio: Option<f64>,
    /// Resident memory after the workload, bytes.
    pub rss_bytes: Option<u64>,
    /// A write workload's log syncs, with `Sync` puts on the file log.
    #[serde(default)]
    pub sync: Option<SyncShare>,
}

/// How close a workload of `Sync` puts came to the fdatasync limit.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SyncShare {
    /// The log's fdatasync rounds during the workload.
    pub rounds: u64,
    /// Records those rounds made durable, per round (the group-commit size).
    pub records_per_sync: f64,
    /// Mean time of one of the log's fdatasync calls, microseconds.
    pub sync_us: f64,
    /// `ops_per_sec ÷ (limit × records_per_sync)`, the limit the mean of the two
    /// measurements around the run (`EngineBenchReport::fdatasync_limit`).
    pub of_limit: f64,
}

/// The whole run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EngineBenchReport {
    /// The command line.
    pub command: String,
    /// Where it ran.
    pub machine: Machine,
    /// The directory the store was made under.
    pub path: PathBuf,
    /// Its file system.
    pub fs_type: String,
    /// The process's allocator.
    pub allocator: String,
    /// Keys in the store.
    pub num: u64,
    /// Lookups per read workload.
    pub reads: u64,
    /// Bytes of each key.
    pub key_size: usize,
    /// Bytes of each value.
    pub value_size: usize,
    /// Durability of the puts.
    pub durability: String,
    /// The engine's memory budget (`cache_size`), bytes.
    pub cache_size: usize,
    /// Of which the page cache, bytes.
    pub page_cache_bytes: usize,
    /// And the write buffer size (`Options::write_buffer_size`): older values kept for
    /// snapshots (the undo) take up to twice it.
    pub write_buffer_bytes: usize,
    /// Bytes of keys and values the fills put (`num` × (key + value)): the data set.
    pub data_bytes: u64,
    /// The read method.
    pub read_method: String,
    /// Results in the order run.
    pub results: Vec<WorkloadResult>,
    /// Peak resident memory of the process, bytes: its high-water mark (`VmHWM`), or the
    /// largest sample where that is higher.
    pub peak_rss_bytes: Option<u64>,
    /// The bound on it: `cache_size` + 64 MiB.
    pub memory_bound_bytes: u64,
    /// Whether the peak kept within the bound.
    pub within_memory_bound: Option<bool>,
    /// The read-method comparison, when it ran.
    pub read_methods: Option<ReadMethodsReport>,
    /// Memory sampled through the run (every 50 ms; empty in reports older than the field).
    #[serde(default)]
    pub memory_trace: Vec<MemorySample>,
    /// Bytes of the store's block files at the end.
    pub store_file_bytes: u64,
    /// The fdatasync limit (a 4 KiB pwrite + fdatasync loop) in the log's directory,
    /// measured before the workloads and after them, when the puts are `Sync` on the file
    /// log.
    #[serde(default)]
    pub fdatasync_limit: Option<SyncLimitAround>,
}

fn key(number: u64) -> [u8; KEY_BYTES] {
    let mut key = [b'0'; KEY_BYTES];
    let digits = number.to_string();
    let digits = digits.as_bytes();
    let start = KEY_BYTES.saturating_sub(digits.len());
    key[start..].copy_from_slice(&digits[digits.len().saturating_sub(KEY_BYTES)..]);
    key
}

fn engine_error(error: tierkv::Error) -> BenchError {
    BenchError::Engine(error.to_string())
}

/// Runs the workloads in order on one store.
pub fn run(config: &EngineBenchConfig) -> Result<EngineBenchReport, BenchError> {
    if config.num == 0 {
        return Err(BenchError::Engine("num must be at least 1".into()));
    }
    // Scratch files go whatever happens: on return, on a panic, on Ctrl-C.
    let scratch = ScratchDir::new_in(&config.path, "tierkv-engine-bench-").map_err(|e| {
        BenchError::Engine(format!("cannot make a directory in {}: {e}", config.path.display()))
    })?;
    run_in(config, &scratch.path().join("store"))
}

fn run_in(config: &EngineBenchConfig, dir: &Path) -> Result<EngineBenchReport, BenchError> {
    let trace = MemoryTrace::new();
    let (report, samples) = std::thread::scope(|scope| {
        let sampler =
            scope.spawn(|| trace.sample_until_stopped(&config.workloads, config.heap_in_use));
        let report = run_traced(config, dir, &trace);
        trace.stop.store(true, Ordering::Relaxed);
        (report, sampler.join().unwrap_or_default())
    });
    let mut report = report?;
    // The kernel's high-water mark, or a sample above it: its counters are per thread and
    // can lag by a little.
    let sampled = report
        .results
        .iter()
        .filter_map(|r| r.rss_bytes)
        .chain(samples.iter().map(|s| s.rss_bytes))
        .max();
    report.peak_rss_bytes = process_memory().map(|m| m.peak_rss_bytes.max(sampled.unwrap_or(0)));
    report.within_memory_bound =
        report.peak_rss_bytes.map(|peak| peak <= report.memory_bound_bytes);
    report.memory_trace = samples;
    Ok(report)
}

/// The run, less the peak and the trace, which `run_in` fills in.
fn run_traced(
    config: &EngineBenchConfig,
    dir: &Path,
    trace: &MemoryTrace,
) -> Result<EngineBenchReport, BenchError> {
    let mut db: Option<Db> = None;
    let mut rng = fastrand::Rng::with_seed(config.seed);
    let mut results = Vec::new();
    let limit_before = sync_limit(config, dir)?;
    let mut value = vec![0u8; config.value_size];
    let total: u64 = config
        .workloads
        .iter()
        .map(|w| match w {
            Workload::FillSeq
            | Workload::FillRandom
            | Workload::Overwrite
            | Workload::ReadSeq
            | Workload::ReadReverse => config.num,
            _ => config.reads,
        })
        .sum::<u64>()
        + 2 * config.read_method_trials as u64 * config.reads;
    let bar = progress_bar(config.progress, total);
    let mut store_file_bytes = 0;
    for (index, &workload) in config.workloads.iter().enumerate() {
        bar.set_message(workload.name());
        let fresh = matches!(workload, Workload::FillSeq | Workload::FillRandom);
        if fresh || db.is_none() {
            if let Some(old) = db.take() {
                old.close().map_err(engine_error)?;
            }
            let _ = std::fs::remove_dir_all(dir);
            db = Some(Db::open(dir, config.options.clone()).map_err(engine_error)?);
        }
        let Some(store) = db.as_ref() else { unreachable!("opened above") };
        let before = store.stats().map_err(engine_error)?;
        let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
            .map_err(|e| BenchError::Engine(e.to_string()))?;
        let mut found = None;
        let mut background = None;
        let entry_bytes = (KEY_BYTES + config.value_size) as f64;
        let started = Instant::now();
        let started_s = started.duration_since(trace.started).as_secs_f64();
        trace.set_running(Some(index));
        let ops = match workload {
            Workload::FillSeq | Workload::FillRandom | Workload::Overwrite => {
                let batch_size = 1_000;
                for i in 0..config.num {
                    let number = match workload {
                        Workload::FillSeq => i,
                        _ => rng.u64(..config.num),
                    };
                    rng.fill(&mut value);
                    let mut batch = tierkv::WriteBatch::new();
                    batch.put(key(number), &value);
                    let t = Instant::now();
                    store.write_with(&batch, config.durability).map_err(engine_error)?;
                    record(&mut histogram, t);
                    if i % batch_size == batch_size - 1 {
                        bar.inc(batch_size);
                        trace.note_engine(store);
                    }
                }
                config.num
            }
            Workload::ReadRandom => {
                let trace = Some(trace);
                found = Some(random_reads(store, config, &mut rng, &mut histogram, &bar, trace)?);
                config.reads
            }
            Workload::SeekRandom => {
                let mut hits = 0;
                for i in 0..config.reads {
                    let k = key(rng.u64(..config.num));
                    let t = Instant::now();
                    let next = store.range(k..).next().transpose().map_err(engine_error)?;
                    record(&mut histogram, t);
                    hits += u64::from(next.is_some());
                    if i % 1_000 == 999 {
                        bar.inc(1_000);
                        trace.note_engine(store);
                    }
                }
                found = Some(hits);
                config.reads
            }
            Workload::ReadSeq | Workload::ReadReverse => {
                let mut count = 0u64;
                let mut t = Instant::now();
                let iter = store.range(..);
                let entries: Box<dyn Iterator<Item = _>> = if workload == Workload::ReadReverse {
                    Box::new(iter.rev())
                } else {
                    Box::new(iter)
                };
                for entry in entries {
                    entry.map_err(engine_error)?;
                    record(&mut histogram, t);
                    t = Instant::now();
                    count += 1;
                    if count.is_multiple_of(1_000) {
                        bar.inc(1_000);
                        trace.note_engine(store);
                    }
                }
                found = Some(count);
                count
            }
            Workload::ReadWhileWriting => {
                let stop = AtomicBool::new(false);
                let num = config.num;
                let (durability, value_size, seed) =
                    (config.durability, config.value_size, config.seed ^ 0xabcd);
                let (reads, hits, writes) = std::thread::scope(|scope| {
                    let writer = scope.spawn(|| {
                        let mut rng = fastrand::Rng::with_seed(seed);
                        let mut value = vec![0u8; value_size];
                        let mut writes = 0u64;
                        while !stop.load(Ordering::Relaxed) {
                            rng.fill(&mut value);
                            let mut batch = tierkv::WriteBatch::new();
                            batch.put(key(rng.u64(..num)), &value);
                            if store.write_with(&batch, durability).is_err() {
                                break;
                            }
                            writes += 1;
                        }
                        writes
                    });
                    let mut hits = 0u64;
                    let mut result = Ok(());
                    for i in 0..config.reads {
                        let k = key(rng.u64(..num));
                        let t = Instant::now();
                        match store.get(k) {
                            Ok(v) => hits += u64::from(v.is_some()),
                            Err(error) => {
                                result = Err(engine_error(error));
                                break;
                            }
                        }
                        record(&mut histogram, t);
                        if i % 1_000 == 999 {
                            bar.inc(1_000);
                            trace.note_engine(store);
                        }
                    }
                    stop.store(true, Ordering::Relaxed);
                    let writes = writer.join().unwrap_or(0);
                    (result, hits, writes)
                });
                reads?;
                found = Some(hits);
                background = Some(writes);
                config.reads
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        trace.set_running(None);
        let writes =
            matches!(workload, Workload::FillSeq | Workload::FillRandom | Workload::Overwrite)
                .then_some(());
        let after = store.stats().map_err(engine_error)?;
        let lookups = (after.cache.hits + after.cache.misses)
            .saturating_sub(before.cache.hits + before.cache.misses);
        let hits = after.cache.hits.saturating_sub(before.cache.hits);
        store_file_bytes = after.blocks.file_bytes;
        let micros = |q: f64| histogram.value_at_quantile(q) as f64 / 1_000.0;
        results.push(WorkloadResult {
            workload,
            ops,
            started_s,
            seconds,
            ops_per_sec: ops as f64 / seconds,
            mb_per_sec: ops as f64 * entry_bytes / seconds / 1e6,
            p50_us: micros(0.5),
            p99_us: micros(0.99),
            p999_us: micros(0.999),
            max_us: histogram.max() as f64 / 1_000.0,
            found,
            background_writes: background,
            checkpoints: after.checkpoints - before.checkpoints,
            cache_hit_ratio: (lookups > 0).then(|| hits as f64 / lookups as f64),
            rss_bytes: process_memory().map(|m| m.rss_bytes),
            sync: limit_before.as_ref().and(writes).and_then(|()| {
                let rounds = after.log.sync_rounds - before.log.sync_rounds;
                let records = after.log.synced_records - before.log.synced_records;
                let sync_ns = after.log.sync_ns - before.log.sync_ns;
                (rounds > 0).then(|| SyncShare {
                    rounds,
                    records_per_sync: records as f64 / rounds as f64,
                    sync_us: sync_ns as f64 / rounds as f64 / 1e3,
                    // Set once the limit is measured again after the workloads.
                    of_limit: f64::NAN,
                })
            }),
        });
    }
    if let Some(db) = db {
        db.close().map_err(engine_error)?;
    }
    let fdatasync_limit = match limit_before {
        Some(before) => sync_limit(config, dir)?.map(|after| SyncLimitAround {
            per_s: (before.per_s + after.per_s) / 2.0,
            before,
            after,
        }),
        None => None,
    };
    if let Some(limit) = &fdatasync_limit {
        for result in &mut results {
            if let Some(share) = result.sync.as_mut() {
                share.of_limit = result.ops_per_sec / (limit.per_s * share.records_per_sync);
            }
        }
    }
    let read_methods = match config.read_method_trials {
        0 => None,
        trials => Some(compare_read_methods(config, dir, trials, store_file_bytes, &bar)?),
    };
    bar.finish_and_clear();
    let memory_bound_bytes = (config.options.cache_size + MEMORY_HEADROOM_BYTES) as u64;
    Ok(EngineBenchReport {
        command: config.command.clone(),
        machine: machine_info().into(),
        path: config.path.clone(),
        fs_type: file_system_info(&config.path).map_or_else(|_| "unknown".into(), |fs| fs.fs_type),
        allocator: config.allocator.clone(),
        num: config.num,
        reads: config.reads,
        key_size: KEY_BYTES,
        value_size: config.value_size,
        durability: config.durability.name().into(),
        cache_size: config.options.cache_size,
        page_cache_bytes: config.options.page_cache_bytes(),
        write_buffer_bytes: config.options.write_buffer_bytes(),
        data_bytes: config.num * (KEY_BYTES + config.value_size) as u64,
        read_method: config.options.read_method.to_string(),
        results,
        peak_rss_bytes: None,
        memory_bound_bytes,
        within_memory_bound: None,
        read_methods,
        memory_trace: Vec::new(),
        store_file_bytes,
        fdatasync_limit,
    })
}

/// The fdatasync limit where the log is, when the puts are `Sync` on the file log.
fn sync_limit(config: &EngineBenchConfig, dir: &Path) -> Result<Option<SyncLimit>, BenchError> {
    let file_log = config.options.log_backend.is_none_or(|backend| backend == Backend::File);
    if config.durability != Durability::Sync || !file_log || config.sync_limit_time.is_zero() {
        return Ok(None);
    }
    // The log goes in the store's directory unless it is put elsewhere.
    let log_dir = match &config.options.log_dir {
        Some(log_dir) => log_dir.clone(),
        None => dir.parent().unwrap_or(dir).to_path_buf(),
    };
    measure_sync_limit(&Storage::Os, &log_dir, config.sync_limit_time).map(Some)
}

/// `config.reads` lookups of random keys in `0..num`; returns how many were found.
fn random_reads(
    store: &Db,
    config: &EngineBenchConfig,
    rng: &mut fastrand::Rng,
    histogram: &mut Histogram<u64>,
    bar: &ProgressBar,
    trace: Option<&MemoryTrace>,
) -> Result<u64, BenchError> {
    let mut hits = 0;
    for i in 0..config.reads {
        let k = key(rng.u64(..config.num));
        let t = Instant::now();
        hits += u64::from(store.get(k).map_err(engine_error)?.is_some());
        record(histogram, t);
        if i % 1_000 == 999 {
            bar.inc(1_000);
            if let Some(trace) = trace {
                trace.note_engine(store);
            }
        }
    }
    Ok(hits)
}

fn record(histogram: &mut Histogram<u64>, started: Instant) {
    let nanos = started.elapsed().as_nanos().clamp(1, 60_000_000_000) as u64;
    // In bounds by the clamp above.
    let _ = histogram.record(nanos);
}

fn progress_bar(show: bool, total: u64) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {pos}/{len} ops {msg} (ETA {eta})",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// The table printed on stdout.
pub fn table(report: &EngineBenchReport) -> String {
    let mut out = format!(
        "tierkv engine: {} keys, {}-byte keys, {}-byte values ({:.0} MiB), durability {}, \
         cache {} MiB ({} MiB pages, older values up to {} MiB), read method {}, \
         allocator {}\n",
        report.num,
        report.key_size,
        report.value_size,
        report.data_bytes as f64 / (1 << 20) as f64,
        report.durability,
        report.cache_size >> 20,
        report.page_cache_bytes >> 20,
        (2 * report.write_buffer_bytes) >> 20,
        report.read_method,
        report.allocator
    );
    out.push_str(&format!(
        "{:<17} {:>12} {:>9} {:>9} {:>9} {:>10} {:>9} {:>11} {:>8}\n",
        "workload",
        "ops/s",
        "MB/s",
        "p50 us",
        "p99 us",
        "p99.9 us",
        "max ms",
        "checkpoints",
        "hit %"
    ));
    for r in &report.results {
        let hit = r.cache_hit_ratio.map_or("-".to_string(), |h| format!("{:.1}", h * 100.0));
        out.push_str(&format!(
            "{:<17} {:>12.0} {:>9.1} {:>9.1} {:>9.1} {:>10.1} {:>9.2} {:>11} {:>8}",
            r.workload.name(),
            r.ops_per_sec,
            r.mb_per_sec,
            r.p50_us,
            r.p99_us,
            r.p999_us,
            r.max_us / 1000.0,
            r.checkpoints,
            hit
        ));
        if let Some(found) = r.found {
            out.push_str(&format!("  ({found} of {} found)", r.ops));
        }
        if let Some(writes) = r.background_writes {
            out.push_str(&format!("  ({writes} writes meanwhile)"));
        }
        out.push('\n');
    }
    if let Some(limit) = &report.fdatasync_limit {
        out.push_str(&format!(
            "fdatasync limit where the log is: {:.0} per s (4 KiB pwrite + fdatasync; {:.0} \
             before the workloads, {:.0} after)\n",
            limit.per_s, limit.before.per_s, limit.after.per_s
        ));
        for r in &report.results {
            if let Some(sync) = &r.sync {
                out.push_str(&format!(
                    "  {}: {:.2} of the limit times {:.2} records per sync ({} syncs, {:.0} us \
                     each)\n",
                    r.workload.name(),
                    sync.of_limit,
                    sync.records_per_sync,
                    sync.rounds,
                    sync.sync_us
                ));
            }
        }
    }
    let mib = |bytes: u64| bytes as f64 / (1 << 20) as f64;
    if let Some(methods) = &report.read_methods {
        for trial in &methods.trials {
            out.push_str(&format!(
                "{:<17} {:>12.0} {:>9} {:>9.1} {:>9.1} {:>10} {:>11} {:>8}\n",
                format!("readrandom {}", trial.method),
                trial.ops_per_sec,
                "",
                trial.p50_us,
                trial.p99_us,
                "",
                "",
                trial.cache_hit_ratio.map_or("-".into(), |h| format!("{:.1}", h * 100.0))
            ));
        }
        if let Some(ratio) = methods.mmap_over_syscall {
            out.push_str(&format!(
                "read methods: mmap ÷ syscall = {ratio:.2} (medians of {} passes each; seed 000: \
                 1.63){}\n",
                methods.trials.len() / 2,
                match methods.data_fits_os_cache_not_engine_cache {
                    true => "",
                    false =>
                        "; NOTE: the store does not fit the OS page cache but not the \
                              engine cache, so this is not the seed's case",
                }
            ));
        }
    }
    if let Some(peak) = report.peak_rss_bytes {
        out.push_str(&format!(
            "peak resident memory {:.1} MiB, bound {:.1} MiB (cache_size + 64 MiB): {}; \
             store files {:.1} MiB\n",
            mib(peak),
            mib(report.memory_bound_bytes),
            if peak <= report.memory_bound_bytes { "within" } else { "OVER" },
            mib(report.store_file_bytes)
        ));
        if report.read_methods.is_some() {
            out.push_str(
                "  (the peak counts the store's file pages the mmap passes mapped; the \
                 workloads' own figures are in the JSON's rss_bytes)\n",
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_sixteen_zero_padded_digits() {
        assert_eq!(&key(42), b"0000000000000042");
        assert_eq!(&key(u64::MAX), b"6744073709551615");
    }

    /// Every workload, tiny, so the bench cannot rot: each completes, counts what it did, and
    /// the reads find what the fills wrote.
    #[test]
    fn the_trace_records_the_engine_figures_of_the_running_workload() {
        let dir = tempfile::tempdir().expect("dir");
        let db = Db::open(dir.path(), Options::default()).expect("open");
        db.put(b"key", b"value").expect("put");
        let workloads = [Workload::FillSeq, Workload::ReadRandom];
        let trace = MemoryTrace::new();
        trace.stop.store(true, Ordering::Relaxed);
        trace.set_running(Some(1));
        trace.note_engine(&db);
        let samples = trace.sample_until_stopped(&workloads, || Some(7));
        assert_eq!(samples.len(), 1, "a stopped sampler samples once");
        let sample = &samples[0];
        assert_eq!(sample.workload, Some(Workload::ReadRandom));
        assert_eq!(sample.heap_in_use_bytes, Some(7));
        let stats = db.stats().expect("stats");
        assert_eq!(
            sample.engine_memtable_bytes,
            Some(stats.undo_bytes + stats.pending_overflow_bytes)
        );
        assert!(stats.undo_bytes > 0);
        assert_eq!(sample.engine_cache_bytes, Some(stats.cache_bytes));
        assert!(sample.rss_bytes > 0);
        // Between workloads: no workload, and no engine figures from the one before.
        trace.set_running(None);
        let samples = trace.sample_until_stopped(&workloads, || None);
        assert_eq!(samples[0].workload, None);
        assert_eq!(samples[0].engine_cache_bytes, None);
        assert_eq!(samples[0].heap_in_use_bytes, None);
        db.close().expect("close");
    }

    /// A run of `num` keys and as many reads, in an 8 MiB budget, with no progress bar.
    fn tiny_config(dir: &Path, num: u64, durability: Durability) -> EngineBenchConfig {
        let mut config = EngineBenchConfig::new(dir);
        config.num = num;
        config.reads = num;
        config.durability = durability;
        config.progress = false;
        config.options.cache_size = 8 << 20;
        config
    }

    #[test]
    fn sync_puts_are_set_beside_the_fdatasync_limit() {
        let dir = tempfile::tempdir().expect("dir");
        let mut config = tiny_config(dir.path(), 300, Durability::Sync);
        config.workloads = vec![Workload::FillRandom, Workload::ReadRandom, Workload::Overwrite];
        config.sync_limit_time = Duration::from_millis(100);
        let report = run(&config).expect("run");
        let limit = report.fdatasync_limit.as_ref().expect("measured");
        assert!(limit.before.samples > 0 && limit.after.samples > 0, "{limit:?}");
        assert!(limit.per_s > 0.0 && limit.per_s.is_finite());
        for result in &report.results {
            match result.workload {
                Workload::ReadRandom => assert!(result.sync.is_none(), "a read workload"),
                _ => {
                    // One writer: each put waits for a sync of its own.
                    let sync = result.sync.as_ref().expect("a write workload's syncs");
                    assert_eq!(sync.rounds, 300, "{sync:?}");
                    assert_eq!(sync.records_per_sync, 1.0);
                    let expected = result.ops_per_sec / limit.per_s;
                    assert!((sync.of_limit - expected).abs() < 1e-9 && sync.sync_us > 0.0);
                }
            }
        }
        assert!(table(&report).contains("of the limit times 1.00 records per sync"));
        // Not measured for puts that do not wait for the log.
        config.durability = Durability::Buffered;
        config.workloads = vec![Workload::FillRandom];
        let report = run(&config).expect("run");
        assert!(report.fdatasync_limit.is_none() && report.results[0].sync.is_none());
    }

    #[test]
    fn every_workload_runs_on_a_tiny_store() {
        let dir = tempfile::tempdir().expect("dir");
        // Its 8 MiB leave room in the undo (twice the write buffer, an eighth of this) for
        // what the background writer changes while readwhilewriting's reads run.
        let mut config = tiny_config(dir.path(), 2_000, Durability::None);
        config.workloads = Workload::ALL.to_vec();
        config.read_method_trials = 1;
        let report = run(&config).expect("run");
        assert_eq!(report.results.len(), Workload::ALL.len());
        for result in &report.results {
            assert!(result.ops > 0 && result.ops_per_sec > 0.0, "{result:?}");
        }
        let find = |w: Workload| report.results.iter().find(|r| r.workload == w).expect("ran");
        // fillrandom (with repeats) ran last before the reads: its keys are there, others not.
        let readseq = find(Workload::ReadSeq).found.expect("count");
        assert!(readseq > 1_000 && readseq < 2_000, "{readseq}");
        assert_eq!(find(Workload::ReadReverse).found, Some(readseq), "both ways, every key");
        let found = find(Workload::ReadRandom).found.expect("found");
        assert!(found > 1_000 && found < 2_000, "{found}");
        assert!(find(Workload::ReadWhileWriting).background_writes.is_some());
        assert!(table(&report).contains("readwhilewriting"));
        // One pass per read method, each finding every key the fill left.
        let methods = report.read_methods.as_ref().expect("compared");
        let names: Vec<&str> = methods.trials.iter().map(|t| t.method.as_str()).collect();
        assert_eq!(names, ["syscall", "mmap"]);
        assert!(methods.mmap_over_syscall.is_some_and(|r| r > 0.0));
        assert!(report.peak_rss_bytes.is_some() && report.within_memory_bound.is_some());
        let plots = tempfile::tempdir().expect("dir");
        let written = write_plots(&report, plots.path()).expect("plots");
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["latency.svg", "memory-trace.svg", "memory.svg", "ops.svg", "read-methods.svg"]
        );
        // The sampler ran from the start to the end, in order.
        let trace = &report.memory_trace;
        assert!(!trace.is_empty() && trace.iter().all(|s| s.rss_bytes > 0));
        assert!(trace.windows(2).all(|pair| pair[0].seconds <= pair[1].seconds));
        for path in &written {
            let svg = std::fs::read_to_string(path).expect("read");
            assert!(svg.starts_with("<svg") && svg.contains("<rect") && !svg.contains("NaN"));
        }
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0, "scratch left behind");
    }
}
