//! The block benchmark with tiny parameters, through the table, JSON (round trip) and plots:
//! so the benchmark cannot rot. No assertion on speed.

use std::path::Path;

use tierkv_bench::blocks::{
    self, micro::MicroTable, output, plot, BlocksBenchConfig, BlocksReport, Buffering, RunLength,
};

fn tiny(path: &Path) -> BlocksBenchConfig {
    let mut config = BlocksBenchConfig::new(path);
    config.latency_repeats = 4;
    config.bandwidth_repeats = 4;
    // The smallest file the strided 16 KiB walk accepts: 2 × 64 blocks × 8 apart.
    config.micro_file_bytes = 16 << 20;
    config.data_set_bytes = 1 << 20;
    config.run_length = RunLength::Updates(200);
    config.checkpoint_every = 50;
    config.trials = 2;
    config.overwrite = None;
    config.progress = false;
    config
}

fn check_table(table: &MicroTable, direct: bool) {
    assert_eq!(table.blocks_per_op, 64);
    assert_eq!(table.rows.len(), 3 * 2, "{table:?}");
    for row in &table.rows {
        let timings = [&row.sync, &row.async_writes, &row.atomic_group];
        let present = match row.buffering {
            Buffering::Buffered => [true, true, true],
            Buffering::Direct => [direct, direct, false],
        };
        for (timing, expected) in timings.into_iter().zip(present) {
            assert_eq!(timing.is_some(), expected, "{row:?}");
            if let Some(t) = timing {
                assert_eq!(t.repeats, table.repeats);
                assert!(t.latency_us_median > 0.0 && t.bandwidth_mb_per_s > 0.0, "{t:?}");
                assert!(t.latency_us_min <= t.latency_us_median);
                assert!(t.latency_us_median <= t.latency_us_p99);
                assert!(t.latency_us_p99 <= t.latency_us_max && t.latency_us_mean > 0.0);
            }
        }
        assert!(row.seed.sync > 0.0 && row.seed.async_writes > 0.0);
        assert_eq!(row.seed.atomic_group.is_some(), row.buffering == Buffering::Direct);
        assert!(row.transfer_bytes >= table.block_bytes as u64);
    }
    assert!(table.methods.iter().any(|m| m.description.contains("64 writes, one fdatasync")));
}

fn check(report: &BlocksReport, dir: &Path) {
    let direct = report.direct.supported;
    assert_eq!(direct, report.direct.refused.is_none());
    assert_eq!(report.latency.block_bytes, 512);
    assert_eq!(report.bandwidth.block_bytes, 16 << 10);
    check_table(&report.latency, direct);
    check_table(&report.bandwidth, direct);
    assert_eq!(report.latency.seed_unit, "us");

    assert_eq!(report.page_update.len(), 2 * 2 * 2, "page sizes × modes × trials");
    for point in &report.page_update {
        assert_eq!(point.updates, 200, "{point:?}");
        assert_eq!(point.pages_total, (1 << 20) / point.page_bytes as u64);
        assert!(point.pages_flushed > 0 && point.pages_flushed <= 200 && point.groups > 0);
        assert!(point.flushes >= 4, "200 updates, a flush every 50: {point:?}");
        assert!(point.pages_per_s > 0.0 && point.updates_per_s > 0.0 && point.syncs > 0);
        assert!(point.device_bytes_written >= point.pages_flushed * point.page_bytes as u64);
        assert!(point.space_amplification > 0.0 && point.cpu_s >= 0.0);
        assert!(point.trial < 2, "{point:?}");
        match point.mode.as_str() {
            "atomic-group" => assert_eq!(point.doublewrite_bytes + point.in_place_bytes, 0),
            "doublewrite" => {
                assert!(point.doublewrite_bytes >= point.pages_flushed * point.page_bytes as u64);
                assert!(point.in_place_bytes >= point.pages_flushed * point.page_bytes as u64);
            }
            other => panic!("unknown mode {other}"),
        }
    }
    // Both modes replayed the same stream: the same pages in the same groups. Each trial
    // holds one run of each, the first mode alternating.
    for (index, pair) in report.page_update.chunks(2).enumerate() {
        assert_eq!(pair[0].mode, "atomic-group");
        assert_eq!(pair[1].mode, "doublewrite");
        assert_eq!((pair[0].trial, pair[1].trial), (index % 2, index % 2));
        assert_eq!(pair[0].order, index % 2, "the first mode swaps each trial");
        assert_eq!(pair[0].pages_flushed, pair[1].pages_flushed);
        assert_eq!(pair[0].groups, pair[1].groups);
    }
    assert_eq!(report.page_update_ratios.len(), 2);
    for ratio in &report.page_update_ratios {
        assert!(ratio.same_groups);
        assert!(ratio.device_bytes_ratio.is_some_and(|r| r > 0.0), "{ratio:?}");
        assert!(ratio.pages_per_s_ratio.is_some_and(|r| r > 0.0), "{ratio:?}");
        assert_eq!(ratio.trials, 2);
        assert_eq!(ratio.trial_pages_per_s_ratios.len(), 2);
        assert!(ratio.atomic_pages_per_s_median > 0.0, "{ratio:?}");
    }
    assert!(report.overwrite.is_none());
    assert!(!report.machine.cpu_model.is_empty() && report.machine.cores > 0);
    assert!(!report.fs_type.is_empty() && report.command == "test");

    let mut table = Vec::new();
    output::print_table(report, &mut table).expect("table");
    let table = String::from_utf8(table).expect("utf-8");
    for expected in ["Write latency", "Write bandwidth", "Page updates", "atomic group ÷"] {
        assert!(table.contains(expected), "{expected}: {table}");
    }

    let json = dir.join("blocks.json");
    blocks::write_json(report, &json).expect("json");
    let back: BlocksReport =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("read")).expect("parse");
    assert_eq!(&back, report);
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("read")).expect("parse");
    for key in ["machine", "command", "options", "latency", "bandwidth", "page_update"] {
        assert!(value.get(key).is_some(), "{key} missing from the JSON");
    }
    assert!(value["latency"]["rows"][0].get("async").is_some());

    let plots = plot::write_plots(report, &dir.join("plots")).expect("plots");
    let names: Vec<String> = plots
        .iter()
        .map(|path| path.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "bandwidth-16KiB.svg",
            "latency-512B.svg",
            "page-update-bytes.svg",
            "page-update-pages-per-s.svg"
        ]
    );
    for path in plots {
        let svg = std::fs::read_to_string(&path).expect("read plot");
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{}",
            path.display()
        );
        assert!(!svg.contains("NaN"), "{}", path.display());
    }
    // The bench leaves nothing behind in the measured directory but its outputs.
    let mut names: Vec<String> = std::fs::read_dir(&report.path)
        .expect("list")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["blocks.json", "plots"]);
}

#[test]
fn the_whole_blocks_bench_runs_with_tiny_parameters() {
    let dir = tempfile::tempdir().expect("dir");
    let report = blocks::run(&tiny(dir.path()), "test").expect("run");
    check(&report, dir.path());
}

#[test]
fn the_overwrite_test_samples_space_amplification() {
    let dir = tempfile::tempdir().expect("dir");
    let mut config = tiny(dir.path());
    config.patterns = vec![blocks::MicroPattern::Sequential];
    config.page_sizes = vec![4096];
    config.distribution = blocks::Distribution::Uniform;
    config.overwrite = Some(std::time::Duration::from_millis(1500));
    let report = blocks::run(&config, "test").expect("run");
    let overwrite = report.overwrite.as_ref().expect("overwrite ran");
    assert!(overwrite.groups > 0 && overwrite.pages_written > 0);
    assert!(!overwrite.samples.is_empty());
    assert!(overwrite.space_amplification_max >= overwrite.space_amplification_final);
    assert!(overwrite.space_amplification_final > 0.0);
    assert!(overwrite.background_error.is_none(), "{:?}", overwrite.background_error);
    assert_eq!(report.page_update.len(), 2 * 2);
    let plots = plot::write_plots(&report, &dir.path().join("plots")).expect("plots");
    assert!(plots.iter().any(|p| p.ends_with("overwrite-space-amplification.svg")));
}

#[test]
fn bad_configurations_are_errors() {
    let dir = tempfile::tempdir().expect("dir");
    let mut config = tiny(dir.path());
    config.page_sizes = vec![1000];
    assert!(blocks::run(&config, "test").is_err());
    let mut config = tiny(dir.path());
    config.run_length = RunLength::Updates(0);
    assert!(blocks::run(&config, "test").is_err());
    let mut config = tiny(dir.path());
    config.micro_file_bytes = 1 << 20;
    assert!(blocks::run(&config, "test").is_err());
    let mut config = tiny(dir.path());
    config.zipf_theta = 1.5;
    assert!(blocks::run(&config, "test").is_err());
}
