//! Model-based tests of `Db` against `std::collections::BTreeMap`: random puts, deletes,
//! range deletes, batches, lookups (`get`, `get_into`, `contains_key`, `first`, `last`),
//! range and prefix iterators in both directions, iterators driven from both ends with
//! seeks among their steps (and writes and checkpoints while they run), snapshots held
//! across later writes (and checkpoints), checkpoints and reopens, on small pages and
//! memtables so that trees split, checkpoints run often and values go to overflow blocks.
//!
//! `PROPTEST_CASES` sets the number of cases (CI runs the default below).

use std::collections::BTreeMap;
use std::ops::Bound;

use proptest::prelude::*;
use tierkv::{Db, Durability, Options, Snapshot, WriteBatch};
use tierkv_io::sim::SimFs;
use tierkv_io::Storage;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Get(Vec<u8>),
    Range {
        low: Bound<Vec<u8>>,
        high: Bound<Vec<u8>>,
        backward: bool,
        limit: usize,
    },
    Prefix {
        prefix: Vec<u8>,
        backward: bool,
    },
    /// An iterator over a range (`range`, or `range_back` when `reversed`), driven by
    /// `steps`.
    Iterate {
        low: Bound<Vec<u8>>,
        high: Bound<Vec<u8>>,
        reversed: bool,
        steps: Vec<Step>,
    },
    DeleteRange {
        low: Bound<Vec<u8>>,
        high: Bound<Vec<u8>>,
    },
    FirstLast,
    TakeSnapshot,
    /// Reads the snapshot `n` (modulo how many are held) in full, both ways, and drops it
    /// when `drop` is set.
    ReadSnapshot {
        n: usize,
        drop: bool,
    },
    Checkpoint,
    Compact,
    Reopen,
}

/// A step of `Op::Iterate`.
#[derive(Clone, Debug)]
enum Step {
    Next,
    NextBack,
    Seek(Vec<u8>),
    /// A write and a checkpoint while the iterator runs: it must not see them.
    PutAndCheckpoint(Vec<u8>),
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    // Few distinct first bytes, so keys share prefixes and collide.
    (0u8..6, prop::collection::vec(0u8..4, 0..5)).prop_map(|(a, mut rest)| {
        rest.insert(0, b'a' + a);
        rest
    })
}

fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => prop::collection::vec(any::<u8>(), 0..60),
        // Over a quarter of a 1 KiB page: an overflow value.
        1 => (300usize..3000, any::<u8>()).prop_map(|(len, byte)| vec![byte; len]),
    ]
}

fn bound() -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![
        Just(Bound::Unbounded),
        key().prop_map(Bound::Included),
        key().prop_map(Bound::Excluded),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => Just(Step::Next),
        8 => Just(Step::NextBack),
        2 => key().prop_map(Step::Seek),
        1 => key().prop_map(Step::PutAndCheckpoint),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => (key(), value()).prop_map(|(k, v)| Op::Put(k, v)),
        6 => key().prop_map(Op::Delete),
        3 => prop::collection::vec((key(), prop::option::of(value())), 1..8).prop_map(Op::Batch),
        5 => key().prop_map(Op::Get),
        2 => (bound(), bound(), any::<bool>(), 1usize..400)
            .prop_map(|(low, high, backward, limit)| Op::Range { low, high, backward, limit }),
        1 => (prop::collection::vec(b'a'..b'c', 0..2), any::<bool>())
            .prop_map(|(prefix, backward)| Op::Prefix { prefix, backward }),
        3 => (bound(), bound(), any::<bool>(), prop::collection::vec(step(), 1..60)).prop_map(
            |(low, high, reversed, steps)| Op::Iterate { low, high, reversed, steps }
        ),
        1 => (bound(), bound()).prop_map(|(low, high)| Op::DeleteRange { low, high }),
        1 => Just(Op::FirstLast),
        1 => Just(Op::TakeSnapshot),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(n, drop)| Op::ReadSnapshot { n, drop }),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

fn options() -> Options {
    Options {
        // Room for the before-images a snapshot held across a case needs (the undo keeps up
        // to twice the write buffer); the pages' share is still small enough to evict.
        cache_size: (512 + 128) << 10,
        write_buffer_size: Some(256 << 10),
        max_page_bytes: Some(1024),
        // The simulated file system makes every write durable at its sync; `None` keeps the
        // test fast, and reopen comes after a drop, which syncs the log.
        durability: Durability::None,
        log_segment_bytes: 64 << 10,
        block_segment_bytes: 64 << 10,
        ..Options::default()
    }
}

fn collect(
    iter: impl Iterator<Item = tierkv::Result<(Vec<u8>, Vec<u8>)>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    iter.map(|entry| entry.expect("an iterator entry")).collect()
}

fn check_snapshot(snapshot: &Snapshot, model: &Model) -> Result<(), TestCaseError> {
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
    prop_assert_eq!(&collect(snapshot.range(..)), &want);
    let mut back = want.clone();
    back.reverse();
    prop_assert_eq!(collect(snapshot.range_back(..)), back.clone());
    prop_assert_eq!(collect(snapshot.range(..).rev()), back);
    prop_assert_eq!(snapshot.first().expect("first"), want.first().cloned());
    prop_assert_eq!(snapshot.last().expect("last"), want.last().cloned());
    for (key, value) in model.iter().take(20) {
        prop_assert_eq!(snapshot.get(key).expect("get"), Some(value.clone()));
    }
    Ok(())
}

/// Whether a range holds no key (`BTreeMap::range` panics on an empty or inverted one;
/// the engine gives none).
fn is_empty(low: &Bound<Vec<u8>>, high: &Bound<Vec<u8>>) -> bool {
    match (low, high) {
        (Bound::Included(l), Bound::Included(h)) => l > h,
        (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(h))
        | (Bound::Excluded(l), Bound::Included(h)) => l >= h,
        _ => false,
    }
}

/// The model's entries in a range, ascending.
fn model_range(
    model: &Model,
    low: &Bound<Vec<u8>>,
    high: &Bound<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    if is_empty(low, high) {
        return Vec::new();
    }
    model.range((low.clone(), high.clone())).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Drives an iterator by `steps` and checks each answer against the model's entries of
/// its range, in the iterator's order: `next` takes the front of what is left, `next_back`
/// its back, a seek moves the front to the first key at or past the key in that order, but
/// never past what `next_back` took.
fn check_iterate(
    db: &Db,
    model: &mut Model,
    low: Bound<Vec<u8>>,
    high: Bound<Vec<u8>>,
    reversed: bool,
    steps: Vec<Step>,
) -> Result<(), TestCaseError> {
    let mut order = model_range(model, &low, &high);
    if reversed {
        order.reverse();
    }
    // What is left: `order[front..back]`.
    let (mut front, mut back) = (0, order.len());
    let mut iter = if reversed { db.range_back((low, high)) } else { db.range((low, high)) };
    for step in steps {
        match step {
            Step::Next => {
                let want = (front < back).then(|| order[front].clone());
                front += usize::from(front < back);
                prop_assert_eq!(iter.next().transpose().expect("next"), want);
            }
            Step::NextBack => {
                let want = (front < back).then(|| order[back - 1].clone());
                back -= usize::from(front < back);
                prop_assert_eq!(iter.next_back().transpose().expect("next_back"), want);
            }
            Step::Seek(key) => {
                let past =
                    |(k, _): &(Vec<u8>, Vec<u8>)| if reversed { *k <= key } else { *k >= key };
                front = order.iter().position(past).unwrap_or(order.len()).min(back);
                iter.seek(&key);
            }
            Step::PutAndCheckpoint(key) => {
                db.put(&key, b"later").expect("put");
                model.insert(key, b"later".to_vec());
                db.checkpoint().expect("checkpoint");
            }
        }
    }
    // The rest, from both ends alternately.
    let mut from_front = true;
    while front < back {
        let (got, want) = if from_front {
            front += 1;
            (iter.next(), order[front - 1].clone())
        } else {
            back -= 1;
            (iter.next_back(), order[back].clone())
        };
        prop_assert_eq!(got.transpose().expect("an entry"), Some(want));
        from_front = !from_front;
    }
    prop_assert!(iter.next().is_none() && iter.next_back().is_none());
    Ok(())
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let fs = SimFs::new();
    let storage = Storage::Sim(fs);
    let open = || Db::open_on(&storage, "/db", options()).expect("open");
    let mut db = open();
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    for op in ops {
        match op {
            Op::Put(k, v) => {
                db.put(&k, &v).expect("put");
                model.insert(k, v);
            }
            Op::Delete(k) => {
                db.delete(&k).expect("delete");
                model.remove(&k);
            }
            Op::Batch(ops) => {
                let mut batch = WriteBatch::new();
                for (k, v) in ops {
                    match v {
                        Some(v) => {
                            batch.put(&k, &v);
                            model.insert(k, v);
                        }
                        None => {
                            batch.delete(&k);
                            model.remove(&k);
                        }
                    }
                }
                db.write(&batch).expect("batch");
            }
            Op::Get(k) => {
                let want = model.get(&k).cloned();
                prop_assert_eq!(db.get(&k).expect("get"), want.clone());
                prop_assert_eq!(db.contains_key(&k).expect("contains_key"), want.is_some());
                let mut buffer = b"stale".to_vec();
                let found = db.get_into(&k, &mut buffer).expect("get_into");
                prop_assert_eq!(found.then_some(buffer), want.clone());
                let len = db.get_with(&k, <[u8]>::len).expect("get_with");
                prop_assert_eq!(len, want.map(|v| v.len()));
            }
            Op::Range { low, high, backward, limit } => {
                let mut want = model_range(&model, &low, &high);
                if backward {
                    want.reverse();
                }
                want.truncate(limit);
                let iter =
                    if backward { db.range_back((low, high)) } else { db.range((low, high)) };
                prop_assert_eq!(collect(iter.take(limit)), want);
            }
            Op::Prefix { prefix, backward } => {
                let mut want: Vec<(Vec<u8>, Vec<u8>)> = model
                    .iter()
                    .filter(|(k, _)| k.starts_with(&prefix))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let got = if backward {
                    want.reverse();
                    collect(db.prefix_back(&prefix))
                } else {
                    collect(db.prefix(&prefix))
                };
                prop_assert_eq!(got, want);
            }
            Op::Iterate { low, high, reversed, steps } => {
                check_iterate(&db, &mut model, low, high, reversed, steps)?;
            }
            Op::DeleteRange { low, high } => {
                let gone = model_range(&model, &low, &high);
                for (k, _) in &gone {
                    model.remove(k);
                }
                let removed = db.delete_range((low, high)).expect("delete_range");
                prop_assert_eq!(removed, gone.len() as u64);
            }
            Op::FirstLast => {
                let first = model.first_key_value().map(|(k, v)| (k.clone(), v.clone()));
                let last = model.last_key_value().map(|(k, v)| (k.clone(), v.clone()));
                prop_assert_eq!(db.first().expect("first"), first);
                prop_assert_eq!(db.last().expect("last"), last);
            }
            Op::TakeSnapshot => snapshots.push((db.snapshot(), model.clone())),
            Op::ReadSnapshot { n, drop } => {
                if !snapshots.is_empty() {
                    let at = n % snapshots.len();
                    check_snapshot(&snapshots[at].0, &snapshots[at].1)?;
                    if drop {
                        snapshots.remove(at);
                    }
                }
            }
            Op::Checkpoint => db.checkpoint().expect("checkpoint"),
            Op::Compact => {
                db.compact().expect("compact");
                let report = db.verify().expect("verify");
                prop_assert!(report.is_clean(), "{:?}", report.problems);
                prop_assert_eq!(report.entries, model.len() as u64);
            }
            Op::Reopen => {
                // Snapshots do not outlive their store.
                snapshots.clear();
                if fastrand::bool() {
                    db.close().expect("close");
                } else {
                    drop(db);
                }
                db = open();
            }
        }
    }
    for (snapshot, model) in &snapshots {
        check_snapshot(snapshot, model)?;
    }
    check_snapshot(&db.snapshot(), &model)?;
    drop(snapshots);
    db.close().expect("close");
    let db = open();
    check_snapshot(&db.snapshot(), &model)?;
    // Closing checkpointed everything: the tree holds exactly the model.
    let report = db.verify().expect("verify");
    prop_assert!(report.is_clean(), "{:?}", report.problems);
    prop_assert_eq!(report.entries, model.len() as u64);
    let bytes: usize = model.iter().map(|(k, v)| k.len() + v.len()).sum();
    prop_assert_eq!(report.key_bytes + report.value_bytes, bytes as u64);
    Ok(())
}

/// `PROPTEST_CASES`, or 48.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(48)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn the_store_matches_a_btreemap(ops in prop::collection::vec(op(), 1..300)) {
        run(ops)?;
    }
}

/// Enough writes for many checkpoints, run in the background while the model keeps
/// checking, and old snapshots keep reading the state they saw through the undo.
#[test]
fn background_checkpoints_keep_every_snapshot_whole() {
    let storage = Storage::Sim(SimFs::new());
    // The oldest snapshot held sees 10,000 writes before it is read: the undo keeps their
    // before-images (up to twice the write buffer). Checkpoints come by log size, each once
    // the log holds as many bytes as the dirty pages (about 180 KiB here): 20,000 writes
    // log about 1.4 MB, for up to 8 checkpoints (4 in one run; kicks during a checkpoint
    // wait for its end).
    let options = Options {
        cache_size: 6 << 20,
        write_buffer_size: Some(2 << 20),
        checkpoint_log_bytes: 128 << 10,
        ..options()
    };
    let db = Db::open_on(&storage, "/db", options).expect("open");
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    let mut rng = fastrand::Rng::with_seed(7);
    for i in 0..20_000u32 {
        let key = format!("key{:05}", rng.u32(..3000)).into_bytes();
        if rng.u8(..5) == 0 {
            db.delete(&key).expect("delete");
            model.remove(&key);
        } else {
            let value = format!("value{i}").repeat(rng.usize(1..6)).into_bytes();
            db.put(&key, &value).expect("put");
            model.insert(key, value);
        }
        if i % 2000 == 0 {
            snapshots.push((db.snapshot(), model.clone()));
        }
        if i % 5000 == 4999 {
            // Drop the oldest: the blocks only it needed may go at the next checkpoint.
            snapshots.remove(0);
        }
    }
    let stats = db.stats().expect("stats");
    assert!(stats.checkpoints >= 3, "{stats:?}");
    assert!(stats.tree_height >= 2, "{stats:?}");
    for (snapshot, model) in &snapshots {
        check_snapshot(snapshot, model).expect("snapshot");
    }
    drop(snapshots);
    db.checkpoint().expect("checkpoint");
    db.checkpoint().expect("checkpoint");
    let stats = db.stats().expect("stats");
    // Every change is written back: nothing is left for a reopen to replay.
    assert_eq!((stats.dirty_pages, stats.checkpoint_sequence), (0, stats.sequence), "{stats:?}");
    check_snapshot(&db.snapshot(), &model).expect("latest");
}

/// Compaction packs a tree that deletes left sparse into fewer pages, keeps every entry,
/// and snapshots taken before it still read what they saw.
#[test]
fn compaction_packs_pages_and_keeps_old_snapshots_whole() {
    let storage = Storage::Sim(SimFs::new());
    let db = Db::open_on(&storage, "/db", options()).expect("open");
    let mut model = Model::new();
    for i in 0..6_000u32 {
        let key = format!("key{i:05}").into_bytes();
        let value = vec![i as u8; 40];
        db.put(&key, &value).expect("put");
        model.insert(key, value);
    }
    for i in (0..6_000u32).filter(|i| i % 3 != 0) {
        let key = format!("key{i:05}").into_bytes();
        db.delete(&key).expect("delete");
        model.remove(&key);
    }
    db.checkpoint().expect("checkpoint");
    let before = db.verify().expect("verify");
    assert!(before.is_clean(), "{:?}", before.problems);
    let snapshot = db.snapshot();
    let seen = model.clone();
    db.compact().expect("compact");
    let after = db.verify().expect("verify");
    assert!(after.is_clean(), "{:?}", after.problems);
    assert_eq!(after.entries, model.len() as u64);
    assert!(
        after.leaves * 3 < before.leaves * 2,
        "{} leaves before, {} after",
        before.leaves,
        after.leaves
    );
    check_snapshot(&snapshot, &seen).expect("the snapshot from before");
    check_snapshot(&db.snapshot(), &model).expect("after");
    drop(snapshot);
    db.close().expect("close");
    let db = Db::open_on(&storage, "/db", options()).expect("reopen");
    check_snapshot(&db.snapshot(), &model).expect("reopened");
}
