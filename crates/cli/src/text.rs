//! Keys and values as text, and back, byte for byte: the formats of `dump`, `load`, `scan`
//! and `get`, and of keys and values given on the command line.
//!
//! - **tsv** (the default): `key<TAB>value<LF>`, each escaped: a backslash is `\\`, a tab
//!   `\t`, a line feed `\n`, a carriage return `\r`, other control bytes and bytes that are
//!   not UTF-8 `\xNN` (two hex digits); everything else, UTF-8 text included, as it is.
//!   So a dump reads as text, splits on its tabs and line feeds with any tool, and `load`
//!   restores every byte: `\x00` in a dump is a zero byte, the four characters `\x00` in a
//!   key are `\\x00`.
//! - **hex**: `hex(key)<TAB>hex(value)<LF>`, lower case (ldb's `--hex`, mdb_dump's
//!   bytevalue).
//! - **jsonl**: one JSON object per line, `{"key": K, "value": V}`, each a string when the
//!   bytes are UTF-8 and an array of byte values when not.
//!
//! Must never: read back other bytes than were written; accept a line it cannot read
//! exactly (an unknown escape, a stray tab, odd hex).

use serde_json::{json, Value as Json};

/// How entries are written and read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// `key<TAB>value`, escaped (see `tierkv dump --help`).
    Tsv,
    /// `hex(key)<TAB>hex(value)`.
    Hex,
    /// `{"key": ..., "value": ...}` per line: strings when UTF-8, else byte arrays.
    Jsonl,
}

/// `bytes` escaped (see the module header).
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c if c.is_ascii_control() => out.push_str(&format!("\\x{:02x}", c as u8)),
                c => out.push(c),
            }
        }
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

/// The bytes an escaped field stands for.
pub fn unescape(text: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut at = 0;
    while at < text.len() {
        let byte = text[at];
        if byte == b'\t' || byte == b'\n' {
            return Err(format!("a raw {} at byte {at}; escape it", name_of(byte)));
        }
        if byte != b'\\' {
            out.push(byte);
            at += 1;
            continue;
        }
        let Some(&next) = text.get(at + 1) else {
            return Err(format!("a lone backslash at byte {at}; write \\\\ for one"));
        };
        match next {
            b'\\' => out.push(b'\\'),
            b't' => out.push(b'\t'),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b'x' => {
                let digits = text
                    .get(at + 2..at + 4)
                    .ok_or_else(|| format!("\\x at byte {at} needs two hex digits"))?;
                out.push(hex_byte(digits).ok_or_else(|| {
                    format!(
                        "\\x at byte {at} needs two hex digits, not {:?}",
                        String::from_utf8_lossy(digits)
                    )
                })?);
                at += 2;
            }
            other => {
                return Err(format!(
                    "unknown escape \\{} at byte {at}; the escapes are \\\\ \\t \\n \\r \\xNN",
                    other.escape_ascii()
                ))
            }
        }
        at += 2;
    }
    Ok(out)
}

fn name_of(byte: u8) -> &'static str {
    match byte {
        b'\t' => "tab",
        _ => "line feed",
    }
}

fn hex_byte(digits: &[u8]) -> Option<u8> {
    let text = std::str::from_utf8(digits).ok()?;
    if text.len() != 2 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u8::from_str_radix(text, 16).ok()
}

/// The bytes a hex field stands for.
pub fn unhex(text: &[u8]) -> Result<Vec<u8>, String> {
    hex::decode(text).map_err(|error| format!("not hex: {error}"))
}

/// JSON for bytes: a string when UTF-8, else an array of byte values.
pub fn json_bytes(bytes: &[u8]) -> Json {
    match std::str::from_utf8(bytes) {
        Ok(text) => Json::String(text.to_string()),
        Err(_) => Json::Array(bytes.iter().map(|b| json!(b)).collect()),
    }
}

/// The bytes a JSON field stands for (see `json_bytes`).
fn from_json(value: Option<&Json>, name: &str) -> Result<Vec<u8>, String> {
    match value {
        Some(Json::String(text)) => Ok(text.as_bytes().to_vec()),
        Some(Json::Array(bytes)) => bytes
            .iter()
            .map(|b| {
                b.as_u64()
                    .and_then(|b| u8::try_from(b).ok())
                    .ok_or(format!("{name} holds {b}, not a byte value 0 to 255"))
            })
            .collect(),
        Some(other) => Err(format!("{name} is {other}, not a string or an array of bytes")),
        None => Err(format!("no {name:?} field")),
    }
}

/// One entry as a line (without its line feed).
pub fn encode_line(format: Format, key: &[u8], value: &[u8]) -> String {
    match format {
        Format::Tsv => format!("{}\t{}", escape(key), escape(value)),
        Format::Hex => format!("{}\t{}", hex::encode(key), hex::encode(value)),
        Format::Jsonl => json!({"key": json_bytes(key), "value": json_bytes(value)}).to_string(),
    }
}

/// One line (without its line feed) as an entry.
pub fn decode_line(format: Format, line: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
    let split = |line: &[u8]| -> Result<(usize, usize), String> {
        let mut tabs = line.iter().enumerate().filter(|(_, &b)| b == b'\t').map(|(at, _)| at);
        let first = tabs.next().ok_or("no tab between key and value")?;
        if let Some(second) = tabs.next() {
            return Err(format!("a second tab at byte {second}: a tab in a field is written \\t"));
        }
        Ok((first, first + 1))
    };
    match format {
        Format::Tsv => {
            let (end, start) = split(line)?;
            let key = unescape(&line[..end]).map_err(|e| format!("key: {e}"))?;
            let value = unescape(&line[start..]).map_err(|e| format!("value: {e}"))?;
            Ok((key, value))
        }
        Format::Hex => {
            let (end, start) = split(line)?;
            let key = unhex(&line[..end]).map_err(|e| format!("key: {e}"))?;
            let value = unhex(&line[start..]).map_err(|e| format!("value: {e}"))?;
            Ok((key, value))
        }
        Format::Jsonl => {
            let object: Json =
                serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
            Ok((from_json(object.get("key"), "key")?, from_json(object.get("value"), "value")?))
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_cases_of_the_issue_round_trip_and_are_told_apart() {
        let binary = [255u8, 254, 1];
        assert_eq!(escape(&binary), "\\xff\\xfe\\x01");
        assert_eq!(escape(b"lit-esc-key\\x00"), "lit-esc-key\\\\x00");
        assert_eq!(escape(b"lit-esc-key\x00"), "lit-esc-key\\x00");
        assert_eq!(escape(b"a\tb\nc\r"), "a\\tb\\nc\\r");
        assert_eq!(escape("grüße".as_bytes()), "grüße");
        for bytes in [&binary[..], b"lit-esc-key\\x00", b"a\tb\nc\r", b"", b"\\"] {
            assert_eq!(unescape(escape(bytes).as_bytes()).as_deref(), Ok(bytes));
        }
    }

    #[test]
    fn lines_that_cannot_be_read_exactly_are_refused() {
        for bad in [&b"k"[..], b"k\tv\tw", b"k\\q\tv", b"k\t\\x4", b"k\t\\xzz", b"k\\"] {
            assert!(decode_line(Format::Tsv, bad).is_err(), "{:?}", bad.escape_ascii());
        }
        assert!(decode_line(Format::Hex, b"6b\t7").is_err());
        assert!(decode_line(Format::Jsonl, br#"{"key": "k", "value": [256]}"#).is_err());
        assert!(decode_line(Format::Jsonl, br#"{"key": "k"}"#).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn every_format_round_trips_any_bytes(
            key in proptest::collection::vec(any::<u8>(), 0..64),
            value in proptest::collection::vec(any::<u8>(), 0..256),
        ) {
            for format in [Format::Tsv, Format::Hex, Format::Jsonl] {
                let line = encode_line(format, &key, &value);
                prop_assert!(!line.contains('\n'), "{format:?}: a line feed inside a line");
                let back = decode_line(format, line.as_bytes());
                prop_assert_eq!(back, Ok((key.clone(), value.clone())), "{:?}", format);
            }
        }
    }
}
