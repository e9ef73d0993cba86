//! Reusing space (threaded logging; see the module header's "Reusing space"): the freed
//! extents (`Freed`), the pool of extents ready for reuse (`Pool`), when a free is reusable
//! at once (`Index::free`) or waits for a map checkpoint (`Shared::promote`), the pool
//! rebuilt at open, and the choice of reused space for a user group's larger blocks.
//!
//! Must never: put into the pool space that a live block, a tombstone recovery needs, or
//! recovery from the last durable checkpoint (as log, or through a pointer) still reads.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use super::{lock, Index, Prepared, SegmentFile, Shared, Stream, Writer};
use crate::format::{self, RemoteRef, BLOCKS_START, BLOCK_HEADER_BYTES, FLAG_TOMBSTONE};
use crate::stats::Counters;

/// Blocks of at least this footprint go to reused free space when some is ready. A smaller
/// one stays in the log, where its pointer would cost about as much as the block.
const REMOTE_MIN_BYTES: u64 = 512;

/// Free extents looked at per block before the block goes to the log instead.
const POOL_PROBES: usize = 64;

/// Space that a block, a pointer or a tombstone took, freed when the map moved on. It can
/// be reused once a checkpoint is durable that no longer needs it (see `Shared::promote`).
pub(super) struct Freed {
    segment: u64,
    offset: u64,
    bytes: u64,
    /// `Index::free_epoch` when it was freed.
    epoch: u64,
    /// The group that wrote what lay there (for a cleaning copy, the content's version).
    group: u64,
}

/// Free extents ready for reuse, under the writer lock: (segment, offset) → bytes.
///
/// Blocks fill one segment's extents in offset order, starting with the segment that has
/// the most free bytes: there the free runs are longest, so consecutive blocks land next to
/// each other (fewer, larger writes), and the densest segments are left alone.
#[derive(Default)]
pub(super) struct Pool {
    extents: BTreeMap<(u64, u64), u64>,
    /// Free bytes per segment.
    free: HashMap<u64, u64>,
    /// Where the next search starts: the segment being filled, and the offset in it.
    cursor: (u64, u64),
}

impl Pool {
    /// Adds an extent, merged with its neighbours.
    pub(super) fn insert(&mut self, segment: u64, offset: u64, bytes: u64) {
        *self.free.entry(segment).or_default() += bytes;
        let (mut start, mut len) = (offset, bytes);
        let before = self
            .extents
            .range(..(segment, offset))
            .next_back()
            .map(|(&(s, o), &l)| (s, o, l))
            .filter(|&(s, o, l)| s == segment && o + l == offset);
        if let Some((_, o, l)) = before {
            self.extents.remove(&(segment, o));
            start = o;
            len += l;
        }
        if let Some(l) = self.extents.remove(&(segment, offset + bytes)) {
            len += l;
        }
        self.extents.insert((segment, start), len);
    }

    /// The first extent of `segment` at or after `from` that holds `bytes`, looking at
    /// `POOL_PROBES` extents at most.
    fn find_in(&self, segment: u64, from: u64, bytes: u64) -> Option<((u64, u64), u64)> {
        self.extents
            .range((segment, from)..(segment + 1, 0))
            .take(POOL_PROBES)
            .find(|(&(s, o), &l)| l >= bytes && RemoteRef::representable(s, o))
            .map(|(&at, &l)| (at, l))
    }

    /// Takes `bytes`: after the cursor in the segment being filled, or else from the start
    /// of the segment with the most free bytes, or else from any of the first extents.
    pub(super) fn take(&mut self, bytes: u64) -> Option<(u64, u64)> {
        let found = self.find_in(self.cursor.0, self.cursor.1, bytes).or_else(|| {
            let best = self.free.iter().max_by_key(|(&s, &b)| (b, std::cmp::Reverse(s)))?.0;
            self.find_in(*best, 0, bytes)
        });
        let found = found.or_else(|| {
            self.extents
                .iter()
                .take(POOL_PROBES)
                .find(|(&(s, o), &l)| l >= bytes && RemoteRef::representable(s, o))
                .map(|(&at, &l)| (at, l))
        });
        let ((segment, offset), len) = found?;
        self.extents.remove(&(segment, offset));
        if len > bytes {
            self.extents.insert((segment, offset + bytes), len - bytes);
        }
        if let Some(free) = self.free.get_mut(&segment) {
            *free -= bytes;
            if *free == 0 {
                self.free.remove(&segment);
            }
        }
        self.cursor = (segment, offset + bytes);
        Some((segment, offset))
    }

    /// Drops a segment's extents; returns their bytes.
    pub(super) fn remove_segment(&mut self, segment: u64) -> u64 {
        let keys: Vec<(u64, u64)> =
            self.extents.range((segment, 0)..(segment + 1, 0)).map(|(&k, _)| k).collect();
        for key in &keys {
            self.extents.remove(key);
        }
        self.free.remove(&segment).unwrap_or(0)
    }
}

impl Index {
    /// Records space that nothing in the map needs any more. It is reusable at once when
    /// the last durable checkpoint already lets recovery skip it: its segment lies before
    /// its stream's scan position (so recovery does not scan it as log), and the group that
    /// wrote it before the first user group recovery replays (so no pointer that recovery
    /// follows leads to it). The map in that checkpoint, or in one taken before this free
    /// is applied, may still point at it; recovery then replays the group that freed it
    /// (it was not applied at the snapshot, so it lies after the scan position), which
    /// moves the entry on before anything reads it. Otherwise it waits for a checkpoint
    /// (see `Shared::promote`).
    pub(super) fn free(&mut self, segment: u64, offset: u64, bytes: u64, group: u64) {
        let epoch = self.free_epoch.load(Ordering::Relaxed);
        let freed = Freed { segment, offset, bytes, epoch, group };
        let skipped_by_recovery = group < self.durable_unapplied
            && self
                .segments
                .get(&segment)
                .is_some_and(|info| segment < self.durable_scan[info.stream as usize].0);
        if skipped_by_recovery {
            self.ready.get_mut().unwrap_or_else(PoisonError::into_inner).push(freed);
            *self.ready_bytes.get_mut() += bytes;
        } else {
            self.pending.push(freed);
            self.pending_bytes += bytes;
            self.freed_since_checkpoint += bytes;
        }
    }
}

impl Shared {
    /// Chooses reused space for a user group's larger puts while the pool has some: for
    /// each block, its segment file and offset there, or `None` for the log.
    pub(super) fn place_remote(
        &self,
        writer: &mut Writer,
        blocks: &[Prepared<'_>],
        stream: Stream,
    ) -> Vec<Option<(Arc<SegmentFile>, u64)>> {
        let mut remote: Vec<Option<(Arc<SegmentFile>, u64)>> = vec![None; blocks.len()];
        if stream != Stream::User {
            return remote;
        }
        let index = self.read_index();
        self.take_ready(writer, &index);
        if writer.pool.extents.is_empty() {
            return remote;
        }
        // Appending is sequential and cheaper than filling holes: while the files are under
        // the space target, the log grows (and segments that die whole are deleted for
        // free); at the target, writes fill the pool instead of growing the files. The more
        // free space the pool holds, the longer its free runs, and the fewer writes a group
        // of reused blocks takes.
        let unused: u64 = writer
            .streams
            .iter()
            .flatten()
            .map(|tail| tail.capacity.saturating_sub(tail.tail))
            .sum();
        let used = index.file_bytes.saturating_sub(unused);
        if (used as f64) < self.options.space_target * index.live_bytes as f64 {
            return remote;
        }
        let mut taken = 0u64;
        for (block, slot) in blocks.iter().zip(remote.iter_mut()) {
            let bytes = format::block_footprint(block.stored.len());
            if block.flags & FLAG_TOMBSTONE != 0 || bytes < REMOTE_MIN_BYTES {
                continue;
            }
            let Some((segment, offset)) = writer.pool.take(bytes) else {
                continue;
            };
            taken += bytes;
            match index.segments.get(&segment) {
                Some(info) => *slot = Some((Arc::clone(&info.file), offset)),
                // Cannot happen: cleaning empties a segment's pool before deleting it.
                None => debug_assert!(false, "pool extent in missing segment {segment}"),
            }
        }
        self.pool_bytes.fetch_sub(taken, Ordering::Relaxed);
        remote
    }

    /// Moves the space freed since the last call that is reusable already into the pool,
    /// but for the segment being cleaned (it is about to be deleted) and deleted ones.
    fn take_ready(&self, writer: &mut Writer, index: &Index) {
        if index.ready_bytes.load(Ordering::Relaxed) == 0 {
            return;
        }
        let ready = std::mem::take(&mut *lock(&index.ready));
        let (mut added, mut taken) = (0u64, 0u64);
        for freed in ready {
            taken += freed.bytes;
            if index.segments.contains_key(&freed.segment) && writer.cleaning != Some(freed.segment)
            {
                writer.pool.insert(freed.segment, freed.offset, freed.bytes);
                added += freed.bytes;
            }
        }
        index.ready_bytes.fetch_sub(taken, Ordering::Relaxed);
        self.pool_bytes.fetch_add(added, Ordering::Relaxed);
        Counters::add(&self.counters.reusable_at_once_bytes, added);
    }

    /// Gives the reused space chosen for a group that was not written back to the pool.
    pub(super) fn unplace(
        &self,
        writer: &mut Writer,
        blocks: &[Prepared<'_>],
        remote: &[Option<(Arc<SegmentFile>, u64)>],
    ) {
        for (block, remote) in blocks.iter().zip(remote) {
            if let Some((file, offset)) = remote {
                let bytes = format::block_footprint(block.stored.len());
                writer.pool.insert(file.number, *offset, bytes);
                self.pool_bytes.fetch_add(bytes, Ordering::Relaxed);
            }
        }
    }

    /// At open, after recovery: the free space of the segments that recovery no longer
    /// scans (sealed, before their stream's scan position) goes to the pool: every byte
    /// there that no live block or needed tombstone takes. Only complete groups before the
    /// scan position wrote there, and none of their pointers is read again. For the same
    /// reason, space that any group written so far frees is reusable at once.
    pub(super) fn rebuild_pool(&self) {
        let mut writer = lock(&self.writer);
        let actives: Vec<u64> =
            writer.streams.iter().flatten().map(|tail| tail.active.number).collect();
        let mut index = self.write_index();
        index.durable_unapplied = writer.next_group;
        let index = &*index;
        let eligible = |segment: u64| {
            index.segments.get(&segment).is_some_and(|info| {
                !actives.contains(&segment) && segment < index.durable_scan[info.stream as usize].0
            })
        };
        let mut taken: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
        for location in index.map.values().filter(|l| eligible(l.segment)) {
            taken
                .entry(location.segment)
                .or_default()
                .push((location.offset, location.footprint()));
        }
        for &(segment, offset) in index.tombstones.keys().filter(|(s, _)| eligible(*s)) {
            taken.entry(segment).or_default().push((offset, BLOCK_HEADER_BYTES as u64));
        }
        let mut added = 0u64;
        for (&segment, info) in index.segments.iter().filter(|(&n, _)| eligible(n)) {
            let mut extents = taken.remove(&segment).unwrap_or_default();
            extents.sort_unstable();
            let mut free_from = BLOCKS_START;
            for (offset, bytes) in extents.into_iter().chain([(info.capacity, 0)]) {
                if offset > free_from {
                    writer.pool.insert(segment, free_from, offset - free_from);
                    added += offset - free_from;
                }
                free_from = free_from.max(offset + bytes);
            }
        }
        self.pool_bytes.fetch_add(added, Ordering::Relaxed);
    }

    /// Moves the space that the checkpoint just made durable no longer needs into the pool.
    /// An extent is reusable when (1) it was freed before the checkpoint's snapshot, so the
    /// map there does not point at it; (2) its segment is sealed and lies before its
    /// stream's scan position, so recovery never scans it as log; and (3) the group that
    /// wrote it lies before the first user group recovery replays, so no pointer that
    /// recovery reads points at it.
    pub(super) fn promote(
        &self,
        writer: &mut Writer,
        index: &mut Index,
        epoch: u64,
        unapplied: u64,
    ) {
        let actives: Vec<u64> =
            writer.streams.iter().flatten().map(|tail| tail.active.number).collect();
        let scan = index.durable_scan;
        let mut added = 0u64;
        let mut dropped = 0u64;
        let segments = &index.segments;
        index.pending.retain(|freed| {
            let Some(info) = segments.get(&freed.segment) else {
                dropped += freed.bytes;
                return false;
            };
            let reusable = freed.epoch <= epoch
                && freed.group < unapplied
                && !actives.contains(&freed.segment)
                && freed.segment < scan[info.stream as usize].0;
            if reusable {
                writer.pool.insert(freed.segment, freed.offset, freed.bytes);
                added += freed.bytes;
            }
            !reusable
        });
        index.pending_bytes -= added + dropped;
        self.pool_bytes.fetch_add(added, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
