//! `tierkv bench tier`: the tier cache's experiments (`tierkv_bench::tier`).
//!
//! The YCSB experiment loads one store (direct reads, the page cache far smaller than the
//! data), then runs each configuration on a copy of it, in a `tierkv bench ycsb` process of
//! its own (`--store COPY --skip-load`), and collects their reports. The copy's files are
//! evicted from the OS page cache first (`tierkv_bench::machine::evict_file`): copying them
//! cached them, outside the configuration's memory cgroup, and a buffered-read
//! configuration would otherwise start with its data in memory nobody counts. The OS-cache
//! configuration's process runs in a memory cgroup of the page cache plus the tier plus
//! `--overhead-size`, the same total the tiered runs use. The readers-against-writers
//! experiment runs in this process.
//!
//! The stores and their copies live in a scratch directory (`tierkv_bench::scratch`),
//! removed at the end, on a panic, and on Ctrl-C after the running child is stopped.
//!
//! Must never: leave a store copy behind, or call a configuration what it was not.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use tierkv::{RegionBacking, SlowTier};
use tierkv_bench::scratch::{ScratchDir, WatchedChild};
use tierkv_bench::tier::{
    describe_config, run_writers, ConfigRun, TierReport, WritersConfig, CONFIGS,
};
use tierkv_bench::ycsb::driver::{self, EngineRun, YcsbConfig, YcsbReport};
use tierkv_bench::ycsb::WorkloadSpec;
use tierkv_io::AccessMethod;

use crate::flags::{parse_count, parse_duration, parse_size, ByteSize};
use crate::flags::{COUNTS, DURATION, NAMES, SIZE};
use crate::ReportArgs;

#[derive(Args)]
pub(crate) struct TierArgs {
    /// Directory for the stores (on a disk: data reads are direct).
    #[arg(long)]
    path: PathBuf,
    /// How the tiered and DRAM configurations read pages: syscall (the default everywhere)
    /// or direct, so that the OS page cache serves none of them (the committed experiments
    /// use direct). The os-cache configuration always reads through the OS page cache.
    #[arg(long, default_value = "syscall")]
    read_method: AccessMethod,
    /// Records loaded (10 fields of 100 bytes each).
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// The engine's memory budget (its buffer pool and the older values kept for snapshots).
    #[arg(long, default_value = "256m", value_name = SIZE, value_parser = parse_size)]
    cache_size: ByteSize,
    /// Size of the tier (default: twice --cache-size).
    #[arg(long, value_name = SIZE, value_parser = parse_size)]
    tier_size: Option<ByteSize>,
    /// The tier's memory: `anonymous`, or a directory (a tmpfs such as /dev/shm, a DAX mount)
    /// or file to map.
    #[arg(long, default_value = "anonymous")]
    tier_backing: String,
    /// Emulate a slow tier in the YCSB runs: optane, cxl, or read_ns=N,write_ns=N,
    /// read_mbps=N,write_mbps=N.
    #[arg(long, value_parser = SlowTier::parse)]
    tier_emulate: Option<SlowTier>,
    /// YCSB workloads, in order.
    #[arg(long, value_delimiter = ',', default_value = "a,b,c,d", value_name = NAMES)]
    workloads: Vec<String>,
    /// How long each workload is measured.
    #[arg(long, default_value = "20s", value_name = DURATION, value_parser = parse_duration)]
    duration: Duration,
    /// Requests of each workload run first, unmeasured.
    #[arg(long, default_value_t = 200_000)]
    warmup: u64,
    /// Requests of the first workload run first, unmeasured, instead of --warmup: enough
    /// to fill the page cache and the tier once (Overhead Bypass admits at most a tenth of
    /// the lookups, so a tier fills slowly).
    #[arg(long, default_value_t = 2_000_000)]
    warmup_first: u64,
    /// Client threads of the YCSB runs: a list, of one count (the rounds' medians and
    /// ratios compare runs of one count).
    #[arg(long, value_delimiter = ',', default_value = "2", value_name = COUNTS, value_parser = parse_count)]
    threads: Vec<usize>,
    /// Configurations, comma-separated, from no-tier, tier-no-bypass, tier,
    /// tier-exclusive, all-dram, os-cache; or `none` for the writers experiment alone.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "no-tier,tier-no-bypass,tier,tier-exclusive,all-dram,os-cache",
        value_name = NAMES
    )]
    configs: Vec<String>,
    /// Rounds: every configuration runs once a round, each round in an order rotated by one
    /// (so that none always runs first), and the table gives medians and the ratios each
    /// round measured side by side.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    repeats: u32,
    /// Memory the os-cache configuration's cgroup allows beyond the page cache and the
    /// tier: the engine's own memory besides its caches.
    #[arg(long, default_value = "128m", value_name = SIZE, value_parser = parse_size)]
    overhead_size: ByteSize,
    /// Reader threads of the readers-against-writers experiment (0: skip it).
    #[arg(long, default_value_t = 8)]
    readers: usize,
    /// Writer counts of that experiment.
    #[arg(long, value_delimiter = ',', default_value = "0,1,2,4,8", value_name = COUNTS, value_parser = parse_count)]
    writers: Vec<usize>,
    /// Where that experiment's tier lives: `anonymous`, or a directory such as /dev/shm.
    #[arg(long, default_value = "/dev/shm")]
    writers_backing: String,
    /// Size of that experiment's tier.
    #[arg(long, default_value = "256m", value_name = SIZE, value_parser = parse_size)]
    writers_tier_size: ByteSize,
    /// Length of each point of that experiment.
    #[arg(long, default_value = "3s", value_name = DURATION, value_parser = parse_duration)]
    writers_duration: Duration,
    #[command(flatten)]
    report: ReportArgs,
}

fn backing(text: &str) -> RegionBacking {
    match text {
        "anonymous" => RegionBacking::Anonymous,
        path => RegionBacking::File(path.into()),
    }
}

pub(crate) fn bench_tier(args: TierArgs) -> Result<ExitCode, String> {
    let configs: Vec<String> = match args.configs.as_slice() {
        [none] if none == "none" => Vec::new(),
        names => names.to_vec(),
    };
    if let Some(unknown) = configs.iter().find(|c| !CONFIGS.contains(&c.as_str())) {
        return Err(format!("unknown configuration {unknown:?}; expected {}", CONFIGS.join(", ")));
    }
    for name in &args.workloads {
        WorkloadSpec::core(name)
            .ok_or_else(|| format!("unknown workload {name:?}; expected a letter from a to f"))?;
    }
    if args.threads.len() != 1 || args.threads[0] == 0 {
        return Err("--threads takes one count of 1 or more here: the table compares the \
                    configurations' rounds at one count"
            .into());
    }
    let tier_bytes = args.tier_size.map_or(2 * args.cache_size.bytes(), ByteSize::bytes);
    let scratch = ScratchDir::new_in(&args.path, "tierkv-tier-")
        .map_err(|e| format!("cannot make a directory in {}: {e}", args.path.display()))?;
    let outcome = run(&args, &configs, tier_bytes, scratch.path());
    drop(scratch);
    let report = outcome?;
    print!("{}", report.table());
    if let Some(file) = &args.report.report {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    }
    if let Some(plots) = &args.report.plot {
        for path in report.write_plots(plots).map_err(|e| e.to_string())? {
            println!("plot: {}", path.display());
        }
    }
    let failed = report.configs.iter().any(|c| c.run.failure.is_some());
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn run(
    args: &TierArgs,
    configs: &[String],
    tier_bytes: u64,
    dir: &Path,
) -> Result<TierReport, String> {
    let mut report = TierReport {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        machine: tierkv_bench::machine::machine_info().into(),
        records: args.records,
        cache_bytes: args.cache_size.bytes(),
        tier_bytes,
        tier_backing: String::new(),
        emulation: args.tier_emulate.as_ref().map(SlowTier::describe),
        data_bytes: 0,
        load: None,
        configs: Vec::new(),
        writers: Vec::new(),
    };
    if !configs.is_empty() {
        let base = dir.join("base");
        eprintln!("bench tier: loading {} records into {}", args.records, base.display());
        report.load = Some(load(args, &base)?);
        report.data_bytes = dir_bytes(&base.join("blocks"));
        let rounds = args.repeats as usize;
        for round in 0..rounds {
            let mut order = configs.to_vec();
            order.rotate_left(round % configs.len());
            for config in &order {
                let copy = dir.join(config);
                copy_dir(&base, &copy)?;
                let cached_left = evict_dir(&copy)?;
                let what = describe_config(config).unwrap_or("");
                eprintln!(
                    "bench tier: round {} of {rounds}: {config}: {what} (OS page cache: {:.1}% \
                     of the copy left after eviction)",
                    round + 1,
                    cached_left * 100.0
                );
                let run = run_config(args, config, tier_bytes, dir, &copy);
                let _ = std::fs::remove_dir_all(&copy);
                let (command, run) = run?;
                if let Some(tier) = run.phases.last().and_then(tier_backing) {
                    report.tier_backing = tier;
                }
                print_config(config, &run);
                report.configs.push(ConfigRun {
                    config: config.clone(),
                    round,
                    os_cache_left: Some(cached_left),
                    description: what.into(),
                    command,
                    run,
                });
            }
        }
    }
    if args.readers > 0 && !args.writers.is_empty() {
        let config = WritersConfig {
            backing: backing(&args.writers_backing),
            capacity_bytes: args.writers_tier_size.bytes(),
            block_bytes: 8 << 10,
            readers: args.readers,
            writers: args.writers.clone(),
            seconds: args.writers_duration.as_secs_f64(),
            tiers: vec![None, SlowTier::preset("optane")],
        };
        report.writers = run_writers(&config, |what| eprintln!("bench tier: writers: {what}"))?;
    }
    Ok(report)
}

/// The tier's backing as a run reported it (in the engine's counters).
fn tier_backing(phase: &driver::PhaseResult) -> Option<String> {
    let tier = phase.engine_counters.as_ref()?.get("tier")?;
    Some(tier.get("backing")?.as_str()?.to_string())
}

fn print_config(config: &str, run: &EngineRun) {
    println!("\n{config}: {}", run.settings);
    match &run.failure {
        Some(failure) => println!("failed: {failure}"),
        None => print!("{}", driver::table(&run.phases)),
    }
}

/// Loads the records into `base` with the no-tier configuration's options.
fn load(args: &TierArgs, base: &Path) -> Result<driver::PhaseResult, String> {
    let options = tierkv::Options {
        cache_size: usize::try_from(args.cache_size.bytes()).unwrap_or(usize::MAX),
        read_method: args.read_method,
        ..tierkv::Options::default()
    };
    let db = tierkv::Db::open(base, options).map_err(|e| format!("cannot open the store: {e}"))?;
    let store = driver::TierkvStore { db, durability: tierkv::Durability::Buffered };
    let config = YcsbConfig {
        records: args.records,
        threads: args.threads[0],
        progress: !args.report.quiet,
        engine: "tierkv".into(),
        ..YcsbConfig::default()
    };
    let loaded = driver::load(&store, &config)?;
    store.db.close().map_err(|e| e.to_string())?;
    Ok(loaded)
}

/// Runs one configuration on `store` in a `tierkv bench ycsb` process; returns its command
/// line and its run.
fn run_config(
    args: &TierArgs,
    config: &str,
    tier_bytes: u64,
    dir: &Path,
    store: &Path,
) -> Result<(String, EngineRun), String> {
    let json = dir.join(format!("{config}.json"));
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let mut command: Vec<String> =
        vec!["bench".into(), "ycsb".into(), "--engines".into(), "tierkv".into()];
    let mut push = |items: &[&str]| command.extend(items.iter().map(|s| s.to_string()));
    let records = args.records.to_string();
    let duration = format!("{}s", args.duration.as_secs_f64());
    let warmup = args.warmup.to_string();
    let warmup_first = args.warmup_first.to_string();
    let threads = args.threads[0].to_string();
    let workloads = args.workloads.join(",");
    push(&["--store", &store.to_string_lossy(), "--skip-load", "--records", &records]);
    push(&["--operations", "0", "--duration", &duration, "--warmup", &warmup]);
    push(&["--warmup-first", &warmup_first]);
    push(&["--threads", &threads, "--workloads", &workloads, "--durability", "buffered"]);
    push(&["--path", &dir.to_string_lossy(), "--report", &json.to_string_lossy()]);
    // The child's progress bars (on the stderr it shares) are this run's.
    if args.report.quiet {
        push(&["--quiet"]);
    }
    let cache_bytes = args.cache_size.bytes();
    let tier = ByteSize(tier_bytes).to_string();
    let method = args.read_method.name().to_string();
    let (cache, read_method) = match config {
        "all-dram" => (ByteSize(cache_bytes + tier_bytes).to_string(), method.as_str()),
        "os-cache" => (ByteSize(cache_bytes).to_string(), "syscall"),
        _ => (ByteSize(cache_bytes).to_string(), method.as_str()),
    };
    push(&["--cache-size", &cache, "--read-method", read_method]);
    match config {
        "tier" | "tier-no-bypass" | "tier-exclusive" => {
            let overhead = if config == "tier" { "0.1" } else { "0" };
            push(&["--tier-size", &tier, "--tier-max-overhead", overhead]);
            if config == "tier-exclusive" {
                push(&["--tier-cache-on-read", "false", "--tier-cache-on-evict", "true"]);
                push(&["--tier-exclusive", "true"]);
            }
            push(&["--tier-backing", &args.tier_backing]);
            if let Some(emulation) = &args.tier_emulate {
                let spec = format!(
                    "read_ns={},write_ns={}{}{}",
                    emulation.read_delay_ns,
                    emulation.write_delay_ns,
                    emulation
                        .read_bytes_per_sec
                        .map_or(String::new(), |r| format!(",read_mbps={}", r / 1_000_000)),
                    emulation
                        .write_bytes_per_sec
                        .map_or(String::new(), |w| format!(",write_mbps={}", w / 1_000_000)),
                );
                push(&["--tier-emulate", &spec]);
            }
        }
        "os-cache" => {
            let limit = ByteSize(cache_bytes + tier_bytes + args.overhead_size.bytes());
            push(&["--memory-limit", &limit.to_string()]);
        }
        _ => {}
    }
    let line = format!("tierkv {}", command.join(" "));
    let mut child = std::process::Command::new(exe);
    child.args(&command).stdout(std::process::Stdio::null());
    let status = WatchedChild::spawn(&mut child)
        .and_then(|child| child.wait())
        .map_err(|e| format!("cannot run {line}: {e}"))?;
    let text = std::fs::read_to_string(&json);
    let _ = std::fs::remove_file(&json);
    let run = match text {
        Ok(text) => {
            let report: YcsbReport = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            report.engines.into_iter().next().ok_or("the run reported no engine")?
        }
        Err(_) => EngineRun {
            failure: Some(format!("{line} failed ({status}) and wrote no report")),
            ..EngineRun::new("tierkv", Vec::new())
        },
    };
    Ok((line, run))
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("cannot make {}: {e}", to.display()))?;
    let entries =
        std::fs::read_dir(from).map_err(|e| format!("cannot list {}: {e}", from.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| e.to_string())?;
        let target = to.join(entry.file_name());
        if entry.file_type().map_err(|e| e.to_string())?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .map_err(|e| format!("cannot copy {}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Evicts every file under `dir` from the OS page cache; returns the largest fraction of a
/// file's pages left resident (0 when eviction worked; tmpfs keeps everything).
fn evict_dir(dir: &Path) -> Result<f64, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut left = 0.0f64;
    for entry in entries {
        let entry = entry.map_err(|e| e.to_string())?;
        let path = entry.path();
        if entry.file_type().map_err(|e| e.to_string())?.is_dir() {
            left = left.max(evict_dir(&path)?);
            continue;
        }
        let options = tierkv_io::OpenOptions::new(AccessMethod::Syscall);
        let file = tierkv_io::Storage::Os
            .open(&path, &options)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        if file.is_empty() {
            continue;
        }
        let report = tierkv_bench::machine::evict_file(&file)
            .map_err(|e| format!("cannot evict {} from the page cache: {e}", path.display()))?;
        left = left.max(report.resident_after);
    }
    Ok(left)
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
        .unwrap_or(0)
}
