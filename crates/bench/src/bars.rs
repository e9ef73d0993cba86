//! Bar charts, shared by the benchmarks' plots: grouped bars with a reference tick over each
//! (a seed's figure, a bound), on a linear axis from 0 or a logarithmic one when the values
//! span decades, drawn through plotters (`canvas`).
//!
//! Invariants:
//! - Each series has one fixed colour; a missing value (a skipped cell, zero, NaN) draws no
//!   bar and no label, never a bar at a made-up height.
//! - Value labels never overlap: a label wider than its bar is turned to read upwards, and the
//!   axis gets the headroom above the tallest bar that such a label needs.
//! - All text taken from a report is escaped (by the backend).
//!
//! Must never: panic on a degenerate chart (no groups, one value, equal values, zeros).

use crate::canvas::{draw_svg, plottable, text_width_px, Anchor, Canvas, Drawn};

pub(crate) const WIDTH_PX: f64 = 1080.0;
pub(crate) const HEIGHT_PX: f64 = 560.0;
pub(crate) const PLOT_LEFT_PX: f64 = 90.0;
pub(crate) const PLOT_RIGHT_PX: f64 = 800.0;
pub(crate) const PLOT_TOP_PX: f64 = 60.0;
pub(crate) const PLOT_BOTTOM_PX: f64 = 450.0;
/// Bars span more than this ratio between largest and smallest: the y axis is logarithmic.
pub(crate) const LOG_AXIS_SPAN_MIN: f64 = 30.0;

/// Colours of the series, in order (Tableau 10, without its grey, which marks bounds).
pub(crate) const COLOURS: [&str; 9] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#d62728", "#8c564b", "#e377c2", "#bcbd22",
    "#17becf",
];

/// One bar: a value, and the seed's figure for it.
#[derive(Debug, Default, Clone)]
pub(crate) struct Bar {
    pub(crate) value: Option<f64>,
    pub(crate) reference: Option<f64>,
}

/// One group of bars along the x axis.
#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) label: String,
    pub(crate) bars: Vec<Bar>,
}

#[derive(Debug)]
pub(crate) struct BarChart {
    pub(crate) title: String,
    pub(crate) y_label: String,
    pub(crate) series: Vec<String>,
    pub(crate) groups: Vec<Group>,
    pub(crate) reference_label: Option<String>,
}

/// A y axis: linear from 0, or logarithmic over whole decades.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Axis {
    Linear { max: f64, step: f64 },
    Log { lo: i32, hi: i32 },
}

impl Axis {
    pub(crate) fn for_values(values: impl Iterator<Item = f64>) -> Axis {
        let (lo, hi) = values
            .filter(|&v| plottable(v))
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        if hi <= 0.0 {
            return Axis::Linear { max: 1.0, step: 0.2 };
        }
        if hi / lo > LOG_AXIS_SPAN_MIN {
            return Axis::log(lo, hi);
        }
        Axis::linear(hi)
    }

    /// A logarithmic axis over the whole decades around the plottable `values`, at least one
    /// decade (none: 1 to 10).
    pub(crate) fn log_decades(values: impl Iterator<Item = f64>) -> Axis {
        let (lo, hi) = values
            .filter(|&v| plottable(v))
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        if hi <= 0.0 {
            return Axis::Log { lo: 0, hi: 1 };
        }
        Axis::log(lo, hi)
    }

    /// The decades from the one at or below `lo` to the one at or above `hi` (both positive
    /// and finite), at least one.
    fn log(lo: f64, hi: f64) -> Axis {
        // Bounds are logs of finite positive values: well within i32.
        let (lo, mut hi) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        if hi <= lo {
            hi = lo + 1;
        }
        Axis::Log { lo, hi }
    }

    /// A linear axis from 0 past `hi`, in about five nice steps.
    pub(crate) fn linear(hi: f64) -> Axis {
        if !plottable(hi) {
            return Axis::Linear { max: 1.0, step: 0.2 };
        }
        let step = nice_step(hi / 5.0);
        Axis::Linear { max: (hi / step).ceil().max(1.0) * step, step }
    }

    /// Position of `value`, 0 at the bottom and 1 at the top (clamped).
    pub(crate) fn fraction(&self, value: f64) -> f64 {
        let f = match *self {
            Axis::Linear { max, .. } => value / max,
            Axis::Log { lo, hi } => (value.log10() - f64::from(lo)) / f64::from(hi - lo),
        };
        f.clamp(0.0, 1.0)
    }

    pub(crate) fn ticks(&self) -> Vec<(f64, String)> {
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
pub(crate) fn nice_step(raw: f64) -> f64 {
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&step| step >= raw)
        .unwrap_or(10.0 * magnitude)
}

/// A compact number: 0.5, 12, 3.4k, 1.2M.
pub(crate) fn number(value: f64) -> String {
    let abs = value.abs();
    if abs >= 1e6 {
        let millions = format!("{:.3}", value / 1e6);
        format!("{}M", millions.trim_end_matches('0').trim_end_matches('.'))
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

/// Size of a value label over a bar, pixels.
const VALUE_LABEL_PX: f64 = 10.0;

/// The title, centred over the plot.
pub(crate) fn draw_title(canvas: &mut Canvas<'_>, title: &str) {
    canvas.text(WIDTH_PX / 2.0, 30.0, 15.0, Anchor::Middle, "", title);
}

/// The frame of the plotting area, the y axis' label and the footer, one line per line of
/// it, the last at the bottom.
pub(crate) fn draw_frame(canvas: &mut Canvas<'_>, y_label: &str, footer: &str) {
    canvas.rect(
        PLOT_LEFT_PX,
        PLOT_TOP_PX,
        PLOT_RIGHT_PX - PLOT_LEFT_PX,
        PLOT_BOTTOM_PX - PLOT_TOP_PX,
        None,
        Some("black"),
    );
    canvas.text_up(22.0, (PLOT_TOP_PX + PLOT_BOTTOM_PX) / 2.0, 13.0, Anchor::Middle, "", y_label);
    let lines: Vec<&str> = footer.lines().collect();
    for (index, line) in lines.iter().enumerate() {
        let y = HEIGHT_PX - 14.0 - 15.0 * (lines.len() - 1 - index) as f64;
        canvas.text(10.0, y, 11.0, Anchor::Start, "#444444", line);
    }
}

/// The y axis' grid lines and tick labels.
pub(crate) fn draw_y_grid(canvas: &mut Canvas<'_>, axis: &Axis) {
    for (value, label) in axis.ticks() {
        let y = PLOT_BOTTOM_PX - axis.fraction(value) * (PLOT_BOTTOM_PX - PLOT_TOP_PX);
        canvas.line((PLOT_LEFT_PX - 5.0, y), (PLOT_RIGHT_PX, y), "#e5e5e5", 1.0, None);
        canvas.text(PLOT_LEFT_PX - 8.0, y + 4.0, 11.0, Anchor::End, "", &label);
    }
}

/// Whether a value's label fits over a bar of `bar_px` level; if not it reads upwards.
fn label_fits_level(label: &str, bar_px: f64) -> bool {
    text_width_px(label, VALUE_LABEL_PX) <= bar_px
}

/// The y axis of `chart`: over its values and references, with room over the tallest bar
/// for its label when the labels read upwards.
fn bar_axis(chart: &BarChart, bar_px: f64) -> Axis {
    let values = || {
        chart
            .groups
            .iter()
            .flat_map(|g| g.bars.iter().flat_map(|b| [b.value, b.reference]))
            .flatten()
    };
    let axis = Axis::for_values(values());
    let plot_px = PLOT_BOTTOM_PX - PLOT_TOP_PX;
    // Each upright label's bar, with the fraction of the plot its label needs above it
    // (capped, so a plot too short for a label still has room for its bar).
    let upright: Vec<(f64, f64)> = chart
        .groups
        .iter()
        .flat_map(|g| &g.bars)
        .filter_map(|bar| bar.value.filter(|&v| plottable(v)))
        .map(|value| (value, number(value)))
        .filter(|(_, label)| !label_fits_level(label, bar_px))
        .map(|(value, label)| {
            (value, ((text_width_px(&label, VALUE_LABEL_PX) + 8.0) / plot_px).min(0.8))
        })
        .collect();
    if upright.iter().all(|&(value, room)| axis.fraction(value) + room <= 1.0) {
        return axis;
    }
    // Raise the top until each such bar ends at most 1 - room of the way up.
    match axis {
        Axis::Linear { max, .. } => {
            let top = upright.iter().map(|&(value, room)| value / (1.0 - room)).fold(max, f64::max);
            Axis::linear(top)
        }
        Axis::Log { lo, hi } => {
            let top = upright
                .iter()
                .map(|&(value, room)| {
                    f64::from(lo) + (value.log10() - f64::from(lo)) / (1.0 - room)
                })
                .fold(f64::from(hi), f64::max);
            Axis::Log { lo, hi: top.ceil() as i32 }
        }
    }
}

/// Renders `chart` with `footer` under it.
pub(crate) fn render_bars(chart: &BarChart, footer: &str) -> Drawn {
    let groups = chart.groups.len().max(1) as f64;
    let group_px = (PLOT_RIGHT_PX - PLOT_LEFT_PX) / groups;
    let series = chart.series.len().max(1) as f64;
    let bar_px = group_px * 0.8 / series;
    let axis = bar_axis(chart, bar_px - 2.0);
    draw_svg(WIDTH_PX as u32, HEIGHT_PX as u32, |canvas| {
        draw_title(canvas, &chart.title);
        draw_y_grid(canvas, &axis);
        let y_of = |v: f64| PLOT_BOTTOM_PX - axis.fraction(v) * (PLOT_BOTTOM_PX - PLOT_TOP_PX);
        for (g, group) in chart.groups.iter().enumerate() {
            let left = PLOT_LEFT_PX + g as f64 * group_px + group_px * 0.1;
            for (b, bar) in group.bars.iter().enumerate() {
                let x = left + b as f64 * bar_px;
                let colour = COLOURS[b % COLOURS.len()];
                if let Some(value) = bar.value.filter(|&v| plottable(v)) {
                    let y = y_of(value);
                    let width = (bar_px - 2.0).max(1.0);
                    canvas.rect(x, y, width, (PLOT_BOTTOM_PX - y).max(0.0), Some(colour), None);
                    let label = number(value);
                    let middle = x + width / 2.0;
                    if label_fits_level(&label, bar_px - 2.0) {
                        canvas.text(middle, y - 4.0, VALUE_LABEL_PX, Anchor::Middle, "", &label);
                    } else {
                        canvas.text_up(middle, y - 4.0, VALUE_LABEL_PX, Anchor::Start, "", &label);
                    }
                }
                if let Some(reference) = bar.reference.filter(|&v| plottable(v)) {
                    let y = y_of(reference);
                    canvas.line((x, y), (x + bar_px - 2.0, y), "black", 3.0, None);
                }
            }
            let middle = PLOT_LEFT_PX + (g as f64 + 0.5) * group_px;
            canvas.text(middle, PLOT_BOTTOM_PX + 18.0, 11.0, Anchor::Middle, "", &group.label);
        }
        if chart.groups.is_empty() {
            let middle = (PLOT_LEFT_PX + PLOT_RIGHT_PX) / 2.0;
            canvas.text(middle, 250.0, 14.0, Anchor::Middle, "#7f7f7f", "no data");
        }
        let mut legend_y = PLOT_TOP_PX + 10.0;
        for (index, name) in chart.series.iter().enumerate() {
            let colour = COLOURS[index % COLOURS.len()];
            canvas.rect(PLOT_RIGHT_PX + 12.0, legend_y - 10.0, 14.0, 14.0, Some(colour), None);
            canvas.text(PLOT_RIGHT_PX + 32.0, legend_y + 2.0, 11.0, Anchor::Start, "", name);
            legend_y += 22.0;
        }
        if let Some(label) = &chart.reference_label {
            let from = (PLOT_RIGHT_PX + 12.0, legend_y);
            canvas.line(from, (PLOT_RIGHT_PX + 26.0, legend_y), "black", 3.0, None);
            canvas.text(PLOT_RIGHT_PX + 32.0, legend_y + 4.0, 11.0, Anchor::Start, "", label);
            legend_y += 22.0;
        }
        if matches!(axis, Axis::Log { .. }) {
            let x = PLOT_RIGHT_PX + 12.0;
            canvas.text(x, legend_y + 4.0, 11.0, Anchor::Start, "#555555", "log scale");
        }
        draw_frame(canvas, &chart.y_label, footer);
    })
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
        // A log axis on request, whatever the span; over nothing, one decade.
        assert!(matches!(Axis::log_decades([20.0, 40.0].into_iter()), Axis::Log { lo: 1, hi: 2 }));
        assert!(matches!(
            Axis::log_decades([0.0, 0.5, 3.0].into_iter()),
            Axis::Log { lo: -1, hi: 1 }
        ));
        assert!(matches!(Axis::log_decades([100.0].into_iter()), Axis::Log { lo: 2, hi: 3 }));
        assert!(matches!(Axis::log_decades([f64::NAN].into_iter()), Axis::Log { lo: 0, hi: 1 }));
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(130.0), 200.0);
        assert_eq!(number(3_400.0), "3400");
        assert_eq!(number(34_000.0), "34k");
        assert_eq!(number(10_000_000.0), "10M");
        assert_eq!(number(1_428_242.0), "1.428M");
        assert_eq!(number(1.25), "1.2");
        assert_eq!(number(0.5), "0.5");
        assert_eq!(number(0.25), "0.25");
    }

    fn chart(groups: usize, series: usize, value: f64) -> BarChart {
        BarChart {
            title: "t <&>".into(),
            y_label: "ops/s".into(),
            series: (0..series).map(|s| format!("engine {s}")).collect(),
            groups: (0..groups)
                .map(|g| Group {
                    label: format!("{g}"),
                    bars: (0..series)
                        .map(|s| Bar { value: Some(value * (1 + s + g) as f64), reference: None })
                        .collect(),
                })
                .collect(),
            reference_label: None,
        }
    }

    #[test]
    fn wide_bars_label_level_and_narrow_ones_upright_with_room() {
        let wide = render_bars(&chart(2, 2, 123.0), "footer").expect("drawn");
        assert!(wide.contains(">\n123\n</text>"), "{wide}");
        assert_eq!(wide.matches("rotate(270").count(), 1, "the y label; values fit level");
        assert!(wide.contains("t &lt;&amp;&gt;"));
        // 7 groups of 7 engines, as YCSB draws: 12 px bars, labels like 1.234M read upwards.
        let narrow = chart(7, 7, 1_234_567.0);
        let svg = render_bars(&narrow, "footer").expect("drawn");
        assert_eq!(svg.matches("rotate(270").count(), 49 + 1, "49 values and the y label");
        // The tallest label still ends inside the plot: the axis grew above the bars.
        let bar_px = (PLOT_RIGHT_PX - PLOT_LEFT_PX) / 7.0 * 0.8 / 7.0 - 2.0;
        let axis = bar_axis(&narrow, bar_px);
        let top = 1_234_567.0 * 13.0;
        let room = (PLOT_BOTTOM_PX - PLOT_TOP_PX) * (1.0 - axis.fraction(top));
        assert!(room >= text_width_px(&number(top), VALUE_LABEL_PX), "{room}");
        let empty = BarChart { groups: Vec::new(), ..chart(0, 1, 1.0) };
        assert!(render_bars(&empty, "f").expect("drawn").contains("no data"));
    }
}
