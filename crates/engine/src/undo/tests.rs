use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, RwLock};

use super::*;
use crate::page::slotted::edit::ValueRef;

/// A before-image's inline bytes (these tests have no overflow values).
fn inline(before: Before) -> Option<Bytes> {
    before.map(|value| match value {
        Value::Inline(bytes) => bytes,
        Value::Overflow(_) => panic!("no overflow values here"),
    })
}

type State = BTreeMap<Vec<u8>, Bytes>;

/// What a reader at `sequence` gets: the before-image when the view has one, else what
/// the page holds now.
fn read(view: &View, page: &State, key: &[u8], sequence: u64) -> Result<Option<Bytes>, TooOld> {
    Ok(match view.before(key, sequence)? {
        Some(before) => inline(before),
        None => page.get(key).cloned(),
    })
}

/// What a scan at `sequence` gets: the page now, under the overlay of before-images.
fn scan(view: &View, page: &State, sequence: u64) -> Result<State, TooOld> {
    let mut out = page.clone();
    for (key, before) in view.before_range(b"", None, sequence)? {
        match inline(before) {
            Some(value) => out.insert(key, value),
            None => out.remove(&key),
        };
    }
    Ok(out)
}

/// A single writer changes keys in place, recording each before-image, with rotations
/// between; views taken along the way read every key, and scan, exactly as the state was
/// at their sequence, however many changes came after.
#[test]
fn every_view_reads_the_state_at_its_sequence() {
    let mut rng = fastrand::Rng::with_seed(7);
    let undo = Undo::new(4 << 10, 1 << 30);
    let mut page = State::new();
    let mut states = vec![page.clone()];
    let mut views: Vec<(View, u64)> = vec![(undo.view(), 0)];
    for sequence in 1..=3000u64 {
        let key = vec![rng.u8(..16)];
        let before = page.get(&key).cloned();
        undo.record(&key, sequence, before.as_deref().map(ValueRef::Inline));
        if rng.u8(..4) == 0 {
            page.remove(&key);
        } else {
            page.insert(key, Bytes::from(sequence.to_le_bytes().to_vec()));
        }
        states.push(page.clone());
        if undo.full() {
            views.push((undo.rotate(|| sequence, sequence), sequence));
        } else if rng.u8(..50) == 0 {
            views.push((undo.view(), sequence));
        }
    }
    assert!(views.len() > 40, "{} views", views.len());
    for (view, sequence) in &views {
        let then = &states[*sequence as usize];
        for key in 0..16u8 {
            assert_eq!(read(view, &page, &[key], *sequence), Ok(then.get(&[key][..]).cloned()));
        }
        assert_eq!(scan(view, &page, *sequence).as_ref(), Ok(then));
    }
}

/// Views are freed with their segments: once every old view is dropped, only the segments
/// new views need are left.
#[test]
fn dropping_the_old_views_frees_their_segments() {
    let undo = Undo::new(4 << 10, 1 << 30);
    let empty = undo.bytes();
    let mut views = Vec::new();
    for sequence in 1..=2000u64 {
        undo.record(&sequence.to_be_bytes(), sequence, Some(ValueRef::Inline(&[7; 100])));
        if undo.full() {
            views.push(undo.rotate(|| sequence, sequence));
        }
    }
    let held = undo.bytes();
    assert!(held > 200 * 1000, "{held} bytes for 2,000 before-images of 100 bytes");
    drop(views);
    let left = undo.bytes();
    assert!(left < 3 * (4 << 10) + empty, "{left} bytes left of {held}");
}

/// Past the limit, trimming drops the oldest segments: a view that needed them answers
/// `TooOld`, never a wrong value, and a new view still reads right.
#[test]
fn a_snapshot_older_than_the_limit_allows_is_refused() {
    let undo = Undo::new(4 << 10, 32 << 10);
    let old = undo.view();
    let mut page = State::new();
    let mut last = undo.view();
    for sequence in 1..=2000u64 {
        let key = (sequence % 300).to_be_bytes().to_vec();
        let before = page.insert(key.clone(), Bytes::from(vec![1; 100]));
        undo.record(&key, sequence, before.as_deref().map(ValueRef::Inline));
        if undo.full() {
            last = undo.rotate(|| sequence, sequence);
            undo.trim();
        }
    }
    assert!(undo.bytes() <= 32 << 10, "{} bytes over the limit", undo.bytes());
    assert_eq!(old.before(&1u64.to_be_bytes(), 0), Err(TooOld));
    assert_eq!(old.before_range(b"", None, 0), Err(TooOld));
    assert_eq!(
        TooOld.to_string(),
        "the snapshot is too old: the changes since it were more than the undo limit"
    );
    assert_eq!(last.before(&1u64.to_be_bytes(), 2000), Ok(None));
}

/// What `key` held at `sequence` by `history` (change `n` at index `n`; index 0 unused).
fn value_at(history: &[(Vec<u8>, Option<Bytes>)], key: &[u8], sequence: u64) -> Option<Bytes> {
    let changes = &history[1..=sequence as usize];
    changes.iter().rev().find(|(k, _)| k == key).and_then(|(_, value)| value.clone())
}

/// A writer changes a page in place under its lock (recording first) and publishes each
/// change; readers take a view and then the visible sequence, read the page, and ask the
/// view when the page's LSN is above their sequence. Every read is checked afterwards
/// against the history of changes: it is the key's value at the reader's sequence.
#[test]
fn concurrent_readers_see_their_snapshot_while_a_writer_changes_the_page() {
    const CHANGES: u64 = 20_000;
    let undo = Undo::new(8 << 10, 1 << 30);
    let page = RwLock::new((State::new(), 0u64));
    let visible = AtomicU64::new(0);
    let published = ArcSwap::from_pointee(undo.view());
    let history: Mutex<Vec<(Vec<u8>, Option<Bytes>)>> = Mutex::new(vec![(Vec::new(), None)]);
    let reads = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..2u64)
            .map(|seed| {
                let (page, visible, published) = (&page, &visible, &published);
                scope.spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(seed);
                    let mut reads = Vec::new();
                    while visible.load(Ordering::Acquire) < CHANGES {
                        let view = published.load_full();
                        let sequence = visible.load(Ordering::Acquire);
                        let key = vec![rng.u8(..8)];
                        let (now, lsn) = {
                            let page = page.read().unwrap_or_else(PoisonError::into_inner);
                            (page.0.get(&key).cloned(), page.1)
                        };
                        let (got, undone) = if lsn > sequence {
                            match view.before(&key, sequence).expect("not trimmed") {
                                Some(before) => (inline(before), true),
                                None => (now, false),
                            }
                        } else {
                            (now, false)
                        };
                        reads.push((key, sequence, got, undone));
                    }
                    reads
                })
            })
            .collect();
        let mut rng = fastrand::Rng::with_seed(99);
        for sequence in 1..=CHANGES {
            let key = vec![rng.u8(..8)];
            let value = (rng.u8(..5) > 0).then(|| Bytes::from(sequence.to_le_bytes().to_vec()));
            {
                let mut page = page.write().unwrap_or_else(PoisonError::into_inner);
                undo.record(&key, sequence, page.0.get(&key).map(|b| ValueRef::Inline(&b[..])));
                match &value {
                    Some(value) => page.0.insert(key.clone(), value.clone()),
                    None => page.0.remove(&key),
                };
                page.1 = sequence;
            }
            lock(&history).push((key, value));
            visible.store(sequence, Ordering::Release);
            if undo.full() {
                published.store(Arc::new(undo.rotate(|| sequence, sequence)));
            }
        }
        readers.into_iter().flat_map(|reader| reader.join().expect("reader")).collect::<Vec<_>>()
    });
    let history = lock(&history);
    let mut undone = 0;
    for (key, sequence, got, before) in &reads {
        assert_eq!(got, &value_at(&history, key, *sequence), "key {key:?} at {sequence}");
        undone += usize::from(*before);
    }
    // Reads that raced a change and took its before-image: the path this test is for.
    assert!(reads.len() > 1000 && undone > 0, "{} reads, {undone} from before-images", reads.len());
}

/// Before-images of every kind come back as they went in: inline bytes (empty ones too),
/// an overflow value's reference, and none.
#[test]
fn before_images_of_every_kind_come_back_whole() {
    let undo = Undo::new(4 << 10, 1 << 20);
    let overflow = OverflowRef { len: 70_000, first: 12, blocks: 2 };
    undo.record(b"a", 5, Some(ValueRef::Inline(b"apple")));
    undo.record(b"b", 6, Some(ValueRef::Inline(b"")));
    undo.record(b"c", 7, Some(ValueRef::Overflow(overflow)));
    undo.record(b"d", 8, None);
    let view = undo.view();
    assert_eq!(view.before(b"a", 4), Ok(Some(Some(Value::inline(&b"apple"[..])))));
    assert_eq!(view.before(b"a", 5), Ok(None), "the change at 5 is the snapshot's own");
    assert_eq!(view.before(b"b", 0), Ok(Some(Some(Value::inline(&b""[..])))));
    assert_eq!(view.before(b"c", 6), Ok(Some(Some(Value::Overflow(overflow)))));
    assert_eq!(view.before(b"d", 7), Ok(Some(None)));
    let all = view.before_range(b"", None, 0).expect("range");
    assert_eq!(all.len(), 4);
    assert_eq!(all[&b"c"[..]], Some(Value::Overflow(overflow)));
}

/// The race the module header's `Race` paragraph is about: a writer records and changes two
/// keys in turn with a rotation every few changes, so a key's next change often lands in
/// the next segment while a reader is between segments; readers read a key, or both by a
/// range lookup, and every answer is checked against the history: the key at the reader's
/// sequence, never what a later change replaced.
#[test]
fn lookups_racing_records_across_rotations_see_their_sequence() {
    const CHANGES: u64 = 60_000;
    let undo = Undo::new(1 << 20, 1 << 30);
    let page = RwLock::new((State::new(), 0u64));
    let visible = AtomicU64::new(0);
    let published = ArcSwap::from_pointee(undo.view());
    let history: Mutex<Vec<(Vec<u8>, Option<Bytes>)>> = Mutex::new(vec![(Vec::new(), None)]);
    let made = AtomicU64::new(0);
    let reads = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..2u64)
            .map(|seed| {
                let (page, visible, published, made) = (&page, &visible, &published, &made);
                scope.spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(seed);
                    let mut reads = Vec::new();
                    while visible.load(Ordering::Acquire) < CHANGES {
                        made.fetch_add(1, Ordering::Release);
                        let view = published.load_full();
                        let sequence = visible.load(Ordering::Acquire);
                        let (now, lsn) = {
                            let page = page.read().unwrap_or_else(PoisonError::into_inner);
                            page.clone()
                        };
                        if lsn <= sequence {
                            continue;
                        }
                        if rng.bool() {
                            let key = vec![rng.u8(..2)];
                            let got = match view.before(&key, sequence).expect("not trimmed") {
                                Some(before) => inline(before),
                                None => now.get(&key).cloned(),
                            };
                            reads.push((key, sequence, got));
                        } else {
                            let all = scan(&view, &now, sequence).expect("not trimmed");
                            for key in [vec![0u8], vec![1u8]] {
                                let got = all.get(&key).cloned();
                                reads.push((key, sequence, got));
                            }
                        }
                    }
                    reads
                })
            })
            .collect();
        for sequence in 1..=CHANGES {
            // Paced: a reader's try for every 32 changes at least, so that starved readers
            // (CI's two cores are shared with other tests) still race the writer.
            while made.load(Ordering::Acquire) < sequence / 32 {
                std::thread::yield_now();
            }
            let key = vec![(sequence % 2) as u8];
            let value = Some(Bytes::from(sequence.to_le_bytes().to_vec()));
            {
                let mut page = page.write().unwrap_or_else(PoisonError::into_inner);
                undo.record(&key, sequence, page.0.get(&key).map(|b| ValueRef::Inline(&b[..])));
                if let Some(value) = &value {
                    page.0.insert(key.clone(), value.clone());
                }
                page.1 = sequence;
            }
            lock(&history).push((key, value));
            visible.store(sequence, Ordering::Release);
            if sequence % 3 == 0 {
                published.store(Arc::new(undo.rotate(|| sequence, sequence)));
                undo.trim();
            }
        }
        readers.into_iter().flat_map(|reader| reader.join().expect("reader")).collect::<Vec<_>>()
    });
    let history = lock(&history);
    for (key, sequence, got) in &reads {
        assert_eq!(got, &value_at(&history, key, *sequence), "key {key:?} at {sequence}");
    }
    assert!(reads.len() > 1000, "only {} reads", reads.len());
}
