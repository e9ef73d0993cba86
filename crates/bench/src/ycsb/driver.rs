//! The YCSB driver: a load phase, then each workload's run phase, with client threads,
//! against any engine behind `Store`.
//!
//! - Load: `records` records (keys 0..records in number order, so hashed order in the key
//!   space), shared among the threads by number. A duration never cuts a load short: the run
//!   phases need every record.
//! - Run: up to `operations` requests per workload (YCSB's `operationcount`; 0: no count), for
//!   at most `duration` when one is given, whichever bound comes first; operations in flight
//!   when the duration ends complete and count, as in YCSB. The requests are shared among the
//!   threads, each thread with its own `Requests` stream. Inserts take the next key number
//!   from a counter the threads share; requests choose only among keys whose insert has
//!   completed, and all below them (`Acknowledged`), as YCSB's acknowledged counter does.
//! - Target rate (YCSB's `-target`): `target_ops_per_sec` across all threads paces the load
//!   and the run phases. Each thread takes an equal share: its operation `i` is due
//!   `i × threads / target` seconds after the phase start (`Schedule`), fixed from the start,
//!   so an operation that ran late is followed at once by the next until the thread is back on
//!   schedule, as YCSB's throttle does. An operation due at or after the duration is never
//!   started, so a paced phase does at most `target × duration + threads` operations. Latency
//!   is timed from the operation's actual start, as YCSB's default measurement is.
//! - Warm-up: `warmup_operations` requests of each workload before its measured part, from
//!   the same kind of stream (other seeds), unpaced and bounded by their count alone, on the
//!   same store (their inserts stay). They are in none of the phase's figures; the phase
//!   records how many ran and for how long (`PhaseResult::warmup_operations`).
//! - A record is `FIELD_COUNT` fields of `FIELD_BYTES` bytes, stored as one value. An update
//!   reads the record, replaces one field and writes it back, as YCSB's bindings for key-value
//!   engines do; a read-modify-write is that same sequence timed as one operation.
//! - Each operation type keeps an HdrHistogram of its latencies: p50, p95, p99, p99.9, max,
//!   and a CDF at `CDF_PERCENTILES` for the plots (`super::plot`).
//! - With `progress`, each phase (and warm-up) shows a bar on stderr naming the engine and the
//!   phase: operations done of the count, or for a phase bounded by a duration, seconds gone of
//!   it. indicatif draws nothing when stderr is not a terminal.
//!
//! Must never: count an operation that failed or a warm-up one, start an operation due at or
//! after the duration, or assert on speed.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use super::generator::key_name;
use super::{Operation, Requests, WorkloadSpec, FIELD_BYTES, FIELD_COUNT};

mod report;
use report::cdf;
pub use report::{
    comparison, table, CdfPoint, EngineRun, OperationStats, PhaseResult, YcsbReport,
    CDF_PERCENTILES,
};

/// An engine the driver runs against. Errors are the engine's messages.
pub trait Store: Sync {
    /// The record under `key`, if any.
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String>;
    /// Sets `key` to `value`, as durable as the engine's adapter was configured.
    fn write(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Reads up to `count` records from `from` on, in key order, each copied out as owned
    /// bytes (`materialize`) as YCSB's bindings build their result records; returns how many.
    fn scan(&self, from: &[u8], count: usize) -> Result<usize, String>;
    /// The engine's own counters, taken after each phase (cumulative since it opened), if
    /// the adapter reports any: for tierkv, its page cache's and its tier's.
    fn counters(&self) -> Option<serde_json::Value> {
        None
    }
}

/// Copies a scanned record's key and value out, where the compiler cannot drop the copies:
/// what every adapter's scan pays per record, so that an engine whose iterator hands out
/// borrowed bytes is not spared the copy an engine returning owned bytes makes.
pub fn materialize(key: &[u8], value: &[u8]) {
    std::hint::black_box((key.to_vec(), value.to_vec()));
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
        // The scan says how many it wants, so the iterator reads no leaf entry past them,
        // as the peers' cursors, stepped `count` times, do not.
        for entry in self.db.range(from..).limit(count) {
            // tierkv's iterator returns owned copies already: they are the materialised record.
            std::hint::black_box(entry.map_err(|e| e.to_string())?);
            read += 1;
        }
        Ok(read)
    }

    fn counters(&self) -> Option<serde_json::Value> {
        let stats = self.db.stats().ok()?;
        Some(serde_json::json!({
            "page_cache_hits": stats.cache.hits,
            "page_cache_misses": stats.cache.misses,
            "page_cache_bytes": stats.cache_bytes,
            "page_cache_budget": stats.cache_budget,
            "page_cache_evictions": stats.cache.evictions,
            "block_reads": stats.blocks.reads,
            "block_read_bytes": stats.blocks.read_bytes,
            "block_bytes_written": stats.blocks.device_bytes_written,
            "block_relocated_bytes": stats.blocks.relocated_bytes,
            "block_segments_cleaned": stats.blocks.segments_cleaned,
            "block_file_bytes": stats.blocks.file_bytes,
            "block_live_bytes": stats.blocks.live_bytes,
            "log_file_bytes": stats.log_file_bytes,
            "checkpoints": stats.checkpoints,
            "checkpoint_groups": stats.checkpoint_groups,
            "pages_written": stats.pages_written,
            "write_stalls": stats.stalls,
            "tier": stats.tier,
        }))
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct YcsbConfig {
    /// Records loaded.
    pub records: u64,
    /// Requests per workload across the threads, at most (YCSB's `operationcount`); 0: no
    /// count, each workload runs for `duration`.
    pub operations: u64,
    /// Each workload's measured part stops after this long, or after `operations`, whichever
    /// comes first.
    pub duration: Option<Duration>,
    /// Operations per second across all threads (YCSB's `-target`) in the load and the run
    /// phases; `None`: as fast as they go.
    pub target_ops_per_sec: Option<f64>,
    /// Requests of each workload run before its measured part and not counted (0: none).
    pub warmup_operations: u64,
    /// Client threads.
    pub threads: usize,
    /// The workloads, in order, on the loaded store (inserts of one stay for the next).
    pub workloads: Vec<WorkloadSpec>,
    /// Seed of the request streams and the record contents.
    pub seed: u64,
    /// Show a progress bar per phase on stderr.
    pub progress: bool,
    /// The engine's name, for the progress bar.
    pub engine: String,
    /// Run no load: the store holds the `records` records already (a copy of a loaded one).
    pub skip_load: bool,
    /// The first workload's warm-up, when it should differ from `warmup_operations` (to
    /// fill a large cache once, before every workload's own warm-up).
    pub first_warmup_operations: Option<u64>,
}

impl Default for YcsbConfig {
    /// 100,000 records and requests per workload, one thread, workloads A–F, no duration,
    /// target or warm-up, no progress bar.
    fn default() -> YcsbConfig {
        YcsbConfig {
            records: 100_000,
            operations: 100_000,
            duration: None,
            target_ops_per_sec: None,
            warmup_operations: 0,
            threads: 1,
            workloads: WorkloadSpec::CORE.to_vec(),
            seed: 0x5eed_ca5e,
            progress: false,
            engine: "tierkv".into(),
            skip_load: false,
            first_warmup_operations: None,
        }
    }
}

impl YcsbConfig {
    /// Why this configuration cannot run, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if let Some(target) = self.target_ops_per_sec {
            if !(target.is_finite() && target > 0.0) {
                return Err(format!("the target rate must be a positive number, got {target}"));
            }
        }
        if self.duration == Some(Duration::ZERO) {
            return Err("the duration must be longer than zero".into());
        }
        if self.operations == 0 && self.duration.is_none() && !self.workloads.is_empty() {
            return Err("0 operations means no count, so the workloads need a duration".into());
        }
        Ok(())
    }
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

/// When the operations of one client thread are due under a target rate (see the module
/// header): a pure function of the operation's number, so it is tested without a clock.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Schedule {
    /// Threads and the target rate across them, ops/s; `None`: unpaced.
    rate: Option<(f64, f64)>,
}

impl Schedule {
    /// `target_ops_per_sec` shared by `threads`; no target (or one that is not a positive
    /// number, which `YcsbConfig::check` refuses): unpaced.
    fn new(target_ops_per_sec: Option<f64>, threads: u64) -> Schedule {
        let target = target_ops_per_sec.filter(|t| t.is_finite() && *t > 0.0);
        Schedule { rate: target.map(|target| (threads.max(1) as f64, target)) }
    }

    /// When operation `op` of a thread is due, after the phase start; unpaced: at once.
    fn due(&self, op: u64) -> Duration {
        match self.rate {
            // Multiplied before dividing, so a whole number of seconds comes out exact.
            Some((threads, target)) => {
                Duration::try_from_secs_f64(op as f64 * threads / target).unwrap_or(Duration::MAX)
            }
            None => Duration::ZERO,
        }
    }

    /// Sleeps until `due` after `started`; returns at once when that has passed, so a late
    /// thread catches up.
    fn wait(started: Instant, due: Duration) {
        if due.is_zero() {
            return;
        }
        if let Some(at) = started.checked_add(due) {
            let now = Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
        }
    }
}

/// Operations between two updates of a progress bar by one thread.
const PROGRESS_EVERY: u64 = 64;

/// The progress bar of one phase, shared by its client threads (see the module header).
struct Progress {
    bar: ProgressBar,
    /// Bounded by a duration: the bar counts milliseconds gone, not operations.
    by_time: bool,
}

impl Progress {
    /// A bar labelled `label` over `operations`, or over `duration` when there is one; drawn
    /// on stderr when `show`, else kept (its position still moves) but never drawn.
    fn new(show: bool, label: String, operations: u64, duration: Option<Duration>) -> Progress {
        let by_time = duration.is_some();
        let length = match duration {
            Some(duration) => u64::try_from(duration.as_millis()).unwrap_or(u64::MAX).max(1),
            None => operations,
        };
        let target = if show { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let bar = ProgressBar::with_draw_target(Some(length), target);
        let template = if by_time {
            "{prefix} [{bar:30}] {seconds}, ETA {eta}"
        } else {
            "{prefix} [{bar:30}] {pos}/{len} ops, {rate}, ETA {eta}"
        };
        let seconds = |state: &ProgressState, out: &mut dyn std::fmt::Write| {
            let gone = state.pos() as f64 / 1e3;
            let _ = write!(out, "{gone:.1}/{:.1} s", state.len().unwrap_or(0) as f64 / 1e3);
        };
        let rate = |state: &ProgressState, out: &mut dyn std::fmt::Write| {
            let _ = write!(out, "{:.0} ops/s", state.per_sec());
        };
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .with_key("seconds", seconds)
            .with_key("rate", rate);
        bar.set_style(style);
        bar.set_prefix(label);
        Progress { bar, by_time }
    }

    /// `operations` more done by a thread, of a phase that started at `started`.
    fn advance(&self, operations: u64, started: Instant) {
        if self.by_time {
            let gone = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            // Threads report in any order: the bar only moves forward.
            if gone > self.bar.position() {
                self.bar.set_position(gone.min(self.bar.length().unwrap_or(u64::MAX)));
            }
        } else {
            self.bar.inc(operations);
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Loads `config.records` records, paced by `config.target_ops_per_sec`.
pub fn load(store: &dyn Store, config: &YcsbConfig) -> Result<PhaseResult, String> {
    config.check()?;
    let threads = config.threads.max(1) as u64;
    let schedule = Schedule::new(config.target_ops_per_sec, threads);
    let label = format!("{} load", config.engine);
    let progress = Progress::new(config.progress, label, config.records, None);
    let started = Instant::now();
    let results = on_threads(threads, |thread| {
        let mut histogram = new_histogram()?;
        let mut number = thread;
        let mut op = 0u64;
        while number < config.records {
            Schedule::wait(started, schedule.due(op));
            let value = record(number, config.seed, 0);
            let t = Instant::now();
            store.write(key_name(number).as_bytes(), &value)?;
            histogram.saturating_record(t.elapsed().as_nanos() as u64);
            number += threads;
            op += 1;
            if op.is_multiple_of(PROGRESS_EVERY) {
                progress.advance(PROGRESS_EVERY, started);
            }
        }
        progress.advance(op % PROGRESS_EVERY, started);
        Ok(histogram)
    })?;
    let seconds = started.elapsed().as_secs_f64();
    progress.finish();
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
        warmup_operations: 0,
        warmup_seconds: 0.0,
        engine_counters: None,
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
                cdf: cdf(h),
            })
            .collect(),
    }
}

/// The key numbers of a workload's inserts: the next to take, and those completed.
struct Inserts {
    next: AtomicU64,
    acknowledged: Acknowledged,
}

/// One pass of a workload's requests over the client threads: its measured part, or its
/// warm-up.
struct Pass {
    /// Requests across the threads; 0: no count (`duration` bounds the pass).
    operations: u64,
    duration: Option<Duration>,
    schedule: Schedule,
    /// Mixed into the threads' seeds, so the warm-up's requests are not the run's.
    stream: u64,
}

/// The stream of a warm-up pass (any constant other than 0, the measured pass's).
const WARMUP_STREAM: u64 = 0x77a7_3b0f_5eed_0001;

/// What a pass did.
struct Passed {
    histograms: Vec<Option<Histogram<u64>>>,
    /// Requests started, counted or not.
    started: u64,
    not_found: u64,
    seconds: f64,
}

/// What one request found.
enum Outcome {
    /// Done.
    Done,
    /// A read that found no record: done, and noted.
    ReadMissing,
    /// An update (or read-modify-write) whose read found no record: not done, only noted.
    UpdateMissing,
}

/// Does `request`, the `op`-th of its thread.
fn perform(
    store: &dyn Store,
    config: &YcsbConfig,
    request: super::Request,
    op: u64,
    inserts: &Inserts,
) -> Result<Outcome, String> {
    match request.operation {
        Operation::Read => {
            let key = key_name(request.key);
            match store.read(key.as_bytes())? {
                Some(_) => Ok(Outcome::Done),
                None => Ok(Outcome::ReadMissing),
            }
        }
        Operation::Update { field } | Operation::ReadModifyWrite { field } => {
            let key = key_name(request.key);
            let Some(mut value) = store.read(key.as_bytes())? else {
                return Ok(Outcome::UpdateMissing);
            };
            let fresh = record(request.key, config.seed, op + 1);
            let range = field * FIELD_BYTES..(field + 1) * FIELD_BYTES;
            if value.len() >= range.end {
                value[range.clone()].copy_from_slice(&fresh[range]);
            }
            store.write(key.as_bytes(), &value)?;
            Ok(Outcome::Done)
        }
        Operation::Insert => {
            let number = inserts.next.fetch_add(1, Ordering::AcqRel);
            let value = record(number, config.seed, 0);
            store.write(key_name(number).as_bytes(), &value)?;
            inserts.acknowledged.done(number);
            Ok(Outcome::Done)
        }
        Operation::Scan { length } => {
            let key = key_name(request.key);
            store.scan(key.as_bytes(), length as usize)?;
            Ok(Outcome::Done)
        }
    }
}

/// Runs `pass` of `spec`'s requests on the store, whose records are the acknowledged ones of
/// `inserts`.
fn run_pass(
    store: &dyn Store,
    spec: WorkloadSpec,
    config: &YcsbConfig,
    pass: &Pass,
    inserts: &Inserts,
    progress: &Progress,
) -> Result<Passed, String> {
    let threads = config.threads.max(1) as u64;
    let present = inserts.acknowledged.get();
    let started = Instant::now();
    let results = on_threads(threads, |thread| {
        let share = match pass.operations {
            0 => u64::MAX,
            operations => operations / threads + u64::from(thread < operations % threads),
        };
        let seed = config.seed ^ pass.stream ^ (thread + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut requests = Requests::new(spec, present, config.operations, seed);
        let mut histograms =
            (0..OPERATION_NAMES.len()).map(|_| new_histogram()).collect::<Result<Vec<_>, _>>()?;
        let mut not_found = 0u64;
        let mut op = 0u64;
        // Bounded by `share`, or (when that is unbounded) by the duration `check` demands.
        while op < share {
            let due = pass.schedule.due(op);
            if let Some(limit) = pass.duration {
                if due >= limit || started.elapsed() >= limit {
                    break;
                }
            }
            Schedule::wait(started, due);
            let request = requests.next(inserts.acknowledged.get());
            let t = Instant::now();
            let outcome = perform(store, config, request, op, inserts)?;
            let nanos = t.elapsed().as_nanos() as u64;
            let histogram = &mut histograms[operation_index(request.operation)];
            match outcome {
                Outcome::Done => histogram.saturating_record(nanos),
                Outcome::ReadMissing => {
                    histogram.saturating_record(nanos);
                    not_found += 1;
                }
                Outcome::UpdateMissing => not_found += 1,
            }
            op += 1;
            if op.is_multiple_of(PROGRESS_EVERY) {
                progress.advance(PROGRESS_EVERY, started);
            }
        }
        progress.advance(op % PROGRESS_EVERY, started);
        Ok((histograms, not_found, op))
    })?;
    let seconds = started.elapsed().as_secs_f64();
    let mut merged: Vec<Option<Histogram<u64>>> = vec![None; OPERATION_NAMES.len()];
    let (mut not_found, mut begun) = (0, 0);
    for (histograms, missing, ops) in results {
        not_found += missing;
        begun += ops;
        for (slot, histogram) in merged.iter_mut().zip(histograms) {
            match slot {
                Some(total) => total.add(&histogram).map_err(|e| e.to_string())?,
                None => *slot = Some(histogram),
            }
        }
    }
    Ok(Passed { histograms: merged, started: begun, not_found, seconds })
}

/// Runs `spec`'s warm-up, then its measured requests, on a store holding `inserted` records
/// (key numbers `0..inserted`); returns the phase and the new record count.
pub fn run_workload(
    store: &dyn Store,
    spec: WorkloadSpec,
    config: &YcsbConfig,
    inserted: u64,
) -> Result<(PhaseResult, u64), String> {
    config.check()?;
    if config.operations == 0 && config.duration.is_none() {
        return Err("0 operations means no count, so the workload needs a duration".into());
    }
    let threads = config.threads.max(1) as u64;
    let inserts =
        Inserts { next: AtomicU64::new(inserted), acknowledged: Acknowledged::new(inserted) };
    let name = spec.name.to_string();
    let mut warmup = None;
    if config.warmup_operations > 0 {
        let label = format!("{} {name} warm-up", config.engine);
        let progress = Progress::new(config.progress, label, config.warmup_operations, None);
        let pass = Pass {
            operations: config.warmup_operations,
            duration: None,
            schedule: Schedule::new(None, threads),
            stream: WARMUP_STREAM,
        };
        warmup = Some(run_pass(store, spec, config, &pass, &inserts, &progress)?);
        progress.finish();
    }
    let label = format!("{} {name}", config.engine);
    let progress = Progress::new(config.progress, label, config.operations, config.duration);
    let pass = Pass {
        operations: config.operations,
        duration: config.duration,
        schedule: Schedule::new(config.target_ops_per_sec, threads),
        stream: 0,
    };
    let measured = run_pass(store, spec, config, &pass, &inserts, &progress)?;
    progress.finish();
    let done = measured.histograms.iter().flatten().map(Histogram::len).sum();
    let mut result = phase(&name, done, measured.seconds, measured.not_found, &measured.histograms);
    if let Some(warmup) = warmup {
        result.warmup_operations = warmup.started;
        result.warmup_seconds = warmup.seconds;
    }
    Ok((result, inserts.next.load(Ordering::Acquire)))
}

/// The load (unless `skip_load`), then every workload of `config` in order on the loaded
/// store, each phase with the engine's counters after it.
pub fn run_all(store: &dyn Store, config: &YcsbConfig) -> Result<Vec<PhaseResult>, String> {
    config.check()?;
    let mut phases = Vec::new();
    if !config.skip_load {
        let mut loaded = load(store, config)?;
        loaded.engine_counters = store.counters();
        phases.push(loaded);
    }
    let mut inserted = config.records;
    for (i, spec) in config.workloads.iter().enumerate() {
        let first = config.first_warmup_operations.filter(|_| i == 0);
        let config = &YcsbConfig {
            warmup_operations: first.unwrap_or(config.warmup_operations),
            ..config.clone()
        };
        let (mut result, now) = run_workload(store, *spec, config, inserted)?;
        result.engine_counters = store.counters();
        phases.push(result);
        inserted = now;
    }
    Ok(phases)
}

/// A store's own reads agree with what was written, and a scan stops at the end: the check
/// every peer adapter's tests run first.
#[cfg(all(test, any(feature = "c-peers", feature = "rust-peers", feature = "rocksdb-crate")))]
pub(crate) fn round_trip(store: &dyn Store) {
    store.write(b"b", b"2").expect("write");
    store.write(b"a", b"1").expect("write");
    store.write(b"a", b"3").expect("overwrite");
    assert_eq!(store.read(b"a").expect("read"), Some(b"3".to_vec()));
    assert_eq!(store.read(b"c").expect("read"), None);
    assert_eq!(store.scan(b"a", 10).expect("scan"), 2);
    assert_eq!(store.scan(b"aa", 10).expect("scan"), 1);
    assert_eq!(store.scan(b"a", 1).expect("scan"), 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_store(dir: &tempfile::TempDir) -> TierkvStore {
        let options = tierkv::Options { cache_size: 4 << 20, ..tierkv::Options::default() };
        let db = tierkv::Db::open(dir.path(), options).expect("open");
        TierkvStore { db, durability: tierkv::Durability::None }
    }

    fn workload(name: &str) -> WorkloadSpec {
        WorkloadSpec::core(name).expect("a core workload")
    }

    #[test]
    fn every_core_workload_runs_against_tierkv_on_a_tiny_store() {
        let dir = tempfile::tempdir().expect("dir");
        let store = tiny_store(&dir);
        let config = YcsbConfig {
            records: 2_000,
            operations: 3_000,
            threads: 3,
            seed: 5,
            ..YcsbConfig::default()
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
            assert_eq!(result.warmup_operations, 0);
            for op in &result.per_operation {
                assert_eq!(op.cdf.len(), CDF_PERCENTILES.len(), "{op:?}");
                assert_eq!(op.cdf.last().map(|p| p.latency_us), Some(op.max_us), "{op:?}");
            }
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
            warmup_operations: 0,
            warmup_seconds: 0.0,
            per_operation: Vec::new(),
            engine_counters: None,
        };
        let run = EngineRun::new;
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
        // tierkv failed (no phases): the columns come from the peers, its cells are empty.
        let failed = vec![run("tierkv", Vec::new()), runs[1].clone()];
        let text = comparison(&failed);
        let header = text.lines().next().expect("header");
        assert_eq!(header.split_whitespace().collect::<Vec<_>>(), ["engine", "a", "c"]);
        let ratio = text.lines().find(|l| l.starts_with("ratio")).expect("ratio row");
        assert_eq!(ratio.split_whitespace().collect::<Vec<_>>(), ["ratio", "-", "-"]);
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

    #[test]
    fn a_duration_stops_a_phase_that_has_no_count() {
        let dir = tempfile::tempdir().expect("dir");
        let store = tiny_store(&dir);
        let config = YcsbConfig {
            records: 500,
            operations: 0,
            duration: Some(Duration::from_millis(100)),
            threads: 2,
            ..YcsbConfig::default()
        };
        load(&store, &config).expect("load");
        // With no count, only the duration can end it: that it returns is the test.
        let (result, _) = run_workload(&store, workload("c"), &config, 500).expect("run");
        let counted: u64 = result.per_operation.iter().map(|o| o.count).sum();
        assert_eq!(result.operations, counted);
        // Both bounds: whichever comes first; 300 requests come long before a minute.
        let both = YcsbConfig {
            operations: 300,
            duration: Some(Duration::from_secs(60)),
            ..config.clone()
        };
        let (result, _) = run_workload(&store, workload("a"), &both, 500).expect("run");
        assert_eq!(result.operations, 300);
        // No count and no duration would never end.
        let neither = YcsbConfig { duration: None, ..config };
        assert!(run_workload(&store, workload("c"), &neither, 500).is_err());
        assert!(neither.check().is_err());
        store.db.close().expect("close");
    }

    #[test]
    fn a_target_rate_schedules_each_threads_share_from_the_phase_start() {
        // 100 ops/s over 4 threads: each thread one operation every 40 ms.
        let schedule = Schedule::new(Some(100.0), 4);
        assert_eq!(schedule.due(0), Duration::ZERO);
        assert_eq!(schedule.due(1), Duration::from_millis(40));
        assert_eq!(schedule.due(25), Duration::from_secs(1));
        // Fixed from the start, not from the last operation: a late thread catches up.
        assert_eq!(schedule.due(50) - schedule.due(49), Duration::from_millis(40));
        // Within one second a thread has 25 operations due (0 to 960 ms), 100 in all.
        let due_in_a_second = (0..1_000).filter(|&op| schedule.due(op) < Duration::from_secs(1));
        assert_eq!(due_in_a_second.count(), 25);
        for unpaced in [None, Some(0.0), Some(-3.0), Some(f64::NAN)] {
            assert_eq!(Schedule::new(unpaced, 4).due(1_000), Duration::ZERO, "{unpaced:?}");
        }
        let bad = YcsbConfig { target_ops_per_sec: Some(0.0), ..YcsbConfig::default() };
        assert!(bad.check().is_err());
    }

    #[test]
    fn a_paced_phase_starts_no_more_than_its_target_allows() {
        let dir = tempfile::tempdir().expect("dir");
        let store = tiny_store(&dir);
        let (target, seconds, threads) = (200.0, 0.15, 2usize);
        let config = YcsbConfig {
            records: 60,
            operations: 1_000_000,
            duration: Some(Duration::from_secs_f64(seconds)),
            target_ops_per_sec: Some(target),
            threads,
            ..YcsbConfig::default()
        };
        // The load is paced but never cut short.
        assert_eq!(load(&store, &config).expect("load").operations, 60);
        for name in ["a", "d"] {
            let (result, _) = run_workload(&store, workload(name), &config, 60).expect("run");
            // An operation due at or after the duration is never started, however fast or
            // slow the engine: a bound on counts, not on speed.
            let most = (target * seconds) as u64 + threads as u64;
            assert!(result.operations <= most, "{} > {most}", result.operations);
        }
        store.db.close().expect("close");
    }

    #[test]
    fn warm_up_requests_run_first_and_are_not_counted() {
        let dir = tempfile::tempdir().expect("dir");
        let store = tiny_store(&dir);
        let config = YcsbConfig {
            records: 1_000,
            operations: 1_000,
            warmup_operations: 600,
            threads: 2,
            ..YcsbConfig::default()
        };
        load(&store, &config).expect("load");
        let (result, now) = run_workload(&store, workload("d"), &config, 1_000).expect("run");
        assert_eq!(result.warmup_operations, 600);
        assert_eq!(result.operations, 1_000);
        let counted: u64 = result.per_operation.iter().map(|o| o.count).sum();
        assert_eq!(counted, 1_000);
        // The warm-up's inserts (5% of 600 requests) are in the store, not in the counts.
        let inserts = result.per_operation.iter().find(|o| o.operation == "insert");
        let measured_inserts = inserts.map_or(0, |o| o.count);
        assert!(now - 1_000 > measured_inserts, "{now} records, {measured_inserts} inserts");
        assert_eq!(result.not_found, 0);
        assert!(table(&[result]).contains("600 warm-up operations"));
        store.db.close().expect("close");
    }

    #[test]
    fn the_cdf_rises_to_the_max() {
        let mut histogram = new_histogram().expect("histogram");
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..10_000 {
            // 1 µs to about 1 s, heavy-tailed.
            histogram.saturating_record(1_000u64 << rng.u32(0..20));
        }
        histogram.saturating_record(3_000_000_000);
        let mut histograms = vec![None; OPERATION_NAMES.len()];
        histograms[0] = Some(histogram);
        let stats = &phase("c", 10_001, 1.0, 0, &histograms).per_operation[0];
        let cdf = &stats.cdf;
        assert_eq!(cdf.len(), CDF_PERCENTILES.len());
        assert_eq!(cdf.first().map(|p| p.percentile), Some(0.0));
        assert_eq!(cdf.last().map(|p| (p.percentile, p.latency_us)), Some((100.0, stats.max_us)));
        for pair in cdf.windows(2) {
            assert!(pair[0].percentile < pair[1].percentile, "{pair:?}");
            assert!(pair[0].latency_us <= pair[1].latency_us, "{pair:?}");
        }
        // The points agree with the percentiles reported beside them.
        let at = |percentile: f64| cdf.iter().find(|p| p.percentile == percentile);
        assert_eq!(at(50.0).map(|p| p.latency_us), Some(stats.p50_us));
        assert_eq!(at(99.9).map(|p| p.latency_us), Some(stats.p999_us));
        assert!(stats.max_us >= 3_000_000.0);
    }

    #[test]
    fn a_phase_bar_counts_operations_or_milliseconds() {
        let started = Instant::now();
        let by_count = Progress::new(false, "tierkv a".into(), 1_000, None);
        by_count.advance(64, started);
        by_count.advance(10, started);
        assert_eq!((by_count.bar.position(), by_count.bar.length()), (74, Some(1_000)));
        let by_time = Progress::new(false, "tierkv a".into(), 1_000, Some(Duration::from_secs(2)));
        assert_eq!(by_time.bar.length(), Some(2_000));
        by_time.advance(64, started);
        // Milliseconds gone, never past the duration.
        assert!(by_time.bar.position() <= 2_000);
        by_time.finish();
    }
}
