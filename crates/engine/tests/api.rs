//! The library API beyond single gets and puts, against a `BTreeMap` of what was written:
//! iterators driven from both ends over tree and memtable data across a checkpoint, `rev`,
//! `seek`, reads into a caller's buffer or borrowed, `contains_key`, `first`/`last`,
//! `delete_range` seen atomically by concurrent readers and after a reopen, every range
//! form without annotations, and `close` of a store shared in an `Arc` by two threads at
//! once while a third writes.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, Barrier};

use tierkv::{Db, Durability, Error, Options};
use tierkv_io::sim::SimFs;
use tierkv_io::Storage;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Entry = (Vec<u8>, Vec<u8>);

/// Small pages and memtables: the tree has several levels and iterators refill often.
fn options() -> Options {
    Options {
        cache_size: (64 + 128) << 10,
        write_buffer_size: Some(64 << 10),
        max_page_bytes: Some(1024),
        durability: Durability::None,
        log_segment_bytes: 64 << 10,
        block_segment_bytes: 64 << 10,
        ..Options::default()
    }
}

fn open(storage: &Storage) -> Db {
    Db::open_on(storage, "/db", options()).expect("open")
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn entries(iter: impl Iterator<Item = tierkv::Result<Entry>>) -> Vec<Entry> {
    iter.map(|entry| entry.expect("an entry")).collect()
}

fn keys(iter: impl Iterator<Item = tierkv::Result<Entry>>) -> Vec<Vec<u8>> {
    entries(iter).into_iter().map(|(key, _)| key).collect()
}

/// 3,000 keys checkpointed into the tree, then in the memtable: every 7th deleted, every
/// 5th overwritten, and a new key after every 11th.
fn tree_and_memtable(db: &Db) -> Model {
    let mut model = Model::new();
    for i in 0..3_000 {
        let value = format!("tree{i}").into_bytes();
        db.put(key(i), &value).expect("put");
        model.insert(key(i), value);
    }
    db.checkpoint().expect("checkpoint");
    assert!(db.stats().expect("stats").tree_height >= 2);
    for i in 0..3_000 {
        if i % 7 == 0 {
            db.delete(key(i)).expect("delete");
            model.remove(&key(i));
        } else if i % 5 == 0 {
            db.put(key(i), b"memtable").expect("put");
            model.insert(key(i), b"memtable".to_vec());
        }
        if i % 11 == 0 {
            let new = [key(i), b"+".to_vec()].concat();
            db.put(&new, b"new").expect("put");
            model.insert(new, b"new".to_vec());
        }
    }
    model
}

/// Both ends of one iterator, in several rhythms, with a checkpoint and later writes
/// while it runs: together they return the range once, each end in its order, and meet
/// in the middle.
#[test]
fn both_ends_meet_in_the_middle_over_tree_and_memtable_across_a_checkpoint() {
    let storage = Storage::Sim(SimFs::new());
    let db = open(&storage);
    let model = tree_and_memtable(&db);
    let all: Vec<Entry> = model.into_iter().collect();
    let mut rng = fastrand::Rng::with_seed(24);
    // (steps from the front, steps from the back) per round; (0, 0): random.
    for (round, (fronts, backs)) in
        [(1, 1), (3, 1), (1, 5), (50, 1), (0, 0)].into_iter().enumerate()
    {
        let mut iter = db.range(..);
        let (mut front, mut back) = (Vec::new(), Vec::new());
        let mut steps = 0;
        loop {
            let (f, b) =
                if fronts == 0 { (rng.usize(0..4), rng.usize(0..4)) } else { (fronts, backs) };
            let taken = front.len() + back.len();
            front.extend((0..f).map_while(|_| iter.next()).map(|e| e.expect("next")));
            back.extend((0..b).map_while(|_| iter.next_back()).map(|e| e.expect("next_back")));
            steps += 1;
            if steps == 3 {
                // Neither a checkpoint nor a later write changes what the iterator sees.
                db.put(b"key00000+later", b"unseen").expect("put");
                db.delete(&all[all.len() / 2].0).expect("delete");
                db.checkpoint().expect("checkpoint");
            }
            if front.len() + back.len() == taken && f + b > 0 {
                break;
            }
        }
        assert!(iter.next().is_none() && iter.next_back().is_none(), "round {round}");
        back.reverse();
        front.extend(back);
        assert_eq!(front.len(), all.len(), "round {round}");
        assert!(front == all, "round {round}: the two ends do not add up to the range");
        // Put back what the round changed.
        db.delete(b"key00000+later").expect("delete");
        let (middle, value) = &all[all.len() / 2];
        db.put(middle, value).expect("put");
    }
}

#[test]
fn rev_composes_with_every_iterator() {
    let storage = Storage::Sim(SimFs::new());
    let db = open(&storage);
    let model = tree_and_memtable(&db);
    let (low, high) = (key(100), key(200));
    let want: Vec<Entry> =
        model.range(low.clone()..high.clone()).map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut back = want.clone();
    back.reverse();
    assert_eq!(entries(db.range(low.as_slice()..high.as_slice()).rev()), back);
    assert_eq!(entries(db.range_back(low.as_slice()..high.as_slice())), back);
    assert_eq!(entries(db.range_back(low.as_slice()..high.as_slice()).rev()), want);
    assert_eq!(entries(db.range(low.as_slice()..high.as_slice()).rev().rev()), want);
    let all: Vec<Entry> = model.clone().into_iter().collect();
    assert_eq!(entries(db.range_back(..).rev()), all);
    let prefix: Vec<Entry> =
        all.iter().filter(|(k, _)| k.starts_with(b"key012")).cloned().collect();
    assert_eq!(entries(db.prefix("key012").rev().rev()), prefix);
    assert_eq!(entries(db.prefix_back("key012").rev()), prefix);
    // A reversed iterator's next_back runs ascending.
    let mut reversed = db.range_back(..);
    assert_eq!(reversed.next_back().transpose().expect("next_back"), all.first().cloned());
    assert_eq!(reversed.next().transpose().expect("next"), all.last().cloned());
    // Adapters that need DoubleEndedIterator work.
    assert_eq!(db.range(..).rev().take(3).count(), 3);
    assert_eq!(db.range(..).nth_back(0).transpose().expect("nth_back"), all.last().cloned());
    assert_eq!(db.range(..).last().transpose().expect("last"), all.last().cloned());
}

/// `limit(n)` hands out the first n entries of the iterator's order, counted over both
/// ends together, whatever the ends' rhythm, and composes with `rev`, bounds, seeks and a
/// second `limit`.
#[test]
fn limit_hands_out_at_most_its_count_from_both_ends() {
    let storage = Storage::Sim(SimFs::new());
    let db = open(&storage);
    let model = tree_and_memtable(&db);
    let all: Vec<Entry> = model.into_iter().collect();
    let mut back = all.clone();
    back.reverse();
    for n in [0, 1, 3, 4, 5, 13, 100, all.len() - 1, all.len(), all.len() + 5] {
        let first = &all[..n.min(all.len())];
        assert_eq!(entries(db.range(..).limit(n)), first, "forward, limit {n}");
        assert_eq!(entries(db.range_back(..).limit(n)), &back[..n.min(all.len())], "back {n}");
        assert_eq!(entries(db.range(..).limit(n + 7).limit(n)), first, "the smaller limit");
        let mut reversed: Vec<Entry> = entries(db.range(..).limit(n).rev());
        reversed.reverse();
        assert_eq!(reversed, &all[all.len() - n.min(all.len())..], "rev, limit {n}");
        // Both ends, alternately: n entries in all, the front's a prefix, the back's a
        // suffix.
        let mut iter = db.range(..).limit(n);
        let (mut front, mut end) = (Vec::new(), Vec::new());
        loop {
            let a = iter.next().map(|e| e.expect("next"));
            let b = iter.next_back().map(|e| e.expect("next_back"));
            if a.is_none() && b.is_none() {
                break;
            }
            front.extend(a);
            end.extend(b);
        }
        assert_eq!(front.len() + end.len(), n.min(all.len()), "both ends, limit {n}");
        assert_eq!(front, &all[..front.len()]);
        end.reverse();
        assert_eq!(end, &all[all.len() - end.len()..]);
    }
    // Bounds and a seek: the limit counts what was handed out, before the seek too.
    let (low, high) = (key(100), key(200));
    let want: Vec<Entry> = all.iter().filter(|(k, _)| *k >= low && *k < high).cloned().collect();
    assert_eq!(entries(db.range(low.as_slice()..high.as_slice()).limit(9)), &want[..9]);
    let mut iter = db.range(low.as_slice()..high.as_slice()).limit(5);
    assert_eq!(iter.next().transpose().expect("next"), Some(want[0].clone()));
    iter.seek(&want[20].0);
    assert_eq!(entries(iter), &want[20..24], "four left after one and a seek");
}

/// `seek` moves the end `next` takes from, within the original bounds, back or forth, and
/// never to what the other end returned.
#[test]
fn seek_moves_next_within_the_bounds() {
    let storage = Storage::Sim(SimFs::new());
    let db = open(&storage);
    for i in 0..1_000 {
        db.put(key(i), b"v").expect("put");
    }
    db.checkpoint().expect("checkpoint");
    for i in (0..1_000).step_by(3) {
        db.delete(key(i)).expect("delete");
    }
    let next_key = |iter: &mut tierkv::Iter| iter.next().transpose().expect("next").map(|e| e.0);
    let back_key =
        |iter: &mut tierkv::Iter| iter.next_back().transpose().expect("next_back").map(|e| e.0);
    let mut iter = db.range(key(100)..key(200));
    iter.seek(key(151));
    assert_eq!(next_key(&mut iter), Some(key(151)));
    // Key 150 is deleted: the next one.
    iter.seek(key(150));
    assert_eq!(next_key(&mut iter), Some(key(151)));
    // Below the start: the start.
    iter.seek(b"a");
    assert_eq!(next_key(&mut iter), Some(key(100)));
    iter.seek([key(152), b"+".to_vec()].concat());
    assert_eq!(next_key(&mut iter), Some(key(154)));
    // The back end takes 199, 197; a seek past them finds nothing, from either end.
    assert_eq!(back_key(&mut iter), Some(key(199)));
    assert_eq!(back_key(&mut iter), Some(key(197)));
    iter.seek(key(198));
    assert_eq!(next_key(&mut iter), None);
    assert_eq!(back_key(&mut iter), None);
    // Back again: up to where the back end stands.
    iter.seek(key(190));
    let rest: Vec<Vec<u8>> = std::iter::from_fn(|| next_key(&mut iter)).collect();
    assert_eq!(rest, [key(190), key(191), key(193), key(194), key(196)]);
    // Past the end of the bounds.
    let mut iter = db.range(key(100)..key(200));
    iter.seek(b"z");
    assert_eq!((next_key(&mut iter), back_key(&mut iter)), (None, None));
    // A reversed iterator: `next` goes to the last key at or before the key.
    let mut reversed = db.range_back(..);
    reversed.seek(key(501));
    assert_eq!(next_key(&mut reversed), Some(key(500)));
    reversed.seek([key(500), b"+".to_vec()].concat());
    assert_eq!(next_key(&mut reversed), Some(key(500)));
    assert_eq!(back_key(&mut reversed), Some(key(1)));
    reversed.seek(b"a");
    assert_eq!(next_key(&mut reversed), None);
    // Seeking many times over a long range keeps returning the right keys.
    let mut iter = db.range(..);
    for i in (0..1_000).rev().step_by(37) {
        iter.seek(key(i));
        let want = (i..1_000).find(|i| i % 3 != 0).map(key);
        assert_eq!(next_key(&mut iter), want, "seek to {i}");
    }
}

/// A seek back over entries already returned returns them again, values included, from
/// either end and from the tree alone (each value is handed out of the leaf's chunk once,
/// so the chunk must be read again).
#[test]
fn a_seek_back_returns_the_same_values_again() {
    let storage = Storage::Sim(SimFs::new());
    let db = open(&storage);
    let value = |i: u32| format!("value {i} ").repeat(1 + i as usize % 7).into_bytes();
    for i in 0..600 {
        db.put(key(i), value(i)).expect("put");
    }
    db.checkpoint().expect("checkpoint");
    for reversed in [false, true] {
        let mut iter = if reversed { db.range_back(..) } else { db.range(..) };
        let first: Vec<Entry> = entries(iter.by_ref().take(25));
        assert_eq!(first.len(), 25);
        for (k, v) in &first {
            let i: u32 = std::str::from_utf8(&k[3..]).expect("digits").parse().expect("a number");
            assert_eq!(*v, value(i), "{reversed}");
        }
        for again in [0, 10, 24] {
            iter.seek(&first[again].0);
            let rest: Vec<Entry> = entries(iter.by_ref().take(25 - again));
            assert_eq!(rest, first[again..], "reversed {reversed}, seek to entry {again}");
        }
    }
}

/// A long scan over the tree with a few keys in the memtable sees exactly its snapshot:
/// the memtable's few keys merged in (a scan that skips stretches of the memtable it knows
/// hold nothing), and nothing written after the iterator was made, even in stretches it
/// skips.
#[test]
fn a_long_scan_merges_a_sparse_memtable_and_sees_no_later_write() {
    let storage = Storage::Sim(SimFs::new());
    let db = open(&storage);
    let mut model = std::collections::BTreeMap::new();
    for i in 0..3_000 {
        db.put(key(i), b"tree").expect("put");
        model.insert(key(i), b"tree".to_vec());
    }
    db.checkpoint().expect("checkpoint");
    for i in [5, 900, 1_500, 2_999, 3_100] {
        db.put(key(i), b"memtable").expect("put");
        model.insert(key(i), b"memtable".to_vec());
    }
    db.delete(key(1_200)).expect("delete");
    model.remove(&key(1_200));
    for reversed in [false, true] {
        let mut iter = if reversed { db.range_back(..) } else { db.range(..) };
        let mut seen: Vec<Entry> = entries(iter.by_ref().take(700));
        // Written after the iterator was made: none of it is seen, from either end.
        for i in [1_000, 1_300, 1_600, 2_500, 3_200] {
            db.put(key(i), b"later").expect("put");
        }
        db.delete(key(1_400)).expect("delete");
        seen.extend(entries(iter));
        let mut want: Vec<Entry> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        if reversed {
            want.reverse();
        }
        assert_eq!(seen.len(), want.len(), "reversed {reversed}");
        assert!(seen == want, "reversed {reversed}: the scan differs from its snapshot");
        // Undo the later writes for the next pass.
        for i in [1_000, 1_300, 1_400, 1_600, 2_500] {
            db.put(key(i), b"tree").expect("put");
        }
        db.delete(key(3_200)).expect("delete");
    }
}

#[test]
fn values_are_read_into_a_buffer_borrowed_or_not_at_all() {
    let storage = Storage::Sim(SimFs::new());
    let db = open(&storage);
    // Over a quarter of a 1 KiB page: kept in overflow blocks once checkpointed.
    let large = vec![7u8; 100 << 10];
    db.put("small", b"tiny").expect("put");
    db.put("large", &large).expect("put");
    db.put("gone", b"soon").expect("put");
    let mut buffer = Vec::with_capacity(200 << 10);
    let allocation = buffer.as_ptr();
    for phase in ["memtable", "tree", "deleted over the tree"] {
        let gone_found = phase != "deleted over the tree";
        assert!(db.get_into("small", &mut buffer).expect("get_into"), "{phase}");
        assert_eq!(buffer, b"tiny", "{phase}");
        assert!(db.get_into("large", &mut buffer).expect("get_into"), "{phase}");
        assert!(buffer == large, "{phase}");
        assert_eq!(buffer.as_ptr(), allocation, "{phase}: the caller's buffer is reused");
        assert_eq!(db.get_into("gone", &mut buffer).expect("get_into"), gone_found, "{phase}");
        assert!(!db.get_into("missing", &mut buffer).expect("get_into"), "{phase}");
        assert!(buffer.is_empty(), "{phase}: cleared when not found");
        let sum = |value: &[u8]| value.iter().map(|&byte| u64::from(byte)).sum::<u64>();
        assert_eq!(db.get_with("large", sum).expect("get_with"), Some(7 * (100 << 10)));
        assert_eq!(db.get_with("missing", sum).expect("get_with"), None);
        for (key, found) in [("small", true), ("large", true), ("gone", gone_found), ("x", false)] {
            assert_eq!(db.contains_key(key).expect("contains_key"), found, "{phase}: {key}");
            let snapshot = db.snapshot();
            assert_eq!(snapshot.contains_key(key).expect("contains_key"), found, "{phase}");
        }
        match phase {
            "memtable" => db.checkpoint().expect("checkpoint"),
            _ => db.delete("gone").expect("delete"),
        }
    }
    assert!(matches!(db.get_into("", &mut buffer), Err(Error::EmptyKey)));
    assert!(matches!(db.contains_key(""), Err(Error::EmptyKey)));
    assert!(matches!(db.get_with("", |_| ()), Err(Error::EmptyKey)));
}

#[test]
fn first_and_last_on_empty_and_full_stores() {
    let storage = Storage::Sim(SimFs::new());
    let db = open(&storage);
    assert_eq!((db.first().expect("first"), db.last().expect("last")), (None, None));
    let empty = db.snapshot();
    db.put("m", "1").expect("put");
    let one = Some((b"m".to_vec(), b"1".to_vec()));
    assert_eq!((db.first().expect("first"), db.last().expect("last")), (one.clone(), one));
    assert_eq!((empty.first().expect("first"), empty.last().expect("last")), (None, None));
    let model = tree_and_memtable(&db);
    let snapshot = db.snapshot();
    let first = |model: &Model| model.first_key_value().map(|(k, v)| (k.clone(), v.clone()));
    let last = |model: &Model| model.last_key_value().map(|(k, v)| (k.clone(), v.clone()));
    let mut model = model;
    model.insert(b"m".to_vec(), b"1".to_vec());
    assert_eq!(db.first().expect("first"), first(&model));
    assert_eq!(db.last().expect("last"), last(&model));
    // The first key is deleted in the memtable over the tree; the last one too.
    let (lowest, highest) = (first(&model).expect("a key").0, last(&model).expect("a key").0);
    db.delete(&lowest).expect("delete");
    db.delete(&highest).expect("delete");
    let before = model.clone();
    model.remove(&lowest);
    model.remove(&highest);
    assert_eq!(db.first().expect("first"), first(&model));
    assert_eq!(db.last().expect("last"), last(&model));
    assert_eq!(snapshot.first().expect("first"), first(&before));
    assert_eq!(snapshot.last().expect("last"), last(&before));
    // Thousands of writes later, the before-images the first snapshot needs passed the
    // undo's limit (twice the 64 KiB write buffer) and were dropped: it says so.
    assert!(matches!(empty.first(), Err(Error::SnapshotTooOld { limit: 131_072 })));
}

/// A range delete removes the range in one batch: a reader never sees part of it, the
/// snapshot from before still has it all, and a reopen keeps it removed.
#[test]
fn delete_range_is_atomic_to_readers_and_survives_a_reopen() {
    let storage = Storage::Sim(SimFs::new());
    // Room for the before-images of the whole removal (about 2,000 keys), which a reader
    // that began before it needs: with less, that reader gets `SnapshotTooOld`.
    let options = Options { cache_size: 4 << 20, write_buffer_size: Some(1 << 20), ..options() };
    let db = Db::open_on(&storage, "/db", options).expect("open");
    let mut model = tree_and_memtable(&db);
    let (low, high) = (key(500), key(2_500));
    let in_range = model.range(low.clone()..high.clone()).count();
    assert!(in_range > 1_000);
    let before = db.snapshot();
    let barrier = Barrier::new(2);
    let removed = std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            barrier.wait();
            let mut seen = Vec::new();
            for _ in 0..200 {
                let range = db.range(low.as_slice()..high.as_slice());
                let mut count = 0;
                for entry in range {
                    entry.expect("an entry");
                    count += 1;
                }
                seen.push(count);
                if count == 0 {
                    break;
                }
            }
            seen
        });
        barrier.wait();
        let removed = db.delete_range(low.as_slice()..high.as_slice()).expect("delete_range");
        let seen = reader.join().expect("the reader");
        assert!(seen.iter().all(|&count| count == in_range || count == 0), "{seen:?}");
        removed
    });
    assert_eq!(removed, in_range as u64);
    model.retain(|k, _| *k < low || *k >= high);
    assert_eq!(db.range(low.as_slice()..high.as_slice()).count(), 0);
    assert_eq!(before.range(low.as_slice()..high.as_slice()).count(), in_range);
    // Empty and inverted ranges remove nothing and write nothing.
    let sequence = db.stats().expect("stats").sequence;
    assert_eq!(db.delete_range(low.as_slice()..high.as_slice()).expect("again"), 0);
    assert_eq!(db.delete_range(high.as_slice()..low.as_slice()).expect("inverted"), 0);
    assert_eq!(db.stats().expect("stats").sequence, sequence);
    // Every range form works; these remove the two ends.
    let (first, last) = (key(1), key(2_999));
    let below = model.range(..=first.clone()).count() as u64;
    assert_eq!(db.delete_range(..=first.as_slice()).expect("..="), below);
    let from = (Bound::Excluded(key(2_998)), Bound::Unbounded);
    let above = model.range(from.clone()).count() as u64;
    assert_eq!(db.delete_range(from).expect("bounds"), above);
    assert!(below >= 1 && above >= 1);
    model.retain(|k, _| *k > first && *k <= key(2_998));
    drop(before);
    db.close().expect("close");
    let db = open(&storage);
    let all: Vec<Entry> = model.into_iter().collect();
    assert_eq!(entries(db.range(..)), all);
    assert!(!db.contains_key(&last).expect("contains_key"));
}

/// Every range form of the README and the issue compiles without annotations.
#[test]
fn every_range_form_needs_no_annotation() {
    let storage = Storage::Sim(SimFs::new());
    let db = open(&storage);
    for k in ["a", "b", "c", "d"] {
        db.put(k, k).expect("put");
    }
    let (k1, k2) = (b"b".to_vec(), b"c".to_vec());
    let (vec_a, vec_b) = (b"a".to_vec(), b"c".to_vec());
    assert_eq!(db.range(..).count(), 4);
    assert_eq!(keys(db.range(b"a"..b"c")), [b"a", b"b"]);
    assert_eq!(keys(db.range("a".."c")), [b"a", b"b"]);
    assert_eq!(keys(db.range(k1.as_slice()..=k2.as_slice())), [b"b", b"c"]);
    assert_eq!(keys(db.range(vec_a..vec_b)), [b"a", b"b"]);
    assert_eq!(keys(db.range(&k1..&k2)), [b"b"]);
    assert_eq!(keys(db.range(String::from("c")..)), [b"c", b"d"]);
    assert_eq!(keys(db.range(..=b"a")), [b"a"]);
    assert_eq!(keys(db.range(..k2.clone())), [b"a", b"b"]);
    assert_eq!(keys(db.range((Bound::Excluded("a"), Bound::Included("c")))), [b"b", b"c"]);
    assert_eq!(keys(db.snapshot().range(..)).len(), 4);
    assert_eq!(keys(db.range_back(b"b"..)), [b"d", b"c", b"b"]);
}

/// Two threads close a store shared in an `Arc` at once, while a third writes: both closes
/// return `Ok`, every later call fails with `Closed`, the files are free to reopen while
/// the `Arc` still lives, and every write acknowledged is there.
#[test]
fn two_threads_close_a_shared_store_while_a_third_writes() {
    let storage = Storage::Sim(SimFs::new());
    let db = Arc::new(open(&storage));
    db.put("before", "1").expect("put");
    let snapshot = db.snapshot();
    let mut iter = db.range(..);
    let barrier = Barrier::new(3);
    let acknowledged = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let mut acknowledged = Vec::new();
            for i in 0..10_000_000 {
                if i == 100 {
                    barrier.wait();
                }
                match db.put(key(i), b"written") {
                    Ok(()) => acknowledged.push(key(i)),
                    Err(_) => break,
                }
            }
            acknowledged
        });
        let closers: Vec<_> = (0..2)
            .map(|_| {
                let db = Arc::clone(&db);
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    db.close()
                })
            })
            .collect();
        for closer in closers {
            closer.join().expect("a closer").expect("close");
        }
        writer.join().expect("the writer")
    });
    assert!(acknowledged.len() >= 100 && acknowledged.len() < 10_000_000);
    assert!(matches!(db.get("before"), Err(Error::Closed)));
    assert!(matches!(db.put("after", "1"), Err(Error::Closed)));
    assert!(matches!(db.delete_range(..), Err(Error::Closed)));
    assert!(matches!(db.first(), Err(Error::Closed)));
    assert!(matches!(db.stats(), Err(Error::Closed)));
    assert!(matches!(db.checkpoint(), Err(Error::Closed)));
    assert!(matches!(db.sync(), Err(Error::Closed)));
    assert!(matches!(snapshot.get("before"), Err(Error::Closed)));
    assert!(matches!(iter.next(), Some(Err(Error::Closed))));
    assert!(iter.next().is_none(), "an error ends the iteration");
    db.close().expect("a third close does nothing");
    // The Arc, a snapshot and an iterator of the closed store still live: the files are
    // free all the same.
    let reopened = open(&storage);
    assert_eq!(reopened.get("before").expect("get"), Some(b"1".to_vec()));
    for key in &acknowledged {
        assert!(reopened.contains_key(key).expect("contains_key"), "an acknowledged write");
    }
    drop((snapshot, iter, db));
    reopened.close().expect("close");
}

/// A store, its snapshots and their iterators move between threads and are shared by them.
#[test]
fn the_handles_are_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<Db>();
    shared::<tierkv::Snapshot>();
    shared::<tierkv::Iter>();
}
