//! `tierkv bench tier`: the tier cache's experiments (seed 002).
//!
//! - **YCSB through the engine** in six configurations (`CONFIGS`): no tier; a tier
//!   without Overhead Bypass; a tier with it; an exclusive tier without it (demotion from
//!   the page cache, hits moved up); the page cache enlarged by the tier's size ("all
//!   DRAM", the upper bound); and the OS page cache as the second level (buffered reads in a
//!   memory cgroup of the same total budget). The runs themselves are `tierkv
//!   bench ycsb` processes (the CLI starts them); this module holds their report, its table
//!   and its plot.
//! - **Readers against writers** (`run_writers`), seed 002's figure 2: the read throughput
//!   of a fixed set of readers of the tier as writers are added, each writer admitting
//!   blocks as fast as it can, with and without a slow-tier emulation.
//!
//! With `--repeats`, every configuration runs once per round, in an order rotated each
//! round, and the table gives medians: the ratio of the medians, and the median of the
//! ratios each round measured side by side (drift on a shared machine hits a round's runs
//! alike).
//!
//! Every figure comes from a run; nothing here asserts on speed.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tierkv_tiercache::{Admission, AdmitSource, SlowTier, TierCache, TierKey, TierOptions};

use crate::bars::{render_bars, Bar, BarChart, Group};
use crate::canvas::write_svg;
use crate::device::{BenchError, Machine};
use crate::lines::{render_lines, Line, LineChart, Scale};
use crate::summary::{median, median_of_present};
use crate::ycsb::driver::{EngineRun, PhaseResult};

pub use tierkv_io::RegionBacking;

/// The configurations of the YCSB experiment, in the order they run.
pub const CONFIGS: [&str; 6] =
    ["no-tier", "tier-no-bypass", "tier", "tier-exclusive", "all-dram", "os-cache"];

/// What a configuration is, in words.
pub fn describe_config(name: &str) -> Option<&'static str> {
    Some(match name {
        "no-tier" => "no tier: the page cache, then the device (direct reads)",
        "tier-no-bypass" => "a tier without Overhead Bypass",
        "tier" => "a tier with Overhead Bypass (10%)",
        "tier-exclusive" => {
            "an exclusive tier without Overhead Bypass: pages the page cache evicts are \
             demoted to it, and a hit moves its block up"
        }
        "all-dram" => "no tier, the page cache enlarged by the tier's size (the upper bound)",
        "os-cache" => {
            "no tier, buffered reads: the OS page cache is the second level, in a memory \
             cgroup of the same total budget"
        }
        _ => return None,
    })
}

/// One configuration's run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConfigRun {
    /// Its name (`CONFIGS`).
    pub config: String,
    /// The round it ran in, from 0 (with `--repeats`, every configuration runs once a round).
    #[serde(default)]
    pub round: usize,
    /// The largest fraction of a store file's pages left in the OS page cache when the run
    /// began, after its copy was evicted (0: started cold).
    #[serde(default)]
    pub os_cache_left: Option<f64>,
    /// What it is.
    pub description: String,
    /// The `tierkv bench ycsb` command line that ran it.
    pub command: String,
    /// Its report: settings, phases (each with the engine's counters after it), memory.
    pub run: EngineRun,
}

/// A readers-against-writers measurement.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WritersPoint {
    /// `dram`, or the emulation's name.
    pub tier: String,
    /// The emulation in words, if any.
    pub emulation: Option<String>,
    /// Reader threads.
    pub readers: usize,
    /// Writer threads.
    pub writers: usize,
    /// Seconds measured.
    pub seconds: f64,
    /// Blocks the readers copied out per second, together.
    pub read_ops_per_sec: f64,
    /// Bytes per second those were.
    pub read_bytes_per_sec: f64,
    /// Blocks the writers admitted per second, together.
    pub write_ops_per_sec: f64,
    /// Bytes per second those were.
    pub write_bytes_per_sec: f64,
}

/// The whole `tierkv bench tier` report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TierReport {
    /// The command line.
    pub command: String,
    /// The machine.
    pub machine: Machine,
    /// Records loaded.
    pub records: u64,
    /// The engine's page cache budget (`cache_size`), bytes.
    pub cache_bytes: u64,
    /// The tier's size, bytes.
    pub tier_bytes: u64,
    /// Where the tier's memory came from, in words.
    pub tier_backing: String,
    /// The emulation in force in the YCSB runs, in words, if any.
    pub emulation: Option<String>,
    /// Bytes of the store's block files after the load.
    pub data_bytes: u64,
    /// The load, run once; every configuration starts from a copy of the loaded store.
    pub load: Option<PhaseResult>,
    /// Each configuration's run.
    pub configs: Vec<ConfigRun>,
    /// Readers against writers.
    pub writers: Vec<WritersPoint>,
}

/// A phase's tier counters, as the engine reported them after it (cumulative).
fn tier_counter(phase: &PhaseResult, name: &str) -> Option<f64> {
    phase.engine_counters.as_ref()?.get("tier")?.get(name)?.as_f64()
}

/// The tier's hit ratio during `phase`: the difference of the counters after it and after
/// `before`.
pub fn phase_tier_hit_ratio(before: Option<&PhaseResult>, phase: &PhaseResult) -> Option<f64> {
    let delta = |name: &str| {
        let after = tier_counter(phase, name)?;
        let earlier = before.and_then(|b| tier_counter(b, name)).unwrap_or(0.0);
        Some(after - earlier)
    };
    let lookups = delta("lookups")?;
    (lookups > 0.0).then(|| delta("hits").unwrap_or(0.0) / lookups)
}

/// Seconds Overhead Bypass was in force during `phase`.
pub fn phase_bypass_seconds(before: Option<&PhaseResult>, phase: &PhaseResult) -> Option<f64> {
    let after = tier_counter(phase, "bypass_seconds")?;
    Some(after - before.and_then(|b| tier_counter(b, "bypass_seconds")).unwrap_or(0.0))
}

impl TierReport {
    /// The configurations run, in the order of the first round.
    fn config_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for config in &self.configs {
            if !names.contains(&config.config.as_str()) {
                names.push(&config.config);
            }
        }
        names
    }

    /// Rounds run.
    fn rounds(&self) -> usize {
        self.configs.iter().map(|c| c.round + 1).max().unwrap_or(0)
    }

    /// The successful runs of `config`.
    fn runs<'a>(&'a self, config: &'a str) -> impl Iterator<Item = &'a ConfigRun> {
        self.configs.iter().filter(move |c| c.config == config && c.run.failure.is_none())
    }

    /// `config`'s ops/s on `workload` in `round`.
    fn round_ops(&self, config: &str, workload: &str, round: usize) -> Option<f64> {
        let run = &self.runs(config).find(|c| c.round == round)?.run;
        Some(run.phases.iter().find(|p| p.phase == workload)?.ops_per_sec)
    }

    /// The ratio of `config` to no tier on `workload`, for each round that has both.
    fn round_ratios(&self, config: &str, workload: &str) -> Vec<f64> {
        (0..self.rounds())
            .filter_map(|round| {
                let ops = self.round_ops(config, workload, round)?;
                let base = self.round_ops("no-tier", workload, round)?;
                (base > 0.0).then(|| ops / base)
            })
            .collect()
    }

    /// The workloads run, in order.
    fn workloads(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for phase in self.configs.iter().flat_map(|c| &c.run.phases) {
            if !names.contains(&phase.phase) {
                names.push(phase.phase.clone());
            }
        }
        names
    }

    /// `config`'s ops/s on `workload`: the median over its rounds.
    fn ops(&self, config: &str, workload: &str) -> Option<f64> {
        median_of_present((0..self.rounds()).map(|round| self.round_ops(config, workload, round)))
    }

    /// The table: ops/s per configuration and workload (medians over the rounds), each with
    /// its ratio to no tier; with more than one round, each configuration's runs and the
    /// median of the ratios measured in the same round; then the tier's hit ratio and
    /// Overhead Bypass time per workload.
    pub fn table(&self) -> String {
        let workloads = self.workloads();
        let rounds = self.rounds();
        let mut out = String::new();
        if rounds > 1 {
            out += &format!(
                "medians of {rounds} rounds (each round runs every configuration, in an order \
                 rotated by one each round)\n"
            );
        }
        out += &format!("{:<16}", "config");
        for w in &workloads {
            out += &format!("{:>20}", format!("{} ops/s (÷ none)", w.to_ascii_uppercase()));
        }
        out += "\n";
        for name in self.config_names() {
            out += &format!("{name:<16}");
            if self.runs(name).next().is_none() {
                let failure = self
                    .configs
                    .iter()
                    .find_map(|c| (c.config == name).then_some(c.run.failure.as_deref()).flatten());
                out += &format!("failed: {}\n", failure.unwrap_or("no run"));
                continue;
            }
            for w in &workloads {
                let cell = match (self.ops(name, w), self.ops("no-tier", w)) {
                    (Some(ops), Some(base)) if base > 0.0 => {
                        format!("{ops:.0} ({:.2})", ops / base)
                    }
                    (Some(ops), _) => format!("{ops:.0}"),
                    (None, _) => "-".into(),
                };
                out += &format!("{cell:>20}");
            }
            out += "\n";
        }
        if rounds > 1 {
            out += "\nratio to no tier measured in each round: median [lowest, highest]\n";
            for name in self.config_names().into_iter().filter(|&n| n != "no-tier") {
                out += &format!("{name:<16}");
                for w in &workloads {
                    let ratios = self.round_ratios(name, w);
                    let cell = match ratios.iter().copied().reduce(f64::min) {
                        Some(low) => {
                            let high = ratios.iter().copied().fold(low, f64::max);
                            format!("{:.3} [{low:.3}, {high:.3}]", median(&ratios))
                        }
                        None => "-".into(),
                    };
                    out += &format!("{cell:>24}");
                }
                out += "\n";
            }
            out += "\nops/s of each round\n";
            for name in self.config_names() {
                for w in &workloads {
                    let figures: Vec<String> = (0..rounds)
                        .map(|round| {
                            self.round_ops(name, w, round)
                                .map_or("-".into(), |ops| format!("{ops:.0}"))
                        })
                        .collect();
                    out +=
                        &format!("{name:<16}{:>3} {}\n", w.to_ascii_uppercase(), figures.join(" "));
                }
            }
        }
        let tiered: Vec<&str> =
            self.config_names().into_iter().filter(|c| c.starts_with("tier")).collect();
        if !tiered.is_empty() {
            out += "\ntier hit ratio per workload (bypass seconds), medians over the rounds\n";
            for name in tiered {
                out += &format!("{name:<16}");
                let runs: Vec<&ConfigRun> = self.runs(name).collect();
                let Some(first) = runs.first() else {
                    out += "\n";
                    continue;
                };
                for (i, phase) in first.run.phases.iter().enumerate() {
                    let figure = |f: fn(Option<&PhaseResult>, &PhaseResult) -> Option<f64>| {
                        median_of_present(runs.iter().map(|run| {
                            let phases = &run.run.phases;
                            let before = i.checked_sub(1).and_then(|j| phases.get(j));
                            f(before, phases.get(i)?)
                        }))
                    };
                    let cell = match (figure(phase_tier_hit_ratio), figure(phase_bypass_seconds)) {
                        (Some(r), Some(b)) => format!("{}: {r:.3} ({b:.1} s)", phase.phase),
                        _ => format!("{}: -", phase.phase),
                    };
                    out += &format!("{cell:>20}");
                }
                out += "\n";
            }
        }
        if !self.writers.is_empty() {
            out += &format!(
                "\nreaders of the tier against writers: {} readers\n{:<10}{:>9}{:>16}{:>16}\n",
                self.writers[0].readers, "tier", "writers", "read GB/s", "write GB/s"
            );
            for point in &self.writers {
                out += &format!(
                    "{:<10}{:>9}{:>16.3}{:>16.3}\n",
                    point.tier,
                    point.writers,
                    point.read_bytes_per_sec / 1e9,
                    point.write_bytes_per_sec / 1e9
                );
            }
        }
        out
    }

    fn footer(&self) -> String {
        let rounds = match self.rounds() {
            0 | 1 => String::new(),
            n => format!(" | medians of {n} rounds"),
        };
        format!(
            "CPU: {} ({} cores) | kernel {} | {} records, {:.0} MiB of block files | page \
             cache {} MiB, tier {} MiB{rounds}\ntier: {}{}",
            self.machine.cpu_model,
            self.machine.cores,
            self.machine.kernel,
            self.records,
            self.data_bytes as f64 / 1048576.0,
            self.cache_bytes >> 20,
            self.tier_bytes >> 20,
            self.tier_backing,
            self.emulation.as_ref().map_or(String::new(), |e| format!(" | {e}"))
        )
    }

    /// Writes `throughput.svg` (ops/s by workload and configuration) and, with the writers
    /// experiment, `readers-vs-writers.svg`; returns their paths.
    pub fn write_plots(&self, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
        std::fs::create_dir_all(dir)
            .map_err(|source| BenchError::Output { path: dir.to_path_buf(), source })?;
        let footer = self.footer();
        let mut written = Vec::new();
        if !self.configs.is_empty() {
            let chart = BarChart {
                title: "YCSB through the engine: a tier beside the page cache".into(),
                y_label: "ops/s".into(),
                series: self.config_names().iter().map(|c| c.to_string()).collect(),
                groups: self
                    .workloads()
                    .iter()
                    .map(|w| Group {
                        label: w.to_ascii_uppercase(),
                        bars: self
                            .config_names()
                            .iter()
                            .map(|c| Bar { value: self.ops(c, w), reference: None })
                            .collect(),
                    })
                    .collect(),
                reference_label: None,
            };
            written.push(write_svg(dir, "throughput.svg", render_bars(&chart, &footer))?);
        }
        if !self.writers.is_empty() {
            let mut tiers: Vec<&str> = Vec::new();
            for point in &self.writers {
                if !tiers.contains(&point.tier.as_str()) {
                    tiers.push(&point.tier);
                }
            }
            let chart = LineChart {
                title: format!(
                    "Read throughput of {} tier readers as tier writers are added (seed 002, \
                     figure 2)",
                    self.writers[0].readers
                ),
                y_label: "read GB/s".into(),
                x_label: "concurrent writers".into(),
                x_scale: Scale::Linear,
                lines: tiers
                    .iter()
                    .map(|tier| Line {
                        name: (*tier).to_string(),
                        points: self
                            .writers
                            .iter()
                            .filter(|p| p.tier == *tier)
                            .map(|p| (p.writers as f64, p.read_bytes_per_sec / 1e9))
                            .collect(),
                        colour: None,
                        dash: None,
                    })
                    .collect(),
                bound: None,
                shades: Vec::new(),
            };
            written.push(write_svg(dir, "readers-vs-writers.svg", render_lines(&chart, &footer))?);
        }
        Ok(written)
    }
}

/// The readers-against-writers experiment.
#[derive(Clone, Debug)]
pub struct WritersConfig {
    /// The tier's memory.
    pub backing: RegionBacking,
    /// The tier's size.
    pub capacity_bytes: u64,
    /// Bytes of each block (the engine's pages are 8 KiB).
    pub block_bytes: usize,
    /// Reader threads.
    pub readers: usize,
    /// Writer counts, one measurement each.
    pub writers: Vec<usize>,
    /// Seconds per measurement.
    pub seconds: f64,
    /// Tiers to measure: `None` for plain memory, or an emulation.
    pub tiers: Vec<Option<SlowTier>>,
}

/// Runs the experiment: for each tier, a tier filled to 80% with blocks, then for each
/// writer count, the readers copy random blocks out while the writers admit new blocks
/// (and invalidate them again, so the tier stays as full). Overhead Bypass is off: the
/// point is what writes cost readers.
pub fn run_writers(
    config: &WritersConfig,
    progress: impl Fn(&str),
) -> Result<Vec<WritersPoint>, String> {
    let mut points = Vec::new();
    for emulation in &config.tiers {
        let tier = TierCache::open(TierOptions {
            backing: config.backing.clone(),
            overhead_bypass: false,
            eviction_interval: Duration::from_secs(3600),
            emulation: emulation.clone(),
            ..TierOptions::new(config.capacity_bytes)
        })
        .map_err(|e| e.to_string())?;
        let block = vec![0xa5u8; config.block_bytes];
        let resident = (config.capacity_bytes as f64 * 0.8) as u64 / config.block_bytes as u64;
        for id in 0..resident {
            if tier.admit(TierKey { id, version: 1 }, &[&block], AdmitSource::Read)
                != Admission::Admitted
            {
                return Err(format!("could not fill the tier: block {id} of {resident}"));
            }
        }
        let name = emulation.as_ref().map_or("dram".to_string(), |e| e.name.clone());
        for &writers in &config.writers {
            progress(&format!("{name}: {} readers, {writers} writers", config.readers));
            points.push(measure(&tier, config, &name, writers, resident, &block));
        }
    }
    Ok(points)
}

fn measure(
    tier: &TierCache,
    config: &WritersConfig,
    name: &str,
    writers: usize,
    resident: u64,
    block: &[u8],
) -> WritersPoint {
    let stop = AtomicBool::new(false);
    let (reads, writes) = (AtomicU64::new(0), AtomicU64::new(0));
    let started = Instant::now();
    std::thread::scope(|scope| {
        for reader in 0..config.readers {
            let (stop, reads) = (&stop, &reads);
            scope.spawn(move || {
                let mut out = Vec::with_capacity(block.len());
                let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ reader as u64;
                let mut done = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    if tier.get(TierKey { id: state % resident, version: 1 }, &mut out) {
                        done += 1;
                    }
                }
                reads.fetch_add(done, Ordering::Relaxed);
            });
        }
        for writer in 0..writers {
            let (stop, writes) = (&stop, &writes);
            scope.spawn(move || {
                let mut id = resident + (writer as u64) * (1 << 40);
                let mut done = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = TierKey { id, version: 1 };
                    if tier.admit(key, &[block], AdmitSource::Write) == Admission::Admitted {
                        done += 1;
                    }
                    tier.invalidate(key);
                    id += 1;
                }
                writes.fetch_add(done, Ordering::Relaxed);
            });
        }
        std::thread::sleep(Duration::from_secs_f64(config.seconds));
        stop.store(true, Ordering::Relaxed);
    });
    let seconds = started.elapsed().as_secs_f64();
    let (reads, writes) = (reads.into_inner() as f64, writes.into_inner() as f64);
    let bytes = block.len() as f64;
    let stats = tier.stats();
    WritersPoint {
        tier: name.into(),
        emulation: stats.emulation,
        readers: config.readers,
        writers,
        seconds,
        read_ops_per_sec: reads / seconds,
        read_bytes_per_sec: reads * bytes / seconds,
        write_ops_per_sec: writes / seconds,
        write_bytes_per_sec: writes * bytes / seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writers_experiment_runs_small_and_draws_its_figure() {
        let dir = tempfile::tempdir().expect("dir");
        let config = WritersConfig {
            backing: RegionBacking::File(dir.path().into()),
            capacity_bytes: 1 << 20,
            block_bytes: 8192,
            readers: 2,
            writers: vec![0, 1],
            seconds: 0.05,
            tiers: vec![None, SlowTier::preset("optane")],
        };
        let points = run_writers(&config, |_| {}).expect("run");
        assert_eq!(points.len(), 4);
        assert!(points.iter().all(|p| p.read_ops_per_sec > 0.0), "{points:?}");
        assert_eq!(points[0].write_ops_per_sec, 0.0);
        assert!(points[1].write_ops_per_sec > 0.0, "{points:?}");
        assert_eq!((points[2].tier.as_str(), points[2].emulation.is_some()), ("optane", true));
        let report = TierReport {
            command: "tierkv bench tier".into(),
            machine: crate::machine::machine_info().into(),
            records: 0,
            cache_bytes: 0,
            tier_bytes: 1 << 20,
            tier_backing: "test".into(),
            emulation: None,
            data_bytes: 0,
            load: None,
            configs: Vec::new(),
            writers: points,
        };
        assert!(report.table().contains("readers of the tier against writers: 2 readers"));
        let written = report.write_plots(&dir.path().join("plots")).expect("plots");
        assert_eq!(written.len(), 1);
        let svg = std::fs::read_to_string(&written[0]).expect("svg");
        assert!(svg.contains(">\noptane\n</text>") && svg.contains(">\ndram\n</text>"), "{svg}");
    }

    /// Per-phase hit ratios and bypass time come from the differences of the cumulative
    /// counters the engine reported after each phase.
    #[test]
    fn per_phase_tier_figures_are_differences_of_the_counters() {
        let phase = |name: &str, lookups: u64, hits: u64, bypass: f64| PhaseResult {
            phase: name.into(),
            operations: 1,
            seconds: 1.0,
            ops_per_sec: 1.0,
            not_found: 0,
            warmup_operations: 0,
            warmup_seconds: 0.0,
            per_operation: Vec::new(),
            engine_counters: Some(serde_json::json!({
                "tier": {"lookups": lookups, "hits": hits, "bypass_seconds": bypass}
            })),
        };
        let (a, c) = (phase("a", 100, 50, 2.0), phase("c", 300, 200, 2.5));
        assert_eq!(phase_tier_hit_ratio(None, &a), Some(0.5));
        assert_eq!(phase_tier_hit_ratio(Some(&a), &c), Some(0.75));
        assert_eq!(phase_bypass_seconds(Some(&a), &c), Some(0.5));
        let none = PhaseResult { engine_counters: None, ..a.clone() };
        assert_eq!(phase_tier_hit_ratio(None, &none), None);
        let run = |config: &str, ops: f64| ConfigRun {
            config: config.into(),
            round: 0,
            os_cache_left: None,
            description: String::new(),
            command: String::new(),
            run: EngineRun::new(
                "tierkv",
                vec![PhaseResult { ops_per_sec: ops, ..a.clone() }, c.clone()],
            ),
        };
        let report = TierReport {
            command: String::new(),
            machine: crate::machine::machine_info().into(),
            records: 0,
            cache_bytes: 0,
            tier_bytes: 0,
            tier_backing: String::new(),
            emulation: None,
            data_bytes: 0,
            load: None,
            configs: vec![run("no-tier", 100.0), run("tier", 250.0)],
            writers: Vec::new(),
        };
        let table = report.table();
        assert!(table.contains("250 (2.50)"), "{table}");
        assert!(
            table.contains("a: 0.500 (2.0 s)") && table.contains("c: 0.750 (0.5 s)"),
            "{table}"
        );
    }

    /// With rounds, the table gives medians, the median of each round's side-by-side
    /// ratios with its range, and every round's figure.
    #[test]
    fn repeated_rounds_are_summarised_by_medians() {
        let phase = |ops: f64| PhaseResult {
            phase: "a".into(),
            operations: 1,
            seconds: 1.0,
            ops_per_sec: ops,
            not_found: 0,
            warmup_operations: 0,
            warmup_seconds: 0.0,
            per_operation: Vec::new(),
            engine_counters: None,
        };
        let run = |config: &str, round: usize, ops: f64| ConfigRun {
            config: config.into(),
            round,
            os_cache_left: None,
            description: String::new(),
            command: String::new(),
            run: EngineRun::new("tierkv", vec![phase(ops)]),
        };
        let report = TierReport {
            command: String::new(),
            machine: crate::machine::machine_info().into(),
            records: 0,
            cache_bytes: 0,
            tier_bytes: 0,
            tier_backing: String::new(),
            emulation: None,
            data_bytes: 0,
            load: None,
            configs: vec![
                run("no-tier", 0, 100.0),
                run("tier", 0, 98.0),
                run("tier", 1, 120.0),
                run("no-tier", 1, 125.0),
                run("no-tier", 2, 90.0),
                run("tier", 2, 91.0),
            ],
            writers: Vec::new(),
        };
        let table = report.table();
        assert!(table.contains("medians of 3 rounds"), "{table}");
        // Medians 100 and 98: 0.98. Ratios per round 0.98, 0.96, 1.011: median 0.980.
        assert!(table.contains("98 (0.98)"), "{table}");
        assert!(table.contains("0.980 [0.960, 1.011]"), "{table}");
        assert!(table.contains("100 125 90") && table.contains("98 120 91"), "{table}");
    }
}
