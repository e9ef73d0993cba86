//! What a YCSB run reports (see `driver.rs`'s header): each phase's figures
//! (`PhaseResult`, with each operation type's percentiles and CDF), an engine's run
//! (`EngineRun`), the whole report (`YcsbReport`), and the tables printed from them.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latencies of one operation type.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OperationStats {
    /// `read`, `update`, `insert`, `scan` or `read_modify_write`.
    pub operation: String,
    /// Operations done.
    pub count: u64,
    /// Percentiles, microseconds.
    pub p50_us: f64,
    /// 95th.
    pub p95_us: f64,
    /// 99th.
    pub p99_us: f64,
    /// 99.9th.
    pub p999_us: f64,
    /// The slowest.
    pub max_us: f64,
    /// Latency at each of `CDF_PERCENTILES`, rising to `max_us` at 100.
    #[serde(default)]
    pub cdf: Vec<CdfPoint>,
}

/// One point of a latency CDF.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CdfPoint {
    /// Percentile, 0 to 100.
    pub percentile: f64,
    /// Latency at or under which that share of the operations completed, microseconds
    /// (HdrHistogram's 3 significant digits).
    pub latency_us: f64,
}

/// Percentiles of each operation's CDF: 0, 1, then every 5 to 90, then closer into the
/// tail, ending at 100 (the max). 29 points keep the JSON small.
pub const CDF_PERCENTILES: [f64; 29] = [
    0.0, 1.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0, 45.0, 50.0, 55.0, 60.0, 65.0, 70.0,
    75.0, 80.0, 85.0, 90.0, 95.0, 97.5, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999, 100.0,
];

/// One phase: the load, or one workload's run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PhaseResult {
    /// `load`, or the workload's letter.
    pub phase: String,
    /// Operations done.
    pub operations: u64,
    /// Seconds they took.
    pub seconds: f64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Reads (and the reads of updates and read-modify-writes) that found no record.
    pub not_found: u64,
    /// Warm-up requests run before the measured part, in none of the figures here.
    #[serde(default)]
    pub warmup_operations: u64,
    /// Seconds the warm-up took.
    #[serde(default)]
    pub warmup_seconds: f64,
    /// Per operation type, in a fixed order.
    pub per_operation: Vec<OperationStats>,
    /// The engine's own counters after the phase (`Store::counters`), when it reports any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_counters: Option<serde_json::Value>,
}

/// `histogram`'s latency at each of `CDF_PERCENTILES`, in microseconds: rising, and the last
/// point the max.
pub(super) fn cdf(histogram: &Histogram<u64>) -> Vec<CdfPoint> {
    let max_us = histogram.max() as f64 / 1_000.0;
    let mut floor_us = 0.0f64;
    let points: Vec<CdfPoint> = CDF_PERCENTILES
        .iter()
        .map(|&percentile| {
            let at = histogram.value_at_quantile(percentile / 100.0) as f64 / 1_000.0;
            let latency_us = if percentile >= 100.0 { max_us } else { at.min(max_us) };
            // HdrHistogram's quantiles rise already; the floor keeps that true of the points.
            floor_us = floor_us.max(latency_us);
            CdfPoint { percentile, latency_us: floor_us }
        })
        .collect();
    debug_assert!(points.last().is_none_or(|p| p.latency_us == max_us));
    points
}

/// A readable table of `phases`: ops/s, then each operation type's count and percentiles.
pub fn table(phases: &[PhaseResult]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<6} {:>12} {:>10}  {:<18} {:>10} {:>9} {:>9} {:>9} {:>10}",
        "phase", "ops/s", "seconds", "operation", "count", "p50 us", "p99 us", "p99.9 us", "max us"
    );
    for phase in phases {
        for (index, op) in phase.per_operation.iter().enumerate() {
            let (name, rate, seconds) = match index {
                0 => (
                    phase.phase.clone(),
                    format!("{:.0}", phase.ops_per_sec),
                    format!("{:.2}", phase.seconds),
                ),
                _ => (String::new(), String::new(), String::new()),
            };
            let _ = writeln!(
                out,
                "{name:<6} {rate:>12} {seconds:>10}  {:<18} {:>10} {:>9.1} {:>9.1} {:>9.1} {:>10.1}",
                op.operation, op.count, op.p50_us, op.p99_us, op.p999_us, op.max_us
            );
        }
        if phase.not_found > 0 {
            let _ = writeln!(out, "{:<6} {} reads found no record", "", phase.not_found);
        }
        if phase.warmup_operations > 0 {
            let _ = writeln!(
                out,
                "{:<6} after {} warm-up operations ({:.2} s), not counted",
                "", phase.warmup_operations, phase.warmup_seconds
            );
        }
    }
    out
}

/// One engine's phases.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EngineRun {
    /// `tierkv`, `rocksdb` (Debian's), `rocksdb-crate` (a current release built from
    /// source), `redb`, `fjall`, …
    pub engine: String,
    /// The engine's name and release as it ran, e.g. `RocksDB 7.8.3 (Debian's librocksdb)`,
    /// `fjall 3.1.13` (see `ycsb::versions`); empty in reports made before it was recorded.
    #[serde(default)]
    pub version: String,
    /// How the engine was configured: cache, durability, compression, I/O.
    #[serde(default)]
    pub settings: String,
    /// The most memory its process's cgroup used, page cache included, when it ran in one.
    #[serde(default)]
    pub peak_memory_bytes: Option<u64>,
    /// The most anonymous memory (heap, not page cache) its cgroup held, or without one its
    /// process, sampled every 50 ms, when it ran in a process of its own: the engine's own
    /// footprint.
    #[serde(default)]
    pub peak_anon_bytes: Option<u64>,
    /// Why the engine did not finish, when it failed (its phases are then empty).
    #[serde(default)]
    pub failure: Option<String>,
    /// Client threads of this run (0 in reports of one thread count: the report's).
    #[serde(default)]
    pub threads: usize,
    /// The load, then each workload.
    pub phases: Vec<PhaseResult>,
}

/// A list of counts, or one count as a bare number (reports written before thread counts
/// were lists).
fn one_or_many<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<usize>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(usize),
        Many(Vec<usize>),
    }
    Ok(match OneOrMany::deserialize(deserializer)? {
        OneOrMany::One(one) => vec![one],
        OneOrMany::Many(many) => many,
    })
}

impl EngineRun {
    /// The engine's name, and its thread count where a report has runs of several.
    pub fn label(&self, several_thread_counts: bool) -> String {
        match several_thread_counts {
            true => format!("{} ×{}", self.engine, self.threads),
            false => self.engine.clone(),
        }
    }

    /// A run of `engine` with no settings, memory or failure recorded.
    pub fn new(engine: &str, phases: Vec<PhaseResult>) -> EngineRun {
        EngineRun {
            engine: engine.into(),
            version: String::new(),
            settings: String::new(),
            peak_memory_bytes: None,
            peak_anon_bytes: None,
            failure: None,
            threads: 0,
            phases,
        }
    }
}

/// A whole `tierkv bench ycsb` run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct YcsbReport {
    /// The command line.
    pub command: String,
    /// Where it ran.
    pub machine: crate::device::Machine,
    /// Records loaded.
    pub records: u64,
    /// Requests per workload, at most (0: no count, `duration_s` bounds each workload).
    pub operations: u64,
    /// Each workload's bound in seconds besides `operations`, whichever came first.
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// Operations per second across the threads, if paced.
    #[serde(default)]
    pub target_ops_per_sec: Option<f64>,
    /// Warm-up requests before each workload's measured part.
    #[serde(default)]
    pub warmup_operations: u64,
    /// Client thread counts, in the order run (every engine ran at each); a report of one
    /// count may hold it as a bare number.
    #[serde(deserialize_with = "one_or_many")]
    pub threads: Vec<usize>,
    /// Durability of every write.
    pub durability: String,
    /// Each engine's cache, bytes.
    pub cache_bytes: usize,
    /// The process's allocator.
    pub allocator: String,
    /// The memory limit each engine ran under (its own cgroup, page cache included), if any.
    #[serde(default)]
    pub memory_limit_bytes: Option<u64>,
    /// How the engines were kept apart: one process for all, or one process (and cgroup)
    /// each.
    #[serde(default)]
    pub isolation: String,
    /// Each engine's phases, in the order run.
    pub engines: Vec<EngineRun>,
}

/// Ops/s of each engine's run phases, side by side, with tierkv's ratio to the best peer
/// in each column (when tierkv and a peer both ran).
pub fn comparison(runs: &[EngineRun]) -> String {
    use std::fmt::Write as _;
    // The columns of the first engine that ran (one that failed has no phases).
    let phases: Vec<String> = runs
        .iter()
        .find(|run| !run.phases.is_empty())
        .map(|run| run.phases.iter().map(|p| p.phase.clone()).collect())
        .unwrap_or_default();
    let rate = |phases: &[PhaseResult], name: &str| {
        phases.iter().find(|p| p.phase == name).map(|p| p.ops_per_sec)
    };
    // The engine column fits the longest name (`rocksdb-crate`), and is at least 10 wide.
    let width = runs.iter().map(|run| run.engine.chars().count()).fold(10, usize::max);
    let mut out = format!("{:<width$}", "engine");
    for phase in &phases {
        let _ = write!(out, " {phase:>10}");
    }
    out.push('\n');
    for run in runs {
        let _ = write!(out, "{:<width$}", run.engine);
        for phase in &phases {
            let cell = rate(&run.phases, phase).map_or("-".into(), |r| format!("{r:.0}"));
            let _ = write!(out, " {cell:>10}");
        }
        out.push('\n');
    }
    let ours = runs.iter().find(|run| run.engine == "tierkv");
    if let Some(ours) = ours.filter(|_| runs.len() > 1) {
        let _ = write!(out, "{:<width$}", "ratio");
        for phase in &phases {
            let best = runs
                .iter()
                .filter(|run| run.engine != "tierkv")
                .filter_map(|run| rate(&run.phases, phase))
                .fold(None, |best: Option<f64>, r| Some(best.map_or(r, |b| b.max(r))));
            let cell = match (rate(&ours.phases, phase), best) {
                (Some(ours), Some(best)) if best > 0.0 => format!("{:.2}", ours / best),
                _ => "-".into(),
            };
            let _ = write!(out, " {cell:>10}");
        }
        out.push('\n');
    }
    out
}
