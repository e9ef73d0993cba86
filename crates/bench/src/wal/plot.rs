//! SVG plots of a WAL-benchmark report: commits per second against appender threads, one plot
//! per record size, with the log's backends, the peers (RocksDB, SQLite) and the path's
//! fdatasync limit on the same axes; and the median commit latency of one appender against
//! record size.
//!
//! Invariants:
//! - Each series has one fixed colour in every plot (file blue, pmem purple, rocksdb orange,
//!   sqlite green; any other name takes a colour of a fixed fallback palette), and a line
//!   only when it has 2 points or more: one `<polyline>` for the log's (solid) series, dashes
//!   (`<line>`s) for the peers'. The fdatasync limit, the legend, the grid and the axes are
//!   drawn with `<line>` and `<rect>`, never `<polyline>`, so the polylines of a plot are
//!   exactly the log's series' lines.
//! - Both axes are logarithmic (log2 threads or record sizes, log10 commits/s or nanoseconds)
//!   and computed here with explicit ticks, so a range is never empty or inverted: equal values
//!   and a single point are padded. A value that cannot sit on a log axis (zero, negative, NaN,
//!   infinite) is left out of its line rather than drawn at a made-up place.
//! - Every plot carries a footer naming the machine's CPU, the file system (marked "(memory)"
//!   on tmpfs and the like) and the path measured: a figure without its machine is not a result.
//! - All text taken from the report is XML-escaped. The plot is laid out here in pixels and
//!   drawn through plotters' SVG backend (`canvas`), with no font library, so this builds on
//!   a bare CI machine.
//!
//! Must never: write outside `dir`, panic on a degenerate report (no points, one point, equal
//! values, zero or NaN values), or draw a value it could not place honestly.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::WalReport;
use crate::canvas::{draw_svg, plottable, size_name, write_svg, Anchor, Canvas, Dash, Drawn};
use crate::device::BenchError;

/// Width of every plot, pixels.
const WIDTH_PX: f64 = 960.0;
/// Height of every plot, pixels.
const HEIGHT_PX: f64 = 600.0;
/// Left edge of the plotting area (room for the y tick labels and the y axis label).
const PLOT_LEFT_PX: f64 = 90.0;
/// Right edge of the plotting area; the legend sits to its right.
const PLOT_RIGHT_PX: f64 = 740.0;
/// Top edge of the plotting area (room for the title).
const PLOT_TOP_PX: f64 = 60.0;
/// Bottom edge of the plotting area (room for the x ticks, the x label and the footer).
const PLOT_BOTTOM_PX: f64 = 500.0;
/// The dash of the peers' lines and of the fdatasync limit.
const DASH: Dash = (8.0, 4.0);
/// The dash of the peers' legend entries (shorter: the entry is 30 pixels).
const LEGEND_DASH: Dash = (6.0, 3.0);
/// The most tick labels an axis gets; more decades than this are labelled every n-th.
const MAX_TICK_LABELS: usize = 12;
/// The most decades a y axis may span and still get minor grid lines (2..9 times a decade).
const MINOR_TICK_DECADES_MAX: usize = 4;
/// Colour of the fdatasync-limit line.
const LIMIT_COLOUR: &str = "#7f7f7f";
/// Colours of series whose name has no fixed colour, in order of appearance.
const FALLBACK_COLOURS: [&str; 5] = ["#8c564b", "#e377c2", "#bcbd22", "#17becf", "#d62728"];

/// Writes the plots into `dir` and returns their paths, sorted.
///
/// - `commits-vs-threads-{record}.svg` (record as `64B`, `1KiB`, ...) for every record size
///   that a log point or a peer point has;
/// - `latency-p50-vs-record.svg` when at least one log point, or one peer point with a median
///   latency, ran with a single thread.
///
/// `dir` is created if missing. An empty report writes nothing.
pub fn write_plots(report: &WalReport, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    std::fs::create_dir_all(dir)
        .map_err(|source| BenchError::Output { path: dir.to_path_buf(), source })?;
    let footer = footer_text(report);
    let mut written = Vec::new();
    for record in record_sizes(report) {
        let chart = commits_chart(report, record);
        let name = format!("commits-vs-threads-{}.svg", size_name(record));
        written.push(write_svg(dir, &name, render(&chart, &footer))?);
    }
    if let Some(chart) = latency_chart(report) {
        written.push(write_svg(dir, "latency-p50-vs-record.svg", render(&chart, &footer))?);
    }
    written.sort();
    Ok(written)
}

/// The machine line every plot carries.
fn footer_text(report: &WalReport) -> String {
    let memory = if report.fs_is_memory { " (memory)" } else { "" };
    let mut text = format!(
        "CPU: {} ({} cores) | fs: {}{} | path: {}",
        report.machine.cpu_model,
        report.machine.cores,
        report.fs_type,
        memory,
        report.path.display()
    );
    if let Some(mode) = report.points.iter().find_map(|point| point.pmem_mode) {
        let _ = write!(text, " | pmem mode: {}", mode.name());
    }
    text
}

/// Record sizes of the log's and the peers' points, ascending.
fn record_sizes(report: &WalReport) -> BTreeSet<usize> {
    report
        .points
        .iter()
        .map(|point| point.record_bytes)
        .chain(report.peers.iter().map(|peer| peer.record_bytes))
        .collect()
}

/// The durability of the log's points, when they all share one.
fn common_durability(report: &WalReport) -> Option<&str> {
    let first = report.points.first()?.durability.as_str();
    report.points.iter().all(|point| point.durability == first).then_some(first)
}

/// One line of a plot.
#[derive(Debug)]
struct Series {
    /// Legend text.
    label: String,
    /// Stroke and marker colour.
    colour: &'static str,
    /// Peers are dashed, the log's backends solid.
    dashed: bool,
    /// Points in ascending x, every coordinate finite and positive.
    points: Vec<(f64, f64)>,
}

/// A horizontal reference line.
#[derive(Debug)]
struct HLine {
    value: f64,
    label: String,
}

/// Everything `render` needs; built by `commits_chart` and `latency_chart`.
#[derive(Debug)]
struct Chart {
    title: String,
    x_label: String,
    y_label: String,
    /// The x values to tick, with their labels.
    x_ticks: Vec<(f64, String)>,
    /// Labels a power of ten on the y axis.
    y_tick_label: fn(i32) -> String,
    series: Vec<Series>,
    hlines: Vec<HLine>,
}

/// The fixed colour of a series name, else the next fallback colour.
fn colour_of(name: &str, fallback_index: &mut usize) -> &'static str {
    match name {
        "file" => "#1f77b4",
        "pmem" => "#9467bd",
        "rocksdb" => "#ff7f0e",
        "sqlite" => "#2ca02c",
        _ => {
            let colour = FALLBACK_COLOURS[*fallback_index % FALLBACK_COLOURS.len()];
            *fallback_index += 1;
            colour
        }
    }
}

/// Builds the series of a plot from `(name, x, y)` rows: one series per name (in name order),
/// the log's names first; non-plottable rows dropped; one point per x (the first row wins).
/// Names whose rows are all dropped make no series.
fn build_series(
    log_rows: impl Iterator<Item = (String, f64, f64)>,
    peer_rows: impl Iterator<Item = (String, f64, f64)>,
) -> Vec<Series> {
    let mut fallback = 0;
    let mut series = Vec::new();
    for (rows, dashed) in [(log_rows.collect::<Vec<_>>(), false), (peer_rows.collect(), true)] {
        let mut by_name: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for (name, x, y) in rows {
            let points = by_name.entry(name).or_default();
            if plottable(x) && plottable(y) && !points.iter().any(|&(px, _)| px == x) {
                points.push((x, y));
            }
        }
        for (name, mut points) in by_name {
            if points.is_empty() {
                continue;
            }
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            let colour = colour_of(&name, &mut fallback);
            let label = if dashed { name } else { format!("tierkv {name}") };
            series.push(Series { label, colour, dashed, points });
        }
    }
    series
}

/// Commits per second against threads for one record size.
fn commits_chart(report: &WalReport, record: usize) -> Chart {
    let log_rows = report
        .points
        .iter()
        .filter(|point| point.record_bytes == record)
        .map(|point| (point.backend.clone(), point.threads as f64, point.commits_per_s));
    let peer_rows = report
        .peers
        .iter()
        .filter(|peer| peer.record_bytes == record)
        .map(|peer| (peer.engine.clone(), peer.threads as f64, peer.commits_per_s));
    let series = build_series(log_rows, peer_rows);
    let threads: BTreeSet<usize> = report
        .points
        .iter()
        .filter(|point| point.record_bytes == record)
        .map(|point| point.threads)
        .chain(report.peers.iter().filter(|peer| peer.record_bytes == record).map(|p| p.threads))
        .filter(|&threads| threads > 0)
        .collect();
    let x_ticks = threads.into_iter().map(|t| (t as f64, t.to_string())).collect();
    let mut hlines = Vec::new();
    if plottable(report.fdatasync_limit.per_s) {
        hlines.push(HLine { value: report.fdatasync_limit.per_s, label: "fdatasync limit".into() });
    }
    let durability = common_durability(report)
        .map(|durability| format!(", durability {durability}"))
        .unwrap_or_default();
    Chart {
        title: format!(
            "WAL commits per second vs appender threads, {} records{durability}",
            size_name(record)
        ),
        x_label: "appender threads".into(),
        y_label: "commits/s".into(),
        x_ticks,
        y_tick_label: count_label,
        series,
        hlines,
    }
}

/// Median commit latency of one appender against record size; `None` when nothing ran with
/// one thread.
fn latency_chart(report: &WalReport) -> Option<Chart> {
    let single: Vec<_> = report.points.iter().filter(|point| point.threads == 1).collect();
    let peers: Vec<_> = report
        .peers
        .iter()
        .filter(|peer| peer.threads == 1)
        .filter_map(|peer| peer.latency_ns_p50.map(|p50| (peer, p50)))
        .collect();
    if single.is_empty() && peers.is_empty() {
        return None;
    }
    let records: BTreeSet<usize> = single
        .iter()
        .map(|point| point.record_bytes)
        .chain(peers.iter().map(|(peer, _)| peer.record_bytes))
        .filter(|&bytes| bytes > 0)
        .collect();
    let log_rows = single.iter().map(|point| {
        (point.backend.clone(), point.record_bytes as f64, point.latency_ns_p50 as f64)
    });
    let peer_rows = peers
        .iter()
        .map(|(peer, p50)| (peer.engine.clone(), peer.record_bytes as f64, *p50 as f64));
    let durability = common_durability(report)
        .map(|durability| format!(", durability {durability}"))
        .unwrap_or_default();
    Some(Chart {
        title: format!("WAL median commit latency vs record size, 1 appender thread{durability}"),
        x_label: "record size".into(),
        y_label: "p50 commit latency".into(),
        x_ticks: records.into_iter().map(|r| (r as f64, size_name(r))).collect(),
        y_tick_label: nanos_label,
        series: build_series(log_rows, peer_rows),
        hlines: Vec::new(),
    })
}

/// `1`, `10`, `100`, `1k` ... `100G` for 10^exponent; `1e{exponent}` beyond.
fn count_label(exponent: i32) -> String {
    scaled_label(exponent, &["", "k", "M", "G"], "")
}

/// `1ns` ... `100ns`, `1µs` ... `100s` for 10^exponent nanoseconds; `1e{exponent}ns` beyond.
fn nanos_label(exponent: i32) -> String {
    scaled_label(exponent, &["ns", "µs", "ms", "s"], "ns")
}

/// 10^exponent with an SI unit per three decades, or `1e{exponent}{fallback_unit}`.
fn scaled_label(exponent: i32, units: &[&str], fallback_unit: &str) -> String {
    let group = exponent.div_euclid(3);
    match usize::try_from(group).ok().and_then(|group| units.get(group)) {
        Some(unit) => format!("{}{unit}", 10u32.pow(exponent.rem_euclid(3) as u32)),
        None => format!("1e{exponent}{fallback_unit}"),
    }
}

/// A logarithmic axis: `lo..hi` in log space, never empty.
#[derive(Clone, Copy, Debug)]
struct LogAxis {
    base: f64,
    lo: f64,
    hi: f64,
}

impl LogAxis {
    /// A log2 axis over `values` (plottable ones only), padded by 6% of the span on each side;
    /// a single value (or none: 1) gets half a unit on each side.
    fn padded(base: f64, values: impl Iterator<Item = f64>) -> LogAxis {
        let (lo, hi) = log_bounds(base, values).unwrap_or((0.0, 0.0));
        let span = hi - lo;
        if span < 1e-9 {
            return LogAxis { base, lo: lo - 0.5, hi: hi + 0.5 };
        }
        LogAxis { base, lo: lo - span * 0.06, hi: hi + span * 0.06 }
    }

    /// A log10 axis from the decade at or below the smallest value to the decade at or above
    /// the largest, at least one decade (none: 1 to 10).
    fn decades(values: impl Iterator<Item = f64>) -> LogAxis {
        let (lo, hi) = log_bounds(10.0, values).unwrap_or((0.0, 1.0));
        let (lo, mut hi) = (lo.floor(), hi.ceil());
        if hi <= lo {
            hi = lo + 1.0;
        }
        LogAxis { base: 10.0, lo, hi }
    }

    /// Position of `value` along the axis, 0 at `lo` and 1 at `hi`.
    fn fraction(&self, value: f64) -> f64 {
        self.fraction_of_log(value.log(self.base))
    }

    /// Position of a value whose log (in the axis' base) is `log`.
    fn fraction_of_log(&self, log: f64) -> f64 {
        (log - self.lo) / (self.hi - self.lo)
    }
}

/// Smallest and largest log of the plottable values, or `None` when there are none.
fn log_bounds(base: f64, values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.filter(|&value| plottable(value)).map(|value| value.log(base)).fold(None, |acc, v| {
        match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((f64::min(lo, v), f64::max(hi, v))),
        }
    })
}

fn x_px(axis: &LogAxis, value: f64) -> f64 {
    PLOT_LEFT_PX + axis.fraction(value) * (PLOT_RIGHT_PX - PLOT_LEFT_PX)
}

fn y_px(axis: &LogAxis, value: f64) -> f64 {
    PLOT_BOTTOM_PX - axis.fraction(value) * (PLOT_BOTTOM_PX - PLOT_TOP_PX)
}

/// Renders a chart as a complete SVG document.
fn render(chart: &Chart, footer: &str) -> Drawn {
    let x_axis = LogAxis::padded(
        2.0,
        chart
            .x_ticks
            .iter()
            .map(|(x, _)| *x)
            .chain(chart.series.iter().flat_map(|s| s.points.iter().map(|p| p.0))),
    );
    let y_axis = LogAxis::decades(
        chart
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(chart.hlines.iter().map(|line| line.value)),
    );
    draw_svg(WIDTH_PX as u32, HEIGHT_PX as u32, |canvas| {
        canvas.text(WIDTH_PX / 2.0, 30.0, 16.0, Anchor::Middle, "", &chart.title);
        draw_grid_and_ticks(canvas, chart, &x_axis, &y_axis);
        let (width, height) = (PLOT_RIGHT_PX - PLOT_LEFT_PX, PLOT_BOTTOM_PX - PLOT_TOP_PX);
        canvas.rect(PLOT_LEFT_PX, PLOT_TOP_PX, width, height, None, Some("black"));
        for line in &chart.hlines {
            let y = y_px(&y_axis, line.value);
            canvas.line((PLOT_LEFT_PX, y), (PLOT_RIGHT_PX, y), LIMIT_COLOUR, 1.5, Some(DASH));
            canvas.text(PLOT_RIGHT_PX - 6.0, y - 5.0, 12.0, Anchor::End, LIMIT_COLOUR, &line.label);
        }
        for series in &chart.series {
            draw_series(canvas, series, &x_axis, &y_axis);
        }
        if chart.series.is_empty() {
            let (x, y) =
                ((PLOT_LEFT_PX + PLOT_RIGHT_PX) / 2.0, (PLOT_TOP_PX + PLOT_BOTTOM_PX) / 2.0);
            let note = "no plottable points (zero or not finite)";
            canvas.text(x, y, 14.0, Anchor::Middle, "#7f7f7f", note);
        }
        draw_legend(canvas, chart);
        let middle = (PLOT_LEFT_PX + PLOT_RIGHT_PX) / 2.0;
        canvas.text(middle, PLOT_BOTTOM_PX + 45.0, 14.0, Anchor::Middle, "", &chart.x_label);
        let (label_x, label_y) = (22.0, (PLOT_TOP_PX + PLOT_BOTTOM_PX) / 2.0);
        canvas.text_up(label_x, label_y, 14.0, Anchor::Middle, "", &chart.y_label);
        canvas.text(10.0, HEIGHT_PX - 20.0, 11.0, Anchor::Start, "#444444", footer);
    })
}

/// Grid lines, tick marks and tick labels of both axes.
fn draw_grid_and_ticks(canvas: &mut Canvas<'_>, chart: &Chart, x_axis: &LogAxis, y_axis: &LogAxis) {
    for (value, label) in &chart.x_ticks {
        if !plottable(*value) {
            continue;
        }
        let x = x_px(x_axis, *value);
        canvas.line((x, PLOT_TOP_PX), (x, PLOT_BOTTOM_PX + 5.0), "#e5e5e5", 1.0, None);
        canvas.text(x, PLOT_BOTTOM_PX + 20.0, 12.0, Anchor::Middle, "", label);
    }
    // Bounds are floors and ceilings of logs of finite values: well within i32.
    let (lo, hi) = (y_axis.lo as i32, y_axis.hi as i32);
    let decades = (hi - lo).max(1) as usize;
    let step = decades.div_ceil(MAX_TICK_LABELS).max(1);
    let y_of_log =
        |log: f64| PLOT_BOTTOM_PX - y_axis.fraction_of_log(log) * (PLOT_BOTTOM_PX - PLOT_TOP_PX);
    if decades <= MINOR_TICK_DECADES_MAX {
        // Unlabelled grid lines at 2..9 times each decade; labelled at 2 and 5 when the axis
        // spans a single decade, so it never has only two labels.
        for exponent in lo..hi {
            for mantissa in 2..=9u32 {
                let y = y_of_log(f64::from(exponent) + f64::from(mantissa).log10());
                canvas.line((PLOT_LEFT_PX, y), (PLOT_RIGHT_PX, y), "#f2f2f2", 1.0, None);
                if decades == 1 && (mantissa == 2 || mantissa == 5) {
                    let decade = (chart.y_tick_label)(exponent);
                    let label = format!("{mantissa}{}", decade.get(1..).unwrap_or_default());
                    canvas.text(PLOT_LEFT_PX - 8.0, y + 4.0, 11.0, Anchor::End, "#555555", &label);
                }
            }
        }
    }
    for (index, exponent) in (lo..=hi).enumerate() {
        let y = y_of_log(f64::from(exponent));
        canvas.line((PLOT_LEFT_PX - 5.0, y), (PLOT_RIGHT_PX, y), "#e5e5e5", 1.0, None);
        if index % step == 0 {
            let label = (chart.y_tick_label)(exponent);
            canvas.text(PLOT_LEFT_PX - 8.0, y + 4.0, 12.0, Anchor::End, "", &label);
        }
    }
}

/// The line (2 points or more) and the markers of one series.
fn draw_series(canvas: &mut Canvas<'_>, series: &Series, x_axis: &LogAxis, y_axis: &LogAxis) {
    let pixels: Vec<(f64, f64)> = series
        .points
        .iter()
        .map(|&(x, y)| (x_px(x_axis, x), y_px(y_axis, y)))
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    let dash = series.dashed.then_some(DASH);
    canvas.polyline(&pixels, series.colour, 2.0, dash);
    for &(x, y) in &pixels {
        marker(canvas, x, y, series);
    }
}

/// A filled circle for the log's backends, a hollow square for the peers.
fn marker(canvas: &mut Canvas<'_>, x: f64, y: f64, series: &Series) {
    if series.dashed {
        canvas.rect(x - 3.5, y - 3.5, 7.0, 7.0, Some("white"), Some(series.colour));
    } else {
        canvas.circle(x, y, 4.0, series.colour);
    }
}

/// The legend to the right of the plotting area: one entry per series and reference line.
fn draw_legend(canvas: &mut Canvas<'_>, chart: &Chart) {
    let x = PLOT_RIGHT_PX + 20.0;
    let mut y = PLOT_TOP_PX + 10.0;
    for series in &chart.series {
        let dash = series.dashed.then_some(LEGEND_DASH);
        canvas.line((x, y), (x + 30.0, y), series.colour, 2.0, dash);
        marker(canvas, x + 15.0, y, series);
        canvas.text(x + 38.0, y + 4.0, 12.0, Anchor::Start, "", &series.label);
        y += 22.0;
    }
    for line in &chart.hlines {
        canvas.line((x, y), (x + 30.0, y), LIMIT_COLOUR, 1.5, Some(DASH));
        canvas.text(x + 38.0, y + 4.0, 12.0, Anchor::Start, "", &line.label);
        y += 22.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Machine;
    use crate::wal::{PeerPoint, SyncLimit, WalPoint};

    fn machine() -> Machine {
        Machine {
            cpu_model: "Test CPU <x86> & \"friends\"".into(),
            cores: 8,
            memory_bytes: 16 << 30,
            kernel: "6.1.0".into(),
            flush: "clwb".into(),
            clwb: true,
            clflushopt: true,
            clflush: true,
            avx512f: false,
        }
    }

    fn point(backend: &str, threads: usize, record_bytes: usize, commits_per_s: f64) -> WalPoint {
        WalPoint {
            backend: backend.into(),
            pmem_mode: None,
            threads,
            record_bytes,
            durability: "sync".into(),
            commits: 1000,
            commits_per_s,
            latency_ns_p50: 20_000 + record_bytes as u64,
            latency_ns_p99: 50_000,
            latency_ns_p999: 90_000,
            latency_ns_max: 1_000_000,
            records_per_sync: 1.0,
            sync_busy: 0.5,
            rotations: 0,
            rotation_waits: 0,
            elapsed_s: 1.0,
            cpu_s: 0.5,
            fdatasync_limit_around: None,
            limit_trial_ratios: Vec::new(),
        }
    }

    fn peer(engine: &str, threads: usize, record_bytes: usize, commits_per_s: f64) -> PeerPoint {
        PeerPoint {
            engine: engine.into(),
            setup: "test".into(),
            threads,
            record_bytes,
            commits_per_s,
            latency_ns_p50: Some(40_000),
        }
    }

    fn report(points: Vec<WalPoint>, peers: Vec<PeerPoint>) -> WalReport {
        WalReport {
            command: "tierkv bench wal".into(),
            machine: machine(),
            path: PathBuf::from("/mnt/<pmem>"),
            fs_type: "tmpfs".into(),
            fs_is_memory: true,
            dax: false,
            duration_per_point_s: 1.0,
            fdatasync_limit: SyncLimit { latency_ns_mean: 50_000.0, per_s: 20_000.0, samples: 10 },
            points,
            peers,
            peers_skipped: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn full_report() -> WalReport {
        let mut points = Vec::new();
        for backend in ["file", "pmem"] {
            for record in [64, 4096] {
                for threads in [1, 2, 4, 8] {
                    let rate =
                        10_000.0 * threads as f64 * if backend == "pmem" { 50.0 } else { 1.0 };
                    points.push(point(backend, threads, record, rate));
                }
            }
        }
        let peers = vec![
            peer("rocksdb", 1, 64, 15_000.0),
            peer("rocksdb", 4, 64, 40_000.0),
            peer("sqlite", 1, 64, 9_000.0),
            peer("sqlite", 1, 4096, 8_000.0),
        ];
        report(points, peers)
    }

    fn assert_well_formed(svg: &str) {
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
        for bad in ["NaN", "=\"inf", "=\"-inf", "inf,", "inf "] {
            assert!(!svg.contains(bad), "{bad} in {svg}");
        }
    }

    #[test]
    fn writes_one_commits_plot_per_record_size_and_the_latency_plot() {
        let dir = tempfile::tempdir().unwrap();
        let written = write_plots(&full_report(), dir.path()).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "commits-vs-threads-4KiB.svg",
                "commits-vs-threads-64B.svg",
                "latency-p50-vs-record.svg"
            ]
        );
        for path in &written {
            assert!(path.starts_with(dir.path()));
            let svg = std::fs::read_to_string(path).unwrap();
            assert_well_formed(&svg);
            assert!(svg.contains("Test CPU &lt;x86&gt; &amp; &quot;friends&quot;"));
            assert!(svg.contains("tmpfs (memory)"));
            assert!(svg.contains("/mnt/&lt;pmem&gt;"));
            assert!(!svg.contains("<x86>"));
        }
        let svg_64 =
            std::fs::read_to_string(dir.path().join("commits-vs-threads-64B.svg")).unwrap();
        // file and pmem solid; rocksdb (2 points) dashed; sqlite has one point at 64 B:
        // markers, no line.
        assert_eq!(svg_64.matches("<polyline").count(), 2);
        assert!(svg_64.contains("fdatasync limit"));
        assert!(svg_64.matches("stroke=\"#FF7F0E\" stroke-width=\"2\" x1=").count() > 5);
        for label in ["10k", "100k", "1M"] {
            assert!(svg_64.contains(&format!(">\n{label}\n</text>")), "{label}");
        }
        let svg_4k =
            std::fs::read_to_string(dir.path().join("commits-vs-threads-4KiB.svg")).unwrap();
        assert_eq!(svg_4k.matches("<polyline").count(), 2);
        let latency =
            std::fs::read_to_string(dir.path().join("latency-p50-vs-record.svg")).unwrap();
        // file and pmem over 64 B and 4 KiB; sqlite too, dashed; rocksdb has one
        // single-thread point.
        assert_eq!(latency.matches("<polyline").count(), 2);
        assert!(latency.contains(">\n10µs\n</text>") && latency.contains(">\n20µs\n</text>"));
        assert!(latency.contains(">\n64B\n</text>") && latency.contains(">\n4KiB\n</text>"));
    }

    #[test]
    fn an_empty_report_writes_no_plot() {
        let dir = tempfile::tempdir().unwrap();
        let written = write_plots(&report(Vec::new(), Vec::new()), dir.path()).unwrap();
        assert!(written.is_empty());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn degenerate_values_do_not_panic_and_are_left_out() {
        let points = vec![
            point("file", 1, 64, 0.0),
            point("file", 2, 64, f64::NAN),
            point("file", 0, 64, 1000.0),
            point("pmem", 4, 64, f64::INFINITY),
            point("pmem", 1, 128, 5_000.0),
            point("pmem", 2, 128, 5_000.0),
            WalPoint { latency_ns_p50: 0, ..point("file", 1, 0, -1.0) },
        ];
        let mut report = report(points, vec![peer("rocksdb", 1, 64, f64::NAN)]);
        report.fdatasync_limit =
            SyncLimit { latency_ns_mean: 0.0, per_s: f64::INFINITY, samples: 0 };
        let dir = tempfile::tempdir().unwrap();
        let written = write_plots(&report, dir.path()).unwrap();
        assert_eq!(written.len(), 4);
        for path in &written {
            assert_well_formed(&std::fs::read_to_string(path).unwrap());
        }
        let svg_64 =
            std::fs::read_to_string(dir.path().join("commits-vs-threads-64B.svg")).unwrap();
        assert_eq!(svg_64.matches("<polyline").count(), 0);
        assert!(svg_64.contains("no plottable points"));
        assert!(!svg_64.contains("fdatasync limit"));
        // Two equal values still make a line on a non-empty axis.
        let svg_128 =
            std::fs::read_to_string(dir.path().join("commits-vs-threads-128B.svg")).unwrap();
        assert_eq!(svg_128.matches("<polyline").count(), 1);
    }

    #[test]
    fn a_single_point_makes_markers_and_no_line() {
        let dir = tempfile::tempdir().unwrap();
        let written =
            write_plots(&report(vec![point("file", 1, 1024, 1e6)], Vec::new()), dir.path())
                .unwrap();
        assert_eq!(written.len(), 2);
        let svg = std::fs::read_to_string(dir.path().join("commits-vs-threads-1KiB.svg")).unwrap();
        assert_well_formed(&svg);
        assert_eq!(svg.matches("<polyline").count(), 0);
        assert!(svg.contains("<circle"));
    }

    #[test]
    fn labels_and_record_names() {
        assert_eq!(size_name(64), "64B");
        assert_eq!(size_name(1024), "1KiB");
        assert_eq!(size_name(4096), "4KiB");
        assert_eq!(size_name(1500), "1500B");
        assert_eq!(size_name(1 << 20), "1MiB");
        assert_eq!(count_label(3), "1k");
        assert_eq!(count_label(7), "10M");
        assert_eq!(count_label(-1), "1e-1");
        assert_eq!(count_label(20), "1e20");
        assert_eq!(nanos_label(2), "100ns");
        assert_eq!(nanos_label(3), "1µs");
        assert_eq!(nanos_label(6), "1ms");
    }
}
