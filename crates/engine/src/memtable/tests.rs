use std::collections::BTreeMap;

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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Lookups and scans in both directions, at every sequence number, match a model that
    /// keeps every version.
    #[test]
    fn readers_see_the_newest_version_at_or_below_their_sequence(
        writes in prop::collection::vec((key(), prop::option::of(prop::collection::vec(any::<u8>(), 0..8))), 1..60),
        bounds in (key(), prop::option::of(key())),
        limit in 1usize..10,
    ) {
        let memtable = Memtable::new();
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
            for (key, _, _) in &versions {
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
            prop_assert_eq!(memtable.scan(start, end.as_deref(), sequence, limit), forward);
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
    let memtable = Memtable::new();
    assert!(memtable.is_empty());
    memtable.insert(b"key", 1, Some(&[0u8; 100]));
    memtable.insert(b"key", 2, None);
    // Each key's allocation is 32 bytes (the allocator's smallest), the value's 112 (100
    // bytes, a header of 8, rounded to 16); a deletion has no value.
    assert_eq!(memtable.bytes(), 32 + 112 + 32 + 2 * VERSION_OVERHEAD);
}
