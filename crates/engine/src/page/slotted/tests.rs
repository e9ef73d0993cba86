use proptest::prelude::*;
use tierkv_io::frames::Frames;

use super::*;

const PAGE: usize = 8192;

/// Sorted, distinct keys that share prefixes (as a page's do), with small values, some in
/// overflow blocks, fitting one page.
fn leaf_entries() -> impl Strategy<Value = Vec<(Bytes, Value)>> {
    let key = (0usize..3, proptest::collection::vec(any::<u8>(), 0..24));
    let value = prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..200).prop_map(|v| Value::Inline(Bytes::from(v))),
        1 => (1u64..10_000, 1u64..1000).prop_map(|(len, first)| Value::Overflow(OverflowRef { len: len + 1, first, blocks: 1 })),
    ];
    proptest::collection::btree_map(key, value, 0..60).prop_map(|map| {
        let prefixes: [&[u8]; 3] = [b"user", b"user12", b""];
        let mut entries: Vec<(Bytes, Value)> = map
            .into_iter()
            .map(|((p, rest), value)| (Bytes::from([prefixes[p], &rest[..]].concat()), value))
            .collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|a, b| a.0 == b.0);
        while leaf_bytes(&entries) > PAGE {
            entries.pop();
        }
        entries
    })
}

fn in_frame(frames: &Frames, pid: u64, image: &[u8]) {
    let mut loading = frames.try_load(pid).expect("in range").expect("evicted");
    loading.write().put_all(image);
    drop(loading.finish());
}

proptest! {
    #[test]
    fn a_leaf_reads_back_in_place_from_a_slice_and_from_a_frame(
        entries in leaf_entries(),
        probes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..10), 0..20),
    ) {
        let image = encode_leaf(&entries, 77, 5, PAGE);
        prop_assert_eq!(check(&image, PAGE), Ok(Kind::Leaf));
        prop_assert_eq!(decode_leaf(&image), Some(entries.clone()));
        let frames = Frames::reserve(4, PAGE).expect("reserve");
        in_frame(&frames, 2, &image);
        let read = frames.optimistic(2).expect("resident");
        let view = read.read();
        let (slice, frame) = (Slotted::new(&image[..]), Slotted::new(&view));
        prop_assert_eq!((slice.lsn(), slice.link(), frame.count()), (Some(77), Some(5), Some(entries.len())));
        let mut wanted: Vec<Vec<u8>> = entries.iter().map(|e| e.0.to_vec()).collect();
        for probe in probes {
            wanted.push([b"user".as_slice(), &probe].concat());
            wanted.push(probe);
        }
        for key in &wanted {
            let expected = entries.binary_search_by(|e| e.0[..].cmp(key));
            prop_assert_eq!(slice.search(key), Some(expected));
            prop_assert_eq!(frame.search(key), Some(expected));
            if let Ok(at) = expected {
                let mut back = Vec::new();
                frame.key_into(at, &mut back).expect("a key");
                prop_assert_eq!(&back[..], &key[..]);
                match (frame.value(at).expect("a value"), &entries[at].1) {
                    (ValueAt::Inline { offset, len }, Value::Inline(bytes)) => {
                        let mut out = Vec::new();
                        frame.inline_into(offset, len, &mut out).expect("inline bytes");
                        prop_assert_eq!(&out[..], &bytes[..]);
                    }
                    (ValueAt::Overflow(found), Value::Overflow(overflow)) => prop_assert_eq!(found, *overflow),
                    (found, wanted) => prop_assert!(false, "{found:?} for {wanted:?}"),
                }
            }
        }
        // Hints for every entry, and past the count, change nothing a reader could see.
        for index in 0..=entries.len() + 1 {
            frame.prefetch_entry(index, frame.mean_entry_bytes().unwrap_or(0) + 64);
            slice.prefetch_entry(index, usize::MAX);
        }
        prop_assert_eq!(read.validate(), Ok(()));
    }

    #[test]
    fn an_internal_page_routes_each_key_to_the_child_a_binary_search_picks(
        separators in proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 1..12), 1..80),
        probes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 0..30),
    ) {
        let entries: Vec<(Vec<u8>, u64)> =
            separators.into_iter().enumerate().map(|(i, key)| ([b"ab".as_slice(), &key].concat(), 10 + i as u64)).collect();
        let image = encode_internal(9, &entries, 3, PAGE);
        prop_assert_eq!(check(&image, PAGE), Ok(Kind::Internal));
        prop_assert_eq!(decode_internal(image.as_slice()), Some((9, entries.clone())));
        let page = Slotted::new(&image[..]);
        for probe in probes.iter().chain(entries.iter().map(|e| &e.0)) {
            let index = entries.partition_point(|(sep, _)| sep[..] <= probe[..]);
            prop_assert_eq!(page.child_index(probe), Some(index));
            let child = if index == 0 { 9 } else { entries[index - 1].1 };
            prop_assert_eq!(page.child(index), Some(child));
        }
        // Past the count is free space, not slots: a cursor whose child index came from the
        // page before a split (which took its upper half) gets `None`, not a child id made
        // of whatever bytes lie there.
        let count = entries.len();
        prop_assert_eq!(page.count(), Some(count));
        prop_assert_eq!(page.child(count + 1), None);
        prop_assert_eq!(page.child(count + 7), None);
        prop_assert_eq!(page.key_into(count, &mut Vec::new()), None);
    }

    #[test]
    fn a_leaf_reads_nothing_past_its_count(entries in leaf_entries()) {
        let image = encode_leaf(&entries, 1, 0, PAGE);
        let page = Slotted::new(&image[..]);
        let count = entries.len();
        prop_assert_eq!(page.value(count), None);
        prop_assert_eq!(page.key_into(count, &mut Vec::new()), None);
        if count > 0 {
            prop_assert!(page.value(count - 1).is_some());
        }
        // A page just laid out has no dead bytes: its heap is its entries' bytes, what the
        // page takes less its header, prefix and slots.
        let prefix = page.prefix_len().expect("a prefix");
        let heap = leaf_bytes(&entries) - HEADER_BYTES - prefix - count * SLOT_BYTES;
        prop_assert_eq!(page.mean_entry_bytes(), heap.checked_div(count));
        if count > 0 {
            // At least a value's kind and length each.
            prop_assert!(page.mean_entry_bytes().expect("a mean") >= INLINE_HEADER_BYTES);
        }
    }

    #[test]
    fn a_damaged_page_is_refused_or_still_reads_without_panicking(
        entries in leaf_entries(),
        flips in proptest::collection::vec((0usize..PAGE, any::<u8>()), 1..4),
    ) {
        let mut image = encode_leaf(&entries, 1, 0, PAGE);
        for (at, byte) in flips {
            image[at] ^= byte | 1;
        }
        let page = Slotted::new(&image[..]);
        // Unchecked reads answer something or None, never panic.
        let _ = page.search(b"user12zz");
        for index in 0..page.count().unwrap_or(0).min(100) {
            let _ = page.value(index);
            let _ = page.key_into(index, &mut Vec::new());
        }
        if check(&image, PAGE).is_ok() {
            let decoded = decode_leaf(&image).expect("a checked page decodes");
            for (at, (key, _)) in decoded.iter().enumerate() {
                prop_assert_eq!(page.search(key), Some(Ok(at)));
            }
        }
    }
}

#[test]
fn check_names_what_is_wrong() {
    let entries = vec![
        (Bytes::from_static(b"apple"), Value::Inline(Bytes::from_static(b"1"))),
        (Bytes::from_static(b"apricot"), Value::Inline(Bytes::from_static(b"22"))),
    ];
    let good = encode_leaf(&entries, 1, 0, PAGE);
    assert_eq!(check(&good, PAGE), Ok(Kind::Leaf));
    let refused = |change: &dyn Fn(&mut Vec<u8>), page_bytes: usize, words: &str| {
        let mut bad = good.clone();
        change(&mut bad);
        let error = check(&bad, page_bytes).expect_err(words);
        assert!(error.detail.contains(words), "{words}: {error}");
    };
    refused(&|p| p[0] = 7, PAGE, "neither leaf");
    refused(&|p| p[1] = 1, PAGE, "page format 1");
    refused(&|_| (), 4096, "where the store's pages are 4096");
    // A heap reaching down to byte 20, over the slots.
    refused(&|p| p[6..8].copy_from_slice(&((PAGE - 20) as u16).to_le_bytes()), PAGE, "slots end");
    // The two slots swapped: keys out of order.
    refused(
        &|p| {
            let slots = HEADER_BYTES + 2; // the prefix "ap"
            let (a, b) = (p[slots..slots + 8].to_vec(), p[slots + 8..slots + 16].to_vec());
            p[slots..slots + 8].copy_from_slice(&b);
            p[slots + 8..slots + 16].copy_from_slice(&a);
        },
        PAGE,
        "not above",
    );
    refused(&|p| p[HEADER_BYTES + 2] ^= 1, PAGE, "head does not match");
}
