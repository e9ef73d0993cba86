//! Map checkpoints (see the module header's "Map checkpoints"): the map written to
//! `{sequence}.map` (temp file, sync, rename, directory sync) with each stream's scan
//! position, when a periodic one is due, and the sync of every segment before the
//! checkpoint an open writes after replaying groups.
//!
//! Must never: take a checkpoint while a relocation group is in flight, or claim a scan
//! position past a group not yet applied to the map.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tierkv_io::{AccessMethod, OpenOptions};

use super::{lock, SegmentFile, Shared, Stream};
use crate::format::{self, Location, MapHeader};
use crate::stats::Counters;
use crate::{BlockError, BlockId, GroupId};

/// A periodic map checkpoint waits for at least this many times its own size of log, so
/// that checkpoints of a large map cost a bounded share of the writes.
const CHECKPOINT_COST_RATIO: u64 = 16;

/// A periodic map checkpoint is also due once the space freed since the last one reaches
/// this share of the live bytes: the space becomes reusable only after a checkpoint.
const FREED_SHARE_FOR_CHECKPOINT: f64 = 0.2;

/// ... but not before this many bytes were written since the last one.
const CHECKPOINT_MIN_BYTES: u64 = 64 << 10;

impl Shared {
    /// Writes a map checkpoint (see the module header).
    pub(super) fn write_checkpoint(&self) -> Result<(), BlockError> {
        // IMPORTANT: no relocation group may be in flight while the snapshot is taken: a
        // copy of a block deleted meanwhile would be replayed after a scan position that
        // no longer sees the tombstone.
        let _cleaning = lock(&self.cleaning);
        let mut state = lock(&self.checkpoint);
        let (header, entries, epoch, unapplied, freed_before) = {
            let index = self.read_index();
            let inflight = lock(&self.inflight);
            let scan = [inflight.scan_start(Stream::User), inflight.scan_start(Stream::Cold)];
            // Space freed before this snapshot is not in its map; the frees after it get a
            // higher tag. (No free runs now: frees take the index lock for writing.)
            let epoch = index.free_epoch.fetch_add(1, Ordering::Relaxed);
            let freed_before = index.freed_since_checkpoint;
            // The first user group whose pointers recovery from this checkpoint replays.
            let unapplied = inflight
                .groups
                .iter()
                .find(|(_, (stream, _, _))| *stream == Stream::User)
                .map_or(inflight.next_group, |(&group, _)| group);
            let entries: Vec<(BlockId, Location)> =
                index.map.iter().map(|(&id, &location)| (id, location)).collect();
            let header = MapHeader {
                sequence: state.sequence + 1,
                scan,
                next_group: GroupId(inflight.next_group),
                entries: entries.len() as u64,
            };
            drop(inflight);
            (header, entries, epoch, unapplied, freed_before)
        };
        let bytes = format::encode_map(&header, &entries);
        let name = format::map_file_name(header.sequence);
        let temp = self.dir.join(format!("{name}.tmp"));
        let path = self.dir.join(&name);
        let file = self.storage.open(
            &temp,
            &OpenOptions::new(AccessMethod::Syscall)
                .create(true)
                .mode(self.options.file_mode)
                .chunk_bytes(1),
        )?;
        file.set_len(0)?;
        file.write_at(&bytes, 0)?;
        file.sync_data()?;
        drop(file);
        self.storage.rename(&temp, &path)?;
        // CRASH: once this directory sync returns, recovery starts from this checkpoint.
        self.storage.sync_dir(&self.dir)?;
        Counters::add(&self.counters.device_bytes_written, bytes.len() as u64);
        Counters::add(&self.counters.checkpoint_bytes, bytes.len() as u64);
        Counters::add(&self.counters.checkpoints, 1);
        Counters::add(&self.counters.syncs, 2);
        let previous = state.sequence;
        state.sequence = header.sequence;
        drop(state);
        {
            let mut writer = lock(&self.writer);
            let mut index = self.write_index();
            let index = &mut *index;
            index.durable_scan = header.scan;
            index.durable_unapplied = unapplied;
            index.freed_since_checkpoint -= freed_before.min(index.freed_since_checkpoint);
            // Tombstones before their stream's scan position are in the checkpoint now.
            let segments = &index.segments;
            index.tombstones.retain(|&(segment, offset), _| {
                segments
                    .get(&segment)
                    .is_none_or(|info| (segment, offset) >= header.scan[info.stream as usize])
            });
            self.promote(&mut writer, index, epoch, unapplied);
        }
        lock(&self.inflight).bytes_since_checkpoint = 0;
        if previous > 0 {
            // CRASH: a stale checkpoint left behind, or back after a crash (this deletion is
            // made durable by the next checkpoint's directory sync), is ignored: recovery
            // takes the newest and deletes the others.
            let old = self.dir.join(format::map_file_name(previous));
            if self.storage.exists(&old)? {
                self.storage.remove_file(&old)?;
            }
        }
        Ok(())
    }

    /// Syncs every segment file.
    pub(super) fn sync_all_segments(&self) -> Result<(), BlockError> {
        let files: Vec<Arc<SegmentFile>> =
            self.read_index().segments.values().map(|info| Arc::clone(&info.file)).collect();
        for file in files {
            file.writer.sync_data()?;
            Counters::add(&self.counters.syncs, 1);
        }
        Ok(())
    }

    /// A periodic checkpoint is due once `checkpoint_bytes` were written since the last, or
    /// the space freed since then (reusable only after a checkpoint) reached
    /// `FREED_SHARE_FOR_CHECKPOINT` of the live bytes; and in either case at least
    /// `CHECKPOINT_MIN_BYTES`, and `CHECKPOINT_COST_RATIO` times the map checkpoint's size,
    /// were written.
    pub(super) fn checkpoint_due(&self) -> bool {
        let (entries, freed, live) = {
            let index = self.read_index();
            (index.map.len() as u64, index.freed_since_checkpoint, index.live_bytes)
        };
        let written = lock(&self.inflight).bytes_since_checkpoint;
        let freed = freed as f64 >= FREED_SHARE_FOR_CHECKPOINT * live as f64;
        let cost = CHECKPOINT_COST_RATIO * entries * format::MAP_ENTRY_BYTES as u64;
        (written >= self.options.checkpoint_bytes || freed)
            && written >= cost.max(CHECKPOINT_MIN_BYTES)
    }
}
