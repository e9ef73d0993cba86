//! The device lab's vocabulary: what a measurement point is, what it reports, and the report
//! of a whole run (machine, file, configuration, points, fio comparisons). These types are the
//! JSON schema of `results/device/*.json`; change them with care.

use std::fmt;
use std::str::FromStr;

use crate::machine::{EvictionReport, MachineInfo};
use serde::{Deserialize, Serialize};
use tierkv_io::{AccessMethod, PmemMode};

/// Read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoOp {
    /// Read `transfer_bytes` per operation.
    Read,
    /// Write `transfer_bytes` per operation (pmem: write + persist).
    Write,
}

/// Sequential or random offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// Each thread walks its own region in order, wrapping at its end.
    Seq,
    /// Each thread picks uniformly random transfer-aligned offsets in its own region.
    Rand,
}

/// The page-cache state a point starts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheState {
    /// The whole file is read into the page cache before the point.
    Warm,
    /// The file is evicted from the page cache before the point (see `EvictionReport`).
    Cold,
}

macro_rules! named {
    ($type:ty, $($variant:ident => $name:literal),*) => {
        impl $type {
            /// The lower-case name used on command lines, in tables and in CSV.
            pub fn name(self) -> &'static str {
                match self { $(Self::$variant => $name,)* }
            }
        }
        impl fmt::Display for $type {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
        impl FromStr for $type {
            type Err = String;
            fn from_str(text: &str) -> Result<Self, String> {
                match text {
                    $($name => Ok(Self::$variant),)*
                    _ => Err(format!("unknown value {text:?}; expected one of: {}",
                        [$($name),*].join(", "))),
                }
            }
        }
    };
}

named!(IoOp, Read => "read", Write => "write");
named!(Pattern, Seq => "seq", Rand => "rand");
named!(CacheState, Warm => "warm", Cold => "cold");

/// One measurement point: every parameter that can change a figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PointSpec {
    /// Access method (`syscall`, `direct`, `mmap`, `pmem`).
    pub method: AccessMethod,
    /// Read or write.
    pub op: IoOp,
    /// Sequential or random.
    pub pattern: Pattern,
    /// Warm or cold page cache at the start.
    pub cache: CacheState,
    /// Bytes per operation.
    pub transfer_bytes: u64,
    /// Threads issuing operations, each on its own region of the file.
    pub threads: usize,
}

impl fmt::Display for PointSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {} {} x{}",
            self.method,
            self.op,
            self.pattern,
            self.cache,
            format_bytes(self.transfer_bytes),
            self.threads
        )
    }
}

/// What one point measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    /// The point.
    #[serde(flatten)]
    pub spec: PointSpec,
    /// Bytes moved per second of wall time (transfer bytes, not sector bytes).
    pub bytes_per_s: f64,
    /// Operations per second of wall time.
    pub ops_per_s: f64,
    /// Latency percentiles of the timed operations, nanoseconds.
    pub latency_ns_p50: u64,
    /// 99th percentile.
    pub latency_ns_p99: u64,
    /// 99.9th percentile.
    pub latency_ns_p999: u64,
    /// Largest latency timed.
    pub latency_ns_max: u64,
    /// Operations whose latency was timed: all of them for transfers of 64 KiB or more, one in
    /// 16 below (timing every 128 B operation would cost more than the operation).
    pub latency_samples: u64,
    /// Operations completed.
    pub ops: u64,
    /// Wall time of the point, seconds.
    pub elapsed_s: f64,
    /// CPU time the process used during the point (all threads, user + system), seconds.
    pub cpu_s: f64,
    /// For `cold` points: how the file was evicted and how much stayed resident.
    pub eviction: Option<EvictionReport>,
    /// For `direct` transfers smaller than the O_DIRECT alignment: every operation moved this
    /// many aligned bytes (a write is a read-modify-write of them), which is what an
    /// application must do to read or write so few bytes with O_DIRECT.
    pub direct_block_bytes: Option<u64>,
    /// The pmem mode in force for `pmem` points.
    pub pmem_mode: Option<PmemMode>,
}

/// The file a run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileInfo {
    /// Path of the measurement file.
    pub path: String,
    /// Its size in bytes.
    pub size_bytes: u64,
    /// The file system under it.
    pub fs_type: String,
    /// Whether the file is on DAX.
    pub dax: bool,
    /// The pmem mode a `pmem` handle gets on this file (what every pmem point ran with).
    pub pmem_mode: PmemMode,
    /// The O_DIRECT alignment in force, if the file system accepts O_DIRECT.
    pub direct_alignment_bytes: Option<u64>,
}

/// One fio comparison: the same point run by tierkv and by fio, alternately, `repeats` times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FioComparison {
    /// The point.
    #[serde(flatten)]
    pub spec: PointSpec,
    /// fio's engine and flags for it (`psync`, `libaio direct=1 iodepth=1`, `mmap`).
    pub fio_engine: String,
    /// tierkv's bytes/s in each repeat.
    pub ours_bytes_per_s: Vec<f64>,
    /// fio's bytes/s in each repeat.
    pub fio_bytes_per_s: Vec<f64>,
    /// Median of `ours_bytes_per_s`.
    pub ours_median_bytes_per_s: f64,
    /// Median of `fio_bytes_per_s`.
    pub fio_median_bytes_per_s: f64,
    /// `ours_median / fio_median`.
    pub ratio: f64,
    /// The fio command line of the last repeat, for reproduction.
    pub fio_command: String,
}

/// Serializable machine description (a copy of `MachineInfo` that can also be read back).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model name.
    pub cpu_model: String,
    /// Cores available.
    pub cores: usize,
    /// Physical memory, bytes.
    pub memory_bytes: u64,
    /// Kernel release.
    pub kernel: String,
    /// Flush instruction used by `persist`.
    pub flush: String,
    /// CPUID flags that matter: clwb, clflushopt, clflush, avx512f.
    pub clwb: bool,
    /// clflushopt.
    pub clflushopt: bool,
    /// clflush.
    pub clflush: bool,
    /// AVX-512F.
    pub avx512f: bool,
}

impl From<MachineInfo> for Machine {
    fn from(info: MachineInfo) -> Machine {
        Machine {
            cpu_model: info.cpu_model,
            cores: info.cores,
            memory_bytes: info.memory_bytes,
            kernel: info.kernel,
            flush: info.flush.name().to_string(),
            clwb: info.clwb,
            clflushopt: info.clflushopt,
            clflush: info.clflush,
            avx512f: info.avx512f,
        }
    }
}

/// A whole device-lab run: what the JSON output holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceReport {
    /// The command line that produced the report.
    pub command: String,
    /// The machine.
    pub machine: Machine,
    /// The measured file.
    pub file: FileInfo,
    /// Seconds each point ran.
    pub duration_per_point_s: f64,
    /// The points, in the order they ran.
    pub points: Vec<PointResult>,
    /// fio comparisons (empty without `--compare-fio`).
    pub fio: Vec<FioComparison>,
    /// Points that were asked for but could not run, with the reason.
    pub skipped: Vec<(PointSpec, String)>,
}

/// "128 B", "4 KiB", "16 MiB".
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] =
        [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1)];
    for (unit, scale) in UNITS {
        if bytes >= scale && bytes.is_multiple_of(scale) {
            return format!("{} {unit}", bytes / scale);
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_format_in_the_largest_whole_unit() {
        for (bytes, text) in
            [(128u64, "128 B"), (4096, "4 KiB"), (16 << 20, "16 MiB"), (1000, "1000 B")]
        {
            assert_eq!(format_bytes(bytes), text);
        }
    }

    #[test]
    fn names_parse_back() {
        for op in [IoOp::Read, IoOp::Write] {
            assert_eq!(op.name().parse::<IoOp>(), Ok(op));
        }
        assert!("sideways".parse::<Pattern>().is_err());
    }
}
