use proptest::prelude::*;

use super::*;

fn leaf_of(map: std::collections::BTreeMap<Vec<u8>, Value>) -> LeafPage {
    LeafPage::new(map.into_iter().map(|(k, v)| (Bytes::from(k), v)).collect())
}

fn leaf(entries: &[(&[u8], Value)]) -> Page {
    Page::Leaf(LeafPage::new(
        entries.iter().map(|(k, v)| (Bytes::copy_from_slice(k), v.clone())).collect(),
    ))
}

fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..40)
}

fn value_strategy() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300).prop_map(Value::inline),
        (1u64..1 << 30, any::<u64>(), 1u32..64).prop_map(|(len, first, blocks)| {
            Value::Overflow(OverflowRef { len: len.max(u64::from(blocks)), first, blocks })
        }),
    ]
}

fn page_strategy() -> impl Strategy<Value = Page> {
    prop_oneof![
        prop::collection::btree_map(key_strategy(), value_strategy(), 0..40)
            .prop_map(|map| Page::Leaf(leaf_of(map))),
        (any::<u64>(), prop::collection::btree_map(key_strategy(), any::<u64>(), 0..40)).prop_map(
            |(first_child, map)| Page::Internal(InternalPage::new(
                first_child,
                map.into_iter().collect()
            ))
        ),
    ]
}

proptest! {
    #[test]
    fn every_page_round_trips(page in page_strategy()) {
        let bytes = encode(&page);
        prop_assert_eq!(bytes.len(), page.encoded_len());
        prop_assert_eq!(decode(&bytes), Ok(page));
    }

    /// Damage of any kind is an error or another valid page, never a panic; a page that
    /// still decodes re-encodes to the same bytes (no information is invented).
    #[test]
    fn damaged_pages_are_errors_or_exact_pages(
        page in page_strategy(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = encode(&page);
        for (at, mask) in flips {
            let at = at.index(bytes.len());
            bytes[at] ^= mask;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        if let Ok(decoded) = decode(&bytes) {
            prop_assert_eq!(encode(&decoded), bytes);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn search_and_child_for_agree_with_a_linear_scan(
        page in page_strategy(),
        probe in key_strategy(),
    ) {
        match page {
            Page::Leaf(leaf) => {
                let linear = leaf.entries.iter().position(|(k, _)| *k >= probe);
                let expected = match linear {
                    Some(i) if leaf.entries[i].0 == probe => Ok(i),
                    Some(i) => Err(i),
                    None => Err(leaf.entries.len()),
                };
                prop_assert_eq!(leaf.search(&probe), expected);
            }
            Page::Internal(internal) => {
                let expected = internal
                    .entries
                    .iter()
                    .rev()
                    .find(|(separator, _)| *separator <= probe)
                    .map_or(internal.first_child, |(_, child)| *child);
                prop_assert_eq!(internal.child_for(&probe), expected);
            }
        }
    }
}

#[test]
fn the_layout_is_the_documented_one() {
    let page = leaf(&[(b"ab", Value::inline(b"xyz".to_vec()))]);
    let mut expected = vec![1, 1, 0, 0, 1, 0, 0, 0];
    expected.extend_from_slice(&[2, 0, 0, 0, b'a', b'b', 0, 3, 0, 0, 0, b'x', b'y', b'z']);
    assert_eq!(encode(&page), expected);
    let internal = Page::Internal(InternalPage::new(7, vec![(b"m".to_vec(), 9)]));
    let mut expected = vec![2, 1, 0, 0, 1, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0];
    expected.extend_from_slice(&[1, 0, 0, 0, b'm', 9, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(encode(&internal), expected);
}

#[test]
fn each_kind_of_damage_has_its_own_message() {
    let good = encode(&leaf(&[(b"a", Value::inline(vec![1])), (b"b", Value::inline(vec![2]))]));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "page header"),
        (
            {
                let mut b = good.clone();
                b[0] = 9;
                b
            },
            "unknown page kind 9",
        ),
        (
            {
                let mut b = good.clone();
                b[1] = 2;
                b
            },
            "unknown page format version 2",
        ),
        (
            {
                let mut b = good.clone();
                b[2] = 1;
                b
            },
            "reserved header bytes",
        ),
        (
            {
                let mut b = good.clone();
                b[4] = 200;
                b
            },
            "entries cannot fit",
        ),
        (
            {
                let mut b = good.clone();
                b.push(0);
                b
            },
            "1 bytes after the last entry",
        ),
        (
            {
                let mut b = good.clone();
                b[13] = 5;
                b
            },
            "unknown value kind 5",
        ),
        (
            {
                let mut b = good.clone();
                b[12] = b'c';
                b
            },
            "keys out of order",
        ),
        (good[..good.len() - 1].to_vec(), "value of 1 bytes, but only 0 left"),
        (
            {
                let mut b = good.clone();
                b[8..12].copy_from_slice(&5000u32.to_le_bytes());
                b
            },
            "over the limit",
        ),
    ];
    for (bytes, message) in cases {
        let error = decode(&bytes).expect_err(message);
        assert!(error.to_string().contains(message), "{error} should say {message:?}");
    }
    let overflow = leaf(&[(b"k", Value::Overflow(OverflowRef { len: 10, first: 3, blocks: 1 }))]);
    let mut bytes = encode(&overflow);
    let blocks_at = bytes.len() - 4;
    bytes[blocks_at..].copy_from_slice(&0u32.to_le_bytes());
    assert!(decode(&bytes).expect_err("no blocks").to_string().contains("invalid overflow"));
}

#[test]
fn a_huge_entry_count_allocates_nothing_large() {
    // 2^32 - 1 entries claimed in an 8-byte page: refused before any allocation.
    let bytes = [1, 1, 0, 0, 255, 255, 255, 255];
    assert!(decode(&bytes).is_err());
}

#[test]
#[should_panic(expected = "leaf keys out of order")]
fn encoding_a_page_with_unsorted_keys_is_a_bug() {
    encode(&leaf(&[(b"b", Value::inline(vec![])), (b"a", Value::inline(vec![]))]));
}

fn leaf_strategy(min: usize) -> impl Strategy<Value = LeafPage> {
    prop::collection::btree_map(key_strategy(), value_strategy(), min..60).prop_map(leaf_of)
}

fn internal_strategy(min: usize) -> impl Strategy<Value = InternalPage> {
    (any::<u64>(), prop::collection::btree_map(key_strategy(), any::<u64>(), min..60))
        .prop_map(|(first_child, map)| InternalPage::new(first_child, map.into_iter().collect()))
}

proptest! {
    #[test]
    fn a_leaf_splits_in_order_about_in_half_and_merges_back(
        original in leaf_strategy(2),
        probe in key_strategy(),
    ) {
        let mut left = original.clone();
        let (separator, right) = left.split();
        prop_assert!(!left.entries.is_empty() && !right.entries.is_empty());
        prop_assert!(left.entries.iter().all(|(k, _)| *k < separator));
        prop_assert!(right.entries.iter().all(|(k, _)| *k >= separator));
        // Neither half is more than half the page plus one entry.
        let largest = original.entries.iter().map(|(k, v)| entry_len(k, v)).max().unwrap_or(0);
        let half = original.encoded_len() / 2;
        prop_assert!(left.encoded_len() <= half + largest + HEADER_BYTES);
        prop_assert!(right.encoded_len() <= half + largest + HEADER_BYTES);
        // A lookup goes to the half that holds the key, as a parent would send it.
        let half_for = if probe < separator { &left } else { &right };
        prop_assert_eq!(half_for.search(&probe).is_ok(), original.search(&probe).is_ok());
        left.merge(right);
        prop_assert_eq!(left, original);
    }

    #[test]
    fn an_internal_page_splits_and_merges_without_moving_any_key_range(
        original in internal_strategy(3),
        probe in key_strategy(),
    ) {
        let mut left = original.clone();
        let (separator, right) = left.split();
        prop_assert!(left.entries.iter().all(|(k, _)| *k < separator));
        prop_assert!(right.entries.iter().all(|(k, _)| *k > separator));
        prop_assert!(left.entries.len().abs_diff(right.entries.len()) <= 1);
        let child = if probe < separator { left.child_for(&probe) } else { right.child_for(&probe) };
        prop_assert_eq!(child, original.child_for(&probe));
        left.merge(separator, right);
        prop_assert_eq!(left, original);
    }

    #[test]
    fn a_leaf_split_at_a_size_keeps_the_most_entries_that_fit_it(
        original in leaf_strategy(2),
        target in 0usize..4096,
    ) {
        let mut left = original.clone();
        let (separator, right) = left.split_at_bytes(target);
        prop_assert!(!left.entries.is_empty() && !right.entries.is_empty());
        prop_assert!(left.entries.iter().all(|(k, _)| *k < separator));
        prop_assert!(right.entries.iter().all(|(k, _)| *k >= separator));
        // The lower part fits the target unless it holds a single entry, and the next entry
        // would not have fitted unless it had to stay for the upper part.
        prop_assert!(left.encoded_len() <= target || left.entries.len() == 1);
        let (next_key, next_value) = &right.entries[0];
        let with_next = left.encoded_len() + entry_len(next_key, next_value);
        prop_assert!(with_next > target || right.entries.len() == 1);
        left.merge(right);
        prop_assert_eq!(left, original);
    }

    #[test]
    fn an_internal_page_split_at_a_size_keeps_the_most_separators_that_fit_it(
        original in internal_strategy(3),
        target in 0usize..4096,
    ) {
        let mut left = original.clone();
        let (separator, right) = left.split_at_bytes(target);
        prop_assert!(!left.entries.is_empty() && !right.entries.is_empty());
        prop_assert!(left.entries.iter().all(|(k, _)| *k < separator));
        prop_assert!(right.entries.iter().all(|(k, _)| *k > separator));
        prop_assert!(left.encoded_len() <= target || left.entries.len() == 1);
        prop_assert!(left.encoded_len() + 12 + separator.len() > target || right.entries.len() == 1);
        left.merge(separator, right);
        prop_assert_eq!(left, original);
    }

    #[test]
    fn inserting_a_split_child_sends_its_keys_there(
        mut page in internal_strategy(0),
        separator in key_strategy(),
        probe in key_strategy(),
    ) {
        prop_assume!(page.entries.iter().all(|(k, _)| *k != separator));
        let before = page.child_for(&probe);
        page.insert(separator.clone(), u64::MAX);
        prop_assert!(keys_ascend(page.entries.iter().map(|(k, _)| k.as_slice())));
        let after = page.child_for(&probe);
        // Keys from the separator up to the next one move to the new child; others stay.
        let next = page.entries.iter().map(|(k, _)| k).find(|k| **k > separator);
        let moved = probe >= separator && next.is_none_or(|next| probe < *next);
        prop_assert_eq!(after, if moved { u64::MAX } else { before });
    }

    #[test]
    fn the_shortest_separator_lies_between_its_keys(a in key_strategy(), b in key_strategy()) {
        prop_assume!(a != b);
        let (low, high) = if a < b { (a, b) } else { (b, a) };
        let separator = shortest_separator(&low, &high);
        prop_assert!(low < separator && separator <= high);
        prop_assert!(separator.len() <= high.len());
    }
}

proptest! {
    #[test]
    fn a_packed_leaf_is_slices_of_its_encoded_image(original in leaf_strategy(0)) {
        let mut packed = original.clone();
        packed.pack();
        prop_assert_eq!(&packed, &original);
        let page = Page::Leaf(packed.clone());
        let image = encoded(&page);
        prop_assert_eq!(&image[..], &encode(&Page::Leaf(original))[..]);
        prop_assert_eq!(packed.buffer_bytes(), image.len());
        // Every key and inline value lies inside the image, in order.
        let range = image.as_ptr() as usize..image.as_ptr() as usize + image.len() + 1;
        let mut last = range.start;
        for (key, value) in &packed.entries {
            let mut parts: Vec<&[u8]> = vec![key];
            if let Value::Inline(bytes) = value {
                parts.push(bytes);
            }
            for part in parts {
                let at = part.as_ptr() as usize;
                prop_assert!(part.is_empty() || (range.contains(&at) && at >= last));
                if !part.is_empty() {
                    last = at + part.len();
                }
            }
        }
        prop_assert_eq!(packed.entries.capacity(), packed.entries.len());
    }
}

#[test]
fn a_decoded_leaf_is_slices_of_its_block() {
    let page =
        leaf(&[(b"a", Value::inline(b"one".to_vec())), (b"b", Value::inline(b"two".to_vec()))]);
    let block = Bytes::from(encode(&page));
    let Page::Leaf(decoded) = decode_bytes(block.clone()).expect("decode") else { panic!("leaf") };
    assert_eq!(Page::Leaf(decoded.clone()), page);
    assert_eq!(decoded.buffer_bytes(), block.len());
    let range = block.as_ptr() as usize..block.as_ptr() as usize + block.len();
    for (key, _) in &decoded.entries {
        assert!(range.contains(&(key.as_ptr() as usize)), "key copied out of the block");
    }
}
