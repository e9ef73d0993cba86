//! `scan_segments`: every block of a log store's segment files whose header and checksum
//! hold, found without the map, for salvaging a store that `LogStore::open` refuses (a
//! damaged map checkpoint, a sealed segment with a damaged block in the part recovery
//! reads, a damaged segment header).
//!
//! The scan reads every `*.blk` file of the directory from `BLOCKS_START`, one
//! `BLOCK_ALIGN` step at a time: where a header decodes and the block's checksum holds, it
//! takes the block and jumps over it; anywhere else it moves on by one step, so a damaged
//! block costs only itself. Of the copies of an id it keeps the one recovery would: the
//! highest version, unless a tombstone of that version or a higher one deletes it
//! (`apply_recovered`). Pointers (`FLAG_REMOTE`) are checked against the copy at the place
//! they name. Blocks are read again, and checked again, when asked for (`read`): the scan
//! holds places, not payloads.
//!
//! Without the map, the newest intact copy may be older than the newest copy written, when
//! that one was damaged. The scan says so where it can tell (`ScannedBlock::doubt`):
//! - a damaged block whose header still decodes names its id and version;
//! - a group is seen in the log (a pointer or a damaged header of it, or both its first and
//!   last block, or a block of it next to bytes that do not decode) but not all of its
//!   blocks: the missing ones held ids the scan cannot know, so every copy older than the
//!   group is in doubt;
//! - a segment file shorter than its header says lost the groups at its end: every copy
//!   older than the next segment of its stream is in doubt (every copy, for a stream's last);
//! - an incomplete group of the layer above at the end of a stream's last segment is taken,
//!   as recovery takes it, for a write that never finished: its blocks are left out, and
//!   the older copies of the ids it wrote are in doubt (unless the caller knows the write
//!   finished: `ScanOptions::keep_unfinished`). Cleaning's groups are never left out: their
//!   copies carry their originals' versions.
//!
//! A doubt says the oldest version the lost copy could have (`Doubt::oldest`): a group of
//! the layer above writes at its own version, cleaning copies at the originals'.
//!
//! What it cannot tell: a block lost with no trace (its header unreadable and its group
//! otherwise gone); and a payload that happens to hold the image of a valid block (a value
//! that is itself a block) is taken for one where the block around it is damaged. A
//! deleted block whose tombstone cleaning dropped can come back; its id is no longer in
//! use, so a caller that follows ids from a root never meets it.
//!
//! Must never: write, create or remove anything; return bytes whose checksum did not hold;
//! allocate by a length it has not checked against `MAX_BLOCK_BYTES` and the file's size.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use tierkv_io::{AccessMethod, File, OpenOptions, Storage};

use crate::format::{
    self, BlockHeader, HeaderProblem, BLOCKS_START, BLOCK_ALIGN, BLOCK_HEADER_BYTES, FLAG_RELOCATED,
};
use crate::log_store::ScanWindow;
use crate::read;
use crate::{BlockError, BlockId, GroupId};

/// The stream of the layer above's groups (cleaning's copies go to another).
const USER_STREAM: u8 = 0;

/// A block the scan found: the newest intact copy of its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScannedBlock {
    /// The block's id.
    pub id: BlockId,
    /// Its version (the group that wrote this content).
    pub version: GroupId,
    /// Bytes of its content.
    pub raw_len: u32,
    /// Why a newer copy may have been lost (see the module header); `None` when the scan
    /// found no sign of one.
    pub doubt: Option<Doubt>,
}

/// A sign that a newer copy of a block than the one kept may have been lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Doubt {
    /// The oldest version the lost copy could have (newer than the kept one's): a caller
    /// that knows no version after some `v` wrote the block (the layer above never rewrites
    /// a block it has published) can set the doubt aside when `oldest > v`.
    pub oldest: GroupId,
    /// Why, in words.
    pub reason: String,
}

impl std::fmt::Display for Doubt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// Bytes of a segment file that do not hold an intact block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanDamage {
    /// The segment file.
    pub file: PathBuf,
    /// Where the damage starts.
    pub offset: u64,
    /// How many bytes it covers (a block's header and payload, or the run of bytes that
    /// did not decode).
    pub bytes: u64,
    /// The block and version its header names, where the header still decodes.
    pub block: Option<(BlockId, GroupId)>,
    /// What is wrong.
    pub detail: String,
}

impl std::fmt::Display for ScanDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} offset {} ({} bytes)", self.file.display(), self.offset, self.bytes)?;
        if let Some((id, version)) = self.block {
            write!(f, ", block {id} version {version}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// What `scan_segments` found (see the module header).
pub struct SegmentScan {
    files: HashMap<u64, Segment>,
    blocks: BTreeMap<BlockId, Chosen>,
    damage: Vec<ScanDamage>,
    notes: Vec<String>,
    bytes_scanned: u64,
}

impl std::fmt::Debug for SegmentScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentScan")
            .field("segments", &self.files.len())
            .field("blocks", &self.blocks.len())
            .field("damage", &self.damage)
            .field("notes", &self.notes)
            .finish()
    }
}

/// The copy kept for an id.
struct Chosen {
    block: ScannedBlock,
    segment: u64,
    offset: u64,
    stored_len: u32,
}

struct Segment {
    path: PathBuf,
    file: File,
    /// The stream its header names; `None` when the header is damaged.
    stream: Option<u8>,
    /// Shorter than its header says: the blocks at its end are gone without a trace.
    cut: bool,
}

/// An intact block (content or tombstone) at a place.
#[derive(Clone, Copy)]
struct Copy {
    header: BlockHeader,
    segment: u64,
    offset: u64,
    crc: u32,
}

/// A damaged block whose header decodes, or a pointer whose block is not there.
struct Claim {
    header: BlockHeader,
    /// Where the damaged block lies (segment, offset); `None` for a pointer's block.
    place: Option<(u64, u64)>,
}

/// What the scan saw of one group.
#[derive(Default)]
struct GroupSeen {
    count: u32,
    seen: BTreeSet<u32>,
    claimed: BTreeSet<u32>,
    /// A pointer or a claim of it was seen, or both ends, or a block beside undecodable bytes.
    in_log: bool,
    /// Cleaning wrote it: its blocks are copies (`FLAG_RELOCATED`) at their originals'
    /// versions.
    relocated: bool,
    /// Places of its blocks (log part and remote), to find the end of a segment.
    places: Vec<(u64, u64)>,
}

/// How `scan_segments_with` scans.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanOptions {
    /// Keep the blocks of incomplete groups at the end of a stream's last segment rather
    /// than leaving them out as a write that never finished: for a caller that knows
    /// otherwise (the layer above's log shows the write finished).
    pub keep_unfinished: bool,
}

/// Scans every segment file in `dir` (see the module header). Nothing is written.
///
/// # Errors
///
/// `BlockError::Io` when the directory cannot be listed or a file cannot be opened or read.
/// Damage is never an error: it is in `SegmentScan::damage`.
pub fn scan_segments(storage: &Storage, dir: &Path) -> Result<SegmentScan, BlockError> {
    scan_segments_with(storage, dir, ScanOptions::default())
}

/// `scan_segments`, as `options` say.
///
/// # Errors
///
/// As `scan_segments`.
pub fn scan_segments_with(
    storage: &Storage,
    dir: &Path,
    options: ScanOptions,
) -> Result<SegmentScan, BlockError> {
    let mut numbers: Vec<u64> = storage
        .list_dir(dir)?
        .iter()
        .filter_map(|name| format::parse_segment_file_name(name))
        .collect();
    numbers.sort_unstable();
    let mut files = HashMap::new();
    let mut copies: Vec<Copy> = Vec::new();
    let mut pointers: Vec<Copy> = Vec::new();
    let mut claims: Vec<Claim> = Vec::new();
    let mut damage: Vec<ScanDamage> = Vec::new();
    let mut notes = Vec::new();
    // Runs of undecodable bytes, by segment: (start, end).
    let mut garbage: Vec<(u64, u64, u64)> = Vec::new();
    let mut bytes_scanned = 0u64;
    for &number in &numbers {
        let path = dir.join(format::segment_file_name(number));
        let file = storage.open(&path, &OpenOptions::new(AccessMethod::Syscall).read_only(true))?;
        let len = file.len();
        let mut head = vec![0u8; (BLOCK_HEADER_BYTES as u64).min(len) as usize];
        if !head.is_empty() {
            file.read_at(&mut head, 0)?;
        }
        let header = format::decode_segment_header(&head);
        let cut = header.as_ref().is_ok_and(|header| header.capacity > len);
        if let Some(capacity) = header.as_ref().ok().map(|h| h.capacity).filter(|_| cut) {
            damage.push(ScanDamage {
                file: path.clone(),
                offset: len,
                bytes: capacity - len,
                block: None,
                detail: format!("the file is cut short: {len} of its {capacity} bytes are left"),
            });
        }
        let stream = match header {
            Ok(header) if header.number == number => Some(header.stream),
            Ok(header) => {
                notes.push(format!(
                    "{}: the segment header says number {}; its blocks are read all the same",
                    path.display(),
                    header.number
                ));
                Some(header.stream)
            }
            Err(detail) => {
                damage.push(ScanDamage {
                    file: path.clone(),
                    offset: 0,
                    bytes: BLOCKS_START.min(len),
                    block: None,
                    detail: format!("segment header: {detail}"),
                });
                None
            }
        };
        let mut sink = Sink {
            number,
            path: &path,
            copies: &mut copies,
            pointers: &mut pointers,
            claims: &mut claims,
            damage: &mut damage,
            garbage: &mut garbage,
            claimed_until: 0,
        };
        bytes_scanned += scan_file(&file, len, &mut sink)?;
        files.insert(number, Segment { path, file, stream, cut });
    }
    let scan = Resolve { files: &files, copies, pointers, claims, garbage, options };
    let (blocks, more_notes) = scan.choose();
    notes.extend(more_notes);
    debug_assert!(blocks.iter().all(|(id, chosen)| *id == chosen.block.id));
    Ok(SegmentScan { files, blocks, damage, notes, bytes_scanned })
}

/// Where one file's findings go.
struct Sink<'a> {
    number: u64,
    path: &'a Path,
    copies: &'a mut Vec<Copy>,
    pointers: &'a mut Vec<Copy>,
    claims: &'a mut Vec<Claim>,
    damage: &'a mut Vec<ScanDamage>,
    garbage: &'a mut Vec<(u64, u64, u64)>,
    /// The end of the last damaged block whose header decoded: its payload is reported
    /// with it, not again as bytes that do not decode.
    claimed_until: u64,
}

impl Sink<'_> {
    /// Records undecodable bytes at `offset`, joined to the run just before them.
    fn garbage_at(&mut self, offset: u64, detail: &str) {
        if offset < self.claimed_until {
            return;
        }
        let end = offset + BLOCK_ALIGN;
        if let Some(last) = self.garbage.last_mut().filter(|g| g.0 == self.number && g.2 == offset)
        {
            last.2 = end;
            if let Some(damage) = self.damage.last_mut() {
                damage.bytes = end - damage.offset;
            }
            return;
        }
        self.garbage.push((self.number, offset, end));
        self.damage.push(ScanDamage {
            file: self.path.to_path_buf(),
            offset,
            bytes: BLOCK_ALIGN,
            block: None,
            detail: format!("bytes that do not hold a block ({detail})"),
        });
    }
}

/// Scans one file; returns the bytes it read.
fn scan_file(file: &File, len: u64, sink: &mut Sink<'_>) -> Result<u64, BlockError> {
    let mut window = ScanWindow::new(file);
    let mut offset = BLOCKS_START;
    // Bounded: every pass moves `offset` on by at least `BLOCK_ALIGN`.
    while offset + BLOCK_HEADER_BYTES as u64 <= len {
        assert!(offset.is_multiple_of(BLOCK_ALIGN), "the scan left the block grid at {offset}");
        let head = window.read(offset, BLOCK_HEADER_BYTES, len)?.to_vec();
        let header = match format::decode_header(&head) {
            Ok(header) => header,
            Err(HeaderProblem::Zero) => {
                offset += BLOCK_ALIGN;
                continue;
            }
            Err(HeaderProblem::Invalid(detail)) => {
                sink.garbage_at(offset, &detail);
                offset += BLOCK_ALIGN;
                continue;
            }
        };
        let crc = format::u32_at(&head, BLOCK_HEADER_BYTES - 4);
        let copy = Copy { header, segment: sink.number, offset, crc };
        if header.remote.is_some() {
            sink.pointers.push(copy);
            offset += header.footprint();
            continue;
        }
        let end = offset + header.footprint();
        let checked = match end <= len {
            false => Err("the block runs past the end of the file".to_string()),
            true => {
                let payload =
                    window.read(offset + BLOCK_HEADER_BYTES as u64, header.payload_len(), len)?;
                format::verify_block(&head, payload)
            }
        };
        match checked {
            Ok(()) => {
                sink.copies.push(copy);
                offset = end;
            }
            Err(detail) => {
                sink.claims.push(Claim { header, place: Some((sink.number, offset)) });
                sink.claimed_until = sink.claimed_until.max(end.min(len));
                sink.damage.push(ScanDamage {
                    file: sink.path.to_path_buf(),
                    offset,
                    bytes: (end.min(len) - offset).max(BLOCK_ALIGN),
                    block: Some((header.id, header.version)),
                    detail,
                });
                offset += BLOCK_ALIGN;
            }
        }
    }
    debug_assert!(sink
        .copies
        .iter()
        .filter(|c| c.segment == sink.number)
        .all(|c| c.offset + c.header.footprint() <= len));
    Ok(len.saturating_sub(BLOCKS_START))
}

/// Turns what the files held into the copy kept for each id, with its doubts.
struct Resolve<'a> {
    files: &'a HashMap<u64, Segment>,
    options: ScanOptions,
    copies: Vec<Copy>,
    pointers: Vec<Copy>,
    claims: Vec<Claim>,
    garbage: Vec<(u64, u64, u64)>,
}

/// Blocks lost without a trace of their ids: every kept copy older than `newest` may be
/// stale.
struct Loss {
    /// The newest version a lost copy could have.
    newest: GroupId,
    /// The oldest it could have; `None`: any version newer than the copy kept (a copy
    /// made by cleaning keeps its original's version, whatever its group).
    oldest: Option<GroupId>,
    /// Why, in words.
    cause: String,
}

impl Resolve<'_> {
    fn choose(mut self) -> (BTreeMap<BlockId, Chosen>, Vec<String>) {
        let mut notes = Vec::new();
        let at: HashMap<(u64, u64), usize> =
            self.copies.iter().enumerate().map(|(i, c)| ((c.segment, c.offset), i)).collect();
        let mut groups: BTreeMap<GroupId, GroupSeen> = BTreeMap::new();
        // Where runs of undecodable bytes end and start, by segment.
        let garbage_ends: BTreeSet<(u64, u64)> = self.garbage.iter().map(|g| (g.0, g.2)).collect();
        let garbage_starts: BTreeSet<(u64, u64)> =
            self.garbage.iter().map(|g| (g.0, g.1)).collect();
        let beside_garbage = |segment: u64, offset: u64, end: u64| {
            garbage_ends.contains(&(segment, offset)) || garbage_starts.contains(&(segment, end))
        };
        for copy in &self.copies {
            let h = &copy.header;
            let group = groups.entry(h.group).or_default();
            group.count = h.count;
            group.seen.insert(h.index);
            group.relocated |= h.flags & FLAG_RELOCATED != 0;
            group.places.push((copy.segment, copy.offset));
            let end = copy.offset + h.footprint();
            if beside_garbage(copy.segment, copy.offset, end) {
                group.in_log = true;
            }
        }
        for group in groups.values_mut() {
            if group.seen.contains(&0) && group.seen.contains(&group.count.saturating_sub(1)) {
                group.in_log = true;
            }
        }
        // A pointer names the block it stands for; one whose segment is gone was cleaned
        // away (what it held was copied first), one whose block is not intact is damage.
        let mut broken = Vec::new();
        for pointer in &self.pointers {
            let h = &pointer.header;
            let group = groups.entry(h.group).or_default();
            group.count = h.count;
            group.in_log = true;
            group.places.push((pointer.segment, pointer.offset));
            let Some(remote) = h.remote else { continue };
            let intact = at.get(&(remote.segment, remote.offset)).map(|&i| self.copies[i]);
            let holds = intact.is_some_and(|c| c.header == h.pointee() && c.crc == remote.crc);
            if holds || !self.files.contains_key(&remote.segment) {
                group.seen.insert(h.index);
            } else {
                broken.push(Claim { header: h.pointee(), place: None });
            }
        }
        self.claims.extend(broken);
        for claim in &self.claims {
            let h = &claim.header;
            let group = groups.entry(h.group).or_default();
            if group.count == 0 {
                group.count = h.count;
            }
            group.in_log = true;
            group.relocated |= h.flags & FLAG_RELOCATED != 0;
            group.claimed.insert(h.index);
            group.places.extend(claim.place);
        }
        assert!(groups.values().all(|g| g.count > 0), "a group of no blocks decoded");
        let mut torn = self.torn_groups(&groups);
        if self.options.keep_unfinished {
            for id in std::mem::take(&mut torn) {
                notes.push(format!(
                    "group {id} at the end of its stream's last segment is incomplete, and kept: \
                     it was written in full, and damaged"
                ));
            }
        }
        let mut losses = Vec::new();
        for (id, group) in &groups {
            if !group.in_log || torn.contains(id) {
                continue;
            }
            let missing = (0..group.count)
                .filter(|i| !group.seen.contains(i) && !group.claimed.contains(i))
                .count();
            if missing > 0 {
                notes.push(format!(
                    "group {id} lost {missing} of its {} blocks without a trace of their ids: \
                     older copies of any block may be stale",
                    group.count
                ));
                // A group of the layer above wrote its blocks at its own version; one of
                // cleaning's copied them at theirs.
                let oldest = (!group.relocated).then_some(*id);
                let cause = format!("group {id} lost blocks whose ids are unknown");
                losses.push(Loss { newest: *id, oldest, cause });
            }
        }
        losses.extend(self.cut_losses(&mut notes));
        let losses = Losses::new(losses);
        for id in &torn {
            notes.push(format!(
                "group {id} at the end of its stream's last segment is incomplete: taken for \
                 a write that never finished, and left out"
            ));
        }
        // A chain's pieces count only with its ending piece (`BlockStore::begin_chain`): a
        // chain without one never finished, like an incomplete group.
        let mut chains: BTreeMap<GroupId, (Vec<GroupId>, bool)> = BTreeMap::new();
        for copy in &self.copies {
            if let Some((first, end)) = copy.header.chain() {
                let chain = chains.entry(first).or_default();
                chain.0.push(copy.header.group);
                chain.1 |= end;
            }
        }
        for (first, (pieces, _)) in chains.iter().filter(|(_, (_, end))| !end) {
            if self.options.keep_unfinished {
                notes.push(format!(
                    "the chain of pieces from group {first} has no ending piece, and is kept"
                ));
                continue;
            }
            notes.push(format!(
                "the chain of pieces from group {first} has no ending piece: taken for a write \
                 that never finished, and left out"
            ));
            torn.extend(pieces.iter().copied());
        }
        // Recovery's rule (`apply_recovered`): the highest version wins, and a tombstone
        // deletes every copy of its version and older.
        let mut newest: HashMap<BlockId, Copy> = HashMap::new();
        let mut deleted: HashMap<BlockId, GroupId> = HashMap::new();
        let mut torn_ids: HashMap<BlockId, GroupId> = HashMap::new();
        for copy in &self.copies {
            let h = &copy.header;
            if h.chain().is_some() {
                // A piece's mark, not a block.
                continue;
            }
            if torn.contains(&h.group) {
                torn_ids.insert(h.id, h.group);
                continue;
            }
            if h.is_tombstone() {
                let version = deleted.entry(h.id).or_insert(h.version);
                *version = (*version).max(h.version);
            } else if newest.get(&h.id).is_none_or(|c| c.header.version <= h.version) {
                newest.insert(h.id, *copy);
            }
        }
        let mut claimed_versions: HashMap<BlockId, Vec<GroupId>> = HashMap::new();
        for claim in &self.claims {
            claimed_versions.entry(claim.header.id).or_default().push(claim.header.version);
        }
        let mut blocks = BTreeMap::new();
        for (id, copy) in newest {
            let version = copy.header.version;
            if deleted.get(&id).is_some_and(|&gone| gone >= version) {
                continue;
            }
            let claimed = claimed_versions.get(&id).map_or(&[][..], Vec::as_slice);
            let doubt = doubt(version, claimed, &losses, torn_ids.get(&id).copied());
            let block = ScannedBlock { id, version, raw_len: copy.header.raw_len, doubt };
            let chosen = Chosen {
                block,
                segment: copy.segment,
                offset: copy.offset,
                stored_len: copy.header.stored_len,
            };
            blocks.insert(id, chosen);
        }
        debug_assert!(blocks.values().all(|c| deleted.get(&c.block.id) < Some(&c.block.version)));
        (blocks, notes)
    }

    /// What cut segments lost: in the user stream, groups after the last one left in the
    /// file and before the next segment's first; in another stream (or an unknown one), any
    /// version up to that bound.
    fn cut_losses(&self, notes: &mut Vec<String>) -> Vec<Loss> {
        let mut losses = Vec::new();
        for (&number, segment) in self.files.iter().filter(|(_, segment)| segment.cut) {
            let same_stream =
                |c: &&Copy| self.files.get(&c.segment).is_some_and(|s| s.stream == segment.stream);
            let logged = || self.copies.iter().chain(&self.pointers).filter(same_stream);
            let next = logged().filter(|c| c.segment > number).map(|c| c.header.group).min();
            let newest = next.map_or(GroupId(u64::MAX), |first| GroupId(first.0.saturating_sub(1)));
            let left = logged().filter(|c| c.segment == number).map(|c| c.header.group).max();
            let oldest = match segment.stream {
                Some(USER_STREAM) => Some(GroupId(left.map_or(1, |group| group.0 + 1))),
                _ => None,
            };
            let cause = format!("{} is cut short", segment.path.display());
            notes.push(format!("{cause}: older copies of any block may be stale"));
            losses.push(Loss { newest, oldest, cause });
        }
        losses
    }

    /// Incomplete groups of the layer above at the end of a stream's last segment: no
    /// complete group lies after them there. Cleaning's groups are never left out: their
    /// copies carry their originals' versions, so an unfinished one changes nothing.
    fn torn_groups(&self, groups: &BTreeMap<GroupId, GroupSeen>) -> BTreeSet<GroupId> {
        let mut last_of_stream: BTreeMap<Option<u8>, u64> = BTreeMap::new();
        for (&number, segment) in self.files {
            let last = last_of_stream.entry(segment.stream).or_insert(number);
            *last = (*last).max(number);
        }
        let complete = |group: &GroupSeen| (0..group.count).all(|i| group.seen.contains(&i));
        let mut torn = BTreeSet::new();
        for &segment in last_of_stream.values() {
            let end_of = |group: &GroupSeen| {
                group.places.iter().filter(|(s, _)| *s == segment).map(|(_, o)| *o).max()
            };
            let last_complete = groups.values().filter(|g| complete(g)).filter_map(&end_of).max();
            for (id, group) in groups.iter().filter(|(_, group)| !group.relocated) {
                let Some(end) = end_of(group) else { continue };
                if !complete(group) && last_complete.is_none_or(|last| end > last) {
                    torn.insert(*id);
                }
            }
        }
        torn
    }
}

/// Why a copy at `version` may be older than one that was lost (`claimed`: the versions
/// damaged copies of its id name): of the signs, the one whose lost copy could be the
/// oldest (the most a caller must weigh).
fn doubt(
    version: GroupId,
    claimed: &[GroupId],
    losses: &Losses,
    torn: Option<GroupId>,
) -> Option<Doubt> {
    let newer = GroupId(version.0 + 1);
    let claimed = claimed.iter().copied().filter(|&v| v > version).min().map(|lost| Doubt {
        oldest: lost,
        reason: format!("a copy of version {lost} is damaged; this one is version {version}"),
    });
    let torn = torn.filter(|&group| group > version).map(|group| Doubt {
        oldest: group,
        reason: format!(
            "group {group}, left out as unfinished, wrote it; this copy is version {version}"
        ),
    });
    let unknown = losses.weigh(version).map(|(oldest, loss)| Doubt {
        oldest: oldest.max(newer),
        reason: format!("{}; this copy is version {version}", loss.cause),
    });
    claimed.into_iter().chain(torn).chain(unknown).min_by_key(|doubt| doubt.oldest)
}

/// The losses, ordered for `weigh`: newest first, with the running minimum of their
/// oldest possible versions.
struct Losses {
    losses: Vec<Loss>,
    /// For each prefix of `losses`: the least `oldest` in it (`GroupId(0)` for "any") and
    /// the loss that has it.
    least: Vec<(GroupId, usize)>,
}

impl Losses {
    fn new(mut losses: Vec<Loss>) -> Losses {
        losses.sort_by_key(|loss| std::cmp::Reverse(loss.newest));
        let mut least: Vec<(GroupId, usize)> = Vec::with_capacity(losses.len());
        for (at, loss) in losses.iter().enumerate() {
            let oldest = loss.oldest.unwrap_or(GroupId(0));
            let best = match least.last() {
                Some(&(known, index)) if known <= oldest => (known, index),
                _ => (oldest, at),
            };
            least.push(best);
        }
        debug_assert!(least.windows(2).all(|pair| pair[1].0 <= pair[0].0));
        Losses { losses, least }
    }

    /// Of the losses that could hold a copy newer than `version` (their `newest` is past
    /// it), the one whose lost copy could be the oldest, with that version.
    fn weigh(&self, version: GroupId) -> Option<(GroupId, &Loss)> {
        let applicable = self.losses.partition_point(|loss| loss.newest > version);
        let &(oldest, index) = self.least.get(applicable.checked_sub(1)?)?;
        assert!(self.losses[index].newest > version);
        Some((oldest, &self.losses[index]))
    }
}

impl SegmentScan {
    /// The blocks found (not deleted), by id.
    pub fn blocks(&self) -> impl Iterator<Item = &ScannedBlock> + '_ {
        self.blocks.values().map(|chosen| &chosen.block)
    }

    /// The block kept for `id`, if one was found and not deleted.
    pub fn get(&self, id: BlockId) -> Option<&ScannedBlock> {
        self.blocks.get(&id).map(|chosen| &chosen.block)
    }

    /// The content of the block kept for `id` (read and checked again, decompressed), or
    /// `None` when none was found or it was deleted.
    ///
    /// # Errors
    ///
    /// `BlockError::Corruption` if the block no longer checks (the file changed since the
    /// scan), `BlockError::Io` if the read fails.
    pub fn read(&self, id: BlockId) -> Result<Option<Vec<u8>>, BlockError> {
        let Some(chosen) = self.blocks.get(&id) else { return Ok(None) };
        let segment = self.files.get(&chosen.segment).ok_or_else(|| BlockError::Corruption {
            file: PathBuf::new(),
            offset: chosen.offset,
            block: Some(id),
            detail: format!("segment {} is not among those scanned", chosen.segment),
        })?;
        let (header, bytes) =
            read::read_block(&segment.file, &segment.path, chosen.offset, id, chosen.stored_len)?;
        assert_eq!(header.version, chosen.block.version, "a checked block changed its version");
        let raw = read::decode_payload(&header, bytes, &segment.path, chosen.offset)?;
        assert_eq!(raw.len(), header.raw_len as usize);
        Ok(Some(raw))
    }

    /// Bytes that do not hold an intact block, in file order.
    pub fn damage(&self) -> &[ScanDamage] {
        &self.damage
    }

    /// What else the scan concluded, one line each (groups left out or incomplete, headers
    /// that disagree with their file's name).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Segment files read.
    pub fn segments(&self) -> usize {
        self.files.len()
    }

    /// Bytes of them scanned.
    pub fn bytes_scanned(&self) -> u64 {
        self.bytes_scanned
    }
}
