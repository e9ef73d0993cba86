//! Text output of the device lab: the aligned table `tierkv bench device` prints, the fio
//! comparison table, and the CSV file.
//!
//! Invariants:
//! - The point table has exactly one header line and one line per point, in run order (the
//!   order `DeviceConfig::points` groups them in: method, op, pattern, cache, threads, size).
//! - MB/s means 10^6 bytes per second everywhere (fio and the seeds' figures use the same).
//! - Every CSV row has as many fields as the header; `None` is an empty cell, never `0`.
//! - Numbers in the CSV are written in full (Rust's shortest round-trip `Display`), so a
//!   reader gets back the exact value the JSON holds.
//!
//! Must never: drop or reorder a point, hide a cold point's residency (a "cold" figure is only
//! as good as its eviction), or panic on odd values (NaN, infinity, zero elapsed time).

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use crate::machine::{EvictionMethod, EvictionReport};

use super::{format_bytes, BenchError, DeviceReport, IoOp, PointResult};

/// Fio comparisons whose ratio lies in this closed interval count as agreeing.
pub const FIO_AGREEMENT_RATIO_MIN: f64 = 0.85;
/// Upper end of the agreement interval.
pub const FIO_AGREEMENT_RATIO_MAX: f64 = 1.15;

/// The CSV columns, in order: every field of `PointResult`, flattened.
const CSV_HEADER: [&str; 21] = [
    "method",
    "op",
    "pattern",
    "cache",
    "transfer_bytes",
    "threads",
    "bytes_per_s",
    "ops_per_s",
    "latency_ns_p50",
    "latency_ns_p99",
    "latency_ns_p999",
    "latency_ns_max",
    "latency_samples",
    "ops",
    "elapsed_s",
    "cpu_s",
    "eviction_method",
    "resident_before",
    "resident_after",
    "direct_block_bytes",
    "pmem_mode",
];

/// Prints one line per point.
///
/// Columns: method, op, pattern, cache, transfer size, threads, MB/s, kops/s, latency p50,
/// p99, p99.9 and max in human units, CPU seconds, and notes (eviction and residency of cold
/// points, O_DIRECT block expansion, pmem mode).
pub fn print_table(report: &DeviceReport, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<7} {:<5} {:<7} {:<5} {:>8} {:>4} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6}  notes",
        "method",
        "op",
        "pattern",
        "cache",
        "transfer",
        "thr",
        "MB/s",
        "kops/s",
        "p50",
        "p99",
        "p99.9",
        "max",
        "cpu s",
    )?;
    for point in &report.points {
        writeln!(out, "{}", table_line(point))?;
    }
    Ok(())
}

/// One row of the point table, without the newline (trailing blanks trimmed when there are no
/// notes, so the output diffs cleanly).
fn table_line(point: &PointResult) -> String {
    let spec = &point.spec;
    let line = format!(
        "{:<7} {:<5} {:<7} {:<5} {:>8} {:>4} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6}  {}",
        spec.method.name(),
        spec.op.name(),
        spec.pattern.name(),
        spec.cache.name(),
        format_bytes(spec.transfer_bytes),
        spec.threads,
        format!("{:.1}", point.bytes_per_s / 1e6),
        format!("{:.1}", point.ops_per_s / 1e3),
        format_latency_ns(point.latency_ns_p50),
        format_latency_ns(point.latency_ns_p99),
        format_latency_ns(point.latency_ns_p999),
        format_latency_ns(point.latency_ns_max),
        format!("{:.2}", point.cpu_s),
        notes(point),
    );
    line.trim_end().to_string()
}

/// The notes column: what a reader needs to trust or interpret the figures of this point.
fn notes(point: &PointResult) -> String {
    let mut parts: Vec<String> = Vec::new();
    if let Some(eviction) = &point.eviction {
        parts.push(eviction_note(eviction));
    }
    if let Some(block_bytes) = point.direct_block_bytes {
        // A sub-block O_DIRECT write cannot be issued as such: it is a read-modify-write of the
        // aligned block, so the figure is the RMW's, not a small write's.
        let verb = match point.spec.op {
            IoOp::Read => "reads",
            IoOp::Write => "RMW",
        };
        parts.push(format!("{verb} {} blocks", format_bytes(block_bytes)));
    }
    if let Some(mode) = point.pmem_mode {
        parts.push(format!("mode {}", mode.name()));
    }
    parts.join("; ")
}

/// "fadvise, 0.0% resident": how the file was evicted and what stayed in the page cache.
fn eviction_note(eviction: &EvictionReport) -> String {
    format!(
        "{}, {:.1}% resident",
        eviction_method_name(eviction.method),
        eviction.resident_after * 100.0
    )
}

/// The names used in the table and the CSV (the JSON's snake_case names).
pub(crate) fn eviction_method_name(method: EvictionMethod) -> &'static str {
    match method {
        EvictionMethod::Fadvise => "fadvise",
        EvictionMethod::DropCaches => "drop_caches",
        EvictionMethod::NotApplicable => "not_applicable",
    }
}

/// A latency in the unit that keeps it short: `30 ns`, `1.2 µs`, `123 µs`, `3.4 ms`, `2.50 s`.
/// One decimal below 100 of a unit, none from 100 up, so a column stays at most 8 wide.
pub(crate) fn format_latency_ns(ns: u64) -> String {
    if ns < 1_000 {
        return format!("{ns} ns");
    }
    const UNITS: [(&str, f64); 2] = [("µs", 1e3), ("ms", 1e6)];
    let ns_f64 = ns as f64;
    for (unit, scale) in UNITS {
        let value = ns_f64 / scale;
        // Decide on the rounded text, so 999.96 µs becomes "1.0 ms" rather than "1000 µs".
        let text = if value < 99.95 { format!("{value:.1}") } else { format!("{value:.0}") };
        if text.parse::<f64>().is_ok_and(|shown| shown < 1000.0) {
            return format!("{text} {unit}");
        }
    }
    format!("{:.2} s", ns_f64 / 1e9)
}

/// MB/s (10^6 bytes per second) with one decimal.
fn format_mb_per_s(bytes_per_s: f64) -> String {
    format!("{:.1}", bytes_per_s / 1e6)
}

/// MB/s without decimals from 100 up, for the compact per-repeat lists.
fn format_mb_per_s_compact(bytes_per_s: f64) -> String {
    let mb_per_s = bytes_per_s / 1e6;
    if mb_per_s.abs() >= 100.0 {
        format!("{mb_per_s:.0}")
    } else {
        format!("{mb_per_s:.1}")
    }
}

/// True when a comparison's ratio lies in `[FIO_AGREEMENT_RATIO_MIN, FIO_AGREEMENT_RATIO_MAX]`
/// (NaN, from a fio median of zero over zero, never agrees).
pub(crate) fn fio_agrees(ratio: f64) -> bool {
    (FIO_AGREEMENT_RATIO_MIN..=FIO_AGREEMENT_RATIO_MAX).contains(&ratio)
}

/// Prints one line per fio comparison and a summary line.
///
/// Columns: the point, fio's engine, tierkv's and fio's median MB/s, their ratio, and every
/// repeat's MB/s (tierkv's, then fio's) so the spread behind each median stays visible.
pub fn print_fio_table(report: &DeviceReport, out: &mut dyn Write) -> std::io::Result<()> {
    let point_width =
        report.fio.iter().map(|c| c.spec.to_string().chars().count()).max().unwrap_or(0).max(5);
    let engine_width =
        report.fio.iter().map(|c| c.fio_engine.chars().count()).max().unwrap_or(0).max(6);
    writeln!(
        out,
        "{:<point_width$}  {:<engine_width$} {:>11} {:>10} {:>7}  repeats MB/s (tierkv | fio)",
        "point", "engine", "tierkv MB/s", "fio MB/s", "ratio",
    )?;
    for comparison in &report.fio {
        let repeats = |values: &[f64]| {
            values.iter().map(|&v| format_mb_per_s_compact(v)).collect::<Vec<_>>().join("/")
        };
        writeln!(
            out,
            "{:<point_width$}  {:<engine_width$} {:>11} {:>10} {:>7.3}  {} | {}",
            comparison.spec.to_string(),
            comparison.fio_engine,
            format_mb_per_s(comparison.ours_median_bytes_per_s),
            format_mb_per_s(comparison.fio_median_bytes_per_s),
            comparison.ratio,
            repeats(&comparison.ours_bytes_per_s),
            repeats(&comparison.fio_bytes_per_s),
        )?;
    }
    let agreeing = report.fio.iter().filter(|c| fio_agrees(c.ratio)).count();
    writeln!(
        out,
        "fio agreement: {agreeing} of {} comparisons have tierkv/fio in \
         [{FIO_AGREEMENT_RATIO_MIN:.2}, {FIO_AGREEMENT_RATIO_MAX:.2}]",
        report.fio.len(),
    )
}

/// Writes one CSV row per point, after a header naming every field of `PointResult`.
pub fn write_csv(report: &DeviceReport, path: &Path) -> Result<(), BenchError> {
    let mut text = csv_row(CSV_HEADER.iter().map(|name| name.to_string()));
    for point in &report.points {
        let row = csv_fields(point);
        assert_eq!(row.len(), CSV_HEADER.len(), "a CSV row must match the header");
        text.push_str(&csv_row(row.into_iter()));
    }
    std::fs::write(path, text)
        .map_err(|source| BenchError::Output { path: path.to_path_buf(), source })
}

/// The fields of one point, in `CSV_HEADER` order.
fn csv_fields(point: &PointResult) -> Vec<String> {
    fn optional<T: ToString>(value: Option<T>) -> String {
        value.map(|v| v.to_string()).unwrap_or_default()
    }
    let spec = &point.spec;
    vec![
        spec.method.name().to_string(),
        spec.op.name().to_string(),
        spec.pattern.name().to_string(),
        spec.cache.name().to_string(),
        spec.transfer_bytes.to_string(),
        spec.threads.to_string(),
        point.bytes_per_s.to_string(),
        point.ops_per_s.to_string(),
        point.latency_ns_p50.to_string(),
        point.latency_ns_p99.to_string(),
        point.latency_ns_p999.to_string(),
        point.latency_ns_max.to_string(),
        point.latency_samples.to_string(),
        point.ops.to_string(),
        point.elapsed_s.to_string(),
        point.cpu_s.to_string(),
        optional(point.eviction.map(|e| eviction_method_name(e.method))),
        optional(point.eviction.map(|e| e.resident_before)),
        optional(point.eviction.map(|e| e.resident_after)),
        optional(point.direct_block_bytes),
        optional(point.pmem_mode.map(|mode| mode.name())),
    ]
}

/// Joins fields into one CSV line (RFC 4180 quoting for the rare field that needs it).
fn csv_row(fields: impl Iterator<Item = String>) -> String {
    let mut line = String::new();
    for (index, field) in fields.enumerate() {
        if index > 0 {
            line.push(',');
        }
        if field.contains([',', '"', '\n', '\r']) {
            let _ = write!(line, "\"{}\"", field.replace('"', "\"\""));
        } else {
            line.push_str(&field);
        }
    }
    line.push('\n');
    line
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::machine::{EvictionMethod, EvictionReport};
    use tierkv_io::{AccessMethod, PmemMode};

    use super::*;
    use crate::device::{
        CacheState, FileInfo, FioComparison, Machine, Pattern, PointResult, PointSpec,
    };

    /// A point with plausible figures: `mb_per_s` at `transfer_bytes` per operation.
    pub(crate) fn point(
        method: AccessMethod,
        op: IoOp,
        cache: CacheState,
        transfer_bytes: u64,
        threads: usize,
        mb_per_s: f64,
    ) -> PointResult {
        let bytes_per_s = mb_per_s * 1e6;
        PointResult {
            spec: PointSpec { method, op, pattern: Pattern::Seq, cache, transfer_bytes, threads },
            bytes_per_s,
            ops_per_s: bytes_per_s / transfer_bytes as f64,
            latency_ns_p50: 30,
            latency_ns_p99: 1_234,
            latency_ns_p999: 3_400_000,
            latency_ns_max: 2_500_000_000,
            latency_samples: 1000,
            ops: 16_000,
            elapsed_s: 1.0,
            cpu_s: 0.5,
            eviction: (cache == CacheState::Cold).then_some(EvictionReport {
                method: EvictionMethod::Fadvise,
                resident_before: 1.0,
                resident_after: 0.0,
            }),
            direct_block_bytes: None,
            pmem_mode: (method == AccessMethod::Pmem).then_some(PmemMode::Msync),
        }
    }

    /// A report around `points`, on a made-up machine.
    pub(crate) fn report(points: Vec<PointResult>) -> DeviceReport {
        DeviceReport {
            command: "tierkv bench device /tmp".to_string(),
            machine: Machine {
                cpu_model: "AMD EPYC 9654 96-Core Processor".to_string(),
                cores: 16,
                memory_bytes: 128 << 30,
                kernel: "6.8.0".to_string(),
                flush: "clwb".to_string(),
                clwb: true,
                clflushopt: true,
                clflush: true,
                avx512f: true,
            },
            file: FileInfo {
                path: "/tmp/tierkv-device.dat".to_string(),
                size_bytes: 1 << 30,
                fs_type: "ext4".to_string(),
                dax: false,
                pmem_mode: PmemMode::Msync,
                direct_alignment_bytes: Some(512),
            },
            duration_per_point_s: 1.0,
            points,
            fio: Vec::new(),
            skipped: Vec::new(),
        }
    }

    fn table(report: &DeviceReport) -> String {
        let mut out = Vec::new();
        print_table(report, &mut out).expect("writing to a Vec");
        String::from_utf8(out).expect("the table is UTF-8")
    }

    #[test]
    fn table_has_a_line_per_point_and_notes() {
        let mut rmw = point(AccessMethod::Direct, IoOp::Write, CacheState::Warm, 128, 1, 2.5);
        rmw.direct_block_bytes = Some(512);
        let mut small_read = point(AccessMethod::Direct, IoOp::Read, CacheState::Warm, 128, 1, 3.0);
        small_read.direct_block_bytes = Some(512);
        let points = vec![
            point(AccessMethod::Syscall, IoOp::Read, CacheState::Warm, 4096, 1, 1234.5),
            point(AccessMethod::Syscall, IoOp::Read, CacheState::Cold, 4096, 1, 321.0),
            small_read,
            rmw,
            point(AccessMethod::Pmem, IoOp::Write, CacheState::Warm, 1 << 20, 16, 6400.0),
        ];
        let text = table(&report(points));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6, "{text}");
        assert!(lines[0].starts_with("method"), "{text}");
        assert!(lines[0].contains("MB/s") && lines[0].contains("p99.9"), "{text}");
        assert!(lines[1].contains("1234.5") && lines[1].contains("4 KiB"), "{text}");
        assert!(lines[2].ends_with("fadvise, 0.0% resident"), "{text}");
        assert!(lines[3].ends_with("reads 512 B blocks"), "{text}");
        assert!(lines[4].ends_with("RMW 512 B blocks"), "{text}");
        assert!(lines[5].ends_with("mode msync") && lines[5].contains("1 MiB"), "{text}");
        // Human latency units: 30 ns, 1.2 µs, 3.4 ms, 2.50 s.
        for unit in ["30 ns", "1.2 µs", "3.4 ms", "2.50 s"] {
            assert!(lines[1].contains(unit), "{unit} missing: {text}");
        }
        for line in &lines {
            assert!(line.chars().count() <= 140, "too wide: {line}");
        }
        // Columns line up: every MB/s value ends where the header's "MB/s" does.
        let header_mb = lines[0].find("MB/s").expect("header") + "MB/s".len();
        for line in &lines[1..] {
            let before: String = line.chars().take(header_mb).collect();
            assert!(before.ends_with(|c: char| c.is_ascii_digit()), "misaligned: {line}");
        }
    }

    #[test]
    fn latencies_pick_their_unit() {
        assert_eq!(format_latency_ns(0), "0 ns");
        assert_eq!(format_latency_ns(999), "999 ns");
        assert_eq!(format_latency_ns(1_000), "1.0 µs");
        assert_eq!(format_latency_ns(1_234), "1.2 µs");
        assert_eq!(format_latency_ns(123_456), "123 µs");
        assert_eq!(format_latency_ns(999_960), "1.0 ms");
        assert_eq!(format_latency_ns(3_400_000), "3.4 ms");
        assert_eq!(format_latency_ns(999_999_999), "1.00 s");
        assert_eq!(format_latency_ns(u64::MAX), "18446744073.71 s");
    }

    #[test]
    fn fio_table_counts_agreement() {
        let spec = point(AccessMethod::Syscall, IoOp::Read, CacheState::Warm, 4096, 1, 1.0).spec;
        let comparison = |ratio: f64| FioComparison {
            spec,
            fio_engine: "psync".to_string(),
            ours_bytes_per_s: vec![1.0e9, 1.1e9, 0.9e9],
            fio_bytes_per_s: vec![1.0e9 / ratio; 3],
            ours_median_bytes_per_s: 1.0e9,
            fio_median_bytes_per_s: 1.0e9 / ratio,
            ratio,
            fio_command: "fio --name=x".to_string(),
        };
        let mut report = report(Vec::new());
        report.fio = vec![comparison(1.0), comparison(0.5), comparison(1.15), comparison(f64::NAN)];
        let mut out = Vec::new();
        print_fio_table(&report, &mut out).expect("writing to a Vec");
        let text = String::from_utf8(out).expect("UTF-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6, "{text}");
        assert!(lines[1].contains("1000.0") && lines[1].contains("1.000"), "{text}");
        assert!(lines[1].contains("1000/1100/900 | 1000/1000/1000"), "{text}");
        assert!(lines[2].contains("0.500") && lines[2].contains("2000.0"), "{text}");
        assert!(lines[5].starts_with("fio agreement: 2 of 4"), "{text}");
    }

    #[test]
    fn csv_rows_match_the_header() {
        let mut rmw = point(AccessMethod::Direct, IoOp::Write, CacheState::Warm, 128, 1, 2.5);
        rmw.direct_block_bytes = Some(512);
        let points = vec![
            point(AccessMethod::Syscall, IoOp::Read, CacheState::Cold, 4096, 2, 2.0),
            rmw,
            point(AccessMethod::Pmem, IoOp::Write, CacheState::Warm, 1 << 20, 4, 6400.0),
        ];
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("points.csv");
        write_csv(&report(points), &path).expect("write csv");
        let text = std::fs::read_to_string(&path).expect("read back");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        let header: Vec<&str> = lines[0].split(',').collect();
        assert_eq!(header.len(), 21);
        assert_eq!(header[0], "method");
        assert_eq!(header[20], "pmem_mode");
        for line in &lines[1..] {
            assert_eq!(line.split(',').count(), header.len(), "{line}");
        }
        // Round numbers are written as such, and None is an empty cell.
        assert!(
            lines[1].starts_with("syscall,read,seq,cold,4096,2,2000000,488.28125,30,"),
            "{text}"
        );
        assert!(lines[1].ends_with(",fadvise,1,0,,"), "{text}");
        assert!(lines[2].ends_with(",,,,512,"), "{text}");
        assert!(lines[3].contains(",6400000000,") && lines[3].ends_with(",msync"), "{text}");
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        let row = csv_row(["a".to_string(), "b,c".to_string(), "d\"e".to_string()].into_iter());
        assert_eq!(row, "a,\"b,c\",\"d\"\"e\"\n");
    }

    #[test]
    fn csv_errors_name_the_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("missing-dir").join("points.csv");
        match write_csv(&report(Vec::new()), &path) {
            Err(BenchError::Output { path: failed, .. }) => assert_eq!(failed, path),
            other => panic!("expected an output error, got {other:?}"),
        }
    }
}
