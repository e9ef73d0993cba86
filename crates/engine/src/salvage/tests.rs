//! Unit tests of the salvage's pieces: key spans, the report's verdict and its text.

use super::report::escape;
use super::*;

#[test]
fn spans_contain_their_keys_and_print_escaped() {
    let span = KeySpan::new(Some(b"b"), Some(b"d"));
    assert!(span.contains(b"b") && span.contains(b"c\xff") && !span.contains(b"d"));
    assert!(!span.contains(b"a"));
    assert_eq!(span.to_string(), "keys [b, d)");
    assert_eq!(KeySpan::new(None, Some(b"\x00\\")).to_string(), "keys [.., \\x00\\\\)");
    assert_eq!(KeySpan::all().to_string(), "every key");
    assert!(KeySpan::all().contains(b"anything"));
    assert_eq!(escape(b"k\te"), "k\\x09e");
}

#[test]
fn a_report_is_complete_only_with_nothing_lost_or_in_doubt_and_covers_what_it_names() {
    let mut report = SalvageReport { tree_entries: 3, ..SalvageReport::default() };
    report.problems.push("the identity file cannot be read".into());
    assert!(report.is_complete() && !report.covers(b"k"));
    assert!(report.to_string().ends_with("3 entries copied; complete: every entry was copied"));
    let span = KeySpan::new(Some(b"b"), Some(b"d"));
    report.lost.push(LostRange { span, reason: "page 7 is missing".into(), recovered: 1 });
    assert!(!report.is_complete());
    assert!(report.covers(b"c") && !report.covers(b"d") && !report.covers(b"a"));
    report.lost_values.push(LostValue { key: b"x".to_vec(), reason: "overflow".into() });
    assert!(report.covers(b"x") && !report.covers(b"y"));
    report.log.lost = Some(LostRecords { first: 9, last: None });
    assert!(report.covers(b"y"), "lost log records may have written any key");
    let text = report.to_string();
    assert!(text.contains("LOST keys [b, d): page 7 is missing; 1 entries recovered"), "{text}");
    assert!(text.contains("LOST log records from 9 on (how many is unknown)"), "{text}");
    assert!(text.ends_with("INCOMPLETE: see LOST and DOUBTFUL above"), "{text}");
    assert_eq!(LostRecords { first: 4, last: Some(4) }.to_string(), "record 4");
    assert_eq!(LostRecords { first: 4, last: Some(6) }.to_string(), "records 4..=6");
}
