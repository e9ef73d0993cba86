//! Small pieces the hand-written SVG plots share: writing a file, XML text and escaping,
//! size labels, and which values a log axis can show.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::device::BenchError;

/// Writes `svg` as `dir/file_name`.
pub(crate) fn write_svg(dir: &Path, file_name: &str, svg: &str) -> Result<PathBuf, BenchError> {
    let path = dir.join(file_name);
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

/// One `<text>` element; `colour` empty means black.
pub(crate) fn text(
    svg: &mut String,
    x: f64,
    y: f64,
    size: u32,
    anchor: &str,
    colour: &str,
    content: &str,
) {
    let fill = if colour.is_empty() { "black" } else { colour };
    let _ = writeln!(
        svg,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{anchor}\" \
         fill=\"{fill}\">{}</text>",
        escape(content)
    );
}

/// Escapes text for an XML element or attribute; control characters XML cannot hold become
/// U+FFFD.
pub(crate) fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            '\t' | '\n' | '\r' => escaped.push(c),
            c if (c as u32) < 0x20 => escaped.push('\u{fffd}'),
            c => escaped.push(c),
        }
    }
    escaped
}
