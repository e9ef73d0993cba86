//! A line chart: one line per series, y on a linear axis from zero, x on a linear axis from
//! zero (seconds, as a rule) or a logarithmic one over whole decades (latency), with an
//! optional bound drawn as a dashed grey line, through plotters (`canvas`). The block plots
//! draw space amplification over time with it, the engine plots resident memory over time,
//! and the YCSB plots latency CDFs.
//!
//! Invariants:
//! - Each series has the colour of its place (`COLOURS`, then round again) unless it names
//!   its own, and a legend entry drawn in its colour and dash; a series with fewer than 2
//!   plottable points draws its points but no line. A solid line is one `<polyline>`.
//! - Only finite x (positive on a log axis) and positive finite y are drawn; nothing is drawn
//!   at a made-up place.
//! - Shades (`LineChart::shades`) mark spans of x, such as the workload that ran then, in light
//!   grey bands under the lines, labelled along the top where the label fits its band.
//!
//! Must never: panic on a degenerate chart (no series, one point, equal values, zeros).

use crate::bars::{
    draw_frame, draw_title, draw_y_grid, nice_step, number, Axis, COLOURS, HEIGHT_PX,
    PLOT_BOTTOM_PX, PLOT_LEFT_PX, PLOT_RIGHT_PX, PLOT_TOP_PX, WIDTH_PX,
};
use crate::canvas::{draw_svg, plottable, text_width_px, Anchor, Dash, Drawn};

/// One line: its name and its (x, y) points, in order of x.
#[derive(Default)]
pub(crate) struct Line {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
    /// Its colour; `None`: the colour of its place.
    pub(crate) colour: Option<&'static str>,
    /// Its dash pattern (pixels drawn, pixels skipped); `None`: solid.
    pub(crate) dash: Option<Dash>,
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

/// The dash of a bound line.
const BOUND_DASH: Dash = (8.0, 4.0);

/// Renders `chart` with `footer` under it.
pub(crate) fn render_lines(chart: &LineChart, footer: &str) -> Drawn {
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
    let x_of = |x: f64| {
        let fraction = match &x_axis {
            Some(axis) => axis.fraction(x),
            None => x.clamp(0.0, x_max) / x_max,
        };
        PLOT_LEFT_PX + fraction * (PLOT_RIGHT_PX - PLOT_LEFT_PX)
    };
    let y_of = |y: f64| PLOT_BOTTOM_PX - y_axis.fraction(y) * (PLOT_BOTTOM_PX - PLOT_TOP_PX);
    draw_svg(WIDTH_PX as u32, HEIGHT_PX as u32, |canvas| {
        draw_title(canvas, &chart.title);
        for (index, (start, end, label)) in chart.shades.iter().enumerate() {
            if !(start.is_finite() && end.is_finite() && end > start) {
                continue;
            }
            let (left, right) = (x_of(*start), x_of(*end));
            let fill = if index % 2 == 0 { "#f2f2f2" } else { "#e6e6e6" };
            let height = PLOT_BOTTOM_PX - PLOT_TOP_PX;
            canvas.rect(left, PLOT_TOP_PX, right - left, height, Some(fill), None);
            // A label wider than its band would run into the next one's.
            if right - left >= text_width_px(label, 10.0) {
                let (middle, y) = ((left + right) / 2.0, PLOT_TOP_PX + 14.0);
                canvas.text(middle, y, 10.0, Anchor::Middle, "#555555", label);
            }
        }
        draw_y_grid(canvas, &y_axis);
        if let Some(axis) = &x_axis {
            // Decades only; a grid line at each, since a log axis is read against them.
            for (x, label) in axis.ticks() {
                let px = x_of(x);
                canvas.line((px, PLOT_TOP_PX), (px, PLOT_BOTTOM_PX + 5.0), "#e5e5e5", 1.0, None);
                canvas.text(px, PLOT_BOTTOM_PX + 18.0, 11.0, Anchor::Middle, "", &label);
            }
        } else {
            let x_step = nice_step(x_max / 8.0);
            // At most 8 steps of nice_step(x_max / 8) fit in 0..=x_max, 20 bounds it.
            for step in 0..=20u32 {
                let x = f64::from(step) * x_step;
                if x > x_max + 1e-9 {
                    break;
                }
                canvas.text(x_of(x), PLOT_BOTTOM_PX + 18.0, 11.0, Anchor::Middle, "", &number(x));
            }
        }
        let middle = (PLOT_LEFT_PX + PLOT_RIGHT_PX) / 2.0;
        canvas.text(middle, PLOT_BOTTOM_PX + 40.0, 13.0, Anchor::Middle, "", &chart.x_label);
        if let (Some(bound), Some((_, label))) = (bound_value, &chart.bound) {
            let y = y_of(bound);
            canvas.line((PLOT_LEFT_PX, y), (PLOT_RIGHT_PX, y), "#7f7f7f", 1.5, Some(BOUND_DASH));
            canvas.text(PLOT_RIGHT_PX - 6.0, y - 5.0, 11.0, Anchor::End, "#7f7f7f", label);
        }
        let mut legend_y = PLOT_TOP_PX + 10.0;
        for (index, (line, points)) in lines.iter().enumerate() {
            let colour = line.colour.unwrap_or(COLOURS[index % COLOURS.len()]);
            let pixels: Vec<(f64, f64)> = points.iter().map(|&(x, y)| (x_of(x), y_of(y))).collect();
            canvas.polyline(&pixels, colour, 2.0, line.dash);
            // Dots only where they can be told apart; a long trace is its line.
            if pixels.len() <= 200 {
                for &(x, y) in &pixels {
                    canvas.circle(x, y, 2.5, colour);
                }
            }
            if lines.len() > 1 {
                let (from, to) =
                    ((PLOT_RIGHT_PX + 12.0, legend_y), (PLOT_RIGHT_PX + 36.0, legend_y));
                canvas.line(from, to, colour, 3.0, line.dash);
                canvas.text(
                    PLOT_RIGHT_PX + 40.0,
                    legend_y + 4.0,
                    11.0,
                    Anchor::Start,
                    "",
                    &line.name,
                );
                legend_y += 22.0;
            }
        }
        if x_log {
            let x = PLOT_RIGHT_PX + 12.0;
            canvas.text(x, legend_y + 4.0, 11.0, Anchor::Start, "#555555", "log x axis");
        }
        draw_frame(canvas, &chart.y_label, footer);
    })
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
            )
            .expect("drawn");
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
            assert!(svg.contains("t &lt;&amp;&gt;"));
        }
        let svg = render_lines(&chart(vec![]), "footer").expect("drawn");
        assert_eq!(svg.matches("<polyline").count(), 0);
    }

    #[test]
    fn one_polyline_per_series_with_two_points_and_a_legend_for_several() {
        let lines = vec![
            line("rss", vec![(0.0, 10.0), (1.0, 20.0), (2.0, 15.0)]),
            line("heap", vec![(0.0, 5.0), (2.0, f64::NAN), (3.0, 6.0)]),
            line("one", vec![(0.5, 1.0)]),
        ];
        let svg = render_lines(&chart(lines), "footer").expect("drawn");
        assert_eq!(svg.matches("<polyline").count(), 2);
        // 3 + 2 + 1 plottable points.
        assert_eq!(svg.matches("<circle").count(), 6);
        for name in ["rss", "heap", "one"] {
            assert!(svg.contains(&format!(">\n{name}\n</text>")), "{name}: {svg}");
        }
        // One shade drawn; the one ending in NaN is skipped.
        assert_eq!(svg.matches("fill=\"#F2F2F2\"").count(), 1);
        assert!(!svg.contains("\nbad\n"));
    }

    #[test]
    fn a_log_x_axis_drops_what_it_cannot_place_and_ticks_whole_decades() {
        let mut chart = chart(vec![
            Line {
                name: "tierkv read".into(),
                points: vec![(0.0, 1.0), (3.0, 50.0), (40.0, 99.0), (250.0, 100.0)],
                colour: Some("#123456"),
                dash: Some((8.0, 4.0)),
            },
            line("redb read", vec![(-1.0, 5.0), (f64::INFINITY, 6.0)]),
        ]);
        chart.x_scale = Scale::Log;
        chart.shades.clear();
        let svg = render_lines(&chart, "footer").expect("drawn");
        // Zero, negative and infinite x have no place on it: 3 points; the one line with
        // two points or more is dashed, so no solid polyline.
        assert_eq!(svg.matches("<circle").count(), 3);
        assert_eq!(svg.matches("<polyline").count(), 0);
        // The line's dashes and its legend entry's carry its own colour.
        assert!(svg.matches("stroke=\"#123456\" stroke-width=\"2\"").count() > 3, "{svg}");
        assert!(svg.matches("stroke=\"#123456\" stroke-width=\"3\"").count() >= 2, "{svg}");
        // Decades 1 to 1000 cover 3 to 250.
        for tick in ["1", "10", "100", "1000"] {
            assert!(svg.contains(&format!(">\n{tick}\n</text>")), "{tick}");
        }
        assert!(!svg.contains(">\n10k\n</text>"));
        // Nothing to place at all: still a chart.
        chart.lines = vec![line("none", vec![(0.0, 1.0)])];
        assert!(render_lines(&chart, "footer").expect("drawn").trim_end().ends_with("</svg>"));
    }
}
