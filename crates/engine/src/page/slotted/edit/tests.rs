use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;
use tierkv_io::frames::Frames;

use super::super::{check, decode_internal, decode_leaf, encode_internal, encode_leaf, leaf_bytes};
use super::*;

/// The smallest frame, so that edits run out of room often (values go up to a quarter).
const PAGE: usize = 4096;

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>, Value),
    Remove(Vec<u8>),
    Compact,
}

/// Keys from a few prefixes (so that a page's prefix grows and must shrink), values up to
/// a quarter page, some in overflow blocks.
fn key() -> impl Strategy<Value = Vec<u8>> {
    (0usize..4, proptest::collection::vec(0u8..6, 0..6)).prop_map(|(p, rest)| {
        let prefixes: [&[u8]; 4] = [b"user", b"user1", b"us", b""];
        [prefixes[p], &rest[..]].concat()
    })
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => (0usize..=PAGE / 4, any::<u8>()).prop_map(|(len, b)| Value::Inline(Bytes::from(vec![b; len]))),
        1 => (1u64..1000, 1u64..1000).prop_map(|(len, first)| Value::Overflow(OverflowRef { len, first, blocks: 1 })),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(
        prop_oneof![
            6 => (key(), value()).prop_map(|(k, v)| Op::Put(k, v)),
            3 => key().prop_map(Op::Remove),
            1 => Just(Op::Compact),
        ],
        1..120,
    )
}

fn model_entries(model: &BTreeMap<Vec<u8>, Value>) -> Vec<(Bytes, Value)> {
    model.iter().map(|(k, v)| (Bytes::from(k.clone()), v.clone())).collect()
}

/// A frame holding `image`, exclusively latched, for the same edits as a slice.
fn framed(frames: &Frames, pid: u64, image: &[u8]) {
    let mut loading = frames.try_load(pid).expect("in range").expect("evicted");
    loading.write().put_all(image);
    drop(loading.finish());
}

proptest! {
    /// Every edit of a leaf, on a slice and on a frame alike, leaves a page `check` accepts
    /// holding exactly the model's entries; `NoRoom` changes nothing and is answered only
    /// when the entries with the change would not fit even laid out again.
    #[test]
    fn leaf_edits_match_a_sorted_map(ops in ops()) {
        let mut page = encode_leaf(&[], 3, 9, PAGE);
        let frames = Frames::reserve(2, PAGE).expect("reserve");
        framed(&frames, 1, &page);
        let mut model: BTreeMap<Vec<u8>, Value> = BTreeMap::new();
        for op in ops {
            let mut latch = frames.lock_exclusive(1).expect("resident");
            let mut frame = latch.write();
            let before = page.clone();
            match &op {
                Op::Put(key, value) => {
                    let relaid = relaid_bytes(&page[..], key, value.into());
                    let on_slice = put_leaf(&mut page[..], key, value.into());
                    let on_frame = put_leaf(&mut frame, key, value.into());
                    prop_assert_eq!(on_slice, on_frame);
                    let mut with = model.clone();
                    let old = with.insert(key.clone(), value.clone());
                    // Counted in place before the put: the bytes of the page laid out again
                    // with it, exactly, whenever the key shares the page's prefix.
                    let shares = model.is_empty() || {
                        let prefix = Slotted::new(&before[..]).prefix_len().expect("a prefix");
                        key.len() >= prefix && key[..prefix] == model.keys().next().expect("a key")[..prefix]
                    };
                    prop_assert_eq!(relaid.is_some(), shares);
                    if let Some(bytes) = relaid {
                        prop_assert_eq!(bytes, leaf_bytes(&model_entries(&with)));
                        prop_assert_eq!(bytes <= PAGE, on_slice.is_ok());
                    }
                    match on_slice {
                        Ok(put) => {
                            prop_assert_eq!(put == Put::Replaced, old.is_some());
                            model = with;
                        }
                        Err(no_room) => {
                            prop_assert_eq!(&page, &before);
                            prop_assert!(leaf_bytes(&model_entries(&with)) > PAGE);
                            prop_assert_eq!(no_room.needed, leaf_bytes(&model_entries(&with)));
                        }
                    }
                }
                Op::Remove(key) => {
                    let on_slice = remove(&mut page[..], key);
                    prop_assert_eq!(on_slice, remove(&mut frame, key));
                    prop_assert_eq!(on_slice, model.remove(key).is_some());
                }
                Op::Compact => {
                    compact(&mut page[..]);
                    compact(&mut frame);
                    prop_assert_eq!(live_bytes(&page[..]), leaf_bytes(&model_entries(&model)));
                }
            }
            prop_assert_eq!(check(&page, PAGE), Ok(Kind::Leaf));
            prop_assert_eq!(decode_leaf(&page), Some(model_entries(&model)));
            let mut in_frame = vec![0u8; PAGE];
            frame.read().copy_to(0, &mut in_frame).expect("whole frame");
            prop_assert_eq!(&in_frame, &page);
            let reader = Slotted::new(&page[..]);
            prop_assert_eq!((reader.lsn(), reader.link()), (Some(3), Some(9)));
            drop(latch);
        }
    }

    /// A full leaf splits into two pages `check` accepts that hold its entries between
    /// them, cut at a separator between the halves, linked left to right to the old next.
    #[test]
    fn a_leaf_splits_at_a_short_separator(
        entries in proptest::collection::btree_map(key(), value(), 2..40),
    ) {
        let mut page = encode_leaf(&[], 7, 11, PAGE);
        let mut model = BTreeMap::new();
        for (key, value) in entries {
            if put_leaf(&mut page[..], &key, (&value).into()).is_ok() {
                model.insert(key, value);
            }
        }
        prop_assume!(model.len() >= 2);
        let Split { left, right, separator } = split(&page[..], 42);
        prop_assert_eq!(check(&left, PAGE), Ok(Kind::Leaf));
        prop_assert_eq!(check(&right, PAGE), Ok(Kind::Leaf));
        let (low, high) = (decode_leaf(&left).expect("left"), decode_leaf(&right).expect("right"));
        prop_assert!(!low.is_empty() && !high.is_empty());
        prop_assert!(low.iter().all(|(k, _)| k[..] < separator[..]));
        prop_assert!(high.iter().all(|(k, _)| k[..] >= separator[..]));
        prop_assert!(separator.len() <= high[0].0.len());
        let joined: Vec<_> = low.into_iter().chain(high).collect();
        prop_assert_eq!(joined, model_entries(&model));
        let (l, r) = (Slotted::new(&left[..]), Slotted::new(&right[..]));
        prop_assert_eq!((l.link(), r.link(), l.lsn(), r.lsn()), (Some(42), Some(11), Some(7), Some(7)));
    }

    /// A leaf cut where `split_point` says (its changes laid over the page's entries, each
    /// counted by its bytes) matches the model's cut: the separator is the model's (the
    /// shortest key above the last entry of the half holding at least half the bytes), and
    /// `split_at` puts every entry below it left and every other right, in order, linked
    /// and numbered as the page was.
    #[test]
    fn a_leaf_cut_where_split_point_says_matches_the_model(
        entries in proptest::collection::btree_map(key(), value(), 2..40),
        changes in proptest::collection::vec((key(), 1usize..PAGE / 2), 0..4),
    ) {
        let mut page = encode_leaf(&[], 7, 11, PAGE);
        let mut model = BTreeMap::new();
        for (key, value) in entries {
            if put_leaf(&mut page[..], &key, (&value).into()).is_ok() {
                model.insert(key, value);
            }
        }
        let tail = |value: &Value| match value {
            Value::Inline(bytes) => INLINE_HEADER_BYTES + bytes.len(),
            Value::Overflow(_) => OVERFLOW_BYTES,
        };
        let mut sizes: BTreeMap<Vec<u8>, usize> =
            model.iter().map(|(k, v)| (k.clone(), SLOT_BYTES + k.len() + tail(v))).collect();
        for (key, bytes) in &changes {
            sizes.insert(key.clone(), *bytes);
        }
        let changes: Vec<(&[u8], usize)> =
            changes.iter().map(|(k, b)| (k.as_slice(), *b)).collect();
        let found = split_point(&page[..], &changes);
        if sizes.len() < 2 {
            prop_assert_eq!(found, None);
            return Ok(());
        }
        let total: usize = sizes.values().sum();
        let ordered: Vec<(&Vec<u8>, &usize)> = sizes.iter().collect();
        let mut so_far = 0;
        let cut = ordered
            .iter()
            .position(|(_, bytes)| {
                so_far += **bytes;
                so_far * 2 >= total
            })
            .map_or(1, |at| at + 1)
            .clamp(1, ordered.len() - 1);
        let (last, first) = (ordered[cut - 1].0, ordered[cut].0);
        let common = last.iter().zip(first).take_while(|(a, b)| a == b).count();
        let separator = first[..common + 1].to_vec();
        prop_assert_eq!(found.as_ref(), Some(&separator));
        let Split { left, right, separator: kept } = split_at(&page[..], 42, &separator);
        prop_assert_eq!(&kept, &separator);
        prop_assert_eq!(check(&left, PAGE), Ok(Kind::Leaf));
        prop_assert_eq!(check(&right, PAGE), Ok(Kind::Leaf));
        let (low, high) = (decode_leaf(&left).expect("left"), decode_leaf(&right).expect("right"));
        prop_assert!(low.iter().all(|(k, _)| k[..] < separator[..]));
        prop_assert!(high.iter().all(|(k, _)| k[..] >= separator[..]));
        let joined: Vec<_> = low.into_iter().chain(high).collect();
        prop_assert_eq!(joined, model_entries(&model));
        let (l, r) = (Slotted::new(&left[..]), Slotted::new(&right[..]));
        prop_assert_eq!((l.link(), r.link(), l.lsn(), r.lsn()), (Some(42), Some(11), Some(7), Some(7)));
    }

    /// Separators put into an internal page route every key as a sorted map of them does,
    /// and after a split the middle separator routes between the halves exactly as the
    /// page did.
    #[test]
    fn internal_edits_and_splits_route_as_the_page_did(
        separators in proptest::collection::vec((proptest::collection::vec(1u8..8, 1..6), 2u64..1000), 1..80),
        probes in proptest::collection::vec(proptest::collection::vec(0u8..9, 0..7), 1..40),
    ) {
        let (first_key, first_child) = separators[0].clone();
        let mut page = encode_internal(1, &[(first_key.clone(), first_child)], 5, PAGE);
        let mut model = BTreeMap::from([(first_key, first_child)]);
        for (key, child) in &separators[1..] {
            match put_separator(&mut page[..], key, *child) {
                Ok(_) => {
                    model.insert(key.clone(), *child);
                }
                Err(_) => break,
            }
            prop_assert_eq!(check(&page, PAGE), Ok(Kind::Internal));
        }
        let route_model = |key: &[u8]| {
            model.range(..=key.to_vec()).next_back().map_or(1, |(_, child)| *child)
        };
        let reader = Slotted::new(&page[..]);
        for probe in &probes {
            let at = reader.child_index(probe).expect("routes");
            prop_assert_eq!(reader.child(at), Some(route_model(probe)));
        }
        prop_assume!(model.len() >= 3);
        let Split { left, right, separator } = split(&page[..], 99);
        prop_assert_eq!(check(&left, PAGE), Ok(Kind::Internal));
        prop_assert_eq!(check(&right, PAGE), Ok(Kind::Internal));
        let (l, r) = (decode_internal(&left[..]).expect("left"), decode_internal(&right[..]).expect("right"));
        prop_assert_eq!(l.1.len() + r.1.len() + 1, model.len());
        for probe in &probes {
            let half = if probe[..] < separator[..] { &left } else { &right };
            let half = Slotted::new(&half[..]);
            let at = half.child_index(probe).expect("routes");
            prop_assert_eq!(half.child(at), Some(route_model(probe)));
        }
    }
}

#[test]
fn a_value_no_larger_is_written_over_the_old_and_a_larger_one_takes_the_gap() {
    let mut page = encode_leaf(&[], 0, 0, PAGE);
    assert_eq!(put_leaf(&mut page[..], b"k", ValueRef::Inline(&[1; 100])), Ok(Put::Inserted));
    let gap = Shape::of(&page[..]).gap();
    assert_eq!(put_leaf(&mut page[..], b"k", ValueRef::Inline(&[2; 60])), Ok(Put::Replaced));
    assert_eq!(Shape::of(&page[..]).gap(), gap, "written over the old value");
    assert_eq!(live_bytes(&page[..]), PAGE - gap - 40, "40 dead bytes");
    assert_eq!(put_leaf(&mut page[..], b"k", ValueRef::Inline(&[3; 200])), Ok(Put::Replaced));
    assert_eq!(Shape::of(&page[..]).gap(), gap - 204, "the new entry from the gap");
    compact(&mut page[..]);
    assert_eq!(live_bytes(&page[..]) + Shape::of(&page[..]).gap(), PAGE);
    let entries = decode_leaf(&page).expect("a leaf");
    assert_eq!(entries, vec![(Bytes::from_static(b"k"), Value::Inline(Bytes::from(vec![3; 200])))]);
}

#[test]
fn a_key_outside_the_prefix_lays_the_page_out_again() {
    let mut page = encode_leaf(&[], 0, 0, PAGE);
    put_leaf(&mut page[..], b"user1", ValueRef::Inline(b"a")).expect("fits");
    put_leaf(&mut page[..], b"user2", ValueRef::Inline(b"b")).expect("fits");
    compact(&mut page[..]);
    assert_eq!(Slotted::new(&page[..]).prefix_len(), Some(4));
    put_leaf(&mut page[..], b"other", ValueRef::Inline(b"c")).expect("fits");
    assert_eq!(Slotted::new(&page[..]).prefix_len(), Some(0));
    let keys: Vec<_> = decode_leaf(&page).expect("leaf").into_iter().map(|e| e.0).collect();
    assert_eq!(keys, [&b"other"[..], b"user1", b"user2"]);
}

#[test]
fn no_room_names_the_bytes_needed_and_changes_nothing() {
    let mut page = encode_leaf(&[], 0, 0, PAGE);
    let mut n = 0u8;
    let no_room = loop {
        match put_leaf(&mut page[..], &[n], ValueRef::Inline(&[n; 1000])) {
            Ok(_) => n += 1,
            Err(no_room) => break no_room,
        }
    };
    assert_eq!(n, 4, "four entries of 1,012 bytes fit a 4 KiB page");
    assert_eq!(no_room, NoRoom { needed: 32 + 5 * 1012, page_bytes: PAGE });
    assert_eq!(no_room.to_string(), "the page needs 5092 bytes and has 4096");
}

/// A long run of random edits, on a slice and on a frame, reaches every path of a put (over
/// the old value, from the gap, laid out again, no room) and agrees with a sorted map.
#[test]
fn a_long_run_of_edits_takes_every_path() {
    let mut rng = fastrand::Rng::with_seed(26);
    let mut page = encode_leaf(&[], 0, 0, PAGE);
    let frames = Frames::reserve(2, PAGE).expect("reserve");
    framed(&frames, 1, &page);
    let mut model: BTreeMap<Vec<u8>, Value> = BTreeMap::new();
    let (mut over, mut from_gap, mut relaid, mut no_room, mut removed) = (0, 0, 0, 0, 0);
    for _ in 0..20_000 {
        let prefixes: [&[u8]; 3] = [b"user", b"user1", b"u"];
        let key = [prefixes[rng.usize(..3)], &[rng.u8(..8)]].concat();
        let mut latch = frames.lock_exclusive(1).expect("resident");
        let mut frame = latch.write();
        if rng.u8(..4) == 0 {
            let gone = remove(&mut page[..], &key);
            assert_eq!(gone, remove(&mut frame, &key));
            assert_eq!(gone, model.remove(&key).is_some());
            removed += usize::from(gone);
        } else {
            let value = Value::Inline(Bytes::from(vec![rng.u8(..); rng.usize(..=300)]));
            let (gap, dead) = (
                Shape::of(&page[..]).gap(),
                PAGE - live_bytes(&page[..]) - Shape::of(&page[..]).gap(),
            );
            let put = put_leaf(&mut page[..], &key, (&value).into());
            assert_eq!(put, put_leaf(&mut frame, &key, (&value).into()));
            match put {
                Err(_) => no_room += 1,
                Ok(_) => {
                    model.insert(key, value);
                    let (gap_after, dead_after) = (
                        Shape::of(&page[..]).gap(),
                        PAGE - live_bytes(&page[..]) - Shape::of(&page[..]).gap(),
                    );
                    if dead > 0 && dead_after == 0 {
                        relaid += 1;
                    } else if gap_after == gap {
                        over += 1;
                    } else if gap_after < gap {
                        from_gap += 1;
                    }
                }
            }
        }
        let mut in_frame = vec![0u8; PAGE];
        frame.read().copy_to(0, &mut in_frame).expect("whole frame");
        assert_eq!(in_frame, page);
        drop(latch);
        assert_eq!(decode_leaf(&page), Some(model_entries(&model)));
    }
    assert!(over > 100 && from_gap > 100 && relaid > 100 && no_room > 100 && removed > 100,
        "over {over}, from the gap {from_gap}, laid out again {relaid}, no room {no_room}, removed {removed}");
}

/// A full internal page of two separators splits with a third into one separator on each
/// side of the middle one, which goes up.
#[test]
fn a_full_internal_page_splits_with_the_separator_it_had_no_room_for() {
    let long = |c: u8| {
        let mut key = vec![c];
        key.resize(PAGE / 2 - 32, b'x');
        key
    };
    let page = encode_internal(1, &[(long(b'a'), 2), (long(b'c'), 3)], 4, PAGE);
    let mut full = page.clone();
    assert!(put_separator(&mut full[..], &long(b'b'), 9).is_err(), "no room for a third");
    assert_eq!(full, page);
    let Split { left, right, separator } = split_adding(&page[..], 99, &long(b'b'), 9);
    assert_eq!(separator, long(b'b'));
    assert_eq!(decode_internal(&left[..]), Some((1, vec![(long(b'a'), 2)])));
    assert_eq!(decode_internal(&right[..]), Some((9, vec![(long(b'c'), 3)])));
}
