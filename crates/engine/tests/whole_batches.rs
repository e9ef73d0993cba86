//! Scans see batches whole while the tree splits, pages are evicted and checkpoints write
//! them back: writers put pairs of keys in one batch (the same counter in both, the pair's
//! keys far apart so that they lie in different leaves), with filler keys that split
//! leaves and fill a cache far smaller than the data; readers take snapshots and scan the
//! whole store both ways, and by point reads, and find every pair equal, and each pair's
//! counter never lower than the one they saw before.
//!
//! `TIERKV_WHOLE_BATCHES_OPS` sets the batches per writer (CI runs the default below).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use tierkv::{Db, Durability, Options, Snapshot, WriteBatch};

const WRITERS: usize = 3;
const READERS: usize = 2;
const PAIRS_PER_WRITER: usize = 24;

fn options() -> Options {
    Options {
        cache_size: (2048 + 512) << 10,
        write_buffer_size: Some(1 << 20),
        max_page_bytes: Some(1024),
        durability: Durability::Buffered,
        log_segment_bytes: 1 << 20,
        block_segment_bytes: 1 << 20,
        ..Options::default()
    }
}

/// Pair `pair` of writer `writer`: its first key sorts at the start of the store, its
/// second at the end, so every scan crosses many leaves between them.
fn pair_keys(writer: usize, pair: usize) -> (String, String) {
    (format!("a/{writer}/{pair:03}"), format!("z/{writer}/{pair:03}"))
}

fn counter(value: &[u8]) -> u64 {
    let text = std::str::from_utf8(&value[..20]).expect("a counter");
    text.parse().expect("a counter")
}

fn value(counter: u64, pad: usize) -> Vec<u8> {
    let mut value = format!("{counter:020}").into_bytes();
    value.resize(20 + pad, b'.');
    value
}

/// Every pair's two values in `entries` (key order), checked equal; their counters.
fn pairs_of(entries: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) -> BTreeMap<(usize, usize), u64> {
    let mut out = BTreeMap::new();
    for writer in 0..WRITERS {
        for pair in 0..PAIRS_PER_WRITER {
            let (a, z) = pair_keys(writer, pair);
            let (a, z) = (entries.get(a.as_bytes()), entries.get(z.as_bytes()));
            assert_eq!(
                a.map(|v| counter(v)),
                z.map(|v| counter(v)),
                "{what}: writer {writer}'s pair {pair} seen half-written"
            );
            if let Some(a) = a {
                out.insert((writer, pair), counter(a));
            }
        }
    }
    out
}

fn scanned(snapshot: &Snapshot, backward: bool) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let iter = if backward { snapshot.range_back(..) } else { snapshot.range(..) };
    iter.map(|entry| entry.expect("a scanned entry")).collect()
}

fn writer(db: &Db, writer: usize, batches: usize) {
    let mut rng = fastrand::Rng::with_seed(writer as u64 + 1);
    for counter in 1..=batches as u64 {
        let mut batch = WriteBatch::new();
        let pair = rng.usize(..PAIRS_PER_WRITER);
        let (a, z) = pair_keys(writer, pair);
        let pad = rng.usize(0..200);
        batch.put(&a, value(counter, pad));
        batch.put(&z, value(counter, pad));
        // Fillers between the pair's keys: leaves split, and the store outgrows the cache.
        for _ in 0..rng.usize(1..6) {
            let key = format!("m/{:08x}", rng.u32(..1 << 14));
            if rng.u8(..8) == 0 {
                batch.delete(key);
            } else {
                batch.put(key, value(counter, rng.usize(0..300)));
            }
        }
        db.write(&batch).expect("a batch");
    }
}

fn reader(db: &Db, reader: usize, done: &AtomicBool) -> usize {
    let mut seen: BTreeMap<(usize, usize), u64> = BTreeMap::new();
    let mut scans = 0;
    let mut round = 0usize;
    // At least a few scans, however fast the writers finish.
    while !done.load(Ordering::Acquire) || scans < 4 {
        round += 1;
        let snapshot = db.snapshot();
        let backward = (round + reader) % 2 == 1;
        let what = format!(
            "reader {reader} scan {round} ({})",
            ["forward", "backward"][backward as usize]
        );
        let now = pairs_of(&scanned(&snapshot, backward), &what);
        // The same snapshot by point reads.
        for (&(writer, pair), &counter_now) in &now {
            let (a, z) = pair_keys(writer, pair);
            let by_get = (snapshot.get(&a).expect("get"), snapshot.get(&z).expect("get"));
            let by_get = (by_get.0.map(|v| counter(&v)), by_get.1.map(|v| counter(&v)));
            assert_eq!(
                by_get,
                (Some(counter_now), Some(counter_now)),
                "{what}: pair {writer}/{pair} by get"
            );
        }
        for (key, counter_now) in now {
            let before = seen.insert(key, counter_now).unwrap_or(0);
            assert!(
                counter_now >= before,
                "{what}: pair {key:?} went back from {before} to {counter_now}"
            );
        }
        scans += 1;
        // The checkpoint thread runs by itself; a reader asks for one now and then too.
        if reader == 0 && round.is_multiple_of(7) {
            db.checkpoint().expect("checkpoint");
        }
    }
    scans
}

#[test]
fn scans_see_batches_whole_while_leaves_split_and_pages_are_evicted() {
    let batches: usize = std::env::var("TIERKV_WHOLE_BATCHES_OPS")
        .ok()
        .and_then(|ops| ops.parse().ok())
        .unwrap_or(2_000);
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path(), options()).expect("open");
    let done = AtomicBool::new(false);
    let scans: Vec<usize> = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..READERS)
            .map(|r| {
                let (db, done) = (&db, &done);
                scope.spawn(move || reader(db, r, done))
            })
            .collect();
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let db = &db;
                scope.spawn(move || writer(db, w, batches))
            })
            .collect();
        for handle in writers {
            handle.join().expect("a writer panicked");
        }
        done.store(true, Ordering::Release);
        readers.into_iter().map(|h| h.join().expect("a reader panicked")).collect()
    });
    let stats = db.stats().expect("stats");
    eprintln!(
        "whole batches: {WRITERS} writers x {batches} batches, scans {scans:?}, {} checkpoints, tree height {}, evictions {}",
        stats.checkpoints, stats.tree_height, stats.cache.evictions
    );
    // The conditions the check is for: splits, evictions, checkpoints.
    assert!(stats.tree_height >= 3, "{stats:?}");
    assert!(stats.cache.evictions > 0, "{stats:?}");
    assert!(stats.checkpoints > 1, "{stats:?}");
    db.close().expect("close");
    let db = Db::open(dir.path(), options()).expect("reopen");
    let snapshot = db.snapshot();
    let last = pairs_of(&scanned(&snapshot, false), "after reopen");
    assert_eq!(last.len(), WRITERS * PAIRS_PER_WRITER);
}
