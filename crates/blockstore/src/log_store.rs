//! `LogStore`: blocks appended to segment files in atomic groups, a map from id to location
//! that changes only once a group is durable, map checkpoints, recovery, and cleaning.
//!
//! **Writing a group** (`apply_group`): payloads are compressed with no lock held. Under the
//! writer lock the group gets the next `GroupId` and a contiguous range at the tail of the
//! active segment; its blocks' headers are encoded (the last one carries the last-in-group
//! flag) and the blocks written from the caller's buffers (`parts`): the log part with one
//! vectored write, or in pieces of at most `WRITEBACK_CHUNK_BYTES` for a large group, and
//! each run of blocks bound for reused space as soon as it is complete. A large group's
//! ranges go to the write-back thread as they are written (`writeback`), so the device works
//! while the rest is written. The writer lock is released, and the group waits for an
//! fdatasync of the files it wrote: one round at a time, led by whichever waiter finds none
//! running, covering every group written before it began (group commit); the round syncs its
//! files at once, on threads of their own. Only then are the group's blocks applied to the
//! map, so a reader never sees a partial group.
//!
//! **Chains** (`begin_chain`, `chain.rs`): one atomic group written in pieces, each piece a
//! group of its own ending in a mark that names the chain's first piece, applied to the map
//! only once the ending piece is durable; recovery holds pieces aside until it meets the
//! ending piece, and leaves out a chain without one. Cleaning leaves alone the segments of
//! an open chain's pieces, and the segment of a chain's ending piece while recovery from
//! the last checkpoint reads its first.
//!
//! **Reusing space** (threaded logging): once the files (less the active segments' unused
//! tails) hold `space_target` times the live bytes, a user group's larger puts go into free
//! extents of older segments (the pool), filling the segment with the most free space in
//! offset order; each such block is written in full there, and its place in the group, at
//! the log's tail, holds a 64-byte pointer naming it and its checksum. Space goes to the
//! pool only once the last durable map checkpoint lets recovery skip it: in a sealed
//! segment before its stream's scan position, written by a group before the first one
//! recovery replays. So recovery never reads reused space as log and never follows a
//! pointer into it. Space freed in older parts of the log qualifies at once (see
//! `Index::free`); space freed where recovery still reads waits for a checkpoint (see
//! `Shared::promote`), and map checkpoints come often enough to keep the pool fed (once
//! that space reaches a fifth of the live bytes). Writes that find the pool empty append.
//! This is what bounds the files on an overwrite workload without copying: cleaning is left
//! for space that writes do not reuse. A reader whose block moved on between its lookup and
//! its read, and whose space was reused meanwhile, finds a block that does not match and
//! looks the block up again.
//!
//! **Streams and rotation**: groups of the layer above go to the user stream; cleaning's
//! copies go to a cold stream with segments of its own, so that blocks that survived a
//! cleaning (likely cold) do not mix with fresh writes. Each stream has one active segment.
//! A group that does not fit its stream's active segment goes to a new one (numbers are
//! shared by both streams). Before the first write to it, the old segment is synced, under
//! the writer lock, with every segment its pointers point into: a segment is complete and
//! durable before its stream's next one holds anything, so recovery can treat the first
//! invalid block (or unresolvable pointer) of any segment but a stream's last as damage, not
//! as a torn tail. A group-commit round syncs every segment written since its last sync.
//! Segments are zero-filled when created (unless `zero_fill_segments` is off, as the engine
//! sets it), so a block write never changes a file's extent map (which would make each
//! fdatasync write metadata too); unwritten, allocated space reads as zeros either way.
//!
//! **Map checkpoints** (`checkpoint`): the map is written to `{sequence}.map` (temp file,
//! sync, rename, directory sync) with, for each stream, the position where recovery's scan
//! must start: the stream's earliest group written but not yet applied to the map, or else
//! its tail. No cleaning runs while a checkpoint is taken. Once it is durable, the space it
//! no longer needs moves to the pool.
//!
//! **Recovery** (`open`): load the newest map checkpoint, then scan each stream's segments
//! from its scan position, all in number order, applying complete groups. The version of
//! each block (the group that wrote its content) decides between copies, so replay is
//! idempotent and order-independent for content. A pointer is followed and its block checked
//! (every header field and the checksum) before its group is applied; a block that is not
//! there makes the group torn. The first invalid block or incomplete group in a stream's last
//! segment is the torn tail: the file is cut there and refilled with zeros. Recovery's time
//! is bounded by the log written after the checkpoint. If it replayed any group, opening
//! syncs the segments and writes a map checkpoint, and then fills the pool with the free
//! space of the segments before the scan positions.
//!
//! **Cleaning** (`clean_once`, in the background by default): while the segment files hold
//! more than `space_target` times the live bytes, the sealed segment with the smallest share
//! of live bytes is emptied: its live blocks, and its tombstones that recovery from the last
//! checkpoint may still need (those at or after their stream's scan position), are copied to
//! the cold stream in relocation groups (same version, `FLAG_RELOCATED`), each made durable
//! and then applied only where the map still points at the old copy; then the file is
//! deleted. The copies lie after every scan position, so recovery finds them, and they
//! correct the checkpoint's entries that pointed into the deleted segment; a pointer into the
//! deleted segment is skipped. A segment that holds pointers recovery still reads is never
//! cleaned, and a victim's pool extents are dropped, and the groups already writing into it
//! applied, before its live blocks are read. The space counted against the target leaves out
//! what writes will reuse (the pool and the space freed since the last checkpoint), up to
//! half of `space_target - 1` times the live bytes. A writer that finds the files 10% over
//! the target cleans before it returns, so writes cannot outrun the cleaner.
//!
//! Invariants:
//! 1. Group ids grow with position in each segment, and each group's log part (blocks and
//!    pointers) lies within one segment.
//! 2. The map points only at durable blocks of complete groups, and for each id at the copy
//!    with the highest version (for equal versions, the latest copy).
//! 3. Every segment but the two active ones is durable in full; an active one is durable up
//!    to the last group whose round completed.
//! 4. No lock is held across an fdatasync that keeps other writers from writing their groups
//!    (the rotation sync is the exception, once per segment). Readers never take the writer
//!    lock; they hold the index lock only to look up a location.
//! 5. After a failed write or sync the store is poisoned and acknowledges nothing more.
//!
//! 6. The pool and in-flight pointer targets never overlap a live block, a tombstone that
//!    recovery needs, or space that recovery from the last durable checkpoint reads.
//!
//! Must never: apply a group to the map before its fdatasync returned; delete a segment that
//! the map, or recovery from the last checkpoint, still needs (a live block, a tombstone at
//! or after the scan position that was not copied, or a pointer that recovery reads); reuse
//! space before a durable checkpoint has stopped needing it.
//!
//! This file holds the store's state (`Shared`, `Index`, `Writer`, the streams and group
//! commit), `open` and the `BlockStore` methods. The sections live in `log_store/`:
//! `write.rs` (writing a group, rotation, group commit, applying to the map), `space.rs`
//! (reusing space: the pool), `checkpoint.rs` (map checkpoints), `recover.rs` (recovery),
//! `clean.rs` (cleaning and the background thread), `segment.rs` (segment files) and
//! `lookup.rs` (reads of a located block).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Instant;

use tierkv_io::{File, Storage};

use crate::format::{Codec, Location, BLOCK_HEADER_BYTES};
use crate::read;
use crate::stats::Counters;
use crate::writeback::Writeback;
use crate::{
    BlockError, BlockId, BlockStore, BlockWrite, Chain, GroupId, RecoveryReport, StoreKind,
    StoreOptions, StoreStats, VerifyReport, Versioned,
};

mod chain;
mod checkpoint;
mod clean;
mod lookup;
mod recover;
mod segment;
mod space;
mod write;

use lookup::{missing_segment, read_located, read_located_block};
pub(crate) use recover::ScanWindow;
use recover::{recover, Recovered};
use segment::create_dir_durably;
use space::{Freed, Pool};

/// A large group goes to the write-back thread (and its log part to the file) in pieces of
/// this size (see `writeback`). The best of 64 to 256 KiB for this store in 16 KiB page
/// updates on the development machine, by a few percent (the doublewrite store's is chosen
/// the same way).
const WRITEBACK_CHUNK_BYTES: u64 = 64 << 10;

/// Bytes of a relocation group at most (cleaning copies live blocks in groups of this size).
const RELOCATION_GROUP_BYTES: u64 = 4 << 20;

/// The log-structured block store. See the module header.
pub struct LogStore {
    shared: Arc<Shared>,
    maintenance: Mutex<Option<JoinHandle<()>>>,
    report: RecoveryReport,
}

/// One segment file, with a handle for appends and one for reads by the configured method.
struct SegmentFile {
    number: u64,
    path: PathBuf,
    writer: Arc<File>,
    reader: File,
}

struct SegmentInfo {
    file: Arc<SegmentFile>,
    stream: Stream,
    /// Bytes of the file.
    capacity: u64,
    /// Footprint of the blocks the map points at in it.
    live_bytes: u64,
    /// Offset of the last pointer written in it (user stream), which recovery needs while
    /// it lies at or after the last checkpoint's scan position.
    last_pointer: Option<u64>,
    /// Where the earliest chain that ends in it began (its first piece's segment and
    /// offset): while recovery from the last checkpoint scans that piece, it needs the
    /// ending piece in this segment too, or it would leave the chain out.
    chain_from: Option<(u64, u64)>,
}

/// What readers look at: the map and the segments, with the space figures.
#[derive(Default)]
struct Index {
    map: HashMap<BlockId, Location>,
    /// Tombstones that recovery from the last checkpoint may still need (at or after its
    /// scan position), by position: (segment, offset) → (id, version). Cleaning copies them.
    tombstones: BTreeMap<(u64, u64), (BlockId, GroupId)>,
    segments: BTreeMap<u64, SegmentInfo>,
    live_bytes: u64,
    file_bytes: u64,
    /// Space freed that waits for a checkpoint to become reusable, and its bytes.
    pending: Vec<Freed>,
    pending_bytes: u64,
    /// Space freed that the last durable checkpoint already allows to reuse, on its way to
    /// the pool (the next group that looks for reused space moves it there), and its bytes.
    ready: Mutex<Vec<Freed>>,
    ready_bytes: AtomicU64,
    /// Bytes freed since the last checkpoint's snapshot that wait for a checkpoint.
    freed_since_checkpoint: u64,
    /// Tags frees. A checkpoint's snapshot, taken under the read lock (so while no free
    /// runs), bumps it: the frees it saw have a lower tag than any that follow.
    free_epoch: AtomicU64,
    /// The scan positions of the last durable checkpoint (`(0, 0)`: none).
    durable_scan: [(u64, u64); STREAMS],
    /// The first user group that recovery from the last durable checkpoint replays (0:
    /// none known, so nothing is reusable before a checkpoint).
    durable_unapplied: u64,
}

impl Index {
    /// Points `id` at `location`, keeping the live-byte figures.
    fn set(&mut self, id: BlockId, location: Location) {
        if let Some(old) = self.map.insert(id, location) {
            self.unaccount(&old);
        }
        self.live_bytes += location.footprint();
        if let Some(info) = self.segments.get_mut(&location.segment) {
            info.live_bytes += location.footprint();
        }
    }

    fn remove(&mut self, id: BlockId) {
        if let Some(old) = self.map.remove(&id) {
            self.unaccount(&old);
        }
        // A map that held many more blocks than it does now gives the room back (its owner
        // counts its capacity as memory: `StoreStats::index_bytes`). Rare: it must shrink
        // to a quarter first, and then keeps twice what it holds.
        let len = self.map.len();
        if self.map.capacity() > 4 * len + 1024 {
            self.map.shrink_to(2 * len + 256);
        }
    }

    fn unaccount(&mut self, old: &Location) {
        self.live_bytes -= old.footprint();
        if let Some(info) = self.segments.get_mut(&old.segment) {
            info.live_bytes -= old.footprint();
        }
        self.free(old.segment, old.offset, old.footprint(), old.version.0);
    }

    /// True when `segment` holds what recovery from the last checkpoint reads and cleaning
    /// does not copy: a pointer, or the ending piece of a chain whose first piece recovery
    /// reads.
    fn needed_by_recovery(&self, segment: u64) -> bool {
        let scan = self.durable_scan[Stream::User as usize];
        let Some(info) = self.segments.get(&segment) else { return false };
        info.last_pointer.is_some_and(|offset| (segment, offset) >= scan)
            || info.chain_from.is_some_and(|from| from >= scan)
    }
}

/// Which log a group goes to. Cleaning's copies go to a stream of their own: the blocks
/// that survive cleaning tend to be cold, and kept apart from fresh writes they fill
/// segments that stay live, while fresh writes die together and leave emptier victims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    /// Groups written by the layer above.
    User = 0,
    /// Relocation groups written by cleaning.
    Cold = 1,
}

const STREAMS: usize = 2;

impl Stream {
    fn from_code(code: u8) -> Option<Stream> {
        match code {
            0 => Some(Stream::User),
            1 => Some(Stream::Cold),
            _ => None,
        }
    }
}

/// The active segment of a stream and where its next group goes.
struct StreamTail {
    active: Arc<SegmentFile>,
    capacity: u64,
    tail: u64,
    /// When the segment became the stream's active one: how fast it fills sizes the next
    /// (`StoreOptions::sizing`).
    since: Instant,
    /// Offset of the last pointer written to it.
    last_pointer: Option<u64>,
}

/// The tails of the log, under the writer lock.
struct Writer {
    /// By `Stream`; the cold stream has none until cleaning first copies something, nor
    /// from when `shrink_to` seals its segment emptied of live blocks until the next copy.
    streams: [Option<StreamTail>; STREAMS],
    next_segment: u64,
    next_group: u64,
    /// The headers of the group being written.
    buffer: Vec<u8>,
    /// Free extents ready for reuse.
    pool: Pool,
    /// Segments written through pointers since the user stream last rotated: a rotation
    /// syncs them with the old segment, so a sealed segment's pointers all resolve.
    remote_dirty: Vec<Arc<SegmentFile>>,
    /// The segment being cleaned: none of its space goes to the pool.
    cleaning: Option<u64>,
}

/// Group commit.
#[derive(Default)]
struct SyncState {
    /// The last group written.
    written: u64,
    /// Every group up to this one is durable.
    durable: u64,
    /// A round is running.
    running: bool,
    /// Segments written since their last sync: what the next round syncs.
    dirty: Vec<Arc<SegmentFile>>,
}

/// Groups written but not yet applied to the map, and the tail: where a checkpoint's scan
/// must start. Written under the writer lock; read under the index lock.
#[derive(Default)]
struct Inflight {
    groups: BTreeMap<u64, (Stream, u64, u64)>,
    /// Each stream's tail: (segment, offset).
    tails: [Option<(u64, u64)>; STREAMS],
    /// For a stream with no tail: the segment its scan starts at (0 for one that never had
    /// a segment; past the one `seal_idle_cold` sealed, which may be deleted).
    scan_floor: [u64; STREAMS],
    next_group: u64,
    bytes_since_checkpoint: u64,
    /// The pieces of open chains (a subset of `groups`), each with the segments it wrote
    /// into (its log part's and its reused space's): cleaning leaves those segments alone
    /// and does not wait for these groups, which are applied only when their chain commits.
    chained: BTreeMap<u64, Vec<u64>>,
}

impl Inflight {
    /// Whether a piece of an open chain lies in `segment`.
    fn holds_open_chain(&self, segment: u64) -> bool {
        self.chained.values().any(|segments| segments.contains(&segment))
    }

    /// Where a checkpoint taken now must have recovery start in `stream`: its first group
    /// not yet in the map, or else its tail, or when it has no active segment the start of
    /// its floor (`(0, 0)`, all of it, when it never had one).
    fn scan_start(&self, stream: Stream) -> (u64, u64) {
        let pending = self
            .groups
            .values()
            .filter(|(s, _, _)| *s == stream)
            .map(|&(_, segment, offset)| (segment, offset))
            .min();
        pending.or(self.tails[stream as usize]).unwrap_or((self.scan_floor[stream as usize], 0))
    }

    /// The active segments, which cleaning must leave alone.
    fn actives(&self) -> impl Iterator<Item = u64> + '_ {
        self.tails.iter().flatten().map(|&(segment, _)| segment)
    }
}

#[derive(Default)]
struct CheckpointState {
    /// Sequence number of the last checkpoint written or loaded (0: none).
    sequence: u64,
}

struct Shared {
    storage: Storage,
    dir: PathBuf,
    options: StoreOptions,
    index: RwLock<Index>,
    writer: Mutex<Writer>,
    sync: Mutex<SyncState>,
    synced: Condvar,
    inflight: Mutex<Inflight>,
    checkpoint: Mutex<CheckpointState>,
    cleaning: Mutex<()>,
    poison: Mutex<Option<String>>,
    poisoned: AtomicBool,
    closed: AtomicBool,
    /// Wakes the background thread (the flag: stop).
    wake: Condvar,
    wake_lock: Mutex<bool>,
    /// The last error the background thread met, for `stats` readers and tests.
    background_error: Mutex<Option<String>>,
    counters: Counters,
    /// Bytes in `Writer::pool`, for readers of the space figures.
    pool_bytes: AtomicU64,
    /// Starts the write-back of a large group's ranges while the rest is being written.
    writeback: Writeback,
}

/// A block ready to encode.
struct Prepared<'a> {
    id: BlockId,
    flags: u8,
    codec: Codec,
    stored: Cow<'a, [u8]>,
    raw_len: u32,
    /// Set for a cleaning copy: the content's original version.
    version: Option<GroupId>,
}

/// Where a written block went.
struct Placed {
    id: BlockId,
    location: Location,
    tombstone: bool,
    /// For a block written to reused space: where its pointer lies in the log.
    pointer: Option<(u64, u64)>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl LogStore {
    /// Opens (creating if missing) the store in `dir`, recovering it first.
    pub fn open(
        storage: &Storage,
        dir: impl AsRef<Path>,
        options: StoreOptions,
    ) -> Result<LogStore, BlockError> {
        options.validate()?;
        let dir = dir.as_ref().to_path_buf();
        let started = Instant::now();
        if !options.read_only {
            create_dir_durably(storage, &dir)?;
        }
        let mut recovered = recover(storage, &dir, &options)?;
        recovered.report.elapsed = started.elapsed();
        let Recovered { index, writer, checkpoint, report } = recovered;
        let mut tails = [None; STREAMS];
        for (tail, stream) in tails.iter_mut().zip(&writer.streams) {
            *tail = stream.as_ref().map(|s| (s.active.number, s.tail));
        }
        let inflight = Inflight {
            groups: BTreeMap::new(),
            tails,
            // A stream without a segment after recovery has none at all.
            scan_floor: [0; STREAMS],
            next_group: writer.next_group,
            bytes_since_checkpoint: 0,
            chained: BTreeMap::new(),
        };
        let last = writer.next_group - 1;
        let shared = Arc::new(Shared {
            storage: storage.clone(),
            dir,
            options,
            index: RwLock::new(index),
            sync: Mutex::new(SyncState {
                written: last,
                durable: last,
                running: false,
                dirty: Vec::new(),
            }),
            writer: Mutex::new(writer),
            synced: Condvar::new(),
            inflight: Mutex::new(inflight),
            checkpoint: Mutex::new(checkpoint),
            cleaning: Mutex::new(()),
            poison: Mutex::new(None),
            poisoned: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            wake: Condvar::new(),
            wake_lock: Mutex::new(false),
            background_error: Mutex::new(None),
            counters: Counters::default(),
            pool_bytes: AtomicU64::new(0),
            writeback: Writeback::start("tierkv-log", WRITEBACK_CHUNK_BYTES),
        });
        if report.groups_applied > 0 && !shared.options.read_only {
            // IMPORTANT: the replayed groups' pointers must never be read again, since the
            // space of the blocks they point at may be reused from now on: a checkpoint
            // puts them behind recovery's scan. What it refers to is made durable first
            // (after a process crash, the replayed log may sit only in the page cache).
            shared.sync_all_segments()?;
            shared.write_checkpoint()?;
        }
        shared.rebuild_pool();
        let maintenance = if shared.options.background_cleaning && !shared.options.read_only {
            let worker = Arc::clone(&shared);
            let handle = std::thread::Builder::new()
                .name("tierkv-blocks-clean".into())
                .spawn(move || worker.maintenance_loop())
                .map_err(|e| {
                    BlockError::InvalidOptions(format!("cannot start the cleaning thread: {e}"))
                })?;
            Some(handle)
        } else {
            None
        };
        Ok(LogStore { shared, maintenance: Mutex::new(maintenance), report })
    }

    /// What recovery found when the store was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// Cleans one segment if the space target asks for it; returns whether it cleaned one.
    /// The background thread calls this; with `background_cleaning` off, callers do.
    pub fn clean_once(&self) -> Result<bool, BlockError> {
        self.shared.check_writable()?;
        self.shared.clean_once()
    }

    /// The last error the background thread met (cleaning or checkpointing), if any.
    pub fn background_error(&self) -> Option<String> {
        lock(&self.shared.background_error).clone()
    }

    /// The segment numbers in the store, oldest first.
    pub fn segment_numbers(&self) -> Vec<u64> {
        self.shared.read_index().segments.keys().copied().collect()
    }
}

impl LogStore {
    /// `read`, with the version of the content (the group that wrote it).
    pub fn read_versioned(&self, id: BlockId) -> Result<Option<Versioned>, BlockError> {
        let shared = &*self.shared;
        shared.check_not_closed()?;
        let mut found = shared.locate(id)?;
        let (raw, location) = loop {
            let Some((location, file)) = found else {
                return Ok(None);
            };
            match read_located_block(&file, id, &location) {
                Ok((header, block)) => {
                    let raw = read::decode_payload(&header, block, &file.path, location.offset)?;
                    break (raw, location);
                }
                Err(error @ BlockError::Corruption { .. }) => {
                    // The block may have moved on, and its space been reused, between the
                    // lookup and the read: then the map has changed, and the read goes again.
                    // A location the map still holds is damage.
                    found = shared.locate(id)?;
                    if found.as_ref().map(|(l, _)| l) == Some(&location) {
                        return Err(error);
                    }
                }
                Err(error) => return Err(error),
            }
        };
        Counters::add(&shared.counters.reads, 1);
        Counters::add(
            &shared.counters.read_bytes,
            (BLOCK_HEADER_BYTES + location.stored_len as usize) as u64,
        );
        Ok(Some((raw, Some(location.version))))
    }
}

impl BlockStore for LogStore {
    fn apply_group(&self, changes: &[BlockWrite<'_>]) -> Result<GroupId, BlockError> {
        self.apply_changes(changes)
    }

    fn begin_chain(&self) -> Box<dyn Chain + '_> {
        Box::new(chain::LogChain::new(self))
    }

    fn read(&self, id: BlockId) -> Result<Option<Vec<u8>>, BlockError> {
        Ok(self.read_versioned(id)?.map(|(raw, _)| raw))
    }

    fn checkpoint(&self) -> Result<(), BlockError> {
        self.shared.check_writable()?;
        self.shared.write_checkpoint()
    }

    fn shrink_to(&self, file_bytes: u64) -> Result<u64, BlockError> {
        let shared = &*self.shared;
        shared.check_writable()?;
        // A map checkpoint first: space and pointers it puts behind recovery's scan may go.
        shared.write_checkpoint()?;
        // Bounded: each pass deletes a segment, or stops (one more pass for the cold
        // stream's active segment, once sealed).
        let segments = shared.read_index().segments.len();
        for _ in 0..=segments {
            if shared.read_index().file_bytes <= file_bytes {
                break;
            }
            let cleaned = {
                let _cleaning = lock(&shared.cleaning);
                let victim = match shared.pick_victim(true)? {
                    Some(victim) => Some(victim),
                    // Cleaning's own segment, emptied since (its blocks deleted), is the
                    // last thing to give back.
                    None => shared
                        .seal_idle_cold()
                        .then(|| shared.pick_victim(true))
                        .transpose()?
                        .flatten(),
                };
                let Some(victim) = victim else { break };
                let cleaned = shared.clean_segment(victim);
                lock(&shared.writer).cleaning = None;
                cleaned?
            };
            if !cleaned {
                break;
            }
        }
        let after = shared.read_index().file_bytes;
        assert!(after > 0 || segments == 0);
        Ok(after)
    }

    fn stats(&self) -> StoreStats {
        let index = self.shared.read_index();
        let map = crate::hash_table_bytes::<BlockId, Location>(index.map.capacity());
        // A B-tree map's entry with its share of a node, roughly.
        let tombstones = index.tombstones.len() as u64 * 64;
        self.shared.counters.snapshot(index.live_bytes, index.file_bytes, map + tombstones)
    }

    fn live_ids(&self) -> Result<Vec<BlockId>, BlockError> {
        self.shared.check_not_closed()?;
        let mut ids: Vec<BlockId> = self.shared.read_index().map.keys().copied().collect();
        ids.sort_unstable();
        Ok(ids)
    }

    fn verify(&self) -> Result<VerifyReport, BlockError> {
        self.shared.check_not_closed()?;
        let entries: Vec<(BlockId, Location, Arc<SegmentFile>)> = {
            let index = self.shared.read_index();
            let mut entries = Vec::with_capacity(index.map.len());
            for (&id, location) in &index.map {
                let Some(info) = index.segments.get(&location.segment) else {
                    return Err(missing_segment(&self.shared.dir, id, location));
                };
                entries.push((id, *location, Arc::clone(&info.file)));
            }
            entries
        };
        let mut report = VerifyReport::default();
        for (id, location, file) in entries {
            match read_located(&file, id, &location) {
                Ok(_) => {}
                // Moved on since the entries were listed (its space may be reused): the
                // new copy is checked by the next verify.
                Err(BlockError::Corruption { .. })
                    if self.shared.locate(id)?.map(|(l, _)| l) != Some(location) =>
                {
                    continue;
                }
                Err(error) => return Err(error),
            }
            report.blocks += 1;
            report.bytes += location.footprint();
        }
        Ok(report)
    }

    fn max_block_bytes(&self) -> usize {
        self.shared.options.max_block_bytes()
    }

    fn kind(&self) -> StoreKind {
        StoreKind::Log
    }

    fn close(&self) -> Result<(), BlockError> {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        *lock(&self.shared.wake_lock) = true;
        self.shared.wake.notify_all();
        if let Some(handle) = lock(&self.maintenance).take() {
            // A background thread that panicked has nothing left to clean up.
            let _ = handle.join();
        }
        // Every acknowledged group is durable already; the poison, if any, is reported.
        match lock(&self.shared.poison).as_ref() {
            Some(cause) => {
                Err(BlockError::Poisoned { dir: self.shared.dir.clone(), cause: cause.clone() })
            }
            None => Ok(()),
        }
    }
}

impl Drop for LogStore {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl std::fmt::Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore").field("dir", &self.shared.dir).finish_non_exhaustive()
    }
}

impl Shared {
    fn read_index(&self) -> std::sync::RwLockReadGuard<'_, Index> {
        self.index.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_index(&self) -> std::sync::RwLockWriteGuard<'_, Index> {
        self.index.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn check_not_closed(&self) -> Result<(), BlockError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(BlockError::Closed { dir: self.dir.clone() });
        }
        Ok(())
    }

    fn check_open(&self) -> Result<(), BlockError> {
        self.check_not_closed()?;
        if self.poisoned.load(Ordering::Acquire) {
            let cause = lock(&self.poison).clone().unwrap_or_default();
            return Err(BlockError::Poisoned { dir: self.dir.clone(), cause });
        }
        Ok(())
    }

    /// `check_open`, and refuses a store opened read-only.
    fn check_writable(&self) -> Result<(), BlockError> {
        self.check_open()?;
        if self.options.read_only {
            return Err(BlockError::ReadOnly { dir: self.dir.clone() });
        }
        Ok(())
    }

    fn poison(&self, error: &BlockError) {
        let mut poison = lock(&self.poison);
        if poison.is_none() {
            *poison = Some(error.to_string());
            self.poisoned.store(true, Ordering::Release);
        }
        drop(poison);
        let _sync = lock(&self.sync);
        self.synced.notify_all();
    }
}
