//! Changes to a slotted page where it lies: the first step of updates in place (a write
//! that changes its leaf's frame under the frame's exclusive latch, rather than a
//! checkpoint that rebuilds every leaf it touches). Each function takes the page through
//! [`PageMut`] (a slice, or a frame held exclusively) and leaves it a page [`super::check`]
//! accepts.
//!
//! - [`put_leaf`] sets a key's value and [`put_separator`] adds an internal page's separator
//!   and child. A value no larger than the one it replaces is written over it; anything else
//!   takes fresh bytes at the heap's low end, and a new key's slot is made by moving the
//!   slots above it up by one. The bytes an entry left behind are *dead*: nothing points at
//!   them. When the free bytes between the slots and the heap are too few but the dead ones
//!   would do, or the key does not start with the page's prefix, the page is laid out again
//!   from its live entries ([`compact`], the one path that allocates). When even that does
//!   not fit, the page is left as it was and the caller splits it.
//! - [`remove`] takes a key's slot out (its bytes turn dead, or go back to the free bytes
//!   when they were the heap's lowest).
//! - [`split`] cuts a full page in two, by bytes, into two new images: a leaf's separator is
//!   the shortest key above the left half's last key and at or below the right half's first;
//!   an internal page's middle separator moves up to the parent, its child becoming the
//!   right page's first.
//!
//! Concurrent optimistic readers may see any state between two writes of a change: every
//! read of theirs is checked (`Slotted`), and they validate the frame's version after.
//! Entries written in place lie at the heap's low end, out of key order, so a scan of an
//! edited page reads less of it as one ascending stream, until the page is next laid out.
//!
//! Must never: leave a page that `check` refuses; change anything when answering
//! [`NoRoom`]; lose, duplicate or reorder a key.

use tierkv_io::frames::FrameWrite;

use super::{
    common_prefix, head, lay_out, Kind, PageBytes, Slotted, CHILD_BYTES, HEADER_BYTES,
    INLINE_HEADER_BYTES, KIND_INTERNAL, KIND_LEAF, OVERFLOW_BYTES, SLOT_BYTES, VALUE_INLINE,
    VALUE_OVERFLOW,
};
use crate::page::{OverflowRef, Value, MAX_KEY_BYTES};

/// Bytes a page can be written through, besides read.
pub trait PageMut: PageBytes {
    /// Writes `bytes` at `at` (inside the page: the caller computed it from checked fields).
    fn put(&mut self, at: usize, bytes: &[u8]);
    /// Moves `len` bytes from `from` to `to` (the ranges may overlap).
    fn move_bytes(&mut self, from: usize, to: usize, len: usize);
    /// Writes the whole page.
    fn put_all(&mut self, image: &[u8]);
}

impl PageMut for [u8] {
    fn put(&mut self, at: usize, bytes: &[u8]) {
        self[at..at + bytes.len()].copy_from_slice(bytes);
    }
    fn move_bytes(&mut self, from: usize, to: usize, len: usize) {
        self.copy_within(from..from + len, to);
    }
    fn put_all(&mut self, image: &[u8]) {
        self.copy_from_slice(image);
    }
}

impl PageBytes for FrameWrite<'_> {
    fn byte(&self, at: usize) -> Option<u8> {
        self.read().u8(at)
    }
    fn le_u16(&self, at: usize) -> Option<u16> {
        self.read().u16(at)
    }
    fn le_u32(&self, at: usize) -> Option<u32> {
        self.read().u32(at)
    }
    fn le_u64(&self, at: usize) -> Option<u64> {
        self.read().u64(at)
    }
    fn compare_at(&self, at: usize, len: usize, key: &[u8]) -> Option<std::cmp::Ordering> {
        self.read().compare(at, len, key)
    }
    fn copy_out(&self, at: usize, out: &mut [u8]) -> Option<()> {
        self.read().copy_to(at, out)
    }
    fn append_out(&self, at: usize, len: usize, out: &mut Vec<u8>) -> Option<()> {
        self.read().append_to(at, len, out)
    }
}

impl PageMut for FrameWrite<'_> {
    fn put(&mut self, at: usize, bytes: &[u8]) {
        FrameWrite::put(self, at, bytes);
    }
    fn move_bytes(&mut self, from: usize, to: usize, len: usize) {
        self.copy_within(from, to, len);
    }
    fn put_all(&mut self, image: &[u8]) {
        // A page may be smaller than its frame (pages of 512 bytes to 2 KiB in 4 KiB frames).
        FrameWrite::put(self, 0, image);
    }
}

/// A change did not fit the page, even laid out again: split it. Nothing was changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the page needs {needed} bytes and has {page_bytes}")]
pub struct NoRoom {
    /// Bytes the page would take with the change, laid out with no dead bytes.
    pub needed: usize,
    /// The page's size.
    pub page_bytes: usize,
}

/// A leaf value to write, borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueRef<'a> {
    /// Kept in the leaf.
    Inline(&'a [u8]),
    /// Kept in overflow blocks.
    Overflow(OverflowRef),
}

impl<'a> From<&'a Value> for ValueRef<'a> {
    fn from(value: &'a Value) -> Self {
        match value {
            Value::Inline(bytes) => ValueRef::Inline(bytes),
            Value::Overflow(overflow) => ValueRef::Overflow(*overflow),
        }
    }
}

/// What a put did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Put {
    /// The key was new.
    Inserted,
    /// The key's value was replaced.
    Replaced,
}

/// An entry's bytes after its key: a fixed head (value kind and length, an overflow
/// reference, or a child id) and a borrowed body (an inline value's bytes).
struct Tail<'a> {
    head: [u8; OVERFLOW_BYTES],
    head_len: usize,
    body: &'a [u8],
}

impl<'a> Tail<'a> {
    fn leaf(value: ValueRef<'a>) -> Tail<'a> {
        let mut head = [0u8; OVERFLOW_BYTES];
        match value {
            ValueRef::Inline(bytes) => {
                head[0] = VALUE_INLINE;
                head[1..3].copy_from_slice(&(bytes.len() as u16).to_le_bytes());
                Tail { head, head_len: INLINE_HEADER_BYTES, body: bytes }
            }
            ValueRef::Overflow(overflow) => {
                head[0] = VALUE_OVERFLOW;
                head[1..9].copy_from_slice(&overflow.len.to_le_bytes());
                head[9..17].copy_from_slice(&overflow.first.to_le_bytes());
                head[17..21].copy_from_slice(&overflow.blocks.to_le_bytes());
                Tail { head, head_len: OVERFLOW_BYTES, body: &[] }
            }
        }
    }

    fn child(child: u64) -> Tail<'static> {
        let mut head = [0u8; OVERFLOW_BYTES];
        head[..CHILD_BYTES].copy_from_slice(&child.to_le_bytes());
        Tail { head, head_len: CHILD_BYTES, body: &[] }
    }

    fn len(&self) -> usize {
        self.head_len + self.body.len()
    }

    fn write<P: PageMut + ?Sized>(&self, page: &mut P, at: usize) {
        page.put(at, &self.head[..self.head_len]);
        if !self.body.is_empty() {
            page.put(at + self.head_len, self.body);
        }
    }

    fn to_vec(&self) -> Vec<u8> {
        let mut out = self.head[..self.head_len].to_vec();
        out.extend_from_slice(self.body);
        out
    }
}

/// The header's fields an edit works from, read once.
#[derive(Clone, Copy, Debug)]
struct Shape {
    kind: Kind,
    count: usize,
    prefix_len: usize,
    heap_start: usize,
    page_bytes: usize,
}

impl Shape {
    /// The shape of a page `check` accepted. A page that is not one is a bug of the caller
    /// (it edits only frames it loaded checked, and pages it made).
    fn of<P: PageBytes + ?Sized>(page: &P) -> Shape {
        let read = || -> Option<Shape> {
            let kind = match page.byte(0)? {
                KIND_LEAF => Kind::Leaf,
                KIND_INTERNAL => Kind::Internal,
                _ => return None,
            };
            let page_bytes = usize::try_from(page.le_u32(24)?).ok()?;
            let heap_start = page_bytes.checked_sub(usize::from(page.le_u16(6)?))?;
            let shape = Shape {
                kind,
                count: usize::from(page.le_u16(2)?),
                prefix_len: usize::from(page.le_u16(4)?),
                heap_start,
                page_bytes,
            };
            (shape.slots_end() <= heap_start).then_some(shape)
        };
        read().expect("invariant: an edited page is one `check` accepted")
    }

    fn slots(&self) -> usize {
        HEADER_BYTES + self.prefix_len
    }

    fn slots_end(&self) -> usize {
        self.slots() + self.count * SLOT_BYTES
    }

    /// Bytes free between the slot array and the heap.
    fn gap(&self) -> usize {
        self.heap_start - self.slots_end()
    }
}

/// Slot `index`: entry offset and key suffix length.
fn slot<P: PageBytes + ?Sized>(page: &P, shape: &Shape, index: usize) -> (usize, usize) {
    let word = page.le_u64(shape.slots() + index * SLOT_BYTES).expect("invariant: a slot");
    (usize::from((word >> 32) as u16), usize::from((word >> 48) as u16))
}

fn put_slot<P: PageMut + ?Sized>(
    page: &mut P,
    shape: &Shape,
    index: usize,
    suffix: &[u8],
    at: usize,
) {
    let word = u64::from(head(suffix)) | (at as u64) << 32 | (suffix.len() as u64) << 48;
    page.put(shape.slots() + index * SLOT_BYTES, &word.to_le_bytes());
}

/// Bytes of entry `index` after its key.
fn tail_len<P: PageBytes + ?Sized>(page: &P, shape: &Shape, index: usize) -> usize {
    let (offset, len) = slot(page, shape, index);
    match shape.kind {
        Kind::Internal => CHILD_BYTES,
        Kind::Leaf => match page.byte(offset + len).expect("invariant: a value kind") {
            VALUE_INLINE => {
                INLINE_HEADER_BYTES
                    + usize::from(page.le_u16(offset + len + 1).expect("invariant: a length"))
            }
            _ => OVERFLOW_BYTES,
        },
    }
}

/// Bytes free between the page's slots and its heap: what changes in place may take.
pub fn gap<P: PageBytes + ?Sized>(page: &P) -> usize {
    Shape::of(page).gap()
}

/// Bytes a put of `key` with `value` takes from the gap when it goes in place (a new slot
/// and a new entry, at most), or `None` when the key does not start with the page's prefix
/// (the put lays the page out again).
pub fn put_bytes<P: PageBytes + ?Sized>(
    page: &P,
    key: &[u8],
    value: ValueRef<'_>,
) -> Option<usize> {
    let shape = Shape::of(page);
    let shares = shape.prefix_len <= key.len()
        && page.compare_at(HEADER_BYTES, shape.prefix_len, &key[..shape.prefix_len])
            == Some(std::cmp::Ordering::Equal);
    shares.then(|| SLOT_BYTES + key.len() - shape.prefix_len + Tail::leaf(value).len())
}

/// Bytes a leaf takes laid out again (`relay`) with `key` set to `value`, computed in
/// place: its live entries, the change, and the longest prefix of the keys then (that of
/// the first and the last). `None` when the key does not share the page's prefix (a put
/// lays such a page out again with a shorter one: ask a copy).
pub fn relaid_bytes<P: PageBytes + ?Sized>(
    page: &P,
    key: &[u8],
    value: ValueRef<'_>,
) -> Option<usize> {
    let shape = Shape::of(page);
    assert!(shape.kind == Kind::Leaf, "relaid_bytes of an internal page");
    let added = put_bytes(page, key, value)?;
    let reader = Slotted::new(page);
    let found = reader.search(key).expect("invariant: a checked page searches");
    // With the page's prefix: its live bytes, less a replaced entry, plus the new one.
    let mut bytes = live_bytes(page) + added;
    let mut count = shape.count;
    match found {
        Ok(index) => {
            bytes -= SLOT_BYTES + slot(page, &shape, index).1 + tail_len(page, &shape, index)
        }
        Err(_) => count += 1,
    }
    // The keys' longest prefix then: that of the first and the last key.
    let (mut first, mut last) = (Vec::new(), Vec::new());
    if shape.count > 0 {
        reader.key_into(0, &mut first).expect("invariant: a first key");
        reader.key_into(shape.count - 1, &mut last).expect("invariant: a last key");
    }
    let first = if shape.count == 0 || key < first.as_slice() { key } else { &first };
    let last = if shape.count == 0 || key > last.as_slice() { key } else { &last };
    let longer = super::common_prefix(Some(first), Some(last)).len() - shape.prefix_len;
    // A prefix `longer` bytes longer: the header holds it once, and each of the `count`
    // suffixes is that much shorter.
    let relaid = bytes - (count - 1) * longer;
    debug_assert!(relaid >= HEADER_BYTES + count * SLOT_BYTES);
    Some(relaid)
}

/// Bytes the page's live entries take laid out again: header, prefix, slots and entries.
pub fn live_bytes<P: PageBytes + ?Sized>(page: &P) -> usize {
    let shape = Shape::of(page);
    shape.slots_end()
        + (0..shape.count)
            .map(|i| slot(page, &shape, i).1 + tail_len(page, &shape, i))
            .sum::<usize>()
}

/// The page's entries, owned: whole key, and the bytes after it.
fn entries<P: PageBytes + ?Sized>(page: &P) -> Vec<(Vec<u8>, Vec<u8>)> {
    let shape = Shape::of(page);
    let reader = Slotted::new(page);
    (0..shape.count)
        .map(|index| {
            let mut key = Vec::new();
            reader.key_into(index, &mut key).expect("invariant: a key");
            let (offset, len) = slot(page, &shape, index);
            let mut tail = Vec::new();
            page.append_out(offset + len, tail_len(page, &shape, index), &mut tail)
                .expect("invariant: an entry");
            (key, tail)
        })
        .collect()
}

/// Bytes a page of `entries` (sorted) takes.
fn bytes_of(entries: &[(Vec<u8>, Vec<u8>)]) -> usize {
    let prefix = common_prefix(entries.first().map(|e| &e.0[..]), entries.last().map(|e| &e.0[..]));
    HEADER_BYTES
        + prefix.len()
        + entries.iter().map(|(k, t)| SLOT_BYTES + k.len() - prefix.len() + t.len()).sum::<usize>()
}

/// An image of `entries` (sorted, fitting) of `kind`, with the given LSN and link.
fn image_of(
    kind: Kind,
    entries: &[(Vec<u8>, Vec<u8>)],
    lsn: u64,
    link: u64,
    page_bytes: usize,
) -> Vec<u8> {
    assert!(bytes_of(entries) <= page_bytes, "a page of {} bytes", bytes_of(entries));
    let image = lay_out(kind, entries.iter().map(|e| &e.0[..]), lsn, link, page_bytes, |i, out| {
        out.extend_from_slice(&entries[i].1);
    });
    debug_assert_eq!(super::check(&image, page_bytes), Ok(kind));
    image
}

/// Lays the page out again from its live entries: no dead bytes, the longest prefix, and
/// entries in key order up to the page's end.
pub fn compact<P: PageMut + ?Sized>(page: &mut P) {
    let shape = Shape::of(page);
    let (lsn, link) = header_words(page);
    let keys = Keys::of(&*page, &shape);
    let image = image_of_range(&*page, &shape, &keys, 0..shape.count, lsn, link);
    page.put_all(&image);
    let after = Shape::of(page);
    assert!(after.count == shape.count && live_bytes(page) + after.gap() == shape.page_bytes);
}

fn header_words<P: PageBytes + ?Sized>(page: &P) -> (u64, u64) {
    let reader = Slotted::new(page);
    (reader.lsn().expect("invariant: an LSN"), reader.link().expect("invariant: a link"))
}

/// Sets the page's LSN.
pub fn set_lsn<P: PageMut + ?Sized>(page: &mut P, lsn: u64) {
    page.put(8, &lsn.to_le_bytes());
    assert_eq!(Slotted::new(page).lsn(), Some(lsn));
}

/// Sets the page's link: a leaf's next leaf, an internal page's first child.
pub fn set_link<P: PageMut + ?Sized>(page: &mut P, link: u64) {
    assert!(Shape::of(page).kind == Kind::Leaf || link != 0, "an internal page's first child is 0");
    page.put(16, &link.to_le_bytes());
    assert_eq!(Slotted::new(page).link(), Some(link));
}

/// Sets `key` to `value` in a leaf.
pub fn put_leaf<P: PageMut + ?Sized>(
    page: &mut P,
    key: &[u8],
    value: ValueRef<'_>,
) -> Result<Put, NoRoom> {
    put_leaf_found(page, key, value, None)
}

/// `put_leaf`, given what `Slotted::search` of `key` in the page returns now when the
/// caller searched it already (under the same latch, nothing changed since): the put
/// searches no more.
pub fn put_leaf_found<P: PageMut + ?Sized>(
    page: &mut P,
    key: &[u8],
    value: ValueRef<'_>,
    found: Option<Result<usize, usize>>,
) -> Result<Put, NoRoom> {
    let shape = Shape::of(page);
    assert!(shape.kind == Kind::Leaf, "put_leaf on an internal page");
    assert!(key.len() <= MAX_KEY_BYTES, "a key of {} bytes", key.len());
    if let ValueRef::Inline(bytes) = value {
        assert!(bytes.len() <= shape.page_bytes / 4, "an inline value of {} bytes", bytes.len());
    }
    let (put, at) = put_entry(page, shape, key, &Tail::leaf(value), found)?;
    // The key is where the put says, with the value: read back in place.
    let reader = Slotted::new(&*page);
    assert_eq!(reader.key_is(at, key), Some(true), "the key is not at slot {at} after a put");
    match (reader.value(at), value) {
        (Some(super::ValueAt::Inline { len, .. }), ValueRef::Inline(bytes)) => {
            assert_eq!(len, bytes.len())
        }
        (Some(super::ValueAt::Overflow(found)), ValueRef::Overflow(wanted)) => {
            assert_eq!(found, wanted)
        }
        other => panic!("a put left {other:?}"),
    }
    Ok(put)
}

/// Adds `separator` with the child holding the keys from it up to the next separator, in
/// an internal page (a split below gave it a new page). A separator already there has its
/// child replaced.
pub fn put_separator<P: PageMut + ?Sized>(
    page: &mut P,
    separator: &[u8],
    child: u64,
) -> Result<Put, NoRoom> {
    let shape = Shape::of(page);
    assert!(shape.kind == Kind::Internal, "put_separator on a leaf");
    assert!(!separator.is_empty() && separator.len() <= MAX_KEY_BYTES && child != 0);
    let (put, at) = put_entry(page, shape, separator, &Tail::child(child), None)?;
    let reader = Slotted::new(&*page);
    assert_eq!(reader.key_is(at, separator), Some(true), "the separator is not at slot {at}");
    assert_eq!(reader.child(at + 1), Some(child));
    Ok(put)
}

/// The edit both puts share: in place when it fits the gap (or the old entry), else laid
/// out again when the live entries and the change fit, else `NoRoom`. Returns the slot the
/// key is at afterwards. `searched`: the page's `Slotted::search` of `key`, when the
/// caller has it.
fn put_entry<P: PageMut + ?Sized>(
    page: &mut P,
    shape: Shape,
    key: &[u8],
    tail: &Tail<'_>,
    searched: Option<Result<usize, usize>>,
) -> Result<(Put, usize), NoRoom> {
    let prefix_fits = shape.prefix_len <= key.len()
        && page.compare_at(HEADER_BYTES, shape.prefix_len, &key[..shape.prefix_len])
            == Some(std::cmp::Ordering::Equal);
    let found = if prefix_fits {
        let search =
            || Slotted::new(&*page).search(key).expect("invariant: a checked page searches");
        debug_assert!(searched.is_none_or(|searched| searched == search()));
        Some(searched.unwrap_or_else(search))
    } else {
        None
    };
    let suffix = &key[shape.prefix_len.min(key.len())..];
    match found {
        Some(Ok(index)) => {
            let (offset, len) = slot(page, &shape, index);
            if tail.len() <= tail_len(page, &shape, index) {
                // Over the old value, whose leftover bytes turn dead.
                tail.write(page, offset + len);
                return Ok((Put::Replaced, index));
            }
            let need = len + tail.len();
            if need <= shape.gap() {
                let at = shape.heap_start - need;
                page.put(at, suffix);
                tail.write(page, at + len);
                put_slot(page, &shape, index, suffix, at);
                page.put(6, &((shape.page_bytes - at) as u16).to_le_bytes());
                return Ok((Put::Replaced, index));
            }
            relay(page, shape, key, tail, Put::Replaced)
        }
        Some(Err(index)) if shape.count < usize::from(u16::MAX) => {
            let need = suffix.len() + tail.len();
            if need + SLOT_BYTES <= shape.gap() {
                let at = shape.heap_start - need;
                page.put(at, suffix);
                tail.write(page, at + suffix.len());
                let from = shape.slots() + index * SLOT_BYTES;
                page.move_bytes(from, from + SLOT_BYTES, (shape.count - index) * SLOT_BYTES);
                put_slot(page, &shape, index, suffix, at);
                page.put(2, &((shape.count + 1) as u16).to_le_bytes());
                page.put(6, &((shape.page_bytes - at) as u16).to_le_bytes());
                return Ok((Put::Inserted, index));
            }
            relay(page, shape, key, tail, Put::Inserted)
        }
        Some(Err(_)) => Err(NoRoom { needed: shape.page_bytes + 1, page_bytes: shape.page_bytes }),
        None => relay(page, shape, key, tail, Put::Inserted),
    }
}

/// The put laid out again with every live entry (the slow path: the gap is too small, or
/// the key does not share the page's prefix).
fn relay<P: PageMut + ?Sized>(
    page: &mut P,
    shape: Shape,
    key: &[u8],
    tail: &Tail<'_>,
    put: Put,
) -> Result<(Put, usize), NoRoom> {
    let (lsn, link) = header_words(page);
    let mut all = entries(page);
    let entry = (key.to_vec(), tail.to_vec());
    let at = match all.binary_search_by(|e| e.0[..].cmp(key)) {
        Ok(at) => {
            all[at] = entry;
            at
        }
        Err(at) => {
            all.insert(at, entry);
            at
        }
    };
    let needed = bytes_of(&all);
    if needed > shape.page_bytes || all.len() > usize::from(u16::MAX) {
        return Err(NoRoom { needed, page_bytes: shape.page_bytes });
    }
    // Laid out in key order: the key's slot is its place among the entries.
    page.put_all(&image_of(shape.kind, &all, lsn, link, shape.page_bytes));
    Ok((put, at))
}

/// Removes `key` (a leaf's entry, or an internal page's separator with the child it
/// names); whether it was there.
pub fn remove<P: PageMut + ?Sized>(page: &mut P, key: &[u8]) -> bool {
    let shape = Shape::of(page);
    let Some(Ok(index)) = Slotted::new(&*page).search(key) else {
        return false;
    };
    assert!(shape.kind == Kind::Leaf || shape.count > 1, "the last separator of an internal page");
    let (offset, len) = slot(page, &shape, index);
    let gone = len + tail_len(page, &shape, index);
    let from = shape.slots() + (index + 1) * SLOT_BYTES;
    page.move_bytes(from, from - SLOT_BYTES, (shape.count - index - 1) * SLOT_BYTES);
    page.put(2, &((shape.count - 1) as u16).to_le_bytes());
    if offset == shape.heap_start {
        // The heap's lowest entry: its bytes go back to the gap.
        page.put(6, &((shape.page_bytes - offset - gone) as u16).to_le_bytes());
    }
    if shape.count == 1 {
        // An empty leaf has no prefix to keep (a later key need not share it).
        let (lsn, link) = header_words(page);
        page.put_all(&image_of(shape.kind, &[], lsn, link, shape.page_bytes));
    }
    let after = Shape::of(page);
    assert!(
        after.count == shape.count - 1
            && Slotted::new(&*page).search(key).is_some_and(|r| r.is_err())
    );
    true
}

/// A page cut in two by [`split`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    /// The lower half, in the page's place.
    pub left: Vec<u8>,
    /// The upper half, a new page.
    pub right: Vec<u8>,
    /// The parent's separator for `right`: every key of `left` is below it and every key
    /// of `right` at or above it.
    pub separator: Vec<u8>,
}

/// Cuts a page of two entries or more (a leaf) or three or more (an internal page) in two
/// of about equal bytes. A leaf's left half links to `right_id` and the right half to the
/// page's old next leaf; an internal page's middle separator goes up, its child becoming
/// the right half's first child. Both halves keep the page's LSN. The page is not changed:
/// the caller writes `left` over it once `right` has its frame.
pub fn split<P: PageBytes + ?Sized>(page: &P, right_id: u64) -> Split {
    split_entries(page, entries(page), right_id)
}

/// [`split`] of an internal page with one more separator (and its child) than it has room
/// for: the separator a split below hands up to a full parent. A page of two separators,
/// the least a full internal page holds, splits into one each side of the middle one.
pub fn split_adding<P: PageBytes + ?Sized>(
    page: &P,
    right_id: u64,
    separator: &[u8],
    child: u64,
) -> Split {
    assert!(Shape::of(page).kind == Kind::Internal && child != 0, "split_adding of a leaf");
    let mut all = entries(page);
    let at = all.binary_search_by(|e| e.0[..].cmp(separator)).expect_err("a separator twice");
    all.insert(at, (separator.to_vec(), Tail::child(child).to_vec()));
    split_entries(page, all, right_id)
}

/// Where to cut a leaf that cannot take `changes` (each a key and the bytes its new entry
/// takes, 0 for a removal): at the middle by bytes of its entries and the changes together,
/// so that each half gets about half of both, however the changes fall among the entries.
/// The separator is above every key left of the cut and at or below every key right of it;
/// `None` when there is one key in all (which always fits a page).
pub fn split_point<P: PageBytes + ?Sized>(page: &P, changes: &[(&[u8], usize)]) -> Option<Vec<u8>> {
    let shape = Shape::of(page);
    assert!(shape.kind == Kind::Leaf, "split_point of an internal page");
    // Every entry's key and bytes in key order, the page's keys in one buffer (no
    // allocation per entry: this runs before every split), the changes laid over them.
    let keys = Keys::of(page, &shape);
    let mut all: Vec<(&[u8], usize)> = (0..shape.count)
        .map(|index| {
            (keys.key(index), SLOT_BYTES + keys.key(index).len() + tail_len(page, &shape, index))
        })
        .collect();
    for &(key, bytes) in changes {
        match all.binary_search_by(|(have, _)| (*have).cmp(key)) {
            Ok(at) => all[at].1 = bytes,
            Err(at) => all.insert(at, (key, bytes)),
        }
    }
    debug_assert!(all.windows(2).all(|pair| pair[0].0 < pair[1].0), "keys in order, once");
    if all.len() < 2 {
        return None;
    }
    let total: usize = all.iter().map(|(_, bytes)| bytes).sum();
    let mut so_far = 0;
    let mut cut = 1;
    for (index, (_, bytes)) in all.iter().enumerate() {
        so_far += *bytes;
        if so_far * 2 >= total {
            cut = index + 1;
            break;
        }
    }
    let cut = cut.clamp(1, all.len() - 1);
    let (last, first) = (all[cut - 1].0, all[cut].0);
    let common = last.iter().zip(first.iter()).take_while(|(a, b)| a == b).count();
    let separator = first[..common + 1].to_vec();
    debug_assert!(separator.as_slice() > last && separator.as_slice() <= first);
    Some(separator)
}

/// A page's whole keys, in slot order, in one buffer.
struct Keys {
    bytes: Vec<u8>,
    /// Where each key ends in `bytes`.
    ends: Vec<usize>,
}

impl Keys {
    fn of<P: PageBytes + ?Sized>(page: &P, shape: &Shape) -> Keys {
        let reader = Slotted::new(page);
        let mut keys = Keys { bytes: Vec::new(), ends: Vec::with_capacity(shape.count) };
        for index in 0..shape.count {
            reader.key_into(index, &mut keys.bytes).expect("invariant: a key");
            keys.ends.push(keys.bytes.len());
        }
        keys
    }

    fn key(&self, index: usize) -> &[u8] {
        let start = index.checked_sub(1).map_or(0, |before| self.ends[before]);
        &self.bytes[start..self.ends[index]]
    }

    /// How many keys are below `key` (the keys are in order).
    fn below(&self, key: &[u8]) -> usize {
        let (mut low, mut high) = (0, self.ends.len());
        while low < high {
            let middle = low + (high - low) / 2;
            if self.key(middle) < key {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        low
    }
}

/// An image of `page`'s entries `range` (whose keys `keys` holds) as a page of its kind,
/// with the given LSN and link: each entry's tail copied from the page as it is laid out,
/// with no allocation per entry (a split's halves, a page laid out again by `compact`).
fn image_of_range<P: PageBytes + ?Sized>(
    page: &P,
    shape: &Shape,
    keys: &Keys,
    range: std::ops::Range<usize>,
    lsn: u64,
    link: u64,
) -> Vec<u8> {
    let key = |index: usize| keys.key(index);
    let prefix =
        common_prefix(range.clone().next().map(key), range.clone().next_back().map(key)).len();
    let bytes = HEADER_BYTES
        + prefix
        + range
            .clone()
            .map(|index| SLOT_BYTES + key(index).len() - prefix + tail_len(page, shape, index))
            .sum::<usize>();
    assert!(bytes <= shape.page_bytes, "a page of {bytes} bytes");
    let start = range.start;
    let image = lay_out(shape.kind, range.map(key), lsn, link, shape.page_bytes, |at, out| {
        let index = start + at;
        let (offset, len) = slot(page, shape, index);
        page.append_out(offset + len, tail_len(page, shape, index), out)
            .expect("invariant: an entry");
    });
    debug_assert_eq!(super::check(&image, shape.page_bytes), Ok(shape.kind));
    image
}

/// Cuts a leaf in two at `separator`: its keys below it stay, those at or above it go to
/// the new page `right_id` (either side may be left empty). The left half links to
/// `right_id`, the right half to the page's old next leaf.
pub fn split_at<P: PageBytes + ?Sized>(page: &P, right_id: u64, separator: &[u8]) -> Split {
    let shape = Shape::of(page);
    let (lsn, link) = header_words(page);
    assert!(shape.kind == Kind::Leaf && right_id != 0, "split_at of an internal page");
    let keys = Keys::of(page, &shape);
    let cut = keys.below(separator);
    let split = Split {
        left: image_of_range(page, &shape, &keys, 0..cut, lsn, right_id),
        right: image_of_range(page, &shape, &keys, cut..shape.count, lsn, link),
        separator: separator.to_vec(),
    };
    debug_assert!(split.left.len() == shape.page_bytes && split.right.len() == shape.page_bytes);
    debug_assert_eq!(
        Slotted::new(&split.left[..]).count().zip(Slotted::new(&split.right[..]).count()),
        Some((cut, shape.count - cut)),
        "every entry in one half"
    );
    split
}

fn split_entries<P: PageBytes + ?Sized>(
    page: &P,
    all: Vec<(Vec<u8>, Vec<u8>)>,
    right_id: u64,
) -> Split {
    let shape = Shape::of(page);
    let (lsn, link) = header_words(page);
    let minimum = match shape.kind {
        Kind::Leaf => 2,
        Kind::Internal => 3,
    };
    assert!(all.len() >= minimum && right_id != 0, "a split of {} entries", all.len());
    let total: usize = all.iter().map(|(k, t)| k.len() + t.len() + SLOT_BYTES).sum();
    let mut so_far = 0;
    let mut cut = 1;
    for (index, (key, tail)) in all.iter().enumerate() {
        so_far += key.len() + tail.len() + SLOT_BYTES;
        if so_far * 2 >= total {
            cut = index + 1;
            break;
        }
    }
    let split = match shape.kind {
        Kind::Leaf => {
            let cut = cut.clamp(1, all.len() - 1);
            let (low, high) = all.split_at(cut);
            let last = &low[low.len() - 1].0;
            let first = &high[0].0;
            let common = last.iter().zip(first.iter()).take_while(|(a, b)| a == b).count();
            Split {
                left: image_of(Kind::Leaf, low, lsn, right_id, shape.page_bytes),
                right: image_of(Kind::Leaf, high, lsn, link, shape.page_bytes),
                separator: first[..common + 1].to_vec(),
            }
        }
        Kind::Internal => {
            // The middle entry goes up; the left keeps those below it, the right those
            // above, its first child being the middle entry's.
            let middle = cut.clamp(1, all.len() - 2);
            let (separator, tail) = &all[middle];
            let child =
                u64::from_le_bytes(tail[..CHILD_BYTES].try_into().expect("invariant: a child"));
            Split {
                left: image_of(Kind::Internal, &all[..middle], lsn, link, shape.page_bytes),
                right: image_of(Kind::Internal, &all[middle + 1..], lsn, child, shape.page_bytes),
                separator: separator.clone(),
            }
        }
    };
    assert!(split.left.len() == shape.page_bytes && split.right.len() == shape.page_bytes);
    split
}

#[cfg(test)]
mod tests;
