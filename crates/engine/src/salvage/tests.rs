//! Unit tests of the salvage's pieces: key spans and their printing.

use super::report::escape;
use super::*;

#[test]
fn spans_contain_their_keys_and_print_escaped() {
    let span = KeySpan::new(Some(b"b"), Some(b"d"));
    assert!(span.contains(b"b") && span.contains(b"c\xff") && !span.contains(b"d"));
    assert!(!span.contains(b"a"));
    assert_eq!(span.to_string(), "[b, d)");
    assert_eq!(KeySpan::new(None, Some(b"\x00\\")).to_string(), "[.., \\x00\\\\)");
    assert_eq!(KeySpan::all().to_string(), "every key");
    assert!(KeySpan::all().contains(b"anything"));
    assert_eq!(escape(b"k\te"), "k\\x09e");
}
