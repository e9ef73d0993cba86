//! The block benchmark (`tierkv bench blocks`): seed 003's write micro-benchmarks (slides
//! 19–21) on the machine at hand, and a page-update workload that puts the log store's atomic
//! groups beside the InnoDB-style doublewrite baseline.
//!
//! 1. **Latency** (`micro`): 64 blocks of 512 B written three ways, per pattern (sequential,
//!    strided, random over a preallocated, fully written file) and buffering (page cache, or
//!    O_DIRECT with aligned buffers where the file system accepts it): `sync` = 64 × (pwrite +
//!    fdatasync); `async` = 64 pwrites, then one fdatasync (not libaio); `atomic group` = one
//!    `LogStore::write_group` of the 64 blocks (448-byte payloads, so each encoded block is
//!    512 B). Each operation is repeated and its median, p99 and mean reported beside the
//!    seed's figures.
//! 2. **Bandwidth** (`micro`): the same with 64 blocks of 16 KiB; MB/s = 64 × 16 KiB ÷ median.
//! 3. **Page updates** (`pages`): per page size, a fresh `LogStore` and a fresh
//!    `DoublewriteStore` are loaded with the same pages, then take the same stream of page
//!    updates (uniform or scrambled Zipfian), flushed every `checkpoint_every` updates as the
//!    same atomic groups. Reported: pages and updates per second, device bytes from the stores'
//!    counters and from `/proc/self/io`, space amplification, and the atomic ÷ doublewrite
//!    ratios.
//! 4. **Sustained overwrite** (`pages`, optional): uniform page rewrites on a `LogStore` for
//!    some minutes, sampling its space amplification once a second.
//!
//! Everything runs in a scratch directory under `<path>` (`tierkv-blocks-` and random
//! characters), which is removed at the end, on a panic and on Ctrl-C.
//!
//! Must never: report an operation that did not complete durably (every timed write path ends
//! with an fdatasync, or a store group that returned `Ok`), assert on speed, or leave its
//! scratch files behind after a successful run.

pub mod micro;
pub mod output;
pub mod pages;
pub mod plot;
pub mod scramble;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use crate::machine::machine_info;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use tierkv_io::{file_system_info, Storage};

use crate::device::{BenchError, Machine};
use crate::scratch::ScratchDir;

/// The write patterns of seed 003's micro-benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MicroPattern {
    /// The 64 blocks one after the other; each repetition continues where the last ended.
    Sequential,
    /// Block `i` at `base + i × stride_blocks` blocks.
    Strided,
    /// 64 distinct uniformly random block positions.
    Random,
}

impl MicroPattern {
    /// Every pattern, in the seed's table order.
    pub const ALL: [MicroPattern; 3] =
        [MicroPattern::Random, MicroPattern::Strided, MicroPattern::Sequential];

    /// The name used on the command line, in tables and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            MicroPattern::Sequential => "sequential",
            MicroPattern::Strided => "strided",
            MicroPattern::Random => "random",
        }
    }
}

impl FromStr for MicroPattern {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        MicroPattern::ALL.into_iter().find(|p| p.name() == text).ok_or_else(|| {
            format!("unknown pattern {text:?}; expected sequential, strided or random")
        })
    }
}

/// Page cache or O_DIRECT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Buffering {
    /// pwrite through the page cache (`AccessMethod::Syscall`).
    Buffered,
    /// pwrite with O_DIRECT from aligned buffers (`AccessMethod::Direct`).
    Direct,
}

impl Buffering {
    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Buffering::Buffered => "buffered",
            Buffering::Direct => "direct",
        }
    }
}

/// How the page-update workload picks the page to update.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Distribution {
    /// Every page equally likely.
    Uniform,
    /// Zipfian over page ranks (theta from the options), ranks scrambled over the pages.
    Zipfian,
}

impl Distribution {
    /// The name used on the command line, in tables and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Zipfian => "zipfian",
        }
    }
}

impl FromStr for Distribution {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "uniform" => Ok(Distribution::Uniform),
            "zipfian" => Ok(Distribution::Zipfian),
            _ => Err(format!("unknown distribution {text:?}; expected uniform or zipfian")),
        }
    }
}

/// How long the measured phase of a page-update run lasts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunLength {
    /// Updates until this many seconds have passed (then the last flush).
    Seconds(f64),
    /// Exactly this many updates: both modes then write exactly the same groups.
    Updates(u64),
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct BlocksBenchConfig {
    /// Directory the scratch files are created in.
    pub path: PathBuf,
    /// Blocks per micro-benchmark operation (the seed's 64).
    pub blocks_per_op: usize,
    /// Block size of the latency table (the seed's 512 B).
    pub latency_block_bytes: usize,
    /// Block size of the bandwidth table (the seed's 16 KiB).
    pub bandwidth_block_bytes: usize,
    /// Timed repetitions of each latency operation.
    pub latency_repeats: usize,
    /// Timed repetitions of each bandwidth operation.
    pub bandwidth_repeats: usize,
    /// Patterns of the micro-benchmarks.
    pub patterns: Vec<MicroPattern>,
    /// Size of the preallocated file the micro-benchmarks write into.
    pub micro_file_bytes: u64,
    /// Distance between the blocks of the strided pattern, in blocks.
    pub stride_blocks: u64,
    /// Page sizes of the page-update workload.
    pub page_sizes: Vec<usize>,
    /// Bytes of pages in the data set of the page-update workload (and of the overwrite test).
    pub data_set_bytes: u64,
    /// Length of each measured page-update run.
    pub run_length: RunLength,
    /// How pages are picked.
    pub distribution: Distribution,
    /// Zipfian exponent.
    pub zipf_theta: f64,
    /// The dirty set is flushed after this many updates.
    pub checkpoint_every: u64,
    /// Page-update trials per page size (each runs both modes).
    pub trials: usize,
    /// Pages per atomic group of a flush, at most.
    pub group_pages_max: usize,
    /// Pages per group while loading.
    pub load_group_pages: usize,
    /// Length of the sustained-overwrite test (`None`: not run).
    pub overwrite: Option<Duration>,
    /// Page size of the sustained-overwrite test.
    pub overwrite_page_bytes: usize,
    /// Pages per group of the sustained-overwrite test.
    pub overwrite_group_pages: usize,
    /// Seed of every random choice.
    pub seed: u64,
    /// Show a progress bar on stderr.
    pub progress: bool,
}

/// Below this many log-store segments of data, space figures are dominated by whole-segment
/// growth, and the report says so.
const SEGMENTS_FOR_SPACE_FIGURES: u64 = 8;

/// Seed of the random choices unless one is given.
pub const DEFAULT_SEED: u64 = 0x0b10_c5ee_d003_0001;

impl BlocksBenchConfig {
    /// The defaults of `tierkv bench blocks`.
    pub fn new(path: impl Into<PathBuf>) -> BlocksBenchConfig {
        BlocksBenchConfig {
            path: path.into(),
            blocks_per_op: 64,
            latency_block_bytes: 512,
            bandwidth_block_bytes: 16 << 10,
            latency_repeats: 200,
            bandwidth_repeats: 50,
            patterns: MicroPattern::ALL.to_vec(),
            micro_file_bytes: 64 << 20,
            stride_blocks: 8,
            page_sizes: vec![4 << 10, 16 << 10],
            data_set_bytes: 256 << 20,
            run_length: RunLength::Seconds(30.0),
            distribution: Distribution::Zipfian,
            zipf_theta: 0.99,
            checkpoint_every: 1000,
            trials: 3,
            group_pages_max: 256,
            load_group_pages: 64,
            overwrite: None,
            overwrite_page_bytes: 4 << 10,
            overwrite_group_pages: 64,
            seed: DEFAULT_SEED,
            progress: true,
        }
    }

    fn validate(&self) -> Result<(), BenchError> {
        let fail = |detail: String| Err(BenchError::Config(detail));
        let header = tierkv_blockstore::format::BLOCK_HEADER_BYTES;
        if self.blocks_per_op == 0 || self.latency_repeats == 0 || self.bandwidth_repeats == 0 {
            return fail("blocks per operation and repeats must be positive".into());
        }
        for (what, bytes) in
            [("latency", self.latency_block_bytes), ("bandwidth", self.bandwidth_block_bytes)]
        {
            if bytes <= header || !bytes.is_multiple_of(512) {
                return fail(format!(
                    "the {what} block size {bytes} must be a multiple of 512 above the \
                     {header}-byte block header"
                ));
            }
            let span = self.blocks_per_op as u64 * bytes as u64 * self.stride_blocks.max(1);
            if span.saturating_mul(2) > self.micro_file_bytes {
                return fail(format!(
                    "the micro file of {} bytes is too small for {} strided blocks of {bytes} \
                     bytes",
                    self.micro_file_bytes, self.blocks_per_op
                ));
            }
        }
        if self.patterns.is_empty() {
            return fail("choose at least one pattern".into());
        }
        if self.stride_blocks < 2 {
            return fail("the stride must be at least 2 blocks (1 is sequential)".into());
        }
        for &page in self.page_sizes.iter().chain(std::iter::once(&self.overwrite_page_bytes)) {
            if page < 4096 || !page.is_multiple_of(4096) {
                return fail(format!("page size {page} must be a multiple of 4096"));
            }
        }
        let max_page = self.page_sizes.iter().copied().max().unwrap_or(4096);
        if self.data_set_bytes < max_page.max(self.overwrite_page_bytes) as u64 {
            return fail("the data set must hold at least one page of each size".into());
        }
        match self.run_length {
            RunLength::Seconds(s) if !(s.is_finite() && s > 0.0) => {
                return fail(format!("the run length {s} s must be positive"));
            }
            RunLength::Updates(0) => return fail("the number of updates must be positive".into()),
            _ => {}
        }
        if !(self.zipf_theta > 0.0 && self.zipf_theta < 1.0) {
            return fail(format!("theta {} must lie strictly between 0 and 1", self.zipf_theta));
        }
        if self.trials == 0 {
            return fail("--trials must be at least 1".into());
        }
        if self.checkpoint_every == 0 || self.group_pages_max == 0 || self.load_group_pages == 0 {
            return fail("checkpoint interval and group sizes must be positive".into());
        }
        if self.overwrite.is_some_and(|d| d.is_zero()) || self.overwrite_group_pages == 0 {
            return fail("the overwrite test needs a positive length and group size".into());
        }
        Ok(())
    }

    fn options_record(&self) -> OptionsRecord {
        OptionsRecord {
            blocks_per_op: self.blocks_per_op,
            latency_block_bytes: self.latency_block_bytes,
            bandwidth_block_bytes: self.bandwidth_block_bytes,
            latency_repeats: self.latency_repeats,
            bandwidth_repeats: self.bandwidth_repeats,
            patterns: self.patterns.clone(),
            micro_file_bytes: self.micro_file_bytes,
            stride_blocks: self.stride_blocks,
            page_sizes: self.page_sizes.clone(),
            data_set_bytes: self.data_set_bytes,
            run_length: self.run_length,
            distribution: self.distribution,
            zipf_theta: self.zipf_theta,
            checkpoint_every: self.checkpoint_every,
            trials: self.trials,
            group_pages_max: self.group_pages_max,
            load_group_pages: self.load_group_pages,
            overwrite_s: self.overwrite.map(|d| d.as_secs_f64()),
            overwrite_page_bytes: self.overwrite_page_bytes,
            overwrite_group_pages: self.overwrite_group_pages,
            seed: self.seed,
        }
    }
}

/// The options of a run, as recorded in the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OptionsRecord {
    /// Blocks per micro-benchmark operation.
    pub blocks_per_op: usize,
    /// Block size of the latency table.
    pub latency_block_bytes: usize,
    /// Block size of the bandwidth table.
    pub bandwidth_block_bytes: usize,
    /// Repetitions per latency cell.
    pub latency_repeats: usize,
    /// Repetitions per bandwidth cell.
    pub bandwidth_repeats: usize,
    /// Patterns.
    pub patterns: Vec<MicroPattern>,
    /// Size of the micro file.
    pub micro_file_bytes: u64,
    /// Stride of the strided pattern, blocks.
    pub stride_blocks: u64,
    /// Page sizes of the page-update workload.
    pub page_sizes: Vec<usize>,
    /// Data set of the page-update workload.
    pub data_set_bytes: u64,
    /// Length of each page-update run.
    pub run_length: RunLength,
    /// Page choice.
    pub distribution: Distribution,
    /// Zipfian exponent.
    pub zipf_theta: f64,
    /// Updates between flushes.
    pub checkpoint_every: u64,
    /// Page-update trials per page size.
    #[serde(default = "one")]
    pub trials: usize,
    /// Pages per flush group at most.
    pub group_pages_max: usize,
    /// Pages per load group.
    pub load_group_pages: usize,
    /// Length of the overwrite test, seconds (`None`: not run).
    pub overwrite_s: Option<f64>,
    /// Page size of the overwrite test.
    pub overwrite_page_bytes: usize,
    /// Pages per group of the overwrite test.
    pub overwrite_group_pages: usize,
    /// Seed.
    pub seed: u64,
}

/// Whether O_DIRECT could be used on the path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirectSupport {
    /// The micro file opened with O_DIRECT.
    pub supported: bool,
    /// The alignment O_DIRECT transfers need there.
    pub alignment_bytes: Option<u64>,
    /// Why not, when it was refused.
    pub refused: Option<String>,
}

/// A whole run: what the JSON output holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlocksReport {
    /// The command line that produced the report.
    pub command: String,
    /// The machine.
    pub machine: Machine,
    /// The directory measured.
    pub path: PathBuf,
    /// Its file system.
    pub fs_type: String,
    /// True when that file system keeps data in memory only (tmpfs): fdatasync is nearly free.
    pub fs_is_memory: bool,
    /// The options.
    pub options: OptionsRecord,
    /// O_DIRECT on the path.
    pub direct: DirectSupport,
    /// Seed 003's latency table: 64 blocks of 512 B.
    pub latency: micro::MicroTable,
    /// Seed 003's bandwidth table: 64 blocks of 16 KiB.
    pub bandwidth: micro::MicroTable,
    /// The page-update runs, in the order they ran.
    pub page_update: Vec<pages::PageUpdatePoint>,
    /// Atomic group ÷ doublewrite, per page size.
    pub page_update_ratios: Vec<pages::PageUpdateRatio>,
    /// The sustained-overwrite test, when it ran.
    pub overwrite: Option<pages::OverwriteReport>,
    /// What a reader needs to know to read the figures.
    pub notes: Vec<String>,
}

/// Runs the benchmark.
pub fn run(config: &BlocksBenchConfig, command: &str) -> Result<BlocksReport, BenchError> {
    config.validate()?;
    let storage = Storage::Os;
    storage.create_dir_all(&config.path)?;
    let fs = file_system_info(&config.path)?;
    let scratch_dir = ScratchDir::new_in(&config.path, "tierkv-blocks-")
        .map_err(|source| BenchError::Output { path: config.path.clone(), source })?;
    let scratch = scratch_dir.path().to_path_buf();
    let steps = 2 * config.patterns.len()
        + 2 * config.page_sizes.len() * config.trials
        + usize::from(config.overwrite.is_some());
    let progress = progress_bar(config, steps as u64);
    let mut notes = Vec::new();

    let micro::MicroResults { latency, bandwidth, direct, notes: micro_notes } =
        micro::run(&storage, config, &scratch, &progress)?;
    notes.extend(micro_notes);
    let (page_update, page_update_ratios) = pages::run(&storage, config, &scratch, &progress)?;
    let overwrite = match config.overwrite {
        Some(length) => Some(pages::run_overwrite(&storage, config, &scratch, length, &progress)?),
        None => None,
    };
    progress.finish_and_clear();
    scratch_dir.remove().map_err(|source| BenchError::Output { path: scratch.clone(), source })?;

    if fs.is_memory {
        notes.push(format!(
            "{} is {}, a memory file system: fdatasync has no device to wait for and \
             /proc/self/io write_bytes stays 0, so its ratios are null",
            config.path.display(),
            fs.fs_type
        ));
    }
    notes.push(pages::PAGE_UPDATE_NOTE.to_string());
    let segment_bytes = tierkv_blockstore::StoreOptions::default().segment_bytes;
    if config.data_set_bytes < SEGMENTS_FOR_SPACE_FIGURES * segment_bytes {
        notes.push(format!(
            "the data set ({} MiB) spans fewer than {SEGMENTS_FOR_SPACE_FIGURES} of the log \
             store's {} MiB segments: its files grow by whole segments, so its space \
             amplification (and the cleaning the space target then demands) says more about \
             the segment size than about the store",
            config.data_set_bytes >> 20,
            segment_bytes >> 20
        ));
    }
    Ok(BlocksReport {
        command: command.to_string(),
        machine: machine_info().into(),
        path: config.path.clone(),
        fs_type: fs.fs_type,
        fs_is_memory: fs.is_memory,
        options: config.options_record(),
        direct,
        latency,
        bandwidth,
        page_update,
        page_update_ratios,
        overwrite,
        notes,
    })
}

/// Serde's default of fields added after reports were written.
fn one() -> usize {
    1
}

fn progress_bar(config: &BlocksBenchConfig, total: u64) -> ProgressBar {
    if !config.progress {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style =
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} steps {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.enable_steady_tick(Duration::from_millis(500));
    bar
}

/// Removes `dir` and what the bench put in it: files, and directories of files (the stores
/// write no deeper). A missing `dir` is fine.
pub(crate) fn remove_tree(storage: &Storage, dir: &Path) -> Result<(), BenchError> {
    if !storage.exists(dir)? {
        return Ok(());
    }
    for name in storage.list_dir(dir)? {
        let path = dir.join(&name);
        if path.is_dir() {
            for inner in storage.list_dir(&path)? {
                storage.remove_file(path.join(inner))?;
            }
            remove_empty_dir(&path)?;
        } else {
            storage.remove_file(&path)?;
        }
    }
    remove_empty_dir(dir)
}

fn remove_empty_dir(dir: &Path) -> Result<(), BenchError> {
    std::fs::remove_dir(dir)
        .map_err(|source| BenchError::Output { path: dir.to_path_buf(), source })
}

/// Writes the report as pretty JSON.
pub fn write_json(report: &BlocksReport, path: &Path) -> Result<(), BenchError> {
    let text = serde_json::to_string_pretty(report)
        .map_err(|e| BenchError::Config(format!("JSON: {e}")))?;
    std::fs::write(path, text)
        .map_err(|source| BenchError::Output { path: path.to_path_buf(), source })
}

/// `Some(x)` when `x` is finite: JSON has no NaN or infinity, and a ratio of nothing is not 0.
pub(crate) fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}
