//! The WAL benchmark with tiny parameters, on disk and on /dev/shm, through the table, JSON
//! (round trip) and plots: so the benchmark cannot rot. No assertion on speed.

use std::time::Duration;

use tierkv_bench::wal::{self, output, plot, WalBenchConfig, WalReport};
use tierkv_wal::{Backend, Durability};

fn tiny(path: &std::path::Path) -> WalBenchConfig {
    let mut config = WalBenchConfig::new(path);
    config.threads = vec![1, 2];
    config.record_sizes = vec![64, 1024];
    config.duration = Duration::from_millis(100);
    config.segment_bytes = 1 << 20;
    config.limit_trials = 2;
    config.peers = false;
    config.progress = false;
    config
}

fn check(report: &WalReport, dir: &std::path::Path) {
    assert_eq!(report.points.len(), 2 * 2 * 2);
    for point in &report.points {
        assert!(point.commits > 0, "{point:?}");
        assert!(point.commits_per_s > 0.0 && point.latency_ns_p50 > 0, "{point:?}");
        assert!(
            point.latency_ns_p50 <= point.latency_ns_p99
                && point.latency_ns_p99 <= point.latency_ns_max
        );
        assert_eq!(point.durability, "sync");
        match point.backend.as_str() {
            "file" => {
                assert!(point.pmem_mode.is_none());
                // The 1-appender points ran twice, each between two limit measurements; the
                // one reported is one of the two.
                if point.threads == 1 {
                    let around = point.fdatasync_limit_around.as_ref().expect("bracketed");
                    assert_eq!(point.limit_trial_ratios.len(), 2, "{point:?}");
                    let ratio = point.commits_per_s / around.per_s;
                    assert!(point.limit_trial_ratios.contains(&ratio), "{point:?}");
                } else {
                    assert!(point.fdatasync_limit_around.is_none(), "{point:?}");
                }
                assert!(point.records_per_sync >= 1.0, "every file commit is synced: {point:?}");
            }
            "pmem" => assert!(point.pmem_mode.is_some()),
            other => panic!("unknown backend {other}"),
        }
    }
    assert!(report.fdatasync_limit.samples > 0 && report.fdatasync_limit.per_s > 0.0);
    let mut table = Vec::new();
    output::print_table(report, &mut table).expect("table");
    let table = String::from_utf8(table).expect("utf-8");
    assert!(
        table.contains("fdatasync limit") && table.contains("of the fdatasync limit"),
        "{table}"
    );
    assert!(table.contains("pmem / file"), "{table}");
    let json = dir.join("wal.json");
    wal::write_json(report, &json).expect("json");
    let back: WalReport =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("read")).expect("parse");
    assert_eq!(&back, report);
    let plots = plot::write_plots(report, &dir.join("plots")).expect("plots");
    for path in plots {
        let svg = std::fs::read_to_string(&path).expect("read plot");
        assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{}", path.display());
    }
    // The bench leaves nothing behind in the measured directory but its outputs.
    let mut names: Vec<String> = std::fs::read_dir(&report.path)
        .expect("list")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.iter().all(|name| name == "wal.json" || name == "plots"), "{names:?}");
}

#[test]
fn the_whole_wal_bench_runs_with_tiny_parameters_on_disk() {
    let dir = tempfile::tempdir().expect("dir");
    let config = tiny(dir.path());
    let report = wal::run(&config, "test").expect("run");
    check(&report, dir.path());
}

#[test]
fn the_wal_bench_runs_on_dev_shm_and_says_what_is_emulated() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("note: no /dev/shm here; the memory-file-system run is not exercised");
        return;
    }
    let dir = tempfile::tempdir_in(shm).expect("dir");
    let report = wal::run(&tiny(dir.path()), "test").expect("run");
    assert!(report.fs_is_memory);
    assert!(report.notes.iter().any(|note| note.contains("emulation")), "{:?}", report.notes);
    check(&report, dir.path());
}

#[test]
fn bad_configurations_are_errors() {
    let dir = tempfile::tempdir().expect("dir");
    let mut config = tiny(dir.path());
    config.threads = vec![0];
    assert!(wal::run(&config, "test").is_err());
    let mut config = tiny(dir.path());
    config.backends.clear();
    assert!(wal::run(&config, "test").is_err());
    let mut config = tiny(dir.path());
    config.durability = Durability::Buffered;
    config.backends = vec![Backend::File];
    config.threads = vec![1];
    config.record_sizes = vec![64];
    let report = wal::run(&config, "test").expect("buffered run");
    assert_eq!(report.points[0].durability, "buffered");
}
