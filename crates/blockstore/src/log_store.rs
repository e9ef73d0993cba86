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
//! Segments are zero-filled when created, so a block write never changes a file's extent map
//! (which would make each fdatasync write metadata too).
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

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tierkv_io::{AccessMethod, File, OpenOptions, Storage};
use tierkv_tiercache::{AdmitSource, TierCache, TierKey, TierStats};

use crate::format::{
    self, BlockHeader, Codec, HeaderProblem, Location, MapHeader, RemoteRef, SegmentHeader,
    BLOCKS_START, BLOCK_HEADER_BYTES, FLAG_LAST_IN_GROUP, FLAG_RELOCATED, FLAG_REMOTE,
    FLAG_TOMBSTONE, MAX_BLOCK_BYTES, MAX_GROUP_BLOCKS,
};
use crate::parts::{write_parts, Part};
use crate::read;
use crate::stats::Counters;
use crate::writeback::{Hints, Writeback};
use crate::{
    BlockError, BlockId, BlockStore, BlockWrite, GroupId, RecoveryReport, StoreKind, StoreOptions,
    StoreStats, VerifyReport, Versioned,
};

/// A large group goes to the write-back thread (and its log part to the file) in pieces of
/// this size (see `writeback`). The best of 64 to 256 KiB for this store in 16 KiB page
/// updates on the development machine, by a few percent (the doublewrite store's is chosen
/// the same way).
const WRITEBACK_CHUNK_BYTES: u64 = 64 << 10;

/// Bytes of a relocation group at most (cleaning copies live blocks in groups of this size).
const RELOCATION_GROUP_BYTES: u64 = 4 << 20;

/// Bytes read at a time while recovery scans a segment.
const SCAN_WINDOW_BYTES: usize = 1 << 20;

/// How often the background thread looks for work when nobody wakes it.
const MAINTENANCE_INTERVAL: Duration = Duration::from_millis(100);

/// Segments cleaned per wake of the background thread at most, so it checks for a close.
const CLEANS_PER_WAKE: usize = 8;

/// A periodic map checkpoint waits for at least this many times its own size of log, so
/// that checkpoints of a large map cost a bounded share of the writes.
const CHECKPOINT_COST_RATIO: u64 = 16;

/// Writers clean themselves once the files exceed the space target times this.
const HARD_LIMIT_FACTOR: f64 = 1.1;

/// A segment is worth cleaning only if it frees at least `1 - this` of its size.
const CLEAN_MAX_LIVE_SHARE: f64 = 0.85;

/// Blocks of at least this footprint go to reused free space when some is ready. A smaller
/// one stays in the log, where its pointer would cost about as much as the block.
const REMOTE_MIN_BYTES: u64 = 512;

/// Free extents looked at per block before the block goes to the log instead.
const POOL_PROBES: usize = 64;

/// A periodic map checkpoint is also due once the space freed since the last one reaches
/// this share of the live bytes: the space becomes reusable only after a checkpoint.
const FREED_SHARE_FOR_CHECKPOINT: f64 = 0.2;

/// ... but not before this many bytes were written since the last one.
const CHECKPOINT_MIN_BYTES: u64 = 64 << 10;

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
}

/// Space that a block, a pointer or a tombstone took, freed when the map moved on. It can
/// be reused once a checkpoint is durable that no longer needs it (see `Shared::promote`).
struct Freed {
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
struct Pool {
    extents: BTreeMap<(u64, u64), u64>,
    /// Free bytes per segment.
    free: HashMap<u64, u64>,
    /// Where the next search starts: the segment being filled, and the offset in it.
    cursor: (u64, u64),
}

impl Pool {
    /// Adds an extent, merged with its neighbours.
    fn insert(&mut self, segment: u64, offset: u64, bytes: u64) {
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
    fn take(&mut self, bytes: u64) -> Option<(u64, u64)> {
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
    fn remove_segment(&mut self, segment: u64) -> u64 {
        let keys: Vec<(u64, u64)> =
            self.extents.range((segment, 0)..(segment + 1, 0)).map(|(&k, _)| k).collect();
        for key in &keys {
            self.extents.remove(key);
        }
        self.free.remove(&segment).unwrap_or(0)
    }
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
    }

    fn unaccount(&mut self, old: &Location) {
        self.live_bytes -= old.footprint();
        if let Some(info) = self.segments.get_mut(&old.segment) {
            info.live_bytes -= old.footprint();
        }
        self.free(old.segment, old.offset, old.footprint(), old.version.0);
    }

    /// Records space that nothing in the map needs any more. It is reusable at once when
    /// the last durable checkpoint already lets recovery skip it: its segment lies before
    /// its stream's scan position (so recovery does not scan it as log), and the group that
    /// wrote it before the first user group recovery replays (so no pointer that recovery
    /// follows leads to it). The map in that checkpoint, or in one taken before this free
    /// is applied, may still point at it; recovery then replays the group that freed it
    /// (it was not applied at the snapshot, so it lies after the scan position), which
    /// moves the entry on before anything reads it. Otherwise it waits for a checkpoint
    /// (see `Shared::promote`).
    fn free(&mut self, segment: u64, offset: u64, bytes: u64, group: u64) {
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

    /// True when `segment` holds a pointer that recovery from the last checkpoint reads.
    fn holds_needed_pointers(&self, segment: u64) -> bool {
        self.segments
            .get(&segment)
            .and_then(|info| info.last_pointer)
            .is_some_and(|offset| (segment, offset) >= self.durable_scan[Stream::User as usize])
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
    /// By `Stream`; the cold stream has none until cleaning first copies something.
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
    next_group: u64,
    bytes_since_checkpoint: u64,
}

impl Inflight {
    /// Where a checkpoint taken now must have recovery start in `stream`: its first group
    /// not yet in the map, or else its tail, or `(0, 0)` (all of it) when it has no segment.
    fn scan_start(&self, stream: Stream) -> (u64, u64) {
        let pending = self
            .groups
            .values()
            .filter(|(s, _, _)| *s == stream)
            .map(|&(_, segment, offset)| (segment, offset))
            .min();
        pending.or(self.tails[stream as usize]).unwrap_or((0, 0))
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
    /// The secondary block cache on a memory tier, if the options ask for one.
    tier: Option<TierCache>,
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
    /// The block's header as written, kept for the tier (only when there is one).
    header: Option<[u8; BLOCK_HEADER_BYTES]>,
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
        let tier = options.tier.clone().map(TierCache::open).transpose()?;
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
            next_group: writer.next_group,
            bytes_since_checkpoint: 0,
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
            tier,
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
    /// `apply_group`, saying which path wrote the group, for the tier's `cache_on_write` and
    /// `cache_on_checkpoint`.
    fn apply_from(
        &self,
        changes: &[BlockWrite<'_>],
        source: AdmitSource,
    ) -> Result<GroupId, BlockError> {
        let shared = &*self.shared;
        shared.check_writable()?;
        validate_group(changes)?;
        let mut prepared = Vec::with_capacity(changes.len());
        let mut payload_bytes = 0u64;
        for change in changes {
            prepared.push(match *change {
                BlockWrite::Put(id, bytes) => {
                    payload_bytes += bytes.len() as u64;
                    let (codec, stored) = format::compress(shared.options.codec, bytes);
                    Prepared {
                        id,
                        flags: 0,
                        codec,
                        stored,
                        raw_len: bytes.len() as u32,
                        version: None,
                    }
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
        let (group, placed) = shared.write_group(&prepared, Stream::User)?;
        shared.wait_durable(group)?;
        let replaced = shared.apply(group, &placed);
        if let Some(tier) = &shared.tier {
            // The versions the map no longer holds go; the new ones may come in.
            for key in replaced {
                tier.invalidate(key);
            }
            for (block, written) in placed.iter().zip(&prepared) {
                if let (Some(header), false) = (&block.header, block.tombstone) {
                    tier.admit(
                        tier_key(block.id, &block.location),
                        &[header, &written.stored],
                        source,
                    );
                }
            }
        }
        Counters::add(&shared.counters.groups, 1);
        Counters::add(&shared.counters.blocks, changes.len() as u64);
        Counters::add(&shared.counters.payload_bytes, payload_bytes);
        shared.after_write()?;
        Ok(GroupId(group))
    }

    /// The tier's counters, when the store has one.
    pub fn tier_stats(&self) -> Option<TierStats> {
        self.shared.tier.as_ref().map(TierCache::stats)
    }

    /// The tier, when the store has one.
    pub fn tier(&self) -> Option<&TierCache> {
        self.shared.tier.as_ref()
    }
}

impl BlockStore for LogStore {
    fn apply_group(&self, changes: &[BlockWrite<'_>]) -> Result<GroupId, BlockError> {
        self.apply_from(changes, AdmitSource::Write)
    }

    fn apply_checkpoint_group(&self, changes: &[BlockWrite<'_>]) -> Result<GroupId, BlockError> {
        self.apply_from(changes, AdmitSource::Checkpoint)
    }

    fn tier_stats(&self) -> Option<TierStats> {
        LogStore::tier_stats(self)
    }

    fn read(&self, id: BlockId) -> Result<Option<Vec<u8>>, BlockError> {
        Ok(self.read_versioned(id)?.map(|(raw, _)| raw))
    }

    fn offer_evicted(&self, id: BlockId, version: GroupId, raw: &[u8]) {
        if let Some(tier) = &self.shared.tier {
            self.shared.demote(tier, id, version, raw);
        }
    }

    fn read_versioned(&self, id: BlockId) -> Result<Option<Versioned>, BlockError> {
        let shared = &*self.shared;
        shared.check_not_closed()?;
        let mut found = shared.locate(id)?;
        if let (Some(tier), Some((location, file))) = (&shared.tier, &found) {
            if let Some(raw) = shared.read_from_tier(tier, id, location, file) {
                return Ok(Some((raw, Some(location.version))));
            }
        }
        let (raw, location) = loop {
            let Some((location, file)) = found else {
                return Ok(None);
            };
            match read_located_block(&file, id, &location) {
                Ok((header, block)) => {
                    if let Some(tier) = &shared.tier {
                        tier.admit(tier_key(id, &location), &[&block], AdmitSource::Read);
                    }
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

    fn checkpoint(&self) -> Result<(), BlockError> {
        self.shared.check_writable()?;
        self.shared.write_checkpoint()
    }

    fn shrink_to(&self, file_bytes: u64) -> Result<u64, BlockError> {
        let shared = &*self.shared;
        shared.check_writable()?;
        // A map checkpoint first: space and pointers it puts behind recovery's scan may go.
        shared.write_checkpoint()?;
        // Bounded: each pass deletes a segment, or stops.
        let segments = shared.read_index().segments.len();
        for _ in 0..segments {
            if shared.read_index().file_bytes <= file_bytes {
                break;
            }
            let cleaned = {
                let _cleaning = lock(&shared.cleaning);
                let Some(victim) = shared.pick_victim(true)? else { break };
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
        self.shared.counters.snapshot(index.live_bytes, index.file_bytes)
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
        if let Some(tier) = &self.shared.tier {
            tier.close();
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

/// Reads the block at `location` and returns its decompressed content.
/// The error for a map entry whose segment does not exist.
fn missing_segment(dir: &Path, id: BlockId, location: &Location) -> BlockError {
    BlockError::Corruption {
        file: dir.join(format::segment_file_name(location.segment)),
        offset: location.offset,
        block: Some(id),
        detail: "the map points into a segment that does not exist".into(),
    }
}

fn read_located(
    file: &SegmentFile,
    id: BlockId,
    location: &Location,
) -> Result<Vec<u8>, BlockError> {
    let (header, block) = read_located_block(file, id, location)?;
    read::decode_payload(&header, block, &file.path, location.offset)
}

/// Reads and checks the block at `location`: the whole block (header, then payload) and its
/// header.
fn read_located_block(
    file: &SegmentFile,
    id: BlockId,
    location: &Location,
) -> Result<(BlockHeader, Vec<u8>), BlockError> {
    let (header, block) =
        read::read_block(&file.reader, &file.path, location.offset, id, location.stored_len)?;
    if header.is_tombstone() || header.version != location.version {
        return Err(BlockError::Corruption {
            file: file.path.clone(),
            offset: location.offset,
            block: Some(id),
            detail: format!(
                "found version {} (tombstone: {}) where the map expects version {}",
                header.version,
                header.is_tombstone(),
                location.version
            ),
        });
    }
    Ok((header, block))
}

/// The tier's key for the content at `location`.
fn tier_key(id: BlockId, location: &Location) -> TierKey {
    TierKey { id: id.0, version: location.version.0 }
}

fn validate_group(changes: &[BlockWrite<'_>]) -> Result<(), BlockError> {
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
    /// Where the map has `id` now, with its segment file.
    fn locate(&self, id: BlockId) -> Result<Option<(Location, Arc<SegmentFile>)>, BlockError> {
        let index = self.read_index();
        let Some(location) = index.map.get(&id) else {
            return Ok(None);
        };
        let Some(info) = index.segments.get(&location.segment) else {
            return Err(missing_segment(&self.dir, id, location));
        };
        Ok(Some((*location, Arc::clone(&info.file))))
    }

    /// The block at `location` from the tier, checked as a read from the file is; `None`
    /// when the tier does not hold it. A copy that fails its check is dropped from the tier
    /// and counted (`tier_rejected`): the file has the block.
    fn read_from_tier(
        &self,
        tier: &TierCache,
        id: BlockId,
        location: &Location,
        file: &SegmentFile,
    ) -> Option<Vec<u8>> {
        let key = tier_key(id, location);
        let mut block = Vec::new();
        if !tier.get(key, &mut block) {
            return None;
        }
        let header = read::check_block(&block, id, location.stored_len)
            .ok()
            .filter(|header| header.version == location.version && !header.is_tombstone());
        let raw = header.and_then(|header| {
            read::decode_payload(&header, block, &file.path, location.offset).ok()
        });
        if raw.is_none() {
            tier.invalidate(key);
            Counters::add(&self.counters.tier_rejected, 1);
        }
        raw
    }

    /// Offers the tier block `id`'s content at `version`, `raw` (decompressed), which the
    /// layer above's cache let go of: rebuilt in its stored form (compressed as the store
    /// compresses, under a header of its own) and admitted, if the tier takes it and the map
    /// still holds that version. The bytes are built only once the tier has said it would
    /// take them (Overhead Bypass refuses most offers while it is in force).
    ///
    /// A version's content never changes, so an entry is never stale: if the map moves on
    /// while this runs, the entry is unreachable (reads look up the map's version) and is
    /// invalidated here, as the write that replaced it may have invalidated before it came.
    fn demote(&self, tier: &TierCache, id: BlockId, version: GroupId, raw: &[u8]) {
        let key = TierKey { id: id.0, version: version.0 };
        let current = |location: &Location| location.version == version;
        let Ok(Some((location, _))) = self.locate(id) else { return };
        if !current(&location) || location.raw_len as usize != raw.len() {
            return;
        }
        let len = BLOCK_HEADER_BYTES + location.stored_len as usize;
        if tier.admission(key, len, AdmitSource::Evict).is_some() {
            return;
        }
        let (codec, stored) = format::compress(self.options.codec, raw);
        if stored.len() != location.stored_len as usize {
            // The store compressed it otherwise when it wrote it (another codec then).
            return;
        }
        let header = BlockHeader {
            flags: FLAG_LAST_IN_GROUP,
            codec,
            id,
            group: version,
            version,
            stored_len: location.stored_len,
            raw_len: location.raw_len,
            index: 0,
            count: 1,
            remote: None,
        };
        let mut head = Vec::with_capacity(BLOCK_HEADER_BYTES);
        format::encode_header(&mut head, &header, &stored);
        tier.admit(key, &[&head, &stored], AdmitSource::Evict);
        if !matches!(self.locate(id), Ok(Some((location, _))) if current(&location)) {
            tier.invalidate(key);
        }
    }

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

    /// Encodes and writes a group; returns its id and where each block went. Its blocks go
    /// to the tail of the stream's active segment, except that a user group's larger blocks
    /// go to reused free space while the pool has some, each with a pointer at the tail.
    fn write_group(
        &self,
        blocks: &[Prepared<'_>],
        stream: Stream,
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
            let (location, pointer, header_at) = match remote {
                None => {
                    let part = Part::encode(&mut headers, &header, stored);
                    let header_at = part.header;
                    log_parts.push(part);
                    log_bytes += bytes;
                    if written.is_ok() && log_bytes - log_written >= piece_bytes {
                        let parts = &log_parts[log_parts_written..];
                        let at = start + log_written;
                        written = write_parts(&active.writer, &[], &headers, parts, at, &mut hints);
                        (log_written, log_parts_written) = (log_bytes, log_parts.len());
                    }
                    ((segment, offset), None, header_at)
                }
                Some((file, at)) => {
                    let part = Part::encode(&mut headers, &header, stored);
                    let header_at = part.header;
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
                    ((file.number, *at), Some((segment, offset)), header_at)
                }
            };
            let kept = self.tier.is_some() && stream == Stream::User && !header.is_tombstone();
            let kept_header = kept.then(|| {
                let mut bytes = [0u8; BLOCK_HEADER_BYTES];
                bytes.copy_from_slice(&headers[header_at..header_at + BLOCK_HEADER_BYTES]);
                bytes
            });
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
                header: kept_header,
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

    /// Chooses reused space for a user group's larger puts while the pool has some: for
    /// each block, its segment file and offset there, or `None` for the log.
    fn place_remote(
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
    fn unplace(
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
                Ok(segment) => {
                    Counters::add(&self.counters.device_bytes_written, capacity);
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
    fn wait_durable(&self, group: u64) -> Result<(), BlockError> {
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
    fn apply(&self, group: u64, placed: &[Placed]) -> Vec<TierKey> {
        let mut replaced = Vec::new();
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
            if let (Some(old), Some(_)) = (index.map.get(&block.id), &self.tier) {
                replaced.push(tier_key(block.id, old));
            }
            if block.tombstone {
                index.remove(block.id);
            } else {
                index.set(block.id, block.location);
            }
        }
        lock(&self.inflight).groups.remove(&group);
        replaced
    }

    /// Applies a durable relocation group: each copy replaces the old one only where the map
    /// still points at the old one.
    fn apply_relocation(&self, group: u64, placed: &[Placed], old: &[Location]) {
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

    /// After a write: a checkpoint or cleaning may be due. A writer that finds the files
    /// `HARD_LIMIT_FACTOR` over the target cleans before it returns: writes slow down to
    /// the cleaner's pace instead of outrunning it.
    fn after_write(&self) -> Result<(), BlockError> {
        let due = self.checkpoint_due();
        if self.options.background_cleaning {
            if due || self.over(self.options.space_target) {
                self.wake.notify_all();
            }
            let hard = self.options.space_target * HARD_LIMIT_FACTOR;
            let mut passes = 0;
            while passes < CLEANS_PER_WAKE && self.over(hard) {
                if !self.clean_once()? {
                    break;
                }
                passes += 1;
            }
            return Ok(());
        }
        if due {
            self.write_checkpoint()?;
        }
        Ok(())
    }

    fn over(&self, factor: f64) -> bool {
        let tails = lock(&self.inflight).tails;
        let index = self.read_index();
        self.exceeds(&index, &tails, factor)
    }

    /// True when the bytes written to segments (all of each sealed segment, the used part
    /// of the active ones) exceed `factor` times the live bytes. The active segments' unused
    /// parts are left out: cleaning cannot give them back. Free space that writes will reuse
    /// (the pool, and what the next checkpoint adds to it) is left out too, up to half of
    /// `space_target - 1` times the live bytes: reusing it costs no copies, and the cap keeps
    /// the files within `1.5 * space_target - 0.5` times the live bytes (1.45 at the default
    /// target) before cleaning starts.
    fn exceeds(&self, index: &Index, tails: &[Option<(u64, u64)>], factor: f64) -> bool {
        let unused: u64 = tails
            .iter()
            .flatten()
            .map(|&(segment, tail)| {
                index.segments.get(&segment).map_or(0, |info| info.capacity.saturating_sub(tail))
            })
            .sum();
        let reusable = self.pool_bytes.load(Ordering::Relaxed)
            + index.pending_bytes
            + index.ready_bytes.load(Ordering::Relaxed);
        let allowance = index.live_bytes as f64 * (self.options.space_target - 1.0).max(0.0) / 2.0;
        let used = index.file_bytes.saturating_sub(unused + reusable.min(allowance as u64));
        used as f64 > factor * index.live_bytes as f64
    }

    /// Free bytes left in the cold stream's active segment (a fresh segment's worth when it
    /// has none yet).
    fn cold_free_bytes(&self) -> u64 {
        let writer = lock(&self.writer);
        match &writer.streams[Stream::Cold as usize] {
            Some(s) => s.capacity - s.tail,
            None => self.options.sizing().min_bytes - BLOCKS_START,
        }
    }

    /// Writes a map checkpoint (see the module header).
    fn write_checkpoint(&self) -> Result<(), BlockError> {
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
    fn sync_all_segments(&self) -> Result<(), BlockError> {
        let files: Vec<Arc<SegmentFile>> =
            self.read_index().segments.values().map(|info| Arc::clone(&info.file)).collect();
        for file in files {
            file.writer.sync_data()?;
            Counters::add(&self.counters.syncs, 1);
        }
        Ok(())
    }

    /// At open, after recovery: the free space of the segments that recovery no longer
    /// scans (sealed, before their stream's scan position) goes to the pool: every byte
    /// there that no live block or needed tombstone takes. Only complete groups before the
    /// scan position wrote there, and none of their pointers is read again. For the same
    /// reason, space that any group written so far frees is reusable at once.
    fn rebuild_pool(&self) {
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
    fn promote(&self, writer: &mut Writer, index: &mut Index, epoch: u64, unapplied: u64) {
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

    /// Cleans one segment if the space target asks for it (see the module header).
    fn clean_once(&self) -> Result<bool, BlockError> {
        let _cleaning = lock(&self.cleaning);
        let Some(victim) = self.pick_victim(false)? else {
            return Ok(false);
        };
        let cleaned = self.clean_segment(victim);
        lock(&self.writer).cleaning = None;
        cleaned
    }

    /// The segment to clean next: when over the space target (or `forced`), the sealed
    /// segment with the smallest share of live bytes that is worth cleaning; otherwise one
    /// with nothing live.
    fn pick_victim(&self, forced: bool) -> Result<Option<u64>, BlockError> {
        let (tails, actives): (_, Vec<u64>) = {
            let inflight = lock(&self.inflight);
            (inflight.tails, inflight.actives().collect())
        };
        let index = self.read_index();
        if !forced && !self.exceeds(&index, &tails, self.options.space_target) {
            // Under the target; still drop segments nothing points at.
            let empty = index
                .segments
                .iter()
                .find(|(n, info)| {
                    !actives.contains(n)
                        && info.live_bytes == 0
                        && !index.holds_needed_pointers(**n)
                })
                .map(|(&n, _)| n);
            return Ok(empty);
        }
        // Greedy: the segment with the smallest share of live bytes. (Cost-benefit by age, as
        // in LFS, was tried: on the overwrite test it copied 30% more and ran slower.)
        let share = |info: &SegmentInfo| info.live_bytes as f64 / info.capacity as f64;
        // Worth it only if it frees a good part of the segment after its header: each
        // cleaning must lower the space used, or cleaning could go on forever.
        let best = index
            .segments
            .iter()
            .filter(|(n, info)| {
                let room = info.capacity - BLOCKS_START;
                !actives.contains(n)
                    && !index.holds_needed_pointers(**n)
                    && room - info.live_bytes.min(room)
                        >= (info.capacity as f64 * (1.0 - CLEAN_MAX_LIVE_SHARE)) as u64
            })
            .min_by(|a, b| share(a.1).total_cmp(&share(b.1)))
            .map(|(&n, _)| n);
        Ok(best)
    }

    /// A periodic checkpoint is due once `checkpoint_bytes` were written since the last, or
    /// the space freed since then (reusable only after a checkpoint) reached
    /// `FREED_SHARE_FOR_CHECKPOINT` of the live bytes; and in either case at least
    /// `CHECKPOINT_MIN_BYTES`, and `CHECKPOINT_COST_RATIO` times the map checkpoint's size,
    /// were written.
    fn checkpoint_due(&self) -> bool {
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

    /// Copies the live blocks of `victim`, and the tombstones in it that recovery may still
    /// need, to the tail, and deletes it.
    fn clean_segment(&self, victim: u64) -> Result<bool, BlockError> {
        // No more blocks go to its free space, and those on their way are applied first,
        // so the map below shows every block in it.
        let written = {
            let mut writer = lock(&self.writer);
            // IMPORTANT: `pick_victim` read the active segments before the index, so a
            // segment made active by a rotation in between (in the index, nothing live yet)
            // looks like an empty sealed one. Only the writer lock, held here, knows the
            // streams for sure: an active segment keeps taking groups after it was
            // deleted, and the map would point into a file that is gone.
            if writer.streams.iter().flatten().any(|tail| tail.active.number == victim) {
                return Ok(false);
            }
            writer.cleaning = Some(victim);
            let freed = writer.pool.remove_segment(victim);
            self.pool_bytes.fetch_sub(freed, Ordering::Relaxed);
            writer.next_group - 1
        };
        self.wait_applied(written)?;
        let (file, live, tombstones) = {
            let index = self.read_index();
            let Some(info) = index.segments.get(&victim) else {
                return Ok(false);
            };
            let mut live: Vec<(BlockId, Location)> = index
                .map
                .iter()
                .filter(|(_, location)| location.segment == victim)
                .map(|(&id, &location)| (id, location))
                .collect();
            live.sort_by_key(|(_, location)| location.offset);
            let tombstones: Vec<(BlockId, Location)> = index
                .tombstones
                .range((victim, 0)..(victim + 1, 0))
                .map(|(&(segment, offset), &(id, version))| {
                    (id, Location { segment, offset, version, stored_len: 0, raw_len: 0 })
                })
                .collect();
            (Arc::clone(&info.file), live, tombstones)
        };
        let mut batch: Vec<Prepared<'static>> = Vec::new();
        let mut olds: Vec<Location> = Vec::new();
        let mut batch_bytes = 0u64;
        for (id, location) in tombstones {
            batch_bytes += location.footprint();
            batch.push(Prepared {
                id,
                flags: FLAG_TOMBSTONE | FLAG_RELOCATED,
                codec: Codec::None,
                stored: Cow::Borrowed(&[]),
                raw_len: 0,
                version: Some(location.version),
            });
            olds.push(location);
        }
        for (id, location) in live {
            let (header, stored) = read::read_block(
                &file.reader,
                &file.path,
                location.offset,
                id,
                location.stored_len,
            )?;
            if header.version != location.version {
                return Err(BlockError::Corruption {
                    file: file.path.clone(),
                    offset: location.offset,
                    block: Some(id),
                    detail: format!(
                        "found version {} where the map expects {}",
                        header.version, location.version
                    ),
                });
            }
            // Relocation groups fill the active segment before it rotates, so cleaning
            // wastes no tail space (each block is its own unit; nothing groups them).
            let free = self.cold_free_bytes();
            if !batch.is_empty() && batch_bytes + location.footprint() > free {
                self.relocate(&batch, &olds, batch_bytes)?;
                batch.clear();
                olds.clear();
                batch_bytes = 0;
            }
            batch_bytes += location.footprint();
            batch.push(Prepared {
                id,
                flags: FLAG_RELOCATED,
                codec: header.codec,
                stored: Cow::Owned(stored[BLOCK_HEADER_BYTES..].to_vec()),
                raw_len: header.raw_len,
                version: Some(header.version),
            });
            olds.push(location);
            if batch_bytes >= RELOCATION_GROUP_BYTES {
                self.relocate(&batch, &olds, batch_bytes)?;
                batch.clear();
                olds.clear();
                batch_bytes = 0;
            }
        }
        if !batch.is_empty() {
            self.relocate(&batch, &olds, batch_bytes)?;
        }
        {
            let mut index = self.write_index();
            let Some(info) = index.segments.get(&victim) else {
                return Ok(false);
            };
            let tombstones_left = index.tombstones.range((victim, 0)..(victim + 1, 0)).count();
            if info.live_bytes != 0 || tombstones_left != 0 {
                // Cannot happen: nothing writes to a sealed segment. Leave it for verify.
                debug_assert!(false, "segment {victim} still needed after cleaning");
                return Ok(false);
            }
            let capacity = info.capacity;
            index.segments.remove(&victim);
            index.file_bytes -= capacity;
        }
        // CRASH: the relocation groups are durable and lie after every scan position, so
        // recovery finds every live block, and every tombstone it needs, without this
        // segment; the checkpoint's entries that pointed into it are replaced in the replay.
        self.storage.remove_file(&file.path)?;
        self.storage.sync_dir(&self.dir)?;
        Counters::add(&self.counters.segments_cleaned, 1);
        Ok(true)
    }

    /// Returns once every group up to `group` is applied to the map (or was not written).
    fn wait_applied(&self, group: u64) -> Result<(), BlockError> {
        // Bounded: each such group's writer applies it once its round ends, or fails and
        // poisons the store.
        loop {
            if lock(&self.inflight).groups.range(..=group).next().is_none() {
                return Ok(());
            }
            self.check_open()?;
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    fn relocate(
        &self,
        batch: &[Prepared<'_>],
        olds: &[Location],
        bytes: u64,
    ) -> Result<(), BlockError> {
        let (group, placed) = self.write_group(batch, Stream::Cold)?;
        self.wait_durable(group)?;
        self.apply_relocation(group, &placed, olds);
        Counters::add(&self.counters.blocks_relocated, batch.len() as u64);
        Counters::add(&self.counters.relocated_bytes, bytes);
        Ok(())
    }

    /// The background thread: checkpoints when due, cleans while over the space target.
    fn maintenance_loop(&self) {
        let mut stop = lock(&self.wake_lock);
        // Bounded by the close flag, which `close` sets before joining.
        while !*stop {
            let (guard, _) = self
                .wake
                .wait_timeout(stop, MAINTENANCE_INTERVAL)
                .unwrap_or_else(PoisonError::into_inner);
            stop = guard;
            if *stop {
                break;
            }
            drop(stop);
            if let Err(error) = self.maintain() {
                *lock(&self.background_error) = Some(error.to_string());
            }
            stop = lock(&self.wake_lock);
        }
    }

    fn maintain(&self) -> Result<(), BlockError> {
        if self.poisoned.load(Ordering::Acquire) || self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        if self.checkpoint_due() {
            self.write_checkpoint()?;
        }
        for _ in 0..CLEANS_PER_WAKE {
            if self.closed.load(Ordering::Acquire) || !self.clean_once()? {
                break;
            }
        }
        Ok(())
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

/// Creates `dir` and makes its entry durable in its parent.
fn create_dir_durably(storage: &Storage, dir: &Path) -> Result<(), BlockError> {
    if storage.exists(dir)? {
        return Ok(());
    }
    storage.create_dir_all(dir)?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        storage.sync_dir(parent)?;
    }
    Ok(())
}

fn segment_open_options(method: AccessMethod, options: &StoreOptions) -> OpenOptions {
    OpenOptions::new(method).mode(options.file_mode).chunk_bytes(1).read_only(options.read_only)
}

/// Opens both handles of an existing segment.
fn open_segment(
    storage: &Storage,
    dir: &Path,
    options: &StoreOptions,
    number: u64,
) -> Result<SegmentFile, BlockError> {
    let path = dir.join(format::segment_file_name(number));
    let writer =
        Arc::new(storage.open(&path, &segment_open_options(AccessMethod::Syscall, options))?);
    let reader = storage.open(&path, &segment_open_options(options.read_method, options))?;
    Ok(SegmentFile { number, path, writer, reader })
}

/// Creates a segment: a temp file with its header, allocated to `capacity`, zero-filled and
/// synced, then renamed into place and the directory synced. Zero-filling costs one write
/// of the segment, but then no block write changes the file's extent map (a write into
/// preallocated, never written space does, and each fdatasync after it writes that
/// metadata too).
fn create_segment(
    storage: &Storage,
    dir: &Path,
    options: &StoreOptions,
    number: u64,
    capacity: u64,
    stream: Stream,
) -> Result<SegmentFile, BlockError> {
    let name = format::segment_file_name(number);
    let temp = dir.join(format!("{name}.tmp"));
    let file = storage.open(
        &temp,
        &OpenOptions::new(AccessMethod::Syscall)
            .create(true)
            .mode(options.file_mode)
            .chunk_bytes(capacity),
    )?;
    file.set_len(0)?;
    file.reserve(capacity)?;
    if file.len() != capacity {
        file.set_len(capacity)?;
    }
    let header = SegmentHeader { number, capacity, stream: stream as u8 };
    file.write_at(&format::encode_segment_header(&header), 0)?;
    write_zeros(&file, BLOCKS_START, capacity)?;
    file.sync_all()?;
    drop(file);
    storage.rename(&temp, dir.join(&name))?;
    // CRASH: before this returns the segment may vanish; it holds nothing yet.
    storage.sync_dir(dir)?;
    open_segment(storage, dir, options, number)
}

struct Recovered {
    index: Index,
    writer: Writer,
    checkpoint: CheckpointState,
    report: RecoveryReport,
}

/// The scan's view of one group being assembled.
struct PendingGroup {
    start: u64,
    blocks: Vec<(BlockHeader, u64)>,
}

/// Loads the newest map checkpoint and replays the log after it (see the module header).
fn recover(storage: &Storage, dir: &Path, options: &StoreOptions) -> Result<Recovered, BlockError> {
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
            },
        );
    }
    let scan = scan_from.unwrap_or([(0, 0); STREAMS]);
    // The scan's first segment may have been cleaned away since the checkpoint: what it
    // held that recovery needs was copied to later segments first.

    // Replay.
    let mut deleted: HashMap<BlockId, GroupId> = HashMap::new();
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
        let outcome =
            scan_segment_file(&file, start, &mut last_group, &resolve, |header, at, offset| {
                if header.is_tombstone() {
                    index.tombstones.insert((at, offset), (header.id, header.version));
                }
                apply_recovered(&mut index.map, &mut deleted, at, offset, header);
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
            Arc::new(create_segment(storage, dir, options, number, capacity, Stream::User)?);
        index.segments.insert(
            number,
            SegmentInfo {
                file: Arc::clone(&segment),
                stream: Stream::User,
                capacity,
                live_bytes: 0,
                last_pointer: None,
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

/// Cuts a segment at `cut` and makes it `capacity` bytes again, zero after the cut, durably.
fn cut_and_refill(file: &SegmentFile, cut: u64, capacity: u64) -> Result<(), BlockError> {
    if file.writer.len() != capacity {
        file.writer.set_len(capacity)?;
    }
    write_zeros(&file.writer, cut, capacity)?;
    file.writer.sync_all()?;
    Ok(())
}

/// Bytes per write of `write_zeros`: one page. Written a page at a time, the file sits in
/// the page cache in small folios, so a later block write dirties only its own pages, and
/// `/proc/self/io` charges only those (large folios are charged whole).
const ZERO_WRITE_BYTES: u64 = 4096;

/// Writes zeros over `from..to`.
fn write_zeros(file: &File, from: u64, to: u64) -> Result<(), BlockError> {
    let zeros = vec![0u8; (to.saturating_sub(from)).min(ZERO_WRITE_BYTES) as usize];
    let mut at = from;
    // Bounded: each pass advances `at` by at least one byte until it reaches `to`.
    while at < to {
        let len = (to - at).min(zeros.len() as u64) as usize;
        file.write_at(&zeros[..len], at)?;
        at += len as u64;
    }
    Ok(())
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

/// Scans one segment from `start`, calling `apply` for each block of each complete group.
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
    mut apply: impl FnMut(&BlockHeader, u64, u64),
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
        for ((block, _), at) in group.blocks.iter().zip(located) {
            if let Some((segment, at)) = at {
                apply(&block.pointee(), segment, at);
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_merges_neighbours_and_fills_the_emptiest_segment_in_order() {
        let mut pool = Pool::default();
        // Segment 1: two separate 4 KiB holes. Segment 2: three adjacent ones, inserted out
        // of order, which merge into one 12 KiB extent.
        pool.insert(1, 4096, 4096);
        pool.insert(1, 16384, 4096);
        pool.insert(2, 12288, 4096);
        pool.insert(2, 4096, 4096);
        pool.insert(2, 8192, 4096);
        assert_eq!(pool.extents.get(&(2, 4096)), Some(&12288));
        assert_eq!(pool.extents.len(), 3);
        assert_eq!(pool.free.get(&2), Some(&12288));
        // The first takes go to segment 2 (the most free bytes), in offset order.
        assert_eq!(pool.take(4096), Some((2, 4096)));
        assert_eq!(pool.take(4096), Some((2, 8192)));
        assert_eq!(pool.take(4096), Some((2, 12288)));
        assert_eq!(pool.free.get(&2), None);
        // Then segment 1; a block larger than any extent gets none.
        assert_eq!(pool.take(8192), None);
        assert_eq!(pool.take(4096), Some((1, 4096)));
        assert_eq!(pool.remove_segment(1), 4096);
        assert_eq!(pool.take(64), None);
        assert!(pool.extents.is_empty() && pool.free.is_empty());
    }

    #[test]
    fn a_take_splits_an_extent_and_leaves_the_rest() {
        let mut pool = Pool::default();
        pool.insert(5, 4096, 10_000 / 64 * 64);
        let total = 10_000 / 64 * 64;
        assert_eq!(pool.take(640), Some((5, 4096)));
        assert_eq!(pool.extents.get(&(5, 4096 + 640)), Some(&(total - 640)));
        assert_eq!(pool.free.get(&5), Some(&(total - 640)));
    }
}
