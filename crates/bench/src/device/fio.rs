//! The fio comparison: the same point run by tierkv and by fio, alternately, on the same file.
//!
//! A comparison is only worth something if fio does exactly the work tierkv's runner does, so
//! the job mirrors `runner.rs` parameter by parameter (see `job_args`):
//! - same file, same transfer size, same op and pattern, one fio thread (`thread`, not a
//!   process) per tierkv thread, job `t` confined to region `t` (`size` = region bytes,
//!   `offset_increment` = region bytes), sequential jobs wrapping at the end of their region;
//! - random offsets uniform, transfer-aligned and drawn with replacement (`norandommap=1`);
//! - no hints tierkv does not give (`fadvise_hint=0`), no cache dropping (`invalidate=0`: the
//!   runner prepares the cache state before each run of either tool), no syncs (non-pmem
//!   writes are plain page-cache or O_DIRECT writes), the same buffer written each time
//!   (`scramble_buffers=0`), no per-operation timekeeping (`gtod_reduce=1`: tierkv times at
//!   most one operation in 16 below 64 KiB, and the comparison is of throughput);
//! - page-aligned buffers (`mem_align=4096`, like `AlignedBuf`): without it fio uses its
//!   malloc'd buffer as is (16-byte aligned) for every non-O_DIRECT engine, and the kernel's
//!   copy into a misaligned buffer halved fio's 1 MiB page-cache reads (5.5 against 11 GB/s).
//!
//! What still differs, and is fio's: about 10% more CPU per operation in fio's own loop (at
//! 4 KiB page-cache reads, under a microsecond each, fio spent 16% of its cycles in user space
//! against tierkv's 5%, so tierkv reads ~10-15% faster there), and in the mmap engine of fio
//! 3.33, `madvise(SEQUENTIAL or RANDOM)` on its mapping (not configurable), a fresh mapping per
//! run (page-table entries faulted during the run; tierkv's warm mapping has them), and a
//! remap of the whole region each time a sequential job wraps.
//!
//! Invariants:
//! 1. fio never changes the measurement file's size: every job's `offset + size` lies inside
//!    the file (fio lays a file out again, unlinking it first, only when a job reaches past
//!    its end), `allow_file_create=0` makes a wrong path fail instead of creating a file, and
//!    the size is checked after every fio run.
//! 2. Repeats alternate the order (tierkv then fio, then fio then tierkv, and so on), each
//!    run after the same cache preparation (for `direct` also with the file's dirty pages
//!    written back, see `settle_for_direct`), and medians are compared: the machines are
//!    shared and noisy, drift hits both tools alike, and neither tool always runs second.
//! 3. Only fio's stdout is parsed (its warnings go to stderr); a failure carries the command
//!    line and fio's stderr.
//!
//! Points fio cannot run like tierkv get no engine (`engine_for` returns `None`): `pmem`
//! (no fio engine persists per write), `direct` transfers that are not a multiple of the
//! largest O_DIRECT alignment (tierkv does a read-modify-write of the aligned block; fio
//! cannot), and `mmap` with more than one thread (fio 3.33's mmap engine maps every job from
//! file offset 0, so a job whose region starts further in reads the wrong bytes and remaps on
//! every operation; fixed upstream in axboe/fio pull request 2017, November 2025, long after
//! fio 3.33, which Debian 12 ships).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use indicatif::ProgressBar;
use tierkv_io::{AccessMethod, AlignedBuf, OpenOptions, Storage};

use super::{BenchError, DeviceConfig, FioComparison, IoOp, Pattern, PointSpec, Target};
use crate::summary::median;

/// The fio executable, looked up on the PATH.
const FIO: &str = "fio";

/// How to get fio, for the `Missing` hint and error messages.
const INSTALL_HINT: &str = "Install it with `sudo apt-get install fio` (Debian/Ubuntu) or \
                            `bash scripts/install-tools.sh` from the tierkv repository.";

/// The largest O_DIRECT alignment in use (4 KiB logical sectors). `engine_for` sees only the
/// point, not the file, so it assumes the worst; `compare` checks the real alignment.
const DIRECT_ALIGNMENT_MAX_BYTES: u64 = 4096;

/// Whether fio can be run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FioStatus {
    /// fio answered `--version`.
    Available {
        /// What it printed.
        version: String,
    },
    /// fio is missing; `hint` says how to install it.
    Missing {
        /// How to install fio.
        hint: String,
    },
}

/// Looks for fio on the PATH.
pub fn detect() -> FioStatus {
    match Command::new(FIO).arg("--version").output() {
        Ok(output) if output.status.success() => FioStatus::Available {
            version: String::from_utf8_lossy(&output.stdout).trim().to_string(),
        },
        Ok(output) => FioStatus::Missing {
            hint: format!(
                "`fio --version` failed ({}): {} {INSTALL_HINT}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        },
        Err(error) => FioStatus::Missing {
            hint: format!("fio was not found on the PATH ({error}). {INSTALL_HINT}"),
        },
    }
}

/// Why fio cannot run `spec` like tierkv, if it cannot.
pub fn unsupported_reason(spec: &PointSpec) -> Option<&'static str> {
    if engine_for(spec).is_some() {
        return None;
    }
    Some(match spec.method {
        AccessMethod::Pmem => "fio has no engine that persists each write as tierkv's pmem does",
        AccessMethod::Mmap => "fio 3.33's mmap engine maps every job from offset 0",
        _ => "fio cannot run a direct transfer smaller than 4 KiB without read-modify-write",
    })
}

/// The fio engine that runs `spec` like tierkv does, if fio can run it: `psync` for
/// `syscall`, `libaio direct=1 iodepth=1` for `direct` (tierkv's direct method is synchronous,
/// one I/O in flight per thread), `mmap` for single-threaded `mmap`. See the module header for
/// the points it refuses.
pub fn engine_for(spec: &PointSpec) -> Option<&'static str> {
    match spec.method {
        AccessMethod::Syscall => Some("psync"),
        AccessMethod::Direct if spec.transfer_bytes.is_multiple_of(DIRECT_ALIGNMENT_MAX_BYTES) => {
            Some("libaio direct=1 iodepth=1")
        }
        AccessMethod::Direct => None,
        AccessMethod::Mmap if spec.threads == 1 => Some("mmap"),
        AccessMethod::Mmap | AccessMethod::Pmem => None,
    }
}

/// fio's engine options for `method`, matching `engine_for`.
fn engine_args(method: AccessMethod) -> Option<&'static [&'static str]> {
    match method {
        AccessMethod::Syscall => Some(&["--ioengine=psync", "--direct=0"]),
        AccessMethod::Direct => Some(&["--ioengine=libaio", "--direct=1", "--iodepth=1"]),
        AccessMethod::Mmap => Some(&["--ioengine=mmap", "--direct=0"]),
        AccessMethod::Pmem => None,
    }
}

/// The fio argument list (without the program name) that runs `spec` like tierkv: on `path`,
/// each of `spec.threads` threads in its own region of `region_bytes`, for `duration`.
fn job_args(
    spec: &PointSpec,
    path: &Path,
    region_bytes: u64,
    duration: Duration,
) -> Result<Vec<String>, BenchError> {
    let engine = engine_args(spec.method).ok_or_else(|| {
        BenchError::Fio(format!("no fio engine runs {spec} like tierkv (pmem persists per write)"))
    })?;
    let path = path.to_str().ok_or_else(|| {
        BenchError::Fio(format!(
            "the path {} is not UTF-8, which fio cannot be given",
            path.display()
        ))
    })?;
    if region_bytes == 0 || !region_bytes.is_multiple_of(spec.transfer_bytes) {
        return Err(BenchError::Fio(format!(
            "{spec}: region of {region_bytes} B is not a positive multiple of the transfer"
        )));
    }
    let rw = match (spec.op, spec.pattern) {
        (IoOp::Read, Pattern::Seq) => "read",
        (IoOp::Write, Pattern::Seq) => "write",
        (IoOp::Read, Pattern::Rand) => "randread",
        (IoOp::Write, Pattern::Rand) => "randwrite",
    };
    // Whole milliseconds, at least one: a zero runtime would mean "no limit" to fio.
    let runtime_ms = duration.as_millis().max(1);
    let mut args = vec![
        "--name=tierkv".to_string(),
        // fio splits `filename` at colons (a list of files); a literal colon is `\:`.
        format!("--filename={}", path.replace(':', "\\:")),
        "--allow_file_create=0".to_string(),
    ];
    args.extend(engine.iter().map(|arg| (*arg).to_string()));
    args.extend([
        format!("--rw={rw}"),
        format!("--bs={}", spec.transfer_bytes),
        format!("--numjobs={}", spec.threads),
        "--thread".to_string(),
        format!("--size={region_bytes}"),
        "--offset=0".to_string(),
        format!("--offset_increment={region_bytes}"),
        "--time_based=1".to_string(),
        format!("--runtime={runtime_ms}ms"),
        "--norandommap=1".to_string(),
        "--randrepeat=0".to_string(),
        "--invalidate=0".to_string(),
        "--fadvise_hint=0".to_string(),
        "--scramble_buffers=0".to_string(),
        // fio page-aligns its buffers only for O_DIRECT; a buffered read into its malloc'd
        // buffer (16-byte aligned) copies at half speed. tierkv's buffers are AlignedBuf's.
        format!("--mem_align={}", AlignedBuf::DEFAULT_ALIGN),
        "--gtod_reduce=1".to_string(),
        "--group_reporting=1".to_string(),
        "--output-format=json".to_string(),
    ]);
    Ok(args)
}

/// `args` as a shell command line, for the report and error messages.
fn command_line(args: &[String]) -> String {
    let quoted = args.iter().map(|arg| {
        let plain = arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_=./,:+%@".contains(c));
        if plain {
            arg.clone()
        } else {
            format!("'{}'", arg.replace('\'', r"'\''"))
        }
    });
    std::iter::once(FIO.to_string()).chain(quoted).collect::<Vec<_>>().join(" ")
}

/// Bytes per second of `op` in fio's JSON output: the sum of `bw_bytes` over the jobs (one
/// job entry with `group_reporting`). Text before the first `{` is skipped.
fn parse_bytes_per_s(stdout: &str, op: IoOp) -> Result<f64, String> {
    let start = stdout.find('{').ok_or("no JSON object in fio's output")?;
    let report: serde_json::Value =
        serde_json::from_str(&stdout[start..]).map_err(|e| format!("fio's JSON: {e}"))?;
    let jobs = report
        .get("jobs")
        .and_then(serde_json::Value::as_array)
        .ok_or("fio's JSON has no `jobs` array")?;
    if jobs.is_empty() {
        return Err("fio's JSON lists no jobs".into());
    }
    let direction = op.name();
    let mut total = 0.0;
    for job in jobs {
        let error = job.get("error").and_then(serde_json::Value::as_i64).unwrap_or(0);
        if error != 0 {
            return Err(format!("a fio job reported error {error}"));
        }
        let bytes_per_s = job
            .get(direction)
            .and_then(|stats| stats.get("bw_bytes"))
            .and_then(serde_json::Value::as_f64)
            .ok_or_else(|| format!("a fio job has no {direction}.bw_bytes"))?;
        total += bytes_per_s;
    }
    if !(total.is_finite() && total > 0.0) {
        return Err(format!("fio reports {total} {direction} bytes/s: it moved no data"));
    }
    Ok(total)
}

/// Runs fio with `args` and returns the bytes/s of `op`.
fn run_fio(args: &[String], op: IoOp) -> Result<f64, BenchError> {
    let command = command_line(args);
    let output = Command::new(FIO)
        .args(args)
        .output()
        .map_err(|e| BenchError::Fio(format!("cannot run `{command}`: {e}. {INSTALL_HINT}")))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(BenchError::Fio(format!(
            "`{command}` failed ({}): {}",
            output.status,
            stderr.trim()
        )));
    }
    parse_bytes_per_s(&String::from_utf8_lossy(&output.stdout), op).map_err(|detail| {
        BenchError::Fio(format!("`{command}`: {detail}; fio's stderr: {}", stderr.trim()))
    })
}

/// The measurement file's size as the kernel reports it now.
fn file_size(path: &Path) -> Result<u64, BenchError> {
    let file = Storage::Os.open(path, &OpenOptions::new(AccessMethod::Syscall).read_only(true))?;
    Ok(file.len())
}

/// Runs `spec` with tierkv and fio alternately and compares medians.
pub fn compare(
    target: &Target,
    spec: &PointSpec,
    config: &DeviceConfig,
    progress: &ProgressBar,
) -> Result<FioComparison, BenchError> {
    let engine = engine_for(spec)
        .ok_or_else(|| BenchError::Fio(format!("fio cannot run {spec} like tierkv does")))?;
    if config.fio_repeats == 0 {
        return Err(BenchError::Config("fio comparisons need at least one repeat".into()));
    }
    let unit = target.unit_bytes(spec);
    if unit != spec.transfer_bytes {
        // The file's O_DIRECT alignment is larger than the transfer: tierkv moves `unit`
        // bytes per operation (read-modify-write for writes), which fio cannot mirror.
        return Err(BenchError::Fio(format!(
            "{spec}: the file's O_DIRECT alignment needs {unit} B per operation; fio cannot \
             run a smaller transfer like tierkv"
        )));
    }
    let region = target.region_bytes(spec);
    let jobs_end = region.checked_mul(spec.threads as u64);
    if region == 0 || jobs_end.is_none_or(|end| end > target.file_bytes()) {
        return Err(BenchError::Fio(format!(
            "{spec}: {} regions of {region} B do not fit in the {} B file",
            spec.threads,
            target.file_bytes()
        )));
    }
    let args = job_args(spec, target.path(), region, config.duration)?;
    let mut ours_bytes_per_s = Vec::with_capacity(config.fio_repeats);
    let mut fio_bytes_per_s = Vec::with_capacity(config.fio_repeats);
    for repeat in 0..config.fio_repeats {
        // The order alternates (tierkv then fio, fio then tierkv, ...), so that neither tool
        // always runs second, after the other has warmed or dirtied a host-cached disk.
        // run_point prepares the cache itself (for `direct`: dirty pages written back and
        // dropped); fio gets the same preparation before it runs.
        let mut run_ours = || -> Result<(), BenchError> {
            ours_bytes_per_s.push(target.run_point(spec, config.duration)?.bytes_per_s);
            Ok(())
        };
        let mut run_theirs = || -> Result<(), BenchError> {
            target.prepare_cache(spec)?;
            fio_bytes_per_s.push(run_fio(&args, spec.op)?);
            Ok(())
        };
        if repeat % 2 == 0 {
            run_ours()?;
            run_theirs()?;
        } else {
            run_theirs()?;
            run_ours()?;
        }
        let size = file_size(target.path())?;
        if size != target.file_bytes() {
            return Err(BenchError::Fio(format!(
                "`{}` changed the size of {} from {} B to {size} B",
                command_line(&args),
                target.path().display(),
                target.file_bytes()
            )));
        }
        progress.inc(1);
    }
    let ours_median_bytes_per_s = median(&ours_bytes_per_s);
    let fio_median_bytes_per_s = median(&fio_bytes_per_s);
    Ok(FioComparison {
        spec: *spec,
        fio_engine: engine.to_string(),
        ours_bytes_per_s,
        fio_bytes_per_s,
        ours_median_bytes_per_s,
        fio_median_bytes_per_s,
        ratio: ours_median_bytes_per_s / fio_median_bytes_per_s,
        fio_command: command_line(&args),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::CacheState;

    /// fio 3.33's `--output-format=json` for a 2-thread 4 KiB psync randwrite with
    /// group_reporting, trimmed to the fields around the ones parsed (latency blocks removed).
    const FIO_3_33_RANDWRITE: &str = r#"{
  "fio version" : "fio-3.33",
  "timestamp" : 1795272850,
  "timestamp_ms" : 1795272850388,
  "time" : "Sat Nov 21 14:54:10 2026",
  "jobs" : [
    {
      "jobname" : "tierkv",
      "groupid" : 0,
      "error" : 0,
      "eta" : 2147483647,
      "elapsed" : 1,
      "job options" : {
        "name" : "tierkv",
        "ioengine" : "psync",
        "rw" : "randwrite",
        "bs" : "4096",
        "numjobs" : "2",
        "size" : "33554432",
        "offset_increment" : "33554432",
        "runtime" : "200ms"
      },
      "read" : {
        "io_bytes" : 0,
        "io_kbytes" : 0,
        "bw_bytes" : 0,
        "bw" : 0,
        "iops" : 0.000000,
        "runtime" : 0,
        "total_ios" : 0,
        "short_ios" : 0,
        "drop_ios" : 0
      },
      "write" : {
        "io_bytes" : 565850112,
        "io_kbytes" : 552588,
        "bw_bytes" : 2815174686,
        "bw" : 2749194,
        "iops" : 687298.507463,
        "runtime" : 201,
        "total_ios" : 138147,
        "short_ios" : 0,
        "drop_ios" : 0
      },
      "trim" : {
        "io_bytes" : 0,
        "io_kbytes" : 0,
        "bw_bytes" : 0,
        "bw" : 0,
        "iops" : 0.000000,
        "runtime" : 0,
        "total_ios" : 0,
        "short_ios" : 0,
        "drop_ios" : 0
      },
      "job_runtime" : 400,
      "usr_cpu" : 11.750000,
      "sys_cpu" : 80.000000
    }
  ],
  "disk_util" : [
    {
      "name" : "vda",
      "read_ios" : 0,
      "write_ios" : 0,
      "util" : 0.000000
    }
  ]
}
"#;

    fn spec(method: AccessMethod, op: IoOp, pattern: Pattern, transfer_bytes: u64) -> PointSpec {
        PointSpec { method, op, pattern, cache: CacheState::Warm, transfer_bytes, threads: 1 }
    }

    fn value<'a>(args: &'a [String], key: &str) -> Option<&'a str> {
        let prefix = format!("--{key}=");
        let mut values = args.iter().filter_map(|arg| arg.strip_prefix(prefix.as_str()));
        let found = values.next();
        assert!(values.next().is_none(), "--{key} given twice in {args:?}");
        found
    }

    #[test]
    fn engines_follow_the_method() {
        let seq_read = |method| spec(method, IoOp::Read, Pattern::Seq, 4096);
        assert_eq!(engine_for(&seq_read(AccessMethod::Syscall)), Some("psync"));
        assert_eq!(engine_for(&seq_read(AccessMethod::Direct)), Some("libaio direct=1 iodepth=1"));
        assert_eq!(engine_for(&seq_read(AccessMethod::Mmap)), Some("mmap"));
        assert_eq!(engine_for(&seq_read(AccessMethod::Pmem)), None);
        // Below the O_DIRECT alignment tierkv does a read-modify-write; fio cannot.
        assert_eq!(engine_for(&spec(AccessMethod::Direct, IoOp::Write, Pattern::Seq, 512)), None);
        assert_eq!(
            engine_for(&spec(AccessMethod::Syscall, IoOp::Write, Pattern::Seq, 128)),
            Some("psync")
        );
        // fio 3.33's mmap engine maps every job from offset 0.
        let two_threads = PointSpec { threads: 2, ..seq_read(AccessMethod::Mmap) };
        assert_eq!(engine_for(&two_threads), None);
        assert_eq!(
            engine_for(&PointSpec { threads: 2, ..seq_read(AccessMethod::Syscall) }),
            Some("psync")
        );
    }

    #[test]
    fn job_arguments_mirror_the_point() {
        let path = Path::new("/data/tierkv-device.dat");
        let cases = [
            (AccessMethod::Syscall, IoOp::Read, Pattern::Seq, "read", "psync", "0"),
            (AccessMethod::Syscall, IoOp::Write, Pattern::Rand, "randwrite", "psync", "0"),
            (AccessMethod::Direct, IoOp::Read, Pattern::Rand, "randread", "libaio", "1"),
            (AccessMethod::Direct, IoOp::Write, Pattern::Seq, "write", "libaio", "1"),
            (AccessMethod::Mmap, IoOp::Read, Pattern::Rand, "randread", "mmap", "0"),
            (AccessMethod::Mmap, IoOp::Write, Pattern::Seq, "write", "mmap", "0"),
        ];
        for (method, op, pattern, rw, engine, direct) in cases {
            let point = PointSpec { threads: 4, ..spec(method, op, pattern, 65536) };
            let args = job_args(&point, path, 256 << 20, Duration::from_millis(1500))
                .expect("a runnable point");
            let expect = |key: &str, wanted: &str| {
                assert_eq!(value(&args, key), Some(wanted), "--{key} for {point}: {args:?}");
            };
            expect("filename", "/data/tierkv-device.dat");
            expect("ioengine", engine);
            expect("direct", direct);
            expect("rw", rw);
            expect("bs", "65536");
            expect("numjobs", "4");
            expect("size", "268435456");
            expect("offset", "0");
            expect("offset_increment", "268435456");
            expect("time_based", "1");
            expect("runtime", "1500ms");
            expect("norandommap", "1");
            expect("randrepeat", "0");
            expect("invalidate", "0");
            expect("fadvise_hint", "0");
            expect("allow_file_create", "0");
            expect("group_reporting", "1");
            expect("output-format", "json");
            assert!(args.iter().any(|arg| arg == "--thread"), "threads, not processes");
            assert_eq!(value(&args, "iodepth"), (method == AccessMethod::Direct).then_some("1"));
            for absent in ["fsync", "fdatasync", "end_fsync", "fsync_on_close", "sync", "overwrite"]
            {
                assert_eq!(value(&args, absent), None, "{point} must not pass --{absent}");
            }
        }
        let pmem = spec(AccessMethod::Pmem, IoOp::Write, Pattern::Seq, 4096);
        assert!(matches!(
            job_args(&pmem, path, 1 << 20, Duration::from_secs(1)),
            Err(BenchError::Fio(_))
        ));
        let ragged = spec(AccessMethod::Syscall, IoOp::Read, Pattern::Seq, 4096);
        assert!(job_args(&ragged, path, 4096 * 3 + 1, Duration::from_secs(1)).is_err());
        assert!(job_args(&ragged, path, 0, Duration::from_secs(1)).is_err());
    }

    #[test]
    fn colons_in_paths_are_escaped_and_commands_quoted() {
        let point = spec(AccessMethod::Syscall, IoOp::Read, Pattern::Seq, 4096);
        let args = job_args(&point, Path::new("/mnt/a:b c/f"), 1 << 20, Duration::from_secs(2))
            .expect("a runnable point");
        assert_eq!(value(&args, "filename"), Some("/mnt/a\\:b c/f"));
        assert_eq!(value(&args, "runtime"), Some("2000ms"));
        let command = command_line(&args);
        assert!(command.starts_with("fio --name=tierkv '--filename=/mnt/a\\:b c/f' "), "{command}");
    }

    #[test]
    fn fio_json_is_parsed() {
        let bytes_per_s = parse_bytes_per_s(FIO_3_33_RANDWRITE, IoOp::Write);
        assert_eq!(bytes_per_s, Ok(2_815_174_686.0));
        // The read side of a write job moved nothing: that is an error, not a zero figure.
        assert!(parse_bytes_per_s(FIO_3_33_RANDWRITE, IoOp::Read).is_err());
        // Leading non-JSON text (warnings some fio versions print on stdout) is skipped.
        let noisy = format!(
            "fio: note: both iodepth >= 1 and synchronous I/O engine\n{FIO_3_33_RANDWRITE}"
        );
        assert_eq!(parse_bytes_per_s(&noisy, IoOp::Write), Ok(2_815_174_686.0));
        // Without group_reporting each job has an entry; they are summed.
        let two_jobs = r#"{"jobs": [{"error": 0, "read": {"bw_bytes": 100}},
                                    {"error": 0, "read": {"bw_bytes": 250}}]}"#;
        assert_eq!(parse_bytes_per_s(two_jobs, IoOp::Read), Ok(350.0));
        assert!(parse_bytes_per_s(
            r#"{"jobs": [{"error": 5, "read": {"bw_bytes": 1}}]}"#,
            IoOp::Read
        )
        .is_err());
        assert!(parse_bytes_per_s("", IoOp::Read).is_err());
        assert!(parse_bytes_per_s("fio: oops {", IoOp::Read).is_err());
        assert!(parse_bytes_per_s(r#"{"jobs": []}"#, IoOp::Read).is_err());
    }

    #[test]
    fn compare_runs_both_tools_on_the_same_file() {
        let status = detect();
        let FioStatus::Available { version } = status else {
            eprintln!(
                "note: fio is not installed; the fio comparison is not exercised ({status:?})"
            );
            let FioStatus::Missing { hint } = status else { unreachable!() };
            assert!(hint.contains("apt-get"), "{hint}");
            return;
        };
        assert!(version.starts_with("fio"), "{version}");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut config = super::DeviceConfig::new(dir.path());
        config.methods = vec![AccessMethod::Syscall, AccessMethod::Direct, AccessMethod::Mmap];
        config.transfer_sizes = vec![4096];
        config.threads = vec![1];
        config.file_bytes = 8 << 20;
        config.duration = Duration::from_millis(200);
        config.fio_repeats = 2;
        config.progress = false;
        let target = Target::prepare(&config).expect("the measurement file");
        let point = spec(AccessMethod::Syscall, IoOp::Read, Pattern::Seq, 4096);
        let progress = ProgressBar::hidden();
        let comparison = compare(&target, &point, &config, &progress).expect("a comparison");
        assert_eq!(progress.position(), 2);
        assert_eq!(comparison.spec, point);
        assert_eq!(comparison.fio_engine, "psync");
        assert_eq!(comparison.ours_bytes_per_s.len(), 2);
        assert_eq!(comparison.fio_bytes_per_s.len(), 2);
        for figure in [comparison.ours_median_bytes_per_s, comparison.fio_median_bytes_per_s] {
            assert!(figure.is_finite() && figure > 0.0, "{comparison:?}");
        }
        assert!(
            comparison.fio_command.starts_with("fio --name=tierkv"),
            "{}",
            comparison.fio_command
        );
        assert_eq!(file_size(target.path()).expect("the file's size"), 8 << 20);
        // O_DIRECT (libaio) writes, where the file system accepts O_DIRECT.
        let direct = spec(AccessMethod::Direct, IoOp::Write, Pattern::Rand, 4096);
        match target.skip_reason(&direct) {
            Some(reason) => eprintln!("note: no direct comparison here: {reason}"),
            None => {
                let config = DeviceConfig { fio_repeats: 1, ..config.clone() };
                let comparison = compare(&target, &direct, &config, &progress).expect("direct");
                assert_eq!(comparison.fio_engine, "libaio direct=1 iodepth=1");
                assert!(comparison.fio_median_bytes_per_s > 0.0, "{comparison:?}");
                assert_eq!(file_size(target.path()).expect("the file's size"), 8 << 20);
            }
        }
        target.finish(&config).expect("cleanup");
    }
}
