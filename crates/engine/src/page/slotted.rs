//! Slotted pages: the B+tree page layout that is its own disk image (format 2). A block read
//! lands in a frame as these bytes; readers search them where they lie, through
//! [`PageBytes`] (a plain slice, or a frame read optimistically), with no decode and no
//! allocation. The layout is in `docs/format.md` ("B+tree pages, format 2").
//!
//! ```text
//! 0        32             32+prefix        slots end   heap start           page end
//! | header | common prefix | slot 0 .. slot n-1 | free   | entries (any order)   |
//! ```
//!
//! - Header (32 bytes): kind (`1` leaf, `2` internal), format version (`2`), entry count
//!   (u16), prefix length (u16), heap bytes (u16: the heap runs from the page's end less
//!   this to its end, so a 64 KiB page fits the field), the page's LSN (u64: the sequence the
//!   checkpoint that wrote it covers), its link (u64: an internal page's first child; a
//!   leaf's next leaf, 0 for none), the page size (u32), 4 reserved bytes.
//! - The prefix every key of the page starts with, once.
//! - The slot array, in strictly ascending key order, 8 bytes a slot: the key's *head* (the
//!   first 4 bytes after the prefix, big-endian, zero-padded, as a u32), the entry's offset
//!   (u16) and the key's length after the prefix (u16). Heads order like keys (ties allowed;
//!   see `page/heads.rs`), so a binary search compares a whole key only on a tie.
//! - Entries, between the heap start and the page's end (laid out in key order up to the
//!   page's end; a change in place puts its entry at the heap's start): the key's bytes
//!   after the prefix, then in a leaf the value (kind `0` inline: length u16, bytes; kind
//!   `1` overflow: length u64, first block u64, block count u32), in an internal page the
//!   child (u64). The child of slot `i` holds the keys from its key up to the next slot's.
//!
//! Pages are 512 bytes to 64 KiB, a power of two (offsets and lengths fit 16 bits). [`check`] validates a page
//! completely (every field, every entry inside the heap, keys strictly ascending, heads
//! matching keys); the reader ([`Slotted`]) trusts nothing either: every access is checked
//! and a bad one answers `None`, because an optimistic reader may see a page mid-change.
//!
//! Must never: read outside the page, or return an entry of a page that `check` refused.

use std::cmp::Ordering;

use bytes::Bytes;
use tierkv_io::frames::FrameRead;

use super::{OverflowRef, PageError, Value, MAX_KEY_BYTES};

pub mod edit;

/// The format version of slotted pages.
pub const FORMAT_VERSION: u8 = 2;
/// Bytes of the header.
pub const HEADER_BYTES: usize = 32;
/// Bytes of one slot.
pub const SLOT_BYTES: usize = 8;
/// The smallest page (stores take 1 KiB and up; smaller ones are for tests).
pub const MIN_PAGE_BYTES: usize = 512;
/// The largest page.
pub const MAX_PAGE_BYTES: usize = 64 << 10;
/// The largest slot array a search prefetches whole (16 cache lines).
const MAX_PREFETCH_SLOT_BYTES: usize = 1024;
/// The most bytes of an entry `Slotted::prefetch_entry` asks for (64 cache lines).
const MAX_PREFETCH_ENTRY_BYTES: usize = 4096;

const KIND_LEAF: u8 = 1;
const KIND_INTERNAL: u8 = 2;
const VALUE_INLINE: u8 = 0;
const VALUE_OVERFLOW: u8 = 1;
const INLINE_HEADER_BYTES: usize = 1 + 2;
const OVERFLOW_BYTES: usize = 1 + 8 + 8 + 4;
const CHILD_BYTES: usize = 8;

/// An internal page's separators, each with the child at or above it.
pub type Separators = Vec<(Vec<u8>, u64)>;

/// A page's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Keys and values.
    Leaf,
    /// Separators and children.
    Internal,
}

/// Bytes a page is read from: a slice, or a frame. Every read is checked; `None` is an
/// access outside the page.
pub trait PageBytes {
    /// The byte at `at`.
    fn byte(&self, at: usize) -> Option<u8>;
    /// The little-endian u16 at `at`.
    fn le_u16(&self, at: usize) -> Option<u16>;
    /// The little-endian u32 at `at`.
    fn le_u32(&self, at: usize) -> Option<u32>;
    /// The little-endian u64 at `at`.
    fn le_u64(&self, at: usize) -> Option<u64>;
    /// `len` bytes at `at` compared with `key`.
    fn compare_at(&self, at: usize, len: usize, key: &[u8]) -> Option<Ordering>;
    /// Copies `out.len()` bytes from `at`.
    fn copy_out(&self, at: usize, out: &mut [u8]) -> Option<()>;
    /// Appends the `len` bytes at `at` to `out`.
    fn append_out(&self, at: usize, len: usize, out: &mut Vec<u8>) -> Option<()> {
        let start = out.len();
        out.resize(start + len, 0);
        self.copy_out(at, &mut out[start..])
    }
    /// Hints that bytes `from..to` are about to be read (nothing for a slice in memory).
    fn prefetch(&self, _from: usize, _to: usize) {}
}

impl PageBytes for [u8] {
    fn byte(&self, at: usize) -> Option<u8> {
        self.get(at).copied()
    }
    fn le_u16(&self, at: usize) -> Option<u16> {
        Some(u16::from_le_bytes(self.get(at..at.checked_add(2)?)?.try_into().ok()?))
    }
    fn le_u32(&self, at: usize) -> Option<u32> {
        Some(u32::from_le_bytes(self.get(at..at.checked_add(4)?)?.try_into().ok()?))
    }
    fn le_u64(&self, at: usize) -> Option<u64> {
        Some(u64::from_le_bytes(self.get(at..at.checked_add(8)?)?.try_into().ok()?))
    }
    fn compare_at(&self, at: usize, len: usize, key: &[u8]) -> Option<Ordering> {
        Some(self.get(at..at.checked_add(len)?)?.cmp(key))
    }
    fn copy_out(&self, at: usize, out: &mut [u8]) -> Option<()> {
        out.copy_from_slice(self.get(at..at.checked_add(out.len())?)?);
        Some(())
    }
    fn append_out(&self, at: usize, len: usize, out: &mut Vec<u8>) -> Option<()> {
        out.extend_from_slice(self.get(at..at.checked_add(len)?)?);
        Some(())
    }
}

impl PageBytes for FrameRead<'_> {
    #[inline]
    fn byte(&self, at: usize) -> Option<u8> {
        self.u8(at)
    }
    #[inline]
    fn le_u16(&self, at: usize) -> Option<u16> {
        self.u16(at)
    }
    #[inline]
    fn le_u32(&self, at: usize) -> Option<u32> {
        self.u32(at)
    }
    #[inline]
    fn le_u64(&self, at: usize) -> Option<u64> {
        self.u64(at)
    }
    #[inline]
    fn compare_at(&self, at: usize, len: usize, key: &[u8]) -> Option<Ordering> {
        self.compare(at, len, key)
    }
    #[inline]
    fn copy_out(&self, at: usize, out: &mut [u8]) -> Option<()> {
        self.copy_to(at, out)
    }
    #[inline]
    fn append_out(&self, at: usize, len: usize, out: &mut Vec<u8>) -> Option<()> {
        self.append_to(at, len, out)
    }
    #[inline]
    fn prefetch(&self, from: usize, to: usize) {
        FrameRead::prefetch(self, from, to);
    }
}

/// The search head of a key's bytes after the prefix: its first four, big-endian,
/// zero-padded.
pub fn head(suffix: &[u8]) -> u32 {
    let mut bytes = [0u8; 4];
    let n = suffix.len().min(4);
    bytes[..n].copy_from_slice(&suffix[..n]);
    u32::from_be_bytes(bytes)
}

/// Where a leaf's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueAt {
    /// `len` bytes at `offset` of the page.
    Inline {
        /// Where the bytes start.
        offset: usize,
        /// How many.
        len: usize,
    },
    /// In overflow blocks.
    Overflow(OverflowRef),
}

/// A page read in place.
#[derive(Clone, Copy, Debug)]
pub struct Slotted<'b, B: PageBytes + ?Sized> {
    bytes: &'b B,
}

impl<'b, B: PageBytes + ?Sized> Slotted<'b, B> {
    /// A reader of `bytes`; nothing is checked until something is read.
    pub fn new(bytes: &'b B) -> Self {
        Slotted { bytes }
    }

    /// The bytes it reads.
    pub fn bytes(&self) -> &'b B {
        self.bytes
    }

    /// The page's kind, `None` for neither.
    pub fn kind(&self) -> Option<Kind> {
        match self.bytes.byte(0)? {
            KIND_LEAF => Some(Kind::Leaf),
            KIND_INTERNAL => Some(Kind::Internal),
            _ => None,
        }
    }

    /// The number of entries (slots).
    pub fn count(&self) -> Option<usize> {
        self.bytes.le_u16(2).map(usize::from)
    }

    fn prefix_len(&self) -> Option<usize> {
        self.bytes.le_u16(4).map(usize::from)
    }

    /// The page's LSN.
    pub fn lsn(&self) -> Option<u64> {
        self.bytes.le_u64(8)
    }

    /// An internal page's first child, or a leaf's next leaf (0: none).
    pub fn link(&self) -> Option<u64> {
        self.bytes.le_u64(16)
    }

    fn slot_at(&self, index: usize) -> Option<usize> {
        Some(HEADER_BYTES + self.prefix_len()? + index.checked_mul(SLOT_BYTES)?)
    }

    /// Slot `index`'s head, entry offset and suffix length; `None` past the page's count
    /// (the free space there is not a slot: a reader whose index came from an older version
    /// of the page, such as a cursor's parent before a split, must not read it as one).
    fn slot(&self, index: usize) -> Option<(u32, usize, usize)> {
        if index >= self.count()? {
            return None;
        }
        self.slot_from(self.slot_at(0)?, index)
    }

    /// Slot `index`'s head, entry offset and suffix length, the slots starting at `slots`.
    #[inline]
    fn slot_from(&self, slots: usize, index: usize) -> Option<(u32, usize, usize)> {
        let at = slots.checked_add(index.checked_mul(SLOT_BYTES)?)?;
        // The whole slot in one read: head (4 bytes), offset and length (2 each).
        let slot = self.bytes.le_u64(at)?;
        Some((slot as u32, usize::from((slot >> 32) as u16), usize::from((slot >> 48) as u16)))
    }

    /// The index of `key`, or where it would go (`Err`), as a binary search would say.
    pub fn search(&self, key: &[u8]) -> Option<Result<usize, usize>> {
        let count = self.count()?;
        let prefix_len = self.prefix_len()?;
        let shared = prefix_len.min(key.len());
        match self.bytes.compare_at(HEADER_BYTES, shared, &key[..shared])? {
            Ordering::Less => return Some(Err(count)),
            Ordering::Greater => return Some(Err(0)),
            Ordering::Equal if key.len() < prefix_len => return Some(Err(0)),
            Ordering::Equal => {}
        }
        let suffix = &key[prefix_len..];
        let wanted = head(suffix);
        let slots = HEADER_BYTES + prefix_len;
        self.prefetch_search(slots, count);
        let (mut low, mut high) = (0, count);
        // A binary search: at most log2(count) + 1 steps, whatever the bytes say.
        while low < high {
            let middle = low + (high - low) / 2;
            let (slot_head, offset, len) = self.slot_from(slots, middle)?;
            let order = match slot_head.cmp(&wanted) {
                Ordering::Equal => self.bytes.compare_at(offset, len, suffix)?,
                other => other,
            };
            match order {
                Ordering::Less => low = middle + 1,
                Ordering::Greater => high = middle,
                Ordering::Equal => return Some(Ok(middle)),
            }
        }
        Some(Err(low))
    }

    /// Hints that the slots a binary search over `count` slots at `slots` reads are about to
    /// be read, so that its misses overlap rather than follow one another: the whole slot
    /// array when it is small, else the slots of its first three steps.
    #[inline]
    fn prefetch_search(&self, slots: usize, count: usize) {
        let bytes = count.saturating_mul(SLOT_BYTES);
        if bytes <= MAX_PREFETCH_SLOT_BYTES {
            self.bytes.prefetch(slots, slots + bytes);
            return;
        }
        for eighth in 1..8 {
            let at = slots + count * eighth / 8 * SLOT_BYTES;
            self.bytes.prefetch(at, at + SLOT_BYTES);
        }
    }

    /// Whether entry `index`'s whole key is `key` (`None` past the count), compared in
    /// place: the page's prefix, then the entry's suffix.
    pub fn key_is(&self, index: usize, key: &[u8]) -> Option<bool> {
        let prefix_len = self.prefix_len()?;
        let (_, offset, len) = self.slot(index)?;
        if key.len() != prefix_len + len {
            return Some(false);
        }
        let (prefix, suffix) = key.split_at(prefix_len);
        Some(
            self.bytes.compare_at(HEADER_BYTES, prefix_len, prefix)? == Ordering::Equal
                && self.bytes.compare_at(offset, len, suffix)? == Ordering::Equal,
        )
    }

    /// Appends entry `index`'s whole key to `out`.
    pub fn key_into(&self, index: usize, out: &mut Vec<u8>) -> Option<()> {
        let prefix_len = self.prefix_len()?;
        let (_, offset, len) = self.slot(index)?;
        out.reserve(prefix_len + len);
        self.bytes.append_out(HEADER_BYTES, prefix_len, out)?;
        self.bytes.append_out(offset, len, out)
    }

    /// Appends leaf entry `index`'s whole key to `out`, and says where its value is: one
    /// read of the slot for both (`key_into` and then `value` read it twice).
    pub fn entry_into(&self, index: usize, out: &mut Vec<u8>) -> Option<ValueAt> {
        let prefix_len = self.prefix_len()?;
        let (_, offset, len) = self.slot(index)?;
        out.reserve(prefix_len + len);
        self.bytes.append_out(HEADER_BYTES, prefix_len, out)?;
        self.bytes.append_out(offset, len, out)?;
        self.value_after(offset.checked_add(len)?)
    }

    /// The mean bytes of the page's entries: its heap's bytes (dead ones too) over its
    /// count; `None` for a page of none.
    pub fn mean_entry_bytes(&self) -> Option<usize> {
        let heap = usize::from(self.bytes.le_u16(6)?);
        heap.checked_div(self.count()?)
    }

    /// Hints the first `len` bytes of entry `index` (at most `MAX_PREFETCH_ENTRY_BYTES`),
    /// so that they come in while the entry before is copied; nothing past the count.
    #[inline]
    pub fn prefetch_entry(&self, index: usize, len: usize) {
        if let Some((_, offset, _)) = self.slot(index) {
            self.bytes.prefetch(offset, offset.saturating_add(len.min(MAX_PREFETCH_ENTRY_BYTES)));
        }
    }

    /// A leaf entry's value.
    pub fn value(&self, index: usize) -> Option<ValueAt> {
        let (_, offset, len) = self.slot(index)?;
        self.value_after(offset.checked_add(len)?)
    }

    /// The value whose header is at `at` (right after its entry's key suffix).
    fn value_after(&self, at: usize) -> Option<ValueAt> {
        match self.bytes.byte(at)? {
            VALUE_INLINE => Some(ValueAt::Inline {
                offset: at + INLINE_HEADER_BYTES,
                len: usize::from(self.bytes.le_u16(at + 1)?),
            }),
            VALUE_OVERFLOW => Some(ValueAt::Overflow(OverflowRef {
                len: self.bytes.le_u64(at + 1)?,
                first: self.bytes.le_u64(at + 9)?,
                blocks: self.bytes.le_u32(at + 17)?,
            })),
            _ => None,
        }
    }

    /// Copies an inline value out (appending to `out`).
    pub fn inline_into(&self, offset: usize, len: usize, out: &mut Vec<u8>) -> Option<()> {
        self.bytes.append_out(offset, len, out)
    }

    /// An internal page's child `index` (0: the first child; `i`: slot `i - 1`'s).
    pub fn child(&self, index: usize) -> Option<u64> {
        if index == 0 {
            return self.link();
        }
        let (_, offset, len) = self.slot(index - 1)?;
        self.bytes.le_u64(offset.checked_add(len)?)
    }

    /// The index of the child of an internal page that holds `key`.
    pub fn child_index(&self, key: &[u8]) -> Option<usize> {
        Some(match self.search(key)? {
            Ok(at) => at + 1,
            Err(at) => at,
        })
    }
}

fn fail<T>(offset: usize, detail: impl Into<String>) -> Result<T, PageError> {
    Err(PageError { offset, detail: detail.into() })
}

/// Checks a page image of `page_bytes` completely; `Ok` with its kind when every promise of
/// the layout holds, so that no read of it can fail or disagree with a decode.
pub fn check(bytes: &[u8], page_bytes: usize) -> Result<Kind, PageError> {
    if !page_bytes.is_power_of_two() || !(MIN_PAGE_BYTES..=MAX_PAGE_BYTES).contains(&page_bytes) {
        return fail(0, format!("a page size of {page_bytes} bytes"));
    }
    if bytes.len() != page_bytes {
        return fail(0, format!("{} bytes where the store's pages are {page_bytes}", bytes.len()));
    }
    let page = Slotted::new(bytes);
    let Some(kind) = page.kind() else {
        return fail(0, format!("kind {} is neither leaf (1) nor internal (2)", bytes[0]));
    };
    if bytes[1] != FORMAT_VERSION {
        return fail(
            1,
            format!("page format {} (this build reads format {FORMAT_VERSION})", bytes[1]),
        );
    }
    let (count, prefix_len) = (usize::from(le16(bytes, 2)), usize::from(le16(bytes, 4)));
    let heap_bytes = usize::from(le16(bytes, 6));
    let Some(heap_start) = page_bytes.checked_sub(heap_bytes) else {
        return fail(6, format!("a heap of {heap_bytes} bytes in a page of {page_bytes}"));
    };
    let size = le32(bytes, 24) as usize;
    if size != page_bytes {
        return fail(24, format!("a page of {size} bytes in a store of {page_bytes}-byte pages"));
    }
    if le32(bytes, 28) != 0 {
        return fail(28, "reserved bytes are not zero");
    }
    if prefix_len > MAX_KEY_BYTES {
        return fail(4, format!("a prefix of {prefix_len} bytes, over the key limit"));
    }
    let slots_end = HEADER_BYTES + prefix_len + count * SLOT_BYTES;
    if slots_end > heap_start || heap_start > page_bytes {
        return fail(
            6,
            format!("slots end at {slots_end}, the heap starts at {heap_start}, the page ends at {page_bytes}"),
        );
    }
    if kind == Kind::Internal && (count == 0 || page.link() == Some(0)) {
        return fail(16, "an internal page needs a first child and a separator");
    }
    let mut previous: Option<(usize, usize)> = None;
    // Bytes the entries take: entries never share bytes, so they fit the heap together
    // (and a decoded page lays out again within the page).
    let mut live = 0usize;
    for index in 0..count {
        let slot_at = HEADER_BYTES + prefix_len + index * SLOT_BYTES;
        let (slot_head, offset, len) = (
            le32(bytes, slot_at),
            usize::from(le16(bytes, slot_at + 4)),
            usize::from(le16(bytes, slot_at + 6)),
        );
        let tail = match kind {
            Kind::Internal => CHILD_BYTES,
            Kind::Leaf => match bytes.get(offset + len) {
                Some(&VALUE_INLINE) => {
                    INLINE_HEADER_BYTES
                        + usize::from(
                            bytes.get(offset + len + 1..offset + len + 3).map_or(0, |b| le16(b, 0)),
                        )
                }
                Some(&VALUE_OVERFLOW) => OVERFLOW_BYTES,
                Some(&other) => return fail(offset + len, format!("value kind {other}")),
                None => return fail(slot_at + 4, format!("entry {index} starts past the page")),
            },
        };
        let end = offset + len + tail;
        live += len + tail;
        if live > heap_bytes {
            return fail(
                slot_at + 4,
                format!("entries 0..={index} take {live} bytes, more than the heap's {heap_bytes}: some overlap"),
            );
        }
        if offset < heap_start || end > page_bytes {
            return fail(
                slot_at + 4,
                format!(
                    "entry {index} at {offset}..{end} leaves the heap {heap_start}..{page_bytes}"
                ),
            );
        }
        if prefix_len + len > MAX_KEY_BYTES {
            return fail(slot_at + 6, format!("entry {index}'s key of {} bytes", prefix_len + len));
        }
        let suffix = &bytes[offset..offset + len];
        if slot_head != head(suffix) {
            return fail(slot_at, format!("entry {index}'s head does not match its key"));
        }
        if let Some((before, before_len)) = previous {
            if bytes[before..before + before_len] >= *suffix {
                return fail(offset, format!("entry {index}'s key is not above the one before"));
            }
        }
        previous = Some((offset, len));
        match kind {
            Kind::Internal => {
                if prefix_len + len == 0 {
                    return fail(slot_at + 6, format!("entry {index}'s separator is empty"));
                }
                if le64(bytes, offset + len) == 0 {
                    return fail(offset + len, format!("entry {index}'s child is page 0"));
                }
            }
            Kind::Leaf => {
                if let Some(ValueAt::Inline { len, .. }) = page.value(index) {
                    if len > page_bytes / 4 {
                        return fail(
                            offset + len,
                            format!("entry {index}: an inline value of {len} bytes"),
                        );
                    }
                }
                if let Some(ValueAt::Overflow(overflow)) = page.value(index) {
                    if overflow.blocks == 0
                        || u64::from(overflow.blocks) > overflow.len
                        || overflow.len > super::MAX_VALUE_BYTES
                        || overflow.first == 0
                    {
                        return fail(offset + len, format!("entry {index}: overflow {overflow:?}"));
                    }
                }
            }
        }
    }
    Ok(kind)
}

fn le16(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn le32(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or([0; 4]))
}

fn le64(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap_or([0; 8]))
}

/// The prefix sorted `keys` share (that of the first and the last).
fn common_prefix<'k>(first: Option<&'k [u8]>, last: Option<&'k [u8]>) -> &'k [u8] {
    match (first, last) {
        (Some(first), Some(last)) => {
            let n = first.iter().zip(last).take_while(|(a, b)| a == b).count();
            &first[..n]
        }
        _ => &[],
    }
}

fn value_bytes(value: &Value) -> usize {
    match value {
        Value::Inline(bytes) => INLINE_HEADER_BYTES + bytes.len(),
        Value::Overflow(_) => OVERFLOW_BYTES,
    }
}

/// Bytes a leaf of `entries` (sorted) takes, before padding to the page size.
pub fn leaf_bytes(entries: &[(Bytes, Value)]) -> usize {
    let prefix = common_prefix(entries.first().map(|e| &e.0[..]), entries.last().map(|e| &e.0[..]));
    HEADER_BYTES
        + prefix.len()
        + entries
            .iter()
            .map(|(key, value)| SLOT_BYTES + key.len() - prefix.len() + value_bytes(value))
            .sum::<usize>()
}

/// Bytes an internal page of `entries` (sorted separators) takes, before padding.
pub fn internal_bytes(entries: &[(Vec<u8>, u64)]) -> usize {
    let prefix = common_prefix(entries.first().map(|e| &e.0[..]), entries.last().map(|e| &e.0[..]));
    HEADER_BYTES
        + prefix.len()
        + entries
            .iter()
            .map(|(key, _)| SLOT_BYTES + key.len() - prefix.len() + CHILD_BYTES)
            .sum::<usize>()
}

/// Lays out a page: header, prefix, slots, and entries from the end of the page down, each
/// written by `entry(index, suffix_len) -> bytes of the entry after its key`.
fn lay_out<'k>(
    kind: Kind,
    keys: impl ExactSizeIterator<Item = &'k [u8]> + Clone,
    lsn: u64,
    link: u64,
    page_bytes: usize,
    mut tail: impl FnMut(usize, &mut Vec<u8>),
) -> Vec<u8> {
    assert!(
        (MIN_PAGE_BYTES..=MAX_PAGE_BYTES).contains(&page_bytes) && page_bytes.is_power_of_two()
    );
    let count = keys.len();
    assert!(count <= usize::from(u16::MAX));
    let (first, last) = (keys.clone().next(), keys.clone().last());
    let prefix = common_prefix(first, last).to_vec();
    let mut page = vec![0u8; page_bytes];
    page[0] = match kind {
        Kind::Leaf => KIND_LEAF,
        Kind::Internal => KIND_INTERNAL,
    };
    page[1] = FORMAT_VERSION;
    page[2..4].copy_from_slice(&(count as u16).to_le_bytes());
    page[4..6].copy_from_slice(&(prefix.len() as u16).to_le_bytes());
    page[8..16].copy_from_slice(&lsn.to_le_bytes());
    page[16..24].copy_from_slice(&link.to_le_bytes());
    page[24..28].copy_from_slice(&(page_bytes as u32).to_le_bytes());
    page[HEADER_BYTES..HEADER_BYTES + prefix.len()].copy_from_slice(&prefix);
    let slots = HEADER_BYTES + prefix.len();
    // The entries in key order, from the heap's start up to the page's end: a scan reads
    // them as one ascending stream, the order the hardware prefetcher follows.
    let mut entries = Vec::with_capacity(page_bytes);
    let mut starts = Vec::with_capacity(count);
    for (index, key) in keys.clone().enumerate() {
        starts.push(entries.len());
        entries.extend_from_slice(&key[prefix.len()..]);
        tail(index, &mut entries);
    }
    let heap = page_bytes.checked_sub(entries.len()).expect("a page's entries do not fit its size");
    assert!(heap >= slots + count * SLOT_BYTES, "a page's entries do not fit its size");
    page[heap..].copy_from_slice(&entries);
    for ((index, key), start) in keys.enumerate().zip(starts) {
        let suffix = &key[prefix.len()..];
        let slot = slots + index * SLOT_BYTES;
        page[slot..slot + 4].copy_from_slice(&head(suffix).to_le_bytes());
        page[slot + 4..slot + 6].copy_from_slice(&((heap + start) as u16).to_le_bytes());
        page[slot + 6..slot + 8].copy_from_slice(&(suffix.len() as u16).to_le_bytes());
    }
    // The heap's size, not its start: an empty 64 KiB page's start (65,536) has no u16.
    page[6..8].copy_from_slice(&((page_bytes - heap) as u16).to_le_bytes());
    page
}

/// The image of a leaf of `entries` (sorted, no duplicates, fitting: `leaf_bytes` at most
/// `page_bytes`).
pub fn encode_leaf(
    entries: &[(Bytes, Value)],
    lsn: u64,
    next_leaf: u64,
    page_bytes: usize,
) -> Vec<u8> {
    assert!(leaf_bytes(entries) <= page_bytes, "a leaf of {} bytes", leaf_bytes(entries));
    let image = lay_out(
        Kind::Leaf,
        entries.iter().map(|e| &e.0[..]),
        lsn,
        next_leaf,
        page_bytes,
        |i, out| match &entries[i].1 {
            Value::Inline(bytes) => {
                out.push(VALUE_INLINE);
                out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
                out.extend_from_slice(bytes);
            }
            Value::Overflow(overflow) => {
                out.push(VALUE_OVERFLOW);
                out.extend_from_slice(&overflow.len.to_le_bytes());
                out.extend_from_slice(&overflow.first.to_le_bytes());
                out.extend_from_slice(&overflow.blocks.to_le_bytes());
            }
        },
    );
    debug_assert_eq!(check(&image, page_bytes), Ok(Kind::Leaf));
    image
}

/// The image of an internal page: `first_child`, then `entries` (separators strictly
/// ascending, each with its child), fitting `page_bytes`.
pub fn encode_internal(
    first_child: u64,
    entries: &[(Vec<u8>, u64)],
    lsn: u64,
    page_bytes: usize,
) -> Vec<u8> {
    assert!(internal_bytes(entries) <= page_bytes && first_child != 0 && !entries.is_empty());
    let image = lay_out(
        Kind::Internal,
        entries.iter().map(|e| &e.0[..]),
        lsn,
        first_child,
        page_bytes,
        |i, out| {
            out.extend_from_slice(&entries[i].1.to_le_bytes());
        },
    );
    debug_assert_eq!(check(&image, page_bytes), Ok(Kind::Internal));
    image
}

/// A checked leaf's entries, owned (for the write path, which rebuilds pages).
pub fn decode_leaf(image: &[u8]) -> Option<Vec<(Bytes, Value)>> {
    let page = Slotted::new(image);
    (0..page.count()?)
        .map(|index| {
            let mut key = Vec::new();
            page.key_into(index, &mut key)?;
            let value = match page.value(index)? {
                ValueAt::Inline { offset, len } => {
                    Value::Inline(Bytes::copy_from_slice(image.get(offset..offset + len)?))
                }
                ValueAt::Overflow(overflow) => Value::Overflow(overflow),
            };
            Some((Bytes::from(key), value))
        })
        .collect()
}

/// A checked internal page's first child and entries, owned.
pub fn decode_internal<B: PageBytes + ?Sized>(image: &B) -> Option<(u64, Separators)> {
    let page = Slotted::new(image);
    let entries = (0..page.count()?)
        .map(|index| {
            let mut key = Vec::new();
            page.key_into(index, &mut key)?;
            Some((key, page.child(index + 1)?))
        })
        .collect::<Option<Vec<_>>>()?;
    Some((page.link()?, entries))
}

#[cfg(test)]
mod tests;
