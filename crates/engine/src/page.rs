//! B+tree pages: the decoded form the checkpoint's copy-on-write tree works on
//! ([`LeafPage`], [`InternalPage`]), and their encoding as slotted pages (format 2,
//! `slotted.rs`, the table in `docs/format.md`): one page is one block of the block store,
//! exactly the store's page size, which the block store wraps with its header, checksum and
//! compression.
//!
//! Sizes here (`encoded_len`) count what a slotted page of the entries takes without its
//! common prefix: never less than the page will take, so a page that fits by this count
//! fits. A single entry always fits (`options::max_key_bytes`, and inline values are at most
//! a quarter page), so any split is possible.
//!
//! Decoding checks everything a damaged or foreign page could get wrong (`slotted::check`)
//! before it reads an entry. It never panics.
//!
//! Must never: decode a page whose keys are out of order, or read past its end.

use bytes::Bytes;

mod heads;
pub mod slotted;

use heads::{KeyHeads, Narrow};

/// The largest key, in bytes.
pub const MAX_KEY_BYTES: usize = 4096;

/// The largest value, inline or in overflow blocks.
pub const MAX_VALUE_BYTES: u64 = 1 << 32;

/// Bytes of the page header.
pub const HEADER_BYTES: usize = slotted::HEADER_BYTES;

/// Why bytes are not a valid page.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid B+tree page at byte {offset}: {detail}")]
pub struct PageError {
    /// Where in the page the problem was found.
    pub offset: usize,
    /// What is wrong.
    pub detail: String,
}

/// Where a value too large for a leaf is kept: `blocks` consecutive block ids from `first`,
/// holding `len` bytes in all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverflowRef {
    /// Total bytes of the value.
    pub len: u64,
    /// Block id of its first block.
    pub first: u64,
    /// How many blocks hold it (at least one).
    pub blocks: u32,
}

/// A leaf's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// Kept in the leaf (a slice of the page's buffer, when the page was decoded or packed).
    Inline(Bytes),
    /// Kept in overflow blocks.
    Overflow(OverflowRef),
}

impl Value {
    /// An inline value.
    pub fn inline(bytes: impl Into<Bytes>) -> Value {
        Value::Inline(bytes.into())
    }

    /// Bytes the value takes in an encoded leaf (its kind byte included).
    pub fn encoded_len(&self) -> usize {
        match self {
            Value::Inline(bytes) => 1 + 2 + bytes.len(),
            Value::Overflow(_) => 1 + 8 + 8 + 4,
        }
    }
}

/// A leaf page: keys and their values, in strictly ascending key order.
///
/// Keys and inline values are `Bytes`: a decoded or packed page's are slices of one buffer
/// (`pack` copies them there, back to back), so a cached page is three allocations (the
/// buffer, its count, the entries), not two for every entry.
#[derive(Clone, Debug, Default)]
pub struct LeafPage {
    /// The entries, sorted by key with no duplicates. Code that changes them builds a new
    /// page (`LeafPage::new`, as the tree does) rather than changing a decoded or packed one
    /// in place, whose search heads would then be stale.
    pub entries: Vec<(Bytes, Value)>,
    /// The buffer every key and inline value is a slice of, while the entries are unchanged
    /// since it was decoded or packed.
    buffer: Option<Bytes>,
    /// The keys' search heads, built with the buffer and dropped with it.
    heads: KeyHeads,
}

impl PartialEq for LeafPage {
    /// The same entries (wherever their bytes are).
    fn eq(&self, other: &LeafPage) -> bool {
        self.entries == other.entries
    }
}

impl Eq for LeafPage {}

impl LeafPage {
    /// A leaf of `entries` (sorted, no duplicates).
    pub fn new(entries: Vec<(Bytes, Value)>) -> LeafPage {
        LeafPage { entries, buffer: None, heads: KeyHeads::default() }
    }

    /// A decoded or packed leaf: its buffer, and its keys' search heads.
    fn with_buffer(entries: Vec<(Bytes, Value)>, buffer: Bytes) -> LeafPage {
        let heads = KeyHeads::build(entries.iter().map(|(key, _)| key.as_ref()));
        LeafPage { entries, buffer: Some(buffer), heads }
    }

    /// A leaf whose entries are slices of `buffer`, without search heads (a page the
    /// writer reads from its frame to change it: heads would cost more than its few
    /// searches save).
    pub fn from_buffer(entries: Vec<(Bytes, Value)>, buffer: Bytes) -> LeafPage {
        LeafPage { entries, buffer: Some(buffer), heads: KeyHeads::default() }
    }

    /// Bytes of the search heads (0 when there are none).
    pub fn heads_bytes(&self) -> usize {
        self.heads.heap_bytes()
    }

    /// Bytes of the buffer the entries are slices of (0 when there is none).
    pub fn buffer_bytes(&self) -> usize {
        self.buffer.as_ref().map_or(0, Bytes::len)
    }

    /// Copies every key and inline value into one buffer and makes them slices of it; lets
    /// go of the entries' spare capacity, and of what they were slices of before (older
    /// pages, a batch).
    pub fn pack(&mut self) {
        if self.buffer.is_some() {
            return;
        }
        let total: usize = self
            .entries
            .iter()
            .map(|(key, value)| {
                key.len() + if let Value::Inline(bytes) = value { bytes.len() } else { 0 }
            })
            .sum();
        let mut buffer = Vec::with_capacity(total);
        for (key, value) in &self.entries {
            buffer.extend_from_slice(key);
            if let Value::Inline(bytes) = value {
                buffer.extend_from_slice(bytes);
            }
        }
        debug_assert_eq!(buffer.len(), total);
        let buffer = Bytes::from(buffer);
        let mut at = 0;
        let mut entries = std::mem::take(&mut self.entries);
        for (key, value) in &mut entries {
            *key = buffer.slice(at..at + key.len());
            at += key.len();
            if let Value::Inline(bytes) = value {
                *bytes = buffer.slice(at..at + bytes.len());
                at += bytes.len();
            }
        }
        entries.shrink_to_fit();
        *self = LeafPage::with_buffer(entries, buffer);
    }

    /// The index of `key`, or where it would be inserted.
    pub fn search(&self, key: &[u8]) -> Result<usize, usize> {
        let plain = |entries: &[(Bytes, Value)]| entries.binary_search_by(|(k, _)| k[..].cmp(key));
        if self.heads.len() != self.entries.len() || self.entries.is_empty() {
            return plain(&self.entries);
        }
        let found = match self.heads.narrow(key) {
            Narrow::Below => Err(0),
            Narrow::Above => Err(self.entries.len()),
            Narrow::Run(low, high) => match plain(&self.entries[low..high]) {
                Ok(at) => Ok(low + at),
                Err(at) => Err(low + at),
            },
        };
        debug_assert_eq!(found, plain(&self.entries), "search heads disagree");
        found
    }

    /// Bytes of the encoded page.
    pub fn encoded_len(&self) -> usize {
        HEADER_BYTES + self.entries.iter().map(|(key, value)| entry_len(key, value)).sum::<usize>()
    }

    /// Splits a leaf of two entries or more in two of about equal encoded size: this page
    /// keeps the lower half, and the upper half is returned with its separator, the shortest
    /// key above every key kept and at or below every key moved (see `shortest_separator`).
    #[cfg(test)]
    pub fn split(&mut self) -> (Vec<u8>, LeafPage) {
        self.split_at_bytes(self.encoded_len() / 2)
    }

    #[cfg(test)] // For the copy-on-write writer's tests.
    /// Splits a leaf of two entries or more in two: this page keeps the most lower entries
    /// that fit in `target` encoded bytes (at least one, and never all), and the rest is
    /// returned with its separator (as `split`).
    pub fn split_at_bytes(&mut self, target: usize) -> (Vec<u8>, LeafPage) {
        assert!(self.entries.len() >= 2, "invariant: a leaf splits only with two entries");
        let len = |(key, value): &(Bytes, Value)| entry_len(key, value);
        let mut size = HEADER_BYTES + len(&self.entries[0]);
        let mut at = 1;
        while at < self.entries.len() - 1 && size + len(&self.entries[at]) <= target {
            size += len(&self.entries[at]);
            at += 1;
        }
        let right = LeafPage::new(self.entries.split_off(at));
        self.buffer = None;
        self.heads = KeyHeads::default();
        let separator = shortest_separator(&self.entries[at - 1].0, &right.entries[0].0);
        (separator, right)
    }

    #[cfg(test)] // For the copy-on-write writer's tests.
    /// Appends `right`, the page after this one under the same parent (its keys are all
    /// above this page's).
    pub fn merge(&mut self, right: LeafPage) {
        debug_assert!(match (self.entries.last(), right.entries.first()) {
            (Some((last, _)), Some((first, _))) => last < first,
            _ => true,
        });
        self.entries.extend(right.entries);
        self.buffer = None;
        self.heads = KeyHeads::default();
    }
}

fn entry_len(key: &[u8], value: &Value) -> usize {
    slotted::SLOT_BYTES + key.len() + value.encoded_len()
}

/// The shortest key above `low` and at or below `high` (`low < high`): a prefix of `high`
/// one byte longer than the prefix the two share. Short separators keep internal pages wide.
pub fn shortest_separator(low: &[u8], high: &[u8]) -> Vec<u8> {
    debug_assert!(low < high);
    let common = low.iter().zip(high).take_while(|(a, b)| a == b).count();
    high[..(common + 1).min(high.len())].to_vec()
}

/// An internal page: `first_child`, then separators, each with the child that holds the keys
/// from it up to the next one.
#[derive(Clone, Debug, Default)]
pub struct InternalPage {
    /// The child holding the keys below the first separator.
    pub first_child: u64,
    /// Separator keys in strictly ascending order, each with its child. Code that changes a
    /// decoded page's separators in place goes through the methods below, which drop the
    /// search heads.
    pub entries: Vec<(Vec<u8>, u64)>,
    /// The separators' search heads, built when the page is decoded.
    heads: KeyHeads,
}

impl PartialEq for InternalPage {
    /// The same children and separators (with or without search heads).
    fn eq(&self, other: &InternalPage) -> bool {
        self.first_child == other.first_child && self.entries == other.entries
    }
}

impl Eq for InternalPage {}

impl InternalPage {
    /// A page of `first_child` and `entries` (separators strictly ascending).
    pub fn new(first_child: u64, entries: Vec<(Vec<u8>, u64)>) -> InternalPage {
        InternalPage { first_child, entries, heads: KeyHeads::default() }
    }

    /// Bytes of the search heads (0 when there are none).
    pub fn heads_bytes(&self) -> usize {
        self.heads.heap_bytes()
    }

    /// Builds the separators' search heads, for a page that will not change from now on
    /// (a change through the methods below drops them again).
    pub fn build_heads(&mut self) {
        self.heads = KeyHeads::build(self.entries.iter().map(|(key, _)| key.as_slice()));
    }

    /// The child whose key range holds `key`.
    #[cfg(test)]
    pub fn child_for(&self, key: &[u8]) -> u64 {
        self.child_at(self.child_index(key))
    }

    /// The index of the child whose key range holds `key`: 0 for `first_child`, `n` for
    /// the child of the `n`-th separator.
    pub fn child_index(&self, key: &[u8]) -> usize {
        let plain = |entries: &[(Vec<u8>, u64)]| {
            entries.partition_point(|(separator, _)| separator.as_slice() <= key)
        };
        if self.heads.len() != self.entries.len() || self.entries.is_empty() {
            return plain(&self.entries);
        }
        let index = match self.heads.narrow(key) {
            Narrow::Below => 0,
            Narrow::Above => self.entries.len(),
            Narrow::Run(low, high) => low + plain(&self.entries[low..high]),
        };
        debug_assert_eq!(index, plain(&self.entries), "search heads disagree");
        index
    }

    /// The child at `index` (as `child_index` numbers them).
    pub fn child_at(&self, index: usize) -> u64 {
        match index {
            0 => self.first_child,
            n => self.entries[n - 1].1,
        }
    }

    #[cfg(test)] // For the copy-on-write writer's tests.
    /// Points the child at `index` at page `id` (a new version of the child).
    pub fn set_child(&mut self, index: usize, id: u64) {
        match index {
            0 => self.first_child = id,
            n => self.entries[n - 1].1 = id,
        }
    }

    /// How many children the page has.
    pub fn children(&self) -> usize {
        self.entries.len() + 1
    }

    /// Bytes of the encoded page.
    pub fn encoded_len(&self) -> usize {
        HEADER_BYTES + self.entries.iter().map(|(key, _)| separator_len(key)).sum::<usize>()
    }

    /// Records that a child split: `child`, the new page after the split, holds the keys from
    /// `separator` on. The separator must not be here yet.
    #[cfg(test)]
    pub fn insert(&mut self, separator: Vec<u8>, child: u64) {
        let at = self.entries.partition_point(|(key, _)| key.as_slice() < separator.as_slice());
        debug_assert!(self.entries.get(at).is_none_or(|(key, _)| *key != separator));
        self.entries.insert(at, (separator, child));
        self.heads = KeyHeads::default();
    }

    /// Splits a page of three separators or more in two: this page keeps the lower part, the
    /// middle separator moves up to the parent (returned), and the upper part is returned
    /// with the middle separator's child as its first child.
    #[cfg(test)]
    pub fn split(&mut self) -> (Vec<u8>, InternalPage) {
        self.split_at_index(self.entries.len() / 2)
    }

    #[cfg(test)] // For the copy-on-write writer's tests.
    /// Splits a page of three separators or more in two: this page keeps the most lower
    /// separators that fit in `target` encoded bytes (at least one), the next separator
    /// moves up to the parent (returned), and the rest (at least one separator) is returned
    /// with that separator's child as its first child.
    pub fn split_at_bytes(&mut self, target: usize) -> (Vec<u8>, InternalPage) {
        assert!(self.entries.len() >= 3, "invariant: an internal page splits with three entries");
        let len = |(key, _): &(Vec<u8>, u64)| separator_len(key);
        let mut size = HEADER_BYTES + len(&self.entries[0]);
        let mut middle = 1;
        while middle < self.entries.len() - 2 && size + len(&self.entries[middle]) <= target {
            size += len(&self.entries[middle]);
            middle += 1;
        }
        self.split_at_index(middle)
    }

    #[cfg(test)]
    /// Splits at separator `middle` (in `1..len - 1`), which moves up.
    fn split_at_index(&mut self, middle: usize) -> (Vec<u8>, InternalPage) {
        assert!(
            (1..self.entries.len().saturating_sub(1)).contains(&middle),
            "invariant: an internal page splits with a separator on each side"
        );
        let mut upper = self.entries.split_off(middle);
        self.heads = KeyHeads::default();
        let (separator, first_child) = upper.remove(0);
        (separator, InternalPage::new(first_child, upper))
    }

    #[cfg(test)] // For the copy-on-write writer's tests.
    /// Appends `right`, the page after this one under the same parent, whose separator there
    /// was `separator`: it comes down between the two.
    pub fn merge(&mut self, separator: Vec<u8>, right: InternalPage) {
        self.entries.push((separator, right.first_child));
        self.entries.extend(right.entries);
        self.heads = KeyHeads::default();
    }
}

/// A decoded page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Page {
    /// Keys and values.
    Leaf(LeafPage),
    /// Separators and children.
    Internal(InternalPage),
}

impl Page {
    /// Bytes of the encoded page, without its common prefix (an upper bound).
    #[cfg(test)]
    pub fn encoded_len(&self) -> usize {
        match self {
            Page::Leaf(leaf) => leaf.encoded_len(),
            Page::Internal(internal) => internal.encoded_len(),
        }
    }
}

/// Bytes a separator takes in an internal page: its slot, its key, its child.
fn separator_len(key: &[u8]) -> usize {
    slotted::SLOT_BYTES + key.len() + 8
}

/// Encodes `page` as a slotted page of `page_bytes`. Panics if the page breaks an
/// invariant that `decode` checks (keys out of order or over the limit, an inline value over
/// a quarter page, an overflow of no blocks, more than fits once laid out with its common
/// prefix): the caller builds pages, so such a page is a bug, and writing it would lose data
/// later. What fits is what the slotted layout takes, which `slotted::encode_leaf` and
/// `encode_internal` check (`leaf_bytes`, `internal_bytes`), not `encoded_len`, which leaves
/// the prefix uncounted: a page that `decode` accepted, laid out with its prefix, may be over
/// that bound and still fit.
pub fn encode(page: &Page, page_bytes: usize) -> Vec<u8> {
    match page {
        Page::Leaf(leaf) => {
            let ascending = leaf.entries.windows(2).all(|pair| pair[0].0 < pair[1].0);
            assert!(ascending, "leaf keys out of order");
            for (key, value) in &leaf.entries {
                assert!(key.len() <= MAX_KEY_BYTES, "key of {} bytes over the limit", key.len());
                match value {
                    Value::Inline(bytes) => {
                        assert!(bytes.len() <= page_bytes / 4, "inline value too large");
                    }
                    Value::Overflow(overflow) => {
                        assert!(overflow_valid(overflow), "invalid overflow reference");
                    }
                }
            }
            slotted::encode_leaf(&leaf.entries, 0, 0, page_bytes)
        }
        Page::Internal(internal) => {
            let ascending = internal.entries.windows(2).all(|pair| pair[0].0 < pair[1].0);
            assert!(ascending, "separators out of order");
            slotted::encode_internal(internal.first_child, &internal.entries, 0, page_bytes)
        }
    }
}

fn overflow_valid(overflow: &OverflowRef) -> bool {
    overflow.blocks >= 1
        && overflow.len <= MAX_VALUE_BYTES
        && u64::from(overflow.blocks) <= overflow.len.max(1)
        && overflow.first != 0
}

/// Decodes a page, checking it whole (`slotted::check`, with the page's own length as the
/// page size); a leaf's keys and values are copied into one buffer.
pub fn decode(bytes: &[u8]) -> Result<Page, PageError> {
    let page_bytes = bytes.len();
    let valid_size = page_bytes.is_power_of_two()
        && (slotted::MIN_PAGE_BYTES..=slotted::MAX_PAGE_BYTES).contains(&page_bytes);
    if !valid_size {
        return Err(PageError {
            offset: 0,
            detail: format!(
                "a page of {page_bytes} bytes (pages are a power of two from {} to {})",
                slotted::MIN_PAGE_BYTES,
                slotted::MAX_PAGE_BYTES
            ),
        });
    }
    let unreadable = || PageError { offset: 0, detail: "a checked page did not decode".into() };
    match slotted::check(bytes, page_bytes)? {
        slotted::Kind::Leaf => {
            let entries = slotted::decode_leaf(bytes).ok_or_else(unreadable)?;
            let mut leaf = LeafPage::new(entries);
            leaf.pack();
            Ok(Page::Leaf(leaf))
        }
        slotted::Kind::Internal => {
            let (first_child, entries) = slotted::decode_internal(bytes).ok_or_else(unreadable)?;
            let mut page = InternalPage::new(first_child, entries);
            page.build_heads();
            Ok(Page::Internal(page))
        }
    }
}

#[cfg(test)]
mod tests;
