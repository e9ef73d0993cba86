//! The keys our YCSB request stream asks for, counted: runs `ycsb::Requests` for one core
//! workload as one client thread of the driver would, and prints `key<TAB>count`, most
//! requested first. `scripts/ycsb-check.sh` calls it and compares the counts with those of
//! YCSB's own `CoreWorkload` (`scripts/ycsb-check/`), which prints the same format.
//!
//! ```text
//! cargo run --release -p tierkv-bench --example ycsb_keys -- <workload a-f> <records> <operations> [--top K] [--seed S]
//! ```
//!
//! Every request that names an existing key counts once: a read, an update, a scan's start
//! key; a read-modify-write counts twice (YCSB's client issues a read and an update). Inserts
//! are not counted: their keys come from the insert counter, not from the distribution.

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use tierkv_bench::ycsb::{generator::key_name, Operation, Requests, WorkloadSpec};

const USAGE: &str = "usage: ycsb_keys <workload a-f> <records> <operations> [--top K] [--seed S]";

/// What to run and print.
struct Args {
    spec: WorkloadSpec,
    records: u64,
    operations: u64,
    top: usize,
    seed: u64,
}

fn parse_number(name: &str, text: Option<String>) -> Result<u64, String> {
    let text = text.ok_or_else(|| format!("missing {name}\n{USAGE}"))?;
    text.replace('_', "").parse().map_err(|error| format!("{name} '{text}': {error}\n{USAGE}"))
}

fn parse_args() -> Result<Args, String> {
    let mut positional = Vec::new();
    let (mut top, mut seed) = (usize::MAX, 1);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--top" => top = parse_number("--top", args.next())? as usize,
            "--seed" => seed = parse_number("--seed", args.next())?,
            "-h" | "--help" => return Err(USAGE.to_string()),
            _ => positional.push(arg),
        }
    }
    let mut positional = positional.into_iter();
    let workload = positional.next().ok_or_else(|| USAGE.to_string())?;
    let spec = WorkloadSpec::core(&workload)
        .ok_or_else(|| format!("unknown workload '{workload}': expected one of a-f\n{USAGE}"))?;
    let records = parse_number("records", positional.next())?;
    let operations = parse_number("operations", positional.next())?;
    if let Some(extra) = positional.next() {
        return Err(format!("unexpected argument '{extra}'\n{USAGE}"));
    }
    Ok(Args { spec, records: records.max(1), operations, top, seed })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    // Counts by key number; inserts append numbers, so the vector grows with them.
    let mut counts = vec![0u64; args.records as usize];
    let mut inserted = args.records;
    let mut requests = Requests::new(args.spec, args.records, args.operations, args.seed);
    for _ in 0..args.operations {
        let request = requests.next(inserted);
        let times = match request.operation {
            Operation::Insert => {
                inserted += 1;
                counts.push(0);
                continue;
            }
            Operation::ReadModifyWrite { .. } => 2,
            Operation::Read | Operation::Update { .. } | Operation::Scan { .. } => 1,
        };
        counts[request.key as usize] += times;
    }

    let mut ranked: Vec<(u64, String)> = (0..)
        .zip(&counts)
        .filter(|&(_, &count)| count > 0)
        .map(|(number, &count)| (count, key_name(number)))
        .collect();
    ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    match write_counts(&ranked[..ranked.len().min(args.top)]) {
        // A closed pipe (`| head`) is not a failure of ours.
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("writing the counts to stdout: {error}");
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    }
}

fn write_counts(ranked: &[(u64, String)]) -> std::io::Result<()> {
    let mut out = BufWriter::new(std::io::stdout().lock());
    for (count, key) in ranked {
        writeln!(out, "{key}\t{count}")?;
    }
    out.flush()
}
