//! Recovery (see the module header's "Recovery"): the newest map checkpoint loaded, then
//! each stream's segments scanned from its scan position, complete groups applied (the
//! version decides between copies), pointers followed and their blocks checked, and the
//! torn tail of a stream's last segment cut; `ScanWindow`, the sequential reads of a scan
//! (salvage's `scan_segments` reads through it too).
//!
//! Must never: apply part of a group, or a group whose pointer does not resolve to the block
//! it names; take damage in a sealed segment for a torn tail; write anything when the store
//! is opened read-only.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use tierkv_io::{AccessMethod, File, OpenOptions, Storage};

use super::lookup::missing_segment;
use super::segment::{create_segment, cut_and_refill, open_segment};
use super::{
    CheckpointState, Index, Pool, SegmentFile, SegmentInfo, Stream, StreamTail, Writer, STREAMS,
};
use crate::format::{self, BlockHeader, HeaderProblem, Location, BLOCKS_START, BLOCK_HEADER_BYTES};
use crate::{BlockError, BlockId, GroupId, RecoveryReport, StoreOptions};

/// Bytes read at a time while recovery scans a segment.
const SCAN_WINDOW_BYTES: usize = 1 << 20;

pub(super) struct Recovered {
    pub(super) index: Index,
    pub(super) writer: Writer,
    pub(super) checkpoint: CheckpointState,
    pub(super) report: RecoveryReport,
}

/// The scan's view of one group being assembled.
struct PendingGroup {
    start: u64,
    blocks: Vec<(BlockHeader, u64)>,
}

/// Loads the newest map checkpoint and replays the log after it (see the module header).
pub(super) fn recover(
    storage: &Storage,
    dir: &Path,
    options: &StoreOptions,
) -> Result<Recovered, BlockError> {
    let mut report = RecoveryReport::default();
    let mut segments: Vec<u64> = Vec::new();
    let mut maps: Vec<u64> = Vec::new();
    let read_only = options.read_only;
    for name in storage.list_dir(dir)? {
        if name.ends_with(".tmp") && read_only {
            // Never named: nothing reads it, and the next writer removes it.
        } else if name.ends_with(".tmp") {
            // CRASH: a temp file is a segment or checkpoint that never got its final name.
            storage.remove_file(dir.join(&name))?;
        } else if let Some(number) = format::parse_segment_file_name(&name) {
            segments.push(number);
        } else if let Some(sequence) = format::parse_map_file_name(&name) {
            maps.push(sequence);
        }
    }
    segments.sort_unstable();
    maps.sort_unstable();

    let mut index = Index::default();
    let mut checkpoint = CheckpointState::default();
    let mut next_group = 1u64;
    let mut scan_from: Option<[(u64, u64); STREAMS]> = None;
    if let Some(&sequence) = maps.last() {
        let path = dir.join(format::map_file_name(sequence));
        let file = storage.open(&path, &OpenOptions::new(AccessMethod::Syscall).read_only(true))?;
        let mut bytes = vec![0u8; file.len() as usize];
        file.read_at(&mut bytes, 0)?;
        let (header, entries) = format::decode_map(&bytes).map_err(|(offset, detail)| {
            BlockError::Corruption { file: path.clone(), offset, block: None, detail }
        })?;
        report.checkpoint = Some(header.sequence);
        report.checkpoint_entries = header.entries;
        checkpoint = CheckpointState { sequence };
        next_group = header.next_group.0;
        scan_from = Some(header.scan);
        index.map = entries.into_iter().collect();
        for &older in maps[..maps.len() - 1].iter().filter(|_| !read_only) {
            storage.remove_file(dir.join(format::map_file_name(older)))?;
        }
    }

    // Open every segment and check its header; find each stream's last segment.
    let mut last_of_stream: [Option<u64>; STREAMS] = [None; STREAMS];
    let mut stream_of: HashMap<u64, Stream> = HashMap::new();
    for &number in &segments {
        let segment = open_segment(storage, dir, options, number)?;
        let capacity = segment.writer.len();
        let mut head = vec![0u8; BLOCK_HEADER_BYTES.min(capacity as usize)];
        segment.writer.read_at(&mut head, 0)?;
        let header = format::decode_segment_header(&head).map_err(|detail| {
            BlockError::Corruption { file: segment.path.clone(), offset: 0, block: None, detail }
        })?;
        if header.number != number || capacity < BLOCKS_START || capacity % 4096 != 0 {
            return Err(BlockError::Corruption {
                file: segment.path.clone(),
                offset: 0,
                block: None,
                detail: format!(
                    "segment header says number {} in a file named for {number}, {capacity} bytes",
                    header.number
                ),
            });
        }
        let Some(stream) = Stream::from_code(header.stream) else {
            return Err(BlockError::Corruption {
                file: segment.path.clone(),
                offset: 32,
                block: None,
                detail: format!("unknown stream {}", header.stream),
            });
        };
        stream_of.insert(number, stream);
        // `segments` is sorted, so the last one seen is the highest.
        last_of_stream[stream as usize] = Some(number);
        index.file_bytes += capacity;
        index.segments.insert(
            number,
            SegmentInfo {
                file: Arc::new(segment),
                stream,
                capacity,
                live_bytes: 0,
                last_pointer: None,
                chain_from: None,
            },
        );
    }
    let scan = scan_from.unwrap_or([(0, 0); STREAMS]);
    // The scan's first segment may have been cleaned away since the checkpoint: what it
    // held that recovery needs was copied to later segments first.

    // Replay.
    let mut deleted: HashMap<BlockId, GroupId> = HashMap::new();
    // The pieces of chains not ended yet in the scan, by their first piece.
    let mut chains: HashMap<GroupId, Vec<(BlockHeader, u64, u64)>> = HashMap::new();
    // Group ids grow along each segment; the two streams interleave between segments, and
    // the scan may start before groups the checkpoint already counted (written, not yet
    // applied when it was taken), so the check starts from 0 in each segment.
    let mut max_group = 0u64;
    let mut tails: [Option<(u64, u64)>; STREAMS] = [None; STREAMS];
    let scanned: Vec<u64> =
        segments.iter().copied().filter(|n| *n >= scan[stream_of[n] as usize].0).collect();
    let files: HashMap<u64, Arc<SegmentFile>> =
        index.segments.iter().map(|(&n, info)| (n, Arc::clone(&info.file))).collect();
    let resolve = |pointer: &BlockHeader| resolve_pointer(&files, pointer);
    for number in scanned {
        let file = Arc::clone(&index.segments[&number].file);
        let stream = stream_of[&number];
        report.segments_scanned += 1;
        let (scan_segment, scan_offset) = scan[stream as usize];
        let start =
            if number == scan_segment { scan_offset.max(BLOCKS_START) } else { BLOCKS_START };
        let mut last_group = 0u64;
        let outcome = scan_segment_file(&file, start, &mut last_group, &resolve, |blocks| {
            let mut apply = |blocks: &[(BlockHeader, u64, u64)]| {
                for (header, at, offset) in blocks {
                    if header.is_tombstone() {
                        index.tombstones.insert((*at, *offset), (header.id, header.version));
                    }
                    apply_recovered(&mut index.map, &mut deleted, *at, *offset, header);
                }
            };
            // A chain's pieces wait for its ending piece (see `chain.rs`); its mark is last.
            match blocks.split_last() {
                Some(((mark, _, _), rest)) if mark.chain().is_some() => {
                    let (first, end) = mark.chain().expect("checked in the guard");
                    let held = chains.entry(first).or_default();
                    held.extend_from_slice(rest);
                    if end {
                        let held = chains.remove(&first).unwrap_or_default();
                        apply(&held);
                    }
                }
                _ => apply(blocks),
            }
        })?;
        max_group = max_group.max(last_group);
        report.bytes_scanned += outcome.end - start;
        report.groups_applied += outcome.groups;
        report.blocks_applied += outcome.blocks;
        let is_last = last_of_stream[stream as usize] == Some(number);
        match outcome.stop {
            None => {}
            Some((cut, reason, discarded_blocks)) if is_last => {
                // CRASH: the torn tail was never acknowledged; cutting it makes the file end
                // with zeros where the next group goes.
                let capacity = index.segments[&number].capacity;
                report.discarded_blocks = discarded_blocks;
                report.discarded_bytes = outcome.end.saturating_sub(cut);
                report.stop = Some((file.path.clone(), cut, reason));
                if !read_only {
                    cut_and_refill(&file, cut, capacity)?;
                }
                tails[stream as usize] = Some((number, cut));
                continue;
            }
            Some((cut, reason, _)) => {
                return Err(BlockError::Corruption {
                    file: file.path.clone(),
                    offset: cut,
                    block: None,
                    detail: format!(
                        "a sealed segment (not its stream's last) ends in an invalid block: {reason}"
                    ),
                });
            }
        }
        if is_last {
            // IMPORTANT: zeros at the scan's end do not prove the rest is zero: a torn group
            // can start with an unwritten piece and continue with written ones, and a later
            // unacknowledged group may lie complete behind it. New groups will be written
            // here, so everything after the end is cut now, or a later scan could read
            // such a group as continuing the log.
            let capacity = index.segments[&number].capacity;
            if outcome.end < capacity && !read_only {
                cut_and_refill(&file, outcome.end, capacity)?;
            }
            tails[stream as usize] = Some((number, outcome.end));
        }
    }
    // CRASH: a chain without its ending piece was never acknowledged: left out. Its
    // groups' ids count in `max_group`, so no later group takes them.
    report.chains_dropped = chains.len() as u64;
    next_group = next_group.max(max_group + 1);

    // Live bytes, and a check that every entry points at a segment that exists.
    let entries: Vec<(BlockId, Location)> = index.map.iter().map(|(&id, &l)| (id, l)).collect();
    for (id, location) in &entries {
        let Some(info) = index.segments.get_mut(&location.segment) else {
            return Err(missing_segment(dir, *id, location));
        };
        if location.offset + location.footprint() > info.capacity {
            return Err(BlockError::Corruption {
                file: info.file.path.clone(),
                offset: location.offset,
                block: Some(*id),
                detail: "the map points past the end of the segment".into(),
            });
        }
        info.live_bytes += location.footprint();
        index.live_bytes += location.footprint();
    }

    // Each stream continues in its last segment. One that recovery did not scan (it lies
    // before the scan position, which a checkpoint only allows when it was full) takes no
    // more groups: its tail is its end.
    let mut streams: [Option<StreamTail>; STREAMS] = [None, None];
    for (slot, last) in streams.iter_mut().zip(last_of_stream) {
        if let Some(number) = last {
            let info = &index.segments[&number];
            let tail = tails.iter().flatten().find(|(n, _)| *n == number).map(|&(_, t)| t);
            *slot = Some(StreamTail {
                active: Arc::clone(&info.file),
                capacity: info.capacity,
                tail: tail.unwrap_or(info.capacity),
                last_pointer: None,
                since: Instant::now(),
            });
        }
    }
    let mut next_segment = segments.last().map_or(1, |n| n + 1);
    if streams[Stream::User as usize].is_none() && !read_only {
        let number = next_segment;
        next_segment += 1;
        let capacity = options.sizing().min_bytes;
        let segment =
            Arc::new(create_segment(storage, dir, options, number, capacity, Stream::User)?.0);
        index.segments.insert(
            number,
            SegmentInfo {
                file: Arc::clone(&segment),
                stream: Stream::User,
                capacity,
                live_bytes: 0,
                last_pointer: None,
                chain_from: None,
            },
        );
        index.file_bytes += capacity;
        streams[Stream::User as usize] = Some(StreamTail {
            active: segment,
            capacity,
            tail: BLOCKS_START,
            last_pointer: None,
            since: Instant::now(),
        });
    }
    index.durable_scan = scan;
    let writer = Writer {
        streams,
        next_segment,
        next_group,
        buffer: Vec::new(),
        pool: Pool::default(),
        remote_dirty: Vec::new(),
        cleaning: None,
    };
    Ok(Recovered { index, writer, checkpoint, report })
}

/// Applies one recovered block to the map being rebuilt (see invariant 2).
fn apply_recovered(
    map: &mut HashMap<BlockId, Location>,
    deleted: &mut HashMap<BlockId, GroupId>,
    segment: u64,
    offset: u64,
    header: &BlockHeader,
) {
    let current = map.get(&header.id).map(|l| l.version);
    let gone = deleted.get(&header.id).copied();
    if header.is_tombstone() {
        if current.is_none_or(|v| v < header.version) {
            map.remove(&header.id);
        }
        if gone.is_none_or(|v| v < header.version) {
            deleted.insert(header.id, header.version);
        }
        return;
    }
    if gone.is_some_and(|v| v >= header.version) {
        return;
    }
    // A higher version is newer content; an equal one is a later copy of the same content.
    if current.is_none_or(|v| v <= header.version) {
        map.insert(
            header.id,
            Location {
                segment,
                offset,
                version: header.version,
                stored_len: header.stored_len,
                raw_len: header.raw_len,
            },
        );
    }
}

struct ScanOutcome {
    /// Where the valid blocks end.
    end: u64,
    groups: u64,
    blocks: u64,
    /// Where the scan stopped early: the cut offset, why, and the blocks of an incomplete
    /// group discarded.
    stop: Option<(u64, String, u64)>,
}

/// What a pointer resolves to: `Ok(Some((segment, offset)))`, `Ok(None)` (its segment was
/// cleaned away), `Err(why)` (its block is not there: torn); a failed read is the outer error.
type Resolution = Result<Option<(u64, u64)>, String>;

/// Resolves the pointers of a group during recovery.
type Resolver<'a> = dyn Fn(&BlockHeader) -> Result<Resolution, BlockError> + 'a;

/// Scans one segment from `start`, calling `apply` with the blocks of each complete group
/// (each with its segment and offset).
///
/// A pointer's block is checked with `resolve` before its group is applied: `Ok(Some(at))`
/// is where it lies, `Ok(None)` means its segment was cleaned away (what was live in it was
/// copied first, so the block is skipped), and `Err` means the block is not there: the
/// group was torn, and the scan stops before it.
fn scan_segment_file(
    file: &SegmentFile,
    start: u64,
    last_group: &mut u64,
    resolve: &Resolver<'_>,
    mut apply: impl FnMut(&[(BlockHeader, u64, u64)]),
) -> Result<ScanOutcome, BlockError> {
    let len = file.writer.len();
    let mut window = ScanWindow::new(&file.writer);
    let mut offset = start;
    let mut pending: Option<PendingGroup> = None;
    let mut outcome = ScanOutcome { end: start, groups: 0, blocks: 0, stop: None };
    // Bounded: every pass advances `offset` by at least one block or ends the loop.
    loop {
        if offset + BLOCK_HEADER_BYTES as u64 > len {
            break;
        }
        let head = window.read(offset, BLOCK_HEADER_BYTES, len)?.to_vec();
        let header = match format::decode_header(&head) {
            Ok(header) => header,
            Err(HeaderProblem::Zero) => break,
            Err(HeaderProblem::Invalid(detail)) => {
                outcome.stop = Some((offset, detail, 0));
                break;
            }
        };
        let end = offset + header.footprint();
        if end > len {
            outcome.stop = Some((offset, "a block runs past the end of the segment".into(), 0));
            break;
        }
        let payload = window.read(offset + BLOCK_HEADER_BYTES as u64, header.payload_len(), len)?;
        if let Err(detail) = format::verify_block(&head, payload) {
            outcome.stop = Some((offset, detail, 0));
            break;
        }
        let fits = match &pending {
            None => header.index == 0 && header.group.0 > *last_group,
            Some(group) => {
                let (first, _) = group.blocks[0];
                let (prev, _) = group.blocks[group.blocks.len() - 1];
                header.group == first.group
                    && header.count == first.count
                    && header.index == prev.index + 1
            }
        };
        if !fits {
            outcome.stop = Some((
                offset,
                format!(
                    "block {} of group {} (position {} of {}) does not continue the log",
                    header.id, header.group, header.index, header.count
                ),
                0,
            ));
            break;
        }
        pending.get_or_insert_with(|| PendingGroup { start: offset, blocks: Vec::new() });
        if let Some(group) = pending.as_mut() {
            group.blocks.push((header, offset));
        }
        if !header.is_last() {
            offset = end;
            continue;
        }
        let Some(group) = pending.take() else {
            break;
        };
        let mut located = Vec::with_capacity(group.blocks.len());
        let mut failure = None;
        for (block, at) in &group.blocks {
            match block.remote {
                None => located.push(Some((file.number, *at))),
                Some(_) => match resolve(block)? {
                    Ok(found) => located.push(found),
                    Err(detail) => {
                        failure = Some((*at, detail));
                        break;
                    }
                },
            }
        }
        if let Some((at, detail)) = failure {
            outcome.stop = Some((at, detail, 0));
            pending = Some(group);
            break;
        }
        let blocks: Vec<(BlockHeader, u64, u64)> = group
            .blocks
            .iter()
            .zip(located)
            .filter_map(|((block, _), at)| at.map(|(segment, at)| (block.pointee(), segment, at)))
            .collect();
        apply(&blocks);
        outcome.groups += 1;
        outcome.blocks += group.blocks.len() as u64;
        *last_group = header.group.0;
        offset = end;
        outcome.end = offset;
    }
    if let Some(group) = pending {
        // An incomplete group: cut where it starts, even if the scan ended at zeros.
        let reason = match outcome.stop.take() {
            Some((_, reason, _)) => {
                format!("incomplete group {}: {reason}", group.blocks[0].0.group)
            }
            None => {
                format!("incomplete group {}: its last block is missing", group.blocks[0].0.group)
            }
        };
        outcome.stop = Some((group.start, reason, group.blocks.len() as u64));
        outcome.end = offset;
    } else if let Some((cut, _, _)) = &outcome.stop {
        outcome.end = outcome.end.max(*cut);
    }
    Ok(outcome)
}

/// Finds the block a pointer points at and checks that it is the one the pointer's group
/// wrote: every header field equal, its checksum valid and equal to the one in the pointer.
/// See `scan_segment_file` for what the results mean; a failed read is an error.
fn resolve_pointer(
    files: &HashMap<u64, Arc<SegmentFile>>,
    pointer: &BlockHeader,
) -> Result<Resolution, BlockError> {
    let Some(remote) = pointer.remote else {
        return Ok(Err("not a pointer".into()));
    };
    let Some(file) = files.get(&remote.segment) else {
        return Ok(Ok(None));
    };
    let expected = pointer.pointee();
    let total = BLOCK_HEADER_BYTES as u64 + u64::from(pointer.stored_len);
    let at = remote.offset;
    let problem = |detail: String| {
        Ok(Err(format!(
            "pointer of block {} in group {} to segment {} offset {at}: {detail}",
            pointer.id, pointer.group, remote.segment
        )))
    };
    if at.checked_add(total).is_none_or(|end| end > file.writer.len()) {
        return problem("points past the end of the segment".into());
    }
    let mut bytes = vec![0u8; total as usize];
    file.writer.read_at(&mut bytes, at)?;
    match format::decode_header(&bytes) {
        Ok(found) if found == expected => {}
        Ok(found) => return problem(format!("found {found:?}")),
        Err(HeaderProblem::Zero) => return problem("found zeros".into()),
        Err(HeaderProblem::Invalid(detail)) => return problem(detail),
    }
    let (head, payload) = bytes.split_at(BLOCK_HEADER_BYTES);
    if let Err(detail) = format::verify_block(head, payload) {
        return problem(detail);
    }
    if format::u32_at(head, BLOCK_HEADER_BYTES - 4) != remote.crc {
        return problem("its checksum is not the one the pointer carries".into());
    }
    Ok(Ok(Some((remote.segment, at))))
}

/// Sequential reads through a window of `SCAN_WINDOW_BYTES`.
pub(crate) struct ScanWindow<'a> {
    file: &'a File,
    start: u64,
    bytes: Vec<u8>,
}

impl<'a> ScanWindow<'a> {
    pub(crate) fn new(file: &'a File) -> Self {
        ScanWindow { file, start: 0, bytes: Vec::new() }
    }

    /// `len` bytes at `offset`, all within the file of `file_len` bytes.
    pub(crate) fn read(
        &mut self,
        offset: u64,
        len: usize,
        file_len: u64,
    ) -> Result<&[u8], BlockError> {
        debug_assert!(offset + len as u64 <= file_len);
        let end = offset + len as u64;
        if offset < self.start || end > self.start + self.bytes.len() as u64 {
            let size = (len.max(SCAN_WINDOW_BYTES) as u64).min(file_len - offset) as usize;
            self.bytes.resize(size, 0);
            self.file.read_at(&mut self.bytes, offset)?;
            self.start = offset;
        }
        let from = (offset - self.start) as usize;
        Ok(&self.bytes[from..from + len])
    }
}
