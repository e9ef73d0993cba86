//! B+tree pages as they are stored: one page is one block of the block store, which adds the
//! block header, the checksum and compression. This module only turns a decoded page into
//! bytes and back; the format is in `docs/format.md` ("B+tree pages").
//!
//! Layout (integers little-endian):
//! - header, 8 bytes: kind (`1` leaf, `2` internal), format version (`1`), two zero bytes,
//!   entry count (u32);
//! - a leaf's entries, in strictly ascending key order: key length (u32), key, value kind
//!   (`0` inline, `1` overflow), then for an inline value its length (u32) and bytes, for an
//!   overflow value its length (u64), first block (u64) and block count (u32);
//! - an internal page's first child (u64), then its entries, in strictly ascending key order:
//!   key length (u32), separator key, child (u64). The child after a separator holds the
//!   keys at or above it, up to the next separator.
//!
//! Decoding checks everything a damaged or foreign page could get wrong: the kind and
//! version, each length against the bytes left, key and value limits, key order, and that
//! the entries end exactly where the page does. It never panics, and allocates in
//! proportion to the page's size whatever its entry count says.
//!
//! Must never: decode a page whose keys are out of order, or read past its end.

use std::cmp::Ordering;

use bytes::Bytes;

mod heads;
pub mod slotted;

use heads::{KeyHeads, Narrow};

/// The largest key, in bytes.
pub const MAX_KEY_BYTES: usize = 4096;

/// The largest value stored in a leaf itself; larger values go to overflow blocks.
pub const MAX_INLINE_VALUE_BYTES: usize = 1 << 20;

/// The largest value, inline or in overflow blocks.
pub const MAX_VALUE_BYTES: u64 = 1 << 32;

/// Bytes of the page header.
pub const HEADER_BYTES: usize = 8;

/// The page format version this code writes and reads.
pub const PAGE_FORMAT_VERSION: u8 = 1;

const KIND_LEAF: u8 = 1;
const KIND_INTERNAL: u8 = 2;
const VALUE_INLINE: u8 = 0;
const VALUE_OVERFLOW: u8 = 1;

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
            Value::Inline(bytes) => 1 + 4 + bytes.len(),
            Value::Overflow(_) => 1 + 8 + 8 + 4,
        }
    }
}

/// A leaf page: keys and their values, in strictly ascending key order.
///
/// Keys and inline values are `Bytes`: a decoded page's are slices of the block it was read
/// from, its encoded image, and `pack` encodes a page built in memory and slices its entries
/// out of that image. A cached page is then three allocations (its image, the image's
/// count, its entries), not two for every entry, and writing it back copies nothing
/// (`encoded`).
#[derive(Clone, Debug, Default)]
pub struct LeafPage {
    /// The entries, sorted by key with no duplicates. Code that changes them builds a new
    /// page (`LeafPage::new`, as the tree does) rather than changing a decoded or packed one
    /// in place, whose image would then be stale.
    pub entries: Vec<(Bytes, Value)>,
    /// The encoded page every key and inline value is a slice of, while the entries are
    /// unchanged since it was decoded or packed.
    image: Option<Bytes>,
    /// The keys' search heads, built with the image and dropped with it.
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
        LeafPage { entries, image: None, heads: KeyHeads::default() }
    }

    /// A decoded or packed leaf: its image, and its keys' search heads.
    fn with_image(entries: Vec<(Bytes, Value)>, image: Bytes) -> LeafPage {
        let heads = KeyHeads::build(entries.iter().map(|(key, _)| key.as_ref()));
        LeafPage { entries, image: Some(image), heads }
    }

    /// Bytes of the search heads (0 when there are none).
    pub fn heads_bytes(&self) -> usize {
        self.heads.heap_bytes()
    }

    /// Bytes of the encoded image the entries are slices of (0 when there is none).
    pub fn buffer_bytes(&self) -> usize {
        self.image.as_ref().map_or(0, Bytes::len)
    }

    /// Encodes the page and makes every key and inline value a slice of that image; lets go
    /// of the entries' spare capacity, and of what they were slices of before (older pages,
    /// a batch).
    pub fn pack(&mut self) {
        if self.image.is_some() {
            return;
        }
        let page = Page::Leaf(LeafPage::new(std::mem::take(&mut self.entries)));
        let mut starts = Vec::new();
        let image = Bytes::from(encode_with(&page, &mut |at| starts.push(at)));
        // The page built just above.
        let Page::Leaf(mut leaf) = page else { return };
        // An entry is its key's length (4 bytes), the key, the value's kind (1) and, inline,
        // its length (4) and bytes.
        for ((key, value), start) in leaf.entries.iter_mut().zip(starts) {
            let key_at = start + 4;
            *key = image.slice(key_at..key_at + key.len());
            if let Value::Inline(bytes) = value {
                let value_at = key_at + key.len() + 1 + 4;
                *bytes = image.slice(value_at..value_at + bytes.len());
            }
        }
        leaf.entries.shrink_to_fit();
        *self = LeafPage::with_image(leaf.entries, image);
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
        self.image = None;
        self.heads = KeyHeads::default();
        let separator = shortest_separator(&self.entries[at - 1].0, &right.entries[0].0);
        (separator, right)
    }

    /// Appends `right`, the page after this one under the same parent (its keys are all
    /// above this page's).
    pub fn merge(&mut self, right: LeafPage) {
        debug_assert!(match (self.entries.last(), right.entries.first()) {
            (Some((last, _)), Some((first, _))) => last < first,
            _ => true,
        });
        self.entries.extend(right.entries);
        self.image = None;
        self.heads = KeyHeads::default();
    }
}

fn entry_len(key: &[u8], value: &Value) -> usize {
    4 + key.len() + value.encoded_len()
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
        HEADER_BYTES + 8 + self.entries.iter().map(|(key, _)| 4 + key.len() + 8).sum::<usize>()
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

    /// Splits a page of three separators or more in two: this page keeps the most lower
    /// separators that fit in `target` encoded bytes (at least one), the next separator
    /// moves up to the parent (returned), and the rest (at least one separator) is returned
    /// with that separator's child as its first child.
    pub fn split_at_bytes(&mut self, target: usize) -> (Vec<u8>, InternalPage) {
        assert!(self.entries.len() >= 3, "invariant: an internal page splits with three entries");
        let len = |(key, _): &(Vec<u8>, u64)| 4 + key.len() + 8;
        let mut size = HEADER_BYTES + 8 + len(&self.entries[0]);
        let mut middle = 1;
        while middle < self.entries.len() - 2 && size + len(&self.entries[middle]) <= target {
            size += len(&self.entries[middle]);
            middle += 1;
        }
        self.split_at_index(middle)
    }

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
    /// Bytes of the encoded page.
    pub fn encoded_len(&self) -> usize {
        match self {
            Page::Leaf(leaf) => leaf.encoded_len(),
            Page::Internal(internal) => internal.encoded_len(),
        }
    }
}

/// Encodes `page`. Panics if the page breaks an invariant that `decode` checks (keys out of
/// order or over the limit, an inline value over the limit, an overflow of no blocks): the
/// caller builds pages, so such a page is a bug, and writing it would lose data later.
pub fn encode(page: &Page) -> Vec<u8> {
    encode_with(page, &mut |_| {})
}

/// `encode`, telling `entry_at` the offset at which each leaf entry starts.
fn encode_with(page: &Page, entry_at: &mut impl FnMut(usize)) -> Vec<u8> {
    let mut out = Vec::with_capacity(page.encoded_len());
    let (kind, count) = match page {
        Page::Leaf(leaf) => (KIND_LEAF, leaf.entries.len()),
        Page::Internal(internal) => (KIND_INTERNAL, internal.entries.len()),
    };
    let count = u32::try_from(count).expect("invariant: fewer than 2^32 entries in a page");
    out.extend_from_slice(&[kind, PAGE_FORMAT_VERSION, 0, 0]);
    out.extend_from_slice(&count.to_le_bytes());
    match page {
        Page::Leaf(leaf) => {
            let keys = leaf.entries.iter().map(|(k, _)| k.as_ref());
            assert!(keys_ascend(keys), "leaf keys out of order");
            for (key, value) in &leaf.entries {
                entry_at(out.len());
                put_key(&mut out, key);
                match value {
                    Value::Inline(bytes) => {
                        assert!(bytes.len() <= MAX_INLINE_VALUE_BYTES, "inline value too large");
                        out.push(VALUE_INLINE);
                        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                        out.extend_from_slice(bytes);
                    }
                    Value::Overflow(overflow) => {
                        assert!(overflow_valid(overflow), "invalid overflow reference");
                        out.push(VALUE_OVERFLOW);
                        out.extend_from_slice(&overflow.len.to_le_bytes());
                        out.extend_from_slice(&overflow.first.to_le_bytes());
                        out.extend_from_slice(&overflow.blocks.to_le_bytes());
                    }
                }
            }
        }
        Page::Internal(internal) => {
            assert!(
                keys_ascend(internal.entries.iter().map(|(k, _)| k.as_slice())),
                "separators out of order"
            );
            out.extend_from_slice(&internal.first_child.to_le_bytes());
            for (key, child) in &internal.entries {
                put_key(&mut out, key);
                out.extend_from_slice(&child.to_le_bytes());
            }
        }
    }
    debug_assert_eq!(out.len(), page.encoded_len());
    out
}

fn put_key(out: &mut Vec<u8>, key: &[u8]) {
    assert!(key.len() <= MAX_KEY_BYTES, "key of {} bytes over the limit", key.len());
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
}

fn keys_ascend<'a>(mut keys: impl Iterator<Item = &'a [u8]>) -> bool {
    let Some(mut previous) = keys.next() else { return true };
    for key in keys {
        if previous.cmp(key) != Ordering::Less {
            return false;
        }
        previous = key;
    }
    true
}

fn overflow_valid(overflow: &OverflowRef) -> bool {
    overflow.blocks >= 1
        && overflow.len <= MAX_VALUE_BYTES
        && u64::from(overflow.blocks) <= overflow.len.max(1)
}

/// Reads a page's bytes, checking each step against what is left.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn fail<T>(&self, detail: impl Into<String>) -> Result<T, PageError> {
        Err(PageError { offset: self.at, detail: detail.into() })
    }

    fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], PageError> {
        let left = self.bytes.len() - self.at;
        if len > left {
            return self.fail(format!("{what} of {len} bytes, but only {left} left"));
        }
        let taken = &self.bytes[self.at..self.at + len];
        self.at += len;
        Ok(taken)
    }

    fn u8(&mut self, what: &str) -> Result<u8, PageError> {
        Ok(self.take(1, what)?[0])
    }

    fn u32(&mut self, what: &str) -> Result<u32, PageError> {
        let bytes = self.take(4, what)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, PageError> {
        let bytes = self.take(8, what)?;
        let mut word = [0u8; 8];
        word.copy_from_slice(bytes);
        Ok(u64::from_le_bytes(word))
    }

    /// A key, checked to be above `previous`; returns where it lies.
    fn key(&mut self, previous: Option<&[u8]>) -> Result<std::ops::Range<usize>, PageError> {
        let start = self.at;
        let len = self.u32("key length")? as usize;
        if len > MAX_KEY_BYTES {
            return self.fail(format!("key of {len} bytes, over the limit of {MAX_KEY_BYTES}"));
        }
        let key = self.take(len, "key")?;
        if previous.is_some_and(|previous| previous >= key) {
            return Err(PageError { offset: start, detail: "keys out of order".into() });
        }
        Ok(self.at - len..self.at)
    }
}

/// Decodes a page, checking it whole (see the module header); its keys and values are
/// copied into one buffer.
pub fn decode(bytes: &[u8]) -> Result<Page, PageError> {
    decode_bytes(Bytes::copy_from_slice(bytes))
}

/// Decodes a page as `decode` does; a leaf's keys and inline values are slices of `block`,
/// which the page keeps.
pub fn decode_bytes(block: Bytes) -> Result<Page, PageError> {
    let bytes: &[u8] = &block;
    let mut reader = Reader { bytes, at: 0 };
    let header = reader.take(HEADER_BYTES, "page header")?;
    let (kind, version) = (header[0], header[1]);
    if version != PAGE_FORMAT_VERSION {
        return Err(PageError {
            offset: 1,
            detail: format!("unknown page format version {version}"),
        });
    }
    if header[2..4] != [0, 0] {
        return Err(PageError { offset: 2, detail: "reserved header bytes are not zero".into() });
    }
    let count = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
    // Each entry takes at least 4 + 1 + 4 bytes (leaf) or 4 + 8 (internal): a count the
    // bytes cannot hold is damage, and checking it first bounds the allocation below.
    let least = if kind == KIND_LEAF { 9 } else { 12 };
    if count > bytes.len() / least {
        return Err(PageError { offset: 4, detail: format!("{count} entries cannot fit") });
    }
    let page = match kind {
        KIND_LEAF => {
            let mut entries: Vec<(Bytes, Value)> = Vec::with_capacity(count);
            for _ in 0..count {
                let key = block.slice(reader.key(entries.last().map(|(k, _)| k.as_ref()))?);
                let value = match reader.u8("value kind")? {
                    VALUE_INLINE => {
                        let len = reader.u32("value length")? as usize;
                        if len > MAX_INLINE_VALUE_BYTES {
                            return reader.fail(format!("inline value of {len} bytes"));
                        }
                        reader.take(len, "value")?;
                        Value::Inline(block.slice(reader.at - len..reader.at))
                    }
                    VALUE_OVERFLOW => {
                        let overflow = OverflowRef {
                            len: reader.u64("overflow length")?,
                            first: reader.u64("overflow block")?,
                            blocks: reader.u32("overflow block count")?,
                        };
                        if !overflow_valid(&overflow) {
                            return reader.fail(format!("invalid overflow reference {overflow:?}"));
                        }
                        Value::Overflow(overflow)
                    }
                    other => return reader.fail(format!("unknown value kind {other}")),
                };
                entries.push((key, value));
            }
            Page::Leaf(LeafPage::new(entries))
        }
        KIND_INTERNAL => {
            let first_child = reader.u64("first child")?;
            let mut entries: Vec<(Vec<u8>, u64)> = Vec::with_capacity(count);
            for _ in 0..count {
                let key = reader.key(entries.last().map(|(k, _)| k.as_slice()))?;
                entries.push((bytes[key].to_vec(), reader.u64("child")?));
            }
            let mut page = InternalPage::new(first_child, entries);
            page.build_heads();
            Page::Internal(page)
        }
        other => return Err(PageError { offset: 0, detail: format!("unknown page kind {other}") }),
    };
    if reader.at != bytes.len() {
        return reader.fail(format!("{} bytes after the last entry", bytes.len() - reader.at));
    }
    Ok(match page {
        Page::Leaf(leaf) => Page::Leaf(LeafPage::with_image(leaf.entries, block)),
        internal => internal,
    })
}

/// A leaf's encoded image, when it has one (decoded or packed, unchanged since): the bytes
/// its block holds, without a copy.
pub fn leaf_image(page: &Page) -> Option<Bytes> {
    match page {
        Page::Leaf(LeafPage { image: Some(image), .. }) => Some(image.clone()),
        _ => None,
    }
}

/// The encoded page: a leaf's image when it has one (no copy), else `encode`'s bytes.
pub fn encoded(page: &Page) -> Bytes {
    match page {
        Page::Leaf(leaf @ LeafPage { image: Some(image), .. }) => {
            debug_assert_eq!(image.len(), leaf.encoded_len(), "a packed leaf changed in place");
            image.clone()
        }
        page => Bytes::from(encode(page)),
    }
}

#[cfg(test)]
mod tests;
