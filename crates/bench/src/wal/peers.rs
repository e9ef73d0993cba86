//! The peers of the WAL benchmark, run on the same path with the same thread counts and record
//! sizes:
//!
//! - RocksDB: `db_bench --benchmarks=fillrandom --sync=1` (Debian's rocksdb-tools), one write
//!   per synced WAL append, no compression, keys of 16 bytes.
//! - SQLite: WAL mode, `synchronous=FULL`, one row per transaction (autocommit), a prepared
//!   `INSERT` per row, one connection per thread (SQLite serialises writers). Linked from
//!   Debian's libsqlite3 through rusqlite, behind the `sqlite` cargo feature, so `cargo test`
//!   never builds it.
//!
//! A peer that is not installed or not built is reported in `peers_skipped` with the way to
//! get it, never silently left out.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use indicatif::ProgressBar;

use super::{PeerPoint, WalBenchConfig};
use crate::device::BenchError;

/// Name of RocksDB's benchmark tool.
const DB_BENCH: &str = "db_bench";

/// Directory db_bench writes its database and WAL in, under the bench path.
const ROCKSDB_DIR: &str = "rocksdb-wal-bench";

/// What `run` will run.
#[derive(Clone, Debug, Default)]
pub struct PeerPlan {
    /// db_bench's path, when found.
    pub rocksdb: Option<PathBuf>,
    /// SQLite was built in.
    pub sqlite: bool,
    /// Peers that will not run, and why.
    pub skipped: Vec<String>,
    threads: Vec<usize>,
    record_sizes: Vec<usize>,
}

impl PeerPlan {
    /// Points the plan will run.
    pub fn points(&self) -> usize {
        (usize::from(self.rocksdb.is_some()) + usize::from(self.sqlite))
            * self.threads.len()
            * self.record_sizes.len()
    }
}

/// Finds the peers installed on this machine.
pub fn plan(config: &WalBenchConfig) -> PeerPlan {
    let mut plan = PeerPlan {
        threads: config.threads.clone(),
        record_sizes: config.record_sizes.clone(),
        ..PeerPlan::default()
    };
    plan.rocksdb = find_in_path(DB_BENCH);
    if plan.rocksdb.is_none() {
        plan.skipped.push(format!(
            "rocksdb: `{DB_BENCH}` is not installed; `bash scripts/install-tools.sh` installs it \
             (Debian package rocksdb-tools)"
        ));
    }
    plan.sqlite = cfg!(feature = "sqlite");
    if !plan.sqlite {
        plan.skipped.push(
            "sqlite: this build has no SQLite; build with `cargo build --release -p tierkv-cli \
             --features peers` (links Debian's libsqlite3-dev)"
                .into(),
        );
    }
    plan
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths).map(|dir| dir.join(name)).find(|candidate| candidate.is_file())
}

/// Runs the plan; returns the points and the peers that failed to run, with the reason.
pub fn run(
    plan: &PeerPlan,
    config: &WalBenchConfig,
    progress: &ProgressBar,
) -> Result<(Vec<PeerPoint>, Vec<String>), BenchError> {
    let mut points = Vec::new();
    let mut failed = Vec::new();
    if let Some(db_bench) = &plan.rocksdb {
        'rocksdb: for &record_bytes in &plan.record_sizes {
            for &threads in &plan.threads {
                progress.set_message(format!("rocksdb {threads} thr {record_bytes} B"));
                match run_db_bench(db_bench, &config.path, threads, record_bytes, config.duration) {
                    Ok(point) => points.push(point),
                    Err(reason) => {
                        failed.push(format!("rocksdb: {reason}"));
                        break 'rocksdb;
                    }
                }
                progress.inc(1);
            }
        }
    }
    if plan.sqlite {
        for &record_bytes in &plan.record_sizes {
            for &threads in &plan.threads {
                progress.set_message(format!("sqlite {threads} thr {record_bytes} B"));
                points.push(sqlite::run(&config.path, threads, record_bytes, config.duration)?);
                progress.inc(1);
            }
        }
    }
    Ok((points, failed))
}

fn run_db_bench(
    db_bench: &Path,
    dir: &Path,
    threads: usize,
    record_bytes: usize,
    duration: Duration,
) -> Result<PeerPoint, String> {
    let db = dir.join(ROCKSDB_DIR);
    let seconds = duration.as_secs().max(1);
    let args = vec![
        "--benchmarks=fillrandom".to_string(),
        "--sync=1".to_string(),
        format!("--db={}", db.display()),
        format!("--wal_dir={}", db.display()),
        format!("--threads={threads}"),
        format!("--value_size={record_bytes}"),
        "--key_size=16".to_string(),
        "--num=100000000".to_string(),
        format!("--duration={seconds}"),
        "--compression_type=none".to_string(),
        "--use_existing_db=0".to_string(),
        "--histogram=1".to_string(),
        "--statistics=0".to_string(),
    ];
    let command = format!("{} {}", db_bench.display(), args.join(" "));
    let output = Command::new(db_bench)
        .args(&args)
        .output()
        .map_err(|e| format!("cannot run `{command}`: {e}"))?;
    // db_bench leaves its database behind; the next point starts from nothing.
    let _ = std::fs::remove_dir_all(&db);
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("`{command}` failed ({}): {}", output.status, stderr.trim()));
    }
    let (ops_per_s, p50_us) = parse_db_bench(&stdout)
        .ok_or_else(|| format!("`{command}`: no fillrandom result in its output"))?;
    Ok(PeerPoint {
        engine: "rocksdb".into(),
        setup: command,
        threads,
        record_bytes,
        commits_per_s: ops_per_s,
        latency_ns_p50: p50_us.map(|us| (us * 1000.0) as u64),
    })
}

/// `fillrandom : 45.1 micros/op 22161 ops/sec ...` and `P50: 40.12` of the histogram.
fn parse_db_bench(stdout: &str) -> Option<(f64, Option<f64>)> {
    let line = stdout
        .lines()
        .find(|line| line.trim_start().starts_with("fillrandom") && line.contains("ops/sec"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let position = words.iter().position(|word| *word == "ops/sec")?;
    let ops_per_s = words.get(position.checked_sub(1)?)?.parse::<f64>().ok()?;
    let p50 = stdout.lines().find_map(|line| {
        let rest = line.trim_start().strip_prefix("Percentiles:")?;
        let after = rest.split("P50:").nth(1)?;
        after.split_whitespace().next()?.parse::<f64>().ok()
    });
    Some((ops_per_s, p50))
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    use super::super::{new_histogram, PeerPoint};
    use crate::device::BenchError;

    const DB_FILE: &str = "sqlite-wal-bench.db";
    const SETUP: &str =
        "journal_mode=WAL, synchronous=FULL, one row per transaction (autocommit), \
        prepared INSERT into kv(k INTEGER PRIMARY KEY, v BLOB), one connection per thread";

    fn error(e: rusqlite::Error) -> BenchError {
        BenchError::Config(format!("sqlite: {e}"))
    }

    fn remove(dir: &Path) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(dir.join(format!("{DB_FILE}{suffix}")));
        }
    }

    fn connect(path: &Path) -> Result<rusqlite::Connection, BenchError> {
        let connection = rusqlite::Connection::open(path).map_err(error)?;
        connection.busy_timeout(Duration::from_secs(30)).map_err(error)?;
        connection.pragma_update(None, "journal_mode", "WAL").map_err(error)?;
        connection.pragma_update(None, "synchronous", "FULL").map_err(error)?;
        Ok(connection)
    }

    pub fn run(
        dir: &Path,
        threads: usize,
        record_bytes: usize,
        duration: Duration,
    ) -> Result<PeerPoint, BenchError> {
        remove(dir);
        let path = dir.join(DB_FILE);
        connect(&path)?
            .execute_batch("CREATE TABLE kv(k INTEGER PRIMARY KEY, v BLOB)")
            .map_err(error)?;
        let stop = AtomicBool::new(false);
        let started = Instant::now();
        let results: Vec<Result<hdrhistogram::Histogram<u64>, BenchError>> =
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..threads)
                    .map(|thread| {
                        let (path, stop) = (&path, &stop);
                        scope.spawn(move || {
                            let connection = connect(path)?;
                            let mut insert = connection
                                .prepare("INSERT INTO kv VALUES (?1, ?2)")
                                .map_err(error)?;
                            let value = vec![0x5au8; record_bytes];
                            let mut latency = new_histogram();
                            let mut key = (thread as i64) << 40;
                            while !stop.load(Ordering::Relaxed) {
                                let t0 = Instant::now();
                                insert.execute(rusqlite::params![key, value]).map_err(error)?;
                                latency.saturating_record(t0.elapsed().as_nanos() as u64);
                                key += 1;
                            }
                            Ok(latency)
                        })
                    })
                    .collect();
                std::thread::sleep(duration);
                stop.store(true, Ordering::Relaxed);
                handles
                    .into_iter()
                    .map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(BenchError::Config("a sqlite writer panicked".into()))
                        })
                    })
                    .collect()
            });
        let elapsed = started.elapsed().as_secs_f64();
        let mut latency = new_histogram();
        for result in results {
            latency.add(result?).map_err(|e| BenchError::Config(format!("histogram: {e}")))?;
        }
        remove(dir);
        Ok(PeerPoint {
            engine: "sqlite".into(),
            setup: format!("SQLite {} ({SETUP})", rusqlite::version()),
            threads,
            record_bytes,
            commits_per_s: latency.len() as f64 / elapsed,
            latency_ns_p50: Some(latency.value_at_quantile(0.5)),
        })
    }
}

#[cfg(not(feature = "sqlite"))]
mod sqlite {
    use std::path::Path;
    use std::time::Duration;

    use super::super::PeerPoint;
    use crate::device::BenchError;

    pub fn run(
        _dir: &Path,
        _threads: usize,
        _record_bytes: usize,
        _duration: Duration,
    ) -> Result<PeerPoint, BenchError> {
        Err(BenchError::Config("this build has no SQLite (the `sqlite` feature is off)".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_bench_output_parses() {
        let stdout = "Initializing RocksDB Options from the specified file\n\
            fillrandom   :      45.123 micros/op 22161 ops/sec 5.001 seconds 110821 operations;    2.8 MB/s\n\
            Microseconds per write:\n\
            Count: 110821 Average: 45.1  StdDev: 10.2\n\
            Percentiles: P50: 40.12 P75: 48.00 P99: 90.10 P99.9: 200.00 P99.99: 900.00\n";
        assert_eq!(parse_db_bench(stdout), Some((22161.0, Some(40.12))));
        assert_eq!(parse_db_bench("nothing here"), None);
    }
}
