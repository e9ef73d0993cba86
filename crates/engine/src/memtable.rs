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
//! A blocked Bloom filter of the keys (`KeyFilter`, lock-free: bits are only ever set) lets
//! `get` skip the skip list's descent for a key with no version here, the common case of a
//! point read of a key the tree holds. It is sized when the memtable is made, for the most
//! versions its byte budget allows, and counted in `bytes`; a memtable that ends up holding
//! more only makes it less selective. Scans do not use it: it cannot answer for a range.
//!
//! Must never: return a version above the reader's sequence; lose a version inserted before
//! a reader's sequence was published (the key filter may say a key is here when it is not,
//! never the reverse).

use std::cmp::Ordering;
use std::hash::{BuildHasher, Hasher};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};

use bytes::Bytes;
use crossbeam_skiplist::SkipMap;
use foldhash::fast::FixedState;

use crate::block_pages::allocation_bytes;

/// Bytes a version is counted as besides its key's and value's allocations: the skip
/// list's node (the key's vector header, the value's `Bytes` header, the sequence, a
/// reference count and a tower of one to a few links) as the allocator rounds it, and the
/// small shared header a `Bytes` allocates when a reader first clones it.
const VERSION_OVERHEAD: usize = 128;

/// Bits of the key filter per version the memtable can hold: with `FILTER_PROBES` bits in
/// a 512-bit block, about 1.4% of absent keys get through at 10 bits per key, 0.6% at 13
/// (rounded up to a power of two, a full filter has 10 to 20 bits per version).
const FILTER_BITS_PER_VERSION: usize = 10;

/// The smallest key filter, in bits (8 KiB): a memtable of the smallest write buffer gets
/// more than 10 bits per version.
const FILTER_BITS_MIN: usize = 64 << 10;

/// The largest key filter, in bits (8 MiB): budgets of over about 800 MiB of versions get
/// fewer than 10 bits per version.
const FILTER_BITS_MAX: usize = 64 << 20;

/// Bits of the key filter a key sets, all in one block.
const FILTER_PROBES: u32 = 4;

/// Bits of a key filter's block: one cache line.
const FILTER_BLOCK_BITS: u32 = 512;

/// The key filter's hash: fixed, so that tests and benchmarks repeat. Keys chosen to
/// collide only make lookups of absent keys take the skip list, as without a filter.
const FILTER_HASH: FixedState = FixedState::with_seed(0x6d65_6d74_6162_6c65);

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

/// A key a scan found, with its version.
pub type Scanned = (Vec<u8>, Found);

/// One cache line of the key filter: a lookup reads one, whatever the filter's size.
#[derive(Default)]
#[repr(align(64))]
struct FilterBlock([AtomicU64; FILTER_BLOCK_BITS as usize / 64]);

/// A blocked Bloom filter of the keys inserted: each key sets `FILTER_PROBES` bits of one
/// `FilterBlock`. Bits are only ever set, with atomic `fetch_or`, so writers and readers
/// share it without a lock and a bit once seen stays set.
struct KeyFilter {
    /// A power of two of them.
    blocks: Box<[FilterBlock]>,
}

impl KeyFilter {
    /// A filter for `max_versions` versions: `FILTER_BITS_PER_VERSION` bits each, rounded
    /// up to a power of two, within `FILTER_BITS_MIN..=FILTER_BITS_MAX`.
    fn with_capacity(max_versions: usize) -> KeyFilter {
        let bits = max_versions
            .saturating_mul(FILTER_BITS_PER_VERSION)
            .clamp(FILTER_BITS_MIN, FILTER_BITS_MAX)
            .next_power_of_two();
        let blocks: Box<[FilterBlock]> =
            (0..bits / FILTER_BLOCK_BITS as usize).map(|_| FilterBlock::default()).collect();
        assert!(blocks.len().is_power_of_two(), "{} filter blocks", blocks.len());
        assert!(bits <= FILTER_BITS_MAX, "{bits} filter bits");
        KeyFilter { blocks }
    }

    /// Bytes of the filter's allocation.
    fn size_bytes(&self) -> usize {
        std::mem::size_of_val::<[FilterBlock]>(&self.blocks)
    }

    /// The block `key` hashes to, and its `FILTER_PROBES` bits there: (word, mask) each.
    fn probes(&self, key: &[u8]) -> (&FilterBlock, impl Iterator<Item = (usize, u64)>) {
        let mut hasher = FILTER_HASH.build_hasher();
        hasher.write(key);
        let hash = hasher.finish();
        // The block from the high half of the hash (at most 17 bits of it), the probes from
        // bits 0 to 17: independent of each other.
        let block = &self.blocks[(hash >> 32) as usize & (self.blocks.len() - 1)];
        // Double hashing: probe i is bit h1 + i * h2 (mod 512); an odd h2 makes the probes
        // distinct bits.
        let h1 = hash as u32;
        let h2 = (hash >> 9) as u32 | 1;
        let probes = (0..FILTER_PROBES).map(move |i| {
            let bit = h1.wrapping_add(i.wrapping_mul(h2)) % FILTER_BLOCK_BITS;
            ((bit / 64) as usize, 1u64 << (bit % 64))
        });
        (block, probes)
    }

    /// Sets `key`'s bits.
    fn insert(&self, key: &[u8]) {
        let (block, probes) = self.probes(key);
        for (word, mask) in probes {
            // Relaxed: see `Memtable::get` for what orders it before a reader's loads.
            block.0[word].fetch_or(mask, AtomicOrdering::Relaxed);
        }
    }

    /// Whether `key` may have been inserted: false only if it never was (by an insert that
    /// happens before this call).
    fn may_contain(&self, key: &[u8]) -> bool {
        let (block, mut probes) = self.probes(key);
        probes.all(|(word, mask)| block.0[word].load(AtomicOrdering::Relaxed) & mask != 0)
    }
}

/// The writes since the last checkpoint (see the module header).
pub struct Memtable {
    versions: SkipMap<VersionKey, Option<Bytes>>,
    /// Every key in `versions`, set before the key's version goes in.
    filter: KeyFilter,
    bytes: AtomicUsize,
}

impl Memtable {
    /// An empty memtable for versions of about `max_bytes` in all (as `bytes` counts them,
    /// at least `VERSION_OVERHEAD` each): its key filter is sized for that many. It may
    /// take more; the filter then lets more absent keys through, never fewer present ones.
    pub fn with_capacity(max_bytes: usize) -> Memtable {
        Memtable {
            versions: SkipMap::new(),
            filter: KeyFilter::with_capacity(max_bytes / VERSION_OVERHEAD),
            bytes: AtomicUsize::new(0),
        }
    }

    #[cfg(test)] // The undo uses `insert_bytes`; tests use these.
    /// Adds a version of `key` at `sequence` (a deletion for `None`). One sequence number
    /// may carry many keys (a batch); the same key twice in one sequence keeps the last.
    /// Returns the bytes it counted for the version.
    pub fn insert(&self, key: &[u8], sequence: u64, value: Option<&[u8]>) -> usize {
        self.insert_bytes(key, sequence, value.map(Bytes::copy_from_slice))
    }

    /// `insert` of a value the caller already holds as `Bytes` (no copy of it is made).
    pub fn insert_bytes(&self, key: &[u8], sequence: u64, value: Option<Bytes>) -> usize {
        let bytes = allocation_bytes(key.len())
            + value.as_ref().map_or(0, |value| allocation_bytes(value.len()))
            + VERSION_OVERHEAD;
        self.bytes.fetch_add(bytes, AtomicOrdering::Relaxed);
        // IMPORTANT: the key's filter bits go in before its version, and both before the
        // caller publishes `sequence` to readers, who then find the bits (see `get`).
        self.filter.insert(key);
        self.versions.insert(VersionKey { key: key.to_vec(), sequence }, value);
        bytes
    }

    /// Bytes the memtable takes, roughly: its key filter, and its versions' keys, values and
    /// per-version overhead.
    pub fn bytes(&self) -> usize {
        self.filter.size_bytes() + self.bytes.load(AtomicOrdering::Relaxed)
    }

    #[cfg(test)] // The undo uses `insert_bytes`; tests use these.
    /// Whether no version was inserted.
    pub fn is_empty(&self) -> bool {
        self.versions.is_empty()
    }

    /// The newest version of `key` at or below `sequence`.
    ///
    /// `sequence` must be published to the caller after every version at or below it was
    /// inserted: each `insert` of them happens before this call (a Release store and an
    /// Acquire load of the sequence, or a lock, between them), as in `Db`.
    pub fn get(&self, key: &[u8], sequence: u64) -> Option<Found> {
        // IMPORTANT: why a filter that says no never hides a version the reader may see,
        // though its bits are set and loaded Relaxed. In `db.rs`, `Inner::write` inserts a
        // batch's versions here before it calls `Visibility::publish`, which stores the
        // visible sequence with Release under its `ahead` mutex (a write published ahead of
        // an earlier one only goes into `ahead`; whoever later stores a sequence covering it
        // took that mutex after it), and `Inner::snapshot` loads the visible sequence with
        // Acquire before the reader gets here. Recovery inserts before the store is shared.
        // So every `fetch_or` for a version at or below `sequence` happens before the loads
        // below, and they see its bit (coherence: bits are only ever set). Stronger orderings
        // on the bits would add nothing: these loads come before the skip-list search, so
        // no ordering of theirs against the writers' skip-list inserts could matter.
        if !self.filter.may_contain(key) {
            return None;
        }
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
    /// for no end), ascending, each with its newest version at or below `sequence`; and,
    /// when it returned fewer than `limit` keys, the first key at or after `end` (and
    /// `start`) that the memtable holds any version of (`None`: none, or no `end`): no key
    /// from there up to it has a version at all, now or for any reader at or below
    /// `sequence` later (versions added later have higher sequence numbers).
    pub fn scan_ahead(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        sequence: u64,
        limit: usize,
    ) -> (Vec<Scanned>, Option<Vec<u8>>) {
        let mut out: Vec<Scanned> = Vec::new();
        for entry in self.versions_in(start, None) {
            let version = entry.key();
            if end.is_some_and(|end| version.key.as_slice() >= end) {
                return (out, Some(version.key.clone()));
            }
            if version.sequence > sequence || out.last().is_some_and(|(k, _)| *k == version.key) {
                continue;
            }
            if out.len() == limit {
                break;
            }
            let found = Found { sequence: version.sequence, value: entry.value().clone() };
            out.push((version.key.clone(), found));
        }
        (out, None)
    }

    #[cfg(test)] // The undo uses `insert_bytes`; tests use these.
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

    #[cfg(test)] // The undo uses `insert_bytes`; tests use these.
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
