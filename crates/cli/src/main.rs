//! `tierkv`: the command-line tool. Thin by design: it parses arguments, calls the crates
//! below, and prints what they report. It never makes system calls of its own (only
//! `tierkv-io` does).

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tierkv_bench::blocks::{self as blocks_bench, BlocksBenchConfig, Distribution, MicroPattern};
use tierkv_bench::device::{self, CacheState, DeviceConfig, IoOp, Pattern};
use tierkv_bench::engine::{self as engine_bench, EngineBenchConfig, Workload};
use tierkv_bench::scratch::ScratchDir;
use tierkv_bench::stress::{self, StressConfig, StressReport};
use tierkv_bench::wal::{self as wal_bench, WalBenchConfig};
use tierkv_io::{pmem, AccessMethod, OpenOptions, Storage};
use tierkv_wal::{Backend, Durability};

use crate::flags::{parse_count, parse_duration, parse_size, ByteSize, COUNTS, DURATION, NAMES};
use crate::flags::{SIZE, SIZES};

#[derive(Parser)]
#[command(
    name = "tierkv",
    version,
    about = "tierkv: an embedded, crash-safe, ordered key-value engine for tiered memory and storage",
    after_help = "Values, in every subcommand:\n  \
        <DURATION>  5 (seconds), 5s, 1.5s, 500ms, 2m, 1h\n  \
        <SIZE>      4096, 4k, 4K, 4KiB, 64m, 64MiB, 1g, 1GiB (binary: k = 1024)\n  \
        <SIZES>, <COUNTS>, <NAMES>  comma-separated lists: 4k,1m  1,2,4,8  a,b,c\n\
        Common flags: --json (JSON output), --report FILE (a run's report), --quiet (no bars).\n\n\
        Exit codes of the key-value commands: 0 success, 1 not found, 2 usage, 3 damaged store,\n\
        4 store busy, 5 permission or I/O error, 6 no store (see `tierkv get --help`)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Parse the command line, print the value of each duration, size and count flag given
    /// (durations in nanoseconds, sizes in bytes), and run nothing: for the test of the flag
    /// grammar (crates/cli/tests/flags.rs).
    #[arg(long, hide = true, global = true)]
    check_args: bool,
}

mod allocator;
mod engine_args;
mod flags;
mod kv;
mod load;
mod salvage;
mod text;
mod tier;
mod torture;
mod ycsb;

/// The allocator in force, as `allocator::configure` described it at start.
static ALLOCATOR: std::sync::OnceLock<String> = std::sync::OnceLock::new();

#[derive(Subcommand)]
enum Command {
    #[command(flatten)]
    Kv(Box<kv::KvCommand>),
    /// Show what this machine offers tierkv: cache-line flush, non-temporal stores, and for a
    /// path its file system, DAX, O_DIRECT alignment and the pmem mode that would be used.
    Info {
        /// A file or directory to describe (default: the current directory).
        #[arg(long, default_value = ".")]
        path: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Stress the lock-free remap protocol: workers read and write self-verifying blocks
    /// through a mapping while a resizer grows and truncates the file without pause.
    Stress {
        /// Directory to put the stress file's scratch directory in (default: the temporary
        /// directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Access method: mmap or pmem.
        #[arg(long, default_value = "mmap")]
        method: AccessMethod,
        /// How long to run.
        #[arg(long, default_value = "60s", value_name = DURATION, value_parser = parse_duration)]
        duration: Duration,
        /// Worker threads (the resizer is one more).
        #[arg(long, default_value_t = 4)]
        workers: usize,
        /// Seed of the workers' and the resizer's choices.
        #[arg(long, default_value_t = 0x5eed_0001)]
        seed: u64,
        /// Also write the report as JSON to this file.
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
        /// No progress bar.
        #[arg(long)]
        quiet: bool,
    },
    /// Reliability tests: the kill -9 loop.
    Torture {
        #[command(subcommand)]
        torture: torture::TortureCommand,
    },
    /// Measurement tools.
    Bench {
        #[command(subcommand)]
        bench: Bench,
    },
}

#[derive(Subcommand)]
enum Bench {
    /// The device lab: bandwidth, latency and CPU by access method, op, pattern, transfer
    /// size, threads and page-cache state (seeds 000 and 004), optionally beside fio.
    Device(Box<DeviceArgs>),
    /// The write-ahead log: commits/s and latency by backend, threads and record size, beside
    /// the device's fdatasync limit and, where installed, RocksDB and SQLite.
    Wal(Box<WalArgs>),
    /// The block store: seed 003's 64-block write latency and bandwidth tables (sync, 64
    /// writes + one fdatasync, one atomic group) and a page-update workload comparing the log
    /// store's atomic groups with the doublewrite baseline.
    Blocks(Box<BlocksArgs>),
    /// The engine: db_bench's workloads (fillseq, fillrandom, readrandom, readseq,
    /// readreverse, seekrandom, overwrite, readwhilewriting) on a store in a temporary
    /// directory.
    Engine(Box<EngineBenchArgs>),
    /// YCSB's core workloads A–F: a load phase, then each workload's run phase, with latency
    /// percentiles per operation type, on tierkv and (built with `--features peers`)
    /// RocksDB, LMDB, WiredTiger, SQLite, redb and fjall, side by side.
    Ycsb(Box<ycsb::YcsbArgs>),
    /// The tier cache (seed 002): YCSB through the engine with no tier, a tier without and
    /// with Overhead Bypass, all DRAM, and the OS page cache as the second level; and the
    /// read throughput of tier readers as writers are added.
    Tier(Box<tier::TierArgs>),
}

/// Where every benchmark writes its report, besides the table on stdout.
#[derive(Args)]
struct ReportArgs {
    /// Write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Write SVG plots into this directory.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args)]
struct EngineBenchArgs {
    /// Directory under which the store is made (default: the system's temporary directory).
    #[arg(long)]
    path: Option<PathBuf>,
    /// Keys in the store.
    #[arg(long, default_value_t = 200_000)]
    num: u64,
    /// Lookups per read workload (default: --num).
    #[arg(long)]
    reads: Option<u64>,
    /// Size of each value.
    #[arg(long, default_value = "100", value_name = SIZE, value_parser = parse_size)]
    value_size: ByteSize,
    /// Workloads in order, comma-separated, or `all`; default: the quick run (fillrandom,
    /// readrandom, seekrandom, overwrite).
    #[arg(long, value_delimiter = ',', value_name = NAMES)]
    workloads: Vec<String>,
    /// Durability of every put: sync, buffered or none.
    #[arg(long, default_value = "sync")]
    durability: String,
    #[command(flatten)]
    engine: kv::EngineArgs,
    /// Run nothing: read this report (a `--report` file of an earlier run) and print its
    /// table and write its plots again.
    #[arg(long, value_name = "FILE")]
    from_report: Option<PathBuf>,
    /// After the workloads, reopen the store with the syscall and the mmap read method in
    /// turn, this many times each, and time random lookups on a cold engine cache.
    #[arg(long, default_value_t = 0)]
    compare_read_methods: usize,
    #[command(flatten)]
    report: ReportArgs,
}

#[derive(Args)]
struct BlocksArgs {
    /// Directory to create the scratch files and stores in (removed again afterwards).
    #[arg(long)]
    path: PathBuf,
    /// Timed repetitions of each 64 × 512 B latency operation.
    #[arg(long, default_value_t = 200)]
    repeats: usize,
    /// Timed repetitions of each 64 × 16 KiB bandwidth operation.
    #[arg(long, default_value_t = 50)]
    bandwidth_repeats: usize,
    /// Micro-benchmark patterns (comma-separated): random, strided, sequential.
    #[arg(long, value_delimiter = ',', default_value = "random,strided,sequential", value_name = NAMES)]
    patterns: Vec<MicroPattern>,
    /// Size of the preallocated file the micro-benchmarks write into.
    #[arg(long, default_value = "64m", value_name = SIZE, value_parser = parse_size)]
    file_size: ByteSize,
    /// Distance between the blocks of the strided pattern, in blocks.
    #[arg(long, default_value_t = 8)]
    stride_blocks: u64,
    /// Page sizes of the page-update workload.
    #[arg(long, value_delimiter = ',', default_value = "4k,16k", value_name = SIZES, value_parser = parse_size)]
    page_sizes: Vec<ByteSize>,
    /// Size of the data set's pages (page updates and the overwrite test); the bench holds
    /// them in memory, as a buffer pool would.
    #[arg(long, default_value = "256m", value_name = SIZE, value_parser = parse_size)]
    data_size: ByteSize,
    /// Page updates per mode per page size last this long.
    #[arg(long, default_value = "30s", value_name = DURATION, value_parser = parse_duration)]
    duration: Duration,
    /// Run exactly this many page updates per mode instead of `--duration`.
    #[arg(long)]
    updates: Option<u64>,
    /// How updates pick a page: zipfian (theta 0.99, scrambled) or uniform.
    #[arg(long, default_value = "zipfian")]
    distribution: Distribution,
    /// Zipfian exponent.
    #[arg(long, default_value_t = 0.99)]
    theta: f64,
    /// Flush the dirty pages after this many updates.
    #[arg(long, default_value_t = 1000)]
    checkpoint_every: u64,
    /// Page-update trials per page size; the modes alternate (which goes first swaps each
    /// trial) and the ratios are the medians of the trials' ratios.
    #[arg(long, default_value_t = 3)]
    trials: usize,
    /// Pages per atomic group of a flush, at most.
    #[arg(long, default_value_t = 256)]
    group_pages: usize,
    /// Length of the sustained-overwrite test of the log store's space amplification
    /// (0: off).
    #[arg(long, default_value = "0", value_name = DURATION, value_parser = parse_duration)]
    overwrite_duration: Duration,
    /// Page size of the sustained-overwrite test.
    #[arg(long, default_value = "4k", value_name = SIZE, value_parser = parse_size)]
    overwrite_page_size: ByteSize,
    /// Seed of every random choice.
    #[arg(long, default_value_t = blocks_bench::DEFAULT_SEED)]
    seed: u64,
    #[command(flatten)]
    report: ReportArgs,
}

#[derive(Args)]
struct WalArgs {
    /// Directory to create the logs (and the peers' databases) in.
    #[arg(long)]
    path: PathBuf,
    /// Log backends (comma-separated): file, pmem.
    #[arg(long, value_delimiter = ',', default_value = "file,pmem", value_name = NAMES)]
    backend: Vec<Backend>,
    /// Appender thread counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16", value_name = COUNTS, value_parser = parse_count)]
    threads: Vec<usize>,
    /// Record payload sizes (64, 128, 1k, 4k, ...).
    #[arg(long, value_delimiter = ',', default_value = "64,128,1k,4k", value_name = SIZES, value_parser = parse_size)]
    record_size: Vec<ByteSize>,
    /// Length of each point.
    #[arg(long, default_value = "5s", value_name = DURATION, value_parser = parse_duration)]
    duration: Duration,
    /// Durability of each append: sync, buffered, none.
    #[arg(long, default_value = "sync", value_parser = parse_durability)]
    durability: Durability,
    /// Segment size of the logs.
    #[arg(long, default_value = "64m", value_name = SIZE, value_parser = parse_size)]
    segment_size: ByteSize,
    /// Trials of each 1-appender file point, each between two measurements of the fdatasync
    /// limit; the trial with the median ratio to its limit is reported.
    #[arg(long, default_value_t = 3)]
    limit_trials: usize,
    /// Do not run the peers (RocksDB's db_bench, SQLite).
    #[arg(long)]
    no_peers: bool,
    #[command(flatten)]
    report: ReportArgs,
}

fn parse_durability(text: &str) -> Result<Durability, String> {
    match text {
        "sync" => Ok(Durability::Sync),
        "buffered" => Ok(Durability::Buffered),
        "none" => Ok(Durability::None),
        _ => Err(format!("unknown durability {text:?}; expected sync, buffered or none")),
    }
}

#[derive(Args)]
struct DeviceArgs {
    /// The measurement file, or a directory to create `tierkv-device.dat` in.
    #[arg(long)]
    path: PathBuf,
    /// Access methods (comma-separated): syscall, direct, mmap, pmem.
    #[arg(long, value_delimiter = ',', default_value = "syscall,direct,mmap,pmem", value_name = NAMES)]
    methods: Vec<AccessMethod>,
    /// Operations: read, write.
    #[arg(long, value_delimiter = ',', default_value = "read,write", value_name = NAMES)]
    ops: Vec<IoOp>,
    /// Patterns: seq, rand.
    #[arg(long, value_delimiter = ',', default_value = "seq,rand", value_name = NAMES)]
    patterns: Vec<Pattern>,
    /// Page-cache states: warm, cold (direct always bypasses the cache).
    #[arg(long, value_delimiter = ',', default_value = "warm,cold", value_name = NAMES)]
    cache: Vec<CacheState>,
    /// Transfer sizes (128, 4k, 1m, ...); default 128 B to 16 MiB in powers of two.
    #[arg(long, value_delimiter = ',', value_name = SIZES, value_parser = parse_size)]
    sizes: Vec<ByteSize>,
    /// Thread counts; default 1, 2, 4, ... up to the number of cores.
    #[arg(long, value_delimiter = ',', value_name = COUNTS, value_parser = parse_count)]
    threads: Vec<usize>,
    /// Size of the measurement file.
    #[arg(long, default_value = "1g", value_name = SIZE, value_parser = parse_size)]
    file_size: ByteSize,
    /// Length of each point.
    #[arg(long, default_value = "1s", value_name = DURATION, value_parser = parse_duration)]
    duration: Duration,
    /// Run fio on every point it can run too (psync, libaio with O_DIRECT, mmap), alternately
    /// with tierkv, and print both figures and their ratio.
    #[arg(long)]
    compare_fio: bool,
    /// Alternating repeats per fio comparison; medians are compared.
    #[arg(long, default_value_t = 3)]
    fio_repeats: usize,
    /// Seed of the random offsets.
    #[arg(long, default_value_t = device::DEFAULT_SEED)]
    seed: u64,
    #[command(flatten)]
    report: ReportArgs,
    /// Write one CSV row per point.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Keep the measurement file (removed by default if this run created it).
    #[arg(long)]
    keep_file: bool,
}

fn main() -> ExitCode {
    // Before any other thread starts (glibc's arena limit applies to arenas made from then on).
    let _ = ALLOCATOR.set(allocator::configure());
    // Before any other thread starts too: the threads started later inherit the blocked
    // signals, so only the handler's thread takes them.
    if let Err(e) = tierkv_io::interrupt::on_interrupt(interrupted) {
        eprintln!("tierkv: cannot catch Ctrl-C ({e}); scratch files may stay behind on one");
    }
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    if cli.check_args {
        print_flag_values(&matches);
        return ExitCode::SUCCESS;
    }
    let outcome = run(cli);
    if INTERRUPTED.load(Ordering::Acquire) {
        // The run ended because the handler stopped its children: the handler is removing
        // the scratch directories and exits with the signal's code; returning now would end
        // the process first, with the run's.
        wait_for_the_interrupt_handler();
    }
    match outcome {
        Ok(code) => code,
        Err(message) => {
            eprintln!("tierkv: {message}");
            ExitCode::FAILURE
        }
    }
}

/// Set by the interrupt handler before it does anything else.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Parks until the interrupt handler exits the process; if it has not within a minute (a
/// directory it cannot remove keeps failing), exits with Ctrl-C's code itself.
fn wait_for_the_interrupt_handler() -> ! {
    for _ in 0..600 {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::process::exit(130)
}

/// For `--check-args`: `--name=v1,v2` for each duration (ns), size (bytes) and count flag
/// given on the command line, in the innermost subcommand's matches.
fn print_flag_values(matches: &clap::ArgMatches) {
    let mut matches = matches;
    while let Some((_, inner)) = matches.subcommand() {
        matches = inner;
    }
    for id in matches.ids() {
        let given =
            matches.value_source(id.as_str()) == Some(clap::parser::ValueSource::CommandLine);
        if !given {
            continue;
        }
        let id = id.as_str();
        let values: Option<Vec<String>> =
            if let Ok(Some(values)) = matches.try_get_many::<Duration>(id) {
                Some(values.map(|d| d.as_nanos().to_string()).collect())
            } else if let Ok(Some(values)) = matches.try_get_many::<ByteSize>(id) {
                Some(values.map(|size| size.bytes().to_string()).collect())
            } else if let Ok(Some(values)) = matches.try_get_many::<usize>(id) {
                Some(values.map(usize::to_string).collect())
            } else {
                None
            };
        if let Some(values) = values {
            println!("--{}={}", id.replace('_', "-"), values.join(","));
        }
    }
}

/// Ctrl-C or SIGTERM: stop the children, remove the scratch directories, and exit as the
/// signal would have (128 + its number: 130 for Ctrl-C).
fn interrupted(signal: i32) {
    INTERRUPTED.store(true, Ordering::Release);
    let left = tierkv_bench::scratch::remove_all();
    for dir in left {
        eprintln!("tierkv: could not remove {}", dir.display());
    }
    eprintln!("tierkv: interrupted");
    std::process::exit(128 + signal);
}

/// Runs `work`, showing a bar that fills over `duration` (unless `quiet`).
fn with_timed_bar<T>(duration: Duration, quiet: bool, work: impl FnOnce() -> T) -> T {
    if quiet {
        return work();
    }
    let tick = Duration::from_millis(200);
    let bar = indicatif::ProgressBar::new(duration.as_millis() as u64);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:40} {elapsed} of {msg}, ETA {eta}")
    {
        bar.set_style(style);
    }
    bar.set_message(format!("{duration:?}"));
    let done = AtomicBool::new(false);
    let result = std::thread::scope(|scope| {
        scope.spawn(|| {
            let started = std::time::Instant::now();
            while !done.load(Ordering::Acquire) {
                bar.set_position(started.elapsed().as_millis() as u64);
                std::thread::sleep(tick);
            }
        });
        let result = work();
        done.store(true, Ordering::Release);
        result
    });
    bar.finish_and_clear();
    result
}

fn run(cli: Cli) -> Result<ExitCode, String> {
    match cli.command {
        Command::Info { path, json } => info(&path, json).map(|()| ExitCode::SUCCESS),
        // Each bench's errors name it: the bench crate's say only what failed.
        Command::Bench { bench: Bench::Device(args) } => {
            bench_device(*args).map_err(|e| format!("bench device: {e}"))
        }
        Command::Bench { bench: Bench::Wal(args) } => {
            bench_wal(*args).map_err(|e| format!("bench wal: {e}"))
        }
        Command::Bench { bench: Bench::Blocks(args) } => {
            bench_blocks(*args).map_err(|e| format!("bench blocks: {e}"))
        }
        Command::Bench { bench: Bench::Engine(args) } => {
            bench_engine(*args).map_err(|e| format!("bench engine: {e}"))
        }
        Command::Bench { bench: Bench::Ycsb(args) } => {
            ycsb::bench_ycsb(*args).map_err(|e| format!("bench ycsb: {e}"))
        }
        Command::Bench { bench: Bench::Tier(args) } => {
            tier::bench_tier(*args).map_err(|e| format!("bench tier: {e}"))
        }
        Command::Kv(command) => kv::run(*command),
        Command::Torture { torture } => torture::run(torture),
        Command::Stress { dir, method, duration, workers, seed, report, quiet } => {
            if duration.is_zero() {
                return Err("--duration must be positive".into());
            }
            // The stress file goes in a scratch directory, in --dir (which picks the file
            // system) or the temporary directory, removed afterwards (on a panic and on
            // Ctrl-C too).
            let parent = dir.unwrap_or_else(std::env::temp_dir);
            let scratch = ScratchDir::new_in(&parent, "tierkv-stress-").map_err(|e| {
                format!("cannot make a scratch directory in {}: {e}", parent.display())
            })?;
            let mut config = StressConfig::new(scratch.path().to_path_buf(), duration);
            config.method = method;
            config.workers = workers;
            config.seed = seed;
            let outcome = stress_run(&config, report.as_deref(), quiet);
            drop(scratch);
            outcome
        }
    }
}

/// Runs the remap stress with a progress bar over its duration, prints and writes its
/// report.
fn stress_run(
    config: &StressConfig,
    report_file: Option<&Path>,
    quiet: bool,
) -> Result<ExitCode, String> {
    println!(
        "stress: {} on {}, {} workers + 1 resizer, {:?}, seed {:#x}",
        config.method,
        config.dir.display(),
        config.workers,
        config.duration,
        config.seed
    );
    let report = with_timed_bar(config.duration, quiet, || stress::run(config))
        .map_err(|e| e.to_string())?;
    print_stress(&report);
    if let Some(file) = report_file {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    }
    Ok(if report.errors == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn bench_engine(args: EngineBenchArgs) -> Result<ExitCode, String> {
    let path = args.path.unwrap_or_else(std::env::temp_dir);
    let mut config = EngineBenchConfig::new(&path);
    config.num = args.num;
    config.reads = args.reads.unwrap_or(args.num);
    config.value_size = args.value_size.to_usize("--value-size")?;
    config.workloads = match args.workloads.as_slice() {
        [] => Workload::QUICK.to_vec(),
        [all] if all == "all" => Workload::ALL.to_vec(),
        names => names.iter().map(|name| name.parse()).collect::<Result<_, _>>()?,
    };
    config.durability = parse_durability(&args.durability)?;
    config.options = args.engine.apply(config.options);
    config.progress = !args.report.quiet;
    config.read_method_trials = args.compare_read_methods;
    config.heap_in_use = allocator::in_use_bytes;
    config.allocator = ALLOCATOR.get().cloned().unwrap_or_else(|| "unknown".into());
    config.command = std::env::args().collect::<Vec<_>>().join(" ");
    let report = match &args.from_report {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            serde_json::from_str(&text)
                .map_err(|e| format!("{} is not an engine report: {e}", file.display()))?
        }
        None => engine_bench::run(&config).map_err(|e| e.to_string())?,
    };
    print!("{}", engine_bench::table(&report));
    if let Some(file) = &args.report.report {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    }
    if let Some(dir) = &args.report.plot {
        for path in engine_bench::write_plots(&report, dir).map_err(|e| e.to_string())? {
            println!("plot: {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_device(args: DeviceArgs) -> Result<ExitCode, String> {
    let mut config = DeviceConfig::new(&args.path);
    config.methods = args.methods;
    config.ops = args.ops;
    config.patterns = args.patterns;
    config.caches = args.cache;
    if !args.sizes.is_empty() {
        config.transfer_sizes = args.sizes.iter().map(|size| size.bytes()).collect();
    }
    if !args.threads.is_empty() {
        config.threads = args.threads;
    }
    config.file_bytes = args.file_size.bytes();
    if args.duration.is_zero() {
        return Err("--duration must be positive".into());
    }
    config.duration = args.duration;
    config.compare_fio = args.compare_fio;
    config.fio_repeats = args.fio_repeats;
    config.seed = args.seed;
    config.keep_file = args.keep_file;
    config.progress = !args.report.quiet;
    config.command = std::env::args().collect::<Vec<_>>().join(" ");
    let report = device::run(&config).map_err(|e| e.to_string())?;
    let mut out = std::io::stdout().lock();
    println!(
        "machine: {}, {} cores, {:.1} GiB, kernel {}, flush {}",
        report.machine.cpu_model,
        report.machine.cores,
        report.machine.memory_bytes as f64 / (1u64 << 30) as f64,
        report.machine.kernel,
        report.machine.flush
    );
    println!(
        "file: {} ({} bytes on {}, DAX {}), pmem mode {} ({})",
        report.file.path,
        report.file.size_bytes,
        report.file.fs_type,
        yes_no(report.file.dax),
        report.file.pmem_mode.name(),
        report.file.pmem_mode.describe()
    );
    device::output::print_table(&report, &mut out).map_err(|e| e.to_string())?;
    if !report.fio.is_empty() {
        device::output::print_fio_table(&report, &mut out).map_err(|e| e.to_string())?;
    }
    for (spec, reason) in &report.skipped {
        println!("skipped {spec}: {reason}");
    }
    if let Some(path) = &args.report.report {
        device::write_json(&report, path).map_err(|e| e.to_string())?;
    }
    if let Some(path) = &args.csv {
        device::output::write_csv(&report, path).map_err(|e| e.to_string())?;
    }
    if let Some(dir) = &args.report.plot {
        let plots = device::plot::write_plots(&report, dir).map_err(|e| e.to_string())?;
        for plot in plots {
            println!("plot: {}", plot.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_wal(args: WalArgs) -> Result<ExitCode, String> {
    let mut config = WalBenchConfig::new(&args.path);
    config.backends = args.backend;
    config.threads = args.threads;
    config.record_sizes = args
        .record_size
        .iter()
        .map(|size| size.to_usize("--record-size"))
        .collect::<Result<_, _>>()?;
    config.duration = args.duration;
    config.durability = args.durability;
    config.segment_bytes = args.segment_size.bytes();
    config.limit_trials = args.limit_trials;
    config.peers = !args.no_peers;
    config.progress = !args.report.quiet;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let report = wal_bench::run(&config, &command).map_err(|e| e.to_string())?;
    wal_bench::output::print_table(&report, &mut std::io::stdout().lock())
        .map_err(|e| e.to_string())?;
    if let Some(path) = &args.report.report {
        wal_bench::write_json(&report, path).map_err(|e| e.to_string())?;
    }
    if let Some(dir) = &args.report.plot {
        for plot in wal_bench::plot::write_plots(&report, dir).map_err(|e| e.to_string())? {
            println!("plot: {}", plot.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_blocks(args: BlocksArgs) -> Result<ExitCode, String> {
    let mut config = BlocksBenchConfig::new(&args.path);
    config.latency_repeats = args.repeats;
    config.bandwidth_repeats = args.bandwidth_repeats;
    config.patterns = args.patterns;
    config.micro_file_bytes = args.file_size.bytes();
    config.stride_blocks = args.stride_blocks;
    config.page_sizes = args
        .page_sizes
        .iter()
        .map(|size| size.to_usize("--page-sizes"))
        .collect::<Result<_, _>>()?;
    config.data_set_bytes = args.data_size.bytes();
    config.run_length = match args.updates {
        Some(updates) => blocks_bench::RunLength::Updates(updates),
        None => blocks_bench::RunLength::Seconds(args.duration.as_secs_f64()),
    };
    config.distribution = args.distribution;
    config.zipf_theta = args.theta;
    config.checkpoint_every = args.checkpoint_every;
    config.trials = args.trials;
    config.group_pages_max = args.group_pages;
    config.overwrite = (!args.overwrite_duration.is_zero()).then_some(args.overwrite_duration);
    config.overwrite_page_bytes = args.overwrite_page_size.to_usize("--overwrite-page-size")?;
    config.seed = args.seed;
    config.progress = !args.report.quiet;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let report = blocks_bench::run(&config, &command).map_err(|e| e.to_string())?;
    blocks_bench::output::print_table(&report, &mut std::io::stdout().lock())
        .map_err(|e| e.to_string())?;
    if let Some(path) = &args.report.report {
        blocks_bench::write_json(&report, path).map_err(|e| e.to_string())?;
    }
    if let Some(dir) = &args.report.plot {
        for plot in blocks_bench::plot::write_plots(&report, dir).map_err(|e| e.to_string())? {
            println!("plot: {}", plot.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn info(path: &Path, json: bool) -> Result<(), String> {
    let cpu = pmem::cpu();
    // Describe a scratch file created beside (or in) the path: statx reports O_DIRECT
    // alignment only for regular files, and opening it with the pmem method shows the mode
    // that would be in force. It is removed when dropped, on a panic too.
    let dir = if std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false) {
        path.to_path_buf()
    } else {
        path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    };
    let options = OpenOptions::new(AccessMethod::Pmem).create_new(true).chunk_bytes(4096);
    let probe = tempfile::Builder::new()
        .prefix(".tierkv-info-")
        .make_in(&dir, |probe| Storage::Os.open(probe, &options).map_err(std::io::Error::other))
        .map_err(|e| format!("cannot make a probe file in {}: {e}", dir.display()))?;
    let mode = probe.as_file().pmem_mode();
    let fs = tierkv_io::file_system_info(probe.path()).map_err(|e| e.to_string());
    drop(probe);
    let fs = fs?;
    let nt = if cpu.avx512f { "AVX-512, 64 B stores" } else { "SSE2, 16 B stores" };
    if json {
        let alignment = fs.direct_alignment.map(
            |(memory, offset)| serde_json::json!({"memory_bytes": memory, "offset_bytes": offset}),
        );
        let info = serde_json::json!({
            "cpu": {
                "flush": cpu.flush.name(),
                "clwb": cpu.has_clwb,
                "clflushopt": cpu.has_clflushopt,
                "clflush": cpu.has_clflush,
                "non_temporal": nt,
                "non_temporal_min_bytes": pmem::NT_THRESHOLD_BYTES,
            },
            "path": path.display().to_string(),
            "fs_type": fs.fs_type,
            "memory_fs": fs.is_memory,
            "dax": fs.dax,
            "direct_alignment": alignment,
            "pmem_mode": mode.map(|mode| mode.name()),
        });
        let text = serde_json::to_string_pretty(&info).map_err(|e| e.to_string())?;
        println!("{text}");
        return Ok(());
    }
    println!("cpu persistence");
    println!("  flush instruction     {}", cpu.flush.name());
    println!(
        "  clwb / clflushopt / clflush   {} / {} / {}",
        yes_no(cpu.has_clwb),
        yes_no(cpu.has_clflushopt),
        yes_no(cpu.has_clflush)
    );
    println!("  non-temporal copies   {nt} (at least {} B)", pmem::NT_THRESHOLD_BYTES);
    println!("path {}", path.display());
    println!("  file system           {}", fs.fs_type);
    println!("  memory file system    {}", yes_no(fs.is_memory));
    println!("  DAX                   {}", yes_no(fs.dax));
    match fs.direct_alignment {
        Some((memory, offset)) => {
            println!("  O_DIRECT alignment    memory {memory} B, offset {offset} B (statx)");
        }
        None => println!("  O_DIRECT alignment    not reported (tierkv assumes 4096 B)"),
    }
    if let Some(mode) = mode {
        println!("  pmem mode             {} ({})", mode.name(), mode.describe());
    }
    Ok(())
}

fn print_stress(report: &StressReport) {
    if let Some(mode) = report.pmem_mode {
        println!("pmem mode: {} ({})", mode.name(), mode.describe());
    }
    println!("file system: {}", report.fs_type);
    let rows = [
        ("seconds", format!("{:.1}", report.elapsed_s)),
        ("writes", report.writes.to_string()),
        ("verified reads", report.verified_reads.to_string()),
        ("zero reads (truncated, regrown)", report.zero_reads.to_string()),
        ("past-end reads (truncated)", report.past_end_reads.to_string()),
        ("truncations", report.truncations.to_string()),
        ("growths", report.growths.to_string()),
        ("remaps", report.io.remaps.to_string()),
        ("syscall fallbacks during resize", report.io.fallbacks_resizing.to_string()),
        ("size-changing syscalls", report.io.resize_syscalls.to_string()),
        ("errors", report.errors.to_string()),
    ];
    for (name, value) in rows {
        println!("  {name:<34} {value:>12}");
    }
    for sample in &report.error_samples {
        println!("  error: {sample}");
    }
    println!("{}", if report.errors == 0 { "PASS: zero errors" } else { "FAIL" });
}

fn yes_no(value: bool) -> &'static str {
    if value {
        "yes"
    } else {
        "no"
    }
}
