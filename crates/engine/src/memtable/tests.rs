use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use proptest::prelude::*;

use super::*;

/// Every version inserted: key, sequence, value.
type Versions = Vec<(Vec<u8>, u64, Option<Vec<u8>>)>;

/// What a reader at `sequence` must see: each key's newest version at or below it.
fn model_at(versions: &Versions, sequence: u64) -> BTreeMap<Vec<u8>, Found> {
    let mut model: BTreeMap<Vec<u8>, Found> = BTreeMap::new();
    for (key, seq, value) in versions {
        if *seq <= sequence {
            let newer = model.get(key).is_some_and(|found| found.sequence > *seq);
            if !newer {
                model.insert(
                    key.clone(),
                    Found { sequence: *seq, value: value.clone().map(bytes::Bytes::from) },
                );
            }
        }
    }
    model
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0u8..4, 1..4)
}

/// A memtable with the smallest key filter.
fn small_memtable() -> Memtable {
    Memtable::with_capacity(0)
}

/// The `i`th key of writer `writer`, for the filter tests.
fn numbered_key(writer: u64, i: u64) -> Vec<u8> {
    format!("user{writer:02}/{i:010}").into_bytes()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Lookups (of keys written and of others) and scans in both directions, at every
    /// sequence number, match a model that keeps every version.
    #[test]
    fn readers_see_the_newest_version_at_or_below_their_sequence(
        writes in prop::collection::vec((key(), prop::option::of(prop::collection::vec(any::<u8>(), 0..8))), 1..60),
        bounds in (key(), prop::option::of(key())),
        limit in 1usize..10,
        others in prop::collection::vec(key(), 0..8),
    ) {
        let memtable = small_memtable();
        let mut versions = Versions::new();
        for (at, (key, value)) in writes.iter().enumerate() {
            // Two writes share a sequence now and then (a batch).
            let sequence = 1 + at as u64 / 2;
            memtable.insert(key, sequence, value.as_deref());
            versions.retain(|(k, s, _): &(Vec<u8>, u64, Option<Vec<u8>>)| !(k == key && *s == sequence));
            versions.push((key.clone(), sequence, value.clone()));
        }
        let last = 1 + writes.len() as u64 / 2;
        for sequence in 0..=last {
            let model = model_at(&versions, sequence);
            for key in versions.iter().map(|(key, _, _)| key).chain(&others) {
                prop_assert_eq!(memtable.get(key, sequence), model.get(key).cloned());
            }
            let (start, end) = &bounds;
            let in_range = |k: &Vec<u8>| k >= start && end.as_ref().is_none_or(|end| k < end);
            let forward: Vec<(Vec<u8>, Found)> = model
                .iter()
                .filter(|(k, _)| in_range(k))
                .take(limit)
                .map(|(k, f)| (k.clone(), f.clone()))
                .collect();
            let (got, next) = memtable.scan_ahead(start, end.as_deref(), sequence, limit);
            if got.len() < limit {
                // Short: the first key at or after the end (and the start) with any version,
                // at any sequence.
                let want = end.as_ref().and_then(|end| {
                    let from = end.max(start);
                    versions.iter().map(|(k, _, _)| k).filter(|k| *k >= from).min().cloned()
                });
                prop_assert_eq!(next, want);
            }
            prop_assert_eq!(got, forward);
            let backward: Vec<(Vec<u8>, Found)> = model
                .iter()
                .rev()
                .filter(|(k, _)| in_range(k))
                .take(limit)
                .map(|(k, f)| (k.clone(), f.clone()))
                .collect();
            prop_assert_eq!(memtable.scan_back(start, end.as_deref(), sequence, limit), backward);
        }
        let latest: Vec<(Vec<u8>, Option<bytes::Bytes>)> =
            model_at(&versions, u64::MAX).into_iter().map(|(k, f)| (k, f.value)).collect();
        prop_assert_eq!(memtable.latest().collect::<Vec<_>>(), latest);
    }
}

#[test]
fn the_size_counts_every_version() {
    let memtable = small_memtable();
    assert!(memtable.is_empty());
    let empty = memtable.bytes();
    memtable.insert(b"key", 1, Some(&[0u8; 100]));
    memtable.insert(b"key", 2, None);
    // Each key's allocation is 32 bytes (the allocator's smallest), the value's 112 (100
    // bytes, a header of 8, rounded to 16); a deletion has no value.
    assert_eq!(memtable.bytes() - empty, 32 + 112 + 32 + 2 * VERSION_OVERHEAD);
}

#[test]
fn the_key_filter_is_sized_by_the_budget_and_counted() {
    // 10 bits for each version of at least `VERSION_OVERHEAD` bytes, rounded up to a
    // power of two, between 8 KiB and 8 MiB.
    let filter_bytes = |max_bytes: usize| Memtable::with_capacity(max_bytes).bytes();
    assert_eq!(filter_bytes(0), FILTER_BITS_MIN / 8);
    assert_eq!(filter_bytes(128 << 10), FILTER_BITS_MIN / 8);
    // 128 MiB (twice the largest default write buffer): 1 Mi versions, 10 Mi bits.
    assert_eq!(filter_bytes(128 << 20), 16 << 20 >> 3);
    assert_eq!(filter_bytes(usize::MAX), FILTER_BITS_MAX / 8);
}

#[test]
fn the_key_filter_keeps_out_most_absent_keys() {
    let memtable = Memtable::with_capacity(10_000 * VERSION_OVERHEAD);
    for i in 0..10_000 {
        memtable.insert(&numbered_key(0, i), i + 1, Some(b"value"));
    }
    // Absent keys like the present ones (another writer's), and unlike them.
    let absent = (0..10_000).map(|i| numbered_key(1, i)).chain(
        (0..10_000u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes().to_vec()),
    );
    let mut passed = 0;
    for key in absent {
        if memtable.filter.may_contain(&key) {
            passed += 1;
        }
        assert_eq!(memtable.get(&key, u64::MAX), None);
    }
    // At 13 bits per key (10,000 × 10 rounded up), about 0.6% get through.
    assert!(passed < 20_000 / 20, "{passed} of 20,000 absent keys passed the filter");
}

#[test]
fn every_key_inserted_is_found_when_there_are_more_than_planned() {
    // 100,000 keys in the smallest filter (64 Kibit, planned for 6,553): almost every bit
    // ends up set and most absent keys get through, but every present key is found.
    let memtable = small_memtable();
    for i in 0..100_000 {
        memtable.insert(&numbered_key(0, i), i + 1, Some(&i.to_le_bytes()));
    }
    for i in 0..100_000 {
        let found = memtable.get(&numbered_key(0, i), u64::MAX).expect("an inserted key");
        assert_eq!(found.sequence, i + 1);
    }
}

/// Writers insert keys and publish how many (Release), as `Db` publishes its visible
/// sequence; readers load that (Acquire) and must find every key below it. The filter is
/// the smallest, so writers set bits in the same words at once.
#[test]
fn concurrent_readers_find_every_published_key() {
    const WRITERS: u64 = 3;
    const KEYS: u64 = 20_000;
    let memtable = small_memtable();
    let published: Vec<AtomicU64> = (0..WRITERS).map(|_| AtomicU64::new(0)).collect();
    let writing = AtomicBool::new(true);
    std::thread::scope(|scope| {
        let readers: Vec<_> = (0..2u64)
            .map(|reader| {
                let (memtable, published, writing) = (&memtable, &published, &writing);
                scope.spawn(move || {
                    let mut rng = fastrand::Rng::with_seed(reader);
                    let mut checked = 0u64;
                    // One more round after the writers are done.
                    let mut last_round = false;
                    while !last_round {
                        last_round = !writing.load(AtomicOrdering::Acquire);
                        for (writer, count) in published.iter().enumerate() {
                            let count = count.load(AtomicOrdering::Acquire);
                            if count == 0 {
                                continue;
                            }
                            // The newest key, and one at random below it.
                            for i in [count - 1, rng.u64(0..count)] {
                                let key = numbered_key(writer as u64, i);
                                let found = memtable.get(&key, u64::MAX);
                                assert!(found.is_some(), "writer {writer}'s key {i} of {count}");
                                checked += 1;
                            }
                        }
                    }
                    checked
                })
            })
            .collect();
        let writers: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let (memtable, published) = (&memtable, &published);
                scope.spawn(move || {
                    for i in 0..KEYS {
                        memtable.insert(&numbered_key(writer, i), i + 1, Some(b"value"));
                        published[writer as usize].store(i + 1, AtomicOrdering::Release);
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().expect("writer");
        }
        writing.store(false, AtomicOrdering::Release);
        for reader in readers {
            let checked = reader.join().expect("reader");
            assert!(checked > 0, "a reader checked nothing");
        }
    });
    for writer in 0..WRITERS {
        for i in 0..KEYS {
            let found = memtable.get(&numbered_key(writer, i), u64::MAX);
            assert_eq!(found.map(|found| found.sequence), Some(i + 1), "writer {writer}'s key {i}");
        }
    }
}
