//! Bar charts as hand-written SVG, shared by the benchmarks' plots: grouped bars with a
//! reference tick over each (a seed's figure, a bound), on a linear axis from 0 or a
//! logarithmic one when the values span decades.
//!
//! Invariants:
//! - Each series has one fixed colour; a missing value (a skipped cell, zero, NaN) draws no
//!   bar and no label, never a bar at a made-up height.
//! - All text taken from a report is escaped.
//!
//! Must never: panic on a degenerate chart (no groups, one value, equal values, zeros).

use std::fmt::Write as _;

use crate::svg::{escape, plottable, text};

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

pub(crate) fn svg_start(svg: &mut String, title: &str) {
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH_PX}\" height=\"{HEIGHT_PX}\" \
         viewBox=\"0 0 {WIDTH_PX} {HEIGHT_PX}\" font-family=\"sans-serif\">\n\
         <rect x=\"0\" y=\"0\" width=\"{WIDTH_PX}\" height=\"{HEIGHT_PX}\" fill=\"white\"/>\n"
    );
    text(svg, WIDTH_PX / 2.0, 30.0, 15, "middle", "", title);
}

pub(crate) fn svg_end(svg: &mut String, y_label: &str, footer: &str) {
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
    // One line per line of the footer, the last at the bottom.
    let lines: Vec<&str> = footer.lines().collect();
    for (index, line) in lines.iter().enumerate() {
        let y = HEIGHT_PX - 14.0 - 15.0 * (lines.len() - 1 - index) as f64;
        text(svg, 10.0, y, 11, "start", "#444444", line);
    }
    svg.push_str("</svg>\n");
}

pub(crate) fn y_grid(svg: &mut String, axis: &Axis) {
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

pub(crate) fn render_bars(chart: &BarChart, footer: &str) -> String {
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
}
