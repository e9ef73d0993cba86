//! Running one point: the measurement file, one `tierkv_io::File` per method, the page-cache
//! state, and the timed loop of each thread.
//!
//! Invariants:
//! 1. The file is created, filled with pseudo-random bytes (never a hole, which would read
//!    faster than data) and synced once, before any point; no point changes its size.
//! 2. Thread `t` of `n` works only in region `t` of the file (`file_bytes / n`, aligned to the
//!    transfer unit), as in seed 000 ("each its own chunk"); no two threads touch a byte.
//! 3. A `cold` point starts with every handle's mapping dropped and the file evicted, and the
//!    residency left behind is measured and reported, not assumed. A `direct` point starts
//!    with no dirty page of the file (written back) and none cached.
//! 4. A `pmem` write is `write_at` + `persist` of the same range: its cost includes making the
//!    data durable in the mode in force. Other writes are page-cache (or O_DIRECT) writes with
//!    no sync, as fio's psync and libaio engines do by default.
//! 5. Throughput counts transfer bytes over the wall time of the point. Latency is the time of
//!    each operation, sampled one in 16 below 64 KiB so that timing never costs more than the
//!    operation it times.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use crate::machine::{evict_file, process_cpu_seconds, resident_fraction, EvictionReport};
use hdrhistogram::Histogram;
use tierkv_io::{AccessMethod, AlignedBuf, File, OpenOptions, PmemMode, Storage};

use super::{open_for, BenchError, CacheState, DeviceConfig, FileInfo, IoOp, Pattern};
use super::{PointResult, PointSpec};

/// Transfers of at least this size have every operation timed.
const TIME_EVERY_OP_BYTES: u64 = 64 << 10;
/// Below it, one operation in this many is timed.
const SAMPLE_EVERY_OPS: u64 = 16;
/// The file is filled and warmed in pieces of this size.
const FILL_CHUNK_BYTES: u64 = 1 << 20;

/// The measurement file and a handle per access method.
pub struct Target {
    path: PathBuf,
    created: bool,
    file_bytes: u64,
    seed: u64,
    handles: BTreeMap<AccessMethod, File>,
    /// Methods that could not be opened, with the error (for example O_DIRECT on tmpfs).
    unavailable: BTreeMap<AccessMethod, String>,
    /// Mapped methods whose mapping has every page faulted in since the last eviction.
    mapped_warm: Mutex<BTreeSet<AccessMethod>>,
    fs_type: String,
    dax: bool,
    pmem_mode: PmemMode,
}

impl Target {
    /// Creates (or reuses, if it has the right size) the measurement file and opens it with
    /// every method the configuration needs.
    pub fn prepare(config: &DeviceConfig) -> Result<Target, BenchError> {
        let path = if config.path.is_dir() {
            config.path.join("tierkv-device.dat")
        } else {
            config.path.clone()
        };
        let storage = Storage::Os;
        let existed = storage.exists(&path)?;
        let syscall = storage.open(&path, &OpenOptions::new(AccessMethod::Syscall).create(true))?;
        if syscall.len() != config.file_bytes {
            fill(&syscall, config.file_bytes, config.seed)?;
        }
        let mut handles = BTreeMap::new();
        let mut unavailable = BTreeMap::new();
        let mut methods: BTreeSet<AccessMethod> = config.methods.iter().copied().collect();
        methods.insert(AccessMethod::Pmem); // always opened: the report names the pmem mode
        for method in methods {
            if method == AccessMethod::Syscall {
                continue;
            }
            match open_for(&path, method) {
                Ok(file) => {
                    handles.insert(method, file);
                }
                Err(error) => {
                    unavailable.insert(method, error.to_string());
                }
            }
        }
        handles.insert(AccessMethod::Syscall, syscall);
        let info = tierkv_io::file_system_info(&path)?;
        let pmem_mode = match handles.get(&AccessMethod::Pmem).and_then(File::pmem_mode) {
            Some(mode) => mode,
            None => {
                return Err(BenchError::Config(format!(
                    "cannot open {} with the pmem method: {}",
                    path.display(),
                    unavailable.get(&AccessMethod::Pmem).map_or("unknown error", String::as_str)
                )))
            }
        };
        Ok(Target {
            path,
            created: !existed,
            file_bytes: config.file_bytes,
            seed: config.seed,
            handles,
            unavailable,
            mapped_warm: Mutex::new(BTreeSet::new()),
            fs_type: info.fs_type,
            dax: info.dax,
            pmem_mode,
        })
    }

    /// The measurement file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The measurement file's size.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// What the report says about the file.
    pub fn file_info(&self) -> FileInfo {
        FileInfo {
            path: self.path.display().to_string(),
            size_bytes: self.file_bytes,
            fs_type: self.fs_type.clone(),
            dax: self.dax,
            pmem_mode: self.pmem_mode,
            direct_alignment_bytes: self.direct_alignment(),
        }
    }

    fn direct_alignment(&self) -> Option<u64> {
        self.handles.get(&AccessMethod::Direct).and_then(File::direct_alignment)
    }

    /// Bytes each operation actually moves: the transfer, or for `direct` the transfer
    /// rounded up to the O_DIRECT alignment.
    pub fn unit_bytes(&self, spec: &PointSpec) -> u64 {
        match (spec.method, self.direct_alignment()) {
            (AccessMethod::Direct, Some(align)) => spec.transfer_bytes.div_ceil(align) * align,
            _ => spec.transfer_bytes,
        }
    }

    /// Bytes of the file region each thread of `spec` works in, a multiple of the unit.
    pub fn region_bytes(&self, spec: &PointSpec) -> u64 {
        let unit = self.unit_bytes(spec);
        (self.file_bytes / spec.threads as u64) / unit * unit
    }

    /// Why `spec` cannot run here, or `None` if it can.
    pub fn skip_reason(&self, spec: &PointSpec) -> Option<String> {
        if let Some(error) = self.unavailable.get(&spec.method) {
            return Some(format!("the {} method is unavailable: {error}", spec.method));
        }
        if spec.method == AccessMethod::Direct && spec.cache == CacheState::Cold {
            return Some("direct bypasses the page cache: cold is the same point as warm".into());
        }
        if self.region_bytes(spec) == 0 {
            return Some(format!(
                "the file ({} B) split over {} threads leaves less than one transfer per thread",
                self.file_bytes, spec.threads
            ));
        }
        None
    }

    fn handle(&self, method: AccessMethod) -> Result<&File, BenchError> {
        self.handles.get(&method).ok_or_else(|| {
            BenchError::Config(format!("the {method} method was not opened for this run"))
        })
    }

    /// Puts the page cache in the state `spec` asks for. Returns the eviction report of a
    /// cold point.
    pub fn prepare_cache(&self, spec: &PointSpec) -> Result<Option<EvictionReport>, BenchError> {
        match spec.cache {
            CacheState::Cold => {
                // Drop every handle's mapping first: a page mapped anywhere cannot be evicted.
                for (method, file) in &self.handles {
                    if method.is_mapped() {
                        file.advise_dontneed()?;
                    }
                }
                self.warm_set().clear();
                Ok(Some(evict_file(self.handle(AccessMethod::Syscall)?)?))
            }
            CacheState::Warm => {
                if spec.method == AccessMethod::Direct {
                    // O_DIRECT bypasses the cache, but a direct read first writes back dirty
                    // cached pages in its range (measured: a 1 MiB read 25-35% slower after
                    // the buffered write points), and direct I/O drops cached pages that
                    // mappings had faulted in. Start every direct point clean and uncached.
                    let syscall = self.handle(AccessMethod::Syscall)?;
                    syscall.sync_data()?;
                    syscall.advise_dontneed()?;
                    self.warm_set().clear();
                    return Ok(None);
                }
                if resident_fraction(&self.path)? < 0.99 {
                    read_all(self.handle(AccessMethod::Syscall)?, self.file_bytes)?;
                }
                if spec.method.is_mapped() && !self.warm_set().contains(&spec.method) {
                    // Fault in the mapping's page-table entries: warm means steady state.
                    read_all(self.handle(spec.method)?, self.file_bytes)?;
                    self.warm_set().insert(spec.method);
                }
                Ok(None)
            }
        }
    }

    fn warm_set(&self) -> std::sync::MutexGuard<'_, BTreeSet<AccessMethod>> {
        self.mapped_warm.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs one point for `duration` and reports it.
    pub fn run_point(
        &self,
        spec: &PointSpec,
        duration: Duration,
    ) -> Result<PointResult, BenchError> {
        let file = self.handle(spec.method)?;
        let eviction = self.prepare_cache(spec)?;
        let unit = self.unit_bytes(spec);
        let region = self.region_bytes(spec);
        if region == 0 {
            return Err(BenchError::Config(format!("{spec}: no room for one transfer per thread")));
        }
        let stop = AtomicBool::new(false);
        let barrier = Barrier::new(spec.threads + 1);
        let (outcomes, cpu_start, started) = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..spec.threads)
                .map(|thread| {
                    let worker = Worker {
                        file,
                        spec,
                        unit,
                        region_start: region * thread as u64,
                        region,
                        seed: self.seed ^ (thread as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    };
                    let (stop, barrier) = (&stop, &barrier);
                    scope.spawn(move || worker.run(stop, barrier))
                })
                .collect();
            let cpu_start = process_cpu_seconds();
            barrier.wait();
            let started = Instant::now();
            std::thread::sleep(duration);
            stop.store(true, Ordering::Relaxed);
            let outcomes: Vec<Result<ThreadOutcome, BenchError>> = workers
                .into_iter()
                .map(|worker| {
                    worker.join().unwrap_or_else(|_| {
                        Err(BenchError::Config(format!("{spec}: a measuring thread panicked")))
                    })
                })
                .collect();
            (outcomes, cpu_start, started)
        });
        let elapsed_s = started.elapsed().as_secs_f64();
        let cpu_s = process_cpu_seconds() - cpu_start;
        let mut ops = 0;
        let mut latency = new_histogram();
        for outcome in outcomes {
            let outcome = outcome?;
            ops += outcome.ops;
            latency.add(&outcome.latency).map_err(|e| BenchError::Config(e.to_string()))?;
        }
        let bytes = ops * spec.transfer_bytes;
        Ok(PointResult {
            spec: *spec,
            bytes_per_s: bytes as f64 / elapsed_s,
            ops_per_s: ops as f64 / elapsed_s,
            latency_ns_p50: latency.value_at_quantile(0.50),
            latency_ns_p99: latency.value_at_quantile(0.99),
            latency_ns_p999: latency.value_at_quantile(0.999),
            latency_ns_max: latency.max(),
            latency_samples: latency.len(),
            ops,
            elapsed_s,
            cpu_s,
            eviction,
            direct_block_bytes: (unit != spec.transfer_bytes).then_some(unit),
            pmem_mode: file.pmem_mode(),
        })
    }

    /// Removes the measurement file if this run created it and it is not to be kept.
    pub fn finish(self, config: &DeviceConfig) -> Result<(), BenchError> {
        let Target { path, created, handles, .. } = self;
        drop(handles);
        if created && !config.keep_file {
            Storage::Os.remove_file(&path)?;
        }
        Ok(())
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("invariant: valid histogram bounds")
}

struct ThreadOutcome {
    ops: u64,
    latency: Histogram<u64>,
}

struct Worker<'a> {
    file: &'a File,
    spec: &'a PointSpec,
    unit: u64,
    region_start: u64,
    region: u64,
    seed: u64,
}

impl Worker<'_> {
    fn run(self, stop: &AtomicBool, barrier: &Barrier) -> Result<ThreadOutcome, BenchError> {
        let mut rng = fastrand::Rng::with_seed(self.seed);
        let mut buf = AlignedBuf::new(self.unit as usize);
        rng.fill(&mut buf);
        let transfer = self.spec.transfer_bytes;
        let slots = self.region / transfer.max(self.unit);
        let time_all = transfer >= TIME_EVERY_OP_BYTES;
        let mut latency = new_histogram();
        let mut cursor = 0u64;
        let mut ops = 0u64;
        barrier.wait();
        while !stop.load(Ordering::Relaxed) {
            let slot = match self.spec.pattern {
                Pattern::Seq => {
                    let slot = cursor;
                    cursor = if cursor + 1 == slots { 0 } else { cursor + 1 };
                    slot
                }
                Pattern::Rand => rng.u64(..slots),
            };
            let offset = self.region_start + slot * transfer.max(self.unit);
            let timed = time_all || ops.is_multiple_of(SAMPLE_EVERY_OPS);
            let start = timed.then(Instant::now);
            self.operate(&mut buf, offset)?;
            if let Some(start) = start {
                let nanos = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1);
                latency.saturating_record(nanos);
            }
            ops += 1;
        }
        Ok(ThreadOutcome { ops, latency })
    }

    fn operate(&self, buf: &mut [u8], offset: u64) -> Result<(), BenchError> {
        let transfer = self.spec.transfer_bytes as usize;
        match self.spec.op {
            IoOp::Read => self.file.read_at(&mut buf[..self.unit as usize], offset)?,
            IoOp::Write if self.unit as usize != transfer => {
                // O_DIRECT cannot write fewer bytes than its alignment: read-modify-write.
                self.file.read_at(buf, offset)?;
                buf[0] = buf[0].wrapping_add(1);
                self.file.write_at(buf, offset)?;
            }
            IoOp::Write => {
                self.file.write_at(&buf[..transfer], offset)?;
                if self.spec.method == AccessMethod::Pmem {
                    self.file.persist(offset, transfer as u64)?;
                }
            }
        }
        Ok(())
    }
}

/// Sizes the file and fills it with pseudo-random bytes, then syncs.
fn fill(file: &File, file_bytes: u64, seed: u64) -> Result<(), BenchError> {
    file.set_len(file_bytes)?;
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut chunk = vec![0u8; FILL_CHUNK_BYTES as usize];
    let mut offset = 0;
    while offset < file_bytes {
        let len = FILL_CHUNK_BYTES.min(file_bytes - offset) as usize;
        rng.fill(&mut chunk[..len]);
        file.write_at(&chunk[..len], offset)?;
        offset += len as u64;
    }
    file.sync_data()?;
    Ok(())
}

/// Reads the whole file through `file`, so its pages (and mapping) are resident.
fn read_all(file: &File, file_bytes: u64) -> Result<(), BenchError> {
    let mut chunk = vec![0u8; FILL_CHUNK_BYTES as usize];
    let mut offset = 0;
    while offset < file_bytes {
        let len = FILL_CHUNK_BYTES.min(file_bytes - offset) as usize;
        file.read_at(&mut chunk[..len], offset)?;
        offset += len as u64;
    }
    Ok(())
}
