//! SVG plots of a block-benchmark report: grouped bars of the 512 B latency table and the
//! 16 KiB bandwidth table (one bar per method, the seed's figure as a black tick over it),
//! bytes written per page and pages per second of the page-update runs per mode, and the
//! space amplification over time of the sustained-overwrite test when it ran.
//!
//! Invariants:
//! - Each method or mode has one fixed colour in every plot; a missing value (a skipped cell,
//!   zero, NaN) draws no bar and no label, never a bar at a made-up height.
//! - Every plot carries a footer naming the machine's CPU, the kernel, the file system and the
//!   path: a figure without its machine is not a result.
//! - The bars and lines are drawn through plotters (`bars`, `lines`, `canvas`) with no font
//!   library, so this builds on a bare CI machine; all text taken from the report is
//!   escaped.
//!
//! Must never: write outside `dir`, or panic on a degenerate report (no rows, one value, equal
//! values, zeros).

use std::path::{Path, PathBuf};

use super::micro::{MicroTable, Timing};
use super::{BlocksReport, Buffering};
use crate::bars::{render_bars, Bar, BarChart, Group};
use crate::canvas::{size_name, write_svg};
use crate::device::BenchError;
use crate::lines::{render_lines, Line, LineChart, Scale};
use crate::summary::median_of_present;

/// Writes the plots into `dir` (created if missing) and returns their paths, sorted:
/// `latency-{block}.svg`, `bandwidth-{block}.svg`, `page-update-bytes.svg` and
/// `page-update-pages-per-s.svg` when pages were updated, `overwrite-space-amplification.svg`
/// when the overwrite test ran.
pub fn write_plots(report: &BlocksReport, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    std::fs::create_dir_all(dir)
        .map_err(|source| BenchError::Output { path: dir.to_path_buf(), source })?;
    let footer = format!(
        "CPU: {} ({} cores) | kernel {} | fs: {}{} | path: {}",
        report.machine.cpu_model,
        report.machine.cores,
        report.machine.kernel,
        report.fs_type,
        if report.fs_is_memory { " (memory)" } else { "" },
        report.path.display()
    );
    let mut written = Vec::new();
    let latency = micro_chart(&report.latency, "median latency, µs", |t| t.latency_us_median);
    let name = format!("latency-{}.svg", size_name(report.latency.block_bytes));
    written.push(write_svg(dir, &name, render_bars(&latency, &footer))?);
    let bandwidth =
        micro_chart(&report.bandwidth, "MB/s (from the median)", |t| t.bandwidth_mb_per_s);
    let name = format!("bandwidth-{}.svg", size_name(report.bandwidth.block_bytes));
    written.push(write_svg(dir, &name, render_bars(&bandwidth, &footer))?);
    if !report.page_update.is_empty() {
        let charts = page_charts(report);
        written.push(write_svg(dir, "page-update-bytes.svg", render_bars(&charts.0, &footer))?);
        written.push(write_svg(
            dir,
            "page-update-pages-per-s.svg",
            render_bars(&charts.1, &footer),
        )?);
    }
    if let Some(overwrite) = &report.overwrite {
        let points: Vec<(f64, f64)> =
            overwrite.samples.iter().map(|s| (s.elapsed_s, s.space_amplification)).collect();
        let chart = space_amplification_chart(overwrite.page_bytes, points);
        let svg = render_lines(&chart, &footer);
        written.push(write_svg(dir, "overwrite-space-amplification.svg", svg)?);
    }
    written.sort();
    Ok(written)
}

fn micro_chart(table: &MicroTable, y_label: &str, value: fn(&Timing) -> f64) -> BarChart {
    let groups = table
        .rows
        .iter()
        .map(|row| {
            let bar = |timing: Option<&Timing>, reference: Option<f64>| Bar {
                value: timing.map(value),
                reference,
            };
            Group {
                label: format!("{} {}", row.pattern.name(), row.buffering.name()),
                bars: vec![
                    bar(row.sync.as_ref(), Some(row.seed.sync)),
                    bar(row.async_writes.as_ref(), Some(row.seed.async_writes)),
                    bar(row.atomic_group.as_ref(), row.seed.atomic_group),
                ],
            }
        })
        .collect();
    let direct_note = if table.rows.iter().any(|r| r.buffering == Buffering::Direct) {
        "; the atomic group is in the buffered rows"
    } else {
        ""
    };
    BarChart {
        title: format!(
            "{} blocks of {} per operation, {} repeats{direct_note}",
            table.blocks_per_op,
            size_name(table.block_bytes),
            table.repeats
        ),
        y_label: y_label.to_string(),
        series: vec![
            "sync: 64 × (pwrite + fdatasync)".into(),
            "async: 64 writes, 1 fdatasync".into(),
            "atomic group (LogStore)".into(),
        ],
        groups,
        reference_label: Some("seed 003".into()),
    }
}

/// (bytes written per page, pages per second), grouped by page size, one bar per mode: the
/// median over the trials.
fn page_charts(report: &BlocksReport) -> (BarChart, BarChart) {
    let modes = ["atomic-group", "doublewrite"];
    let mut sizes: Vec<usize> = report.page_update.iter().map(|p| p.page_bytes).collect();
    sizes.dedup();
    let median_of =
        |size: usize, mode: &str, f: &dyn Fn(&super::pages::PageUpdatePoint) -> Option<f64>| {
            median_of_present(
                report.page_update.iter().filter(|p| p.page_bytes == size && p.mode == mode).map(f),
            )
        };
    let mut bytes_groups = Vec::new();
    let mut rate_groups = Vec::new();
    for &size in &sizes {
        let bars = |f: &dyn Fn(&super::pages::PageUpdatePoint) -> Option<f64>| {
            modes
                .iter()
                .map(|mode| Bar { value: median_of(size, mode, f), reference: None })
                .collect::<Vec<_>>()
        };
        bytes_groups.push(Group {
            label: format!("{} pages, store counters", size_name(size)),
            bars: bars(&|p| Some(p.device_bytes_per_page / 1024.0)),
        });
        bytes_groups.push(Group {
            label: format!("{} pages, block device", size_name(size)),
            bars: bars(&|p| p.block_device_write_bytes_per_page.map(|b| b / 1024.0)),
        });
        bytes_groups.push(Group {
            label: format!("{} pages, /proc/self/io", size_name(size)),
            bars: bars(&|p| p.proc_write_bytes_per_page.map(|b| b / 1024.0)),
        });
        rate_groups.push(Group {
            label: format!("{} pages", size_name(size)),
            bars: bars(&|p| Some(p.pages_per_s)),
        });
    }
    let options = &report.options;
    let subtitle = format!(
        "{}, flush every {} updates",
        options.distribution.name(),
        options.checkpoint_every
    );
    let series: Vec<String> = modes.iter().map(|m| (*m).to_string()).collect();
    (
        BarChart {
            title: format!("Page updates: KiB written to the device per page flushed ({subtitle})"),
            y_label: "KiB per page flushed".into(),
            series: series.clone(),
            groups: bytes_groups,
            reference_label: None,
        },
        BarChart {
            title: format!("Page updates: pages flushed per second ({subtitle})"),
            y_label: "pages/s".into(),
            series,
            groups: rate_groups,
            reference_label: None,
        },
    )
}

/// Space amplification over time, against the store's bound of 1.5.
fn space_amplification_chart(page_bytes: usize, points: Vec<(f64, f64)>) -> LineChart {
    LineChart {
        title: format!("LogStore sustained overwrite: space amplification, {page_bytes} B pages"),
        y_label: "file bytes / live bytes".into(),
        x_label: "seconds".into(),
        x_scale: Scale::Linear,
        lines: vec![Line { name: "space amplification".into(), points, ..Line::default() }],
        bound: Some((1.5, "1.5 bound".into())),
        shades: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_and_lines_render_degenerate_input() {
        let chart = BarChart {
            title: "t <&>".into(),
            y_label: "y".into(),
            series: vec!["a".into(), "b".into()],
            groups: vec![Group {
                label: "g".into(),
                bars: vec![
                    Bar { value: Some(0.0), reference: Some(f64::NAN) },
                    Bar { value: None, reference: Some(3.0) },
                ],
            }],
            reference_label: Some("seed".into()),
        };
        let svg = render_bars(&chart, "footer").expect("drawn");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(!svg.contains("NaN") && svg.contains("t &lt;&amp;&gt;"));
        let empty = BarChart { groups: Vec::new(), ..chart };
        assert!(render_bars(&empty, "f").expect("drawn").contains("no data"));
        let points = vec![(1.0, 1.2), (2.0, 1.3), (3.0, f64::NAN)];
        let line = render_lines(&space_amplification_chart(4096, points), "f").expect("drawn");
        assert_eq!(line.matches("<polyline").count(), 1);
        assert!(!line.contains("NaN"));
        let empty = render_lines(&space_amplification_chart(4096, vec![]), "f").expect("drawn");
        assert!(empty.contains("1.5 bound"));
    }
}
