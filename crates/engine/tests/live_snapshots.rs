//! Writes of one key published without waiting for the log (`Buffered`, `None`) leave their
//! before-images out of the undo while no snapshot lives (`db/snapshot.rs`,
//! `LiveSnapshots`). Checked here, on real files:
//!
//! - which writes record: none of those while no snapshot lives; `Sync` writes, batches of
//!   more than one key, and every write while a snapshot lives do;
//! - snapshots taken while such writes run, from several threads, still see one state:
//!   a key read twice reads the same, and two keys written one after the other (`a`, then
//!   `b`, each its own write, with the same counter) always read as a prefix of the writes
//!   (`b <= a <= b + 1`), by point reads and by a scan.
//!
//! `TIERKV_LIVE_SNAPSHOT_SECONDS` sets how long the second test runs (CI: the default).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tierkv::{Db, Durability, Options, WriteBatch};

fn put(db: &Db, key: &str, value: &[u8], durability: Durability) {
    let mut batch = WriteBatch::new();
    batch.put(key, value);
    db.write_with(&batch, durability).expect("write");
}

fn undo_bytes(db: &Db) -> usize {
    db.stats().expect("stats").undo_bytes
}

#[test]
fn only_writes_a_snapshot_could_need_record_their_before_images() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let start = undo_bytes(&db);
    for i in 0..200u32 {
        put(&db, &format!("k{}", i % 50), &i.to_le_bytes(), Durability::Buffered);
        put(&db, &format!("n{}", i % 50), &i.to_le_bytes(), Durability::None);
    }
    assert_eq!(undo_bytes(&db), start, "one-key writes with no snapshot alive recorded");

    put(&db, "k1", b"sync", Durability::Sync);
    let after_sync = undo_bytes(&db);
    assert!(after_sync > start, "a Sync write left its before-image out");

    let mut pair = WriteBatch::new();
    pair.put("k2", b"pair").put("k3", b"pair");
    db.write_with(&pair, Durability::Buffered).expect("pair");
    let after_pair = undo_bytes(&db);
    assert!(after_pair > after_sync, "a batch of two keys left its before-images out");

    let snapshot = db.snapshot();
    let copy = snapshot.clone();
    drop(snapshot);
    put(&db, "k4", b"while a snapshot lives", Durability::Buffered);
    let after_live = undo_bytes(&db);
    assert!(after_live > after_pair, "a write beside a live snapshot left its before-image out");
    assert_eq!(copy.get("k4").expect("get"), Some(154u32.to_le_bytes().to_vec()));
    drop(copy);

    put(&db, "k5", b"after", Durability::Buffered);
    assert_eq!(undo_bytes(&db), after_live, "a write after the last snapshot went recorded");
    assert_eq!(db.get("k5").expect("get"), Some(b"after".to_vec()));
}

/// Stops the writers when a reader ends, by a failed check too (else they would run on).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn counter(value: Option<Vec<u8>>) -> u64 {
    value.map_or(0, |v| u64::from_le_bytes(v.try_into().expect("8 bytes")))
}

#[test]
fn snapshots_beside_unrecorded_writes_see_one_state() {
    let seconds = std::env::var("TIERKV_LIVE_SNAPSHOT_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    let stop = AtomicBool::new(false);
    let checked = std::thread::scope(|scope| {
        // Writers: each its own pair of keys, `a` and then `b`, one write each.
        for writer in 0..2 {
            let (db, stop) = (&db, &stop);
            scope.spawn(move || {
                let (a, b) = (format!("w{writer}/a"), format!("w{writer}/b"));
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    put(db, &a, &n.to_le_bytes(), Durability::Buffered);
                    put(db, &b, &n.to_le_bytes(), Durability::None);
                }
                assert!(n > 0);
            });
        }
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (db, stop) = (&db, &stop);
                scope.spawn(move || {
                    let _stop = StopOnDrop(stop);
                    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
                    let mut checked = 0u64;
                    while Instant::now() < deadline {
                        let snapshot = db.snapshot();
                        for writer in 0..2 {
                            let (a, b) = (format!("w{writer}/a"), format!("w{writer}/b"));
                            let first = counter(snapshot.get(&a).expect("get"));
                            let b_value = counter(snapshot.get(&b).expect("get"));
                            std::thread::yield_now();
                            let again = counter(snapshot.get(&a).expect("get"));
                            assert_eq!(
                                first, again,
                                "a snapshot read {a} as {first}, then {again}"
                            );
                            assert!(
                                b_value <= first && first <= b_value + 1,
                                "a snapshot saw {a} = {first} and {b} = {b_value}"
                            );
                            let scanned: Vec<u64> = snapshot
                                .prefix(format!("w{writer}/"))
                                .map(|entry| counter(Some(entry.expect("scan").1)))
                                .collect();
                            let expected: Vec<u64> =
                                [first, b_value].into_iter().filter(|&v| v > 0).collect();
                            assert_eq!(scanned, expected, "a scan of the snapshot disagreed");
                            checked += 1;
                        }
                    }
                    checked
                })
            })
            .collect();
        readers.into_iter().map(|r| r.join().expect("reader")).sum::<u64>()
    });
    assert!(checked > 100, "only {checked} snapshots were checked");
}

fn snapshots(db: &Db) -> u64 {
    db.stats().expect("stats").snapshots
}

/// Snapshots are counted on their taker's stripe and held without a shared reference
/// count (`Snapshot`'s header): taken on one thread and dropped on another, more at once
/// than a thread has guard slots (eight), cloned, in iterators, and outliving their store,
/// each is counted in and out once and reads what it should.
#[test]
fn snapshots_held_by_guards_count_in_and_out_on_any_thread() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    assert_eq!(snapshots(&db), 0);
    let mut held = Vec::new();
    for i in 0..20u32 {
        put(&db, "k", &i.to_le_bytes(), Durability::Buffered);
        held.push(db.snapshot());
        assert_eq!(snapshots(&db), u64::from(i) + 1);
    }
    for (i, snapshot) in held.iter().enumerate() {
        let value = (i as u32).to_le_bytes().to_vec();
        assert_eq!(snapshot.get("k").expect("get"), Some(value), "snapshot {i}");
    }
    let iter = db.range(..);
    let clone = held[3].clone();
    assert_eq!(snapshots(&db), 22, "an iterator and a clone hold one each");
    // Taken here, dropped on other threads, half while a write goes on.
    std::thread::scope(|scope| {
        let (first, second) = held.split_at(10);
        let (first, second) = (first.to_vec(), second.to_vec());
        scope.spawn(move || drop(first));
        scope.spawn(|| put(&db, "k", b"during", Durability::Buffered));
        scope.spawn(move || drop(second));
    });
    drop(held);
    assert_eq!(snapshots(&db), 2, "twenty dropped, the iterator and the clone left");
    assert_eq!(clone.get("k").expect("get"), Some(3u32.to_le_bytes().to_vec()));
    let entries: Vec<_> = iter.collect::<Result<_, _>>().expect("scan");
    assert_eq!(entries, [(b"k".to_vec(), 19u32.to_le_bytes().to_vec())]);
    assert_eq!(snapshots(&db), 1, "the iterator's was dropped with it");
    // A snapshot taken on another thread, outliving the store.
    let late = std::thread::scope(|scope| scope.spawn(|| db.snapshot()).join().expect("taker"));
    assert_eq!(snapshots(&db), 2);
    drop(db);
    assert!(matches!(late.get("k"), Err(tierkv::Error::Closed)));
    assert!(matches!(clone.range(..).next(), Some(Err(tierkv::Error::Closed))));
    drop((late, clone));
    let db = Db::open(dir.path(), Options::default()).expect("reopen");
    assert_eq!(db.get("k").expect("get"), Some(b"during".to_vec()));
    assert_eq!(snapshots(&db), 0);
}
