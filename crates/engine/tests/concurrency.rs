//! Eight threads at once on one `Db` (real files): each writes its own keys (puts,
//! deletes, batches), reads them back, scans its prefix in both directions, holds snapshots
//! across its later writes, and reads the other threads' keys; checkpoints run on demand
//! and in the background with a cache far smaller than the data. Checked against
//! per-thread histories:
//!
//! - a thread's own keys read, scan and snapshot exactly as its own model says;
//! - another thread's key holds a value that thread wrote, never an older one than this
//!   reader saw before (values carry a counter);
//! - each thread's pair keys, always written together in one batch, are equal in every
//!   snapshot and scan any thread takes (batches are atomic for readers);
//! - after a close and reopen, the store holds exactly the union of the final models.
//!
//! `TIERKV_CONCURRENCY_OPS` sets the operations per thread (CI runs the default below).

use std::collections::BTreeMap;
use std::sync::Barrier;

use tierkv::{Db, Durability, Options, Snapshot, WriteBatch};

const THREADS: usize = 8;
const KEYS_PER_THREAD: u32 = 200;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    Options {
        // The undo keeps up to twice the write buffer of before-images for the scans and
        // snapshots that run while the other threads write.
        cache_size: (4096 + 512) << 10,
        write_buffer_size: Some(2 << 20),
        max_page_bytes: Some(2048),
        durability: Durability::Buffered,
        log_segment_bytes: 1 << 20,
        block_segment_bytes: 1 << 20,
        ..Options::default()
    }
}

fn own_key(thread: usize, key: u32) -> Vec<u8> {
    format!("t{thread}/k{key:04}").into_bytes()
}

/// A value: the writer, its counter, and padding so some pages fill quickly.
fn value(thread: usize, counter: u64, pad: usize) -> Vec<u8> {
    let mut value = format!("{thread}:{counter:010}:").into_bytes();
    value.resize(value.len() + pad, b'.');
    value
}

fn counter_of(value: &[u8]) -> u64 {
    let text = std::str::from_utf8(value).expect("a value is text");
    text.split(':').nth(1).and_then(|c| c.parse().ok()).expect("a value has a counter")
}

fn scan(iter: impl Iterator<Item = tierkv::Result<(Vec<u8>, Vec<u8>)>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    iter.map(|entry| entry.expect("an iterator entry")).collect()
}

/// The thread's own keys (but not its pair) as a snapshot sees them.
fn own_view(snapshot: &Snapshot, thread: usize) -> Model {
    scan(snapshot.prefix(format!("t{thread}/k"))).into_iter().collect()
}

/// Checks that every thread's pair keys are equal in `snapshot`.
fn pairs_agree(snapshot: &Snapshot) {
    for thread in 0..THREADS {
        let a = snapshot.get(format!("t{thread}/pair/a")).expect("get");
        let b = snapshot.get(format!("t{thread}/pair/b")).expect("get");
        assert_eq!(a, b, "thread {thread}'s pair seen half-written");
    }
}

fn worker(db: &Db, thread: usize, ops: usize, barrier: &Barrier) -> Model {
    let mut rng = fastrand::Rng::with_seed(thread as u64 * 7919 + 1);
    let mut model = Model::new();
    let mut counter = 0u64;
    let mut held: Vec<(Snapshot, Model)> = Vec::new();
    // The newest counter this thread saw for each other thread's key.
    let mut seen: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    barrier.wait();
    for op in 0..ops {
        counter += 1;
        match rng.u8(..20) {
            0..=6 => {
                let key = own_key(thread, rng.u32(..KEYS_PER_THREAD));
                let value = value(thread, counter, rng.usize(0..120));
                let durability =
                    if rng.u8(..10) == 0 { Durability::Sync } else { Durability::Buffered };
                let mut batch = WriteBatch::new();
                batch.put(&key, &value);
                db.write_with(&batch, durability).expect("put");
                model.insert(key, value);
            }
            7 => {
                let key = own_key(thread, rng.u32(..KEYS_PER_THREAD));
                db.delete(&key).expect("delete");
                model.remove(&key);
            }
            8..=9 => {
                // The pair, and a few own keys, in one batch.
                let mut batch = WriteBatch::new();
                let pair = value(thread, counter, 10);
                batch.put(format!("t{thread}/pair/a"), &pair);
                batch.put(format!("t{thread}/pair/b"), &pair);
                for _ in 0..rng.usize(0..4) {
                    let key = own_key(thread, rng.u32(..KEYS_PER_THREAD));
                    let value = value(thread, counter, 30);
                    batch.put(&key, &value);
                    model.insert(key, value);
                }
                db.write(&batch).expect("batch");
            }
            10..=12 => {
                let key = own_key(thread, rng.u32(..KEYS_PER_THREAD));
                assert_eq!(
                    db.get(&key).expect("get"),
                    model.get(&key).cloned(),
                    "thread {thread} op {op}"
                );
            }
            13..=14 => {
                let other = rng.usize(..THREADS);
                if other != thread {
                    let key = own_key(other, rng.u32(..KEYS_PER_THREAD));
                    if let Some(found) = db.get(&key).expect("get") {
                        assert!(found.starts_with(format!("{other}:").as_bytes()));
                        let now = counter_of(&found);
                        let before = seen.insert(key.clone(), now).unwrap_or(0);
                        assert!(
                            now >= before,
                            "thread {thread} saw {key:?} go back from {before} to {now}"
                        );
                    }
                }
            }
            15 => {
                let snapshot = db.snapshot();
                assert_eq!(own_view(&snapshot, thread), model, "thread {thread} op {op}");
                let mut back = scan(snapshot.prefix_back(format!("t{thread}/k")));
                back.reverse();
                assert_eq!(back, model.clone().into_iter().collect::<Vec<_>>());
                pairs_agree(&snapshot);
                // A full scan sees each pair whole too.
                let all: Model = scan(snapshot.range(..)).into_iter().collect();
                for t in 0..THREADS {
                    let (a, b) = (format!("t{t}/pair/a"), format!("t{t}/pair/b"));
                    let in_scan = (all.get(a.as_bytes()), all.get(b.as_bytes()));
                    if in_scan.0 != in_scan.1 {
                        // What else the snapshot says, to tell a scan's fault from a get's.
                        let text = |v: Option<&Vec<u8>>| {
                            v.map(|v| String::from_utf8_lossy(v).into_owned())
                        };
                        let got = (snapshot.get(&a).expect("get"), snapshot.get(&b).expect("get"));
                        let again: Model = scan(snapshot.range(..)).into_iter().collect();
                        panic!(
                            "thread {thread} op {op}: thread {t}'s pair in a full scan {:?}, \
                             by get {:?}, scanned again {:?}",
                            (text(in_scan.0), text(in_scan.1)),
                            (text(got.0.as_ref()), text(got.1.as_ref())),
                            (text(again.get(a.as_bytes())), text(again.get(b.as_bytes()))),
                        );
                    }
                }
            }
            16 => {
                if held.len() < 4 {
                    held.push((db.snapshot(), model.clone()));
                }
            }
            17 => {
                if !held.is_empty() {
                    let (snapshot, then) = held.remove(rng.usize(..held.len()));
                    assert_eq!(
                        own_view(&snapshot, thread),
                        then,
                        "thread {thread}: an old snapshot changed"
                    );
                    pairs_agree(&snapshot);
                }
            }
            18 => {
                if thread == 0 && op % 10 == 0 {
                    db.checkpoint().expect("checkpoint");
                }
            }
            _ => {
                let from = own_key(thread, rng.u32(..KEYS_PER_THREAD));
                let got = scan(db.range(from.clone()..).take(10));
                let mine: Vec<_> = got
                    .iter()
                    .filter(|(k, _)| k.starts_with(format!("t{thread}/k").as_bytes()))
                    .cloned()
                    .collect();
                let want: Vec<_> = model
                    .range(from..)
                    .take(mine.len())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(mine, want);
            }
        }
    }
    for (snapshot, then) in held {
        assert_eq!(own_view(&snapshot, thread), then, "thread {thread}: an old snapshot changed");
    }
    model
}

#[test]
fn eight_threads_read_write_scan_snapshot_and_checkpoint_at_once() {
    let ops: usize = std::env::var("TIERKV_CONCURRENCY_OPS")
        .ok()
        .and_then(|ops| ops.parse().ok())
        .unwrap_or(3_000);
    let dir = tempfile::tempdir().expect("dir");
    let db = Db::open(dir.path(), options()).expect("open");
    let barrier = Barrier::new(THREADS);
    let models: Vec<Model> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|thread| {
                let (db, barrier) = (&db, &barrier);
                scope.spawn(move || worker(db, thread, ops, barrier))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a worker panicked")).collect()
    });
    let stats = db.stats().expect("stats");
    eprintln!(
        "concurrency: {THREADS} threads x {ops} ops, {} checkpoints, {} pages written, tree height {}, cache hits {} misses {} evictions {}",
        stats.checkpoints, stats.pages_written, stats.tree_height, stats.cache.hits, stats.cache.misses, stats.cache.evictions
    );
    assert!(stats.checkpoints > 3, "{stats:?}");
    // Pages split and were written back while the threads ran.
    assert!(stats.pages_written > stats.next_page, "{stats:?}");
    db.close().expect("close");
    let db = Db::open(dir.path(), options()).expect("reopen");
    let snapshot = db.snapshot();
    pairs_agree(&snapshot);
    for (thread, model) in models.iter().enumerate() {
        assert_eq!(&own_view(&snapshot, thread), model, "thread {thread} after reopen");
    }
}
