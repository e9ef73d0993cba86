//! The drawing surface of the bar, line and WAL plots, on plotters' SVG backend (the one
//! plotting stack of the benchmarks; the device lab's plots use its charts directly). The
//! plots lay themselves out in pixels, so this offers pixel primitives: text (level or
//! rotated), straight lines (solid or dashed), polylines, rectangles and circles, and the
//! small helpers every plot shares (writing a file, size labels, which values a log axis can
//! show).
//!
//! Invariants:
//! - A straight line is an SVG `<line>` (drawn through the backend's `draw_line`), and a
//!   solid polyline of two points or more is one `<polyline>`: a plot's `<polyline>`s are
//!   exactly its solid data lines. A dashed line of any kind is `<line>` dashes.
//! - Text is escaped by the backend; control characters XML cannot hold become U+FFFD here.
//! - Coordinates that are not finite are not drawn.
//!
//! Must never: panic on a degenerate plot, or write outside the directory it is given.

use std::path::{Path, PathBuf};

use plotters::backend::{DrawingBackend, SVGBackend};
use plotters::coord::Shift;
use plotters::drawing::{DrawingArea, IntoDrawingArea};
use plotters::element::{Circle, Drawable, PathElement, PointCollection, Rectangle, Text};
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{Color, FontTransform, IntoFont, RGBColor, ShapeStyle, TextStyle};
use plotters_backend::DrawingErrorKind;

use crate::device::BenchError;

/// The font family every text uses (resolved by the SVG viewer).
pub(crate) const FONT: &str = "sans-serif";

/// plotters writes a text's `font-size` as the size it is given divided by this.
const FONT_SIZE_SCALE: f64 = 1.24;

/// A rendered plot: the SVG document, or why plotting failed.
pub(crate) type Drawn = Result<String, String>;

/// Where a text sits along its direction, relative to the point it is drawn at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Anchor {
    Start,
    Middle,
    End,
}

/// A dash pattern: pixels drawn, then pixels skipped.
pub(crate) type Dash = (f64, f64);

/// `#rrggbb`, `black` or `white` as a colour (anything else: black).
pub(crate) fn colour(text: &str) -> RGBColor {
    let hex = text.strip_prefix('#').filter(|hex| hex.len() == 6);
    let channel = |at: usize| hex.and_then(|hex| u8::from_str_radix(&hex[at..at + 2], 16).ok());
    match (text, channel(0), channel(2), channel(4)) {
        (_, Some(r), Some(g), Some(b)) => RGBColor(r, g, b),
        ("white", ..) => RGBColor(255, 255, 255),
        _ => RGBColor(0, 0, 0),
    }
}

fn pixel(x: f64, y: f64) -> Option<(i32, i32)> {
    // Far outside any plot, but within i32: a clamp, never a wrap.
    let clamp = |v: f64| v.round().clamp(-1e6, 1e6) as i32;
    (x.is_finite() && y.is_finite()).then(|| (clamp(x), clamp(y)))
}

/// Text for the backend: control characters XML 1.0 cannot hold replaced.
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') { '\u{fffd}' } else { c })
        .collect()
}

/// A straight line drawn with the backend's own line primitive (an SVG `<line>`), which
/// plotters' elements do not offer: its path element is always a `<polyline>`.
struct Segment {
    ends: [(i32, i32); 2],
    style: ShapeStyle,
}

impl<'a> PointCollection<'a, (i32, i32)> for &'a Segment {
    type Point = &'a (i32, i32);
    type IntoIter = &'a [(i32, i32)];
    fn point_iter(self) -> Self::IntoIter {
        &self.ends
    }
}

impl<DB: DrawingBackend> Drawable<DB> for Segment {
    fn draw<I: Iterator<Item = (i32, i32)>>(
        &self,
        mut points: I,
        backend: &mut DB,
        _: (u32, u32),
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        if let (Some(from), Some(to)) = (points.next(), points.next()) {
            backend.draw_line(from, to, &self.style)?;
        }
        Ok(())
    }
}

/// A plot being drawn: pixel primitives on a white page. Drawing errors are kept (the first
/// one) and returned by `draw_svg`.
pub(crate) struct Canvas<'a> {
    area: DrawingArea<SVGBackend<'a>, Shift>,
    error: Option<String>,
}

impl Canvas<'_> {
    fn keep<E: std::fmt::Display>(&mut self, result: Result<(), E>) {
        if let (Err(e), None) = (result, &self.error) {
            self.error = Some(e.to_string());
        }
    }

    fn text_style(size: f64, anchor: Anchor, colour_text: &str) -> TextStyle<'static> {
        let h_pos = match anchor {
            Anchor::Start => HPos::Left,
            Anchor::Middle => HPos::Center,
            Anchor::End => HPos::Right,
        };
        TextStyle {
            font: (FONT, size * FONT_SIZE_SCALE).into_font(),
            color: colour(colour_text).to_backend_color(),
            pos: Pos::new(h_pos, VPos::Center),
        }
    }

    /// Level text whose baseline is at `y`; `colour` empty means black.
    pub(crate) fn text(
        &mut self,
        x: f64,
        y: f64,
        size: f64,
        anchor: Anchor,
        colour: &str,
        text: &str,
    ) {
        // The backend centres the x-height on the point given: half an x-height (about a
        // quarter of the size) above the baseline.
        let Some(at) = pixel(x, y - 0.25 * size) else { return };
        let style = Self::text_style(size, anchor, colour);
        let result = self.area.draw(&Text::new(clean(text), at, style));
        self.keep(result);
    }

    /// Text that reads upwards, its middle line on `x`; `anchor` places it along the line
    /// going up from `y` (`Start`: it begins at `y`).
    pub(crate) fn text_up(
        &mut self,
        x: f64,
        y: f64,
        size: f64,
        anchor: Anchor,
        colour: &str,
        text: &str,
    ) {
        let Some(at) = pixel(x, y) else { return };
        let style = Self::text_style(size, anchor, colour).transform(FontTransform::Rotate270);
        let result = self.area.draw(&Text::new(clean(text), at, style));
        self.keep(result);
    }

    /// A straight line, solid or dashed.
    pub(crate) fn line(
        &mut self,
        from: (f64, f64),
        to: (f64, f64),
        colour_text: &str,
        width: f64,
        dash: Option<Dash>,
    ) {
        let style =
            ShapeStyle::from(colour(colour_text)).stroke_width(width.round().max(1.0) as u32);
        let segments = match dash {
            None => vec![(from, to)],
            Some(dash) => dashes(&[from, to], dash),
        };
        for (a, b) in segments {
            if let (Some(a), Some(b)) = (pixel(a.0, a.1), pixel(b.0, b.1)) {
                let result = self.area.draw(&Segment { ends: [a, b], style });
                self.keep(result);
            }
        }
    }

    /// Connected lines through `points` (two or more): one `<polyline>` when solid, dashes
    /// along it when dashed.
    pub(crate) fn polyline(
        &mut self,
        points: &[(f64, f64)],
        colour_text: &str,
        width: f64,
        dash: Option<Dash>,
    ) {
        if points.len() < 2 {
            return;
        }
        let style =
            ShapeStyle::from(colour(colour_text)).stroke_width(width.round().max(1.0) as u32);
        match dash {
            None => {
                let pixels: Vec<(i32, i32)> =
                    points.iter().filter_map(|p| pixel(p.0, p.1)).collect();
                let result = self.area.draw(&PathElement::new(pixels, style));
                self.keep(result);
            }
            Some(dash) => {
                for (a, b) in dashes(points, dash) {
                    if let (Some(a), Some(b)) = (pixel(a.0, a.1), pixel(b.0, b.1)) {
                        let result = self.area.draw(&Segment { ends: [a, b], style });
                        self.keep(result);
                    }
                }
            }
        }
    }

    /// A rectangle from its top-left corner, filled with `fill` or outlined with `stroke`.
    pub(crate) fn rect(
        &mut self,
        x: f64,
        y: f64,
        width: f64,
        height: f64,
        fill: Option<&str>,
        stroke: Option<&str>,
    ) {
        let (Some(a), Some(b)) = (pixel(x, y), pixel(x + width, y + height)) else { return };
        if let Some(fill) = fill {
            let result = self.area.draw(&Rectangle::new([a, b], colour(fill).filled()));
            self.keep(result);
        }
        if let Some(stroke) = stroke {
            let result = self.area.draw(&Rectangle::new([a, b], ShapeStyle::from(colour(stroke))));
            self.keep(result);
        }
    }

    /// A filled circle.
    pub(crate) fn circle(&mut self, x: f64, y: f64, radius: f64, fill: &str) {
        let Some(at) = pixel(x, y) else { return };
        let result =
            self.area.draw(&Circle::new(at, radius.round().max(1.0) as u32, colour(fill).filled()));
        self.keep(result);
    }
}

/// The dashes along a polyline: `dash.0` pixels drawn, `dash.1` skipped, continuing across
/// its corners. Bounded by the line's length over the pattern's (at least 1 pixel).
fn dashes(points: &[(f64, f64)], dash: Dash) -> Vec<((f64, f64), (f64, f64))> {
    let (on, off) = (dash.0.max(1.0), dash.1.max(0.0));
    let mut out = Vec::new();
    // Where in the pattern the walk is: 0..on drawn, on..on + off skipped.
    let mut phase = 0.0f64;
    for pair in points.windows(2) {
        let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
        let length = (x1 - x0).hypot(y1 - y0);
        if !length.is_finite() || length == 0.0 {
            continue;
        }
        let at = |t: f64| (x0 + (x1 - x0) * t / length, y0 + (y1 - y0) * t / length);
        let mut t = 0.0;
        while t < length {
            let step = if phase < on { on - phase } else { on + off - phase };
            let end = (t + step).min(length);
            if phase < on {
                out.push((at(t), at(end)));
            }
            phase = (phase + end - t) % (on + off);
            t = end;
        }
    }
    out
}

/// Draws a `width` × `height` plot with `draw` on a white page and returns the SVG document.
pub(crate) fn draw_svg(width: u32, height: u32, draw: impl FnOnce(&mut Canvas<'_>)) -> Drawn {
    let mut svg = String::new();
    {
        let area = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        let mut canvas = Canvas { area, error: None };
        let filled = canvas.area.fill(&RGBColor(255, 255, 255));
        canvas.keep(filled);
        draw(&mut canvas);
        let presented = canvas.area.present();
        canvas.keep(presented);
        if let Some(error) = canvas.error {
            return Err(error);
        }
    }
    Ok(svg)
}

/// Writes a drawn plot as `dir/file_name`; a plotting failure is reported as an output
/// error on that file.
pub(crate) fn write_svg(dir: &Path, file_name: &str, svg: Drawn) -> Result<PathBuf, BenchError> {
    let path = dir.join(file_name);
    let svg = svg.map_err(|e| BenchError::Output {
        path: path.clone(),
        source: std::io::Error::other(format!("plotting failed: {e}")),
    })?;
    std::fs::write(&path, svg)
        .map_err(|source| BenchError::Output { path: path.clone(), source })?;
    Ok(path)
}

/// `64B`, `1KiB`, `4KiB`, `1MiB`, `1500B`: the largest binary unit that divides the size.
pub(crate) fn size_name(bytes: usize) -> String {
    const UNITS: [(usize, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
    }
    format!("{bytes}B")
}

/// True when a value can sit on a log axis.
pub(crate) fn plottable(value: f64) -> bool {
    value.is_finite() && value > 0.0
}

/// Roughly how wide a text of `size` pixels is, for layout (no font metrics here).
pub(crate) fn text_width_px(text: &str, size: f64) -> f64 {
    0.6 * size * text.chars().count() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_make_the_elements_the_invariants_name() {
        let svg = draw_svg(200, 100, |canvas| {
            canvas.line((0.0, 10.0), (100.0, 10.0), "#7f7f7f", 1.5, None);
            canvas.line((0.0, 20.0), (100.0, 20.0), "#7f7f7f", 1.0, Some((8.0, 4.0)));
            canvas.polyline(&[(0.0, 0.0), (50.0, 50.0), (100.0, 0.0)], "#1f77b4", 2.0, None);
            canvas.polyline(&[(0.0, 0.0), (60.0, 0.0)], "#ff7f0e", 2.0, Some((8.0, 4.0)));
            canvas.polyline(&[(0.0, 0.0)], "#ff7f0e", 2.0, None);
            canvas.text(10.0, 10.0, 12.0, Anchor::Start, "", "a <b> & \u{1}");
            canvas.text_up(10.0, 90.0, 10.0, Anchor::Start, "#555555", "up");
            canvas.rect(0.0, 0.0, 10.0, f64::NAN, Some("white"), None);
            canvas.circle(5.0, 5.0, 2.5, "#1f77b4");
        })
        .expect("drawn");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
        assert_eq!(svg.matches("<polyline").count(), 1, "{svg}");
        // 1 solid line, 100 px of 8-on-4-off dashes (9), 60 px of them (5).
        assert_eq!(svg.matches("<line").count(), 1 + 9 + 5, "{svg}");
        assert!(svg.contains("a &lt;b&gt; &amp; \u{fffd}"), "{svg}");
        assert!(svg.contains("rotate(270"), "{svg}");
        assert!(svg.contains("stroke=\"#1F77B4\""), "{svg}");
        assert!(!svg.contains("NaN"), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 1);
    }

    #[test]
    fn dashes_follow_the_pattern_across_corners() {
        let parts = dashes(&[(0.0, 0.0), (10.0, 0.0), (10.0, 10.0)], (6.0, 4.0));
        let lengths: Vec<f64> = parts.iter().map(|(a, b)| (b.0 - a.0).hypot(b.1 - a.1)).collect();
        assert_eq!(lengths, [6.0, 6.0]);
        assert_eq!(parts[1].0, (10.0, 0.0));
        assert!(dashes(&[(0.0, 0.0), (0.0, 0.0)], (6.0, 4.0)).is_empty());
        assert_eq!(colour("#1f77b4"), RGBColor(0x1f, 0x77, 0xb4));
        assert_eq!(colour("white"), RGBColor(255, 255, 255));
        assert_eq!(colour("nonsense"), RGBColor(0, 0, 0));
        assert_eq!(size_name(4096), "4KiB");
        assert_eq!(size_name(1500), "1500B");
    }
}
