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
//! - The SVG is hand-written like the WAL plots (their text and escape helpers), so this
//!   builds on a bare CI machine; all text taken from the report is escaped.
//!
//! Must never: write outside `dir`, or panic on a degenerate report (no rows, one value, equal
//! values, zeros).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::micro::{MicroTable, Timing};
use super::{BlocksReport, Buffering};
use crate::device::BenchError;
use crate::summary::median_of_present;
use crate::svg::{escape, plottable, size_name, text, write_svg};

const WIDTH_PX: f64 = 1080.0;
const HEIGHT_PX: f64 = 560.0;
const PLOT_LEFT_PX: f64 = 90.0;
const PLOT_RIGHT_PX: f64 = 800.0;
const PLOT_TOP_PX: f64 = 60.0;
const PLOT_BOTTOM_PX: f64 = 450.0;
/// Bars span more than this ratio between largest and smallest: the y axis is logarithmic.
const LOG_AXIS_SPAN_MIN: f64 = 30.0;

/// Colours of the series, in order (Tableau 10).
const COLOURS: [&str; 4] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"];

/// One bar: a value, and the seed's figure for it.
#[derive(Debug, Default, Clone)]
struct Bar {
    value: Option<f64>,
    reference: Option<f64>,
}

/// One group of bars along the x axis.
#[derive(Debug)]
struct Group {
    label: String,
    bars: Vec<Bar>,
}

#[derive(Debug)]
struct BarChart {
    title: String,
    y_label: String,
    series: Vec<String>,
    groups: Vec<Group>,
    reference_label: Option<String>,
}

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
    written.push(write_svg(dir, &name, &render_bars(&latency, &footer))?);
    let bandwidth =
        micro_chart(&report.bandwidth, "MB/s (from the median)", |t| t.bandwidth_mb_per_s);
    let name = format!("bandwidth-{}.svg", size_name(report.bandwidth.block_bytes));
    written.push(write_svg(dir, &name, &render_bars(&bandwidth, &footer))?);
    if !report.page_update.is_empty() {
        let charts = page_charts(report);
        written.push(write_svg(dir, "page-update-bytes.svg", &render_bars(&charts.0, &footer))?);
        written.push(write_svg(
            dir,
            "page-update-pages-per-s.svg",
            &render_bars(&charts.1, &footer),
        )?);
    }
    if let Some(overwrite) = &report.overwrite {
        let points: Vec<(f64, f64)> =
            overwrite.samples.iter().map(|s| (s.elapsed_s, s.space_amplification)).collect();
        let svg = render_line(
            &format!(
                "LogStore sustained overwrite: space amplification, {} B pages",
                overwrite.page_bytes
            ),
            &points,
            &footer,
        );
        written.push(write_svg(dir, "overwrite-space-amplification.svg", &svg)?);
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

/// A y axis: linear from 0, or logarithmic over whole decades.
#[derive(Debug, Clone, Copy)]
enum Axis {
    Linear { max: f64, step: f64 },
    Log { lo: i32, hi: i32 },
}

impl Axis {
    fn for_values(values: impl Iterator<Item = f64>) -> Axis {
        let (lo, hi) = values
            .filter(|&v| plottable(v))
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        if hi <= 0.0 {
            return Axis::Linear { max: 1.0, step: 0.2 };
        }
        if hi / lo > LOG_AXIS_SPAN_MIN {
            // Bounds are logs of finite positive values: well within i32.
            let (lo, mut hi) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
            if hi <= lo {
                hi = lo + 1;
            }
            return Axis::Log { lo, hi };
        }
        let step = nice_step(hi / 5.0);
        Axis::Linear { max: (hi / step).ceil().max(1.0) * step, step }
    }

    /// Position of `value`, 0 at the bottom and 1 at the top (clamped).
    fn fraction(&self, value: f64) -> f64 {
        let f = match *self {
            Axis::Linear { max, .. } => value / max,
            Axis::Log { lo, hi } => (value.log10() - f64::from(lo)) / f64::from(hi - lo),
        };
        f.clamp(0.0, 1.0)
    }

    fn ticks(&self) -> Vec<(f64, String)> {
        match *self {
            Axis::Linear { max, step } => {
                let count = (max / step).round() as usize;
                (0..=count.min(20)).map(|i| i as f64 * step).map(|v| (v, number(v))).collect()
            }
            Axis::Log { lo, hi } => {
                (lo..=hi).map(|e| 10f64.powi(e)).map(|v| (v, number(v))).collect()
            }
        }
    }
}

/// 1, 2 or 5 times a power of ten, at or above `raw`.
fn nice_step(raw: f64) -> f64 {
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&step| step >= raw)
        .unwrap_or(10.0 * magnitude)
}

/// A compact number: 0.5, 12, 3.4k, 1.2M.
fn number(value: f64) -> String {
    let abs = value.abs();
    if abs >= 1e6 {
        format!("{:.3}M", value / 1e6).trim_end_matches('0').trim_end_matches('.').to_string()
    } else if abs >= 1e4 {
        format!("{:.0}k", value / 1e3)
    } else if abs >= 100.0 || value == value.trunc() {
        format!("{value:.0}")
    } else if abs >= 1.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}").trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

fn svg_start(svg: &mut String, title: &str) {
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH_PX}\" height=\"{HEIGHT_PX}\" \
         viewBox=\"0 0 {WIDTH_PX} {HEIGHT_PX}\" font-family=\"sans-serif\">\n\
         <rect x=\"0\" y=\"0\" width=\"{WIDTH_PX}\" height=\"{HEIGHT_PX}\" fill=\"white\"/>\n"
    );
    text(svg, WIDTH_PX / 2.0, 30.0, 15, "middle", "", title);
}

fn svg_end(svg: &mut String, y_label: &str, footer: &str) {
    let _ = writeln!(
        svg,
        "<rect x=\"{PLOT_LEFT_PX}\" y=\"{PLOT_TOP_PX}\" width=\"{}\" height=\"{}\" fill=\"none\" \
         stroke=\"black\"/>",
        PLOT_RIGHT_PX - PLOT_LEFT_PX,
        PLOT_BOTTOM_PX - PLOT_TOP_PX
    );
    let (x, y) = (22.0, (PLOT_TOP_PX + PLOT_BOTTOM_PX) / 2.0);
    let _ = writeln!(
        svg,
        "<text x=\"{x}\" y=\"{y}\" font-size=\"13\" text-anchor=\"middle\" \
         transform=\"rotate(-90 {x} {y})\">{}</text>",
        escape(y_label)
    );
    text(svg, 10.0, HEIGHT_PX - 14.0, 11, "start", "#444444", footer);
    svg.push_str("</svg>\n");
}

fn y_grid(svg: &mut String, axis: &Axis) {
    for (value, label) in axis.ticks() {
        let y = PLOT_BOTTOM_PX - axis.fraction(value) * (PLOT_BOTTOM_PX - PLOT_TOP_PX);
        let _ = writeln!(
            svg,
            "<line x1=\"{}\" y1=\"{y:.1}\" x2=\"{PLOT_RIGHT_PX}\" y2=\"{y:.1}\" stroke=\"#e5e5e5\"/>",
            PLOT_LEFT_PX - 5.0
        );
        text(svg, PLOT_LEFT_PX - 8.0, y + 4.0, 11, "end", "", &label);
    }
}

fn render_bars(chart: &BarChart, footer: &str) -> String {
    let values = chart
        .groups
        .iter()
        .flat_map(|g| g.bars.iter().flat_map(|b| [b.value, b.reference]))
        .flatten();
    let axis = Axis::for_values(values);
    let mut svg = String::new();
    svg_start(&mut svg, &chart.title);
    y_grid(&mut svg, &axis);
    let groups = chart.groups.len().max(1) as f64;
    let group_px = (PLOT_RIGHT_PX - PLOT_LEFT_PX) / groups;
    let series = chart.series.len().max(1) as f64;
    let bar_px = group_px * 0.8 / series;
    let y_of = |v: f64| PLOT_BOTTOM_PX - axis.fraction(v) * (PLOT_BOTTOM_PX - PLOT_TOP_PX);
    for (g, group) in chart.groups.iter().enumerate() {
        let left = PLOT_LEFT_PX + g as f64 * group_px + group_px * 0.1;
        for (b, bar) in group.bars.iter().enumerate() {
            let x = left + b as f64 * bar_px;
            let colour = COLOURS[b % COLOURS.len()];
            if let Some(value) = bar.value.filter(|&v| plottable(v)) {
                let y = y_of(value);
                let _ = writeln!(
                    svg,
                    "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" \
                     fill=\"{colour}\"/>",
                    (bar_px - 2.0).max(1.0),
                    (PLOT_BOTTOM_PX - y).max(0.0)
                );
                text(&mut svg, x + bar_px / 2.0, y - 4.0, 10, "middle", "", &number(value));
            }
            if let Some(reference) = bar.reference.filter(|&v| plottable(v)) {
                let y = y_of(reference);
                let _ = writeln!(
                    svg,
                    "<line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"black\" \
                     stroke-width=\"3\"/>",
                    x + bar_px - 2.0
                );
            }
        }
        text(
            &mut svg,
            PLOT_LEFT_PX + (g as f64 + 0.5) * group_px,
            PLOT_BOTTOM_PX + 18.0,
            11,
            "middle",
            "",
            &group.label,
        );
    }
    if chart.groups.is_empty() {
        text(
            &mut svg,
            (PLOT_LEFT_PX + PLOT_RIGHT_PX) / 2.0,
            250.0,
            14,
            "middle",
            "#7f7f7f",
            "no data",
        );
    }
    let mut legend_y = PLOT_TOP_PX + 10.0;
    for (index, name) in chart.series.iter().enumerate() {
        let _ = writeln!(
            svg,
            "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"{}\"/>",
            PLOT_RIGHT_PX + 12.0,
            legend_y - 10.0,
            COLOURS[index % COLOURS.len()]
        );
        text(&mut svg, PLOT_RIGHT_PX + 32.0, legend_y + 2.0, 11, "start", "", name);
        legend_y += 22.0;
    }
    if let Some(label) = &chart.reference_label {
        let _ = writeln!(
            svg,
            "<line x1=\"{}\" y1=\"{legend_y:.1}\" x2=\"{}\" y2=\"{legend_y:.1}\" stroke=\"black\" \
             stroke-width=\"3\"/>",
            PLOT_RIGHT_PX + 12.0,
            PLOT_RIGHT_PX + 26.0
        );
        text(&mut svg, PLOT_RIGHT_PX + 32.0, legend_y + 4.0, 11, "start", "", label);
        legend_y += 22.0;
    }
    if matches!(axis, Axis::Log { .. }) {
        text(&mut svg, PLOT_RIGHT_PX + 12.0, legend_y + 4.0, 11, "start", "#555555", "log scale");
    }
    svg_end(&mut svg, &chart.y_label, footer);
    svg
}

/// A line of (seconds, value) on linear axes from 0, with the 1.5 bound drawn dashed.
fn render_line(title: &str, points: &[(f64, f64)], footer: &str) -> String {
    const BOUND: f64 = 1.5;
    let points: Vec<(f64, f64)> =
        points.iter().copied().filter(|&(x, y)| x.is_finite() && plottable(y)).collect();
    let x_max = points.iter().map(|p| p.0).fold(1.0f64, f64::max);
    // Headroom above the bound, so a line at the bound does not run along the frame.
    let y_axis = Axis::for_values(points.iter().map(|p| p.1).chain([BOUND * 1.2]));
    // Space amplification never spans decades; a log axis here would only hide the bound.
    let y_axis = match y_axis {
        Axis::Log { hi, .. } => {
            let max = 10f64.powi(hi);
            Axis::Linear { max, step: nice_step(max / 5.0) }
        }
        linear => linear,
    };
    let mut svg = String::new();
    svg_start(&mut svg, title);
    y_grid(&mut svg, &y_axis);
    let x_of = |x: f64| PLOT_LEFT_PX + x / x_max * (PLOT_RIGHT_PX - PLOT_LEFT_PX);
    let y_of = |y: f64| PLOT_BOTTOM_PX - y_axis.fraction(y) * (PLOT_BOTTOM_PX - PLOT_TOP_PX);
    let x_step = nice_step(x_max / 8.0);
    let mut x = 0.0;
    while x <= x_max + 1e-9 {
        text(&mut svg, x_of(x), PLOT_BOTTOM_PX + 18.0, 11, "middle", "", &number(x));
        x += x_step;
    }
    text(
        &mut svg,
        (PLOT_LEFT_PX + PLOT_RIGHT_PX) / 2.0,
        PLOT_BOTTOM_PX + 40.0,
        13,
        "middle",
        "",
        "seconds",
    );
    let bound_y = y_of(BOUND);
    let _ = writeln!(
        svg,
        "<line x1=\"{PLOT_LEFT_PX}\" y1=\"{bound_y:.1}\" x2=\"{PLOT_RIGHT_PX}\" y2=\"{bound_y:.1}\" \
         stroke=\"#7f7f7f\" stroke-width=\"1.5\" stroke-dasharray=\"8 4\"/>"
    );
    text(&mut svg, PLOT_RIGHT_PX - 6.0, bound_y - 5.0, 11, "end", "#7f7f7f", "1.5 bound");
    if points.len() >= 2 {
        let mut coordinates = String::new();
        for &(x, y) in &points {
            let _ = write!(coordinates, "{:.1},{:.1} ", x_of(x), y_of(y));
        }
        let _ = writeln!(
            svg,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>",
            coordinates.trim_end(),
            COLOURS[0]
        );
    }
    for &(x, y) in &points {
        let _ = writeln!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{}\"/>",
            x_of(x),
            y_of(y),
            COLOURS[0]
        );
    }
    svg_end(&mut svg, "file bytes / live bytes", footer);
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_are_never_empty() {
        for values in [vec![], vec![0.0], vec![5.0], vec![5.0, 5.0], vec![f64::NAN, 3.0]] {
            let axis = Axis::for_values(values.into_iter());
            assert!(!axis.ticks().is_empty());
            assert!(axis.fraction(1.0).is_finite());
        }
        assert!(matches!(Axis::for_values([1.0, 1000.0].into_iter()), Axis::Log { lo: 0, hi: 3 }));
        assert!(matches!(Axis::for_values([10.0, 40.0].into_iter()), Axis::Linear { .. }));
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(130.0), 200.0);
        assert_eq!(number(3_400.0), "3400");
        assert_eq!(number(34_000.0), "34k");
        assert_eq!(number(1.25), "1.2");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(0.25), "0.25");
    }

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
        let svg = render_bars(&chart, "footer");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(!svg.contains("NaN") && svg.contains("t &lt;&amp;&gt;"));
        let empty = BarChart { groups: Vec::new(), ..chart };
        assert!(render_bars(&empty, "f").contains("no data"));
        let line = render_line("l", &[(1.0, 1.2), (2.0, 1.3), (3.0, f64::NAN)], "f");
        assert_eq!(line.matches("<polyline").count(), 1);
        assert!(!line.contains("NaN"));
        assert!(render_line("l", &[], "f").contains("1.5 bound"));
    }
}
