//! The read-method comparison of `bench engine` (seed 000; see `mod.rs`'s header): the
//! store reopened with each read method in turn, random lookups timed on a cold engine
//! cache.

use std::path::Path;
use std::time::Instant;

use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use tierkv::{Db, Options};
use tierkv_io::AccessMethod;

use super::{engine_error, random_reads, EngineBenchConfig};
use crate::device::BenchError;
use crate::machine::machine_info;
use crate::summary::median_of_present;

/// One timed pass of random lookups with one read method.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReadMethodTrial {
    /// `syscall` or `mmap`.
    pub method: String,
    /// Which trial (pairs of one pass per method).
    pub trial: usize,
    /// Lookups per second.
    pub ops_per_sec: f64,
    /// Median latency, microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Page cache hits ÷ lookups during the pass.
    pub cache_hit_ratio: Option<f64>,
}

/// The read-method comparison (see the module header).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ReadMethodsReport {
    /// Lookups per pass.
    pub reads: u64,
    /// Every pass, in the order run.
    pub trials: Vec<ReadMethodTrial>,
    /// Median ops/s of the `syscall` passes.
    pub syscall_median_ops_per_sec: Option<f64>,
    /// Median ops/s of the `mmap` passes.
    pub mmap_median_ops_per_sec: Option<f64>,
    /// mmap's median ÷ syscall's.
    pub mmap_over_syscall: Option<f64>,
    /// Whether the store's files fit in the machine's memory (so the OS page cache can hold
    /// them) while being larger than the engine's cache: the case seed 000 measures.
    pub data_fits_os_cache_not_engine_cache: bool,
}

/// Reopens the store at `dir` with each read method in turn, `trials` times, and times
/// random lookups on a cold engine cache (see the module header).
pub(super) fn compare_read_methods(
    config: &EngineBenchConfig,
    dir: &Path,
    trials: usize,
    store_file_bytes: u64,
    bar: &ProgressBar,
) -> Result<ReadMethodsReport, BenchError> {
    if store_file_bytes == 0 {
        return Err(BenchError::Engine(
            "the read-method comparison needs a filled store: put fillseq or fillrandom \
             among the workloads"
                .into(),
        ));
    }
    let mut rng = fastrand::Rng::with_seed(config.seed ^ 0x5eed);
    let mut passes = Vec::new();
    for trial in 0..trials {
        let order = match trial % 2 {
            0 => [AccessMethod::Syscall, AccessMethod::Mmap],
            _ => [AccessMethod::Mmap, AccessMethod::Syscall],
        };
        for method in order {
            bar.set_message(format!("readrandom, {method} read method, trial {}", trial + 1));
            let options = Options { read_method: method, ..config.options.clone() };
            let store = Db::open(dir, options).map_err(engine_error)?;
            let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
                .map_err(|e| BenchError::Engine(e.to_string()))?;
            let before = store.stats().map_err(engine_error)?.cache;
            let started = Instant::now();
            random_reads(&store, config, &mut rng, &mut histogram, bar, None)?;
            let seconds = started.elapsed().as_secs_f64();
            let after = store.stats().map_err(engine_error)?.cache;
            store.close().map_err(engine_error)?;
            let lookups = (after.hits + after.misses).saturating_sub(before.hits + before.misses);
            let micros = |q: f64| histogram.value_at_quantile(q) as f64 / 1_000.0;
            passes.push(ReadMethodTrial {
                method: method.to_string(),
                trial,
                ops_per_sec: config.reads as f64 / seconds,
                p50_us: micros(0.5),
                p99_us: micros(0.99),
                cache_hit_ratio: (lookups > 0)
                    .then(|| after.hits.saturating_sub(before.hits) as f64 / lookups as f64),
            });
        }
    }
    let median = |method: AccessMethod| {
        let name = method.to_string();
        median_of_present(passes.iter().filter(|p| p.method == name).map(|p| Some(p.ops_per_sec)))
    };
    let (syscall, mmap) = (median(AccessMethod::Syscall), median(AccessMethod::Mmap));
    let memory = machine_info().memory_bytes;
    Ok(ReadMethodsReport {
        reads: config.reads,
        trials: passes,
        syscall_median_ops_per_sec: syscall,
        mmap_median_ops_per_sec: mmap,
        mmap_over_syscall: syscall.zip(mmap).map(|(s, m)| m / s),
        data_fits_os_cache_not_engine_cache: store_file_bytes < memory / 2
            && store_file_bytes > config.options.cache_size as u64,
    })
}
