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

/// The page size of these tests: room for every page the strategies make.
const PAGE: usize = 16 << 10;

fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..40)
}

fn value_strategy() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300).prop_map(Value::inline),
        (1u64..1 << 30, 1..u64::MAX, 1u32..64).prop_map(|(len, first, blocks)| {
            Value::Overflow(OverflowRef { len: len.max(u64::from(blocks)), first, blocks })
        }),
    ]
}

fn page_strategy() -> impl Strategy<Value = Page> {
    prop_oneof![
        prop::collection::btree_map(key_strategy(), value_strategy(), 0..40)
            .prop_map(|map| Page::Leaf(leaf_of(map))),
        (
            1..u64::MAX,
            prop::collection::btree_map(
                prop::collection::vec(any::<u8>(), 1..40),
                1..u64::MAX,
                1..40
            )
        )
            .prop_map(|(first_child, map)| Page::Internal(InternalPage::new(
                first_child,
                map.into_iter().collect()
            ))),
    ]
}

proptest! {
    #[test]
    fn every_page_round_trips(page in page_strategy()) {
        let bytes = encode(&page, PAGE);
        prop_assert_eq!(bytes.len(), PAGE);
        prop_assert_eq!(decode(&bytes), Ok(page));
    }

    /// Damage of any kind is an error or another valid page, never a panic; a page that
    /// still decodes encodes and decodes to itself again.
    #[test]
    fn damaged_pages_are_errors_or_exact_pages(
        page in page_strategy(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = encode(&page, PAGE);
        for (at, mask) in flips {
            let at = at.index(bytes.len());
            bytes[at] ^= mask;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        if let Ok(decoded) = decode(&bytes) {
            prop_assert_eq!(decode(&encode(&decoded, bytes.len())), Ok(decoded));
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = decode(&bytes);
        let mut page = bytes.clone();
        page.resize(512, 0);
        let _ = decode(&page);
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
    let mut expected = vec![0u8; 512];
    // One entry: the whole key is the prefix, and its suffix is empty.
    expected[..8].copy_from_slice(&[1, 2, 1, 0, 2, 0, 0, 0]);
    expected[6..8].copy_from_slice(&6u16.to_le_bytes()); // heap bytes
    expected[24..28].copy_from_slice(&512u32.to_le_bytes());
    expected[32..34].copy_from_slice(b"ab");
    expected[34..42].copy_from_slice(&[0, 0, 0, 0, 250, 1, 0, 0]); // head 0, at 506, 0 bytes
    expected[506..].copy_from_slice(&[0, 3, 0, b'x', b'y', b'z']);
    assert_eq!(encode(&page, 512), expected);
    let internal = Page::Internal(InternalPage::new(7, vec![(b"m".to_vec(), 9)]));
    let mut expected = vec![0u8; 512];
    expected[..8].copy_from_slice(&[2, 2, 1, 0, 1, 0, 0, 0]);
    expected[6..8].copy_from_slice(&8u16.to_le_bytes());
    expected[16..24].copy_from_slice(&7u64.to_le_bytes());
    expected[24..28].copy_from_slice(&512u32.to_le_bytes());
    expected[32] = b'm';
    expected[33..41].copy_from_slice(&[0, 0, 0, 0, 248, 1, 0, 0]);
    expected[504..].copy_from_slice(&9u64.to_le_bytes());
    assert_eq!(encode(&internal, 512), expected);
}

#[test]
fn damage_is_named() {
    let good =
        encode(&leaf(&[(b"a", Value::inline(vec![1])), (b"b", Value::inline(vec![2]))]), 512);
    for (bytes, message) in [
        (vec![], "a page of 0 bytes"),
        (good[..300].to_vec(), "a page of 300 bytes"),
        ([&[9u8][..], &good[1..]].concat(), "neither leaf"),
    ] {
        let error = decode(&bytes).expect_err(message);
        assert!(error.to_string().contains(message), "{error} should say {message:?}");
    }
    let overflow = leaf(&[(b"k", Value::Overflow(OverflowRef { len: 10, first: 3, blocks: 1 }))]);
    let mut bytes = encode(&overflow, 512);
    let blocks_at = bytes.len() - 4;
    bytes[blocks_at..].copy_from_slice(&0u32.to_le_bytes());
    assert!(decode(&bytes).expect_err("no blocks").to_string().contains("overflow"));
}

#[test]
fn a_huge_entry_count_allocates_nothing_large() {
    // 65,535 entries claimed in a 512-byte page: refused before any entry is read.
    let mut bytes = encode(&leaf(&[]), 512);
    bytes[2..4].copy_from_slice(&u16::MAX.to_le_bytes());
    assert!(decode(&bytes).is_err());
}

#[test]
#[should_panic(expected = "leaf keys out of order")]
fn encoding_a_page_with_unsorted_keys_is_a_bug() {
    encode(&leaf(&[(b"b", Value::inline(vec![])), (b"a", Value::inline(vec![]))]), 512);
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
        prop_assert!(left.encoded_len() + 16 + separator.len() > target || right.entries.len() == 1);
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
        prop_assert!(page.entries.windows(2).all(|pair| pair[0].0 < pair[1].0));
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
    fn a_packed_leaf_is_slices_of_one_buffer(original in leaf_strategy(0)) {
        let mut packed = original.clone();
        packed.pack();
        prop_assert_eq!(&packed, &original);
        let inline = |value: &Value| if let Value::Inline(bytes) = value { bytes.len() } else { 0 };
        let total: usize = packed.entries.iter().map(|(k, v)| k.len() + inline(v)).sum();
        prop_assert_eq!(packed.buffer_bytes(), total);
        let Some(first) = packed.entries.first().map(|(key, _)| key.as_ptr() as usize) else {
            return Ok(());
        };
        // Every key and inline value lies inside the buffer, in order, back to back.
        let mut next = first;
        for (key, value) in &packed.entries {
            let mut parts: Vec<&[u8]> = vec![key];
            if let Value::Inline(bytes) = value {
                parts.push(bytes);
            }
            for part in parts {
                prop_assert!(part.is_empty() || part.as_ptr() as usize == next);
                next += part.len();
            }
        }
        prop_assert_eq!(next - first, total);
        prop_assert_eq!(packed.entries.capacity(), packed.entries.len());
    }
}

#[test]
fn a_decoded_leaf_is_slices_of_one_buffer() {
    let page =
        leaf(&[(b"a", Value::inline(b"one".to_vec())), (b"b", Value::inline(b"two".to_vec()))]);
    let Page::Leaf(decoded) = decode(&encode(&page, 512)).expect("decode") else { panic!("leaf") };
    assert_eq!(Page::Leaf(decoded.clone()), page);
    assert_eq!(decoded.buffer_bytes(), 8);
}

/// A laid-out page (`encode`) holds its entries in key order, back to back, up to the
/// page's end: a scan of it reads one ascending stream. Each entry is its key's suffix
/// (one byte here: the keys share the prefix "k"), the value's kind and length (3 bytes),
/// then the value.
#[test]
fn a_laid_out_page_holds_its_entries_in_key_order_up_to_its_end() {
    let entries: Vec<(Vec<u8>, Value)> = (0..12u8)
        .map(|i| (vec![b'k', i], Value::inline(vec![i; 40 + usize::from(i) * 7])))
        .collect();
    let refs: Vec<(&[u8], Value)> = entries.iter().map(|(k, v)| (&k[..], v.clone())).collect();
    let image = encode(&leaf(&refs), 4096);
    let page = slotted::Slotted::new(&image[..]);
    let spans: Vec<(usize, usize)> = (0..12)
        .map(|index| {
            let slotted::ValueAt::Inline { offset, len } = page.value(index).expect("value") else {
                panic!("inline values only")
            };
            (offset - 3 - 1, offset + len)
        })
        .collect();
    assert!(spans.windows(2).all(|pair| pair[0].1 == pair[1].0), "{spans:?}");
    assert_eq!(spans[11].1, image.len());
    let heap = usize::from(u16::from_le_bytes([image[6], image[7]]));
    assert_eq!(spans[0].0, image.len() - heap, "the first entry starts the heap");
    // A split lays its halves out the same way.
    let slotted::edit::Split { left, right, .. } = slotted::edit::split(&image[..], 99);
    for half in [&left[..], &right[..]] {
        let half_page = slotted::Slotted::new(half);
        let offsets: Vec<usize> = (0..half_page.count().expect("count"))
            .map(|index| match half_page.value(index).expect("value") {
                slotted::ValueAt::Inline { offset, .. } => offset,
                slotted::ValueAt::Overflow(_) => panic!("inline values only"),
            })
            .collect();
        assert!(offsets.windows(2).all(|pair| pair[0] < pair[1]), "{offsets:?}");
    }
}

/// A page full only once its keys' common prefix is counted once (as the slotted layout
/// keeps it) is over `encoded_len`'s bound and still encodes, and decodes back the same
/// (the `btree_page` fuzz target found `encode` refusing it).
#[test]
fn a_page_that_fits_only_with_its_prefix_encodes_and_decodes_back() {
    let prefix = vec![b'p'; 60];
    let entries: Vec<(Vec<u8>, Value)> = (0..20u8)
        .map(|i| {
            let mut key = prefix.clone();
            key.push(i);
            (key, Value::inline(Bytes::from(vec![i; 4])))
        })
        .collect();
    let page = leaf(&entries.iter().map(|(k, v)| (&k[..], v.clone())).collect::<Vec<_>>());
    let page_bytes = 1024;
    assert!(page.encoded_len() > page_bytes, "not over the bound: {}", page.encoded_len());
    let image = encode(&page, page_bytes);
    assert_eq!(image.len(), page_bytes);
    assert_eq!(decode(&image).expect("decodes"), page);
}

/// Page bytes that record each range a reader hints (`PageBytes::prefetch`).
struct Recording<'a> {
    bytes: &'a [u8],
    asked: std::cell::RefCell<Vec<(usize, usize)>>,
}

impl slotted::PageBytes for Recording<'_> {
    fn byte(&self, at: usize) -> Option<u8> {
        self.bytes.byte(at)
    }
    fn le_u16(&self, at: usize) -> Option<u16> {
        self.bytes.le_u16(at)
    }
    fn le_u32(&self, at: usize) -> Option<u32> {
        self.bytes.le_u32(at)
    }
    fn le_u64(&self, at: usize) -> Option<u64> {
        self.bytes.le_u64(at)
    }
    fn compare_at(&self, at: usize, len: usize, key: &[u8]) -> Option<std::cmp::Ordering> {
        self.bytes.compare_at(at, len, key)
    }
    fn copy_out(&self, at: usize, out: &mut [u8]) -> Option<()> {
        self.bytes.copy_out(at, out)
    }
    fn prefetch(&self, from: usize, to: usize) {
        self.asked.borrow_mut().push((from, to));
    }
}

/// `prefetch_entry` asks for the bytes from the entry's start (its key suffix), as many as
/// it is told up to 4 KiB, and nothing for an index past the count; `mean_entry_bytes` is
/// the heap's bytes over the count.
#[test]
fn an_entry_prefetch_asks_from_the_entry_start_and_nothing_past_the_count() {
    let entries: Vec<(Vec<u8>, Value)> =
        (0..12u8).map(|i| (vec![b'k', i], Value::inline(vec![i; 100]))).collect();
    let refs: Vec<(&[u8], Value)> = entries.iter().map(|(k, v)| (&k[..], v.clone())).collect();
    let image = encode(&leaf(&refs), 4096);
    let recording = Recording { bytes: &image, asked: Default::default() };
    let page = slotted::Slotted::new(&recording);
    let heap = usize::from(u16::from_le_bytes([image[6], image[7]]));
    assert_eq!(page.mean_entry_bytes(), Some(heap / 12));
    for index in 0..12 {
        let slotted::ValueAt::Inline { offset, .. } = page.value(index).expect("value") else {
            panic!("inline values only")
        };
        // The entry starts at its key suffix: one byte ("k" is the prefix), then the
        // value's kind and length.
        let start = offset - 3 - 1;
        page.prefetch_entry(index, 200);
        assert_eq!(recording.asked.borrow_mut().pop(), Some((start, start + 200)));
        page.prefetch_entry(index, usize::MAX);
        assert_eq!(recording.asked.borrow_mut().pop(), Some((start, start + 4096)));
    }
    page.prefetch_entry(12, 200);
    assert!(recording.asked.borrow().is_empty(), "a hint past the count");
}
