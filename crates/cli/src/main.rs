//! `tierkv`: the command-line tool. Thin by design: it parses arguments, calls the crates
//! below, and prints what they report. It never makes system calls of its own (only
//! `tierkv-io` does).

#![cfg_attr(not(test), deny(clippy::unwrap_used))]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use tierkv_io::stress::{self, StressConfig, StressReport};
use tierkv_io::{pmem, AccessMethod, OpenOptions, Storage};

#[derive(Parser)]
#[command(
    name = "tierkv",
    version,
    about = "tierkv: an embedded, crash-safe, ordered key-value engine for tiered memory and storage"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show what this machine offers tierkv: cache-line flush, non-temporal stores, and for a
    /// path its file system, DAX, O_DIRECT alignment and the pmem mode that would be used.
    Info {
        /// A file or directory to describe (default: the current directory).
        #[arg(long, default_value = ".")]
        path: PathBuf,
    },
    /// Stress the lock-free remap protocol: workers read and write self-verifying blocks
    /// through a mapping while a resizer grows and truncates the file without pause.
    Stress {
        /// Directory for the stress file (default: a new temporary directory).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Access method: mmap or pmem.
        #[arg(long, default_value = "mmap")]
        method: AccessMethod,
        /// Seconds to run.
        #[arg(long, default_value_t = 60.0)]
        seconds: f64,
        /// Worker threads (the resizer is one more).
        #[arg(long, default_value_t = 4)]
        workers: usize,
        /// Seed of the workers' and the resizer's choices.
        #[arg(long, default_value_t = 0x5eed_0001)]
        seed: u64,
        /// Also write the report as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("tierkv: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode, String> {
    match cli.command {
        Command::Info { path } => info(&path).map(|()| ExitCode::SUCCESS),
        Command::Stress { dir, method, seconds, workers, seed, json } => {
            if !(seconds.is_finite() && seconds > 0.0) {
                return Err(format!("--seconds must be a positive number, got {seconds}"));
            }
            let scratch = dir.is_none();
            let dir = dir.unwrap_or_else(|| {
                std::env::temp_dir().join(format!("tierkv-stress-{}", std::process::id()))
            });
            let mut config = StressConfig::new(&dir, Duration::from_secs_f64(seconds));
            config.method = method;
            config.workers = workers;
            config.seed = seed;
            println!(
                "stress: {method} on {}, {workers} workers + 1 resizer, {seconds} s, seed {seed:#x}",
                dir.display()
            );
            let report = stress::run(&config).map_err(|e| e.to_string());
            if scratch {
                let _ = std::fs::remove_dir(&dir);
            }
            let report = report?;
            print_stress(&report);
            if let Some(json) = json {
                let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
                std::fs::write(&json, text)
                    .map_err(|e| format!("cannot write {}: {e}", json.display()))?;
            }
            Ok(if report.errors == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
    }
}

fn info(path: &std::path::Path) -> Result<(), String> {
    let cpu = pmem::cpu();
    println!("cpu persistence");
    println!("  flush instruction     {}", cpu.flush.name());
    println!(
        "  clwb / clflushopt / clflush   {} / {} / {}",
        yes_no(cpu.has_clwb),
        yes_no(cpu.has_clflushopt),
        yes_no(cpu.has_clflush)
    );
    println!(
        "  non-temporal copies   {} (at least {} B)",
        if cpu.avx512f { "AVX-512, 64 B stores" } else { "SSE2, 16 B stores" },
        pmem::NT_THRESHOLD_BYTES
    );
    // Describe a scratch file created beside (or in) the path: statx reports O_DIRECT
    // alignment only for regular files, and opening it with the pmem method shows the mode
    // that would be in force.
    let dir = if std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false) {
        path.to_path_buf()
    } else {
        path.parent().map_or_else(|| PathBuf::from("."), std::path::Path::to_path_buf)
    };
    let probe = dir.join(format!(".tierkv-info-{}", std::process::id()));
    let storage = Storage::Os;
    let options = OpenOptions::new(AccessMethod::Pmem).create_new(true).chunk_bytes(4096);
    let file = storage.open(&probe, &options).map_err(|e| e.to_string())?;
    let mode = file.pmem_mode();
    let fs = tierkv_io::file_system_info(&probe);
    drop(file);
    let _ = storage.remove_file(&probe);
    let fs = fs.map_err(|e| e.to_string())?;
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
