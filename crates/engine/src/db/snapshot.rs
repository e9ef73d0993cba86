//! Reads of a consistent view: `Snapshot` (point lookups as of one sequence number) and
//! `Iter` (a range scan of a snapshot from both ends), which reads the tree a chunk (a
//! leaf's worth) at a time.
//!
//! The tree changes in place. A lookup that finds its key in a leaf whose LSN is above the
//! snapshot's sequence asks the undo what the key held then (`undo::View::before`); a chunk
//! read from such leaves gets the before-images of its key range laid over it
//! (`Chunk::overlay`). When the undo dropped what a snapshot needed (it keeps up to twice
//! `write_buffer_size`), the read fails with `Error::SnapshotTooOld`, never a wrong answer.
//!
//! A snapshot holds its `Version` (tree root, undo view, epoch), so no block it can reach
//! is deleted while it lives.
//!
//! An `Iter` has two ends consuming one range. What neither end has loaded yet is the keys
//! from `low` to `high`; each end loads chunks from its side of that into its own buffer,
//! so the two buffers never share a key. Once nothing is left between them, the two
//! buffers become one, which both ends take from, and `low` and `high` mark how far each
//! end has gone, for a seek.
//!
//! Must never: return a value newer than the snapshot's sequence, or one a change at or
//! below it replaced; return a key twice, or a key outside the range, from either end.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::Arc;

use super::{Inner, Version};
use crate::batch::check_key;
use crate::page::{OverflowRef, Value};
use crate::range::{self, successor, KeyBounds, KeyRange};
use crate::striped::{Gauge, Taken};
use crate::tree::read::{Chunk, ChunkValue, Found};
use crate::{Error, Result};

/// A version and a sequence number taken together: a snapshot's, or, for a point read of
/// the store, borrowed for the read alone (no reference count taken).
pub(super) struct View<'a> {
    pub(super) inner: &'a Inner,
    pub(super) version: &'a Arc<Version>,
    pub(super) sequence: u64,
}

thread_local! {
    /// A buffer for a value read from a frame on its way to a `get_with` closure: one per
    /// thread, taken out while in use (so a closure that reads again gets a new one).
    static SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

impl View<'_> {
    /// Looks `key` up as of the view's sequence: its value (inline, in `value`) or where
    /// its overflow blocks are. The leaf's value, unless the leaf changed after the
    /// sequence and the undo holds what the key had then.
    fn tree_get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<Found> {
        let (found, lsn) = self.inner.pages.get_at(self.version.tree.root, key, value)?;
        if lsn <= self.sequence {
            return Ok(found);
        }
        let before = self.version.undo.before(key, self.sequence).map_err(|_| self.too_old())?;
        let Some(before) = before else {
            // No change of the key after the sequence: the leaf's value stands.
            return Ok(found);
        };
        value.clear();
        Ok(match before {
            None => Found::Absent,
            Some(Value::Inline(bytes)) => {
                value.extend_from_slice(&bytes);
                Found::Inline
            }
            Some(Value::Overflow(overflow)) => Found::Overflow(overflow),
        })
    }

    pub(super) fn too_old(&self) -> Error {
        Error::SnapshotTooOld { limit: self.inner.options.undo_limit() }
    }

    pub(super) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        self.inner.check_open()?;
        let mut value = Vec::new();
        match self.tree_get(key, &mut value)? {
            Found::Absent => Ok(None),
            Found::Inline => Ok(Some(value)),
            Found::Overflow(overflow) => Ok(Some(self.inner.pages.read_overflow(&overflow)?)),
        }
    }

    pub(super) fn get_with<T>(
        &self,
        key: &[u8],
        read: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>> {
        check_key(key)?;
        self.inner.check_open()?;
        let mut value = SCRATCH.take();
        let found = self.tree_get(key, &mut value);
        let result = match found {
            Err(error) => Err(error),
            Ok(Found::Absent) => Ok(None),
            Ok(Found::Inline) => Ok(Some(read(&value))),
            Ok(Found::Overflow(overflow)) => self
                .inner
                .pages
                .read_overflow(&overflow)
                .map(|value| Some(read(&value)))
                .map_err(Error::from),
        };
        // A value of a page or less goes back for the next read; a larger buffer is let go.
        if value.capacity() <= MAX_SCRATCH_BYTES {
            SCRATCH.set(value);
        }
        result
    }

    pub(super) fn get_into(&self, key: &[u8], buffer: &mut Vec<u8>) -> Result<bool> {
        buffer.clear();
        check_key(key)?;
        self.inner.check_open()?;
        let found = self.tree_get(key, buffer);
        match found {
            Ok(Found::Absent) => Ok(false),
            Ok(Found::Inline) => Ok(true),
            Ok(Found::Overflow(overflow)) => {
                let value = self.inner.pages.read_overflow(&overflow);
                buffer.clear();
                buffer.extend_from_slice(&value?);
                Ok(true)
            }
            Err(error) => {
                buffer.clear();
                Err(error)
            }
        }
    }

    /// Whether `key` has a value; a value in overflow blocks is not read.
    pub(super) fn contains_key(&self, key: &[u8]) -> Result<bool> {
        check_key(key)?;
        self.inner.check_open()?;
        let mut value = SCRATCH.take();
        let found = self.tree_get(key, &mut value);
        if value.capacity() <= MAX_SCRATCH_BYTES {
            SCRATCH.set(value);
        }
        Ok(!matches!(found?, Found::Absent))
    }

    fn resolve(&self, value: Held) -> Result<Vec<u8>> {
        match value {
            Held::Bytes(bytes) => Ok(bytes),
            Held::Overflow(overflow) => Ok(self.inner.pages.read_overflow(&overflow)?),
        }
    }
}

/// The largest buffer a thread keeps for `get_with` between reads.
const MAX_SCRATCH_BYTES: usize = 64 << 10;

/// Entries an iterator's end takes from each source at first: a seek that reads one entry
/// copies no other. Each refill doubles it, up to `ITER_CHUNK_MAX`. (At 4, `bench engine`
/// seekrandom ran at 683–691K ops/s against 892–917K at 1, alternating.) An iterator with
/// a `limit` takes what is left of it at once instead (YCSB E, whose scans say their
/// length: 130–132K ops/s against 124–127K doubling from 1, alternating, 3 rounds).
const ITER_CHUNK_FIRST: usize = 1;

/// The most entries an iterator's end takes from each source at a time.
const ITER_CHUNK_MAX: usize = 256;

/// Which writes may leave their before-images out of the undo: a write of one key that
/// is published without waiting for the log (`Buffered`, `None`) while no snapshot lives.
///
/// Only snapshots (and the iterators, transactions and backups made of them) read the undo
/// for a change they must not see; a point read that finds a change above its sequence
/// with no before-image takes the leaf's value, the write's, which is about to be published
/// and readers of the store already see unsynced writes. So the undo's skip-list insert,
/// the largest single cost of a small write, is needed only while a snapshot lives.
///
/// The protocol, all `SeqCst`: such a write, numbered `t` with its leaf latched, finding
/// `count` at zero, raises `unrecorded` to `t` and then reads `count` again; at zero it
/// records nothing. A snapshot adds itself to `count`, then reads `unrecorded` and waits
/// until that is visible before it takes its sequence. In the single order of those
/// operations, a write that read zero raised `unrecorded` before the snapshot counted
/// itself, so the snapshot reads `t` or more and its sequence covers `t`: it never needs
/// `t`'s before-image. Every write after the snapshot counted itself records, until the
/// last snapshot is dropped.
///
/// Must never: let a snapshot take a sequence below a write that recorded nothing and may
/// not have changed its leaf yet; let a write whose batch has more than one key, or that
/// waits for the log, leave its before-images out.
#[derive(Default)]
pub(super) struct LiveSnapshots {
    /// Snapshots alive, each counted on its taker's stripe (`Gauge`): taking one writes a
    /// line other threads rarely write, and a write reads every stripe.
    count: Gauge,
    /// The highest sequence number of a write that may have recorded nothing.
    unrecorded: std::sync::atomic::AtomicU64,
}

impl LiveSnapshots {
    /// Whether the write of one key numbered `lsn` may leave its before-image out (see the
    /// type's header); called with its leaf latched, before the leaf changes.
    pub(super) fn unneeded(&self, lsn: u64) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        if !self.count.is_zero() {
            // Records: no need to raise `unrecorded` (and make new snapshots wait for it).
            return false;
        }
        self.unrecorded.fetch_max(lsn, SeqCst);
        // Every stripe read after the raise: a snapshot counted in on any of them before
        // its load is seen here, and one counted in after it reads `lsn` or more.
        let unneeded = self.count.is_zero();
        debug_assert!(self.unrecorded.load(SeqCst) >= lsn);
        unneeded
    }

    /// Counts a new snapshot in; returns where it was counted and the sequence it must
    /// wait to be visible before it takes its own.
    pub(super) fn enter(&self) -> (Taken, u64) {
        let taken = self.count.take();
        (taken, self.unrecorded.load(std::sync::atomic::Ordering::SeqCst))
    }

    /// How many snapshots are alive (a moment's figure).
    pub(super) fn count(&self) -> u64 {
        self.count.get()
    }

    /// Counts a dropped snapshot out.
    fn leave(&self, taken: Taken) {
        self.count.give(taken);
    }
}

/// A consistent, read-only view of the store as of the moment it was taken. It keeps the
/// pages of its tree version from being deleted while it lives, so drop it when done.
///
/// Taking one writes nothing other threads write too: the store and the version are held
/// by `arc-swap` guards (a slot of the taking thread's own, not a shared reference count),
/// and it is counted on the thread's stripe of the live-snapshot gauge. A thread holding
/// more than a few at once (guards share eight slots per thread) makes the later ones,
/// and `clone`, take reference counts instead: the same meaning, at a shared write each.
///
/// Its reads fail with [`Error::Closed`] once the store is closed.
pub struct Snapshot {
    pub(super) inner: arc_swap::Guard<Arc<Inner>>,
    pub(super) version: arc_swap::Guard<Arc<Version>>,
    pub(super) sequence: u64,
    /// Where the live-snapshot gauge counted it.
    taken: Taken,
}

impl Clone for Snapshot {
    fn clone(&self) -> Snapshot {
        // Counted in while `self` is: every write since recorded its before-images.
        let (taken, _) = self.inner.live.enter();
        Snapshot {
            inner: arc_swap::Guard::from_inner(Arc::clone(&self.inner)),
            version: arc_swap::Guard::from_inner(Arc::clone(&self.version)),
            sequence: self.sequence,
            taken,
        }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.inner.live.leave(self.taken);
    }
}

impl Snapshot {
    /// A snapshot of what `version` holds up to `sequence`, counted in at `taken` (see
    /// `Db::snapshot`).
    pub(super) fn new(
        inner: arc_swap::Guard<Arc<Inner>>,
        version: arc_swap::Guard<Arc<Version>>,
        sequence: u64,
        taken: Taken,
    ) -> Snapshot {
        Snapshot { inner, version, sequence, taken }
    }

    /// The sequence number it sees up to.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The value of `key` as of the snapshot.
    ///
    /// # Errors
    ///
    /// [`Error::EmptyKey`] or [`Error::KeyTooLarge`] for a key outside the limits,
    /// [`Error::Closed`] once the store is closed, and [`Error::Pages`] when a page or an
    /// overflow value cannot be read (I/O, or damage the checksums caught).
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.view().get(key.as_ref())
    }

    /// Calls `read` with the value of `key` as of the snapshot, borrowed, and returns what
    /// it returns: no copy of the value is made, unless it is large enough to live in
    /// overflow blocks (over a quarter of a page), which are read into a buffer first.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    pub fn get_with<T>(
        &self,
        key: impl AsRef<[u8]>,
        read: impl FnOnce(&[u8]) -> T,
    ) -> Result<Option<T>> {
        self.view().get_with(key.as_ref(), read)
    }

    /// Reads the value of `key` as of the snapshot into `buffer`, reusing its allocation,
    /// and returns whether the key was found. `buffer` is cleared first either way.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get); `buffer` is left empty.
    pub fn get_into(&self, key: impl AsRef<[u8]>, buffer: &mut Vec<u8>) -> Result<bool> {
        self.view().get_into(key.as_ref(), buffer)
    }

    /// Whether `key` has a value as of the snapshot. A value in overflow blocks is not
    /// read.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.view().contains_key(key.as_ref())
    }

    /// The entry with the smallest key, as of the snapshot.
    ///
    /// # Errors
    ///
    /// [`Error::Closed`] once the store is closed, and [`Error::Pages`] when a page or an
    /// overflow value cannot be read.
    pub fn first(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.range(..).next().transpose()
    }

    /// The entry with the largest key, as of the snapshot.
    ///
    /// # Errors
    ///
    /// As [`first`](Self::first).
    pub fn last(&self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.range(..).next_back().transpose()
    }

    fn view(&self) -> View<'_> {
        View { inner: &self.inner, version: &self.version, sequence: self.sequence }
    }

    /// The entries in `range` as of the snapshot, ascending; `rev()` or
    /// [`next_back`](DoubleEndedIterator::next_back) take them descending. See [`Iter`] for
    /// its errors.
    pub fn range(&self, range: impl KeyRange) -> Iter {
        Iter::new(self.clone(), range.key_bounds(), false)
    }

    /// `range`, `range_back`, `prefix` or `prefix_back` (by `reversed` and the bounds),
    /// taking the snapshot itself instead of a clone.
    pub(super) fn into_iter(self, bounds: KeyBounds, reversed: bool) -> Iter {
        Iter::new(self, bounds, reversed)
    }

    /// The entries in `range` as of the snapshot, descending: `range(range).rev()`, but an
    /// [`Iter`], so it can [`seek`](Iter::seek).
    pub fn range_back(&self, range: impl KeyRange) -> Iter {
        Iter::new(self.clone(), range.key_bounds(), true)
    }

    /// The entries whose keys start with `prefix`, as of the snapshot, ascending.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        Iter::new(self.clone(), range::prefix_bounds(prefix.as_ref()), false)
    }

    /// The entries whose keys start with `prefix`, as of the snapshot, descending.
    pub fn prefix_back(&self, prefix: impl AsRef<[u8]>) -> Iter {
        Iter::new(self.clone(), range::prefix_bounds(prefix.as_ref()), true)
    }
}

/// An iterator over a range of one snapshot: `(key, value)` pairs in key order, from both
/// ends ([`DoubleEndedIterator`]; [`rev`](Iterator::rev) composes, and `next` and
/// `next_back` may be mixed: they meet in the middle and never return a key twice). It
/// loads the entries a chunk at a time as it goes, so a long range costs memory for a chunk,
/// not for the range.
///
/// An iterator made by `range_back` or `prefix_back` is *reversed*: its `next` takes from
/// the back (descending) and `next_back` from the front.
///
/// An item is an error when a page or an overflow value cannot be read
/// ([`Error::Pages`]), or when the store was closed ([`Error::Closed`]); after an error the
/// iterator ends, from both ends.
pub struct Iter {
    snapshot: Snapshot,
    /// `next` takes from the back end (a `range_back` or `prefix_back` iterator).
    reversed: bool,
    /// The bounds it was made with, inclusive and exclusive: `seek` stays within them.
    start: Vec<u8>,
    end: Option<Vec<u8>>,
    /// Until `exhausted`: what neither end has loaded, the keys from `low` (inclusive) to
    /// `high` (exclusive). Once `exhausted`: the front end has returned or passed every key
    /// below `low`, the back end every key from `high` on, and `front` holds the rest.
    low: Vec<u8>,
    high: Option<Vec<u8>>,
    /// Nothing is left to load; `back` is empty and `front` holds what is left.
    exhausted: bool,
    /// Loaded by the front end and not returned, ascending: all below `low`.
    front: VecDeque<(Vec<u8>, Held)>,
    /// Loaded by the back end and not returned, descending: all at or above `high`.
    back: VecDeque<(Vec<u8>, Held)>,
    /// Entries each end takes from the tree at its next refill (at most a leaf's).
    front_chunk: usize,
    back_chunk: usize,
    /// The leaf each end reads the tree from.
    front_leaf: Leaf,
    back_leaf: Leaf,
    /// An error ended the iteration.
    failed: bool,
    /// How many more entries it may hand out (`limit`); `None`: no limit. Refills read no
    /// more than this ahead.
    remaining: Option<usize>,
}

/// An end of an `Iter`: the front takes keys ascending, the back descending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Front,
    Back,
}

impl Iter {
    fn new(snapshot: Snapshot, bounds: KeyBounds, reversed: bool) -> Iter {
        let exhausted = range::is_empty(&bounds);
        let (start, end) = bounds;
        Iter {
            snapshot,
            reversed,
            low: start.clone(),
            high: end.clone(),
            start,
            end,
            exhausted,
            front: VecDeque::new(),
            back: VecDeque::new(),
            front_chunk: ITER_CHUNK_FIRST,
            back_chunk: ITER_CHUNK_FIRST,
            front_leaf: Leaf::new(),
            back_leaf: Leaf::new(),
            failed: false,
            remaining: None,
        }
    }

    /// The iterator, handing out at most `count` more entries (from either end, together),
    /// and reading no further ahead in the tree than that, but all of that at once (a
    /// leaf's worth at a time, under one validation and one prefetch each): a scan that
    /// wants `count` entries says so, and copies no leaf entry it will not return
    /// (without it, each refill reads up to a leaf's worth, so the last one reads past
    /// what such a scan takes). `Iterator::take` gives the same entries but cannot tell
    /// the iterator.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// for key in ["a", "b", "c", "d"] {
    ///     db.put(key, "")?;
    /// }
    /// let keys = db.range("b"..).limit(2).map(|entry| entry.map(|(key, _)| key));
    /// assert_eq!(keys.collect::<Result<Vec<_>, _>>()?, [b"b", b"c"]);
    /// assert_eq!(db.range_back(..).limit(1).count(), 1);
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn limit(mut self, count: usize) -> Iter {
        self.remaining = Some(self.remaining.map_or(count, |left| left.min(count)));
        self
    }

    /// Moves the end that `next` takes from to `key`, within the bounds the iterator was
    /// made with: ascending, `next` returns the first key at or after `key`; reversed
    /// (`range_back`, `prefix_back`), the last key at or before it. Seeking may go back
    /// over keys `next` returned already, which it then returns again; it never returns
    /// what the other end (`next_back`) returned. Nothing is read until the next `next`.
    /// An iterator that ended with an error stays ended.
    ///
    /// ```
    /// # fn main() -> tierkv::Result<()> {
    /// # let dir = tempfile::tempdir().expect("a temporary directory");
    /// # let db = tierkv::Db::open(dir.path(), tierkv::Options::default())?;
    /// for key in ["a", "b", "c", "d"] {
    ///     db.put(key, "")?;
    /// }
    /// let mut iter = db.range("a".."d");
    /// iter.seek("bb");
    /// assert_eq!(iter.next().transpose()?.map(|(key, _)| key), Some(b"c".to_vec()));
    /// let mut back = db.range_back(..);
    /// back.seek("bb");
    /// assert_eq!(back.next().transpose()?.map(|(key, _)| key), Some(b"b".to_vec()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn seek(&mut self, key: impl AsRef<[u8]>) {
        if self.failed {
            return;
        }
        if self.reversed {
            self.seek_back(key.as_ref());
        } else {
            self.seek_front(key.as_ref());
        }
    }

    /// Puts the front end at the first key at or after `key` (and the range's start).
    fn seek_front(&mut self, key: &[u8]) {
        let target = key.max(self.start.as_slice()).to_vec();
        // Where the back end stands: every key from here on it returned.
        let back_done = match (self.exhausted, self.back.front()) {
            (false, Some((largest, _))) => Some(successor(largest)),
            _ => self.high.clone(),
        };
        self.restart(target, back_done);
    }

    /// Puts the back end at the last key at or before `key` (and below the range's end).
    fn seek_back(&mut self, key: &[u8]) {
        let mut target = successor(key);
        if let Some(end) = self.end.as_ref().filter(|end| **end < target) {
            target.clone_from(end);
        }
        // Where the front end stands: every key below it, it returned.
        let front_done = match (self.exhausted, self.front.front()) {
            (false, Some((smallest, _))) => smallest.clone(),
            _ => self.low.clone(),
        };
        self.restart(front_done, Some(target));
    }

    /// Forgets what was loaded: what is left is the keys from `low` to `high`, loaded
    /// again as the ends ask.
    fn restart(&mut self, low: Vec<u8>, high: Option<Vec<u8>>) {
        self.front.clear();
        self.back.clear();
        self.front_chunk = ITER_CHUNK_FIRST;
        self.back_chunk = ITER_CHUNK_FIRST;
        self.exhausted = high.as_ref().is_some_and(|high| *high <= low);
        self.low = low;
        self.high = high;
        debug_assert!(self.start <= self.low || self.exhausted);
        debug_assert!(self.end.is_none() || self.high.is_some());
    }

    /// Nothing is left to load: the two buffers become one (`front`, ascending), and `low`
    /// and `high` mark where the ends stand.
    fn settle(&mut self) {
        let front_done = self.front.front().map_or_else(|| self.low.clone(), |(k, _)| k.clone());
        let back_done = match self.back.front() {
            Some((largest, _)) => Some(successor(largest)),
            None => self.high.clone(),
        };
        // Every key in `back` is above every key in `front`.
        debug_assert!(match (self.front.back(), self.back.back()) {
            (Some((a, _)), Some((b, _))) => a < b,
            _ => true,
        });
        while let Some(entry) = self.back.pop_back() {
            self.front.push_back(entry);
        }
        self.low = front_done;
        self.high = back_done;
        self.exhausted = true;
    }

    /// The next entry of `end`, its value not yet read (an overflow value stays a
    /// reference): from its own buffer, refilled from what is left, and once nothing is,
    /// from its side of the one buffer the ends share.
    fn take(&mut self, end: End) -> Option<Result<(Vec<u8>, Held)>> {
        if self.remaining == Some(0) {
            return None;
        }
        let taken = self.take_unlimited(end);
        if let (Some(Ok(_)), Some(left)) = (&taken, self.remaining.as_mut()) {
            *left -= 1;
        }
        taken
    }

    /// `take`, the limit aside.
    fn take_unlimited(&mut self, end: End) -> Option<Result<(Vec<u8>, Held)>> {
        if self.failed {
            return None;
        }
        if let Err(error) = self.snapshot.inner.check_open() {
            return Some(Err(self.fail(error)));
        }
        if self.exhausted {
            debug_assert!(self.back.is_empty(), "the back buffer outlived the settle");
            return match end {
                End::Front => {
                    let entry = self.front.pop_front()?;
                    self.low = successor(&entry.0);
                    Some(Ok(entry))
                }
                End::Back => {
                    let entry = self.front.pop_back()?;
                    self.high = Some(entry.0.clone());
                    Some(Ok(entry))
                }
            };
        }
        // Bounded: each refill moves `low` or `high` past the keys it loaded, or settles.
        loop {
            let entry = match end {
                End::Front => self.front.pop_front(),
                End::Back => self.back.pop_front(),
            };
            if let Some(entry) = entry {
                return Some(Ok(entry));
            }
            if let Err(error) = self.refill(end) {
                return Some(Err(self.fail(error)));
            }
            if self.exhausted {
                return self.take_unlimited(end);
            }
        }
    }

    /// The next entry of `end`, its value read.
    fn take_entry(&mut self, end: End) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        let (key, value) = match self.take(end)? {
            Ok(entry) => entry,
            Err(error) => return Some(Err(error)),
        };
        match self.snapshot.view().resolve(value) {
            Ok(value) => Some(Ok((key, value))),
            Err(error) => Some(Err(self.fail(error))),
        }
    }

    /// The key `next` would return next, without reading its value.
    pub(super) fn next_key(&mut self) -> Option<Result<Vec<u8>>> {
        let end = if self.reversed { End::Back } else { End::Front };
        Some(self.take(end)?.map(|(key, _)| key))
    }

    /// Ends the iteration with `error`.
    fn fail(&mut self, error: Error) -> Error {
        self.failed = true;
        self.front.clear();
        self.back.clear();
        error
    }

    /// Takes the next chunk of `end`'s side of what is left from the tree (`Leaf`: the
    /// rest of a leaf, or as many entries as the end's chunk count, which doubles with each
    /// refill), as of the snapshot.
    fn refill(&mut self, end: End) -> Result<()> {
        debug_assert!(!self.exhausted, "a refill of an exhausted range");
        let snapshot = &self.snapshot;
        let backward = end == End::Back;
        let (chunk_next, buffer, leaf) = match end {
            End::Front => (&mut self.front_chunk, &mut self.front, &mut self.front_leaf),
            End::Back => (&mut self.back_chunk, &mut self.back, &mut self.back_leaf),
        };
        // With a limit, the caller said how many it takes: all of them at once (up to
        // `ITER_CHUNK_MAX`), under one validation and one prefetch, and none past them
        // (at least one: a refill reads). Without one, the doubling chunk.
        let chunk = self.remaining.map_or(*chunk_next, |left| left.clamp(1, ITER_CHUNK_MAX));
        *chunk_next = (*chunk_next * 2).min(ITER_CHUNK_MAX);
        let loaded_before = buffer.len();
        let view = snapshot.view();
        let (low, high) = (self.low.as_slice(), self.high.as_deref());
        let (range, more) = if backward {
            leaf.backward(&view, low, high, chunk)?
        } else {
            leaf.forward(&view, low, high, chunk)?
        };
        // The last key loaded, when the tree has more beyond it.
        let last = if backward { range.start } else { range.end.wrapping_sub(1) };
        let horizon = more && !range.is_empty();
        let mut load = |at: usize| {
            let key = leaf.chunk.key(at).to_vec();
            let value = match leaf.chunk.take_value(at) {
                Some(bytes) => Held::Bytes(bytes),
                None => match &leaf.chunk.entries[at].1 {
                    ChunkValue::Inline(bytes) => {
                        Held::Bytes(leaf.chunk.bytes[bytes.clone()].to_vec())
                    }
                    ChunkValue::Overflow(overflow) => Held::Overflow(*overflow),
                    ChunkValue::Owned(_) | ChunkValue::Taken => {
                        unreachable!("an entry is handed out once, its range re-read")
                    }
                },
            };
            buffer.push_back((key, value));
        };
        if backward {
            range.rev().for_each(&mut load);
        } else {
            range.for_each(&mut load);
        }
        // What this refill loaded lies inside what was left: its first and last keys do
        // (a chunk is in key order).
        let inside = |key: &[u8]| key >= low && high.is_none_or(|high| key < high);
        assert!(buffer.range(loaded_before..).next().is_none_or(|(key, _)| inside(key)));
        assert!(buffer.range(loaded_before..).next_back().is_none_or(|(key, _)| inside(key)));
        debug_assert!(buffer.range(loaded_before..).all(|(key, _)| inside(key)));
        match (horizon, end) {
            (false, _) => self.settle(),
            // What is left starts past the last key loaded (`low`'s buffer reused).
            (true, End::Front) => {
                let key = leaf.chunk.key(last);
                self.low.clear();
                self.low.extend_from_slice(key);
                self.low.push(0);
            }
            (true, End::Back) => self.high = Some(leaf.chunk.key(last).to_vec()),
        }
        if !self.exhausted && self.high.as_ref().is_some_and(|high| *high <= self.low) {
            self.settle();
        }
        Ok(())
    }
}

/// A loaded entry's value, not yet handed out: its bytes (handed out as they are), or where
/// they are (an overflow value, read when it is handed out).
enum Held {
    Bytes(Vec<u8>),
    Overflow(OverflowRef),
}

/// The tree's leaf an end of an `Iter` reads from: up to a leaf's worth of entries copied
/// out under one validation (`tree::read::Chunk`; as many as the refill's chunk, so a seek
/// that reads one entry copies a few), kept while what is left still starts in it, so a
/// long scan goes down the tree about once per leaf.
#[derive(Debug)]
struct Leaf {
    chunk: Chunk,
    /// The key the chunk was read by: forward, it holds the tree's keys from there up to
    /// `chunk.bound` (exclusive; `None`: the end); backward, from `chunk.bound` (`None`: the
    /// start) up to there (exclusive; `None`: the end). `None` until one is read.
    read_by: Option<ReadBy>,
}

#[derive(Debug)]
enum ReadBy {
    Forward(Vec<u8>),
    Backward(Option<Vec<u8>>),
}

impl Leaf {
    /// A leaf that has read nothing yet; its chunks copy each value into an allocation of
    /// its own, which the refill hands out as it is.
    fn new() -> Leaf {
        Leaf { chunk: Chunk::owning_values(), read_by: None }
    }

    /// The chunk's entries at or above `low` and below `high`, reading (up to `limit` of)
    /// the leaf that holds `low` when the chunk does not cover it (and the leaves after, past
    /// empty ones); and whether the tree has keys below `high` beyond them.
    fn forward(
        &mut self,
        view: &View<'_>,
        low: &[u8],
        high: Option<&[u8]>,
        limit: usize,
    ) -> Result<(std::ops::Range<usize>, bool)> {
        // Where the pass reads from: `low`, or the start of a leaf past empty ones.
        let mut past: Option<Vec<u8>> = None;
        // Bounded: each pass reads a leaf further on, and the tree has finitely many.
        loop {
            let from = past.as_deref().unwrap_or(low);
            let covered = match &self.read_by {
                Some(ReadBy::Forward(by)) => {
                    by.as_slice() <= from
                        && self.chunk.bound.as_deref().is_none_or(|next| from < next)
                }
                _ => false,
            };
            if !covered {
                view.inner.pages.chunk_forward(
                    view.version.tree.root,
                    from,
                    limit,
                    &mut self.chunk,
                )?;
                if self.chunk.lsn > view.sequence {
                    // Changed after the snapshot: what the keys it covers held then.
                    let before = view.version.undo.before_range(
                        from,
                        self.chunk.bound.as_deref(),
                        view.sequence,
                    );
                    self.chunk.overlay(&before.map_err(|_| view.too_old())?);
                }
                // The key it was read by, in the buffer of the last one when there was one.
                match &mut self.read_by {
                    Some(ReadBy::Forward(by)) => {
                        by.clear();
                        by.extend_from_slice(from);
                    }
                    other => *other = Some(ReadBy::Forward(from.to_vec())),
                }
            }
            let chunk = &self.chunk;
            let start = chunk.below(low);
            let end = high.map_or(chunk.entries.len(), |high| chunk.below(high));
            if covered && chunk.any_taken(start..end) {
                // A seek back over entries handed out already: their values are gone from
                // the chunk, so the leaf is read again.
                self.read_by = None;
                continue;
            }
            let more =
                chunk.bound.as_deref().is_some_and(|next| high.is_none_or(|high| next < high));
            if start < end || !more {
                debug_assert!(start <= end);
                return Ok((start..end, more));
            }
            // Nothing left in this leaf: on to the next.
            past = Some(chunk.bound.clone().expect("more means a next leaf"));
        }
    }

    /// `forward`'s mirror: the chunk's entries below `high` and at or above `low`, reading
    /// the leaf that holds the keys just below `high` when the chunk does not cover them;
    /// and whether the tree has keys at or above `low` before them.
    fn backward(
        &mut self,
        view: &View<'_>,
        low: &[u8],
        high: Option<&[u8]>,
        limit: usize,
    ) -> Result<(std::ops::Range<usize>, bool)> {
        let mut before = high.map(<[u8]>::to_vec);
        // Bounded as `forward` is.
        loop {
            let covered = match &self.read_by {
                Some(ReadBy::Backward(by)) => {
                    let below_by = match (before.as_deref(), by.as_deref()) {
                        (_, None) => true,
                        (None, Some(_)) => false,
                        (Some(before), Some(by)) => before <= by,
                    };
                    let above_start = match (self.chunk.bound.as_deref(), before.as_deref()) {
                        (None, _) => true,
                        (Some(_), None) => true,
                        (Some(start), Some(before)) => start < before,
                    };
                    below_by && above_start
                }
                _ => false,
            };
            if !covered {
                let root = view.version.tree.root;
                view.inner.pages.chunk_backward(root, before.as_deref(), limit, &mut self.chunk)?;
                if self.chunk.lsn > view.sequence {
                    // As in `forward`.
                    let start = self.chunk.bound.as_deref().unwrap_or(b"");
                    let undo = &view.version.undo;
                    let was = undo.before_range(start, before.as_deref(), view.sequence);
                    self.chunk.overlay(&was.map_err(|_| view.too_old())?);
                }
                self.read_by = Some(ReadBy::Backward(before.clone()));
            }
            let chunk = &self.chunk;
            let start = chunk.below(low);
            let end = before.as_deref().map_or(chunk.entries.len(), |before| chunk.below(before));
            if covered && chunk.any_taken(start.min(end)..end) {
                // As in `forward`: entries handed out already are read again.
                self.read_by = None;
                continue;
            }
            let more = chunk.bound.as_deref().is_some_and(|leaf_start| leaf_start > low);
            if start < end || !more {
                return Ok((start.min(end)..end, more));
            }
            before = chunk.bound.clone();
        }
    }
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.take_entry(if self.reversed { End::Back } else { End::Front })
    }
}

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.take_entry(if self.reversed { End::Front } else { End::Back })
    }
}

#[cfg(test)]
mod live_tests {
    use super::LiveSnapshots;

    #[test]
    fn a_snapshot_counted_in_after_an_unrecorded_write_waits_for_it() {
        let live = std::sync::Arc::new(LiveSnapshots::default());
        assert!(live.unneeded(7), "no snapshot lives: nothing to record");
        assert!(live.unneeded(5), "an older number leaves the mark where it is");
        let (first, mark) = live.enter();
        assert_eq!(mark, 7, "the snapshot must wait for write 7");
        assert!(!live.unneeded(9), "a snapshot lives: write 9 records");
        // Counted in on another thread (another stripe), counted out on this one.
        let counted = std::sync::Arc::clone(&live);
        let (second, mark) = std::thread::spawn(move || counted.enter()).join().expect("taker");
        assert_eq!(mark, 7, "a recorded write does not raise the mark");
        live.leave(first);
        assert!(!live.unneeded(10), "one snapshot still lives, on the other thread's stripe");
        live.leave(second);
        assert!(live.unneeded(11), "the last snapshot was dropped");
        let (third, mark) = live.enter();
        assert_eq!(mark, 11);
        live.leave(third);
    }
}
