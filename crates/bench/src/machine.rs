//! What measurement tools need to know about the machine and the process: the CPU and its
//! persistence features, cores, memory and kernel; the process's CPU time, resident memory
//! and the bytes it sent to storage (`/proc/self/io`); and evicting a file from the page
//! cache, with a check of how much of it is still resident. The system calls under it are
//! `tierkv_io::measure`'s (re-exported here), since only tierkv-io makes system calls; the
//! rest reads `/proc` and `/sys` as files.
//!
//! Eviction tries `posix_fadvise(DONTNEED)` first (it touches only this file). If pages are
//! still resident afterwards and `/proc/sys/vm/drop_caches` is writable (root), it drops every
//! clean page of the machine. The report says which was used and what stayed resident, so a
//! "cold" measurement is never claimed without the check behind it.

pub use tierkv_io::measure::{malloc_in_use_bytes, process_cpu_seconds, resident_fraction};
use tierkv_io::pmem::{self, FlushInstruction};
use tierkv_io::{File, Result};

/// The machine a measurement ran on.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MachineInfo {
    /// CPU model name from /proc/cpuinfo.
    pub cpu_model: String,
    /// Cores available to this process.
    pub cores: usize,
    /// Physical memory in bytes (MemTotal).
    pub memory_bytes: u64,
    /// Kernel release (uname -r).
    pub kernel: String,
    /// The flush instruction `persist` uses.
    pub flush: FlushInstruction,
    /// CPUID reports clwb.
    pub clwb: bool,
    /// CPUID reports clflushopt.
    pub clflushopt: bool,
    /// CPUID reports clflush.
    pub clflush: bool,
    /// CPUID reports AVX-512F (used for 64-byte non-temporal stores).
    pub avx512f: bool,
}

/// Describes this machine.
pub fn machine_info() -> MachineInfo {
    let cpu = pmem::cpu();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name").and_then(|rest| rest.split(':').nth(1)))
        .map_or_else(|| "unknown".to_string(), |model| model.trim().to_string());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_bytes = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024);
    MachineInfo {
        cpu_model,
        cores: std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
        memory_bytes,
        kernel: tierkv_io::measure::kernel_release(),
        flush: cpu.flush,
        clwb: cpu.has_clwb,
        clflushopt: cpu.has_clflushopt,
        clflush: cpu.has_clflush,
        avx512f: cpu.avx512f,
    }
}

/// Bytes this process has caused to be sent to the storage layer so far: `write_bytes` of
/// `/proc/self/io` (page-cache writeback is charged to the process that dirtied the pages).
/// `None` where the file cannot be read or has no such line (not Linux, no task I/O
/// accounting, a restricted /proc). A memory file system sends nothing to storage, so the
/// figure stays put there.
pub fn process_write_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    parse_write_bytes(&text)
}

/// The `write_bytes:` value of a `/proc/<pid>/io` text.
fn parse_write_bytes(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix("write_bytes:"))
        .and_then(|rest| rest.trim().parse::<u64>().ok())
}

/// This process's resident memory now and at its peak (`VmRSS`, `VmHWM` of
/// `/proc/self/status`), in bytes. `None` where the file cannot be read.
pub fn process_memory() -> Option<ProcessMemory> {
    parse_process_memory(&std::fs::read_to_string("/proc/self/status").ok()?)
}

/// `process_memory` of another process, `pid` (a child being watched). `None` once it has
/// gone, or where its status cannot be read.
pub fn process_memory_of(pid: u32) -> Option<ProcessMemory> {
    parse_process_memory(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

fn parse_process_memory(text: &str) -> Option<ProcessMemory> {
    let kib = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib * 1024)
    };
    Some(ProcessMemory {
        rss_bytes: kib("VmRSS:")?,
        peak_rss_bytes: kib("VmHWM:")?,
        anon_bytes: kib("RssAnon:"),
    })
}

/// What `process_memory` reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessMemory {
    /// Resident now.
    pub rss_bytes: u64,
    /// The most resident at once since the process started (or since the peak was reset).
    pub peak_rss_bytes: u64,
    /// Of the resident memory now, the anonymous part (the heap, stacks, anonymous maps);
    /// `None` on kernels before 4.5.
    pub anon_bytes: Option<u64>,
}

/// Writes since boot by the block device that holds `path`, from
/// `/sys/dev/block/MAJOR:MINOR/stat`: what reached the device from every process, the file
/// system's journal included. `None` on a file system without a block device (tmpfs) or
/// where sysfs cannot be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceWrites {
    /// Write requests completed (after the block layer merged adjacent ones).
    pub requests: u64,
    /// Sectors written, times 512.
    pub bytes: u64,
}

/// See [`DeviceWrites`].
pub fn device_writes(path: &std::path::Path) -> Option<DeviceWrites> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    // The Linux encoding of a dev_t (as glibc's major() and minor() read it).
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0xff);
    let text = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
    parse_device_writes(&text)
}

/// The writes-completed (5th) and sectors-written (7th) fields of a block device's `stat`.
fn parse_device_writes(text: &str) -> Option<DeviceWrites> {
    let field = |n: usize| text.split_whitespace().nth(n)?.parse::<u64>().ok();
    Some(DeviceWrites { requests: field(4)?, bytes: field(6)? * 512 })
}

/// How a file was evicted from the page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvictionMethod {
    /// `posix_fadvise(POSIX_FADV_DONTNEED)` on the file.
    Fadvise,
    /// `posix_fadvise` left pages resident, so `echo 1 > /proc/sys/vm/drop_caches` followed.
    DropCaches,
    /// The file lives on a memory file system (tmpfs): its pages are the file, there is no
    /// colder state to reach.
    NotApplicable,
}

/// What an eviction did and achieved.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EvictionReport {
    /// The method that was used last.
    pub method: EvictionMethod,
    /// Fraction of the file's pages resident before eviction (0..=1).
    pub resident_before: f64,
    /// Fraction still resident afterwards (0..=1).
    pub resident_after: f64,
}

/// Syncs `file`, then evicts it from the page cache (see the module notes).
pub fn evict_file(file: &File) -> Result<EvictionReport> {
    let path = file.path().to_path_buf();
    let before = resident_fraction(&path)?;
    if tierkv_io::file_system_info(&path)?.is_memory {
        return Ok(EvictionReport {
            method: EvictionMethod::NotApplicable,
            resident_before: before,
            resident_after: before,
        });
    }
    file.sync_data()?;
    file.advise_dontneed()?;
    let after = resident_fraction(&path)?;
    if after <= 0.01 {
        return Ok(EvictionReport {
            method: EvictionMethod::Fadvise,
            resident_before: before,
            resident_after: after,
        });
    }
    match std::fs::write("/proc/sys/vm/drop_caches", "1\n") {
        Ok(()) => Ok(EvictionReport {
            method: EvictionMethod::DropCaches,
            resident_before: before,
            resident_after: resident_fraction(&path)?,
        }),
        // Not permitted: report the fadvise result honestly rather than fail the run.
        Err(_) => Ok(EvictionReport {
            method: EvictionMethod::Fadvise,
            resident_before: before,
            resident_after: after,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_info_names_the_cpu_cores_memory_and_kernel() {
        let info = machine_info();
        assert!(info.cores >= 1);
        assert!(info.memory_bytes > 0, "{info:?}");
        assert!(!info.kernel.is_empty());
        assert_eq!(info.flush, pmem::cpu().flush);
    }

    #[test]
    fn write_bytes_is_parsed_from_proc_io_text() {
        let text = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\n\
                    write_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_write_bytes(text), Some(8192));
        assert_eq!(parse_write_bytes("rchar: 1\n"), None);
        assert_eq!(parse_write_bytes("write_bytes: many\n"), None);
        // Where /proc/self/io exists it parses; elsewhere the answer is None, not a panic.
        let _ = process_write_bytes();
    }

    #[test]
    fn write_requests_and_sectors_are_read_from_a_block_stat_line() {
        let line = "12484076 49841 1892457798 5146455 65186473 867338 6132347278 21204668 0";
        assert_eq!(
            parse_device_writes(line),
            Some(DeviceWrites { requests: 65_186_473, bytes: 6_132_347_278 * 512 })
        );
        assert_eq!(parse_device_writes("1 2 3 4 5 6"), None);
        // A missing path (or tmpfs, with no block device) gives None, not a panic.
        assert_eq!(device_writes(std::path::Path::new("/no/such/path")), None);
    }
}
