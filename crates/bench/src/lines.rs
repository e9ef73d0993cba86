//! A line chart on linear axes from zero, against seconds: one line per series, with an
//! optional bound drawn as a dashed grey line. The block plots draw space amplification over
//! time with it, and the engine plots resident memory over time.
//!
//! Invariants:
//! - Each series has the colour of its place (`COLOURS`, then round again) and a legend entry;
//!   a series with fewer than 2 plottable points draws its points but no line.
//! - Only finite x and positive finite y are drawn; nothing is drawn at a made-up height.
//! - Shades (`LineChart::shades`) mark spans of x, such as the workload that ran then, in light
//!   grey bands under the lines, labelled along the top where the label fits its band.
//!
//! Must never: panic on a degenerate chart (no series, one point, equal values, zeros).

use std::fmt::Write as _;

use crate::bars::{
    nice_step, number, svg_end, svg_start, y_grid, Axis, COLOURS, PLOT_BOTTOM_PX, PLOT_LEFT_PX,
    PLOT_RIGHT_PX, PLOT_TOP_PX,
};
use crate::svg::{plottable, text};

/// One line: its name and its (seconds, value) points, in order of seconds.
pub(crate) struct Line {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
}

/// The chart.
pub(crate) struct LineChart {
    pub(crate) title: String,
    pub(crate) y_label: String,
    pub(crate) lines: Vec<Line>,
    /// A value drawn across the plot, dashed, with its label.
    pub(crate) bound: Option<(f64, String)>,
    /// Spans of x (start, end, label), shaded in alternate bands.
    pub(crate) shades: Vec<(f64, f64, String)>,
}

/// Renders `chart` with `footer` under it.
pub(crate) fn render_lines(chart: &LineChart, footer: &str) -> String {
    let lines: Vec<(&str, Vec<(f64, f64)>)> = chart
        .lines
        .iter()
        .map(|line| {
            let points =
                line.points.iter().copied().filter(|&(x, y)| x.is_finite() && plottable(y));
            (line.name.as_str(), points.collect())
        })
        .collect();
    let x_max = lines
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.0))
        .chain(chart.shades.iter().map(|shade| shade.1).filter(|x| x.is_finite()))
        .fold(1.0f64, f64::max);
    let values = lines.iter().flat_map(|(_, points)| points.iter().map(|p| p.1));
    let bound_value = chart.bound.as_ref().map(|(value, _)| *value).filter(|v| plottable(*v));
    // Linear: these figures never span decades, and a log axis would hide the bound. The
    // bound gets headroom, so a line at it does not run along the frame.
    let hi =
        values.chain(bound_value.map(|b| b * 1.2)).filter(|v| plottable(*v)).fold(0.0, f64::max);
    let y_axis = Axis::linear(hi);
    let mut svg = String::new();
    svg_start(&mut svg, &chart.title);
    let x_of = |x: f64| PLOT_LEFT_PX + x.clamp(0.0, x_max) / x_max * (PLOT_RIGHT_PX - PLOT_LEFT_PX);
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
    let x_step = nice_step(x_max / 8.0);
    let mut x = 0.0;
    while x <= x_max + 1e-9 {
        text(&mut svg, x_of(x), PLOT_BOTTOM_PX + 18.0, 11, "middle", "", &number(x));
        x += x_step;
    }
    let middle = (PLOT_LEFT_PX + PLOT_RIGHT_PX) / 2.0;
    text(&mut svg, middle, PLOT_BOTTOM_PX + 40.0, 13, "middle", "", "seconds");
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
    for (index, (name, points)) in lines.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        if points.len() >= 2 {
            let mut coordinates = String::new();
            for &(x, y) in points {
                let _ = write!(coordinates, "{:.1},{:.1} ", x_of(x), y_of(y));
            }
            let _ = writeln!(
                svg,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"/>",
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
                 stroke=\"{colour}\" stroke-width=\"3\"/>",
                PLOT_RIGHT_PX + 12.0,
                PLOT_RIGHT_PX + 28.0
            );
            text(&mut svg, PLOT_RIGHT_PX + 32.0, legend_y + 4.0, 11, "start", "", name);
            legend_y += 22.0;
        }
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
            lines,
            bound: Some((1.5, "bound".into())),
            shades: vec![(0.0, 1.0, "fill".into()), (1.0, f64::NAN, "bad".into())],
        }
    }

    #[test]
    fn degenerate_charts_render() {
        for points in [vec![], vec![(0.0, 0.0)], vec![(1.0, 2.0), (1.0, 2.0)]] {
            let svg = render_lines(&chart(vec![Line { name: "a".into(), points }]), "footer");
            assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
            assert!(svg.contains("t &lt;&amp;&gt;"));
        }
        let svg = render_lines(&chart(vec![]), "footer");
        assert_eq!(svg.matches("<polyline").count(), 0);
    }

    #[test]
    fn one_polyline_per_series_with_two_points_and_a_legend_for_several() {
        let lines = vec![
            Line { name: "rss".into(), points: vec![(0.0, 10.0), (1.0, 20.0), (2.0, 15.0)] },
            Line { name: "heap".into(), points: vec![(0.0, 5.0), (2.0, f64::NAN), (3.0, 6.0)] },
            Line { name: "one".into(), points: vec![(0.5, 1.0)] },
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
}
