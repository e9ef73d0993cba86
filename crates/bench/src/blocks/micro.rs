//! Seed 003's write micro-benchmarks (slides 19–21): 64 blocks written three ways, per
//! pattern and buffering, timed as whole operations.
//!
//! - `sync`: 64 × (pwrite one block + fdatasync).
//! - `async`: 64 pwrites, then one fdatasync. The seed used libaio; this is "64 writes, one
//!   fdatasync" through the same synchronous pwrite path, and says so in its output.
//! - `atomic group`: one `LogStore::write_group` of the 64 blocks, each with a payload of the
//!   block size minus the 64-byte block header, so each encoded block is exactly one block:
//!   one pwrite of the whole group and one fdatasync. The log appends sequentially whatever
//!   the pattern (the block ids follow the pattern) and always writes through the page cache,
//!   so it is measured once per pattern and reported in the buffered row.
//!
//! The pwrite methods write into a preallocated file that was written in full and synced
//! first, so no timed fdatasync has to allocate blocks or convert unwritten extents. With
//! O_DIRECT a block smaller than the file system's alignment is written as one aligned unit
//! (the row records the bytes each pwrite moved). Every repetition writes new positions
//! (sequential and strided continue where the last one ended), and the cells of one pattern
//! run interleaved, one repetition of each in turn, after one untimed warm-up each.
//!
//! Must never: time an operation whose data is not durable when the clock stops (every timed
//! operation ends with an fdatasync, or a group the store acknowledged).

use std::path::Path;
use std::time::Instant;

use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use tierkv_blockstore::{BlockId, BlockStore, LogStore, StoreOptions};
use tierkv_io::{AccessMethod, AlignedBuf, File, OpenOptions, Storage};

use super::{remove_tree, BlocksBenchConfig, Buffering, DirectSupport, MicroPattern};
use crate::device::BenchError;

/// The buffered micro file, under the scratch directory.
const BUFFERED_FILE: &str = "micro-buffered.dat";

/// The O_DIRECT micro file.
const DIRECT_FILE: &str = "micro-direct.dat";

/// Bytes per pwrite while the micro files are filled.
const FILL_CHUNK_BYTES: usize = 1 << 20;

/// What the seed reported for one row (µs for latency, MB/s for bandwidth).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SeedFigures {
    /// write() + fsync() per block.
    pub sync: f64,
    /// libaio.
    #[serde(rename = "async")]
    pub async_writes: f64,
    /// The Fusion-io atomic write (DirectIO only; `None` is the seed's "NA").
    pub atomic_group: Option<f64>,
}

/// One timed cell: `repeats` whole 64-block operations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Timed repetitions.
    pub repeats: usize,
    /// Median latency of the whole operation, µs.
    pub latency_us_median: f64,
    /// 99th percentile (nearest rank), µs.
    pub latency_us_p99: f64,
    /// Mean, µs.
    pub latency_us_mean: f64,
    /// Fastest, µs.
    pub latency_us_min: f64,
    /// Slowest, µs.
    pub latency_us_max: f64,
    /// Block bytes of the operation ÷ median latency, in MB/s (10^6 bytes per second).
    pub bandwidth_mb_per_s: f64,
}

impl Timing {
    /// Summarises latencies in nanoseconds of operations that wrote `op_bytes` each.
    pub fn from_ns(samples_ns: &[u64], op_bytes: u64) -> Option<Timing> {
        if samples_ns.is_empty() {
            return None;
        }
        let mut sorted = samples_ns.to_vec();
        sorted.sort_unstable();
        let n = sorted.len();
        let median_ns = if n % 2 == 1 {
            sorted[n / 2] as f64
        } else {
            (sorted[n / 2 - 1] as f64 + sorted[n / 2] as f64) / 2.0
        };
        let p99_index = (n * 99).div_ceil(100).clamp(1, n) - 1;
        let mean_ns = sorted.iter().map(|&ns| ns as f64).sum::<f64>() / n as f64;
        let median_ns = median_ns.max(1.0);
        Some(Timing {
            repeats: n,
            latency_us_median: median_ns / 1e3,
            latency_us_p99: sorted[p99_index] as f64 / 1e3,
            latency_us_mean: mean_ns / 1e3,
            latency_us_min: sorted[0] as f64 / 1e3,
            latency_us_max: sorted[n - 1] as f64 / 1e3,
            bandwidth_mb_per_s: op_bytes as f64 / (median_ns / 1e9) / 1e6,
        })
    }
}

/// One row of a micro table: a pattern and a buffering.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MicroRow {
    /// Pattern.
    pub pattern: MicroPattern,
    /// Buffering.
    pub buffering: Buffering,
    /// Bytes each pwrite of `sync` and `async` moved: the block, or with O_DIRECT the block
    /// rounded up to the file system's alignment.
    pub transfer_bytes: u64,
    /// 64 × (pwrite + fdatasync); `None` when the row could not run (O_DIRECT refused).
    pub sync: Option<Timing>,
    /// 64 pwrites, one fdatasync.
    #[serde(rename = "async")]
    pub async_writes: Option<Timing>,
    /// One `LogStore::write_group` of the 64 blocks (buffered rows only: the log store has no
    /// O_DIRECT write path).
    pub atomic_group: Option<Timing>,
    /// The seed's figures for this row.
    pub seed: SeedFigures,
}

/// What a method of the table does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MethodNote {
    /// Column name.
    pub name: String,
    /// What one operation is.
    pub description: String,
}

/// One of seed 003's tables.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MicroTable {
    /// Bytes per block.
    pub block_bytes: usize,
    /// Blocks per operation.
    pub blocks_per_op: usize,
    /// Timed repetitions per cell.
    pub repeats: usize,
    /// The unit of the seed's figures: `us` (latency) or `MB/s` (bandwidth).
    pub seed_unit: String,
    /// What each column does.
    pub methods: Vec<MethodNote>,
    /// Rows in the seed's order: pattern, then buffered before direct.
    pub rows: Vec<MicroRow>,
}

impl MicroTable {
    /// The row of `pattern` and `buffering`.
    pub fn row(&self, pattern: MicroPattern, buffering: Buffering) -> Option<&MicroRow> {
        self.rows.iter().find(|row| row.pattern == pattern && row.buffering == buffering)
    }
}

/// Both tables and what was found about O_DIRECT.
#[derive(Debug)]
pub struct MicroResults {
    /// 64 × 512 B.
    pub latency: MicroTable,
    /// 64 × 16 KiB.
    pub bandwidth: MicroTable,
    /// O_DIRECT on the path.
    pub direct: DirectSupport,
    /// Notes for the report.
    pub notes: Vec<String>,
}

/// Seed 003, slide 20 (µs): sync, async, atomic write.
fn seed_latency(pattern: MicroPattern, buffering: Buffering) -> SeedFigures {
    let (sync, async_writes, atomic_group) = match (pattern, buffering) {
        (MicroPattern::Random, Buffering::Buffered) => (4042.0, 1112.0, None),
        (MicroPattern::Random, Buffering::Direct) => (3542.0, 851.0, Some(671.0)),
        (MicroPattern::Strided, Buffering::Buffered) => (4006.0, 1146.0, None),
        (MicroPattern::Strided, Buffering::Direct) => (3447.0, 857.0, Some(669.0)),
        (MicroPattern::Sequential, Buffering::Buffered) => (3955.0, 330.0, None),
        (MicroPattern::Sequential, Buffering::Direct) => (3402.0, 898.0, Some(685.0)),
    };
    SeedFigures { sync, async_writes, atomic_group }
}

/// Seed 003, slide 21 (MB/s): sync, async, atomic write.
fn seed_bandwidth(pattern: MicroPattern, buffering: Buffering) -> SeedFigures {
    let (sync, async_writes, atomic_group) = match (pattern, buffering) {
        (MicroPattern::Random, Buffering::Buffered) => (302.0, 301.0, None),
        (MicroPattern::Random, Buffering::Direct) => (212.0, 505.0, Some(513.0)),
        (MicroPattern::Strided, Buffering::Buffered) => (306.0, 300.0, None),
        (MicroPattern::Strided, Buffering::Direct) => (217.0, 503.0, Some(513.0)),
        (MicroPattern::Sequential, Buffering::Buffered) => (308.0, 304.0, None),
        (MicroPattern::Sequential, Buffering::Direct) => (213.0, 507.0, Some(514.0)),
    };
    SeedFigures { sync, async_writes, atomic_group }
}

fn method_notes(config: &BlocksBenchConfig, block_bytes: usize) -> Vec<MethodNote> {
    let n = config.blocks_per_op;
    let header = tierkv_blockstore::format::BLOCK_HEADER_BYTES;
    vec![
        MethodNote {
            name: "sync".into(),
            description: format!("{n} x (pwrite one block + fdatasync)"),
        },
        MethodNote {
            name: "async".into(),
            description: format!(
                "{n} writes, one fdatasync: {n} pwrites, then one fdatasync (not libaio)"
            ),
        },
        MethodNote {
            name: "atomic_group".into(),
            description: format!(
                "one LogStore::write_group of the {n} blocks ({} B payload + {header} B header \
                 = {block_bytes} B each): one pwrite of the group and one fdatasync; the log \
                 appends sequentially whatever the pattern (the ids follow it) and writes \
                 through the page cache, so it is measured once per pattern, in the buffered row",
                block_bytes - header
            ),
        },
    ]
}

/// The positions (in units of one transfer) an operation writes, for each repetition.
struct PatternWalk {
    pattern: MicroPattern,
    /// Transfers that fit the file.
    slots: u64,
    blocks: u64,
    stride: u64,
    base: u64,
    wraps: u64,
    rng: fastrand::Rng,
}

impl PatternWalk {
    fn new(
        pattern: MicroPattern,
        slots: u64,
        blocks: u64,
        stride: u64,
        seed: u64,
    ) -> Result<Self, BenchError> {
        if slots < blocks * stride * 2 {
            return Err(BenchError::Config(format!(
                "the micro file holds {slots} transfers, too few for {blocks} blocks {stride}                  apart twice over; give it more bytes"
            )));
        }
        let rng = fastrand::Rng::with_seed(seed);
        Ok(PatternWalk { pattern, slots, blocks, stride, base: 0, wraps: 0, rng })
    }

    /// The next operation's positions, each below `slots`, all distinct.
    fn next_op(&mut self, out: &mut Vec<u64>) {
        out.clear();
        match self.pattern {
            MicroPattern::Sequential | MicroPattern::Strided => {
                let step = if self.pattern == MicroPattern::Sequential { 1 } else { self.stride };
                let span = self.blocks * step;
                if self.base + span > self.slots {
                    // Strided walks start one block further on each pass over the file, so
                    // later passes write the gaps of the earlier ones.
                    self.wraps += 1;
                    self.base = self.wraps % step;
                }
                out.extend((0..self.blocks).map(|i| self.base + i * step));
                self.base += span;
            }
            MicroPattern::Random => {
                // slots >= 2 × blocks: rejection needs fewer than two draws per block on
                // average; the bound only guards against a broken generator.
                let mut draws = 0u64;
                while (out.len() as u64) < self.blocks {
                    draws += 1;
                    assert!(draws < 1_000 * self.blocks, "invariant: rejection sampling ends");
                    let slot = self.rng.u64(0..self.slots);
                    if !out.contains(&slot) {
                        out.push(slot);
                    }
                }
            }
        }
        debug_assert!(out.iter().all(|&slot| slot < self.slots));
    }
}

/// The two micro files, ready to be written.
struct MicroFiles {
    buffered: File,
    direct: Option<File>,
    direct_alignment: u64,
}

/// Creates `path` with `bytes` bytes, every one written and synced (so timed writes never
/// allocate), and returns it opened with `method`.
fn prepare_file(
    storage: &Storage,
    path: &Path,
    bytes: u64,
    method: AccessMethod,
) -> Result<File, BenchError> {
    {
        let filler = storage
            .open(path, &OpenOptions::new(AccessMethod::Syscall).create(true).chunk_bytes(bytes))?;
        filler.reserve(bytes)?;
        let chunk: Vec<u8> = (0..FILL_CHUNK_BYTES).map(|i| (i % 251) as u8).collect();
        let mut offset = 0u64;
        while offset < bytes {
            let len = (bytes - offset).min(FILL_CHUNK_BYTES as u64) as usize;
            filler.write_at(&chunk[..len], offset)?;
            offset += len as u64;
        }
        filler.sync_all()?;
        filler.advise_dontneed()?;
    }
    // Chunk 1: the file has its final size; a timed write must never grow it.
    Ok(storage.open(path, &OpenOptions::new(method).chunk_bytes(1))?)
}

fn prepare_files(
    storage: &Storage,
    config: &BlocksBenchConfig,
    scratch: &Path,
) -> Result<(MicroFiles, DirectSupport), BenchError> {
    let bytes = config.micro_file_bytes;
    let buffered =
        prepare_file(storage, &scratch.join(BUFFERED_FILE), bytes, AccessMethod::Syscall)?;
    let direct_path = scratch.join(DIRECT_FILE);
    let direct =
        prepare_file(storage, &direct_path, bytes, AccessMethod::Direct).and_then(|file| {
            // Some file systems accept O_DIRECT at open and refuse the write: probe one.
            let align = file.direct_alignment().unwrap_or(4096).max(512);
            let buf = AlignedBuf::with_align(align as usize, memory_align(align));
            file.write_at(&buf, 0)?;
            file.sync_data()?;
            Ok((file, align))
        });
    match direct {
        Ok((file, align)) => Ok((
            MicroFiles { buffered, direct: Some(file), direct_alignment: align },
            DirectSupport { supported: true, alignment_bytes: Some(align), refused: None },
        )),
        Err(error) => {
            if storage.exists(&direct_path)? {
                storage.remove_file(&direct_path)?;
            }
            Ok((
                MicroFiles { buffered, direct: None, direct_alignment: 0 },
                DirectSupport {
                    supported: false,
                    alignment_bytes: None,
                    refused: Some(error.to_string()),
                },
            ))
        }
    }
}

/// The address alignment of an O_DIRECT buffer for a file that needs `align`.
fn memory_align(align: u64) -> usize {
    (align as usize).max(AlignedBuf::DEFAULT_ALIGN).next_power_of_two()
}

/// Runs both tables.
pub fn run(
    storage: &Storage,
    config: &BlocksBenchConfig,
    scratch: &Path,
    progress: &ProgressBar,
) -> Result<MicroResults, BenchError> {
    progress.set_message("preparing the micro files");
    let (files, direct) = prepare_files(storage, config, scratch)?;
    let mut notes = Vec::new();
    if let Some(reason) = &direct.refused {
        notes.push(format!("direct rows skipped: O_DIRECT is refused on this path ({reason})"));
    }
    let latency = run_table(storage, config, scratch, &files, TableKind::Latency, progress)?;
    let bandwidth = run_table(storage, config, scratch, &files, TableKind::Bandwidth, progress)?;
    for table in [&latency, &bandwidth] {
        if let Some(row) = table.rows.iter().find(|row| {
            row.buffering == Buffering::Direct && row.transfer_bytes != table.block_bytes as u64
        }) {
            notes.push(format!(
                "O_DIRECT needs {}-byte alignment here: each direct pwrite of a {} B block \
                 moved {} bytes",
                files.direct_alignment, table.block_bytes, row.transfer_bytes
            ));
        }
    }
    notes.push(
        "async = 64 writes, one fdatasync (pwrite x 64, then fdatasync), not libaio as in the \
         seed"
            .into(),
    );
    notes.push(
        "atomic group = one LogStore::write_group: the log appends the 64 blocks at its tail \
         whatever the pattern (only the ids follow it), through the page cache, so it is \
         measured once per pattern and shown in the buffered row; its segments are \
         preallocated but never written before, unlike the pwrite files"
            .into(),
    );
    drop(files);
    for name in [BUFFERED_FILE, DIRECT_FILE] {
        let path = scratch.join(name);
        if storage.exists(&path)? {
            storage.remove_file(&path)?;
        }
    }
    Ok(MicroResults { latency, bandwidth, direct, notes })
}

/// One timed cell of a pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cell {
    Sync(Buffering),
    Async(Buffering),
    Atomic,
}

/// Which of the seed's two tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TableKind {
    Latency,
    Bandwidth,
}

fn run_table(
    storage: &Storage,
    config: &BlocksBenchConfig,
    scratch: &Path,
    files: &MicroFiles,
    kind: TableKind,
    progress: &ProgressBar,
) -> Result<MicroTable, BenchError> {
    let (block_bytes, repeats, seed_of, seed_unit): (_, _, fn(_, _) -> _, _) = match kind {
        TableKind::Latency => {
            (config.latency_block_bytes, config.latency_repeats, seed_latency, "us")
        }
        TableKind::Bandwidth => {
            (config.bandwidth_block_bytes, config.bandwidth_repeats, seed_bandwidth, "MB/s")
        }
    };
    let mut rows = Vec::new();
    for (index, &pattern) in config.patterns.iter().enumerate() {
        progress.set_message(format!(
            "{} x {block_bytes} B, {}",
            config.blocks_per_op,
            pattern.name()
        ));
        let pattern_seed = config.seed ^ ((block_bytes as u64) << 8) ^ index as u64;
        let dir = scratch.join(format!("log-{block_bytes}-{}", pattern.name()));
        remove_tree(storage, &dir)?;
        let store = LogStore::open(storage, &dir, StoreOptions::default())?;
        let result =
            run_pattern(config, files, &store, pattern, block_bytes, repeats, pattern_seed);
        let closed = store.close();
        let timings = result?;
        closed?;
        drop(store);
        remove_tree(storage, &dir)?;
        let op_bytes = (config.blocks_per_op * block_bytes) as u64;
        let summary = |cell: Cell| {
            timings
                .iter()
                .find(|(c, _)| *c == cell)
                .and_then(|(_, ns)| Timing::from_ns(ns, op_bytes))
        };
        for buffering in [Buffering::Buffered, Buffering::Direct] {
            let transfer_bytes = match buffering {
                Buffering::Buffered => block_bytes as u64,
                Buffering::Direct => direct_unit(block_bytes, files.direct_alignment),
            };
            rows.push(MicroRow {
                pattern,
                buffering,
                transfer_bytes,
                sync: summary(Cell::Sync(buffering)),
                async_writes: summary(Cell::Async(buffering)),
                atomic_group: if buffering == Buffering::Buffered {
                    summary(Cell::Atomic)
                } else {
                    None
                },
                seed: seed_of(pattern, buffering),
            });
        }
        progress.inc(1);
    }
    Ok(MicroTable {
        block_bytes,
        blocks_per_op: config.blocks_per_op,
        repeats,
        seed_unit: seed_unit.to_string(),
        methods: method_notes(config, block_bytes),
        rows,
    })
}

/// Bytes an O_DIRECT pwrite of one block moves: the block rounded up to the alignment.
fn direct_unit(block_bytes: usize, alignment: u64) -> u64 {
    (block_bytes as u64).div_ceil(alignment.max(1)) * alignment.max(1)
}

/// One file's side of a pattern: its handle, buffer, unit and walk.
struct Writer<'a> {
    file: &'a File,
    buffer: AlignedBuf,
    unit: u64,
    walk: PatternWalk,
    positions: Vec<u64>,
}

impl Writer<'_> {
    fn time(&mut self, sync_each: bool) -> Result<u64, BenchError> {
        self.walk.next_op(&mut self.positions);
        // A distinct first byte per operation, so no write is a no-op rewrite of equal bytes.
        self.buffer[0] = self.buffer[0].wrapping_add(1);
        let started = Instant::now();
        for &slot in &self.positions {
            self.file.write_at(&self.buffer, slot * self.unit)?;
            if sync_each {
                self.file.sync_data()?;
            }
        }
        if !sync_each {
            self.file.sync_data()?;
        }
        Ok(elapsed_ns(started))
    }
}

fn elapsed_ns(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1)
}

/// Times every cell of one pattern, interleaved; returns the latencies per cell.
fn run_pattern(
    config: &BlocksBenchConfig,
    files: &MicroFiles,
    store: &LogStore,
    pattern: MicroPattern,
    block_bytes: usize,
    repeats: usize,
    seed: u64,
) -> Result<Vec<(Cell, Vec<u64>)>, BenchError> {
    let blocks = config.blocks_per_op as u64;
    let stride = config.stride_blocks;
    let file_bytes = config.micro_file_bytes;
    let mut buffered = Writer {
        file: &files.buffered,
        buffer: filled_buffer(block_bytes, AlignedBuf::DEFAULT_ALIGN),
        unit: block_bytes as u64,
        walk: PatternWalk::new(pattern, file_bytes / block_bytes as u64, blocks, stride, seed)?,
        positions: Vec::new(),
    };
    let mut direct = match files.direct.as_ref() {
        Some(file) => {
            let unit = direct_unit(block_bytes, files.direct_alignment);
            Some(Writer {
                file,
                buffer: filled_buffer(unit as usize, memory_align(files.direct_alignment)),
                unit,
                walk: PatternWalk::new(pattern, file_bytes / unit, blocks, stride, seed ^ 1)?,
                positions: Vec::new(),
            })
        }
        None => None,
    };
    // The atomic group's ids follow the pattern over the buffered layout's block positions.
    let mut atomic_walk =
        PatternWalk::new(pattern, file_bytes / block_bytes as u64, blocks, stride, seed ^ 2)?;
    let payload_bytes = block_bytes - tierkv_blockstore::format::BLOCK_HEADER_BYTES;
    let mut payloads: Vec<u8> =
        (0..payload_bytes * blocks as usize).map(|i| (i % 253) as u8).collect();
    let mut ids = Vec::new();

    let mut cells = vec![Cell::Sync(Buffering::Buffered), Cell::Async(Buffering::Buffered)];
    if direct.is_some() {
        cells.extend([Cell::Sync(Buffering::Direct), Cell::Async(Buffering::Direct)]);
    }
    cells.push(Cell::Atomic);
    let mut samples: Vec<(Cell, Vec<u64>)> =
        cells.iter().map(|&cell| (cell, Vec::with_capacity(repeats))).collect();
    // Repetition 0 is the untimed warm-up of every cell.
    for repeat in 0..=repeats {
        // Rotate the order so no cell always follows the same one.
        for turn in 0..cells.len() {
            let index = (turn + repeat) % cells.len();
            let ns = match cells[index] {
                Cell::Sync(Buffering::Buffered) => buffered.time(true)?,
                Cell::Async(Buffering::Buffered) => buffered.time(false)?,
                Cell::Sync(Buffering::Direct) | Cell::Async(Buffering::Direct) => {
                    let Some(writer) = direct.as_mut() else { continue };
                    writer.time(cells[index] == Cell::Sync(Buffering::Direct))?
                }
                Cell::Atomic => {
                    atomic_walk.next_op(&mut ids);
                    payloads[0] = payloads[0].wrapping_add(1);
                    let group: Vec<(BlockId, &[u8])> = ids
                        .iter()
                        .zip(payloads.chunks_exact(payload_bytes))
                        .map(|(&id, payload)| (BlockId(id), payload))
                        .collect();
                    let started = Instant::now();
                    store.write_group(&group)?;
                    elapsed_ns(started)
                }
            };
            if repeat > 0 {
                samples[index].1.push(ns);
            }
        }
    }
    Ok(samples)
}

fn filled_buffer(len: usize, align: usize) -> AlignedBuf {
    let mut buffer = AlignedBuf::with_align(len, align);
    for (i, byte) in buffer.iter_mut().enumerate() {
        *byte = (i % 249) as u8;
    }
    buffer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_summarise_medians_and_percentiles() {
        let samples: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        let timing = Timing::from_ns(&samples, 1_000_000).unwrap();
        assert_eq!(timing.repeats, 100);
        assert!((timing.latency_us_median - 50.5).abs() < 1e-9);
        assert!((timing.latency_us_p99 - 99.0).abs() < 1e-9);
        assert!((timing.latency_us_mean - 50.5).abs() < 1e-9);
        assert!(
            (timing.latency_us_min - 1.0).abs() < 1e-9
                && (timing.latency_us_max - 100.0).abs() < 1e-9
        );
        // 1 MB in 50.5 µs.
        assert!((timing.bandwidth_mb_per_s - 1e6 / 50.5).abs() < 1e-6);
        let one = Timing::from_ns(&[7_000], 512).unwrap();
        assert_eq!(one.latency_us_p99, 7.0);
        assert!(Timing::from_ns(&[], 1).is_none());
    }

    #[test]
    fn walks_stay_in_the_file_and_never_repeat_a_slot_in_one_operation() {
        for pattern in MicroPattern::ALL {
            let mut walk = PatternWalk::new(pattern, 2048, 64, 8, 5).unwrap();
            let mut out = Vec::new();
            let mut first = Vec::new();
            for op in 0..100 {
                walk.next_op(&mut out);
                assert_eq!(out.len(), 64);
                assert!(out.iter().all(|&slot| slot < 2048));
                let mut sorted = out.clone();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(sorted.len(), 64, "{pattern:?}");
                match pattern {
                    MicroPattern::Sequential => assert!(out.windows(2).all(|w| w[1] == w[0] + 1)),
                    MicroPattern::Strided => assert!(out.windows(2).all(|w| w[1] == w[0] + 8)),
                    MicroPattern::Random => {}
                }
                if op == 0 {
                    first = out.clone();
                } else if op == 1 {
                    assert_ne!(first, out, "{pattern:?} repeated its positions");
                }
            }
        }
    }

    #[test]
    fn a_file_too_small_for_the_walk_is_an_error() {
        assert!(PatternWalk::new(MicroPattern::Strided, 100, 64, 8, 1).is_err());
    }

    #[test]
    fn direct_units_round_up_to_the_alignment() {
        assert_eq!(direct_unit(512, 512), 512);
        assert_eq!(direct_unit(512, 4096), 4096);
        assert_eq!(direct_unit(16384, 4096), 16384);
        assert_eq!(memory_align(512), 4096);
        assert_eq!(memory_align(8192), 8192);
    }

    #[test]
    fn seed_figures_match_the_slides() {
        assert_eq!(seed_latency(MicroPattern::Sequential, Buffering::Buffered).async_writes, 330.0);
        assert_eq!(seed_latency(MicroPattern::Random, Buffering::Direct).atomic_group, Some(671.0));
        assert_eq!(seed_bandwidth(MicroPattern::Strided, Buffering::Direct).sync, 217.0);
        assert_eq!(
            seed_bandwidth(MicroPattern::Sequential, Buffering::Buffered).atomic_group,
            None
        );
    }
}
