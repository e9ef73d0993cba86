//! Undo: the before-images that let readers see a snapshot while writers change pages in
//! place (`db/snapshot.rs` reads them).
//!
//! A write at sequence `t` that changes a key in its leaf's frame first records here what
//! the key held before (`Undo::record`: its value, or `None` when it had none), then changes
//! the frame. A reader at sequence `s` that finds the key in a leaf whose LSN is above `s`
//! asks its [`View`] for the before-image of the key's first change after `s`
//! ([`View::before`]): `Some` is the key as of `s`, `None` means no change after `s` was
//! recorded, so the leaf's value is the key's at `s`. Why that is right: the changes of one
//! key are recorded in the order of their sequence numbers (the writer latches the leaf
//! before the log numbers its change), so the first recorded change after `s` is the first
//! change after `s`, and what it replaced is what stood at `s`.
//!
//! **Segments.** Before-images go into the current *segment*, a memtable (the same skip
//! list and key filter) keyed by key and `u64::MAX - t`, so its "newest at or below" lookup
//! answers "the first change after `s`". Segments form a chain, each linking to the one made
//! after it. A [`View`] holds the first segment its readers may need and reaches the later
//! ones through the links: a reader's view is taken with its snapshot (the engine keeps one
//! in each version it publishes), so old segments are freed when the last view that starts
//! at or before them is dropped, with no reference counting on the read path.
//!
//! **Rotation.** Once the current segment holds `segment_bytes`, `Undo::rotate` makes a new
//! one and returns the view new readers should take: from the oldest segment that may hold
//! a change not yet visible. A segment is *sealed* at the log's last sequence number when
//! it stops being current (every writer that recorded into it was numbered by then: a writer
//! loads the current segment after the log numbers its write), and new views leave it out
//! once the visible sequence passes its seal.
//!
//! **Too old.** Before-images count in `bytes`. When they pass `limit`, `Undo::trim` drops
//! the oldest segments no new view needs, and their memory goes as soon as no reader is
//! inside them: a reader of a snapshot that needed one gets [`TooOld`] rather than a wrong
//! answer, and the store does not grow without bound for a snapshot held forever.
//!
//! **Race.** A writer is numbered, then records, then changes its leaf, so a lookup may
//! miss a change whose record is still on its way, which is right while its leaf change is
//! not made yet. But the change after it may land in the next segment (a rotation between
//! the two), and a lookup that asked the older segment before the first record and the
//! newer after the second would answer with the second's before-image: a value newer than
//! the snapshot. Two facts rule this out: a key's changes are recorded one after another
//! (the leaf latch), and a record found means every earlier one is in place. So a range
//! lookup reads the segments newest first, each older one overwriting what a newer one
//! said, and a point lookup that finds a change past the first segment it asks asks the
//! segments before that one again.
//!
//! Must never: answer a lookup with a before-image of a change at or below the reader's
//! sequence, or miss one above it that was recorded before the reader saw its change;
//! answer from a dropped segment.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use arc_swap::{ArcSwap, ArcSwapOption};
use bytes::Bytes;

use crate::memtable::Memtable;
use crate::page::slotted::edit::ValueRef;
use crate::page::{OverflowRef, Value};

/// A reader's snapshot needed before-images that were dropped to keep memory in bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the snapshot is too old: the changes since it were more than the undo limit")]
pub struct TooOld;

/// What a key held before a change: its value (inline, or where its overflow blocks are),
/// or `None` when it had none.
pub type Before = Option<Value>;

/// Tags of a before-image's bytes in a segment: an inline value's bytes follow, or an
/// overflow reference's fields (length, first block, block count, little-endian).
const INLINE: u8 = 0;
const OVERFLOW: u8 = 1;

fn encode(before: Option<ValueRef<'_>>) -> Option<Bytes> {
    before.map(|value| {
        let mut out = Vec::new();
        match value {
            ValueRef::Inline(bytes) => {
                out.reserve(1 + bytes.len());
                out.push(INLINE);
                out.extend_from_slice(bytes);
            }
            ValueRef::Overflow(overflow) => {
                out.push(OVERFLOW);
                out.extend_from_slice(&overflow.len.to_le_bytes());
                out.extend_from_slice(&overflow.first.to_le_bytes());
                out.extend_from_slice(&overflow.blocks.to_le_bytes());
            }
        }
        Bytes::from(out)
    })
}

fn decode(stored: Option<Bytes>) -> Before {
    let bytes = stored?;
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    Some(match bytes[0] {
        INLINE => Value::Inline(bytes.slice(1..)),
        tag => {
            assert!(tag == OVERFLOW && bytes.len() == 21, "a before-image tagged {tag}");
            let blocks = u32::from_le_bytes(bytes[17..21].try_into().expect("4 bytes"));
            Value::Overflow(OverflowRef { len: word(1), first: word(9), blocks })
        }
    })
}

/// One segment of before-images.
struct Segment {
    /// `None` once dropped (`Undo::trim`).
    before: ArcSwapOption<Memtable>,
    /// Set once the segment is dropped: readers that needed it get `TooOld`.
    dropped: AtomicBool,
    /// The log's last sequence number when the segment stopped being current; `u64::MAX`
    /// while it is current.
    sealed_at: AtomicU64,
    /// The segment made after this one.
    next: OnceLock<Arc<Segment>>,
    /// Bytes counted for this segment in `Undo::bytes`, given back when it drops.
    counted: AtomicUsize,
    total: Arc<AtomicUsize>,
}

impl Segment {
    fn new(segment_bytes: usize, total: &Arc<AtomicUsize>) -> Arc<Segment> {
        let before = Memtable::with_capacity(segment_bytes);
        let bytes = before.bytes();
        total.fetch_add(bytes, Ordering::Relaxed);
        Arc::new(Segment {
            before: ArcSwapOption::from_pointee(before),
            dropped: AtomicBool::new(false),
            sealed_at: AtomicU64::new(u64::MAX),
            next: OnceLock::new(),
            counted: AtomicUsize::new(bytes),
            total: Arc::clone(total),
        })
    }

    fn drop_contents(&self) {
        self.dropped.store(true, Ordering::Release);
        self.before.store(None);
        let counted = self.counted.swap(0, Ordering::Relaxed);
        self.total.fetch_sub(counted, Ordering::Relaxed);
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        let counted = self.counted.swap(0, Ordering::Relaxed);
        self.total.fetch_sub(counted, Ordering::Relaxed);
        // A long chain drops one link at a time, not by recursion.
        let mut next = self.next.take();
        while let Some(segment) = next {
            next = match Arc::try_unwrap(segment) {
                Ok(mut alone) => alone.next.take(),
                Err(_) => None,
            };
        }
    }
}

/// The before-images of every change since the oldest live view (see the module header).
pub struct Undo {
    /// Where `record` puts before-images.
    current: ArcSwap<Segment>,
    /// Segments a new view may need, oldest first; the last is the current one.
    recent: Mutex<VecDeque<Arc<Segment>>>,
    /// Every segment not yet freed, oldest first (for `trim`).
    all: Mutex<VecDeque<Weak<Segment>>>,
    bytes: Arc<AtomicUsize>,
    segment_bytes: usize,
    limit: usize,
}

impl std::fmt::Debug for Undo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Undo").field("bytes", &self.bytes()).field("limit", &self.limit).finish()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Undo {
    /// An empty undo that rotates its segments at `segment_bytes` and drops old ones past
    /// `limit` bytes in all.
    pub fn new(segment_bytes: usize, limit: usize) -> Undo {
        assert!(
            segment_bytes > 0 && limit >= segment_bytes,
            "undo limits {segment_bytes}, {limit}"
        );
        let bytes = Arc::new(AtomicUsize::new(0));
        let first = Segment::new(segment_bytes, &bytes);
        Undo {
            current: ArcSwap::new(Arc::clone(&first)),
            recent: Mutex::new(VecDeque::from([Arc::clone(&first)])),
            all: Mutex::new(VecDeque::from([Arc::downgrade(&first)])),
            bytes,
            segment_bytes,
            limit,
        }
    }

    /// A view from the oldest segment a new reader may need.
    pub fn view(&self) -> View {
        View {
            first: Arc::clone(lock(&self.recent).front().expect("invariant: a current segment")),
        }
    }

    /// Records that `key` held `before` until the change numbered `sequence`. Call it after
    /// the log numbered the change and before the change is made where readers can see it.
    pub fn record(&self, key: &[u8], sequence: u64, before: Option<ValueRef<'_>>) {
        assert!(sequence > 0 && sequence < u64::MAX, "undo of sequence {sequence}");
        let segment = self.current.load();
        // A guard, not a clone: no reference count moves on a writer's path.
        let guard = segment.before.load();
        let Some(memtable) = guard.as_ref() else {
            unreachable!("the current segment is never dropped");
        };
        let added = memtable.insert_bytes(key, u64::MAX - sequence, encode(before));
        segment.counted.fetch_add(added, Ordering::Relaxed);
        self.bytes.fetch_add(added, Ordering::Relaxed);
        debug_assert!(memtable.get(key, u64::MAX - sequence).is_some());
    }

    /// Whether the current segment is full: time to `rotate`.
    pub fn full(&self) -> bool {
        self.current.load().counted.load(Ordering::Relaxed) >= self.segment_bytes
    }

    /// Starts a new current segment, the old one sealed at `last` (the log's last sequence
    /// number, read after this call began: every writer that recorded into the old segment
    /// was numbered by then), and returns the view new readers should take, given that every
    /// change up to `visible` is visible.
    pub fn rotate(&self, last: impl FnOnce() -> u64, visible: u64) -> View {
        let mut recent = lock(&self.recent);
        let old = self.current.load_full();
        let new = Segment::new(self.segment_bytes, &self.bytes);
        assert!(
            old.next.set(Arc::clone(&new)).is_ok(),
            "invariant: the current segment has no next"
        );
        self.current.store(Arc::clone(&new));
        // A writer that loaded the old segment did so before the store above, after the log
        // numbered its change: `last`, read after the store, covers it.
        std::sync::atomic::fence(Ordering::SeqCst);
        old.sealed_at.store(last(), Ordering::Release);
        recent.push_back(Arc::clone(&new));
        lock(&self.all).push_back(Arc::downgrade(&new));
        while recent.len() > 1
            && recent.front().is_some_and(|s| s.sealed_at.load(Ordering::Acquire) <= visible)
        {
            recent.pop_front();
        }
        let view = View { first: Arc::clone(recent.front().expect("invariant: the new segment")) };
        assert!(Arc::ptr_eq(recent.back().expect("new"), &new));
        view
    }

    /// Drops the oldest segments no new view needs while the before-images pass `limit`;
    /// how many it dropped.
    pub fn trim(&self) -> usize {
        let recent = lock(&self.recent);
        let needed = recent.front().map(Arc::as_ptr);
        let mut all = lock(&self.all);
        let mut dropped = 0;
        while self.bytes() > self.limit {
            let Some(oldest) = all.front() else { break };
            let Some(segment) = oldest.upgrade() else {
                all.pop_front();
                continue;
            };
            if Some(Arc::as_ptr(&segment)) == needed {
                break;
            }
            segment.drop_contents();
            all.pop_front();
            dropped += 1;
        }
        all.retain(|segment| segment.strong_count() > 0);
        dropped
    }

    /// Bytes the before-images of every segment not yet freed take.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

/// What a reader may need of the undo: every segment from the first that held a change not
/// yet visible when the view was taken.
#[derive(Clone)]
pub struct View {
    first: Arc<Segment>,
}

impl std::fmt::Debug for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View").finish_non_exhaustive()
    }
}

impl View {
    /// The segments from the view's first on that may hold a change after `sequence` (those
    /// sealed above it, and the current one), oldest first.
    fn after(&self, sequence: u64) -> impl Iterator<Item = &Arc<Segment>> {
        std::iter::successors(Some(&self.first), |segment| segment.next.get())
            .filter(move |segment| segment.sealed_at.load(Ordering::Acquire) > sequence)
    }

    /// What `key` held at `sequence`, if a change after it was recorded; `Ok(None)` when
    /// none was, so that what the page holds now is what it held then.
    pub fn before(&self, key: &[u8], sequence: u64) -> Result<Option<Before>, TooOld> {
        let wanted = u64::MAX - sequence - 1;
        // The oldest segment's answer, unless a writer's record into it was still on its way
        // (see `Race` in the module header): a change found in a later segment means every
        // earlier change of the key was recorded before it, so the segments before that one
        // are asked again, and the oldest that answers now wins.
        let mut found_in = None;
        for segment in self.after(sequence) {
            if let Some(found) = segment.get(key, wanted)? {
                found_in = Some((segment, found));
                break;
            }
        }
        let Some((found_at, mut found)) = found_in else { return Ok(None) };
        for segment in self.after(sequence).take_while(|s| !Arc::ptr_eq(s, found_at)) {
            if let Some(earlier) = segment.get(key, wanted)? {
                found = earlier;
                break;
            }
        }
        let changed = u64::MAX - found.sequence;
        assert!(changed > sequence, "a change at or below the snapshot");
        Ok(Some(decode(found.value)))
    }

    /// For every key from `start` (inclusive) to `end` (exclusive; `None`: no end) with a
    /// change after `sequence`, what it held at `sequence`, in key order: the overlay a scan
    /// puts over what the pages hold now.
    pub fn before_range(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        sequence: u64,
    ) -> Result<BTreeMap<Vec<u8>, Before>, TooOld> {
        let wanted = u64::MAX - sequence - 1;
        // Newest segment first, each older one overwriting (see `Race` in the module
        // header): a key's change found in a segment was recorded after every earlier change
        // of it, so the older segments, read later, hold those.
        let segments: Vec<&Arc<Segment>> = self.after(sequence).collect();
        let mut out = BTreeMap::new();
        for segment in segments.into_iter().rev() {
            for (key, found) in segment.scan(start, end, wanted)? {
                assert!(u64::MAX - found.sequence > sequence, "a change at or below the snapshot");
                out.insert(key, decode(found.value));
            }
        }
        Ok(out)
    }
}

impl Segment {
    /// The key's newest before-image at or below the memtable sequence `wanted`; `TooOld`
    /// once the segment was dropped.
    fn get(&self, key: &[u8], wanted: u64) -> Result<Option<crate::memtable::Found>, TooOld> {
        let found = match &*self.before.load() {
            Some(memtable) => memtable.get(key, wanted),
            None => return Err(TooOld),
        };
        // Checked after the lookup: a drop during it may have cut what it saw.
        if self.dropped.load(Ordering::Acquire) {
            return Err(TooOld);
        }
        Ok(found)
    }

    /// `get` for every key of a range.
    fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        wanted: u64,
    ) -> Result<Vec<crate::memtable::Scanned>, TooOld> {
        let (found, _) = match &*self.before.load() {
            Some(memtable) => memtable.scan_ahead(start, end, wanted, usize::MAX),
            None => return Err(TooOld),
        };
        if self.dropped.load(Ordering::Acquire) {
            return Err(TooOld);
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests;
