//! Writing a group (see the module header's "Writing a group" and "Streams and rotation"):
//! a group validated and compressed, encoded and written at its stream's tail (larger
//! blocks into reused space, with pointers in the log, in runs), the active segment
//! rotated when the group does not fit, the group-commit round that makes it durable, and
//! only then the map updated (for a relocation group, only where the map still points at
//! the old copy).
//!
//! Must never: apply a group to the map before its fdatasync returned; let a stream's next
//! segment take a write before the old one, and the segments its pointers point into, are
//! durable.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use super::segment::create_segment;
use super::{
    lock, LogStore, Placed, Prepared, SegmentFile, SegmentInfo, Shared, Stream, StreamTail, Writer,
    RELOCATION_GROUP_BYTES,
};
use crate::format::{
    self, BlockHeader, Codec, Location, RemoteRef, BLOCKS_START, BLOCK_HEADER_BYTES,
    FLAG_LAST_IN_GROUP, FLAG_REMOTE, FLAG_TOMBSTONE, MAX_BLOCK_BYTES, MAX_GROUP_BLOCKS,
};
use crate::parts::{write_parts, Part};
use crate::stats::Counters;
use crate::writeback::Hints;
use crate::{BlockError, BlockWrite, GroupId};

impl LogStore {
    /// `BlockStore::apply_group`.
    pub(super) fn apply_changes(&self, changes: &[BlockWrite<'_>]) -> Result<GroupId, BlockError> {
        let shared = &*self.shared;
        shared.check_writable()?;
        validate_group(changes)?;
        let (prepared, payload_bytes) = prepare(shared.options.codec, changes);
        let (group, placed) = shared.write_group(&prepared, Stream::User, false)?;
        shared.wait_durable(group)?;
        shared.apply(group, &placed);
        Counters::add(&shared.counters.groups, 1);
        Counters::add(&shared.counters.blocks, changes.len() as u64);
        Counters::add(&shared.counters.payload_bytes, payload_bytes);
        shared.after_write()?;
        Ok(GroupId(group))
    }
}

/// A group's changes compressed (with no lock held), and their payload bytes.
pub(super) fn prepare<'a>(codec: Codec, changes: &[BlockWrite<'a>]) -> (Vec<Prepared<'a>>, u64) {
    let mut prepared = Vec::with_capacity(changes.len() + 1);
    let mut payload_bytes = 0u64;
    for change in changes {
        prepared.push(match *change {
            BlockWrite::Put(id, bytes) => {
                payload_bytes += bytes.len() as u64;
                let (codec, stored) = format::compress(codec, bytes);
                Prepared { id, flags: 0, codec, stored, raw_len: bytes.len() as u32, version: None }
            }
            BlockWrite::Delete(id) => Prepared {
                id,
                flags: FLAG_TOMBSTONE,
                codec: Codec::None,
                stored: Cow::Borrowed(&[]),
                raw_len: 0,
                version: None,
            },
        });
    }
    (prepared, payload_bytes)
}

pub(super) fn validate_group(changes: &[BlockWrite<'_>]) -> Result<(), BlockError> {
    if changes.is_empty() {
        return Err(BlockError::InvalidGroup("a group needs at least one block".into()));
    }
    if changes.len() > MAX_GROUP_BLOCKS {
        return Err(BlockError::InvalidGroup(format!(
            "{} blocks are over the limit of {MAX_GROUP_BLOCKS} per group",
            changes.len()
        )));
    }
    let mut seen = HashSet::with_capacity(changes.len());
    for change in changes {
        if !seen.insert(change.id()) {
            return Err(BlockError::InvalidGroup(format!(
                "block {} appears twice in one group",
                change.id()
            )));
        }
        if let BlockWrite::Put(id, bytes) = change {
            if bytes.len() > MAX_BLOCK_BYTES {
                return Err(BlockError::BlockTooLarge {
                    id: *id,
                    len: bytes.len(),
                    max: MAX_BLOCK_BYTES,
                });
            }
        }
    }
    Ok(())
}

impl Shared {
    /// Encodes and writes a group; returns its id and where each block went. Its blocks go
    /// to the tail of the stream's active segment, except that a user group's larger blocks
    /// go to reused free space while the pool has some, each with a pointer at the tail. A
    /// `chained` group (a piece of a chain) is recorded as such with the segments it wrote
    /// into, in the same step that records it written.
    pub(super) fn write_group(
        &self,
        blocks: &[Prepared<'_>],
        stream: Stream,
        chained: bool,
    ) -> Result<(u64, Vec<Placed>), BlockError> {
        debug_assert!(!blocks.is_empty() && blocks.len() <= MAX_GROUP_BLOCKS);
        let mut writer = lock(&self.writer);
        self.check_open()?;
        let remote = self.place_remote(&mut writer, blocks, stream);
        let footprint: u64 = blocks
            .iter()
            .zip(&remote)
            .map(|(b, r)| match r {
                Some(_) => BLOCK_HEADER_BYTES as u64,
                None => format::block_footprint(b.stored.len()),
            })
            .sum();
        let fits = writer.streams[stream as usize]
            .as_ref()
            .is_some_and(|s| s.tail + footprint <= s.capacity);
        if !fits {
            if let Err(error) = self.rotate(&mut writer, stream, footprint) {
                self.unplace(&mut writer, blocks, &remote);
                return Err(error);
            }
        }
        let group = writer.next_group;
        let (active, start) = match &writer.streams[stream as usize] {
            Some(s) => (Arc::clone(&s.active), s.tail),
            None => unreachable!("rotate leaves the stream an active segment"),
        };
        let segment = active.number;
        let count = blocks.len() as u32;
        // The group's headers, `BLOCK_HEADER_BYTES` each; payloads are written from where
        // they are (`write_parts`).
        let mut headers = std::mem::take(&mut writer.buffer);
        headers.clear();
        // The log part (its blocks and pointers), and the runs of reused space (their parts
        // in `remote_parts`). A run is written as soon as the next block does not extend it,
        // and the log part in pieces of `WRITEBACK_CHUNK_BYTES`, so that in a large group the
        // device writes back what is written while the rest is encoded (see `writeback`).
        // Pieces are at most a quarter of a segment, so that the small segments of the crash
        // sweeps write them too.
        let piece_bytes = self.writeback.chunk_bytes().min(self.options.segment_bytes / 4);
        let mut log_parts: Vec<Part<'_>> = Vec::with_capacity(blocks.len());
        let (mut log_bytes, mut log_written, mut log_parts_written) = (0u64, 0u64, 0usize);
        let mut remote_parts: Vec<Part<'_>> = Vec::new();
        let mut runs: Vec<Run> = Vec::new();
        let mut remote_bytes = 0u64;
        let mut hints = self.writeback.hints();
        let mut written: tierkv_io::Result<()> = Ok(());
        let mut placed = Vec::with_capacity(blocks.len());
        let mut last_pointer = None;
        for (index, (block, remote)) in blocks.iter().zip(&remote).enumerate() {
            let last = index + 1 == blocks.len();
            let header = BlockHeader {
                flags: block.flags | if last { FLAG_LAST_IN_GROUP } else { 0 },
                codec: block.codec,
                id: block.id,
                group: GroupId(group),
                version: block.version.unwrap_or(GroupId(group)),
                stored_len: block.stored.len() as u32,
                raw_len: block.raw_len,
                index: index as u32,
                count,
                remote: None,
            };
            let offset = start + log_bytes;
            let stored: &[u8] = &block.stored;
            let bytes = format::block_footprint(stored.len());
            let (location, pointer) = match remote {
                None => {
                    let part = Part::encode(&mut headers, &header, stored);
                    log_parts.push(part);
                    log_bytes += bytes;
                    if written.is_ok() && log_bytes - log_written >= piece_bytes {
                        let parts = &log_parts[log_parts_written..];
                        let at = start + log_written;
                        written = write_parts(&active.writer, &[], &headers, parts, at, &mut hints);
                        (log_written, log_parts_written) = (log_bytes, log_parts.len());
                    }
                    ((segment, offset), None)
                }
                Some((file, at)) => {
                    let part = Part::encode(&mut headers, &header, stored);
                    let crc = format::u32_at(&headers[part.header..], BLOCK_HEADER_BYTES - 4);
                    let pointer = BlockHeader {
                        flags: header.flags | FLAG_REMOTE,
                        remote: Some(RemoteRef { segment: file.number, offset: *at, crc }),
                        ..header
                    };
                    log_parts.push(Part::encode(&mut headers, &pointer, &[]));
                    log_bytes += BLOCK_HEADER_BYTES as u64;
                    last_pointer = Some(offset);
                    let extends =
                        runs.last().is_some_and(|r| r.file.number == file.number && r.end == *at);
                    if !extends {
                        if let (Some(run), true) = (runs.last(), written.is_ok()) {
                            written = run.write(&headers, &remote_parts, &mut hints);
                        }
                        let from = remote_parts.len();
                        runs.push(Run {
                            file: Arc::clone(file),
                            offset: *at,
                            end: *at,
                            parts: from..from,
                        });
                    }
                    remote_parts.push(part);
                    remote_bytes += bytes;
                    if let Some(run) = runs.last_mut() {
                        run.end += bytes;
                        run.parts.end = remote_parts.len();
                    }
                    ((file.number, *at), Some((segment, offset)))
                }
            };
            placed.push(Placed {
                id: block.id,
                location: Location {
                    segment: location.0,
                    offset: location.1,
                    version: header.version,
                    stored_len: header.stored_len,
                    raw_len: header.raw_len,
                },
                tombstone: header.is_tombstone(),
                pointer,
            });
        }
        assert_eq!(log_bytes, footprint);
        // CRASH (from the loop's first write on): a partly written group is discarded by recovery (no last-in-group block, a
        // block whose checksum fails, or a pointer whose block does not match it); it was
        // not acknowledged. Reused space held nothing that anyone needs.
        if let (Some(run), true) = (runs.last(), written.is_ok()) {
            written = run.write(&headers, &remote_parts, &mut hints);
        }
        if written.is_ok() && log_parts_written < log_parts.len() {
            let parts = &log_parts[log_parts_written..];
            written =
                write_parts(&active.writer, &[], &headers, parts, start + log_written, &mut hints);
        }
        drop(hints);
        let remote_blocks = remote_parts.len() as u64;
        drop((log_parts, remote_parts));
        if headers.capacity() <= 2 * RELOCATION_GROUP_BYTES as usize {
            writer.buffer = headers;
        }
        if let Err(error) = written {
            let error = BlockError::from(error);
            self.poison(&error);
            return Err(error);
        }
        Counters::add(&self.counters.device_bytes_written, footprint + remote_bytes);
        Counters::add(&self.counters.reused_blocks, remote_blocks);
        Counters::add(&self.counters.reused_bytes, remote_bytes);
        Counters::add(&self.counters.reused_runs, runs.len() as u64);
        let end = start + footprint;
        if let Some(s) = writer.streams[stream as usize].as_mut() {
            s.tail = end;
            s.last_pointer = last_pointer.or(s.last_pointer);
        }
        writer.next_group += 1;
        for Run { file, .. } in &runs {
            if !writer.remote_dirty.iter().any(|f| f.number == file.number) {
                writer.remote_dirty.push(Arc::clone(file));
            }
        }
        {
            let mut inflight = lock(&self.inflight);
            inflight.groups.insert(group, (stream, segment, start));
            if chained {
                let mut segments: Vec<u64> = runs.iter().map(|run| run.file.number).collect();
                segments.push(segment);
                inflight.chained.insert(group, segments);
            }
            inflight.tails[stream as usize] = Some((segment, end));
            inflight.next_group = writer.next_group;
            inflight.bytes_since_checkpoint += footprint + remote_bytes;
        }
        let mut sync = lock(&self.sync);
        sync.written = group;
        for file in runs.iter().map(|run| &run.file).chain(std::iter::once(&active)) {
            if !sync.dirty.iter().any(|f| f.number == file.number) {
                sync.dirty.push(Arc::clone(file));
            }
        }
        Ok((group, placed))
    }

    /// Seals a stream's active segment (durably) and starts a new one with room for
    /// `needed` bytes.
    fn rotate(&self, writer: &mut Writer, stream: Stream, needed: u64) -> Result<(), BlockError> {
        if writer.streams[stream as usize].is_some() {
            // IMPORTANT: the old segment is made durable before anything goes to the stream's
            // next one, so only a stream's last segment can end in a torn group.
            // The same holds for the blocks its pointers point at.
            let remote = if stream == Stream::User {
                std::mem::take(&mut writer.remote_dirty)
            } else {
                Vec::new()
            };
            let old = writer.streams[stream as usize].as_ref().expect("checked above");
            let files: Vec<&SegmentFile> =
                remote.iter().map(|f| &**f).chain(std::iter::once(&*old.active)).collect();
            if let Err(error) = files.iter().try_for_each(|f| f.writer.sync_data()) {
                let error = BlockError::from(error);
                self.poison(&error);
                return Err(error);
            }
            Counters::add(&self.counters.syncs, files.len() as u64);
            let number = old.active.number;
            let last_pointer = old.last_pointer;
            if let Some(info) = self.write_index().segments.get_mut(&number) {
                info.last_pointer = last_pointer;
            }
            lock(&self.sync).dirty.retain(|f| f.number != number);
        }
        let number = writer.next_segment;
        // About what the stream's last segment took in the target time, or the first size.
        // A segment made for one group over the largest size says nothing of the rate.
        let sizing = self.options.sizing();
        let sized = match &writer.streams[stream as usize] {
            Some(old) if old.capacity <= sizing.max_bytes => {
                sizing.next(old.capacity, old.since.elapsed())
            }
            _ => sizing.min_bytes,
        };
        let capacity = sized.max((BLOCKS_START + needed).next_multiple_of(4096));
        let segment =
            match create_segment(&self.storage, &self.dir, &self.options, number, capacity, stream)
            {
                Ok((segment, written)) => {
                    Counters::add(&self.counters.device_bytes_written, written);
                    Counters::add(&self.counters.syncs, 2);
                    Arc::new(segment)
                }
                Err(error) => {
                    // Nothing was lost: the old segment is intact and durable. A failed creation
                    // (ENOSPC) is reported without poisoning.
                    return Err(error);
                }
            };
        {
            let mut index = self.write_index();
            index.segments.insert(
                number,
                SegmentInfo {
                    file: Arc::clone(&segment),
                    stream,
                    capacity,
                    live_bytes: 0,
                    last_pointer: None,
                    chain_from: None,
                },
            );
            index.file_bytes += capacity;
        }
        writer.next_segment += 1;
        writer.streams[stream as usize] = Some(StreamTail {
            active: segment,
            capacity,
            tail: BLOCKS_START,
            last_pointer: None,
            since: Instant::now(),
        });
        lock(&self.inflight).tails[stream as usize] = Some((number, BLOCKS_START));
        Ok(())
    }

    /// Returns once `group` is durable, leading an fdatasync round if none runs.
    pub(super) fn wait_durable(&self, group: u64) -> Result<(), BlockError> {
        let mut sync = lock(&self.sync);
        // Bounded: each pass either returns, or waits for a round that ends in finite time.
        loop {
            if sync.durable >= group {
                return Ok(());
            }
            if self.poisoned.load(Ordering::Acquire) {
                drop(sync);
                return self.check_open();
            }
            if sync.running {
                sync = self.synced.wait(sync).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            sync.running = true;
            let target = sync.written;
            // Every group up to `target` lies in one of these, or in a segment a rotation
            // synced.
            let files = std::mem::take(&mut sync.dirty);
            drop(sync);
            // CRASH: until this returns, the groups up to `target` may or may not survive;
            // none of them is acknowledged yet.
            let result = sync_files(&files);
            sync = lock(&self.sync);
            sync.running = false;
            match result {
                Ok(()) => {
                    Counters::add(&self.counters.syncs, files.len() as u64);
                    sync.durable = sync.durable.max(target);
                }
                Err(error) => {
                    drop(sync);
                    self.poison(&BlockError::from(error));
                    sync = lock(&self.sync);
                }
            }
            self.synced.notify_all();
        }
    }

    /// Applies a durable group to the map.
    pub(super) fn apply(&self, group: u64, placed: &[Placed]) {
        let mut index = self.write_index();
        for block in placed {
            let location = &block.location;
            if let Some((segment, offset)) = block.pointer {
                // A pointer is needed only by recovery, until a checkpoint passes it.
                index.free(segment, offset, BLOCK_HEADER_BYTES as u64, group);
            }
            if block.tombstone {
                let at = (location.segment, location.offset);
                index.tombstones.insert(at, (block.id, location.version));
                index.free(location.segment, location.offset, location.footprint(), group);
            }
            let newer = index.map.get(&block.id).is_none_or(|old| old.version < location.version);
            if !newer {
                if !block.tombstone {
                    index.free(location.segment, location.offset, location.footprint(), group);
                }
                continue;
            }
            if block.tombstone {
                index.remove(block.id);
            } else {
                index.set(block.id, block.location);
            }
        }
        let mut inflight = lock(&self.inflight);
        inflight.groups.remove(&group);
        inflight.chained.remove(&group);
    }

    /// Applies a durable relocation group: each copy replaces the old one only where the map
    /// still points at the old one.
    pub(super) fn apply_relocation(&self, group: u64, placed: &[Placed], old: &[Location]) {
        let mut index = self.write_index();
        for (block, old) in placed.iter().zip(old) {
            let location = &block.location;
            if block.tombstone {
                index.tombstones.remove(&(old.segment, old.offset));
                let at = (location.segment, location.offset);
                index.tombstones.insert(at, (block.id, location.version));
                index.free(location.segment, location.offset, location.footprint(), group);
                continue;
            }
            if index.map.get(&block.id) == Some(old) {
                index.set(block.id, block.location);
            } else {
                index.free(location.segment, location.offset, location.footprint(), group);
            }
        }
        lock(&self.inflight).groups.remove(&group);
    }
}

/// A run of blocks bound for adjacent reused space in one segment.
struct Run {
    file: Arc<SegmentFile>,
    offset: u64,
    /// Where the run ends (its offset plus its blocks' footprints).
    end: u64,
    /// Its blocks in the group's list of remote parts.
    parts: std::ops::Range<usize>,
}

impl Run {
    fn write(
        &self,
        headers: &[u8],
        remote_parts: &[Part<'_>],
        hints: &mut Hints<'_>,
    ) -> tierkv_io::Result<()> {
        write_parts(
            &self.file.writer,
            &[],
            headers,
            &remote_parts[self.parts.clone()],
            self.offset,
            hints,
        )
    }
}

/// Syncs the files of a group-commit round: the log segment and the segments that blocks
/// went to through pointers. Their fdatasyncs run at once (the files but the first on
/// threads of their own), so a round costs about one sync's latency, not one per file;
/// the block layer merges the cache flushes that arrive together.
fn sync_files(files: &[Arc<SegmentFile>]) -> tierkv_io::Result<()> {
    let Some((first, rest)) = files.split_first() else {
        return Ok(());
    };
    if rest.is_empty() {
        return first.writer.sync_data();
    }
    std::thread::scope(|scope| {
        let others: Vec<_> =
            rest.iter().map(|file| scope.spawn(move || file.writer.sync_data())).collect();
        let mut result = first.writer.sync_data();
        for other in others {
            // A sync does not panic; if one did, the panic goes on here.
            let outcome = other.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            result = result.and(outcome);
        }
        result
    })
}
