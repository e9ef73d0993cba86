//! The memtable: writes since the last checkpoint, in DRAM, by key and sequence number.
//!
//! Every write is logged first (`tierkv-wal`), then put here under its log sequence number,
//! so readers find it at once while the B+tree changes only at checkpoints (`db`). A key may
//! have several versions; a version with no value is a deletion (a tombstone), which hides
//! the tree's value. A snapshot at sequence `s` sees, for each key, the newest version at or
//! below `s`.
//!
//! A lock-free skip list (`crossbeam-skiplist`) holds the versions in key order, newest first
//! within a key, so many writers insert and many readers search and scan at once without a
//! lock. Nothing is removed: a checkpoint drops the whole memtable once the tree holds it.
//!
//! Must never: return a version above the reader's sequence; lose a version inserted before
//! a reader's sequence was published.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};

use bytes::Bytes;
use crossbeam_skiplist::SkipMap;

use crate::cache::allocation_bytes;

/// Bytes a version is counted as besides its key's and value's allocations: the skip
/// list's node (the key's vector header, the value's `Bytes` header, the sequence, a
/// reference count and a tower of one to a few links) as the allocator rounds it, and the
/// small shared header a `Bytes` allocates when a reader first clones it.
const VERSION_OVERHEAD: usize = 128;

/// The versions between two bounds, in order.
type VersionRange<'a> = crossbeam_skiplist::map::Range<
    'a,
    VersionKey,
    (Bound<VersionKey>, Bound<VersionKey>),
    VersionKey,
    Option<Bytes>,
>;

/// A key and the sequence number of one of its versions; ordered by key, then newest first.
#[derive(Clone, Debug, PartialEq, Eq)]
struct VersionKey {
    key: Vec<u8>,
    sequence: u64,
}

impl Ord for VersionKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key.cmp(&other.key).then_with(|| other.sequence.cmp(&self.sequence))
    }
}

impl PartialOrd for VersionKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A key's newest version at or below a sequence: its sequence number and its value (`None`
/// for a deletion).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The version's sequence number.
    pub sequence: u64,
    /// The value; `None` for a deletion. Shared with the memtable: a clone is a reference
    /// count, so scans and reads copy a value once, into what they return.
    pub value: Option<Bytes>,
}

/// The writes since the last checkpoint (see the module header).
#[derive(Default)]
pub struct Memtable {
    versions: SkipMap<VersionKey, Option<Bytes>>,
    bytes: AtomicUsize,
}

impl Memtable {
    /// An empty memtable.
    pub fn new() -> Memtable {
        Memtable::default()
    }

    /// Adds a version of `key` at `sequence` (a deletion for `None`). One sequence number
    /// may carry many keys (a batch); the same key twice in one sequence keeps the last.
    pub fn insert(&self, key: &[u8], sequence: u64, value: Option<&[u8]>) {
        let bytes = allocation_bytes(key.len())
            + value.map_or(0, |value| allocation_bytes(value.len()))
            + VERSION_OVERHEAD;
        self.bytes.fetch_add(bytes, AtomicOrdering::Relaxed);
        self.versions
            .insert(VersionKey { key: key.to_vec(), sequence }, value.map(Bytes::copy_from_slice));
    }

    /// Bytes the versions take, roughly (keys, values and per-version overhead).
    pub fn bytes(&self) -> usize {
        self.bytes.load(AtomicOrdering::Relaxed)
    }

    /// Whether no version was inserted.
    pub fn is_empty(&self) -> bool {
        self.versions.is_empty()
    }

    /// The newest version of `key` at or below `sequence`.
    pub fn get(&self, key: &[u8], sequence: u64) -> Option<Found> {
        let from = VersionKey { key: key.to_vec(), sequence };
        let entry = self.versions.lower_bound(Bound::Included(&from))?;
        (entry.key().key == key)
            .then(|| Found { sequence: entry.key().sequence, value: entry.value().clone() })
    }

    /// The versions of the keys from `start` (inclusive) to `end` (exclusive; `None` for
    /// no end), in order.
    fn versions_in(&self, start: &[u8], end: Option<&[u8]>) -> VersionRange<'_> {
        let first = |key: &[u8]| VersionKey { key: key.to_vec(), sequence: u64::MAX };
        let high = end.map_or(Bound::Unbounded, |end| Bound::Excluded(first(end)));
        self.versions.range((Bound::Included(first(start)), high))
    }

    /// Up to `limit` keys from `start` on (inclusive) and below `end` (exclusive; `None`
    /// for no end), ascending, each with its newest version at or below `sequence`.
    pub fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        sequence: u64,
        limit: usize,
    ) -> Vec<(Vec<u8>, Found)> {
        let mut out: Vec<(Vec<u8>, Found)> = Vec::new();
        for entry in self.versions_in(start, end) {
            let version = entry.key();
            if version.sequence > sequence || out.last().is_some_and(|(k, _)| *k == version.key) {
                continue;
            }
            if out.len() == limit {
                break;
            }
            let found = Found { sequence: version.sequence, value: entry.value().clone() };
            out.push((version.key.clone(), found));
        }
        out
    }

    /// Up to `limit` keys below `end` (exclusive; `None` for the last key on) and from
    /// `start` on, descending, each with its newest version at or below `sequence`.
    pub fn scan_back(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        sequence: u64,
        limit: usize,
    ) -> Vec<(Vec<u8>, Found)> {
        let range = self.versions_in(start, end);
        // Backwards, a key's versions come oldest first: the last one at or below
        // `sequence` before the key changes is the one to keep.
        let mut out: Vec<(Vec<u8>, Found)> = Vec::new();
        let mut current: Option<(Vec<u8>, Option<Found>)> = None;
        for entry in range.rev() {
            let version = entry.key();
            if current.as_ref().is_none_or(|(key, _)| *key != version.key) {
                if let Some((key, Some(found))) = current.take() {
                    out.push((key, found));
                    if out.len() == limit {
                        return out;
                    }
                }
                current = Some((version.key.clone(), None));
            }
            if version.sequence <= sequence {
                if let Some((_, best)) = current.as_mut() {
                    *best =
                        Some(Found { sequence: version.sequence, value: entry.value().clone() });
                }
            }
        }
        if let Some((key, Some(found))) = current {
            if out.len() < limit {
                out.push((key, found));
            }
        }
        out
    }

    /// Every key with its newest version, ascending: what a checkpoint writes to the tree.
    pub fn latest(&self) -> impl Iterator<Item = (Vec<u8>, Option<Bytes>)> + '_ {
        let mut last: Option<Vec<u8>> = None;
        self.versions.iter().filter_map(move |entry| {
            let key = &entry.key().key;
            if last.as_ref() == Some(key) {
                return None;
            }
            last = Some(key.clone());
            Some((key.clone(), entry.value().clone()))
        })
    }
}

#[cfg(test)]
mod tests;
