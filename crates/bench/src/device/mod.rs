//! The device lab: seeds 000 and 004's raw-device experiments on the machine at hand.
//!
//! A run sweeps the cross product of methods × ops × patterns × cache states × transfer sizes
//! × thread counts over one measurement file, and reports per point bytes/s, ops/s, latency
//! percentiles (HdrHistogram) and CPU seconds. Every byte moves through `tierkv_io::File`, so
//! the figures are those of the code paths the engine uses. With `compare_fio`, every point fio
//! can also run (psync for `syscall`, libaio with O_DIRECT for `direct`, mmap for `mmap`) runs
//! alternately with fio on the same file, and the medians are compared.
//!
//! Points that cannot run are reported as skipped with the reason (a cold `direct` point is the
//! same as a warm one; a region smaller than one transfer), never silently dropped.

pub mod fio;
pub mod output;
pub mod plot;
mod runner;
mod types;

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::machine::machine_info;
use indicatif::{ProgressBar, ProgressStyle};
use tierkv_io::{AccessMethod, OpenOptions, Storage};

pub use runner::Target;
pub use types::{
    format_bytes, CacheState, DeviceReport, FileInfo, FioComparison, IoOp, Machine, Pattern,
    PointResult, PointSpec,
};

/// Errors of the device lab.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The storage layer failed.
    #[error(transparent)]
    Io(#[from] tierkv_io::Error),
    /// A block store failed.
    #[error(transparent)]
    Block(#[from] tierkv_blockstore::BlockError),
    /// The configuration cannot run.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The engine failed.
    #[error("engine: {0}")]
    Engine(String),
    /// fio is missing, failed, or printed something unexpected.
    #[error("fio: {0}")]
    Fio(String),
    /// Writing an output file failed.
    #[error("cannot write {}: {source}", path.display())]
    Output {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct DeviceConfig {
    /// The measurement file, or a directory to create it in (`tierkv-device.dat`).
    pub path: PathBuf,
    /// Access methods.
    pub methods: Vec<AccessMethod>,
    /// Operations.
    pub ops: Vec<IoOp>,
    /// Patterns.
    pub patterns: Vec<Pattern>,
    /// Page-cache states.
    pub caches: Vec<CacheState>,
    /// Transfer sizes in bytes.
    pub transfer_sizes: Vec<u64>,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Size of the measurement file.
    pub file_bytes: u64,
    /// How long each point runs.
    pub duration: Duration,
    /// Seed of the random offsets.
    pub seed: u64,
    /// Also run fio on every point it supports, alternately with tierkv.
    pub compare_fio: bool,
    /// Alternating repeats per fio comparison (medians are compared).
    pub fio_repeats: usize,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// Keep the measurement file afterwards (it is removed by default if it was created).
    pub keep_file: bool,
    /// The command line, recorded in the report.
    pub command: String,
}

impl DeviceConfig {
    /// The defaults of `tierkv bench device`: every method, op, pattern and cache state,
    /// transfers 128 B to 16 MiB in powers of two, threads 1, 2, 4, ... up to the core count,
    /// a 1 GiB file, 1 s per point.
    pub fn new(path: impl Into<PathBuf>) -> DeviceConfig {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        DeviceConfig {
            path: path.into(),
            methods: AccessMethod::ALL.to_vec(),
            ops: vec![IoOp::Read, IoOp::Write],
            patterns: vec![Pattern::Seq, Pattern::Rand],
            caches: vec![CacheState::Warm, CacheState::Cold],
            transfer_sizes: (7..=24).map(|shift| 1u64 << shift).collect(),
            threads: default_threads(cores),
            file_bytes: 1 << 30,
            duration: Duration::from_secs(1),
            seed: DEFAULT_SEED,
            compare_fio: false,
            fio_repeats: 3,
            progress: true,
            keep_file: false,
            command: String::new(),
        }
    }

    /// Every point of the sweep, in the order they run: grouped by method, then op, pattern,
    /// cache state, threads and transfer size.
    pub fn points(&self) -> Vec<PointSpec> {
        let mut points = Vec::new();
        for &method in &self.methods {
            for &op in &self.ops {
                for &pattern in &self.patterns {
                    for &cache in &self.caches {
                        for &threads in &self.threads {
                            for &transfer_bytes in &self.transfer_sizes {
                                points.push(PointSpec {
                                    method,
                                    op,
                                    pattern,
                                    cache,
                                    transfer_bytes,
                                    threads,
                                });
                            }
                        }
                    }
                }
            }
        }
        points
    }

    fn validate(&self) -> Result<(), BenchError> {
        let fail = |detail: &str| Err(BenchError::Config(detail.to_string()));
        if self.methods.is_empty() || self.ops.is_empty() || self.patterns.is_empty() {
            return fail("choose at least one method, op and pattern");
        }
        if self.caches.is_empty() || self.transfer_sizes.is_empty() || self.threads.is_empty() {
            return fail("choose at least one cache state, transfer size and thread count");
        }
        if self.transfer_sizes.contains(&0) {
            return fail("transfer sizes must be positive");
        }
        if self.threads.iter().any(|&threads| threads == 0 || threads > 1024) {
            return fail("thread counts must be between 1 and 1024");
        }
        if self.file_bytes < 4096 {
            return fail("the file must be at least 4 KiB");
        }
        if self.duration.is_zero() {
            return fail("the duration per point must be positive");
        }
        if self.compare_fio && self.fio_repeats == 0 {
            return fail("fio comparisons need at least one repeat");
        }
        Ok(())
    }
}

/// Seed of the random offsets unless one is given.
pub const DEFAULT_SEED: u64 = 0xde71_ce5e_ed00_0001;

/// 1, 2, 4, ... up to `cores`, and `cores` itself.
pub fn default_threads(cores: usize) -> Vec<usize> {
    let mut threads: Vec<usize> =
        std::iter::successors(Some(1usize), |&n| Some(n * 2)).take_while(|&n| n < cores).collect();
    threads.push(cores.max(1));
    threads
}

/// Runs the sweep (and the fio comparisons) and returns the report.
pub fn run(config: &DeviceConfig) -> Result<DeviceReport, BenchError> {
    config.validate()?;
    let fio_available = if config.compare_fio {
        match fio::detect() {
            fio::FioStatus::Available { .. } => true,
            fio::FioStatus::Missing { hint } => {
                eprintln!("tierkv bench device: --compare-fio needs fio, which is missing. {hint}");
                false
            }
        }
    } else {
        false
    };
    let target = Target::prepare(config)?;
    let points = config.points();
    let mut comparisons = Vec::new();
    let mut fio_skipped = Vec::new();
    if fio_available {
        for spec in &points {
            match fio::unsupported_reason(spec) {
                None if target.unit_bytes(spec) == spec.transfer_bytes => comparisons.push(*spec),
                None => fio_skipped.push((
                    *spec,
                    "fio comparison: the file's O_DIRECT alignment \
                    exceeds the transfer (tierkv reads or rewrites whole blocks)"
                        .to_string(),
                )),
                Some(reason) => fio_skipped.push((*spec, format!("fio comparison: {reason}"))),
            }
        }
    }
    let progress = progress_bar(config, points.len() + comparisons.len() * config.fio_repeats);
    let mut report = DeviceReport {
        command: config.command.clone(),
        machine: machine_info().into(),
        file: target.file_info(),
        duration_per_point_s: config.duration.as_secs_f64(),
        points: Vec::new(),
        fio: Vec::new(),
        skipped: fio_skipped,
    };
    for spec in &points {
        progress.set_message(spec.to_string());
        match target.skip_reason(spec) {
            Some(reason) => report.skipped.push((*spec, reason)),
            None => report.points.push(target.run_point(spec, config.duration)?),
        }
        progress.inc(1);
    }
    for spec in &comparisons {
        if let Some(reason) = target.skip_reason(spec) {
            report.skipped.push((*spec, format!("fio comparison: {reason}")));
            progress.inc(config.fio_repeats as u64);
            continue;
        }
        progress.set_message(format!("fio: {spec}"));
        report.fio.push(fio::compare(&target, spec, config, &progress)?);
    }
    progress.finish_and_clear();
    target.finish(config)?;
    Ok(report)
}

fn progress_bar(config: &DeviceConfig, total: usize) -> ProgressBar {
    if !config.progress {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total as u64);
    let style = ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {pos}/{len} points, ETA {eta} {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// Writes `report` as pretty JSON.
pub fn write_json(report: &DeviceReport, path: &Path) -> Result<(), BenchError> {
    let text = serde_json::to_string_pretty(report)
        .map_err(|e| BenchError::Output { path: path.to_path_buf(), source: e.into() })?;
    std::fs::write(path, text)
        .map_err(|source| BenchError::Output { path: path.to_path_buf(), source })
}

/// Opens `path` with `method` for the measurement (used by the runner and by tests).
pub(crate) fn open_for(path: &Path, method: AccessMethod) -> Result<tierkv_io::File, BenchError> {
    // Chunk 1: the runner sizes the file once; no point may grow it.
    Ok(Storage::Os.open(path, &OpenOptions::new(method).chunk_bytes(1))?)
}
