//! A line chart: one line per series, y on a linear axis from zero, x on a linear axis from
//! zero (seconds, as a rule) or a logarithmic one over whole decades (latency), with an
//! optional bound drawn as a dashed grey line. The block plots draw space amplification over
//! time with it, the engine plots resident memory over time, and the YCSB plots latency CDFs.
//!
//! Invariants:
//! - Each series has the colour of its place (`COLOURS`, then round again) unless it names
//!   its own, and a legend entry drawn in its colour and dash; a series with fewer than 2
//!   plottable points draws its points but no line.
//! - Only finite x (positive on a log axis) and positive finite y are drawn; nothing is drawn
//!   at a made-up place.
//! - Shades (`LineChart::shades`) mark spans of x, such as the workload that ran then, in light
//!   grey bands under the lines, labelled along the top where the label fits its band.
//!
//! Must never: panic on a degenerate chart (no series, one point, equal values, zeros).

use std::fmt::Write as _;

use crate::bars::{
    nice_step, number, svg_end, svg_start, y_grid, Axis, COLOURS, PLOT_BOTTOM_PX, PLOT_LEFT_PX,
    PLOT_RIGHT_PX, PLOT_TOP_PX,
};
use crate::svg::{escape, plottable, text};

/// One line: its name and its (x, y) points, in order of x.
#[derive(Default)]
pub(crate) struct Line {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
    /// Its colour; `None`: the colour of its place.
    pub(crate) colour: Option<&'static str>,
    /// Its SVG `stroke-dasharray` (`"8 4"`); `None`: solid.
    pub(crate) dash: Option<&'static str>,
}

/// How the x axis places values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Scale {
    /// Linear from zero.
    #[default]
    Linear,
    /// Logarithmic over whole decades.
    Log,
}

/// The chart.
pub(crate) struct LineChart {
    pub(crate) title: String,
    pub(crate) y_label: String,
    pub(crate) x_label: String,
    pub(crate) x_scale: Scale,
    pub(crate) lines: Vec<Line>,
    /// A value drawn across the plot, dashed, with its label.
    pub(crate) bound: Option<(f64, String)>,
    /// Spans of x (start, end, label), shaded in alternate bands.
    pub(crate) shades: Vec<(f64, f64, String)>,
}

/// Renders `chart` with `footer` under it.
pub(crate) fn render_lines(chart: &LineChart, footer: &str) -> String {
    let x_log = chart.x_scale == Scale::Log;
    let lines: Vec<(&Line, Vec<(f64, f64)>)> = chart
        .lines
        .iter()
        .map(|line| {
            let points = line.points.iter().copied().filter(|&(x, y)| {
                (if x_log { plottable(x) } else { x.is_finite() }) && plottable(y)
            });
            (line, points.collect())
        })
        .collect();
    let xs = || lines.iter().flat_map(|(_, points)| points.iter().map(|p| p.0));
    let x_max = xs()
        .chain(chart.shades.iter().map(|shade| shade.1).filter(|x| x.is_finite()))
        .fold(1.0f64, f64::max);
    let x_axis = x_log.then(|| Axis::log_decades(xs()));
    let values = lines.iter().flat_map(|(_, points)| points.iter().map(|p| p.1));
    let bound_value = chart.bound.as_ref().map(|(value, _)| *value).filter(|v| plottable(*v));
    // Linear: these figures never span decades, and a log axis would hide the bound. The
    // bound gets headroom, so a line at it does not run along the frame.
    let hi =
        values.chain(bound_value.map(|b| b * 1.2)).filter(|v| plottable(*v)).fold(0.0, f64::max);
    let y_axis = Axis::linear(hi);
    let mut svg = String::new();
    svg_start(&mut svg, &chart.title);
    let x_of = |x: f64| {
        let fraction = match &x_axis {
            Some(axis) => axis.fraction(x),
            None => x.clamp(0.0, x_max) / x_max,
        };
        PLOT_LEFT_PX + fraction * (PLOT_RIGHT_PX - PLOT_LEFT_PX)
    };
    let y_of = |y: f64| PLOT_BOTTOM_PX - y_axis.fraction(y) * (PLOT_BOTTOM_PX - PLOT_TOP_PX);
    for (index, (start, end, label)) in chart.shades.iter().enumerate() {
        if !(start.is_finite() && end.is_finite() && end > start) {
            continue;
        }
        let (left, right) = (x_of(*start), x_of(*end));
        let fill = if index % 2 == 0 { "#f2f2f2" } else { "#e6e6e6" };
        let _ = writeln!(
            svg,
            "<rect x=\"{left:.1}\" y=\"{PLOT_TOP_PX}\" width=\"{:.1}\" height=\"{}\" fill=\"{fill}\"/>",
            right - left,
            PLOT_BOTTOM_PX - PLOT_TOP_PX
        );
        // A label wider than its band would run into the next one's.
        if right - left >= 6.0 * label.chars().count() as f64 {
            text(
                &mut svg,
                (left + right) / 2.0,
                PLOT_TOP_PX + 14.0,
                10,
                "middle",
                "#555555",
                label,
            );
        }
    }
    y_grid(&mut svg, &y_axis);
    if let Some(axis) = &x_axis {
        // Decades only; a grid line at each, since a log axis is read against them.
        for (x, label) in axis.ticks() {
            let px = x_of(x);
            let _ = writeln!(
                svg,
                "<line x1=\"{px:.1}\" y1=\"{PLOT_TOP_PX}\" x2=\"{px:.1}\" y2=\"{}\" \
                 stroke=\"#e5e5e5\"/>",
                PLOT_BOTTOM_PX + 5.0
            );
            text(&mut svg, px, PLOT_BOTTOM_PX + 18.0, 11, "middle", "", &label);
        }
    } else {
        let x_step = nice_step(x_max / 8.0);
        let mut x = 0.0;
        while x <= x_max + 1e-9 {
            text(&mut svg, x_of(x), PLOT_BOTTOM_PX + 18.0, 11, "middle", "", &number(x));
            x += x_step;
        }
    }
    let middle = (PLOT_LEFT_PX + PLOT_RIGHT_PX) / 2.0;
    text(&mut svg, middle, PLOT_BOTTOM_PX + 40.0, 13, "middle", "", &chart.x_label);
    if let (Some(bound), Some((_, label))) = (bound_value, &chart.bound) {
        let y = y_of(bound);
        let _ = writeln!(
            svg,
            "<line x1=\"{PLOT_LEFT_PX}\" y1=\"{y:.1}\" x2=\"{PLOT_RIGHT_PX}\" y2=\"{y:.1}\" \
             stroke=\"#7f7f7f\" stroke-width=\"1.5\" stroke-dasharray=\"8 4\"/>"
        );
        text(&mut svg, PLOT_RIGHT_PX - 6.0, y - 5.0, 11, "end", "#7f7f7f", label);
    }
    let mut legend_y = PLOT_TOP_PX + 10.0;
    for (index, (line, points)) in lines.iter().enumerate() {
        let colour = line.colour.unwrap_or(COLOURS[index % COLOURS.len()]);
        let dash = line
            .dash
            .map_or(String::new(), |dash| format!(" stroke-dasharray=\"{}\"", escape(dash)));
        if points.len() >= 2 {
            let mut coordinates = String::new();
            for &(x, y) in points {
                let _ = write!(coordinates, "{:.1},{:.1} ", x_of(x), y_of(y));
            }
            let _ = writeln!(
                svg,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash}/>",
                coordinates.trim_end()
            );
        }
        // Dots only where they can be told apart; a long trace is its line.
        if points.len() <= 200 {
            for &(x, y) in points {
                let _ = writeln!(
                    svg,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{colour}\"/>",
                    x_of(x),
                    y_of(y)
                );
            }
        }
        if lines.len() > 1 {
            let _ = writeln!(
                svg,
                "<line x1=\"{}\" y1=\"{legend_y:.1}\" x2=\"{}\" y2=\"{legend_y:.1}\" \
                 stroke=\"{colour}\" stroke-width=\"3\"{dash}/>",
                PLOT_RIGHT_PX + 12.0,
                PLOT_RIGHT_PX + 36.0
            );
            text(&mut svg, PLOT_RIGHT_PX + 40.0, legend_y + 4.0, 11, "start", "", &line.name);
            legend_y += 22.0;
        }
    }
    if x_log {
        text(&mut svg, PLOT_RIGHT_PX + 12.0, legend_y + 4.0, 11, "start", "#555555", "log x axis");
    }
    svg_end(&mut svg, &chart.y_label, footer);
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(lines: Vec<Line>) -> LineChart {
        LineChart {
            title: "t <&>".into(),
            y_label: "MiB".into(),
            x_label: "seconds".into(),
            x_scale: Scale::Linear,
            lines,
            bound: Some((1.5, "bound".into())),
            shades: vec![(0.0, 1.0, "fill".into()), (1.0, f64::NAN, "bad".into())],
        }
    }

    fn line(name: &str, points: Vec<(f64, f64)>) -> Line {
        Line { name: name.into(), points, ..Line::default() }
    }

    #[test]
    fn degenerate_charts_render() {
        for points in [vec![], vec![(0.0, 0.0)], vec![(1.0, 2.0), (1.0, 2.0)]] {
            let svg = render_lines(
                &chart(vec![Line { name: "a".into(), points, ..Line::default() }]),
                "footer",
            );
            assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
            assert!(svg.contains("t &lt;&amp;&gt;"));
        }
        let svg = render_lines(&chart(vec![]), "footer");
        assert_eq!(svg.matches("<polyline").count(), 0);
    }

    #[test]
    fn one_polyline_per_series_with_two_points_and_a_legend_for_several() {
        let lines = vec![
            line("rss", vec![(0.0, 10.0), (1.0, 20.0), (2.0, 15.0)]),
            line("heap", vec![(0.0, 5.0), (2.0, f64::NAN), (3.0, 6.0)]),
            line("one", vec![(0.5, 1.0)]),
        ];
        let svg = render_lines(&chart(lines), "footer");
        assert_eq!(svg.matches("<polyline").count(), 2);
        // 3 + 2 + 1 plottable points.
        assert_eq!(svg.matches("<circle").count(), 6);
        for name in ["rss", "heap", "one"] {
            assert!(svg.contains(&format!(">{name}</text>")), "{name}");
        }
        // One shade drawn; the one ending in NaN is skipped.
        assert_eq!(svg.matches("fill=\"#f2f2f2\"").count(), 1);
        assert!(!svg.contains(">bad</text>"));
    }

    #[test]
    fn a_log_x_axis_drops_what_it_cannot_place_and_ticks_whole_decades() {
        let mut chart = chart(vec![
            Line {
                name: "tierkv read".into(),
                points: vec![(0.0, 1.0), (3.0, 50.0), (40.0, 99.0), (250.0, 100.0)],
                colour: Some("#123456"),
                dash: Some("8 4"),
            },
            line("redb read", vec![(-1.0, 5.0), (f64::INFINITY, 6.0)]),
        ]);
        chart.x_scale = Scale::Log;
        chart.shades.clear();
        let svg = render_lines(&chart, "footer");
        // Zero, negative and infinite x have no place on it: 3 points, 1 line.
        assert_eq!(svg.matches("<circle").count(), 3);
        assert_eq!(svg.matches("<polyline").count(), 1);
        // The line and its legend entry carry its own colour and dash.
        assert_eq!(
            svg.matches("stroke=\"#123456\" stroke-width=\"2\" stroke-dasharray=\"8 4\"").count(),
            1
        );
        assert_eq!(svg.matches("stroke-dasharray=\"8 4\"").count(), 3, "line, legend, bound");
        // Decades 1 to 1000 cover 3 to 250.
        for tick in [">1</text>", ">10</text>", ">100</text>", ">1000</text>"] {
            assert!(svg.contains(tick), "{tick}");
        }
        assert!(!svg.contains(">10k</text>"));
        // Nothing to place at all: still a chart.
        chart.lines = vec![line("none", vec![(0.0, 1.0)])];
        assert!(render_lines(&chart, "footer").ends_with("</svg>\n"));
    }
}
