//! The tree's read path on the buffer pool: point lookups and leaf chunks for cursors, each
//! page read in place in its frame (`buffer::BufferPool::read`), nothing decoded and nothing
//! allocated per entry.
//!
//! A lookup goes down from the root one validated page read at a time: the child's id comes
//! from a read of its parent that validated. In a copy-on-write tree, pages reachable from
//! a root a reader holds do not change (a page's id gets a new image only after no tree
//! version reaches it), so each level needs only its own validation. In a tree changed in
//! place (`tree::write`), a split moves keys out of a page after a reader may have read its
//! parent: so every descent reads the pool's structure sequence before and after
//! (`stable`), and goes again when a split ran meanwhile; after a few tries it holds
//! splits off (`BufferPool::hold_structure`) for one more, so it always ends.
//!
//! A cursor reads up to a leaf's worth of entries at a time ([`Chunk`], at most a limit the
//! caller sets, so a seek that reads one entry copies few): forward, the entries at or above
//! a key and the key where the rest starts (the first entry not copied, or the separator
//! above the path's leaf at the deepest level that has one); backward, the entries below a
//! key and the key where they start (the first copied, or this leaf's start). A forward
//! chunk remembers where it ended (`Place`: the leaf, its parent and the child's index, the
//! leaf's frame version and the structure sequence), so the next chunk, asked for from
//! where this one ends, goes on in the same leaf or steps to the parent's next child with no
//! descent from the root, as long as no split ran since and, in the same leaf, no writer
//! changed it (its slots may have moved). Otherwise, and after a parent's last child, or
//! for a chunk asked for from elsewhere, it goes down again; so does a read from the
//! remembered place that fails while a split runs (the parent may have fewer children by
//! then: a read past a page's count answers nothing, never its free space as a child).
//! Backward chunks mirror this (`BackPlace`): the next one, asked for from where this one
//! started, takes the slots before it in the same leaf or steps to the parent's previous
//! child, and goes down again only before a parent's first child.
//!
//! Must never: return an entry from a read that did not validate; loop without bound on a
//! damaged tree (depth is bounded, and so is every step).

use std::ops::Range;

use bytes::Bytes;

use tierkv_io::frames::FrameRead;
use tierkv_io::Backoff;

use crate::buffer::{BufferError, BufferPool, PageSource};
use crate::page::slotted::{self, Kind, Slotted, ValueAt};
use crate::page::{InternalPage, LeafPage, OverflowRef, Page, Value};

/// The deepest tree a lookup goes down (a B+tree of fan-out two this deep holds more
/// entries than a block store can address).
pub const MAX_DEPTH: usize = 48;

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// The value, copied into the caller's buffer.
    Inline,
    /// The value lives in overflow blocks.
    Overflow(OverflowRef),
    /// No entry for the key.
    Absent,
}

/// Why a read of the tree failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError<E> {
    /// A page could not be read.
    #[error("{0}")]
    Page(BufferError<E>),
    /// The tree is deeper than any real tree or loops back on itself.
    #[error("the tree under page {root} is more than {MAX_DEPTH} levels deep: it is damaged")]
    TooDeep {
        /// The root.
        root: u64,
    },
}

enum Step<T> {
    Down(u64),
    Leaf(T),
}

/// A step of `chunk_forward`'s descent: the child taken (its index and its parent's count),
/// or the leaf read (the first slot not copied, and its count).
enum Forward {
    Down { child: u64, index: usize, count: usize, next: Option<u64> },
    Leaf { next_slot: usize, leaf_count: usize },
}

/// The child of internal page `page` that holds `key`, and its index; the child's word and
/// header start on their way (`BufferPool::prefetch`) while the caller finishes this level.
#[inline]
fn child_for<S: PageSource>(
    pool: &BufferPool<S>,
    page: &Slotted<'_, FrameRead<'_>>,
    key: &[u8],
) -> Option<(usize, u64)> {
    let index = page.child_index(key)?;
    let child = page.child(index)?;
    pool.prefetch(child);
    Some((index, child))
}

/// Tries before a descent that keeps meeting splits holds them off for its last.
const STABLE_TRIES: usize = 8;

/// The wait between descents that met a split starts at `1 << STABLE_SPIN_STEP` spin-loop
/// hints and doubles after each (in all, 1,020 hints over `STABLE_TRIES`: a few to tens of
/// microseconds, by the CPU).
const STABLE_SPIN_STEP: u32 = 2;

/// Runs `descent` until a run sees no structure change (the pool's structure sequence even
/// and the same before and after it); after `STABLE_TRIES`, runs it once more with
/// structure changes held off. Each run starts afresh (it clears what it fills).
///
/// Between runs it spins, a little longer each time, and never yields: a split holds the
/// structure for microseconds, and a yield hands the CPU to whatever else is runnable on it
/// (the checkpoint thread, the cleaner) for a whole time slice. With yields, scans that met
/// a split were the most frequent callers of `sched_yield` in a YCSB sequence, and D's reads
/// spent half their mean time in the slowest 0.5% (milliseconds each). The last run waits
/// for a split still running by taking the structure lock, asleep until the split ends.
fn stable<S: PageSource, T>(
    pool: &BufferPool<S>,
    mut descent: impl FnMut() -> Result<T, ReadError<S::Error>>,
) -> Result<T, ReadError<S::Error>> {
    let mut backoff = Backoff::from_step(STABLE_SPIN_STEP);
    for _ in 0..STABLE_TRIES {
        let before = pool.structure_seq();
        if before.is_multiple_of(2) {
            let result = descent();
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            // A failure too is only the tree's when no split ran meanwhile: a page read after
            // its parent was split may no longer hold the child index read before.
            if pool.structure_seq() == before {
                return result;
            }
        }
        backoff.spin();
    }
    let _held = pool.hold_structure();
    descent()
}

/// Goes from `root` to the leaf that holds `key` and returns what `at_leaf` read there.
fn descend<S: PageSource, T>(
    pool: &BufferPool<S>,
    root: u64,
    key: &[u8],
    mut at_leaf: impl FnMut(&Slotted<'_, FrameRead<'_>>) -> Option<T>,
) -> Result<T, ReadError<S::Error>> {
    stable(pool, || {
        let mut pid = root;
        for _ in 0..MAX_DEPTH {
            let step = pool
                .read(pid, |page| match page.kind()? {
                    Kind::Internal => Some(Step::Down(child_for(pool, page, key)?.1)),
                    Kind::Leaf => Some(Step::Leaf(at_leaf(page)?)),
                })
                .map_err(ReadError::Page)?;
            match step {
                Step::Down(child) => pid = child,
                Step::Leaf(found) => return Ok(found),
            }
        }
        Err(ReadError::TooDeep { root })
    })
}

#[cfg(test)]
/// Looks `key` up under `root`; an inline value is copied into `value` (cleared first).
pub fn get<S: PageSource>(
    pool: &BufferPool<S>,
    root: u64,
    key: &[u8],
    value: &mut Vec<u8>,
) -> Result<Found, ReadError<S::Error>> {
    get_at(pool, root, key, value).map(|(found, _)| found)
}

/// `get`, with the LSN of the leaf it read (read under the same validation): in a tree
/// changed in place, a reader whose sequence is below it asks the undo for what the key
/// held then.
pub fn get_at<S: PageSource>(
    pool: &BufferPool<S>,
    root: u64,
    key: &[u8],
    value: &mut Vec<u8>,
) -> Result<(Found, u64), ReadError<S::Error>> {
    descend(pool, root, key, |leaf| {
        value.clear();
        let found = match leaf.search(key)? {
            Err(_) => Found::Absent,
            Ok(at) => match leaf.value(at)? {
                ValueAt::Inline { offset, len } => {
                    leaf.inline_into(offset, len, value)?;
                    Found::Inline
                }
                ValueAt::Overflow(overflow) => Found::Overflow(overflow),
            },
        };
        Some((found, leaf.lsn()?))
    })
}

/// A chunk's value: bytes in the chunk's buffer, bytes of its own (a cursor's chunk), or
/// overflow blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChunkValue {
    /// At this range of `Chunk::bytes`.
    Inline(Range<usize>),
    /// Copied into an allocation of its own, handed out as it is (`Chunk::take_value`).
    Owned(Vec<u8>),
    /// An owned value already handed out.
    Taken,
    /// In overflow blocks.
    Overflow(OverflowRef),
}

/// Entries copied out of one leaf, in key order, keys and inline values in one buffer.
#[derive(Debug, Default)]
pub struct Chunk {
    /// Keys and inline values, back to back.
    pub bytes: Vec<u8>,
    /// Each entry's key range in `bytes`, and its value.
    pub entries: Vec<(Range<usize>, ChunkValue)>,
    /// Forward: where the next leaf's keys start; backward: where this leaf's keys start
    /// (so the next chunk ends there). `None` at the tree's end in that direction.
    pub bound: Option<Vec<u8>>,
    /// Where a forward chunk ended, for the next one to go on from (`None`: go down).
    place: Option<Place>,
    /// Where a backward chunk started, for the next one to go on from (`None`: go down).
    back_place: Option<BackPlace>,
    /// Each inline value is copied into an allocation of its own (`ChunkValue::Owned`), so
    /// a cursor hands it out with no second copy; else into `bytes`.
    owned: bool,
    /// The highest LSN of the leaves the chunk read: a change in place above a reader's
    /// sequence lies in the chunk's range only when this is above it too.
    pub lsn: u64,
}

/// Where a forward chunk ended in the tree under `root`: the next entry is slot `next_slot`
/// of leaf `leaf` (past its end: the leaf after it, which is `parent`'s next child).
#[derive(Debug)]
struct Place {
    root: u64,
    leaf: u64,
    /// The leaf's frame version when read: its slots are where they were while it holds.
    leaf_version: u64,
    /// The structure sequence when the place was found: its parent's children are where
    /// they were while it holds.
    structure: u64,
    next_slot: usize,
    leaf_count: usize,
    /// Where the keys after the leaf start (`None`: the tree's end).
    leaf_bound: Option<Vec<u8>>,
    /// The leaf's parent, if the tree has internal pages.
    parent: Option<Parent>,
}

/// Where a backward chunk under `root` started: the entries before it are the slots below
/// `first_slot` of leaf `leaf` (none left: the leaf before it, `parent`'s previous child).
#[derive(Debug)]
struct BackPlace {
    root: u64,
    leaf: u64,
    /// As `Place`'s.
    leaf_version: u64,
    /// As `Place`'s.
    structure: u64,
    first_slot: usize,
    /// Where the leaf's keys start (`None`: the tree's start).
    leaf_start: Option<Vec<u8>>,
    /// The leaf's parent, if the tree has internal pages.
    parent: Option<BackParent>,
}

/// An internal page above leaves, and which of its children a backward chunk read.
#[derive(Debug)]
struct BackParent {
    pid: u64,
    /// The child read (0 is the first child; `i + 1` is slot `i`'s).
    index: usize,
    /// Where the keys of the parent's first child start (`None`: the tree's start).
    start: Option<Vec<u8>>,
}

/// An internal page above leaves, and which of its children a chunk read.
#[derive(Debug)]
struct Parent {
    pid: u64,
    /// The child read (0 is the first child; `i + 1` is slot `i`'s).
    index: usize,
    /// The child after it, as the parent was read (`None`: the last), to prefetch once a
    /// chunk reaches the end of the child read: a hint only, the step there reads the
    /// parent again.
    next: Option<u64>,
    /// The parent's slots: its children are `0..=count`.
    count: usize,
    /// Where the keys after the parent's last child start (`None`: the tree's end).
    bound: Option<Vec<u8>>,
}

impl Chunk {
    /// An empty chunk whose inline values will each be copied into an allocation of their
    /// own (`ChunkValue::Owned`), for a cursor that hands values out.
    pub fn owning_values() -> Chunk {
        Chunk { owned: true, ..Chunk::default() }
    }

    /// Entry `index`'s inline value, moved out and left `Taken`; `None` when it is not an
    /// owned value (inline in `bytes`, overflow, or taken already).
    pub fn take_value(&mut self, index: usize) -> Option<Vec<u8>> {
        let value = &mut self.entries.get_mut(index)?.1;
        if !matches!(value, ChunkValue::Owned(_)) {
            return None;
        }
        match std::mem::replace(value, ChunkValue::Taken) {
            ChunkValue::Owned(bytes) => Some(bytes),
            _ => unreachable!("matched as owned just above"),
        }
    }

    /// Whether any of entries `range` had its value taken.
    pub fn any_taken(&self, range: Range<usize>) -> bool {
        self.entries[range].iter().any(|(_, value)| *value == ChunkValue::Taken)
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.entries.clear();
        self.bound = None;
        self.place = None;
        self.back_place = None;
    }

    /// Entry `index`'s key.
    pub fn key(&self, index: usize) -> &[u8] {
        &self.bytes[self.entries[index].0.clone()]
    }

    /// How many entries have keys below `key` (the entries are in key order).
    pub fn below(&self, key: &[u8]) -> usize {
        self.entries.partition_point(|(at, _)| &self.bytes[at.clone()] < key)
    }

    /// Puts what a snapshot saw over the entries: each key of `before` (in the chunk's range,
    /// ascending) takes its value, or leaves the chunk when it had none (`None`); keys the
    /// chunk lacks come in. For a chunk of a tree changed in place read by a snapshot older
    /// than its leaves (`lsn` above the snapshot's sequence), with the undo's before-images
    /// of its range (`undo::View::before_range`), looked up after the chunk was read.
    pub fn overlay(&mut self, before: &std::collections::BTreeMap<Vec<u8>, Option<Value>>) {
        if before.is_empty() {
            return;
        }
        let old_bytes = std::mem::take(&mut self.bytes);
        let old_entries = std::mem::take(&mut self.entries);
        let mut overlay = before.iter().peekable();
        let owned = self.owned;
        let push = |chunk: &mut Chunk, key: &[u8], value: ChunkValue| {
            let start = chunk.bytes.len();
            chunk.bytes.extend_from_slice(key);
            chunk.entries.push((start..chunk.bytes.len(), value));
        };
        let inline = |chunk: &mut Chunk, bytes: &[u8]| {
            if owned {
                ChunkValue::Owned(bytes.to_vec())
            } else {
                let at = chunk.bytes.len();
                chunk.bytes.extend_from_slice(bytes);
                ChunkValue::Inline(at..at + bytes.len())
            }
        };
        let stored = |chunk: &mut Chunk, value: &Value| match value {
            Value::Inline(bytes) => inline(chunk, bytes),
            Value::Overflow(overflow) => ChunkValue::Overflow(*overflow),
        };
        for (key_range, value) in old_entries {
            let key = &old_bytes[key_range];
            // Keys of the overlay below this one: ones the chunk lacks.
            while let Some((before_key, before_value)) =
                overlay.next_if(|(k, _)| k.as_slice() < key)
            {
                if let Some(value) = before_value {
                    let value = stored(self, value);
                    push(self, before_key, value);
                }
            }
            if let Some((_, before_value)) = overlay.next_if(|(k, _)| k.as_slice() == key) {
                if let Some(value) = before_value {
                    let value = stored(self, value);
                    push(self, key, value);
                }
                continue;
            }
            let value = match value {
                ChunkValue::Inline(range) => inline(self, &old_bytes[range]),
                other => other,
            };
            push(self, key, value);
        }
        for (before_key, before_value) in overlay {
            if let Some(value) = before_value {
                let value = stored(self, value);
                push(self, before_key, value);
            }
        }
        debug_assert!(self
            .entries
            .windows(2)
            .all(|w| self.bytes[w[0].0.clone()] < self.bytes[w[1].0.clone()]));
    }

    /// Copies entries `range` of `leaf` in (forward order).
    fn copy(&mut self, leaf: &Slotted<'_, FrameRead<'_>>, range: Range<usize>) -> Option<()> {
        self.lsn = self.lsn.max(leaf.lsn()?);
        // Each entry's bytes are asked for while the one before is read, so that their
        // misses overlap the copy: as many bytes as the leaf's mean entry (its heap's bytes
        // over its count), and a line more, since entries do not start on one. One thread
        // scanning 50 entries at a time from 300,000 records of 1 KB after a random load
        // took 266-282 ns an entry against 340-366 without (3 runs each, alternating); with
        // the 1,000 records in cache, 185 against 177 (the hints' own cost). The next
        // entry's bytes asked for after its key was read gained less; only its first 256
        // bytes, nothing; the whole stretch of a chunk at once made YCSB E slower (fb402b4).
        let ahead = leaf.mean_entry_bytes().unwrap_or(0).saturating_add(64);
        leaf.prefetch_entry(range.start, ahead);
        let end = range.end;
        for index in range {
            if index + 1 < end {
                leaf.prefetch_entry(index + 1, ahead);
            }
            let start = self.bytes.len();
            let value = leaf.entry_into(index, &mut self.bytes)?;
            let key = start..self.bytes.len();
            let value = match value {
                ValueAt::Inline { offset, len } if self.owned => {
                    let mut bytes = Vec::with_capacity(len);
                    leaf.inline_into(offset, len, &mut bytes)?;
                    ChunkValue::Owned(bytes)
                }
                ValueAt::Inline { offset, len } => {
                    let at = self.bytes.len();
                    leaf.inline_into(offset, len, &mut self.bytes)?;
                    ChunkValue::Inline(at..at + len)
                }
                ValueAt::Overflow(overflow) => ChunkValue::Overflow(overflow),
            };
            self.entries.push((key, value));
        }
        Some(())
    }
}

/// Page `pid` as the writer changes it: a leaf's entries copied into one buffer, whose
/// slices they are (`LeafPage::from_buffer`), or an internal page's separators and children;
/// read in place under one validation, nothing checked again (the page was checked when it
/// was loaded into its frame).
pub fn copy_page<S: PageSource>(
    pool: &BufferPool<S>,
    pid: u64,
) -> Result<Page, ReadError<S::Error>> {
    let mut chunk = Chunk::default();
    let internal = pool
        .read(pid, |page| match page.kind()? {
            Kind::Leaf => {
                chunk.clear();
                chunk.copy(page, 0..page.count()?)?;
                Some(None)
            }
            Kind::Internal => Some(Some(slotted::decode_internal(page.bytes())?)),
        })
        .map_err(ReadError::Page)?;
    if let Some((first_child, separators)) = internal {
        return Ok(Page::Internal(InternalPage::new(first_child, separators)));
    }
    let buffer = Bytes::from(std::mem::take(&mut chunk.bytes));
    let entries = chunk
        .entries
        .into_iter()
        .map(|(key, value)| {
            let value = match value {
                ChunkValue::Inline(bytes) => Value::Inline(buffer.slice(bytes)),
                ChunkValue::Owned(bytes) => Value::inline(bytes),
                ChunkValue::Overflow(overflow) => Value::Overflow(overflow),
                ChunkValue::Taken => unreachable!("a chunk of its own hands nothing out"),
            };
            (buffer.slice(key), value)
        })
        .collect();
    Ok(Page::Leaf(LeafPage::from_buffer(entries, buffer)))
}

/// Copies the entries at or above `from` of the leaf that holds `from` into `chunk`, at
/// most `limit` of them (at least one), and the key where the rest starts: the first entry
/// not copied, or where the next leaf starts. When `from` is where `chunk`'s last forward
/// chunk under `root` ended (its `bound`), the next entries are read from where it ended,
/// without a descent from the root (see the module header).
pub fn chunk_forward<S: PageSource>(
    pool: &BufferPool<S>,
    root: u64,
    from: &[u8],
    limit: usize,
    chunk: &mut Chunk,
) -> Result<(), ReadError<S::Error>> {
    let limit = limit.max(1);
    chunk.lsn = 0;
    let place = chunk.place.take();
    let goes_on = chunk.bound.as_deref() == Some(from);
    if let Some(place) = place.filter(|place| goes_on && place.root == root) {
        if go_on(pool, place, limit, chunk)? {
            debug_assert!(chunk.entries.iter().all(|(key, _)| &chunk.bytes[key.clone()] >= from));
            return Ok(());
        }
    }
    stable(pool, || {
        let structure = pool.structure_seq();
        let mut pid = root;
        // The separator above the child taken, at the deepest level that has one. (A separator
        // is never empty: it is above some key.)
        let mut next: Option<Vec<u8>> = None;
        let mut parent: Option<Parent> = None;
        let mut separator = Vec::new();
        let mut cut = Vec::new();
        for _ in 0..MAX_DEPTH {
            let (step, version) = pool
                .read_versioned(pid, |page| match page.kind()? {
                    Kind::Internal => {
                        separator.clear();
                        let (index, child) = child_for(pool, page, from)?;
                        let count = page.count()?;
                        let mut next = None;
                        if index < count {
                            page.key_into(index, &mut separator)?;
                            next = page.child(index + 1);
                        }
                        Some(Forward::Down { child, index, count, next })
                    }
                    Kind::Leaf => {
                        chunk.clear();
                        let start = match page.search(from)? {
                            Ok(at) | Err(at) => at,
                        };
                        let count = page.count()?;
                        let end = count.min(start.saturating_add(limit));
                        chunk.copy(page, start..end)?;
                        cut_at(page, end, count, &mut cut)?;
                        Some(Forward::Leaf { next_slot: end, leaf_count: count })
                    }
                })
                .map_err(ReadError::Page)?;
            match step {
                Forward::Down { child, index, count, next: after } => {
                    let above = next.clone();
                    if !separator.is_empty() {
                        next = Some(std::mem::take(&mut separator));
                    }
                    parent = Some(Parent { pid, index, next: after, count, bound: above });
                    pid = child;
                }
                Forward::Leaf { next_slot, leaf_count } => {
                    let leaf_bound = next;
                    let place = Place {
                        root,
                        leaf: pid,
                        leaf_version: version,
                        structure,
                        next_slot,
                        leaf_count,
                        leaf_bound,
                        parent,
                    };
                    finish_forward(pool, place, cut, chunk);
                    return Ok(());
                }
            }
        }
        Err(ReadError::TooDeep { root })
    })
}

/// Copies the key of slot `end` of `page` into `cut` when the chunk stopped short of the
/// leaf's end (`count`), else leaves `cut` empty.
fn cut_at(
    page: &Slotted<'_, FrameRead<'_>>,
    end: usize,
    count: usize,
    cut: &mut Vec<u8>,
) -> Option<()> {
    cut.clear();
    if end < count {
        page.key_into(end, cut)?;
    }
    Some(())
}

/// Sets `chunk`'s bound from where it ended (`cut`, the first entry not copied, or the
/// leaf's bound when the chunk reached the leaf's end), and keeps the place. A chunk that
/// reached its leaf's end asks for the next leaf's head (`Parent::next`), which the
/// cursor's next step reads.
fn finish_forward<S: PageSource>(
    pool: &BufferPool<S>,
    place: Place,
    cut: Vec<u8>,
    chunk: &mut Chunk,
) {
    debug_assert_eq!(cut.is_empty(), place.next_slot >= place.leaf_count);
    chunk.bound =
        if place.next_slot < place.leaf_count { Some(cut) } else { place.leaf_bound.clone() };
    if place.next_slot >= place.leaf_count {
        if let Some(next) = place.parent.as_ref().and_then(|parent| parent.next) {
            pool.prefetch_head(next);
        }
    }
    chunk.place = Some(place);
}

/// A child of an internal page, the separator asked for (empty for none) and the child
/// after it (`None`: the last).
type ChildAndSeparator = (u64, Vec<u8>, Option<u64>);

/// Child `index` of internal page `pid`, the key of slot `separator_at` (empty for
/// `None`): the separator where the child's keys start or end, and child `index + 1` when
/// there is one (for `Parent::next`), read under one validation.
fn child_and_separator<S: PageSource>(
    pool: &BufferPool<S>,
    pid: u64,
    index: usize,
    separator_at: Option<usize>,
) -> Result<ChildAndSeparator, ReadError<S::Error>> {
    let mut separator = Vec::new();
    let (child, next) = pool
        .read(pid, |page| {
            if page.kind()? != Kind::Internal {
                return None;
            }
            separator.clear();
            if let Some(at) = separator_at {
                page.key_into(at, &mut separator)?;
            }
            let next = if index < page.count()? { page.child(index + 1) } else { None };
            Some((page.child(index)?, next))
        })
        .map_err(ReadError::Page)?;
    Ok((child, separator, next))
}

/// A cursor's read from a remembered place: its result, or `None` (go down from the root)
/// when it failed after a split ran since the place was found (the place's parent may have
/// fewer children now, or its leaf other keys), since the failure then says nothing about
/// the tree. A failure with no split since is the tree's, and is returned.
fn moved_or<S: PageSource, T>(
    pool: &BufferPool<S>,
    structure: u64,
    read: Result<T, ReadError<S::Error>>,
) -> Result<Option<T>, ReadError<S::Error>> {
    match read {
        Ok(read) => Ok(Some(read)),
        Err(error) => {
            std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
            if pool.structure_seq() == structure {
                Err(error)
            } else {
                Ok(None)
            }
        }
    }
}

/// Where a backward chunk read from `place` starts: its first entry when it stopped short
/// of the leaf's first slot, else the leaf's start.
fn back_start(chunk: &Chunk, place: &BackPlace) -> Option<Vec<u8>> {
    if place.first_slot > 0 {
        chunk.entries.first().map(|(key, _)| chunk.bytes[key.clone()].to_vec())
    } else {
        place.leaf_start.clone()
    }
}

/// Reads the next chunk from `place`: the rest of its leaf, or the parent's next child.
/// False when it cannot (the parent's last child was read, the tree has no parent, or a
/// leaf is not where one should be): the caller goes down from the root.
fn go_on<S: PageSource>(
    pool: &BufferPool<S>,
    mut place: Place,
    limit: usize,
    chunk: &mut Chunk,
) -> Result<bool, ReadError<S::Error>> {
    // A split since the place was found may have moved what it names.
    if pool.structure_seq() != place.structure || !place.structure.is_multiple_of(2) {
        return Ok(false);
    }
    // The leaf's version to find again, or `None` for a sibling read afresh.
    let mut expect = Some(place.leaf_version);
    if place.next_slot >= place.leaf_count {
        let Some(parent) = place.parent.as_mut().filter(|p| p.index < p.count) else {
            return Ok(false);
        };
        let index = parent.index + 1;
        let separator_at = (index < parent.count).then_some(index);
        let Some((leaf, separator, next)) = moved_or(
            pool,
            place.structure,
            child_and_separator(pool, parent.pid, index, separator_at),
        )?
        else {
            return Ok(false);
        };
        parent.index = index;
        parent.next = next;
        place.leaf = leaf;
        place.next_slot = 0;
        place.leaf_bound =
            if separator.is_empty() { parent.bound.clone() } else { Some(separator) };
        expect = None;
    }
    let start = place.next_slot;
    let mut cut = Vec::new();
    let read = pool
        .read_versioned(place.leaf, |page| {
            if page.kind()? != Kind::Leaf {
                return Some(None);
            }
            chunk.clear();
            let count = page.count()?;
            let end = count.min(start.saturating_add(limit));
            chunk.copy(page, start..end)?;
            cut_at(page, end, count, &mut cut)?;
            Some(Some((end, count)))
        })
        .map_err(ReadError::Page);
    let Some((read, version)) = moved_or(pool, place.structure, read)? else {
        return Ok(false);
    };
    let Some((next_slot, leaf_count)) = read else {
        // Not a leaf where a leaf should be: the tree is damaged; a descent says how.
        return Ok(false);
    };
    // The leaf changed since its last chunk (its slots may have moved), or a split ran
    // while the sibling was read: go down again.
    std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
    if expect.is_some_and(|expected| expected != version) || pool.structure_seq() != place.structure
    {
        return Ok(false);
    }
    place.leaf_version = version;
    place.next_slot = next_slot;
    place.leaf_count = leaf_count;
    finish_forward(pool, place, cut, chunk);
    Ok(true)
}

/// Copies the entries below `before` (all of them for `None`) of the leaf that holds the
/// keys just below it into `chunk`, the last `limit` of them at most (at least one), and the
/// key where what was copied starts: that leaf's start, or the first entry copied.
pub fn chunk_backward<S: PageSource>(
    pool: &BufferPool<S>,
    root: u64,
    before: Option<&[u8]>,
    limit: usize,
    chunk: &mut Chunk,
) -> Result<(), ReadError<S::Error>> {
    let limit = limit.max(1);
    chunk.lsn = 0;
    let place = chunk.back_place.take();
    let goes_on = before.is_some() && chunk.bound.as_deref() == before;
    if let Some(place) = place.filter(|place| goes_on && place.root == root) {
        if go_back(pool, place, limit, chunk)? {
            debug_assert!(chunk
                .entries
                .iter()
                .all(|(key, _)| before.is_none_or(|b| &chunk.bytes[key.clone()] < b)));
            return Ok(());
        }
    }
    let mut key: Option<Vec<u8>> = before.map(<[u8]>::to_vec);
    // A leaf with nothing below the key (the key is its first, or it is empty): the keys
    // below are before the leaf's start, so go again by that. Bounded, as every walk is.
    for _ in 0..MAX_DEPTH {
        let place = descend_below(pool, root, key.as_deref(), limit, chunk)?;
        let start = back_start(chunk, &place);
        if !chunk.entries.is_empty() || start.is_none() {
            chunk.bound = start;
            chunk.back_place = Some(place);
            return Ok(());
        }
        key = start;
    }
    Err(ReadError::TooDeep { root })
}

/// Reads the chunk before `place`: the slots below its first in the same leaf, or the last
/// of the leaf before (the parent's previous child; past empty ones). False when it cannot
/// (the parent's first child was read, the tree has no parent, or a leaf is not where one
/// should be): the caller goes down from the root.
fn go_back<S: PageSource>(
    pool: &BufferPool<S>,
    mut place: BackPlace,
    limit: usize,
    chunk: &mut Chunk,
) -> Result<bool, ReadError<S::Error>> {
    if pool.structure_seq() != place.structure || !place.structure.is_multiple_of(2) {
        return Ok(false);
    }
    // The leaf's version to find again, or `None` for a sibling read afresh.
    let mut expect = Some(place.leaf_version);
    // Bounded: each pass either returns or steps to a child of a smaller index.
    loop {
        if place.first_slot == 0 {
            let Some(parent) = place.parent.as_mut().filter(|p| p.index > 0) else {
                return Ok(false);
            };
            let index = parent.index - 1;
            let read = child_and_separator(pool, parent.pid, index, index.checked_sub(1));
            let Some((leaf, separator, _)) = moved_or(pool, place.structure, read)? else {
                return Ok(false);
            };
            parent.index = index;
            place.leaf = leaf;
            place.first_slot = usize::MAX;
            place.leaf_start = if index > 0 { Some(separator) } else { parent.start.clone() };
            expect = None;
        }
        let end = place.first_slot;
        let read = pool
            .read_versioned(place.leaf, |page| {
                if page.kind()? != Kind::Leaf {
                    return Some(None);
                }
                chunk.clear();
                let end = end.min(page.count()?);
                let first = end.saturating_sub(limit);
                chunk.copy(page, first..end)?;
                Some(Some(first))
            })
            .map_err(ReadError::Page);
        let Some((read, version)) = moved_or(pool, place.structure, read)? else {
            return Ok(false);
        };
        let Some(first) = read else {
            // Not a leaf where a leaf should be: the tree is damaged; a descent says how.
            return Ok(false);
        };
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        if expect.is_some_and(|expected| expected != version)
            || pool.structure_seq() != place.structure
        {
            return Ok(false);
        }
        place.leaf_version = version;
        place.first_slot = first;
        if chunk.entries.is_empty() && place.leaf_start.is_some() {
            // An empty leaf: on to the one before it.
            debug_assert_eq!(first, 0);
            continue;
        }
        chunk.bound = back_start(chunk, &place);
        chunk.back_place = Some(place);
        return Ok(true);
    }
}

/// One walk of `chunk_backward`: to the leaf holding the keys just below `before` (the last
/// leaf for `None`), copying them; returns where the chunk started in the tree (the leaf, its
/// first slot copied, where the leaf starts, and its parent).
fn descend_below<S: PageSource>(
    pool: &BufferPool<S>,
    root: u64,
    before: Option<&[u8]>,
    limit: usize,
    chunk: &mut Chunk,
) -> Result<BackPlace, ReadError<S::Error>> {
    stable(pool, || {
        let structure = pool.structure_seq();
        let mut pid = root;
        let mut start: Option<Vec<u8>> = None;
        let mut parent: Option<BackParent> = None;
        let mut scratch = Vec::new();
        let mut index = 0;
        let mut first_slot = 0;
        for _ in 0..MAX_DEPTH {
            let (step, version) = pool
                .read_versioned(pid, |page| {
                    // The child, or the leaf's end: where `before` falls; when it equals a key,
                    // the keys just below it are in the child (or the part) before that key's.
                    let at = match before {
                        None => page.count()?,
                        Some(key) => match page.search(key)? {
                            Ok(at) | Err(at) => at,
                        },
                    };
                    match page.kind()? {
                        Kind::Internal => {
                            scratch.clear();
                            if at > 0 {
                                page.key_into(at - 1, &mut scratch)?;
                            }
                            index = at;
                            Some(Step::Down(page.child(at)?))
                        }
                        Kind::Leaf => {
                            chunk.clear();
                            first_slot = at.saturating_sub(limit);
                            chunk.copy(page, first_slot..at)?;
                            Some(Step::Leaf(()))
                        }
                    }
                })
                .map_err(ReadError::Page)?;
            match step {
                Step::Down(child) => {
                    let above = start.clone();
                    if !scratch.is_empty() {
                        start = Some(std::mem::take(&mut scratch));
                    }
                    parent = Some(BackParent { pid, index, start: above });
                    pid = child;
                }
                Step::Leaf(()) => {
                    return Ok(BackPlace {
                        root,
                        leaf: pid,
                        leaf_version: version,
                        structure,
                        first_slot,
                        leaf_start: start,
                        parent,
                    });
                }
            }
        }
        Err(ReadError::TooDeep { root })
    })
}

#[cfg(test)]
mod tests;
