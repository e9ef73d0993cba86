use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::*;
use crate::page::slotted::{decode_internal, decode_leaf, encode_leaf};
use crate::page::{OverflowRef, Value};
use crate::tree::read::{chunk_backward, chunk_forward, get, Chunk, ChunkValue, Found};

/// The incremental closure of pending splits (`Writer::closure`) against one from scratch.
mod closure;

const PAGE: usize = 4096;
const ROOT: u64 = 1;

/// Pages only ever created in the frames: nothing is read from below.
struct NoSource;

impl PageSource for NoSource {
    type Error = Infallible;
    fn read_page(&self, pid: u64) -> Result<Vec<u8>, Infallible> {
        panic!("page {pid} read from below: every page of these tests is resident")
    }
    fn evicted(&self, pid: u64, _: &[u8]) {
        panic!("page {pid} evicted: the budget holds every page")
    }
    fn installed(&self, _: u64, _: &[u8]) {}
    fn discarded(&self, _: u64) {}
}

struct Ids(AtomicU64);

impl Space for Ids {
    fn allocate(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

fn empty_tree() -> (BufferPool<NoSource>, Ids) {
    let pool = BufferPool::new(1 << 16, PAGE, 1 << 30, NoSource).expect("pool");
    pool.install(ROOT, &encode_leaf(&[], 0, 0, PAGE)).expect("root");
    (pool, Ids(AtomicU64::new(ROOT + 1)))
}

/// Every entry, by following the leaves' links from the leftmost leaf; and checks every
/// page on the way (each passes `check`, and the leaves' keys ascend across links).
fn scan(pool: &BufferPool<NoSource>) -> Vec<(Vec<u8>, Value)> {
    let image = |pid: u64| {
        pool.read(pid, |page| {
            let mut out = vec![0u8; PAGE];
            page.bytes().copy_to(0, &mut out)?;
            Some(out)
        })
        .expect("resident")
    };
    let mut pid = ROOT;
    loop {
        let page = image(pid);
        assert!(slotted::check(&page, PAGE).is_ok(), "page {pid}");
        match Slotted::new(&page[..]).kind() {
            Some(Kind::Internal) => pid = decode_internal(&page[..]).expect("internal").0,
            _ => break,
        }
    }
    let mut out: Vec<(Vec<u8>, Value)> = Vec::new();
    while pid != 0 {
        let page = image(pid);
        assert_eq!(slotted::check(&page, PAGE), Ok(Kind::Leaf), "leaf {pid}");
        for (key, value) in decode_leaf(&page).expect("leaf") {
            assert!(out.last().is_none_or(|(last, _)| last[..] < key[..]), "keys out of order");
            out.push((key.to_vec(), value));
        }
        pid = Slotted::new(&page[..]).link().expect("link");
    }
    out
}

fn value_of(seed: u64, len: usize) -> Value {
    if len == 0 {
        Value::Overflow(OverflowRef { len: 5000, first: seed + 1, blocks: 2 })
    } else {
        Value::inline(vec![seed as u8; len])
    }
}

/// Batches of puts and deletes, with values from a few bytes to a quarter page, grow the
/// tree through leaf, internal and root splits; after each, every key reads back by a
/// coupled lookup, a walk of the leaves' links finds exactly the model's entries, each
/// change's before-image is the model's old value, and the LSN numbers the batch.
#[test]
fn batches_in_place_match_a_sorted_map_through_every_kind_of_split() {
    let (pool, ids) = empty_tree();
    let writer = Writer::new();
    let mut rng = fastrand::Rng::with_seed(26);
    let mut model: BTreeMap<Vec<u8>, Value> = BTreeMap::new();
    let mut lsn = 0;
    for _ in 0..2000 {
        let mut batch: BTreeMap<Vec<u8>, Option<Value>> = BTreeMap::new();
        for _ in 0..rng.usize(1..12) {
            let key = format!("key{:05}", rng.u32(..20_000)).into_bytes();
            let change =
                (rng.u8(..5) > 0).then(|| value_of(lsn, [0, 10, 100, 400, 1024][rng.usize(..5)]));
            batch.insert(key, change);
        }
        let ops: Vec<Op<'_>> =
            batch.iter().map(|(k, v)| (&k[..], v.as_ref().map(ValueRef::from))).collect();
        let mut befores = Vec::new();
        let numbered = writer
            .apply(
                &pool,
                &ids,
                ROOT,
                &ops,
                || Ok::<_, Infallible>(lsn + 1),
                |key, at, before| {
                    befores.push((
                        key.to_vec(),
                        at,
                        before.map(|b| match b {
                            ValueRef::Inline(bytes) => Value::inline(bytes.to_vec()),
                            ValueRef::Overflow(overflow) => Value::Overflow(overflow),
                        }),
                    ));
                },
            )
            .expect("apply");
        lsn += 1;
        assert_eq!(numbered, lsn);
        let expected: Vec<_> =
            batch.keys().map(|k| (k.clone(), lsn, model.get(k).cloned())).collect();
        assert_eq!(befores, expected);
        for (key, change) in batch {
            match change {
                Some(value) => model.insert(key, value),
                None => model.remove(&key),
            };
        }
    }
    let entries = scan(&pool);
    assert_eq!(entries, model.clone().into_iter().collect::<Vec<_>>());
    assert!(ids.0.load(Ordering::Relaxed) > 100, "the tree grew to more than a few pages");
    // Three levels: an internal root split once it was an internal page itself.
    let first_child = |pid: u64| {
        pool.read(pid, |page| match page.kind()? {
            Kind::Internal => Some(Some(page.child(0)?)),
            Kind::Leaf => Some(None),
        })
        .expect("read")
    };
    let below = first_child(ROOT).expect("the root is internal");
    assert!(first_child(below).is_some(), "the root's children are internal pages");
    let mut value = Vec::new();
    for probe in 0..20_000u32 {
        let key = format!("key{probe:05}").into_bytes();
        let found = get(&pool, ROOT, &key, &mut value).expect("read");
        match model.get(&key) {
            Some(Value::Inline(bytes)) => {
                assert_eq!((found, &value[..]), (Found::Inline, &bytes[..]))
            }
            Some(Value::Overflow(overflow)) => assert_eq!(found, Found::Overflow(*overflow)),
            None => assert_eq!(found, Found::Absent),
        }
    }
    // Every page changed is dirty; a copy then a clean with no change between cleans it;
    // a change after the copy keeps it dirty.
    let dirty = pool.dirty_pages();
    assert_eq!(dirty.len() as u64, ids.0.load(Ordering::Relaxed) - 1, "every page was changed");
    let mut image = Vec::new();
    let version = pool.copy_dirty(ROOT, &mut image).expect("copy").expect("dirty");
    assert_eq!(slotted::check(&image, PAGE), Ok(Kind::Internal));
    assert!(pool.clean_if_unchanged(ROOT, version));
    assert_eq!(pool.copy_dirty(ROOT, &mut image).expect("copy"), None, "clean once cleaned");
    let leaf = *dirty
        .iter()
        .find(|&&pid| {
            pool.read(pid, |page| Some(page.kind()? == Kind::Leaf && page.count()? > 0))
                .expect("read")
        })
        .expect("a leaf with entries");
    let version = pool.copy_dirty(leaf, &mut image).expect("copy").expect("dirty");
    let value = Value::inline(vec![9; 10]);
    let mut key = Vec::new();
    Slotted::new(&image[..]).key_into(0, &mut key).expect("a key");
    writer
        .apply(
            &pool,
            &ids,
            ROOT,
            &[(&key[..], Some(ValueRef::from(&value)))],
            || Ok::<_, Infallible>(lsn + 1),
            |_, _, _| {},
        )
        .expect("apply");
    assert!(!pool.clean_if_unchanged(leaf, version), "changed after its copy");
    assert!(pool.dirty_pages().contains(&leaf));
}

/// A batch that fails to be numbered changes nothing and records nothing.
#[test]
fn a_batch_the_log_refuses_changes_nothing() {
    let (pool, ids) = empty_tree();
    let writer = Writer::new();
    let value = Value::inline(vec![1; 100]);
    let ops = [(&b"a"[..], Some(ValueRef::from(&value)))];
    let result = writer.apply(
        &pool,
        &ids,
        ROOT,
        &ops,
        || Err::<u64, _>("log full"),
        |_, _, _| panic!("recorded before the log numbered the batch"),
    );
    assert!(matches!(result, Err(WriteError::Refused("log full"))));
    assert!(scan(&pool).is_empty());
    assert!(pool.dirty_pages().is_empty());
}

/// Entries too large to share a leaf go to leaves of their own: a leaf of one entry splits
/// around the key that does not fit beside it, on either side of it.
#[test]
fn entries_too_large_to_share_a_leaf_get_leaves_of_their_own() {
    let (pool, ids) = empty_tree();
    let writer = Writer::new();
    let big = Value::inline(vec![7; PAGE / 4]);
    let long = |c: u8| vec![c; 2900];
    let put = |key: &[u8]| {
        writer.apply(
            &pool,
            &ids,
            ROOT,
            &[(key, Some(ValueRef::from(&big)))],
            || Ok::<_, Infallible>(1),
            |_, _, _| {},
        )
    };
    // The root leaf splits around the second key, then a leaf below it around the third.
    for c in [b'm', b'b', b'x', b'a'] {
        put(&long(c)).expect("a leaf of its own");
    }
    let keys: Vec<Vec<u8>> = scan(&pool).into_iter().map(|(key, _)| key).collect();
    assert_eq!(keys, [long(b'a'), long(b'b'), long(b'm'), long(b'x')]);
    for c in [b'a', b'b', b'm', b'x'] {
        let mut value = Vec::new();
        let found = crate::tree::read::get(&pool, ROOT, &long(c), &mut value).expect("get");
        assert!(matches!(found, crate::tree::read::Found::Inline), "{found:?}");
        assert_eq!(value, vec![7; PAGE / 4]);
    }
}

/// Writers change disjoint keys in batches, their values growing so that leaves split,
/// while readers look keys up: every key is there all along (a lookup that read half of a
/// leaf being split would miss it), every value a reader finds is one its key was given
/// (never another key's, never torn), and the tree ends holding every writer's last values.
#[test]
fn readers_find_whole_values_while_writers_split_the_tree() {
    let (pool, ids) = empty_tree();
    let writer = Writer::new();
    let lsn = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let finals: Mutex<BTreeMap<Vec<u8>, Vec<u8>>> = Mutex::new(BTreeMap::new());
    let value_for = |key: &[u8], round: u32| {
        let mut value = key.to_vec();
        value.extend_from_slice(&round.to_le_bytes());
        value.resize(20 + round as usize / 8, b'.');
        value
    };
    // Every key, with a small value, before the threads start.
    let all: Vec<Vec<u8>> = (0..2000u32)
        .flat_map(|n| (0..2u32).map(move |t| format!("k{n:04}-{t}").into_bytes()))
        .collect();
    for key in &all {
        let value = value_for(key, 0);
        writer
            .apply(
                &pool,
                &ids,
                ROOT,
                &[(&key[..], Some(ValueRef::Inline(&value)))],
                || Ok::<_, Infallible>(1),
                |_, _, _| {},
            )
            .expect("load");
    }
    let loaded = ids.0.load(Ordering::Relaxed);
    std::thread::scope(|scope| {
        for thread in 0..2u32 {
            let (pool, ids, writer, lsn, done, finals) =
                (&pool, &ids, &writer, &lsn, &done, &finals);
            scope.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(u64::from(thread));
                let mut mine = BTreeMap::new();
                for round in 0..1500u32 {
                    let mut keys: Vec<Vec<u8>> = (0..rng.usize(1..6))
                        .map(|_| format!("k{:04}-{thread}", rng.u32(..2000)).into_bytes())
                        .collect();
                    keys.sort();
                    keys.dedup();
                    let values: Vec<Vec<u8>> = keys.iter().map(|k| value_for(k, round)).collect();
                    let ops: Vec<Op<'_>> = keys
                        .iter()
                        .zip(&values)
                        .map(|(k, v)| (&k[..], Some(ValueRef::Inline(v))))
                        .collect();
                    writer
                        .apply(
                            pool,
                            ids,
                            ROOT,
                            &ops,
                            || Ok::<_, Infallible>(lsn.fetch_add(1, Ordering::Relaxed) + 1),
                            |_, _, _| {},
                        )
                        .expect("apply");
                    for (key, value) in keys.into_iter().zip(values) {
                        mine.insert(key, value);
                    }
                }
                finals.lock().expect("lock").extend(mine);
                done.fetch_add(1, Ordering::Release);
            });
        }
        for seed in 10..12u64 {
            let (pool, done) = (&pool, &done);
            scope.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(seed);
                let mut value = Vec::new();
                let mut found = 0;
                while done.load(Ordering::Acquire) < 2 {
                    let key = format!("k{:04}-{}", rng.u32(..2000), rng.u32(..2)).into_bytes();
                    match get(pool, ROOT, &key, &mut value).expect("read") {
                        Found::Inline => {
                            assert!(value.starts_with(&key), "{key:?} read another key's value");
                            let round = u32::from_le_bytes(
                                value[key.len()..key.len() + 4].try_into().expect("round"),
                            );
                            assert_eq!(value, value_for(&key, round), "a torn value");
                            found += 1;
                        }
                        Found::Absent => panic!("{key:?} went missing"),
                        Found::Overflow(_) => panic!("no overflow values here"),
                    }
                }
                assert!(found > 0, "the readers found nothing");
            });
        }
    });
    let mut expected: BTreeMap<Vec<u8>, Vec<u8>> =
        all.iter().map(|k| (k.clone(), value_for(k, 0))).collect();
    expected.extend(finals.into_inner().expect("lock"));
    let expected: Vec<(Vec<u8>, Value)> =
        expected.into_iter().map(|(k, v)| (k, Value::inline(v))).collect();
    assert_eq!(scan(&pool), expected);
    let during = ids.0.load(Ordering::Relaxed) - loaded;
    assert!(during > 50, "{during} pages made while readers read");
}

/// Keys of the most bytes a store allows (`Options::max_key_bytes`: half a page less 32),
/// each sharing all but its last bytes with its neighbours, make separators that long:
/// an internal page holds two and splits, with the separator it had no room for, into one
/// on each side of the middle one; every key stays where lookups and the leaves' links
/// find it.
#[test]
fn the_longest_keys_split_internal_pages_of_two_separators() {
    let (pool, ids) = empty_tree();
    let writer = Writer::new();
    let longest = PAGE / 2 - 32;
    let mut model = BTreeMap::new();
    let mut rng = fastrand::Rng::with_seed(5);
    for n in 0..300u32 {
        let mut key = vec![rng.u8(..4)];
        key.resize(longest - 4, b'x');
        key.extend_from_slice(&rng.u32(..100_000).to_be_bytes());
        let value = Value::inline(n.to_le_bytes().to_vec());
        writer
            .apply(
                &pool,
                &ids,
                ROOT,
                &[(&key[..], Some(ValueRef::from(&value)))],
                || Ok::<_, Infallible>(u64::from(n) + 1),
                |_, _, _| {},
            )
            .expect("apply");
        model.insert(key, value);
    }
    assert_eq!(scan(&pool), model.clone().into_iter().collect::<Vec<_>>());
    let mut value = Vec::new();
    for (key, expected) in &model {
        assert_eq!(get(&pool, ROOT, key, &mut value).expect("read"), Found::Inline);
        assert_eq!(Value::inline(value.clone()), *expected);
    }
    // Separators between keys of one first byte are nearly whole keys: a page holds two.
    let long = pool
        .read(ROOT, |page| {
            let mut long = 0;
            for index in 0..page.count()? {
                let mut key = Vec::new();
                page.key_into(index, &mut key)?;
                long += usize::from(key.len() > PAGE / 4);
            }
            Some(long)
        })
        .expect("root");
    assert!((1..=2).contains(&long), "a root of {long} separators of {longest}-byte keys");
}

/// Whole scans, forward and backward, a few entries a chunk, while writers grow values and
/// split leaves and their parents: every scan finds every key (none is ever removed)
/// exactly once, in order, each with a whole value of its own.
#[test]
fn scans_see_every_key_once_while_writers_split_the_tree() {
    let (pool, ids) = empty_tree();
    let writer = Writer::new();
    let keys: Vec<Vec<u8>> = (0..3000u32).map(|n| format!("s{n:05}").into_bytes()).collect();
    let value_for = |key: &[u8], round: u32| {
        let mut value = key.to_vec();
        value.resize(12 + round as usize % 800 / 4, b'+');
        value
    };
    for key in &keys {
        let value = value_for(key, 0);
        writer
            .apply(
                &pool,
                &ids,
                ROOT,
                &[(&key[..], Some(ValueRef::Inline(&value)))],
                || Ok::<_, Infallible>(1),
                |_, _, _| {},
            )
            .expect("load");
    }
    let loaded = ids.0.load(Ordering::Relaxed);
    let done = AtomicU64::new(0);
    let scans = AtomicU64::new(0);
    std::thread::scope(|scope| {
        {
            let (pool, ids, writer, keys, done, scans) =
                (&pool, &ids, &writer, &keys, &done, &scans);
            scope.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(1);
                // Until the scanners have run a good many scans against it.
                for round in 1..400_000u32 {
                    if scans.load(Ordering::Relaxed) >= 40 && round > 1200 {
                        break;
                    }
                    // Old keys take longer values; new keys go in between them (so slots
                    // move under a cursor that stays in its leaf).
                    let mut batch: Vec<Vec<u8>> = (0..4)
                        .map(|i| {
                            let mut key = keys[rng.usize(..keys.len())].clone();
                            if i % 2 == 1 {
                                key.push(rng.u8(b'a'..=b'z'));
                            }
                            key
                        })
                        .collect();
                    batch.sort();
                    batch.dedup();
                    let values: Vec<Vec<u8>> = batch.iter().map(|k| value_for(k, round)).collect();
                    let ops: Vec<Op<'_>> = batch
                        .iter()
                        .zip(&values)
                        .map(|(k, v)| (&k[..], Some(ValueRef::Inline(v))))
                        .collect();
                    writer
                        .apply(
                            pool,
                            ids,
                            ROOT,
                            &ops,
                            || Ok::<_, Infallible>(u64::from(round) + 1),
                            |_, _, _| {},
                        )
                        .expect("apply");
                }
                done.store(1, Ordering::Release);
            });
        }
        for backward in [false, true] {
            let (pool, keys, done, scans) = (&pool, &keys, &done, &scans);
            scope.spawn(move || {
                while done.load(Ordering::Acquire) == 0 {
                    let mut chunk = Chunk::default();
                    let mut seen: Vec<Vec<u8>> = Vec::new();
                    let mut from: Option<Vec<u8>> = if backward { None } else { Some(Vec::new()) };
                    loop {
                        if backward {
                            chunk_backward(pool, ROOT, from.as_deref(), 5, &mut chunk)
                                .expect("chunk");
                        } else {
                            chunk_forward(
                                pool,
                                ROOT,
                                from.as_deref().expect("from"),
                                5,
                                &mut chunk,
                            )
                            .expect("chunk");
                        }
                        let mut got: Vec<Vec<u8>> = Vec::new();
                        for index in 0..chunk.entries.len() {
                            let key = chunk.key(index).to_vec();
                            let ChunkValue::Inline(range) = &chunk.entries[index].1 else {
                                panic!("inline")
                            };
                            assert!(
                                chunk.bytes[range.clone()].starts_with(&key),
                                "{key:?} with another's value"
                            );
                            got.push(key);
                        }
                        if backward {
                            got.reverse();
                        }
                        seen.extend(got);
                        match chunk.bound.clone() {
                            Some(bound) => from = Some(bound),
                            None => break,
                        }
                    }
                    if backward {
                        seen.reverse();
                    }
                    assert!(
                        seen.windows(2).all(|w| w[0] < w[1]),
                        "a scan out of order, or a key twice"
                    );
                    let old: Vec<&Vec<u8>> = seen.iter().filter(|k| k.len() == 6).collect();
                    assert!(
                        old.len() == keys.len() && old.iter().zip(keys).all(|(a, b)| *a == b),
                        "a scan lost keys"
                    );
                    scans.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    assert!(scans.load(Ordering::Relaxed) >= 40, "scans ran alongside the writer");
    let during = ids.0.load(Ordering::Relaxed) - loaded;
    assert!(during > 30, "{during} pages made while scans ran");
}

/// Snapshot scans of a tree changed in place: a writer inserts, replaces and removes keys
/// in batches, recording each before-image in an undo and publishing each batch after it
/// made it; scanners take the undo's view and then the visible sequence, scan the whole
/// tree a few entries at a time forward or backward, and put the before-images of each
/// chunk's range over it when its leaves are newer than their sequence. Every scan equals
/// the state after exactly the batches up to its sequence.
#[test]
fn snapshot_scans_see_their_sequence_while_pages_change_in_place() {
    use crate::undo::Undo;
    use arc_swap::ArcSwap;
    let (pool, ids) = empty_tree();
    let writer = Writer::new();
    let undo = Undo::new(64 << 10, 1 << 30);
    let published = ArcSwap::from_pointee(undo.view());
    let visible = AtomicU64::new(0);
    type Batch = Vec<(Vec<u8>, Option<Vec<u8>>)>;
    type Entries = Vec<(Vec<u8>, Vec<u8>)>;
    let batches: Mutex<Vec<Batch>> = Mutex::new(Vec::new());
    let done = AtomicU64::new(0);
    let scans: Mutex<Vec<(u64, Entries)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        {
            let (pool, ids, writer, undo, published, visible, batches, done, scans) =
                (&pool, &ids, &writer, &undo, &published, &visible, &batches, &done, &scans);
            scope.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(4);
                for lsn in 1..200_000u64 {
                    if lsn > 1500 && scans.lock().expect("lock").len() >= 30 {
                        break;
                    }
                    let mut batch: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
                    for _ in 0..rng.usize(1..5) {
                        let key = format!("u{:04}", rng.u32(..1500)).into_bytes();
                        let value = (rng.u8(..4) > 0).then(|| {
                            let mut value = key.clone();
                            value.extend_from_slice(&lsn.to_le_bytes());
                            value.resize(value.len() + rng.usize(..200), b'~');
                            value
                        });
                        batch.insert(key, value);
                    }
                    let ops: Vec<Op<'_>> = batch
                        .iter()
                        .map(|(k, v)| (&k[..], v.as_deref().map(ValueRef::Inline)))
                        .collect();
                    writer
                        .apply(
                            pool,
                            ids,
                            ROOT,
                            &ops,
                            || Ok::<_, Infallible>(lsn),
                            |key, at, before| undo.record(key, at, before),
                        )
                        .expect("apply");
                    batches.lock().expect("lock").push(batch.into_iter().collect());
                    visible.store(lsn, Ordering::Release);
                    if undo.full() {
                        published.store(Arc::new(undo.rotate(|| lsn, lsn)));
                    }
                }
                done.store(1, Ordering::Release);
            });
        }
        for backward in [false, true] {
            let (pool, published, visible, done, scans) =
                (&pool, &published, &visible, &done, &scans);
            scope.spawn(move || {
                while done.load(Ordering::Acquire) == 0 {
                    let view = published.load_full();
                    let sequence = visible.load(Ordering::Acquire);
                    let mut chunk = Chunk::default();
                    let mut seen: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                    let mut from: Option<Vec<u8>> = if backward { None } else { Some(Vec::new()) };
                    loop {
                        let (start, end) = if backward {
                            chunk_backward(pool, ROOT, from.as_deref(), 4, &mut chunk)
                                .expect("chunk");
                            (chunk.bound.clone().unwrap_or_default(), from.clone())
                        } else {
                            chunk_forward(
                                pool,
                                ROOT,
                                from.as_deref().expect("from"),
                                4,
                                &mut chunk,
                            )
                            .expect("chunk");
                            (from.clone().expect("from"), chunk.bound.clone())
                        };
                        if chunk.lsn > sequence {
                            let before = view
                                .before_range(&start, end.as_deref(), sequence)
                                .expect("not trimmed");
                            chunk.overlay(&before);
                        }
                        let mut got: Vec<(Vec<u8>, Vec<u8>)> = (0..chunk.entries.len())
                            .map(|i| {
                                let ChunkValue::Inline(range) = &chunk.entries[i].1 else {
                                    panic!("inline")
                                };
                                (chunk.key(i).to_vec(), chunk.bytes[range.clone()].to_vec())
                            })
                            .collect();
                        if backward {
                            got.reverse();
                        }
                        seen.extend(got);
                        match chunk.bound.clone() {
                            Some(bound) => from = Some(bound),
                            None => break,
                        }
                    }
                    if backward {
                        seen.reverse();
                    }
                    scans.lock().expect("lock").push((sequence, seen));
                }
            });
        }
    });
    let batches = batches.into_inner().expect("lock");
    let scans = scans.into_inner().expect("lock");
    assert!(scans.len() >= 30, "{} scans", scans.len());
    let mut state: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut states = vec![state.clone()];
    for batch in &batches {
        for (key, value) in batch {
            match value {
                Some(value) => state.insert(key.clone(), value.clone()),
                None => state.remove(key),
            };
        }
        states.push(state.clone());
    }
    let mut behind = 0;
    for (sequence, seen) in &scans {
        let expected: Vec<(Vec<u8>, Vec<u8>)> =
            states[*sequence as usize].clone().into_iter().collect();
        assert!(
            *seen == expected,
            "a scan at {sequence} is not the state then ({} entries, {} expected)",
            seen.len(),
            expected.len()
        );
        behind += usize::from(*sequence + 1 < batches.len() as u64);
    }
    assert!(behind > 0, "every scan ended before a change: the overlay was never needed");
}

/// Snapshot lookups of a tree changed in place: readers take the undo's view and then the
/// visible sequence, look a key up (`get_at`), and ask the view for the key's before-image
/// when the leaf is newer than their sequence. Every answer is the key's value after the
/// batches up to the reader's sequence.
#[test]
fn snapshot_lookups_see_their_sequence_while_pages_change_in_place() {
    use crate::tree::read::get_at;
    use crate::undo::Undo;
    use arc_swap::ArcSwap;
    let (pool, ids) = empty_tree();
    let writer = Writer::new();
    let undo = Undo::new(64 << 10, 1 << 30);
    let published = ArcSwap::from_pointee(undo.view());
    let visible = AtomicU64::new(0);
    type Change = (Vec<u8>, Option<Vec<u8>>);
    let history: Mutex<Vec<Change>> = Mutex::new(vec![(Vec::new(), None)]);
    let (done, made) = (AtomicU64::new(0), AtomicU64::new(0));
    let reads = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..2u64)
            .map(|seed| {
                let (pool, published, visible, done) = (&pool, &published, &visible, &done);
                let made = &made;
                scope.spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(seed);
                    let mut reads = Vec::new();
                    let mut value = Vec::new();
                    while done.load(Ordering::Acquire) == 0 {
                        let view = published.load_full();
                        let sequence = visible.load(Ordering::Acquire);
                        let key = format!("p{:03}", rng.u32(..400)).into_bytes();
                        let (found, lsn) = get_at(pool, ROOT, &key, &mut value).expect("read");
                        let now = match found {
                            Found::Inline => Some(value.clone()),
                            Found::Absent => None,
                            Found::Overflow(_) => panic!("no overflow values here"),
                        };
                        let (got, undone) = if lsn > sequence {
                            match view.before(&key, sequence).expect("not trimmed") {
                                Some(before) => (
                                    before.map(|b| match b {
                                        Value::Inline(bytes) => bytes.to_vec(),
                                        Value::Overflow(_) => panic!("no overflow values here"),
                                    }),
                                    true,
                                ),
                                None => (now, false),
                            }
                        } else {
                            (now, false)
                        };
                        reads.push((key, sequence, got, undone));
                        made.fetch_add(1, Ordering::Release);
                    }
                    reads
                })
            })
            .collect();
        let mut rng = fastrand::Rng::with_seed(77);
        for lsn in 1..=30_000u64 {
            // Paced: a read for every 16 writes at least, so that starved readers (CI's two
            // cores are shared with other tests) still read while the pages change.
            while made.load(Ordering::Acquire) < lsn / 16 {
                std::thread::yield_now();
            }
            let key = format!("p{:03}", rng.u32(..400)).into_bytes();
            let value = (rng.u8(..4) > 0).then(|| {
                let mut value = key.clone();
                value.extend_from_slice(&lsn.to_le_bytes());
                value.resize(value.len() + rng.usize(..150), b'#');
                value
            });
            writer
                .apply(
                    &pool,
                    &ids,
                    ROOT,
                    &[(&key[..], value.as_deref().map(ValueRef::Inline))],
                    || Ok::<_, Infallible>(lsn),
                    |key, at, before| undo.record(key, at, before),
                )
                .expect("apply");
            history.lock().expect("lock").push((key, value));
            visible.store(lsn, Ordering::Release);
            if undo.full() {
                published.store(Arc::new(undo.rotate(|| lsn, lsn)));
            }
        }
        done.store(1, Ordering::Release);
        readers.into_iter().flat_map(|r| r.join().expect("reader")).collect::<Vec<_>>()
    });
    let history = history.into_inner().expect("lock");
    let mut undone = 0;
    for (key, sequence, got, before) in &reads {
        let expected = history[1..=*sequence as usize]
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.clone());
        assert_eq!(got, &expected, "{key:?} at {sequence}");
        undone += usize::from(*before);
    }
    assert!(reads.len() > 1000 && undone > 0, "{} reads, {undone} from before-images", reads.len());
}

/// Why a conditional batch did not go in (these tests' check and log).
#[derive(Debug, PartialEq)]
enum Refusal {
    Changed,
}

/// The current value of `key`, as a reader sees it.
fn current(pool: &BufferPool<NoSource>, key: &[u8]) -> Option<Vec<u8>> {
    let mut value = Vec::new();
    match get(pool, ROOT, key, &mut value).expect("read") {
        Found::Inline => Some(value),
        Found::Absent => None,
        Found::Overflow(_) => panic!("no overflow values here"),
    }
}

/// Two transactions read the same key and both write it: the first to commit validates
/// what it read and goes in; the second finds the key changed and is refused, changing
/// nothing, numbering nothing and recording nothing. A check that reads a key in a leaf of
/// its own (no change there) latches that leaf too.
#[test]
fn of_two_transactions_that_conflict_exactly_one_commits() {
    let (pool, ids) = empty_tree();
    let writer = Writer::new();
    let v0 = Value::inline(&b"10"[..]);
    writer
        .apply(
            &pool,
            &ids,
            ROOT,
            &[(&b"a"[..], Some(ValueRef::from(&v0)))],
            || Ok::<_, Refusal>(1),
            |_, _, _| {},
        )
        .expect("load");
    // Both read "a" as "10".
    let (read_1, read_2) = (current(&pool, b"a"), current(&pool, b"a"));
    let commit = |read: &Option<Vec<u8>>, new: &[u8], lsn: u64| {
        let mut recorded = 0;
        let result = writer.apply_checked(
            &pool,
            &ids,
            ROOT,
            &[(&b"a"[..], Some(ValueRef::Inline(new)))],
            &[&b"a"[..], &b"zz-only-read"[..]],
            |now| {
                let now_a = now[0].map(|v| match v {
                    ValueRef::Inline(bytes) => bytes.to_vec(),
                    ValueRef::Overflow(_) => panic!("no overflow values here"),
                });
                assert!(now[1].is_none(), "a key never written reads as none");
                if now_a == *read {
                    Ok(())
                } else {
                    Err(Refusal::Changed)
                }
            },
            || Ok(lsn),
            |_, _, _| recorded += 1,
        );
        (result, recorded)
    };
    assert_eq!(commit(&read_1, b"11", 2).0.expect("the first commits"), 2);
    let (refused, recorded) = commit(&read_2, b"12", 3);
    assert!(matches!(refused, Err(WriteError::Refused(Refusal::Changed))), "{refused:?}");
    assert_eq!(recorded, 0, "a refused batch recorded a before-image");
    assert_eq!(current(&pool, b"a"), Some(b"11".to_vec()), "exactly the first commit's value");
}

/// Compare-and-swap increments from several threads, each retried until its check sees the
/// value it read: the counter ends at exactly the number of increments.
#[test]
fn compare_and_swap_increments_from_threads_lose_none() {
    let (pool, ids) = empty_tree();
    let writer = Writer::new();
    let lsn = AtomicU64::new(0);
    let (threads, each) = (3, 400u64);
    let refused = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for thread in 0..threads {
            let (pool, ids, writer, lsn, refused) = (&pool, &ids, &writer, &lsn, &refused);
            scope.spawn(move || {
                // Keys of its own around the counter, so leaves split under the counter too.
                let mut rng = fastrand::Rng::with_seed(thread);
                for _ in 0..each {
                    loop {
                        let read = current(pool, b"counter");
                        let count = read
                            .as_deref()
                            .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
                        let next = (count + 1).to_le_bytes();
                        let filler = format!("f{:05}-{thread}", rng.u32(..20_000)).into_bytes();
                        // Room for another thread to commit between the read and the check.
                        std::thread::sleep(std::time::Duration::from_micros(1));
                        let mut ops = vec![
                            (&b"counter"[..], Some(ValueRef::Inline(&next))),
                            (&filler[..], Some(ValueRef::Inline(&[7; 90]))),
                        ];
                        ops.sort_by(|a, b| a.0.cmp(b.0));
                        let result = writer.apply_checked(
                            pool,
                            ids,
                            ROOT,
                            &ops,
                            &[&b"counter"[..]],
                            |now| {
                                let now = now[0].map(|v| match v {
                                    ValueRef::Inline(bytes) => bytes.to_vec(),
                                    ValueRef::Overflow(_) => panic!("no overflow values here"),
                                });
                                if now == read {
                                    Ok(())
                                } else {
                                    Err(Refusal::Changed)
                                }
                            },
                            || Ok(lsn.fetch_add(1, Ordering::Relaxed) + 1),
                            |_, _, _| {},
                        );
                        match result {
                            Ok(_) => break,
                            Err(WriteError::Refused(Refusal::Changed)) => {
                                refused.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(other) => panic!("{other:?}"),
                        }
                    }
                }
            });
        }
    });
    let count = u64::from_le_bytes(
        current(&pool, b"counter").expect("a counter").try_into().expect("8 bytes"),
    );
    assert_eq!(count, threads * each, "increments lost or doubled");
    assert!(ids.0.load(Ordering::Relaxed) > 20, "leaves split while the threads raced");
    let refused = refused.load(Ordering::Relaxed);
    eprintln!("{} increments, {refused} checks refused", threads * each);
    assert!(refused > 0, "no check was ever refused: the threads never raced");
}
