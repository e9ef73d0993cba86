//! SVG plots of a device-lab report, after the seeds' figures: bandwidth against transfer
//! size per access method (seed 004's IOR sweeps, 128 B to 16 MiB, fsdax against PMDK), and
//! bandwidth against thread count per method (seed 000's "Sequential reads on SSD and SCM with
//! a warm buffer cache" and its siblings), plus the tierkv/fio ratio of `--compare-fio`.
//!
//! Invariants:
//! - Each method has one fixed colour and marker in every plot (syscall blue circle, direct
//!   orange triangle, mmap green square, pmem purple cross), and at most one line
//!   (`<polyline>`) per method; the legend is drawn with rectangles and markers, never lines,
//!   so a bandwidth plot holds no other polyline of a method's colour.
//! - Both axes of the bandwidth plots are logarithmic (log2 sizes or thread counts, log10
//!   MB/s) and computed here, with explicit ticks, so a range is never empty or inverted:
//!   equal or tiny values are padded. Bandwidths that cannot sit on a log axis (zero, NaN) are
//!   left out of the line rather than drawn at a made-up place.
//! - Every plot carries a footer naming the machine's CPU, the file system and the pmem mode:
//!   a figure without its machine is not a result.
//! - Only the pure-Rust SVG backend is used (no font libraries: text size is estimated), so
//!   this builds on a bare CI machine.
//!
//! Must never: write outside `dir`, panic on a degenerate report (no points, one point, one
//! size), or silently drop a whole group (groups that cannot make a plot are skipped by the
//! rules documented on `write_plots`).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::backend::SVGBackend;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use tierkv_io::AccessMethod;

use super::output::{fio_agrees, FIO_AGREEMENT_RATIO_MAX, FIO_AGREEMENT_RATIO_MIN};
use super::{format_bytes, BenchError, CacheState, DeviceReport, IoOp, Pattern, PointResult};

/// Width of the bandwidth plots, pixels: room for 18 size labels (128 B to 16 MiB) side by side.
const WIDTH_PX: u32 = 1200;
/// Height of every plot, pixels.
const HEIGHT_PX: u32 = 620;
/// Width of the legend panel on the right, pixels.
const LEGEND_WIDTH_PX: u32 = 180;
/// Height of the machine footer, pixels.
const FOOTER_HEIGHT_PX: u32 = 30;
/// The font family every text uses (resolved by the SVG viewer).
const FONT: &str = "sans-serif";

/// Transfer sizes the thread-count plots prefer: a page and a large block.
const PREFERRED_SIZES_BYTES: [u64; 2] = [4096, 1 << 20];

/// Writes the plots into `dir` and returns their paths.
///
/// - `bw-vs-size-{op}-{pattern}-{cache}-t{threads}.svg` for every (op, pattern, cache) and
///   thread count present, with at least 2 points in total;
/// - `bw-vs-threads-{op}-{pattern}-{cache}-{size}.svg` for every (op, pattern, cache) at 4 KiB
///   and 1 MiB (a missing one replaced by the smallest, respectively largest, size present),
///   where at least 2 thread counts were measured;
/// - `fio-ratio.svg` when the report has fio comparisons.
///
/// `dir` is created if missing. The paths come back sorted.
pub fn write_plots(report: &DeviceReport, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    std::fs::create_dir_all(dir)
        .map_err(|source| BenchError::Output { path: dir.to_path_buf(), source })?;
    let footer = footer_text(report);
    let mut written = Vec::new();
    // Render and write one plot at a time: a full sweep makes dozens of them.
    for plan in plan_bandwidth_plots(report) {
        let svg = render_bandwidth(&plan.chart, &footer);
        written.push(write_svg(dir, &plan.file_name, svg)?);
    }
    if !report.fio.is_empty() {
        written.push(write_svg(dir, "fio-ratio.svg", render_fio_ratio(report, &footer))?);
    }
    written.sort();
    Ok(written)
}

/// Writes one rendered plot as `dir/file_name`; a plotting failure is reported as an output
/// error on that file.
fn write_svg(dir: &Path, file_name: &str, svg: DrawResult<String>) -> Result<PathBuf, BenchError> {
    let path = dir.join(file_name);
    let svg = svg.map_err(|e| BenchError::Output {
        path: path.clone(),
        source: std::io::Error::other(format!("plotting failed: {e}")),
    })?;
    debug_assert!(svg.starts_with("<svg"), "the SVG backend writes a bare <svg> document");
    std::fs::write(&path, svg)
        .map_err(|source| BenchError::Output { path: path.clone(), source })?;
    Ok(path)
}

/// The colour of a method in every plot (Tableau 10: blue, orange, green, purple; purple
/// rather than red so that green and the fourth colour stay apart for red-green blindness).
fn method_colour(method: AccessMethod) -> RGBColor {
    match method {
        AccessMethod::Syscall => RGBColor(0x1f, 0x77, 0xb4),
        AccessMethod::Direct => RGBColor(0xff, 0x7f, 0x0e),
        AccessMethod::Mmap => RGBColor(0x2c, 0xa0, 0x2c),
        AccessMethod::Pmem => RGBColor(0x94, 0x67, 0xbd),
    }
}

/// The legend text of a method: its name, with what it means on this file where it varies.
fn method_label(method: AccessMethod, report: &DeviceReport) -> String {
    match method {
        AccessMethod::Direct => "direct (O_DIRECT)".to_string(),
        AccessMethod::Pmem => format!("pmem ({})", report.file.pmem_mode.name()),
        other => other.name().to_string(),
    }
}

/// "AMD EPYC 9654, 16 cores, kernel 6.8.0 | ext4, pmem mode msync | 1 s per point".
fn footer_text(report: &DeviceReport) -> String {
    let machine = &report.machine;
    let dax = if report.file.dax { " (DAX)" } else { "" };
    format!(
        "{}, {} cores, kernel {} | {}{dax}, pmem mode {} | {} s per point",
        machine.cpu_model.trim(),
        machine.cores,
        machine.kernel,
        report.file.fs_type,
        report.file.pmem_mode.name(),
        report.duration_per_point_s,
    )
}

/// One line of a bandwidth plot: a method's points as (x, log10 MB/s), sorted by x.
struct Line {
    method: AccessMethod,
    points: Vec<(f64, f64)>,
    /// Points left out because their bandwidth has no place on a log axis (0, NaN).
    omitted: usize,
}

/// What a bandwidth plot shows, in plot coordinates: x is log2 of the swept quantity, y is
/// log10 of MB/s.
struct BandwidthChart {
    title: String,
    x_desc: String,
    /// Tick positions (log2) and their labels.
    x_ticks: Vec<(f64, String)>,
    lines: Vec<Line>,
    /// Legend labels, in line order.
    labels: Vec<String>,
}

/// A plot to write: its file name and content.
struct PlotPlan {
    file_name: String,
    chart: BandwidthChart,
}

/// The x-axis of a bandwidth plot.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sweep {
    Size,
    Threads,
}

/// Every bandwidth plot the report supports, in file-name order within each kind.
fn plan_bandwidth_plots(report: &DeviceReport) -> Vec<PlotPlan> {
    let mut groups: BTreeMap<(IoOp, Pattern, CacheState), Vec<&PointResult>> = BTreeMap::new();
    for point in &report.points {
        let spec = &point.spec;
        groups.entry((spec.op, spec.pattern, spec.cache)).or_default().push(point);
    }
    let mut plans = Vec::new();
    for (&(op, pattern, cache), points) in &groups {
        let describe = format!("{pattern} {op}, {cache} cache");
        let slug = format!("{op}-{pattern}-{cache}");
        let thread_counts: BTreeSet<usize> = points.iter().map(|p| p.spec.threads).collect();
        for &threads in &thread_counts {
            let selected: Vec<&PointResult> =
                points.iter().copied().filter(|p| p.spec.threads == threads).collect();
            if selected.len() < 2 {
                continue;
            }
            let noun = if threads == 1 { "thread" } else { "threads" };
            plans.push(PlotPlan {
                file_name: format!("bw-vs-size-{slug}-t{threads}.svg"),
                chart: bandwidth_chart(
                    report,
                    format!("{describe}, {threads} {noun} — bandwidth by transfer size"),
                    &selected,
                    Sweep::Size,
                ),
            });
        }
        let sizes: BTreeSet<u64> = points.iter().map(|p| p.spec.transfer_bytes).collect();
        for size_bytes in representative_sizes(&sizes) {
            let selected: Vec<&PointResult> =
                points.iter().copied().filter(|p| p.spec.transfer_bytes == size_bytes).collect();
            let distinct_threads: BTreeSet<usize> =
                selected.iter().map(|p| p.spec.threads).collect();
            if distinct_threads.len() < 2 {
                continue;
            }
            let size = format_bytes(size_bytes);
            plans.push(PlotPlan {
                file_name: format!("bw-vs-threads-{slug}-{}.svg", size.replace(' ', "")),
                chart: bandwidth_chart(
                    report,
                    format!("{describe}, {size} transfers — bandwidth by thread count"),
                    &selected,
                    Sweep::Threads,
                ),
            });
        }
    }
    plans
}

/// 4 KiB and 1 MiB where measured; a missing 4 KiB is replaced by the smallest size and a
/// missing 1 MiB by the largest, so a sweep that avoids both still gets its two ends.
fn representative_sizes(sizes: &BTreeSet<u64>) -> BTreeSet<u64> {
    let [small, large] = PREFERRED_SIZES_BYTES;
    let mut chosen = BTreeSet::new();
    let (Some(&smallest), Some(&largest)) = (sizes.first(), sizes.last()) else {
        return chosen;
    };
    chosen.insert(if sizes.contains(&small) { small } else { smallest });
    chosen.insert(if sizes.contains(&large) { large } else { largest });
    chosen
}

/// Builds the lines and ticks of one bandwidth plot from its points.
fn bandwidth_chart(
    report: &DeviceReport,
    title: String,
    points: &[&PointResult],
    sweep: Sweep,
) -> BandwidthChart {
    let x_of = |point: &PointResult| -> u64 {
        match sweep {
            Sweep::Size => point.spec.transfer_bytes,
            Sweep::Threads => point.spec.threads as u64,
        }
    };
    let mut by_method: BTreeMap<AccessMethod, Line> = BTreeMap::new();
    for point in points {
        let method = point.spec.method;
        let line =
            by_method.entry(method).or_insert(Line { method, points: Vec::new(), omitted: 0 });
        let mb_per_s = point.bytes_per_s / 1e6;
        // A log axis has no place for 0 (a point that moved nothing) or NaN: count it, so the
        // legend can say so, rather than draw it at a made-up height.
        if mb_per_s.is_finite() && mb_per_s > 0.0 {
            line.points.push(((x_of(point).max(1) as f64).log2(), mb_per_s.log10()));
        } else {
            line.omitted += 1;
        }
    }
    let mut lines = Vec::new();
    let mut labels = Vec::new();
    for (method, mut line) in by_method {
        line.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        labels.push(method_label(method, report));
        lines.push(line);
    }
    let xs: BTreeSet<u64> = points.iter().map(|p| x_of(p).max(1)).collect();
    let (x_desc, x_ticks) = match sweep {
        Sweep::Size => ("transfer size per operation (log2 scale)".to_string(), size_ticks(&xs)),
        Sweep::Threads => ("threads (log2 scale)".to_string(), thread_ticks(&xs)),
    };
    BandwidthChart { title, x_desc, x_ticks, lines, labels }
}

/// Powers of two from the smallest to the largest size (every other one past 18 ticks),
/// labelled `128 B`, `1 KiB`, ..., `16 MiB`.
fn size_ticks(sizes: &BTreeSet<u64>) -> Vec<(f64, String)> {
    let (Some(&smallest), Some(&largest)) = (sizes.first(), sizes.last()) else {
        return Vec::new();
    };
    let low_exponent = (smallest as f64).log2().floor() as u32;
    let high_exponent = ((largest as f64).log2().ceil() as u32).min(63);
    let count = high_exponent - low_exponent + 1;
    let step = if count > 18 { 2 } else { 1 };
    (low_exponent..=high_exponent)
        .step_by(step)
        .map(|exponent| (f64::from(exponent), format_bytes(1u64 << exponent)))
        .collect()
}

/// One tick per thread count measured.
fn thread_ticks(threads: &BTreeSet<u64>) -> Vec<(f64, String)> {
    threads.iter().map(|&count| ((count as f64).log2(), count.to_string())).collect()
}

/// The y range (log10 MB/s) and its ticks: at least a factor of 4 tall, padded, with ticks on
/// 1-2-5 steps (denser when the range is narrow, sparser when it spans many decades).
fn bandwidth_axis(lines: &[Line]) -> (Range<f64>, Vec<(f64, String)>) {
    let ys = lines.iter().flat_map(|line| line.points.iter().map(|&(_, y)| y));
    let (mut low, mut high) =
        ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| (lo.min(y), hi.max(y)));
    if !(low.is_finite() && high.is_finite()) {
        (low, high) = (0.0, 1.0);
    }
    let min_span = 4f64.log10();
    if high - low < min_span {
        let middle = (high + low) / 2.0;
        (low, high) = (middle - min_span / 2.0, middle + min_span / 2.0);
    }
    let pad = (high - low) * 0.06;
    let range = (low - pad)..(high + pad);
    let mut ticks = decade_ticks(&range, &[10, 20, 50]);
    if ticks.len() < 3 {
        ticks = decade_ticks(&range, &[10, 15, 20, 30, 50, 70]);
    }
    if ticks.len() > 14 {
        ticks = decade_ticks(&range, &[10]);
    }
    if ticks.len() > 14 {
        // Many decades (a mostly failed run): every other decade.
        ticks = ticks.into_iter().step_by(2).collect();
    }
    (range, ticks)
}

/// Ticks at `mantissa / 10 * 10^decade` within `range` (log10 units), with their labels.
fn decade_ticks(range: &Range<f64>, mantissas: &[u32]) -> Vec<(f64, String)> {
    let first_decade = range.start.floor() as i32;
    let last_decade = range.end.ceil() as i32;
    let mut ticks = Vec::new();
    for decade in first_decade..=last_decade {
        for &mantissa in mantissas {
            let value = f64::from(mantissa) / 10.0 * 10f64.powi(decade);
            let position = value.log10();
            if range.contains(&position) {
                ticks.push((position, mb_label(mantissa, decade)));
            }
        }
    }
    ticks
}

/// Exact text of `mantissa / 10 * 10^decade` (no float noise such as 0.30000000000000004).
fn mb_label(mantissa: u32, decade: i32) -> String {
    // value = mantissa * 10^(decade - 1)
    let exponent = decade - 1;
    if exponent >= 0 {
        let scaled = u64::from(mantissa) * 10u64.pow(exponent.unsigned_abs().min(18));
        return scaled.to_string();
    }
    let decimals = exponent.unsigned_abs() as usize;
    let value = f64::from(mantissa) * 10f64.powi(exponent);
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// Finds the label of the tick at `value`.
fn tick_label(ticks: &[(f64, String)], value: f64) -> String {
    ticks
        .iter()
        .find(|(position, _)| (position - value).abs() < 1e-9)
        .map_or_else(String::new, |(_, label)| label.clone())
}

type DrawResult<T> = Result<T, Box<dyn std::error::Error>>;

/// A linear axis over plot coordinates with ticks chosen here (plotters' own log axis puts
/// no tick at all on a range inside one decade, and its key-point wrapper cannot take a label
/// formatter).
struct TickedAxis {
    range: Range<f64>,
    ticks: Vec<f64>,
}

impl TickedAxis {
    fn new(range: Range<f64>, ticks: Vec<f64>) -> TickedAxis {
        debug_assert!(range.start < range.end, "axis ranges are padded before use");
        TickedAxis { range, ticks }
    }
}

impl Ranged for TickedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.range.end - self.range.start;
        let fraction = if span > 0.0 { (value - self.range.start) / span } else { 0.5 };
        let pixels = f64::from(limit.1 - limit.0) * fraction.clamp(-1.0, 2.0);
        limit.0 + pixels.round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Bold points only: the light mesh would add unlabelled lines between them.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// Renders a bandwidth plot to an SVG document.
fn render_bandwidth(chart: &BandwidthChart, footer: &str) -> DrawResult<String> {
    let (y_range, y_ticks) = bandwidth_axis(&chart.lines);
    let x_range = match (chart.x_ticks.first(), chart.x_ticks.last()) {
        (Some(first), Some(last)) => {
            let data = chart.lines.iter().flat_map(|l| l.points.iter().map(|&(x, _)| x));
            let (low, high) = data.fold((first.0, last.0), |(lo, hi), x| (lo.min(x), hi.max(x)));
            (low - 0.35)..(high + 0.35)
        }
        _ => 0.0..1.0,
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
        root.fill(&WHITE)?;
        let (upper, footer_area) = root.split_vertically(HEIGHT_PX - FOOTER_HEIGHT_PX);
        let (plot_area, legend_area) = upper.split_horizontally(WIDTH_PX - LEGEND_WIDTH_PX);
        let x_points: Vec<f64> = chart.x_ticks.iter().map(|(x, _)| *x).collect();
        let y_points: Vec<f64> = y_ticks.iter().map(|(y, _)| *y).collect();
        let mut context = ChartBuilder::on(&plot_area)
            .caption(&chart.title, (FONT, 20))
            .margin(12)
            .x_label_area_size(52)
            .y_label_area_size(76)
            .build_cartesian_2d(
                TickedAxis::new(x_range, x_points),
                TickedAxis::new(y_range, y_points),
            )?;
        context
            .configure_mesh()
            .x_desc(chart.x_desc.as_str())
            .y_desc("bandwidth, MB/s = 10^6 B/s (log scale)")
            .x_label_formatter(&|x| tick_label(&chart.x_ticks, *x))
            .y_label_formatter(&|y| tick_label(&y_ticks, *y))
            .bold_line_style(BLACK.mix(0.12))
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 15))
            .draw()?;
        for line in &chart.lines {
            if line.points.is_empty() {
                continue;
            }
            let colour = method_colour(line.method);
            context.draw_series(LineSeries::new(line.points.clone(), colour.stroke_width(2)))?;
            draw_markers(&mut context, line.method, &line.points)?;
        }
        let methods: Vec<AccessMethod> = chart.lines.iter().map(|l| l.method).collect();
        let notes: Vec<String> = chart
            .lines
            .iter()
            .filter(|line| line.omitted > 0)
            .map(|line| format!("{}: {} not drawn (0 MB/s)", line.method, line.omitted))
            .collect();
        let notes: Vec<&str> = notes.iter().map(String::as_str).collect();
        draw_legend(&legend_area, &methods, &chart.labels, &notes)?;
        draw_footer(&footer_area, footer)?;
        root.present()?;
    }
    Ok(svg)
}

/// Draws a method's markers at `points` (shapes differ per method, so a plot still reads in
/// grey print or for colour-blind readers).
fn draw_markers<DB, X, Y>(
    context: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    method: AccessMethod,
    points: &[(f64, f64)],
) -> DrawResult<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let colour = method_colour(method);
    let points = points.iter().copied();
    match method {
        AccessMethod::Syscall => {
            context.draw_series(points.map(|p| Circle::new(p, 4, colour.filled())))?;
        }
        AccessMethod::Direct => {
            context.draw_series(points.map(|p| TriangleMarker::new(p, 6, colour.filled())))?;
        }
        AccessMethod::Mmap => {
            context.draw_series(points.map(|p| {
                EmptyElement::at(p) + Rectangle::new([(-4, -4), (4, 4)], colour.filled())
            }))?;
        }
        AccessMethod::Pmem => {
            context.draw_series(points.map(|p| Cross::new(p, 5, colour.stroke_width(2))))?;
        }
    }
    Ok(())
}

/// Draws the marker of `method` at a pixel position of a plain drawing area.
fn draw_pixel_marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    method: AccessMethod,
    at: (i32, i32),
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    let colour = method_colour(method);
    match method {
        AccessMethod::Syscall => area.draw(&Circle::new(at, 4, colour.filled()))?,
        AccessMethod::Direct => area.draw(&TriangleMarker::new(at, 6, colour.filled()))?,
        AccessMethod::Mmap => area
            .draw(&(EmptyElement::at(at) + Rectangle::new([(-4, -4), (4, 4)], colour.filled())))?,
        AccessMethod::Pmem => area.draw(&Cross::new(at, 5, colour.stroke_width(2)))?,
    }
    Ok(())
}

/// The legend panel: one swatch (a bar, not a line, see the module invariants) with the
/// method's marker per method, then `extra` lines of explanation.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    methods: &[AccessMethod],
    labels: &[String],
    extra: &[&str],
) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    let text_style = TextStyle::from((FONT, 14).into_font()).color(&BLACK);
    let mut y = 70;
    for (method, label) in methods.iter().zip(labels) {
        let colour = method_colour(*method);
        area.draw(&Rectangle::new([(4, y - 1), (30, y + 1)], colour.filled()))?;
        draw_pixel_marker(area, *method, (17, y))?;
        area.draw(&Text::new(label.clone(), (38, y - 8), text_style.clone()))?;
        y += 24;
    }
    let grey = BLACK.mix(0.7);
    let note_style = TextStyle::from((FONT, 12).into_font()).color(&grey);
    for line in extra {
        y += 4;
        area.draw(&Text::new(line.to_string(), (4, y - 8), note_style.clone()))?;
        y += 18;
    }
    Ok(())
}

/// The footer: which machine and file system the figures come from.
fn draw_footer<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, footer: &str) -> DrawResult<()>
where
    DB::ErrorType: 'static,
{
    let grey = BLACK.mix(0.65);
    let style = TextStyle::from((FONT, 13).into_font()).color(&grey);
    area.draw(&Text::new(footer.to_string(), (14, 6), style))?;
    Ok(())
}

/// Renders the tierkv/fio ratio of every comparison: a stem from 1.0 to the median ratio with
/// the method's marker, each repeat's own ratio as a small hollow dot, and the agreement band
/// [0.85, 1.15] shaded with reference lines at 0.85, 1.0 and 1.15.
fn render_fio_ratio(report: &DeviceReport, footer: &str) -> DrawResult<String> {
    let comparisons = &report.fio;
    let count = comparisons.len().max(1);
    // ~16 px per comparison keeps the stems apart; past 4000 px, label every k-th only.
    let width_px = (90 + 16 * count as u32 + LEGEND_WIDTH_PX).clamp(WIDTH_PX, 4000);
    let label_every = (16 * count).div_ceil(3600).max(1);
    let labels: Vec<String> = comparisons.iter().map(|c| c.spec.to_string()).collect();
    // Rotated labels hang below the axis: ~6 px per character at 12 px, plus the axis gap.
    let longest_label = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as u32;
    let label_area_px = 40 + 6 * longest_label;
    let height_px = HEIGHT_PX - 52 + label_area_px;
    let repeat_ratios: Vec<Vec<f64>> = comparisons
        .iter()
        .map(|c| {
            c.ours_bytes_per_s
                .iter()
                .zip(&c.fio_bytes_per_s)
                .map(|(ours, fio)| ours / fio)
                .filter(|ratio| ratio.is_finite())
                .collect()
        })
        .collect();
    let finite = comparisons
        .iter()
        .map(|c| c.ratio)
        .chain(repeat_ratios.iter().flatten().copied())
        .filter(|ratio| ratio.is_finite());
    let (low, high) = finite.fold((0.5f64, 1.5f64), |(lo, hi), r| (lo.min(r), hi.max(r)));
    let pad = (high - low) * 0.05;
    let y_range = (low - pad).max(0.0)..(high + pad);
    let x_range = -0.6..(count as f64 - 0.4);
    let x_points: Vec<f64> =
        (0..comparisons.len()).step_by(label_every).map(|i| i as f64).collect();
    let agreeing = comparisons.iter().filter(|c| fio_agrees(c.ratio)).count();
    let title = format!(
        "tierkv / fio bandwidth ratio per point — {agreeing} of {} within [{FIO_AGREEMENT_RATIO_MIN}, {FIO_AGREEMENT_RATIO_MAX}]",
        comparisons.len()
    );
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width_px, height_px)).into_drawing_area();
        root.fill(&WHITE)?;
        let (upper, footer_area) = root.split_vertically(height_px - FOOTER_HEIGHT_PX);
        let (plot_area, legend_area) = upper.split_horizontally(width_px - LEGEND_WIDTH_PX);
        let mut context = ChartBuilder::on(&plot_area)
            .caption(&title, (FONT, 20))
            .margin(12)
            .x_label_area_size(label_area_px)
            .y_label_area_size(76)
            .build_cartesian_2d(
                TickedAxis::new(x_range.clone(), x_points.clone()),
                y_range.clone(),
            )?;
        context
            .configure_mesh()
            .y_desc("tierkv MB/s ÷ fio MB/s (medians)")
            // The mesh centres x labels on their tick, which puts rotated text across the
            // plot; they are drawn below instead.
            .x_label_formatter(&|_| String::new())
            .label_style((FONT, 13))
            .y_label_formatter(&|y| format!("{y:.2}"))
            .bold_line_style(BLACK.mix(0.12))
            .light_line_style(TRANSPARENT)
            .axis_desc_style((FONT, 15))
            .draw()?;
        let label_style = TextStyle::from((FONT, 12).into_font())
            .transform(FontTransform::Rotate90)
            .pos(Pos::new(HPos::Left, VPos::Center));
        for &x in &x_points {
            let (tick_x_px, axis_y_px) = context.backend_coord(&(x, y_range.start));
            let label = labels.get(x as usize).cloned().unwrap_or_default();
            root.draw(&Text::new(label, (tick_x_px, axis_y_px + 10), label_style.clone()))?;
        }
        let band = RGBColor(0x2c, 0xa0, 0x2c).mix(0.10);
        context.draw_series(std::iter::once(Rectangle::new(
            [(x_range.start, FIO_AGREEMENT_RATIO_MIN), (x_range.end, FIO_AGREEMENT_RATIO_MAX)],
            band.filled(),
        )))?;
        for (reference, shade) in
            [(FIO_AGREEMENT_RATIO_MIN, 0.45), (1.0, 0.8), (FIO_AGREEMENT_RATIO_MAX, 0.45)]
        {
            context.draw_series(std::iter::once(PathElement::new(
                vec![(x_range.start, reference), (x_range.end, reference)],
                BLACK.mix(shade).stroke_width(1),
            )))?;
        }
        for (index, comparison) in comparisons.iter().enumerate() {
            let x = index as f64;
            let colour = method_colour(comparison.spec.method);
            for &ratio in &repeat_ratios[index] {
                context.draw_series(std::iter::once(Circle::new(
                    (x, ratio),
                    3,
                    colour.mix(0.6).stroke_width(1),
                )))?;
            }
            if comparison.ratio.is_finite() {
                context.draw_series(std::iter::once(PathElement::new(
                    vec![(x, 1.0), (x, comparison.ratio)],
                    colour.mix(0.7).stroke_width(2),
                )))?;
                draw_markers(&mut context, comparison.spec.method, &[(x, comparison.ratio)])?;
            }
        }
        let methods: BTreeSet<AccessMethod> = comparisons.iter().map(|c| c.spec.method).collect();
        let methods: Vec<AccessMethod> = methods.into_iter().collect();
        let method_labels: Vec<String> = methods.iter().map(|&m| method_label(m, report)).collect();
        draw_legend(
            &legend_area,
            &methods,
            &method_labels,
            &["marker: median ratio", "ring: one repeat", "band: 0.85 to 1.15"],
        )?;
        draw_footer(&footer_area, footer)?;
        root.present()?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use tierkv_io::AccessMethod;

    use super::*;
    use crate::device::output::tests::{point, report};
    use crate::device::FioComparison;

    const SIZES_BYTES: [u64; 4] = [128, 4096, 65536, 1 << 20];
    const THREADS: [usize; 3] = [1, 2, 4];

    /// Several methods, sizes and thread counts, warm and cold reads, warm writes.
    fn sweep_report() -> DeviceReport {
        let mut points = Vec::new();
        for method in [AccessMethod::Syscall, AccessMethod::Mmap, AccessMethod::Pmem] {
            for (op, cache) in [
                (IoOp::Read, CacheState::Warm),
                (IoOp::Read, CacheState::Cold),
                (IoOp::Write, CacheState::Warm),
            ] {
                for threads in THREADS {
                    for size in SIZES_BYTES {
                        let speed = match method {
                            AccessMethod::Mmap => 3.0,
                            AccessMethod::Pmem => 2.0,
                            _ => 1.0,
                        };
                        let mb_per_s = speed * threads as f64 * (size as f64).sqrt() * 20.0;
                        points.push(point(method, op, cache, size, threads, mb_per_s));
                    }
                }
            }
        }
        report(points)
    }

    fn polylines_of(svg: &str, colour: RGBColor) -> usize {
        let stroke = format!("stroke=\"#{:02X}{:02X}{:02X}\"", colour.0, colour.1, colour.2);
        svg.split('<').filter(|tag| tag.starts_with("polyline") && tag.contains(&stroke)).count()
    }

    #[test]
    fn sweep_writes_every_plot_with_a_line_per_method() {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = dir.path().join("plots");
        let mut report = sweep_report();
        let spec = report.points[0].spec;
        report.fio = vec![FioComparison {
            spec,
            fio_engine: "psync".to_string(),
            ours_bytes_per_s: vec![1.0e9, 1.1e9, 0.9e9],
            fio_bytes_per_s: vec![1.0e9, 1.0e9, 1.0e9],
            ours_median_bytes_per_s: 1.0e9,
            fio_median_bytes_per_s: 1.0e9,
            ratio: 1.0,
            fio_command: "fio".to_string(),
        }];
        let written = write_plots(&report, &out).expect("plots");
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().and_then(|n| n.to_str()).expect("name").to_string())
            .collect();
        let mut expected = Vec::new();
        for group in ["read-seq-warm", "read-seq-cold", "write-seq-warm"] {
            for threads in THREADS {
                expected.push(format!("bw-vs-size-{group}-t{threads}.svg"));
            }
            for size in ["4KiB", "1MiB"] {
                expected.push(format!("bw-vs-threads-{group}-{size}.svg"));
            }
        }
        expected.push("fio-ratio.svg".to_string());
        expected.sort();
        assert_eq!(names, expected);
        assert!(written.windows(2).all(|w| w[0] < w[1]), "sorted");
        for path in &written {
            let svg = std::fs::read_to_string(path).expect("read back");
            assert!(svg.starts_with("<svg"), "{}", path.display());
            assert!(svg.trim_end().ends_with("</svg>"), "{}", path.display());
            assert!(svg.contains("AMD EPYC 9654"), "footer names the CPU");
            assert!(svg.contains("ext4, pmem mode msync"), "footer names the file system");
            if names.iter().any(|n| path.ends_with(n) && n.starts_with("bw-")) {
                for method in [AccessMethod::Syscall, AccessMethod::Mmap, AccessMethod::Pmem] {
                    assert_eq!(polylines_of(&svg, method_colour(method)), 1, "{}", path.display());
                }
                assert_eq!(polylines_of(&svg, method_colour(AccessMethod::Direct)), 0);
                assert!(svg.contains("MB/s"));
            }
        }
        let size_plot = std::fs::read_to_string(out.join("bw-vs-size-read-seq-warm-t1.svg"))
            .expect("size plot");
        for label in ["128 B", "1 KiB", "1 MiB"] {
            assert!(size_plot.contains(&format!(">\n{label}\n<")) || size_plot.contains(label));
        }
        assert!(size_plot.contains("seq read, warm cache, 1 thread — bandwidth by transfer size"));
    }

    #[test]
    fn a_single_point_writes_no_size_plot() {
        let dir = tempfile::tempdir().expect("temp dir");
        let single = report(vec![point(
            AccessMethod::Syscall,
            IoOp::Read,
            CacheState::Warm,
            4096,
            1,
            100.0,
        )]);
        let written = write_plots(&single, dir.path()).expect("plots");
        assert!(written.is_empty(), "{written:?}");
        let empty = report(Vec::new());
        assert!(write_plots(&empty, dir.path()).expect("plots").is_empty());
    }

    #[test]
    fn degenerate_values_still_make_valid_plots() {
        let dir = tempfile::tempdir().expect("temp dir");
        // Equal bandwidths, a zero and a NaN, one transfer size, two thread counts.
        let points = vec![
            point(AccessMethod::Syscall, IoOp::Read, CacheState::Warm, 4096, 1, 5.0),
            point(AccessMethod::Syscall, IoOp::Read, CacheState::Warm, 4096, 2, 5.0),
            point(AccessMethod::Mmap, IoOp::Read, CacheState::Warm, 4096, 1, 0.0),
            point(AccessMethod::Mmap, IoOp::Read, CacheState::Warm, 4096, 2, f64::NAN),
        ];
        let written = write_plots(&report(points), dir.path()).expect("plots");
        let names: Vec<_> = written.iter().filter_map(|p| p.file_name()).collect();
        assert_eq!(
            names,
            [
                "bw-vs-size-read-seq-warm-t1.svg",
                "bw-vs-size-read-seq-warm-t2.svg",
                "bw-vs-threads-read-seq-warm-4KiB.svg"
            ]
        );
        for path in &written {
            let svg = std::fs::read_to_string(path).expect("read back");
            assert!(svg.starts_with("<svg") && !svg.contains("NaN"), "{}", path.display());
            assert!(svg.contains("not drawn (0 MB/s)"), "{}", path.display());
        }
    }

    #[test]
    fn representative_sizes_fall_back_to_the_ends() {
        let set = |sizes: &[u64]| sizes.iter().copied().collect::<BTreeSet<u64>>();
        assert_eq!(
            representative_sizes(&set(&[128, 4096, 1 << 20, 16 << 20])),
            set(&[4096, 1 << 20])
        );
        assert_eq!(representative_sizes(&set(&[128, 512, 8192])), set(&[128, 8192]));
        assert_eq!(representative_sizes(&set(&[4096])), set(&[4096]));
        assert!(representative_sizes(&set(&[])).is_empty());
    }

    #[test]
    fn axis_labels_are_exact() {
        assert_eq!(mb_label(10, 0), "1");
        assert_eq!(mb_label(20, 3), "2000");
        assert_eq!(mb_label(30, -1), "0.3");
        assert_eq!(mb_label(50, -2), "0.05");
        assert_eq!(mb_label(15, 0), "1.5");
        let (range, ticks) = bandwidth_axis(&[Line {
            method: AccessMethod::Syscall,
            points: vec![(0.0, 3.0), (1.0, 3.0)],
            omitted: 0,
        }]);
        assert!(range.start < 3.0 && range.end > 3.0);
        assert!(ticks.len() >= 2, "{ticks:?}");
        assert!(ticks.iter().any(|(_, label)| label == "1000"), "{ticks:?}");
    }
}
