//! Reads of a consistent view: `Snapshot` (point lookups as of one sequence number) and
//! `Iter` (a range scan of a snapshot, either direction), which merges the memtables and the
//! tree a chunk at a time.
//!
//! A snapshot holds its `Version` (memtables, tree root, epoch), so no page it can reach is
//! deleted while it lives. Must never: return a version newer than the snapshot's sequence,
//! or an entry a newer version in another source hides.

use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use super::{Inner, Version};
use crate::batch::check_key;
use crate::memtable::Found;
use crate::page::Value;
use crate::Result;

/// Entries an iterator takes from each source at first: a seek that reads one entry should
/// not pay for many. Each refill doubles it, up to `ITER_CHUNK_MAX`.
const ITER_CHUNK_FIRST: usize = 4;

/// The most entries an iterator takes from each source at a time.
const ITER_CHUNK_MAX: usize = 256;

/// A consistent, read-only view of the store as of the moment it was taken. It keeps the
/// pages of its tree version from being deleted while it lives, so drop it when done.
#[derive(Clone)]
pub struct Snapshot {
    pub(super) inner: Arc<Inner>,
    pub(super) version: Arc<Version>,
    pub(super) sequence: u64,
}

impl Snapshot {
    /// The sequence number it sees up to.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The value of `key` as of the snapshot.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        check_key(key)?;
        self.inner.check_open()?;
        if let Some(found) = self.memtable_get(key) {
            return Ok(found.value.map(Vec::from));
        }
        match self.version.tree.get(&self.inner.pages, key)? {
            None => Ok(None),
            Some(value) => self.resolve(value).map(Some),
        }
    }

    /// The newest version of `key` in the memtables at or below the snapshot's sequence.
    fn memtable_get(&self, key: &[u8]) -> Option<Found> {
        let version = &*self.version;
        let newer = version.mutable.get(key, self.sequence);
        let older = version.frozen.as_ref().and_then(|frozen| frozen.get(key, self.sequence));
        match (newer, older) {
            (Some(a), Some(b)) => Some(if a.sequence >= b.sequence { a } else { b }),
            (a, b) => a.or(b),
        }
    }

    fn resolve(&self, value: Value) -> Result<Vec<u8>> {
        match value {
            // Without a copy when nothing else holds the bytes (a memtable value).
            Value::Inline(bytes) => Ok(Vec::from(bytes)),
            Value::Overflow(overflow) => Ok(self.inner.pages.read_overflow(&overflow)?),
        }
    }

    /// The entries in `range`, ascending.
    pub fn range<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> Iter {
        let (low, high) = bounds(range);
        Iter::new(self.clone(), low, high, false)
    }

    /// The entries in `range`, descending.
    pub fn range_back<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> Iter {
        let (low, high) = bounds(range);
        Iter::new(self.clone(), low, high, true)
    }

    /// The entries whose keys start with `prefix`, ascending.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        let prefix = prefix.as_ref();
        Iter::new(self.clone(), prefix.to_vec(), prefix_end(prefix), false)
    }

    /// The entries whose keys start with `prefix`, descending.
    pub fn prefix_back(&self, prefix: impl AsRef<[u8]>) -> Iter {
        let prefix = prefix.as_ref();
        Iter::new(self.clone(), prefix.to_vec(), prefix_end(prefix), true)
    }
}

/// The smallest key above `key`.
fn successor(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

/// The smallest key above every key that starts with `prefix` (`None`: there is none).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// A range as an inclusive lower bound and an exclusive upper one.
fn bounds<K: AsRef<[u8]>>(range: impl RangeBounds<K>) -> (Vec<u8>, Option<Vec<u8>>) {
    let low = match range.start_bound() {
        Bound::Included(key) => key.as_ref().to_vec(),
        Bound::Excluded(key) => successor(key.as_ref()),
        Bound::Unbounded => Vec::new(),
    };
    let high = match range.end_bound() {
        Bound::Included(key) => Some(successor(key.as_ref())),
        Bound::Excluded(key) => Some(key.as_ref().to_vec()),
        Bound::Unbounded => None,
    };
    (low, high)
}

/// An iterator over a range of one snapshot, in either direction: `(key, value)` pairs,
/// or an error (a page that cannot be read) after which it ends.
pub struct Iter {
    snapshot: Snapshot,
    backward: bool,
    /// What is left to visit: keys from `low` (inclusive) to `high` (exclusive).
    low: Vec<u8>,
    high: Option<Vec<u8>>,
    buffer: VecDeque<(Vec<u8>, Value)>,
    /// Entries to take from each source at the next refill.
    chunk: usize,
    done: bool,
}

/// One key's newest entry among the sources: from a memtable (with its sequence number and
/// possibly a deletion) or from the tree.
enum Candidate {
    Memtable(Found),
    Tree(Value),
}

impl Iter {
    fn new(snapshot: Snapshot, low: Vec<u8>, high: Option<Vec<u8>>, backward: bool) -> Iter {
        let empty = high.as_ref().is_some_and(|high| *high <= low);
        Iter {
            snapshot,
            backward,
            low,
            high,
            buffer: VecDeque::new(),
            chunk: ITER_CHUNK_FIRST,
            done: empty,
        }
    }

    /// Takes the next chunk from every source and keeps what is certain: the keys up to
    /// the nearest point where some source may have more.
    fn refill(&mut self) -> Result<()> {
        let snapshot = &self.snapshot;
        let version = &*snapshot.version;
        let chunk = self.chunk;
        self.chunk = (chunk * 2).min(ITER_CHUNK_MAX);
        let backward = self.backward;
        let (low, high) = (self.low.as_slice(), self.high.as_deref());
        // The last key of each source that filled its chunk: beyond it, it may hold more.
        let mut horizon: Option<Vec<u8>> = None;
        let mut bound = |last: Option<&Vec<u8>>, full: bool| {
            if let (true, Some(last)) = (full, last) {
                let nearer =
                    horizon.as_ref().is_none_or(|h| if backward { last > h } else { last < h });
                if nearer {
                    horizon = Some(last.clone());
                }
            }
        };
        // Each source's chunk, in the scan's direction: the tree's, then each memtable's.
        let mut sources: Vec<Vec<(Vec<u8>, Candidate)>> = Vec::with_capacity(3);
        let mut tree_entries: Vec<(Vec<u8>, Candidate)> = Vec::new();
        let mut visit = |key: &[u8], value: &Value| {
            let inside = if backward { key >= low } else { high.is_none_or(|h| key < h) };
            if inside {
                tree_entries.push((key.to_vec(), Candidate::Tree(value.clone())));
            }
            inside && tree_entries.len() < chunk
        };
        if backward {
            version.tree.scan_back(&snapshot.inner.pages, high, &mut visit)?;
        } else {
            version.tree.scan(&snapshot.inner.pages, low, &mut visit)?;
        }
        bound(tree_entries.last().map(|(k, _)| k), tree_entries.len() == chunk);
        sources.push(tree_entries);
        for memtable in std::iter::once(&version.mutable).chain(version.frozen.as_ref()) {
            let entries = if backward {
                memtable.scan_back(low, high, snapshot.sequence, chunk)
            } else {
                memtable.scan(low, high, snapshot.sequence, chunk)
            };
            bound(entries.last().map(|(k, _)| k), entries.len() == chunk);
            sources.push(
                entries.into_iter().map(|(k, found)| (k, Candidate::Memtable(found))).collect(),
            );
        }
        let certain = |key: &[u8]| match &horizon {
            None => true,
            Some(h) if backward => key >= h.as_slice(),
            Some(h) => key <= h.as_slice(),
        };
        // A merge of the sorted chunks: at each step the key that comes first in the scan's
        // direction; where sources share it, a memtable's version beats the tree's, and the
        // newer of two memtables' wins.
        let first = |a: &[u8], b: &[u8]| if backward { a > b } else { a < b };
        let mut cursors: Vec<_> =
            sources.into_iter().map(|source| source.into_iter().peekable()).collect();
        loop {
            // The cursor whose next key comes first.
            let mut lead: Option<(usize, &[u8])> = None;
            for (at, cursor) in cursors.iter_mut().enumerate() {
                if let Some((key, _)) = cursor.peek() {
                    if lead.is_none_or(|(_, lead_key)| first(key, lead_key)) {
                        lead = Some((at, key.as_slice()));
                    }
                }
            }
            let Some((lead, lead_key)) = lead else { break };
            if !certain(lead_key) {
                break;
            }
            let Some((key, mut best)) = cursors[lead].next() else { break };
            for cursor in &mut cursors {
                if cursor.peek().is_none_or(|(k, _)| *k != key) {
                    continue;
                }
                let Some((_, candidate)) = cursor.next() else { continue };
                let newer = match (&best, &candidate) {
                    (Candidate::Tree(_), Candidate::Memtable(_)) => true,
                    (Candidate::Memtable(old), Candidate::Memtable(new)) => {
                        new.sequence > old.sequence
                    }
                    (_, Candidate::Tree(_)) => false,
                };
                if newer {
                    best = candidate;
                }
            }
            match best {
                Candidate::Tree(value) => self.buffer.push_back((key, value)),
                Candidate::Memtable(Found { value: Some(value), .. }) => {
                    self.buffer.push_back((key, Value::inline(value)));
                }
                Candidate::Memtable(Found { value: None, .. }) => {}
            }
        }
        match horizon {
            None => self.done = true,
            Some(h) if backward => self.high = Some(h),
            Some(h) => self.low = successor(&h),
        }
        Ok(())
    }
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((key, value)) = self.buffer.pop_front() {
                return match self.snapshot.resolve(value) {
                    Ok(value) => Some(Ok((key, value))),
                    Err(error) => {
                        self.done = true;
                        self.buffer.clear();
                        Some(Err(error))
                    }
                };
            }
            if self.done {
                return None;
            }
            if let Err(error) = self.refill() {
                self.done = true;
                return Some(Err(error));
            }
        }
    }
}
