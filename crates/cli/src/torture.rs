//! `tierkv torture crash`: the kill -9 loop (`tierkv_bench::torture` holds the protocol and
//! the check). Each cycle starts this binary again as `tierkv torture child` on the store,
//! reads its lines into the model, kills it with SIGKILL after a random delay, reopens the
//! store here and checks it. The next cycle runs on the same store.
//!
//! Must never: check a store while a child may still write to it (the child is waited for
//! after the kill, and its lines are read to the end), or report a run clean that had a
//! violation (the exit code is 1 then).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use std::os::unix::process::ExitStatusExt;
use tierkv::{Db, Durability, Options};

use tierkv_bench::torture::{
    self, CheckReport, CycleReport, Model, TortureReport, WorkloadOptions,
};

use crate::flags::{parse_duration, parse_size, ByteSize, DURATION, SIZE};
use crate::kv::EngineArgs;

/// SIGKILL's number (9 on every Linux architecture), which `Child::kill` sends.
const SIGKILL: i32 = 9;

/// The torture tests.
#[derive(Subcommand)]
pub(crate) enum TortureCommand {
    /// Kill -9 loop: a child process writes (Sync puts, deletes and batches) and reports each
    /// acknowledged write; it is killed at a random moment, the store is reopened and every
    /// acknowledged write, every batch's atomicity and `verify` are checked; then again on
    /// the same store.
    Crash(Box<CrashArgs>),
    /// The child of `crash` (not for direct use): writes to the store until killed.
    #[command(hide = true)]
    Child(Box<ChildArgs>),
}

/// The workload both sides agree on.
#[derive(Args, Clone)]
pub(crate) struct WorkloadArgs {
    /// Writer threads in the child.
    #[arg(long, default_value_t = 4)]
    writer_threads: u32,
    /// Keys each writer owns.
    #[arg(long, default_value_t = 500)]
    keys: u32,
    /// Usual value size (each write draws from half this to this).
    #[arg(long, default_value = "200", value_name = SIZE, value_parser = parse_size)]
    value_size: ByteSize,
    /// Size of the value one write in 50 gets (over a quarter of a page: an overflow value).
    #[arg(long, default_value = "5000", value_name = SIZE, value_parser = parse_size)]
    large_value_size: ByteSize,
    #[command(flatten)]
    engine: EngineArgs,
}

impl WorkloadArgs {
    fn options(&self) -> Options {
        // Every write is Sync anyway; small caches make checkpoints and evictions frequent.
        self.engine.apply(Options { durability: Durability::Sync, ..Options::default() })
    }

    fn workload(&self, seed: u64, cycle: u64) -> Result<WorkloadOptions, String> {
        let bytes = |size: ByteSize, flag: &str| {
            u32::try_from(size.bytes()).map_err(|_| format!("{flag} {size} is too large"))
        };
        Ok(WorkloadOptions {
            threads: self.writer_threads,
            keys_per_thread: self.keys,
            value_bytes: bytes(self.value_size, "--value-size")?,
            large_value_bytes: bytes(self.large_value_size, "--large-value-size")?,
            seed,
            cycle,
        })
    }

    /// The arguments that make a child run this workload.
    fn child_args(&self) -> Vec<String> {
        let e = &self.engine;
        let mut args = vec![
            format!("--writer-threads={}", self.writer_threads),
            format!("--keys={}", self.keys),
            format!("--value-size={}", self.value_size),
            format!("--large-value-size={}", self.large_value_size),
            format!("--cache-size={}", e.cache_size),
            format!("--read-method={}", e.read_method.name()),
            format!("--compression={}", e.compression.name()),
        ];
        if let Some(backend) = e.log_backend {
            args.push(format!("--log-backend={}", backend.name()));
        }
        if let Some(log_dir) = &e.log_dir {
            args.push(format!("--log-dir={}", log_dir.display()));
        }
        args
    }
}

#[derive(Args)]
pub(crate) struct CrashArgs {
    /// The store's directory: made if missing; a store already there must have been made by
    /// this command with the same --writer-threads and --keys (its keys are checked as
    /// found).
    #[arg(long)]
    path: PathBuf,
    /// Kill cycles.
    #[arg(long, default_value_t = 100)]
    cycles: u64,
    /// The child is killed this long after it is ready, at least.
    #[arg(long, default_value = "10ms", value_name = DURATION, value_parser = parse_duration)]
    kill_min: Duration,
    /// And at most.
    #[arg(long, default_value = "500ms", value_name = DURATION, value_parser = parse_duration)]
    kill_max: Duration,
    /// Seed of the kill delays and of the children's writes.
    #[arg(long, default_value_t = 0x7047_0001)]
    seed: u64,
    #[command(flatten)]
    workload: WorkloadArgs,
    /// Write the report (every cycle) as JSON to this file.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args)]
pub(crate) struct ChildArgs {
    #[arg(long)]
    path: PathBuf,
    #[arg(long)]
    seed: u64,
    #[arg(long)]
    cycle: u64,
    #[command(flatten)]
    workload: WorkloadArgs,
}

pub(crate) fn run(command: TortureCommand) -> Result<ExitCode, String> {
    match command {
        TortureCommand::Crash(args) => crash(*args),
        TortureCommand::Child(args) => child(*args),
    }
}

fn child(args: ChildArgs) -> Result<ExitCode, String> {
    let db = Db::open(&args.path, args.workload.options())
        .map_err(|e| format!("cannot open {}: {e}", args.path.display()))?;
    let out = Mutex::new(std::io::stdout());
    let stop = AtomicBool::new(false);
    torture::run_child(&db, &args.workload.workload(args.seed, args.cycle)?, &out, &stop)?;
    Ok(ExitCode::SUCCESS)
}

fn crash(args: CrashArgs) -> Result<ExitCode, String> {
    if args.cycles == 0 || args.workload.writer_threads == 0 || args.workload.keys == 0 {
        return Err("--cycles, --writer-threads and --keys must be at least 1".into());
    }
    if args.kill_min > args.kill_max {
        return Err("--kill-min must not be over --kill-max".into());
    }
    // The delays are drawn in whole milliseconds.
    let kill_ms = (args.kill_min.as_millis() as u64, args.kill_max.as_millis() as u64);
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    let options = args.workload.options();
    let store = format!(
        "{} (reads {}, log {} in {})",
        args.path.display(),
        options.read_method.name(),
        options.backend().name(),
        options.log_dir.as_ref().map_or("the store".into(), |d| d.display().to_string())
    );
    let mut report = TortureReport {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        workload: args.workload.workload(args.seed, 0)?,
        store: store.clone(),
        cycles: Vec::new(),
    };
    // What the store holds before the first cycle: nothing, or what an earlier run left.
    let mut model = Model::default();
    if args.path.exists() {
        let db = Db::open(&args.path, options.clone())
            .map_err(|e| format!("cannot open {}: {e}", args.path.display()))?;
        let foreign =
            torture::adopt(&db, &mut model, args.workload.writer_threads, args.workload.keys);
        if let Some(first) = foreign.first() {
            return Err(format!(
                "{} holds data this workload did not write ({} problems; the first: {first})",
                args.path.display(),
                foreign.len()
            ));
        }
        db.close().map_err(|e| e.to_string())?;
    }
    let progress = if args.quiet {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::new(args.cycles);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} cycles, ETA {eta} {msg}")
                .map_err(|e| e.to_string())?,
        );
        bar
    };
    let mut rng = fastrand::Rng::with_seed(args.seed);
    for cycle in 0..args.cycles {
        let delay = torture::kill_delay(&mut rng, kill_ms);
        let outcome = run_cycle(&args, &exe, &mut model, cycle, delay, &options)?;
        let bad = outcome.check.violations.len() + outcome.check.verify_problems.len();
        if bad > 0 {
            progress.println(format!(
                "cycle {cycle}: {bad} violation(s): {}",
                outcome
                    .check
                    .violations
                    .iter()
                    .chain(&outcome.check.verify_problems)
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        let unopenable = outcome.reopen_ms.is_nan();
        report.cycles.push(outcome);
        progress.set_message(format!("{} violations", report.violations()));
        progress.inc(1);
        if unopenable {
            // Nothing more can run on a store that does not open.
            break;
        }
    }
    progress.finish_and_clear();
    print!("{}", report.summary());
    if let Some(file) = &args.report {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    }
    Ok(if report.violations() == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn run_cycle(
    args: &CrashArgs,
    exe: &std::path::Path,
    model: &mut Model,
    cycle: u64,
    delay: Duration,
    options: &Options,
) -> Result<CycleReport, String> {
    let mut child = Command::new(exe)
        .args(["torture", "child", "--path"])
        .arg(&args.path)
        .arg(format!("--seed={}", args.seed))
        .arg(format!("--cycle={cycle}"))
        .args(args.workload.child_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the child: {e}"))?;
    let stdout = child.stdout.take().ok_or("the child has no stdout")?;
    let (lines, received) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    // Wait for READY (the child has opened and recovered the store), then let it write.
    model.acks = 0;
    model.ready = false;
    let opened = Instant::now();
    while !model.ready {
        match received.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => model.take_line(&line),
            Err(_) => {
                let _ = child.kill();
                let output = child.wait_with_output().map_err(|e| e.to_string())?;
                return Err(format!(
                    "cycle {cycle}: the child was not ready after {:.0} s: {}",
                    opened.elapsed().as_secs_f64(),
                    String::from_utf8_lossy(&output.stderr).trim()
                ));
            }
        }
    }
    let started = Instant::now();
    while started.elapsed() < delay {
        if let Ok(line) = received.recv_timeout(delay.saturating_sub(started.elapsed())) {
            model.take_line(&line);
        }
    }
    let killed_after_ms = started.elapsed().as_millis() as u64;
    // SIGKILL: no destructor, no flush, no close.
    let _ = child.kill();
    let status = child.wait().map_err(|e| e.to_string())?;
    let _ = reader.join();
    for line in received.try_iter() {
        model.take_line(&line);
    }
    if !model.protocol_errors.is_empty() {
        return Err(format!(
            "cycle {cycle}: the child broke the protocol: {:?}",
            model.protocol_errors
        ));
    }
    if status.signal() != Some(SIGKILL) {
        // It ended on its own (a failed write, a panic) before the kill.
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            use std::io::Read;
            let _ = pipe.read_to_string(&mut stderr);
        }
        return Err(format!(
            "cycle {cycle}: the child ended before the kill ({status}): {}",
            stderr.trim()
        ));
    }
    let (acks, in_flight) = (model.acks, model.in_flight() as u64);
    let reopen = Instant::now();
    let db = match Db::open(&args.path, options.clone()) {
        Ok(db) => db,
        Err(error) => {
            // The worst violation: recovery itself fails.
            let check = CheckReport {
                violations: vec![format!("the store does not reopen: {error}")],
                ..CheckReport::default()
            };
            let reopen_ms = f64::NAN;
            return Ok(CycleReport { cycle, killed_after_ms, acks, in_flight, reopen_ms, check });
        }
    };
    let reopen_ms = torture::millis(reopen);
    let check = torture::check(&db, model, args.workload.writer_threads, args.workload.keys);
    db.close().map_err(|e| format!("cycle {cycle}: close failed: {e}"))?;
    Ok(CycleReport { cycle, killed_after_ms, acks, in_flight, reopen_ms, check })
}
