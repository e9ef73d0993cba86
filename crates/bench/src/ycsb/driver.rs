//! The YCSB driver: a load phase, then each workload's run phase, with client threads,
//! against any engine behind `Store`.
//!
//! - Load: `records` records (keys 0..records in number order, so hashed order in the key
//!   space), shared among the threads by number.
//! - Run: `operations` requests per workload, shared among the threads, each thread with its
//!   own `Requests` stream. Inserts take the next key number from a counter the threads
//!   share; requests choose only among keys whose insert has completed, and all below them
//!   (`Acknowledged`), as YCSB's acknowledged counter does.
//! - A record is `FIELD_COUNT` fields of `FIELD_BYTES` bytes, stored as one value. An update
//!   reads the record, replaces one field and writes it back, as YCSB's bindings for key-value
//!   engines do; a read-modify-write is that same sequence timed as one operation.
//! - Each operation type keeps an HdrHistogram of its latencies (p50, p95, p99, p99.9, max).
//!
//! Not yet: warm-up, a target rate, a duration instead of a count, progress bars and plots.
//!
//! Must never: count an operation that failed, or assert on speed.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::generator::key_name;
use super::{Operation, Requests, WorkloadSpec, FIELD_BYTES, FIELD_COUNT};

/// An engine the driver runs against. Errors are the engine's messages.
pub trait Store: Sync {
    /// The record under `key`, if any.
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String>;
    /// Sets `key` to `value`, as durable as the engine's adapter was configured.
    fn write(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Reads up to `count` records from `from` on, in key order; returns how many.
    fn scan(&self, from: &[u8], count: usize) -> Result<usize, String>;
}

/// The engine under a YCSB run: the `tierkv` crate's `Db`.
pub struct TierkvStore {
    /// The store.
    pub db: tierkv::Db,
    /// Durability of every write.
    pub durability: tierkv::Durability,
}

impl Store for TierkvStore {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.db.get(key).map_err(|e| e.to_string())
    }

    fn write(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let mut batch = tierkv::WriteBatch::new();
        batch.put(key, value);
        self.db.write_with(&batch, self.durability).map_err(|e| e.to_string())
    }

    fn scan(&self, from: &[u8], count: usize) -> Result<usize, String> {
        let mut read = 0;
        for entry in self.db.range(from..).take(count) {
            entry.map_err(|e| e.to_string())?;
            read += 1;
        }
        Ok(read)
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct YcsbConfig {
    /// Records loaded.
    pub records: u64,
    /// Requests per workload.
    pub operations: u64,
    /// Client threads.
    pub threads: usize,
    /// The workloads, in order, on the loaded store (inserts of one stay for the next).
    pub workloads: Vec<WorkloadSpec>,
    /// Seed of the request streams and the record contents.
    pub seed: u64,
}

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
}

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
    /// Per operation type, in a fixed order.
    pub per_operation: Vec<OperationStats>,
}

const OPERATION_NAMES: [&str; 5] = ["read", "update", "insert", "scan", "read_modify_write"];

fn operation_index(operation: Operation) -> usize {
    match operation {
        Operation::Read => 0,
        Operation::Update { .. } => 1,
        Operation::Insert => 2,
        Operation::Scan { .. } => 3,
        Operation::ReadModifyWrite { .. } => 4,
    }
}

fn new_histogram() -> Result<Histogram<u64>, String> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).map_err(|e| e.to_string())
}

/// Key numbers whose inserts have completed: every number below `floor`, the ones above it
/// that finished early waiting in `ahead`.
struct Acknowledged {
    state: Mutex<(u64, BTreeSet<u64>)>,
    floor: AtomicU64,
}

impl Acknowledged {
    fn new(floor: u64) -> Acknowledged {
        Acknowledged { state: Mutex::new((floor, BTreeSet::new())), floor: AtomicU64::new(floor) }
    }

    fn get(&self) -> u64 {
        self.floor.load(Ordering::Acquire)
    }

    fn done(&self, number: u64) {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (floor, ahead) = &mut *state;
        ahead.insert(number);
        while ahead.remove(floor) {
            *floor += 1;
        }
        self.floor.store(*floor, Ordering::Release);
    }
}

/// The record of key number `number`: its fields' bytes, a function of the number, a seed
/// and a version (so an update changes it).
fn record(number: u64, seed: u64, version: u64) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(seed ^ number.rotate_left(17) ^ version);
    let mut value = vec![0u8; FIELD_COUNT * FIELD_BYTES];
    // Printable bytes, as YCSB's random field values are.
    for byte in &mut value {
        *byte = rng.u8(b' '..=b'~');
    }
    value
}

/// Runs `work(thread)` on `threads` scoped threads at once and returns their results in
/// thread order, or the first error (a thread that panicked is one).
fn on_threads<T: Send>(
    threads: u64,
    work: impl Fn(u64) -> Result<T, String> + Sync,
) -> Result<Vec<T>, String> {
    std::thread::scope(|scope| {
        let work = &work;
        let handles: Vec<_> =
            (0..threads).map(|thread| scope.spawn(move || work(thread))).collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap_or_else(|_| Err("a thread panicked".into())))
            .collect()
    })
}

/// Loads `config.records` records.
pub fn load(store: &dyn Store, config: &YcsbConfig) -> Result<PhaseResult, String> {
    let threads = config.threads.max(1) as u64;
    let started = Instant::now();
    let results = on_threads(threads, |thread| {
        let mut histogram = new_histogram()?;
        let mut number = thread;
        while number < config.records {
            let value = record(number, config.seed, 0);
            let t = Instant::now();
            store.write(key_name(number).as_bytes(), &value)?;
            histogram.saturating_record(t.elapsed().as_nanos() as u64);
            number += threads;
        }
        Ok(histogram)
    })?;
    let seconds = started.elapsed().as_secs_f64();
    let mut inserts = new_histogram()?;
    for histogram in results {
        inserts.add(histogram).map_err(|e| e.to_string())?;
    }
    let mut per_operation: Vec<Option<Histogram<u64>>> = vec![None; OPERATION_NAMES.len()];
    per_operation[2] = Some(inserts);
    Ok(phase("load", config.records, seconds, 0, &per_operation))
}

fn phase(
    name: &str,
    operations: u64,
    seconds: f64,
    not_found: u64,
    histograms: &[Option<Histogram<u64>>],
) -> PhaseResult {
    let micros = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1_000.0;
    PhaseResult {
        phase: name.into(),
        operations,
        seconds,
        ops_per_sec: operations as f64 / seconds.max(1e-9),
        not_found,
        per_operation: histograms
            .iter()
            .zip(OPERATION_NAMES)
            .filter_map(|(h, name)| Some((h.as_ref().filter(|h| !h.is_empty())?, name)))
            .map(|(h, name)| OperationStats {
                operation: name.into(),
                count: h.len(),
                p50_us: micros(h, 0.5),
                p95_us: micros(h, 0.95),
                p99_us: micros(h, 0.99),
                p999_us: micros(h, 0.999),
                max_us: h.max() as f64 / 1_000.0,
            })
            .collect(),
    }
}

/// Runs `spec`'s requests on a store holding `inserted` records (key numbers
/// `0..inserted`); returns the phase and the new record count.
pub fn run_workload(
    store: &dyn Store,
    spec: WorkloadSpec,
    config: &YcsbConfig,
    inserted: u64,
) -> Result<(PhaseResult, u64), String> {
    let threads = config.threads.max(1) as u64;
    let next_insert = AtomicU64::new(inserted);
    let acknowledged = Acknowledged::new(inserted);
    let started = Instant::now();
    let results = on_threads(threads, |thread| {
        let operations =
            config.operations / threads + u64::from(thread < config.operations % threads);
        let seed = config.seed ^ (thread + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut requests = Requests::new(spec, inserted, config.operations, seed);
        let mut histograms =
            (0..OPERATION_NAMES.len()).map(|_| new_histogram()).collect::<Result<Vec<_>, _>>()?;
        let mut not_found = 0u64;
        for op in 0..operations {
            let request = requests.next(acknowledged.get());
            let t = Instant::now();
            match request.operation {
                Operation::Read => {
                    let key = key_name(request.key);
                    not_found += u64::from(store.read(key.as_bytes())?.is_none());
                }
                Operation::Update { field } | Operation::ReadModifyWrite { field } => {
                    let key = key_name(request.key);
                    let Some(mut value) = store.read(key.as_bytes())? else {
                        not_found += 1;
                        continue;
                    };
                    let fresh = record(request.key, config.seed, op + 1);
                    let range = field * FIELD_BYTES..(field + 1) * FIELD_BYTES;
                    if value.len() >= range.end {
                        value[range.clone()].copy_from_slice(&fresh[range]);
                    }
                    store.write(key.as_bytes(), &value)?;
                }
                Operation::Insert => {
                    let number = next_insert.fetch_add(1, Ordering::AcqRel);
                    let value = record(number, config.seed, 0);
                    store.write(key_name(number).as_bytes(), &value)?;
                    acknowledged.done(number);
                }
                Operation::Scan { length } => {
                    let key = key_name(request.key);
                    store.scan(key.as_bytes(), length as usize)?;
                }
            }
            histograms[operation_index(request.operation)]
                .saturating_record(t.elapsed().as_nanos() as u64);
        }
        Ok((histograms, not_found))
    })?;
    let seconds = started.elapsed().as_secs_f64();
    let mut merged: Vec<Option<Histogram<u64>>> = vec![None; OPERATION_NAMES.len()];
    let mut not_found = 0;
    let mut done = 0;
    for (histograms, missing) in results {
        not_found += missing;
        for (slot, histogram) in merged.iter_mut().zip(histograms) {
            done += histogram.len();
            match slot {
                Some(total) => total.add(&histogram).map_err(|e| e.to_string())?,
                None => *slot = Some(histogram),
            }
        }
    }
    let name = spec.name.to_string();
    Ok((phase(&name, done, seconds, not_found, &merged), next_insert.load(Ordering::Acquire)))
}

/// The load, then every workload of `config` in order on the loaded store.
pub fn run_all(store: &dyn Store, config: &YcsbConfig) -> Result<Vec<PhaseResult>, String> {
    let mut phases = vec![load(store, config)?];
    let mut inserted = config.records;
    for spec in &config.workloads {
        let (result, now) = run_workload(store, *spec, config, inserted)?;
        phases.push(result);
        inserted = now;
    }
    Ok(phases)
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
    }
    out
}

/// One engine's phases.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EngineRun {
    /// `tierkv`, `redb`, `fjall`, …
    pub engine: String,
    /// The load, then each workload.
    pub phases: Vec<PhaseResult>,
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
    /// Requests per workload.
    pub operations: u64,
    /// Client threads.
    pub threads: usize,
    /// Durability of every write.
    pub durability: String,
    /// Each engine's cache, bytes.
    pub cache_bytes: usize,
    /// The process's allocator.
    pub allocator: String,
    /// Each engine's phases, in the order run.
    pub engines: Vec<EngineRun>,
}

/// Ops/s of each engine's run phases, side by side, with tierkv's ratio to the best peer
/// in each column (when tierkv and a peer both ran).
pub fn comparison(runs: &[EngineRun]) -> String {
    use std::fmt::Write as _;
    let phases: Vec<String> = runs
        .first()
        .map(|run| run.phases.iter().map(|p| p.phase.clone()).collect())
        .unwrap_or_default();
    let rate = |phases: &[PhaseResult], name: &str| {
        phases.iter().find(|p| p.phase == name).map(|p| p.ops_per_sec)
    };
    let mut out = format!("{:<10}", "engine");
    for phase in &phases {
        let _ = write!(out, " {phase:>10}");
    }
    out.push('\n');
    for run in runs {
        let _ = write!(out, "{:<10}", run.engine);
        for phase in &phases {
            let cell = rate(&run.phases, phase).map_or("-".into(), |r| format!("{r:.0}"));
            let _ = write!(out, " {cell:>10}");
        }
        out.push('\n');
    }
    let ours = runs.iter().find(|run| run.engine == "tierkv");
    if let Some(ours) = ours.filter(|_| runs.len() > 1) {
        let _ = write!(out, "{:<10}", "ratio");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_core_workload_runs_against_tierkv_on_a_tiny_store() {
        let dir = tempfile::tempdir().expect("dir");
        let options = tierkv::Options { cache_size: 4 << 20, ..tierkv::Options::default() };
        let db = tierkv::Db::open(dir.path(), options).expect("open");
        let store = TierkvStore { db, durability: tierkv::Durability::None };
        let config = YcsbConfig {
            records: 2_000,
            operations: 3_000,
            threads: 3,
            workloads: WorkloadSpec::CORE.to_vec(),
            seed: 5,
        };
        let loaded = load(&store, &config).expect("load");
        assert_eq!(loaded.operations, 2_000);
        assert_eq!(loaded.per_operation.len(), 1);
        assert!(table(&[loaded]).contains("insert"));
        let mut inserted = config.records;
        for spec in &config.workloads {
            let (result, now) = run_workload(&store, *spec, &config, inserted).expect("run");
            // Every request was done, and every key read was there.
            assert_eq!(result.operations, 3_000, "{result:?}");
            assert_eq!(result.not_found, 0, "{result:?}");
            let counted: u64 = result.per_operation.iter().map(|o| o.count).sum();
            assert_eq!(counted, 3_000);
            let inserts = result.per_operation.iter().find(|o| o.operation == "insert");
            assert_eq!(now - inserted, inserts.map_or(0, |o| o.count), "{spec:?}");
            inserted = now;
        }
        // The inserts of D and E are in the store, under their hashed keys.
        assert!(inserted > config.records);
        assert!(store.read(key_name(inserted - 1).as_bytes()).expect("read").is_some());
        assert_eq!(store.scan(b"", usize::MAX).expect("scan") as u64, inserted);
        store.db.close().expect("close");
    }

    #[test]
    fn the_comparison_sets_tierkv_beside_the_best_peer() {
        let phase = |name: &str, ops_per_sec: f64| PhaseResult {
            phase: name.into(),
            operations: 1,
            seconds: 1.0,
            ops_per_sec,
            not_found: 0,
            per_operation: Vec::new(),
        };
        let run = |engine: &str, phases| EngineRun { engine: engine.into(), phases };
        let runs = vec![
            run("tierkv", vec![phase("a", 300.0), phase("c", 100.0)]),
            run("redb", vec![phase("a", 100.0), phase("c", 400.0)]),
            run("fjall", vec![phase("a", 150.0)]),
        ];
        let text = comparison(&runs);
        let ratio = text.lines().find(|l| l.starts_with("ratio")).expect("ratio row");
        // a: 300 against fjall's 150; c: 100 against redb's 400.
        assert_eq!(ratio.split_whitespace().collect::<Vec<_>>(), ["ratio", "2.00", "0.25"]);
        assert!(text.lines().any(|l| l.starts_with("fjall") && l.trim_end().ends_with('-')));
        // One engine alone: no ratio row.
        assert!(!comparison(&runs[..1]).contains("ratio"));
    }

    #[test]
    fn acknowledged_numbers_advance_only_over_completed_inserts() {
        let acknowledged = Acknowledged::new(10);
        acknowledged.done(12);
        assert_eq!(acknowledged.get(), 10);
        acknowledged.done(10);
        assert_eq!(acknowledged.get(), 11);
        acknowledged.done(11);
        assert_eq!(acknowledged.get(), 13);
    }
}
