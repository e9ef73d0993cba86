//! The WAL benchmark (`tierkv bench wal`): commits per second and commit latency of the log's
//! backends by thread count and record size, beside the device's fdatasync limit and, where
//! installed, RocksDB's and SQLite's synchronous commits on the same path.
//!
//! A point opens a fresh log in `tierkv-wal-bench` in the run's scratch directory under
//! `<path>` (removed at the end, on a panic and on Ctrl-C), waits until the spare segment is
//! prepared (so the first seconds do not measure the zero-fill of a segment that a long-running
//! log would have prepared long before), then runs `threads` appenders for `duration`, each
//! timing every append. Rotations and the preparation of later segments during the run are
//! part of the measurement.
//!
//! The fdatasync limit is the mean latency of a 4 KiB pwrite + fdatasync loop over an already
//! allocated and written region of a file on the same path: the most single-threaded commits a
//! second that any log writing through fdatasync can get there.
//!
//! Must never: report a commit the log did not acknowledge as durable, or assert on speed.

pub mod output;
pub mod peers;
pub mod plot;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::machine::{machine_info, process_cpu_seconds};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use tierkv_io::{file_system_info, AccessMethod, OpenOptions, PmemMode, Storage};
use tierkv_wal::{Backend, Durability, RecordType, Wal, WalOptions};

use crate::device::{BenchError, Machine};
use crate::scratch::ScratchDir;

/// Name of the log directory a point creates under the bench path.
const LOG_DIR: &str = "tierkv-wal-bench";

/// Name of the file of the fdatasync-limit loop.
const SYNC_LIMIT_FILE: &str = "tierkv-fdatasync-limit.dat";

/// Bytes of the region the fdatasync-limit loop rewrites.
const SYNC_LIMIT_REGION_BYTES: u64 = 4 << 20;

/// The 4 KiB transfer of the fdatasync-limit loop.
const SYNC_LIMIT_WRITE_BYTES: usize = 4096;

/// What to measure.
#[derive(Clone, Debug)]
pub struct WalBenchConfig {
    /// Directory the logs (and the peers' databases) are created in, in a scratch directory
    /// of the run.
    pub path: PathBuf,
    /// Log backends.
    pub backends: Vec<Backend>,
    /// Appender thread counts.
    pub threads: Vec<usize>,
    /// Payload sizes, bytes.
    pub record_sizes: Vec<usize>,
    /// How long each point runs.
    pub duration: Duration,
    /// Durability of every append (the acceptance figures use `Sync`).
    pub durability: Durability,
    /// Segment size of the logs.
    pub segment_bytes: u64,
    /// Trials of each 1-appender file point (each bracketed by two limit measurements).
    pub limit_trials: usize,
    /// Also run the peers found on this machine (RocksDB's db_bench, SQLite).
    pub peers: bool,
    /// Show a progress bar on stderr.
    pub progress: bool,
}

impl WalBenchConfig {
    /// The defaults: both backends, 1–16 threads, 64 B to 4 KiB records, 5 s per point.
    pub fn new(path: impl Into<PathBuf>) -> WalBenchConfig {
        WalBenchConfig {
            path: path.into(),
            backends: vec![Backend::File, Backend::Pmem],
            threads: vec![1, 2, 4, 8, 16],
            record_sizes: vec![64, 128, 1024, 4096],
            duration: Duration::from_secs(5),
            durability: Durability::Sync,
            segment_bytes: WalOptions::default().segment_bytes,
            limit_trials: 3,
            peers: true,
            progress: true,
        }
    }
}

/// The fdatasync limit measured in a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyncLimit {
    /// Mean latency of one 4 KiB pwrite + fdatasync, nanoseconds.
    pub latency_ns_mean: f64,
    /// `1e9 / latency_ns_mean`: commits a second at one fdatasync each.
    pub per_s: f64,
    /// Loop iterations timed.
    pub samples: u64,
}

/// The fdatasync limit measured right before and right after one point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SyncLimitAround {
    /// Measured just before the point.
    pub before: SyncLimit,
    /// Measured just after it.
    pub after: SyncLimit,
    /// The mean of the two rates.
    pub per_s: f64,
}

/// One measured point of the log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WalPoint {
    /// The backend.
    pub backend: String,
    /// The pmem mode in force (`None` for the file backend).
    pub pmem_mode: Option<PmemMode>,
    /// Appender threads.
    pub threads: usize,
    /// Payload bytes of each record.
    pub record_bytes: usize,
    /// Durability of each append.
    pub durability: String,
    /// Appends acknowledged.
    pub commits: u64,
    /// Acknowledged appends per second of wall time.
    pub commits_per_s: f64,
    /// Latency percentiles of the appends, nanoseconds.
    pub latency_ns_p50: u64,
    /// 99th percentile.
    pub latency_ns_p99: u64,
    /// 99.9th percentile.
    pub latency_ns_p999: u64,
    /// Largest.
    pub latency_ns_max: u64,
    /// Records made durable per fdatasync round (file backend; 0 for pmem).
    pub records_per_sync: f64,
    /// Share of the wall time an fdatasync was running (file backend; 0 for pmem): below 1,
    /// the device waited for the log between rounds.
    pub sync_busy: f64,
    /// Segment rotations during the point.
    pub rotations: u64,
    /// Rotations that waited for a segment to be prepared.
    pub rotation_waits: u64,
    /// Wall time, seconds.
    pub elapsed_s: f64,
    /// CPU time of the process during the point (user + system, all threads), seconds.
    pub cpu_s: f64,
    /// file backend, 1 thread: the fdatasync limit measured just before and just after this
    /// point, so the ratio to it is not skewed by a shared disk's drift over the run.
    #[serde(default)]
    pub fdatasync_limit_around: Option<SyncLimitAround>,
    /// file backend, 1 thread: commits/s ÷ the limit measured around it, for every trial in
    /// the order they ran. The point reported is the trial with the median ratio.
    #[serde(default)]
    pub limit_trial_ratios: Vec<f64>,
}

/// One measured point of a peer engine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerPoint {
    /// `rocksdb` or `sqlite`.
    pub engine: String,
    /// How it was run and configured (command line or settings).
    pub setup: String,
    /// Writer threads.
    pub threads: usize,
    /// Value bytes per write.
    pub record_bytes: usize,
    /// Synchronous commits per second.
    pub commits_per_s: f64,
    /// Median commit latency, nanoseconds, where the peer reports it.
    pub latency_ns_p50: Option<u64>,
}

/// A whole run: what the JSON output holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WalReport {
    /// The command line that produced the report.
    pub command: String,
    /// The machine.
    pub machine: Machine,
    /// The directory measured.
    pub path: PathBuf,
    /// Its file system.
    pub fs_type: String,
    /// True when the file system keeps data in memory only (tmpfs): fdatasync costs almost
    /// nothing and the pmem backend runs in flush-only emulation.
    pub fs_is_memory: bool,
    /// True when the path is on DAX.
    pub dax: bool,
    /// Seconds each point ran.
    pub duration_per_point_s: f64,
    /// The fdatasync limit on this path, measured at the start of the run.
    pub fdatasync_limit: SyncLimit,
    /// The log's points, in the order they ran.
    pub points: Vec<WalPoint>,
    /// The peers' points.
    pub peers: Vec<PeerPoint>,
    /// Peers that were asked for but not run, with the reason.
    pub peers_skipped: Vec<String>,
    /// What was emulated, and other facts a reader needs.
    pub notes: Vec<String>,
}

/// Runs the benchmark.
pub fn run(config: &WalBenchConfig, command: &str) -> Result<WalReport, BenchError> {
    if config.backends.is_empty() || config.threads.is_empty() || config.record_sizes.is_empty() {
        return Err(BenchError::Config(
            "backends, threads and record sizes must not be empty".into(),
        ));
    }
    if config.threads.contains(&0) {
        return Err(BenchError::Config("a thread count of 0 cannot append".into()));
    }
    if config.limit_trials == 0 {
        return Err(BenchError::Config("--limit-trials must be at least 1".into()));
    }
    if config.duration.is_zero() {
        return Err(BenchError::Config("the duration per point must be positive".into()));
    }
    let storage = Storage::Os;
    storage.create_dir_all(&config.path)?;
    let fs = file_system_info(&config.path)?;
    // Every file of the run (the logs, the fdatasync-limit file, the peers' databases) goes
    // in a scratch directory under the path: removed at the end, on a panic, on Ctrl-C.
    let scratch = ScratchDir::new_in(&config.path, "tierkv-wal-")
        .map_err(|source| BenchError::Output { path: config.path.clone(), source })?;
    let report_path = config.path.clone();
    let config = &WalBenchConfig { path: scratch.path().to_path_buf(), ..config.clone() };
    let points_total = config.backends.len() * config.threads.len() * config.record_sizes.len();
    let peer_plan = if config.peers { peers::plan(config) } else { peers::PeerPlan::default() };
    let progress = progress_bar(config, (points_total + peer_plan.points() + 1) as u64);

    progress.set_message("fdatasync limit");
    let fdatasync_limit = measure_sync_limit(&storage, &config.path, config.duration)?;
    progress.inc(1);

    let mut points = Vec::with_capacity(points_total);
    for &backend in &config.backends {
        for &record_bytes in &config.record_sizes {
            for &threads in &config.threads {
                progress.set_message(format!("{backend} {threads} thr {record_bytes} B"));
                // The criterion compares one appender with the fdatasync limit: measure the
                // limit right around that point (before, point, after), since a shared disk
                // drifts over a run of several minutes.
                // A shared disk is noisy from one point to the next too, so that point runs
                // `limit_trials` times, each bracketed, and the median trial is reported.
                let bracket = backend == Backend::File && threads == 1;
                if !bracket {
                    points.push(run_point(&storage, config, backend, threads, record_bytes)?);
                    progress.inc(1);
                    continue;
                }
                let mut trials = Vec::with_capacity(config.limit_trials);
                for _ in 0..config.limit_trials {
                    let before = measure_sync_limit(&storage, &config.path, config.duration)?;
                    let mut point = run_point(&storage, config, backend, threads, record_bytes)?;
                    let after = measure_sync_limit(&storage, &config.path, config.duration)?;
                    let per_s = (before.per_s + after.per_s) / 2.0;
                    point.fdatasync_limit_around = Some(SyncLimitAround { before, after, per_s });
                    trials.push((point.commits_per_s / per_s, point));
                }
                let ratios: Vec<f64> = trials.iter().map(|(ratio, _)| *ratio).collect();
                trials.sort_by(|a, b| a.0.total_cmp(&b.0));
                let (_, mut point) = trials.swap_remove(trials.len() / 2);
                point.limit_trial_ratios = ratios;
                points.push(point);
                progress.inc(1);
            }
        }
    }
    let (peer_points, mut peers_skipped) = peers::run(&peer_plan, config, &progress)?;
    peers_skipped.extend(peer_plan.skipped.iter().cloned());
    progress.finish_and_clear();
    scratch.remove().map_err(|source| BenchError::Output { path: config.path.clone(), source })?;

    let mut notes = Vec::new();
    if fs.is_memory {
        notes.push(format!(
            "{} is {}, a memory file system: fdatasync has no device to wait for, and the pmem \
             backend runs in flush-only emulation (real clwb/clflushopt and sfence on DRAM; \
             not durable across power loss)",
            report_path.display(),
            fs.fs_type
        ));
    } else if !fs.dax && config.backends.contains(&Backend::Pmem) {
        notes.push(format!(
            "{} is {} without DAX: the pmem backend persists with msync (a system call), as it \
             must to be durable on a page-cache file",
            report_path.display(),
            fs.fs_type
        ));
    }
    Ok(WalReport {
        command: command.to_string(),
        machine: machine_info().into(),
        path: report_path,
        fs_type: fs.fs_type,
        fs_is_memory: fs.is_memory,
        dax: fs.dax,
        duration_per_point_s: config.duration.as_secs_f64(),
        fdatasync_limit,
        points,
        peers: peer_points,
        peers_skipped,
        notes,
    })
}

fn progress_bar(config: &WalBenchConfig, total: u64) -> ProgressBar {
    if !config.progress {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template("{bar:30} {pos}/{len} points, ETA {eta} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// Removes a directory's files and the directory (one level: the log writes no subdirectory).
fn remove_dir_files(storage: &Storage, dir: &Path) -> Result<(), BenchError> {
    if !storage.exists(dir)? {
        return Ok(());
    }
    for name in storage.list_dir(dir)? {
        storage.remove_file(dir.join(name))?;
    }
    // Best effort, like the output files: the empty directory is all that could stay behind.
    let _ = std::fs::remove_dir(dir);
    Ok(())
}

fn run_point(
    storage: &Storage,
    config: &WalBenchConfig,
    backend: Backend,
    threads: usize,
    record_bytes: usize,
) -> Result<WalPoint, BenchError> {
    let dir = config.path.join(LOG_DIR);
    remove_dir_files(storage, &dir)?;
    let options =
        WalOptions { segment_bytes: config.segment_bytes, ..WalOptions::with_backend(backend) };
    let wal = Wal::open(storage, &dir, options, |_| {}).map_err(wal_error)?.wal;
    let deadline = Instant::now() + Duration::from_secs(120);
    while wal.stats().segments_prepared < 2 {
        if Instant::now() > deadline {
            return Err(BenchError::Config(
                "the log's spare segment was not prepared within 120 s".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let kind = RecordType::new(1).expect("invariant: 1 is a valid record type");
    let before = wal.stats();
    let stop = Arc::new(AtomicBool::new(false));
    let cpu_start = process_cpu_seconds();
    let started = Instant::now();
    let results: Vec<Result<Histogram<u64>, BenchError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (wal, stop) = (&wal, Arc::clone(&stop));
                scope.spawn(move || -> Result<Histogram<u64>, BenchError> {
                    let mut latency = new_histogram();
                    let payload: Vec<u8> =
                        (0..record_bytes).map(|i| (i * 7 + thread) as u8).collect();
                    while !stop.load(Ordering::Relaxed) {
                        let t0 = Instant::now();
                        wal.append(kind, &payload, config.durability).map_err(wal_error)?;
                        latency.saturating_record(t0.elapsed().as_nanos() as u64);
                    }
                    Ok(latency)
                })
            })
            .collect();
        std::thread::sleep(config.duration);
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err(BenchError::Config("an appender panicked".into())))
            })
            .collect()
    });
    let elapsed_s = started.elapsed().as_secs_f64();
    let cpu_s = process_cpu_seconds() - cpu_start;
    let mut latency = new_histogram();
    for result in results {
        latency.add(result?).map_err(|e| BenchError::Config(format!("histogram: {e}")))?;
    }
    let stats = wal.stats();
    let pmem_mode = wal.pmem_mode();
    wal.close().map_err(wal_error)?;
    remove_dir_files(storage, &dir)?;
    let rounds = stats.sync_rounds - before.sync_rounds;
    let synced = stats.synced_records - before.synced_records;
    let commits = latency.len();
    Ok(WalPoint {
        backend: backend.name().to_string(),
        pmem_mode,
        threads,
        record_bytes,
        durability: config.durability.name().to_string(),
        commits,
        commits_per_s: commits as f64 / elapsed_s,
        latency_ns_p50: latency.value_at_quantile(0.50),
        latency_ns_p99: latency.value_at_quantile(0.99),
        latency_ns_p999: latency.value_at_quantile(0.999),
        latency_ns_max: latency.max(),
        records_per_sync: if rounds == 0 { 0.0 } else { synced as f64 / rounds as f64 },
        sync_busy: (stats.sync_ns - before.sync_ns) as f64 / 1e9 / elapsed_s,
        rotations: stats.rotations - before.rotations,
        rotation_waits: stats.rotation_waits - before.rotation_waits,
        elapsed_s,
        cpu_s,
        fdatasync_limit_around: None,
        limit_trial_ratios: Vec::new(),
    })
}

fn wal_error(error: tierkv_wal::WalError) -> BenchError {
    BenchError::Config(format!("the log failed: {error}"))
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("invariant: valid histogram bounds")
}

/// The fdatasync limit: a 4 KiB pwrite + fdatasync loop over a region that is already
/// allocated, written and synced, for `duration`.
pub fn measure_sync_limit(
    storage: &Storage,
    dir: &Path,
    duration: Duration,
) -> Result<SyncLimit, BenchError> {
    let path = dir.join(SYNC_LIMIT_FILE);
    let file = storage.open(
        &path,
        &OpenOptions::new(AccessMethod::Syscall).create(true).chunk_bytes(SYNC_LIMIT_REGION_BYTES),
    )?;
    let block = vec![0x5au8; SYNC_LIMIT_WRITE_BYTES];
    let blocks = SYNC_LIMIT_REGION_BYTES / SYNC_LIMIT_WRITE_BYTES as u64;
    for index in 0..blocks {
        file.write_at(&block, index * SYNC_LIMIT_WRITE_BYTES as u64)?;
    }
    file.sync_all()?;
    let started = Instant::now();
    let mut samples = 0u64;
    while started.elapsed() < duration {
        let offset = (samples % blocks) * SYNC_LIMIT_WRITE_BYTES as u64;
        file.write_at(&block, offset)?;
        file.sync_data()?;
        samples += 1;
    }
    let elapsed_ns = started.elapsed().as_nanos() as f64;
    drop(file);
    storage.remove_file(&path)?;
    let latency_ns_mean = elapsed_ns / samples.max(1) as f64;
    Ok(SyncLimit { latency_ns_mean, per_s: 1e9 / latency_ns_mean, samples })
}

/// Writes the report as pretty JSON.
pub fn write_json(report: &WalReport, path: &Path) -> Result<(), BenchError> {
    let text = serde_json::to_string_pretty(report)
        .map_err(|e| BenchError::Config(format!("JSON: {e}")))?;
    std::fs::write(path, text)
        .map_err(|source| BenchError::Output { path: path.to_path_buf(), source })
}
