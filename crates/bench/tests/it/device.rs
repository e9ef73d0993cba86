//! The whole device lab with tiny parameters, so it cannot rot: every method, op, pattern,
//! cache state, two transfer sizes and two thread counts, on a disk directory and on
//! /dev/shm, through JSON, CSV and plots. Figures are checked for being measured (positive,
//! finite, consistent), never for being fast.

use std::collections::BTreeSet;
use std::time::Duration;

use tierkv_bench::device::{self, CacheState, DeviceConfig, DeviceReport, IoOp, Pattern};
use tierkv_io::{AccessMethod, PmemMode};

fn tiny(dir: &std::path::Path) -> DeviceConfig {
    let mut config = DeviceConfig::new(dir);
    config.transfer_sizes = vec![128, 4096];
    config.threads = vec![1, 2];
    config.file_bytes = 1 << 20;
    config.duration = Duration::from_millis(15);
    config.progress = false;
    config.command = "device-lab test".into();
    config
}

fn check_report(report: &DeviceReport, config: &DeviceConfig, label: &str) {
    let asked = config.points();
    assert_eq!(
        report.points.len() + report.skipped.len(),
        asked.len(),
        "{label}: every point accounted for"
    );
    let skipped: BTreeSet<_> = report.skipped.iter().map(|(spec, _)| *spec).collect();
    for (spec, reason) in &report.skipped {
        assert!(!reason.is_empty());
        assert_eq!(
            (spec.method, spec.cache),
            (AccessMethod::Direct, CacheState::Cold),
            "{label}: only cold direct points are skipped here, got {spec}: {reason}"
        );
    }
    for spec in &asked {
        let ran = report.points.iter().any(|point| point.spec == *spec);
        assert!(ran != skipped.contains(spec), "{label}: {spec} both ran and skipped, or neither");
    }
    for point in &report.points {
        let what = format!("{label}: {}", point.spec);
        assert!(point.ops > 0, "{what}: no operation completed");
        assert!(point.bytes_per_s.is_finite() && point.bytes_per_s > 0.0, "{what}");
        let expected_bytes_per_s = (point.ops * point.spec.transfer_bytes) as f64 / point.elapsed_s;
        assert!((point.bytes_per_s - expected_bytes_per_s).abs() <= 1e-6 * expected_bytes_per_s);
        assert!(point.latency_samples > 0 && point.latency_samples <= point.ops, "{what}");
        assert!(point.latency_ns_p50 <= point.latency_ns_p99, "{what}");
        assert!(point.latency_ns_p99 <= point.latency_ns_p999, "{what}");
        assert!(point.latency_ns_p999 <= point.latency_ns_max, "{what}");
        assert!(point.cpu_s >= 0.0 && point.elapsed_s > 0.0, "{what}");
        assert_eq!(point.spec.cache == CacheState::Cold, point.eviction.is_some(), "{what}");
        assert_eq!(point.spec.method == AccessMethod::Pmem, point.pmem_mode.is_some(), "{what}");
        let small_direct = point.spec.method == AccessMethod::Direct
            && point.spec.transfer_bytes < report.file.direct_alignment_bytes.unwrap_or(0);
        assert_eq!(small_direct, point.direct_block_bytes.is_some(), "{what}");
    }
}

fn run_everything(dir: &std::path::Path, label: &str) -> DeviceReport {
    let config = tiny(dir);
    let report = device::run(&config).unwrap_or_else(|e| panic!("{label}: {e}"));
    check_report(&report, &config, label);
    assert_eq!(report.command, "device-lab test");
    assert!(report.machine.cores >= 1 && report.machine.memory_bytes > 0);
    assert!(
        !std::fs::read_dir(dir).expect("dir").any(|entry| entry
            .map(|entry| entry.file_name() == "tierkv-device.dat")
            .unwrap_or(false)),
        "{label}: the measurement file is removed"
    );
    // Every output format, and the JSON reads back to the same report.
    let out = tempfile::tempdir().expect("out dir");
    let json = out.path().join("device.json");
    device::write_json(&report, &json).expect("json");
    let back: DeviceReport =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("read json")).expect("parse");
    assert!(back == report, "{label}: the JSON does not read back to the same report");
    let csv = out.path().join("device.csv");
    device::output::write_csv(&report, &csv).expect("csv");
    let rows = std::fs::read_to_string(&csv).expect("read csv").lines().count();
    assert_eq!(rows, report.points.len() + 1, "{label}: a CSV header and one row per point");
    let mut table = Vec::new();
    device::output::print_table(&report, &mut table).expect("table");
    let table = String::from_utf8(table).expect("utf-8 table");
    assert!(table.lines().count() > report.points.len(), "{label}: a line per point");
    let plots = device::plot::write_plots(&report, &out.path().join("plots")).expect("plots");
    assert!(!plots.is_empty(), "{label}: plots written");
    for plot in &plots {
        let svg = std::fs::read_to_string(plot).expect("read svg");
        assert!(svg.trim_start().starts_with("<svg"), "{}: not an SVG", plot.display());
    }
    report
}

#[test]
fn the_whole_lab_runs_on_disk_with_tiny_parameters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = run_everything(dir.path(), "disk");
    assert_eq!(report.file.pmem_mode, PmemMode::Msync, "no DAX here: pmem on disk is msync");
    assert!(report.file.direct_alignment_bytes.is_some());
    let cold_reads = report
        .points
        .iter()
        .filter(|p| p.spec.cache == CacheState::Cold && p.spec.op == IoOp::Read)
        .filter_map(|p| p.eviction)
        .collect::<Vec<_>>();
    assert!(!cold_reads.is_empty());
    for eviction in cold_reads {
        assert!(eviction.resident_after <= 0.05, "cold means evicted: {eviction:?}");
    }
}

#[test]
fn the_whole_lab_runs_on_shm_with_tiny_parameters() {
    let dir = tempfile::tempdir_in("/dev/shm").expect("shm tempdir");
    let report = run_everything(dir.path(), "shm");
    assert_eq!(report.file.fs_type, "tmpfs");
    assert_eq!(
        report.file.pmem_mode,
        PmemMode::FlushOnly,
        "pmem on tmpfs is the flush-only emulation"
    );
    let pmem_writes = report
        .points
        .iter()
        .filter(|p| p.spec.method == AccessMethod::Pmem && p.spec.op == IoOp::Write)
        .count();
    assert_eq!(pmem_writes, 2 * 2 * 2 * 2, "patterns x caches x sizes x threads");
}

#[test]
fn bad_configurations_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = tiny(dir.path());
    config.threads = vec![0];
    let error = device::run(&config).expect_err("zero threads");
    assert!(error.to_string().contains("thread"), "{error}");
    let mut config = tiny(dir.path());
    config.transfer_sizes = vec![];
    assert!(device::run(&config).is_err());
    let mut config = tiny(dir.path());
    config.patterns = vec![Pattern::Seq];
    config.transfer_sizes = vec![4 << 20];
    config.methods = vec![AccessMethod::Syscall];
    config.caches = vec![CacheState::Warm];
    config.ops = vec![IoOp::Read];
    config.threads = vec![1];
    let report = device::run(&config).expect("runs, skipping what cannot run");
    assert!(report.points.is_empty());
    assert_eq!(report.skipped.len(), 1);
    assert!(report.skipped[0].1.contains("less than one transfer"), "{:?}", report.skipped);
}
