//! `tierkv bench ycsb`: YCSB's core workloads on tierkv and, in builds with the `peers`
//! features, on RocksDB (Debian's 7.8 as `rocksdb`, and a current release built from source
//! as `rocksdb-crate`), LMDB, WiredTiger, SQLite, redb and fjall, side by side. Each engine's
//! run records its version (`EngineRun::version`, from `tierkv_bench::ycsb::versions`).
//!
//! With several `--threads` counts, every engine runs at each count in turn (the counts in the
//! outer loop).
//!
//! With `--isolate` or `--memory-limit`, each engine runs in a process of its own (this
//! binary again, asked for that one engine and one count), so no engine inherits another's
//! heap or page cache. With `--memory-limit`, that process first joins a memory cgroup made
//! for it,
//! limited to the given size with the page cache counted, so an engine that reads through
//! the OS page cache (LMDB, or any engine's buffered reads) is held to the same memory as
//! one with a cache of its own. The parent collects each child's JSON report.
//!
//! The stores live in a scratch directory (`tierkv_bench::scratch`), removed at the end, on
//! a panic, and on Ctrl-C after the children are stopped.
//!
//! Must never: claim a memory limit that was not set, or leave a child's scratch files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use tierkv_bench::cgroup::MemoryCgroup;
use tierkv_bench::machine::process_memory_of;
use tierkv_bench::scratch::{EmptyDirOnInterrupt, ScratchDir, WatchedChild};
use tierkv_bench::ycsb::driver::{self, EngineRun, PhaseResult, YcsbConfig, YcsbReport};
#[cfg(any(feature = "c-peers", feature = "rocksdb-crate"))]
use tierkv_bench::ycsb::rocksdb_config::RocksConfig;
use tierkv_bench::ycsb::{plot, WorkloadSpec};
#[cfg(any(feature = "c-peers", feature = "rocksdb-crate"))]
use tierkv_io::AccessMethod;
use tierkv_wal::Durability;

use crate::flags::{parse_count, parse_duration, parse_size, ByteSize};
use crate::flags::{COUNTS, DURATION, NAMES, SIZE};
use crate::{parse_durability, ReportArgs, ALLOCATOR};

#[derive(Args)]
pub(crate) struct YcsbArgs {
    /// Directory under which the stores are made (default: the system's temporary directory).
    #[arg(long)]
    path: Option<PathBuf>,
    /// Records loaded (10 fields of 100 bytes each).
    #[arg(long, default_value_t = 100_000)]
    records: u64,
    /// Requests per workload, at most (YCSB's operationcount; 0: no count). Default: 100000,
    /// or with --duration, 0.
    #[arg(long)]
    operations: Option<u64>,
    /// How long each workload runs at most; with --operations, whichever comes first. The
    /// load always runs to the end.
    #[arg(long, value_name = DURATION, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Operations per second across all threads (YCSB's -target), for the load and the
    /// workloads; each thread paces itself to its share. Default: as fast as they go.
    #[arg(long, value_name = "OPS_PER_SEC", value_parser = parse_rate)]
    target: Option<f64>,
    /// Requests of each workload run before its measured part, unpaced and not counted.
    #[arg(long, value_name = "OPERATIONS", default_value_t = 0)]
    warmup: u64,
    /// Client thread counts: every engine runs the load and the workloads at each.
    #[arg(long, value_delimiter = ',', default_value = "1", value_name = COUNTS, value_parser = parse_count)]
    threads: Vec<usize>,
    /// Workloads in order, comma-separated letters (a … f).
    #[arg(long, value_delimiter = ',', default_value = "a,b,c,f,d,e", value_name = NAMES)]
    workloads: Vec<String>,
    /// Durability of every write: sync, buffered or none.
    #[arg(long, default_value = "sync")]
    durability: String,
    /// Engines, comma-separated: tierkv, rocksdb, lmdb, wiredtiger, sqlite (the `c-peers`
    /// feature: Debian's libraries), rocksdb-crate (the `rocksdb-crate` feature: a current
    /// RocksDB built from source), redb, fjall (the `rust-peers` feature), or `all` for every
    /// one built in. Each gets the same memory budget (`--cache-size`).
    #[arg(long, value_delimiter = ',', default_value = "tierkv", value_name = NAMES)]
    engines: Vec<String>,
    /// Run each engine in a process of its own.
    #[arg(long)]
    isolate: bool,
    /// Run each engine in a process of its own, in a memory cgroup limited to this size,
    /// page cache included (needs a writable cgroup hierarchy, usually root).
    #[arg(long, value_name = SIZE, value_parser = parse_size)]
    memory_limit: Option<ByteSize>,
    /// Keep the engine's store in this directory (made if missing, kept afterwards) instead
    /// of a scratch one; one engine only.
    #[arg(long, value_name = "DIR")]
    store: Option<PathBuf>,
    /// The first workload's warm-up requests, instead of --warmup (to fill a large cache
    /// once; the other workloads warm up with --warmup).
    #[arg(long, value_name = "OPERATIONS")]
    warmup_first: Option<u64>,
    /// Run no load: the store in --store holds the --records records already (a copy of a
    /// loaded one).
    #[arg(long, requires = "store")]
    skip_load: bool,
    /// Run nothing: read this report (a `--report` file of an earlier run), print its
    /// comparison and write its plots again.
    #[arg(long, value_name = "FILE")]
    from_report: Option<PathBuf>,
    /// Internal: the cgroup directory a child process joins before it starts.
    #[arg(long, hide = true)]
    join_cgroup: Option<PathBuf>,
    #[command(flatten)]
    engine: crate::kv::EngineArgs,
    #[command(flatten)]
    report: ReportArgs,
}

/// A positive, finite rate.
fn parse_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(rate),
        _ => Err(format!("{text:?} is not a positive number of operations per second")),
    }
}

/// The engines `tierkv bench ycsb` can run in this build, in the order `all` runs them.
fn built_engines() -> Vec<&'static str> {
    let mut engines = vec!["tierkv"];
    if cfg!(feature = "c-peers") {
        engines.push("rocksdb");
    }
    if cfg!(feature = "rocksdb-crate") {
        engines.push("rocksdb-crate");
    }
    if cfg!(feature = "c-peers") {
        engines.extend(["lmdb", "wiredtiger", "sqlite"]);
    }
    if cfg!(feature = "rust-peers") {
        engines.extend(["redb", "fjall"]);
    }
    engines
}

pub(crate) fn bench_ycsb(args: YcsbArgs) -> Result<ExitCode, String> {
    if let Some(file) = &args.from_report {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let report: YcsbReport = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a YCSB report: {e}", file.display()))?;
        return finish(&args, &report);
    }
    if let Some(dir) = &args.join_cgroup {
        MemoryCgroup::join_dir(dir, std::process::id()).map_err(|e| e.to_string())?;
    }
    let workloads = args
        .workloads
        .iter()
        .map(|name| {
            WorkloadSpec::core(name)
                .ok_or_else(|| format!("unknown workload {name:?}; expected a letter from a to f"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let durability = parse_durability(&args.durability)?;
    let parent = args.path.clone().unwrap_or_else(std::env::temp_dir);
    let options = args.engine.apply(tierkv::Options::default());
    let duration = args.duration;
    if args.threads.is_empty() || args.threads.contains(&0) {
        return Err("--threads needs counts of 1 or more".into());
    }
    let config = YcsbConfig {
        records: args.records,
        // YCSB's operationcount 0: no count, the duration alone bounds each workload.
        operations: args.operations.unwrap_or(if duration.is_some() { 0 } else { 100_000 }),
        duration,
        target_ops_per_sec: args.target,
        warmup_operations: args.warmup,
        threads: args.threads[0],
        workloads,
        seed: 0x5eed_ca5e,
        progress: !args.report.quiet,
        engine: String::new(),
        skip_load: args.skip_load,
        first_warmup_operations: args.warmup_first,
    };
    config.check().map_err(|e| format!("{e} (see --operations, --duration, --target)"))?;
    let built = built_engines();
    let engines: Vec<String> = match args.engines.as_slice() {
        [all] if all == "all" => built.iter().map(|e| e.to_string()).collect(),
        names => names.to_vec(),
    };
    if let Some(unknown) = engines.iter().find(|e| !built.contains(&e.as_str())) {
        return Err(format!(
            "engine {unknown:?} is not in this build; it has {} (the peers need \
             `scripts/install-tools.sh` and `cargo build --release -p tierkv-cli --features peers`)",
            built.join(", ")
        ));
    }
    if args.store.is_some() && engines.len() != 1 {
        return Err("--store keeps one engine's store; name one engine with --engines".into());
    }
    let limit = args.memory_limit.map(ByteSize::bytes);
    let isolate = args.isolate || limit.is_some();
    let scratch = ScratchDir::new_in(&parent, "tierkv-ycsb-")
        .map_err(|e| format!("cannot make a directory in {}: {e}", parent.display()))?;
    let dir = scratch.path();
    let mut report = YcsbReport {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        machine: tierkv_bench::machine::machine_info().into(),
        records: config.records,
        operations: config.operations,
        duration_s: args.duration.map(|d| d.as_secs_f64()),
        target_ops_per_sec: config.target_ops_per_sec,
        warmup_operations: config.warmup_operations,
        threads: args.threads.clone(),
        durability: args.durability.clone(),
        cache_bytes: options.cache_size,
        allocator: ALLOCATOR.get().cloned().unwrap_or_else(|| "unknown".into()),
        memory_limit_bytes: limit,
        isolation: "one process for every engine".into(),
        engines: Vec::new(),
    };
    let runs = args.threads.iter().flat_map(|&threads| engines.iter().map(move |e| (threads, e)));
    for (threads, engine) in runs {
        let engine_dir = args.store.clone().unwrap_or_else(|| dir.join(engine));
        let run = if isolate {
            let (run, how) = run_child(engine, &engine_dir, limit, threads);
            report.isolation = how;
            run
        } else {
            std::fs::create_dir_all(&engine_dir)
                .map_err(|e| format!("cannot make {}: {e}", engine_dir.display()))
                .and_then(|()| {
                    // The engine's name goes on its progress bars.
                    let config = YcsbConfig { engine: engine.clone(), threads, ..config.clone() };
                    ycsb_engine(engine, &engine_dir, &options, durability, &config)
                })
        };
        // Scratch files go whatever happened; a --store stays.
        if args.store.is_none() {
            let _ = std::fs::remove_dir_all(&engine_dir);
        }
        // An engine that fails (or whose process the kernel kills at the memory limit) is
        // recorded as failed, and the others still run.
        let mut run = run
            .unwrap_or_else(|e| EngineRun { failure: Some(e), ..EngineRun::new(engine, vec![]) });
        run.threads = threads;
        // Each engine's table prints as soon as it is done (the whole run can take an hour).
        if report.engines.is_empty() {
            print_header(&report);
        }
        print_engine(&run, args.threads.len() > 1);
        report.engines.push(run);
    }
    drop(scratch);
    finish(&args, &report)
}

/// Prints the comparison of the engines at each thread count, writes the report and the
/// plots, and says whether every engine ran.
fn finish(args: &YcsbArgs, report: &YcsbReport) -> Result<ExitCode, String> {
    let mut engines: Vec<&str> = report.engines.iter().map(|run| run.engine.as_str()).collect();
    engines.dedup();
    if engines.len() > 1 {
        for &threads in &report.threads {
            // A report of one count records 0 in its runs: every run is at that count.
            let runs: Vec<EngineRun> = report
                .engines
                .iter()
                .filter(|run| run.threads == threads || run.threads == 0)
                .cloned()
                .collect();
            println!("\nops/s, {threads} thread(s); the last row is tierkv ÷ the best peer");
            print!("{}", driver::comparison(&runs));
        }
    }
    if let Some(file) = &args.report.report {
        let text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
        std::fs::write(file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    }
    if let Some(dir) = &args.report.plot {
        for path in plot::write_plots(report, dir).map_err(|e| e.to_string())? {
            println!("plot: {}", path.display());
        }
    }
    let failed: Vec<&str> =
        report.engines.iter().filter(|run| run.failure.is_some()).map(|run| &*run.engine).collect();
    if !failed.is_empty() {
        eprintln!("error: {} failed (the report records why)", failed.join(", "));
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The run's settings, before the first engine's table.
fn print_header(report: &YcsbReport) {
    let bound = match (report.operations, report.duration_s) {
        (0, Some(seconds)) => format!("{seconds} s per workload"),
        (operations, Some(seconds)) => {
            format!("{operations} requests or {seconds} s per workload, whichever first")
        }
        (operations, None) => format!("{operations} requests per workload"),
    };
    let pace = report.target_ops_per_sec.map_or("unpaced".into(), |t| format!("target {t} ops/s"));
    println!(
        "YCSB: {} records of 10 × 100 bytes, {bound}, {pace}, {} warm-up requests per \
         workload, {} thread(s), durability {}, budget {} MiB each, allocator {}",
        report.records,
        report.warmup_operations,
        report.threads.iter().map(usize::to_string).collect::<Vec<_>>().join(", "),
        report.durability,
        report.cache_bytes >> 20,
        report.allocator
    );
    println!("isolation: {}", report.isolation);
}

/// One engine's settings, memory and table (or why it failed).
fn print_engine(run: &EngineRun, several_thread_counts: bool) {
    let mib = |bytes: u64| bytes as f64 / 1048576.0;
    let mut memory = String::new();
    if let Some(peak) = run.peak_memory_bytes {
        memory += &format!(", peak memory {:.1} MiB", mib(peak));
    }
    match (run.peak_memory_bytes, run.peak_anon_bytes) {
        (Some(_), Some(anon)) => {
            memory += &format!(" ({:.1} MiB its own, the rest page cache)", mib(anon))
        }
        (None, Some(anon)) => memory += &format!(", peak anonymous memory {:.1} MiB", mib(anon)),
        _ => {}
    }
    // The engine's release first, where the report has one.
    let version = match run.version.as_str() {
        "" => String::new(),
        version => format!("{version}; "),
    };
    println!("\n{}: {version}{}{memory}", run.label(several_thread_counts), run.settings);
    match &run.failure {
        Some(failure) => println!("failed: {failure}"),
        None => print!("{}", driver::table(&run.phases)),
    }
    // Seen at once even when stdout is a pipe (`| tee`).
    let _ = std::io::Write::flush(&mut std::io::stdout());
}

/// The options of this process's command line that a child must not inherit: the engine
/// list and the thread counts (a child runs one of each), the isolation, where the stores go
/// (each child gets its own directory) and where the report goes (the child's goes to the
/// parent).
const PARENT_ONLY: [&str; 8] = [
    "--engines",
    "--threads",
    "--isolate",
    "--memory-limit",
    "--join-cgroup",
    "--path",
    "--report",
    "--plot",
];

/// `args` without the options in `PARENT_ONLY`, in either `--name value` or `--name=value`
/// form (`--isolate` takes no value).
fn child_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for arg in args {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        let name = arg.split('=').next().unwrap_or(arg);
        if PARENT_ONLY.contains(&name) {
            skip_value = !arg.contains('=') && name != "--isolate";
            continue;
        }
        out.push(arg.clone());
    }
    out
}

/// Runs `engine` in a child process of this binary (in a memory cgroup of `limit` bytes
/// when one is given) and reads back its run. Also returns how the child was isolated.
fn run_child(
    engine: &str,
    dir: &Path,
    limit: Option<u64>,
    threads: usize,
) -> (Result<EngineRun, String>, String) {
    // A cgroup is not a directory tempfile can make: the process id keeps its name unique.
    let name = format!("tierkv-ycsb-{}-{engine}-t{threads}", std::process::id());
    let group = match limit {
        None => None,
        Some(limit) => match MemoryCgroup::create(&name, limit) {
            Ok(Some(group)) => Some(group),
            Ok(None) => {
                let why = "no memory cgroup hierarchy is mounted where this process can see it; \
                           run without --memory-limit, or where cgroups are writable";
                return (Err(why.into()), String::new());
            }
            Err(e) => return (Err(format!("cannot make a memory cgroup: {e}")), String::new()),
        },
    };
    // Ctrl-C removes the group too, once the child in it is killed.
    let _registered = group.as_ref().map(|group| EmptyDirOnInterrupt::register(group.dir()));
    let how = match &group {
        Some(group) => format!(
            "one process per engine, each in a memory cgroup ({:?}) limited to {} MiB, page \
             cache included, no swap",
            group.version(),
            group.limit_bytes() >> 20
        ),
        None => "one process per engine".into(),
    };
    let run = (|| {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let json = dir.with_extension("json");
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
        let own: Vec<String> = std::env::args().skip(1).collect();
        let mut command = std::process::Command::new(exe);
        command.args(child_args(&own)).arg("--engines").arg(engine).arg("--report").arg(&json);
        command.arg("--threads").arg(threads.to_string()).arg("--path").arg(dir);
        if let Some(group) = &group {
            command.arg("--join-cgroup").arg(group.dir());
        }
        // The child's table goes to /dev/null: the parent prints it once the child is done.
        command.stdout(std::process::Stdio::null());
        let child = WatchedChild::spawn(&mut command)
            .map_err(|e| format!("cannot start the child: {e}"))?;
        // The cgroup's own peak counts the page cache, which fills any group to its limit;
        // the anonymous memory, sampled here (the group's, or without one the child's), is
        // the engine's own.
        let mut peak_anon = None;
        let status = loop {
            let anon = match &group {
                Some(group) => group.anon_bytes(),
                None => process_memory_of(child.id()).and_then(|memory| memory.anon_bytes),
            };
            if let Some(anon) = anon {
                peak_anon = peak_anon.max(Some(anon));
            }
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => return Err(format!("cannot wait for the child: {e}")),
            }
        };
        let oom = group.as_ref().and_then(MemoryCgroup::oom_kills).unwrap_or(0);
        if !status.success() {
            let _ = std::fs::remove_file(&json);
            return Err(if oom > 0 {
                let anon = peak_anon.map_or(String::new(), |bytes| {
                    format!(", with {:.1} MiB of its own memory", bytes as f64 / 1048576.0)
                });
                format!("the kernel's OOM killer stopped it at the memory limit ({status}{anon})")
            } else {
                format!("its process failed ({status})")
            });
        }
        let text = std::fs::read_to_string(&json)
            .map_err(|e| format!("cannot read {}: {e}", json.display()))?;
        let _ = std::fs::remove_file(&json);
        let report: YcsbReport = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        let mut run = report.engines.into_iter().next().ok_or("the child ran no engine")?;
        run.peak_memory_bytes = group.as_ref().and_then(MemoryCgroup::peak_bytes);
        run.peak_anon_bytes = peak_anon;
        Ok(run)
    })();
    (run, how)
}

/// Runs the YCSB phases on `engine`, made in `dir`, with `options.cache_size` as every
/// engine's memory budget and `options.read_method == Direct` as direct I/O where the
/// engine has it.
fn ycsb_engine(
    engine: &str,
    dir: &Path,
    options: &tierkv::Options,
    durability: Durability,
    config: &YcsbConfig,
) -> Result<EngineRun, String> {
    let budget = options.cache_size;
    let mib = budget >> 20;
    // Each arm gives the phases, the settings and the version that ran.
    type Ran = (Result<Vec<PhaseResult>, String>, String, String);
    let (phases, settings, version): Ran = match engine {
        "tierkv" => {
            let db = tierkv::Db::open(dir, options.clone()).map_err(|e| e.to_string())?;
            let store = driver::TierkvStore { db, durability };
            let phases = driver::run_all(&store, config);
            let tier = store.db.stats().ok().and_then(|stats| stats.tier);
            store.db.close().map_err(|e| e.to_string())?;
            let mut settings = format!(
                "cache_size {mib} MiB (buffer pool and older values for snapshots), read method \
                 {:?}, log {:?}, compression {:?}",
                options.read_method,
                options.backend(),
                options.compression
            );
            if let Some(page) = options.max_page_bytes {
                settings += &format!(", pages of {} KiB", page >> 10);
            }
            if let Some(tier) = tier {
                let bypass = if tier.overhead_bypass {
                    format!("overhead bypass at {:.0}%", tier.max_overhead * 100.0)
                } else {
                    "no overhead bypass".into()
                };
                settings += &format!(
                    ", tier {} MiB on {}, {bypass}",
                    tier.capacity_bytes >> 20,
                    tier.backing
                );
                if let Some(emulation) = tier.emulation {
                    settings += &format!(", {emulation}");
                }
            }
            (phases, settings, format!("tierkv {}", env!("CARGO_PKG_VERSION")))
        }
        #[cfg(feature = "c-peers")]
        "rocksdb" => {
            use tierkv_bench::ycsb::c_peers::RocksStore;
            let direct = options.read_method == AccessMethod::Direct;
            let rocks = RocksConfig::for_budget(budget, durability, direct);
            let store = RocksStore::open_with(dir, &rocks)?;
            let settings = format!("{mib} MiB: {}", rocks.describe());
            (driver::run_all(&store, config), settings, store.version().to_string())
        }
        #[cfg(feature = "rocksdb-crate")]
        "rocksdb-crate" => {
            use tierkv_bench::ycsb::rocksdb_crate::RocksCrateStore;
            let direct = options.read_method == AccessMethod::Direct;
            let rocks = RocksConfig::for_budget(budget, durability, direct);
            let store = RocksCrateStore::open_with(dir, &rocks)?;
            let settings = format!("{mib} MiB: {}", rocks.describe());
            (driver::run_all(&store, config), settings, store.version().to_string())
        }
        #[cfg(feature = "c-peers")]
        "lmdb" => {
            use tierkv_bench::ycsb::c_peers::LmdbStore;
            let store = LmdbStore::open(dir, 64 << 30, durability, config.threads)?;
            let settings = "no cache of its own: reads through its mapping (the OS page \
                            cache); map 64 GiB reserved, read-ahead off"
                .to_string();
            (driver::run_all(&store, config), settings, LmdbStore::version())
        }
        #[cfg(feature = "c-peers")]
        "wiredtiger" => {
            use tierkv_bench::ycsb::c_peers::WiredTigerStore;
            let direct = options.read_method == AccessMethod::Direct;
            let store = WiredTigerStore::open(dir, budget, durability, direct, config.threads)?;
            let settings = format!(
                "cache_size {mib} MiB, checkpoint every 60 s, no block compression, \
                 direct_io=[data] {direct}"
            );
            (driver::run_all(&store, config), settings, WiredTigerStore::version())
        }
        #[cfg(feature = "c-peers")]
        "sqlite" => {
            use tierkv_bench::ycsb::c_peers::SqliteStore;
            let path = dir.join("ycsb.sqlite");
            let store = SqliteStore::create(&path, budget, durability, config.threads)?;
            let settings = format!(
                "WAL journal, page cache {mib} MiB shared among {} connection(s), no mmap, \
                 WITHOUT ROWID table",
                config.threads.max(1)
            );
            (driver::run_all(&store, config), settings, SqliteStore::version())
        }
        #[cfg(feature = "rust-peers")]
        "redb" => {
            use tierkv_bench::ycsb::peers::RedbStore;
            let store = RedbStore::create(&dir.join("ycsb.redb"), budget, durability)?;
            let settings = format!(
                "cache {mib} MiB, one table, {}",
                match durability {
                    Durability::Buffered =>
                        "buffered commits with Immediate (redb 4 has no \
                                             commit that reaches the OS unsynced)",
                    _ => "a commit per write",
                }
            );
            (driver::run_all(&store, config), settings, RedbStore::version())
        }
        #[cfg(feature = "rust-peers")]
        "fjall" => {
            use tierkv_bench::ycsb::peers::FjallStore;
            let store = FjallStore::open(dir, budget, durability)?;
            let settings = format!(
                "block cache {mib} MiB, one keyspace, its default compression (none on the \
                 first two levels, lz4 below)"
            );
            (driver::run_all(&store, config), settings, FjallStore::version())
        }
        other => {
            (Err(format!("engine {other:?} is not in this build")), String::new(), String::new())
        }
    };
    Ok(EngineRun { settings, version, ..EngineRun::new(engine, phases?) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_gets_every_option_but_the_parents_own() {
        let args: Vec<String> = [
            "bench",
            "ycsb",
            "--records",
            "10",
            "--engines",
            "tierkv,lmdb",
            "--isolate",
            "--memory-limit=320m",
            "--report",
            "out.json",
            "--plot=plots",
            "--threads",
            "2,4",
            "--duration=2s",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(child_args(&args), ["bench", "ycsb", "--records", "10", "--duration=2s"]);
    }
}
